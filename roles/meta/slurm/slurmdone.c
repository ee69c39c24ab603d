/*
 * slurmdone.c - the Slurm adapter's steps: what each request does with its command's
 * output (the site-interface reply, docs/wire.md 6.12, or the next command of a request
 * made of two: SITE_INFO's squeue after sinfo, SUBMIT's sbatch after the squeue -n KEY
 * lookup, RESV_LIST's squeue, JOB_GET's sacct for the jobs squeue has forgotten), and
 * the sbatch arguments every job request shares.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "lib/text.h"
#include "daemon/loop.h"
#include "roles/meta/slurm/slurm_int.h"
#include "wire/wire.h"

static void send_wb(struct slurm_site *S, const struct wire_buf *wb)
{
    S->fn(S->arg, wb->sb.data, wb->sb.size);
}

/* An sbatch refusal (docs/wire.md ERROR `field`): about the spool's reservation (gone
 * after a restart, not usable yet), which a new placement mends, or about the request
 * itself (partition, limits, constraints), final at this site (issue 27). */
static void reply_sbatch_refused(struct slurm_site *S, struct sreq *r, const char *msg)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    bool resv = strcasestr(msg, "reservation") != NULL;
    wire_begin(&wb, WT_ERROR, r->rid, 2 + resv);
    wire_put_u64(&wb, "code", WE_INVALID);
    wire_put_str(&wb, "msg", msg);
    if (resv)
        wire_put_str(&wb, "field", "resv");
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

void slurm_job_args(struct slurm_site *S, struct sreq *r)
{
    if (S->c.partition[0])
        slurm_arg(r, "--partition=%s", S->c.partition);
    if (S->c.account[0])
        slurm_arg(r, "--account=%s", S->c.account);
    if (S->c.qos[0])
        slurm_arg(r, "--qos=%s", S->c.qos);
    slurm_arg(r, "--ntasks=%" PRIu64, r->procs ? r->procs : 1);
    /* Slurm's limits are whole minutes: a job's walltime rounds up */
    uint64_t min = (r->walltime_s + 59) / 60;
    slurm_arg(r, "--time=%" PRIu64, min ? min : 1);
    if (r->mem_mb)
        slurm_arg(r, r->parallel ? "--mem=%" PRIu64 : "--mem-per-cpu=%" PRIu64, r->mem_mb);
    slurm_arg(r, "--chdir=%s", r->chdir[0] ? r->chdir : S->c.dir); /* issue 26: its own */
    if (r->con) /* issue 27: Slurm's syntax, passed as it is (counts included) */
        slurm_arg(r, "--constraint=%s", r->con);
}

/* Splits s at sep in place: up to n fields, returns how many. */
static int split(char *s, char sep, char **f, int n)
{
    int k = 0;
    while (k < n) {
        f[k++] = s;
        char *p = strchr(s, sep);
        if (!p)
            break;
        *p = '\0';
        s = p + 1;
    }
    return k;
}

/* Adds the feature list f ("(null)" or "": none) of nn nodes to the lists kept in
 * r->wrap, one "N|canonical list" line per distinct list (issue 27); a list with a name
 * the parser refuses is left out (logged). */
static void sinfo_features(struct slurm_site *S, struct sreq *r, const char *f, long nn)
{
    char canon[FEATURES_LEN_MAX + 1], why[160];
    if (!strcmp(f, "(null)") || !*f || nn <= 0)
        return;
    if (features_norm(f, strlen(f), canon, sizeof canon, why, sizeof why) < 0) {
        log_debug("slurm site %s: node features '%.100s' left out: %s", S->site, f, why);
        return;
    }
    size_t have = r->wrap ? strlen(r->wrap) : 0, add = strlen(canon) + 24;
    char *w = realloc(r->wrap, have + add);
    if (!w)
        return;
    r->wrap = w;
    snprintf(w + have, add, "%ld|%s\n", nn, canon);
}

/*
 * sinfo --format=%P|%a|%C|%F|%f rows (partition, default marked *; up/down; CPUs and
 * nodes allocated/idle/other/total; the nodes' available features): sinfo gives one row
 * per distinct feature list of a partition, so the partition's counts are their sums.
 * Fills r->i1..i4 (cores, cores free, nodes, nodes up), r->s1 (the partition) and the
 * feature lists; false when the partition has no row.
 */
static bool sinfo_rows(struct slurm_site *S, struct sreq *r)
{
    bool found = false;
    char *save = NULL;
    r->i1 = r->i2 = r->i3 = r->i4 = 0;
    for (char *ln = strtok_r(r->out.p ? r->out.p : (char *)"", "\n", &save); ln;
         ln = strtok_r(NULL, "\n", &save)) {
        char *f[5] = {0};
        if (split(ln, '|', f, 5) < 4)
            continue;
        size_t pl = strlen(f[0]);
        bool dflt = pl && f[0][pl - 1] == '*';
        if (dflt)
            f[0][pl - 1] = '\0';
        if (S->c.partition[0] ? strcmp(f[0], S->c.partition) : !dflt)
            continue;
        if (found && strcmp(f[0], r->s1))
            continue; /* two default partitions: the first */
        long a = 0, i = 0, o = 0, t = 0, na = 0, ni = 0, no = 0, nt = 0;
        sscanf(f[2], "%ld/%ld/%ld/%ld", &a, &i, &o, &t);
        sscanf(f[3], "%ld/%ld/%ld/%ld", &na, &ni, &no, &nt);
        bool up = !strcmp(f[1], "up");
        r->i1 += t;
        r->i2 += up ? i : 0;
        r->i3 += nt;
        r->i4 += up ? na + ni : 0;
        snprintf(r->s1, sizeof r->s1, "%s", f[0]);
        if (f[4])
            sinfo_features(S, r, f[4], nt);
        found = true;
    }
    return found;
}

/* SITE "features" and "feature_hosts" (issue 27): the lists kept by sinfo_features,
 * at most 64. */
static void put_features(struct wire_buf *wb, const char *lines)
{
    uint32_t n = 0;
    for (const char *p = lines ? lines : ""; *p && n < 64; p = strchr(p, '\n') + 1)
        n++;
    for (int pass = 0; pass < 2; pass++) {
        wire_put_key(wb, pass ? "feature_hosts" : "features");
        wire_pack_array(wb, n);
        const char *p = lines ? lines : "";
        for (uint32_t k = 0; k < n; k++, p = strchr(p, '\n') + 1) {
            const char *bar = strchr(p, '|');
            if (pass)
                wire_pack_u64(wb, strtoull(p, NULL, 10));
            else
                wire_pack_strn(wb, bar + 1, (size_t)(strchr(bar, '\n') - bar - 1));
        }
    }
}

static void done_site_info(struct slurm_site *S, struct sreq *r)
{
    if (!slurm_cmd_ok(r)) {
        char b[512];
        slurm_why(S, r, b, sizeof b);
        log_debug("%s", b); /* unanswered: the spool marks the site down */
        slurm_req_free(S, r);
        return;
    }
    if (r->step == 0) {
        if (!sinfo_rows(S, r)) {
            log_warnx("slurm site %s: partition %s not found by sinfo", S->site,
                      S->c.partition[0] ? S->c.partition : "(default)");
            slurm_reply_err(S, r->rid, true, WE_INVALID, "slurm site %s: no partition %s", S->site,
                            S->c.partition[0] ? S->c.partition : "(default)");
            slurm_req_free(S, r);
            return;
        }
        r->step = 1;
        slurm_cmd(S, r, C_SQUEUE, false);
        slurm_arg(r, "--noheader");
        slurm_arg(r, "--partition=%s", r->s1);
        slurm_arg(r, "--states=PD,R,CG,S");
        slurm_arg(r, "--format=%%t");
        return;
    }
    uint64_t pend = 0, run = 0;
    for (const char *p = slurm_otext(&r->out); *p;) {
        if (!strncmp(p, "PD", 2))
            pend++;
        else if (*p != '\n')
            run++;
        p = strchr(p, '\n');
        p = p ? p + 1 : "";
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SITE, r->rid, 1);
    wire_put_key(&wb, "site");
    wire_pack_map(&wb, 16);
    wire_put_u64(&wb, "clusters", 1);
    wire_put_u64(&wb, "hosts", (uint64_t)r->i3);
    wire_put_u64(&wb, "hosts_up", (uint64_t)r->i4);
    wire_put_u64(&wb, "cores", (uint64_t)r->i1);
    wire_put_u64(&wb, "cores_up", (uint64_t)(r->i4 ? r->i1 : 0));
    wire_put_u64(&wb, "cores_free", (uint64_t)r->i2);
    /* a job may span the partition's nodes; a partition down now may come back, so its
     * size stays (jobs are not refused at the spool for a Slurm outage) */
    wire_put_u64(&wb, "largest_procs", (uint64_t)r->i1);
    wire_put_u64(&wb, "queued", pend);
    wire_put_u64(&wb, "running", run);
    wire_put_u64(&wb, "reservations", 0);
    wire_put_u64(&wb, "cycles", 0);
    wire_put_i64(&wb, "now", wall_now_ms());
    wire_put_str(&wb, "kind", "slurm");
    wire_put_str(&wb, "partition", r->s1);
    put_features(&wb, r->wrap);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    slurm_req_free(S, r);
}

static void done_estimate(struct slurm_site *S, struct sreq *r)
{
    char b[600];
    int64_t e = -1;
    if (r->reaped && !r->timed_out) {
        e = slurm_test_only_start(slurm_otext(&r->err));
        if (e < 0)
            e = slurm_test_only_start(slurm_otext(&r->out));
    }
    if (e < 0 && (!slurm_cmd_ok(r) || slurm_unreachable(r))) {
        slurm_why(S, r, b, sizeof b);
        slurm_reply_err(S, r->rid, true, WE_REFUSED, "%s", b);
        slurm_req_free(S, r);
        return;
    }
    int64_t now = wall_now_ms();
    if (e >= 0 && e < now)
        e = now;
    b[0] = '\0';
    if (e < 0)
        snprintf(b, sizeof b, "Slurm gave no start for this request");
    else if (e > now + S->bf_window_min * 60000)
        snprintf(b, sizeof b,
                 "beyond Slurm's backfill window (%ld min): a lower bound, held once reserved",
                 S->bf_window_min);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_STARTS, r->rid, 4);
    wire_put_i64(&wb, "earliest", e);
    wire_put_key(&wb, "starts");
    if (e >= 0) {
        wire_pack_array(&wb, 1);
        wire_pack_map(&wb, 2);
        wire_put_i64(&wb, "from", e);
        wire_put_i64(&wb, "to", -1);
    } else {
        wire_pack_array(&wb, 0);
    }
    wire_put_i64(&wb, "now", now);
    wire_put_str(&wb, "reason", b);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    slurm_req_free(S, r);
}

static void done_reserve(struct slurm_site *S, struct sreq *r)
{
    if (!slurm_cmd_ok(r)) {
        char b[600];
        slurm_why(S, r, b, sizeof b);
        slurm_reply_err(S, r->rid, true, WE_REFUSED, "%s", b);
        slurm_req_free(S, r);
        return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESV, r->rid, 1);
    wire_put_key(&wb, "resv");
    wire_pack_map(&wb, 9);
    wire_put_str(&wb, "name", r->name);
    wire_put_str(&wb, "owner", S->owner);
    wire_put_i64(&wb, "start", r->i1);
    wire_put_i64(&wb, "end", r->i2);
    wire_put_u64(&wb, "tasks", 1);
    wire_put_u64(&wb, "procs", r->procs);
    wire_put_u64(&wb, "job", 0);
    wire_put_bool(&wb, "site", true);
    wire_put_bool(&wb, "active", true);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    slurm_req_free(S, r);
}

void slurm_submit_cmd(struct slurm_site *S, struct sreq *r)
{
    r->step = 1;
    if (r->files && slurm_files_stage(S, r) < 0) {
        slurm_req_free(S, r); /* its error reply is ready (slurm_ready) */
        return;
    }
    slurm_cmd(S, r, C_SBATCH, false);
    slurm_arg(r, "--parsable");
    slurm_job_args(S, r);
    slurm_arg(r, "--job-name=%s", r->jname);
    slurm_arg(r, "--comment=gridnode meta%s%s%s%s", r->user[0] ? " user " : "", r->user,
              r->name[0] ? " name " : "", r->name);
    if (r->resv[0])
        slurm_arg(r, "--reservation=%s", r->resv);
    if (r->hold)
        slurm_arg(r, "--hold");
    if (r->ckpt) /* issue 26: a requeued job (same directory) finds what it saved */
        slurm_arg(r, "--export=ALL,GRIDNODE_CHECKPOINT_DIR=%s/.gridnode-checkpoint", r->chdir);
    slurm_arg(r, "--output=%s/slurm-%%j.out", S->c.dir);
    slurm_arg(r, "--error=%s/slurm-%%j.err", S->c.dir);
    slurm_arg(r, "--wrap=%s", r->wrap);
}

static void submitted(struct slurm_site *S, struct sreq *r, uint64_t job, const char *state,
                      bool repeat)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SUBMITTED, r->rid, repeat ? 4 : 3);
    wire_put_u64(&wb, "job", job);
    wire_put_str(&wb, "state", state);
    wire_put_str(&wb, "cluster", "");
    if (repeat)
        wire_put_bool(&wb, "repeat", true);
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

static void done_submit(struct slurm_site *S, struct sreq *r)
{
    char b[600];
    if (!slurm_cmd_ok(r)) {
        slurm_why(S, r, b, sizeof b);
        if (slurm_unreachable(r) && r->key[0]) {
            /* sbatch may have made the job before it was killed or lost its answer: no
             * reply, so the spool sends the submission again with the same key once the
             * site answers (and this lookup finds the job) instead of placing it twice */
            log_warnx("%s (no answer: the spool resends with key %s)", b, r->key);
        } else if (slurm_unreachable(r)) {
            slurm_reply_err(S, r->rid, true, WE_REFUSED, "%s",
                            b); /* Slurm not answering: not the job's fault */
        } else {
            text_fix(b);
            reply_sbatch_refused(S, r, b);
        }
        slurm_req_free(S, r);
        return;
    }
    if (r->step == 0) { /* squeue -n KEY: the job made by an earlier copy of this request */
        char *ln = r->out.p;
        uint64_t job = ln ? strtoull(ln, NULL, 10) : 0;
        if (job) {
            char *f[2];
            char *nl = strchr(ln, '\n');
            if (nl)
                *nl = '\0';
            int k = split(ln, '|', f, 2);
            log_info("slurm site %s: %s is job %" PRIu64 " already", S->site, r->jname, job);
            if (r->files && S->c.workdir[0]) { /* its outputs noted again (kill -9) */
                slurm_files_dir(S, r);
                slurm_files_submitted(S, r, job);
            }
            submitted(S, r, job, k > 1 ? slurm_state_word(f[1]) : "queued", true);
            slurm_req_free(S, r);
            return;
        }
        slurm_submit_cmd(S, r);
        return;
    }
    uint64_t job = strtoull(slurm_otext(&r->out), NULL, 10);
    if (!job) {
        slurm_reply_err(S, r->rid, true, WE_INVALID,
                        "slurm site %s: sbatch printed no job id: %.200s", S->site,
                        slurm_otext(&r->out));
        slurm_req_free(S, r);
        return;
    }
    slurm_files_submitted(S, r, job);
    submitted(S, r, job, "queued", false);
    slurm_req_free(S, r);
}

static void done_simple(struct slurm_site *S, struct sreq *r)
{
    if (slurm_cmd_ok(r)) {
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_OK, r->rid, 0);
        send_wb(S, &wb);
        wire_buf_free(&wb);
    } else {
        char b[600];
        slurm_why(S, r, b, sizeof b);
        const char *e = slurm_otext(&r->err);
        /* scontrol delete of a reservation Slurm dropped by itself (PURGE_COMP once its
         * job completed) says "Requested reservation is invalid": gone, so the spool's
         * release order is settled rather than retried for ever */
        int code = strstr(e, "Invalid job id") || strstr(e, "Invalid reservation") ||
                           strstr(e, "Requested reservation is invalid")
                       ? WE_NOT_FOUND
                   : strstr(e, "in use") || strstr(e, "already completing") ? WE_STATE
                                                                            : WE_REFUSED;
        slurm_reply_err(S, r->rid, true, code, "%s", b);
    }
    slurm_req_free(S, r);
}

/* CANCEL `unstarted` (the spool withdrawing its copy): scancel --state=PENDING (which
 * slurmctld applies only to a pending job), then squeue for what the job is now: only
 * CANCELLED is OK; anything else, a job squeue no longer lists included, is STATE (the
 * conservative answer: the spool keeps the copy and does not move it). */
static void done_withdraw(struct slurm_site *S, struct sreq *r)
{
    if (r->step == 2) {
        if (!slurm_cmd_ok(r)) {
            done_simple(S, r);
            return;
        }
        r->step = 3;
        slurm_cmd(S, r, C_SQUEUE, false);
        slurm_arg(r, "--noheader");
        slurm_arg(r, "--states=all");
        slurm_arg(r, "--jobs=%" PRIu64, r->job);
        slurm_arg(r, "--format=%%T");
        return;
    }
    char st[64] = "";
    if (slurm_cmd_ok(r))
        sscanf(slurm_otext(&r->out), "%63s", st);
    if (!strcmp(st, "CANCELLED")) {
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_OK, r->rid, 0);
        send_wb(S, &wb);
        wire_buf_free(&wb);
    } else {
        slurm_reply_err(S, r->rid, true, WE_STATE,
                        "slurm site %s: job %" PRIu64 " is %s: it stays there", S->site, r->job,
                        st[0] ? st : "not listed by squeue any more");
    }
    slurm_req_free(S, r);
}

static void done_resv_list(struct slurm_site *S, struct sreq *r)
{
    if (!slurm_cmd_ok(r)) {
        char b[600];
        slurm_why(S, r, b, sizeof b);
        slurm_reply_err(S, r->rid, true, WE_REFUSED, "%s", b);
        slurm_req_free(S, r);
        return;
    }
    if (r->step == 0) {
        free(r->wrap);
        r->wrap = strdup(slurm_otext(&r->out));
        r->step = 1;
        slurm_cmd(S, r, C_SQUEUE, true);
        slurm_arg(r, "--noheader");
        slurm_arg(r, "--states=PD,R,CG,CF,S");
        slurm_arg(r, "--Format=JobID:|,Reservation:|");
        return;
    }
    char *lines[4096];
    int n = 0;
    char *save = NULL;
    for (char *ln = strtok_r(r->wrap ? r->wrap : (char *)"", "\n", &save); ln && n < 4096;
         ln = strtok_r(NULL, "\n", &save)) {
        char nm[64];
        if (slurm_field(ln, "ReservationName", nm, sizeof nm) &&
            (!r->name[0] || !strcmp(nm, r->name)))
            lines[n++] = ln;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESVS, r->rid, 2);
    wire_put_i64(&wb, "now", wall_now_ms());
    wire_put_key(&wb, "resvs");
    wire_pack_array(&wb, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        char nm[64], v[64];
        slurm_field(lines[i], "ReservationName", nm, sizeof nm);
        /* the job bound to it: squeue rows JOBID|RESV| */
        uint64_t job = 0;
        size_t nl = strlen(nm);
        for (const char *p = slurm_otext(&r->out); *p && !job;) {
            const char *bar = strchr(p, '|'), *eol = strchr(p, '\n');
            if (!eol)
                eol = p + strlen(p);
            if (bar && bar < eol && (size_t)(eol - bar - 1) >= nl && !strncmp(bar + 1, nm, nl) &&
                (bar[1 + nl] == '|' || bar + 1 + nl == eol))
                job = strtoull(p, NULL, 10);
            p = *eol ? eol + 1 : eol;
        }
        bool ours = slurm_meta_resv_name(nm);
        wire_pack_map(&wb, 9);
        wire_put_str(&wb, "name", nm);
        wire_put_str(&wb, "owner", ours ? S->owner : "");
        slurm_field(lines[i], "StartTime", v, sizeof v);
        wire_put_i64(&wb, "start", slurm_time_ms(v));
        slurm_field(lines[i], "EndTime", v, sizeof v);
        wire_put_i64(&wb, "end", slurm_time_ms(v));
        slurm_field(lines[i], "CoreCnt", v, sizeof v);
        wire_put_u64(&wb, "procs", strtoull(v, NULL, 10));
        wire_put_u64(&wb, "job", job);
        wire_put_bool(&wb, "site", ours);
        slurm_field(lines[i], "State", v, sizeof v);
        wire_put_bool(&wb, "active", !strcmp(v, "ACTIVE"));
        wire_put_str(&wb, "hosts", "");
    }
    send_wb(S, &wb);
    wire_buf_free(&wb);
    slurm_req_free(S, r);
}

/*
 * Up to SLURM_OUT_MAX bytes of file dir/slurm-JOB.EXT (what sbatch --output/--error
 * wrote, slurm_submit_cmd) as "key": bin and "trunc": bool into wb; with none (not
 * written yet, unreadable) nothing. The number of fields written. The file is read
 * here, in the spool's loop: it is the job's own, in the site's dir (local or a shared
 * file system), and bounded.
 */
#define SLURM_OUT_MAX (1u << 20)
static uint32_t put_file(struct wire_buf *wb, const char *dir, uint64_t job, const char *ext,
                         const char *key, const char *trunc)
{
    char path[SLURM_STR + 64];
    snprintf(path, sizeof path, "%s/slurm-%" PRIu64 ".%s", dir, job, ext);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    size_t want = st.st_size > SLURM_OUT_MAX ? SLURM_OUT_MAX : (size_t)st.st_size, got = 0;
    char *b = malloc(want + 1);
    while (b && got < want) {
        ssize_t n = read(fd, b + got, want - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!b)
        return 0;
    wire_put_bin(wb, key, b, got);
    wire_put_bool(wb, trunc, (uint64_t)st.st_size > got);
    free(b);
    return 2;
}

/* JOB_GET `output` (issue 27): the job's ranks, one (the batch script's: Slurm writes
 * every task's output into the job's one file), with stdout and stderr when written. */
static void put_ranks(struct slurm_site *S, struct wire_buf *wb, uint64_t job, const char *host)
{
    struct wire_buf f;
    wire_buf_init(&f);
    uint32_t n = put_file(&f, S->c.dir, job, "out", "stdout", "out_trunc");
    n += put_file(&f, S->c.dir, job, "err", "stderr", "err_trunc");
    wire_put_key(wb, "ranks");
    wire_pack_array(wb, 1);
    wire_pack_map(wb, 2 + n);
    wire_put_u64(wb, "rank", 0);
    wire_put_str(wb, "host", host);
    msgpack_sbuffer_write(&wb->sb, f.sb.data, f.sb.size);
    wire_buf_free(&f);
}

static void job_reply(struct slurm_site *S, uint64_t rid, uint64_t job, char **f, int nf, bool out)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB, rid, 1);
    wire_put_key(&wb, "job");
    wire_pack_map(&wb, 10 + out);
    wire_put_u64(&wb, "job", job);
    wire_put_str(&wb, "kind", "parallel");
    if (nf >= 7) {
        const char *st = slurm_state_word(f[1]);
        bool pending = !strcmp(st, "queued");
        int64_t s = slurm_time_ms(f[2]), e = slurm_time_ms(f[3]);
        int raw = atoi(f[4]);
        int ex = WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : WEXITSTATUS(raw);
        bool ended = strcmp(st, "queued") && strcmp(st, "running");
        if (ended && slurm_files_ended(S, job, st, ex) < 0) {
            /* issue 26: its outputs are being hashed; it ends once they are listed */
            st = "running";
            ended = false;
            f[5] = "listing its outputs at the site";
        }
        wire_put_str(&wb, "state", st);
        wire_put_i64(&wb, "started", pending ? 0 : (s > 0 ? s : 0));
        wire_put_i64(&wb, "finished", ended && e > 0 ? e : 0);
        wire_put_i64(&wb, "exit", ended ? ex : 0);
        wire_put_i64(&wb, "estimate", pending && s > 0 ? s : 0);
        wire_put_str(&wb, "reason", strcmp(f[5], "None") ? f[5] : "");
        wire_put_str(&wb, "hosts", strcmp(f[6], "(null)") ? f[6] : "");
        wire_put_str(&wb, "slurm_state", f[1]);
        if (out)
            put_ranks(S, &wb, job, strcmp(f[6], "(null)") ? f[6] : "");
    } else {
        /* Slurm forgot it (MinJobAge passed, or its state was lost) and the adapter has no
         * accounting to ask: reported failed rather than unknown, so it is not run twice */
        wire_put_str(&wb, "state", "failed");
        wire_put_i64(&wb, "started", 0);
        wire_put_i64(&wb, "finished", wall_now_ms());
        wire_put_i64(&wb, "exit", -1);
        wire_put_i64(&wb, "estimate", 0);
        wire_put_str(&wb, "reason", "Slurm no longer knows the job: its end was not seen");
        wire_put_str(&wb, "hosts", "");
        wire_put_str(&wb, "slurm_state", "");
        if (out)
            put_ranks(S, &wb, job, "");
    }
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

/* The row of job in rows (JobID|...), split into f (up to 8 fields) using row; count. */
static int find_row(const char *rows, uint64_t job, char *row, size_t cap, char **f)
{
    for (const char *p = rows; *p;) {
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        if (strtoull(p, NULL, 10) == job && p[strspn(p, "0123456789")] == '|' && l < cap) {
            memcpy(row, p, l);
            row[l] = '\0';
            return split(row, '|', f, 8);
        }
        p += l;
        if (*p)
            p++;
    }
    return 0;
}

static void done_poll(struct slurm_site *S, struct sreq *r)
{
    S->polling = false;
    if (r->step == 1) { /* sacct of the jobs squeue no longer knew */
        /* rows: JobID|State|Start|End|ExitCode (code:signal) */
        for (uint32_t i = 0; i < r->np; i++) {
            char row[1024], ex[24], *f[8] = {0};
            int nf = slurm_cmd_ok(r)
                         ? find_row(slurm_otext(&r->out), r->pjob[i], row, sizeof row, f)
                         : 0;
            if (nf >= 5) {
                f[1][strcspn(f[1], " ")] = '\0'; /* "CANCELLED by 0" */
                int code = atoi(f[4]), sig = strchr(f[4], ':') ? atoi(strchr(f[4], ':') + 1) : 0;
                snprintf(ex, sizeof ex, "%d", sig ? sig & 0x7f : (code & 0xff) << 8);
                char *g[7] = {f[0], f[1], f[2], f[3], ex, "None", ""};
                job_reply(S, r->prid[i], r->pjob[i], g, 7, r->pout[i]);
            } else {
                job_reply(S, r->prid[i], r->pjob[i], f, 0, r->pout[i]);
            }
        }
        slurm_req_free(S, r);
        return;
    }
    bool gone = !slurm_cmd_ok(r) && strstr(slurm_otext(&r->err), "Invalid job id");
    if (!slurm_cmd_ok(r) && !gone) {
        char b[600];
        slurm_why(S, r, b, sizeof b);
        log_debug("%s", b); /* unanswered: the spool's deadline */
        slurm_req_free(S, r);
        return;
    }
    /* rows: JobID|State|StartTime|EndTime|exit_code|Reason|NodeList| */
    uint32_t nmiss = 0;
    for (uint32_t i = 0; i < r->np; i++) {
        char row[1024], *f[8] = {0};
        int nf = gone ? 0 : find_row(slurm_otext(&r->out), r->pjob[i], row, sizeof row, f);
        /* kept for sacct: accounting exists, or the site's configuration has not been
         * read yet (a poll can finish before scontrol does; sacct then answers or fails) */
        if (nf < 7 && (S->sacct || (!S->config_known && S->path[C_SACCT][0]))) {
            r->prid[nmiss] = r->prid[i];
            r->pout[nmiss] = r->pout[i];
            r->pjob[nmiss++] = r->pjob[i];
            continue;
        }
        job_reply(S, r->prid[i], r->pjob[i], f, nf, r->pout[i]);
    }
    r->np = nmiss;
    if (!nmiss) {
        slurm_req_free(S, r);
        return;
    }
    /* squeue forgets ended jobs after MinJobAge: accounting still knows them */
    r->step = 1;
    slurm_cmd(S, r, C_SACCT, false);
    slurm_arg(r, "--noheader");
    slurm_arg(r, "--parsable2");
    slurm_arg(r, "--allocations");
    slurm_arg(r, "--format=JobID,State,Start,End,ExitCode");
    char ids[POLL_MAX * 21 + 1];
    size_t k = 0;
    for (uint32_t i = 0; i < nmiss; i++)
        k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%" PRIu64, i ? "," : "", r->pjob[i]);
    slurm_arg(r, "--jobs=%s", ids);
}

static void done_config(struct slurm_site *S, struct sreq *r)
{
    const char *p = slurm_cmd_ok(r) ? strstr(slurm_otext(&r->out), "SchedulerParameters") : NULL;
    if (p) {
        char v[1024];
        const char *eq = strchr(p, '=');
        size_t l = eq ? strcspn(eq + 1, "\n") : 0;
        snprintf(v, sizeof v, "%.*s", (int)(l < sizeof v ? l : sizeof v - 1), eq ? eq + 1 : "");
        S->bf_window_min = slurm_bf_window_min(v + strspn(v, " "));
    }
    const char *a = slurm_cmd_ok(r) ? strstr(slurm_otext(&r->out), "AccountingStorageType") : NULL;
    if (a) {
        const char *eq = strchr(a, '=');
        a = eq ? eq + 1 + strspn(eq + 1, " ") : "";
        S->sacct = S->path[C_SACCT][0] && strncmp(a, "accounting_storage/none", 23) &&
                   strncmp(a, "(null)", 6) && *a != '\n';
    }
    S->config_known = true;
    log_info("slurm site %s: backfill window %ld min, accounting %s", S->site, S->bf_window_min,
             S->sacct ? "yes (sacct for jobs squeue has forgotten)" : "no");
    slurm_req_free(S, r);
}

void slurm_step_done(struct slurm_site *S, struct sreq *r)
{
    switch (r->type) {
    case T_CONFIG:
        done_config(S, r);
        break;
    case T_POLL:
        done_poll(S, r);
        break;
    case T_LIST:
        slurm_files_listed(S, r);
        break;
    case T_RM:
        slurm_keep_removed(S, r);
        break;
    case WT_SITE_INFO:
        done_site_info(S, r);
        break;
    case WT_ESTIMATE:
        done_estimate(S, r);
        break;
    case WT_RESERVE:
        done_reserve(S, r);
        break;
    case WT_SUBMIT:
    case WT_PSUBMIT:
        done_submit(S, r);
        break;
    case WT_RESV_LIST:
        done_resv_list(S, r);
        break;
    case WT_CANCEL:
        if (r->step >= 2)
            done_withdraw(S, r);
        else
            done_simple(S, r);
        break;
    default:
        done_simple(S, r);
        break;
    }
}

/*
 * slurm.c - a real Slurm cluster as a metascheduler site (slurm.h; docs/meta.md "Slurm
 * sites"): the site's requests turned into commands, the tick, the adapter's life.
 * The commands run in slurmrun.c, their output becomes replies in slurmdone.c, the
 * parsers are slurmparse.c (slurm_int.h).
 *
 * Requests (docs/wire.md 6.12) map onto Slurm's client commands:
 *   SITE_INFO     sinfo -h -o %P|%a|%C|%F|%f (counts and node features), then squeue
 *                 -t PD,R,CG of the partition
 *   ESTIMATE      sbatch --test-only (the start Slurm's will-run test gives); it, SUBMIT
 *                 and PSUBMIT pass the request's constraint as sbatch --constraint
 *   RESERVE       scontrol create reservation (CoreCnt, Features = the constraint
 *                 without its counts, Users = the job identity,
 *                 Flags=FLEX so the job may start before it, PURGE_COMP so Slurm drops it
 *                 by itself once its job has ended)
 *   SUBMIT        squeue -n KEY (the spool's key is the job name: a resent submission
 *   PSUBMIT       gets the job made before), then sbatch --parsable --reservation
 *   JOB_GET       one squeue -j for every job asked about since the last one; with
 *                 `output`, the job's slurm-ID.out/.err read as rank 0's (issue 27)
 *   CANCEL        scancel
 *   RESV_RELEASE  scontrol delete reservation
 *   RESV_LIST     scontrol -o show reservation, then squeue for the jobs bound to them
 *   FILE_HAVE,    issue 26 (slurmfiles.c): inputs into the site's workdir; a SUBMIT with
 *   FILE_PUT,     files gets its own directory there (inputs linked in) for sbatch
 *   FILE_GET      --chdir; an ended job's outputs are listed (JOB_GET tasks) and read
 * Each command is a child process in its own process group with its output on
 * non-blocking pipes watched by the loop; past its deadline the group is killed. A
 * command that cannot reach Slurm makes SITE_INFO and JOB_GET go unanswered (the spool
 * marks the site down) and every other request an error (the spool tries another site).
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/filestore.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/meta/slurm/slurm_int.h"
#include "wire/wire.h"

extern char **environ;

void slurm_site_tick(struct slurm_site *S)
{
    if (!S)
        return;
    slurm_run_tick(S);
    if (!S->polling && S->nw) {
        struct sreq *r = slurm_req_new(S, T_POLL, 0);
        uint32_t n = S->nw < POLL_MAX ? S->nw : POLL_MAX;
        if (r && (r->prid = malloc(n * sizeof *r->prid)) &&
            (r->pjob = malloc(n * sizeof *r->pjob)) && (r->pout = malloc(n * sizeof *r->pout))) {
            memcpy(r->prid, S->wrid, n * sizeof *r->prid);
            memcpy(r->pjob, S->wjob, n * sizeof *r->pjob);
            memcpy(r->pout, S->wout, n * sizeof *r->pout);
            r->np = n;
            memmove(S->wrid, S->wrid + n, (S->nw - n) * sizeof *S->wrid);
            memmove(S->wjob, S->wjob + n, (S->nw - n) * sizeof *S->wjob);
            memmove(S->wout, S->wout + n, (S->nw - n) * sizeof *S->wout);
            S->nw -= n;
            S->polling = true;
            slurm_cmd(S, r, C_SQUEUE, false);
            slurm_arg(r, "--noheader");
            slurm_arg(r, "--states=all");
            char ids[POLL_MAX * 21 + 1];
            size_t k = 0;
            for (uint32_t i = 0; i < n; i++)
                k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%" PRIu64, i ? "," : "",
                                      r->pjob[i]);
            slurm_arg(r, "--jobs=%s", ids);
            slurm_arg(r, "--Format=JobID:|,State:|,StartTime:|,EndTime:|,exit_code:|,Reason:|,"
                         "NodeList:|");
        } else if (r) {
            slurm_req_free(S, r);
        }
    }
    slurm_keep_tick(S); /* issue 26: job directories the spool is done with */
    slurm_pump(S);
}

static void fmt_time(int64_t ms, char *b, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(b, n, "%Y-%m-%dT%H:%M:%S", &tm);
}

/* The job's command as one sh command line for --wrap: exec 'argv0' 'argv1' ..., or
 * with shell: exec /bin/sh -c 'argv0' sh 'argv1' ... (as 5.2 runs it). NULL when an
 * element is not text, holds a NUL byte, or the line would pass 64 KiB. */
static char *make_wrap(const msgpack_object *argv, bool shell)
{
    size_t cap = 70000;
    char *w = calloc(1, cap);
    if (!w)
        return NULL;
    snprintf(w, cap, "%s", shell ? "exec /bin/sh -c" : "exec");
    for (uint32_t i = 0; i < argv->via.array.size; i++) {
        const msgpack_object *o = &argv->via.array.ptr[i];
        size_t n = strlen(w);
        if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size) ||
            n + 5 > cap) {
            free(w);
            return NULL;
        }
        w[n] = ' ';
        w[n + 1] = '\0';
        if (!slurm_shquote(w, cap, o->via.str.ptr, o->via.str.size)) {
            free(w);
            return NULL;
        }
        if (shell && i == 0 && argv->via.array.size > 1)
            strcat(w, " sh"); /* $0 of sh -c, then the arguments */
    }
    return w;
}

/* Whether a parallel job's inputs give some rank a file of its own (`task`). */
static bool ranked_inputs(const msgpack_object *in)
{
    for (uint32_t i = 0; in && in->type == MSGPACK_OBJECT_ARRAY && i < in->via.array.size; i++)
        if (wire_get(&in->via.array.ptr[i], "task"))
            return true;
    return false;
}

static void on_kick(struct loop *l, void *arg)
{
    (void)l;
    struct slurm_site *S = arg;
    S->kick = 0;
    slurm_site_tick(S);
}

/* The request's "constraint" (issue 27) into r->con: true, or false with the error
 * reply made (bad syntax: INVALID, as a batch site answers). */
static bool get_con(struct slurm_site *S, struct sreq *r, const msgpack_object *o, uint64_t rid)
{
    char why[200];
    if (wire_get_constraint(o, &r->con, why, sizeof why) == 0)
        return true;
    slurm_reply_err(S, rid, false, WE_INVALID, "%s", why);
    return false;
}

void slurm_site_request(struct slurm_site *S, const void *data, size_t len)
{
    /* not started here: this runs while the spool sends its turn's messages, and a reply
     * (even an error) must not come back into the spool before that is over */
    if (!S->kick)
        S->kick = loop_timer(S->loop, 0, 0, on_kick, S);
    if (S->kick < 0)
        S->kick = 0;
    struct wire_msg m;
    struct wire_error we;
    if (wire_decode(data, len, true, &m, &we) < 0) {
        slurm_reply_err(S, we.id, false, we.code, "%s", we.text);
        return;
    }
    const msgpack_object *o = m.root;
    uint64_t rid = m.id;
    if (m.type == WT_JOB_GET && wire_get(o, "from") && wire_get_bool(o, "tasks", false) &&
        !wire_get_bool(o, "output", false)) { /* issue 26: the spool copying outputs */
        slurm_files_tasks(S, rid, o);
        wire_msg_free(&m);
        return;
    }
    if (m.type == WT_JOB_GET) {
        if (S->nw == S->capw) {
            uint32_t nc = S->capw ? S->capw * 2 : 64;
            uint64_t *a = realloc(S->wrid, nc * sizeof *a),
                     *b = a ? realloc(S->wjob, nc * sizeof *b) : NULL;
            bool *c = b ? realloc(S->wout, nc * sizeof *c) : NULL;
            if (a)
                S->wrid = a;
            if (b)
                S->wjob = b;
            if (c) {
                S->wout = c;
                S->capw = nc;
            }
        }
        if (S->nw < S->capw) {
            S->wrid[S->nw] = rid;
            S->wout[S->nw] = wire_get_bool(o, "output", false);
            S->wjob[S->nw++] = wire_get_u64(o, "job", 0);
        }
        wire_msg_free(&m);
        return;
    }
    struct sreq *r = NULL;
    switch (m.type) {
    case WT_SITE_INFO:
        if ((r = slurm_req_new(S, m.type, rid))) {
            slurm_cmd(S, r, C_SINFO, false);
            slurm_arg(r, "--noheader");
            slurm_arg(r, "--format=%%P|%%a|%%C|%%F|%%f");
        }
        break;
    case WT_ESTIMATE:
        if (wire_get(o, "job")) {
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s estimates requests (procs, walltime_s), not jobs",
                            S->site);
            break;
        }
        if ((r = slurm_req_new(S, m.type, rid))) {
            r->procs = wire_get_u64(o, "procs", 1);
            r->walltime_s = wire_get_u64(o, "walltime_s", 3600);
            r->mem_mb = wire_get_u64(o, "mem_mb", 0);
            if (!get_con(S, r, o, rid)) {
                slurm_req_free(S, r);
                break;
            }
            slurm_cmd(S, r, C_SBATCH, false);
            slurm_arg(r, "--test-only");
            slurm_job_args(S, r);
            slurm_arg(r, "--job-name=gridnode-estimate");
            slurm_arg(r, "--output=/dev/null");
            slurm_arg(r, "--wrap=true");
        }
        break;
    case WT_RESERVE: {
        char name[64];
        wire_get_strbuf(o, "name", name, sizeof name);
        if (!name[0] || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789-_.") != strlen(name)) {
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s: a reservation needs a name of letters, digits, - _ .",
                            S->site);
            break;
        }
        if (!(r = slurm_req_new(S, m.type, rid)))
            break;
        if (!get_con(S, r, o, rid)) {
            slurm_req_free(S, r);
            break;
        }
        snprintf(r->name, sizeof r->name, "%s", name);
        r->procs = wire_get_u64(o, "procs", 1);
        int64_t now = wall_now_ms(), st = wire_get_i64(o, "start", 0);
        uint64_t dur = wire_get_u64(o, "duration_s", 3600);
        slurm_cmd(S, r, C_SCONTROL, true);
        slurm_arg(r, "create");
        slurm_arg(r, "reservation");
        slurm_arg(r, "ReservationName=%s", name);
        if (st <= now + 1000) {
            slurm_arg(r, "StartTime=now");
            st = now;
        } else {
            /* Slurm's times are seconds and a job ending at T holds its cores during T */
            st = (st + 999) / 1000 * 1000 + 1000;
            char t[32];
            fmt_time(st, t, sizeof t);
            slurm_arg(r, "StartTime=%s", t);
        }
        /* whole minutes: the job's limit (rounded up to minutes) fits in it */
        uint64_t min = (dur + 59) / 60;
        slurm_arg(r, "Duration=%" PRIu64, min ? min : 1);
        r->i1 = st;
        r->i2 = st + (int64_t)(min ? min : 1) * 60000;
        slurm_arg(r, "Users=%s", S->c.user);
        if (S->c.partition[0])
            slurm_arg(r, "PartitionName=%s", S->c.partition);
        slurm_arg(r, "CoreCnt=%" PRIu64, r->procs ? r->procs : 1);
        char plain[CONSTRAINT_LEN_MAX + 1];
        /* issue 27: cores of nodes with the features; a count asks for some hosts only,
         * which a reservation cannot say: its name is asked of every reserved node */
        if (r->con && constraint_plain(r->con, plain, sizeof plain) == 0)
            slurm_arg(r, "Features=%s", plain);
        /* FLEX: the job may start before the reservation when cores are free sooner;
         * PURGE_COMP: Slurm drops it once its job is done, should the spool not */
        slurm_arg(r, "Flags=FLEX,PURGE_COMP");
        break;
    }
    case WT_SUBMIT:
    case WT_PSUBMIT: {
        const msgpack_object *av = wire_get(o, "argv");
        if (m.type == WT_SUBMIT && wire_get_u64(o, "ntasks", 1) != 1) {
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s runs one task per job (ntasks = 1)", S->site);
            break;
        }
        if (wire_get(o, "stdin") || wire_get(o, "hosts")) {
            slurm_reply_err(S, rid, false, WE_INVALID, "slurm site %s takes no stdin or hosts",
                            S->site);
            break;
        }
        bool files = wire_get(o, "inputs") || wire_get(o, "outputs") || wire_get(o, "checkpoint_s");
        if (files && !S->c.workdir[0]) {
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s takes no files (submit --input/--output/"
                            "--checkpoint-s): it has no workdir (set workdir=DIR in its "
                            "slurm:// URL, a directory its nodes share)",
                            S->site);
            break;
        }
        if (files && m.type == WT_PSUBMIT && ranked_inputs(wire_get(o, "inputs"))) {
            /* the ranks share the job's one directory (srun's model): one name, one file */
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s: a parallel job's ranks share one directory there, "
                            "so inputs given to one rank only ({i}) need a batch site",
                            S->site);
            break;
        }
        char *w = av && av->type == MSGPACK_OBJECT_ARRAY && av->via.array.size
                      ? make_wrap(av, wire_get_bool(o, "shell", false))
                      : NULL;
        if (!w) {
            slurm_reply_err(S, rid, false, WE_INVALID,
                            "slurm site %s: argv is empty, has NUL bytes or is too long", S->site);
            break;
        }
        if (!(r = slurm_req_new(S, m.type, rid))) {
            free(w);
            break;
        }
        r->wrap = w;
        if (!get_con(S, r, o, rid)) {
            slurm_req_free(S, r);
            break;
        }
        if (files) { /* issue 26: written into the job's directory before sbatch */
            struct wire_buf fw;
            wire_buf_init(&fw);
            filestore_jobdata_pack(o, &fw);
            if ((r->files = malloc(fw.sb.size)))
                memcpy(r->files, fw.sb.data, fw.sb.size);
            r->files_len = fw.sb.size;
            /* a PSUBMIT's checkpoint_s is ignored, as at a cluster (no checkpoints of
             * parallel jobs) */
            r->ckpt = m.type == WT_SUBMIT && wire_get_u64(o, "checkpoint_s", 0) > 0;
            wire_buf_free(&fw);
            if (!r->files) {
                slurm_req_free(S, r);
                slurm_reply_err(S, rid, false, WE_REFUSED, "slurm site %s: out of memory", S->site);
                break;
            }
        }
        r->parallel = m.type == WT_PSUBMIT;
        r->hold = wire_get_bool(o, "hold", false);
        r->procs = r->parallel ? wire_get_u64(o, "procs", 1) : 1;
        r->walltime_s = wire_get_u64(o, "limit_s", 3600);
        r->mem_mb = wire_get_u64(o, "mem_mb", 0);
        wire_get_strbuf(o, "key", r->key, sizeof r->key);
        wire_get_strbuf(o, "resv", r->resv, sizeof r->resv);
        wire_get_strbuf(o, "user", r->user, sizeof r->user);
        wire_get_strbuf(o, "name", r->name, sizeof r->name);
        for (char *c = r->user; *c; c++)
            if (*c < ' ')
                *c = ' ';
        for (char *c = r->name; *c; c++)
            if (*c < ' ')
                *c = ' ';
        if (r->key[0]) {
            /* the key names the job at Slurm: a resent submission finds it */
            snprintf(r->jname, sizeof r->jname, "%s", r->key);
            for (char *c = r->jname; *c; c++)
                if (*c == ',' || *c <= ' ')
                    *c = '_';
            slurm_cmd(S, r, C_SQUEUE, false);
            slurm_arg(r, "--noheader");
            slurm_arg(r, "--states=all");
            slurm_arg(r, "--name=%s", r->jname);
            slurm_arg(r, "--format=%%i|%%T");
        } else {
            snprintf(r->jname, sizeof r->jname, "%s", r->name[0] ? r->name : "gridnode");
            for (char *c = r->jname; *c; c++)
                if (*c == ',' || *c <= ' ')
                    *c = '_';
            slurm_submit_cmd(S, r);
        }
        break;
    }
    case WT_CANCEL:
        if ((r = slurm_req_new(S, m.type, rid))) {
            r->job = wire_get_u64(o, "job", 0);
            slurm_cmd(S, r, C_SCANCEL, false);
            if (wire_get_bool(o, "unstarted", false)) { /* a withdrawal: pending only */
                r->step = 2;
                slurm_arg(r, "--state=PENDING");
            }
            slurm_arg(r, "%" PRIu64, r->job);
        }
        break;
    case WT_RESV_RELEASE:
        if ((r = slurm_req_new(S, m.type, rid))) {
            char name[64];
            wire_get_strbuf(o, "name", name, sizeof name);
            slurm_cmd(S, r, C_SCONTROL, true);
            slurm_arg(r, "delete");
            slurm_arg(r, "ReservationName=%s", name);
        }
        break;
    case WT_RESV_LIST:
        if ((r = slurm_req_new(S, m.type, rid))) {
            wire_get_strbuf(o, "name", r->name, sizeof r->name);
            slurm_cmd(S, r, C_SCONTROL, true);
            slurm_arg(r, "--oneliner");
            slurm_arg(r, "show");
            slurm_arg(r, "reservation");
        }
        break;
    case WT_FILE_HAVE:
    case WT_FILE_PUT:
        slurm_files_have(S, rid, o, m.type == WT_FILE_PUT);
        break;
    case WT_FILE_GET:
        slurm_files_get(S, rid, o);
        break;
    default:
        slurm_reply_err(S, rid, false, WE_TYPE, "slurm site %s does not answer %s", S->site,
                        m.desc ? m.desc->name : "this type");
        break;
    }
    wire_msg_free(&m);
}

/* ---- life ---- */

static bool find_cmd(const char *dirs, const char *name, char *out, size_t n)
{
    char list[4096];
    snprintf(list, sizeof list, "%s", dirs);
    for (char *save = NULL, *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, n, "%s/%s", d, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    out[0] = '\0';
    return false;
}

struct slurm_site *slurm_site_new(const struct slurm_conf *c, const char *site, const char *owner,
                                  struct loop *l, slurm_reply_fn fn, void *cbarg, char *err,
                                  size_t errlen)
{
    struct slurm_site *S = calloc(1, sizeof *S);
    if (!S) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    S->c = *c;
    snprintf(S->site, sizeof S->site, "%s", site);
    snprintf(S->owner, sizeof S->owner, "%s", owner);
    S->loop = l;
    S->fn = fn;
    S->arg = cbarg;
    S->bf_window_min = 1440;
    S->done = slurm_step_done;
    const char *path = getenv("PATH"), *dirs = c->bin[0] ? c->bin : path ? path : "/usr/bin:/bin";
    for (int i = 0; i < C_N; i++)
        if (!find_cmd(dirs, slurm_cmd_name[i], S->path[i], sizeof S->path[i]) && i != C_SACCT) {
            snprintf(err, errlen,
                     "slurm site %s: %s not found in %s (install slurm-client, or set bin=DIR)",
                     site, slurm_cmd_name[i], c->bin[0] ? c->bin : "PATH");
            free(S);
            return NULL;
        }
    /* the identity jobs run as */
    if (c->user[0]) {
        struct passwd *pw = getpwnam(c->user);
        if (!pw) {
            snprintf(err, errlen, "slurm site %s: no such user '%s'", site, c->user);
            free(S);
            return NULL;
        }
        if (pw->pw_uid != geteuid()) {
            if (geteuid() != 0) {
                snprintf(
                    err, errlen,
                    "slurm site %s: user=%s needs the spool to run as root (it runs as uid %u)",
                    site, c->user, (unsigned)geteuid());
                free(S);
                return NULL;
            }
            S->runas = true;
            S->uid = pw->pw_uid;
            S->gid = pw->pw_gid;
            S->ngroups = 64;
            if (getgrouplist(c->user, pw->pw_gid, S->groups, &S->ngroups) < 0)
                S->ngroups = 0;
        }
    } else {
        struct passwd *pw = getpwuid(geteuid());
        snprintf(S->c.user, sizeof S->c.user, "%s", pw ? pw->pw_name : "root");
    }
    /* the environment of every command: ours, with SLURM_CONF set */
    size_t ne = 0;
    while (environ && environ[ne])
        ne++;
    S->envp = calloc(ne + 2, sizeof *S->envp);
    size_t k = 0;
    for (size_t i = 0; S->envp && i < ne; i++)
        if (strncmp(environ[i], "SLURM_CONF=", 11) && strncmp(environ[i], "SLURM_CONFIG_DIR=", 17))
            S->envp[k++] = strdup(environ[i]);
    if (S->envp && c->conf[0] && asprintf(&S->envp[k], "SLURM_CONF=%s", c->conf) < 0)
        S->envp[k] = NULL;
    if (!S->envp) {
        snprintf(err, errlen, "out of memory");
        free(S);
        return NULL;
    }
    struct sreq *r = slurm_req_new(S, T_CONFIG, 0);
    if (r) {
        slurm_cmd(S, r, C_SCONTROL, true);
        slurm_arg(r, "show");
        slurm_arg(r, "config");
    }
    log_info("slurm site %s: SLURM_CONF=%s partition=%s jobs run as %s in %s", site,
             c->conf[0] ? c->conf : "(default)", c->partition[0] ? c->partition : "(default)",
             S->c.user, S->c.dir);
    return S;
}

void slurm_site_destroy(struct slurm_site **sp)
{
    struct slurm_site *S = sp ? *sp : NULL;
    if (!S)
        return;
    if (S->kick > 0)
        loop_timer_cancel(S->loop, S->kick);
    while (S->reqs) {
        struct sreq *r = S->reqs;
        if (r->pid > 0) {
            kill(-r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0); /* killed: returns at once */
        }
        slurm_req_free(S, r);
    }
    for (uint32_t i = 0; i < S->nreap; i++)
        waitpid(S->reap[i], NULL, 0);
    slurm_files_free(S);
    slurm_keep_free(S);
    for (size_t i = 0; S->envp && S->envp[i]; i++)
        free(S->envp[i]);
    free(S->envp);
    free(S->reap);
    free(S->wrid);
    free(S->wjob);
    free(S->wout);
    free(S);
    *sp = NULL;
}

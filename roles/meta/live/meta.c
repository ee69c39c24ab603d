/*
 * meta.c - the live metascheduler role: configuration, start-up (state-dir lock,
 * LMDB store, incarnation), the daemon callbacks and the user requests (SUBMIT,
 * PSUBMIT, JOB_LIST, JOB_GET, CANCEL, SITE_INFO). The sites are metasite.c.
 *
 * A turn: requests and site replies change jobs (marked dirty); the commit callback
 * starts placements, writes the dirty jobs, commits once (group commit), and only then
 * sends the replies and the messages to the sites. A reservation is therefore named
 * in the store before it is asked for, and a submission's key before it is sent.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/httpstats.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "daemon/statspage.h"
#include "lib/text.h"
#include "roles/meta/live/meta.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"
#include "wire/jobenv.h"
#include "wire/joblist.h"

#define OFF(f) offsetof(struct meta_cfg, f)
static const struct config_key meta_keys[] = {
    DAEMON_LISTEN_KEY(struct meta_cfg, "meta", "tcp://127.0.0.1:7500"),
    DAEMON_STATE_KEYS(struct meta_cfg, "meta", "run/meta",
                      "directory of the LMDB spool and the endpoint file (created)"),
    {"meta", "sites", CONFIG_STR, "", OFF(sites), 0, 0, NULL,
     "sites, comma-separated: NAME=tcp://HOST:PORT (a batch role) or "
     "NAME=slurm://SLURM_CONF?partition=P&... (a Slurm cluster, docs/meta.md)"},
    {"meta", "speeds", CONFIG_STR, "", OFF(speeds), 0, 0, NULL,
     "relative site speeds, NAME=SPEED,... (default 1): run time = walltime / speed"},
    {"meta", "policy", CONFIG_STR, "estimate", OFF(policy), 0, 0, NULL,
     "estimate | earliest_start | least_queued | round_robin | random | slurm_m"},
    {"meta", "user", CONFIG_STR, "meta", OFF(user), 0, 0, NULL,
     "the name the spool owns its site reservations under (RESERVE user)"},
    {"meta", "estimate_timeout_ms", CONFIG_INT, "1000", OFF(estimate_timeout_ms), 10, 600000, NULL,
     "a site that has not answered ESTIMATE by then is left out of this placement"},
    {"meta", "move_margin_s", CONFIG_INT, "60", OFF(move_margin_s), 0, 1L << 30, NULL,
     "re-evaluation moves a waiting job when another site starts it earlier by more"},
    {"meta", "reeval_s", CONFIG_INT, "10", OFF(reeval_s), 0, 86400, NULL,
     "how often placed jobs that have not started are re-examined (0: never)"},
    {"meta", "site_down_s", CONFIG_INT, "30", OFF(site_down_s), 1, 86400 * 7, NULL,
     "a site silent this long loses its not-yet-started jobs to other sites"},
    {"meta", "max_attempts", CONFIG_INT, "20", OFF(max_attempts), 1, 1000000, NULL,
     "placement rounds before a job fails (a round tries every eligible site)"},
    DAEMON_STORE_KEYS(struct meta_cfg),
    DAEMON_LIMIT_KEYS(struct meta_cfg),
    CURVE_CONFIG_KEYS(struct meta_cfg, sec),
    STATSPAGE_CONFIG_KEYS(struct meta_cfg, stats_interval_s, stats_http),
    {NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL},
};

static const char usage[] =
    "usage: gridnode meta [-c FILE] [--set SECTION.KEY=VALUE]... [--check-config]\n"
    "\n"
    "The metascheduler: a grid spool on meta.listen. Users submit with\n"
    "`gridnode submit -e META_EP ...`; each job is placed on one of the batch sites in\n"
    "meta.sites (ESTIMATE at every site that can hold it, best by meta.policy, RESERVE\n"
    "there, SUBMIT into the reservation) and followed to its end: gridnode jobs/job/cancel\n"
    "-e META_EP. See docs/meta.md and configs/meta.ini.\n"
    "\n"
    "gridnode meta --simulate TRACE ... compares the placement policies on a trace\n"
    "(gridnode meta --simulate --help).\n";

static const struct store_table meta_tables[] = {
    {"jobs", STORE_KEY_U64},
    {NULL},
};

static const char *const state_names[] = {"queued", "placing", "placed", "running",
                                          "done",   "failed",  "killed", "cancelled"};

const char *meta_state_name(int st)
{
    return st >= 0 && st <= MJ_CANCELLED ? state_names[st] : "?";
}

static int state_parse(const char *s)
{
    for (int i = 0; i <= MJ_CANCELLED; i++)
        if (!strcmp(s, state_names[i]))
            return i;
    return -1;
}

/* ---- jobs in memory ---- */

struct mjob *meta_job_find(struct meta *M, uint64_t id)
{
    uint32_t lo = 0, hi = M->njobs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (M->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < M->njobs && M->jobs[lo]->id == id ? M->jobs[lo] : NULL;
}

static int job_add(struct meta *M, struct mjob *j)
{
    if (M->njobs == M->capjobs) {
        uint32_t nc = M->capjobs ? M->capjobs * 2 : 256;
        void *p = realloc(M->jobs, nc * sizeof *M->jobs);
        if (!p)
            return -1;
        M->jobs = p;
        M->capjobs = nc;
    }
    uint32_t i = M->njobs;
    while (i > 0 && M->jobs[i - 1]->id > j->id) {
        M->jobs[i] = M->jobs[i - 1];
        i--;
    }
    M->jobs[i] = j;
    M->njobs++;
    return 0;
}

static void job_free(struct mjob *j)
{
    if (j) {
        free(j->req);
        free(j->tasks_raw);
        free(j);
    }
}

void meta_job_set(struct meta *M, struct mjob *j, enum mj_state st, const char *reason)
{
    (void)M;
    if (reason)
        text_copy(j->reason, sizeof j->reason, reason, strlen(reason));
    if (j->state != st)
        log_info("job %llu: %s -> %s%s%s", (unsigned long long)j->id, meta_state_name(j->state),
                 meta_state_name(st), reason && *reason ? ": " : "", reason ? reason : "");
    j->state = (uint8_t)st;
    if (MJ_ENDED(st) && !j->finished)
        j->finished = wall_now_ms();
    j->dirty = true;
}

/* ---- the job record: a msgpack map ---- */

static void job_encode(const struct mjob *j, struct wire_buf *wb)
{
    wire_buf_reset(wb);
    wire_pack_map(wb, 27);
    wire_put_str(wb, "state", meta_state_name(j->state));
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "t_issued", j->t_issued);
    wire_put_u64(wb, "t_running", j->t_running);
    wire_put_u64(wb, "t_done", j->t_done);
    wire_put_u64(wb, "t_failed", j->t_failed);
    wire_put_bool(wb, "parallel", j->parallel);
    wire_put_bool(wb, "early", j->early);
    wire_put_str(wb, "user", j->user);
    wire_put_str(wb, "name", j->name);
    wire_put_u64(wb, "procs", (uint64_t)j->rq.procs);
    wire_put_i64(wb, "mem", j->rq.mem);
    wire_put_i64(wb, "disk", j->rq.disk);
    wire_put_i64(wb, "wall", j->rq.walltime);
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "started", j->started);
    wire_put_i64(wb, "finished", j->finished);
    wire_put_i64(wb, "exit", j->exit);
    wire_put_u64(wb, "attempt", j->attempt);
    wire_put_i64(wb, "site", j->site);
    wire_put_u64(wb, "sjob", j->sjob);
    wire_put_str(wb, "resv", j->resv);
    wire_put_i64(wb, "mv_site", j->mv_site);
    wire_put_str(wb, "mv_resv", j->mv_resv);
    wire_put_u64(wb, "mv_sjob", j->mv_sjob);
    wire_put_str(wb, "reason", j->reason);
    wire_put_bin(wb, "req", j->req, j->reqlen);
}

static struct mjob *job_decode(uint64_t id, const void *v, size_t vl)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    struct mjob *j = NULL;
    if (msgpack_unpack_next(&up, v, vl, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP || !(j = calloc(1, sizeof *j)))
        goto out;
    const msgpack_object *o = &up.data;
    char st[16];
    wire_get_strbuf(o, "state", st, sizeof st);
    int s = state_parse(st);
    size_t rl;
    const void *r = wire_get_bin(o, "req", &rl);
    if (s < 0 || !r || !(j->req = malloc(rl ? rl : 1))) {
        free(j);
        j = NULL;
        goto out;
    }
    memcpy(j->req, r, rl);
    j->reqlen = rl;
    j->id = id;
    j->state = (uint8_t)s;
    j->parallel = wire_get_bool(o, "parallel", false);
    j->early = wire_get_bool(o, "early", true);
    j->ntasks = (uint32_t)wire_get_u64(o, "ntasks", 1);
    if (j->ntasks < 1)
        j->ntasks = 1;
    j->t_issued = (uint32_t)wire_get_u64(o, "t_issued", 0);
    j->t_running = (uint32_t)wire_get_u64(o, "t_running", 0);
    j->t_done = (uint32_t)wire_get_u64(o, "t_done", 0);
    j->t_failed = (uint32_t)wire_get_u64(o, "t_failed", 0);
    wire_get_strbuf(o, "user", j->user, sizeof j->user);
    wire_get_strbuf(o, "name", j->name, sizeof j->name);
    j->rq.procs = (int32_t)wire_get_u64(o, "procs", 1);
    j->rq.mem = wire_get_i64(o, "mem", 0);
    j->rq.disk = wire_get_i64(o, "disk", 0);
    j->rq.walltime = wire_get_i64(o, "wall", 3600000);
    j->submitted = wire_get_i64(o, "submitted", 0);
    j->started = wire_get_i64(o, "started", 0);
    j->finished = wire_get_i64(o, "finished", 0);
    j->exit = wire_get_i64(o, "exit", 0);
    j->attempt = (uint32_t)wire_get_u64(o, "attempt", 0);
    j->site = (int)wire_get_i64(o, "site", -1);
    j->sjob = wire_get_u64(o, "sjob", 0);
    wire_get_strbuf(o, "resv", j->resv, sizeof j->resv);
    j->mv_site = (int)wire_get_i64(o, "mv_site", -1);
    wire_get_strbuf(o, "mv_resv", j->mv_resv, sizeof j->mv_resv);
    j->mv_sjob = wire_get_u64(o, "mv_sjob", 0);
    wire_get_strbuf(o, "reason", j->reason, sizeof j->reason);
out:
    msgpack_unpacked_destroy(&up);
    return j;
}

static int encode_job(const void *rec, struct wire_buf *wb)
{
    job_encode(rec, wb);
    return 0;
}

static int save_dirty(struct meta *M)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    for (uint32_t i = 0; i < M->njobs && rc == 0; i++) {
        struct mjob *j = M->jobs[i];
        if (!j->dirty)
            continue;
        rc = record_save_u64(M->store, M->t_jobs, j->id, j, encode_job, &wb);
        j->dirty = false;
    }
    wire_buf_free(&wb);
    return rc;
}

/* ---- user requests ---- */

static void fail(struct wire_buf *r, uint64_t id, int code, const char *msg)
{
    wire_buf_reset(r);
    wire_error_msg(r, id, code, "%s", msg);
}

static void new_job(struct meta *M, const struct wire_msg *m, struct wire_buf *reply, bool par)
{
    const msgpack_object *o = m->root;
    struct meta_request rq = {1, 0, 0, 3600000};
    rq.mem = (int64_t)wire_get_u64(o, "mem_mb", 0);
    rq.disk = (int64_t)wire_get_u64(o, "disk_mb", 0);
    rq.walltime = (int64_t)wire_get_u64(o, "limit_s", 3600) * 1000;
    const msgpack_object *a = wire_get(o, "argv");
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size == 0) {
        fail(reply, m->id, WE_INVALID, "argv must name the program to run");
        return;
    }
    if (par) {
        uint64_t p = wire_get_u64(o, "procs", 0);
        if (p == 0 || p > (1u << 20)) {
            fail(reply, m->id, WE_INVALID, "procs must be 1 to 1048576");
            return;
        }
        rq.procs = (int32_t)p;
    } else if (wire_get_u64(o, "ntasks", 1) < 1) {
        fail(reply, m->id, WE_INVALID, "ntasks must be at least 1");
        return;
    } else if (wire_get(o, "stdin")) {
        fail(reply, m->id, WE_INVALID,
             "stdin is not supported by the batch sites: read a file named in argv instead");
        return;
    }
    if (rq.walltime < 1000) {
        fail(reply, m->id, WE_INVALID, "limit_s (the walltime) must be at least 1 second");
        return;
    }
    char why[1024];
    if (jobenv_check(o, why, sizeof why) < 0) { /* --export / --chdir (issue 15): the whole
                                                  request, these included, goes to the site */
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    if (meta_nowhere(M, &rq, why, sizeof why)) {
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    /* the whole request is kept: it is what the site gets */
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_object(&wb, o);
    struct mjob *j = calloc(1, sizeof *j);
    if (!j || !(j->req = malloc(wb.sb.size))) {
        free(j);
        wire_buf_free(&wb);
        fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    memcpy(j->req, wb.sb.data, wb.sb.size);
    j->reqlen = wb.sb.size;
    wire_buf_free(&wb);
    j->id = M->next_id;
    j->parallel = par;
    /* a task array goes whole to one site (docs/meta.md "Task arrays") */
    j->ntasks = par ? 1 : (uint32_t)wire_get_u64(o, "ntasks", 1);
    if (j->ntasks < 1)
        j->ntasks = 1;
    /* B5 by default at the grid level: a placed job starts as soon as its site can run
     * it, before its reservation; `early` false (submit --exact-start) waits for it */
    j->early = wire_get_bool(o, "early", true);
    wire_get_strbuf(o, "user", j->user, sizeof j->user);
    wire_get_strbuf(o, "name", j->name, sizeof j->name);
    j->rq = rq;
    j->submitted = wall_now_ms();
    j->site = j->mv_site = -1;
    j->state = MJ_QUEUED;
    j->dirty = true;
    if (job_add(M, j) < 0) {
        job_free(j);
        fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    M->next_id++;
    M->meta_dirty = true;
    log_info("job %llu: submitted (%u x %d procs, %llds)", (unsigned long long)j->id, j->ntasks,
             rq.procs, (long long)(rq.walltime / 1000));
    wire_begin(reply, WT_SUBMITTED, m->id, 3);
    wire_put_u64(reply, "job", j->id);
    wire_put_str(reply, "state", "queued");
    wire_put_str(reply, "cluster", "");
}

/* The summary row of 6.2 plus the grid's fields. */
static void put_row(struct meta *M, const struct mjob *j, struct wire_buf *wb)
{
    const char *st = meta_state_name(j->state);
    bool started = j->state == MJ_RUNNING || (MJ_ENDED(j->state) && j->started);
    bool ended = MJ_ENDED(j->state);
    wire_pack_map(wb, 26);
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "name", j->name);
    wire_put_str(wb, "user", j->user);
    /* the 6.2 vocabulary for the tools; `gstate` says where the grid is with it */
    wire_put_str(wb, "state",
                 j->state == MJ_KILLED   ? "failed"
                 : j->state <= MJ_PLACED ? "queued"
                                         : st);
    wire_put_str(wb, "gstate", st);
    if (j->ntasks > 1) { /* an array: its elements as the site last reported them */
        wire_put_u64(wb, "ntasks", j->ntasks);
        wire_put_u64(wb, "issued", j->t_issued);
        wire_put_u64(wb, "running", j->state == MJ_RUNNING ? j->t_running : 0);
        wire_put_u64(wb, "done", j->t_done);
        wire_put_u64(wb, "failed", j->t_failed);
    } else {
        wire_put_u64(wb, "ntasks", 1);
        wire_put_u64(wb, "issued", started ? 1 : 0);
        wire_put_u64(wb, "running", j->state == MJ_RUNNING ? 1 : 0);
        wire_put_u64(wb, "done", ended && j->state != MJ_CANCELLED ? 1 : 0);
        wire_put_u64(wb, "failed", j->state == MJ_FAILED || j->state == MJ_KILLED ? 1 : 0);
    }
    wire_put_u64(wb, "dups", 0);
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "finished", j->finished);
    const msgpack_object *argv = NULL;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)j->req, j->reqlen, NULL) == MSGPACK_UNPACK_SUCCESS)
        argv = wire_get(&up.data, "argv");
    wire_put_key(wb, "argv");
    if (argv)
        wire_pack_object(wb, argv);
    else
        wire_pack_array(wb, 0);
    wire_put_bool(wb, "shell", wire_get_bool(&up.data, "shell", false));
    wire_put_u64(wb, "limit_s", (uint64_t)(j->rq.walltime / 1000));
    msgpack_unpacked_destroy(&up);
    wire_put_str(wb, "kind", j->parallel ? "parallel" : j->ntasks > 1 ? "array" : "task");
    wire_put_u64(wb, "procs", (uint64_t)j->rq.procs);
    wire_put_str(wb, "site", j->site >= 0 && j->site < M->nsites ? M->site[j->site].name : "");
    wire_put_u64(wb, "site_job", j->sjob);
    wire_put_str(wb, "resv", j->resv);
    wire_put_i64(wb, "started", j->started);
    wire_put_i64(wb, "exit", j->exit);
    wire_put_i64(wb, "estimate", j->state == MJ_PLACED ? j->est_start : 0);
    wire_put_u64(wb, "attempts", j->attempt);
    wire_put_str(wb, "reason", j->reason);
}

static void h_list(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t from = wire_get_u64(m->root, "from", 0), count = wire_get_u64(m->root, "count", 1000);
    if (count == 0)
        count = 1;
    uint32_t lo = 0;
    while (lo < M->njobs && M->jobs[lo]->id < from)
        lo++;
    /* rows [lo, end) hold n jobs the requester may see (CURVE: a user sees its own jobs)
     * and that pass JOB_LIST's filters (issue 15; wire/joblist.c, as the cluster) */
    uint32_t n = 0, end = lo;
    struct wire_buf rows;
    wire_buf_init(&rows);
    for (; end < M->njobs && n < count && n < 5000; end++) {
        if (!curve_may_touch(M->jobs[end]->user))
            continue;
        size_t at = rows.sb.size;
        put_row(M, M->jobs[end], &rows);
        if (joblist_row_allows(m->root, rows.sb.data + at, rows.sb.size - at))
            n++;
        else
            rows.sb.size = at;
    }
    bool more = end < M->njobs;
    wire_begin(reply, WT_JOBS, m->id, more ? 2 : 1);
    wire_put_key(reply, "jobs");
    wire_pack_array(reply, n);
    msgpack_sbuffer_write(&reply->sb, rows.sb.data, rows.sb.size);
    wire_buf_free(&rows);
    if (more)
        wire_put_u64(reply, "next", M->jobs[end]->id);
}

static void h_get(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct mjob *j = meta_job_find(M, wire_get_u64(m->root, "job", 0));
    if (!j) {
        fail(reply, m->id, WE_NOT_FOUND, "no such job at the grid spool (see gridnode jobs)");
        return;
    }
    if (!curve_may_touch(j->user)) {
        fail(reply, m->id, WE_DENIED,
             "the job belongs to another user; only its owner and the administrators may "
             "see or cancel it");
        return;
    }
    wire_begin(reply, WT_JOB, m->id, 2);
    wire_put_key(reply, "job");
    put_row(M, j, reply);
    wire_put_key(reply, "tasks");
    if (j->tasks_raw) /* an array: the site's task rows of the last poll */
        msgpack_sbuffer_write(&reply->sb, (const char *)j->tasks_raw, j->tasks_len);
    else
        wire_pack_array(reply, 0);
}

static void h_cancel(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct mjob *j = meta_job_find(M, wire_get_u64(m->root, "job", 0));
    if (!j) {
        fail(reply, m->id, WE_NOT_FOUND, "no such job at the grid spool (see gridnode jobs)");
        return;
    }
    if (!curve_may_touch(j->user)) {
        fail(reply, m->id, WE_DENIED,
             "the job belongs to another user; only its owner and the administrators may "
             "see or cancel it");
        return;
    }
    if (MJ_ENDED(j->state)) {
        fail(reply, m->id, WE_STATE, "the job has already ended");
        return;
    }
    meta_job_cancel_at_site(M, j);
    meta_job_set(M, j, MJ_CANCELLED, "cancelled by the user");
    wire_begin(reply, WT_OK, m->id, 0);
}

static void h_site_info(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    wire_begin(reply, WT_SITE, m->id, 2);
    wire_put_key(reply, "sites");
    wire_pack_array(reply, (uint32_t)M->nsites);
    for (int i = 0; i < M->nsites; i++) {
        const struct msite *s = &M->site[i];
        wire_pack_map(reply, 9);
        wire_put_str(reply, "name", s->name);
        wire_put_str(reply, "endpoint", s->ep);
        wire_put_bool(reply, "up", s->info.up);
        wire_put_bool(reply, "known", s->known);
        wire_put_f64(reply, "speed", s->info.speed);
        wire_put_u64(reply, "cores", (uint64_t)s->info.total_procs);
        wire_put_u64(reply, "largest_procs", (uint64_t)s->info.max_procs);
        wire_put_i64(reply, "cores_free", s->cores_free);
        wire_put_i64(reply, "queued_work", s->info.queued_work);
    }
    wire_put_str(reply, "policy", meta_policy_name(M->policy));
}

void meta_dispatch(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    switch (m->type) {
    case WT_SUBMIT:
        new_job(M, m, reply, false);
        break;
    case WT_PSUBMIT:
        new_job(M, m, reply, true);
        break;
    case WT_JOB_LIST:
        h_list(M, m, reply);
        break;
    case WT_JOB_GET:
        h_get(M, m, reply);
        break;
    case WT_CANCEL:
        h_cancel(M, m, reply);
        break;
    case WT_SITE_INFO:
        h_site_info(M, m, reply);
        break;
    default:
        fail(reply, m->id, WE_TYPE,
             "the grid spool (gridnode meta) answers SUBMIT, PSUBMIT, JOB_LIST, JOB_GET, CANCEL "
             "and SITE_INFO");
    }
}

/* ---- daemon callbacks ---- */

static void on_request(void *arg, const struct wire_msg *m, const char *peer,
                       struct wire_buf *reply)
{
    (void)peer;
    meta_dispatch(arg, m, reply);
}

static int on_commit(void *arg)
{
    struct meta *M = arg;
    if (M->turn_failed)
        return -1;
    meta_place_some(M);
    if (M->meta_dirty) {
        if (record_put_u64(M->store, M->t_meta, "next_job", M->next_id) < 0)
            return -1;
        M->meta_dirty = false;
    }
    if (save_dirty(M) < 0 || store_commit(M->store) < 0) {
        log_warn("commit failed");
        meta_out_flush(M, false);
        return -1;
    }
    meta_out_flush(M, true);
    return 0;
}

static int load_all(struct meta *M);

static void on_reload(void *arg)
{
    struct meta *M = arg;
    store_discard(M->store);
    meta_out_flush(M, false);
    for (uint32_t i = 0; i < M->njobs; i++)
        job_free(M->jobs[i]);
    M->njobs = 0;
    meta_sites_close(M);
    if (load_all(M) < 0 || meta_sites_open(M) < 0)
        fatalx("cannot reload the state after a failed commit; restart the meta role");
    M->turn_failed = false;
}

static void on_tick(struct loop *l, void *arg)
{
    (void)l;
    meta_sites_tick(arg);
}

static int load_job(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct meta *M = arg;
    (void)klen;
    struct mjob *j = job_decode(store_key_get_u64(key), val, vlen);
    if (!j)
        return RECORD_UNREADABLE;
    if (j->site >= M->nsites || j->mv_site >= M->nsites) {
        log_warnx("job %llu: its site is no longer in meta.sites: spooled again",
                  (unsigned long long)j->id);
        if (!MJ_ENDED(j->state)) {
            j->site = j->mv_site = -1;
            j->state = MJ_QUEUED;
            j->dirty = true;
        }
    }
    if (job_add(M, j) < 0) {
        job_free(j);
        return -1;
    }
    return RECORD_TAKEN;
}

static int load_all(struct meta *M)
{
    void *v;
    size_t vl;
    int rc = store_get(M->store, M->t_meta, "inc", 3, &v, &vl);
    if (rc == 0 && vl < sizeof M->inc) {
        memcpy(M->inc, v, vl);
        M->inc[vl] = '\0';
        free(v);
    } else {
        if (rc == 0)
            free(v);
        uint8_t raw[8];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
            return -1;
        for (int i = 0; i < 8; i++)
            snprintf(M->inc + 2 * i, 3, "%02x", raw[i]);
        if (store_put(M->store, M->t_meta, "inc", 3, M->inc, strlen(M->inc)) < 0)
            return -1;
    }
    M->next_id = 1;
    if (record_get_u64(M->store, M->t_meta, "next_job", &M->next_id) != 0 || M->next_id < 1)
        M->next_id = 1;
    M->njobs = 0;
    M->inflight = 0;
    if (record_load(M->store, M->t_jobs, load_job, M) < 0)
        return -1;
    for (uint32_t i = 0; i < M->njobs; i++)
        meta_resume(M, M->jobs[i]);
    return 0;
}

static int meta_open(struct meta *M)
{
    char err[512];
    const struct meta_cfg *c = &M->cfg;
    if (fs_mkdir_p(c->state_dir) < 0) {
        log_warn("cannot create state_dir %s", c->state_dir);
        return -1;
    }
    if ((M->lockfd = daemon_lock_state_dir(c->state_dir, err, sizeof err)) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        return -1;
    }
    struct store_opts so = {"meta", meta_tables, (enum store_sync)c->sync, (size_t)c->map_mb << 20,
                            false};
    if (!(M->store = store_open(c->state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    M->t_meta = store_table(M->store, "meta");
    M->t_jobs = store_table(M->store, "jobs");
    if (load_all(M) < 0 || save_dirty(M) < 0 || store_commit(M->store) < 0) {
        log_warnx("cannot load the state from %s", c->state_dir);
        return -1;
    }
    log_info("state loaded: %u jobs, incarnation %s, %d sites, policy %s", M->njobs, M->inc,
             M->nsites, meta_policy_name(M->policy));
    return 0;
}

/* Every configuration check start-up makes (role_configure runs it for --check-config
 * and before starting alike); the site list is parsed into a scratch role. */
static int meta_check(const void *p, char *err, size_t errlen)
{
    const struct meta_cfg *cfg = p;
    if (config_check_log_level("meta.log_level", cfg->log_level, err, errlen) < 0 ||
        config_check_endpoint("meta.listen", cfg->listen, 1, err, errlen) < 0 ||
        httpstats_check("stats.http", cfg->stats_http, err, errlen) < 0)
        return -1;
    if (meta_policy_parse(cfg->policy) < 0) {
        snprintf(err, errlen,
                 "meta.policy must be estimate, earliest_start, least_queued, "
                 "round_robin, random or slurm_m, not '%s'",
                 cfg->policy);
        return -1;
    }
    struct meta *scratch = calloc(1, sizeof *scratch);
    if (!scratch) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    scratch->cfg = *cfg;
    int rc = meta_sites_parse(scratch, err, errlen);
    free(scratch);
    return rc;
}

int meta_main(int argc, char **argv)
{
    static struct meta M;
    int rc = role_configure("meta", usage, meta_keys, &M.cfg, argc, argv, meta_check);
    if (rc >= 0)
        return rc;
    char err[512];
    int lvl = log_level_parse(M.cfg.log_level), pol = meta_policy_parse(M.cfg.policy);
    M.policy = (enum meta_policy)pol;
    M.lockfd = -1;
    if (meta_sites_parse(&M, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: configuration error: %s\n", err);
        return 1;
    }
    log_init("meta", (enum log_level)lvl);
    loop_signals();
    M.rr_state = (uint64_t)getpid();
    rc = 1;
    struct daemon_opts dop = {"meta", M.cfg.listen, M.cfg.state_dir, M.cfg.peer_queue,
                              .security = &M.cfg.sec};
    struct daemon_ops ops = {on_request, on_commit, on_reload, &M, NULL};
    /* the HTTP port before the ZeroMQ one: "listening on" means everything is up */
    if (meta_open(&M) < 0 || metastats_open(&M, err, sizeof err) < 0 || !(M.loop = loop_new()) ||
        !(M.daemon = daemon_new(M.loop, &dop, &ops)))
        goto out;
    if (meta_sites_open(&M) < 0) {
        fprintf(stderr, "gridnode meta: cannot connect to the sites\n");
        goto out;
    }
    loop_timer(M.loop, 50, 1, on_tick, &M);
    statspage_timer(M.stats, M.loop);
    statspage_write(M.stats);
    rc = loop_run(M.loop) < 0 ? 1 : 0;
    statspage_write(M.stats);
    log_info("stopping");
out:
    metastats_close(&M); /* before the state it was published from goes */
    meta_sites_close(&M);
    if (M.store)
        store_commit(M.store);
    store_close(&M.store);
    for (uint32_t i = 0; i < M.njobs; i++)
        job_free(M.jobs[i]);
    free(M.jobs);
    daemon_destroy(&M.daemon);
    loop_destroy(&M.loop);
    if (M.lockfd >= 0)
        close(M.lockfd);
    return rc;
}

/*
 * metareq.c - the grid spool's user requests (docs/wire.md 6.13): SUBMIT and PSUBMIT
 * (checked, spooled as a new job), JOB_LIST, JOB_GET (the 6.2 summary row plus the
 * grid's fields), CANCEL (at the site too) and SITE_INFO (the sites as the spool sees
 * them). Above the jobs (metajob.c) and the sites (metaplace.c); the reply goes out
 * after the turn's commit (meta.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/endwait.h"
#include "daemon/daemon.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/curve.h"
#include "daemon/loop.h"
#include "roles/meta/live/meta_int.h"
#include "wire/depend.h"
#include "wire/jobargv.h"
#include "wire/jobenv.h"
#include "wire/joblist.h"

/* ---- user requests ---- */

static void fail(struct wire_buf *r, uint64_t id, int code, const char *msg)
{
    wire_buf_reset(r);
    wire_error_msg(r, id, code, "%s", msg);
}

/* A job's state in the 6.2 vocabulary of the tools (`gstate` says where the grid is). */
static const char *tool_state(const struct mjob *j)
{
    /* a parallel job's `killed` included, as the site says it: `job --wait` then gives the
     * same exit status at every level */
    return j->held && j->state == MJ_QUEUED ? "held"
           : j->state <= MJ_PLACED          ? "queued"
                                            : meta_state_name(j->state);
}

/* A resent keyed SUBMIT/PSUBMIT (6.1 `key`, per user, across restarts): the first job's
 * SUBMITTED again, with `repeat`. True when it answered (a repeat or a bad key). */
static bool repeat_of_key(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    const msgpack_object *o = m->root;
    size_t kn;
    const char *k = wire_get_str(o, "key", &kn);
    if (!k && !wire_get(o, "key"))
        return false;
    if (!k || kn == 0 || kn > 128 || memchr(k, 0, kn)) {
        fail(reply, m->id, WE_INVALID, "key must be a string of 1 to 128 bytes without NUL");
        return true;
    }
    char user[META_NAME_MAX], key[129];
    wire_get_strbuf(o, "user", user, sizeof user);
    memcpy(key, k, kn);
    key[kn] = 0;
    const struct mjob *j = meta_job_by_key(M, user, key);
    if (!j)
        return false;
    wire_begin(reply, WT_SUBMITTED, m->id, 4);
    wire_put_u64(reply, "job", j->id);
    wire_put_str(reply, "state", tool_state(j));
    wire_put_str(reply, "cluster", "");
    wire_put_bool(reply, "repeat", true);
    return true;
}

static void new_job(struct meta *M, const struct wire_msg *m, struct wire_buf *reply, bool par)
{
    const msgpack_object *o = m->root;
    if (repeat_of_key(M, m, reply))
        return;
    struct meta_request rq = {1, 0, 0, 3600000};
    rq.mem = (int64_t)wire_get_u64(o, "mem_mb", 0);
    rq.disk = (int64_t)wire_get_u64(o, "disk_mb", 0);
    rq.walltime = (int64_t)wire_get_u64(o, "limit_s", 3600) * 1000;
    const char *bad = jobargv_problem(wire_get(o, "argv")); /* the sites' own check */
    char fwhy[600];
    if (!bad) /* issue 26: inputs held here whole, names, limits (files.job_mb) */
        bad =
            meta_files_check(M, o, par, par ? 1 : wire_get_u64(o, "ntasks", 1), fwhy, sizeof fwhy);
    if (bad) {
        fail(reply, m->id, WE_INVALID, bad);
        return;
    }
    if (par) {
        uint64_t p = wire_get_u64(o, "procs", 0);
        if (p == 0 || p > (1u << 20)) {
            fail(reply, m->id, WE_INVALID, "procs must be 1 to 1048576");
            return;
        }
        rq.procs = (int32_t)p;
        if (wire_get(o, "ppn") && wire_get_u64(o, "ppn", 0) == 0) {
            fail(reply, m->id, WE_INVALID, "ppn must be at least 1");
            return;
        }
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
    char *con; /* submit --constraint (issue 27): a site must be able to satisfy it */
    if (wire_get_constraint(o, &con, why, sizeof why) < 0) {
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    if (constraint_job_ok(con, par, (uint64_t)rq.procs, why, sizeof why) < 0) { /* counts */
        free(con);
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    rq.constraint = con;
    if (meta_nowhere(M, &rq, why, sizeof why)) {
        free(con);
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    struct depend *dep;
    if (meta_dep_submit(M, o, &dep, why, sizeof why) < 0) { /* issue 27 */
        free(con);
        fail(reply, m->id, WE_INVALID, why);
        return;
    }
    /* the whole request is kept: it is what the site gets */
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_object(&wb, o);
    struct mjob *j = calloc(1, sizeof *j);
    if (!j || !(j->req = malloc(wb.sb.size))) {
        if (dep)
            depend_free(dep);
        free(dep);
        free(con);
        free(j);
        wire_buf_free(&wb);
        fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    memcpy(j->req, wb.sb.data, wb.sb.size);
    j->reqlen = wb.sb.size;
    wire_buf_free(&wb);
    j->key = meta_req_key(o);
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
    j->constraint = con; /* freed with j; rq.constraint points here */
    j->ppn = par ? (uint32_t)wire_get_u64(o, "ppn", 0) : 0; /* sent on with the request */
    j->submitted = wall_now_ms();
    j->site = j->mv_site = -1;
    j->state = MJ_QUEUED;
    j->dirty = true; /* listed by meta_job_add */
    char r[META_REASON_MAX];
    if ((j->dep = dep)) { /* waits, not placed, until it holds (metadep.c) */
        meta_dep_reason(j, r, sizeof r);
        meta_job_reason_set(j, r);
    }
    if ((j->held = wire_get_bool(o, "hold", false))) /* submit --hold: the spool keeps it */
        meta_job_reason_set(j, META_HELD_REASON);
    if (meta_job_add(M, j) < 0) {
        meta_job_free(j);
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
    bool started = j->state == MJ_RUNNING || (MJ_ENDED(j->state) && j->started);
    bool ended = MJ_ENDED(j->state);
    wire_pack_map(wb, 28 + !!j->dep + (j->requeues > 0) + !!j->constraint);
    if (j->requeues) /* JOB_CTL requeue (issue 24): Slurm's Restarts, as at the sites */
        wire_put_u64(wb, "requeues", j->requeues);
    if (j->constraint) /* submit --constraint (issue 27) */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->dep) { /* issue 27: the terms it still waits for */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "name", j->name);
    wire_put_str(wb, "user", j->user);
    /* the 6.2 vocabulary for the tools; `gstate` says where the grid is with it */
    wire_put_str(wb, "state", tool_state(j));
    wire_put_str(wb, "gstate", meta_state_name(j->state));
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
    /* submit --network (issue 23): kept in the request, which every placement (a move to
       another site too) sends whole; requests stored before it read false */
    wire_put_bool(wb, "network", wire_get_bool(&up.data, "network", false));
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
    /* orders about it a site has not acknowledged yet (the outbox, metaorder.c) */
    wire_put_u64(wb, "orders", j->orders);
    wire_put_str(wb, "reason", meta_job_reason(j));
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

/* JOB's `tasks`: the rows kept with the outputs copied here (issue 26), else for an
 * array the site's task rows of the last poll, else none; *next the next page's first
 * task (0: none). */
static void put_tasks(struct meta *M, const struct mjob *j, uint64_t from, uint64_t count,
                      struct wire_buf *wb, uint64_t *next)
{
    *next = 0;
    if (meta_files_tasks(M, j, from, count, wb, next))
        return;
    if (j->tasks_raw)
        msgpack_sbuffer_write(&wb->sb, (const char *)j->tasks_raw, j->tasks_len);
    else
        wire_pack_array(wb, 0);
}

/*
 * job --output (issue 27): a job placed at a site that is up gets its output from the
 * site in one hop: the request is held and relayed (metaout.c). True when it was (the
 * reply comes later); false: answered now, as without `output` (not placed, its site
 * down, or the request cannot be held).
 */
static bool relay_output(struct meta *M, const struct mjob *j, const struct wire_msg *m,
                         struct wire_buf *reply)
{
    if (j->site < 0 || j->site >= M->nsites || !j->sjob || !M->site[j->site].info.up)
        return false;
    /* one held request per peer and kind: a kind per job, so that `job A B --output`
       (pipelined) holds both */
    uint64_t h = daemon_hold(M->daemon, 0x80000000u | (uint32_t)(j->id & 0x7fffffff),
                             M->cfg.request_timeout_ms + 2000);
    if (!h)
        return false;
    struct wire_buf row;
    uint64_t next;
    wire_buf_init(&row);
    put_row(M, j, &row);
    put_tasks(M, j, wire_get_u64(m->root, "from", 0), wire_get_u64(m->root, "count", 1000), &row,
              &next);
    bool ok = meta_out_ask(M, j, m, h, row.sb.data, row.sb.size);
    wire_buf_free(&row);
    if (!ok) { /* held already: answered through the daemon, without the site's part */
        wire_begin(reply, WT_JOB, m->id, 3);
        wire_put_key(reply, "job");
        put_row(M, j, reply);
        wire_put_key(reply, "tasks");
        put_tasks(M, j, 0, 1000, reply, &next);
        wire_put_str(reply, "site_error", "out of memory at the spool: try again");
        (void)daemon_reply_held(M->daemon, h, reply);
    }
    return true;
}

/* Request m's "job", when the requester may act on it (may: what its owner may do, for
 * the error text); NULL with an ERROR in reply (no such job, another user's). */
static struct mjob *own_job(struct meta *M, const struct wire_msg *m, const char *may,
                            struct wire_buf *reply)
{
    struct mjob *j = meta_job_find(M, wire_get_u64(m->root, "job", 0));
    char msg[200];
    if (j && curve_may_touch(j->user))
        return j;
    uint64_t id = wire_get_u64(m->root, "job", 0);
    if (!j && id && id < M->next_id) { /* purged (metapurge.c; ids are never given again) */
        wire_buf_reset(reply);
        wire_error_purged(reply, m->id, id, "at the grid spool");
        return NULL;
    }
    if (!j) {
        fail(reply, m->id, WE_NOT_FOUND, "no such job at the grid spool (see gridnode jobs)");
        return NULL;
    }
    snprintf(msg, sizeof msg,
             "the job belongs to another user; only its owner and the administrators may %s it",
             may);
    fail(reply, m->id, WE_DENIED, msg);
    return NULL;
}

static void h_get(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct mjob *j = own_job(M, m, "see or cancel", reply);
    if (!j)
        return;
    if (wire_get_bool(m->root, "output", false) && relay_output(M, j, m, reply))
        return; /* held: answered with the site's output (metaout.c) */
    struct wire_buf tasks;
    uint64_t next;
    wire_buf_init(&tasks);
    put_tasks(M, j, wire_get_u64(m->root, "from", 0), wire_get_u64(m->root, "count", 1000), &tasks,
              &next);
    wire_begin(reply, WT_JOB, m->id, 2 + (next > 0));
    wire_put_key(reply, "job");
    put_row(M, j, reply);
    wire_put_key(reply, "tasks");
    msgpack_sbuffer_write(&reply->sb, tasks.sb.data, tasks.sb.size);
    wire_buf_free(&tasks);
    if (next) /* the next page of the task rows kept here */
        wire_put_u64(reply, "next", next);
}

/* JOB_WAIT's view of the spool's jobs (daemon/endwait.h) */
static void wait_pack(void *role, uint64_t id, struct wire_buf *row)
{
    put_row(role, meta_job_find(role, id), row);
}

const struct endwait_ops meta_endwait_ops = {" at the grid spool", meta_job_owner, wait_pack};

static void h_cancel(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct mjob *j = own_job(M, m, "see or cancel", reply);
    if (!j)
        return;
    if (MJ_ENDED(j->state)) {
        fail(reply, m->id, WE_STATE, "the job has already ended");
        return;
    }
    meta_job_cancel_at_site(M, j);
    j->requeueing = false; /* a requeue waiting for its copy's cancel: ends here */
    meta_job_set(M, j, MJ_CANCELLED, "cancelled by the user");
    wire_begin(reply, WT_OK, m->id, 0);
}

/* JOB_CTL (docs/wire.md 6.16) at the spool: `requeue` (the job from scratch, placed
 * again once its copy at a site is cancelled; docs/meta.md "Requeue"). Hold and
 * release are the site's: the spool forwards no hold. */
/* JOB_CTL hold/release at the spool: a job the spool has not placed yet is held here
 * (not placed until released, as Slurm's hold keeps a job pending); a placed or running
 * job is its site's, held there. */
static void hold_release(struct meta *M, struct mjob *j, bool hold, const struct wire_msg *m,
                         struct wire_buf *reply)
{
    if (hold && !j->held && (j->state != MJ_QUEUED || j->site >= 0 || j->phase != PH_IDLE)) {
        char why[300];
        snprintf(why, sizeof why,
                 "the job is %s%s%s: only a job not placed yet is held at the spool; hold it at "
                 "its site (gridnode hold -e SITE_EP %" PRIu64 ", gridnode job shows the "
                 "site) or cancel it here",
                 tool_state(j), j->site >= 0 ? " at site " : "",
                 j->site >= 0 && j->site < M->nsites ? M->site[j->site].name : "", j->sjob);
        fail(reply, m->id, WE_STATE, why);
        return;
    }
    if (!hold && !j->held) {
        char why[120];
        snprintf(why, sizeof why, "the job is not held at the spool (it is %s)", tool_state(j));
        fail(reply, m->id, WE_STATE, why);
        return;
    }
    if (j->held != hold) {
        j->held = hold;
        char r[META_REASON_MAX];
        if (hold)
            meta_job_reason_set(j, META_HELD_REASON);
        else if (j->dep) {
            meta_dep_reason(j, r, sizeof r);
            meta_job_reason_set(j, r);
        } else
            meta_job_reason_set(j, "released: waiting for placement");
        meta_job_dirty(M, j);
    }
    wire_begin(reply, WT_OK, m->id, 0);
}

static void h_job_ctl(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct mjob *j = own_job(M, m, "hold, release or requeue", reply);
    char op[16];
    wire_get_strbuf(m->root, "op", op, sizeof op);
    if (!j)
        return;
    if (!strcmp(op, "hold") || !strcmp(op, "release")) {
        hold_release(M, j, !strcmp(op, "hold"), m, reply);
        return;
    }
    if (strcmp(op, "requeue")) {
        fail(reply, m->id, WE_INVALID, "op must be hold, release or requeue");
        return;
    }
    if (j->state == MJ_CANCELLED) {
        fail(reply, m->id, WE_STATE, "the job is cancelled: a cancel is final; submit it again");
        return;
    }
    if (j->requeueing && j->site >= 0 && !M->site[j->site].info.up) {
        /* its site went down since: the requester vouches for the copy (as below) */
        char r[200];
        snprintf(r, sizeof r,
                 "requeued while site %s is unreachable: placed again (its copy there is "
                 "cancelled when the site answers)",
                 M->site[j->site].name);
        meta_job_requeue_now(M, j, r);
    } else if (!j->requeueing && !(j->state == MJ_QUEUED && j->site < 0)) {
        meta_job_requeue(M, j); /* a queued job, or one requeueing already: unchanged */
    }
    wire_begin(reply, WT_OK, m->id, 0);
}

static void h_site_info(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    wire_begin(reply, WT_SITE, m->id, 2);
    wire_put_key(reply, "sites");
    wire_pack_array(reply, (uint32_t)M->nsites);
    for (int i = 0; i < M->nsites; i++) {
        const struct msite *s = &M->site[i];
        wire_pack_map(reply, 11 + !!s->fhosts);
        wire_put_str(reply, "name", s->name);
        wire_put_key(reply, "features"); /* its hosts' distinct feature lists (issue 27) */
        wire_pack_array(reply, (uint32_t)s->nfsets);
        for (int32_t k = 0; k < s->nfsets; k++)
            wire_pack_str(reply, s->fsets[k]);
        if (s->fhosts) { /* how many hosts have each, when the site said */
            wire_put_key(reply, "feature_hosts");
            wire_pack_array(reply, (uint32_t)s->nfsets);
            for (int32_t k = 0; k < s->nfsets; k++)
                wire_pack_u64(reply, s->fhosts[k]);
        }
        wire_put_str(reply, "endpoint", s->ep);
        wire_put_bool(reply, "up", s->info.up);
        wire_put_bool(reply, "known", s->known);
        wire_put_f64(reply, "speed", s->info.speed);
        wire_put_u64(reply, "cores", (uint64_t)s->info.total_procs);
        wire_put_u64(reply, "largest_procs", (uint64_t)s->info.max_procs);
        wire_put_i64(reply, "cores_free", s->cores_free);
        wire_put_i64(reply, "queued_work", s->info.queued_work);
        wire_put_u64(reply, "orders", meta_orders_at(M, i)); /* the outbox, not acknowledged */
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
    case WT_JOB_WAIT: /* issue 28: held until one of the jobs ended */
        endwait_request(M->endwait, M->daemon, m, reply);
        break;
    case WT_CANCEL:
        h_cancel(M, m, reply);
        break;
    case WT_SITE_INFO:
        h_site_info(M, m, reply);
        break;
    case WT_JOB_CTL: /* requeue (issue 24) */
        h_job_ctl(M, m, reply);
        break;
    case WT_FILE_HAVE: /* issue 26 (metafiles.c) */
    case WT_FILE_PUT:
    case WT_FILE_GET:
        meta_files_request(M, m, reply);
        break;
    case WT_ACCT: /* issue 27 */
        meta_acct_request(M, m, reply);
        break;
    case WT_PURGE: /* metapurge.c */
        meta_purge_request(M, m, reply);
        break;
    default:
        fail(reply, m->id, WE_TYPE,
             "the grid spool (gridnode meta) answers SUBMIT, PSUBMIT, JOB_LIST, JOB_GET, JOB_WAIT, "
             "CANCEL, "
             "JOB_CTL, SITE_INFO, ACCT, PURGE and the FILE_* messages)");
    }
}

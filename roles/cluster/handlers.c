/*
 * handlers.c - the cluster's request handlers, one per message type, dispatched from
 * a table after wire_decode() validated the message against its descriptor. Each
 * handler writes exactly one reply into r->reply; cluster.c sends it after the turn's
 * commit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon/endwait.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "roles/cluster/workwait.h"
#include "store/store.h"
#include "wire/jobargv.h"
#include "wire/jobenv.h"
#include "wire/joblist.h"

#define CLIENT_NAME_MAX 63

/* A write could not be buffered: the turn is undone and everyone told to retry. */
static void reply_storage(struct cluster *c, struct request *r)
{
    c->turn_failed = true;
    cluster_reply_error(r, WE_STORAGE,
                        "the cluster could not save state (out of memory or disk); "
                        "nothing was changed, retry later");
}

/*
 * The node of the request's session id, with its last access updated; NULL + reply
 * (SESSION for an unknown id, DENIED for a session another key opened: issue 23).
 */
static struct node *session(struct cluster *c, struct request *r)
{
    size_t len;
    char why[300];
    const char *sid = wire_get_str(r->msg->root, "sid", &len);
    struct node *n = cluster_node_find(c, sid, len);
    if (!n) {
        cluster_reply_error(r, WE_SESSION, "unknown session id '%.*s': send HELLO to get a new one",
                            (int)(len > 64 ? 64 : len), sid ? sid : "");
        return NULL;
    }
    if (sessions_authorize(c, n, r->msg->desc->name, why, sizeof why) < 0) {
        cluster_reply_error(r, WE_DENIED, "%s", why);
        return NULL;
    }
    cluster_node_seen(c, n, r->peer);
    return n;
}

static bool work_remains(const struct cluster *c)
{
    for (uint32_t i = c->open_from; i < c->njobs; i++)
        if (c->jobs[i]->state == JS_QUEUED || c->jobs[i]->state == JS_RUNNING)
            return true;
    return false;
}

static void h_hello(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    size_t len;
    const char *sid = wire_get_str(m, "sid", &len);
    struct node *n = cluster_node_find(c, sid, len);
    char why[300];
    if (n && sessions_authorize(c, n, "HELLO", why, sizeof why) < 0)
        n = NULL; /* another key's session: this key gets a session of its own */
    bool resumed = n != NULL;
    struct node decl = {0}; /* the declared processors, checked before any change */
    const char *bad = cluster_node_load_gpus(&decl, m);
    char fwhy[200];
    if (!bad) /* issue 27: the node's features (client.features, its arch and OS) */
        bad = cluster_node_load_features(&decl, m, fwhy, sizeof fwhy);
    if (bad) {
        cluster_reply_error(r, WE_INVALID, "HELLO refused: %s", bad);
        return;
    }
    if (!n) {
        uint8_t raw[16];
        const struct curve_ident *id = curve_current();
        if (sessions_admit(c, r->peer, why, sizeof why) < 0) {
            cluster_reply_error(r, WE_REFUSED, "%s", why);
            return;
        }
        if (!(n = cluster_node_new(c)) || getrandom(raw, sizeof raw, 0) != sizeof raw) {
            cluster_reply_error(r, WE_STORAGE,
                                "cannot create a session (out of memory or entropy)");
            return;
        }
        for (int i = 0; i < 16; i++)
            snprintf(n->sid + 2 * i, 3, "%02x", raw[i]);
        n->first_ms = wall_now_ms();
        snprintf(n->ip, sizeof n->ip, "%s", r->peer);
        snprintf(n->owner, sizeof n->owner, "%s", id ? id->name : "");
        if (cluster_node_register(c) < 0 || sessions_attach(c, c->nnodes - 1) < 0) {
            reply_storage(c, r);
            return;
        }
        n = &c->nodes[c->nnodes - 1];
    }
    wire_get_strbuf(m, "node", n->name, sizeof n->name);
    n->drain = drain_find(c, n->name);
    wire_get_strbuf(m, "client", n->client, sizeof n->client);
    wire_get_strbuf(m, "cluster", n->cluster, sizeof n->cluster);
    wire_get_strbuf(m, "os", n->os, sizeof n->os);
    n->mhz = (uint32_t)wire_get_u64(m, "mhz", 0);
    n->cores = (uint32_t)wire_get_u64(m, "cores", 1);
    n->slots = (uint32_t)wire_get_u64(m, "slots", n->cores);
    n->mem_mb = wire_get_u64(m, "mem_mb", 0);
    wire_get_strbuf(m, "arch", n->arch, sizeof n->arch);
    wire_get_strbuf(m, "model", n->model, sizeof n->model);
    n->disk_mb = wire_get_u64(m, "disk_mb", 0);
    n->procs = wire_get_bool(m, "procs", false);
    memcpy(n->gpu, decl.gpu, sizeof n->gpu);
    n->ngpu = decl.ngpu;
    n->cpu_gflops = decl.cpu_gflops;
    memcpy(n->features, decl.features, sizeof n->features);
    n->active = true;
    n->last_ms = wall_now_ms();
    if (r->peer[0])
        snprintf(n->ip, sizeof n->ip, "%s", r->peer);
    cluster_mark_node(c, n);
    log_info("node %s %s: session %s from %s", n->name, resumed ? "resumed" : "joined", n->sid,
             n->ip);
    wire_begin(r->reply, WT_WELCOME, r->msg->id, 5);
    wire_put_str(r->reply, "sid", n->sid);
    wire_put_u64(r->reply, "hb_s", (uint64_t)c->cfg.hb_s);
    wire_put_bool(r->reply, "resumed", resumed);
    wire_put_u64(r->reply, "poll_s",
                 (uint64_t)(c->cfg.node_poll_s < c->cfg.hb_s ? c->cfg.node_poll_s : c->cfg.hb_s));
    wire_put_str(r->reply, "inc", c->incarnation);
}

/*
 * Reads a "req" map (type -> seconds) into rq; count caps the tasks (0: no cap but the
 * reply's). -1 when a key or value is unacceptable.
 */
static int req_parse(const msgpack_object *req, uint32_t count, struct task_req *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->count = count;
    for (uint32_t i = 0; i < req->via.map.size; i++) {
        const msgpack_object *k = &req->via.map.ptr[i].key, *v = &req->via.map.ptr[i].val;
        double sec;
        if (i >= TASK_REQ_TYPES || k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
            k->via.str.size >= sizeof rq->type[0] || memchr(k->via.str.ptr, 0, k->via.str.size))
            return -1;
        if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            sec = (double)v->via.u64;
        else if (v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64)
            sec = v->via.f64;
        else
            return -1;
        if (!(sec >= 0 && sec <= 1e9))
            return -1; /* also NaN */
        memcpy(rq->type[i], k->via.str.ptr, k->via.str.size);
        rq->left[i] = sec;
        rq->ntypes++;
    }
    return 0;
}

/*
 * Writes a TASKS reply with up to want tasks for n; acked < 0 leaves "acked" out; stale
 * > 0 adds "stale" (results of another incarnation, acknowledged and dropped).
 */
static void reply_tasks(struct cluster *c, struct request *r, struct node *n, uint32_t want,
                        int64_t acked, uint32_t stale)
{
    uint32_t count = 0, nnone = 0;
    int64_t qwait = tasks_quota_wait_s(c, n);
    bool cancels = n->ncancels > 0;
    struct task_req rq;
    const msgpack_object *req = wire_get(r->msg->root, "req");
    if (req && req_parse(req, want, &rq) < 0) {
        cluster_reply_error(r, WE_FIELD,
                            "req must map processor type names (1-31 bytes: \"cpu\" "
                            "or a GPU type) to seconds, numbers from 0 to 1e9");
        return;
    }
    if (req)
        want = rq.count ? rq.count : 1; /* for the quota reason below: work was asked for */
    /* a request in seconds gets "none": its types that got nothing (no work for them) */
    wire_begin(r->reply, WT_TASKS, r->msg->id,
               3 + (acked >= 0) + (qwait > 0 && want > 0) + cancels + (stale > 0) + !!req);
    if ((req ? tasks_issue_req(c, n, &rq, r->reply, &count)
             : tasks_issue(c, n, want, r->reply, &count)) < 0) {
        reply_storage(c, r); /* undoes the turn: nothing half-issued survives */
        return;
    }
    qwait = count ? 0 : tasks_quota_wait_s(c, n); /* the quota may have run out now */
    wire_put_bool(r->reply, "more", count > 0 || work_remains(c));
    wire_put_u64(r->reply, "wait_s",
                 count                        ? 0
                 : qwait > c->cfg.idle_wait_s ? (uint64_t)qwait
                                              : (uint64_t)c->cfg.idle_wait_s);
    if (acked >= 0)
        wire_put_u64(r->reply, "acked", (uint64_t)acked);
    if (qwait > 0 && want > 0) {
        char why[160];
        snprintf(why, sizeof why,
                 "daily quota of %u task(s) used after node-side errors; next tasks in %lld s",
                 n->quota, (long long)qwait);
        wire_put_str(r->reply, "reason", why);
    }
    if (cancels)
        tasks_cancel_put(n, r->reply);
    if (stale > 0)
        wire_put_u64(r->reply, "stale", stale);
    if (req) {
        /* only when work ran out: a type left out by a cap (want, reply size) or the
           quota (wait_s, reason) has work, and must not make the client back off */
        bool dry = rq.dry && qwait <= 0;
        for (uint32_t i = 0; i < rq.ntypes && dry; i++)
            nnone += rq.asked[i] && !rq.got[i];
        wire_put_key(r->reply, "none");
        wire_pack_array(r->reply, nnone);
        for (uint32_t i = 0; i < rq.ntypes && dry; i++)
            if (rq.asked[i] && !rq.got[i])
                wire_pack_str(r->reply, rq.type[i]);
    }
}

static void h_task_get(struct cluster *c, struct request *r)
{
    struct node *n = session(c, r);
    if (n)
        reply_tasks(c, r, n, (uint32_t)wire_get_u64(r->msg->root, "want", 1), -1, 0);
}

/*
 * Accepts every result of the message's "results"; -1 if the store failed. Results sent
 * with the incarnation "inc" of another state (the state directory was reset since the
 * node got the tasks) are acknowledged but dropped, with a log line: job ids restart
 * with a new state, so storing them would attach old output to new jobs. *stale counts
 * them. A message without "inc" (an older node) is taken as it is.
 */
static int take_results(struct cluster *c, struct node *n, const msgpack_object *m, uint32_t *count,
                        uint32_t *stale)
{
    const msgpack_object *res = wire_get(m, "results");
    size_t il;
    const char *inc = wire_get_str(m, "inc", &il);
    *count = *stale = 0;
    if (!res)
        return 0;
    if (inc && !(il == strlen(c->incarnation) && !memcmp(inc, c->incarnation, il))) {
        *count = *stale = res->via.array.size;
        c->stale_results += *stale;
        log_warnx("node %s (%s): dropped %u result(s) of tasks from another cluster state "
                  "(incarnation %.*s, this state is %s)",
                  n->name, n->sid, *stale, (int)(il > 64 ? 64 : il), inc, c->incarnation);
        return 0;
    }
    for (uint32_t i = 0; i < res->via.array.size; i++) {
        if (tasks_result(c, n, &res->via.array.ptr[i]) < 0)
            return -1;
        (*count)++;
    }
    return 0;
}

static void h_result(struct cluster *c, struct request *r)
{
    struct node *n = session(c, r);
    uint32_t acked, stale;
    if (!n)
        return;
    if (take_results(c, n, r->msg->root, &acked, &stale) < 0) {
        reply_storage(c, r);
        return;
    }
    reply_tasks(c, r, n, (uint32_t)wire_get_u64(r->msg->root, "want", 0), acked, stale);
}

static void h_leave(struct cluster *c, struct request *r)
{
    struct node *n = session(c, r);
    uint32_t acked, stale;
    if (!n)
        return;
    if (take_results(c, n, r->msg->root, &acked, &stale) < 0) {
        reply_storage(c, r);
        return;
    }
    tasks_release_node(c, n);
    scored_node_left(c, n, "left");
    n->active = false;
    log_info("node %s (%s) left with %u result(s)", n->name, n->sid, acked);
    wire_begin(r->reply, WT_OK, r->msg->id, 0);
}

static void h_status(struct cluster *c, struct request *r)
{
    struct node *n = session(c, r);
    if (!n)
        return;
    const msgpack_object *run = wire_get(r->msg->root, "running");
    uint32_t ncancel = 0;
    uint8_t *cancel = calloc(run->via.array.size + 1, 1);
    if (!cancel) {
        reply_storage(c, r);
        return;
    }
    for (uint32_t i = 0; i < run->via.array.size; i++) {
        const msgpack_object *t = &run->via.array.ptr[i];
        uint64_t jid = wire_get_u64(t, "job", 0);
        uint32_t idx = (uint32_t)wire_get_u64(t, "idx", 0);
        struct job *j = cluster_job_find(c, jid);
        if (!j || j->state == JS_CANCELLED || idx >= j->next_new ||
            j->tasks[idx].state == TS_DONE) {
            cancel[i] = 1;
            ncancel++;
            continue;
        }
        tasks_extend(c, n, jid, idx, (uint32_t)wire_get_u64(t, "issue", 0));
    }
    n->ncancels = 0; /* this reply names every running task that is to stop */
    wire_begin(r->reply, WT_STATUS_ACK, r->msg->id, 1);
    wire_put_key(r->reply, "cancel");
    wire_pack_array(r->reply, ncancel);
    for (uint32_t i = 0; i < run->via.array.size; i++)
        if (cancel[i])
            wire_pack_object(r->reply, &run->via.array.ptr[i]);
    free(cancel);
}

/* Checks a SUBMIT beyond its descriptor; NULL if fine, else the reason. */
static const char *submit_invalid(const struct cluster *c, const msgpack_object *m)
{
    const msgpack_object *argv = wire_get(m, "argv"), *in = wire_get(m, "stdin");
    uint64_t ntasks = wire_get_u64(m, "ntasks", 0);
    double cx = wire_get_f64(m, "complexity", 1);
    (void)c;
    const char *bad = jobargv_problem(argv); /* the same check at batch and meta */
    if (bad)
        return bad;
    if (ntasks == 0)
        return "ntasks must be at least 1";
    if (in && in->via.array.size != ntasks)
        return "stdin, when given, must have exactly one element per task";
    if (!(cx > 0) || !isfinite(cx))
        return "complexity must be a positive number";
    if (wire_get(m, "limit_s") && wire_get_u64(m, "limit_s", 0) == 0)
        return "limit_s must be at least 1 second";
    if (wire_get(m, "deadline_s") && wire_get_u64(m, "deadline_s", 0) == 0)
        return "deadline_s must be at least 1 second";
    size_t gl;
    const char *gt = wire_get_str(m, "gpu_type", &gl);
    if (gt && wire_get_u64(m, "gpus", 0) == 0)
        return "gpu_type needs gpus (the GPU instances each task uses) of at least 1";
    if (gt && (gl == 0 || (gl == 3 && !memcmp(gt, "cpu", 3)) || memchr(gt, 0, gl)))
        return "gpu_type must name a GPU type (e.g. nvidia, amd, intel), not be empty or cpu";
    return NULL;
}

static void h_submit(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root, *argv = wire_get(m, "argv");
    const msgpack_object *in = wire_get(m, "stdin");
    const char *why = submit_invalid(c, m);
    char ewhy[160];
    if (!why && jobenv_check(m, ewhy, sizeof ewhy) < 0) /* --export, --chdir (issue 15) */
        why = ewhy;
    if (!why)
        why = subkey_invalid(m);
    char fwhy[400];
    if (!why) /* issue 26: inputs are whole files the cluster holds */
        why = files_submit_check(c, m, wire_get_u64(m, "ntasks", 0), fwhy, sizeof fwhy);
    if (why) {
        cluster_reply_error(r, WE_INVALID, "SUBMIT refused: %s", why);
        return;
    }
    struct job *j = subkey_find_job(c, m);
    struct depend *dep = NULL;
    char dwhy[300];
    if (!j && jobdep_submit(c, m, &dep, dwhy, sizeof dwhy) < 0) { /* issue 27 */
        cluster_reply_error(r, WE_INVALID, "SUBMIT refused: %s", dwhy);
        return;
    }
    if (j) { /* a retry of a submission that was stored: the same job again */
        log_info("job %llu: SUBMIT repeated with the same key, not stored again",
                 (unsigned long long)j->id);
        wire_begin(r->reply, WT_SUBMITTED, r->msg->id, 2);
        wire_put_u64(r->reply, "job", j->id);
        wire_put_bool(r->reply, "repeat", true);
        return;
    }
    j = calloc(1, sizeof *j);
    if (!j) {
        jobdep_free(dep);
        goto oom;
    }
    j->dep = dep;                                                        /* freed with j */
    if (wire_get_constraint(m, &j->constraint, dwhy, sizeof dwhy) < 0 || /* issue 27 */
        constraint_job_ok(j->constraint, false, 1, dwhy, sizeof dwhy) < 0) {
        cluster_job_free(j);
        cluster_reply_error(r, WE_INVALID, "SUBMIT refused: %s", dwhy);
        return;
    }
    if (!(j->argv = calloc(argv->via.array.size + 1, sizeof *j->argv)))
        goto oom;
    j->id = c->next_job;
    j->argc = argv->via.array.size;
    for (uint32_t i = 0; i < j->argc; i++)
        if (!(j->argv[i] =
                  strndup(argv->via.array.ptr[i].via.str.ptr, argv->via.array.ptr[i].via.str.size)))
            goto oom;
    j->name = wire_get_strdup(m, "name");
    j->user = wire_get_strdup(m, "user");
    if (!j->name)
        j->name = strdup("");
    if (!j->user)
        j->user = strdup("");
    if (wire_get(m, "key") && !(j->key = wire_get_strdup(m, "key")))
        goto oom;
    if (wire_get(m, "host") && !(j->host = wire_get_strdup(m, "host"))) /* issue 26 */
        goto oom;
    uint32_t nenv;
    int eoom;
    j->env = jobenv_dup(m, &nenv, &eoom);
    if (eoom || (wire_get(m, "chdir") && !(j->cwd = wire_get_strdup(m, "chdir"))))
        goto oom;
    j->ntasks = (uint32_t)wire_get_u64(m, "ntasks", 1);
    j->shell = wire_get_bool(m, "shell", false);
    j->network = wire_get_bool(m, "network", false); /* submit --network (issue 23) */
    j->complexity = wire_get_f64(m, "complexity", 1);
    j->limit_s = (uint32_t)wire_get_u64(m, "limit_s", (uint64_t)c->cfg.default_limit_s);
    /* the deadline in effect is kept with the job: a later config change keeps it */
    j->deadline_s = (uint32_t)wire_get_u64(m, "deadline_s", (uint64_t)c->cfg.deadline_s);
    j->gpus = (uint16_t)wire_get_u64(m, "gpus", 0);
    wire_get_strbuf(m, "gpu_type", j->gpu_type, sizeof j->gpu_type);
    j->has_stdin = in != NULL;
    j->submitted_ms = wall_now_ms();
    j->state = JS_QUEUED;
    if (!j->name || !j->user)
        goto oom;
    if ((why = valid_submit(c, j, m))) { /* replicas, quorum, validator, known answers */
        /* out of memory: known answers may be half-buffered, the turn is undone; any
           other reason is found before anything is buffered */
        if (!strcmp(why, "out of memory"))
            goto oom;
        cluster_job_free(j);
        cluster_reply_error(r, WE_INVALID, "SUBMIT refused: %s", why);
        return;
    }
    for (uint32_t i = 0; in && i < in->via.array.size; i++) {
        uint8_t key[12];
        store_key_u64_u32(key, j->id, i);
        if (store_put(c->store, c->t_stdin, key, sizeof key, in->via.array.ptr[i].via.bin.ptr,
                      in->via.array.ptr[i].via.bin.size) < 0)
            goto oom;
    }
    if (files_job_attach(c, j, m) < 0 || cluster_job_add(c, j) < 0)
        goto oom;
    c->next_job++;
    c->meta_dirty = true;
    cluster_mark_job(c, j);
    log_info("job %llu submitted: %u tasks of '%s'", (unsigned long long)j->id, j->ntasks,
             j->argv[0]);
    wire_begin(r->reply, WT_SUBMITTED, r->msg->id, 1);
    wire_put_u64(r->reply, "job", j->id);
    return;
oom:
    cluster_job_free(j);
    reply_storage(c, r); /* stdin may be half-buffered: the whole turn is undone */
}

/* The page size a list request asks for ("count"; default CLUSTER_LIST_COUNT). */
static uint32_t list_count(const struct request *r)
{
    uint64_t n = wire_get_u64(r->msg->root, "count", CLUSTER_LIST_COUNT);
    return n == 0 ? 1 : (uint32_t)n;
}

/* Finishes a list reply: key + the rows built in rows, then "next" when cut short. */
static void list_reply(struct request *r, uint32_t type, const char *key, struct wire_buf *rows,
                       uint32_t n, bool more, uint64_t next)
{
    wire_begin(r->reply, type, r->msg->id, more ? 2 : 1);
    wire_put_key(r->reply, key);
    wire_pack_array(r->reply, n);
    msgpack_sbuffer_write(&r->reply->sb, rows->sb.data, rows->sb.size);
    if (more)
        wire_put_u64(r->reply, "next", next);
}

/*
 * Bag jobs and parallel jobs share one id space: both lists, merged by id, from the job
 * id "from" on; a page ends at "count" rows or CLUSTER_LIST_MAX bytes ("next": the id of
 * the first job left out).
 */
static void h_job_list(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    uint64_t from = wire_get_u64(r->msg->root, "from", 0);
    uint32_t i = 0, k = 0, np = c->sd ? c->sd->njobs : 0, count = list_count(r), n = 0;
    while (i < c->njobs && c->jobs[i]->id < from) /* ids ascend: a short skip in practice */
        i++;
    while (k < np && c->sd->jobs[k]->id < from)
        k++;
    struct wire_buf rows;
    wire_buf_init(&rows);
    uint64_t next = 0;
    while (i < c->njobs || k < np) {
        bool bag = k >= np || (i < c->njobs && c->jobs[i]->id < c->sd->jobs[k]->id);
        uint64_t id = bag ? c->jobs[i]->id : c->sd->jobs[k]->id;
        if (n >= count || (n > 0 && rows.sb.size > CLUSTER_LIST_MAX)) {
            next = id;
            break;
        }
        if (bag) {
            const struct job *j = c->jobs[i++];
            /* with CURVE on, a user lists only its own jobs */
            if (!curve_may_touch(j->user) ||
                !joblist_allows(m, j->user, job_state_shown(j), j->name, -1))
                continue;
            cluster_job_pack(j, &rows, true);
        } else {
            const struct pjob *pj = c->sd->jobs[k++];
            if (!curve_may_touch(pj->user) ||
                !joblist_allows(m, pj->user, pj_state_name(pj->state), pj->name, pj->queue))
                continue;
            scored_pack_job(c, pj, &rows, false);
        }
        n++;
    }
    list_reply(r, WT_JOBS, "jobs", &rows, n, next != 0, next);
    wire_buf_free(&rows);
}

/* Stop adding tasks to one JOB reply beyond this many bytes (frames: 64 MiB). */
#define JOB_REPLY_MAX CLUSTER_REPLY_MAX

struct task_walk {
    struct cluster *c;
    const struct job *j;
    struct wire_buf *wb; /* the task maps only */
    uint32_t next, end, count;
    bool output;
};

/* Writes task maps for indices [w->next, upto) that have no stored result here. */
static void walk_plain(struct task_walk *w, uint32_t upto)
{
    for (; w->next < upto && w->wb->sb.size <= JOB_REPLY_MAX; w->next++, w->count++) {
        const struct task *t = w->next < w->j->next_new ? &w->j->tasks[w->next] : NULL;
        int vr = valid_task_has_results(w->j, w->next);
        uint32_t ck = files_ckpt_row_nfields(w->c, w->j, w->next); /* issue 26 */
        wire_pack_map(w->wb, 3 + (uint32_t)vr + ck);
        files_ckpt_row_pack(w->j, w->next, w->wb);
        wire_put_u64(w->wb, "idx", w->next);
        bool gone = w->j->state == JS_CANCELLED && (!t || t->state != TS_DONE);
        wire_put_str(w->wb, "state", gone ? "cancelled" : t ? task_state_name(t) : "pending");
        wire_put_u64(w->wb, "issues", t ? t->issues : 0);
        if (vr)
            valid_pack_results(w->c, w->j, w->next, w->wb, w->output);
    }
}

/* Stored result keys left out of a JOB task map: the job id, and output unless asked. */
static bool skip_key(const msgpack_object *k, bool output)
{
    if (k->type != MSGPACK_OBJECT_STR)
        return true;
    size_t n = k->via.str.size;
    const char *p = k->via.str.ptr;
    if (n == 3 && !memcmp(p, "job", 3))
        return true;
    return !output && n == 6 && (!memcmp(p, "stdout", 6) || !memcmp(p, "stderr", 6));
}

static int walk_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct task_walk *w = arg;
    if (klen != 12 || store_key_get_u64(key) != w->j->id)
        return 1;
    uint32_t idx = store_key_get_u32((const uint8_t *)key + 8);
    if (idx >= w->end)
        return 1;
    walk_plain(w, idx);
    if (w->next < idx || w->wb->sb.size > JOB_REPLY_MAX)
        return 1; /* the reply is full */
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (wire_precheck(val, vlen) < 0 || msgpack_unpack_next(&up, val, vlen, &off) != 2 ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return 0; /* left for walk_plain */
    }
    const msgpack_object *m = &up.data;
    const struct task *t = idx < w->j->next_new ? &w->j->tasks[idx] : NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->via.map.size; i++)
        n += !skip_key(&m->via.map.ptr[i].key, w->output);
    int vr = valid_task_has_results(w->j, idx);
    uint32_t ck = files_ckpt_row_nfields(w->c, w->j, idx); /* issue 26 */
    wire_pack_map(w->wb, n + 2 + (uint32_t)vr + ck);
    files_ckpt_row_pack(w->j, idx, w->wb);
    if (vr)
        valid_pack_results(w->c, w->j, idx, w->wb, w->output);
    wire_put_str(w->wb, "state", t ? task_state_name(t) : "done");
    wire_put_u64(w->wb, "issues", t ? t->issues : 0);
    for (uint32_t i = 0; i < m->via.map.size; i++)
        if (!skip_key(&m->via.map.ptr[i].key, w->output))
            cluster_pack_result_pair(w->c, &m->via.map.ptr[i].key, &m->via.map.ptr[i].val, w->wb);
    w->next = idx + 1;
    w->count++;
    msgpack_unpacked_destroy(&up);
    return 0;
}

/* JOB for a parallel job: with output, the ranks of [from, from + count) carry theirs. */
static void pjob_get(struct cluster *c, const struct pjob *pj, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    if (!wire_get_bool(m, "output", false)) {
        wire_begin(r->reply, WT_JOB, r->msg->id, 1);
        wire_put_key(r->reply, "job");
        scored_pack_job(c, pj, r->reply, true);
        return;
    }
    uint64_t from = wire_get_u64(m, "from", 0), count = wire_get_u64(m, "count", 1000);
    uint64_t to = from + count < pj->rq.nprocs ? from + count : pj->rq.nprocs;
    struct pj_output po = {(uint32_t)(from < to ? from : to), (uint32_t)to, 0};
    struct wire_buf jb;
    wire_buf_init(&jb);
    scored_pack_job_output(c, pj, &jb, &po);
    bool cut = po.next < po.to; /* too big for one reply: the rest from "next" on */
    wire_begin(r->reply, WT_JOB, r->msg->id, cut ? 2 : 1);
    wire_put_key(r->reply, "job");
    msgpack_sbuffer_write(&r->reply->sb, jb.sb.data, jb.sb.size);
    if (cut)
        wire_put_u64(r->reply, "next", po.next);
    wire_buf_free(&jb);
}

/*
 * With CURVE on, a user sees and cancels only the jobs submitted under its own
 * identity (admins and peer roles: all; docs/security.md). true when allowed, else
 * the DENIED reply is written.
 */
static bool owner_ok(struct request *r, const struct job *j, const struct pjob *pj)
{
    const char *owner = pj ? pj->user : j ? j->user : NULL;
    if ((!j && !pj) || curve_may_touch(owner))
        return true;
    cluster_reply_error(r, WE_DENIED,
                        "job %llu belongs to another user; only its owner and the "
                        "administrators may see or cancel it",
                        (unsigned long long)(pj ? pj->id : j->id));
    return false;
}

/* NOT_FOUND for a request naming job id; `purged` when the id is below next_job (it
 * existed: ids are given in order and never again, and only a purge removes a job), so a
 * level above that followed it takes it as ended, never as lost (docs/wire.md ERROR). */
static void reply_no_job(struct cluster *c, struct request *r, uint64_t id, const char *hint)
{
    wire_buf_reset(r->reply);
    if (id && id < c->next_job)
        wire_error_purged(r->reply, r->msg->id, id, "at this cluster");
    else
        wire_error_msg(r->reply, r->msg->id, WE_NOT_FOUND, "no job %llu%s", (unsigned long long)id,
                       hint);
}

static void h_job_get(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    uint64_t id = wire_get_u64(m, "job", 0);
    struct job *j = cluster_job_find(c, id);
    struct pjob *pj = j || !c->sd ? NULL : scored_job_find(c, id);
    if (!owner_ok(r, j, pj))
        return;
    if (pj) {
        pjob_get(c, pj, r);
        return;
    }
    if (!j) {
        reply_no_job(c, r, id, " (gridnode jobs lists them)");
        return;
    }
    bool tasks = wire_get_bool(m, "tasks", false);
    if (!tasks) {
        wire_begin(r->reply, WT_JOB, r->msg->id, 1);
        wire_put_key(r->reply, "job");
        cluster_job_pack(j, r->reply, false);
        return;
    }
    uint64_t from = wire_get_u64(m, "from", 0), count = wire_get_u64(m, "count", 1000);
    if (from > j->ntasks)
        from = j->ntasks;
    if (count > j->ntasks - from)
        count = j->ntasks - from;
    struct wire_buf tb;
    wire_buf_init(&tb);
    struct task_walk w = {
        c, j, &tb, (uint32_t)from, (uint32_t)(from + count), 0, wire_get_bool(m, "output", false)};
    uint8_t key[12];
    store_key_u64_u32(key, j->id, (uint32_t)from);
    store_iter(c->store, c->t_results, key, sizeof key, walk_result, &w);
    walk_plain(&w, w.end);
    bool cut = w.next < w.end; /* too big for one reply: the rest from "next" on */
    wire_begin(r->reply, WT_JOB, r->msg->id, cut ? 3 : 2);
    wire_put_key(r->reply, "job");
    cluster_job_pack(j, r->reply, false);
    wire_put_key(r->reply, "tasks");
    wire_pack_array(r->reply, w.count);
    msgpack_sbuffer_write(&r->reply->sb, tb.sb.data, tb.sb.size);
    if (cut)
        wire_put_u64(r->reply, "next", w.next);
    wire_buf_free(&tb);
}

/* JOB_WAIT (issue 28): a user's wait for the end of its jobs, held (daemon/endwait.c);
 * admins and peers may also follow the change feed (EVENTS). */
static const char *wait_owner(void *role, uint64_t id, bool *found)
{
    struct cluster *c = role;
    struct job *j = cluster_job_find(c, id);
    struct pjob *pj = j || !c->sd ? NULL : scored_job_find(c, id);
    *found = j || pj;
    return pj ? pj->user : j ? j->user : NULL;
}

static void wait_pack(void *role, uint64_t id, struct wire_buf *row)
{
    struct cluster *c = role;
    struct job *j = cluster_job_find(c, id);
    if (j)
        cluster_job_pack(j, row, false);
    else
        scored_pack_job(c, scored_job_find(c, id), row, true);
}

const struct endwait_ops handlers_endwait_ops = {"", wait_owner, wait_pack};

static void h_job_wait(struct cluster *c, struct request *r)
{
    endwait_request(c->endwait, c->daemon, r->msg, r->reply);
}

/* Whether a job ever handed out a task or started a process (CANCEL `unstarted`). */
static bool ever_started(const struct job *j, const struct pjob *pj)
{
    if (pj) {
        if (pj->requeues ||
            (pj->state != PJ_WAITING && pj->state != PJ_QUEUED && pj->state != PJ_CANCELLED))
            return true;
        for (uint32_t k = 0; pj->ranks && k < pj->rq.nprocs; k++)
            if (pj->ranks[k].st != PR_NEW)
                return true;
        return false;
    }
    for (uint32_t i = 0; i < j->next_new; i++)
        if (j->tasks[i].issues || j->tasks[i].state != TS_NEW)
            return true;
    return false;
}

static void h_cancel(struct cluster *c, struct request *r)
{
    uint64_t id = wire_get_u64(r->msg->root, "job", 0);
    struct job *j = cluster_job_find(c, id);
    struct pjob *pj = j || !c->sd ? NULL : scored_job_find(c, id);
    if (!owner_ok(r, j, pj))
        return;
    if ((j || pj) && wire_get_bool(r->msg->root, "unstarted", false)) { /* a withdrawal */
        if (ever_started(j, pj)) {
            cluster_reply_error(r, WE_STATE, "job %llu has started: it stays here",
                                (unsigned long long)id);
            return;
        }
        if (pj ? pj->state == PJ_CANCELLED : j->state == JS_CANCELLED) { /* withdrawn before */
            wire_begin(r->reply, WT_OK, r->msg->id, 0);
            return;
        }
    }
    if (pj) {
        if (PJ_TERMINAL(pj->state)) {
            cluster_reply_error(r, WE_STATE, "job %llu is already %s", (unsigned long long)id,
                                pj_state_name(pj->state));
            return;
        }
        scored_cancel(c, pj);
        wire_begin(r->reply, WT_OK, r->msg->id, 0);
        return;
    }
    if (!j) {
        reply_no_job(c, r, id, "");
        return;
    }
    if (j->state == JS_DONE || j->state == JS_CANCELLED) {
        cluster_reply_error(r, WE_STATE, "job %llu is already %s", (unsigned long long)id,
                            job_state_shown(j));
        return;
    }
    for (uint32_t i = 0; i < j->next_new; i++) {
        struct task *t = &j->tasks[i];
        if (t->state == TS_ISSUED && t->node < c->nnodes) {
            cluster_cancel_note(c, &c->nodes[t->node], j->id, i, t->issues);
            if (c->nodes[t->node].inflight > 0)
                c->nodes[t->node].inflight--;
            t->node = UINT32_MAX; /* no longer counted against the node */
        }
    }
    valid_cancel(c, j);
    j->state = JS_CANCELLED;
    j->finished_ms = wall_now_ms();
    cluster_mark_job(c, j);
    log_info("job %llu cancelled", (unsigned long long)id);
    wire_begin(r->reply, WT_OK, r->msg->id, 0);
}

/*
 * The node table from position "from" on (positions shift when sessions are forgotten:
 * a page may then repeat or skip a node); a page ends at "count" rows or
 * CLUSTER_LIST_MAX bytes ("next": the position of the first node left out).
 */
static void h_node_list(struct cluster *c, struct request *r)
{
    uint64_t from = wire_get_u64(r->msg->root, "from", 0);
    uint32_t count = list_count(r), n = 0, i = from < c->nnodes ? (uint32_t)from : c->nnodes;
    struct wire_buf rows;
    wire_buf_init(&rows);
    uint32_t *procs = calloc(c->nnodes + 1, sizeof *procs); /* parallel processes per node */
    if (!procs) {
        cluster_reply_error(r, WE_STORAGE, "out of memory");
        wire_buf_free(&rows);
        return;
    }
    cluster_procs_by_node(c, procs);
    for (; i < c->nnodes && n < count && (n == 0 || rows.sb.size <= CLUSTER_LIST_MAX); i++)
        if (!c->nodes[i].gone) { /* forgotten, until the next compaction */
            cluster_node_pack(&c->nodes[i], &rows, true, procs[i]);
            n++;
        }
    free(procs);
    list_reply(r, WT_NODES, "nodes", &rows, n, i < c->nnodes, i);
    wire_buf_free(&rows);
}

/* JOB_CTL op requeue (issue 15, requeue.c): a job starts again from scratch (a parallel
 * job once its processes are gone). */
static void job_requeue(struct cluster *c, struct request *r, struct job *j, uint64_t id)
{
    const char *why = j ? cluster_requeue_refused(j) : NULL;
    struct pjob *pj = !j && c->sd ? scored_job_find(c, id) : NULL;
    if (pj && (why = scored_requeue(c, pj)) != NULL) /* parallel: requeue.c */
        cluster_reply_error(r, WE_STATE, "job %llu %s", (unsigned long long)id, why);
    else if (pj)
        wire_begin(r->reply, WT_OK, r->msg->id, 0);
    else if (!j)
        reply_no_job(c, r, id, "");
    else if (why)
        cluster_reply_error(r, WE_STATE, "job %llu %s", (unsigned long long)id, why);
    else if (cluster_job_requeue(c, j) < 0)
        reply_storage(c, r);
    else
        wire_begin(r->reply, WT_OK, r->msg->id, 0);
}

/*
 * JOB_CTL (issue 15): hold / release a bag-of-tasks job, like Slurm's scontrol hold /
 * release. A held job's tasks are not handed out (new or re-issued); tasks already
 * running finish and their results are kept. The flag is stored with the job.
 */
static void h_job_ctl(struct cluster *c, struct request *r)
{
    uint64_t id = wire_get_u64(r->msg->root, "job", 0);
    size_t n;
    const char *op = wire_get_str(r->msg->root, "op", &n);
    bool hold = n == 4 && !memcmp(op, "hold", 4);
    bool requeue = n == 7 && !memcmp(op, "requeue", 7);
    if (!hold && !requeue && !(n == 7 && !memcmp(op, "release", 7))) {
        cluster_reply_error(r, WE_INVALID, "op must be hold, release or requeue");
        return;
    }
    struct job *j = cluster_job_find(c, id);
    if (!owner_ok(r, j, j || !c->sd ? NULL : scored_job_find(c, id)))
        return; /* the owner or an administrator (issue 15) */
    if (requeue) {
        job_requeue(c, r, j, id);
        return;
    }
    if (!j) {
        bool par = c->sd && scored_job_find(c, id);
        cluster_reply_error(
            r, par ? WE_STATE : WE_NOT_FOUND,
            par ? "job %llu is a parallel job: hold and release are for bags of tasks"
                : "no job %llu",
            (unsigned long long)id);
        return;
    }
    if (j->state == JS_DONE || j->state == JS_CANCELLED) {
        cluster_reply_error(r, WE_STATE, "job %llu is already %s", (unsigned long long)id,
                            job_state_shown(j));
        return;
    }
    if (j->held != hold) {
        j->held = hold;
        cluster_mark_job(c, j);
        log_info("job %llu %s", (unsigned long long)id, hold ? "held" : "released");
    }
    wire_begin(r->reply, WT_OK, r->msg->id, 0);
}

static void h_purge(struct cluster *c, struct request *r)
{
    char err[300];
    int code = 0;
    if (purge_request(c, r->msg->root, r->reply, r->msg->id, err, sizeof err, &code) < 0)
        cluster_reply_error(r, code, "%s", err);
}

static void h_acct(struct cluster *c, struct request *r)
{
    cluster_acct_request(c, r->msg, r->reply);
}

static void h_master_get(struct cluster *c, struct request *r)
{
    master_reply(c, r->msg, r->reply);
}

static const struct {
    uint32_t type;
    void (*fn)(struct cluster *c, struct request *r);
} handlers[] = {
    {WT_HELLO, h_hello},
    {WT_TASK_GET, h_task_get},
    {WT_RESULT, h_result},
    {WT_LEAVE, h_leave},
    {WT_STATUS, h_status},
    {WT_SUBMIT, h_submit},
    {WT_JOB_LIST, h_job_list},
    {WT_JOB_GET, h_job_get},
    {WT_CANCEL, h_cancel},
    {WT_NODE_LIST, h_node_list},
    {WT_PSYNC, h_psync},
    {WT_PSUBMIT, h_psubmit},
    {WT_CONSOLE, h_console},
    {WT_SD_INFO, h_sd_info},
    {WT_PURGE, h_purge},
    {WT_JOB_CTL, h_job_ctl},         /* issue 15 */
    {WT_NODE_CTL, drain_h_node_ctl}, /* issue 15 */
    {WT_EVENTS, h_events},
    {WT_MASTER_GET, h_master_get}, /* issue 11 */
    {WT_ACCT, h_acct},             /* issue 27 */
    {WT_FILE_HAVE, files_h_have},  /* issue 26 */
    {WT_FILE_PUT, files_h_put},
    {WT_FILE_GET, files_h_get},
    {WT_CKPT, files_h_ckpt},
    {WT_TASK_PIN, pin_h_task_pin},
    {WT_WORK_WAIT, workwait_h_wait}, /* issue 26 evidence 8 */
    {WT_JOB_WAIT, h_job_wait},       /* issue 28 */
};

void handlers_dispatch(struct cluster *c, struct request *r)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].type == r->msg->type) {
            handlers[i].fn(c, r);
            return;
        }
    cluster_reply_error(r, WE_TYPE, "%s is not handled by the cluster role", r->msg->desc->name);
}

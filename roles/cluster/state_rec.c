/*
 * state_rec.c - the records of the cluster's state: jobs, tasks, nodes and meta as msgpack
 * values in the store; encoding and writing the changed ones each turn, and loading them
 * at start-up (cluster_load in cluster.c loads the rest of the role's records after them).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon/endwait.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "lib/log.h"
#include "roles/cluster/cluster.h"
#include "store/store.h"
#include "wire/depend.h"
#include "wire/jobenv.h"

static int job_state_parse(const char *s, size_t n)
{
    for (int i = 0; i < 4; i++)
        if (strlen(job_state_name(i)) == n && !memcmp(job_state_name(i), s, n))
            return i;
    return -1;
}

static void job_encode(const struct job *j, struct wire_buf *wb)
{
    wire_pack_map(wb, 18 + (j->key != NULL) + 2 * (j->gpus > 0) + (j->v != NULL) + j->held +
                          j->network + 2 * (j->requeues > 0) + jobenv_put(NULL, j->env, j->cwd) +
                          !!j->dep + !!j->reason + !!j->constraint + !!j->host);
    wire_put_u64(wb, "id", j->id);
    wire_put_str(wb, "name", j->name ? j->name : "");
    wire_put_str(wb, "user", j->user ? j->user : "");
    wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "has_stdin", j->has_stdin);
    wire_put_f64(wb, "complexity", j->complexity);
    wire_put_u64(wb, "limit_s", j->limit_s);
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "next_new", j->next_new);
    wire_put_u64(wb, "ndone", j->ndone);
    wire_put_u64(wb, "nfailed", j->nfailed);
    wire_put_u64(wb, "ndups", j->ndups);
    wire_put_str(wb, "state", job_state_name(j->state));
    wire_put_i64(wb, "submitted", j->submitted_ms);
    wire_put_i64(wb, "finished", j->finished_ms);
    if (j->key)
        wire_put_str(wb, "key", j->key);
    wire_put_u64(wb, "deadline_s", j->deadline_s);
    wire_put_u64(wb, "late", j->nlate);
    if (j->gpus > 0) {
        wire_put_u64(wb, "gpus", j->gpus);
        wire_put_str(wb, "gpu_type", j->gpu_type);
    }
    if (j->v)
        valid_job_encode(j, wb);
    if (j->held)
        wire_put_bool(wb, "held", true);
    if (j->network) /* only when set: a record without it (older ones too) reads false */
        wire_put_bool(wb, "network", true);
    if (j->requeues > 0) {
        wire_put_u64(wb, "requeues", j->requeues);
        wire_put_u64(wb, "rq_issue", j->rq_issue);
    }
    jobenv_put(wb, j->env, j->cwd);
    if (j->dep) { /* issue 27: the terms still waited for (met ones are left out) */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    if (j->reason)
        wire_put_str(wb, "reason", j->reason);
    if (j->constraint) /* issue 27; absent in older records: none */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->host) /* issue 26; absent in older records: any node */
        wire_put_str(wb, "host", j->host);
}

/* A stored "dependency" (issue 27; absent in older records: none). -1: unreadable. */
static int dep_load(struct job *j, const msgpack_object *m)
{
    size_t n;
    const char *s = wire_get_str(m, "dependency", &n);
    char why[160];
    j->reason = wire_get_strdup(m, "reason");
    if (!s || n == 0)
        return wire_get(m, "reason") && !j->reason ? -1 : 0;
    if (!(j->dep = calloc(1, sizeof *j->dep)) || depend_parse(s, n, j->dep, why, sizeof why) < 0) {
        free(j->dep);
        j->dep = NULL;
        return -1;
    }
    return 0;
}

void cluster_node_pack(const struct node *n, struct wire_buf *wb, bool live, uint32_t procs)
{
    bool owner = !live && n->owner[0]; /* stored only: who opened it (sessions.c) */
    wire_pack_map(wb, (live ? 27 + 2 * !!n->drain : 22) + owner + (n->ngpu > 0) +
                          (n->cpu_gflops > 0) + VALID_TRUST_KEYS + !!n->features[0]);
    /* a session id is a node's to know: users see it blank (issue 23) */
    wire_put_str(wb, "sid", live && !curve_may_see_sessions() ? "" : n->sid);
    if (owner)
        wire_put_str(wb, "owner", n->owner);
    wire_put_str(wb, "node", n->name);
    wire_put_str(wb, "cluster", n->cluster);
    wire_put_str(wb, "client", n->client);
    wire_put_str(wb, "os", n->os);
    wire_put_str(wb, "ip", n->ip);
    wire_put_u64(wb, "mhz", n->mhz);
    wire_put_u64(wb, "cores", n->cores);
    wire_put_u64(wb, "slots", n->slots);
    wire_put_u64(wb, "mem_mb", n->mem_mb);
    wire_put_bool(wb, "active", n->active);
    wire_put_i64(wb, "first", n->first_ms);
    wire_put_i64(wb, "last", n->last_ms);
    wire_put_f64(wb, "spu", n->spu);
    wire_put_u64(wb, "results", n->results);
    wire_put_str(wb, "arch", n->arch);
    wire_put_str(wb, "model", n->model);
    wire_put_u64(wb, "disk_mb", n->disk_mb);
    wire_put_bool(wb, "procs", n->procs);
    wire_put_u64(wb, "quota", n->quota);
    wire_put_u64(wb, "quota_used", n->qused);
    wire_put_i64(wb, "quota_day", n->qday_ms);
    if (n->ngpu > 0) {
        wire_put_key(wb, "gpus");
        wire_pack_array(wb, n->ngpu);
        for (uint32_t i = 0; i < n->ngpu; i++) {
            wire_pack_map(wb, 3);
            wire_put_str(wb, "type", n->gpu[i].type);
            wire_put_u64(wb, "count", n->gpu[i].count);
            wire_put_f64(wb, "gflops", n->gpu[i].gflops);
        }
    }
    if (n->cpu_gflops > 0)
        wire_put_f64(wb, "cpu_gflops", n->cpu_gflops);
    if (n->features[0]) /* issue 27: only when declared; older records have none */
        wire_put_str(wb, "features", n->features);
    valid_trust_pack(n, wb);
    if (live) {
        /* its work now: bag tasks and parallel processes (issue 27: a node running a
         * parallel job is not idle); both also apart */
        wire_put_u64(wb, "running", (uint64_t)n->inflight + procs);
        wire_put_u64(wb, "tasks_running", n->inflight);
        wire_put_u64(wb, "procs_running", procs);
        wire_put_u64(wb, "cur_job", n->inflight ? n->cur_job : 0);
        wire_put_i64(wb, "cur_since", n->inflight ? n->cur_since_ms : 0);
        if (n->drain) /* drain.c */
            drain_pack(n, wb);
    }
}

void cluster_pack_result_pair(struct cluster *c, const msgpack_object *k, const msgpack_object *v,
                              struct wire_buf *wb)
{
    wire_pack_object(wb, k);
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 4 &&
        !memcmp(k->via.str.ptr, "node", 4) && !curve_may_see_sessions()) {
        const struct node *n = v->type == MSGPACK_OBJECT_STR
                                   ? cluster_node_find(c, v->via.str.ptr, v->via.str.size)
                                   : NULL;
        wire_pack_str(wb, n ? n->name : "");
    } else {
        wire_pack_object(wb, v);
    }
}

static int put_record(struct cluster *c, int table, const void *key, size_t klen,
                      struct wire_buf *wb)
{
    int rc = store_put(c->store, table, key, klen, wb->sb.data, wb->sb.size);
    wire_buf_reset(wb);
    return rc;
}

int cluster_task_save(struct cluster *c, struct job *j, uint32_t idx)
{
    struct wire_buf wb;
    uint8_t key[12];
    const struct task *t = &j->tasks[idx];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 7 + (t->dl != 0) + (t->dl_prev != 0) + (j->v != NULL));
    if (t->dl)
        wire_put_u64(&wb, "dl", t->dl);
    if (t->dl_prev)
        wire_put_u64(&wb, "dl_prev", t->dl_prev);
    wire_put_u64(&wb, "state", t->state);
    wire_put_u64(&wb, "won", t->won);
    wire_put_bool(&wb, "ok", t->ok);
    wire_put_u64(&wb, "issues", t->issues);
    wire_put_u64(&wb, "errors", t->errors);
    wire_put_str(&wb, "node", t->node < c->nnodes ? c->nodes[t->node].sid : "");
    wire_put_i64(&wb, "expiry", t->expiry_ms);
    if (j->v)
        valid_task_encode(c, j, idx, &wb);
    store_key_u64_u32(key, j->id, idx);
    int rc = put_record(c, c->t_tasks, key, sizeof key, &wb);
    wire_buf_free(&wb);
    return rc;
}

/*
 * A bag job (SUBMIT) saved this turn: an event follows the commit when the state users
 * see (job_state_shown: queued, held, running, done, failed, cancelled) differs from
 * the one last published. Task progress makes no event (a busy cluster would flood the
 * feed); a follower that shows progress reads JOB_GET. `gridnode job --wait` sees a
 * job's end through this within one one-way delay (issue 16).
 */
static void bag_changed(struct cluster *c, struct job *j)
{
    endwait_changed(c->endwait, j->id); /* a JOB_WAIT naming it is looked at (issue 28) */
    if (!c->evt.on || j->ev_shown == job_state_shown(j))
        return;
    cluster_evt_push(&c->evt.bag, &c->evt.nbag, &c->evt.capbag, j->id);
}

int cluster_save_dirty(struct cluster *c)
{
    struct wire_buf wb;
    uint8_t key[8];
    int rc = 0;
    wire_buf_init(&wb);
    uint32_t nd = c->dirty_all ? c->njobs : c->ndirty;
    for (uint32_t i = 0; i < nd; i++) { /* the jobs marked this turn (cluster_mark_job) */
        struct job *j = c->dirty_all ? c->jobs[i] : cluster_job_find(c, c->dirty_ids[i]);
        if (!j || !j->dirty)
            continue; /* purged meanwhile, or listed twice */
        job_encode(j, &wb);
        store_key_u64(key, j->id);
        rc |= put_record(c, c->t_jobs, key, 8, &wb);
        rc |= cluster_acct_bag(c, j, &wb);
        j->dirty = false;
        bag_changed(c, j); /* an event after the commit if its shown state changed */
    }
    for (uint32_t i = 0; i < c->nnodes; i++) {
        struct node *n = &c->nodes[i];
        if (!n->dirty)
            continue;
        cluster_node_pack(n, &wb, false, 0);
        rc |= put_record(c, c->t_nodes, n->sid, strlen(n->sid), &wb);
        n->dirty = false;
    }
    if (c->meta_dirty) {
        wire_pack_u64(&wb, c->next_job);
        rc |= put_record(c, c->t_meta, "next_job", 8, &wb);
        c->meta_dirty = false;
    }
    c->ndirty = 0;
    c->dirty_all = false;
    cluster_acct_turn_end(c);
    wire_buf_free(&wb);
    return rc;
}

int cluster_record_load(struct cluster *c, int table, record_load_fn fn)
{
    long skipped = record_load(c->store, table, fn, c);
    if (skipped < 0)
        return -1;
    c->load_skipped += (uint32_t)skipped;
    return 0;
}

static int load_job(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    unsigned long long kid = (unsigned long long)store_key_get_u64(key);
    (void)klen;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    const msgpack_object *m = &up.data, *argv = wire_get(m, "argv");
    struct job *j = calloc(1, sizeof *j);
    size_t sn;
    const char *st = wire_get_str(m, "state", &sn);
    if (!j || !argv || argv->type != MSGPACK_OBJECT_ARRAY || !st)
        goto bad;
    j->id = wire_get_u64(m, "id", 0);
    j->name = wire_get_strdup(m, "name");
    j->user = wire_get_strdup(m, "user");
    j->key = wire_get_strdup(m, "key");
    j->argc = argv->via.array.size;
    j->argv = calloc(j->argc + 1, sizeof *j->argv);
    for (uint32_t i = 0; j->argv && i < j->argc; i++) {
        const msgpack_object *a = &argv->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_STR)
            goto bad;
        j->argv[i] = strndup(a->via.str.ptr, a->via.str.size);
    }
    j->shell = wire_get_bool(m, "shell", false);
    j->has_stdin = wire_get_bool(m, "has_stdin", false);
    j->complexity = wire_get_f64(m, "complexity", 1);
    j->limit_s = (uint32_t)wire_get_u64(m, "limit_s", 3600);
    j->ntasks = (uint32_t)wire_get_u64(m, "ntasks", 0);
    j->next_new = (uint32_t)wire_get_u64(m, "next_new", 0);
    j->ndone = (uint32_t)wire_get_u64(m, "ndone", 0);
    j->nfailed = (uint32_t)wire_get_u64(m, "nfailed", 0);
    j->ndups = (uint32_t)wire_get_u64(m, "ndups", 0);
    int s = job_state_parse(st, sn);
    j->state = s < 0 ? JS_QUEUED : (enum job_state)s;
    j->submitted_ms = wire_get_i64(m, "submitted", 0);
    j->finished_ms = wire_get_i64(m, "finished", 0);
    j->deadline_s = (uint32_t)wire_get_u64(m, "deadline_s", 0);
    j->nlate = (uint32_t)wire_get_u64(m, "late", 0);
    j->gpus = (uint16_t)wire_get_u64(m, "gpus", 0);
    wire_get_strbuf(m, "gpu_type", j->gpu_type, sizeof j->gpu_type);
    j->issuable = true;
    if (valid_job_load(j, m) < 0)
        goto bad;
    j->held = wire_get_bool(m, "held", false);
    j->network = wire_get_bool(m, "network", false); /* issue 23; absent before it */
    j->requeues = (uint32_t)wire_get_u64(m, "requeues", 0);
    j->rq_issue = (uint32_t)wire_get_u64(m, "rq_issue", 0);
    uint32_t nenv;
    int oom;
    j->env = jobenv_dup(m, &nenv, &oom);
    j->cwd = wire_get_strdup(m, "chdir");
    if (oom || (wire_get(m, "chdir") && !j->cwd) || dep_load(j, m) < 0)
        goto bad;
    char cwhy[160]; /* submit --constraint (issue 27): absent in older records */
    if (wire_get_constraint(m, &j->constraint, cwhy, sizeof cwhy) < 0)
        goto bad;
    if (wire_get(m, "host") && !(j->host = wire_get_strdup(m, "host")))
        goto bad;
    if (!j->argv || !j->name || !j->user || j->next_new > j->ntasks ||
        job_grow_tasks(j, j->next_new) < 0 || cluster_job_add(c, j) < 0)
        goto bad;
    msgpack_unpacked_destroy(&up);
    return RECORD_TAKEN;
bad:
    log_warnx("jobs: skipping a malformed job record (key %llu)", kid);
    c->load_skipped++;
    cluster_job_free(j);
    msgpack_unpacked_destroy(&up);
    return RECORD_IGNORED;
}

/*
 * The GPU types and CPU speed of a HELLO or a stored node record into n. Returns NULL,
 * or why the declaration is unacceptable (n then declares no GPU).
 */
const char *cluster_node_load_gpus(struct node *n, const msgpack_object *m)
{
    const msgpack_object *g = wire_get(m, "gpus");
    double cg = wire_get_f64(m, "cpu_gflops", 0);
    n->ngpu = 0;
    n->cpu_gflops = isfinite(cg) && cg > 0 && cg < 1e9 ? (float)cg : 0;
    if (wire_get(m, "cpu_gflops") && n->cpu_gflops == 0)
        return "cpu_gflops must be a positive number below 1e9";
    if (!g || g->type != MSGPACK_OBJECT_ARRAY)
        return NULL;
    for (uint32_t i = 0; i < g->via.array.size && i < NODE_GPU_TYPES; i++) {
        const msgpack_object *e = &g->via.array.ptr[i];
        struct node_gpu *d = &n->gpu[n->ngpu];
        double fl = wire_get_f64(e, "gflops", 0);
        wire_get_strbuf(e, "type", d->type, sizeof d->type);
        d->count = (uint32_t)wire_get_u64(e, "count", 0);
        d->gflops = isfinite(fl) && fl > 0 && fl < 1e9 ? (float)fl : 0;
        if (!d->type[0] || !strcmp(d->type, "cpu") || strlen(d->type) >= sizeof d->type - 1)
            goto bad_type;
        for (uint32_t k = 0; k < n->ngpu; k++)
            if (!strcmp(n->gpu[k].type, d->type))
                goto bad_type;
        if (d->count == 0)
            continue; /* declared but none present: no GPU of that type */
        n->ngpu++;
    }
    return NULL;
bad_type:
    n->ngpu = 0;
    return "gpus: each type must be a distinct non-empty name other than \"cpu\", at most "
           "30 bytes";
}

static int load_node(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    int rc = RECORD_TAKEN;
    if (klen == 0 || klen >= sizeof c->nodes[0].sid || cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    const msgpack_object *m = &up.data;
    struct node *n = cluster_node_new(c);
    if (!n) {
        log_warnx("nodes: out of memory loading node '%.*s'", (int)klen, (const char *)key);
        c->load_skipped++;
        rc = RECORD_IGNORED;
    } else {
        memcpy(n->sid, key, klen);
        n->sid[klen] = '\0';
        wire_get_strbuf(m, "node", n->name, sizeof n->name);
        wire_get_strbuf(m, "cluster", n->cluster, sizeof n->cluster);
        wire_get_strbuf(m, "client", n->client, sizeof n->client);
        wire_get_strbuf(m, "os", n->os, sizeof n->os);
        wire_get_strbuf(m, "ip", n->ip, sizeof n->ip);
        wire_get_strbuf(m, "owner", n->owner, sizeof n->owner); /* absent: "" (older) */
        n->mhz = (uint32_t)wire_get_u64(m, "mhz", 0);
        n->cores = (uint32_t)wire_get_u64(m, "cores", 0);
        n->slots = (uint32_t)wire_get_u64(m, "slots", 0);
        n->mem_mb = wire_get_u64(m, "mem_mb", 0);
        n->active = wire_get_bool(m, "active", false);
        n->first_ms = wire_get_i64(m, "first", 0);
        n->last_ms = wire_get_i64(m, "last", 0);
        n->spu = wire_get_f64(m, "spu", 0);
        n->results = wire_get_u64(m, "results", 0);
        wire_get_strbuf(m, "arch", n->arch, sizeof n->arch);
        wire_get_strbuf(m, "model", n->model, sizeof n->model);
        n->disk_mb = wire_get_u64(m, "disk_mb", 0);
        n->procs = wire_get_bool(m, "procs", false);
        n->quota = (uint32_t)wire_get_u64(m, "quota", 0); /* 0: full (set at first use) */
        n->qused = (uint32_t)wire_get_u64(m, "quota_used", 0);
        n->qday_ms = wire_get_i64(m, "quota_day", 0);
        cluster_node_load_gpus(n, m);
        char fwhy[160]; /* a damaged list: no features, the next HELLO sends them again */
        cluster_node_load_features(n, m, fwhy, sizeof fwhy);
        valid_trust_load(n, m);
        cluster_node_register(c);
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

static int load_task(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    int rc = RECORD_TAKEN;
    (void)klen;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    struct job *j = cluster_job_find(c, store_key_get_u64(key));
    uint32_t idx = store_key_get_u32(key + 8);
    if (!j || idx >= j->next_new) {
        rc = RECORD_IGNORED;
        log_warnx("tasks: skipping task %u of job %llu: %s", idx,
                  (unsigned long long)store_key_get_u64(key),
                  j ? "beyond the tasks the job issued" : "no such job loaded");
        c->load_skipped++;
    } else {
        const msgpack_object *m = &up.data;
        struct task *t = &j->tasks[idx];
        size_t sl;
        const char *sid = wire_get_str(m, "node", &sl);
        struct node *n = cluster_node_find(c, sid, sl);
        t->state = (uint8_t)wire_get_u64(m, "state", TS_NEW);
        t->ok = wire_get_bool(m, "ok", false);
        t->issues = (uint32_t)wire_get_u64(m, "issues", 0);
        t->errors = (uint16_t)wire_get_u64(m, "errors", 0);
        t->won = (uint32_t)wire_get_u64(m, "won", 0);
        t->expiry_ms = wire_get_i64(m, "expiry", 0);
        t->dl = (uint32_t)wire_get_u64(m, "dl", 0);
        t->dl_prev = (uint32_t)wire_get_u64(m, "dl_prev", 0);
        t->node = n ? (uint32_t)(n - c->nodes) : UINT32_MAX;
        if (j->v) {
            t->node = UINT32_MAX; /* its copies are in validate.c */
            valid_task_load(c, j, idx, m);
        } else if (t->state == TS_ISSUED && j->state == JS_RUNNING) {
            /* give live nodes one heartbeat period to report after our restart */
            int64_t grace = wall_now_ms() + c->cfg.hb_s * 1000 * 2;
            if (t->expiry_ms < grace)
                t->expiry_ms = grace;
            heap_push(c, (struct heap_ent){t->expiry_ms, j->id, idx, t->issues});
            if (n)
                n->inflight++;
        }
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

/*
 * The state's incarnation (issue #8 item 8): a random id made when the state is created
 * and kept in meta, so that results of tasks handed out by an earlier state (before the
 * state directory was reset) are told apart from those of today's jobs with the same ids.
 * Written at once (the caller commits before serving).
 */
static int load_incarnation(struct cluster *c)
{
    void *val;
    size_t vlen;
    msgpack_unpacked up;
    size_t off = 0;
    c->incarnation[0] = '\0';
    int rc = store_get(c->store, c->t_meta, "incarnation", 11, &val, &vlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        msgpack_unpacked_init(&up);
        if (wire_precheck(val, vlen) == 0 &&
            msgpack_unpack_next(&up, val, vlen, &off) == MSGPACK_UNPACK_SUCCESS &&
            up.data.type == MSGPACK_OBJECT_STR && up.data.via.str.size > 0 &&
            up.data.via.str.size < sizeof c->incarnation) {
            memcpy(c->incarnation, up.data.via.str.ptr, up.data.via.str.size);
            c->incarnation[up.data.via.str.size] = '\0';
        }
        msgpack_unpacked_destroy(&up);
        free(val);
        if (c->incarnation[0])
            return 0;
        log_warnx("meta: unreadable incarnation record; making a new incarnation");
    }
    uint8_t raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        log_warn("cannot make the state's incarnation id");
        return -1;
    }
    for (int i = 0; i < 16; i++)
        snprintf(c->incarnation + 2 * i, 3, "%02x", raw[i]);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_str(&wb, c->incarnation);
    rc = store_put(c->store, c->t_meta, "incarnation", 11, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    log_info("new state: incarnation %s", c->incarnation);
    return rc;
}

static int load_meta(struct cluster *c)
{
    void *val;
    size_t vlen;
    if (load_incarnation(c) < 0)
        return -1;
    c->next_job = 1;
    int rc = store_get(c->store, c->t_meta, "next_job", 8, &val, &vlen);
    if (rc == 0) {
        msgpack_unpacked up;
        size_t off = 0;
        msgpack_unpacked_init(&up);
        if (wire_precheck(val, vlen) == 0 && /* a damaged record: no huge alloc */
            msgpack_unpack_next(&up, val, vlen, &off) == MSGPACK_UNPACK_SUCCESS &&
            up.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            c->next_job = up.data.via.u64;
        msgpack_unpacked_destroy(&up);
        free(val);
    }
    return rc < 0 ? -1 : 0;
}

int cluster_load_records(struct cluster *c)
{
    if (load_meta(c) < 0 || cluster_record_load(c, c->t_nodes, load_node) < 0 ||
        cluster_record_load(c, c->t_jobs, load_job) < 0 ||
        cluster_record_load(c, c->t_tasks, load_task) < 0)
        return -1;
    for (uint32_t i = 0; i < c->njobs; i++)
        if (c->jobs[i]->id >= c->next_job)
            c->next_job = c->jobs[i]->id + 1;
    c->open_from = 0;
    return 0;
}

void cluster_free_records(struct cluster *c)
{
    for (uint32_t i = 0; i < c->njobs; i++)
        cluster_job_free(c->jobs[i]);
    free(c->jobs);
    for (uint32_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].cancels);
    free(c->nodes);
    free(c->node_hash);
    free(c->heap);
    c->jobs = NULL;
    c->nodes = NULL;
    c->node_hash = NULL;
    c->heap = NULL;
    c->njobs = c->capjobs = c->nnodes = c->capnodes = c->hash_cap = c->nheap = c->capheap = 0;
}

void cluster_job_free(struct job *j)
{
    if (!j)
        return;
    for (uint32_t i = 0; i < j->argc; i++)
        free(j->argv[i]);
    free(j->argv);
    free(j->name);
    free(j->user);
    free(j->key);
    jobenv_free(j->env);
    free(j->cwd);
    free(j->tasks);
    if (j->dep)
        depend_free(j->dep);
    free(j->dep);
    free(j->reason);
    free(j->data); /* issue 26 */
    free(j->constraint);
    free(j->host);
    valid_job_free(j);
    free(j);
}

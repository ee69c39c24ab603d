/*
 * scored_store.c - parallel jobs and console settings as store records: the "pjobs"
 * table (job id -> msgpack map, hosts by session id, one map per process) and the
 * "scored" table ("settings": queues and cluster limits; "rc": the startup file was
 * applied). Loaded at start-up, written when changed, in the turn's commit.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/endwait.h"
#include "daemon/loop.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"
#include "wire/depend.h"
#include "wire/jobenv.h"

const char *pj_state_name(enum pj_state s)
{
    static const char *n[] = {"waiting", "queued", "running",   "stopped",   "done",
                              "failed",  "killed", "cancelled", "requeueing"};
    return (unsigned)s < 9 ? n[s] : "?";
}

static int pj_state_parse(const char *s, size_t n)
{
    for (int i = 0; i < 9; i++)
        if (strlen(pj_state_name(i)) == n && !memcmp(pj_state_name(i), s, n))
            return i;
    return -1;
}

void scored_job_free(struct pjob *j)
{
    if (!j)
        return;
    for (uint32_t i = 0; i < j->argc; i++)
        free(j->argv[i]);
    for (uint32_t i = 0; j->ranks && i < j->rq.nprocs; i++)
        free(j->ranks[i].error);
    free(j->argv);
    free(j->name);
    free(j->user);
    free(j->group);
    free(j->key);
    free(j->hosts);
    free(j->ranks);
    jobenv_free(j->env);
    free(j->cwd);
    if (j->dep)
        depend_free(j->dep);
    free(j->dep);
    free(j->constraint);
    free(j->ck); /* issue 26: files_pckpt.c */
    free(j->data);
    free(j);
}

/* A stored "dependency" (issue 27; absent in older records: none). -1: unreadable. */
static int pdep_load(struct pjob *j, const msgpack_object *m)
{
    size_t n;
    const char *s = wire_get_str(m, "dependency", &n);
    char why[160];
    if (!s || n == 0)
        return 0;
    if (!(j->dep = calloc(1, sizeof *j->dep)) || depend_parse(s, n, j->dep, why, sizeof why) < 0) {
        free(j->dep);
        j->dep = NULL;
        return -1;
    }
    return 0;
}

struct pjob *scored_job_find(struct cluster *c, uint64_t id)
{
    struct scored *sd = c->sd;
    uint32_t lo = 0, hi = sd->njobs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (sd->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sd->njobs && sd->jobs[lo]->id == id ? sd->jobs[lo] : NULL;
}

/* Adds a job keeping the array sorted by id (ids only grow, except while loading). */
int scored_job_add(struct cluster *c, struct pjob *j)
{
    struct scored *sd = c->sd;
    if (sd->njobs == sd->cap) {
        uint32_t cap = sd->cap ? sd->cap * 2 : 16;
        struct pjob **n = realloc(sd->jobs, cap * sizeof *n);
        if (!n)
            return -1;
        sd->jobs = n;
        sd->cap = cap;
    }
    if (subkey_index_pjob(c, j) < 0) /* nothing changed yet but the capacity */
        return -1;
    uint32_t i = sd->njobs;
    while (i > 0 && sd->jobs[i - 1]->id > j->id) {
        sd->jobs[i] = sd->jobs[i - 1];
        i--;
    }
    sd->jobs[i] = j;
    sd->njobs++;
    return 0;
}

/* ---- encoding ---- */

static const char *host_sid(const struct cluster *c, uint32_t h)
{
    return h < c->nnodes ? c->nodes[h].sid : "";
}

static const char *host_name(const struct cluster *c, uint32_t h)
{
    return h < c->nnodes ? c->nodes[h].name : "?";
}

static void job_encode(const struct cluster *c, const struct pjob *j, struct wire_buf *wb)
{
    wire_pack_map(wb, 33 + (j->key != NULL) + (j->requeues > 0) + j->network + j->lost +
                          jobenv_put(NULL, j->env, j->cwd) + !!j->dep + !!j->constraint +
                          (j->data != NULL));
    if (j->data) /* issue 26: its inputs and output globs; absent in older records: none */
        wire_put_bin(wb, "files", j->data, j->data_len);
    if (j->constraint) /* issue 27; absent in older records: none */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->dep) { /* issue 27: the terms still waited for (met ones left out) */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    if (j->requeues > 0)
        wire_put_u64(wb, "requeues", j->requeues);
    if (j->lost) /* only when set, as network */
        wire_put_bool(wb, "lost", true);
    if (j->network) /* only when set: a record without it (older ones too) reads false */
        wire_put_bool(wb, "network", true);
    jobenv_put(wb, j->env, j->cwd);
    if (j->key)
        wire_put_str(wb, "key", j->key);
    wire_put_u64(wb, "id", j->id);
    wire_put_str(wb, "name", j->name);
    wire_put_str(wb, "user", j->user);
    wire_put_str(wb, "group", j->group);
    wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "wait", j->wait);
    wire_put_bool(wb, "placed", j->placed);
    wire_put_u64(wb, "procs", j->rq.nprocs);
    wire_put_u64(wb, "ppn", j->rq.ppn);
    wire_put_u64(wb, "mem_mb", j->rq.mem_mb);
    wire_put_u64(wb, "disk_mb", j->rq.disk_mb);
    wire_put_bool(wb, "coc", j->rq.coc);
    wire_put_u64(wb, "cpu_s", j->req_cpu_s);
    wire_put_u64(wb, "limit_s", j->limit_s);
    wire_put_u64(wb, "queue", j->queue);
    wire_put_u64(wb, "queue0", j->queue0);
    wire_put_u64(wb, "demotions", j->demotions);
    wire_put_str(wb, "state", pj_state_name(j->state));
    wire_put_str(wb, "reason", j->reason);
    wire_put_str(wb, "cluster", j->cluster);
    wire_put_key(wb, "hosts");
    wire_pack_array(wb, j->nhosts);
    for (uint32_t i = 0; i < j->nhosts; i++)
        wire_pack_str(wb, host_sid(c, j->hosts[i]));
    wire_put_u64(wb, "mem_lim", j->mem_lim);
    wire_put_u64(wb, "disk_lim", j->disk_lim);
    wire_put_u64(wb, "max_cpu_s", j->max_cpu_s);
    wire_put_f64(wb, "used_cpu_s", j->cpu_s);
    wire_put_f64(wb, "res_base", j->res_base);
    wire_put_i64(wb, "run_ms", j->run_ms);
    wire_put_i64(wb, "last_ran", j->last_ran_ms);
    wire_put_i64(wb, "submitted", j->submitted_ms);
    wire_put_i64(wb, "started", j->started_ms);
    wire_put_i64(wb, "finished", j->finished_ms);
    wire_put_key(wb, "ranks");
    wire_pack_array(wb, j->ranks ? j->rq.nprocs : 0);
    for (uint32_t i = 0; j->ranks && i < j->rq.nprocs; i++) {
        const struct prank *p = &j->ranks[i];
        wire_pack_map(wb, 6);
        wire_put_u64(wb, "h", p->host);
        wire_put_u64(wb, "st", p->st);
        wire_put_i64(wb, "exit", p->exit);
        wire_put_u64(wb, "sig", p->sig);
        wire_put_f64(wb, "cpu", p->cpu_s);
        wire_put_str(wb, "error", p->error ? p->error : "");
    }
}

static const char *rank_state(const struct prank *p)
{
    return p->st == PR_NEW ? "new" : p->st == PR_STARTED ? "started" : "exited";
}

void scored_pack_rank(const struct cluster *c, const struct pjob *j, uint32_t r,
                      struct wire_buf *wb, uint32_t extra)
{
    const struct prank *p = &j->ranks[r];
    wire_pack_map(wb, 9 + extra);
    wire_put_u64(wb, "rank", r);
    wire_put_str(wb, "host", p->host < j->nhosts ? host_name(c, j->hosts[p->host]) : "");
    wire_put_str(wb, "state", rank_state(p));
    wire_put_i64(wb, "exit", p->exit);
    wire_put_u64(wb, "signal", p->sig);
    wire_put_f64(wb, "cpu_s", p->cpu_s);
    wire_put_u64(wb, "rss_kb", p->rss_kb);
    wire_put_u64(wb, "disk_kb", p->disk_kb);
    wire_put_str(wb, "error", p->error ? p->error : "");
}

/* The summary map; with ranks, the per-process table too: its rank maps when maps is set,
 * else only the array's header (scored_pack_job_output packs them with their outputs). */
static void pack_job(const struct cluster *c, const struct pjob *j, struct wire_buf *wb, bool ranks,
                     bool maps)
{
    int64_t run = j->run_ms + (j->state == PJ_RUNNING ? wall_now_ms() - j->slice_ms : 0);
    bool cut = !ranks && cluster_argv_cut(j->argv, (uint32_t)j->argc, CLUSTER_ROW_ARGV_MAX);
    wire_pack_map(wb, (ranks ? 28
                       : cut ? 28
                             : 27) +
                          (j->requeues > 0) + j->lost + !!j->dep + !!j->constraint +
                          (j->ckpt_s > 0) + j->ck_have);
    if (j->ckpt_s) /* submit -p --checkpoint-s (issue 26, files_pckpt.c) */
        wire_put_u64(wb, "checkpoint_s", j->ckpt_s);
    if (j->ck_have) /* the newest generation every rank delivered */
        wire_put_u64(wb, "ckpt_gen", j->ck_gen);
    if (j->constraint) /* submit --constraint (issue 27) */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->dep) { /* issue 27: what it still waits for (reason: the first term) */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    if (j->requeues > 0) /* gridnode requeue (issue 15) */
        wire_put_u64(wb, "requeues", j->requeues);
    if (j->lost) /* failed by a lost host or process (issue 24) */
        wire_put_bool(wb, "lost", true);
    wire_put_bool(wb, "network", j->network); /* submit --network (issue 23) */
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "kind", "parallel");
    wire_put_str(wb, "name", j->name);
    wire_put_str(wb, "user", j->user);
    wire_put_str(wb, "group", j->group);
    wire_put_str(wb, "state", pj_state_name(j->state));
    wire_put_str(wb, "reason", j->reason);
    wire_put_u64(wb, "queue", j->queue);
    wire_put_u64(wb, "queue0", j->queue0);
    wire_put_u64(wb, "demotions", j->demotions);
    wire_put_u64(wb, "procs", j->rq.nprocs);
    wire_put_u64(wb, "ppn", j->rq.ppn);
    wire_put_str(wb, "cluster", j->cluster);
    wire_put_key(wb, "hosts");
    wire_pack_array(wb, j->nhosts);
    for (uint32_t i = 0; i < j->nhosts; i++)
        wire_pack_str(wb, host_name(c, j->hosts[i]));
    wire_put_f64(wb, "cpu_s", j->cpu_s);
    wire_put_f64(wb, "run_s", (double)run / 1000.0);
    wire_put_u64(wb, "mem_lim", j->mem_lim);
    wire_put_u64(wb, "disk_lim", j->disk_lim);
    wire_put_u64(wb, "max_cpu_s", j->max_cpu_s);
    wire_put_u64(wb, "limit_s", j->limit_s);
    wire_put_i64(wb, "submitted", j->submitted_ms);
    wire_put_i64(wb, "started", j->started_ms);
    wire_put_i64(wb, "finished", j->finished_ms);
    if (cut) { /* a list row (JOBS): bounded, see CLUSTER_ROW_ARGV_MAX */
        cluster_put_argv(wb, "argv", j->argv, (uint32_t)j->argc, CLUSTER_ROW_ARGV_MAX);
        wire_put_bool(wb, "argv_trunc", true);
    } else {
        wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    }
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "wait", j->wait);
    if (!ranks)
        return;
    wire_put_key(wb, "ranks");
    wire_pack_array(wb, j->ranks ? j->rq.nprocs : 0);
    for (uint32_t i = 0; j->ranks && maps && i < j->rq.nprocs; i++)
        scored_pack_rank(c, j, i, wb, 0);
}

void scored_pack_job(const struct cluster *c, const struct pjob *j, struct wire_buf *wb, bool ranks)
{
    pack_job(c, j, wb, ranks, true);
}

void scored_pack_job_head(const struct cluster *c, const struct pjob *j, struct wire_buf *wb)
{
    pack_job(c, j, wb, true, false);
}

static void settings_encode(const struct sd_settings *s, struct wire_buf *wb)
{
    wire_pack_map(wb, 2);
    wire_put_key(wb, "queues");
    wire_pack_array(wb, s->nq);
    for (uint32_t i = 0; i < s->nq; i++) {
        const struct sd_queue *q = &s->q[i];
        wire_pack_map(wb, 7);
        wire_put_u64(wb, "state", (uint64_t)q->state);
        wire_put_u64(wb, "mode", (uint64_t)q->mode);
        wire_put_u64(wb, "cpu", q->max_cpu_s);
        wire_put_u64(wb, "res", q->residence_s);
        wire_put_u64(wb, "mem", q->mem_pct);
        wire_put_u64(wb, "disk", q->disk_pct);
        wire_put_str(wb, "group", q->group);
    }
    wire_put_key(wb, "limits");
    wire_pack_array(wb, s->nlim);
    for (uint32_t i = 0; i < s->nlim; i++) {
        wire_pack_map(wb, 4);
        wire_put_str(wb, "cluster", s->lim[i].cluster);
        wire_put_i64(wb, "mem", s->lim[i].mem_mb);
        wire_put_i64(wb, "disk", s->lim[i].disk_mb);
        wire_put_i64(wb, "jobs", s->lim[i].jobs);
    }
}

/* j is being saved: an event follows the commit if its state changed (feed.c). */
static void job_changed(struct cluster *c, struct pjob *j)
{
    endwait_changed(c->endwait, j->id); /* a JOB_WAIT naming it is looked at (issue 28) */
    if (!c->evt.on || j->ev_state == (uint8_t)(j->state + 1))
        return;
    cluster_evt_push(&c->evt.par, &c->evt.npar, &c->evt.cappar, j->id);
}

int scored_save_dirty(struct cluster *c)
{
    struct scored *sd = c->sd;
    struct wire_buf wb;
    uint8_t key[8];
    int rc = 0;
    wire_buf_init(&wb);
    for (uint32_t i = sd->live_from; i < sd->njobs; i++) {
        struct pjob *j = sd->jobs[i];
        if (!j->dirty)
            continue;
        job_changed(c, j);
        job_encode(c, j, &wb);
        store_key_u64(key, j->id);
        rc |= store_put(c->store, sd->t_pjobs, key, 8, wb.sb.data, wb.sb.size);
        wire_buf_reset(&wb);
        rc |= cluster_acct_par(c, j, pj_state_name(j->state), &wb);
        j->dirty = false;
    }
    if (sd->set_dirty) {
        settings_encode(&sd->set, &wb);
        rc |= store_put(c->store, sd->t_scored, "settings", 8, wb.sb.data, wb.sb.size);
        wire_buf_reset(&wb);
        wire_pack_u64(&wb, sd->rc_applied);
        rc |= store_put(c->store, sd->t_scored, "rc", 2, wb.sb.data, wb.sb.size);
        sd->set_dirty = false;
    }
    wire_buf_free(&wb);
    return rc;
}

/* ---- loading ---- */

static int unpack(msgpack_unpacked *up, const void *val, size_t vlen)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    if (wire_precheck(val, vlen) < 0 ||
        msgpack_unpack_next(up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS) {
        msgpack_unpacked_destroy(up);
        return -1;
    }
    return 0;
}

static int load_ranks(struct pjob *j, const msgpack_object *ranks)
{
    if (!ranks || ranks->type != MSGPACK_OBJECT_ARRAY || ranks->via.array.size != j->rq.nprocs)
        return -1;
    for (uint32_t i = 0; i < j->rq.nprocs; i++) {
        const msgpack_object *m = &ranks->via.array.ptr[i];
        struct prank *p = &j->ranks[i];
        size_t el;
        p->host = (uint32_t)wire_get_u64(m, "h", 0);
        p->st = (uint8_t)wire_get_u64(m, "st", 0);
        p->exit = (int32_t)wire_get_i64(m, "exit", 0);
        p->sig = (uint8_t)wire_get_u64(m, "sig", 0);
        p->cpu_s = wire_get_f64(m, "cpu", 0);
        if (wire_get_str(m, "error", &el) && el)
            p->error = wire_get_strdup(m, "error");
        if (p->host >= j->nhosts || p->st > PR_EXITED)
            return -1;
        /* whether the node still holds the process is not stored: for a requeueing job
           assume it does until the node's next PSYNC tells. Its exit may have been
           committed here while the reply that made the node forget it was lost with the
           old process; the node then reports that exit again, and the job must not be
           back in the queue, where the report would count for the new run (requeue.c) */
        p->held = j->state == PJ_REQUEUEING;
    }
    return 0;
}

static int load_hosts(struct cluster *c, struct pjob *j, const msgpack_object *h)
{
    if (!h || h->type != MSGPACK_OBJECT_ARRAY)
        return -1;
    j->nhosts = h->via.array.size;
    if (!(j->hosts = calloc(j->nhosts + 1, sizeof *j->hosts)))
        return -1;
    for (uint32_t i = 0; i < j->nhosts; i++) {
        const msgpack_object *s = &h->via.array.ptr[i];
        struct node *n = s->type == MSGPACK_OBJECT_STR
                             ? cluster_node_find(c, s->via.str.ptr, s->via.str.size)
                             : NULL;
        j->hosts[i] = n ? (uint32_t)(n - c->nodes) : UINT32_MAX;
    }
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
    struct pjob *j = calloc(1, sizeof *j);
    size_t sn;
    const char *st = wire_get_str(m, "state", &sn);
    int s = st ? pj_state_parse(st, sn) : -1;
    if (!j || !argv || argv->type != MSGPACK_OBJECT_ARRAY || s < 0)
        goto bad;
    j->id = wire_get_u64(m, "id", 0);
    j->name = wire_get_strdup(m, "name");
    j->user = wire_get_strdup(m, "user");
    j->group = wire_get_strdup(m, "group");
    j->key = wire_get_strdup(m, "key");
    j->argc = argv->via.array.size;
    if (!(j->argv = calloc(j->argc + 1, sizeof *j->argv)))
        goto bad;
    for (uint32_t i = 0; i < j->argc; i++) {
        const msgpack_object *a = &argv->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_STR ||
            !(j->argv[i] = strndup(a->via.str.ptr, a->via.str.size)))
            goto bad;
    }
    j->shell = wire_get_bool(m, "shell", false);
    j->wait = wire_get_bool(m, "wait", false);
    j->placed = wire_get_bool(m, "placed", false);
    j->network = wire_get_bool(m, "network", false); /* issue 23; absent before it */
    uint32_t nenv;
    int eoom;
    j->env = jobenv_dup(m, &nenv, &eoom);
    j->cwd = wire_get_strdup(m, "chdir");
    if (eoom || (wire_get(m, "chdir") && !j->cwd) || pdep_load(j, m) < 0)
        goto bad;
    char cwhy[160];
    if (wire_get_constraint(m, &j->constraint, cwhy, sizeof cwhy) < 0)
        goto bad;
    size_t dl;
    const void *data = wire_get_bin(m, "files", &dl); /* issue 26 */
    if (data && dl) {
        if (!(j->data = malloc(dl)))
            goto bad;
        memcpy(j->data, data, dl);
        j->data_len = dl;
    }
    j->rq.nprocs = (uint32_t)wire_get_u64(m, "procs", 1);
    j->rq.ppn = (uint32_t)wire_get_u64(m, "ppn", 1);
    j->rq.mem_mb = wire_get_u64(m, "mem_mb", 0);
    j->rq.disk_mb = wire_get_u64(m, "disk_mb", 0);
    j->rq.coc = wire_get_bool(m, "coc", false);
    j->req_cpu_s = wire_get_u64(m, "cpu_s", 0);
    j->limit_s = wire_get_u64(m, "limit_s", 0);
    j->rq.queue = j->queue = (uint32_t)wire_get_u64(m, "queue", 0);
    j->queue0 = (uint32_t)wire_get_u64(m, "queue0", 0);
    j->demotions = (uint32_t)wire_get_u64(m, "demotions", 0);
    j->requeues = (uint32_t)wire_get_u64(m, "requeues", 0);
    j->lost = wire_get_bool(m, "lost", false);
    j->state = (enum pj_state)s;
    j->ev_state = (uint8_t)(s + 1); /* loaded: published (a new epoch resets drivers) */
    wire_get_strbuf(m, "reason", j->reason, sizeof j->reason);
    wire_get_strbuf(m, "cluster", j->cluster, sizeof j->cluster);
    j->mem_lim = wire_get_u64(m, "mem_lim", 0);
    j->disk_lim = wire_get_u64(m, "disk_lim", 0);
    j->max_cpu_s = wire_get_u64(m, "max_cpu_s", 0);
    j->cpu_s = wire_get_f64(m, "used_cpu_s", 0);
    j->res_base = wire_get_f64(m, "res_base", 0);
    j->run_ms = wire_get_i64(m, "run_ms", 0);
    j->last_ran_ms = wire_get_i64(m, "last_ran", 0);
    j->submitted_ms = wire_get_i64(m, "submitted", 0);
    j->started_ms = wire_get_i64(m, "started", 0);
    j->finished_ms = wire_get_i64(m, "finished", 0);
    j->slice_ms = wall_now_ms(); /* a running job's slice restarts with the cluster */
    if (!j->name || !j->user || !j->group || j->rq.nprocs == 0 || j->rq.nprocs > SD_MAXPROCS ||
        !(j->ranks = calloc(j->rq.nprocs, sizeof *j->ranks)) ||
        load_hosts(c, j, wire_get(m, "hosts")) < 0)
        goto bad;
    /*
     * A job never placed on hosts (waiting, or cancelled / failed while waiting) has no
     * process table: it is stored as an empty "ranks" array and loads without one, as
     * it was in memory (admit() makes the table). Any other job must have all its ranks.
     */
    const msgpack_object *rk = wire_get(m, "ranks");
    if (j->nhosts == 0 && rk && rk->type == MSGPACK_OBJECT_ARRAY && rk->via.array.size == 0 &&
        (j->state == PJ_WAITING || PJ_TERMINAL(j->state))) {
        free(j->ranks);
        j->ranks = NULL;
    } else if (load_ranks(j, rk) < 0) {
        goto bad;
    }
    if (scored_job_add(c, j) < 0)
        goto bad;
    if (j->id >= c->next_job)
        c->next_job = j->id + 1;
    msgpack_unpacked_destroy(&up);
    return RECORD_TAKEN;
bad:
    log_warnx("pjobs: skipping a malformed job record (key %llu)", kid);
    c->load_skipped++;
    scored_job_free(j);
    msgpack_unpacked_destroy(&up);
    return RECORD_IGNORED;
}

static void load_settings(struct cluster *c)
{
    struct scored *sd = c->sd;
    void *val;
    size_t vlen;
    msgpack_unpacked up;
    sd_settings_default(&sd->set, (uint32_t)c->cfg.sd_queues);
    sd->rc_applied = false;
    if (store_get(c->store, sd->t_scored, "rc", 2, &val, &vlen) == 0) {
        if (unpack(&up, val, vlen) == 0) {
            sd->rc_applied = up.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER && up.data.via.u64;
            msgpack_unpacked_destroy(&up);
        }
        free(val);
    }
    if (store_get(c->store, sd->t_scored, "settings", 8, &val, &vlen) != 0)
        return;
    if (unpack(&up, val, vlen) == 0) {
        const msgpack_object *qs = wire_get(&up.data, "queues"), *ls = wire_get(&up.data, "limits");
        for (uint32_t i = 0;
             qs && qs->type == MSGPACK_OBJECT_ARRAY && i < qs->via.array.size && i < sd->set.nq;
             i++) {
            const msgpack_object *m = &qs->via.array.ptr[i];
            struct sd_queue *q = &sd->set.q[i];
            q->state = (int)wire_get_u64(m, "state", SDQ_ACTIVATED) % 3;
            q->mode = wire_get_u64(m, "mode", 0) ? SDQ_EXCLUSIVE : SDQ_GANG;
            q->max_cpu_s = wire_get_u64(m, "cpu", 0);
            q->residence_s = wire_get_u64(m, "res", 0);
            q->mem_pct = (uint32_t)wire_get_u64(m, "mem", 0);
            q->disk_pct = (uint32_t)wire_get_u64(m, "disk", 0);
            wire_get_strbuf(m, "group", q->group, sizeof q->group);
        }
        for (uint32_t i = 0; ls && ls->type == MSGPACK_OBJECT_ARRAY && i < ls->via.array.size &&
                             sd->set.nlim < SD_MAXLIM;
             i++) {
            const msgpack_object *m = &ls->via.array.ptr[i];
            struct sd_limit *l = &sd->set.lim[sd->set.nlim++];
            wire_get_strbuf(m, "cluster", l->cluster, sizeof l->cluster);
            l->mem_mb = wire_get_i64(m, "mem", -1);
            l->disk_mb = wire_get_i64(m, "disk", -1);
            l->jobs = wire_get_i64(m, "jobs", 0);
        }
        msgpack_unpacked_destroy(&up);
    }
    free(val);
}

int scored_load(struct cluster *c)
{
    struct scored *sd = c->sd;
    if (!sd)
        return 0;
    load_settings(c);
    return cluster_record_load(c, sd->t_pjobs, load_job);
}

void scored_free_state(struct cluster *c)
{
    struct scored *sd = c->sd;
    if (!sd)
        return;
    for (uint32_t i = 0; i < sd->njobs; i++)
        scored_job_free(sd->jobs[i]);
    free(sd->jobs);
    sd->jobs = NULL;
    sd->njobs = sd->cap = 0;
    sd->live_from = 0;
    subkey_clear_pjobs(sd);
}

void scored_unsettle(struct cluster *c, const struct pjob *j)
{
    struct scored *sd = c->sd;
    uint32_t lo = 0, hi = sd->live_from;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (sd->jobs[mid]->id < j->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sd->live_from && sd->jobs[lo] == j)
        sd->live_from = lo;
}

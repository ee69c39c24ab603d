/*
 * acct.c - the cluster's accounting records (daemon/acct.h, docs/accounting.md): one
 * record per ended bag job (SUBMIT) and parallel job (PSUBMIT), written with the job's
 * end (a bag's CPU and run time summed from its tasks' results); the ACCT request; the
 * retention sweep. Sits low in the module (below
 * state_rec.c and scored_store.c, which call it): it calls only state.c.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/acct.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"

/* Bags larger than this are not summed (a job's end must not hold the loop for long):
 * their records leave CPU time, run time, start and hosts out. */
#define ACCT_SUM_MAX 1000000u

void cluster_acct_note(struct cluster *c, const struct job *j, const msgpack_object *res)
{
    if (j->ntasks > ACCT_SUM_MAX)
        return;
    if (c->nacct_notes == c->capacct_notes) {
        uint32_t cap = c->capacct_notes ? c->capacct_notes * 2 : 64;
        struct acct_note *v = realloc(c->acct_notes, cap * sizeof *v);
        if (!v)
            return; /* the record then misses this task's times */
        c->acct_notes = v;
        c->capacct_notes = cap;
    }
    double wall = wire_get_f64(res, "wall_s", 0);
    c->acct_notes[c->nacct_notes++] = (struct acct_note){j->id, wire_get_f64(res, "cpu_s", 0), wall,
                                                         wall_now_ms() - (int64_t)(wall * 1000.0)};
}

void cluster_acct_turn_end(struct cluster *c)
{
    c->nacct_notes = 0;
}

/* What a bag's results add up to. */
struct bag_sum {
    uint64_t job;
    double cpu_s, wall_s;
    int64_t start_ms;
};

static void sum_add(struct bag_sum *b, double cpu, double wall, int64_t start)
{
    b->cpu_s += cpu > 0 ? cpu : 0;
    b->wall_s += wall > 0 ? wall : 0;
    if (start > 0 && (!b->start_ms || start < b->start_ms))
        b->start_ms = start;
}

static int sum_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct bag_sum *b = arg;
    msgpack_unpacked up;
    if (klen != 12 || store_key_get_u64(key) != b->job)
        return 1; /* past the job's results */
    if (cluster_unpack_map(&up, val, vlen) == 0) {
        double wall = wire_get_f64(&up.data, "wall_s", 0);
        int64_t rcv = wire_get_time(&up.data, "received", 0);
        sum_add(b, wire_get_f64(&up.data, "cpu_s", 0), wall,
                rcv ? rcv - (int64_t)(wall * 1000.0) : 0);
        msgpack_unpacked_destroy(&up);
    }
    return 0;
}

/* Is j's record already stored as it would be written now (state and end unchanged)? A
 * bag saved again after its end (a late duplicate) is then not summed again. */
static bool stored_same(struct cluster *c, const struct job *j, const char *state)
{
    uint8_t key[8];
    void *v;
    size_t vl;
    msgpack_unpacked up;
    bool same = false;
    store_key_u64(key, j->id);
    if (store_get(c->store, c->t_acct, key, 8, &v, &vl) != 0)
        return false;
    if (cluster_unpack_map(&up, v, vl) == 0) {
        char st[32];
        wire_get_strbuf(&up.data, "state", st, sizeof st);
        same = !strcmp(st, state) && wire_get_time(&up.data, "finished", 0) == j->finished_ms;
        msgpack_unpacked_destroy(&up);
    }
    free(v);
    return same;
}

/* Distinct names of the nodes that gave j's winning results, at most ACCT_HOSTS_MAX
 * (nhosts counts only those). */
static uint32_t bag_hosts(const struct cluster *c, const struct job *j, const char **hosts)
{
    uint32_t n = 0, last = UINT32_MAX;
    for (uint32_t i = 0; i < j->next_new && n < ACCT_HOSTS_MAX; i++) {
        const struct task *t = &j->tasks[i];
        if (t->state != TS_DONE || t->node >= c->nnodes || t->node == last)
            continue;
        last = t->node;
        const char *name = c->nodes[t->node].name;
        uint32_t k = 0;
        while (k < n && strcmp(hosts[k], name))
            k++;
        if (k == n)
            hosts[n++] = name;
    }
    return n;
}

int cluster_acct_bag(struct cluster *c, const struct job *j, struct wire_buf *wb)
{
    if ((j->state != JS_DONE && j->state != JS_CANCELLED) || c->t_acct < 0)
        return 0;
    const char *state = job_state_shown(j);
    if (stored_same(c, j, state))
        return 0;
    const char *hosts[ACCT_HOSTS_MAX];
    struct acct_rec r = {.job = j->id,
                         .user = j->user,
                         .name = j->name,
                         .kind = j->ntasks > 1 ? "array" : "bag",
                         .state = state,
                         .exit = j->nfailed ? 1 : 0,
                         .submitted_ms = j->submitted_ms,
                         .finished_ms = j->finished_ms,
                         .cpu_s = -1,
                         .procs = j->ntasks,
                         .cores = 1,
                         .hosts = hosts};
    if (j->state == JS_CANCELLED)
        r.reason = "cancelled";
    else if (j->nfailed)
        r.reason = "task(s) failed";
    if (j->ntasks <= ACCT_SUM_MAX && !j->v) { /* checked jobs: validate.c takes results */
        /* each task held one core: run time is the sum of its tasks' wall times */
        struct bag_sum b = {j->id, 0, 0, 0};
        uint8_t key[12];
        store_key_u64_u32(key, j->id, 0);
        if (store_iter(c->store, c->t_results, key, sizeof key, sum_result, &b) < 0)
            return -1;
        for (uint32_t i = 0; i < c->nacct_notes; i++)
            if (c->acct_notes[i].job == j->id)
                sum_add(&b, c->acct_notes[i].cpu_s, c->acct_notes[i].wall_s,
                        c->acct_notes[i].start_ms);
        r.cpu_s = b.cpu_s;
        r.run_s = b.wall_s;
        r.started_ms = b.start_ms > j->submitted_ms ? b.start_ms : b.start_ms ? j->submitted_ms : 0;
        r.nhosts = bag_hosts(c, j, hosts);
    }
    int rc = acct_save(c->store, c->t_acct, &r, wb);
    wire_buf_reset(wb); /* the caller's scratch buffer, left empty */
    return rc;
}

/* The first process that failed gives the job's exit code and signal (as the feed's
 * events: feed.c); a job that did not end done without one exits -1. */
static void par_exit(const struct pjob *j, struct acct_rec *r)
{
    for (uint32_t i = 0; j->ranks && i < j->rq.nprocs; i++)
        if (j->ranks[i].st == PR_EXITED && (j->ranks[i].exit || j->ranks[i].sig)) {
            r->exit = j->ranks[i].exit;
            r->signal = j->ranks[i].sig;
            return;
        }
    r->exit = j->state == PJ_DONE ? 0 : -1;
}

int cluster_acct_par(struct cluster *c, const struct pjob *j, const char *state,
                     struct wire_buf *wb)
{
    if (!PJ_TERMINAL(j->state))
        return 0;
    const char *hosts[ACCT_HOSTS_MAX];
    uint32_t nh = j->nhosts < ACCT_HOSTS_MAX ? j->nhosts : ACCT_HOSTS_MAX;
    for (uint32_t h = 0; h < nh; h++)
        hosts[h] = j->hosts[h] < c->nnodes ? c->nodes[j->hosts[h]].name : "?";
    struct acct_rec r = {.job = j->id,
                         .user = j->user,
                         .group = j->group && *j->group ? j->group : NULL,
                         .name = j->name,
                         .kind = "parallel",
                         .state = state,
                         .reason = *j->reason ? j->reason : NULL,
                         .submitted_ms = j->submitted_ms,
                         .started_ms = j->started_ms,
                         .finished_ms = j->finished_ms,
                         .run_s = (double)j->run_ms / 1000.0,
                         .cpu_s = j->cpu_s,
                         .procs = j->rq.nprocs,
                         .nhosts = j->nhosts,
                         .hosts = hosts};
    par_exit(j, &r);
    int rc = acct_save(c->store, c->t_acct, &r, wb);
    wire_buf_reset(wb); /* the caller's scratch buffer, left empty */
    return rc;
}

int cluster_acct_purging(struct cluster *c, const struct job *j, const struct pjob *p,
                         const char *pstate)
{
    uint8_t key[8];
    void *v;
    size_t vl;
    store_key_u64(key, j ? j->id : p->id);
    int rc = c->t_acct < 0 ? 0 : store_get(c->store, c->t_acct, key, 8, &v, &vl);
    if (rc <= 0) { /* it has its record (or the store failed: rc -1) */
        if (rc == 0)
            free(v);
        return rc;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    rc = j ? cluster_acct_bag(c, j, &wb) : cluster_acct_par(c, p, pstate, &wb);
    wire_buf_free(&wb);
    return rc;
}

void cluster_acct_request(struct cluster *c, const struct wire_msg *m, struct wire_buf *reply)
{
    acct_reply(c->store, c->t_acct, m, reply);
}

void cluster_acct_tick(struct cluster *c)
{
    if (acct_sweep(c->store, c->t_acct, &c->cfg.acct, wall_now_ms(), &c->acct_sw) < 0)
        c->turn_failed = true; /* the turn is undone: the state is reloaded */
}

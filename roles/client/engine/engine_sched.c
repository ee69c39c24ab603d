/*
 * engine_sched.c - task scheduling, "what to run now" (seed 002, MISSION C7). The ideal
 * set of tasks to run is chosen in this order:
 *   1. per GPU type, then CPU: deadline-miss tasks in order of earliest deadline;
 *   2. running tasks still inside their time slice;
 *   3. per GPU type, then CPU: the other tasks by project priority, charging a copy of
 *      REC (or exp_avg_cpu) as if each pick ran for one time slice, which rotates the
 *      projects slice by slice in proportion to their shares (WRR).
 * Then it is reconciled with what runs: a running task outside the ideal set is
 * preempted only right after a checkpoint, so that no work is lost; until then it runs
 * on (preempt_wanted) and the ideal tasks that do not fit wait in order. When it
 * checkpoints (engine_task_checkpoint) it gives way to the first waiting task without a
 * full recomputation. Time-slice ends are looked at on a grid of time_slice/8, so that
 * many instances cost one decision, not one each.
 * In deadline mode a task whose deadline passed before it ever started is aborted
 * instead: running it could only produce a late result.
 */
#include "roles/client/engine/engine.h"
#include "roles/client/engine/engine_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    double key;
    uint64_t seq;
    size_t idx;
    int project;
    int pref; /* 0 running, 1 started before, 2 never started */
};

/* The working state of one full decision. */
struct pick {
    struct engine *e;
    double now;
    unsigned char *chosen;
    size_t *order; /* chosen tasks in the order they were picked */
    size_t norder;
    double *charge, *prio;
    double free_inst[ENGINE_MAX_PTYPES];
    struct cand *c; /* 2 * ntasks entries */
    size_t *start;  /* 2 * (nprojects + 1) entries */
};

/* Preempting loses the run time since the last checkpoint: allow it only when that is
 * (nearly) nothing. */
#define PREEMPT_LOSS_MAX 1.0

static int cand_key_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cand_project_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->project != y->project)
        return x->project < y->project ? -1 : 1;
    if (x->pref != y->pref)
        return x->pref < y->pref ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The k-th processor type in scheduling order: GPU types first, then the CPU. */
static int type_order(const struct engine *e, int k)
{
    return k < e->nptypes - 1 ? k + 1 : 0;
}

static int task_preemptible(const struct engine_task *t)
{
    return t->elapsed - t->checkpoint_elapsed <= PREEMPT_LOSS_MAX;
}

/* A running task keeps its instance for its time slice; in deadline mode also when it
 * would finish within one more slice: switching then only delays its result. */
static int slice_protected(const struct engine *e, double now, const struct engine_task *t)
{
    if (now - t->episode_start < e->cfg.time_slice)
        return 1;
    return e->cfg.fetch == ENGINE_FETCH_DEADLINE && engine_task_remaining(t) <= e->cfg.time_slice;
}

/* Adds task i to the ideal set if it fits; charges its project one time slice. */
static void pick(struct pick *k, size_t i)
{
    struct engine *e = k->e;
    struct engine_task *t = &e->tasks[i];
    if (k->chosen[i] || t->usage > k->free_inst[t->ptype] + ENGINE_EPS)
        return;
    k->chosen[i] = 1;
    k->order[k->norder++] = i;
    k->free_inst[t->ptype] -= t->usage;
    k->charge[t->project] += t->usage * e->ptypes[t->ptype].flops * e->cfg.time_slice;
}

enum { ALL, MISS_ONLY, PROTECTED_ONLY };

static void cand_set(struct cand *c, const struct engine_task *t, size_t i)
{
    c->key = t->deadline;
    c->seq = t->seq;
    c->idx = i;
    c->project = t->project;
    c->pref = t->state == ENGINE_TASK_RUNNING ? 0 : t->elapsed > 0 ? 1 : 2;
}

/* The unchosen live tasks of ptype (-1: any) that are candidates for a stage. */
static int cand_fill(struct pick *k, int ptype, int which)
{
    struct engine *e = k->e;
    int m = 0;
    if (which == PROTECTED_ONLY) { /* only running tasks qualify */
        for (size_t r = 0; r < e->nrunning; r++) {
            size_t i = e->running[r];
            struct engine_task *t = &e->tasks[i];
            if (!k->chosen[i] && (ptype < 0 || t->ptype == ptype) && slice_protected(e, k->now, t))
                cand_set(&k->c[m++], t, i);
        }
        return m;
    }
    if (which == MISS_ONLY && ptype >= 0 && e->rr[ptype].nmiss == 0)
        return 0;
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        if (k->chosen[i] || !engine_task_live(t) || (ptype >= 0 && t->ptype != ptype))
            continue;
        if (which == MISS_ONLY && !t->deadline_miss)
            continue;
        cand_set(&k->c[m++], t, i);
    }
    return m;
}

/* Candidates c[0..m) grouped by project (counting sort into out), each group in
 * preference order (running, started, new; then arrival); start[p]..start[p+1] is
 * project p's group. */
static void group_by_project(const struct cand *c, int m, int np, struct cand *out, size_t *start)
{
    for (int p = 0; p <= np; p++)
        start[p] = 0;
    for (int j = 0; j < m; j++)
        start[c[j].project + 1]++;
    for (int p = 0; p < np; p++)
        start[p + 1] += start[p];
    for (int j = 0; j < m; j++)
        out[start[c[j].project]++] = c[j];
    for (int p = np; p > 0; p--) /* start[p] now ends group p: shift back */
        start[p] = start[p - 1];
    start[0] = 0;
    for (int p = 0; p < np; p++) /* groups are small: insertion sort */
        for (size_t j = start[p] + 1; j < start[p + 1]; j++) {
            struct cand x = out[j];
            size_t i = j;
            for (; i > start[p] && cand_project_cmp(&out[i - 1], &x) > 0; i--)
                out[i] = out[i - 1];
            out[i] = x;
        }
}

/* Stage 3 for one type: repeatedly the highest-priority project with a fitting task. */
static void pick_by_priority(struct pick *k, int ptype)
{
    struct engine *e = k->e;
    int np = e->nprojects;
    int m = cand_fill(k, ptype, ALL);
    if (m == 0)
        return;
    struct cand *c = k->c + e->ntasks; /* the second half of the buffer */
    group_by_project(k->c, m, np, c, k->start);
    size_t *cur = k->start + np + 1;
    for (int p = 0; p < np; p++)
        cur[p] = k->start[p];
    for (;;) {
        engine_priorities(e, k->charge, k->prio);
        int best = -1;
        for (int p = 0; p < np; p++) {
            /* a task that does not fit now never will: capacity only shrinks */
            while (cur[p] < k->start[p + 1] &&
                   (k->chosen[c[cur[p]].idx] ||
                    e->tasks[c[cur[p]].idx].usage > k->free_inst[ptype] + ENGINE_EPS))
                cur[p]++;
            if (cur[p] < k->start[p + 1] && (best < 0 || k->prio[p] > k->prio[best]))
                best = p;
        }
        if (best < 0)
            return;
        pick(k, c[cur[best]++].idx);
    }
}

/* Stages 1-3: fills k->chosen and k->order with the ideal set. */
static void choose_ideal(struct pick *k)
{
    struct engine *e = k->e;
    for (int q = 0; q < e->nptypes; q++) {
        int pt = type_order(e, q);
        int m = cand_fill(k, pt, MISS_ONLY);
        qsort(k->c, (size_t)m, sizeof *k->c, cand_key_cmp);
        for (int j = 0; j < m; j++)
            pick(k, k->c[j].idx);
    }
    int m = cand_fill(k, -1, PROTECTED_ONLY);
    engine_priorities(e, k->charge, k->prio);
    for (int j = 0; j < m; j++)
        k->c[j].key = -k->prio[k->c[j].project];
    qsort(k->c, (size_t)m, sizeof *k->c, cand_key_cmp);
    for (int j = 0; j < m; j++)
        pick(k, k->c[j].idx);
    for (int q = 0; q < e->nptypes; q++)
        pick_by_priority(k, type_order(e, q));
}

static int sched_reserve(struct engine_sched *s, size_t n)
{
    size_t *a = realloc(s->start, (n ? n : 1) * sizeof *a);
    if (!a)
        return -1;
    s->start = a;
    size_t *b = realloc(s->preempt, (n ? n : 1) * sizeof *b);
    if (!b)
        return -1;
    s->preempt = b;
    s->nstart = s->npreempt = 0;
    return 0;
}

static void task_start(struct engine *e, double now, size_t i)
{
    struct engine_task *t = &e->tasks[i];
    engine_task_set_state(e, i, ENGINE_TASK_RUNNING);
    t->episode_start = now;
    t->episode_elapsed = t->elapsed;
    t->preempt_wanted = 0;
    t->wait_rank = 0;
    e->sched.start[e->sched.nstart++] = i;
}

/* Makes the running set follow the ideal set, within what checkpoints allow. */
static void reconcile(struct pick *k)
{
    struct engine *e = k->e;
    double busy[ENGINE_MAX_PTYPES] = {0};
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        t->wait_rank = 0;
        if (t->state != ENGINE_TASK_RUNNING)
            continue;
        t->preempt_wanted = 0;
        if (k->chosen[i]) {
            busy[t->ptype] += t->usage;
        } else if (task_preemptible(t)) {
            engine_task_stop(e, i);
            e->sched.preempt[e->sched.npreempt++] = i;
        } else { /* runs on until its next checkpoint */
            t->preempt_wanted = 1;
            busy[t->ptype] += t->usage;
        }
    }
    unsigned rank = 0;
    for (size_t j = 0; j < k->norder; j++) {
        size_t i = k->order[j];
        struct engine_task *t = &e->tasks[i];
        if (t->state == ENGINE_TASK_RUNNING)
            continue;
        if (busy[t->ptype] + t->usage <= e->ptypes[t->ptype].ninstances + ENGINE_EPS) {
            busy[t->ptype] += t->usage;
            task_start(e, k->now, i);
        } else {
            t->wait_rank = ++rank; /* starts when a pinned task checkpoints */
        }
    }
}

/* A preempt_wanted task checkpointed: preempt every such task that can go now and
 * start the waiting tasks in their order, without a full decision. 0 or -1 (ENOMEM). */
static int give_way(struct engine *e, double now)
{
    double busy[ENGINE_MAX_PTYPES] = {0};
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        if (t->state != ENGINE_TASK_RUNNING)
            continue;
        if (t->preempt_wanted && task_preemptible(t)) {
            engine_task_stop(e, i);
            e->sched.preempt[e->sched.npreempt++] = i;
        } else {
            busy[t->ptype] += t->usage;
        }
    }
    /* the waiting tasks in rank order; those that do not fit keep waiting */
    size_t n = e->ntasks ? e->ntasks : 1, m = 0;
    struct cand *c = engine_work_get(e, n * sizeof *c);
    if (!c)
        return -1;
    for (size_t i = 0; i < e->ntasks; i++)
        if (e->tasks[i].wait_rank && e->tasks[i].state == ENGINE_TASK_QUEUED) {
            c[m].key = e->tasks[i].wait_rank;
            c[m].seq = e->tasks[i].seq;
            c[m++].idx = i;
        }
    qsort(c, m, sizeof *c, cand_key_cmp);
    for (size_t j = 0; j < m; j++) {
        struct engine_task *t = &e->tasks[c[j].idx];
        if (busy[t->ptype] + t->usage <= e->ptypes[t->ptype].ninstances + ENGINE_EPS) {
            busy[t->ptype] += t->usage;
            task_start(e, now, c[j].idx);
        }
    }
    e->sched.changed = e->sched.nstart + e->sched.npreempt > 0;
    return 0;
}

/* When the decision must be revisited without any event: the end of a time slice,
 * rounded up to a grid of time_slice/8 so that slice ends are dealt with together. */
static double next_resched(struct engine *e, double now)
{
    double next = INFINITY, grid = e->cfg.time_slice / 8;
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        double end = t->episode_start + e->cfg.time_slice;
        if (t->state == ENGINE_TASK_RUNNING && end > now && end < next)
            next = end;
    }
    if (isfinite(next) && grid > 0)
        next = fmax(ceil(next / grid) * grid, next);
    return next;
}

/* Deadline mode: abort queued tasks that never started and whose deadline has passed. */
static void abort_hopeless(struct engine *e, double now)
{
    if (e->cfg.fetch != ENGINE_FETCH_DEADLINE)
        return;
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        if (t->state == ENGINE_TASK_QUEUED && t->elapsed <= 0 && now > t->deadline) {
            engine_task_set_state(e, i, ENGINE_TASK_ABORTED);
            t->completed = now;
            e->rr_dirty = 1;
        }
    }
}

/* The full decision. 0, or -1 on ENOMEM. */
static int decide(struct engine *e, double now)
{
    abort_hopeless(e, now);
    /* deadline-miss flags change slowly: refresh them on new work or every half time
       slice (at least every poll) */
    double stale = fmax(e->cfg.poll_period, e->cfg.time_slice / 2);
    if ((e->rr_dirty || now - e->rr_time >= stale) && engine_rr_simulate(e, now))
        return -1;
    size_t n = e->ntasks ? e->ntasks : 1;
    size_t np = (size_t)e->nprojects + 1;
    char *buf = engine_work_get(e, n * (2 * sizeof(struct cand) + sizeof(size_t) + 1) +
                                       2 * np * (sizeof(double) + sizeof(size_t)));
    if (!buf || sched_reserve(&e->sched, n))
        return -1;
    struct pick k = {e, now, NULL, NULL, 0, NULL, NULL, {0}, NULL, NULL};
    k.c = (struct cand *)buf;
    k.order = (size_t *)(buf + 2 * n * sizeof(struct cand));
    k.start = k.order + n;
    k.charge = (double *)(k.start + 2 * np);
    k.prio = k.charge + np;
    k.chosen = (unsigned char *)(k.prio + np);
    memset(k.chosen, 0, n);
    memset(k.charge, 0, np * sizeof *k.charge);
    for (int t = 0; t < e->nptypes; t++)
        k.free_inst[t] = e->ptypes[t].ninstances;
    choose_ideal(&k);
    reconcile(&k);
    e->sched.changed = e->sched.nstart + e->sched.npreempt > 0;
    e->sched_dirty = 0;
    e->preempt_ready = 0;
    e->next_resched = next_resched(e, now);
    e->sched_runs++;
    return 0;
}

const struct engine_sched *engine_schedule(struct engine *e, double now)
{
    struct engine_sched *s = &e->sched;
    s->changed = 0;
    s->nstart = s->npreempt = 0;
    if (!e->host_on)
        return s;
    if (e->sched_dirty || now >= e->next_resched)
        return decide(e, now) ? NULL : s;
    if (e->preempt_ready) {
        if (sched_reserve(s, e->ntasks))
            return NULL;
        e->preempt_ready = 0;
        if (give_way(e, now))
            return NULL;
    }
    return s;
}

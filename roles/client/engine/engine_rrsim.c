/*
 * engine_rrsim.c - the round-robin simulation (seed 002, MISSION C6): the queued and
 * running tasks of each processor type are run in simulation, FIFO within a project,
 * the instances shared among projects with work in proportion to resource share (a
 * project that needs less than its share leaves the rest to the others). It yields per
 * type the shortfall, the idle instances and the saturated time, and per task the
 * deadline-miss flag; then the deadline-miss tasks are run in EDF order, which yields
 * the busy time. Also the fluid EDF "room" used by the deadline-aware work fetch.
 */
#include "roles/client/engine/engine.h"
#include "roles/client/engine/engine_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rr_item {
    size_t task;
    double rem, rem0; /* wall seconds of processing left at full speed */
    double rate;      /* fraction of full speed in the current simulation step */
    double usage;
    double deadline; /* planning deadline */
    uint64_t seq;
    int project;
    int running;
    int done;
};

struct rr_proj {
    size_t begin, end, head; /* this project's items in the sorted array */
    double share, demand, cap;
    double left; /* usage of its unfinished items */
    int active, fixed;
};

static int rr_item_cmp(const void *a, const void *b)
{
    const struct rr_item *x = a, *y = b;
    if (x->project != y->project)
        return x->project < y->project ? -1 : 1;
    if (x->running != y->running)
        return x->running ? -1 : 1; /* running tasks first, then arrival order */
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int rr_deadline_cmp(const void *a, const void *b)
{
    const struct rr_item *x = a, *y = b;
    if (x->deadline != y->deadline)
        return x->deadline < y->deadline ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Deadline mode: the latency less its reporting reserve at this slack. */
static inline double reserved_window(const struct engine *e, double latency, double slack)
{
    double reserve = slack * latency; /* not fmin: a libm call, and this runs per task */
    return latency -
           (reserve < e->cfg.deadline_reserve_max ? reserve : e->cfg.deadline_reserve_max);
}

int engine_burst(const struct engine *e, int p, int t)
{
    if (e->cfg.fetch != ENGINE_FETCH_DEADLINE || !e->cfg.burst || p < 0 || p >= e->nprojects)
        return 0;
    double lat = e->projects[p].rsc[t].latency;
    if (lat <= 0 || reserved_window(e, lat, e->cfg.deadline_slack) >= e->cfg.min_buf)
        return 0; /* its deadlines leave room for the buffer: a continuous queue */
    for (int q = 0; q < e->nprojects; q++)
        if (q != p && !e->projects[q].suspended)
            return 1;
    return 0; /* the only project: nothing to alternate with */
}

double engine_plan_window(const struct engine *e, int project, int ptype, double latency,
                          double est)
{
    if (latency < 0)
        latency = 0;
    if (e->cfg.fetch == ENGINE_FETCH_BOINC)
        return latency;
    double slack = engine_burst(e, project, ptype) ? e->cfg.burst_slack : e->cfg.deadline_slack;
    double w = reserved_window(e, latency, slack);
    double floor_w = fmin(latency, 1.5 * est);
    return w > floor_w ? w : floor_w;
}

double engine_task_plan_deadline(const struct engine *e, const struct engine_task *t)
{
    return t->received +
           engine_plan_window(e, t->project, t->ptype, t->deadline - t->received, t->est_duration);
}

/* Gathers the live tasks of type t into it[]; returns how many. */
static size_t rr_gather(struct engine *e, int t, struct rr_item *it)
{
    double avail = engine_avail(e);
    size_t m = 0;
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *k = &e->tasks[i];
        if (k->ptype != t || !engine_task_live(k))
            continue;
        struct rr_item *x = &it[m++];
        x->task = i;
        x->rem = x->rem0 = engine_task_remaining(k) / avail;
        x->rate = 0;
        x->usage = k->usage;
        x->deadline = engine_task_plan_deadline(e, k);
        x->seq = k->seq;
        x->project = k->project;
        x->running = k->state == ENGINE_TASK_RUNNING;
        x->done = 0;
    }
    return m;
}

/* Shares ninst instances among the active projects in proportion to share, none getting
 * more than it can use (water filling). */
static void rr_water_fill(struct rr_proj *pj, int np, double ninst)
{
    double left = ninst;
    for (int p = 0; p < np; p++)
        pj[p].fixed = !pj[p].active;
    for (;;) {
        double w = 0;
        for (int p = 0; p < np; p++)
            if (!pj[p].fixed)
                w += pj[p].share;
        if (w <= 0)
            return;
        double freed = 0;
        int any = 0;
        for (int p = 0; p < np; p++) {
            if (pj[p].fixed || pj[p].demand > left * pj[p].share / w + ENGINE_EPS)
                continue;
            pj[p].cap = pj[p].demand;
            pj[p].fixed = 1;
            freed += pj[p].demand;
            any = 1;
        }
        left -= freed;
        if (!any) {
            for (int p = 0; p < np; p++)
                if (!pj[p].fixed)
                    pj[p].cap = left * pj[p].share / w;
            return;
        }
    }
}

/* Sets each active project's demand: what its unfinished tasks can use. */
static void rr_demands(struct rr_item *it, struct rr_proj *pj, int np, double ninst)
{
    for (int p = 0; p < np; p++) {
        struct rr_proj *q = &pj[p];
        while (q->head < q->end && it[q->head].done)
            q->head++;
        q->active = q->head < q->end;
        q->demand = q->active ? fmin(q->left, ninst) : 0;
    }
}

/* Gives each project's capacity to its tasks in FIFO order; returns the instances used
 * and sets *dt to the time to the next completion (INFINITY if nothing runs). */
static double rr_rates(struct rr_item *it, struct rr_proj *pj, int np, double *dt)
{
    double used = 0;
    *dt = INFINITY;
    for (int p = 0; p < np; p++) {
        if (!pj[p].active)
            continue;
        double c = pj[p].cap;
        for (size_t i = pj[p].head; i < pj[p].end; i++) {
            struct rr_item *x = &it[i];
            if (x->done)
                continue;
            double old = x->rate;
            if (c >= x->usage - ENGINE_EPS) {
                x->rate = 1;
                c -= x->usage;
            } else if (c > ENGINE_EPS) {
                x->rate = c / x->usage;
                c = 0;
            } else {
                x->rate = 0;
                if (old == 0)
                    break; /* rates are given in FIFO order: the rest are 0 too */
            }
            used += x->usage * x->rate;
            if (x->rate > 0 && x->rem / x->rate < *dt)
                *dt = x->rem / x->rate;
        }
    }
    return used;
}

/* Advances every running item by dt from simulated time s; marks completions. */
static size_t rr_advance(struct engine *e, double now, struct rr_item *it, struct rr_proj *pj,
                         int np, double s, double dt)
{
    size_t finished = 0;
    for (int p = 0; p < np; p++) {
        if (!pj[p].active)
            continue;
        for (size_t i = pj[p].head; i < pj[p].end; i++) {
            struct rr_item *x = &it[i];
            if (x->done)
                continue;
            if (x->rate <= 0)
                break;
            x->rem -= x->rate * dt;
            if (x->rem > 1e-7 * (1 + x->rem0))
                continue;
            x->rem = 0;
            x->done = 1;
            pj[p].left -= x->usage;
            finished++;
            struct engine_task *t = &e->tasks[x->task];
            t->rr_finish = now + s + dt;
            t->deadline_miss = t->rr_finish > x->deadline;
        }
    }
    return finished;
}

/* The round-robin simulation of one type's m items (sorted by project). */
static void rr_type(struct engine *e, double now, int t, struct rr_item *it, size_t m,
                    struct rr_proj *pj, struct engine_rr_type *out)
{
    double ninst = e->ptypes[t].ninstances;
    double horizon = e->cfg.min_buf + e->cfg.additional_buf;
    int np = e->nprojects;
    for (int p = 0; p < np; p++) {
        memset(&pj[p], 0, sizeof pj[p]);
        pj[p].share = e->projects[p].share;
    }
    for (size_t i = m; i-- > 0;) {
        struct rr_proj *q = &pj[it[i].project];
        if (q->end == 0)
            q->end = i + 1;
        q->begin = q->head = i;
        q->left += it[i].usage;
    }
    memset(out, 0, sizeof *out);
    out->idle_now = ninst;
    for (size_t i = 0; i < m; i++)
        out->queued += it[i].rem * it[i].usage;

    double s = 0;
    int saturated = 0, first = 1;
    size_t left = m;
    while (left > 0 && ninst > 0) {
        rr_demands(it, pj, np, ninst);
        rr_water_fill(pj, np, ninst);
        double dt;
        double idle = ninst - rr_rates(it, pj, np, &dt);
        if (isinf(dt))
            break;
        if (idle < ENGINE_EPS)
            idle = 0;
        if (first)
            out->idle_now = idle;
        first = 0;
        if (!saturated && idle > ENGINE_EPS) {
            out->saturated = s;
            saturated = 1;
        }
        if (s < horizon)
            out->shortfall += idle * (fmin(s + dt, horizon) - s);
        size_t f = rr_advance(e, now, it, pj, np, s, dt);
        s += dt;
        left -= f <= left ? f : left;
    }
    if (!saturated)
        out->saturated = s;
    if (s < horizon)
        out->shortfall += ninst * (horizon - s);
}

/* EDF simulation of the deadline-miss items: returns how long all instances stay busy. */
static double rr_edf_busy(struct engine *e, int t, struct rr_item *it, size_t m, double *free_at)
{
    int ninst = e->ptypes[t].ninstances;
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (e->tasks[it[i].task].deadline_miss)
            it[k++] = it[i];
    if (ninst <= 0 || k == 0)
        return 0;
    qsort(it, k, sizeof *it, rr_deadline_cmp);
    for (int j = 0; j < ninst; j++)
        free_at[j] = 0;
    for (size_t i = 0; i < k; i++) {
        int need = (int)ceil(it[i].usage - ENGINE_EPS);
        if (need < 1)
            need = 1;
        if (need > ninst)
            need = ninst;
        /* take the `need` instances that free up first (selection, ninst is small) */
        double start = 0;
        for (int n = 0; n < need; n++) {
            int best = -1;
            for (int j = 0; j < ninst; j++)
                if (free_at[j] >= 0 && (best < 0 || free_at[j] < free_at[best]))
                    best = j;
            if (free_at[best] > start)
                start = free_at[best];
            free_at[best] = -1 - free_at[best]; /* mark as taken */
        }
        for (int j = 0; j < ninst; j++)
            if (free_at[j] < 0)
                free_at[j] = start + it[i].rem0;
    }
    double busy = INFINITY;
    for (int j = 0; j < ninst; j++)
        busy = fmin(busy, free_at[j]);
    return busy;
}

int engine_rr_simulate(struct engine *e, double now)
{
    int maxinst = 1;
    for (int t = 0; t < e->nptypes; t++)
        if (e->ptypes[t].ninstances > maxinst)
            maxinst = e->ptypes[t].ninstances;
    size_t n_it = e->ntasks ? e->ntasks : 1;
    size_t bytes = n_it * sizeof(struct rr_item) +
                   (size_t)(e->nprojects + 1) * sizeof(struct rr_proj) +
                   (size_t)maxinst * sizeof(double);
    char *buf = engine_work_get(e, bytes);
    if (!buf)
        return -1;
    struct rr_item *it = (struct rr_item *)buf;
    struct rr_proj *pj = (struct rr_proj *)(buf + n_it * sizeof(struct rr_item));
    double *free_at = (double *)(pj + e->nprojects + 1);

    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_task *t = &e->tasks[i];
        t->deadline_miss = 0;
        if (!engine_task_live(t))
            t->rr_finish = now;
    }
    struct engine_rr_type out[ENGINE_MAX_PTYPES];
    for (int t = 0; t < e->nptypes; t++) {
        size_t m = rr_gather(e, t, it);
        qsort(it, m, sizeof *it, rr_item_cmp);
        rr_type(e, now, t, it, m, pj, &out[t]);
        for (size_t i = 0; i < m; i++)
            out[t].nmiss += e->tasks[it[i].task].deadline_miss;
        out[t].busy = rr_edf_busy(e, t, it, m, free_at);
    }
    memcpy(e->rr, out, sizeof(out[0]) * (size_t)e->nptypes);
    e->rr_dirty = 0;
    e->rr_time = now;
    e->rr_runs++;
    return 0;
}

double engine_room(struct engine *e, double now, int ptype, int project, double latency, double est,
                   double *delay)
{
    if (delay)
        *delay = 0;
    if (ptype < 0 || ptype >= e->nptypes || e->ptypes[ptype].ninstances <= 0)
        return 0;
    size_t n_it = e->ntasks ? e->ntasks : 1;
    struct rr_item *it = engine_work_get(e, n_it * sizeof *it);
    if (!it)
        return 0;
    size_t m = rr_gather(e, ptype, it);
    qsort(it, m, sizeof *it, rr_deadline_cmp);
    double ninst = e->ptypes[ptype].ninstances;
    double due = now + engine_plan_window(e, project, ptype, latency, est);
    double cum = 0, room = INFINITY;
    size_t i = 0;
    for (; i < m && it[i].deadline <= due; i++)
        cum += it[i].rem * it[i].usage;
    if (delay)
        *delay = cum / ninst;
    room = ninst * (due - now) - cum;
    for (; i < m; i++) {
        cum += it[i].rem * it[i].usage;
        double r = ninst * (it[i].deadline - now) - cum;
        if (r < room)
            room = r;
    }
    return room > 0 ? room : 0;
}

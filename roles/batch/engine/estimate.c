/*
 * estimate.c - start-time estimates for the metascheduler (seed 003 section 3.3,
 * MISSION B6): for a resource request and a walltime, every range of start times
 * at which it would fit into the current plan, as if it were queued behind every
 * pending job. With config.estimates the plan holds every pending job (the estimate
 * pass of the last cycle); without, only the job reservations of the top jobs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "roles/batch/engine/internal.h"

/* Feasibility can only change where a window edge crosses a breakpoint b: at
 * t = b (the window leaves the step before b) and t = b - walltime + 1 (it reaches
 * the step at b). The candidate starts of pool pi are the earliest possible start
 * lo and those times in [lo, hi] for every profile of the pool; between two
 * consecutive candidates feasibility is constant. This returns the first candidate
 * after u, or PROFILE_INF when none is left before hi. Successive calls of one search
 * never ask about an earlier u: cur (2 ng entries, INT64_MIN at first, NULL: none)
 * keeps each profile's next breakpoints after u and after u + wall - 1, read again
 * only once passed. *enter: whether the window reaches a new step there (else it only
 * leaves steps: the window of the candidate holds no value the window of u did not,
 * so no group has fewer nodes free over it than over u's). */
static int64_t next_candidate(const struct profile *pr, int32_t ng, int64_t wall, int64_t u,
                              int64_t hi, int64_t *cur, bool *enter)
{
    int64_t nx = PROFILE_INF, uw = u > INT64_MAX - (wall - 1) ? INT64_MAX : u + wall - 1;
    int64_t nb = PROFILE_INF; /* the first candidate of the second kind */
    for (int32_t k = 0; k < ng; k++) {
        int64_t a = cur ? cur[2 * k] : INT64_MIN;
        if (a <= u) {
            a = bs_profile_next(&pr[k], u);
            if (cur)
                cur[2 * k] = a;
        }
        if (a < nx)
            nx = a;
        int64_t b = cur ? cur[2 * k + 1] : INT64_MIN;
        if (uw == INT64_MAX)
            b = PROFILE_INF;
        else if (b <= uw) {
            b = bs_profile_next(&pr[k], uw);
            if (cur)
                cur[2 * k + 1] = b;
        }
        if (b != PROFILE_INF && b - wall + 1 < nb)
            nb = b - wall + 1; /* the first start whose window reaches b */
    }
    if (nb < nx)
        nx = nb;
    *enter = nb == nx;
    return nx > hi ? PROFILE_INF : nx;
}

/* Appends the feasible ranges of pool pi to *w (grown as needed): each is a run of
 * feasible candidates, from its first to the next (infeasible) candidate - 1, or to
 * hi. The planner's own search jumps over the infeasible candidates between runs
 * (its earliest fit at or after t is always a candidate: inside a step feasibility
 * can only get worse as the window's end moves on), so only the candidates inside
 * a run are tested one by one. That keeps an estimate at a few searches of the
 * cached plan however long the queue behind it is (the first version tested every
 * candidate alone: 100 ms for a 64-way job behind 10,000 pending ones). Inside a run,
 * a candidate where the window only leaves steps stays feasible (every group's free
 * nodes over it are at least those over the last one, and a start without counted
 * constraint names needs only enough of them): only the candidates where the window
 * reaches a new step are tested. */
static int pool_windows(struct batch_engine *e, int32_t pi, const struct bjob *j, bool est,
                        int64_t now, struct batch_window **w, int32_t *nw, int32_t *cap)
{
    const struct bpool *p = &e->pools[pi];
    const struct profile *pr = est ? p->est : p->plan;
    int64_t lo = now > p->start ? now : p->start;
    int64_t hi = p->resv >= 0 ? p->end - j->walltime : BATCH_NEVER;
    int64_t cbuf[64], *cur = p->ng <= 32 ? cbuf : malloc((size_t)p->ng * 2 * sizeof *cur);
    for (int32_t k = 0; cur && k < 2 * p->ng; k++)
        cur[k] = INT64_MIN;
    struct bs_search_memo memo = {-1, NULL};   /* the job's groups in the pool, found at
                                                  the first search, and when they free up */
    bool enter = true, monotone = !j->counted; /* more free nodes never hurt a start */
    for (int64_t t = lo; t != PROFILE_INF;) {
        int64_t f = bs_plan_pool_find_memo(e, pi, j, t, hi, est, NULL, &memo);
        if (f == BATCH_NEVER)
            break;
        int64_t to = hi;
        t = PROFILE_INF;
        for (int64_t u = f;;) {
            int64_t nx = next_candidate(pr, p->ng, j->walltime, u, hi, cur, &enter);
            if (nx == PROFILE_INF)
                break;
            if ((enter || !monotone) &&
                bs_plan_pool_find_memo(e, pi, j, nx, nx, est, NULL, &memo) != nx) {
                to = nx - 1;
                t = nx;
                break;
            }
            u = nx;
        }
        if (VEC_RESERVE(*w, *cap, *nw + 1) < 0) {
            if (cur != cbuf)
                free(cur);
            free(memo.zfree);
            return -1;
        }
        (*w)[(*nw)++] = (struct batch_window){f, to};
    }
    if (cur != cbuf)
        free(cur);
    free(memo.zfree);
    return 0;
}

static int win_cmp(const void *a, const void *b)
{
    const struct batch_window *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* Fills a temporary job from request r; false if r is malformed. */
static bool request_job(const struct batch_engine *e, const struct batch_request *r,
                        int64_t walltime, struct bjob *j)
{
    if (r->tasks < 1 || r->per_task.procs < 1 || r->per_task.mem < 0 || r->per_task.disk < 0 ||
        r->per_task.swap < 0 || walltime < 1 || r->ppn < 0)
        return false;
    memset(j, 0, sizeof *j);
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        j->cred[k] = r->cred[k] ? bs_cred_lookup(e, k, r->cred[k]) : -2;
        if (j->cred[k] == -1)
            j->cred[k] = -2; /* unknown: matches no ACL and no class */
    }
    if (!r->cred[BATCH_CRED_CLASS])
        j->cred[BATCH_CRED_CLASS] = bs_cred_lookup(e, BATCH_CRED_CLASS, "");
    j->id = r->job;
    j->tasks = r->tasks;
    j->per_task = r->per_task;
    j->ppn = r->ppn;
    j->constraint = r->constraint && *r->constraint ? (char *)r->constraint : NULL; /* borrowed */
    j->counted = constraint_hosts_min(j->constraint) > 0;
    j->procs = r->tasks * r->per_task.procs;
    j->walltime = walltime;
    j->early_start = true;
    j->fit_epoch = -1;
    return true;
}

/* Regroups (a reservation was made or released since the last cycle) and plans the
 * job reservations the last cycle held again, in their order, so that the estimate
 * sees them: a regroup starts the plan from the base, and without this a request
 * estimated after another one's reservation would be placed as if the queue's top
 * jobs had none, ahead of them (issue 25: the spool's second reservation in a turn
 * took the slot of a site's top local job, which then waited behind grid jobs). The
 * plan stays marked invalid: the next cycle plans from scratch as before. 0 or -1. */
static int regroup_keep_plan(struct batch_engine *e)
{
    int32_t n = e->nplan, *slots = NULL;
    if (n > 0) {
        if (!(slots = malloc((size_t)n * sizeof *slots)))
            return -1;
        for (int32_t i = 0; i < n; i++)
            slots[i] = e->plan[i].job;
    }
    int rc = bs_engine_regroup(e);
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        struct bjob *j = &e->jobs[slots[i]];
        if (!j->live || j->state != BATCH_JOB_PENDING || j->hold || j->never)
            continue;
        bs_engine_fit_refresh(e, j);
        int32_t pool = -1;
        int64_t t = bs_plan_earliest(e, j, e->now, BATCH_NEVER, false, &pool, e->scr_cnt);
        if (t != BATCH_NEVER && pool >= 0 && bs_plan_reserve(e, slots[i], pool, t, e->scr_cnt) < 0)
            rc = -1;
    }
    e->plan_valid = false;
    free(slots);
    return rc;
}

size_t batch_estimate(struct batch_engine *e, const struct batch_request *r, int64_t walltime,
                      int64_t now, struct batch_window *out, size_t max)
{
    struct bjob j;
    if (!request_job(e, r, walltime, &j)) {
        errno = EINVAL;
        return 0;
    }
    if (now > e->now)
        e->now = now;
    if (e->groups_dirty && regroup_keep_plan(e) < 0)
        return 0;
    if (e->plan_skipped && bs_cycle_plan_skipped(e) < 0) /* a full site: its top jobs */
        return 0;
    bool est = e->est_valid;
    struct batch_window *w = NULL;
    int32_t nw = 0, cap = 0, n = 0;
    for (int32_t pi = 0; pi < e->npools; pi++) {
        if (pi > 0 && !bs_engine_admits(e, &e->resv[e->pools[pi].resv], &j))
            continue;
        if (pool_windows(e, pi, &j, est, e->now, &w, &nw, &cap) < 0) {
            free(w);
            return 0;
        }
    }
    if (nw > 1)
        qsort(w, (size_t)nw, sizeof *w, win_cmp);
    for (int32_t i = 0; i < nw; i++) { /* union of the pools' ranges */
        if (n > 0 && (w[n - 1].to == BATCH_NEVER || w[n - 1].to + 1 >= w[i].from)) {
            if (w[n - 1].to != BATCH_NEVER && (w[i].to == BATCH_NEVER || w[i].to > w[n - 1].to))
                w[n - 1].to = w[i].to;
            continue;
        }
        w[n++] = w[i];
    }
    for (int32_t i = 0; i < n && (size_t)i < max; i++)
        out[i] = w[i];
    free(w);
    return (size_t)n;
}

int batch_job_estimate(struct batch_engine *e, uint64_t id, int64_t now, int64_t *start)
{
    struct bjob *j = bs_engine_job(e, id);
    if (!j || j->state != BATCH_JOB_PENDING) {
        errno = j ? EINVAL : ENOENT;
        return -1;
    }
    if (j->reserved != BATCH_NEVER) {
        *start = j->reserved;
        return 0;
    }
    if (!e->est_valid && !e->jest_valid) {
        /* the plan as the last cycle left it (an idle cycle skips planning: then the
         * base); the est profiles are kept for this answer only, so request estimates
         * (batch_estimate) still see the plan without scheduler.estimates. The pass
         * plans every pending job, so its results answer the next requests until the
         * engine changes, the next cycle at the latest (the live role cycles every
         * batch.max_interval_s, as Slurm's squeue --start shows its last backfill's
         * starts): a showstart storm over 10^4 pending jobs cost one pass per request,
         * 10 ms each (issue 28); at 10^6 one pass takes seconds. */
        if (now > e->now)
            e->now = now;
        if (e->groups_dirty && bs_engine_regroup(e) < 0)
            return -1;
        if (!e->plan_valid && bs_plan_copy_base(e) < 0)
            return -1;
        int rc = bs_cycle_estimate_all(e);
        e->est_valid = false;
        if (rc < 0)
            return -1;
        e->jest_valid = true;
    }
    *start = j->estimate;
    return 0;
}

static int cmp_t(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Free procs of pool p's groups of class cls (-1 every group) at time t. */
static int64_t free_procs_at(const struct batch_engine *e, const struct bpool *p, int32_t cls,
                             int64_t t)
{
    int64_t sum = 0;
    for (int32_t k = 0; k < p->ng; k++) {
        const struct bgroup *g = &e->groups[p->gid[k]];
        if (cls < 0 || g->cls < 0 || g->cls == cls)
            sum += (int64_t)bs_profile_at(&p->plan[k], t) * g->cap.procs;
    }
    return sum;
}

size_t batch_backfill_windows(struct batch_engine *e, int64_t now, const char *partition,
                              struct batch_bf_window *out, size_t max)
{
    int32_t cls = -1;
    if (partition && *partition && (cls = bs_cred_lookup(e, BATCH_CRED_CLASS, partition)) < 0) {
        errno = ENOENT;
        return 0;
    }
    if (now > e->now)
        e->now = now;
    if ((e->groups_dirty && bs_engine_regroup(e) < 0) || e->npools == 0 ||
        (!e->plan_valid && bs_plan_copy_base(e) < 0))
        return 0;
    const struct bpool *p = &e->pools[0];
    /* every breakpoint after now of the groups' plans: where the free count may drop */
    int32_t cap = 1, nt = 0;
    for (int32_t k = 0; k < p->ng; k++)
        cap += bs_profile_steps(&p->plan[k]);
    int64_t *t = malloc((size_t)cap * sizeof *t), *tk = malloc((size_t)cap * sizeof *tk);
    int32_t *v = malloc((size_t)cap * sizeof *v);
    size_t n = 0;
    if (!t || !tk || !v) {
        errno = ENOMEM;
        goto out;
    }
    t[nt++] = e->now;
    for (int32_t k = 0; k < p->ng; k++) {
        int32_t m = bs_profile_steps_from(&p->plan[k], e->now, tk, v, cap - nt);
        for (int32_t i = 0; i < m; i++)
            if (tk[i] > e->now)
                t[nt++] = tk[i];
    }
    qsort(t, (size_t)nt, sizeof *t, cmp_t);
    int64_t level = free_procs_at(e, p, cls, e->now);
    for (int32_t i = 1; i <= nt && level > 0; i++) {
        if (i < nt && t[i] == t[i - 1])
            continue;
        int64_t f = i < nt ? free_procs_at(e, p, cls, t[i]) : 0;
        if (i < nt && f >= level)
            continue;
        if (n < max)
            out[n] = (struct batch_bf_window){(int32_t)(level > INT32_MAX ? INT32_MAX : level),
                                              i < nt ? t[i] - e->now : BATCH_NEVER};
        n++;
        level = f;
    }
out:
    free(t);
    free(tk);
    free(v);
    return n;
}

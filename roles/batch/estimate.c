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

#include "roles/batch/internal.h"

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Feasibility can only change where a window edge crosses a breakpoint b: at
 * t = b (the window leaves the step before b) and t = b - walltime + 1 (it reaches
 * the step at b). Collects now and those times for pool pi's profiles (sorted,
 * unique, inside the pool's time); returns the count or -1 (ENOMEM); *out is
 * malloc'd. */
static int32_t candidates(struct batch_engine *e, int32_t pi, const struct bjob *j, bool est,
                          int64_t now, int64_t **out)
{
    const struct bpool *p = &e->pools[pi];
    const struct profile *pr = est ? p->est : p->plan;
    int64_t lo = now > p->start ? now : p->start;
    int64_t hi = p->resv >= 0 ? p->end - j->walltime : BATCH_NEVER;
    int64_t total = 1;
    for (int32_t k = 0; k < p->ng; k++)
        total += 2 * (int64_t)bs_profile_steps(&pr[k]);
    int64_t *c = malloc((size_t)total * sizeof *c);
    int32_t *v = malloc((size_t)total * sizeof *v);
    int64_t *t = malloc((size_t)total * sizeof *t);
    if (!c || !v || !t) {
        free(c);
        free(v);
        free(t);
        errno = ENOMEM;
        return -1;
    }
    int32_t n = 0;
    c[n++] = lo;
    for (int32_t k = 0; k < p->ng; k++) {
        int32_t m = bs_profile_steps_from(&pr[k], lo, t, v, (int32_t)total);
        for (int32_t i = 0; i < m; i++) {
            /* a start at b - walltime + 1 is the first whose window reaches b */
            int64_t a[2] = {t[i], t[i] - j->walltime + 1};
            for (int x = 0; x < 2; x++)
                if (a[x] >= lo && a[x] <= hi)
                    c[n++] = a[x];
        }
    }
    free(v);
    free(t);
    qsort(c, (size_t)n, sizeof *c, cmp64);
    int32_t u = 0;
    for (int32_t i = 0; i < n; i++)
        if (u == 0 || c[i] != c[u - 1])
            c[u++] = c[i];
    *out = c;
    return u;
}

/* Appends the feasible ranges of pool pi to *w (grown as needed). */
static int pool_windows(struct batch_engine *e, int32_t pi, const struct bjob *j, bool est,
                        int64_t now, struct batch_window **w, int32_t *nw, int32_t *cap)
{
    int64_t *c;
    int32_t n = candidates(e, pi, j, est, now, &c);
    if (n < 0)
        return -1;
    const struct bpool *p = &e->pools[pi];
    int64_t hi = p->resv >= 0 ? p->end - j->walltime : BATCH_NEVER;
    int32_t first = *nw;
    for (int32_t i = 0; i < n; i++) {
        if (bs_plan_pool_find(e, pi, j, c[i], c[i], est, NULL) != c[i])
            continue;
        int64_t to = i + 1 < n ? c[i + 1] - 1 : hi;
        if (*nw > first && (*w)[*nw - 1].to != BATCH_NEVER && (*w)[*nw - 1].to + 1 >= c[i]) {
            (*w)[*nw - 1].to = to;
            continue;
        }
        if (VEC_RESERVE(*w, *cap, *nw + 1) < 0) {
            free(c);
            return -1;
        }
        (*w)[(*nw)++] = (struct batch_window){c[i], to};
    }
    free(c);
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
        r->per_task.swap < 0 || walltime < 1)
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
    j->procs = r->tasks * r->per_task.procs;
    j->walltime = walltime;
    j->early_start = true;
    j->fit_epoch = -1;
    return true;
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
    if (e->groups_dirty && bs_engine_regroup(e) < 0)
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

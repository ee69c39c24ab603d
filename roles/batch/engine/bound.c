/*
 * bound.c - dominance bounds for planning a long queue. While one cycle places
 * jobs, the plan only loses free nodes, so if a job needing n nodes for L seconds
 * found no room before s, no later job needing at least n nodes for at least L
 * seconds can find room before s either: its search may start at s. Conservative
 * backfill over a queue of thousands of jobs of a few dozen shapes skips most of
 * the profile this way.
 *
 * Bounds are kept per exact node count, plus one set per power-of-two band of node
 * counts (a band serves every larger count). Each set is a Pareto frontier of
 * (walltime, start): walltimes ascending with starts strictly ascending, so the
 * bound for L is the entry with the longest walltime <= L. Only the single
 * compatible group of the general pool is tracked (the common case).
 */
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/* The frontier's bound for walltime len: INT64_MIN if none. */
static int64_t fr_get(const struct bfront *f, int64_t epoch, int64_t len)
{
    if (f->epoch != epoch || f->n == 0 || f->e[0].len > len)
        return INT64_MIN;
    int32_t lo = 0, hi = f->n - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (f->e[mid].len <= len)
            lo = mid;
        else
            hi = mid - 1;
    }
    return f->e[lo].start;
}

/* Adds (len, start) unless a shorter-or-equal entry already bounds as far. */
static void fr_put(struct bfront *f, int64_t epoch, int64_t len, int64_t start)
{
    if (f->epoch != epoch) {
        f->epoch = epoch;
        f->n = 0;
    }
    int32_t pos = 0; /* first entry longer than len */
    while (pos < f->n && f->e[pos].len <= len)
        pos++;
    if (pos > 0 && f->e[pos - 1].start >= start)
        return;
    int32_t end = pos; /* longer entries that now bound no further */
    while (end < f->n && f->e[end].start <= start)
        end++;
    if (end == pos && bs_vec_reserve((void **)&f->e, &f->cap, f->n + 1, sizeof *f->e) < 0)
        return; /* a bound is only an optimisation */
    memmove(f->e + pos + 1, f->e + end, (size_t)(f->n - end) * sizeof *f->e);
    f->e[pos] = (struct bfront_ent){len, start};
    f->n += 1 - (end - pos);
}

static int band(int32_t need)
{
    return 31 - __builtin_clz((unsigned)need);
}

void bs_bound_reset(struct batch_engine *e, int32_t jobs)
{
    e->bnd.epoch++;
    e->bnd.on = jobs >= e->bound_min_jobs;
}

int64_t bs_bound_get(struct batch_engine *e, const struct bjob *j)
{
    struct bbounds *b = &e->bnd;
    if (!b->on || e->npools != 1 || j->gen_gi < 0 || j->fit_epoch != e->gepoch)
        return INT64_MIN;
    if (b->group != j->gen_gi || b->gepoch != e->gepoch || j->gen_need >= b->nexact)
        return INT64_MIN;
    int64_t lb = fr_get(&b->exact[j->gen_need], b->epoch, j->walltime);
    for (int k = 0; k < band(j->gen_need); k++) {
        int64_t x = fr_get(&b->band[k], b->epoch, j->walltime);
        if (x > lb)
            lb = x;
    }
    return lb;
}

void bs_bound_put(struct batch_engine *e, const struct bjob *j, int64_t start)
{
    struct bbounds *b = &e->bnd;
    /* a job limited per machine may wait where the node count alone would fit: its
     * start bounds no other job */
    if (!b->on || e->npools != 1 || j->gen_gi < 0 || j->fit_epoch != e->gepoch ||
        bs_engine_host_limited(e, j))
        return;
    if (b->gepoch != e->gepoch || b->group != j->gen_gi) { /* (re)aim at this group */
        int32_t n = e->groups[j->gen_gi].nnodes + 1;
        if (b->nexact < n) {
            struct bfront *x = realloc(b->exact, (size_t)n * sizeof *x);
            if (!x)
                return;
            memset(x + b->nexact, 0, (size_t)(n - b->nexact) * sizeof *x);
            b->exact = x;
            b->nexact = n;
        }
        b->group = j->gen_gi;
        b->gepoch = e->gepoch;
        b->epoch++;
    }
    if (j->gen_need >= b->nexact)
        return;
    fr_put(&b->exact[j->gen_need], b->epoch, j->walltime, start);
    fr_put(&b->band[band(j->gen_need)], b->epoch, j->walltime, start);
}

void bs_bound_free(struct batch_engine *e)
{
    for (int32_t i = 0; i < e->bnd.nexact; i++)
        free(e->bnd.exact[i].e);
    for (int k = 0; k < 32; k++)
        free(e->bnd.band[k].e);
    free(e->bnd.exact);
    memset(&e->bnd, 0, sizeof e->bnd);
}

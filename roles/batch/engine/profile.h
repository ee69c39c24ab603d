/*
 * profile.h - availability profile: a time-ordered step function of free nodes.
 *
 * A profile holds, for one group of interchangeable nodes, how many are free from
 * each breakpoint to the next; the last step lasts for ever. Reservations are
 * range additions ("-n nodes over [t0,t1)"), and the planner asks for the earliest
 * time at which `need` nodes stay free for a whole walltime.
 *
 * Steps live in blocks of up to PROFILE_BLOCK steps, each block with its own min,
 * max and a lazy addend, so a range addition touches only its two edge blocks and
 * a search skips whole blocks that cannot contain (or cannot break) a fit: both
 * cost O(S/B + B) for S steps instead of O(S).
 */
#ifndef GRIDNODE_BATCH_PROFILE_H
#define GRIDNODE_BATCH_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#define PROFILE_INF INT64_MAX
#define PROFILE_BLOCK 32

struct profile_block {
    int32_t n;        /* steps in use */
    int32_t lazy;     /* added to every v[] of the block */
    int32_t min, max; /* of v[0..n), without lazy; max may exceed it (a bound) */
    int64_t t[PROFILE_BLOCK];
    int32_t v[PROFILE_BLOCK];
};

struct profile {
    struct profile_block **blk;
    int32_t nblk, capblk;
    struct profile_block **spare; /* recycled blocks */
    int32_t nspare, capspare;
};

/* Empties p and makes it one step: `value` free from `origin` on. Returns 0, or
 * -1 (ENOMEM; p is then empty and still valid). p must have been zeroed or
 * initialised before. */
int bs_profile_reset(struct profile *p, int64_t origin, int32_t value);
/* Frees all memory of p; p is left zeroed and may be reset again. */
void bs_profile_free(struct profile *p);
/* Makes dst an exact copy of src (dst's old content is dropped). 0 or -1 (ENOMEM). */
int bs_profile_copy(struct profile *dst, const struct profile *src);

/* Adds delta over [t0, t1) (t1 may be PROFILE_INF); times before the origin are
 * clipped to it. 0, or -1 (ENOMEM: p unchanged). */
int bs_profile_add(struct profile *p, int64_t t0, int64_t t1, int32_t delta);
/* Drops the steps that end at or before `now` and moves the origin to now. */
void bs_profile_trim(struct profile *p, int64_t now);

/* Free value at time t (t before the origin reads the first step). */
int32_t bs_profile_at(const struct profile *p, int64_t t);
/* Minimum free value over [t0, t1); t1 <= t0 reads the value at t0. */
int32_t bs_profile_min(const struct profile *p, int64_t t0, int64_t t1);
/* The start of p's first step holding more than v: INT64_MIN when it is the first
 * step (every time up to the origin reads it), PROFILE_INF when there is none. Before
 * it every value is at most v. */
int64_t bs_profile_first_above(const struct profile *p, int32_t v);
/* Whether t lies in p's first step (or before it) and that step holds at most 0: a
 * window from t then has no free node (a search's test at "now", without a call). */
static inline bool bs_profile_none_at_head(const struct profile *p, int64_t t)
{
    const struct profile_block *b = p->blk[0];
    if (b->v[0] + b->lazy > 0)
        return false;
    return t < (b->n > 1 ? b->t[1] : p->nblk > 1 ? p->blk[1]->t[0] : PROFILE_INF);
}
/* Earliest t in [t0, tmax] with at least `need` free over all of [t, t+len);
 * PROFILE_INF if there is none. len >= 1. */
int64_t bs_profile_find(const struct profile *p, int64_t t0, int64_t tmax, int64_t len,
                        int32_t need);
/* The first breakpoint strictly after t, or PROFILE_INF. */
int64_t bs_profile_next(const struct profile *p, int64_t t);
/* The origin (time of the first step). */
int64_t bs_profile_origin(const struct profile *p);
/* Number of steps (for statistics and tests). */
int32_t bs_profile_steps(const struct profile *p);

/* Copies the steps from the one holding `from` on: up to max (time, value) pairs
 * (the first time is clipped to `from`); returns how many were written. */
int32_t bs_profile_steps_from(const struct profile *p, int64_t from, int64_t *t, int32_t *v,
                              int32_t max);

/* Step iteration: bs_profile_step(p, i, &t, &v) for i in [0, bs_profile_steps(p)) gives
 * the i-th step; O(blocks) per call, meant for tests and diagnostics. */
void bs_profile_step(const struct profile *p, int32_t i, int64_t *t, int32_t *v);

#endif

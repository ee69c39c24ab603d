/*
 * profile.c - availability profile (see profile.h): a blocked, sorted array of
 * (time, free) steps with per-block min/max and a lazy addend.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/profile.h"

/* Recomputes b's min and max (without its lazy addend). */
static void blk_fix(struct profile_block *b)
{
    int32_t mn = b->v[0], mx = b->v[0];
    for (int32_t i = 1; i < b->n; i++) {
        if (b->v[i] < mn)
            mn = b->v[i];
        if (b->v[i] > mx)
            mx = b->v[i];
    }
    b->min = mn;
    b->max = mx;
}

/* A block from the spare list or the heap; NULL on ENOMEM. */
static struct profile_block *blk_get(struct profile *p)
{
    if (p->nspare > 0)
        return p->spare[--p->nspare];
    return malloc(sizeof(struct profile_block));
}

/* Returns b to the spare list (freeing it if the list cannot grow). */
static void blk_put(struct profile *p, struct profile_block *b)
{
    if (p->nspare == p->capspare) {
        int32_t nc = p->capspare ? p->capspare * 2 : 8;
        void *ns = realloc(p->spare, (size_t)nc * sizeof *p->spare);
        if (!ns) {
            free(b);
            return;
        }
        p->spare = ns;
        p->capspare = nc;
    }
    p->spare[p->nspare++] = b;
}

/* Makes room for at least n block pointers; 0 or -1 (ENOMEM). */
static int blk_reserve(struct profile *p, int32_t n)
{
    if (n <= p->capblk)
        return 0;
    int32_t nc = p->capblk ? p->capblk : 4;
    while (nc < n)
        nc *= 2;
    void *nb = realloc(p->blk, (size_t)nc * sizeof *p->blk);
    if (!nb) {
        errno = ENOMEM;
        return -1;
    }
    p->blk = nb;
    p->capblk = nc;
    return 0;
}

int bs_profile_reset(struct profile *p, int64_t origin, int32_t value)
{
    while (p->nblk > 1)
        blk_put(p, p->blk[--p->nblk]);
    if (p->nblk == 0) {
        struct profile_block *b;
        if (blk_reserve(p, 1) < 0 || !(b = blk_get(p))) {
            errno = ENOMEM;
            return -1;
        }
        p->blk[p->nblk++] = b;
    }
    struct profile_block *b = p->blk[0];
    b->n = 1;
    b->lazy = 0;
    b->t[0] = origin;
    b->v[0] = value;
    b->min = b->max = value;
    return 0;
}

void bs_profile_free(struct profile *p)
{
    for (int32_t i = 0; i < p->nblk; i++)
        free(p->blk[i]);
    for (int32_t i = 0; i < p->nspare; i++)
        free(p->spare[i]);
    free(p->blk);
    free(p->spare);
    memset(p, 0, sizeof *p);
}

int bs_profile_copy(struct profile *dst, const struct profile *src)
{
    if (blk_reserve(dst, src->nblk) < 0)
        return -1;
    while (dst->nblk > src->nblk)
        blk_put(dst, dst->blk[--dst->nblk]);
    while (dst->nblk < src->nblk) {
        struct profile_block *b = blk_get(dst);
        if (!b) {
            errno = ENOMEM;
            return -1;
        }
        dst->blk[dst->nblk++] = b;
    }
    for (int32_t k = 0; k < src->nblk; k++) {
        const struct profile_block *s = src->blk[k];
        struct profile_block *d = dst->blk[k];
        d->n = s->n;
        d->lazy = s->lazy;
        d->min = s->min;
        d->max = s->max;
        memcpy(d->t, s->t, (size_t)s->n * sizeof s->t[0]);
        memcpy(d->v, s->v, (size_t)s->n * sizeof s->v[0]);
    }
    return 0;
}

/* Finds the step holding time t: the last step whose start is <= t, or step
 * (0,0) when t precedes the origin. */
static void locate(const struct profile *p, int64_t t, int32_t *bi, int32_t *si)
{
    const struct profile_block *b0 = p->blk[0];
    if (b0->n > 1 ? t < b0->t[1] : (p->nblk == 1 || t < p->blk[1]->t[0])) {
        *bi = *si = 0; /* the first step: every query at "now" lands here */
        return;
    }
    /* branch-free binary searches (conditional moves: the comparisons are
     * unpredictable): the last block, then the last step, starting at or before t */
    struct profile_block *const *bb = p->blk;
    for (int32_t len = p->nblk; len > 1;) {
        int32_t half = len / 2;
        bb = bb[half]->t[0] <= t ? bb + half : bb;
        len -= half;
    }
    const struct profile_block *b = *bb;
    const int64_t *tt = b->t; /* here tt[0] <= t (or block 0, whose step 1 <= t) */
    for (int32_t len = b->n; len > 1;) {
        int32_t half = len / 2;
        tt = tt[half] <= t ? tt + half : tt;
        len -= half;
    }
    *bi = (int32_t)(bb - p->blk);
    *si = (int32_t)(tt - b->t);
}

/* Start time of the step after (bi, si), or PROFILE_INF after the last one. */
static int64_t next_time(const struct profile *p, int32_t bi, int32_t si)
{
    const struct profile_block *b = p->blk[bi];
    if (si + 1 < b->n)
        return b->t[si + 1];
    if (bi + 1 < p->nblk)
        return p->blk[bi + 1]->t[0];
    return PROFILE_INF;
}

/* Splits block bi in two halves; 0 or -1 (ENOMEM, nothing changed). */
static int blk_split(struct profile *p, int32_t bi)
{
    if (blk_reserve(p, p->nblk + 1) < 0)
        return -1;
    struct profile_block *nb = blk_get(p);
    if (!nb) {
        errno = ENOMEM;
        return -1;
    }
    struct profile_block *b = p->blk[bi];
    int32_t keep = b->n / 2;
    nb->n = b->n - keep;
    nb->lazy = b->lazy;
    memcpy(nb->t, b->t + keep, (size_t)nb->n * sizeof b->t[0]);
    memcpy(nb->v, b->v + keep, (size_t)nb->n * sizeof b->v[0]);
    b->n = keep;
    blk_fix(b);
    blk_fix(nb);
    memmove(p->blk + bi + 2, p->blk + bi + 1, (size_t)(p->nblk - bi - 1) * sizeof *p->blk);
    p->blk[bi + 1] = nb;
    p->nblk++;
    return 0;
}

/* Makes t a breakpoint (no-op if it is one or precedes the origin) and returns
 * the position of the step starting at t in *bi, *si. 0 or -1. */
static int split_at(struct profile *p, int64_t t, int32_t *bi, int32_t *si)
{
    locate(p, t, bi, si);
    struct profile_block *b = p->blk[*bi];
    if (b->t[*si] >= t)
        return 0;
    if (b->n == PROFILE_BLOCK) {
        if (blk_split(p, *bi) < 0)
            return -1;
        if (*si >= p->blk[*bi]->n) {
            *si -= p->blk[*bi]->n;
            ++*bi;
        }
        b = p->blk[*bi];
    }
    int32_t at = ++*si;
    memmove(b->t + at + 1, b->t + at, (size_t)(b->n - at) * sizeof b->t[0]);
    memmove(b->v + at + 1, b->v + at, (size_t)(b->n - at) * sizeof b->v[0]);
    b->t[at] = t;
    b->v[at] = b->v[at - 1];
    b->n++;
    return 0;
}

/* Adds delta to steps [from, to) of block b and updates its min (kept exact) and
 * max (kept an upper bound: only a search's skip test reads it) from those steps;
 * the block is rescanned only when raising steps may have raised its minimum. */
static void blk_add(struct profile_block *b, int32_t from, int32_t to, int32_t delta)
{
    if (from == 0 && to == b->n) {
        b->lazy += delta;
        return;
    }
    int32_t old_mn = INT32_MAX, mn = INT32_MAX, mx = INT32_MIN;
    for (int32_t i = from; i < to; i++) {
        int32_t o = b->v[i], v = o + delta;
        b->v[i] = v;
        old_mn = o < old_mn ? o : old_mn;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    if (delta < 0) { /* the max stays a bound */
        b->min = mn < b->min ? mn : b->min;
        return;
    }
    b->max = mx > b->max ? mx : b->max;
    if (old_mn == b->min) /* a minimum step went up: another may hold it */
        blk_fix(b);
}

/* Removes the step at (bi, si) if the step before it holds the same value. */
static void merge_pos(struct profile *p, int32_t bi, int32_t si)
{
    struct profile_block *b = p->blk[bi];
    if (bi == 0 && si == 0)
        return;
    const struct profile_block *pb = si > 0 ? b : p->blk[bi - 1];
    if (pb->v[si > 0 ? si - 1 : pb->n - 1] + pb->lazy != b->v[si] + b->lazy)
        return;
    memmove(b->t + si, b->t + si + 1, (size_t)(b->n - si - 1) * sizeof b->t[0]);
    memmove(b->v + si, b->v + si + 1, (size_t)(b->n - si - 1) * sizeof b->v[0]);
    if (--b->n > 0) {
        if (si == 0) /* v[0] left the block: its min may rise (with si > 0 the value
                      * removed is still in v[si - 1], so min and max hold) */
            blk_fix(b);
        return;
    }
    blk_put(p, b);
    memmove(p->blk + bi, p->blk + bi + 1, (size_t)(p->nblk - bi - 1) * sizeof *p->blk);
    p->nblk--;
}

/* Adds delta to the steps from (bi, si) on that start before t1; *ebi, *esi
 * receive the position of the first step at or after t1 (*ebi = nblk: none). */
static void add_from(struct profile *p, int32_t bi, int32_t si, int64_t t1, int32_t delta,
                     int32_t *ebi, int32_t *esi)
{
    for (;;) {
        struct profile_block *b = p->blk[bi];
        if (t1 != PROFILE_INF && b->t[b->n - 1] >= t1) { /* the range ends in this block */
            int32_t e = si;
            while (b->t[e] < t1)
                e++;
            blk_add(b, si, e, delta);
            *ebi = bi;
            *esi = e;
            return;
        }
        blk_add(b, si, b->n, delta);
        *esi = 0;
        if (++bi == p->nblk || (t1 != PROFILE_INF && p->blk[bi]->t[0] >= t1)) {
            *ebi = bi;
            return;
        }
        si = 0;
    }
}

/* bs_profile_add on a profile of one block with room for two more steps (the
 * common case: a few dozen running jobs): the same steps and values as the
 * general path (split at t1 and t0, add, merge at t1 and t0), in one pass. */
static void add_one_block(struct profile_block *b, int64_t t0, int64_t t1, int32_t delta)
{
    int32_t n = b->n, i = 0, j;
    while (i < n && b->t[i] < t0) /* i > 0 unless t0 is the origin (t[0] <= t0) */
        i++;
    if (i == n || b->t[i] != t0) { /* new step at t0, holding the value before it */
        memmove(b->t + i + 1, b->t + i, (size_t)(n - i) * sizeof b->t[0]);
        memmove(b->v + i + 1, b->v + i, (size_t)(n - i) * sizeof b->v[0]);
        b->t[i] = t0;
        b->v[i] = b->v[i - 1];
        n++;
    }
    for (j = i + 1; j < n && b->t[j] < t1;)
        j++;
    if (t1 != PROFILE_INF && (j == n || b->t[j] != t1)) { /* new step at t1 */
        memmove(b->t + j + 1, b->t + j, (size_t)(n - j) * sizeof b->t[0]);
        memmove(b->v + j + 1, b->v + j, (size_t)(n - j) * sizeof b->v[0]);
        b->t[j] = t1;
        b->v[j] = b->v[j - 1];
        n++;
    }
    b->n = n;
    blk_add(b, i, j, delta);
    if (delta > 0) { /* as merge_pos: in one block a merge keeps min and max */
        if (j < b->n && b->v[j] == b->v[j - 1]) {
            memmove(b->t + j, b->t + j + 1, (size_t)(b->n - j - 1) * sizeof b->t[0]);
            memmove(b->v + j, b->v + j + 1, (size_t)(b->n - j - 1) * sizeof b->v[0]);
            b->n--;
        }
        if (i > 0 && b->v[i] == b->v[i - 1]) {
            memmove(b->t + i, b->t + i + 1, (size_t)(b->n - i - 1) * sizeof b->t[0]);
            memmove(b->v + i, b->v + i + 1, (size_t)(b->n - i - 1) * sizeof b->v[0]);
            b->n--;
        }
    }
}

int bs_profile_add(struct profile *p, int64_t t0, int64_t t1, int32_t delta)
{
    int64_t origin = p->blk[0]->t[0];
    if (t0 < origin)
        t0 = origin;
    if (t1 <= t0 || delta == 0)
        return 0;
    if (p->nblk == 1 && p->blk[0]->n <= PROFILE_BLOCK - 2) {
        add_one_block(p->blk[0], t0, t1, delta);
        return 0;
    }
    int32_t bi, si, ebi, esi;
    /* split the end first: splitting t0 afterwards cannot move anything after t0 */
    if ((t1 != PROFILE_INF && split_at(p, t1, &bi, &si) < 0) || split_at(p, t0, &bi, &si) < 0)
        return -1; /* an extra breakpoint may remain; values are unchanged */
    add_from(p, bi, si, t1, delta, &ebi, &esi);
    if (delta > 0) { /* giving back (a job ended early, a reservation dropped): the
                      * breakpoints it made may be redundant now. The step at t1
                      * goes first: removing it cannot move the one at t0 (earlier,
                      * in the same or an earlier block, which keeps a step). */
        if (t1 != PROFILE_INF && ebi < p->nblk)
            merge_pos(p, ebi, esi);
        if (p->blk[bi]->t[si] == t0)
            merge_pos(p, bi, si);
    }
    return 0;
}

void bs_profile_trim(struct profile *p, int64_t now)
{
    int32_t bi, si;
    locate(p, now, &bi, &si);
    if (bi > 0) {
        for (int32_t k = 0; k < bi; k++)
            blk_put(p, p->blk[k]);
        memmove(p->blk, p->blk + bi, (size_t)(p->nblk - bi) * sizeof *p->blk);
        p->nblk -= bi;
    }
    struct profile_block *b = p->blk[0];
    if (si > 0) {
        memmove(b->t, b->t + si, (size_t)(b->n - si) * sizeof b->t[0]);
        memmove(b->v, b->v + si, (size_t)(b->n - si) * sizeof b->v[0]);
        b->n -= si;
        blk_fix(b);
    }
    if (b->t[0] < now)
        b->t[0] = now;
}

int32_t bs_profile_at(const struct profile *p, int64_t t)
{
    int32_t bi, si;
    locate(p, t, &bi, &si);
    return p->blk[bi]->v[si] + p->blk[bi]->lazy;
}

int32_t bs_profile_min(const struct profile *p, int64_t t0, int64_t t1)
{
    int32_t bi, si;
    locate(p, t0, &bi, &si);
    const struct profile_block *b = p->blk[bi];
    int32_t m = b->v[si] + b->lazy;
    for (si++;;) {
        for (; si < b->n && b->t[si] < t1; si++)
            if (b->v[si] + b->lazy < m)
                m = b->v[si] + b->lazy;
        if (si < b->n || ++bi == p->nblk)
            return m;
        b = p->blk[bi];
        si = 0;
        if (b->t[0] >= t1)
            return m;
        if (b->t[b->n - 1] < t1) { /* the whole block is inside the range */
            if (b->min + b->lazy < m)
                m = b->min + b->lazy;
            si = b->n;
        }
    }
}

int64_t bs_profile_first_above(const struct profile *p, int32_t v)
{
    for (int32_t bi = 0; bi < p->nblk; bi++) {
        const struct profile_block *b = p->blk[bi];
        if (b->max + b->lazy <= v) /* max is a bound: no step of b holds more */
            continue;
        for (int32_t si = 0; si < b->n; si++)
            if (b->v[si] + b->lazy > v)
                return bi == 0 && si == 0 ? INT64_MIN : b->t[si];
    }
    return PROFILE_INF;
}

int64_t bs_profile_find(const struct profile *p, int64_t t0, int64_t tmax, int64_t len,
                        int32_t need)
{
    int64_t origin = p->blk[0]->t[0];
    if (t0 < origin)
        t0 = origin;
    if (t0 > tmax)
        return PROFILE_INF;
    int32_t bi, si;
    locate(p, t0, &bi, &si);
    for (;;) {
        /* seek: the first step from (bi, si) on with at least `need` free */
        const struct profile_block *b;
        for (;;) {
            b = p->blk[bi];
            if (b->t[si] > tmax) /* every later start is past tmax: stop seeking */
                return PROFILE_INF;
            int32_t th = need - b->lazy;
            if (b->max >= th) {
                while (si < b->n && b->v[si] < th)
                    si++;
                if (si < b->n)
                    break;
            }
            if (++bi == p->nblk)
                return PROFILE_INF;
            si = 0;
        }
        int64_t cand = b->t[si] > t0 ? b->t[si] : t0;
        if (cand > tmax)
            return PROFILE_INF;
        int64_t end = cand > INT64_MAX - len ? INT64_MAX : cand + len;
        /* extend: every step starting before `end` must keep `need` free */
        for (si++;;) {
            if (si == b->n) {
                if (++bi == p->nblk)
                    return cand; /* the last step lasts for ever */
                b = p->blk[bi];
                si = 0;
                if (b->t[0] >= end)
                    return cand;
                if (b->min + b->lazy >= need) {
                    si = b->n; /* the whole block fits */
                    continue;
                }
            }
            int32_t th = need - b->lazy;
            while (si < b->n && b->t[si] < end && b->v[si] >= th)
                si++;
            if (si == b->n)
                continue;
            if (b->t[si] >= end)
                return cand;
            break; /* step si breaks the window: seek again after it */
        }
        if (++si == b->n) {
            if (++bi == p->nblk)
                return PROFILE_INF;
            si = 0;
        }
    }
}

int64_t bs_profile_next(const struct profile *p, int64_t t)
{
    int32_t bi, si;
    locate(p, t, &bi, &si);
    if (p->blk[bi]->t[si] > t) /* t precedes the origin */
        return p->blk[bi]->t[si];
    return next_time(p, bi, si);
}

int64_t bs_profile_origin(const struct profile *p)
{
    return p->blk[0]->t[0];
}

int32_t bs_profile_steps(const struct profile *p)
{
    int32_t n = 0;
    for (int32_t k = 0; k < p->nblk; k++)
        n += p->blk[k]->n;
    return n;
}

void bs_profile_step(const struct profile *p, int32_t i, int64_t *t, int32_t *v)
{
    int32_t k = 0;
    while (k < p->nblk - 1 && i >= p->blk[k]->n)
        i -= p->blk[k++]->n;
    *t = p->blk[k]->t[i];
    *v = p->blk[k]->v[i] + p->blk[k]->lazy;
}

int32_t bs_profile_steps_from(const struct profile *p, int64_t from, int64_t *t, int32_t *v,
                              int32_t max)
{
    int32_t bi, si, n = 0;
    locate(p, from, &bi, &si);
    for (; bi < p->nblk && n < max; bi++, si = 0) {
        const struct profile_block *b = p->blk[bi];
        for (; si < b->n && n < max; si++, n++) {
            t[n] = b->t[si] < from ? from : b->t[si];
            v[n] = b->v[si] + b->lazy;
        }
    }
    return n;
}

/*
 * cycle.c - one Maui scheduling cycle (seed 003 section 3.2, MISSION B3), in the
 * seed's order:
 *   1. refresh: expire admin reservations, note overruns, charge fairshare;
 *   2. drop the job reservations that went stale, start the jobs whose
 *      reservation time has come;
 *   3. select eligible jobs (holds, size, throttles MAXJOB / MAXPROC);
 *   4. order them by priority;
 *   5. start them in order while they fit; a blocked job gets a job reservation at
 *      its earliest start, until RESERVATIONDEPTH reservations exist (1 = EASY,
 *      unlimited = conservative); BACKFILLPOLICY NONE stops at the first one;
 *   6. backfill the rest (FIRSTFIT or BESTFIT, B4) without delaying a reservation;
 *   7. optionally, estimate every pending job's start (B6).
 * With config.grid_wait_bound, a grid guard runs before step 1 and after step 6: a
 * local job that has waited the bound and holds a job reservation is no longer held
 * back by grid reservations (see grid_guard); when the second one releases any, the
 * cycle plans again once.
 *
 * Job reservations are rebuilt only when something invalidated them (a job ended
 * before its walltime, a hold, a reservation or node change): otherwise the ones
 * of the longest unchanged prefix of the priority order are kept, which is exactly
 * what a rebuild would produce, and only the rest is planned again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

const char *bs_cycle_reason(enum batch_reason r, uint8_t kind)
{
    static const char *const thr[BATCH_CRED_KINDS] = {
        "throttled: user limit (MAXJOB/MAXPROC)", "throttled: group limit (MAXJOB/MAXPROC)",
        "throttled: account limit (MAXJOB/MAXPROC)", "throttled: class limit (MAXJOB/MAXPROC)",
        "throttled: qos limit (MAXJOB/MAXPROC)"};
    switch (r) {
    case R_NONE:
        return "";
    case R_HOLD:
        return "held";
    case R_NEVER:
        return "larger than every compatible set of nodes";
    case R_THROTTLE:
        return kind < BATCH_CRED_KINDS ? thr[kind] : "throttled";
    case R_RESOURCES:
        return "waiting for resources";
    case R_RESERVED:
        return "waiting for resources; has a job reservation";
    case R_BLOCKED:
        return "behind a blocked job (no backfill)";
    case R_NOFIT:
        return "no room in any pool it may use (nodes down or reserved)";
    case R_WAITRESV:
        return "waiting for its admin reservation";
    }
    return "";
}

static void set_reason(const struct batch_engine *e, struct bjob *j, enum batch_reason r)
{
    j->reason = r;
    j->reason_cycle = e->cycle_no;
}

/* The reason a pending job did not start at the last cycle. */
enum batch_reason bs_cycle_job_reason(const struct batch_engine *e, const struct bjob *j)
{
    if (j->reserved != BATCH_NEVER)
        return j->reason_cycle == e->cycle_no && j->reason == R_WAITRESV ? R_WAITRESV : R_RESERVED;
    if (j->hold)
        return R_HOLD;
    if (j->never)
        return R_NEVER;
    if (j->reason_cycle == e->cycle_no)
        return j->reason;
    return R_RESOURCES;
}

/* Whether starting j now would break a MAXJOB/MAXPROC limit of its credentials. */
static bool throttled(struct batch_engine *e, struct bjob *j)
{
    if (!e->any_throttle)
        return false;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        const struct cred *c = &e->creds[k].v[j->cred[k]];
        if ((c->maxjob >= 0 && c->run_jobs + 1 > c->maxjob) ||
            (c->maxproc >= 0 && c->run_procs + j->procs > c->maxproc)) {
            j->throttle_kind = (uint8_t)k;
            return true;
        }
    }
    return false;
}

/* Step 1. 0 or -1 (ENOMEM). */
static int refresh(struct batch_engine *e, int64_t now)
{
    e->now = now;
    for (int32_t x = e->nrlive - 1; x >= 0; x--) /* backwards: a drop moves the later ones */
        if (e->resv[e->rlive[x]].end <= now) {
            bs_resv_live_drop(e, e->rlive[x]);
            e->groups_dirty = true;
        }
    if (now >= e->min_end) { /* some job may have outlived its walltime */
        e->min_end = BATCH_NEVER;
        for (int32_t i = 0; i < e->nrunning; i++) {
            struct bjob *j = &e->jobs[e->running[i]];
            if (j->end_est <= now) { /* overrun: the plan assumed it had ended */
                j->end_est = now + e->cfg.overrun_grace;
                e->groups_dirty = true;
            }
            if (j->end_est < e->min_end)
                e->min_end = j->end_est;
        }
    }
    if (e->groups_dirty) {
        if (bs_engine_regroup(e) < 0)
            return -1;
    } else {
        bs_plan_trim(e, now, e->plan_valid); /* an invalid plan is copied from base next */
    }
    if (e->cfg.fspolicy != BATCH_FS_NONE) {
        for (int32_t i = 0; i < e->nrunning; i++)
            bs_fs_charge_upto(e, &e->jobs[e->running[i]], now);
        e->fs_stamp = now;
    }
    return 0;
}

/* Step 2: starts the jobs whose reservation begins now. Stale entries (their time
 * passed without a cycle, or the job cannot take them) invalidate the plan. */
static int start_due(struct batch_engine *e, struct batch_cycle_stats *st)
{
    int32_t w = 0;
    bool stale = false;
    for (int32_t i = 0; i < e->nplan; i++) {
        struct plan_ent pe = e->plan[i];
        struct bjob *j = &e->jobs[pe.job];
        if (pe.start < e->now)
            stale = true;
        if (pe.start != e->now || stale) {
            e->plan[w++] = pe;
            continue;
        }
        bool can = !j->hold && !throttled(e, j);
        if (can && bs_plan_start(e, pe.job, pe.pool, e->pcnt + pe.off, true) == 0) {
            e->compact_from = 0; /* before order(): its queue position is not known */
            st->started++;
            continue;
        }
        if (can && errno == ENOMEM)
            return -1;
        e->plan[w++] = pe; /* held, throttled or not placeable: plan again */
        stale = true;
    }
    e->nplan = w;
    if (stale && bs_plan_copy_base(e) < 0)
        return -1;
    if (stale)
        st->replanned = true;
    return 0;
}

/* Queue order: priority, then submission, then id. */
static int job_cmp(const void *pa, const void *pb, void *arg)
{
    const struct batch_engine *e = arg;
    const struct bjob *a = &e->jobs[*(const int32_t *)pa], *b = &e->jobs[*(const int32_t *)pb];
    if (a->prio != b->prio)
        return a->prio > b->prio ? -1 : 1;
    if (a->submit != b->submit)
        return a->submit < b->submit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Sorts queue[from, to) (insertion sort when nearly in order, else qsort). */
static void sort_range(struct batch_engine *e, int32_t from, int32_t to, int32_t descents)
{
    int32_t *q = e->queue + from, n = to - from;
    if (descents > 8) {
        qsort_r(q, (size_t)n, sizeof *q, job_cmp, e);
        return;
    }
    for (int32_t i = 1; i < n && descents > 0; i++) {
        int32_t s = q[i], k = i;
        for (; k > 0 && job_cmp(&q[k - 1], &s, e) > 0; k--)
            q[k] = q[k - 1];
        q[k] = s;
    }
}

/* Static priorities: the sorted prefix keeps its order, so only the jobs queued
 * since the last cycle are keyed, sorted and merged in. */
static int order_new(struct batch_engine *e)
{
    int32_t from = e->nsorted, n = e->nqueue, descents = 0;
    for (int32_t i = from; i < n; i++) {
        struct bjob *j = &e->jobs[e->queue[i]];
        bs_engine_fit_refresh(e, j);
        j->prio = bs_prio_key(e, j);
        descents += i > from && job_cmp(&e->queue[i - 1], &e->queue[i], e) > 0;
    }
    sort_range(e, from, n, descents);
    if (from == 0 || from == n || job_cmp(&e->queue[from - 1], &e->queue[from], e) <= 0)
        return 0;
    int32_t *tmp = malloc((size_t)(n - from) * sizeof *tmp);
    if (!tmp)
        return -1;
    memcpy(tmp, e->queue + from, (size_t)(n - from) * sizeof *tmp);
    for (int32_t a = from - 1, b = n - from - 1, w = n - 1; b >= 0; w--) /* merge from the back */
        e->queue[w] = (a >= 0 && job_cmp(&e->queue[a], &tmp[b], e) > 0) ? e->queue[a--] : tmp[b--];
    free(tmp);
    return 0;
}

/* Steps 3-4: drops jobs that left the queue, computes priorities and sorts. */
static int order(struct batch_engine *e, int64_t now)
{
    if (e->static_prio && e->order_epoch == e->gepoch)
        return order_new(e);
    int32_t w = 0, descents = 0;
    for (int32_t i = 0; i < e->nqueue; i++) {
        int32_t s = e->queue[i];
        struct bjob *j = &e->jobs[s];
        if (!j->live || j->state != BATCH_JOB_PENDING)
            continue;
        bs_engine_fit_refresh(e, j);
        j->prio = e->static_prio ? bs_prio_key(e, j) : bs_prio_compute(e, j, now, NULL);
        e->queue[w++] = s;
        descents += w > 1 && job_cmp(&e->queue[w - 2], &e->queue[w - 1], e) > 0;
    }
    e->nqueue = w;
    sort_range(e, 0, w, descents);
    e->order_epoch = e->gepoch;
    return 0;
}

static bool candidate(const struct bjob *j)
{
    return j->state == BATCH_JOB_PENDING && !j->hold && !j->never;
}

/* Keeps the job reservations of the longest prefix of the order that matches the
 * plan and drops the others; returns the queue position where planning resumes. An
 * early-start job waiting for its own admin reservation whose nodes are free until it
 * begins ends the prefix: planned again, it may start now (bs_plan_earliest). */
static int32_t keep_prefix(struct batch_engine *e)
{
    int32_t qi = 0, k = 0;
    for (; qi < e->nqueue; qi++) {
        int32_t s = e->queue[qi];
        if (!candidate(&e->jobs[s]))
            continue;
        if (k < e->nplan && e->plan[k].job == s &&
            !(e->jobs[s].early_start && bs_plan_pull_free(e, e->plan[k].pool))) {
            set_reason(e, &e->jobs[s], e->plan[k].pool ? R_WAITRESV : R_RESERVED);
            k++;
            continue;
        }
        break;
    }
    for (int32_t i = e->nplan - 1; i >= k; i--)
        bs_plan_unreserve(e, i);
    e->nplan = k;
    return qi;
}

/* Starts job slot s, at queue position qi, now in pool `pool` on cnt nodes per
 * group; 0 or -1. */
static int start_now(struct batch_engine *e, int32_t s, int32_t qi, int32_t pool,
                     const int32_t *cnt)
{
    if (bs_plan_start(e, s, pool, cnt, false) < 0)
        return -1;
    if (qi < e->compact_from)
        e->compact_from = qi;
    return 0;
}

/* The queue position of job slot s: a binary search by job_cmp (the queue is
 * sorted from order() to queue_compact()); 0 if it is not found there. */
static int32_t queue_pos(struct batch_engine *e, int32_t s)
{
    int32_t lo = 0, hi = e->nqueue;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (job_cmp(&e->queue[mid], &s, e) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->nqueue && e->queue[lo] == s ? lo : 0;
}

/* Step 5 from queue position qi: start in order, reserve blocked jobs up to the
 * depth. Returns the position where backfill takes over (nqueue: nothing left),
 * -1 on ENOMEM; *fcfs_stop is set when BACKFILLPOLICY NONE stopped the queue. */
static int32_t phase_order(struct batch_engine *e, int32_t qi, struct batch_cycle_stats *st,
                           bool *fcfs_stop, bool plan_only)
{
    const struct batch_config *c = &e->cfg;
    if (c->backfill == BATCH_BF_NONE && e->nplan > 0) { /* the top job is blocked */
        *fcfs_stop = true;
        return qi;
    }
    /* RESERVATIONDEPTH counts the priority reservations in the general pool: a job
     * waiting in its own admin reservation (a grid job's, issue 25) already holds its
     * nodes and takes no priority reservation from the jobs behind it */
    int32_t ngen = 0;
    for (int32_t i = 0; i < e->nplan; i++)
        ngen += e->plan[i].pool == 0;
    for (; qi < e->nqueue; qi++) {
        int32_t s = e->queue[qi], pool;
        struct bjob *j = &e->jobs[s];
        if (!candidate(j))
            continue;
        if (throttled(e, j)) {
            set_reason(e, j, R_THROTTLE);
            continue;
        }
        if (c->backfill != BATCH_BF_NONE && c->reservation_depth != BATCH_UNLIMITED &&
            ngen >= c->reservation_depth)
            return qi;
        int64_t lb = bs_bound_get(e, j), t = BATCH_NEVER;
        if (lb != BATCH_NEVER)
            t = bs_plan_earliest(e, j, lb > e->now ? lb : e->now, BATCH_NEVER, false, &pool,
                                 e->scr_cnt);
        bs_bound_put(e, j, t);
        if (t == BATCH_NEVER) {
            set_reason(e, j, R_NOFIT);
            continue;
        }
        if (t == e->now && !plan_only) {
            if (start_now(e, s, qi, pool, e->scr_cnt) < 0)
                return errno == ENOMEM ? -1 : qi;
            st->started++;
            continue;
        }
        if (pool > 0 && !plan_only && e->moves_left > 0) {
            int m = bs_moveup_pool(e, pool); /* its turn: a grid reservation moves up */
            if (m < 0)
                return -1;
            if (m > 0) {
                e->moved_now = true;
                return qi;
            }
        }
        if (bs_plan_reserve(e, s, pool, t, e->scr_cnt) < 0)
            return -1;
        ngen += pool == 0;
        set_reason(e, j, pool ? R_WAITRESV : R_RESERVED);
        if (c->backfill == BATCH_BF_NONE) {
            *fcfs_stop = true;
            return qi + 1;
        }
    }
    return qi;
}

/* Whether the backfill memo (internal.h) may skip the jobs it covers now. */
static bool memo_usable(const struct batch_engine *e)
{
    return e->bf_memo && e->now < e->bf_next && e->npools == 1 && !e->any_throttle;
}

/* Records the memo after a complete FIRSTFIT pass: no job queued so far that is
 * left without a reservation can start now. A job that could not start at t
 * cannot start at a later t' either while the plan only loses capacity and has no
 * breakpoint in (t, t']: the plan is constant on [t, t'], so the window
 * [t', t' + walltime) holds no more than [t, t + walltime) did. */
static void memo_record(struct batch_engine *e)
{
    e->bf_memo = e->npools == 1 && !e->any_throttle;
    e->nfresh = 0;
    e->bf_seq = e->submit_seq;
    e->bf_next = PROFILE_INF;
    for (int32_t k = 0; e->bf_memo && k < e->pools[0].ng; k++) {
        int64_t t = bs_profile_next(&e->pools[0].plan[k], e->now);
        if (t < e->bf_next)
            e->bf_next = t;
    }
}

/* FIRSTFIT backfill: every remaining job, in priority order, that fits now
 * without touching a reservation starts. Jobs the memo covers are known not to
 * fit and are skipped (cycles between two job ends mostly only add jobs). */
/* One FIRSTFIT step: starts job slot s if it fits now; *free_now and fnow[] (free
 * nodes now, per general-pool group) follow. 0, or -1 on ENOMEM. */
static inline bool backfill_skip(const struct batch_engine *e, const struct bjob *j,
                                 const int32_t *fnow)
{
    return !candidate(j) || j->reserved != BATCH_NEVER ||
           (e->npools == 1 && j->gen_gi >= 0 && fnow[j->gen_gi] < j->gen_need);
}

/* Fills fnow[] (free nodes now per general-pool group, with one pool) and returns
 * the free nodes now, as bs_plan_free_now. */
static int32_t free_now_fill(const struct batch_engine *e, int32_t *fnow)
{
    if (e->npools != 1)
        return bs_plan_free_now(e);
    int32_t n = 0;
    for (int32_t k = 0; k < e->pools[0].ng; k++) {
        fnow[k] = bs_profile_at(&e->pools[0].plan[k], e->now);
        n += fnow[k] > 0 ? fnow[k] : 0;
    }
    return n;
}

static int backfill_try(struct batch_engine *e, int32_t s, int32_t qi, int64_t old,
                        int32_t *free_now, int32_t *fnow, struct batch_cycle_stats *st)
{
    int32_t pool;
    struct bjob *j = &e->jobs[s];
    if (backfill_skip(e, j, fnow))
        return 0; /* not a candidate, or cannot fit now: no search */
    if (j->seq <= old)
        return 0; /* the memo knows it cannot fit */
    if (bs_bound_get(e, j) > e->now)
        return 0; /* a job it dominates could not start now */
    int fits = bs_plan_fits_now(e, j, e->scr_cnt);
    if (fits < 0)
        fits = bs_plan_earliest(e, j, e->now, e->now, false, &pool, e->scr_cnt) == e->now;
    else
        pool = 0;
    if (!fits && j->grid && j->early_start && e->moves_left > 0) {
        int m = bs_moveup_job(e, s); /* its turn: its reservation moves up to now */
        if (m != 0)
            return m < 0 ? -1 : 1;
    }
    if (!fits) {
        bs_bound_put(e, j, e->now + 1);
        return 0;
    }
    if (throttled(e, j)) {
        set_reason(e, j, R_THROTTLE);
        return 0;
    }
    if (start_now(e, s, qi < 0 ? queue_pos(e, s) : qi, pool, e->scr_cnt) < 0)
        return errno == ENOMEM ? -1 : 0;
    st->backfilled++;
    *free_now = free_now_fill(e, fnow);
    return 0;
}

/* Memo in use: only the jobs queued since it (e->fresh) can start, so they are
 * tried alone, in queue order (the queue is sorted by job_cmp), instead of
 * walking the whole queue. A fresh job ahead of qi is a candidate without
 * reservation only if it fits nowhere (R_NOFIT), so trying it changes nothing. */
static int backfill_fresh(struct batch_engine *e, int64_t old, int32_t *free_now, int32_t *fnow,
                          struct batch_cycle_stats *st)
{
    int32_t *f = e->fresh, n = 0;
    for (int32_t i = 0; i < e->nfresh; i++) { /* the live ones, once each */
        const struct bjob *j = &e->jobs[f[i]];
        if (j->live && j->state == BATCH_JOB_PENDING && j->seq > old)
            f[n++] = f[i];
    }
    for (int32_t i = 1; i < n; i++) { /* few: insertion sort */
        int32_t s = f[i], k = i;
        for (; k > 0 && job_cmp(&f[k - 1], &s, e) > 0; k--)
            f[k] = f[k - 1];
        f[k] = s;
    }
    for (int32_t i = 0; *free_now > 0 && i < n; i++) {
        int rc =
            i == 0 || f[i] != f[i - 1] ? backfill_try(e, f[i], -1, old, free_now, fnow, st) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int backfill_first(struct batch_engine *e, int32_t qi, struct batch_cycle_stats *st)
{
    int64_t old = memo_usable(e) ? e->bf_seq : 0; /* jobs with seq <= old cannot fit */
    int32_t *fnow = e->scr_free, free_now = free_now_fill(e, fnow); /* free now, per group */
    if (old > 0 && e->nfresh >= 0) {
        int rc = backfill_fresh(e, old, &free_now, fnow, st);
        if (rc != 0)
            return rc; /* 1: a grid reservation moved up (moveup.c): plan again */
    } else {
        /* one group: e->slot_need tells the jobs wider than the free nodes, which
         * backfill_skip would pass over, without reading them */
        bool one = e->npools == 1 && e->pools[0].ng == 1 && e->capneed >= e->njobs;
        const int32_t *need = e->slot_need, *q = e->queue;
        for (; qi < e->nqueue && free_now > 0; qi++) {
            for (int32_t f0 = fnow[0], n = e->nqueue; one && qi < n && need[q[qi]] > f0;)
                qi++; /* every slot < njobs <= capneed: no bound check */
            if (qi == e->nqueue)
                break;
            int32_t s = q[qi];
            int rc = backfill_skip(e, &e->jobs[s], fnow)
                         ? 0
                         : backfill_try(e, s, qi, old, &free_now, fnow, st);
            if (rc != 0)
                return rc; /* 1: a grid reservation moved up (moveup.c): plan again */
        }
    }
    memo_record(e);
    return 0;
}

/* BESTFIT windows (B4): the times after now at which the general pool's free
 * nodes drop. Window k is what stays free until drop k; the widest is window 0. */
static int collect_drops(struct batch_engine *e)
{
    const struct bpool *p = &e->pools[0];
    e->ndrops = 0;
    for (int32_t k = 0; k < p->ng; k++) {
        int32_t n = bs_profile_steps(&p->plan[k]);
        int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
        if (!v || VEC_RESERVE(e->drops, e->capdrops, e->ndrops + n) < 0) {
            free(v);
            return -1;
        }
        int64_t *t = e->drops + e->ndrops;
        n = bs_profile_steps_from(&p->plan[k], e->now, t, v, n);
        for (int32_t i = 1; i < n; i++)
            if (v[i] < v[i - 1])
                e->drops[e->ndrops++] = t[i];
        free(v);
    }
    return 0;
}

/* Index of the widest window job j fits in time: drops strictly inside its run. */
static int32_t window_of(const struct batch_engine *e, const struct bjob *j)
{
    int64_t end = e->now + j->walltime;
    int32_t n = 0;
    for (int32_t i = 0; i < e->ndrops; i++)
        n += e->drops[i] < end;
    return n;
}

/* BESTFIT backfill: repeatedly take the widest window some job fits, and start the
 * job that fills it best (most processors; priority order breaks ties). */
static int backfill_best(struct batch_engine *e, int32_t qi0, struct batch_cycle_stats *st)
{
    while (bs_plan_free_now(e) > 0) {
        if (collect_drops(e) < 0)
            return -1;
        int32_t best = -1, bestwin = 0, bestpool = 0;
        for (int32_t qi = qi0; qi < e->nqueue; qi++) {
            int32_t s = e->queue[qi], pool;
            struct bjob *j = &e->jobs[s];
            if (!candidate(j) || j->reserved != BATCH_NEVER)
                continue;
            if (throttled(e, j)) {
                set_reason(e, j, R_THROTTLE);
                continue;
            }
            if (bs_plan_earliest(e, j, e->now, e->now, false, &pool, NULL) != e->now)
                continue;
            int32_t win = window_of(e, j);
            if (best < 0 || win < bestwin || (win == bestwin && j->procs > e->jobs[best].procs)) {
                best = s;
                bestwin = win;
                bestpool = pool;
            }
        }
        if (best < 0)
            return 0;
        if (bs_plan_earliest(e, &e->jobs[best], e->now, e->now, false, &bestpool, e->scr_cnt) !=
                e->now ||
            start_now(e, best, queue_pos(e, best), bestpool, e->scr_cnt) < 0)
            return errno == ENOMEM ? -1 : 0;
        st->backfilled++;
    }
    return 0;
}

/* Step 7: plans every pending job without a reservation, in priority order, on a
 * copy of the plan; with BACKFILLPOLICY NONE no job may start before one ahead. */
int bs_cycle_estimate_all(struct batch_engine *e)
{
    if (bs_plan_copy_est(e) < 0)
        return -1;
    bs_bound_reset(e, e->nqueue); /* the est profiles start again from the plan */
    bool fcfs = e->cfg.backfill == BATCH_BF_NONE;
    int64_t floor = e->now;
    for (int32_t qi = 0; qi < e->nqueue; qi++) {
        int32_t s = e->queue[qi], pool;
        struct bjob *j = &e->jobs[s];
        if (j->state != BATCH_JOB_PENDING)
            continue;
        if (!candidate(j)) {
            j->estimate = BATCH_NEVER;
            continue;
        }
        if (j->reserved != BATCH_NEVER) {
            j->estimate = j->reserved;
        } else {
            int64_t lb = bs_bound_get(e, j), t0 = fcfs ? floor : e->now;
            j->estimate = lb == BATCH_NEVER ? BATCH_NEVER
                                            : bs_plan_earliest(e, j, lb > t0 ? lb : t0, BATCH_NEVER,
                                                               true, &pool, e->scr_cnt);
            bs_bound_put(e, j, j->estimate);
            if (j->estimate != BATCH_NEVER &&
                bs_plan_est_reserve(e, s, pool, j->estimate, e->scr_cnt) < 0 && errno == ENOMEM)
                return -1;
        }
        if (j->estimate != BATCH_NEVER && j->estimate > floor)
            floor = j->estimate;
    }
    e->est_valid = true;
    return 0;
}

/* Drops started jobs from the queue. The only entries that are not pending are
 * the e->nstarted jobs this cycle started (a pending job that ends leaves the queue
 * at once), none before e->compact_from, so the scan runs from there to the last
 * of them and moves the rest in one go. */
static void queue_compact(struct batch_engine *e)
{
    int32_t from = e->compact_from < e->nqueue ? e->compact_from : e->nqueue;
    int32_t w = from, i = from, sorted = e->nsorted <= from ? e->nsorted : 0;
    int32_t left = e->nstarted;
    for (; i < e->nqueue && left > 0; i++) {
        const struct bjob *j = &e->jobs[e->queue[i]];
        if (!j->live || j->state != BATCH_JOB_PENDING)
            left--;
        else
            e->queue[w++] = e->queue[i];
        if (i + 1 == e->nsorted)
            sorted = w;
    }
    if (i < e->nsorted) /* the sorted prefix ends in the untouched tail */
        sorted = e->nsorted - (i - w);
    memmove(e->queue + w, e->queue + i, (size_t)(e->nqueue - i) * sizeof *e->queue);
    e->nsorted = e->nsorted ? sorted : 0;
    e->nqueue = w + (e->nqueue - i);
}

/* Rewrites the node counts of the kept reservations contiguously when the array
 * holds mostly counts of dropped ones. */
static void pcnt_compact(struct batch_engine *e)
{
    int32_t live = 0;
    for (int32_t i = 0; i < e->nplan; i++)
        live += e->pools[e->plan[i].pool].ng;
    if (e->npcnt < 1024 || e->npcnt < 4 * live)
        return;
    int32_t w = 0;
    for (int32_t i = 0; i < e->nplan; i++) {
        int32_t ng = e->pools[e->plan[i].pool].ng;
        memmove(e->pcnt + w, e->pcnt + e->plan[i].off, (size_t)ng * sizeof *e->pcnt);
        e->plan[i].off = w;
        w += ng;
    }
    e->npcnt = w;
}

/* Whether job reservation i belongs to a local job that has waited the bound. */
static bool overdue(const struct batch_engine *e, int32_t i, int64_t now)
{
    const struct bjob *j = &e->jobs[e->plan[i].job];
    int64_t bound = e->cfg.grid_wait_bound * e->cfg.unit_per_s;
    return !j->grid && j->live && j->state == BATCH_JOB_PENDING && now - j->submit >= bound;
}

/* Releases the unused grid reservations made before `since` that begin before `until`.
 * Returns how many, -1 on ENOMEM. */
static int guard_one(struct batch_engine *e, int64_t until, int64_t since)
{
    int n = 0;
    for (int32_t x = 0; x < e->nrlive;) { /* a release drops rlive[x]: the next moves in */
        struct bresv *v = &e->resv[e->rlive[x]];
        if (!v->grid || v->running > 0 || v->start >= until || v->created >= since) {
            x++;
            continue;
        }
        if (VEC_RESERVE(e->released, e->capreleased, e->nreleased + 1) < 0)
            return -1;
        struct batch_released *out = &e->released[e->nreleased++];
        snprintf(out->name, sizeof out->name, "%s", v->name);
        out->job = v->njobs == 1 ? v->jobs[0] : 0;
        if (batch_resv_release(e, v->name) == 0)
            n++;
        else
            x++;
    }
    return n;
}

/* Notes since when each job holding a job reservation has held one (without a cycle
 * that ended without it). */
static void note_reserved(struct batch_engine *e)
{
    for (int32_t i = 0; i < e->nplan; i++) {
        struct bjob *j = &e->jobs[e->plan[i].job];
        if (j->plan_cycle != e->cycle_no && j->plan_cycle != e->cycle_no - 1)
            j->resv_since = e->now;
        j->plan_cycle = e->cycle_no;
    }
}

/* The grid guard (docs/batch.md "Grid jobs and local users"). An overdue local job
 * (it has waited config.grid_wait_bound and holds a job reservation) is no longer held
 * back by grid reservations made before it held its job reservation: each one with no
 * job running in it that begins before the local job's reserved start is released; its
 * grid job stays queued and may still start early. Grid reservations made later were
 * placed around the local job's reservation (estimates avoid the queue's job
 * reservations), so they cannot push it back and are kept: a spool that places a job
 * again does not lose it again. Returns how many it released, -1 on ENOMEM. */
static int grid_guard(struct batch_engine *e, int64_t now)
{
    if (e->cfg.grid_wait_bound <= 0 || e->nplan == 0)
        return 0;
    int n = 0;
    for (int32_t i = 0; i < e->nplan; i++) {
        if (!overdue(e, i, now))
            continue;
        int rc = guard_one(e, e->plan[i].start, e->jobs[e->plan[i].job].resv_since);
        if (rc < 0)
            return -1;
        n += rc;
    }
    return n;
}

static int cycle_once(struct batch_engine *e, int64_t now, struct batch_cycle_stats *st);

/* Moves a grid reservation makes in one batch_cycle at most (each one plans again). */
#define MOVES_PER_CYCLE 8

/* cycle_once, again after each grid reservation it moved up (moveup.c). */
static int cycle_moving(struct batch_engine *e, int64_t now, struct batch_cycle_stats *st)
{
    int rc;
    while ((rc = cycle_once(e, now, st)) == 1)
        ;
    return rc;
}

int batch_cycle(struct batch_engine *e, int64_t now, struct batch_cycle_stats *st)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    struct batch_cycle_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    e->nstarted = 0;
    e->nreleased = 0;
    e->compact_from = INT32_MAX;
    e->cycle_no++;
    if (now < e->now)
        now = e->now;
    /* the last cycle's job reservations: grid reservations due before an overdue
     * local job's start go before anything starts in them */
    if (grid_guard(e, now) < 0)
        return -1;
    e->nmoved = 0;
    e->moves_left = MOVES_PER_CYCLE;
    int rc = cycle_moving(e, now, st);
    /* an idle cycle planned nothing; where grid reservations may stand, the guard needs
     * the top jobs' job reservations (planned without starting anything) */
    if (rc == 0 && e->plan_skipped && e->cfg.grid_wait_bound > 0 && e->nresv > 0)
        rc = bs_cycle_plan_skipped(e);
    if (e->cfg.grid_wait_bound > 0)
        note_reserved(e);
    int g = rc == 0 ? grid_guard(e, now) : 0;
    if (g < 0)
        return -1;
    if (g > 0) { /* plan again without them: the local job's start moves up */
        struct batch_cycle_stats st2;
        memset(&st2, 0, sizeof st2);
        rc = cycle_moving(e, now, &st2);
        note_reserved(e);
        st->started += st2.started;
        st->backfilled += st2.backfilled;
        st->reserved = st2.reserved;
        st->pending = st2.pending;
        st->replanned |= st2.replanned;
        st->idle = st2.idle;
    }
    return rc;
}

int bs_cycle_plan_skipped(struct batch_engine *e)
{
    if (!e->plan_skipped)
        return 0;
    e->plan_skipped = false;
    if (!e->plan_valid) {
        if (bs_plan_copy_base(e) < 0)
            return -1;
        e->plan_valid = true;
    }
    struct batch_cycle_stats st;
    memset(&st, 0, sizeof st);
    bool fcfs_stop = false;
    int32_t qi = keep_prefix(e);
    bs_bound_reset(e, e->nqueue - qi);
    if (phase_order(e, qi, &st, &fcfs_stop, true) < 0) {
        e->plan_valid = false;
        return -1;
    }
    return 0;
}

size_t batch_cycle_released(const struct batch_engine *e, const struct batch_released **out)
{
    *out = e->released;
    return (size_t)e->nreleased;
}

/* One pass of steps 1-7 (batch_cycle): 0, -1 (ENOMEM), or 1 when it moved a grid
 * reservation up before backfill (moveup.c): the groups changed, plan again. */
static int cycle_once(struct batch_engine *e, int64_t now, struct batch_cycle_stats *st)
{
    if (refresh(e, now) < 0)
        return -1;
    if (!e->plan_valid) {
        if (bs_plan_copy_base(e) < 0)
            return -1;
        st->replanned = true;
    }
    e->plan_valid = true;
    if (start_due(e, st) < 0 || order(e, now) < 0)
        goto fail;
    e->nsorted = e->nqueue;
    if (!e->cfg.estimates && bs_plan_free_now(e) == 0) {
        st->idle = true;        /* nothing can start: planning would change nothing now */
        e->plan_skipped = true; /* an estimate plans them (bs_cycle_plan_skipped) */
        if (e->nstarted > 0)
            queue_compact(e);
        st->pending = e->nqueue;
        st->reserved = e->nplan;
        return 0;
    }
    e->plan_skipped = false;
    bool fcfs_stop = false;
    int32_t qi = keep_prefix(e);
    bs_bound_reset(e, e->nqueue - qi);
    qi = phase_order(e, qi, st, &fcfs_stop, false);
    if (qi < 0)
        goto fail;
    int moved = e->moved_now; /* phase_order moved a grid reservation up (moveup.c) */
    e->moved_now = false;
    if (!moved && !fcfs_stop && e->cfg.backfill == BATCH_BF_FIRSTFIT &&
        (moved = backfill_first(e, qi, st)) < 0)
        goto fail;
    if (moved > 0) { /* the groups changed: the caller plans again */
        e->moves_left--;
        if (e->nstarted > 0)
            queue_compact(e);
        st->pending = e->nqueue;
        return 1;
    }
    for (int32_t i = qi; fcfs_stop && i < e->nqueue; i++)
        if (candidate(&e->jobs[e->queue[i]]))
            set_reason(e, &e->jobs[e->queue[i]], R_BLOCKED);
    if (!fcfs_stop && e->cfg.backfill == BATCH_BF_BESTFIT && backfill_best(e, qi, st) < 0)
        goto fail;
    if (e->cfg.estimates && bs_cycle_estimate_all(e) < 0)
        goto fail;
    e->moveup_due = false; /* every grid job had its turn: until capacity comes free */
    if (e->nstarted > 0)
        queue_compact(e);
    pcnt_compact(e);
    st->pending = e->nqueue;
    st->reserved = e->nplan;
    return 0;
fail:
    e->plan_valid = false;
    bs_engine_memo_clear(e);
    e->compact_from = 0;
    queue_compact(e);
    errno = ENOMEM;
    return -1;
}

size_t batch_cycle_started(const struct batch_engine *e, const uint64_t **ids)
{
    *ids = e->started;
    return (size_t)e->nstarted;
}

int64_t batch_next_wakeup(const struct batch_engine *e)
{
    int64_t t = BATCH_NEVER, bound = e->cfg.grid_wait_bound * e->cfg.unit_per_s;
    bool grid_resv = false;
    for (int32_t x = 0; bound > 0 && x < e->nrlive && !grid_resv; x++)
        grid_resv = e->resv[e->rlive[x]].grid && e->resv[e->rlive[x]].running == 0;
    for (int32_t i = 0; i < e->nplan; i++) {
        if (e->plan[i].start > e->now && e->plan[i].start < t)
            t = e->plan[i].start;
        /* the grid guard's moment: a reserved local job reaching the bound */
        const struct bjob *j = &e->jobs[e->plan[i].job];
        if (grid_resv && !j->grid && j->submit + bound > e->now && j->submit + bound < t)
            t = j->submit + bound;
    }
    for (int32_t x = 0; x < e->nrlive; x++) {
        const struct bresv *v = &e->resv[e->rlive[x]];
        if (v->start > e->now && v->start < t)
            t = v->start;
        if (v->end > e->now && v->end < t)
            t = v->end;
    }
    return t;
}

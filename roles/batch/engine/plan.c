/*
 * plan.c - the planner: where and when a job fits (searching the profiles of a
 * pool), job reservations (holding nodes in the plan for a blocked job), and
 * starting a job on concrete nodes.
 *
 * A job fits a pool at t when its compatible groups hold enough tasks all through
 * [t, t + walltime). With one compatible group that is one bs_profile_find(); with
 * several, the candidate starts are the breakpoints of their profiles (a start can
 * only become feasible where some step ends).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

static int64_t add_sat(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* Whether groups a and b have the same class, features and capacity (what
 * compat_groups reads of a group): groups differing only by their reservations. */
static bool same_base(const struct bgroup *a, const struct bgroup *b)
{
    return a->cls == b->cls && a->fset == b->fset && a->cap.procs == b->cap.procs &&
           a->cap.mem == b->cap.mem && a->cap.disk == b->cap.disk && a->cap.swap == b->cap.swap;
}

/* Collects the positions of pool p's groups job j may use (scr_k) with tasks per
 * node (scr_kpn), most tasks per node first; returns how many. Groups in key order
 * come base class first: a group like the one before it (by its reservations alone)
 * is judged as that one was, without matching its features again. */
static int32_t compat_groups(struct batch_engine *e, const struct bpool *p, const struct bjob *j)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    uint32_t left[CONSTRAINT_NAMES_MAX];
    int nv = bs_engine_counts(j, v, left);
    int32_t nk = 0, kpn = 0, cn = 0;
    const struct bgroup *prev = NULL;
    bool ok = false, tail = false; /* tail: the last group taken ends the list */
    for (int32_t k = 0; k < p->ng; k++) {
        const struct bgroup *g = &e->groups[p->gid[k]];
        bool same = prev && same_base(prev, g);
        if (!same) {
            ok = bs_engine_group_ok(e, g, j);
            kpn = ok ? bs_engine_job_kpn(&g->cap, j) : 0;
            cn = ok && nv ? bs_pop64(bs_engine_group_names(e, g, v, nv)) : 0;
        }
        prev = g;
        if (!ok)
            continue;
        if (same && tail) { /* ranks as the group before it (taken, last): after it */
            e->scr_kpn[nk] = kpn;
            e->scr_k[nk++] = k;
            continue;
        }
        /* constraint counts (issue 27): groups holding more of the counted names first;
         * then most tasks per node; among equals, nodes of the job's own class before
         * unclassed ones (which every class may use) */
        int32_t i = nk++;
        bool own = g->cls >= 0;
        for (; i > 0; i--) {
            const struct bgroup *o = &e->groups[p->gid[e->scr_k[i - 1]]];
            int32_t on = nv ? bs_pop64(bs_engine_group_names(e, o, v, nv)) : 0;
            if (!(on < cn || (on == cn && (e->scr_kpn[i - 1] < kpn ||
                                           (e->scr_kpn[i - 1] == kpn && own && o->cls < 0)))))
                break;
            e->scr_kpn[i] = e->scr_kpn[i - 1];
            e->scr_k[i] = e->scr_k[i - 1];
        }
        e->scr_kpn[i] = kpn;
        e->scr_k[i] = k;
        tail = i == nk - 1;
    }
    return nk;
}

/* Several groups: the first candidate t in [t0, tmax] where they hold j's tasks
 * for its whole walltime; fills cnt (greedy, most tasks per node first). */
/* The nodes of group g that j may take at once under its --ppn: at most ppn tasks on
 * one machine (a machine's nodes are its cores), so at most machines x ppn / kpn nodes;
 * INT32_MAX without ppn. */
static int32_t ppn_node_cap(const struct batch_engine *e, const struct bgroup *g,
                            const struct bjob *j, int32_t kpn)
{
    if (j->ppn <= 0 || kpn <= 0)
        return INT32_MAX;
    int64_t machines = 0; /* a machine's nodes are added together: a change counts one
                             (nodes interleaved would count more: the cap only looser) */
    int32_t prev = -1;
    for (int32_t w = g->wlo; w < g->whi; w++)
        for (uint64_t m = bs_group_word(g, w); m; m &= m - 1) {
            int32_t i = w * 64 + __builtin_ctzll(m), h = e->nodes[i].host;
            machines += h < 0 || prev < 0 || e->nodes[prev].host != h;
            prev = i;
        }
    int64_t n = machines * j->ppn / kpn;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* Nodes of candidate group i free over [t, end), at most its ppn cap (capn, or none). */
static int32_t group_avail(const struct batch_engine *e, const struct profile *pr,
                           const int32_t *capn, int32_t i, int64_t t, int64_t end)
{
    int32_t avail = bs_profile_min(&pr[e->scr_k[i]], t, end);
    return capn && avail > capn[i] ? capn[i] : avail;
}

/*
 * The node counts of a start at t over [t, end) (tasks enough were found): greedy over
 * the candidate groups in their order, and (issue 27) for each counted name NAME*N at
 * least N nodes of groups holding it (a node is a machine, or a core of one that the
 * start spreads: hosts_pick). Writes cnt (when not NULL) and returns true, or false
 * (cnt left zero) when the counts cannot be met at t.
 */
static bool multi_take(struct batch_engine *e, const struct bpool *p, const struct profile *pr,
                       const int32_t *capn, int32_t nk, const struct bjob *j, int64_t t,
                       int64_t end, int32_t *cnt)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    uint32_t left[CONSTRAINT_NAMES_MAX];
    int nv = bs_engine_counts(j, v, left), short_ = nv;
    int64_t rem = j->tasks;
    for (int32_t i = 0; i < nk && (rem > 0 || short_ > 0); i++) {
        int32_t avail = group_avail(e, pr, capn, i, t, end);
        int64_t want = rem > 0 ? (rem + e->scr_kpn[i] - 1) / e->scr_kpn[i] : 0;
        uint64_t gm = nv ? bs_engine_group_names(e, &e->groups[p->gid[e->scr_k[i]]], v, nv) : 0;
        for (int u = 0; u < nv && u < 64; u++)
            if ((gm >> u & 1) && left[u] > want)
                want = left[u];
        int32_t take = avail <= 0 ? 0 : (avail < want ? avail : (int32_t)want);
        if (cnt)
            cnt[e->scr_k[i]] = take;
        rem -= (int64_t)take * e->scr_kpn[i];
        for (int u = 0; u < nv && u < 64; u++)
            if ((gm >> u & 1) && left[u]) {
                left[u] = left[u] > (uint32_t)take ? left[u] - (uint32_t)take : 0;
                short_ -= !left[u];
            }
    }
    if (rem <= 0 && short_ <= 0)
        return true;
    for (int32_t i = 0; cnt && i < nk; i++)
        cnt[e->scr_k[i]] = 0;
    return false;
}

/* zfree (or NULL): per candidate group, bs_profile_first_above(profile, 0), or
 * ZFREE_UNKNOWN until a search needs it; before that time the group has no free node
 * (a group of a reservation's nodes in the general pool, until the reservation
 * ends), so no window starting there gets any: a search skips the group's profile. */
#define ZFREE_UNKNOWN (INT64_MIN + 1)

static int64_t multi_find(struct batch_engine *e, const struct bpool *p, const struct profile *pr,
                          int32_t nk, const struct bjob *j, int64_t t0, int64_t tmax, int32_t *cnt,
                          int64_t *zfree)
{
    int64_t zbuf[64];
    if (!zfree && t0 < tmax && nk <= 64) { /* several candidates: kept for this search */
        zfree = zbuf;
        for (int32_t i = 0; i < nk; i++)
            zbuf[i] = ZFREE_UNKNOWN;
    }
    /* per candidate group: ppn_node_cap; out of memory: uncapped (the start's own
       per-machine check still refuses what breaks ppn) */
    int32_t capbuf[64], *capn = j->ppn <= 0 ? NULL : nk <= 64 ? capbuf : malloc(nk * sizeof *capn);
    for (int32_t i = 0; capn && i < nk; i++)
        capn[i] = ppn_node_cap(e, &e->groups[p->gid[e->scr_k[i]]], j, e->scr_kpn[i]);
    /* per candidate group, its first breakpoint after the last t (t only grows, so it
     * stays the next one until t reaches it: a search over G groups reads G times, not
     * G profiles, at each step); out of memory: every profile read at every step */
    int64_t nbuf[64], *nxt = nk <= 64 ? nbuf : malloc((size_t)nk * sizeof *nxt);
    for (int32_t i = 0; nxt && i < nk; i++)
        nxt[i] = INT64_MIN;
    int64_t found = BATCH_NEVER;
    for (int64_t t = t0;;) {
        int64_t tasks = 0, end = add_sat(t, j->walltime);
        for (int32_t i = 0; i < nk && tasks < j->tasks; i++) {
            if (zfree) {
                if (zfree[i] == ZFREE_UNKNOWN)
                    zfree[i] = bs_profile_first_above(&pr[e->scr_k[i]], 0);
                if (t < zfree[i])
                    continue; /* no free node at t: none over the window */
            } else if (bs_profile_none_at_head(&pr[e->scr_k[i]], t)) {
                continue; /* the same, read from the first step */
            }
            int32_t avail = group_avail(e, pr, capn, i, t, end);
            if (avail > 0)
                tasks += (int64_t)avail * e->scr_kpn[i];
        }
        /* without counted names the greedy counts are met whenever the tasks are
         * (multi_take takes from each group what this loop counted, until it has
         * them): only a search that wants the counts builds them */
        if (tasks >= j->tasks &&
            ((!cnt && !j->counted) || multi_take(e, p, pr, capn, nk, j, t, end, cnt))) {
            found = t;
            break;
        }
        if (t >= tmax) /* no later candidate may be tried */
            break;
        int64_t nt = PROFILE_INF;
        for (int32_t i = 0; i < nk; i++) {
            int64_t x = nxt ? nxt[i] : INT64_MIN;
            if (x <= t) {
                x = bs_profile_next(&pr[e->scr_k[i]], t);
                if (nxt)
                    nxt[i] = x;
            }
            if (x < nt)
                nt = x;
        }
        if (nt == PROFILE_INF || nt > tmax)
            break;
        t = nt;
    }
    if (capn != capbuf)
        free(capn);
    if (nxt != nbuf)
        free(nxt);
    return found;
}

int64_t bs_plan_pool_find(struct batch_engine *e, int32_t pool, const struct bjob *j, int64_t t0,
                          int64_t tmax, bool est, int32_t *cnt)
{
    return bs_plan_pool_find_memo(e, pool, j, t0, tmax, est, cnt, NULL);
}

int64_t bs_plan_pool_find_memo(struct batch_engine *e, int32_t pool, const struct bjob *j,
                               int64_t t0, int64_t tmax, bool est, int32_t *cnt,
                               struct bs_search_memo *memo)
{
    const struct bpool *p = &e->pools[pool];
    const struct profile *pr = est ? p->est : p->plan;
    if (p->resv >= 0) {
        if (t0 < p->start)
            t0 = p->start;
        if (p->end - j->walltime < tmax)
            tmax = p->end - j->walltime;
    }
    if (t0 > tmax)
        return BATCH_NEVER;
    for (int32_t k = 0; cnt && k < p->ng; k++) /* mostly one group: no memset call */
        cnt[k] = 0;
    if (pool == 0 && j->gen_gi >= 0 && j->fit_epoch == e->gepoch) { /* the common case */
        int64_t t = bs_profile_find(&pr[j->gen_gi], t0, tmax, j->walltime, j->gen_need);
        if (cnt && t != PROFILE_INF)
            cnt[j->gen_gi] = j->gen_need;
        return t;
    }
    int32_t nk = memo && memo->nk >= 0 ? memo->nk : compat_groups(e, p, j);
    if (memo)
        memo->nk = nk;
    if (nk == 0)
        return BATCH_NEVER;
    if (nk == 1) {
        int32_t need = (int32_t)((j->tasks + (int64_t)e->scr_kpn[0] - 1) / e->scr_kpn[0]);
        if (j->counted && need < (int32_t)constraint_hosts_min(j->constraint))
            need = (int32_t)constraint_hosts_min(j->constraint); /* a node per machine */
        int64_t t = bs_profile_find(&pr[e->scr_k[0]], t0, tmax, j->walltime, need);
        if (cnt && t != PROFILE_INF)
            cnt[e->scr_k[0]] = need;
        return t;
    }
    if (memo && !memo->zfree && (memo->zfree = malloc((size_t)nk * sizeof *memo->zfree)))
        for (int32_t i = 0; i < nk; i++)
            memo->zfree[i] = ZFREE_UNKNOWN;
    return multi_find(e, p, pr, nk, j, t0, tmax, cnt, memo ? memo->zfree : NULL);
}

int bs_plan_fits_now(struct batch_engine *e, const struct bjob *j, int32_t *cnt)
{
    const struct bpool *p = &e->pools[0];
    if (e->npools != 1 || p->resv >= 0 || j->gen_gi < 0 || j->fit_epoch != e->gepoch ||
        bs_engine_host_limited(e, j))
        return -1;
    /* bs_plan_earliest(e, j, now, now, false, ...) reduced to what it does here */
    if (bs_profile_find(&p->plan[j->gen_gi], e->now, e->now, j->walltime, j->gen_need) != e->now)
        return 0;
    for (int32_t k = 0; k < p->ng; k++)
        cnt[k] = 0;
    cnt[j->gen_gi] = j->gen_need;
    return 1;
}

/* Whether some live reservation names job j in its ACL job list. */
static bool job_bound(const struct batch_engine *e, const struct bjob *j)
{
    for (int32_t x = 0; x < e->nrlive; x++) {
        const struct bresv *v = &e->resv[e->rlive[x]];
        for (int32_t i = 0; i < v->njobs; i++)
            if (v->jobs[i] == j->id)
                return true;
    }
    return false;
}

/* Whether pool pi's reservation is bound to job j alone (its ACL lists j and no other job). */
static bool pool_bound_to(const struct batch_engine *e, int32_t pi, const struct bjob *j)
{
    const struct bresv *r = &e->resv[e->pools[pi].resv];
    return r->njobs == 1 && r->jobs[0] == j->id;
}

bool bs_plan_pull_free(struct batch_engine *e, int32_t pi)
{
    const struct bpool *p = &e->pools[pi];
    if (p->resv < 0 || p->start <= e->now)
        return false;
    for (int32_t k = 0; k < p->ng; k++)
        if (bs_profile_min(&e->pools[0].plan[p->gid[k]], e->now, p->start) <
            e->groups[p->gid[k]].nnodes)
            return false;
    return true;
}

/* Early start on its own reservation (B5; docs/batch.md "Reservations"): job j, bound
 * alone to pool pi's reservation that has not begun, starts now on the reservation's
 * nodes when they are all free in the plan until the reservation begins (no running job,
 * no other reservation, no job reservation of a pending job on them) and j then fits
 * the reservation from its start (it ends by its end). Starting there pulls the
 * reservation forward to now (bs_plan_start): it keeps its nodes, so nothing else
 * moves. Without this an early job could only start where it fits the general pool for
 * its whole walltime, and the back-to-back reservations a metascheduler lays on
 * requested walltimes left no such hole: freed nodes idled until each reservation
 * came (issue 25). Returns true and fills cnt when it can. */
static bool pull_fits(struct batch_engine *e, int32_t pi, const struct bjob *j, int32_t *cnt)
{
    const struct bpool *p = &e->pools[pi];
    int64_t end = add_sat(e->now, j->walltime);
    if (!j->early_start || end <= p->start || end > p->end || !pool_bound_to(e, pi, j) ||
        !bs_plan_pull_free(e, pi))
        return false;
    /* before its start the nodes are free; from it, j's remaining run must fit */
    struct bjob rest = *j;
    rest.walltime = end - p->start;
    return bs_plan_pool_find(e, pi, &rest, p->start, p->start, false, cnt) == p->start;
}

static int32_t hosts_pick(struct batch_engine *e, const struct bjob *j, const struct bpool *p,
                          const int32_t *cnt, struct bjob_run *runs);

/* The search of bs_plan_earliest over the profiles alone. */
static int64_t earliest_counts(struct batch_engine *e, const struct bjob *j, int64_t t0,
                               int64_t tmax, bool est, int32_t *pool_out, int32_t *cnt_out);

/*
 * The profiles count free nodes, not machines: for a job whose ppn limit spans
 * nodes sharing a machine, a start now also needs the free nodes on enough
 * machines (hosts_pick without taking them); when they are not, the search goes
 * on from the next instant. Later starts are planned by the counts alone (a plan,
 * checked again when its time comes: docs/batch.md "Processes per host").
 */
int64_t bs_plan_earliest(struct batch_engine *e, const struct bjob *j, int64_t t0, int64_t tmax,
                         bool est, int32_t *pool_out, int32_t *cnt_out)
{
    if (est || !bs_engine_host_limited(e, j))
        return earliest_counts(e, j, t0, tmax, est, pool_out, cnt_out);
    int32_t pool = -1, *cnt = cnt_out ? cnt_out : e->scr_cnt3;
    int64_t t = earliest_counts(e, j, t0, tmax, est, &pool, cnt);
    if (t == e->now && hosts_pick(e, j, &e->pools[pool], cnt, NULL) < 0)
        t = e->now < tmax ? earliest_counts(e, j, e->now + 1, tmax, est, &pool, cnt) : BATCH_NEVER;
    if (pool_out)
        *pool_out = pool;
    return t;
}

static int64_t earliest_counts(struct batch_engine *e, const struct bjob *j, int64_t t0,
                               int64_t tmax, bool est, int32_t *pool_out, int32_t *cnt_out)
{
    int64_t best = BATCH_NEVER;
    int32_t bestpool = -1;
    bool general = e->npools == 1 || j->early_start || !job_bound(e, j);
    if (general && (best = bs_plan_pool_find(e, 0, j, t0, tmax, est, cnt_out)) != BATCH_NEVER)
        bestpool = 0;
    for (int32_t pi = 1; pi < e->npools && best > t0; pi++) {
        if (!bs_engine_admits(e, &e->resv[e->pools[pi].resv], j))
            continue;
        if (!est && t0 == e->now && e->pools[pi].start > t0 && j->early_start &&
            pull_fits(e, pi, j, e->scr_cnt2)) {
            best = t0;
            bestpool = pi;
            if (cnt_out)
                memcpy(cnt_out, e->scr_cnt2, (size_t)e->pools[pi].ng * sizeof *cnt_out);
            break;
        }
        int64_t lim = best == BATCH_NEVER ? tmax : best - 1;
        int64_t t = bs_plan_pool_find(e, pi, j, t0, lim < tmax ? lim : tmax, est, e->scr_cnt2);
        if (t < best) {
            best = t;
            bestpool = pi;
            if (cnt_out)
                memcpy(cnt_out, e->scr_cnt2, (size_t)e->pools[pi].ng * sizeof *cnt_out);
        }
    }
    if (pool_out)
        *pool_out = bestpool;
    return best;
}

/* Adds sign x cnt over [t0, t1) to the plan (or est) profiles of pool pi. */
static int pool_apply(struct batch_engine *e, int32_t pi, bool est, const int32_t *cnt,
                      int32_t sign, int64_t t0, int64_t t1)
{
    struct bpool *p = &e->pools[pi];
    struct profile *pr = est ? p->est : p->plan;
    for (int32_t k = 0; k < p->ng; k++)
        if (cnt[k] && bs_profile_add(&pr[k], t0, t1, sign * cnt[k]) < 0)
            return -1;
    return 0;
}

/* Holds job slot's nodes in pool `pool` from `start` in the plan (a job
 * reservation); cnt are the node counts a search found there. 0 or -1 (ENOMEM). */
int bs_plan_reserve(struct batch_engine *e, int32_t slot, int32_t pool, int64_t start,
                    const int32_t *cnt)
{
    struct bjob *j = &e->jobs[slot];
    int32_t ng = e->pools[pool].ng;
    if (VEC_RESERVE(e->plan, e->capplan, e->nplan + 1) < 0 ||
        VEC_RESERVE(e->pcnt, e->cappcnt, e->npcnt + ng + 1) < 0)
        return -1;
    memcpy(e->pcnt + e->npcnt, cnt, (size_t)ng * sizeof *cnt);
    int64_t end = add_sat(start, j->walltime);
    if (pool_apply(e, pool, false, cnt, -1, start, end) < 0)
        return -1;
    e->plan[e->nplan++] = (struct plan_ent){slot, pool, start, end, e->npcnt};
    e->npcnt += ng;
    j->reserved = j->estimate = start;
    return 0;
}

/* Estimate pass: holds the job's nodes (counts cnt) in the est profiles. */
int bs_plan_est_reserve(struct batch_engine *e, int32_t slot, int32_t pool, int64_t start,
                        const int32_t *cnt)
{
    return pool_apply(e, pool, true, cnt, -1, start, add_sat(start, e->jobs[slot].walltime));
}

void bs_plan_unreserve(struct batch_engine *e, int32_t idx)
{
    struct plan_ent *pe = &e->plan[idx];
    bs_engine_memo_clear(e);
    /* Adding back what was taken cannot need a new breakpoint: no ENOMEM. */
    (void)pool_apply(e, pe->pool, false, e->pcnt + pe->off, +1, pe->start, pe->end);
    e->jobs[pe->job].reserved = BATCH_NEVER;
}

void bs_plan_clear(struct batch_engine *e)
{
    bs_engine_memo_clear(e);
    for (int32_t i = 0; i < e->nplan; i++)
        e->jobs[e->plan[i].job].reserved = BATCH_NEVER;
    e->nplan = 0;
    e->npcnt = 0;
    e->plan_valid = false;
}

int bs_plan_copy_base(struct batch_engine *e)
{
    bs_plan_clear(e);
    for (int32_t pi = 0; pi < e->npools; pi++)
        for (int32_t k = 0; k < e->pools[pi].ng; k++)
            if (bs_profile_copy(&e->pools[pi].plan[k], &e->pools[pi].base[k]) < 0)
                return -1;
    return 0;
}

int bs_plan_copy_est(struct batch_engine *e)
{
    for (int32_t pi = 0; pi < e->npools; pi++)
        for (int32_t k = 0; k < e->pools[pi].ng; k++)
            if (bs_profile_copy(&e->pools[pi].est[k], &e->pools[pi].plan[k]) < 0)
                return -1;
    return 0;
}

void bs_plan_trim(struct batch_engine *e, int64_t now, bool plan)
{
    for (int32_t pi = 0; pi < e->npools; pi++)
        for (int32_t k = 0; k < e->pools[pi].ng; k++) {
            bs_profile_trim(&e->pools[pi].base[k], now);
            if (plan)
                bs_profile_trim(&e->pools[pi].plan[k], now);
        }
}

int32_t bs_plan_free_now(const struct batch_engine *e)
{
    int32_t n = 0;
    for (int32_t pi = 0; pi < e->npools; pi++)
        for (int32_t k = 0; k < e->pools[pi].ng; k++) {
            int32_t v = bs_profile_at(&e->pools[pi].plan[k], e->now);
            if (v > 0)
                n += v;
        }
    return n;
}

/* Marks n free nodes of group gi busy (lowest indexes first) and appends the bitmap
 * words it took to runs (*nruns); which nodes they are is written out later, when
 * asked for (bs_engine_fill_nodes). Returns how many it found (< n only if the
 * profiles and the nodes disagree). */
static int32_t group_take(struct batch_engine *e, int32_t gi, int32_t n, struct bjob_run *runs,
                          int32_t *nruns)
{
    const struct bgroup *g = &e->groups[gi];
    int32_t got = 0;
    for (int32_t w = g->wlo; w < g->whi && got < n; w++) {
        uint64_t took = g->mem[w - g->wlo] & ~e->busy[w];
        if (!took)
            continue;
        int32_t c = bs_pop64(took), k = n - got;
        if (c > k && k < c - k) { /* keep the lowest k: collect them */
            uint64_t m = 0;
            for (int32_t i = 0; i < k; i++, took &= took - 1)
                m |= took & -took;
            took = m;
        } else {
            for (; c > k; c--) /* keep the lowest k: drop the highest */
                took &= ~(1ULL << (63 - __builtin_clzll(took)));
        }
        e->busy[w] |= took;
        runs[(*nruns)++] = (struct bjob_run){g->part, w, took};
        got += c < k ? c : k;
    }
    return got;
}

/* Marks node i of group gi taken for a start (its busy bit) and records it in runs
 * (one entry per bitmap word of a group: the group's entries are the last ones, as
 * groups are picked one after the other). */
static void pick_node(struct batch_engine *e, int32_t gi, int32_t i, struct bjob_run *runs,
                      int32_t *nruns)
{
    int32_t w = i / 64, part = e->groups[gi].part;
    uint64_t bit = 1ULL << (i % 64);
    e->busy[w] |= bit;
    for (int32_t x = *nruns - 1; x >= 0 && runs[x].part == part; x--)
        if (runs[x].word == w) {
            runs[x].mask |= bit;
            return;
        }
    runs[(*nruns)++] = (struct bjob_run){part, w, bit};
}

/*
 * Chooses, for a job j limited per machine (bs_engine_host_limited), cnt[k] free
 * nodes of each group k of pool p such that no machine gets more than j->ppn of its
 * tasks (no limit without ppn), lowest positions first; with constraint counts (issue
 * 27) a group holding a counted name still short gives first its nodes on machines the
 * job has no node on yet, and the start is refused unless, for each NAME*N, N of the
 * job's machines have NAME. With runs NULL only says whether it can (0 or -1);
 * otherwise takes them (busy bits set) and writes their bitmap words to runs: returns
 * how many, or -1 with nothing taken.
 */
static int32_t hosts_pick(struct batch_engine *e, const struct bjob *j, const struct bpool *p,
                          const int32_t *cnt, struct bjob_run *runs)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    uint32_t cleft[CONSTRAINT_NAMES_MAX];
    int nv = bs_engine_counts(j, v, cleft);
    int64_t total = 0;
    for (int32_t k = 0; k < p->ng; k++)
        total += cnt[k];
    struct bjob_run *loc = runs ? runs : malloc(((size_t)total + 1) * sizeof *loc);
    if (!loc || bs_engine_hostcnt_zero(e) < 0) {
        if (loc != runs)
            free(loc);
        return -1;
    }
    int64_t left = j->tasks, cap = j->ppn > 0 ? j->ppn : INT64_MAX;
    int32_t nruns = 0;
    bool ok = true;
    for (int32_t k = 0; ok && k < p->ng; k++) {
        struct bgroup *g = &e->groups[p->gid[k]];
        int32_t kpn = bs_engine_job_kpn(&g->cap, j), want = cnt[k];
        uint64_t gm = nv ? bs_engine_group_names(e, g, v, nv) : 0;
        for (int pass = 0; pass < 2 && want > 0; pass++) {
            bool spread = false; /* pass 0: new machines for the counts still short */
            for (int u = 0; pass == 0 && u < nv; u++)
                spread = spread || ((gm >> u & 1) && cleft[u]);
            if (pass == 0 && !spread)
                continue;
            bool stop = false;
            for (int32_t pos = g->wlo * 64; !stop && pos < g->whi * 64 && want > 0; pos++) {
                if (!(bs_group_word(g, pos / 64) >> (pos % 64) & 1))
                    continue;    /* not a node of g */
                if (pass == 0) { /* only while a count of this group is short */
                    spread = false;
                    for (int u = 0; u < nv; u++)
                        spread = spread || ((gm >> u & 1) && cleft[u]);
                    if (!spread) {
                        stop = true;
                        continue;
                    }
                }
                int32_t h = e->nodes[pos].host;
                bool fresh = h < 0 || e->hostcnt[h] == 0;
                int64_t t = left < kpn ? left : kpn;
                if ((e->busy[pos / 64] >> (pos % 64) & 1) || (pass == 0 && !fresh))
                    continue;
                if (h >= 0 && t > cap - e->hostcnt[h])
                    t = cap - e->hostcnt[h];
                if (t <= 0 && !(fresh && spread))
                    continue;
                if (h >= 0)
                    e->hostcnt[h] += t > 0 ? (int32_t)t : 0;
                left -= t > 0 ? t : 0;
                want--;
                for (int u = 0; fresh && u < nv; u++)
                    if ((gm >> u & 1) && cleft[u])
                        cleft[u]--;
                pick_node(e, p->gid[k], pos, loc, &nruns);
            }
        }
        ok = want <= 0;
    }
    for (int u = 0; u < nv; u++)
        ok = ok && !cleft[u];
    ok = ok && left <= 0;
    if (!ok || !runs) /* give the bits back: only asked, or it cannot */
        for (int32_t i = 0; i < nruns; i++)
            e->busy[loc[i].word] &= ~loc[i].mask;
    if (loc != runs)
        free(loc);
    return ok ? nruns : -1;
}

/* Takes the nodes of job slot's start now; 0 or -1 (ENOMEM, EAGAIN). */
static int take_nodes(struct batch_engine *e, int32_t slot, const struct bpool *p,
                      const int32_t *cnt)
{
    struct bjob *j = &e->jobs[slot];
    int64_t total = 0, maxruns = 0;
    for (int32_t k = 0; k < p->ng; k++) {
        const struct bgroup *g = &e->groups[p->gid[k]];
        int64_t words = g->whi - g->wlo;
        total += cnt[k];
        maxruns += cnt[k] < words ? cnt[k] : words;
    }
    int32_t *nodes = malloc(((size_t)total + 1) * sizeof *nodes), got = 0, nruns = 0;
    struct bjob_run *runs = malloc(((size_t)maxruns + 1) * sizeof *runs);
    if (!nodes || !runs) {
        free(nodes);
        free(runs);
        errno = ENOMEM;
        return -1;
    }
    if (bs_engine_host_limited(e, j)) {
        if ((nruns = hosts_pick(e, j, p, cnt, runs)) < 0) {
            free(nodes);
            free(runs);
            errno = EAGAIN;
            return -1;
        }
        got = (int32_t)total;
    }
    for (int32_t k = 0; got < total && k < p->ng; k++) {
        int32_t n = cnt[k] ? group_take(e, p->gid[k], cnt[k], runs, &nruns) : 0;
        got += n;
        if (n < cnt[k]) { /* give the bits back */
            for (int32_t i = 0; i < nruns; i++)
                e->busy[runs[i].word] &= ~runs[i].mask;
            free(nodes);
            free(runs);
            errno = EAGAIN;
            return -1;
        }
    }
    free(j->nodes);
    free(j->runs);
    j->nodes = nodes;
    j->nnodes = got;
    j->runs = runs;
    j->nruns = nruns;
    j->nodes_lazy = true;
    e->nlazy++;
    return 0;
}

/* Moves the start of pool pi's reservation to now (its nodes were found free until
 * then, pull_fits): the general pool gives those nodes up from now, the reservation's
 * pool gets them. A profile that cannot be split has everything rebuilt next cycle. */
static void pull_forward(struct batch_engine *e, int32_t pi)
{
    struct bpool *p = &e->pools[pi];
    int64_t from = e->now, to = p->start;
    for (int32_t k = 0; k < p->ng; k++) {
        int32_t g = p->gid[k], n = e->groups[g].nnodes;
        if (bs_profile_add(&e->pools[0].base[g], from, to, -n) < 0 ||
            bs_profile_add(&e->pools[0].plan[g], from, to, -n) < 0 ||
            bs_profile_add(&p->base[k], from, to, n) < 0 ||
            bs_profile_add(&p->plan[k], from, to, n) < 0)
            e->groups_dirty = true;
    }
    p->start = e->resv[p->resv].start = from;
    e->est_valid = e->jest_valid = false;
    bs_engine_memo_clear(e);
}

int bs_plan_start(struct batch_engine *e, int32_t slot, int32_t pool, const int32_t *cnt,
                  bool from_plan)
{
    struct bjob *j = &e->jobs[slot];
    struct bpool *p = &e->pools[pool];
    int64_t now = e->now, end = add_sat(now, j->walltime);
    if (VEC_RESERVE(e->started, e->capstarted, e->nstarted + 1) < 0)
        return -1;
    if (p->resv >= 0 && p->start > now)
        pull_forward(e, pool); /* an early start on its own reservation */
    if (take_nodes(e, slot, p, cnt) < 0)
        return -1;
    for (int32_t k = 0; k < p->ng; k++) {
        if (!cnt[k])
            continue;
        /* splitting at a new end may fail: then rebuild from the nodes next cycle */
        if (bs_profile_add(&p->base[k], now, end, -cnt[k]) < 0 ||
            (!from_plan && bs_profile_add(&p->plan[k], now, end, -cnt[k]) < 0))
            e->groups_dirty = true;
    }
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        struct cred *c = &e->creds[k].v[j->cred[k]];
        c->run_jobs++;
        c->run_procs += j->procs;
    }
    j->state = BATCH_JOB_RUNNING;
    j->start = j->charged = now;
    j->end_est = end;
    j->estimate = now;
    if (end < e->min_end)
        e->min_end = end;
    j->reserved = BATCH_NEVER;
    j->resv = p->resv;
    if (p->resv >= 0)
        e->resv[p->resv].running++;
    j->run_idx = e->nrunning;
    e->running[e->nrunning++] = slot; /* room reserved at submit */
    e->started[e->nstarted++] = j->id;
    return 0;
}

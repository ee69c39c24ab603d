/*
 * moveup.c - a grid job starts now on any nodes, its reservation moved up (issue 25;
 * docs/batch.md "Grid reservations move up").
 *
 * A metascheduler reserves for its job at the start the site estimated, on requested
 * walltimes. When the jobs before it end early, the job could start sooner, but its
 * reservation stays where it was laid, and the hole in front of it fills with
 * backfilled jobs that fit before it. The early start on its own reservation (plan.c
 * pull_fits) only helps when every node of the reservation is free at once, and an
 * early start in the general pool only where the job fits without its reserved nodes.
 * So at the job's turn in the priority order (phase_order, or backfill for the jobs
 * past RESERVATIONDEPTH), a grid reservation bound to one pending early-start job
 * that begins at least MOVE_MIN_S from now is laid again from now when the job fits
 * now on any suitable nodes, its own counted free: the general plan, which holds the
 * running jobs, the other reservations and the job reservations of the jobs ahead in
 * priority, decides where, so the move delays none of those; the job then starts in
 * it. Moves to a later time than now were measured and lost more than they won (the
 * local jobs pushed back cost more than the grid job gained: docs/meta.md). Only one
 * reservation moves per call: the groups change with it, and the caller plans the
 * cycle again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/* A move must gain at least this much (two regroupings per move on a big site). */
#define MOVE_MIN_S 60

/* Adds sign x each group's nodes over reservation r's window to the general plan
 * (pool pi is r's): its nodes counted free for its own job. 0, -1 when a profile
 * could not be split. */
static int own_nodes(struct batch_engine *e, int32_t pi, int32_t sign)
{
    const struct bpool *p = &e->pools[pi];
    int rc = 0;
    for (int32_t k = 0; k < p->ng; k++) {
        int32_t g = p->gid[k];
        if (bs_profile_add(&e->pools[0].plan[g], p->start, p->end, sign * e->groups[g].nnodes) < 0)
            rc = -1;
    }
    return rc;
}

/* Whether job slot s holds a job reservation in the general pool. */
static bool general_planned(const struct batch_engine *e, int32_t s)
{
    for (int32_t i = 0; i < e->nplan; i++)
        if (e->plan[i].job == s)
            return e->plan[i].pool == 0;
    return false;
}

/* The job slot pool pi's reservation may move up for, or -1. */
static int32_t movable(struct batch_engine *e, int32_t pi)
{
    const struct bpool *p = &e->pools[pi];
    const struct bresv *v = &e->resv[p->resv];
    if (!v->live || !v->grid || v->njobs != 1 || v->running > 0 || p->start <= e->now ||
        p->start - e->now < MOVE_MIN_S * e->cfg.unit_per_s)
        return -1;
    struct bjob *j = bs_engine_job(e, v->jobs[0]);
    if (!j || !j->live || j->state != BATCH_JOB_PENDING || j->hold || j->never || !j->early_start ||
        bs_engine_host_limited(e, j))
        return -1;
    int32_t s = (int32_t)(j - e->jobs);
    return general_planned(e, s) ? -1 : s;
}

/* Picks cnt[g] nodes of each group g free of running jobs from `from` (the plan
 * counted them free; the group's reservations are the same for all its nodes). The
 * node count, -1 when a group falls short, -2 out of memory. */
static int32_t pick(struct batch_engine *e, const int32_t *cnt, int64_t from, int32_t *out)
{
    uint8_t *held = calloc((size_t)e->nnodes + 1, 1);
    if (!held)
        return -2;
    bs_engine_fill_all(e);
    for (int32_t i = 0; i < e->nrunning; i++) {
        const struct bjob *j = &e->jobs[e->running[i]];
        for (int32_t k = 0; j->end_est > from && k < j->nnodes; k++)
            held[j->nodes[k]] = 1;
    }
    int32_t n = 0;
    for (int32_t g = 0; g < e->ngroups && n >= 0; g++) {
        const struct bgroup *gr = &e->groups[g];
        int32_t want = cnt[g];
        for (int32_t w = gr->wlo; want > 0 && w < gr->whi; w++) /* ascending node index */
            for (uint64_t m = bs_group_word(gr, w); want > 0 && m; m &= m - 1) {
                int32_t node = w * 64 + __builtin_ctzll(m);
                if (!held[node]) {
                    out[n++] = node;
                    want--;
                }
            }
        if (want > 0)
            n = -1;
    }
    free(held);
    return n;
}

/* Lays reservation slot r again on nodes[0..n) from `start` (same length, name, ACL
 * and bound job): a new slot, the old one released, as a release and a create. */
static int relay(struct batch_engine *e, int32_t r, int32_t *nodes, int32_t n, int64_t start)
{
    if (VEC_RESERVE(e->resv, e->capresv, e->nresv + 1) < 0 ||
        VEC_RESERVE(e->moved, e->capmoved, e->nmoved + 1) < 0)
        return -1;
    struct bresv *old = &e->resv[r], *v = &e->resv[e->nresv];
    *v = *old;
    if (bs_resv_live_add(e, e->nresv) < 0) /* the name now names the new slot */
        return -1;
    v->nodes = nodes;
    v->nnodes = n;
    v->words = NULL; /* the old slot keeps its own (the partition moves them back) */
    v->nwords = 0;
    (void)bs_resv_words(e, e->nresv);
    v->end = start + (old->end - old->start);
    v->start = start;
    v->created = e->now;
    v->pool = -1;
    /* the ACL goes with it; the old slot keeps its nodes (the partition moves them back) */
    memset(old->acl, 0, sizeof old->acl);
    memset(old->nacl, 0, sizeof old->nacl);
    old->jobs = NULL;
    old->njobs = 0;
    bs_resv_live_drop(e, r);
    struct batch_moved *m = &e->moved[e->nmoved++];
    memcpy(m->name, v->name, sizeof m->name);
    m->job = v->jobs[0];
    m->start = v->start;
    m->end = v->end;
    bs_part_note_resv(e, e->nresv);
    e->nresv++;
    e->groups_dirty = true;
    e->est_valid = e->jest_valid = false;
    bs_engine_memo_clear(e);
    return 0;
}

/* Tries to move pool pi's reservation up for job slot s: 1 moved, 0 not, -1 ENOMEM. */
static int try_move(struct batch_engine *e, int32_t pi, int32_t s)
{
    const struct bpool *p = &e->pools[pi];
    struct bjob probe = e->jobs[s];
    probe.walltime = p->end - p->start;
    probe.gen_gi = -1;     /* every compatible group, its own ones included */
    int64_t tmax = e->now; /* a start now only (see the top) */
    int rc = own_nodes(e, pi, 1);
    int64_t t =
        rc < 0 ? BATCH_NEVER : bs_plan_pool_find(e, 0, &probe, e->now, tmax, false, e->scr_cnt);
    if (own_nodes(e, pi, -1) < 0 || rc < 0) {
        e->groups_dirty = true; /* a profile could not be split: rebuilt next cycle */
        return 0;
    }
    if (t == BATCH_NEVER || t > tmax)
        return 0;
    int32_t *nodes = malloc(((size_t)e->nnodes + 1) * sizeof *nodes), n;
    if (!nodes)
        return -1;
    if ((n = pick(e, e->scr_cnt, t, nodes)) < 0) {
        free(nodes);
        return n == -1 ? 0 : -1;
    }
    int32_t *fit = realloc(nodes, ((size_t)n + 1) * sizeof *fit);
    if (fit)
        nodes = fit;
    if (relay(e, p->resv, nodes, n, t) < 0) {
        free(nodes);
        return -1;
    }
    return 1;
}

int bs_moveup_pool(struct batch_engine *e, int32_t pi)
{
    if (!e->moveup_due || e->groups_dirty || pi < 1 || pi >= e->npools)
        return 0;
    int32_t s = movable(e, pi);
    return s < 0 ? 0 : try_move(e, pi, s);
}

int bs_moveup_job(struct batch_engine *e, int32_t slot)
{
    if (!e->moveup_due || e->groups_dirty)
        return 0;
    uint64_t id = e->jobs[slot].id;
    for (int32_t pi = 1; pi < e->npools; pi++) {
        const struct bresv *v = &e->resv[e->pools[pi].resv];
        if (v->njobs == 1 && v->jobs[0] == id)
            return bs_moveup_pool(e, pi);
    }
    return 0;
}

size_t batch_cycle_moved(const struct batch_engine *e, const struct batch_moved **out)
{
    *out = e->moved;
    return (size_t)e->nmoved;
}

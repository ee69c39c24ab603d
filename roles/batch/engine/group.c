/*
 * group.c - grouping the up nodes into groups (same class, capacity and admin
 * reservations) and pools (the general pool and one per admin reservation), and
 * rebuilding the pools' base profiles from the running jobs and reservations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/* Keeps profile *pr (its blocks) for a later pool, else frees it; *pr is zeroed. */
static void profile_keep(struct batch_engine *e, struct profile *pr)
{
    if (pr->nblk > 0 && VEC_RESERVE(e->pspare, e->cappspare, e->npspare + 1) == 0)
        e->pspare[e->npspare++] = *pr;
    else
        bs_profile_free(pr);
    memset(pr, 0, sizeof *pr);
}

/* A kept profile moved into the zeroed *pr, if there is one (its content is stale:
 * the caller resets or copies it). */
static void profile_reuse(struct batch_engine *e, struct profile *pr)
{
    if (e->npspare > 0)
        *pr = e->pspare[--e->npspare];
}

void bs_engine_pspare_free(struct batch_engine *e)
{
    while (e->npspare > 0)
        bs_profile_free(&e->pspare[--e->npspare]);
    free(e->pspare);
    e->pspare = NULL;
    e->cappspare = 0;
}

/* Frees the groups and pools (not the nodes). */
void bs_engine_groups_free(struct batch_engine *e)
{
    for (int32_t g = 0; g < e->ngroups; g++) {
        free(e->groups[g].resv);
    }
    free(e->groups);
    e->groups = NULL;
    e->ngroups = 0;
    for (int32_t p = 0; p < e->npools; p++) {
        struct bpool *pl = &e->pools[p];
        if (pl->resv >= 0) /* its reservation has no pool until the next pools_make */
            e->resv[pl->resv].pool = -1;
        for (int32_t k = 0; pl->base && pl->plan && pl->est && k < pl->ng; k++) {
            profile_keep(e, &pl->base[k]);
            profile_keep(e, &pl->plan[k]);
            profile_keep(e, &pl->est[k]);
        }
        free(pl->gid);
        free(pl->base);
        free(pl->plan);
        free(pl->est);
    }
    free(e->pools);
    e->pools = NULL;
    e->npools = 0;
}

/* ---- grouping: the groups are the partition's non-empty classes (part.c) in key
 * order, each with its nodes in ascending index ---- */

/* Orders classes a and b by key: base class, then the reservation set. */
static int class_cmp(const void *pa, const void *pb, void *arg)
{
    const struct batch_engine *e = arg;
    const struct bclass *a = &e->part.c[*(const int32_t *)pa],
                        *b = &e->part.c[*(const int32_t *)pb];
    int r = bs_part_base_cmp(&e->nodes[e->base_rep[a->base]], &e->nodes[e->base_rep[b->base]]);
    if (r || (r = (a->nresv > b->nresv) - (a->nresv < b->nresv)))
        return r;
    for (int32_t i = 0; i < a->nresv; i++)
        if (a->resv[i] != b->resv[i])
            return a->resv[i] < b->resv[i] ? -1 : 1;
    return 0;
}

/* Builds group gi from class k: its key, and its nodes borrowed from the class's
 * membership bitmap (no visit of the nodes). */
static int group_make(struct batch_engine *e, int32_t gi, int32_t k)
{
    struct bgroup *g = &e->groups[gi];
    struct bclass *c = &e->part.c[k];
    const struct bnode *first = &e->nodes[e->base_rep[c->base]];
    g->cls = first->cls;
    g->fset = first->fset;
    g->cap = first->cap;
    g->nnodes = c->nnodes;
    g->nresv = c->nresv;
    g->part = k;
    g->mem = c->mem;
    g->wlo = c->wlo;
    g->whi = c->wlo + c->nw;
    if (!(g->resv = malloc(((size_t)g->nresv + 1) * sizeof *g->resv)))
        return -1;
    memcpy(g->resv, c->resv, (size_t)g->nresv * sizeof *g->resv);
    c->group = gi;
    return 0;
}

/* Brings the partition up to date and builds e->groups from it. 0 or -1. */
static int groups_make(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    if (bs_part_update(e) < 0)
        return -1;
    int32_t *co = malloc(((size_t)p->nc + 1) * sizeof *co), ng = 0, rc = -1;
    if (!co)
        return -1;
    for (int32_t k = 0; k < p->nc; k++) {
        if (p->c[k].nnodes > 0)
            co[ng++] = k;
        else
            p->c[k].group = -1;
    }
    qsort_r(co, (size_t)ng, sizeof *co, class_cmp, e);
    if (!(e->groups = calloc((size_t)ng + 1, sizeof *e->groups)))
        goto out;
    for (int32_t g = 0; g < ng; g++) {
        e->ngroups++;
        if (group_make(e, g, co[g]) < 0)
            goto out;
    }
    rc = 0;
out:
    free(co);
    return rc;
}

/* Allocates pool p over the groups listed in gid[0..ng) (copied); its profiles are
 * kept ones where there are (reset or copied before use). */
static int pool_make(struct batch_engine *e, struct bpool *p, int32_t resv, const int32_t *gid,
                     int32_t ng)
{
    p->resv = resv;
    p->ng = ng;
    p->gid = malloc(((size_t)ng + 1) * sizeof *p->gid);
    p->base = calloc((size_t)ng + 1, sizeof *p->base);
    p->plan = calloc((size_t)ng + 1, sizeof *p->plan);
    p->est = calloc((size_t)ng + 1, sizeof *p->est);
    if (!p->gid || !p->base || !p->plan || !p->est)
        return -1;
    memcpy(p->gid, gid, (size_t)ng * sizeof *gid);
    for (int32_t k = 0; k < ng; k++) {
        profile_reuse(e, &p->base[k]);
        profile_reuse(e, &p->plan[k]);
        profile_reuse(e, &p->est[k]);
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Builds pools: 0 = general (every group), then one per live reservation in slot
 * order (the partition's list of them: no pass over the released ones), each over
 * the groups holding it in group order (one pass over the groups' keys). */
static int pools_make(struct batch_engine *e)
{
    const struct bpart *pt = &e->part;
    int32_t nl = pt->nacc, *live = malloc(((size_t)nl + 1) * sizeof *live);
    int32_t *cnt = calloc((size_t)nl + 1, sizeof *cnt), *gid = NULL, total = 0, rc = -1;
    if (!live || !cnt)
        goto out;
    if (nl > 0)
        memcpy(live, pt->acc, (size_t)nl * sizeof *live);
    for (int32_t x = 1; x < nl; x++)
        if (live[x - 1] > live[x]) {
            qsort(live, (size_t)nl, sizeof *live, cmp_i32);
            break;
        }
    for (int32_t x = 0; x < nl; x++)
        e->resv[live[x]].pool = 1 + x;
    for (int32_t g = 0; g < e->ngroups; g++)
        for (int32_t i = 0; i < e->groups[g].nresv; i++)
            total++;
    if (!(gid = malloc(((size_t)(total > e->ngroups ? total : e->ngroups) + 1) * sizeof *gid)) ||
        !(e->pools = calloc((size_t)nl + 1, sizeof *e->pools)))
        goto out;
    for (int32_t g = 0; g < e->ngroups; g++)
        gid[g] = g;
    if (pool_make(e, &e->pools[e->npools++], -1, gid, e->ngroups) < 0)
        goto out;
    e->pools[0].start = INT64_MIN;
    e->pools[0].end = BATCH_NEVER;
    for (int32_t g = 0; g < e->ngroups; g++) /* groups per pool, then their offsets */
        for (int32_t i = 0; i < e->groups[g].nresv; i++)
            cnt[e->resv[e->groups[g].resv[i]].pool - 1]++;
    for (int32_t x = 0, off = 0; x < nl; x++) {
        int32_t c = cnt[x];
        cnt[x] = off;
        off += c;
    }
    for (int32_t g = 0; g < e->ngroups; g++)
        for (int32_t i = 0; i < e->groups[g].nresv; i++)
            gid[cnt[e->resv[e->groups[g].resv[i]].pool - 1]++] = g;
    for (int32_t x = 0, off = 0; x < nl; x++) { /* cnt[x] is now pool x's end */
        const struct bresv *r = &e->resv[live[x]];
        struct bpool *p = &e->pools[e->npools++];
        if (pool_make(e, p, live[x], gid + off, cnt[x] - off) < 0)
            goto out;
        p->start = r->start;
        p->end = r->end;
        off = cnt[x];
    }
    rc = 0;
out:
    if (rc < 0 && live)
        for (int32_t x = 0; x < nl; x++)
            e->resv[live[x]].pool = -1;
    free(live);
    free(cnt);
    free(gid);
    return rc;
}

int bs_engine_regroup(struct batch_engine *e)
{
    bs_engine_memo_clear(e);
    bs_engine_fill_all(e); /* the lazy node lists refer to the old groups */
    bs_engine_groups_free(e);
    int rc = -1;
    if (groups_make(e) < 0 || pools_make(e) < 0) /* busy bits and runs kept (part.c) */
        goto out;
    e->gepoch++;
    e->groups_dirty = false;
    if (bs_engine_rebuild_base(e) < 0 || bs_plan_copy_base(e) < 0 || bs_plan_copy_est(e) < 0)
        goto out;
    rc = 0;
out:
    if (rc < 0) {
        bs_engine_groups_free(e);
        e->groups_dirty = true;
        errno = ENOMEM;
    }
    return rc;
}

/* Subtracts running job j from its pool's base profiles over [now, end_est): its
 * nodes counted per group from its bitmap words (j->runs, each of one class). */
static int base_add_job(struct batch_engine *e, struct bjob *j)
{
    struct bpool *p = &e->pools[j->resv >= 0 ? e->resv[j->resv].pool : 0];
    int32_t *cnt = e->scr_cnt;
    memset(cnt, 0, (size_t)p->ng * sizeof *cnt);
    for (int32_t i = 0; i < j->nruns; i++) {
        int32_t g = e->part.c[j->runs[i].part].group, k = g >= 0 ? bs_pool_pos(p, g) : -1;
        if (k >= 0)
            cnt[k] += bs_pop64(j->runs[i].mask);
    }
    for (int32_t k = 0; k < p->ng; k++)
        if (cnt[k] && bs_profile_add(&p->base[k], e->now, j->end_est, -cnt[k]) < 0)
            return -1;
    return 0;
}

int bs_engine_rebuild_base(struct batch_engine *e)
{
    if (bs_engine_scratch(e, e->ngroups + 1) < 0)
        return -1;
    int64_t now = e->now == INT64_MIN ? 0 : e->now;
    for (int32_t pi = 0; pi < e->npools; pi++) {
        struct bpool *p = &e->pools[pi];
        for (int32_t k = 0; k < p->ng; k++) {
            const struct bgroup *g = &e->groups[p->gid[k]];
            int32_t n = g->nnodes;
            if (bs_profile_reset(&p->base[k], now, p->resv < 0 ? n : 0) < 0)
                return -1;
            if (p->resv >= 0 && bs_profile_add(&p->base[k], p->start, p->end, n) < 0)
                return -1;
            for (int32_t i = 0; p->resv < 0 && i < g->nresv; i++) {
                const struct bresv *r = &e->resv[g->resv[i]];
                if (bs_profile_add(&p->base[k], r->start, r->end, -n) < 0)
                    return -1;
            }
        }
    }
    for (int32_t i = 0; i < e->nrunning; i++) {
        struct bjob *j = &e->jobs[e->running[i]];
        if (j->resv >= 0 && !e->resv[j->resv].live)
            j->resv = -1;
        if (base_add_job(e, j) < 0)
            return -1;
    }
    bs_plan_clear(e);
    e->est_valid = e->jest_valid = false;
    return 0;
}

/*
 * group.c - grouping the up nodes into groups (same class, capacity and admin
 * reservations) and pools (the general pool and one per admin reservation), and
 * rebuilding the pools' base profiles from the running jobs and reservations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/* Frees the groups and pools (not the nodes). */
void bs_engine_groups_free(struct batch_engine *e)
{
    for (int32_t g = 0; g < e->ngroups; g++) {
        free(e->groups[g].resv);
        free(e->groups[g].nodes);
        free(e->groups[g].busy);
    }
    free(e->groups);
    e->groups = NULL;
    e->ngroups = 0;
    for (int32_t p = 0; p < e->npools; p++) {
        struct bpool *pl = &e->pools[p];
        for (int32_t k = 0; k < pl->ng; k++) {
            bs_profile_free(&pl->base[k]);
            bs_profile_free(&pl->plan[k]);
            bs_profile_free(&pl->est[k]);
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

/* ---- grouping ----
 *
 * A group's key is (class, features, capacity, reservation set). The first part is a
 * node's *base class*, kept per node in e->nbase (computed again only when a node is
 * added or its features change); the nodes no reservation holds (most of them) take
 * their base class's group directly, the others are classed by hashing (base class,
 * reservation set). The groups are the classes in key order, each with its nodes in
 * ascending index: what sorting the nodes by key with a stable sort gives, in one
 * visit per node and a sort of the few classes. */

struct nodekey { /* per node: the reservation slots covering it */
    int32_t off, n;
};

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* Orders base classes (represented by nodes x and y) by (class, features, capacity). */
static int base_cmp(const struct bnode *x, const struct bnode *y)
{
    int r;
    if ((r = cmp_i64(x->cls, y->cls)) || (r = cmp_i64(x->fset, y->fset)) ||
        (r = cmp_i64(x->cap.procs, y->cap.procs)) || (r = cmp_i64(x->cap.mem, y->cap.mem)) ||
        (r = cmp_i64(x->cap.disk, y->cap.disk)))
        return r;
    return cmp_i64(x->cap.swap, y->cap.swap);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

/* Open-addressing table of ids 0..n with their hashes (hash[] kept by the caller). */
struct htab {
    int32_t *slot; /* -1 empty; cap a power of two, at most half full */
    int32_t cap;
};

/* Makes room for id n (rehashing ids 0..n-1 by hash[]). 0 or -1. */
static int htab_room(struct htab *t, int32_t n, const uint64_t *hash)
{
    if (2 * (n + 1) <= t->cap)
        return 0;
    int32_t ncap = t->cap ? 2 * t->cap : 64;
    int32_t *v = malloc((size_t)ncap * sizeof *v);
    if (!v)
        return -1;
    memset(v, -1, (size_t)ncap * sizeof *v);
    for (int32_t k = 0; k < n; k++) {
        uint32_t at = (uint32_t)hash[k] & (uint32_t)(ncap - 1);
        while (v[at] >= 0)
            at = (at + 1) & (uint32_t)(ncap - 1);
        v[at] = k;
    }
    free(t->slot);
    t->slot = v;
    t->cap = ncap;
    return 0;
}

static void htab_put(struct htab *t, int32_t id, uint64_t h)
{
    uint32_t at = (uint32_t)h & (uint32_t)(t->cap - 1);
    while (t->slot[at] >= 0)
        at = (at + 1) & (uint32_t)(t->cap - 1);
    t->slot[at] = id;
}

/* Computes e->nbase (every node's base class) and e->base_rep. 0 or -1. */
static int bases_make(struct batch_engine *e)
{
    if (VEC_RESERVE(e->nbase, e->capnbase, e->nnodes + 1) < 0)
        return -1;
    uint64_t *hash = NULL;
    struct htab t = {0};
    int32_t cap = 0, rc = -1;
    e->nbases = 0;
    for (int32_t i = 0; i < e->nnodes; i++) {
        const struct bnode *x = &e->nodes[i];
        if (!x->up) {
            e->nbase[i] = -1;
            continue;
        }
        uint64_t h =
            mix(mix(mix(mix(mix(mix(0x9e3779b97f4a7c15ULL, (uint64_t)x->cls), (uint64_t)x->fset),
                            (uint64_t)x->cap.procs),
                        (uint64_t)x->cap.mem),
                    (uint64_t)x->cap.disk),
                (uint64_t)x->cap.swap);
        h ^= h >> 29;
        int32_t b = -1;
        for (uint32_t at = t.cap ? (uint32_t)h & (uint32_t)(t.cap - 1) : 0;
             t.cap && t.slot[at] >= 0; at = (at + 1) & (uint32_t)(t.cap - 1))
            if (hash[t.slot[at]] == h && base_cmp(&e->nodes[e->base_rep[t.slot[at]]], x) == 0) {
                b = t.slot[at];
                break;
            }
        if (b < 0) {
            b = e->nbases;
            if (VEC_RESERVE(e->base_rep, e->capbase_rep, b + 1) < 0 ||
                VEC_RESERVE(hash, cap, b + 1) < 0 || htab_room(&t, b, hash) < 0)
                goto out;
            e->base_rep[b] = i;
            hash[b] = h;
            htab_put(&t, b, h);
            e->nbases++;
        }
        e->nbase[i] = b;
    }
    e->nbase_ok = true;
    rc = 0;
out:
    free(hash);
    free(t.slot);
    return rc;
}

/* Per node, the live reservations holding it: key[] and the flat list rl[]. */
static int node_keys(struct batch_engine *e, struct nodekey *key, int32_t **rlp)
{
    int32_t total = 0;
    for (int32_t r = 0; r < e->nresv; r++)
        if (e->resv[r].live)
            total += e->resv[r].nnodes;
    int32_t *rl = malloc(((size_t)total + 1) * sizeof *rl);
    if (!rl)
        return -1;
    for (int32_t i = 0; i < e->nnodes; i++)
        key[i].n = 0;
    for (int32_t r = 0; r < e->nresv; r++)
        if (e->resv[r].live)
            for (int32_t i = 0; i < e->resv[r].nnodes; i++)
                key[e->resv[r].nodes[i]].n++;
    for (int32_t i = 0, off = 0; i < e->nnodes; i++) {
        key[i].off = off;
        off += key[i].n;
        key[i].n = 0;
    }
    for (int32_t r = 0; r < e->nresv; r++) /* ascending r: lists come out sorted */
        if (e->resv[r].live)
            for (int32_t i = 0; i < e->resv[r].nnodes; i++) {
                struct nodekey *k = &key[e->resv[r].nodes[i]];
                rl[k->off + k->n++] = r;
            }
    *rlp = rl;
    return 0;
}

/* The classes of one regrouping: ids below e->nbases are the base classes without
 * reservation; the others are (base class, reservation set rl[off, off + n)). */
struct classes {
    int32_t *base, *off, *n; /* per class */
    int32_t *cnt;            /* per class: its up nodes */
    uint64_t *hash;          /* per class above the bases */
    struct htab t;
    int32_t nc, capc, caph;
};

/* Orders classes a and b by key. */
static int class_cmp(const void *pa, const void *pb, void *arg)
{
    const struct batch_engine *e = ((const void **)arg)[0];
    const struct classes *c = ((const void **)arg)[1];
    const int32_t *rl = ((const void **)arg)[2];
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    int r;
    if ((r = base_cmp(&e->nodes[e->base_rep[c->base[a]]], &e->nodes[e->base_rep[c->base[b]]])) ||
        (r = cmp_i64(c->n[a], c->n[b])))
        return r;
    for (int32_t i = 0; i < c->n[a]; i++)
        if ((r = cmp_i64(rl[c->off[a] + i], rl[c->off[b] + i])))
            return r;
    return 0;
}

static int classes_room(struct classes *c)
{
    int32_t old = c->capc;
    if (VEC_RESERVE(c->base, c->capc, c->nc + 1) < 0)
        return -1;
    int32_t cap = c->capc; /* the other arrays follow base's capacity */
    if (cap == old)
        return 0;
    int32_t *o = realloc(c->off, (size_t)cap * sizeof *o);
    if (o)
        c->off = o;
    int32_t *n = realloc(c->n, (size_t)cap * sizeof *n);
    if (n)
        c->n = n;
    int32_t *k = realloc(c->cnt, (size_t)cap * sizeof *k);
    if (k)
        c->cnt = k;
    return o && n && k ? 0 : -1;
}

/* The class of reserved node i (added when new); -1 when out of memory. */
static int32_t class_of(struct batch_engine *e, struct classes *c, const struct nodekey *k,
                        const int32_t *rl, int32_t i)
{
    int32_t b = e->nbase[i];
    uint64_t h = mix(mix(0x84222325cbf29ce4ULL, (uint64_t)b), (uint64_t)k->n);
    for (int32_t x = 0; x < k->n; x++)
        h = mix(h, (uint64_t)rl[k->off + x]);
    h ^= h >> 29;
    int32_t nb = e->nbases;
    for (uint32_t at = c->t.cap ? (uint32_t)h & (uint32_t)(c->t.cap - 1) : 0;
         c->t.cap && c->t.slot[at] >= 0; at = (at + 1) & (uint32_t)(c->t.cap - 1)) {
        int32_t id = c->t.slot[at] + nb;
        if (c->hash[id - nb] == h && c->base[id] == b && c->n[id] == k->n &&
            memcmp(rl + c->off[id], rl + k->off, (size_t)k->n * sizeof *rl) == 0)
            return id;
    }
    int32_t hid = c->nc - nb; /* its index among the hashed classes */
    if (classes_room(c) < 0 || VEC_RESERVE(c->hash, c->caph, hid + 1) < 0 ||
        htab_room(&c->t, hid, c->hash) < 0)
        return -1;
    c->base[c->nc] = b;
    c->off[c->nc] = k->off;
    c->n[c->nc] = k->n;
    c->cnt[c->nc] = 0;
    c->hash[hid] = h;
    htab_put(&c->t, hid, h);
    return c->nc++;
}

static void classes_free(struct classes *c)
{
    free(c->base);
    free(c->off);
    free(c->n);
    free(c->cnt);
    free(c->hash);
    free(c->t.slot);
}

/* Builds group g (key of class k) from the node indices ord[from, to). */
static int group_make(struct batch_engine *e, struct bgroup *g, const struct classes *c, int32_t k,
                      const int32_t *ord, int32_t from, int32_t to, const int32_t *rl)
{
    const struct bnode *first = &e->nodes[ord[from]];
    g->cls = first->cls;
    g->fset = first->fset;
    g->cap = first->cap;
    g->nnodes = to - from;
    g->nresv = c->n[k];
    g->nodes = malloc((size_t)g->nnodes * sizeof *g->nodes);
    g->busy = calloc(((size_t)g->nnodes + 63) / 64, sizeof *g->busy);
    g->resv = malloc(((size_t)g->nresv + 1) * sizeof *g->resv);
    if (!g->nodes || !g->busy || !g->resv)
        return -1;
    memcpy(g->resv, rl + c->off[k], (size_t)g->nresv * sizeof *g->resv);
    memcpy(g->nodes, ord + from, (size_t)g->nnodes * sizeof *g->nodes);
    int32_t gi = (int32_t)(g - e->groups);
    for (int32_t i = 0; i < g->nnodes; i++)
        e->npos[g->nodes[i]] = (struct bnodepos){gi, i};
    return 0;
}

/* Classes the up nodes and builds the groups (e->groups, e->ngroups); cid and ord
 * are scratch of a node each. 0 or -1. */
static int groups_make(struct batch_engine *e, const struct nodekey *key, const int32_t *rl,
                       int32_t *cid, int32_t *ord)
{
    struct classes c = {0};
    int32_t n = e->nnodes, nb = e->nbases, rc = -1;
    int32_t *co = NULL, *at = NULL;
    for (int32_t b = 0; b < nb; b++) {
        if (classes_room(&c) < 0)
            goto out;
        c.base[c.nc] = b;
        c.off[c.nc] = c.n[c.nc] = c.cnt[c.nc] = 0;
        c.nc++;
    }
    /* runs of nodes of one class are counted in a register (most nodes are) */
    for (int32_t i = 0, run = 0, prev = -1; i <= n; i++) {
        int32_t k = -1;
        if (i < n && e->nbase[i] < 0) /* down */
            e->npos[i].group = -1;
        else if (i < n && (k = key[i].n ? class_of(e, &c, &key[i], rl, i) : e->nbase[i]) < 0)
            goto out;
        if (k != prev) {
            if (prev >= 0)
                c.cnt[prev] += run;
            prev = k;
            run = 0;
        }
        run++;
        if (i < n)
            cid[i] = k;
    }
    co = malloc(((size_t)c.nc + 1) * sizeof *co);
    at = malloc(((size_t)c.nc + 1) * sizeof *at);
    if (!co || !at)
        goto out;
    int32_t ng = 0;
    for (int32_t k = 0; k < c.nc; k++)
        if (c.cnt[k] > 0)
            co[ng++] = k;
    const void *arg[3] = {e, &c, rl};
    qsort_r(co, (size_t)ng, sizeof *co, class_cmp, arg);
    for (int32_t g = 0, off = 0; g < ng; g++) { /* counting sort: ascending index per class */
        at[co[g]] = off;
        off += c.cnt[co[g]];
    }
    for (int32_t i = 0; i < n;) {
        int32_t k = cid[i], pos = k >= 0 ? at[k] : 0;
        for (; i < n && cid[i] == k; i++)
            if (k >= 0)
                ord[pos++] = i;
        if (k >= 0)
            at[k] = pos;
    }
    if (!(e->groups = calloc((size_t)ng + 1, sizeof *e->groups)))
        goto out;
    for (int32_t g = 0, from = 0; g < ng; g++) {
        int32_t to = from + c.cnt[co[g]];
        if (group_make(e, &e->groups[e->ngroups++], &c, co[g], ord, from, to, rl) < 0)
            goto out;
        from = to;
    }
    rc = 0;
out:
    classes_free(&c);
    free(co);
    free(at);
    return rc;
}

/* Allocates pool p over the groups listed in gid[0..ng) (copied). */
static int pool_make(struct bpool *p, int32_t resv, const int32_t *gid, int32_t ng)
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
    return 0;
}

/* Builds pools: 0 = general (every group), then one per live reservation. */
static int pools_make(struct batch_engine *e)
{
    int32_t npools = 1;
    for (int32_t r = 0; r < e->nresv; r++)
        npools += e->resv[r].live;
    int32_t *gid = malloc(((size_t)e->ngroups + 1) * sizeof *gid);
    e->pools = calloc((size_t)npools, sizeof *e->pools);
    if (!gid || !e->pools) {
        free(gid);
        return -1;
    }
    int rc = 0;
    for (int32_t g = 0; g < e->ngroups; g++)
        gid[g] = g;
    if (pool_make(&e->pools[e->npools++], -1, gid, e->ngroups) < 0)
        rc = -1;
    e->pools[0].start = INT64_MIN;
    e->pools[0].end = BATCH_NEVER;
    for (int32_t r = 0; r < e->nresv && rc == 0; r++) {
        e->resv[r].pool = -1;
        if (!e->resv[r].live)
            continue;
        int32_t ng = 0;
        for (int32_t g = 0; g < e->ngroups; g++)
            for (int32_t i = 0; i < e->groups[g].nresv; i++)
                if (e->groups[g].resv[i] == r)
                    gid[ng++] = g;
        struct bpool *p = &e->pools[e->npools];
        if (pool_make(p, r, gid, ng) < 0)
            rc = -1;
        p->start = e->resv[r].start;
        p->end = e->resv[r].end;
        e->resv[r].pool = e->npools++;
    }
    free(gid);
    return rc;
}

int bs_engine_regroup(struct batch_engine *e)
{
    bs_engine_memo_clear(e);
    bs_engine_fill_all(e); /* the lazy node lists refer to the old groups */
    bs_engine_groups_free(e);
    size_t n1 = (size_t)e->nnodes + 1;
    int32_t *rl = NULL;
    int rc = -1;
    if (VEC_RESERVE(e->rg_scr, e->caprg_scr, (int32_t)(4 * n1)) < 0)
        goto out;
    struct nodekey *key = (struct nodekey *)e->rg_scr; /* 2 per node, then cid and ord */
    if ((!e->nbase_ok && bases_make(e) < 0) || node_keys(e, key, &rl) < 0 ||
        groups_make(e, key, rl, e->rg_scr + 2 * n1, e->rg_scr + 3 * n1) < 0 || pools_make(e) < 0)
        goto out;
    for (int32_t i = 0; i < e->nrunning; i++) /* busy bits from the running jobs */
        if (bs_engine_job_runs(e, &e->jobs[e->running[i]]) < 0)
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
    free(rl);
    return rc;
}

/* Subtracts running job j from its pool's base profiles over [now, end_est). */
static int base_add_job(struct batch_engine *e, struct bjob *j)
{
    struct bpool *p = &e->pools[j->resv >= 0 ? e->resv[j->resv].pool : 0];
    int32_t *cnt = e->scr_cnt;
    memset(cnt, 0, (size_t)p->ng * sizeof *cnt);
    for (int32_t i = 0; i < j->nnodes; i++) {
        int32_t g = e->npos[j->nodes[i]].group, k = g >= 0 ? bs_pool_pos(p, g) : -1;
        if (k >= 0)
            cnt[k]++;
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

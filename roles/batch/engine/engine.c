/*
 * engine.c - the engine's state: creation, nodes and their grouping into pools,
 * job submission and completion. The scheduling cycle is in cycle.c, the planner
 * (searching profiles, reserving, starting) in plan.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

struct batch_engine *batch_engine_new(const struct batch_config *cfg)
{
    if (cfg->fsinterval <= 0 || cfg->fsdepth <= 0 || cfg->fsdepth > 1000 ||
        !(cfg->fsdecay > 0 && cfg->fsdecay <= 1) || cfg->reservation_depth < BATCH_UNLIMITED ||
        cfg->unit_per_s < 1 || cfg->unit_per_s > 1000000 || cfg->overrun_grace < 1 ||
        cfg->fsinterval > INT64_MAX / cfg->unit_per_s) {
        errno = EINVAL;
        return NULL;
    }
    struct batch_engine *e = calloc(1, sizeof *e);
    if (!e) {
        errno = ENOMEM;
        return NULL;
    }
    if (batch_config_copy(&e->cfg, cfg) < 0 ||
        (cfg->fspolicy != BATCH_FS_NONE && bs_fs_ring_init(&e->fs_total, cfg->fsdepth) < 0)) {
        batch_engine_destroy(&e);
        errno = ENOMEM;
        return NULL;
    }
    e->now = INT64_MIN;
    e->min_end = BATCH_NEVER;
    e->bnd.group = -1;
    e->bound_min_jobs = 256; /* below, bounds cost more than the searches they save */
    e->fs_stamp = -1;
    e->groups_dirty = true;
    bs_prio_weights(e);
    for (size_t i = 0; i < cfg->ncreds; i++)
        e->any_throttle |= cfg->creds[i].maxjob >= 0 || cfg->creds[i].maxproc >= 0;
    return e;
}

/* Frees the groups and pools (not the nodes). */
static void groups_free(struct batch_engine *e)
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

void batch_engine_destroy(struct batch_engine **ep)
{
    struct batch_engine *e = ep ? *ep : NULL;
    if (!e)
        return;
    int saved = errno;
    groups_free(e);
    for (int32_t i = 0; i < e->nnodes; i++)
        free(e->nodes[i].name);
    free(e->nodes);
    free(e->node_job);
    bs_strmap_free(&e->nodemap);
    for (int32_t i = 0; i < e->nresv; i++) {
        for (int k = 0; k < BATCH_CRED_KINDS; k++)
            free(e->resv[i].acl[k]);
        free(e->resv[i].jobs);
        free(e->resv[i].nodes);
    }
    free(e->resv);
    for (int32_t i = 0; i < e->njobs; i++) {
        free(e->jobs[i].nodes);
        free(e->jobs[i].runs);
    }
    free(e->jobs);
    free(e->slot_need);
    free(e->freeslots);
    bs_idmap_free(&e->jobmap);
    free(e->queue);
    free(e->fresh);
    free(e->running);
    free(e->plan);
    free(e->pcnt);
    free(e->started);
    free(e->scr_cnt);
    free(e->scr_k);
    free(e->scr_kpn);
    free(e->scr_cnt2);
    free(e->scr_free);
    free(e->drops);
    bs_bound_free(e);
    bs_cred_free_all(e);
    bs_fs_ring_free(&e->fs_total);
    batch_config_clear(&e->cfg);
    free(e);
    *ep = NULL;
    errno = saved;
}

/* Makes the scratch arrays hold n entries; 0 / -1 ENOMEM. */
int bs_engine_scratch(struct batch_engine *e, int32_t n)
{
    if (n <= e->capscr)
        return 0;
    int32_t *a = realloc(e->scr_cnt, (size_t)n * sizeof *a);
    if (a)
        e->scr_cnt = a;
    int32_t *b = realloc(e->scr_k, (size_t)n * sizeof *b);
    if (b)
        e->scr_k = b;
    int32_t *c = realloc(e->scr_kpn, (size_t)n * sizeof *c);
    if (c)
        e->scr_kpn = c;
    int32_t *d = realloc(e->scr_cnt2, (size_t)n * sizeof *d);
    if (d)
        e->scr_cnt2 = d;
    int32_t *f = realloc(e->scr_free, (size_t)n * sizeof *f);
    if (f)
        e->scr_free = f;
    if (!a || !b || !c || !d || !f) {
        errno = ENOMEM;
        return -1;
    }
    e->capscr = n;
    return 0;
}

/* ---- nodes ---- */

static bool name_ok(const char *s)
{
    return memchr(s, '\0', BATCH_NAME_MAX) != NULL;
}

/* strcmp(a, b) == 0 inline: credential names are short, a call costs more. */
static inline bool name_eq(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

int32_t batch_node_add(struct batch_engine *e, const struct batch_node_spec *n)
{
    if (!name_ok(n->name) || !name_ok(n->class_) || !n->name[0] || n->cap.procs < 1 ||
        n->cap.mem < 0 || n->cap.disk < 0 || n->cap.swap < 0) {
        errno = EINVAL;
        return -1;
    }
    if (bs_strmap_get(&e->nodemap, n->name) >= 0) {
        errno = EEXIST;
        return -1;
    }
    int32_t cls = n->class_[0] ? bs_cred_intern(e, BATCH_CRED_CLASS, n->class_) : -1;
    if ((n->class_[0] && cls < 0) || VEC_RESERVE(e->nodes, e->capnodes, e->nnodes + 1) < 0 ||
        VEC_RESERVE(e->node_job, e->capnodejob, e->nnodes + 1) < 0)
        return -1;
    struct bnode *nd = &e->nodes[e->nnodes];
    memset(nd, 0, sizeof *nd);
    if (!(nd->name = strdup(n->name)) || bs_strmap_put(&e->nodemap, n->name, e->nnodes) < 0) {
        free(nd->name);
        errno = ENOMEM;
        return -1;
    }
    nd->cap = n->cap;
    nd->cls = cls;
    nd->up = true;
    e->node_job[e->nnodes] = -1;
    nd->group = -1;
    e->groups_dirty = true;
    bs_engine_memo_clear(e);
    return e->nnodes++;
}

int batch_node_set_up(struct batch_engine *e, int32_t node, bool up)
{
    if (node < 0 || node >= e->nnodes) {
        errno = ENOENT;
        return -1;
    }
    if (e->nodes[node].up != up) {
        e->nodes[node].up = up;
        e->groups_dirty = true;
        bs_engine_memo_clear(e);
    }
    return 0;
}

int32_t batch_node_count(const struct batch_engine *e)
{
    return e->nnodes;
}

int32_t batch_node_find(const struct batch_engine *e, const char *name)
{
    return bs_strmap_get(&e->nodemap, name);
}

const char *batch_node_name(const struct batch_engine *e, int32_t node)
{
    return node >= 0 && node < e->nnodes ? e->nodes[node].name : NULL;
}

/* How many tasks of shape `task` one node of capacity `cap` holds. */
int32_t bs_engine_kpn(const struct batch_res *cap, const struct batch_res *task)
{
    int64_t k = cap->procs / task->procs;
    if (task->mem > 0 && cap->mem / task->mem < k)
        k = cap->mem / task->mem;
    if (task->disk > 0 && cap->disk / task->disk < k)
        k = cap->disk / task->disk;
    if (task->swap > 0 && cap->swap / task->swap < k)
        k = cap->swap / task->swap;
    return k > INT32_MAX ? INT32_MAX : (int32_t)k;
}

/* Whether job j may use nodes of group g (class and shape). */
bool bs_engine_group_ok(const struct batch_engine *e, const struct bgroup *g, const struct bjob *j)
{
    (void)e;
    return (g->cls < 0 || g->cls == j->cred[BATCH_CRED_CLASS]) &&
           bs_engine_kpn(&g->cap, &j->per_task) > 0;
}

/* ---- grouping ---- */

struct nodekey { /* per node: the reservation slots covering it */
    int32_t off, n;
};
struct regroup_ctx {
    const struct batch_engine *e;
    const struct nodekey *key;
    const int32_t *rl;
};

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* Orders nodes by (class, capacity, reservation set): equal keys form a group. */
static int node_cmp(const void *pa, const void *pb, void *arg)
{
    const struct regroup_ctx *c = arg;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    const struct bnode *x = &c->e->nodes[a], *y = &c->e->nodes[b];
    int r;
    if ((r = cmp_i64(x->cls, y->cls)) || (r = cmp_i64(x->cap.procs, y->cap.procs)) ||
        (r = cmp_i64(x->cap.mem, y->cap.mem)) || (r = cmp_i64(x->cap.disk, y->cap.disk)) ||
        (r = cmp_i64(x->cap.swap, y->cap.swap)) || (r = cmp_i64(c->key[a].n, c->key[b].n)))
        return r;
    for (int32_t i = 0; i < c->key[a].n; i++)
        if ((r = cmp_i64(c->rl[c->key[a].off + i], c->rl[c->key[b].off + i])))
            return r;
    return 0;
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

/* Builds group g from the sorted node indices ord[from, to). */
static int group_make(struct batch_engine *e, struct bgroup *g, const int32_t *ord, int32_t from,
                      int32_t to, const struct nodekey *key, const int32_t *rl)
{
    const struct bnode *first = &e->nodes[ord[from]];
    const struct nodekey *k = &key[ord[from]];
    g->cls = first->cls;
    g->cap = first->cap;
    g->nnodes = to - from;
    g->nresv = k->n;
    g->nodes = malloc((size_t)g->nnodes * sizeof *g->nodes);
    g->busy = calloc(((size_t)g->nnodes + 63) / 64, sizeof *g->busy);
    g->resv = malloc(((size_t)k->n + 1) * sizeof *g->resv);
    if (!g->nodes || !g->busy || !g->resv)
        return -1;
    memcpy(g->resv, rl + k->off, (size_t)k->n * sizeof *g->resv);
    for (int32_t i = 0; i < g->nnodes; i++) {
        struct bnode *nd = &e->nodes[ord[from + i]];
        g->nodes[i] = ord[from + i];
        nd->group = (int32_t)(g - e->groups);
        nd->gpos = i;
    }
    return 0;
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
    groups_free(e);
    struct nodekey *key = calloc((size_t)e->nnodes + 1, sizeof *key);
    int32_t *ord = malloc(((size_t)e->nnodes + 1) * sizeof *ord), *rl = NULL, nup = 0;
    int rc = -1;
    if (!key || !ord || node_keys(e, key, &rl) < 0)
        goto out;
    for (int32_t i = 0; i < e->nnodes; i++) {
        e->nodes[i].group = -1;
        if (e->nodes[i].up)
            ord[nup++] = i;
    }
    struct regroup_ctx ctx = {e, key, rl};
    qsort_r(ord, (size_t)nup, sizeof *ord, node_cmp, &ctx);
    if (!(e->groups = calloc((size_t)nup + 1, sizeof *e->groups)))
        goto out;
    for (int32_t i = 0; i < nup;) {
        int32_t j = i + 1;
        while (j < nup && node_cmp(&ord[i], &ord[j], &ctx) == 0)
            j++;
        if (group_make(e, &e->groups[e->ngroups++], ord, i, j, key, rl) < 0)
            goto out;
        i = j;
    }
    if (pools_make(e) < 0)
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
        groups_free(e);
        e->groups_dirty = true;
        errno = ENOMEM;
    }
    free(key);
    free(ord);
    free(rl);
    return rc;
}

/* Position of group g in pool p, or -1. */
static int32_t pool_pos(const struct bpool *p, int32_t g)
{
    if (p->resv < 0)
        return g;
    for (int32_t k = 0; k < p->ng; k++)
        if (p->gid[k] == g)
            return k;
    return -1;
}

/* Subtracts running job j from its pool's base profiles over [now, end_est). */
static int base_add_job(struct batch_engine *e, struct bjob *j)
{
    struct bpool *p = &e->pools[j->resv >= 0 ? e->resv[j->resv].pool : 0];
    int32_t *cnt = e->scr_cnt;
    memset(cnt, 0, (size_t)p->ng * sizeof *cnt);
    for (int32_t i = 0; i < j->nnodes; i++) {
        int32_t g = e->nodes[j->nodes[i]].group, k = g >= 0 ? pool_pos(p, g) : -1;
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
    e->est_valid = false;
    return 0;
}

/* ---- jobs ---- */

struct bjob *bs_engine_job(const struct batch_engine *e, uint64_t id)
{
    int32_t s = bs_idmap_get(&e->jobmap, id);
    return s >= 0 ? &e->jobs[s] : NULL;
}

/* The slot of the job running on node n, or -1. A job's end does not visit its
 * nodes, so node_job[n] may name a slot that ended or was reused: it counts only
 * while that slot runs a job holding n. O(nodes of that job); for admin paths. */
int32_t bs_engine_node_job(struct batch_engine *e, int32_t n)
{
    bs_engine_fill_all(e);
    int32_t s = e->node_job[n];
    if (s < 0 || s >= e->njobs || !e->jobs[s].live || e->jobs[s].state != BATCH_JOB_RUNNING)
        return -1;
    for (int32_t i = 0; i < e->jobs[s].nnodes; i++)
        if (e->jobs[s].nodes[i] == n)
            return s;
    return -1;
}

/* Writes out the node list of job slot (running, started by bs_plan_start) from
 * its bitmap words, and the node -> job hints: in the order the start took them
 * (groups in pool order, positions ascending). The groups must be those of the
 * start (bs_engine_regroup fills every list before it changes them). */
void bs_engine_fill_nodes(struct batch_engine *e, int32_t slot)
{
    struct bjob *j = &e->jobs[slot];
    if (!j->nodes_lazy)
        return;
    int32_t k = 0;
    for (int32_t i = 0; i < j->nruns; i++) {
        const struct bjob_run *r = &j->runs[i];
        const int32_t *gn = e->groups[r->group].nodes + (size_t)r->word * 64;
        for (uint64_t m = r->mask; m && k < j->nnodes; m &= m - 1) {
            int32_t id = gn[__builtin_ctzll(m)];
            e->node_job[id] = slot;
            j->nodes[k++] = id;
        }
    }
    j->nodes_lazy = false;
    e->nlazy--;
}

/* Fills every lazy node list (O(1) when there is none). */
void bs_engine_fill_all(struct batch_engine *e)
{
    for (int32_t i = 0; e->nlazy > 0 && i < e->nrunning; i++)
        bs_engine_fill_nodes(e, e->running[i]);
}

/* Sets the busy bits of running job j's grouped nodes in the current groups and
 * records them in j->runs (one entry per bitmap word it holds, consecutive nodes of
 * a word merged). 0 or -1 (ENOMEM). */
int bs_engine_job_runs(struct batch_engine *e, struct bjob *j)
{
    struct bjob_run *r = realloc(j->runs, ((size_t)j->nnodes + 1) * sizeof *r);
    if (!r)
        return -1;
    j->runs = r;
    j->nruns = 0;
    for (int32_t i = 0; i < j->nnodes; i++) {
        const struct bnode *nd = &e->nodes[j->nodes[i]];
        if (nd->group < 0)
            continue;
        int32_t w = nd->gpos / 64;
        uint64_t bit = 1ULL << (nd->gpos % 64);
        e->groups[nd->group].busy[w] |= bit;
        if (j->nruns > 0 && r[j->nruns - 1].group == nd->group && r[j->nruns - 1].word == w)
            r[j->nruns - 1].mask |= bit;
        else
            r[j->nruns++] = (struct bjob_run){nd->group, w, bit};
    }
    return 0;
}

/* Recomputes j's fit data for the current groups: whether it can ever run, the
 * fewest nodes it needs, and its only compatible group in the general pool. */
/* Records job j's need in e->slot_need (internal.h) when j is a job slot; a slot
 * the array cannot hold (no memory) stays unknown. */
static void slot_need_set(struct batch_engine *e, const struct bjob *j)
{
    if (j < e->jobs || j >= e->jobs + e->njobs)
        return;
    int32_t s = (int32_t)(j - e->jobs);
    if (s >= e->capneed) {
        int32_t nc = e->capjobs > s ? e->capjobs : s + 1;
        int32_t *a = realloc(e->slot_need, (size_t)nc * sizeof *a);
        if (!a)
            return;
        memset(a + e->capneed, 0, (size_t)(nc - e->capneed) * sizeof *a);
        e->slot_need = a;
        e->capneed = nc;
    }
    e->slot_need[s] = j->gen_gi == 0 ? j->gen_need : 0;
}

void bs_engine_fit_refresh(struct batch_engine *e, struct bjob *j)
{
    if (j->fit_epoch == e->gepoch)
        return;
    int64_t tasks = 0;
    int32_t ncompat = 0, best = 0;
    j->gen_gi = -1;
    for (int32_t g = 0; g < e->ngroups; g++) {
        const struct bgroup *gr = &e->groups[g];
        if (!bs_engine_group_ok(e, gr, j))
            continue;
        int32_t k = bs_engine_kpn(&gr->cap, &j->per_task);
        tasks += (int64_t)k * gr->nnodes;
        if (k > best)
            best = k;
        j->gen_gi = g;
        j->gen_need = (int32_t)((j->tasks + (int64_t)k - 1) / k);
        ncompat++;
    }
    if (ncompat != 1)
        j->gen_gi = -1;
    j->never = tasks < j->tasks;
    j->nodes_min = best ? (int32_t)((j->tasks + (int64_t)best - 1) / best) : j->tasks;
    j->fit_epoch = e->gepoch;
    slot_need_set(e, j);
}

/* Whether reservation r's ACL admits job j (any listed value matches, seed 3.1). */
bool bs_engine_admits(const struct batch_engine *e, const struct bresv *r, const struct bjob *j)
{
    (void)e;
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        for (int32_t i = 0; i < r->nacl[k]; i++)
            if (r->acl[k][i] == j->cred[k])
                return true;
    for (int32_t i = 0; i < r->njobs; i++)
        if (r->jobs[i] == j->id)
            return true;
    return false;
}

void bs_engine_charge(struct batch_engine *e, struct bjob *j, int64_t upto)
{
    if (e->cfg.fspolicy == BATCH_FS_NONE || upto <= j->charged)
        return;
    bs_fs_charge(e, j, j->charged, upto);
    j->charged = upto;
}

/* Validates s and fills j (credentials interned); 0 or -1 with errno. */
static int job_fill(struct batch_engine *e, struct bjob *j, const struct batch_job_spec *s)
{
    const char *names[BATCH_CRED_KINDS] = {s->user, s->group, s->account, s->class_, s->qos};
    int64_t procs = (int64_t)s->tasks * s->per_task.procs;
    if (s->tasks < 1 || s->per_task.procs < 1 || procs > INT32_MAX || s->per_task.mem < 0 ||
        s->per_task.disk < 0 || s->per_task.swap < 0 || s->walltime < 1) {
        errno = EINVAL;
        return -1;
    }
    memset(j, 0, sizeof *j);
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        const struct credtab *t = &e->creds[k];
        if (names[k] && t->last < t->n && name_eq(t->v[t->last].name, names[k])) {
            j->cred[k] = t->last; /* same as the last job's (interned, so valid) */
            continue;
        }
        if (!name_ok(names[k]) || (j->cred[k] = bs_cred_intern(e, k, names[k])) < 0)
            return -1;
    }
    j->id = s->id;
    j->hold = s->hold;
    j->early_start = s->early_start;
    j->tasks = s->tasks;
    j->per_task = s->per_task;
    j->procs = (int32_t)procs;
    j->walltime = s->walltime;
    j->submit = s->submit;
    j->upriority = s->upriority;
    j->state = BATCH_JOB_PENDING;
    j->resv = -1;
    j->estimate = j->reserved = BATCH_NEVER;
    j->fit_epoch = -1;
    j->seq = ++e->submit_seq;
    j->live = true;
    return 0;
}

int batch_job_submit(struct batch_engine *e, const struct batch_job_spec *s)
{
    if (bs_idmap_get(&e->jobmap, s->id) >= 0) {
        errno = EEXIST;
        return -1;
    }
    int32_t slot = e->nfree > 0 ? e->freeslots[e->nfree - 1] : e->njobs;
    if ((slot == e->njobs && VEC_RESERVE(e->jobs, e->capjobs, e->njobs + 1) < 0) ||
        VEC_RESERVE(e->queue, e->capqueue, e->nqueue + 1) < 0 ||
        VEC_RESERVE(e->running, e->caprunning, e->live_jobs + 1) < 0)
        return -1;
    struct bjob tmp;
    if (job_fill(e, &tmp, s) < 0 || bs_idmap_put(&e->jobmap, s->id, slot) < 0)
        return -1;
    if (slot == e->njobs)
        e->njobs++;
    else
        e->nfree--;
    e->jobs[slot] = tmp;
    e->queue[e->nqueue++] = slot;
    if (e->bf_memo && e->nfresh >= 0) { /* see backfill_fresh() in cycle.c */
        if (e->nfresh < 4096 && VEC_RESERVE(e->fresh, e->capfresh, e->nfresh + 1) == 0)
            e->fresh[e->nfresh++] = slot;
        else
            e->nfresh = -1;
    }
    e->live_jobs++;
    e->est_valid = false;
    return 0;
}

int batch_job_adopt(struct batch_engine *e, const struct batch_job_spec *s, const int32_t *nodes,
                    int32_t n, int64_t start)
{
    if (n < 1 || n != s->tasks) {
        errno = EINVAL;
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        if (nodes[i] < 0 || nodes[i] >= e->nnodes || bs_engine_node_job(e, nodes[i]) >= 0 ||
            !e->nodes[nodes[i]].up) {
            errno = EINVAL;
            return -1;
        }
        for (int32_t k = 0; k < i; k++)
            if (nodes[k] == nodes[i]) {
                errno = EINVAL;
                return -1;
            }
    }
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    if (batch_job_submit(e, s) < 0) {
        free(copy);
        return -1;
    }
    int32_t slot = bs_idmap_get(&e->jobmap, s->id);
    struct bjob *j = &e->jobs[slot];
    e->nqueue--; /* batch_job_submit appended it last */
    memcpy(copy, nodes, (size_t)n * sizeof *copy);
    j->nodes = copy;
    j->nnodes = n;
    for (int32_t i = 0; i < n; i++)
        e->node_job[nodes[i]] = slot;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        struct cred *c = &e->creds[k].v[j->cred[k]];
        c->run_jobs++;
        c->run_procs += j->procs;
    }
    j->state = BATCH_JOB_RUNNING;
    j->start = j->charged = start;
    j->end_est = start > BATCH_NEVER - j->walltime ? BATCH_NEVER : start + j->walltime;
    j->estimate = start;
    j->reserved = BATCH_NEVER;
    if (j->end_est < e->min_end)
        e->min_end = j->end_est;
    j->run_idx = e->nrunning;
    e->running[e->nrunning++] = slot; /* room reserved at submit */
    e->groups_dirty = true; /* busy bits and base profiles are rebuilt at the next cycle */
    bs_engine_memo_clear(e);
    e->plan_valid = e->est_valid = false;
    return 0;
}

/* Frees job slot s (not in the queue or running list any more). */
static void job_drop(struct batch_engine *e, int32_t s)
{
    struct bjob *j = &e->jobs[s];
    bs_idmap_del(&e->jobmap, j->id);
    if (j->nodes_lazy) {
        j->nodes_lazy = false;
        e->nlazy--;
    }
    free(j->nodes);
    j->nodes = NULL;
    free(j->runs);
    j->runs = NULL;
    j->nruns = 0;
    j->live = false;
    if (s < e->capneed)
        e->slot_need[s] = 0; /* the next job in this slot is unknown until refreshed */
    e->live_jobs--;
    if (VEC_RESERVE(e->freeslots, e->capfree, e->nfree + 1) == 0)
        e->freeslots[e->nfree++] = s; /* else the slot is simply not reused */
}

/* Releases the nodes of running job j at `when` and returns them to the base
 * profile of its pool over [when, end_est). */
static void job_release(struct batch_engine *e, struct bjob *j, int64_t when)
{
    struct bpool *p =
        &e->pools[j->resv >= 0 && e->resv[j->resv].pool >= 0 ? e->resv[j->resv].pool : 0];
    int32_t *cnt = e->scr_cnt;
    bool counts = !e->groups_dirty && bs_engine_scratch(e, p->ng + 1) == 0;
    if (counts)
        memset(cnt, 0, (size_t)p->ng * sizeof *cnt);
    /* node_job[] is left as it is (see bs_engine_node_job); with dirty groups the
     * busy bits are rebuilt from the running jobs at the next cycle */
    for (int32_t i = 0; !e->groups_dirty && i < j->nruns; i++) {
        const struct bjob_run *r = &j->runs[i];
        e->groups[r->group].busy[r->word] &= ~r->mask;
        int32_t k = counts ? pool_pos(p, r->group) : -1;
        if (k >= 0)
            cnt[k] += bs_pop64(r->mask);
    }
    for (int32_t k = 0; counts && k < p->ng; k++)
        if (cnt[k] && bs_profile_add(&p->base[k], when, j->end_est, cnt[k]) < 0)
            e->groups_dirty = true; /* rebuild everything at the next cycle */
    if (!counts)
        e->groups_dirty = true;
}

int batch_job_finish(struct batch_engine *e, uint64_t id, int64_t when)
{
    int32_t s = bs_idmap_get(&e->jobmap, id);
    if (s < 0) {
        errno = ENOENT;
        return -1;
    }
    struct bjob *j = &e->jobs[s];
    bs_engine_memo_clear(e);
    if (j->state == BATCH_JOB_PENDING) {
        if (j->reserved != BATCH_NEVER)
            e->plan_valid = false;
        for (int32_t i = 0; i < e->nqueue; i++)
            if (e->queue[i] == s) {
                memmove(e->queue + i, e->queue + i + 1,
                        (size_t)(e->nqueue - i - 1) * sizeof *e->queue);
                e->nqueue--;
                e->nsorted -= i < e->nsorted;
                break;
            }
        job_drop(e, s);
        e->est_valid = false;
        return 0;
    }
    if (when < j->start)
        when = j->start;
    bs_engine_charge(e, j, when);
    job_release(e, j, when);
    if (when < j->end_est)
        e->plan_valid = e->est_valid = false;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        struct cred *c = &e->creds[k].v[j->cred[k]];
        c->run_jobs--;
        c->run_procs -= j->procs;
    }
    if (j->resv >= 0)
        e->resv[j->resv].running--;
    int32_t last = e->running[--e->nrunning];
    e->running[j->run_idx] = last;
    e->jobs[last].run_idx = j->run_idx;
    job_drop(e, s);
    return 0;
}

int batch_job_hold(struct batch_engine *e, uint64_t id, bool hold)
{
    struct bjob *j = bs_engine_job(e, id);
    if (!j) {
        errno = ENOENT;
        return -1;
    }
    if (j->state != BATCH_JOB_PENDING) {
        errno = EINVAL;
        return -1;
    }
    if (j->hold != hold && j->reserved != BATCH_NEVER)
        e->plan_valid = false;
    if (j->hold != hold)
        bs_engine_memo_clear(e);
    j->hold = hold;
    e->est_valid = false;
    return 0;
}

int batch_job_info(const struct batch_engine *e, uint64_t id, struct batch_job_info *out)
{
    const struct bjob *j = bs_engine_job(e, id);
    if (!j) {
        errno = ENOENT;
        return -1;
    }
    if (j->nodes_lazy) /* logically const: writes out what the job already holds */
        bs_engine_fill_nodes((struct batch_engine *)e, (int32_t)(j - e->jobs));
    memset(out, 0, sizeof *out);
    out->id = j->id;
    out->state = j->state;
    out->submit = j->submit;
    out->start = j->state == BATCH_JOB_RUNNING ? j->start : BATCH_NEVER;
    out->end_est = j->state == BATCH_JOB_RUNNING ? j->end_est : BATCH_NEVER;
    out->estimate = j->state == BATCH_JOB_RUNNING ? j->start : j->estimate;
    out->reserved = j->state == BATCH_JOB_PENDING ? j->reserved : BATCH_NEVER;
    out->priority = j->state == BATCH_JOB_PENDING ? bs_prio_at(e, j, e->now) : j->prio;
    out->procs = j->procs;
    out->nnodes = j->state == BATCH_JOB_RUNNING ? j->nnodes : 0;
    out->nodes = out->nnodes ? j->nodes : NULL;
    out->resv = j->resv >= 0 ? e->resv[j->resv].name : NULL;
    out->reason = j->state == BATCH_JOB_PENDING
                      ? bs_cycle_reason(bs_cycle_job_reason(e, j), j->throttle_kind)
                      : "";
    return 0;
}

size_t batch_job_count(const struct batch_engine *e)
{
    return (size_t)e->live_jobs;
}

size_t batch_job_ids(const struct batch_engine *e, bool pending_only, uint64_t *ids, size_t max)
{
    size_t n = 0;
    for (int32_t i = 0; i < e->nqueue; i++) {
        const struct bjob *j = &e->jobs[e->queue[i]];
        if (!j->live || j->state != BATCH_JOB_PENDING)
            continue;
        if (n < max)
            ids[n] = j->id;
        n++;
    }
    for (int32_t i = 0; !pending_only && i < e->nrunning; i++) {
        if (n < max)
            ids[n] = e->jobs[e->running[i]].id;
        n++;
    }
    return n;
}

/*
 * state.c - the engine's state helpers, below the planner and the cycle: the
 * scratch arrays, what a node of a group holds of a job (tasks per node, class),
 * finding a job, the nodes of running jobs (lazy node lists, busy bitmap words), a
 * job's fit data for the current groups and whether a reservation admits it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "roles/batch/engine/internal.h"

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
    int32_t *g = realloc(e->scr_cnt3, (size_t)n * sizeof *g);
    if (g)
        e->scr_cnt3 = g;
    if (!a || !b || !c || !d || !f || !g) {
        errno = ENOMEM;
        return -1;
    }
    e->capscr = n;
    return 0;
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

/* How many tasks of job j one node of capacity cap holds: its shape, and no more
 * than the job's processes-per-machine limit. */
int32_t bs_engine_job_kpn(const struct batch_res *cap, const struct bjob *j)
{
    int32_t k = bs_engine_kpn(cap, &j->per_task);
    return j->ppn > 0 && k > j->ppn ? j->ppn : k;
}

int bs_engine_hostcnt_zero(struct batch_engine *e)
{
    if (VEC_RESERVE(e->hostcnt, e->caphostcnt, e->nhosts) < 0)
        return -1;
    if (e->nhosts > 0) /* none: no array yet (constraint counts ask with nodes alone) */
        memset(e->hostcnt, 0, (size_t)e->nhosts * sizeof *e->hostcnt);
    return 0;
}

/* Whether job j may use nodes of group g (class, shape and, issue 27, features). */
bool bs_engine_group_ok(const struct batch_engine *e, const struct bgroup *g, const struct bjob *j)
{
    return (g->cls < 0 || g->cls == j->cred[BATCH_CRED_CLASS]) &&
           bs_engine_kpn(&g->cap, &j->per_task) > 0 &&
           (!j->constraint ||
            constraint_match(j->constraint, g->fset >= 0 ? e->fsets[g->fset] : ""));
}

int bs_engine_counts(const struct bjob *j, struct constraint_count *v, uint32_t *left)
{
    int n = j->counted ? constraint_counts(j->constraint, v, CONSTRAINT_NAMES_MAX) : 0;
    n = n < 0 ? 0 : n > (int)CONSTRAINT_NAMES_MAX ? (int)CONSTRAINT_NAMES_MAX : n;
    for (int t = 0; t < n; t++)
        left[t] = v[t].n;
    return n;
}

uint64_t bs_engine_group_names(const struct batch_engine *e, const struct bgroup *g,
                               const struct constraint_count *v, int nv)
{
    uint64_t m = 0;
    for (int t = 0; t < nv && t < 64; t++)
        if (g->fset >= 0 && features_has(e->fsets[g->fset], v[t].name))
            m |= 1ULL << t;
    return m;
}

/* The tasks of j the up nodes of compatible groups hold at most, counting at most
 * j->ppn per machine (nodes sharing machines; no limit without ppn), and (issue 27)
 * whether its constraint counts can be met: for each NAME*N, N machines of compatible
 * groups having NAME (*counts_ok). -1 when out of memory. */
static int64_t host_capacity(struct batch_engine *e, const struct bjob *j, bool *counts_ok)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    uint32_t left[CONSTRAINT_NAMES_MAX];
    int nv = bs_engine_counts(j, v, left);
    if (bs_engine_hostcnt_zero(e) < 0)
        return -1;
    int64_t tasks = 0, cap = j->ppn > 0 ? j->ppn : INT32_MAX;
    for (int32_t g = 0; g < e->ngroups; g++) {
        const struct bgroup *gr = &e->groups[g];
        if (!bs_engine_group_ok(e, gr, j))
            continue;
        int32_t k = bs_engine_job_kpn(&gr->cap, j);
        uint64_t gm = bs_engine_group_names(e, gr, v, nv);
        for (int32_t w = gr->wlo; w < gr->whi; w++)
            for (uint64_t m = bs_group_word(gr, w); m; m &= m - 1) {
                int32_t h = e->nodes[w * 64 + __builtin_ctzll(m)].host;
                bool fresh = h < 0 || e->hostcnt[h] == 0; /* a machine not counted yet */
                for (int t = 0; fresh && t < nv && t < 64; t++)
                    if ((gm >> t & 1) && left[t])
                        left[t]--;
                if (h < 0)
                    tasks += k;
                else if (e->hostcnt[h] < cap) {
                    int32_t add = cap - e->hostcnt[h] < k ? (int32_t)(cap - e->hostcnt[h]) : k;
                    e->hostcnt[h] += add;
                    tasks += add;
                }
            }
    }
    *counts_ok = true;
    for (int t = 0; t < nv; t++)
        *counts_ok = *counts_ok && !left[t];
    return tasks;
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
 * (groups in pool order, nodes ascending). */
void bs_engine_fill_nodes(struct batch_engine *e, int32_t slot)
{
    struct bjob *j = &e->jobs[slot];
    if (!j->nodes_lazy)
        return;
    int32_t k = 0;
    for (int32_t i = 0; i < j->nruns; i++) {
        const struct bjob_run *r = &j->runs[i];
        for (uint64_t m = r->mask, run; m && k < j->nnodes; m &= ~run) { /* run by run */
            int32_t lo, id;
            run = bs_run64(m, &lo);
            id = r->word * 64 + lo;
            int32_t cnt = bs_pop64(run);
            if (cnt > j->nnodes - k)
                cnt = j->nnodes - k;
            bs_fill32(e->node_job + id, cnt, slot);
            bs_iota32(j->nodes + k, cnt, id);
            k += cnt;
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

/* Sets the busy bits of running job j's grouped nodes and records them in j->runs
 * (one entry per bitmap word and class it holds, consecutive nodes of a word and
 * class merged), from its node list and the partition's classes. 0 or -1 (ENOMEM). */
int bs_engine_job_runs(struct batch_engine *e, struct bjob *j)
{
    struct bjob_run *r = realloc(j->runs, ((size_t)j->nnodes + 1) * sizeof *r);
    if (!r)
        return -1;
    j->runs = r;
    j->nruns = 0;
    for (int32_t i = 0; i < j->nnodes; i++) {
        int32_t n = j->nodes[i], k = e->part.ncls[n];
        if (k < 0)
            continue;
        int32_t w = n / 64;
        uint64_t bit = 1ULL << (n % 64);
        e->busy[w] |= bit;
        if (j->nruns > 0 && r[j->nruns - 1].part == k && r[j->nruns - 1].word == w)
            r[j->nruns - 1].mask |= bit;
        else
            r[j->nruns++] = (struct bjob_run){k, w, bit};
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
        int32_t k = bs_engine_job_kpn(&gr->cap, j);
        tasks += (int64_t)k * gr->nnodes;
        if (k > best)
            best = k;
        j->gen_gi = g;
        j->gen_need = (int32_t)((j->tasks + (int64_t)k - 1) / k);
        ncompat++;
    }
    if (ncompat != 1)
        j->gen_gi = -1;
    bool counts_ok = true;
    if (bs_engine_host_limited(e, j) || j->counted) { /* machines hold ppn each, whatever
                                                         their nodes; counts need machines */
        int64_t h = host_capacity(e, j, &counts_ok);
        if (h >= 0 && bs_engine_host_limited(e, j))
            tasks = h;
    }
    if (j->counted && j->gen_gi >= 0) { /* one group: at least a node per counted machine */
        uint32_t m = constraint_hosts_min(j->constraint);
        j->gen_need = j->gen_need < (int32_t)m ? (int32_t)m : j->gen_need;
    }
    j->never = tasks < j->tasks || !counts_ok;
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

int bs_resv_live_add(struct batch_engine *e, int32_t r)
{
    if (VEC_RESERVE(e->rlive, e->caprlive, e->nrlive + 1) < 0 ||
        bs_strmap_put(&e->resvmap, e->resv[r].name, r) < 0)
        return -1;
    e->rlive[e->nrlive++] = r;
    e->resv[r].live = true;
    return 0;
}

void bs_resv_live_drop(struct batch_engine *e, int32_t r)
{
    int32_t lo = 0, hi = e->nrlive; /* the first listed slot >= r */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (e->rlive[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->nrlive && e->rlive[lo] == r) {
        memmove(e->rlive + lo, e->rlive + lo + 1, (size_t)(e->nrlive - lo - 1) * sizeof *e->rlive);
        e->nrlive--;
    }
    if (bs_strmap_get(&e->resvmap, e->resv[r].name) == r)
        bs_strmap_set(&e->resvmap, e->resv[r].name, -1);
    e->resv[r].live = false;
}

int bs_resv_words(struct batch_engine *e, int32_t r)
{
    struct bresv *v = &e->resv[r];
    struct bword *w = malloc(((size_t)v->nnodes + 1) * sizeof *w);
    int32_t n = 0, cw = -1;
    uint64_t m = 0;
    if (!w)
        return -1;
    for (int32_t x = 0; x < v->nnodes; x++) {
        uint32_t i = (uint32_t)v->nodes[x]; /* a node index: >= 0 */
        if ((int32_t)(i >> 6) != cw) {
            if (m)
                w[n++] = (struct bword){cw, m};
            cw = (int32_t)(i >> 6);
            m = 0;
        }
        m |= 1ULL << (i & 63);
    }
    if (m)
        w[n++] = (struct bword){cw, m};
    struct bword *fit = realloc(w, ((size_t)n + 1) * sizeof *w);
    free(v->words);
    v->words = fit ? fit : w;
    v->nwords = n;
    return 0;
}

/*
 * engine.c - the engine's public top: creation and destruction, nodes added and
 * set up or down, jobs submitted, adopted, finished, held and described. Below it:
 * the cycle (cycle.c), the grouping into pools (group.c), the planner (plan.c) and
 * the state helpers (state.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
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
    e->part.recycle_slack = 64;
    e->fs_stamp = -1;
    e->groups_dirty = true;
    bs_prio_weights(e);
    for (size_t i = 0; i < cfg->ncreds; i++)
        e->any_throttle |= cfg->creds[i].maxjob >= 0 || cfg->creds[i].maxproc >= 0;
    return e;
}

void batch_engine_destroy(struct batch_engine **ep)
{
    struct batch_engine *e = ep ? *ep : NULL;
    if (!e)
        return;
    int saved = errno;
    bs_engine_groups_free(e);
    bs_engine_pspare_free(e);
    for (int32_t i = 0; i < e->nnodes; i++)
        free(e->nodes[i].name);
    free(e->nodes);
    free(e->node_job);
    free(e->nbase);
    free(e->busy);
    free(e->scr_held);
    free(e->scr_pick);
    free(e->scr_basek);
    free(e->scr_words);
    bs_part_free(&e->part);
    free(e->base_rep);
    bs_strmap_free(&e->nodemap);
    for (int32_t i = 0; i < e->nfsets; i++)
        free(e->fsets[i]);
    free(e->fsets);
    bs_strmap_free(&e->fsetmap);
    for (int32_t i = 0; i < e->nresv; i++) {
        for (int k = 0; k < BATCH_CRED_KINDS; k++)
            free(e->resv[i].acl[k]);
        free(e->resv[i].jobs);
        free(e->resv[i].nodes);
        free(e->resv[i].words);
    }
    free(e->resv);
    free(e->rlive);
    bs_strmap_free(&e->resvmap);
    for (int32_t i = 0; i < e->njobs; i++) {
        free(e->jobs[i].nodes);
        free(e->jobs[i].runs);
        if (e->jobs[i].live)
            free(e->jobs[i].constraint);
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
    free(e->released);
    free(e->moved);
    free(e->scr_cnt);
    free(e->scr_k);
    free(e->scr_kpn);
    free(e->scr_cnt2);
    free(e->scr_free);
    free(e->scr_cnt3);
    free(e->hostcnt);
    bs_strmap_free(&e->hostmap);
    free(e->drops);
    bs_bound_free(e);
    bs_cred_free_all(e);
    bs_fs_ring_free(&e->fs_total);
    batch_config_clear(&e->cfg);
    free(e);
    *ep = NULL;
    errno = saved;
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

/* The id of machine `host`, made when new; -1 (ENOMEM). */
static int32_t node_host(struct batch_engine *e, const char *host)
{
    int32_t h = bs_strmap_get(&e->hostmap, host);
    if (h >= 0)
        return h;
    if (bs_strmap_put(&e->hostmap, host, e->nhosts) < 0) {
        errno = ENOMEM;
        return -1;
    }
    return e->nhosts++;
}

/* The index of feature list f (interned), -1 for none, -2 out of memory. */
static int32_t fset_intern(struct batch_engine *e, const char *f)
{
    if (!f || !*f)
        return -1;
    int32_t k = bs_strmap_get(&e->fsetmap, f);
    if (k >= 0)
        return k;
    char *copy = strdup(f);
    if (!copy || VEC_RESERVE(e->fsets, e->capfsets, e->nfsets + 1) < 0 ||
        bs_strmap_put(&e->fsetmap, f, e->nfsets) < 0) {
        free(copy);
        return -2;
    }
    e->fsets[e->nfsets] = copy;
    return e->nfsets++;
}

int batch_node_set_features(struct batch_engine *e, int32_t node, const char *features)
{
    if (node < 0 || node >= e->nnodes) {
        errno = ENOENT;
        return -1;
    }
    int32_t k = fset_intern(e, features);
    if (k == -2) {
        errno = ENOMEM;
        return -1;
    }
    if (e->nodes[node].fset != k) {
        e->nodes[node].fset = k;
        e->groups_dirty = true;
        e->nbase_ok = false;
        bs_engine_memo_clear(e);
    }
    return 0;
}

const char *batch_node_features(const struct batch_engine *e, int32_t node)
{
    if (node < 0 || node >= e->nnodes)
        return NULL;
    return e->nodes[node].fset >= 0 ? e->fsets[e->nodes[node].fset] : "";
}

/* Makes the busy bitmap hold n nodes (new words zeroed); 0 or -1 (ENOMEM). */
static int busy_room(struct batch_engine *e, int32_t n)
{
    int32_t old = e->capbusy;
    if (VEC_RESERVE(e->busy, e->capbusy, (n + 63) / 64) < 0)
        return -1;
    memset(e->busy + old, 0, (size_t)(e->capbusy - old) * sizeof *e->busy);
    return 0;
}

int32_t batch_node_add(struct batch_engine *e, const struct batch_node_spec *n)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    if (!name_ok(n->name) || !name_ok(n->class_) || !name_ok(n->host) || !n->name[0] ||
        n->cap.procs < 1 || n->cap.mem < 0 || n->cap.disk < 0 || n->cap.swap < 0) {
        errno = EINVAL;
        return -1;
    }
    if (bs_strmap_get(&e->nodemap, n->name) >= 0) {
        errno = EEXIST;
        return -1;
    }
    int32_t cls = n->class_[0] ? bs_cred_intern(e, BATCH_CRED_CLASS, n->class_) : -1;
    int32_t host = n->host[0] ? node_host(e, n->host) : -1;
    int32_t fset = fset_intern(e, n->features);
    if ((n->class_[0] && cls < 0) || (n->host[0] && host < 0) || fset == -2 ||
        VEC_RESERVE(e->nodes, e->capnodes, e->nnodes + 1) < 0 ||
        VEC_RESERVE(e->node_job, e->capnodejob, e->nnodes + 1) < 0 ||
        busy_room(e, e->nnodes + 1) < 0)
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
    nd->host = host;
    nd->fset = fset;
    nd->up = true;
    e->node_job[e->nnodes] = -1;
    e->groups_dirty = true;
    e->nbase_ok = false;
    bs_engine_memo_clear(e);
    return e->nnodes++;
}

int batch_node_set_up(struct batch_engine *e, int32_t node, bool up)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    if (node < 0 || node >= e->nnodes) {
        errno = ENOENT;
        return -1;
    }
    if (e->nodes[node].up != up) {
        e->nodes[node].up = up;
        e->groups_dirty = true;
        e->moveup_due |= up;
        e->nbase_ok = false;
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

bool batch_node_busy(struct batch_engine *e, int32_t node)
{
    return node >= 0 && node < e->nnodes && bs_engine_node_job(e, node) >= 0;
}

/* Validates s and fills j (credentials interned); 0 or -1 with errno. */
static int job_fill(struct batch_engine *e, struct bjob *j, const struct batch_job_spec *s)
{
    const char *names[BATCH_CRED_KINDS] = {s->user, s->group, s->account, s->class_, s->qos};
    int64_t procs = (int64_t)s->tasks * s->per_task.procs;
    if (s->tasks < 1 || s->per_task.procs < 1 || procs > INT32_MAX || s->per_task.mem < 0 ||
        s->per_task.disk < 0 || s->per_task.swap < 0 || s->walltime < 1 || s->ppn < 0) {
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
    j->grid = s->grid;
    j->plan_cycle = INT64_MIN / 2; /* never reserved yet (cycle.c, the grid guard) */
    j->tasks = s->tasks;
    j->per_task = s->per_task;
    j->ppn = s->ppn;
    if (s->constraint && *s->constraint && !(j->constraint = strdup(s->constraint)))
        return -1;                                        /* ENOMEM */
    j->counted = constraint_hosts_min(j->constraint) > 0; /* issue 27 */
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
    e->jest_valid = false; /* the showstart cache (estimate.c) */
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
    if (job_fill(e, &tmp, s) < 0)
        return -1;
    if (bs_idmap_put(&e->jobmap, s->id, slot) < 0) {
        free(tmp.constraint);
        return -1;
    }
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
    e->est_valid = e->jest_valid = false;
    return 0;
}

int batch_job_adopt(struct batch_engine *e, const struct batch_job_spec *s, const int32_t *nodes,
                    int32_t n, int64_t start)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
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
    bs_part_note_job(e, slot);        /* its busy bits and bitmap words: at the next regrouping */
    e->groups_dirty = true;           /* base profiles are rebuilt at the next cycle */
    bs_engine_memo_clear(e);
    e->plan_valid = e->est_valid = e->jest_valid = false;
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
    free(j->constraint);
    j->constraint = NULL;
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
    /* node_job[] is left as it is (see bs_engine_node_job); the busy bits are cleared
     * even with dirty groups (they outlive regroupings) */
    for (int32_t i = 0; i < j->nruns; i++) {
        const struct bjob_run *r = &j->runs[i];
        e->busy[r->word] &= ~r->mask;
        int32_t g = counts ? e->part.c[r->part].group : -1;
        int32_t k = g >= 0 ? bs_pool_pos(p, g) : -1;
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
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    int32_t s = bs_idmap_get(&e->jobmap, id);
    if (s < 0) {
        errno = ENOENT;
        return -1;
    }
    struct bjob *j = &e->jobs[s];
    bs_engine_memo_clear(e);
    if (j->state == BATCH_JOB_PENDING) {
        if (j->reserved != BATCH_NEVER)
            e->plan_valid = false, e->moveup_due = true;
        for (int32_t i = 0; i < e->nqueue; i++)
            if (e->queue[i] == s) {
                memmove(e->queue + i, e->queue + i + 1,
                        (size_t)(e->nqueue - i - 1) * sizeof *e->queue);
                e->nqueue--;
                e->nsorted -= i < e->nsorted;
                break;
            }
        job_drop(e, s);
        e->est_valid = e->jest_valid = false;
        return 0;
    }
    if (when < j->start)
        when = j->start;
    bs_fs_charge_upto(e, j, when);
    job_release(e, j, when);
    if (when < j->end_est) {
        e->plan_valid = e->est_valid = e->jest_valid = false;
        e->moveup_due = true; /* moveup.c */
    }
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
    e->jest_valid = false; /* the showstart cache (estimate.c) */
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
    e->est_valid = e->jest_valid = false;
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

/*
 * engine_live.c - engine calls the live driver needs to keep the engine's picture of
 * running jobs and nodes equal to what the resource managers report: a job's actual
 * start time (the cluster starts it a little after the cycle decided it) and a node's
 * capacity changing while the role runs. Pure: no I/O.
 */
#include <errno.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/*
 * Moves the end of running job j in its pool's base profiles from old_end to its
 * current end_est. On a failure the groups are rebuilt at the next cycle (from
 * end_est), so the result is the same, only slower.
 */
static void base_move_end(struct batch_engine *e, struct bjob *j, int64_t old_end)
{
    if (e->groups_dirty || old_end == j->end_est)
        return;
    int32_t pi = j->resv >= 0 && e->resv[j->resv].pool >= 0 ? e->resv[j->resv].pool : 0;
    if (pi >= e->npools) {
        e->groups_dirty = true;
        return;
    }
    struct bpool *p = &e->pools[pi];
    if (bs_engine_scratch(e, p->ng + 1) < 0) {
        e->groups_dirty = true;
        return;
    }
    int32_t *cnt = e->scr_cnt;
    memset(cnt, 0, (size_t)p->ng * sizeof *cnt);
    /* a node list is written on first use (the live role's batch_job_info did so
     * before every call here; a replay through the simulator does not) */
    bs_engine_fill_nodes(e, (int32_t)(j - e->jobs));
    for (int32_t i = 0; i < j->nnodes; i++) {
        int32_t g = bs_part_node_group(e, j->nodes[i]), k = g >= 0 ? bs_pool_pos(p, g) : -1;
        if (k >= 0)
            cnt[k]++;
    }
    for (int32_t k = 0; k < p->ng; k++) {
        if (!cnt[k])
            continue;
        int rc = j->end_est > old_end ? bs_profile_add(&p->base[k], old_end, j->end_est, -cnt[k])
                                      : bs_profile_add(&p->base[k], j->end_est, old_end, cnt[k]);
        if (rc < 0) {
            e->groups_dirty = true;
            return;
        }
    }
}

int batch_job_started_at(struct batch_engine *e, uint64_t id, int64_t when)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    struct bjob *j = bs_engine_job(e, id);
    if (!j) {
        errno = ENOENT;
        return -1;
    }
    if (j->state != BATCH_JOB_RUNNING || when < 0) {
        errno = EINVAL;
        return -1;
    }
    if (when == j->start)
        return 0;
    int64_t old_end = j->end_est;
    if (j->charged == j->start || j->charged < when)
        j->charged = when; /* fairshare counts from the actual start */
    j->start = when;
    j->estimate = when;
    int64_t end = when > BATCH_NEVER - j->walltime ? BATCH_NEVER : when + j->walltime;
    /* an end already past: overrun, as refresh() in cycle.c treats it */
    j->end_est = end > e->now ? end : e->now + e->cfg.overrun_grace;
    if (j->end_est < e->min_end)
        e->min_end = j->end_est;
    base_move_end(e, j, old_end);
    e->plan_valid = e->est_valid = e->jest_valid = false;
    return 0;
}

int batch_node_set_cap(struct batch_engine *e, int32_t node, const struct batch_res *cap)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    if (node < 0 || node >= e->nnodes) {
        errno = ENOENT;
        return -1;
    }
    if (cap->procs < 1 || cap->mem < 0 || cap->disk < 0 || cap->swap < 0) {
        errno = EINVAL;
        return -1;
    }
    struct bnode *nd = &e->nodes[node];
    if (nd->cap.procs != cap->procs || nd->cap.mem != cap->mem || nd->cap.disk != cap->disk ||
        nd->cap.swap != cap->swap) {
        nd->cap = *cap;
        e->nbase_ok = false;    /* its base class (part.c) */
        e->groups_dirty = true; /* groups, base profiles and the plan are rebuilt */
        e->plan_valid = e->est_valid = e->jest_valid = false;
    }
    return 0;
}

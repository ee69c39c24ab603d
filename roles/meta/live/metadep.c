/*
 * metadep.c - job dependencies at the grid spool (submit --dependency, issue 27): what a
 * term sees of a spool job (the spool's own ids, wherever the job was placed), the check
 * at SUBMIT/PSUBMIT, and the re-check of the waiting jobs at each commit of a turn that
 * changed a job. A waiting job is not placed (meta_place_some); one whose dependency
 * can never hold is cancelled with the reason. Parser and evaluation: wire/depend.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/depreq.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"
#include "wire/depend.h"

static enum dep_job status(const struct mjob *j, const char **shown)
{
    *shown = meta_state_name(j->state);
    switch (j->state) {
    case MJ_RUNNING:
        return DJ_STARTED;
    case MJ_DONE:
        return DJ_OK;
    case MJ_FAILED:
    case MJ_KILLED:
    case MJ_CANCELLED:
        return DJ_NOTOK;
    default: /* queued, placing, placed: not started anywhere */
        return j->started ? DJ_STARTED : DJ_PENDING;
    }
}

static enum dep_job lookup(void *arg, uint64_t id, const char **shown)
{
    struct mjob *j = meta_job_find(arg, id);
    return j ? status(j, shown) : DJ_UNKNOWN;
}

static const char *owner(void *arg, uint64_t id)
{
    struct mjob *j = meta_job_find(arg, id);
    return j ? j->user : NULL;
}

int meta_dep_submit(struct meta *M, const msgpack_object *o, struct depend **out, char *why,
                    size_t wl)
{
    return depreq_read(o, lookup, owner, M, "at this spool", out, why, wl);
}

void meta_dep_reason(const struct mjob *j, char *buf, size_t len)
{
    char t[DEPEND_LEN_MAX + 1];
    depend_format(j->dep, t, sizeof t);
    char *cut = strpbrk(t, ",?"); /* the first term still waited for */
    if (cut)
        *cut = 0;
    snprintf(buf, len, "Dependency: %.200s", t);
}

/* Same user and name, not ended, and started or submitted before me. */
static bool singleton_blocked(struct meta *M, const struct mjob *me)
{
    for (uint32_t i = 0; i < M->njobs; i++) {
        const struct mjob *j = M->jobs[i];
        const char *shown;
        enum dep_job st = status(j, &shown);
        if (j != me && !strcmp(j->user, me->user) && !strcmp(j->name, me->name) &&
            (st == DJ_STARTED || (st == DJ_PENDING && j->id < me->id)))
            return true;
    }
    return false;
}

static void step_one(struct meta *M, struct mjob *j)
{
    char why[200], r[256];
    bool changed = false;
    bool blocked = depend_has_singleton(j->dep) && singleton_blocked(M, j);
    enum dep_verdict v = depend_eval(j->dep, lookup, M, blocked, &changed, why, sizeof why);
    if (v == DEP_WAIT) {
        if (changed) {
            char rs[META_REASON_MAX];
            meta_dep_reason(j, rs, sizeof rs);
            meta_job_reason_set(j, rs);
            meta_job_dirty(M, j);
        }
        return;
    }
    depend_free(j->dep);
    free(j->dep);
    j->dep = NULL;
    meta_job_dirty(M, j);
    if (v == DEP_MET) {
        if (j->held) /* still held by its owner (metareq.c hold_release) */
            meta_job_reason_set(j, META_HELD_REASON);
        else
            meta_job_reason_set(j, "");
        log_info("job %llu: dependency satisfied, it is placed now", (unsigned long long)j->id);
    } else {
        snprintf(r, sizeof r, "DependencyNeverSatisfied: %s", why);
        meta_job_set(M, j, MJ_CANCELLED, r);
    }
}

void meta_dep_step(struct meta *M)
{
    bool any = false, waits = false;
    if (!M->dep_any)
        return; /* no job waits for a dependency: nothing to walk */
    any = M->ndirty > 0 || M->dirty_all;
    if (!any)
        return; /* no job changed this turn */
    for (uint32_t i = 0; i < M->njobs && !waits; i++)
        waits |= M->jobs[i]->dep != NULL;
    M->dep_any = waits;
    if (!waits)
        return; /* none waits */
    for (uint32_t i = 0; i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        if (j->dep && j->state == MJ_QUEUED) {
            step_one(M, j);
        } else if (j->dep) { /* cancelled while it waited */
            depend_free(j->dep);
            free(j->dep);
            j->dep = NULL;
            meta_job_dirty(M, j);
        }
    }
}

/*
 * livedep.c - job dependencies at the batch role (submit --dependency, issue 27): what a
 * term sees of a job here (the role's own ids), the check at SUBMIT/PSUBMIT, and the
 * re-check of the waiting jobs at each commit of a turn that changed a job. A waiting
 * job's elements are not given to the engine (live_job_feed); one whose dependency can
 * never hold is cancelled with the reason. Parser and evaluation: wire/depend.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/depreq.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "wire/depend.h"

static enum dep_job status(const struct ljob *j, const char **shown)
{
    if (j->cancelled) {
        *shown = "cancelled";
        return DJ_NOTOK;
    }
    if (j->nended == j->ntasks) {
        *shown = j->nfailed ? "failed" : "done";
        return j->nfailed ? DJ_NOTOK : DJ_OK;
    }
    return j->nstarted || j->nrun ? DJ_STARTED : DJ_PENDING;
}

static enum dep_job lookup(void *arg, uint64_t id, const char **shown)
{
    struct ljob *j = live_job_find(arg, id);
    return j ? status(j, shown) : DJ_UNKNOWN;
}

static const char *owner(void *arg, uint64_t id)
{
    struct ljob *j = live_job_find(arg, id);
    return j ? j->user : NULL;
}

int live_dep_submit(struct live *L, const msgpack_object *m, struct depend **out, char *why,
                    size_t wl)
{
    return depreq_read(m, lookup, owner, L, "here", out, why, wl);
}

bool live_dep_reason(const struct ljob *j, char *buf, size_t len)
{
    if (j->dep) {
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        char *cut = strpbrk(t, ",?"); /* the first term still waited for */
        if (cut)
            *cut = 0;
        snprintf(buf, len, "Dependency: %s", t);
        return true;
    }
    if (j->dep_end) {
        snprintf(buf, len, "%s", j->dep_end);
        return true;
    }
    return false;
}

/* Same user and name, not ended, and started or submitted before id. */
static bool singleton_blocked(struct live *L, const struct ljob *me)
{
    for (uint32_t i = 0; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        const char *shown = NULL;
        enum dep_job st = status(j, &shown);
        if (j != me && !strcmp(j->user ? j->user : "", me->user ? me->user : "") &&
            !strcmp(j->name ? j->name : "", me->name ? me->name : "") &&
            (st == DJ_STARTED || (st == DJ_PENDING && j->id < me->id)))
            return true;
    }
    return false;
}

/* One waiting job checked: released, still waiting, or cancelled; true when changed. */
static bool step_one(struct live *L, struct ljob *j)
{
    char why[256];
    bool changed = false;
    bool blocked = depend_has_singleton(j->dep) && singleton_blocked(L, j);
    enum dep_verdict v = depend_eval(j->dep, lookup, L, blocked, &changed, why, sizeof why);
    if (v != DEP_WAIT) {
        depend_free(j->dep);
        free(j->dep);
        j->dep = NULL;
        live_want_cycle(L); /* the feed gives its elements to the engine now */
    }
    if (v == DEP_MET) {
        log_info("job %llu: dependency satisfied, its elements go to the scheduler",
                 (unsigned long long)j->id);
    } else if (v == DEP_NEVER) {
        size_t n = strlen(why) + 32;
        free(j->dep_end);
        if ((j->dep_end = malloc(n)))
            snprintf(j->dep_end, n, "DependencyNeverSatisfied: %s", why);
        live_job_cancel_implicit(L, j); /* none was fed: every element is implicit */
        log_info("job %llu cancelled: DependencyNeverSatisfied: %s", (unsigned long long)j->id,
                 why);
    }
    return v != DEP_WAIT || changed;
}

void live_dep_first(struct live *L, struct ljob *j)
{
    L->dep_seen |= j->dep != NULL;
    if (j->dep)
        step_one(L, j);
}

void live_dep_step(struct live *L)
{
    uint32_t n;
    bool waits = false;
    live_dirty_jobs(L, &n);
    if (!n || !L->dep_seen)
        return; /* no job changed this turn, or none ever waited (no walk: issue 28) */
    for (uint32_t i = 0; i < L->njobs && !waits; i++)
        waits = L->jobs[i]->dep != NULL;
    if (!waits) {
        L->dep_seen = false; /* until the next job that waits */
        return;
    }
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        if (j->dep && !j->cancelled && step_one(L, j)) {
            live_job_dirty(L, j);
        } else if (j->dep && j->cancelled) { /* cancelled while it waited */
            depend_free(j->dep);
            free(j->dep);
            j->dep = NULL;
            live_job_dirty(L, j);
        }
    }
}

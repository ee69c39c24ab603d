/*
 * jobdep.c - job dependencies at the cluster (submit --dependency, issue 27): what a
 * dependency term sees of a bag or parallel job, the check at SUBMIT, the re-check of
 * the waiting jobs after a turn that changed a job, and the end of a job whose
 * dependency can never be satisfied. The parser and evaluation are wire/depend.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/depreq.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/cluster/scored_int.h"
#include "wire/depend.h"

static enum dep_job bag_status(const struct job *j)
{
    switch (j->state) {
    case JS_QUEUED:
        return DJ_PENDING;
    case JS_RUNNING:
        return DJ_STARTED;
    case JS_DONE:
        return j->nfailed ? DJ_NOTOK : DJ_OK;
    default:
        return DJ_NOTOK; /* cancelled */
    }
}

static enum dep_job par_status(const struct pjob *p)
{
    if (p->state == PJ_WAITING || p->state == PJ_QUEUED)
        return p->started_ms ? DJ_STARTED : DJ_PENDING;
    if (!PJ_TERMINAL(p->state))
        return DJ_STARTED;
    return p->state == PJ_DONE ? DJ_OK : DJ_NOTOK;
}

/* dep_lookup_fn over the cluster's bag and parallel jobs. */
static enum dep_job lookup(void *arg, uint64_t id, const char **shown)
{
    struct cluster *c = arg;
    struct job *j = cluster_job_find(c, id);
    if (j) {
        *shown = job_state_shown(j);
        return bag_status(j);
    }
    struct pjob *p = c->sd ? scored_job_find(c, id) : NULL;
    if (!p)
        return DJ_UNKNOWN;
    *shown = pj_state_name(p->state);
    return par_status(p);
}

/* The owner of job id (bag or parallel), or NULL. */
static const char *owner_of(void *arg, uint64_t id)
{
    struct cluster *c = arg;
    struct job *j = cluster_job_find(c, id);
    struct pjob *p = j || !c->sd ? NULL : scored_job_find(c, id);
    return j ? j->user : p ? p->user : NULL;
}

int jobdep_submit(struct cluster *c, const msgpack_object *m, struct depend **out, char *why,
                  size_t wl)
{
    int rc = depreq_read(m, lookup, owner_of, c, "here", out, why, wl);
    if (*out)
        c->dep_maybe = true; /* jobdep_step passes over the jobs again */
    return rc;
}

void jobdep_free(struct depend *d)
{
    depreq_free(d);
}

/* Same user and name, not ended, and started or submitted before id. */
static bool same_before(const char *user, const char *name, uint64_t id, const char *u2,
                        const char *n2, uint64_t id2, enum dep_job st)
{
    return id2 != id && !strcmp(user, u2) && !strcmp(name, n2) &&
           (st == DJ_STARTED || (st == DJ_PENDING && id2 < id));
}

bool jobdep_singleton_blocked(struct cluster *c, const char *user, const char *name, uint64_t id)
{
    for (uint32_t i = 0; i < c->njobs; i++) { /* a running job may be before open_from */
        const struct job *j = c->jobs[i];
        if (same_before(user, name, id, j->user, j->name, j->id, bag_status(j)))
            return true;
    }
    for (uint32_t i = c->sd ? c->sd->live_from : 0; c->sd && i < c->sd->njobs; i++) {
        const struct pjob *p = c->sd->jobs[i];
        if (same_before(user, name, id, p->user, p->name, p->id, par_status(p)))
            return true;
    }
    return false;
}

enum dep_verdict jobdep_check(struct cluster *c, struct depend *d, const char *user,
                              const char *name, uint64_t id, bool *changed, char *why, size_t wl)
{
    bool blocked = depend_has_singleton(d) && jobdep_singleton_blocked(c, user, name, id);
    return depend_eval(d, lookup, c, blocked, changed, why, wl);
}

/* One waiting bag job: released, still waiting, or ended as never satisfiable. */
static void bag_step(struct cluster *c, struct job *j)
{
    char why[256];
    bool changed = false;
    enum dep_verdict v =
        jobdep_check(c, j->dep, j->user, j->name, j->id, &changed, why, sizeof why);
    if (v == DEP_MET) {
        jobdep_free(j->dep);
        j->dep = NULL;
        log_info("job %llu: dependency satisfied, its tasks may be handed out",
                 (unsigned long long)j->id);
    } else if (v == DEP_NEVER) {
        jobdep_free(j->dep);
        j->dep = NULL;
        free(j->reason);
        size_t len = strlen(why) + 40;
        if ((j->reason = malloc(len)))
            snprintf(j->reason, len, "DependencyNeverSatisfied: %s", why);
        j->state = JS_CANCELLED;
        j->finished_ms = wall_now_ms();
        log_info("job %llu cancelled: DependencyNeverSatisfied: %s", (unsigned long long)j->id,
                 why);
    }
    if (v != DEP_WAIT || changed)
        cluster_mark_job(c, j);
}

/* One waiting parallel job: admission may be tried, it still waits, or it is ended. */
static void par_step(struct cluster *c, struct pjob *p)
{
    char why[200];
    bool changed = false;
    enum dep_verdict v =
        jobdep_check(c, p->dep, p->user, p->name, p->id, &changed, why, sizeof why);
    if (v != DEP_WAIT) {
        jobdep_free(p->dep);
        p->dep = NULL;
        c->sd->resched = true; /* scored_schedule admits it, or frees nothing */
    }
    if (v == DEP_MET) {
        p->reason[0] = 0;
        log_info("parallel job %llu: dependency satisfied, admission is tried",
                 (unsigned long long)p->id);
    } else if (v == DEP_NEVER) {
        snprintf(p->reason, sizeof p->reason, "DependencyNeverSatisfied: %s", why);
        p->state = PJ_CANCELLED;
        p->finished_ms = wall_now_ms();
        log_info("parallel job %llu cancelled: %s", (unsigned long long)p->id, p->reason);
    } else if (changed) {
        cluster_dep_reason(p->dep, p->reason, sizeof p->reason);
    }
    if (v != DEP_WAIT || changed)
        p->dirty = true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Notes id in c->dep_chg when the status st differs from the one seen last (*seen). */
static void note(struct cluster *c, uint8_t *seen, uint8_t st, uint64_t id, bool *oom)
{
    if (*seen == st + 1)
        return;
    *seen = (uint8_t)(st + 1);
    if (c->ndep_chg == c->capdep_chg) {
        uint32_t n = c->capdep_chg ? c->capdep_chg * 2 : 64;
        uint64_t *g = realloc(c->dep_chg, n * sizeof *g);
        if (!g) {
            *oom = true; /* every waiting job is checked instead */
            return;
        }
        c->dep_chg = g;
        c->capdep_chg = n;
    }
    c->dep_chg[c->ndep_chg++] = id;
}

/* Whether waiting job id with dependency d must be checked: it is new (or loaded), a
 * job it names changed, or it has a singleton term (any change may free it). */
static bool relevant(const struct cluster *c, uint64_t id, const struct depend *d, bool all)
{
    if (all || depend_has_singleton(d) || bsearch(&id, c->dep_chg, c->ndep_chg, sizeof id, cmp_u64))
        return true;
    for (uint32_t k = 0; k < d->n; k++)
        if (!d->t[k].done && bsearch(&d->t[k].id, c->dep_chg, c->ndep_chg, sizeof id, cmp_u64))
            return true;
    return false;
}

/*
 * After a turn: the jobs whose status (pending, started, ok, not ok) changed since the
 * last pass are noted (one pass over the jobs, no text), then only the waiting jobs
 * that name one of them (or are new, or have a singleton term) are evaluated.
 */
void jobdep_step(struct cluster *c)
{
    bool oom = false, waits = false;
    c->ndep_chg = 0;
    /* No job waits on a dependency: no pass (10^6 pending jobs made it most of each
     * turn, issue 28). The statuses noted go stale meanwhile; the next pass then notes
     * more changes than happened since, which only checks more waiting jobs. */
    if (!c->dep_maybe)
        return;
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        note(c, &j->dep_seen, (uint8_t)bag_status(j), j->id, &oom);
        waits |= j->dep != NULL;
    }
    for (uint32_t i = c->sd ? c->sd->live_from : 0; c->sd && i < c->sd->njobs; i++) {
        struct pjob *p = c->sd->jobs[i];
        note(c, &p->dep_seen, (uint8_t)par_status(p), p->id, &oom);
        waits |= p->dep != NULL;
    }
    c->dep_maybe = waits;
    if (!waits || (c->ndep_chg == 0 && !oom))
        return; /* nothing waits, or no job changed this turn */
    qsort(c->dep_chg, c->ndep_chg, sizeof *c->dep_chg, cmp_u64);
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (j->dep && j->state == JS_QUEUED) {
            if (relevant(c, j->id, j->dep, oom))
                bag_step(c, j);
        } else if (j->dep) { /* cancelled while it waited: nothing left to wait for */
            jobdep_free(j->dep);
            j->dep = NULL;
            cluster_mark_job(c, j);
        }
    }
    for (uint32_t i = c->sd ? c->sd->live_from : 0; c->sd && i < c->sd->njobs; i++) {
        struct pjob *p = c->sd->jobs[i];
        if (p->dep && p->state == PJ_WAITING) {
            if (relevant(c, p->id, p->dep, oom))
                par_step(c, p);
        } else if (p->dep) {
            jobdep_free(p->dep);
            p->dep = NULL;
            p->dirty = true;
        }
    }
}

/*
 * acct.c - the cluster's accounting records (daemon/acct.h, docs/accounting.md): one
 * record per ended bag job (SUBMIT) and parallel job (PSUBMIT), written with the job's
 * end; the ACCT request; the retention sweep. Sits low in the module (below
 * state_rec.c and scored_store.c, which call it): it calls only state.c.
 */
#include "daemon/acct.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"

int cluster_acct_bag(struct cluster *c, const struct job *j, struct wire_buf *wb)
{
    if (j->state != JS_DONE && j->state != JS_CANCELLED)
        return 0;
    /* bag tasks run anywhere, one at a time each: no host list, and their CPU time is
     * in their results (JOB_GET), not summed here */
    struct acct_rec r = {.job = j->id,
                         .user = j->user,
                         .name = j->name,
                         .kind = j->ntasks > 1 ? "array" : "bag",
                         .state = job_state_shown(j),
                         .exit = j->nfailed ? 1 : 0,
                         .submitted_ms = j->submitted_ms,
                         .finished_ms = j->finished_ms,
                         .cpu_s = -1,
                         .procs = j->ntasks};
    if (j->state == JS_CANCELLED)
        r.reason = "cancelled";
    else if (j->nfailed)
        r.reason = "task(s) failed";
    int rc = acct_save(c->store, c->t_acct, &r, wb);
    wire_buf_reset(wb); /* the caller's scratch buffer, left empty */
    return rc;
}

/* The first process that failed gives the job's exit code and signal (as the feed's
 * events: feed.c); a job that did not end done without one exits -1. */
static void par_exit(const struct pjob *j, struct acct_rec *r)
{
    for (uint32_t i = 0; j->ranks && i < j->rq.nprocs; i++)
        if (j->ranks[i].st == PR_EXITED && (j->ranks[i].exit || j->ranks[i].sig)) {
            r->exit = j->ranks[i].exit;
            r->signal = j->ranks[i].sig;
            return;
        }
    r->exit = j->state == PJ_DONE ? 0 : -1;
}

int cluster_acct_par(struct cluster *c, const struct pjob *j, const char *state,
                     struct wire_buf *wb)
{
    if (!PJ_TERMINAL(j->state))
        return 0;
    const char *hosts[ACCT_HOSTS_MAX];
    uint32_t nh = j->nhosts < ACCT_HOSTS_MAX ? j->nhosts : ACCT_HOSTS_MAX;
    for (uint32_t h = 0; h < nh; h++)
        hosts[h] = j->hosts[h] < c->nnodes ? c->nodes[j->hosts[h]].name : "?";
    struct acct_rec r = {.job = j->id,
                         .user = j->user,
                         .group = j->group && *j->group ? j->group : NULL,
                         .name = j->name,
                         .kind = "parallel",
                         .state = state,
                         .reason = *j->reason ? j->reason : NULL,
                         .submitted_ms = j->submitted_ms,
                         .started_ms = j->started_ms,
                         .finished_ms = j->finished_ms,
                         .run_s = (double)j->run_ms / 1000.0,
                         .cpu_s = j->cpu_s,
                         .procs = j->rq.nprocs,
                         .nhosts = j->nhosts,
                         .hosts = hosts};
    par_exit(j, &r);
    int rc = acct_save(c->store, c->t_acct, &r, wb);
    wire_buf_reset(wb); /* the caller's scratch buffer, left empty */
    return rc;
}

void cluster_acct_request(struct cluster *c, const struct wire_msg *m, struct wire_buf *reply)
{
    acct_reply(c->store, c->t_acct, m, reply);
}

void cluster_acct_tick(struct cluster *c)
{
    if (acct_sweep(c->store, c->t_acct, &c->cfg.acct, wall_now_ms(), &c->acct_sw) < 0)
        c->turn_failed = true; /* the turn is undone: the state is reloaded */
}

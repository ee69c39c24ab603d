/*
 * requeue.c - `gridnode requeue JOB` (issue 15; JOB_CTL op "requeue", docs/wire.md
 * 6.16): a bag-of-tasks job starts again from scratch, like Slurm's scontrol requeue.
 *
 * Decisions (docs/wire.md 6.16):
 * - its running tasks are cancelled on their nodes (the STATUS_ACK / TASKS "cancel" list,
 *   as CANCEL does), and every issued or finished task goes back to new: the job is
 *   "queued" again, its tasks are handed out in index order as if just submitted;
 * - old results are dropped, not kept as history (as Slurm: a requeued job restarts from
 *   scratch; its output files are overwritten). The job keeps its id, inputs, hold and
 *   submission time, and counts its requeues ("requeues", Slurm's Restarts);
 * - a result of an issue handed out before the requeue that arrives afterwards (the node
 *   finished before its cancel arrived) is acknowledged and dropped: every task's issue
 *   numbers go on from the highest number issued before the requeue (rq_issue);
 * - not for cancelled jobs (a cancel is final, as in Slurm), nor for jobs with result
 *   checking (their copies and votes live in validate.c; resubmit instead).
 * Everything happens in the request's loop turn, so the OK goes out only once the new
 * state (and the deleted results) are committed: it survives kill -9.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

struct rq_sweep {
    struct cluster *c;
    int table;
    uint64_t id;
    int rc;
};

/* Deletes one record of job s->id (keys start with the job id); stops past it. */
static int rq_del(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct rq_sweep *s = arg;
    (void)val;
    (void)vlen;
    if (klen < 8 || store_key_get_u64(key) != s->id)
        return 1;
    if (store_del(s->c->store, s->table, key, klen) < 0) {
        s->rc = -1;
        return 1;
    }
    return 0;
}

/* Why j cannot be requeued, or NULL. */
const char *cluster_requeue_refused(const struct job *j)
{
    if (j->state == JS_CANCELLED)
        return "is cancelled: a cancelled job cannot be requeued (submit it again)";
    if (j->v)
        return "checks its results (replication or a validator): such a job cannot be "
               "requeued (cancel it and submit it again)";
    return NULL;
}

int cluster_job_requeue(struct cluster *c, struct job *j)
{
    uint32_t top = j->rq_issue;
    for (uint32_t i = 0; i < j->next_new; i++) {
        struct task *t = &j->tasks[i];
        if (t->state == TS_ISSUED && t->node < c->nnodes) {
            struct node *n = &c->nodes[t->node];
            cluster_cancel_note(c, n, j->id, i, t->issues);
            if (n->inflight > 0)
                n->inflight--;
        }
        if (t->issues > top)
            top = t->issues;
    }
    /* every stored task record, result and duplicate of the job: the job starts again */
    int tables[] = {c->t_tasks, c->t_results, c->t_dups};
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++) {
        uint8_t from[8];
        struct rq_sweep s = {c, tables[k], j->id, 0};
        store_key_u64(from, j->id);
        if (store_iter(c->store, s.table, from, sizeof from, rq_del, &s) < 0 || s.rc < 0)
            return -1;
    }
    if (j->tasks) /* NULL while no task was ever handed out */
        memset(j->tasks, 0, (size_t)j->cap * sizeof *j->tasks);
    for (uint32_t i = 0; i < j->cap; i++)
        j->tasks[i].node = UINT32_MAX;
    j->rq_issue = top;
    j->requeues++;
    j->next_new = 0;
    j->ndone = j->nfailed = j->ndups = j->nlate = 0;
    j->state = JS_QUEUED;
    j->finished_ms = 0;
    /* take_new starts at open_from: make sure it sees this job again */
    for (uint32_t i = 0; i < c->open_from && i < c->njobs; i++)
        if (c->jobs[i] == j) {
            c->open_from = i;
            break;
        }
    cluster_mark_job(c, j);
    log_info("job %llu requeued (%u times): its tasks start again", (unsigned long long)j->id,
             j->requeues);
    return 0;
}

/*
 * Parallel jobs (SCore-D side). The processes of a parallel job are named on the nodes
 * by job and rank only, with no run number; so a requeue never lets the new run start
 * while any process of the old one may still be out there:
 * - a job that has processes out (started, or named by its node's last PSYNC) becomes
 *   "requeueing": every process is told to die (PSYNC_ACK want "kill", as for a cancel),
 *   and only once every node has reported it holds none of them any more (the rule that
 *   settles an ended job), or its node is inactive or forgotten (as for a cancel: the
 *   processes of a dead node count as gone), does it go back to "waiting";
 * - a job with no process out (waiting, queued and never started, or ended and settled)
 *   goes back to "waiting" at once;
 * - back to "waiting" means from scratch, as Slurm: hosts released, the process table,
 *   exit codes and stored outputs dropped (not kept as history), CPU time and run time
 *   back to 0, the original queue again; the job keeps its id, request, submission time
 *   and place in the job order, and counts the requeue ("requeues"). The gang scheduler
 *   then admits and places it again like any waiting job.
 * - "requeueing" is stored: after a restart the nodes' next PSYNCs (or their silence)
 *   complete it; until its node's first PSYNC every process counts as held, exited or
 *   not (scored_store.c), since a node re-reports an exit whose acknowledgement it
 *   never got, and such a report must not reach the new run. A requeue of a
 *   requeueing job is OK and changes nothing; a cancel of it cancels it (its processes
 *   are being killed anyway).
 * - refused: a cancelled job (a cancel is final), and a job placed by a batch role
 *   (PSUBMIT hosts: the batch role owns its placement; requeue it there, -e BATCH).
 */
static bool rank_out(const struct cluster *c, const struct pjob *j, const struct prank *p)
{
    if (p->st != PR_STARTED && !p->held)
        return false;
    if (p->host >= j->nhosts)
        return false;
    uint32_t x = j->hosts[p->host];
    return x < c->nnodes && !c->nodes[x].gone && c->nodes[x].active;
}

const char *scored_requeue(struct cluster *c, struct pjob *j)
{
    if (j->state == PJ_CANCELLED)
        return "is cancelled: a cancelled job cannot be requeued (submit it again)";
    if (j->placed)
        return "was placed on its hosts by a batch role: requeue it there (gridnode requeue "
               "-e BATCH JOB)";
    if (j->state == PJ_REQUEUEING)
        return NULL; /* already on its way back */
    if (j->state == PJ_RUNNING)
        j->run_ms += wall_now_ms() - j->slice_ms;
    /* a rank not reported yet may have been told to run (a PSYNC_ACK in flight): it
       counts as out until its node's next PSYNC shows it does not hold it */
    for (uint32_t r = 0; j->ranks && j->started_ms && r < j->rq.nprocs; r++)
        if (j->ranks[r].st == PR_NEW)
            j->ranks[r].st = PR_STARTED;
    j->state = PJ_REQUEUEING;
    snprintf(j->reason, sizeof j->reason, "requeued: waiting for its processes to end");
    j->dirty = true;
    c->sd->resched = true;
    scored_unsettle(c, j); /* an ended job comes back into view */
    log_info("parallel job %llu requeued: its processes are killed first",
             (unsigned long long)j->id);
    scored_requeue_progress(c, j);
    return NULL;
}

void scored_requeue_progress(struct cluster *c, struct pjob *j)
{
    if (j->state != PJ_REQUEUEING)
        return;
    for (uint32_t r = 0; j->ranks && r < j->rq.nprocs; r++)
        if (rank_out(c, j, &j->ranks[r]))
            return; /* still out there: the next PSYNC of its node tells */
    uint8_t from[8];
    struct rq_sweep s = {c, c->sd->t_poutput, j->id, 0};
    store_key_u64(from, j->id);
    if (store_iter(c->store, s.table, from, sizeof from, rq_del, &s) < 0 || s.rc < 0) {
        c->turn_failed = true; /* the turn is undone; the next one tries again */
        return;
    }
    for (uint32_t r = 0; j->ranks && r < j->rq.nprocs; r++)
        free(j->ranks[r].error);
    free(j->ranks);
    j->ranks = NULL;
    free(j->hosts);
    j->hosts = NULL;
    j->nhosts = 0;
    j->cluster[0] = '\0';
    j->queue = j->rq.queue = j->queue0;
    j->demotions = 0;
    j->mem_lim = j->disk_lim = j->max_cpu_s = 0;
    j->cpu_s = j->res_base = 0;
    j->run_ms = j->slice_ms = j->last_ran_ms = 0;
    j->started_ms = j->finished_ms = 0;
    j->requeues++;
    j->lost = false;
    j->state = PJ_WAITING;
    snprintf(j->reason, sizeof j->reason, "requeued: waiting to be placed again");
    j->dirty = true;
    c->sd->resched = true;
    log_info("parallel job %llu: its processes are gone; waiting again (requeued %u times)",
             (unsigned long long)j->id, j->requeues);
}

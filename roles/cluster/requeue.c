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
#include <string.h>

#include "lib/log.h"
#include "roles/cluster/cluster.h"
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
            tasks_cancel_note(c, n, j->id, i, t->issues);
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

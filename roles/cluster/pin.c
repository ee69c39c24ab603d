/*
 * pin.c - TASK_PIN (issue 26, docs/wire.md 6.19 "Moving a pinned task", docs/data.md
 * "Checkpoints"): a batch role starts a task with files as a one-task job pinned to the
 * host its scheduler chose (SUBMIT "host"). When that host leaves, the batch role's
 * scheduler chooses another and moves the task there: the job stays (its inputs, its
 * latest checkpoint, its key and events), only the host it waits for changes, and a
 * task issued to the lost host may be issued again at once, on the new host, which
 * starts it from the checkpoint the cluster keeps (as any re-issue does).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "roles/cluster/cluster.h"

/* Whether some session (not forgotten) has used node name. */
static bool node_known(const struct cluster *c, const char *name)
{
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (!c->nodes[i].gone && !strcmp(c->nodes[i].name, name))
            return true;
    return false;
}

void pin_h_task_pin(struct cluster *c, struct request *r)
{
    uint64_t id = wire_get_u64(r->msg->root, "job", 0);
    char host[257];
    wire_get_strbuf(r->msg->root, "host", host, sizeof host);
    struct job *j = cluster_job_find(c, id);
    if (!j) {
        cluster_reply_error(r, WE_NOT_FOUND, "no job %llu (TASK_PIN moves a job of tasks)",
                            (unsigned long long)id);
        return;
    }
    bool ended = j->state == JS_DONE || j->state == JS_CANCELLED;
    if (!j->host || ended) { /* a job of any node has no host to change; an ended one no task */
        cluster_reply_error(r, WE_STATE, "job %llu %s%s", (unsigned long long)id,
                            ended ? "is already "
                                  : "is not pinned to a host: its tasks go to any node "
                                    "(TASK_PIN moves a job submitted with host)",
                            ended ? job_state_shown(j) : "");
        return;
    }
    if (!host[0] || !node_known(c, host)) {
        cluster_reply_error(r, WE_NOT_FOUND,
                            "no node named '%s' (names as gridnode nodes shows them)", host);
        return;
    }
    if (strcmp(j->host, host)) {
        char *h = strdup(host);
        if (!h) {
            cluster_reply_error(r, WE_STORAGE, "out of memory; retry later");
            return;
        }
        log_info("job %llu moved from host %s to host %s", (unsigned long long)id, j->host, h);
        free(j->host);
        j->host = h;
        cluster_mark_job(c, j); /* stored with the job: the OK follows its commit */
    }
    uint32_t n = tasks_repin(c, j);
    if (n)
        log_info("job %llu: %u task(s) issued on the lost host may be issued to %s now",
                 (unsigned long long)id, n, host);
    wire_begin(r->reply, WT_OK, r->msg->id, 0);
}

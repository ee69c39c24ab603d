/*
 * scored_psync.c - SCore-D resource management, the node-facing side: PSYNC. A node
 * reports every parallel process it holds (measurements, exits); the cluster takes
 * them (job completion, lost processes, memory and disk per host, limits) and answers
 * with the desired state of every process of that node (docs/wire.md 5.6).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"

/* The rank of job j a node's entry names, if that node is its host; else NULL. */
static struct prank *entry_rank(struct cluster *c, uint32_t me, const msgpack_object *e,
                                struct pjob **jp)
{
    struct pjob *j = scored_job_find(c, wire_get_u64(e, "job", 0));
    uint64_t rank = wire_get_u64(e, "rank", 0);
    if (!j || !j->ranks || rank >= j->rq.nprocs)
        return NULL;
    struct prank *p = &j->ranks[rank];
    if (p->host >= j->nhosts || j->hosts[p->host] != me)
        return NULL;
    *jp = j;
    return p;
}

/*
 * Takes one reported process: measurements, and its exit with its output (stored in this
 * turn; a repeated exit report changes nothing). Out of memory fails the turn.
 */
static void take_entry(struct cluster *c, struct pjob *j, struct prank *p, const msgpack_object *e)
{
    size_t sl;
    const char *st = wire_get_str(e, "state", &sl);
    double cpu = wire_get_f64(e, "cpu_s", 0);
    p->held = true;
    p->rep = st && sl > 0 ? (uint8_t)st[0] : 0;
    if (p->st == PR_EXITED)
        return;
    if (cpu > p->cpu_s) {
        j->cpu_s += cpu - p->cpu_s;
        p->cpu_s = cpu;
    }
    p->rss_kb = wire_get_u64(e, "rss_kb", 0);
    p->disk_kb = wire_get_u64(e, "disk_kb", 0);
    if (p->st == PR_NEW) {
        p->st = PR_STARTED;
        j->dirty = true;
    }
    if (st && sl == 4 && !memcmp(st, "exit", 4)) {
        p->st = PR_EXITED;
        p->exit = (int32_t)wire_get_i64(e, "exit", -1);
        p->sig = (uint8_t)wire_get_u64(e, "signal", 0);
        if (wire_get_str(e, "error", &sl) && !p->error)
            p->error = wire_get_strdup(e, "error");
        /* issue 26: the outputs it kept are recorded only when each is whole here */
        char fwhy[300];
        const char *fbad =
            wire_get(e, "files") ? files_result_check(c, j->user, e, fwhy, sizeof fwhy) : NULL;
        /* a requeued job's killed run leaves no output (requeue.c) */
        if (j->state != PJ_REQUEUEING &&
            scored_output_put(c, j, (uint32_t)(p - j->ranks), e, fbad) < 0)
            c->turn_failed = true;
        j->dirty = true;
    }
}

/* After a node's report: job completion, lost processes, memory and disk per host. */
static void after_report(struct cluster *c, struct pjob *j, uint32_t me, const char *host)
{
    uint64_t rss = 0, disk = 0;
    uint32_t exited = 0;
    if (j->state == PJ_REQUEUEING) { /* requeue.c: only waits for its processes to go */
        for (uint32_t r = 0; r < j->rq.nprocs; r++) {
            struct prank *p = &j->ranks[r];
            if (j->hosts[p->host] == me && p->st == PR_STARTED && !p->held) {
                p->st = PR_EXITED; /* the node holds it no more */
                p->exit = -1;
                j->dirty = true;
            }
        }
        scored_requeue_progress(c, j);
        return;
    }
    for (uint32_t r = 0; r < j->rq.nprocs; r++) {
        struct prank *p = &j->ranks[r];
        exited += p->st == PR_EXITED;
        if (j->hosts[p->host] != me)
            continue;
        if (p->st == PR_STARTED && !p->held) {
            if (PJ_TERMINAL(j->state)) {
                p->st = PR_EXITED; /* gone with the job */
                p->exit = -1;
                exited++;
                j->dirty = true;
            } else {
                scored_job_lost(c, j, "process %u was lost on host %s (client restarted?)", r,
                                host);
                if (j->state == PJ_REQUEUEING || j->state == PJ_WAITING)
                    return; /* its other ranks: the requeue's business */
            }
            continue;
        }
        if (p->st == PR_EXITED && p->error && !strncmp(p->error, "memory limit:", 13))
            /* the node's cgroup limit killed it (issue 23): a limit, as the cluster's own */
            scored_job_end(c, j, PJ_KILLED, "process %u on host %s: %s", r, host, p->error);
        else if (p->st == PR_EXITED && p->error)
            scored_job_end(c, j, PJ_FAILED, "process %u on host %s could not start: %s", r, host,
                           p->error);
        else if (p->st == PR_EXITED && (p->exit != 0 || p->sig))
            scored_job_end(c, j, PJ_FAILED, "process %u on host %s %s %d", r, host,
                           p->sig ? "was killed by signal" : "exited with",
                           p->sig ? p->sig : p->exit);
        if (p->st == PR_STARTED) {
            rss += p->rss_kb;
            disk += p->disk_kb;
        }
    }
    if (exited == j->rq.nprocs && !PJ_TERMINAL(j->state))
        scored_job_end(c, j, PJ_DONE, "%s", "");
    if (j->mem_lim && rss > j->mem_lim * 1024)
        scored_job_end(c, j, PJ_KILLED,
                       "memory: %.1f MiB on host %s, over the job's limit of %llu MiB",
                       (double)rss / 1024.0, host, (unsigned long long)j->mem_lim);
    if (j->disk_lim && disk > j->disk_lim * 1024)
        scored_job_end(c, j, PJ_KILLED,
                       "disk: %.1f MiB on host %s, over the job's limit of %llu MiB",
                       (double)disk / 1024.0, host, (unsigned long long)j->disk_lim);
    if (!PJ_TERMINAL(j->state))
        scored_check_limits(c, j, wall_now_ms());
}

static struct node *psync_session(struct cluster *c, struct request *r)
{
    size_t len;
    const char *sid = wire_get_str(r->msg->root, "sid", &len);
    struct node *n = cluster_node_find(c, sid, len);
    char why[300];
    if (!n) {
        scored_reply_err(r, WE_SESSION, "unknown session id: send HELLO to get a new one");
        return NULL;
    }
    if (sessions_authorize(c, n, "PSYNC", why, sizeof why) < 0) { /* issue 23 */
        scored_reply_err(r, WE_DENIED, "%s", why);
        return NULL;
    }
    n->procs = true;
    cluster_node_seen(c, n, r->peer); /* like every other request (issue 16, item 5) */
    return n;
}

void h_psync(struct cluster *c, struct request *r)
{
    struct node *n = psync_session(c, r);
    if (!n)
        return;
    uint32_t me = (uint32_t)(n - c->nodes);
    const msgpack_object *m = r->msg->root, *procs = wire_get(m, "procs");
    if (wire_get(m, "disk_mb") && wire_get_u64(m, "disk_mb", 0) != n->disk_mb) {
        n->disk_mb = wire_get_u64(m, "disk_mb", 0);
        cluster_mark_node(c, n);
    }
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
        struct pjob *j = c->sd->jobs[i];
        for (uint32_t k = 0; j->ranks && k < j->rq.nprocs; k++)
            if (j->hosts[j->ranks[k].host] == me)
                j->ranks[k].held = false;
    }
    for (uint32_t i = 0; procs && i < procs->via.array.size; i++) {
        struct pjob *j;
        struct prank *p = entry_rank(c, me, &procs->via.array.ptr[i], &j);
        if (p) {
            scored_unsettle(c, j);
            take_entry(c, j, p, &procs->via.array.ptr[i]);
        }
    }
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
        struct pjob *j = c->sd->jobs[i];
        bool mine = false;
        for (uint32_t h = 0; j->ranks && h < j->nhosts; h++)
            mine |= j->hosts[h] == me;
        if (mine && j->state != PJ_WAITING)
            after_report(c, j, me, n->name);
    }
    if (c->sd->resched)
        scored_schedule(c, false);
    /*
     * Long-poll (wait_ms): when the answer would change nothing on the node (each
     * process already in the state wanted, nothing to start, stop or kill, no exit to
     * acknowledge), hold it until a job of this node changes (feed.c) or wait_ms passes.
     */
    uint64_t wait = wire_get_u64(m, "wait_ms", 0);
    bool exits = false;
    for (uint32_t i = 0; procs && i < procs->via.array.size; i++) {
        size_t sl;
        const char *st = wire_get_str(&procs->via.array.ptr[i], "state", &sl);
        exits |= st && sl == 4 && !memcmp(st, "exit", 4);
    }
    if (wait && !exits && scored_psync_actions(c, me) == 0) {
        uint64_t h = daemon_hold(c->daemon, WT_PSYNC, (int64_t)wait);
        if (h && feed_psync_hold(c, h, r->msg->id, n) == 0)
            return;
        if (h) { /* cannot remember it: answer at once */
            struct wire_buf wb;
            wire_buf_init(&wb);
            scored_psync_ack(c, &wb, r->msg->id, me);
            daemon_reply_held(c->daemon, h, &wb);
            wire_buf_free(&wb);
            return;
        }
    }
    scored_psync_ack(c, r->reply, r->msg->id, me);
}

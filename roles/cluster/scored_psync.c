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
        /* a requeued job's killed run leaves no output (requeue.c) */
        if (j->state != PJ_REQUEUEING && scored_output_put(c, j, (uint32_t)(p - j->ranks), e) < 0)
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
                scored_job_end(c, j, PJ_FAILED,
                               "process %u was lost on host %s (client restarted?)", r, host);
            }
            continue;
        }
        if (p->st == PR_EXITED && (p->exit != 0 || p->sig || p->error))
            scored_job_end(c, j, PJ_FAILED, "process %u on host %s %s %d%s%s", r, host,
                           p->error ? "could not start:"
                           : p->sig ? "was killed by signal"
                                    : "exited with",
                           p->error ? 0
                           : p->sig ? p->sig
                                    : p->exit,
                           p->error ? " " : "", p->error ? p->error : "");
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

/* What the node should do with rank r of j; NULL: nothing to say (not started, not held). */
static const char *want(const struct pjob *j, const struct prank *p)
{
    if (p->st == PR_EXITED)
        return NULL;
    if (PJ_KILLS(j->state)) /* ended, or requeueing */
        return p->held || p->st == PR_STARTED ? "kill" : NULL;
    if (j->state == PJ_RUNNING)
        return "run";
    return p->held ? "stop" : NULL;
}

static void pack_cmd(struct cluster *c, struct wire_buf *wb, const struct pjob *j, uint32_t r,
                     const char *w, uint32_t me)
{
    const struct prank *p = &j->ranks[r];
    bool spec = !p->held && !strcmp(w, "run");
    uint32_t nenv = 0;
    while (j->env && j->env[nenv])
        nenv++;
    wire_pack_map(wb, spec ? 6 + (j->cwd != NULL) : 3);
    wire_put_u64(wb, "job", j->id);
    wire_put_u64(wb, "rank", r);
    wire_put_str(wb, "want", w);
    if (!spec)
        return;
    wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    wire_put_bool(wb, "shell", j->shell);
    char buf[4096];
    size_t len = 0;
    for (uint32_t h = 0; h < j->nhosts && len < sizeof buf; h++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", h ? "," : "",
                                j->hosts[h] < c->nnodes ? c->nodes[j->hosts[h]].name : "?");
    char e[6][4200];
    snprintf(e[0], sizeof e[0], "GRIDNODE_JOB=%llu", (unsigned long long)j->id);
    snprintf(e[1], sizeof e[1], "GRIDNODE_RANK=%u", r);
    snprintf(e[2], sizeof e[2], "GRIDNODE_SIZE=%u", j->rq.nprocs);
    snprintf(e[3], sizeof e[3], "GRIDNODE_PPN=%u", j->rq.ppn);
    snprintf(e[4], sizeof e[4], "GRIDNODE_HOSTS=%s", buf);
    snprintf(e[5], sizeof e[5], "GRIDNODE_NODE=%s", me < c->nnodes ? c->nodes[me].name : "");
    wire_put_key(wb, "env");
    wire_pack_array(wb, 6 + nenv);
    for (uint32_t i = 0; i < nenv; i++) /* --export (issue 15): ours come last and win */
        wire_pack_str(wb, j->env[i]);
    for (int i = 0; i < 6; i++)
        wire_pack_str(wb, e[i]);
    if (j->cwd)
        wire_put_str(wb, "chdir", j->cwd);
}

/* Would the node act on w for p (not already in that state as it reported)? */
static bool is_action(const struct prank *p, const char *w)
{
    if (!p->held)
        return true;
    return !((w[0] == 'r' && p->rep == 'r') || (w[0] == 's' && p->rep == 's'));
}

/*
 * Writes the PSYNC_ACK commands for node me: every rank it should run, stop or kill
 * (wb NULL: only counts). Returns how many of them the node would act on.
 */
static uint32_t pack_cmds(struct cluster *c, struct wire_buf *wb, uint32_t me)
{
    uint32_t count = 0, actions = 0;
    for (int pass = 0; pass < (wb ? 2 : 1); pass++) {
        if (pass == 1) {
            wire_put_key(wb, "procs");
            wire_pack_array(wb, count);
        }
        for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
            const struct pjob *j = c->sd->jobs[i];
            if (j->state == PJ_WAITING || !j->ranks)
                continue;
            for (uint32_t r = 0; r < j->rq.nprocs; r++) {
                const struct prank *p = &j->ranks[r];
                const char *w = j->hosts[p->host] == me ? want(j, p) : NULL;
                if (!w)
                    continue;
                if (pass == 0) {
                    count++;
                    actions += is_action(p, w);
                } else {
                    pack_cmd(c, wb, j, r, w, me);
                }
            }
        }
    }
    return actions;
}

static struct node *psync_session(struct cluster *c, struct request *r)
{
    size_t len;
    const char *sid = wire_get_str(r->msg->root, "sid", &len);
    struct node *n = cluster_node_find(c, sid, len);
    if (!n) {
        scored_reply_err(r, WE_SESSION, "unknown session id: send HELLO to get a new one");
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
    if (wait && !exits && pack_cmds(c, NULL, me) == 0) {
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

void scored_psync_ack(struct cluster *c, struct wire_buf *wb, uint64_t id, uint32_t me)
{
    const struct node *n = &c->nodes[me];
    const struct sd_hostent *he = scored_hostent(c, n->name);
    struct request rr = {NULL, "", wb}, *r = &rr;
    wire_begin(r->reply, WT_PSYNC_ACK, id, 3);
    pack_cmds(c, r->reply, me);
    wire_put_u64(r->reply, "sync_ms", (uint64_t)c->cfg.sd_sync_ms);
    wire_put_key(r->reply, "watchfs");
    char wf[CONFIG_VALUE_MAX + 1], *save = NULL;
    uint32_t nw = 0;
    snprintf(wf, sizeof wf, "%s", he ? he->watchfs : "");
    for (char *t = strtok_r(wf, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
        nw++;
    wire_pack_array(r->reply, nw);
    snprintf(wf, sizeof wf, "%s", he ? he->watchfs : "");
    for (char *t = strtok_r(wf, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
        wire_pack_str(r->reply, t);
}

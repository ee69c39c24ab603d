/*
 * live_par.c - the multi-project client's parallel jobs and node health (live.h).
 *
 * Parallel jobs (the cluster manager's SCore-D side, docs/wire.md 5.6): each project
 * whose cluster is told `procs: true` in HELLO (client.parallel) gets its own struct
 * pprocs (roles/client/live/pprocs.h, the code the single-cluster client uses too) under
 * state_dir/work/par-NAME, and its own PSYNC long-poll on the project's session
 * socket, beside the engine's RPCs and the heartbeats. The cores the ranks take are
 * not the engine's: before every engine pass vcl_capacity reserves one CPU instance
 * per running (not stopped, not exited) rank, so the engine suspends or does not start
 * bag-of-tasks work on them and asks for work for the rest only, the way BOINC treats
 * CPU load that is not its own (docs/client-scheduling.md 2b, "Parallel jobs").
 *
 * Node health (health.h): a host fault (a working directory that cannot be made, the
 * state that cannot be saved; vcl_sick in live_state.c) makes the node sick. While sick
 * it drains: every project gets the engine's "no new work" (BOINC's "no new tasks":
 * reports go on, requests ask for nothing), tasks never started are handed back at
 * once as node-side errors (the cluster re-issues them elsewhere and cuts this node's
 * quota), processes already started run on; the working directory is re-probed with a
 * doubling backoff and the node takes work again once the probe passes
 * (docs/client-scheduling.md, "Node health").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/client/live/live.h"

/* ---- node health ---- */

static int running_ranks(const struct live *l)
{
    int n = 0;
    for (int p = 0; l->e && p < l->e->nprojects; p++) {
        const struct lpar *a = l->proj[p].par;
        for (uint32_t i = 0; a && i < a->pp.n; i++)
            n += !a->pp.p[i]->exited && !a->pp.p[i]->stopped;
    }
    return n;
}

void vcl_capacity(struct live *l)
{
    struct engine *e = l->e;
    health_check(&l->health, l->cfg->state_dir, loop_now_ms());
    int ranks = running_ranks(l);
    if (ranks != l->ranks)
        log_info("parallel processes take %d of %d CPU instance(s); tasks run on the rest",
                 ranks < l->slots ? ranks : l->slots, l->slots);
    l->ranks = ranks;
    engine_ptype_reserve(e, 0, ranks); /* no-op when unchanged; again after a rebuild */
    bool sick = l->health.sick[0] != '\0';
    for (int p = 0; p < e->nprojects; p++)
        e->projects[p].no_new_work = sick;
    if (sick)
        vcl_hand_back_queued(l);
}

/* ---- PSYNC ---- */

static const char *project_name(const struct live *l, int p)
{
    return l->e->projects[p].name;
}

static struct lpar *par_get(struct live *l, int p)
{
    struct lproj *lp = &l->proj[p];
    if (lp->par)
        return lp->par;
    struct lpar *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    char name[ENGINE_NAME_MAX];
    snprintf(name, sizeof name, "%s", project_name(l, p));
    for (char *c = name; *c; c++) /* a directory name: no '/', no leading dot */
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || (*c == '.' && c > name)))
            *c = '_';
    snprintf(a->pp.state_dir, sizeof a->pp.state_dir, "%s", l->cfg->state_dir);
    snprintf(a->pp.workroot, sizeof a->pp.workroot, "%.220s/work/par-%.63s", l->cfg->state_dir,
             name);
    a->pp.max_output = (size_t)l->cfg->max_output_kb * 1024;
    a->pp.cache = l->cache; /* issue 26: ranks' inputs (live_stage.c fetches them) */
    a->sync_ms = 1000;
    if (fs_mkdir_p(a->pp.workroot) < 0) {
        char why[400];
        snprintf(why, sizeof why, "cannot prepare working directory %s: %s", a->pp.workroot,
                 strerror(errno));
        vcl_sick(l, why);
    }
    lp->par = a;
    return a;
}

static void par_send(struct live *l, int p, struct lpar *a, int64_t now)
{
    struct lproj *lp = &l->proj[p];
    struct lsock *s = vcl_project_session_sock(l, p);
    struct wire_buf wb;
    a->next_ms = now + a->sync_ms;
    if (!s)
        return;
    wire_buf_init(&wb); /* not l->wb: an RPC waiting for its connection still holds it */
    wire_begin(&wb, WT_PSYNC, a->id = ++l->next_req, 4);
    wire_put_str(&wb, "sid", lp->sid);
    pprocs_pack(&a->pp, &wb);
    wire_put_u64(&wb, "wait_ms", a->sync_ms);
    a->wait_ms = a->sync_ms;
    a->sent_ms = now;
    a->urgent = a->now;
    a->now = false;
    WIRE_CHECK_OUT(wb.sb.data, wb.sb.size, "a PSYNC");
    if (zmq_send(s->sock, wb.sb.data, wb.sb.size, ZMQ_DONTWAIT) < 0) {
        a->now = a->urgent; /* keep an exit report urgent: sent when connected */
        a->retry_ms = now + 250;
        a->waiting = false;
        log_debug("project %s: PSYNC not sent (%s); again in %u ms", project_name(l, p),
                  zmq_strerror(errno), a->sync_ms);
    } else {
        a->waiting = true;
    }
    wire_buf_free(&wb);
}

void vcl_par_pump(struct live *l)
{
    if (!l->cfg->parallel)
        return;
    int64_t now = loop_now_ms();
    for (int p = 0; p < l->e->nprojects; p++) {
        struct lproj *lp = &l->proj[p];
        if (!lp->welcomed)
            continue;
        struct lpar *a = par_get(l, p);
        if (!a)
            continue;
        if (a->waiting && now - a->sent_ms >= l->cfg->timeout_ms + (int64_t)a->wait_ms) {
            log_warnx("project %s: PSYNC not answered within %lld ms; sending it again",
                      project_name(l, p), (long long)(l->cfg->timeout_ms + a->wait_ms));
            a->waiting = false;
            a->now = true;
        }
        if ((a->now && now >= a->retry_ms) || (!a->waiting && now >= a->next_ms))
            par_send(l, p, a, now);
    }
}

bool vcl_par_reply(struct live *l, int p, const struct wire_msg *msg)
{
    struct lpar *a = l->proj[p].par;
    if (!a || !msg->id || msg->id != a->id || !a->waiting)
        return false;
    uint32_t changes = a->pp.changes;
    a->waiting = false;
    if (msg->type == WT_ERROR) {
        uint64_t code = wire_get_u64(msg->root, "code", 0);
        size_t n;
        const char *text = wire_get_str(msg->root, "msg", &n);
        if (code == WE_SESSION) { /* the engine's next RPC says HELLO first */
            log_info("project %s: the cluster forgot this session (PSYNC); saying HELLO again",
                     project_name(l, p));
            l->proj[p].welcomed = false;
            l->e->projects[p].rpc_requested = 1;
            vcl_kick(l);
        } else { /* e.g. a server without parallel jobs: ask again rarely */
            log_warnx("project %s: PSYNC refused: %s: %.*s; asking again in 30 s",
                      project_name(l, p), wire_err_name((int)code), (int)n, text ? text : "");
            a->next_ms = loop_now_ms() + 30000;
        }
        return true;
    }
    if (msg->type != WT_PSYNC_ACK) {
        log_warnx("project %s: unexpected %s reply to PSYNC ignored", project_name(l, p),
                  msg->desc->name);
        return true;
    }
    pprocs_apply(&a->pp, msg->root);
    uint64_t sync = wire_get_u64(msg->root, "sync_ms", 1000);
    a->sync_ms = sync < 10 ? 10 : sync > 30000 ? 30000 : (uint32_t)sync;
    /* as the single-cluster client: a held reply, the answer to an exit report, or one
       that changed processes is followed at once; a quick routine one after sync_ms */
    int64_t now = loop_now_ms();
    bool quick = !a->urgent && now - a->sent_ms < a->wait_ms / 2;
    a->next_ms = quick ? a->sent_ms + a->sync_ms : now;
    if (a->pp.changes != changes) {
        a->now = true;
        vcl_kick(l); /* the engine's CPU instances change with the running ranks */
    }
    return true;
}

bool vcl_par_reaped(struct live *l, pid_t pid, int status, const struct rusage *ru)
{
    for (int p = 0; l->e && p < l->e->nprojects; p++) {
        struct lpar *a = l->proj[p].par;
        if (a && pprocs_reaped(&a->pp, pid, status, ru)) {
            a->now = true; /* report the exit at once */
            vcl_kick(l);
            return true;
        }
    }
    return false;
}

uint64_t vcl_par_disk_mb(const struct live *l, int p)
{
    if (l->proj[p].par)
        return pprocs_free_disk_mb(&l->proj[p].par->pp);
    struct pprocs pp;
    memset(&pp, 0, sizeof pp);
    snprintf(pp.state_dir, sizeof pp.state_dir, "%s", l->cfg->state_dir);
    return pprocs_free_disk_mb(&pp);
}

void vcl_par_drop(struct live *l, int p)
{
    struct lpar *a = l->proj[p].par;
    if (!a)
        return;
    pprocs_shutdown(&a->pp);
    free(a);
    l->proj[p].par = NULL;
}

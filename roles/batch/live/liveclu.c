/*
 * liveclu.c - the batch role's side of the batch <-> cluster manager protocol
 * (docs/wire.md 6.9-6.10): one DEALER per cluster manager in batch.clusters.
 *
 * Synchronisation of one cluster: EVENTS (wait 0) for the feed's epoch and position,
 * NODE_LIST pages for its hosts (a procs-capable host of C cores becomes C engine
 * nodes of one core, so jobs share hosts core by core as the cluster's admission
 * does), then reconciliation of the elements stored as starting/running there
 * (adopted by the engine on their hosts; a running one is checked with JOB_GET, a
 * starting one gets its PSUBMIT again: the key makes that harmless), then the EVENTS
 * long-poll. A reset (new epoch: the cluster restarted) or a request unanswered past
 * its deadline (the cluster is down: its hosts are down for the engine) starts over.
 * A cluster without EVENTS is polled (NODE_LIST + JOB_GET) every second instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/netopts.h"
#include "roles/batch/live/live_int.h"

/* The EVENTS message types of the cluster side (h-cluster, wire.md 6.9). */
#ifndef WT_EVENTS
#define WT_EVENTS 60
#define WT_EVENT_LIST 61
#endif

enum { CL_DOWN, CL_SYNC, CL_FOLLOW };

static struct live *G; /* the role (one per process) */

static void sync_start(struct live *L, struct lclu *c);

/* ---- sending ---- */

void live_out_flush(struct live *L, bool send)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (uint32_t i = 0; i < L->nout; i++) {
        struct lclu *c = &L->cl[L->out[i].cl];
        const void *d = L->out[i].data;
        size_t len = L->out[i].len;
        if (!d && send) {
            /* a start decided in the turn that stored its job: the record (argv) is
             * readable now that the turn is committed */
            struct ljob *j;
            struct lelem *el = live_elem_find(L, L->out[i].eid, &j);
            d = NULL;
            if (el && el->state == EL_STARTING && el->cl == c->idx &&
                live_start_build(L, j, (uint32_t)(L->out[i].eid & ((1u << LIVE_ELEM_BITS) - 1)),
                                 &wb) == 0) {
                d = wb.sb.data;
                len = wb.sb.size;
            }
        }
        if (d)
            WIRE_CHECK_OUT(d, len, "a request to a cluster");
        if (send && d && c->sock && zmq_send(c->sock, d, len, ZMQ_DONTWAIT) < 0)
            log_debug("cannot send to cluster %s: %s", c->name, zmq_strerror(errno));
        free(L->out[i].data);
    }
    wire_buf_free(&wb);
    L->nout = 0;
}

static void send_simple(struct live *L, struct lclu *c, int kind, uint64_t arg, uint32_t type,
                        const char *k1, uint64_t v1, const char *k2, uint64_t v2, int64_t wait)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, c, kind, arg, type, (k1 ? 1 : 0) + (k2 ? 1 : 0), wait, &wb);
    if (k1)
        wire_put_u64(&wb, k1, v1);
    if (k2)
        wire_put_u64(&wb, k2, v2);
    live_queue_out(L, c->idx, &wb);
    wire_buf_free(&wb);
}

static void send_events(struct live *L, struct lclu *c, int kind, uint64_t wait)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, c, kind, 0, WT_EVENTS, 4, (int64_t)wait, &wb);
    wire_put_u64(&wb, "from", kind == RK_EVINIT ? 0 : c->next);
    wire_put_str(&wb, "epoch", c->epoch);
    wire_put_u64(&wb, "wait_ms", wait);
    wire_put_u64(&wb, "max", 1000);
    live_queue_out(L, c->idx, &wb);
    wire_buf_free(&wb);
}

/* ---- elements ---- */

static uint32_t eidx(uint64_t eid)
{
    return (uint32_t)(eid & ((1u << LIVE_ELEM_BITS) - 1));
}

/* Back to pending (a refused start, a job the cluster lost, a JOB_CTL requeue): never
 * lost. A JOB_CTL requeue (want_requeue, or an ended element) starts a new run: the run
 * number grows, so its cluster key differs from the old run's (the cluster's PSUBMIT
 * is idempotent per key) and the old run's events are no longer taken as this one's;
 * the old run's end, exit and signal are dropped. */
static void requeue(struct live *L, struct ljob *j, uint32_t e, const char *why)
{
    struct lelem *el = live_elem_rec(j, e);
    uint64_t eid = live_eid(j->id, e);
    if (!el)
        return;
    if (el->in_engine)
        batch_job_finish(L->eng, eid, live_now(L));
    live_elem_engine(j, e, false);
    if (j->parallel && el->cjob && live_files_ckpt_s(j)) { /* issue 26: its checkpoints */
        el->ck_cjob = el->cjob;
        el->ck_cl = el->cl;
    }
    if (el->want_requeue || el->state >= EL_DONE) {
        el->want_requeue = false;
        el->run++;
        el->end = 0;
        el->exit = 0;
        el->signal = 0;
    }
    el->cjob = 0;
    el->start = el->decided = 0;
    live_elem_reason(L, j, e, why);
    live_elem_set(L, j, e, EL_PENDING);
    if (!j->cancelled && !el->want_cancel) {
        struct batch_job_spec s;
        live_elem_spec(L, j, e, &s);
        if (batch_job_submit(L->eng, &s) == 0)
            live_elem_engine(j, e, true);
    } else {
        live_elem_set(L, j, e, EL_CANCELLED);
    }
    live_want_cycle(L);
}

static int cluster_state(const char *s)
{
    if (!strcmp(s, "done"))
        return EL_DONE;
    if (!strcmp(s, "failed"))
        return EL_FAILED;
    if (!strcmp(s, "killed"))
        return EL_KILLED;
    if (!strcmp(s, "cancelled"))
        return EL_CANCELLED;
    return EL_RUNNING;
}

/* A cluster job map or "job" event about element e of j. */
static void elem_update(struct live *L, struct ljob *j, uint32_t e, const msgpack_object *m)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || (el->state != EL_STARTING && el->state != EL_RUNNING) || el->pulling || el->mig_cjob)
        return; /* pulling: it ended, its outputs are being copied (livestage.c); mig_cjob:
                   its job is being moved (livemigrate.c), the TASK_PIN's answer decides */
    char st[16], why[256];
    wire_get_strbuf(m, "state", st, sizeof st);
    uint64_t cj = wire_get_u64(m, "job", 0);
    if (cj && el->cjob != cj) {
        el->cjob = cj;
        live_elem_mark(L, j, e);
        if (el->want_cancel || el->want_requeue)
            live_clu_cancel(L, j, e);
    }
    int s = cluster_state(st);
    int64_t started = wire_get_time(m, "started", 0);
    if (started > 0 && started != el->start) {
        /* the cluster's start, not the cycle's decision, is when the walltime runs
         * out: the engine's end estimate and every plan after it follow it */
        el->start = started;
        live_elem_mark(L, j, e);
        if (el->in_engine && s == EL_RUNNING &&
            batch_job_started_at(L->eng, live_eid(j->id, e), started) == 0) {
            el->heard = live_now(L);
            live_want_cycle(L);
        }
    }
    if (s == EL_RUNNING) {
        if (el->state != EL_RUNNING)
            live_elem_set(L, j, e, EL_RUNNING);
        return;
    }
    if (el->want_requeue) { /* the cancelled run ended: its results are dropped */
        char rq[300];
        snprintf(rq, sizeof rq, "requeued (run %u ended on cluster %s)", el->run + 1,
                 el->cl >= 0 && el->cl < L->ncl ? L->cl[el->cl].name : "?");
        requeue(L, j, e, rq);
        return;
    }
    wire_get_strbuf(m, "reason", why, sizeof why);
    if (s == EL_FAILED && wire_get_bool(m, "lost", false) && !el->want_cancel && !j->cancelled &&
        el->lost < (uint32_t)L->cfg.live.lost_requeues) {
        /* a host or process was lost, not the job's own failure (issue 24): run again,
         * as Slurm requeues a batch job whose node failed */
        char rq[400];
        el->lost++;
        el->want_requeue = true; /* a new run: a new cluster key */
        j->requeues++;
        live_job_dirty(L, j);
        snprintf(rq, sizeof rq, "requeued after a node failure (%u of %lld): %.250s", el->lost,
                 (long long)L->cfg.live.lost_requeues, why);
        log_info("job %llu element %u: %s", (unsigned long long)j->id, e, rq);
        requeue(L, j, e, rq);
        return;
    }
    el->exit = (int32_t)wire_get_i64(m, "exit", s == EL_DONE ? 0 : -1);
    el->signal = (uint8_t)wire_get_u64(m, "signal", 0);
    int64_t fin = wire_get_time(m, "finished", 0);
    el->end = fin > 0 ? fin : live_now(L);
    if (why[0])
        live_elem_reason(L, j, e, why);
    if (el->in_engine)
        batch_job_finish(L->eng, live_eid(j->id, e), live_now(L));
    live_elem_engine(j, e, false);
    live_want_cycle(L);
    if (j->data && (s == EL_DONE || s == EL_FAILED) && el->cl >= 0 && el->cl < L->ncl &&
        live_files_has_outputs(j)) { /* issue 26: ends once its outputs are copied here */
        live_stage_pull(L, &L->cl[el->cl], j, e, s);
        return;
    }
    live_elem_set(L, j, e, s);
}

/* The element named by a cluster job key "batch:<inc>:<J>.<e>" (run 0, also every key
 * stored before requeue existed) or "batch:<inc>:<J>.<e>.<run>", or NULL; NULL too for
 * a key of another run than the element's current one (a requeued run's late events). */
static struct lelem *elem_of_key(struct live *L, const msgpack_object *m, struct ljob **jp,
                                 uint32_t *ep)
{
    char key[160], pre[64];
    wire_get_strbuf(m, "key", key, sizeof key);
    snprintf(pre, sizeof pre, "batch:%s:", L->inc);
    size_t pl = strlen(pre);
    if (strncmp(key, pre, pl))
        return NULL;
    unsigned long long J, e, run = 0;
    char tail;
    if (sscanf(key + pl, "%llu.%llu.%llu%c", &J, &e, &run, &tail) != 3) {
        run = 0;
        if (sscanf(key + pl, "%llu.%llu%c", &J, &e, &tail) != 2)
            return NULL;
    }
    struct ljob *j = live_job_find(L, J);
    struct lelem *el = j && e < j->ntasks ? live_elem_rec(j, (uint32_t)e) : NULL;
    if (!el || run != el->run)
        return NULL;
    *jp = j;
    *ep = (uint32_t)e;
    return el;
}

/* ---- starts and cancels ---- */

/* Element e of j cannot run (its cluster rejects it, an input was refused): failed. */
static void reject(struct live *L, struct ljob *j, uint32_t e, const char *why)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el)
        return;
    if (el->in_engine)
        batch_job_finish(L->eng, live_eid(j->id, e), live_now(L));
    live_elem_engine(j, e, false);
    live_mig_drop(L, j, e); /* issue 26: a job kept for a move is cancelled */
    live_elem_reason(L, j, e, why);
    el->exit = -1;
    live_elem_set(L, j, e, EL_FAILED);
    live_want_cycle(L);
}

void live_clu_start(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || el->cl < 0 || el->cl >= L->ncl || !el->hosts)
        return;
    if (el->mig_cjob && live_mig_start(L, j, e))
        return;    /* issue 26: its kept cluster job moves to this host (livemigrate.c) */
    if (j->data) { /* issue 26: its inputs reach the cluster first (livestage.c) */
        char why[700];
        int rc = live_stage_inputs(L, &L->cl[el->cl], j, e, why, sizeof why);
        bool was = el->staging;
        el->staging = rc > 0;
        if (rc > 0 && !was) { /* what a user sees while the element waits (JOB) */
            snprintf(why, sizeof why, "sending its inputs to cluster %s", L->cl[el->cl].name);
            live_elem_reason(L, j, e, why);
        } else if (rc == 0 && el->reason && !strncmp(el->reason, "sending its inputs", 18)) {
            live_elem_reason(L, j, e, NULL);
        }
        if (rc < 0)
            reject(L, j, e, why);
        if (rc)
            return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    if (live_start_build(L, j, e, &wb) == 0)
        live_queue_out(L, el->cl, &wb);
    else /* stored in this turn: built once the commit made it readable */
        live_queue_start_later(L, el->cl, live_eid(j->id, e));
    wire_buf_free(&wb);
}

uint32_t live_job_requeue(struct live *L, struct ljob *j)
{
    uint32_t n = 0;
    struct lelem *el;
    for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) { /* the others are pending */
        if (el->state == EL_PENDING || el->want_requeue)
            continue; /* not run yet, or already on its way back */
        n++;
        if (el->state >= EL_DONE) { /* ended: runs again from scratch */
            requeue(L, j, e, "requeued");
            continue;
        }
        /* starting or running: cancel this run; back to pending once the cluster
         * confirms it ended (elem_update), or at once if it forgot it (JOB_GET) */
        el->want_requeue = true;
        live_elem_reason(L, j, e, "requeueing: its run is being cancelled at its cluster");
        if (el->cjob)
            live_clu_cancel(L, j, e);
    }
    if (n) {
        j->requeues++;
        live_job_dirty(L, j);
        live_want_cycle(L);
    }
    return n;
}

void live_clu_cancel(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || el->cl < 0 || el->cl >= L->ncl || !el->cjob)
        return;
    live_order_cancel(L, el->cl, el->cjob); /* kept until the cluster took it (liveorder.c) */
}

/* ---- synchronisation ---- */

static void sync_start(struct live *L, struct lclu *c)
{
    c->st = CL_SYNC;
    c->reconciling = 0;
    for (uint32_t i = 0; i < c->nhosts; i++)
        c->hosts[i].seen = c->hosts[i].seen_up = false;
    send_events(L, c, RK_EVINIT, 0);
}

/* Adopts and reconciles the elements stored as starting/running on cluster c. */
static void reconcile(struct live *L, struct lclu *c)
{
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        if (!j->nrun)
            continue;
        struct lelem *el;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
            if (el->cl != c->idx || (el->state != EL_STARTING && el->state != EL_RUNNING))
                continue;
            if (!el->in_engine && el->hosts) {
                int32_t nodes[4096], n = 0;
                char *hs = strdup(el->hosts);
                for (char *save = NULL, *t = hs ? strtok_r(hs, ",", &save) : NULL; t && n < 4096;
                     t = strtok_r(NULL, ",", &save)) {
                    int32_t s = live_host_free_slot(L, c->idx, t, nodes, n);
                    if (s >= 0)
                        nodes[n++] = s;
                }
                free(hs);
                struct batch_job_spec sp;
                live_elem_spec(L, j, e, &sp);
                if (n == sp.tasks && batch_job_adopt(L->eng, &sp, nodes, n, el->start) == 0)
                    live_elem_engine(j, e, true);
                else
                    log_warnx("job %llu.%u: cannot take its hosts %s back into the plan",
                              (unsigned long long)j->id, e, el->hosts);
            }
            if (el->state == EL_RUNNING && el->cjob && el->want_requeue)
                live_clu_cancel(L, j, e); /* kill -9 after a requeue's OK: cancel again */
            if (el->state == EL_RUNNING && el->cjob)
                send_simple(L, c, RK_JOBGET, live_eid(j->id, e), WT_JOB_GET, "job", el->cjob, NULL,
                            0, 0);
            else
                live_clu_start(L, j, e);
        }
    }
}

static void nodes_done(struct live *L, struct lclu *c)
{
    for (uint32_t i = 0; i < c->nhosts; i++) {
        struct lhost *h = &c->hosts[i];
        live_host_set_up(L, c, h, h->seen_up);
    }
    if (!c->synced)
        log_info("cluster %s (%s): %u hosts", c->name, c->ep, c->nhosts);
    c->synced = true;
    reconcile(L, c);
    live_order_resend(L, c->idx);
    live_want_cycle(L);
    if (c->events_ok) {
        c->st = CL_FOLLOW;
        send_events(L, c, RK_EVENTS, LIVE_EVENTS_WAIT_MS);
    } else {
        c->st = CL_FOLLOW;
        c->poll_at = loop_now_ms() + 1000;
    }
}

static void cluster_down(struct live *L, struct lclu *c, const char *why)
{
    if (c->st != CL_DOWN)
        log_warnx("cluster %s (%s) %s; its hosts are down for the scheduler until it answers",
                  c->name, c->ep, why);
    for (uint32_t i = 0; i < c->nhosts; i++)
        live_host_set_up(L, c, &c->hosts[i], false);
    c->nreq = 0;
    live_stage_reset(L, c); /* files offered or copied: again after the resync */
    c->st = CL_DOWN;
    c->retry_at = loop_now_ms() + 1000;
    /* a new socket: nothing stale queued for a restarted cluster */
    curve_watch_destroy(&c->watch);
    if (c->sock) {
        loop_remove_socket(L->loop, c->sock);
        zmq_close(c->sock);
        c->sock = NULL;
    }
}

static void on_readable(struct loop *l, void *arg);

static int sock_open(struct live *L, struct lclu *c)
{
    int zero = 0;
    int64_t maxmsg = WIRE_MAX_FRAME;
    c->sock = zmq_socket(daemon_zctx(L->daemon), ZMQ_DEALER);
    if (!c->sock)
        return -1;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    netopts_liveness(c->sock, NETOPTS_PEER_TIMEOUT_MS); /* a cluster across a WAN link */
    netopts_connecting(c->sock);
    char err[800];
    if (curve_client_apply(c->sock, &L->cfg.live.sec, c->ep, err, sizeof err) < 0)
        log_warnx("cluster %s: %s", c->ep, err);
    else if (zmq_connect(c->sock, c->ep) == 0 &&
             loop_add_socket(L->loop, c->sock, on_readable, c) == 0) {
        if (curve_client_secure(&L->cfg.live.sec))
            c->watch = curve_watch_new(daemon_zctx(L->daemon), L->loop, c->sock, c->ep);
        return 0;
    }
    zmq_close(c->sock);
    c->sock = NULL;
    return -1;
}

/* ---- replies ---- */

/*
 * A "host" event that took a host down: the tasks with files running there (issue 26:
 * pinned to it by SUBMIT "host", so the cluster would wait for that host for ever) are
 * lost as a parallel job's ranks are (issue 24): cancelled at the cluster and run again
 * (at most batch.lost_requeues times; then failed).
 */
static void host_gone(struct live *L, struct lclu *c, const msgpack_object *x)
{
    char name[BATCH_NAME_MAX];
    wire_get_strbuf(x, "node", name, sizeof name);
    for (uint32_t i = 0; i < c->nhosts; i++)
        if (!strcmp(c->hosts[i].name, name) && c->hosts[i].up)
            return; /* not down (another session of it is active) */
    for (uint32_t i = 0; name[0] && i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        struct lelem *el;
        for (uint32_t e = 0; j->data && j->nrun && (el = live_elem_next(j, &e)); e++) {
            if (el->cl != c->idx || el->state != EL_RUNNING || el->pulling || !el->cjob ||
                el->want_requeue || el->want_cancel || !el->hosts || strcmp(el->hosts, name))
                continue;
            char why[400];
            if (el->lost < (uint32_t)L->cfg.live.lost_requeues &&
                live_mig_begin(L, j, e, c, name, why, sizeof why)) {
                requeue(L, j, e, why); /* pending; its cluster job waits for the move */
                continue;
            }
            if (el->lost >= (uint32_t)L->cfg.live.lost_requeues || j->cancelled) {
                snprintf(why, sizeof why, "its host %s left cluster %s (runs lost: %u)", name,
                         c->name, el->lost + 1);
                live_clu_cancel(L, j, e);
                reject(L, j, e, why);
                continue;
            }
            el->lost++;
            el->want_requeue = true; /* a new run: a new cluster key */
            j->requeues++;
            live_job_dirty(L, j);
            snprintf(why, sizeof why, "requeueing: its host %s left cluster %s (%u of %lld)", name,
                     c->name, el->lost, (long long)L->cfg.live.lost_requeues);
            log_info("job %llu element %u: %s", (unsigned long long)j->id, e, why);
            live_elem_reason(L, j, e, why);
            live_clu_cancel(L, j, e); /* its end (cancelled) requeues it: elem_update */
        }
    }
}

static void on_events(struct live *L, struct lclu *c, const struct wire_msg *m, bool init)
{
    const msgpack_object *r = m->root;
    char epoch[80];
    wire_get_strbuf(r, "epoch", epoch, sizeof epoch);
    bool reset = wire_get_bool(r, "reset", false) || strcmp(epoch, c->epoch);
    snprintf(c->epoch, sizeof c->epoch, "%s", epoch);
    c->next = wire_get_u64(r, "next", 0);
    if (init || (reset && c->st == CL_FOLLOW)) {
        if (!init)
            log_info("cluster %s: event feed reset (restarted?): resynchronising", c->name);
        c->events_ok = true;
        c->st = CL_SYNC;
        for (uint32_t i = 0; i < c->nhosts; i++)
            c->hosts[i].seen = c->hosts[i].seen_up = false;
        send_simple(L, c, RK_NODES, 0, WT_NODE_LIST, "from", 0, "count", 1000, 0);
        return;
    }
    const msgpack_object *ev = wire_get(r, "events");
    for (uint32_t i = 0; ev && ev->type == MSGPACK_OBJECT_ARRAY && i < ev->via.array.size; i++) {
        const msgpack_object *x = &ev->via.array.ptr[i];
        if (x->type != MSGPACK_OBJECT_MAP)
            continue;
        char kind[8];
        wire_get_strbuf(x, "kind", kind, sizeof kind);
        if (!strcmp(kind, "host")) {
            live_host_update(L, c, x, false);
            host_gone(L, c, x);
        } else if (!strcmp(kind, "job") || !strcmp(kind, "bag")) { /* bag: a task with files */
            struct ljob *j;
            uint32_t e;
            if (elem_of_key(L, x, &j, &e))
                elem_update(L, j, e, x);
        }
    }
    send_events(L, c, RK_EVENTS, LIVE_EVENTS_WAIT_MS);
}

static void on_reply(struct live *L, struct lclu *c, const struct lreq *q, const struct wire_msg *m)
{
    bool err = m->type == WT_ERROR;
    uint64_t code = err ? wire_get_u64(m->root, "code", 0) : 0;
    char msg[512] = "";
    if (err)
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
    struct ljob *j = NULL;
    struct lelem *el = NULL;
    if (q->kind >= RK_FHAVE) { /* files (issue 26) */
        live_stage_reply(L, c, q->kind, q->arg, m);
        return;
    }
    if (q->kind >= RK_PSUBMIT)
        el = live_elem_find(L, q->arg, &j);
    switch (q->kind) {
    case RK_EVINIT:
    case RK_EVENTS:
        if (err && (code == WE_TYPE || code == WE_FIELD) && q->kind == RK_EVINIT) {
            log_info("cluster %s has no EVENTS feed: polling it every second", c->name);
            c->events_ok = false;
            send_simple(L, c, RK_NODES, 0, WT_NODE_LIST, "from", 0, "count", 1000, 0);
        } else if (err) {
            sync_start(L, c);
        } else if (m->type == WT_EVENT_LIST) {
            on_events(L, c, m, q->kind == RK_EVINIT);
        }
        break;
    case RK_NODES: {
        if (err) {
            cluster_down(L, c, msg);
            break;
        }
        const msgpack_object *ns = wire_get(m->root, "nodes");
        for (uint32_t i = 0; ns && i < ns->via.array.size; i++)
            live_host_update(L, c, &ns->via.array.ptr[i], true);
        if (wire_get(m->root, "next"))
            send_simple(L, c, RK_NODES, 0, WT_NODE_LIST, "from", wire_get_u64(m->root, "next", 0),
                        "count", 1000, 0);
        else
            nodes_done(L, c);
        break;
    }
    case RK_PSUBMIT:
        if (!el || (el->state != EL_STARTING && el->state != EL_RUNNING))
            break;
        if (!err) {
            el->cjob = wire_get_u64(m->root, "job", 0);
            live_elem_mark(L, j, eidx(q->arg));
            char st[16];
            wire_get_strbuf(m->root, "state", st, sizeof st);
            if (el->want_cancel || el->want_requeue)
                live_clu_cancel(L, j, eidx(q->arg));
            live_mig_submitted(L, j, eidx(q->arg)); /* issue 26: moved to this cluster */
            /* a repeat of an ended job; a SUBMIT's reply (issue 26) says no state: a
               repeat is asked about, its events may have gone by */
            if (cluster_state(st) != EL_RUNNING ||
                (m->type == WT_SUBMITTED && !st[0] && wire_get_bool(m->root, "repeat", false)))
                send_simple(L, c, RK_JOBGET, q->arg, WT_JOB_GET, "job", el->cjob, NULL, 0, 0);
            else if (el->state == EL_STARTING)
                live_elem_set(L, j, eidx(q->arg), EL_RUNNING);
        } else if (code == WE_REFUSED || code == WE_STORAGE || code == WE_STATE) {
            char why[600];
            snprintf(why, sizeof why, "start refused by cluster %s: %s", c->name, msg);
            log_info("job %llu.%u: %s", (unsigned long long)j->id, eidx(q->arg), why);
            L->refusals++;
            live_hosts_block(L, c, el->hosts);
            requeue(L, j, eidx(q->arg), why);
        } else if (code == WE_INVALID && live_carry_refused(L, q->arg, msg)) {
            live_clu_start(L, j, eidx(q->arg)); /* again, without the carried checkpoint */
        } else {
            char why[600];
            snprintf(why, sizeof why, "cluster %s rejects the job: %s", c->name, msg);
            reject(L, j, eidx(q->arg), why);
        }
        break;
    case RK_ORDER:
        live_order_reply(L, c, q->arg, m);
        break;
    case RK_PIN: /* issue 26: refused: the element starts as a new run */
        if (el && live_mig_reply(L, c, j, eidx(q->arg), m) == 0)
            live_clu_start(L, j, eidx(q->arg));
        break;
    case RK_PINEND: { /* the kept job had ended: its end, or a new run */
        uint64_t kept = el ? el->mig_cjob : 0;
        int r = el ? live_mig_ended(L, c, j, eidx(q->arg), m) : -1;
        if (r == 0) {
            live_clu_start(L, j, eidx(q->arg));
        } else if (r == 1) {
            elem_update(L, j, eidx(q->arg), wire_get(m->root, "job"));
        } else if (r == 2) {
            char why[400];
            snprintf(why, sizeof why,
                     "cluster %s purged its job %llu before its end was seen here: the "
                     "outcome is unknown here (the cluster's accounting record has it)",
                     c->name, (unsigned long long)kept);
            reject(L, j, eidx(q->arg), why);
        }
        break;
    }
    case RK_JOBGET:
        if (!el || (el->state != EL_STARTING && el->state != EL_RUNNING))
            break;
        if (err && code == WE_NOT_FOUND && wire_get_bool(m->root, "purged", false)) {
            /* it ended there and was purged before its end was heard here: it may have
               run whole, so it never runs again unasked; a requeue or cancel asked ends
               as asked (requeue() runs it again or ends it cancelled) */
            char why[400];
            snprintf(why, sizeof why,
                     "cluster %s purged its job %llu before its end was seen here: the "
                     "outcome is unknown here (the cluster's accounting record has it)",
                     c->name, (unsigned long long)el->cjob);
            if (el->want_requeue || el->want_cancel || j->cancelled)
                requeue(L, j, eidx(q->arg), why);
            else
                reject(L, j, eidx(q->arg), why);
        } else if (err && code == WE_NOT_FOUND) {
            char why[300];
            snprintf(why, sizeof why, "cluster %s no longer knows its job %llu: requeued", c->name,
                     (unsigned long long)el->cjob);
            requeue(L, j, eidx(q->arg), why);
        } else if (!err) {
            const msgpack_object *cj = wire_get(m->root, "job");
            uint64_t id = wire_get_u64(cj, "job", 0);
            if (!id || id == el->cjob) /* not a late answer about an older run */
                elem_update(L, j, eidx(q->arg), cj);
        }
        break;
    default:
        break;
    }
}

/* Starts the elements whose inputs reached their cluster, or fails those one of whose
 * inputs was refused (livestage.c put them in L->stage_ready). */
static void start_staged(struct live *L)
{
    uint32_t n = L->nready;
    L->nready = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct ljob *j;
        struct lelem *el = live_elem_find(L, L->stage_ready[i], &j);
        if (el && el->state == EL_STARTING)
            live_clu_start(L, j, eidx(L->stage_ready[i]));
    }
}

static void on_readable(struct loop *l, void *arg)
{
    (void)l;
    struct lclu *c = arg;
    struct live *L = G;
    for (int n = 0; n < 1024 && c->sock; n++) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, c->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            break;
        }
        struct wire_msg m;
        struct wire_error we;
        if (wire_decode(zmq_msg_data(&f), zmq_msg_size(&f), false, &m, &we) < 0) {
            log_warnx("cluster %s: bad reply ignored: %s", c->name, we.text);
            zmq_msg_close(&f);
            continue;
        }
        struct lreq q = {0};
        bool found = false;
        for (uint32_t i = 0; i < c->nreq; i++)
            if (c->req[i].rid == m.id) {
                q = c->req[i];
                c->req[i] = c->req[--c->nreq];
                found = true;
                break;
            }
        if (found)
            on_reply(L, c, &q, &m);
        wire_msg_free(&m);
        zmq_msg_close(&f);
    }
    start_staged(L);
}

/* ---- the list, ticks ---- */

void live_clu_tick(struct live *L)
{
    int64_t now = loop_now_ms();
    for (int i = 0; i < L->ncl; i++) {
        struct lclu *c = &L->cl[i];
        live_hosts_unblock(L, c, now);
        if (c->st == CL_DOWN) {
            if (now >= c->retry_at && (c->sock || sock_open(L, c) == 0))
                sync_start(L, c);
            continue;
        }
        for (uint32_t k = 0; k < c->nreq; k++)
            if (now > c->req[k].deadline) {
                cluster_down(L, c, "does not answer");
                break;
            }
        if (c->st == CL_FOLLOW && !c->events_ok && now >= c->poll_at && c->nreq == 0) {
            c->poll_at = now + 1000; /* the fallback without EVENTS */
            c->st = CL_SYNC;
            for (uint32_t h = 0; h < c->nhosts; h++)
                c->hosts[h].seen = c->hosts[h].seen_up = false;
            send_simple(L, c, RK_NODES, 0, WT_NODE_LIST, "from", 0, "count", 1000, 0);
        }
    }
}

int live_clusters_open(struct live *L, char *err, size_t errlen)
{
    G = L;
    char list[BATCH_LIVE_STR];
    snprintf(list, sizeof list, "%s", L->cfg.live.clusters);
    L->ncl = 0;
    for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (L->ncl == LIVE_MAX_CLUSTERS) {
            snprintf(err, errlen, "batch.clusters names more than %d clusters", LIVE_MAX_CLUSTERS);
            return -1;
        }
        struct lclu *c = &L->cl[L->ncl];
        memset(c, 0, sizeof *c);
        c->idx = L->ncl;
        char *eq = strchr(t, '=');
        const char *ep = eq ? eq + 1 : t;
        if (eq)
            *eq = '\0';
        if (strncmp(ep, "tcp://", 6) && strncmp(ep, "ipc://", 6) && strncmp(ep, "inproc://", 9)) {
            snprintf(err, errlen, "batch.clusters: '%s' is not an endpoint (tcp://HOST:PORT)", ep);
            return -1;
        }
        snprintf(c->ep, sizeof c->ep, "%s", ep);
        if (eq) {
            snprintf(c->name, sizeof c->name, "%s", t);
        } else { /* named after its endpoint: tcp://127.0.0.1:7300 -> 127.0.0.1_7300 */
            const char *p = strstr(ep, "://");
            snprintf(c->name, sizeof c->name, "%s", p ? p + 3 : ep);
            for (char *q = c->name; *q; q++)
                if (*q == ':' || *q == '/' || *q == ',')
                    *q = '_';
        }
        for (int k = 0; k < L->ncl; k++)
            if (!strcmp(L->cl[k].name, c->name)) {
                snprintf(err, errlen, "batch.clusters names cluster '%s' twice", c->name);
                return -1;
            }
        c->st = CL_DOWN;
        L->ncl++;
    }
    if (!L->ncl) {
        snprintf(err, errlen, "batch.clusters is empty");
        return -1;
    }
    L->default_cl = 0;
    if (!L->daemon)
        return 0; /* only checking the list */
    for (int i = 0; i < L->ncl; i++) {
        if (sock_open(L, &L->cl[i]) < 0) {
            snprintf(err, errlen, "cannot connect to cluster %s", L->cl[i].ep);
            return -1;
        }
        sync_start(L, &L->cl[i]);
    }
    return 0;
}

void live_clusters_close(struct live *L)
{
    for (int i = 0; i < L->ncl; i++) {
        struct lclu *c = &L->cl[i];
        curve_watch_destroy(&c->watch);
        if (c->sock) {
            if (L->loop)
                loop_remove_socket(L->loop, c->sock);
            zmq_close(c->sock);
        }
        for (uint32_t h = 0; h < c->nhosts; h++)
            free(c->hosts[h].xslot);
        free(c->hosts);
        free(c->req);
        live_stage_reset(L, c);
        memset(c, 0, sizeof *c);
    }
    L->ncl = 0;
    L->nslots = 0;
}

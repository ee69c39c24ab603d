/*
 * live_rpc.c - the multi-project client's exchanges with its projects' servers
 * (live.h): the scheduler RPC the engine asks for (HELLO when there is no session,
 * then RESULT or TASK_GET, answered by WELCOME and TASKS) and the master fetch
 * (MASTER_GET), carried out without blocking on the sockets of live_link.c; the
 * replies and connection events of every socket, handed to the RPC, the PSYNC of
 * live_par.c or the STATUS of live_status.c by their id.
 *
 * A request waits for its connection at most a request timeout, a single cluster
 * however long it is absent; a server that accepts the connection but does not answer
 * costs rpc.timeout_ms once per try (vcl_rpc_pump). A failed RPC goes back to the
 * engine, which tries the next endpoint or backs the project off.
 */
#include "roles/client/live/live.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "daemon/loop.h"
#include "lib/constraint.h"
#include "lib/log.h"

#define MAX_RESULTS 1024 /* MAX_BATCH of the wire */

static void send_rpc_stage(struct live *l);
static void rpc_fail(struct live *l, const char *why);
static void on_lsock(struct loop *lp, void *arg);
static void on_lmon(struct loop *lp, void *arg);

/* ---- sockets ---- */

/* A DEALER of project p connected to url and in the loop (its replies and events), or
   NULL (logged). */
struct lsock *vcl_sock_open(struct live *l, int p, const char *url)
{
    struct lsock *s = vcl_link_open(l, p, url);
    if (!s)
        return NULL;
    loop_add_socket(l->loop, s->sock, on_lsock, s);
    if (s->link.mon)
        loop_add_socket(l->loop, s->link.mon, on_lmon, s);
    return s;
}

/* (Re)creates one DEALER per scheduler endpoint of project p, keeping unchanged ones. */
int vcl_project_sockets(struct live *l, int p)
{
    struct lproj *lp = &l->proj[p];
    const struct engine_project *q = &l->e->projects[p];
    struct lsock *keep[ENGINE_MAX_ENDPOINTS] = {0};
    for (int k = 0; k < q->nendpoints; k++)
        for (int j = 0; j < lp->nsocks; j++)
            if (lp->socks[j] && !strcmp(lp->socks[j]->url, q->endpoints[k])) {
                keep[k] = lp->socks[j];
                lp->socks[j] = NULL;
                break;
            }
    for (int j = 0; j < lp->nsocks; j++)
        vcl_sock_close(l, &lp->socks[j]);
    for (int k = 0; k < q->nendpoints; k++)
        lp->socks[k] = keep[k] ? keep[k] : vcl_sock_open(l, p, q->endpoints[k]);
    lp->nsocks = q->nendpoints;
    return 0;
}

/* Adds a project to the engine and the driver; its index, or -1 (errno). */
int vcl_project_add(struct live *l, const char *name, double share, const char *const *eps,
                    int neps, const char *master)
{
    if (l->e->nprojects >= LIVE_MAX_PROJECTS) {
        errno = ENOSPC;
        return -1;
    }
    int p = engine_project_add(l->e, name, share, eps, neps, master);
    if (p < 0)
        return -1;
    memset(&l->proj[p], 0, sizeof l->proj[p]);
    vcl_project_sockets(l, p);
    return p;
}

/* ---- RPC: HELLO, RESULT/TASK_GET, MASTER_GET ---- */

/*
 * The features this host declares (issue 27): client.features (checked at start-up),
 * its architecture and its OS in lower case ("x86_64", "linux"), as a canonical list;
 * a name that is not a valid feature name is left out.
 */
static void hello_features(const struct live *l, const char *arch, const char *sys, char *out,
                           size_t cap)
{
    char all[CONFIG_STR_MAX + 2 * 70], why[160];
    int n = snprintf(all, sizeof all, "%s", l->cfg->features);
    char low[65];
    size_t k = 0;
    for (; sys[k] && k < sizeof low - 1; k++)
        low[k] = (char)tolower((unsigned char)sys[k]);
    low[k] = '\0';
    if (feature_name_ok(arch, strlen(arch)))
        n += snprintf(all + n, sizeof all - (size_t)n, ",%s", arch);
    if (feature_name_ok(low, k))
        snprintf(all + n, sizeof all - (size_t)n, ",%s", low);
    if (features_norm(all, strlen(all), out, cap, why, sizeof why) < 0)
        out[0] = '\0';
}

static void build_hello(struct live *l, int p)
{
    struct lproj *lp = &l->proj[p];
    struct utsname u;
    struct sysinfo si;
    char os[200] = "";
    memset(&u, 0, sizeof u);
    if (uname(&u) == 0)
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    uint64_t mem = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit >> 20 : 0;
    bool sid = lp->sid[0] && !strcmp(lp->session_url, l->rpc.url);
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, WT_HELLO, l->rpc.id = ++l->next_req,
               14 + sid + (lp->inc[0] != 0) + (l->cfg->cpu_gflops > 0));
    if (sid)
        wire_put_str(&l->wb, "sid", lp->sid);
    if (lp->inc[0])
        wire_put_str(&l->wb, "inc", lp->inc);
    wire_put_str(&l->wb, "client", l->cfg->code);
    wire_put_str(&l->wb, "node", l->cfg->name[0] ? l->cfg->name : l->host);
    wire_put_str(&l->wb, "cluster", l->cfg->cluster);
    wire_put_str(&l->wb, "os", os);
    wire_put_u64(&l->wb, "cores", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    wire_put_u64(&l->wb, "mem_mb", mem);
    wire_put_u64(&l->wb, "slots", (uint64_t)l->slots);
    wire_put_str(&l->wb, "arch", l->cfg->arch[0] ? l->cfg->arch : u.machine);
    char feat[CONFIG_STR_MAX + 2 * 70];
    hello_features(l, l->cfg->arch[0] ? l->cfg->arch : u.machine, u.sysname, feat, sizeof feat);
    wire_put_str(&l->wb, "features", feat);
    wire_put_str(&l->wb, "model", l->cfg->model[0] ? l->cfg->model : l->cpu_model);
    wire_put_u64(&l->wb, "mhz", (uint64_t)l->cpu_mhz);
    wire_put_bool(&l->wb, "procs", l->cfg->parallel != 0); /* PSYNC: live_par.c */
    wire_put_u64(&l->wb, "disk_mb", vcl_par_disk_mb(l, p));
    if (l->cfg->cpu_gflops > 0) /* else the cluster measures this host's speed */
        wire_put_f64(&l->wb, "cpu_gflops", l->cfg->cpu_gflops);
    wire_put_key(&l->wb, "gpus");
    wire_pack_array(&l->wb, (uint32_t)(l->e->nptypes - 1));
    for (int t = 1; t < l->e->nptypes; t++) {
        wire_pack_map(&l->wb, 3);
        wire_put_str(&l->wb, "type", l->e->ptypes[t].name);
        wire_put_u64(&l->wb, "count", (uint64_t)l->e->ptypes[t].ninstances);
        wire_put_f64(&l->wb, "gflops", l->e->ptypes[t].flops / 1e9);
    }
}

/*
 * The run time a request counts per task: the observed average, or for a host of one
 * cluster the last task's when shorter (a job of short tasks after long ones: the
 * buffer grows with the first short task, not after the average has come down over
 * many round trips; a job of long tasks after short ones is bounded by
 * client.prefetch_max), else sched.default_est_s.
 */
static double run_time(const struct live *l, const struct lproj *lp)
{
    if (!(lp->est_avg > 0))
        return l->cfg->default_est_s;
    return l->single && lp->last_s > 0 && lp->last_s < lp->est_avg ? lp->last_s : lp->est_avg;
}

/*
 * How many tasks a host of one cluster may ask for now (engine_prefetch_room): enough
 * to hold, when the reply arrives, what its slots finish over the buffer's cover (two
 * measured round trips and their variation) plus one a slot, at most slots x (1 +
 * client.prefetch_max) (that many before any run time is observed), counting those that
 * finish while the request travels. The finish rate is the slots over the observed run
 * time of the project's tasks (run_time).
 */
static double prefetch_room(const struct live *l, const struct lproj *lp, const struct lsock *s)
{
    size_t held = 0;
    for (size_t i = 0; i < l->ntasks; i++)
        held += l->tasks[i]->state != LT_DONE;
    const struct netopts_rtt *r = s ? &s->link.rtt : NULL;
    double rtt = r && r->samples ? r->srtt / 1000 : 0, cover = r ? netopts_rtt_cover_s(r) : 0;
    double cap = (double)l->slots * (1 + (double)l->cfg->prefetch_max);
    double rate = lp->est_avg > 0 ? l->slots / run_time(l, lp) : 0;
    return floor(engine_prefetch_room(cap, l->slots, (double)held, rate, rtt, cover));
}

/* The action asks for no work: its empty reply is no reason to back the type off
   (engine_rpc_done) nor to wait out the cluster's wait_s (on_tasks). */
static void no_fetch(struct engine_action *a)
{
    a->fetch = 0;
    for (int t = 0; t < ENGINE_MAX_PTYPES; t++)
        a->req[t].secs = a->req[t].instances = 0;
}

/*
 * A work fetch of a host of one cluster that has nothing to report and already holds
 * what it should (prefetch_room < 1) is not sent: it ends here, as answered with no
 * task, without a backoff. 1 if so.
 */
static int fetch_not_needed(struct live *l, const struct engine_action *a)
{
    if (!l->single || a->kind != ENGINE_ACT_RPC || !a->fetch || a->nreport > 0 || a->project < 0 ||
        a->project >= l->e->nprojects)
        return 0;
    struct lsock *s = vcl_project_sock(l, a->project, a->url ? a->url : "");
    struct lproj *lp = &l->proj[a->project];
    if (!s || !lp->welcomed || prefetch_room(l, lp, s) >= 1)
        return 0;
    struct engine_action act = *a;
    no_fetch(&act);
    struct engine_reply rep = {1, NULL, 0, 0};
    engine_rpc_done(l->e, vcl_now(), &act, &rep);
    return 1;
}

/*
 * RESULT (the results the engine chose to report, and the request) or TASK_GET when
 * there is nothing to report. The request: `req` in seconds per processor type (the
 * engine's shortfall), and `want`, a task count for clusters that do not read `req`:
 * per type the larger of the idle instances and the seconds over the project's
 * estimated task length.
 */
static void build_result(struct live *l)
{
    const struct engine_action *a = &l->rpc.act;
    struct lproj *lp = &l->proj[a->project];
    uint32_t nrep = 0, nreq = 0;
    double want = 0;
    for (size_t k = 0; k < l->rpc.nreport; k++) {
        long i = engine_task_find(l->e, l->rpc.report_ids[k]);
        nrep += i >= 0 && vcl_task_of(l, (size_t)i)->result != NULL && nrep < MAX_RESULTS;
    }
    double est = run_time(l, lp);
    for (int t = 0; t < l->e->nptypes; t++)
        if (a->req[t].secs > 0 || a->req[t].instances > 0) {
            nreq++;
            double n = ceil(a->req[t].secs / est);
            want += fmax(n, ceil(a->req[t].instances));
        }
    if (want > MAX_RESULTS)
        want = MAX_RESULTS;
    if (a->fetch && want < 1)
        want = 1;
    if (l->single && nreq) /* client.prefetch_max, and what the slots consume meanwhile */
        want = fmin(want, prefetch_room(l, lp, l->rpc.sock));
    if (l->single && nreq && want < 1) { /* enough held: no request, and no backoff */
        nreq = 0;
        no_fetch(&l->rpc.act);
    }
    /* a single cluster gets `want` alone, as from any node of it: the tasks it hands out
       are then re-issued after missed heartbeats (tasks.k_wait), not only after their
       report deadline as a volunteer's queued work (docs/client-scheduling.md 2b) */
    bool send_req = nreq > 0 && !l->single;
    uint32_t type = nrep ? WT_RESULT : WT_TASK_GET;
    bool inc = type == WT_RESULT && lp->inc[0];
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, type, l->rpc.id = ++l->next_req, 2 + send_req + inc + (nrep > 0));
    wire_put_str(&l->wb, "sid", lp->sid);
    if (inc)
        wire_put_str(&l->wb, "inc", lp->inc);
    if (nrep) {
        wire_put_key(&l->wb, "results");
        wire_pack_array(&l->wb, nrep);
        uint32_t n = 0;
        for (size_t k = 0; k < l->rpc.nreport && n < nrep; k++) {
            long i = engine_task_find(l->e, l->rpc.report_ids[k]);
            struct ltask *t = i >= 0 ? vcl_task_of(l, (size_t)i) : NULL;
            if (t && t->result) {
                msgpack_sbuffer_write(&l->wb.sb, t->result, t->rlen);
                n++;
            }
        }
    }
    wire_put_u64(&l->wb, "want", a->fetch && nreq ? (uint64_t)want : 0);
    if (send_req) {
        wire_put_key(&l->wb, "req");
        wire_pack_map(&l->wb, nreq);
        for (int t = 0; t < l->e->nptypes; t++)
            if (a->req[t].secs > 0 || a->req[t].instances > 0) {
                /* in the server's scale: it sums its own est_s (see struct lproj dcf) */
                double f = lp->dcf[t] > 0 ? lp->dcf[t] : 1;
                wire_pack_str(&l->wb, l->e->ptypes[t].name);
                msgpack_pack_double(&l->wb.pk, fmax(a->req[t].secs, a->req[t].instances * est) / f);
            }
    }
}

static void send_now(struct live *l)
{
    struct lsock *s = l->rpc.stage == 2 ? l->rpc.master : l->rpc.sock;
    if (!s) {
        rpc_fail(l, "no socket for the endpoint");
        return;
    }
    WIRE_CHECK_OUT(l->rpc.msg, l->rpc.msglen, "a request");
    if (zmq_send(s->sock, l->rpc.msg, l->rpc.msglen, ZMQ_DONTWAIT) < 0) {
        /* still connecting (no attempt failed yet): no failed round, the UP event or the
           next pass sends it (daemon/netopts.h, struct netopts_link) */
        /* a single cluster is waited for however long it is absent (as any node of it
           does): a failed round is only a server that is connected and does not answer;
           a project's endpoint that refuses fails at once, so the others go on */
        if (errno == EAGAIN && (l->single || (netopts_link_connecting(&s->link) &&
                                              loop_now_ms() < l->rpc.send_until_ms))) {
            if (!l->rpc.unsent && !s->link.said)
                log_info("project %s: waiting for the connection to %s",
                         l->e->projects[l->rpc.act.project].name, s->url);
            s->link.said = true;
            l->rpc.unsent = true;
            return;
        }
        char why[300];
        snprintf(why, sizeof why, "%s unreachable (%s)", s->url,
                 errno != EAGAIN   ? zmq_strerror(errno)
                 : s->link.refused ? "no connection: refused or timed out"
                                   : "not connected");
        rpc_fail(l, why);
        return;
    }
    l->rpc.unsent = false;
    l->rpc.sent_ms = loop_now_ms();
}

static void send_rpc_stage(struct live *l)
{
    struct lsock *s = l->rpc.stage == 2 ? l->rpc.master : l->rpc.sock;
    if (l->unsaved) { /* no result leaves before it is durable */
        l->unsaved = false;
        vcl_commit(l);
        vcl_log_finished(l);
    }
    if (l->rpc.stage == 0)
        build_hello(l, l->rpc.act.project);
    else if (l->rpc.stage == 1)
        build_result(l);
    else {
        wire_buf_reset(&l->wb);
        wire_begin(&l->wb, WT_MASTER_GET, l->rpc.id = ++l->next_req, 0);
    }
    /* the request is kept apart: heartbeats reuse l->wb while it waits to be sent */
    if (l->rpc.msgcap < l->wb.sb.size) {
        void *m = realloc(l->rpc.msg, l->wb.sb.size);
        if (!m) {
            rpc_fail(l, "out of memory");
            return;
        }
        l->rpc.msg = m;
        l->rpc.msgcap = l->wb.sb.size;
    }
    memcpy(l->rpc.msg, l->wb.sb.data, l->wb.sb.size);
    l->rpc.msglen = l->wb.sb.size;
    /* a connection still being made is waited for, at most a request timeout (each
       connect attempt ends within NETOPTS_CONNECT_TIMEOUT_MS, failed or made) */
    int64_t now = loop_now_ms();
    int64_t wait = vcl_rpc_timeout(l, s);
    if (wait < 2 * NETOPTS_CONNECT_TIMEOUT_MS)
        wait = 2 * NETOPTS_CONNECT_TIMEOUT_MS;
    l->rpc.send_until_ms = now + wait;
    l->rpc.sent_ms = now;
    send_now(l);
}

/* Starts the engine's action a (an RPC or a master fetch; the engine allows one). */
void vcl_rpc_start(struct live *l, const struct engine_action *a)
{
    struct lrpc *r = &l->rpc;
    if (fetch_not_needed(l, a))
        return;
    r->act = *a;
    snprintf(r->url, sizeof r->url, "%s", a->url ? a->url : "");
    r->act.url = r->url;
    if (a->nreport > r->report_cap) {
        uint64_t *ids = realloc(r->report_ids, a->nreport * sizeof *ids);
        size_t *idx = realloc(r->report_idx, a->nreport * sizeof *idx);
        if (ids)
            r->report_ids = ids;
        if (idx)
            r->report_idx = idx;
        if (!ids || !idx)
            return; /* the engine asks again */
        r->report_cap = a->nreport;
    }
    r->nreport = a->nreport;
    for (size_t k = 0; k < a->nreport; k++)
        r->report_ids[k] = l->e->tasks[a->report[k]].id;
    r->act.report = NULL;
    r->active = true;
    r->rehello = false;
    r->unsent = false;
    int p = a->project;
    if (a->kind == ENGINE_ACT_MASTER) {
        r->stage = 2;
        r->master = vcl_sock_open(l, p, r->url);
        log_info("project %s: reading the master list at %s", l->e->projects[p].name, r->url);
    } else {
        r->sock = vcl_project_sock(l, p, r->url);
        struct lproj *lp = &l->proj[p];
        r->stage = lp->welcomed && !strcmp(lp->session_url, r->url) ? 1 : 0;
        log_debug("project %s: RPC to %s (%s%s, %zu result(s))", l->e->projects[p].name, r->url,
                  a->fetch ? "work fetch" : "report",
                  a->reason == ENGINE_WHY_RETRY ? ", retry" : "", a->nreport);
    }
    send_rpc_stage(l);
}

static void rpc_end(struct live *l)
{
    if (l->rpc.master)
        vcl_sock_close(l, &l->rpc.master);
    l->rpc.active = false;
    l->rpc.sock = NULL;
    vcl_kick(l);
}

/* The action failed: the engine tries the next endpoint or backs the project off. */
static void rpc_fail(struct live *l, const char *why)
{
    struct lrpc *r = &l->rpc;
    int p = r->act.project;
    double now = vcl_now();
    if (r->stage == 2) {
        log_warnx("project %s: master list %s: %s", l->e->projects[p].name, r->url, why);
        engine_master_done(l->e, now, p, 0, NULL, 0);
    } else {
        struct engine_reply rep = {0};
        r->act.report = r->report_idx;
        r->act.nreport = 0;
        engine_rpc_done(l->e, now, &r->act, &rep);
        const struct engine_project *q = &l->e->projects[p];
        log_warnx("project %s: scheduler %s: %s; retry %d in %.1f s", q->name, r->url, why,
                  q->nrpc_failures,
                  fmax(0, q->min_rpc_time > q->backoff_until ? q->min_rpc_time - now
                                                             : q->backoff_until - now));
        /* the socket is kept: its heartbeats tell a dead link from a slow server, and a
           late reply is dropped by its id */
    }
    vcl_project_save(l, p);
    vcl_commit(l);
    rpc_end(l);
}

/*
 * Project p's cluster state was replaced (its state directory was reset: a new
 * incarnation in WELCOME): the tasks we hold from it, queued, running or finished,
 * belong to jobs that no longer exist there, and their ids may now name other jobs.
 * Forget them all without reporting (running ones are killed), as the single-cluster
 * client always did; the other projects are not touched.
 */
static void forget_incarnation(struct live *l, int p, const char *inc, size_t il)
{
    size_t n = vcl_project_drop_tasks(l, p, true);
    l->e->rr_dirty = l->e->sched_dirty = 1;
    log_warnx("project %s: the cluster's state changed (incarnation %s -> %.*s): forgot %zu "
              "task(s) and result(s) of the old state",
              l->e->projects[p].name, l->proj[p].inc, (int)il, inc, n);
}

static void on_welcome(struct live *l, int p, const msgpack_object *m)
{
    struct lproj *lp = &l->proj[p];
    size_t il;
    const char *inc = wire_get_str(m, "inc", &il);
    if (inc && il > 0 && il < sizeof lp->inc) {
        if (lp->inc[0] && (strlen(lp->inc) != il || memcmp(lp->inc, inc, il)))
            forget_incarnation(l, p, inc, il);
        memcpy(lp->inc, inc, il);
        lp->inc[il] = '\0';
    }
    wire_get_strbuf(m, "sid", lp->sid, sizeof lp->sid);
    snprintf(lp->session_url, sizeof lp->session_url, "%s", l->rpc.url);
    lp->hb_s = (uint32_t)wire_get_u64(m, "hb_s", 10);
    lp->poll_s = (uint32_t)wire_get_u64(m, "poll_s", 0);
    if (lp->hb_s == 0)
        lp->hb_s = 1;
    lp->welcomed = true;
    lp->last_status_ms = loop_now_ms();
    vcl_project_save(l, p);
    log_info("project %s: session %s with %s", l->e->projects[p].name, lp->sid, l->rpc.url);
}

/*
 * The server handed us a task we already hold (it expired while we were cut off and was
 * re-issued to us): keep the copy we have, under the new issue number, so that our
 * heartbeats name the issue the server waits for and protect it from another re-issue.
 * A finished result keeps the issue it was packed with: the server takes the first
 * result of a task whatever its issue. Never a second copy of one task.
 */
static void adopt_issue(struct live *l, struct ltask *t, uint32_t issue)
{
    if (issue == 0 || issue == t->issue || t->result || t->abandon)
        return;
    log_info("task %llu.%u of %s was re-issued to us (issue %u -> %u): keeping the copy we run",
             (unsigned long long)t->job, t->idx, l->e->projects[t->project].name, t->issue, issue);
    t->issue = issue;
    vcl_task_save(l, t);
}

/* TASKS answering our RESULT/TASK_GET: reported results forgotten, new tasks kept. */
/* A cluster's wait_s is over: the engine may ask for work again now. */
static void on_wait_end(struct loop *lp, void *arg)
{
    (void)lp;
    vcl_kick(arg);
}

static void on_tasks(struct live *l, int p, const msgpack_object *m)
{
    struct lrpc *r = &l->rpc;
    struct lproj *lp = &l->proj[p];
    double now = vcl_now();
    const msgpack_object *tasks = wire_get(m, "tasks");
    uint32_t n = tasks && tasks->type == MSGPACK_OBJECT_ARRAY ? tasks->via.array.size : 0;
    /* the results sent are acknowledged: the engine removes them, so do we */
    struct ltask **gone = calloc(r->nreport + 1, sizeof *gone);
    size_t ngone = 0, nidx = 0;
    for (size_t k = 0; k < r->nreport; k++) {
        long i = engine_task_find(l->e, r->report_ids[k]);
        if (i < 0)
            continue;
        r->report_idx[nidx++] = (size_t)i;
        if (gone)
            gone[ngone++] = vcl_task_of(l, (size_t)i);
    }
    if (l->ntcap < n + 1) {
        struct engine_new_task *nt = realloc(l->nt, (n + 1) * sizeof *nt);
        if (nt) {
            l->nt = nt;
            l->ntcap = n + 1;
        }
    }
    size_t nnew = 0;
    for (uint32_t k = 0; k < n && k < l->ntcap; k++) {
        const msgpack_object *tm = &tasks->via.array.ptr[k];
        uint64_t job = wire_get_u64(tm, "job", 0);
        uint32_t idx = (uint32_t)wire_get_u64(tm, "idx", 0);
        struct ltask *have = NULL;
        for (size_t i = 0; i < l->ntasks && !have; i++)
            if (l->tasks[i]->project == p && l->tasks[i]->job == job && l->tasks[i]->idx == idx)
                have = l->tasks[i];
        if (have) {
            adopt_issue(l, have, (uint32_t)wire_get_u64(tm, "issue", 0));
            continue;
        }
        struct ltask *t = vcl_task_from_map(l, p, tm);
        if (!t) {
            log_warn("cannot hold task %llu.%u (the server will re-issue it)",
                     (unsigned long long)job, idx);
            continue;
        }
        t->id = ++l->next_id;
        t->received = now;
        int pt = engine_ptype_find(l->e, t->ptype);
        l->nt[nnew++] = (struct engine_new_task){t->id,
                                                 (uint64_t)(uintptr_t)t,
                                                 pt < 0 ? 0 : pt,
                                                 pt > 0 ? (double)t->gpus : 1.0,
                                                 vcl_task_estimate(l, t),
                                                 t->deadline};
        vcl_task_save(l, t);
        if (l->ntasks == l->captasks) {
            size_t cap = l->captasks ? l->captasks * 2 : 64;
            struct ltask **nl = realloc(l->tasks, cap * sizeof *nl);
            if (!nl) {
                vcl_task_forget(l, t);
                vcl_task_free(t);
                nnew--;
                continue;
            }
            l->tasks = nl;
            l->captasks = cap;
        }
        l->tasks[l->ntasks++] = t;
    }
    struct engine_reply rep = {1, l->nt, nnew, 0};
    r->act.report = r->report_idx;
    r->act.nreport = nidx;
    if (engine_rpc_done(l->e, now, &r->act, &rep) < 0)
        log_warn("project %s: not every new task could be taken", l->e->projects[p].name);
    uint64_t wait_s = wire_get_u64(m, "wait_s", 0);
    if (l->single && l->cfg->rsc_backoff_min < 0 && nnew == 0 && r->act.fetch && wait_s > 0) {
        /* a single cluster's "nothing for you now, ask again in wait_s" replaces the
           doubling per-type backoff (which is for volunteers with several projects) */
        for (int t = 0; t < l->e->nptypes; t++) {
            struct engine_rsc *rs = &l->e->projects[p].rsc[t];
            if (rs->backoff_until > now)
                rs->backoff_until = now + (double)(wait_s < 3600 ? wait_s : 3600);
        }
        /* asked again when the wait ends, not at the next sched.tick_s after it (an idle
           node learnt of new work up to a tick late: docs/data.md "Speed") */
        loop_timer(l->loop, (int64_t)(wait_s < 3600 ? wait_s : 3600) * 1000 + 100, 0, on_wait_end,
                   l);
    }
    size_t rn;
    const char *reason = wire_get_str(m, "reason", &rn);
    if (reason && !lp->held)
        log_warnx("project %s: the server holds back tasks from this node: %.*s",
                  l->e->projects[p].name, (int)rn, reason);
    lp->held = reason != NULL;
    for (size_t k = 0; k < ngone; k++) {
        vcl_task_forget(l, gone[k]);
        vcl_task_drop(l, gone[k]);
    }
    lp->results_sent += ngone;
    lp->tasks_got += nnew;
    free(gone);
    /* tasks the engine could not take (out of memory) are dropped: the server re-issues */
    for (size_t i = 0; i < l->ntasks;) {
        struct ltask *t = l->tasks[i];
        if (t->project == p && t->state == LT_QUEUED && vcl_engine_index(l, t) < 0) {
            vcl_task_forget(l, t);
            vcl_task_drop(l, t);
        } else
            i++;
    }
    vcl_apply_cancel(l, p, wire_get(m, "cancel"));
    vcl_project_save(l, p);
    vcl_commit(l);
    log_debug("project %s: %zu result(s) reported, %zu task(s) received", l->e->projects[p].name,
              ngone, nnew);
    rpc_end(l);
}

static void on_master(struct live *l, int p, const msgpack_object *m)
{
    const msgpack_object *eps = wire_get(m, "endpoints");
    const char *list[ENGINE_MAX_ENDPOINTS];
    char buf[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    int n = 0;
    for (uint32_t k = 0; eps && k < eps->via.array.size && n < ENGINE_MAX_ENDPOINTS; k++) {
        const msgpack_object *s = &eps->via.array.ptr[k];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 ||
            s->via.str.size >= ENGINE_URL_MAX || memchr(s->via.str.ptr, 0, s->via.str.size))
            continue;
        memcpy(buf[n], s->via.str.ptr, s->via.str.size);
        buf[n][s->via.str.size] = '\0';
        list[n] = buf[n];
        n++;
    }
    if (n == 0) {
        rpc_fail(l, "the master list names no usable endpoint");
        return;
    }
    engine_master_done(l->e, vcl_now(), p, 1, list, n);
    vcl_project_sockets(l, p);
    log_info("project %s: master list read: %d scheduler endpoint(s), first %s",
             l->e->projects[p].name, n, list[0]);
    vcl_project_save(l, p);
    vcl_commit(l);
    rpc_end(l);
}

static void on_rpc_reply(struct live *l, const struct wire_msg *msg)
{
    struct lrpc *r = &l->rpc;
    int p = r->act.project;
    if (msg->type == WT_ERROR) {
        uint64_t code = wire_get_u64(msg->root, "code", 0);
        size_t n;
        const char *text = wire_get_str(msg->root, "msg", &n);
        char why[600];
        if (code == WE_SESSION && r->stage == 1 && !r->rehello) {
            l->proj[p].welcomed = false;
            r->rehello = true;
            r->stage = 0;
            send_rpc_stage(l);
            return;
        }
        snprintf(why, sizeof why, "error %s: %.*s", wire_err_name((int)code), (int)n,
                 text ? text : "");
        rpc_fail(l, why);
        return;
    }
    if (r->stage == 0 && msg->type == WT_WELCOME) {
        on_welcome(l, p, msg->root);
        r->stage = 1;
        send_rpc_stage(l);
    } else if (r->stage == 1 && msg->type == WT_TASKS) {
        on_tasks(l, p, msg->root);
    } else if (r->stage == 2 && msg->type == WT_MASTER) {
        on_master(l, p, msg->root);
    } else {
        char why[100];
        snprintf(why, sizeof why, "unexpected %s reply", msg->desc->name);
        rpc_fail(l, why);
    }
}

static void on_lsock(struct loop *lp, void *arg)
{
    struct lsock *s = arg;
    struct live *l = s->l;
    (void)lp;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        int more = 0;
        size_t sz = sizeof more;
        struct wire_msg msg;
        struct wire_error err;
        if (zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
            while (zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more &&
                   zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) >= 0)
                ;
            log_warnx("multi-frame reply from %s ignored", s->url);
        } else if (wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &msg, &err) < 0) {
            log_warnx("bad reply from %s ignored: %s", s->url, err.text);
        } else {
            int p = s->project;
            bool ours = l->rpc.active && (l->rpc.sock == s || l->rpc.master == s) &&
                        msg.id == l->rpc.id && !l->rpc.unsent;
            if (ours) { /* it may close this very socket (a master fetch's): stop here */
                netopts_rtt_sample(&s->link.rtt, loop_now_ms() - l->rpc.sent_ms);
                on_rpc_reply(l, &msg);
                wire_msg_free(&msg);
                zmq_msg_close(&m);
                return;
            }
            if (p < l->e->nprojects && vcl_par_reply(l, p, &msg))
                ; /* a PSYNC_ACK (live_par.c) */
            else if (p < l->e->nprojects && l->proj[p].status_id == msg.id && msg.id) {
                netopts_rtt_sample(&s->link.rtt, loop_now_ms() - l->proj[p].status_sent_ms);
                vcl_status_reply(l, p, &msg);
            } else
                log_debug("stale reply %llu from %s ignored", (unsigned long long)msg.id, s->url);
            wire_msg_free(&msg);
        }
        zmq_msg_close(&m);
    }
}

/*
 * Connection events of a project's socket (daemon/netopts.h, struct netopts_link). Lost: the
 * RPC or STATUS in flight on it cannot be answered any more, so it ends now. Up after a
 * loss: the link healed or the server is back, so the project's backoff wait is cut to a
 * random 0-2 s (a server that answers with errors or not at all while connected keeps
 * its exponential backoff). Up or a failed attempt: an RPC waiting for the connection
 * is sent, or fails, at once.
 */
static void on_lmon(struct loop *lp, void *arg)
{
    struct lsock *s = arg;
    struct live *l = s->l;
    struct lrpc *r = &l->rpc;
    int p = s->project, ev;
    (void)lp;
    while ((ev = netopts_link_event(&s->link, loop_now_ms())) >= 0) {
        bool waiting = r->active && r->unsent && (r->sock == s || r->master == s);
        bool in_flight = r->active && !r->unsent && (r->sock == s || r->master == s);
        if (ev == NETOPTS_EV_DOWN) {
            log_warnx("project %s: connection to %s lost", l->e->projects[p].name, s->url);
            if (p < l->e->nprojects && l->proj[p].status_sock == s) {
                l->proj[p].status_sock = NULL;
                l->proj[p].status_id = 0;
            }
            if (in_flight) {
                rpc_fail(l, "the request in flight was lost with the connection");
                return; /* rpc_fail may close a master fetch's socket: s */
            }
        } else if (ev == NETOPTS_EV_UP) {
            if (s->link.said)
                log_info("project %s: connected to %s", l->e->projects[p].name, s->url);
            s->link.said = false;
            if (s->link.healed && p < l->e->nprojects) {
                struct engine_project *q = &l->e->projects[p];
                double at = vcl_now() + (double)netopts_link_heal_ms() / 1000;
                if (q->backoff_until > at)
                    q->backoff_until = at;
                if (q->min_rpc_time > at)
                    q->min_rpc_time = at;
                vcl_kick(l);
            }
            if (waiting) {
                send_now(l);
                return;
            }
        } else if (ev == NETOPTS_EV_HANDSHAKE) {
            /* say what is wrong instead of timing out: at most once a minute */
            const char *why = curve_handshake_failure(s->link.raw_event);
            int64_t now = loop_now_ms();
            if (why && (!s->said_ms || now - s->said_ms >= 60000)) {
                log_warnx("project %s: cannot talk to %s: %s", l->e->projects[p].name, s->url, why);
                s->said_ms = now;
            }
        } else if (ev == NETOPTS_EV_RETRY && waiting) {
            send_now(l); /* fails now: the server is absent */
            return;
        }
    }
}

/* Before the engine's pass: a request waiting for its connection is sent (or fails),
   one unanswered for its timeout fails. */
void vcl_rpc_pump(struct live *l)
{
    int64_t now = loop_now_ms();
    struct lrpc *r = &l->rpc;
    if (r->active && r->unsent)
        send_now(l);
    struct lsock *rs = r->stage == 2 ? r->master : r->sock;
    if (r->active && !r->unsent && now - r->sent_ms >= vcl_rpc_timeout(l, rs)) {
        char why[100];
        snprintf(why, sizeof why, "did not answer within %lld ms",
                 (long long)vcl_rpc_timeout(l, rs));
        rpc_fail(l, why);
    }
}

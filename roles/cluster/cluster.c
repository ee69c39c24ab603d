/*
 * cluster.c - the cluster role's start-up and loop: configuration, the ROUTER socket,
 * reading requests, the group commit and the replies.
 *
 * One loop turn reads up to TURN_MAX requests, lets their handlers change the state in
 * memory and buffer the matching store writes, then (before sleeping) writes the changed
 * records, commits them in one transaction and only then sends the replies. If the
 * commit fails, every reply of the turn becomes a STORAGE error and the in-memory state
 * is reloaded from the store, so what was acknowledged and what is stored never differ.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/loop.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

#define TURN_MAX 1024
#define RID_MAX 256

struct pending_reply {
    uint8_t rid[RID_MAX];
    size_t rlen;
    bool delim; /* the peer is a REQ socket: echo the empty delimiter frame */
    uint64_t req_id;
    void *data;
    size_t len;
};

#define OFF(f) offsetof(struct cluster_cfg, f)
const struct config_key cluster_keys[] = {
    {"cluster", "listen", CONFIG_STR, "tcp://127.0.0.1:7300", OFF(listen), 0, 0, NULL,
     "ZeroMQ endpoint nodes and user tools connect to (tcp://127.0.0.1:* picks a port)"},
    {"cluster", "state_dir", CONFIG_STR, "run/cluster", OFF(state_dir), 0, 0, NULL,
     "directory of the LMDB state, stats.json/html and the endpoint file (created)"},
    {"cluster", "log_level", CONFIG_STR, "info", OFF(log_level), 0, 0, NULL,
     "error, warn, info or debug"},
    {"tasks", "k_wait", CONFIG_DOUBLE, "3", OFF(k_wait), 1, 1000, NULL,
     "re-issue a task after estimated time x k_wait without its result (X4)"},
    {"tasks", "k_wait_dead", CONFIG_DOUBLE, "6", OFF(k_wait_dead), 1, 1000, NULL,
     "mark a node inactive after its expected silence x k_wait_dead (> k_wait) (X5)"},
    {"tasks", "heartbeat_s", CONFIG_INT, "10", OFF(hb_s), 1, 86400, NULL,
     "interval at which computing nodes send STATUS heartbeats"},
    {"tasks", "idle_wait_s", CONFIG_INT, "2", OFF(idle_wait_s), 1, 86400, NULL,
     "delay a node is told to wait before asking again when there are no tasks"},
    {"tasks", "default_estimate_s", CONFIG_DOUBLE, "60", OFF(default_estimate_s), 0.001, 1e7,
     NULL, "estimated seconds per work unit before any node has reported a result"},
    {"tasks", "min_wait_s", CONFIG_DOUBLE, "5", OFF(min_wait_s), 0, 1e7, NULL,
     "never re-issue a task sooner than this after handing it out"},
    {"tasks", "input_unit_kb", CONFIG_INT, "1024", OFF(input_unit_kb), 1, 1L << 30, NULL,
     "task work = complexity x (1 + input size / input_unit_kb)"},
    {"tasks", "default_limit_s", CONFIG_INT, "3600", OFF(default_limit_s), 1, 366L * 86400,
     NULL, "wall-clock limit of a task when the job gives none"},
    {"tasks", "max_attempts", CONFIG_INT, "3", OFF(max_attempts), 1, 1000, NULL,
     "results saying a task could not run before that failure is final"},
    {"tasks", "heartbeat_extends", CONFIG_BOOL, "true", OFF(heartbeat_extends), 0, 0, NULL,
     "a heartbeat naming a running task postpones its re-issue (false: pure X-Com)"},
    {"stats", "interval_s", CONFIG_INT, "10", OFF(stats_interval_s), 1, 86400, NULL,
     "how often stats.json and stats.html are rewritten in state_dir"},
    {"store", "sync", CONFIG_ENUM, "full", OFF(sync), 0, 0, "full|meta|none",
     "full: fsync every commit; meta: skip the meta-page sync; none: no fsync"},
    {"store", "map_mb", CONFIG_INT, "64", OFF(map_mb), 1, 1L << 20, NULL,
     "initial LMDB map size in MiB (grows when full)"},
    {"queues", "count", CONFIG_INT, "3", OFF(sd_queues), 1, SD_MAXQ, NULL,
     "priority queues of parallel jobs; queue 0 is the highest (K4)"},
    {"queues", "default", CONFIG_INT, "1", OFF(sd_default_queue), 0, SD_MAXQ - 1, NULL,
     "queue of a parallel job that names none"},
    {"queues", "quantum_ms", CONFIG_INT, "1000", OFF(sd_quantum_ms), 50, 3600000, NULL,
     "gang time slice: jobs sharing hosts take turns this often (K6)"},
    {"queues", "sync_ms", CONFIG_INT, "500", OFF(sd_sync_ms), 20, 60000, NULL,
     "how often nodes report their parallel processes and fetch commands (PSYNC)"},
    {"queues", "hosts", CONFIG_STR, "", OFF(sd_hosts), 0, 0, NULL,
     "hosts file ([host] sections: cluster, speed, watchfs); empty: none (K1)"},
    {"queues", "rc", CONFIG_STR, "", OFF(sd_rc), 0, 0, NULL,
     "startup file of console commands, applied once to a new state (K9)"},
    {"nodes", "forget_after_s", CONFIG_INT, "86400", OFF(forget_after_s), 0, 1L << 40, NULL,
     "forget an inactive session holding no work this long after its last request (0: "
     "never)"},
    {"nodes", "max_sessions_per_address", CONFIG_INT, "10000", OFF(max_sessions_per_address), 0,
     1L << 31, NULL,
     "sessions per peer address; a new one over it replaces the oldest idle one, or is "
     "refused (0: no cap)"},
    {"jobs", "retention_s", CONFIG_INT, "604800", OFF(retention_s), 0, 1L << 40, NULL,
     "purge finished jobs this long after they ended (0: keep them until gridnode purge)"},
    {NULL},
};

static const struct store_table cluster_tables[] = {
    {"jobs", STORE_KEY_U64},     {"tasks", STORE_KEY_U64_U32}, {"results", STORE_KEY_U64_U32},
    {"dups", STORE_KEY_U64_U32_U32}, {"stdin", STORE_KEY_U64_U32}, {"nodes", STORE_KEY_STR},
    {"pjobs", STORE_KEY_U64}, {"scored", STORE_KEY_STR}, {"poutput", STORE_KEY_U64_U32},
    {NULL},
};

static const char usage[] =
    "usage: gridnode cluster [-c FILE] [--set section.key=value]... [--check-config]\n"
    "\n"
    "Runs the cluster manager / task server: nodes (gridnode client) pull numbered\n"
    "tasks of submitted jobs, return results, send heartbeats. State is kept in\n"
    "state_dir; a restarted cluster carries on where it stopped.\n"
    "  -c, --config FILE   INI file (see configs/cluster.ini)\n"
    "  --set S.K=V         override one key (repeatable)\n"
    "  --check-config      print the effective configuration and exit\n";

static int queue_reply(struct cluster *c, const zmq_msg_t *rid, bool delim, uint64_t req_id)
{
    if (c->nreplies == c->capreplies) {
        uint32_t cap = c->capreplies ? c->capreplies * 2 : 256;
        struct pending_reply *n = realloc(c->replies, cap * sizeof *n);
        if (!n)
            return -1;
        c->replies = n;
        c->capreplies = cap;
    }
    struct pending_reply *p = &c->replies[c->nreplies];
    p->rlen = zmq_msg_size((zmq_msg_t *)rid);
    if (p->rlen > RID_MAX || !(p->data = malloc(c->wb.sb.size)))
        return -1;
    memcpy(p->rid, zmq_msg_data((zmq_msg_t *)rid), p->rlen);
    memcpy(p->data, c->wb.sb.data, c->wb.sb.size);
    p->len = c->wb.sb.size;
    p->delim = delim;
    p->req_id = req_id;
    c->nreplies++;
    return 0;
}

static void drain_more(void *sock)
{
    int more = 1;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, sock, ZMQ_DONTWAIT);
        zmq_msg_close(&m);
    }
}

static bool rcvmore(void *sock)
{
    int more = 0;
    size_t sz = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more;
}

/* Reads one request (routing id, optional empty delimiter, body) and handles it. */
static int read_one(struct cluster *c)
{
    zmq_msg_t rid, body;
    bool delim = false;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, c->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return -1;
    }
    zmq_msg_init(&body);
    int ok = rcvmore(c->sock) && zmq_msg_recv(&body, c->sock, ZMQ_DONTWAIT) >= 0;
    if (ok && zmq_msg_size(&body) == 0 && rcvmore(c->sock)) {
        delim = true;
        zmq_msg_close(&body);
        zmq_msg_init(&body);
        ok = zmq_msg_recv(&body, c->sock, ZMQ_DONTWAIT) >= 0;
    }
    bool extra = ok && rcvmore(c->sock);
    drain_more(c->sock);
    struct wire_msg msg;
    struct wire_error err;
    wire_buf_reset(&c->wb);
    if (!ok) {
        wire_error_msg(&c->wb, 0, WE_MALFORMED, "a request is one frame after the routing id");
    } else if (extra) {
        wire_error_msg(&c->wb, 0, WE_MALFORMED, "a request must be exactly one frame");
    } else if (wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), true, &msg, &err) < 0) {
        log_debug("bad request: %s", err.text);
        wire_error_msg(&c->wb, err.id, err.code, "%s", err.text);
    } else {
        const char *peer = zmq_msg_gets(&body, "Peer-Address");
        struct request r = {&msg, peer ? peer : "", &c->wb};
        handlers_dispatch(c, &r);
        err.id = msg.id;
        wire_msg_free(&msg);
    }
    if (queue_reply(c, &rid, delim, ok && !extra ? err.id : 0) < 0)
        log_warnx("out of memory queueing a reply; the peer will retry");
    zmq_msg_close(&body);
    zmq_msg_close(&rid);
    return 0;
}

static void on_socket(struct loop *l, void *arg)
{
    struct cluster *c = arg;
    (void)l;
    for (int i = 0; i < TURN_MAX; i++)
        if (read_one(c) < 0)
            break;
}

static void send_replies(struct cluster *c)
{
    for (uint32_t i = 0; i < c->nreplies; i++) {
        struct pending_reply *p = &c->replies[i];
        int rc = zmq_send(c->sock, p->rid, p->rlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc >= 0 && p->delim)
            rc = zmq_send(c->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc >= 0)
            rc = zmq_send(c->sock, p->data, p->len, ZMQ_DONTWAIT);
        if (rc < 0)
            log_debug("reply dropped: %s (the peer retries)", zmq_strerror(errno));
        free(p->data);
    }
    c->nreplies = 0;
}

/* The turn's writes failed: answer STORAGE to everyone and reload what is stored. */
static void undo_turn(struct cluster *c)
{
    store_discard(c->store);
    for (uint32_t i = 0; i < c->nreplies; i++) {
        struct pending_reply *p = &c->replies[i];
        wire_buf_reset(&c->wb);
        wire_error_msg(&c->wb, p->req_id, WE_STORAGE,
                       "the cluster could not save state (disk full or I/O error); nothing "
                       "was changed, retry later");
        void *d = malloc(c->wb.sb.size);
        if (d) {
            memcpy(d, c->wb.sb.data, c->wb.sb.size);
            free(p->data);
            p->data = d;
            p->len = c->wb.sb.size;
        }
    }
    cluster_free_state(c);
    if (cluster_load(c) < 0)
        fatalx("cannot reload the state after a failed commit; restart the cluster");
    c->turn_failed = false;
}

static void before_sleep(struct loop *l, void *arg)
{
    struct cluster *c = arg;
    (void)l;
    if (!c->turn_failed && c->npurgeq)
        purge_step(c); /* a bounded batch of purged jobs' records */
    if (c->turn_failed) {
        undo_turn(c);
    } else {
        if (c->sd->resched) /* submissions, ends, console changes: fill freed hosts now */
            scored_schedule(c, false);
        if (cluster_save_dirty(c) < 0 || scored_save_dirty(c) < 0 || store_commit(c->store) < 0) {
            log_warn("commit failed");
            undo_turn(c);
        }
    }
    if (!c->turn_failed)
        for (uint32_t i = c->njobs; i > 0 && !c->jobs[i - 1]->issuable; i--)
            c->jobs[i - 1]->issuable = true;
    send_replies(c);
}

static void on_check(struct loop *l, void *arg)
{
    (void)l;
    struct cluster *c = arg;
    nodes_check_active(c);
    sessions_sweep(c);
    long every = c->cfg.retention_s < 10 ? c->cfg.retention_s : 10; /* seconds */
    if (every > 0 && ++c->retention_ticks >= every) {
        c->retention_ticks = 0;
        purge_retention(c);
    }
}

static void on_quantum(struct loop *l, void *arg)
{
    (void)l;
    scored_schedule(arg, true);
}

static void on_stats(struct loop *l, void *arg)
{
    (void)l;
    if (stats_write(arg) < 0)
        log_warn("cannot write the statistics files");
}

/* Creates the socket and binds it; writes the bound endpoint to state_dir/endpoint. */
static int open_socket(struct cluster *c)
{
    int zero = 0, one = 1, hwm = 100000;
    int64_t maxmsg = WIRE_MAX_FRAME;
    char ep[256];
    size_t eplen = sizeof ep;
    c->zctx = zmq_ctx_new();
    c->sock = c->zctx ? zmq_socket(c->zctx, ZMQ_ROUTER) : NULL;
    if (!c->sock)
        return -1;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zmq_bind(c->sock, c->cfg.listen) < 0) {
        log_warnx("cannot listen on %s: %s", c->cfg.listen, zmq_strerror(errno));
        return -1;
    }
    zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, ep, &eplen);
    char path[CONFIG_STR_MAX + 16];
    snprintf(path, sizeof path, "%s/endpoint", c->cfg.state_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s\n", ep);
        fclose(f);
    }
    log_info("listening on %s", ep);
    printf("gridnode cluster: listening on %s\n", ep);
    fflush(stdout);
    return 0;
}

static int cluster_open(struct cluster *c)
{
    char err[512];
    if (fs_mkdir_p(c->cfg.state_dir) < 0) {
        log_warn("cannot create state_dir %s", c->cfg.state_dir);
        return -1;
    }
    struct store_opts so = {"cluster", cluster_tables, (enum store_sync)c->cfg.sync,
                            (size_t)c->cfg.map_mb << 20, false};
    if (!(c->store = store_open(c->cfg.state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    c->t_meta = store_table(c->store, "meta");
    c->t_jobs = store_table(c->store, "jobs");
    c->t_tasks = store_table(c->store, "tasks");
    c->t_results = store_table(c->store, "results");
    c->t_dups = store_table(c->store, "dups");
    c->t_stdin = store_table(c->store, "stdin");
    c->t_nodes = store_table(c->store, "nodes");
    if (scored_open(c) < 0)
        return -1;
    const char *fault = getenv("GRIDNODE_FAULT_COMMIT");
    if (fault)
        store_fault_commit(c->store, atoi(fault));
    if (cluster_load(c) < 0) {
        log_warnx("cannot load the state from %s", c->cfg.state_dir);
        return -1;
    }
    if (scored_startup(c) < 0)
        return -1;
    log_info("state loaded: %u jobs, %u nodes, %u tasks in flight", c->njobs, c->nnodes,
             c->nheap);
    return 0;
}

static void cluster_close(struct cluster *c)
{
    if (c->store)
        store_commit(c->store);
    store_close(&c->store);
    cluster_free_state(c);
    scored_close(c);
    for (uint32_t i = 0; i < c->nreplies; i++)
        free(c->replies[i].data);
    free(c->replies);
    if (c->sock)
        zmq_close(c->sock);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    loop_destroy(&c->loop);
    wire_buf_free(&c->wb);
}

int cluster_main(int argc, char **argv)
{
    static struct cluster c;
    int rc = role_configure("cluster", usage, cluster_keys, &c.cfg, argc, argv);
    if (rc >= 0)
        return rc;
    int lvl = log_level_parse(c.cfg.log_level);
    if (lvl < 0 || c.cfg.k_wait_dead <= c.cfg.k_wait) {
        fprintf(stderr, "gridnode cluster: configuration error: %s\n",
                lvl < 0 ? "cluster.log_level must be error, warn, info or debug"
                        : "tasks.k_wait_dead must be greater than tasks.k_wait");
        return 1;
    }
    log_init("cluster", (enum log_level)lvl);
    loop_signals();
    wire_buf_init(&c.wb);
    rc = 1;
    if (!(c.sd = calloc(1, sizeof *c.sd)))
        goto out;
    if (cluster_open(&c) < 0 || !(c.loop = loop_new()) || open_socket(&c) < 0)
        goto out;
    loop_add_socket(c.loop, c.sock, on_socket, &c);
    loop_before_sleep(c.loop, before_sleep, &c);
    loop_timer(c.loop, 1000, 1, on_check, &c);
    loop_timer(c.loop, c.cfg.stats_interval_s * 1000, 1, on_stats, &c);
    loop_timer(c.loop, c.cfg.sd_quantum_ms, 1, on_quantum, &c);
    stats_write(&c);
    rc = loop_run(c.loop) < 0 ? 1 : 0;
    stats_write(&c);
    log_info("stopping");
out:
    cluster_close(&c);
    return rc;
}

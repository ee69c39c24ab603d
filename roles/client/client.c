/*
 * client.c - the live execution host (see client.h).
 *
 * At most one work request is outstanding at a time. pump() decides the next one:
 * HELLO until a session exists; RESULT (finished results plus a request for the tasks
 * needed: the free slots and a queue covering two round trips, roles/client/prefetch.h)
 * or TASK_GET. STATUS goes every poll_s while tasks are held, beside the work request
 * (its own id, as PSYNC), naming running and queued tasks alike. A freed slot starts
 * the oldest queued task at once.
 * A request unanswered within its timeout (timeout_ms, raised for long or varying
 * measured round trips) counts as a failure: the next try waits a randomized exponential
 * backoff. The socket is kept: libzmq's heartbeats tell a dead link (the connection is
 * dropped and re-made, each connect attempt bounded) from a slow server, a request that
 * cannot be sent because the socket is still connecting is not a failure, and a
 * (re)connection after a lost link ends the backoff wait early (see "Transport" below).
 * Every received task is committed to the client's store before it starts, and its
 * result before it is sent; a record is deleted only when the server acknowledged it.
 */
#include "roles/client/client.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/daemon.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/loop.h"
#include "lib/netopts.h"
#include "roles/client/health.h"
#include "roles/client/pprocs.h"
#include "roles/client/prefetch.h"
#include "roles/client/runner.h"
#include "store/store.h"
#include "wire/wire.h"

#define MAX_REPORT 64 /* results in one message */

struct ctask {
    uint64_t job;
    uint32_t idx, issue, limit_s;
    /* a task neither running nor done is queued (prefetched) */
    uint64_t seq; /* arrival order: queued tasks start first come, first served */
    double est_s; /* the cluster's run-time estimate (TASKS est_s; 0: none) */
    bool shell, running, done, in_flight;
    bool abandon;  /* cancelled by the server: stop it, report nothing */
    char bad[160]; /* the task itself cannot run anywhere (e.g. empty argv): why */
    char **argv;
    uint32_t argc;
    void *in;
    size_t inlen;
    struct run run;
    int limit_timer, kill_timer;
    void *result; /* packed result map once done */
    size_t rlen;
    struct client *c;
};

struct client {
    struct client_cfg cfg;
    struct store *store;
    int t_tasks, t_meta;
    struct loop *loop;
    void *zctx, *sock;
    struct curve_watch *watch; /* logs a failed CURVE handshake (lib/curve.h) */
    int sigfd;
    char sid[65];
    char inc[65]; /* the cluster state's incarnation our tasks came from ("": none yet) */
    bool welcomed, waiting, left;
    uint32_t hb_s, slots;
    struct ctask **tasks;
    uint32_t ntasks, captasks;
    uint64_t next_id, req_id;
    uint32_t req_type;
    uint32_t req_want; /* tasks the RESULT or TASK_GET in flight asked for */
    int64_t req_sent_ms, next_try_ms, next_fetch_ms, last_status_ms;
    uint32_t nfail;
    /* node health: set when this host cannot run tasks (not a task's own failure) */
    struct health health;
    uint32_t poll_s;
    bool held; /* the server said why it gives this node no tasks */
    struct wire_buf wb;
    struct pprocs pp; /* parallel processes of the cluster's SCore-D side */
    int64_t next_psync_ms;
    uint32_t psync_ms;
    /* PSYNC is a long-poll (wait_ms) with its own request in flight, beside the others */
    bool psync_waiting, psync_now, psync_urgent; /* urgent: sent for psync_now */
    uint64_t psync_id;
    int64_t psync_sent_ms, psync_wait_ms; /* the wait_ms the PSYNC in flight carries */
    bool unsaved; /* finished results written but not committed (save_pending) */
    /* transport (issue 16): connection events, link state, measured round trips */
    void *mon;      /* monitor of sock (lib/netopts.h) */
    bool link_down; /* not connected (never yet, or the connection was lost) */
    bool link_said; /* "waiting for the connection" was logged */
    bool link_lost; /* an established connection was lost since the last "up" */
    struct netopts_rtt rtt;
    /* latency tolerance (issue 16 item 7): prefetched tasks, roles/client/prefetch.h */
    struct prefetch pf;
    uint64_t seq, last_job; /* arrival counter; the job of the task received last */
    double last_est_s;      /* that task's est_s */
    double *left_s;         /* scratch: seconds left per running task (slots entries) */
    /* STATUS travels beside the work request (its own id), so heartbeats naming the
     * queued tasks are never held up by RESULT traffic and never hold it up */
    bool st_waiting;
    uint64_t st_id;
    int64_t st_sent_ms;
};

#define OFF(f) offsetof(struct client_cfg, f)
const struct config_key client_keys[] = {
    {"client", "server", CONFIG_STR, "tcp://127.0.0.1:7300", OFF(server), 0, 0, NULL,
     "endpoint of the cluster manager to pull tasks from"},
    {"client", "state_dir", CONFIG_STR, "run/client", OFF(state_dir), 0, 0, NULL,
     "directory of this client's LMDB state and task working directories (created)"},
    {"client", "name", CONFIG_STR, "", OFF(name), 0, 0, NULL,
     "node name reported to the server (empty: the host name)"},
    {"client", "cluster", CONFIG_STR, "", OFF(cluster), 0, 0, NULL,
     "cluster name reported to the server, for statistics"},
    {"client", "code", CONFIG_STR, "gridnode-client/1", OFF(code), 0, 0, NULL,
     "client code reported to the server (statistics group nodes by it)"},
    {"client", "arch", CONFIG_STR, "", OFF(arch), 0, 0, NULL,
     "architecture reported to the server (empty: uname's machine); hosts of one type form a cluster"},
    {"client", "model", CONFIG_STR, "", OFF(model), 0, 0, NULL,
     "CPU model reported to the server (empty: /proc/cpuinfo's model name)"},
    {"client", "parallel", CONFIG_BOOL, "true", OFF(parallel), 0, 0, NULL,
     "run the processes of parallel jobs the server assigns to this host (PSYNC)"},
    {"client", "slots", CONFIG_INT, "0", OFF(slots), 0, 4096, NULL,
     "tasks run at once (0: the number of online cores)"},
    {"client", "prefetch_max", CONFIG_INT, "16", OFF(prefetch_max), 0, 1024, NULL,
     "tasks held beyond the running ones at most, as a multiple of slots, to cover the round "
     "trip to the server (0: ask only for free slots)"},
    {"client", "log_level", CONFIG_STR, "info", OFF(log_level), 0, 0, NULL,
     "error, warn, info or debug"},
    {"rpc", "timeout_ms", CONFIG_INT, "5000", OFF(timeout_ms), 10, 3600000, NULL,
     "a request unanswered this long counts as a failed exchange"},
    {"rpc", "link_timeout_s", CONFIG_INT, "10", OFF(link_timeout_s), 1, 6553, NULL,
     "the connection to the server is dropped and re-made after this long without traffic "
     "(transport heartbeats every third of it)"},
    {"rpc", "backoff_min_s", CONFIG_DOUBLE, "1", OFF(backoff_min_s), 0.01, 86400, NULL,
     "first retry delay after a failure (doubles per failure, times U[0.5,1])"},
    {"rpc", "backoff_max_s", CONFIG_DOUBLE, "60", OFF(backoff_max_s), 0.01, 86400, NULL,
     "longest retry delay"},
    {"run", "max_output_kb", CONFIG_INT, "64", OFF(max_output_kb), 0, 16384, NULL,
     "stdout and stderr kept per task or parallel rank, each; the rest is dropped, marked truncated"},
    {"run", "kill_grace_s", CONFIG_DOUBLE, "2", OFF(kill_grace_s), 0, 3600, NULL,
     "after the wall-clock limit: SIGTERM, then SIGKILL this much later"},
    {"store", "sync", CONFIG_ENUM, "full", OFF(sync), 0, 0, "full|meta|none",
     "full: fsync every commit; meta: skip the meta-page sync; none: no fsync"},
    {"store", "map_mb", CONFIG_INT, "64", OFF(map_mb), 1, 1L << 20, NULL,
     "initial LMDB map size in MiB (grows when full)"},
    /* the multi-project client (docs/client-scheduling.md, "The live client") */
    {"client", "control", CONFIG_STR, "tcp://127.0.0.1:*", OFF(control), 0, 0, NULL,
     "multi-project client: control endpoint for gridnode client status/attach/detach "
     "(written to state_dir/endpoint)"},
    {"client", "cpu_gflops", CONFIG_DOUBLE, "0", OFF(cpu_gflops), 0, 1e9, NULL,
     "peak GFLOPS of one CPU slot (credit, REC and the clusters' run-time estimates); 0: "
     "not declared (REC counts 1 GFLOPS, clusters measure the host's speed)"},
    {"sched", "policy", CONFIG_ENUM, "rec", OFF(policy), 0, 0, "rec|debt2004",
     "project priority: rec (SP = -REC/share) or debt2004 (share / exp_avg_cpu)"},
    {"sched", "fetch", CONFIG_ENUM, "deadline", OFF(fetch), 0, 0, "deadline|boinc",
     "deadline: fetch only what can meet its deadline; boinc: BOINC-faithful buffer fill"},
    {"sched", "min_buf", CONFIG_DOUBLE, "-1", OFF(min_buf), -1, 1e9, NULL,
     "seconds: fetch work when a processor type stays saturated less than this (-1: 8640 "
     "with projects; with only client.server, what covers poll_s and two measured round "
     "trips)"},
    {"sched", "additional_buf", CONFIG_DOUBLE, "-1", OFF(additional_buf), -1, 1e9, NULL,
     "seconds of work wanted beyond min_buf (-1: 43200 with projects, 0 with only "
     "client.server)"},
    {"sched", "time_slice", CONFIG_DOUBLE, "3600", OFF(time_slice), 0.01, 1e9, NULL,
     "round-robin time slice: a task runs this long before another project's may take its slot"},
    {"sched", "poll_s", CONFIG_DOUBLE, "-1", OFF(poll_s), -1, 1e9, NULL,
     "work fetch is considered at most this often (-1: 60 with projects, 0.05 with only "
     "client.server)"},
    {"sched", "tick_s", CONFIG_DOUBLE, "1", OFF(tick_s), 0.01, 60, NULL,
     "how often the engine accounts time and decides what runs (events also trigger it)"},
    {"sched", "rpc_backoff_min", CONFIG_DOUBLE, "-1", OFF(rpc_backoff_min), -1, 1e9, NULL,
     "after n failed RPCs to a project wait min(min * 2^n, max) * U[0.5, 1] (-1: 60 with "
     "projects, rpc.backoff_min_s with only client.server)"},
    {"sched", "rpc_backoff_max", CONFIG_DOUBLE, "-1", OFF(rpc_backoff_max), -1, 1e9, NULL,
     "cap of the RPC backoff (-1: 14400 with projects, rpc.backoff_max_s with only "
     "client.server)"},
    {"sched", "rsc_backoff_min", CONFIG_DOUBLE, "-1", OFF(rsc_backoff_min), -1, 1e9, NULL,
     "first per-(project, processor type) backoff after a request for that type got nothing "
     "(-1: 600 with projects; with only client.server the cluster's wait_s)"},
    {"sched", "rsc_backoff_max", CONFIG_DOUBLE, "-1", OFF(rsc_backoff_max), -1, 1e9, NULL,
     "cap of that backoff (it doubles each time) (-1: 86400 with projects, 30 with only "
     "client.server)"},
    {"sched", "master_fetch_period", CONFIG_INT, "10", OFF(master_fetch_period), 1, 1000, NULL,
     "re-read a project's master list every this many consecutive RPC failures"},
    {"sched", "report_cushion", CONFIG_DOUBLE, "86400", OFF(report_cushion), 0, 1e9, NULL,
     "report a result once its deadline is this close"},
    {"sched", "report_max_delay", CONFIG_DOUBLE, "-1", OFF(report_max_delay), -1, 1e9, NULL,
     "report a result at the latest this long after it finished (-1: 86400 with projects, 0 "
     "with only client.server: at once)"},
    {"sched", "default_deadline_s", CONFIG_DOUBLE, "86400", OFF(default_deadline_s), 1, 1e9,
     NULL, "report deadline of a task whose server gave none (seconds after it arrived)"},
    {"sched", "default_est_s", CONFIG_DOUBLE, "60", OFF(default_est_s), 0.001, 1e9, NULL,
     "run-time estimate of a task whose server gave none, until the project's own tasks "
     "have been timed"},
    {"project *", "share", CONFIG_STR, "100", 0, 0, 0, NULL, "resource share"},
    {"project *", "endpoints", CONFIG_STR, "", 0, 0, 0, NULL,
     "scheduler endpoints (cluster managers), comma-separated, tried in order"},
    {"project *", "master", CONFIG_STR, "", 0, 0, 0, NULL,
     "master endpoint answering MASTER_GET with the current scheduler endpoints"},
    {"gpu *", "count", CONFIG_STR, "1", 0, 0, 0, NULL, "instances of this GPU type (the NAME)"},
    {"gpu *", "gflops", CONFIG_STR, "1", 0, 0, 0, NULL, "peak GFLOPS of one instance"},
    CURVE_CONFIG_KEYS(struct client_cfg, sec),
    {NULL},
};

static const struct store_table client_tables[] = {{"tasks", STORE_KEY_U64_U32}, {NULL}};

static const char usage[] =
    "usage: gridnode client [-c FILE] [--set section.key=value]... [--check-config]\n"
    "\n"
    "Runs an execution host: pulls tasks from a cluster manager, runs each as a real\n"
    "process (up to client.slots at once), returns results, heartbeats while\n"
    "computing, retries with backoff while the server is unreachable. SIGTERM or\n"
    "SIGINT: stop the running tasks, report finished results, leave.\n"
    "  -c, --config FILE   INI file (see configs/client.ini)\n"
    "  --set S.K=V         override one key (repeatable)\n"
    "  --check-config      print the effective configuration and exit\n";

static void pump(struct client *c);

/* ---- store records ---- */

static void task_key(uint8_t key[12], const struct ctask *t)
{
    store_key_u64_u32(key, t->job, t->idx);
}

static int task_save(struct client *c, struct ctask *t)
{
    struct wire_buf wb;
    uint8_t key[12];
    wire_buf_init(&wb);
    wire_pack_map(&wb, t->done ? 8 : 7);
    wire_put_u64(&wb, "job", t->job);
    wire_put_u64(&wb, "idx", t->idx);
    wire_put_u64(&wb, "issue", t->issue);
    wire_put_u64(&wb, "limit_s", t->limit_s);
    wire_put_bool(&wb, "shell", t->shell);
    wire_put_strv(&wb, "argv", t->argv, (uint32_t)t->argc);
    wire_put_bin(&wb, "stdin", t->in ? t->in : "", t->inlen);
    if (t->done)
        wire_put_bin(&wb, "result", t->result, t->rlen);
    task_key(key, t);
    int rc = store_put(c->store, c->t_tasks, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

static void node_sick(struct client *c, const char *why);
static void commit(struct client *c);

/*
 * Results finished in one loop turn are committed together, once, before any request
 * is built (pump, client_leave): one fsync for many tasks (issue 11 item 11), and
 * still no result is sent before it is durable.
 */
static void save_pending(struct client *c)
{
    if (c->unsaved) {
        c->unsaved = false;
        commit(c);
    }
}

static void commit(struct client *c)
{
    if (store_commit(c->store) < 0) {
        char why[CONFIG_STR_MAX + 64];
        log_warn("cannot save the client state in %s", c->cfg.state_dir);
        snprintf(why, sizeof why, "cannot write its state in %s: %s", c->cfg.state_dir,
                 strerror(errno));
        node_sick(c, why);
    }
}

/* ---- node health (roles/client/health.h) ---- */

static void node_sick(struct client *c, const char *why)
{
    health_sick(&c->health, why, loop_now_ms());
}

static void task_free(struct ctask *t)
{
    if (!t)
        return;
    runner_cleanup(&t->run);
    for (uint32_t i = 0; i < t->argc; i++)
        free(t->argv[i]);
    free(t->argv);
    free(t->in);
    free(t->result);
    free(t);
}

/*
 * Builds a task from a map with job, idx, issue, limit_s, shell, argv, stdin. A task
 * that cannot run anywhere (no argv, a non-string or NUL-holding element) is still
 * built, with t->bad saying why, so that it is reported as a failed result rather
 * than dropped and handed out again. NULL only when memory ran out.
 */
static struct ctask *task_from_map(struct client *c, const msgpack_object *m)
{
    const msgpack_object *argv = wire_get(m, "argv");
    struct ctask *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->run.out.fd = t->run.err.fd = -1; /* before any exit: task_free closes them */
    t->run.pid = -1;
    t->c = c;
    t->job = wire_get_u64(m, "job", 0);
    t->idx = (uint32_t)wire_get_u64(m, "idx", 0);
    t->issue = (uint32_t)wire_get_u64(m, "issue", 0);
    uint64_t lim = wire_get_u64(m, "limit_s", 3600);
    t->limit_s = lim > UINT32_MAX ? UINT32_MAX : (uint32_t)lim; /* not a wrapped 0 */
    t->shell = wire_get_bool(m, "shell", false);
    double est = wire_get_f64(m, "est_s", 0);
    t->est_s = est > 0 && est < 1e9 ? est : 0; /* NaN and nonsense: unknown */
    t->argc = argv && argv->type == MSGPACK_OBJECT_ARRAY ? argv->via.array.size : 0;
    if (!(t->argv = calloc(t->argc + 1, sizeof *t->argv)))
        goto fail;
    if (t->argc == 0)
        snprintf(t->bad, sizeof t->bad, "invalid task: argv is empty");
    for (uint32_t i = 0; i < t->argc; i++) {
        const msgpack_object *a = &argv->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_STR || memchr(a->via.str.ptr, 0, a->via.str.size)) {
            snprintf(t->bad, sizeof t->bad, "invalid task: argv[%u] is not a string", i);
            t->argc = i; /* the elements after it are not ours to free */
            break;
        }
        if (!(t->argv[i] = strndup(a->via.str.ptr, a->via.str.size)))
            goto fail;
    }
    if (!t->bad[0] && t->argv[0][0] == '\0')
        snprintf(t->bad, sizeof t->bad, "invalid task: argv[0] is empty");
    size_t n;
    const void *in = wire_get_bin(m, "stdin", &n);
    if (in && n && !(t->in = malloc(n)))
        goto fail;
    if (in && n)
        memcpy(t->in, in, n);
    t->inlen = in ? n : 0;
    return t;
fail:
    task_free(t);
    return NULL;
}

static int add_task(struct client *c, struct ctask *t)
{
    if (c->ntasks == c->captasks) {
        uint32_t cap = c->captasks ? c->captasks * 2 : 16;
        struct ctask **n = realloc(c->tasks, cap * sizeof *n);
        if (!n)
            return -1;
        c->tasks = n;
        c->captasks = cap;
    }
    t->seq = ++c->seq;
    c->tasks[c->ntasks++] = t;
    return 0;
}

static struct ctask *find_task(struct client *c, uint64_t job, uint32_t idx)
{
    for (uint32_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i]->job == job && c->tasks[i]->idx == idx)
            return c->tasks[i];
    return NULL;
}

static void drop_task(struct client *c, uint32_t i)
{
    uint8_t key[12];
    struct ctask *t = c->tasks[i];
    task_key(key, t);
    store_del(c->store, c->t_tasks, key, sizeof key);
    if (t->running) {
        runner_signal(&t->run, SIGKILL);
        if (t->run.out.fd >= 0)
            loop_remove_fd(c->loop, t->run.out.fd);
        if (t->run.err.fd >= 0)
            loop_remove_fd(c->loop, t->run.err.fd);
    }
    loop_timer_cancel(c->loop, t->limit_timer);
    loop_timer_cancel(c->loop, t->kill_timer);
    task_free(t);
    c->tasks[i] = c->tasks[--c->ntasks];
}

/* Tasks held and not finished: running or queued (all of them are named in STATUS). */
static uint32_t count_running(const struct client *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->ntasks; i++)
        n += !c->tasks[i]->done;
    return n;
}

/* Tasks holding a slot: a process started (a cancelled one until it is gone). */
static uint32_t count_active(const struct client *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->ntasks; i++)
        n += c->tasks[i]->running;
    return n;
}

/* ---- running tasks ---- */

/* Packs the result map of a finished run into t->result. */
static void finish(struct client *c, struct ctask *t)
{
    struct run *r = &t->run;
    struct wire_buf wb;
    bool err = r->error[0] != '\0', bad = t->bad[0] != '\0';
    int64_t wall = (r->end_ms ? r->end_ms : loop_now_ms()) - r->start_ms;
    wire_buf_init(&wb);
    runner_pack_result(r, t->job, t->idx, t->issue, (double)wall / 1000.0, NULL,
                       bad ? t->bad : NULL, &wb);
    t->result = malloc(wb.sb.size);
    if (t->result) {
        memcpy(t->result, wb.sb.data, wb.sb.size);
        t->rlen = wb.sb.size;
    }
    wire_buf_free(&wb);
    if (!err && !bad && !r->timed_out && r->reaped && wall > 0)
        prefetch_observe(&c->pf, t->job, (double)wall / 1000.0);
    t->done = true;
    t->running = false;
    loop_timer_cancel(c->loop, t->limit_timer);
    loop_timer_cancel(c->loop, t->kill_timer);
    task_save(c, t);
    c->unsaved = true; /* committed before it is sent (save_pending) */
    log_info("task %llu.%u finished: %s", (unsigned long long)t->job, t->idx,
             bad            ? t->bad
             : err          ? r->error
             : r->timed_out ? "wall-clock limit"
                            : "ran");
    runner_cleanup(&t->run);
}

static void check_finished(struct client *c, struct ctask *t)
{
    if (!t->running || !runner_finished(&t->run))
        return;
    if (!t->abandon) {
        finish(c, t);
        return;
    }
    for (uint32_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i] == t) {
            log_info("task %llu.%u stopped (cancelled by the server)", (unsigned long long)t->job,
                     t->idx);
            drop_task(c, i);
            return;
        }
}

/* Reads one of t's pipes; unregisters it from the loop once it reached end of file. */
static void read_pipe(struct client *c, struct ctask *t, int fd)
{
    if (fd < 0)
        return;
    runner_read(&t->run, fd);
    if (fd != t->run.out.fd && fd != t->run.err.fd)
        loop_remove_fd(c->loop, fd);
}

static void on_out(struct loop *l, void *arg)
{
    struct ctask *t = arg;
    (void)l;
    read_pipe(t->c, t, t->run.out.fd);
    check_finished(t->c, t);
}

static void on_err(struct loop *l, void *arg)
{
    struct ctask *t = arg;
    (void)l;
    read_pipe(t->c, t, t->run.err.fd);
    check_finished(t->c, t);
}

static void on_kill(struct loop *l, void *arg)
{
    struct ctask *t = arg;
    (void)l;
    t->kill_timer = 0;
    runner_signal(&t->run, SIGKILL);
}

static void on_limit(struct loop *l, void *arg)
{
    struct ctask *t = arg;
    t->limit_timer = 0;
    t->run.timed_out = true;
    log_info("task %llu.%u over its %u s limit: stopping it", (unsigned long long)t->job, t->idx,
             t->limit_s);
    runner_signal(&t->run, SIGTERM);
    t->kill_timer = loop_timer(l, (int64_t)(t->c->cfg.kill_grace_s * 1000), 0, on_kill, t);
}

static void start_task(struct client *c, struct ctask *t)
{
    char wd[CONFIG_STR_MAX + 64];
    snprintf(wd, sizeof wd, "%s/work/%llu.%u", c->cfg.state_dir, (unsigned long long)t->job,
             t->idx);
    t->running = true;
    if (t->bad[0]) {
        log_warnx("task %llu.%u from the server: %s", (unsigned long long)t->job, t->idx, t->bad);
        t->run.start_ms = loop_now_ms();
        finish(c, t);
        return;
    }
    if (c->health.sick[0]) { /* hand it back at once: a healthy node should run it */
        t->run.start_ms = loop_now_ms();
        snprintf(t->run.error, sizeof t->run.error, "node unhealthy: %.200s", c->health.sick);
        finish(c, t);
        return;
    }
    if (runner_start(&t->run, t->argv, t->shell, t->in, t->inlen, wd,
                     (size_t)c->cfg.max_output_kb * 1024) < 0) {
        log_warnx("task %llu.%u: %s", (unsigned long long)t->job, t->idx, t->run.error);
        if (t->run.host_fault)
            node_sick(c, t->run.error);
        t->run.reaped = false;
        finish(c, t);
        return;
    }
    loop_add_fd(c->loop, t->run.out.fd, on_out, t);
    loop_add_fd(c->loop, t->run.err.fd, on_err, t);
    t->limit_timer = loop_timer(c->loop, (int64_t)t->limit_s * 1000, 0, on_limit, t);
    log_debug("task %llu.%u started: pid %d", (unsigned long long)t->job, t->idx, (int)t->run.pid);
}

/*
 * Starts queued tasks, oldest first, while a slot is free: a slot freed by a finished
 * task takes the next queued one in the same loop turn, without asking the server.
 */
static void start_queued(struct client *c)
{
    uint32_t active = count_active(c);
    while (active < c->slots) {
        struct ctask *next = NULL;
        for (uint32_t i = 0; i < c->ntasks; i++) {
            struct ctask *t = c->tasks[i];
            if (!t->running && !t->done && !t->abandon && (!next || t->seq < next->seq))
                next = t;
        }
        if (!next)
            return;
        start_task(c, next);
        active += next->running; /* a task that could not start is finished already */
    }
}

static void on_sigchld(struct loop *l, void *arg)
{
    struct client *c = arg;
    struct signalfd_siginfo si;
    (void)l;
    while (read(c->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    int status;
    struct rusage ru;
    pid_t pid;
    while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
        if (pprocs_reaped(&c->pp, pid, status, &ru)) {
            c->psync_now = true; /* report the exit at once (PSYNC long-poll) */
            continue;
        }
        for (uint32_t i = 0; i < c->ntasks; i++) {
            struct ctask *t = c->tasks[i];
            if (t->running && t->run.pid == pid) {
                runner_reaped(&t->run, status, &ru);
                read_pipe(c, t, t->run.out.fd);
                read_pipe(c, t, t->run.err.fd);
                check_finished(c, t);
                break;
            }
        }
    }
}

/* ---- talking to the server ---- */

static void on_socket(struct loop *l, void *arg);

static void on_monitor(struct loop *l, void *arg);

/* Creates the DEALER socket (kept for the client's life) and its connection monitor. */
static int open_socket(struct client *c)
{
    int zero = 0, one = 1;
    int64_t maxmsg = WIRE_MAX_FRAME;
    curve_watch_destroy(&c->watch);
    if (c->sock) {
        if (c->loop)
            loop_remove_socket(c->loop, c->sock);
        zmq_close(c->sock);
    }
    c->sock = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!c->sock)
        return -1;
    if (c->loop)
        loop_add_socket(c->loop, c->sock, on_socket, c);
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    netopts_liveness(c->sock, c->cfg.link_timeout_s * 1000);
    netopts_connecting(c->sock);
    char name[40];
    snprintf(name, sizeof name, "client-%p", c->sock);
    c->link_down = true;
    if (!(c->mon = netopts_monitor(c->zctx, c->sock, name)))
        log_warnx("cannot watch the connection to %s (%s): heal detection waits for backoff",
                  c->cfg.server, zmq_strerror(errno));
    else if (c->loop)
        loop_add_socket(c->loop, c->mon, on_monitor, c);
    char err[800];
    if (curve_client_apply(c->sock, &c->cfg.sec, c->cfg.server, err, sizeof err) < 0) {
        log_warnx("%s", err);
        fprintf(stderr, "gridnode client: %s\n", err);
        return -1;
    }
    if (c->loop && curve_client_secure(&c->cfg.sec))
        c->watch = curve_watch_new(c->zctx, c->loop, c->sock, c->cfg.server);
    if (zmq_connect(c->sock, c->cfg.server) < 0) {
        log_warnx("cannot connect to %s: %s", c->cfg.server, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

static void clear_in_flight(struct client *c)
{
    for (uint32_t i = 0; i < c->ntasks; i++)
        c->tasks[i]->in_flight = false;
}

/* An exchange failed: rebuild the socket, retry after a randomized exponential backoff. */
static void failed(struct client *c, const char *why)
{
    double d = c->cfg.backoff_min_s * pow(2.0, c->nfail < 30 ? c->nfail : 30);
    if (d > c->cfg.backoff_max_s)
        d = c->cfg.backoff_max_s;
    d *= 0.5 + 0.5 * ((double)random() / RAND_MAX);
    c->nfail++;
    c->waiting = false;
    c->psync_waiting = false; /* the socket is rebuilt: its reply cannot come */
    c->st_waiting = false;
    clear_in_flight(c);
    c->next_try_ms = loop_now_ms() + (int64_t)(d * 1000);
    log_warnx("%s; retry %u in %.1f s", why, c->nfail, d);
}

/* ---- transport ---- */

/*
 * A send found no connection (EAGAIN: ZMQ_IMMEDIATE queues nothing while the socket is
 * still connecting). Not a failed round: libzmq keeps trying to connect (each attempt
 * bounded by NETOPTS_CONNECT_TIMEOUT_MS) and the "up" event brings the next try forward;
 * until then look again every 250 ms.
 */
static void not_connected(struct client *c)
{
    if (!c->link_said)
        log_info("waiting for the connection to %s", c->cfg.server);
    c->link_said = true;
    c->link_down = true;
    int64_t again = loop_now_ms() + 250;
    if (c->next_try_ms < again)
        c->next_try_ms = again;
}

/*
 * Connection events. Lost: a request in flight cannot be answered any more (DEALER
 * replies follow the connection), so it ends now, as a failure only if the connection
 * had been up when it was sent. Up after a loss: the link healed or the server is back,
 * so a long backoff wait is cut to a random 0-2 s (spread, so that thousands of hosts
 * reconnecting to a restarted server do not send at once). A server that answers with
 * errors or not at all while connected keeps its exponential backoff.
 */
static void on_monitor(struct loop *l, void *arg)
{
    struct client *c = arg;
    (void)l;
    int ev;
    while ((ev = netopts_monitor_read(c->mon)) >= 0) {
        int64_t now = loop_now_ms();
        if (ev == NETOPTS_EV_DOWN) {
            log_warnx("connection to %s lost", c->cfg.server);
            c->link_down = c->link_lost = true;
            if (c->waiting || c->psync_waiting || c->st_waiting)
                failed(c, "the request in flight was lost with the connection");
        } else if (ev == NETOPTS_EV_UP) {
            if (c->link_down && c->link_said)
                log_info("connected to %s", c->cfg.server);
            int64_t at = c->link_lost ? now + random() % 2001 : now;
            if (c->link_down && c->next_try_ms > at)
                c->next_try_ms = at;
            c->link_down = c->link_said = c->link_lost = false;
        }
    }
}

/* The current request's timeout: timeout_ms, longer when measured round trips are. */
static int64_t request_timeout(const struct client *c)
{
    return netopts_rtt_timeout(&c->rtt, c->cfg.timeout_ms);
}

static void send_request(struct client *c, uint32_t type)
{
    if (zmq_send(c->sock, c->wb.sb.data, c->wb.sb.size, ZMQ_DONTWAIT) < 0) {
        char why[300];
        if (errno == EAGAIN) {
            clear_in_flight(c);
            not_connected(c);
            return;
        }
        snprintf(why, sizeof why, "server %s unreachable (%s)", c->cfg.server, zmq_strerror(errno));
        failed(c, why);
        return;
    }
    c->waiting = true;
    c->req_type = type;
    c->req_sent_ms = loop_now_ms();
}

static void send_hello(struct client *c)
{
    struct utsname u;
    struct sysinfo si;
    char os[200] = "", host[256] = "";
    long mhz = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256], model[128] = "";
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu MHz", 7) && strchr(line, ':') && !mhz)
            mhz = strtol(strchr(line, ':') + 1, NULL, 10);
        if (!strncmp(line, "model name", 10) && strchr(line, ':') && !model[0]) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = '\0';
        }
    }
    if (f)
        fclose(f);
    memset(&u, 0, sizeof u);
    if (uname(&u) == 0)
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    gethostname(host, sizeof host - 1);
    uint64_t mem = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit >> 20 : 0;
    wire_buf_reset(&c->wb);
    wire_begin(&c->wb, WT_HELLO, c->req_id = ++c->next_id,
               (c->sid[0] ? 13 : 12) + (c->inc[0] != 0));
    if (c->sid[0])
        wire_put_str(&c->wb, "sid", c->sid);
    if (c->inc[0])
        wire_put_str(&c->wb, "inc", c->inc);
    wire_put_str(&c->wb, "client", c->cfg.code);
    wire_put_str(&c->wb, "node", c->cfg.name[0] ? c->cfg.name : host);
    wire_put_str(&c->wb, "cluster", c->cfg.cluster);
    wire_put_str(&c->wb, "os", os);
    wire_put_u64(&c->wb, "mhz", (uint64_t)mhz);
    wire_put_u64(&c->wb, "cores", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    wire_put_u64(&c->wb, "mem_mb", mem);
    wire_put_u64(&c->wb, "slots", c->slots);
    wire_put_str(&c->wb, "arch", c->cfg.arch[0] ? c->cfg.arch : u.machine);
    wire_put_str(&c->wb, "model", c->cfg.model[0] ? c->cfg.model : model);
    wire_put_u64(&c->wb, "disk_mb", pprocs_free_disk_mb(&c->pp));
    wire_put_bool(&c->wb, "procs", c->cfg.parallel != 0);
    send_request(c, WT_HELLO);
}

/*
 * Builds RESULT (or LEAVE) with up to MAX_REPORT finished results into c->wb, or
 * TASK_GET when a RESULT would carry none. Returns the type built.
 */
static uint32_t build_results(struct client *c, uint32_t type, uint32_t want)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->ntasks && n < MAX_REPORT; i++)
        n += c->tasks[i]->done && c->tasks[i]->result;
    if (n == 0 && type == WT_RESULT)
        type = WT_TASK_GET;
    wire_buf_reset(&c->wb);
    bool inc = type != WT_TASK_GET && c->inc[0];
    uint32_t nf = type == WT_RESULT ? 3 : 2;
    wire_begin(&c->wb, type, c->req_id = ++c->next_id, nf + inc);
    wire_put_str(&c->wb, "sid", c->sid);
    if (inc) /* the cluster drops results of another state's tasks (job ids restart) */
        wire_put_str(&c->wb, "inc", c->inc);
    if (type != WT_TASK_GET) {
        wire_put_key(&c->wb, "results");
        wire_pack_array(&c->wb, n);
        for (uint32_t i = 0, k = 0; i < c->ntasks && k < n; i++) {
            struct ctask *t = c->tasks[i];
            if (t->done && t->result) {
                msgpack_sbuffer_write(&c->wb.sb, t->result, t->rlen);
                t->in_flight = true;
                k++;
            }
        }
    }
    if (type != WT_LEAVE)
        wire_put_u64(&c->wb, "want", want);
    return type;
}

static void send_results(struct client *c, uint32_t type, uint32_t want)
{
    c->req_want = want;
    send_request(c, build_results(c, type, want));
}

/*
 * The heartbeat, with its own id beside the work request: it names every task held,
 * running or queued (wire.md 5.5), so that a prefetched task waiting here is not
 * re-issued to another node.
 */
static void send_status(struct client *c)
{
    uint32_t n = count_running(c);
    wire_buf_reset(&c->wb);
    wire_begin(&c->wb, WT_STATUS, c->st_id = ++c->next_id, 2);
    wire_put_str(&c->wb, "sid", c->sid);
    wire_put_key(&c->wb, "running");
    wire_pack_array(&c->wb, n);
    for (uint32_t i = 0; i < c->ntasks; i++) {
        const struct ctask *t = c->tasks[i];
        if (t->done)
            continue;
        wire_pack_map(&c->wb, 3);
        wire_put_u64(&c->wb, "job", t->job);
        wire_put_u64(&c->wb, "idx", t->idx);
        wire_put_u64(&c->wb, "issue", t->issue);
    }
    c->last_status_ms = loop_now_ms();
    if (zmq_send(c->sock, c->wb.sb.data, c->wb.sb.size, ZMQ_DONTWAIT) < 0) {
        char why[300];
        if (errno == EAGAIN) {
            not_connected(c);
            return;
        }
        snprintf(why, sizeof why, "server %s unreachable (%s)", c->cfg.server, zmq_strerror(errno));
        failed(c, why);
        return;
    }
    c->st_waiting = true;
    c->st_sent_ms = c->last_status_ms;
}

/* The heartbeat: due every poll_s (<= hb_s) while tasks are held; fails when overdue. */
static void pump_status(struct client *c, int64_t now)
{
    if (!c->welcomed)
        return;
    if (c->st_waiting) {
        if (now - c->st_sent_ms >= request_timeout(c)) {
            char why[300];
            snprintf(why, sizeof why, "server %s did not answer STATUS within %lld ms",
                     c->cfg.server, (long long)request_timeout(c));
            c->st_waiting = false;
            failed(c, why);
        }
        return;
    }
    /* while computing, check in every poll_s (<= hb_s) so that a cancel arrives soon */
    uint32_t every = c->poll_s && c->poll_s < c->hb_s ? c->poll_s : c->hb_s;
    if (now >= c->next_try_ms && count_running(c) > 0 &&
        now - c->last_status_ms >= (int64_t)every * 1000)
        send_status(c);
}

/*
 * How many tasks to ask for (roles/client/prefetch.h): the free slots, plus what covers
 * two round trips at the measured task durations, at most prefetch_max x slots queued
 * (and 1,024 held, the wire's cap). None while this node is unhealthy.
 */
static uint32_t fetch_want(struct client *c, int64_t now)
{
    if (c->health.sick[0])
        return 0;
    uint64_t max = (uint64_t)c->slots * (1 + (uint64_t)c->cfg.prefetch_max);
    if (max > 1024)
        max = c->slots > 1024 ? c->slots : 1024;
    struct prefetch_need n = {.slots = c->slots, .left_s = c->left_s, .max_held = (uint32_t)max};
    for (uint32_t i = 0; i < c->ntasks; i++) {
        struct ctask *t = c->tasks[i];
        if (t->done)
            continue;
        if (!t->running) {
            n.queued++;
            continue;
        }
        if (c->left_s && n.running < c->slots) {
            double est = prefetch_job_s(&c->pf, t->job);
            c->left_s[n.running] =
                prefetch_left_s(est > 0 ? est : t->est_s, (double)(now - t->run.start_ms) / 1000);
        }
        n.running++;
    }
    if (n.running > c->slots) /* cancelled tasks still stopping */
        n.running = c->slots;
    double next = prefetch_job_s(&c->pf, c->last_job);
    n.next_s = next > 0 ? next : c->last_est_s;
    n.cover_s = prefetch_cover_s(c->rtt.srtt, c->rtt.rttvar, c->rtt.samples);
    return prefetch_want(&n);
}

static void apply_cancel(struct client *c, const msgpack_object *cancel);

static void on_status_reply(struct client *c, const struct wire_msg *msg)
{
    c->st_waiting = false;
    netopts_rtt_sample(&c->rtt, loop_now_ms() - c->st_sent_ms);
    if (msg->type == WT_STATUS_ACK) {
        apply_cancel(c, wire_get(msg->root, "cancel"));
        return;
    }
    if (msg->type != WT_ERROR) {
        log_warnx("unexpected %s reply to STATUS ignored", msg->desc->name);
        return;
    }
    uint64_t code = wire_get_u64(msg->root, "code", 0);
    size_t n;
    const char *text = wire_get_str(msg->root, "msg", &n);
    if (code == WE_SESSION) {
        log_info("server forgot this session (STATUS); saying HELLO again");
        c->welcomed = false;
        return;
    }
    log_warnx("STATUS refused: %s: %.*s", wire_err_name((int)code), (int)n, text ? text : "");
}

/*
 * PSYNC travels beside the other requests (its own id): it is a long-poll the cluster
 * holds up to wait_ms = the sync interval while nothing changes for this node. A new
 * one goes at once when a process exits or the last reply changed processes; the
 * cluster then answers the held one first (its reply is ignored here: stale id).
 */
static void send_psync(struct client *c)
{
    wire_buf_reset(&c->wb);
    wire_begin(&c->wb, WT_PSYNC, c->psync_id = ++c->next_id, 4);
    wire_put_str(&c->wb, "sid", c->sid);
    pprocs_pack(&c->pp, &c->wb);
    wire_put_u64(&c->wb, "wait_ms", c->psync_ms);
    c->psync_wait_ms = c->psync_ms;
    c->psync_sent_ms = loop_now_ms();
    c->next_psync_ms = c->psync_sent_ms + c->psync_ms;
    c->psync_urgent = c->psync_now;
    c->psync_now = false;
    if (zmq_send(c->sock, c->wb.sb.data, c->wb.sb.size, ZMQ_DONTWAIT) < 0) {
        char why[300];
        c->psync_waiting = false;
        if (errno == EAGAIN) {
            c->psync_now = c->psync_urgent; /* keep an exit report urgent */
            not_connected(c);
            return;
        }
        snprintf(why, sizeof why, "server %s unreachable (%s)", c->cfg.server, zmq_strerror(errno));
        failed(c, why);
        return;
    }
    c->psync_waiting = true;
}

static void on_psync_ack(struct client *c, const struct wire_msg *msg)
{
    uint32_t changes = c->pp.changes;
    c->psync_waiting = false;
    if (msg->type == WT_ERROR) {
        uint64_t code = wire_get_u64(msg->root, "code", 0);
        if (code == WE_SESSION) {
            log_info("server forgot this session (PSYNC); saying HELLO again");
            c->welcomed = false;
        } else {
            size_t n;
            const char *text = wire_get_str(msg->root, "msg", &n);
            log_warnx("PSYNC refused: %s: %.*s", wire_err_name((int)code), (int)n,
                      text ? text : "");
        }
        return;
    }
    if (msg->type != WT_PSYNC_ACK) {
        log_warnx("unexpected %s reply to PSYNC ignored", msg->desc->name);
        return;
    }
    pprocs_apply(&c->pp, msg->root);
    c->psync_ms = (uint32_t)wire_get_u64(msg->root, "sync_ms", 1000);
    if (c->psync_ms < 10)
        c->psync_ms = 10;
    /*
     * Keep a long-poll in flight: the next PSYNC goes at once after a reply that was held
     * (it came late), that answered a report sent at once (an exit), or that changed
     * processes (report them). A quick reply to a routine PSYNC that changed nothing (a
     * cluster that does not hold) is followed after the sync interval, as without
     * long-polls, so such a cluster is not flooded.
     */
    int64_t now = loop_now_ms();
    bool quick = !c->psync_urgent && now - c->psync_sent_ms < c->psync_wait_ms / 2;
    c->next_psync_ms = quick ? c->psync_sent_ms + c->psync_ms : now;
    if (c->pp.changes != changes)
        c->psync_now = true;
}

/* The PSYNC long-poll: sends one when due; fails the exchange when it is overdue. */
static void pump_psync(struct client *c, int64_t now)
{
    if (!c->cfg.parallel || !c->welcomed)
        return;
    if (c->psync_waiting && now - c->psync_sent_ms >= request_timeout(c) + (int64_t)c->psync_ms) {
        char why[300];
        snprintf(why, sizeof why, "server %s did not answer PSYNC within %lld ms", c->cfg.server,
                 (long long)(request_timeout(c) + c->psync_ms));
        c->psync_waiting = false;
        failed(c, why);
        return;
    }
    if (now >= c->next_try_ms && (c->psync_now || (!c->psync_waiting && now >= c->next_psync_ms)))
        send_psync(c);
}

/* Chooses and sends the next request, if any is due. */
static void pump(struct client *c)
{
    int64_t now = loop_now_ms();
    save_pending(c);
    start_queued(c);
    pump_psync(c, now);
    pump_status(c, now);
    if (c->waiting) {
        if (now - c->req_sent_ms >= request_timeout(c)) {
            char why[300];
            snprintf(why, sizeof why, "server %s did not answer within %lld ms", c->cfg.server,
                     (long long)request_timeout(c));
            failed(c, why);
        }
        return;
    }
    if (now < c->next_try_ms)
        return;
    if (!c->welcomed) {
        send_hello(c);
        return;
    }
    health_check(&c->health, c->cfg.state_dir, now);
    uint32_t finished = c->ntasks - count_running(c);
    uint32_t want = now >= c->next_fetch_ms ? fetch_want(c, now) : 0;
    if (finished > 0 || want > 0)
        send_results(c, WT_RESULT, want);
}

/* ---- replies ---- */

/* Reads a text record of the meta table into buf ("" when absent or unreadable). */
static void meta_get_str(struct client *c, const char *key, char *buf, size_t cap)
{
    void *val;
    size_t n;
    buf[0] = '\0';
    if (store_get(c->store, c->t_meta, key, strlen(key), &val, &n) != 0)
        return;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (wire_precheck(val, n) == 0 &&
        msgpack_unpack_next(&up, val, n, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_STR && up.data.via.str.size < cap) {
        memcpy(buf, up.data.via.str.ptr, up.data.via.str.size);
        buf[up.data.via.str.size] = '\0';
    }
    msgpack_unpacked_destroy(&up);
    free(val);
}

/*
 * The cluster's state was replaced (its state directory was reset): the tasks we hold,
 * running or finished, belong to jobs that no longer exist there, and their ids may now
 * name other jobs. Forget them all (running ones are killed).
 */
static void forget_incarnation(struct client *c, const char *inc, size_t il)
{
    uint32_t n = c->ntasks;
    while (c->ntasks > 0)
        drop_task(c, c->ntasks - 1);
    log_warnx("the cluster's state changed (incarnation %s -> %.*s): forgot %u task(s) and "
              "result(s) of the old state",
              c->inc, (int)il, inc, n);
}

static void on_welcome(struct client *c, const msgpack_object *m)
{
    size_t il;
    const char *inc = wire_get_str(m, "inc", &il);
    if (inc && il > 0 && il < sizeof c->inc) {
        if (c->inc[0] && (strlen(c->inc) != il || memcmp(c->inc, inc, il)))
            forget_incarnation(c, inc, il);
        memcpy(c->inc, inc, il);
        c->inc[il] = '\0';
        wire_buf_reset(&c->wb);
        wire_pack_str(&c->wb, c->inc);
        store_put(c->store, c->t_meta, "inc", 3, c->wb.sb.data, c->wb.sb.size);
    }
    wire_get_strbuf(m, "sid", c->sid, sizeof c->sid);
    c->hb_s = (uint32_t)wire_get_u64(m, "hb_s", 10);
    if (c->hb_s == 0)
        c->hb_s = 1;
    c->poll_s = (uint32_t)wire_get_u64(m, "poll_s", 0); /* absent: an older cluster */
    c->welcomed = true;
    wire_buf_reset(&c->wb);
    wire_pack_str(&c->wb, c->sid);
    store_put(c->store, c->t_meta, "sid", 3, c->wb.sb.data, c->wb.sb.size);
    commit(c);
    log_info("session %s with %s (%s)", c->sid, c->cfg.server,
             wire_get_bool(m, "resumed", false) ? "resumed" : "new");
}

/* The server acknowledged the results we sent: forget them. */
static void forget_acked(struct client *c)
{
    for (uint32_t i = 0; i < c->ntasks;)
        if (c->tasks[i]->in_flight && c->tasks[i]->done)
            drop_task(c, i);
        else
            i++;
}

/*
 * The server's "cancel" list (STATUS_ACK, TASKS): stop those tasks now (SIGTERM to the
 * process group, SIGKILL kill_grace_s later) and forget them without a result; a
 * finished result not yet reported is dropped too.
 */
static void apply_cancel(struct client *c, const msgpack_object *cancel)
{
    if (!cancel || cancel->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t k = 0; k < cancel->via.array.size; k++) {
        const msgpack_object *e = &cancel->via.array.ptr[k];
        uint64_t job = wire_get_u64(e, "job", 0);
        uint64_t idx = wire_get_u64(e, "idx", UINT64_MAX);
        for (uint32_t i = 0; i < c->ntasks; i++) {
            struct ctask *t = c->tasks[i];
            if (t->job != job || t->idx != idx || t->abandon)
                continue;
            log_info("task %llu.%u abandoned at the server's request", (unsigned long long)job,
                     t->idx);
            if (!t->running) { /* finished (or never started): nothing to stop */
                drop_task(c, i);
                break;
            }
            uint8_t key[12];
            task_key(key, t);
            store_del(c->store, c->t_tasks, key, sizeof key); /* not rerun after a restart */
            t->abandon = true;
            loop_timer_cancel(c->loop, t->limit_timer);
            t->limit_timer = 0;
            runner_signal(&t->run, SIGTERM);
            loop_timer_cancel(c->loop, t->kill_timer);
            t->kill_timer =
                loop_timer(c->loop, (int64_t)(c->cfg.kill_grace_s * 1000), 0, on_kill, t);
            check_finished(c, t); /* an already exited process goes at once */
            break;
        }
    }
    commit(c);
}

/*
 * The server handed us a task we already hold (it expired while we were cut off and was
 * re-issued to us): keep the copy we run, under the new issue number, so that our
 * heartbeats name the issue the server waits for and protect it from another re-issue
 * (issue 16, item 3). A finished result keeps the issue it was packed with: the server
 * takes the first result of a task whatever its issue.
 */
static void adopt_issue(struct client *c, struct ctask *t, uint32_t issue)
{
    if (issue == 0 || issue == t->issue)
        return;
    log_info("task %llu.%u was re-issued to us (issue %u -> %u): keeping the copy we run",
             (unsigned long long)t->job, t->idx, t->issue, issue);
    t->issue = issue;
    if (!t->abandon && task_save(c, t) < 0)
        log_warn("cannot save task %llu.%u", (unsigned long long)t->job, t->idx);
}

static void on_tasks(struct client *c, const msgpack_object *m)
{
    const msgpack_object *tasks = wire_get(m, "tasks");
    if (c->req_type == WT_RESULT)
        forget_acked(c);
    apply_cancel(c, wire_get(m, "cancel"));
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        const msgpack_object *tm = &tasks->via.array.ptr[i];
        struct ctask *have =
            find_task(c, wire_get_u64(tm, "job", 0), (uint32_t)wire_get_u64(tm, "idx", 0));
        if (have) {
            adopt_issue(c, have, (uint32_t)wire_get_u64(tm, "issue", 0));
            continue;
        }
        struct ctask *t = task_from_map(c, tm);
        if (!t || add_task(c, t) < 0) {
            log_warn("cannot hold task %llu.%llu (the server will re-issue it)",
                     (unsigned long long)wire_get_u64(tm, "job", 0),
                     (unsigned long long)wire_get_u64(tm, "idx", 0));
            task_free(t);
            continue;
        }
        task_save(c, t);
        c->last_job = t->job;
        c->last_est_s = t->est_s;
    }
    commit(c);
    start_queued(c); /* the rest wait in the queue (prefetch) */
    size_t rn;
    const char *reason = wire_get_str(m, "reason", &rn);
    if (reason && !c->held)
        log_warnx("the server holds back tasks from this node: %.*s", (int)rn, reason);
    c->held = reason != NULL;
    if (tasks->via.array.size == 0 && c->req_want > 0) /* asked and got none: wait_s */
        c->next_fetch_ms = loop_now_ms() + (int64_t)wire_get_u64(m, "wait_s", 5) * 1000;
    else if (tasks->via.array.size > 0)
        c->next_fetch_ms = 0;
}

static void on_status_ack(struct client *c, const msgpack_object *m)
{
    apply_cancel(c, wire_get(m, "cancel"));
}

static void on_reply(struct client *c, const struct wire_msg *msg)
{
    c->waiting = false;
    netopts_rtt_sample(&c->rtt, loop_now_ms() - c->req_sent_ms);
    if (msg->type == WT_ERROR) {
        uint64_t code = wire_get_u64(msg->root, "code", 0);
        size_t n;
        const char *text = wire_get_str(msg->root, "msg", &n);
        char why[600];
        snprintf(why, sizeof why, "server error %s: %.*s", wire_err_name((int)code), (int)n,
                 text ? text : "");
        if (code == WE_SESSION) {
            log_info("%s", why);
            c->welcomed = false;
            clear_in_flight(c);
            return;
        }
        failed(c, why);
        return;
    }
    c->nfail = 0;
    switch (msg->type) {
    case WT_WELCOME: on_welcome(c, msg->root); break;
    case WT_TASKS: on_tasks(c, msg->root); break;
    case WT_STATUS_ACK: on_status_ack(c, msg->root); break;
    case WT_OK:
        if (c->req_type == WT_LEAVE)
            c->left = true;
        break;
    default: log_warnx("unexpected %s reply ignored", msg->desc->name);
    }
    clear_in_flight(c);
}

static void on_socket(struct loop *l, void *arg)
{
    struct client *c = arg;
    (void)l;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        struct wire_msg msg;
        struct wire_error err;
        int more = 0;
        size_t sz = sizeof more;
        if (zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
            /* a reply is one frame: drop the whole multi-frame message, unread */
            while (zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more &&
                   zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) >= 0)
                ;
            log_warnx("multi-frame reply from the server ignored (a reply is one frame)");
        } else if (wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &msg, &err) < 0) {
            log_warnx("bad reply from the server ignored: %s", err.text);
        } else {
            if (c->psync_waiting && msg.id == c->psync_id)
                on_psync_ack(c, &msg);
            else if (c->waiting && msg.id == c->req_id)
                on_reply(c, &msg);
            else if (c->st_waiting && msg.id == c->st_id)
                on_status_reply(c, &msg);
            else
                log_debug("stale reply %llu ignored", (unsigned long long)msg.id);
            wire_msg_free(&msg);
        }
        zmq_msg_close(&m);
    }
}

static void on_tick(struct loop *l, void *arg)
{
    (void)l;
    pump(arg);
}

static void before_sleep(struct loop *l, void *arg)
{
    (void)l;
    pump(arg);
}

/* ---- start and stop ---- */

static int load_task(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct client *c = arg;
    msgpack_unpacked up;
    size_t off = 0;
    (void)key;
    msgpack_unpacked_init(&up);
    if (klen == 12 && wire_precheck(val, vlen) == 0 &&
        msgpack_unpack_next(&up, val, vlen, &off) == MSGPACK_UNPACK_SUCCESS) {
        struct ctask *t = task_from_map(c, &up.data);
        size_t rl;
        const void *res = wire_get_bin(&up.data, "result", &rl);
        if (t && res && (t->result = malloc(rl))) {
            memcpy(t->result, res, rl);
            t->rlen = rl;
            t->done = true;
        }
        if (!t || add_task(c, t) < 0)
            task_free(t);
    }
    msgpack_unpacked_destroy(&up);
    return 0;
}

static int client_open(struct client *c)
{
    char err[512], work[CONFIG_STR_MAX + 8];
    snprintf(work, sizeof work, "%s/work", c->cfg.state_dir);
    if (fs_mkdir_p(work) < 0) {
        log_warn("cannot create %s", work);
        return -1;
    }
    /* held until the process ends (the kernel releases it, kill -9 included) */
    if (daemon_lock_state_dir(c->cfg.state_dir, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode client: %s\n", err);
        return -1;
    }
    struct store_opts so = {"client", client_tables, (enum store_sync)c->cfg.sync,
                            (size_t)c->cfg.map_mb << 20, false};
    if (!(c->store = store_open(c->cfg.state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    c->t_tasks = store_table(c->store, "tasks");
    c->t_meta = store_table(c->store, "meta");
    void *sid;
    size_t n;
    if (store_get(c->store, c->t_meta, "sid", 3, &sid, &n) == 0) {
        msgpack_unpacked up;
        size_t off = 0;
        msgpack_unpacked_init(&up);
        if (wire_precheck((const uint8_t *)sid, n) == 0 && /* a damaged record: no huge alloc */
            msgpack_unpack_next(&up, sid, n, &off) == MSGPACK_UNPACK_SUCCESS &&
            up.data.type == MSGPACK_OBJECT_STR && up.data.via.str.size < sizeof c->sid)
            memcpy(c->sid, up.data.via.str.ptr, up.data.via.str.size);
        msgpack_unpacked_destroy(&up);
        free(sid);
    }
    meta_get_str(c, "inc", c->inc, sizeof c->inc);
    if (store_iter(c->store, c->t_tasks, NULL, 0, load_task, c) < 0)
        return -1;
    uint32_t rerun = count_running(c);
    log_info("state loaded: %u finished result(s) to report, %u task(s) to rerun",
             c->ntasks - rerun, rerun);
    return 0;
}

/*
 * Stops running tasks and says goodbye with the finished results, waiting at most
 * min(timeout_ms, 3 s) for the server's OK. Only an OK lets the client forget its
 * tasks (the server then re-issues the unfinished ones); otherwise they stay in the
 * store, to be reported or rerun at the next start.
 */
static void client_leave(struct client *c)
{
    pprocs_shutdown(&c->pp);
    for (uint32_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i]->running)
            runner_signal(&c->tasks[i]->run, SIGKILL);
    if (!c->welcomed)
        return;
    int64_t until = loop_now_ms() + (c->cfg.timeout_ms < 3000 ? c->cfg.timeout_ms : 3000);
    clear_in_flight(c);
    save_pending(c);
    build_results(c, WT_LEAVE, 0);
    c->waiting = false;
    c->left = false;
    while (!c->left && loop_now_ms() < until) {
        if (!c->waiting) {
            if (zmq_send(c->sock, c->wb.sb.data, c->wb.sb.size, ZMQ_DONTWAIT) < 0) {
                zmq_poll(NULL, 0, 50); /* not connected yet: try again shortly */
                continue;
            }
            c->waiting = true;
            c->req_type = WT_LEAVE;
        }
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            on_socket(c->loop, c);
    }
    if (!c->left) {
        log_warnx("the server did not acknowledge LEAVE; tasks are kept for the next start");
        return;
    }
    while (c->ntasks > 0)
        drop_task(c, 0);
    commit(c);
    log_info("left the server");
}

/* Every configuration check start-up makes (role_configure runs it for --check-config
 * and before starting alike). */
static int client_check(const void *p, char *err, size_t errlen)
{
    const struct client_cfg *cfg = p;
    if (config_check_log_level("client.log_level", cfg->log_level, err, errlen) < 0 ||
        (cfg->server[0] && /* empty: the projects of the multi-project client */
         config_check_endpoint("client.server", cfg->server, 0, err, errlen) < 0))
        return -1;
    if (cfg->backoff_max_s < cfg->backoff_min_s) {
        snprintf(err, errlen, "rpc.backoff_max_s (%g) must be at least rpc.backoff_min_s (%g)",
                 cfg->backoff_max_s, cfg->backoff_min_s);
        return -1;
    }
    return 0;
}

int client_main(int argc, char **argv)
{
    static struct client c;
    int rc = role_configure("client", usage, client_keys, &c.cfg, argc, argv, client_check);
    if (rc >= 0)
        return rc;
    const char *file = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config"))
            file = argv[i + 1];
    log_init("client", (enum log_level)log_level_parse(c.cfg.log_level));
    loop_signals();
    const char *sw = getenv("GRIDNODE_CLIENT_LIVE");
    if ((sw && !strcmp(sw, "1")) || vcl_wanted(&c.cfg, file)) /* the engine's client (live.c) */
        return vcl_main(&c.cfg, file);
    srandom((unsigned)(getpid() ^ wall_now_ms()));
    c.slots = c.cfg.slots > 0 ? (uint32_t)c.cfg.slots : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    c.next_id = (uint64_t)wall_now_ms() << 8;
    c.hb_s = 10;
    c.psync_ms = 1000;
    snprintf(c.pp.state_dir, sizeof c.pp.state_dir, "%s", c.cfg.state_dir);
    snprintf(c.pp.workroot, sizeof c.pp.workroot, "%s/work", c.cfg.state_dir);
    c.pp.max_output = (size_t)c.cfg.max_output_kb * 1024;
    wire_buf_init(&c.wb);
    rc = 1;
    if (c.slots == 0 || !(c.left_s = calloc(c.slots, sizeof *c.left_s))) {
        log_warn("cannot allocate %u slot(s)", c.slots);
        goto out;
    }
    if ((c.sigfd = runner_sigchld_fd()) < 0) {
        log_warn("cannot watch child processes");
        goto out;
    }
    if (client_open(&c) < 0 || !(c.loop = loop_new()) || !(c.zctx = zmq_ctx_new()) ||
        open_socket(&c) < 0)
        goto out;
    loop_add_fd(c.loop, c.sigfd, on_sigchld, &c);
    loop_before_sleep(c.loop, before_sleep, &c);
    loop_timer(c.loop, 100, 1, on_tick, &c);
    start_queued(&c); /* reruns unfinished tasks, slots at a time */
    log_info("pulling tasks from %s with %u slot(s), prefetching up to %ld x slots", c.cfg.server,
             c.slots, c.cfg.prefetch_max);
    rc = loop_run(c.loop) < 0 ? 1 : 0;
    client_leave(&c);
out:
    pprocs_shutdown(&c.pp);
    for (uint32_t i = 0; i < c.ntasks; i++)
        task_free(c.tasks[i]);
    free(c.tasks);
    free(c.left_s);
    store_close(&c.store);
    if (c.mon)
        zmq_close(c.mon);
    curve_watch_destroy(&c.watch);
    if (c.sock)
        zmq_close(c.sock);
    if (c.zctx)
        zmq_ctx_term(c.zctx);
    loop_destroy(&c.loop);
    wire_buf_free(&c.wb);
    return rc;
}

/*
 * client.c - the live execution host (see client.h).
 *
 * At most one request is outstanding at a time. pump() decides the next one: HELLO
 * until a session exists; RESULT (finished results plus a request for as many tasks as
 * there are free slots) or TASK_GET; STATUS every heartbeat period while computing.
 * A request unanswered within timeout_ms counts as a failure: the socket is rebuilt and
 * the next try waits a randomized exponential backoff. Every received task is committed
 * to the client's store before it starts, and its result before it is sent; a record
 * is deleted only when the server acknowledged the result.
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
#include "roles/client/pprocs.h"
#include "roles/client/runner.h"
#include "store/store.h"
#include "wire/wire.h"

#define MAX_REPORT 64 /* results in one message */

struct ctask {
    uint64_t job;
    uint32_t idx, issue, limit_s;
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
    int64_t req_sent_ms, next_try_ms, next_fetch_ms, last_status_ms;
    uint32_t nfail;
    /* node health: set when this host cannot run tasks (not a task's own failure) */
    char sick[300];
    int64_t next_health_ms;
    uint32_t nhealth, poll_s;
    bool held; /* the server said why it gives this node no tasks */
    struct wire_buf wb;
    struct pprocs pp; /* parallel processes of the cluster's SCore-D side */
    int64_t next_psync_ms;
    uint32_t psync_ms;
    /* PSYNC is a long-poll (wait_ms) with its own request in flight, beside the others */
    bool psync_waiting, psync_now, psync_urgent; /* urgent: sent for psync_now */
    uint64_t psync_id;
    int64_t psync_sent_ms, psync_wait_ms; /* the wait_ms the PSYNC in flight carries */
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
    {"client", "log_level", CONFIG_STR, "info", OFF(log_level), 0, 0, NULL,
     "error, warn, info or debug"},
    {"rpc", "timeout_ms", CONFIG_INT, "5000", OFF(timeout_ms), 10, 3600000, NULL,
     "a request unanswered this long counts as a failed exchange"},
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

/* ---- node health ---- */

#define HEALTH_FIRST_S 5
#define HEALTH_MAX_S 300

/*
 * This host cannot run tasks (its working directory or store is unusable, it cannot
 * fork): stop asking for work, say why once, and re-check with a doubling backoff
 * (HEALTH_FIRST_S .. HEALTH_MAX_S). A task's own failure (nonzero exit, a program
 * that does not exist) never makes a node sick.
 */
static void node_sick(struct client *c, const char *why)
{
    if (c->sick[0])
        return;
    snprintf(c->sick, sizeof c->sick, "%.250s", why);
    c->nhealth = 0;
    c->next_health_ms = loop_now_ms() + HEALTH_FIRST_S * 1000;
    log_warnx("this node stops taking tasks: %s; it checks again in %d s (tasks it holds are "
              "handed back as node-side errors)",
              why, HEALTH_FIRST_S);
}

/* Probes the working directory: create it, write, read back and remove a file. */
static int health_probe(struct client *c, char *why, size_t len)
{
    char work[CONFIG_STR_MAX + 8], probe[CONFIG_STR_MAX + 32];
    snprintf(work, sizeof work, "%s/work", c->cfg.state_dir);
    snprintf(probe, sizeof probe, "%s/.health", work);
    FILE *f = NULL;
    if (fs_mkdir_p(work) < 0 || !(f = fopen(probe, "w")) || fputs("ok\n", f) < 0 ||
        fflush(f) != 0) {
        snprintf(why, len, "cannot write in %s: %s", work, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    unlink(probe);
    return 0;
}

static void health_check(struct client *c)
{
    char why[CONFIG_STR_MAX + 64];
    if (health_probe(c, why, sizeof why) == 0) {
        log_info("node healthy again (was: %s): taking tasks", c->sick);
        c->sick[0] = '\0';
        return;
    }
    c->nhealth++;
    int64_t d = (int64_t)HEALTH_FIRST_S << (c->nhealth < 8 ? c->nhealth : 8);
    if (d > HEALTH_MAX_S)
        d = HEALTH_MAX_S;
    c->next_health_ms = loop_now_ms() + d * 1000;
    log_debug("still unhealthy (%s); next check in %lld s", why, (long long)d);
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

static uint32_t count_running(const struct client *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->ntasks; i++)
        n += !c->tasks[i]->done;
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
    double cpu = (double)r->ru.ru_utime.tv_sec + r->ru.ru_utime.tv_usec / 1e6 +
                 (double)r->ru.ru_stime.tv_sec + r->ru.ru_stime.tv_usec / 1e6;
    wire_buf_init(&wb);
    wire_pack_map(&wb, err ? 13 : 12);
    wire_put_u64(&wb, "job", t->job);
    wire_put_u64(&wb, "idx", t->idx);
    wire_put_u64(&wb, "issue", t->issue);
    wire_put_i64(&wb, "exit",
                 !err && !bad && r->reaped && WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
    wire_put_u64(&wb, "signal", !err && r->reaped && WIFSIGNALED(r->status) ? (uint64_t)WTERMSIG(r->status) : 0);
    wire_put_bool(&wb, "timeout", r->timed_out);
    wire_put_f64(&wb, "cpu_s", cpu);
    wire_put_f64(&wb, "wall_s", (double)wall / 1000.0);
    wire_put_bin(&wb, "stdout", r->out.buf ? r->out.buf : "", r->out.len);
    if (bad) /* the task's own fault: a final failed result that says why */
        wire_put_bin(&wb, "stderr", t->bad, strlen(t->bad));
    else
        wire_put_bin(&wb, "stderr", r->err.buf ? r->err.buf : "", r->err.len);
    wire_put_bool(&wb, "out_trunc", r->out.trunc);
    wire_put_bool(&wb, "err_trunc", r->err.trunc);
    if (err)
        wire_put_str(&wb, "error", r->error);
    t->result = malloc(wb.sb.size);
    if (t->result) {
        memcpy(t->result, wb.sb.data, wb.sb.size);
        t->rlen = wb.sb.size;
    }
    wire_buf_free(&wb);
    t->done = true;
    t->running = false;
    loop_timer_cancel(c->loop, t->limit_timer);
    loop_timer_cancel(c->loop, t->kill_timer);
    task_save(c, t);
    commit(c); /* the result is durable before we say so, or send it */
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
    if (c->sick[0]) { /* hand it back at once: a healthy node should run it */
        t->run.start_ms = loop_now_ms();
        snprintf(t->run.error, sizeof t->run.error, "node unhealthy: %.200s", c->sick);
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

/* (Re)creates the DEALER socket, dropping anything queued on the old one. */
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
    clear_in_flight(c);
    c->next_try_ms = loop_now_ms() + (int64_t)(d * 1000);
    log_warnx("%s; retry %u in %.1f s", why, c->nfail, d);
    open_socket(c);
}

static void send_request(struct client *c, uint32_t type)
{
    if (zmq_send(c->sock, c->wb.sb.data, c->wb.sb.size, ZMQ_DONTWAIT) < 0) {
        char why[300];
        snprintf(why, sizeof why, "server %s unreachable (%s)", c->cfg.server,
                 zmq_strerror(errno));
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
    send_request(c, build_results(c, type, want));
}

static void send_status(struct client *c)
{
    uint32_t n = count_running(c);
    wire_buf_reset(&c->wb);
    wire_begin(&c->wb, WT_STATUS, c->req_id = ++c->next_id, 2);
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
    send_request(c, WT_STATUS);
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
        snprintf(why, sizeof why, "server %s unreachable (%s)", c->cfg.server, zmq_strerror(errno));
        c->psync_waiting = false;
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
    if (c->psync_waiting && now - c->psync_sent_ms >= c->cfg.timeout_ms + (int64_t)c->psync_ms) {
        char why[300];
        snprintf(why, sizeof why, "server %s did not answer PSYNC within %lld ms", c->cfg.server,
                 (long long)(c->cfg.timeout_ms + c->psync_ms));
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
    pump_psync(c, now);
    if (c->waiting) {
        if (now - c->req_sent_ms >= c->cfg.timeout_ms) {
            char why[300];
            snprintf(why, sizeof why, "server %s did not answer within %ld ms", c->cfg.server,
                     c->cfg.timeout_ms);
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
    if (c->sick[0] && now >= c->next_health_ms)
        health_check(c);
    uint32_t running = count_running(c), finished = c->ntasks - running;
    uint32_t want = running < c->slots && !c->sick[0] ? c->slots - running : 0;
    if (finished > 0 || (want > 0 && now >= c->next_fetch_ms)) {
        send_results(c, WT_RESULT, now >= c->next_fetch_ms ? want : 0);
        return;
    }
    /* while computing, check in every poll_s (<= hb_s) so that a cancel arrives soon */
    uint32_t every = c->poll_s && c->poll_s < c->hb_s ? c->poll_s : c->hb_s;
    if (running > 0 && now - c->last_status_ms >= (int64_t)every * 1000)
        send_status(c);
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

static void on_tasks(struct client *c, const msgpack_object *m)
{
    const msgpack_object *tasks = wire_get(m, "tasks");
    if (c->req_type == WT_RESULT)
        forget_acked(c);
    apply_cancel(c, wire_get(m, "cancel"));
    uint32_t first_new = c->ntasks;
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        const msgpack_object *tm = &tasks->via.array.ptr[i];
        if (find_task(c, wire_get_u64(tm, "job", 0), (uint32_t)wire_get_u64(tm, "idx", 0))) {
            log_debug("already have task %llu.%llu; keeping the copy we run",
                      (unsigned long long)wire_get_u64(tm, "job", 0),
                      (unsigned long long)wire_get_u64(tm, "idx", 0));
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
    }
    commit(c);
    for (uint32_t i = first_new; i < c->ntasks; i++)
        start_task(c, c->tasks[i]);
    size_t rn;
    const char *reason = wire_get_str(m, "reason", &rn);
    if (reason && !c->held)
        log_warnx("the server holds back tasks from this node: %.*s", (int)rn, reason);
    c->held = reason != NULL;
    if (tasks->via.array.size == 0)
        c->next_fetch_ms = loop_now_ms() + (int64_t)wire_get_u64(m, "wait_s", 5) * 1000;
    else
        c->next_fetch_ms = 0;
}

static void on_status_ack(struct client *c, const msgpack_object *m)
{
    apply_cancel(c, wire_get(m, "cancel"));
}

static void on_reply(struct client *c, const struct wire_msg *msg)
{
    c->waiting = false;
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

int client_main(int argc, char **argv)
{
    static struct client c;
    int rc = role_configure("client", usage, client_keys, &c.cfg, argc, argv);
    if (rc >= 0)
        return rc;
    int lvl = log_level_parse(c.cfg.log_level);
    if (lvl < 0) {
        fprintf(stderr, "gridnode client: configuration error: client.log_level must be "
                        "error, warn, info or debug\n");
        return 1;
    }
    log_init("client", (enum log_level)lvl);
    if (c.cfg.backoff_max_s < c.cfg.backoff_min_s) {
        fprintf(stderr, "gridnode client: configuration error: rpc.backoff_max_s must be at "
                        "least rpc.backoff_min_s\n");
        return 1;
    }
    loop_signals();
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
    for (uint32_t i = 0; i < c.ntasks; i++)
        if (!c.tasks[i]->done)
            start_task(&c, c.tasks[i]);
    log_info("pulling tasks from %s with %u slot(s)", c.cfg.server, c.slots);
    rc = loop_run(c.loop) < 0 ? 1 : 0;
    client_leave(&c);
out:
    pprocs_shutdown(&c.pp);
    for (uint32_t i = 0; i < c.ntasks; i++)
        task_free(c.tasks[i]);
    free(c.tasks);
    store_close(&c.store);
    curve_watch_destroy(&c.watch);
    if (c.sock)
        zmq_close(c.sock);
    if (c.zctx)
        zmq_ctx_term(c.zctx);
    loop_destroy(&c.loop);
    wire_buf_free(&c.wb);
    return rc;
}

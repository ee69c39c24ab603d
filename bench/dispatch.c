/*
 * dispatch.c - load generator of the dispatch benchmark (bench/dispatch.sh).
 *
 * Simulates many nodes in one process: one DEALER socket per simulated node, all
 * polled together. Each node says HELLO, then loops on RESULT(want=1): it reports the
 * previous task's result (exit 0, empty output) and receives the next task, like a node
 * running empty tasks. Every request's round trip is timed with the monotonic clock.
 * The run ends after --requests results or --seconds, whichever comes first; the
 * summary is one JSON line on stdout, progress goes to stderr.
 *
 *   dispatch --endpoint EP [--clients N] [--requests N] [--seconds S] [--submit NTASKS]
 *            [--io-threads N]
 *
 * --submit first submits a job of NTASKS tasks running `true`.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "wire/wire.h"

#define REPLY_TIMEOUT_NS (30ll * 1000000000ll) /* a reply later than this: give up */

enum cstate { C_HELLO, C_RUNNING, C_DONE };

struct client {
    void *sock;
    enum cstate state;
    char sid[72];
    bool has_task; /* a task to report in the next RESULT */
    uint64_t job;
    uint32_t idx, issue;
    uint64_t next_id;
    int64_t sent_ns;
};

struct opts {
    const char *endpoint;
    int clients, io_threads;
    long requests;
    double seconds;
    long submit;
    double req; /* > 0: ask in seconds (RESULT req {"cpu": req}, want 0), issue 11 */
};

struct bench {
    struct opts o;
    void *ctx;
    struct client *cl;
    zmq_pollitem_t *items;
    struct wire_buf wb;
    uint32_t *lat_us; /* round trips of RESULT requests in the measured window */
    long nlat, caplat;
    long results;  /* results acknowledged by the cluster */
    long inflight; /* requests sent and not yet answered */
    int welcomed, done;
    int64_t t0_ns, t_last_ns;
    bool stopping;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: dispatch --endpoint EP [--clients N] [--requests N] [--seconds S] "
                    "[--submit NTASKS] [--io-threads N] [--req SECONDS]\n");
    exit(2);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){NULL, 1000, 1, 100000, 20.0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--endpoint"))
            o->endpoint = v;
        else if (!strcmp(a, "--clients"))
            o->clients = atoi(v);
        else if (!strcmp(a, "--requests"))
            o->requests = atol(v);
        else if (!strcmp(a, "--seconds"))
            o->seconds = atof(v);
        else if (!strcmp(a, "--submit"))
            o->submit = atol(v);
        else if (!strcmp(a, "--io-threads"))
            o->io_threads = atoi(v);
        else if (!strcmp(a, "--req"))
            o->req = atof(v);
        else
            usage();
        i++;
    }
    if (!o->endpoint || o->clients < 1 || o->requests < 1 || o->seconds <= 0)
        usage();
}

static void *open_dealer(struct bench *b)
{
    int zero = 0;
    void *s = zmq_socket(b->ctx, ZMQ_DEALER);
    if (!s) {
        fprintf(stderr, "dispatch: zmq_socket: %s\n", zmq_strerror(errno));
        exit(1);
    }
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char err[800];
    if (curve_client_apply(s, NULL, b->o.endpoint, err, sizeof err) < 0) {
        fprintf(stderr, "dispatch: %s\n", err); /* keys from GRIDNODE_KEY etc. */
        exit(1);
    }
    if (zmq_connect(s, b->o.endpoint) < 0) {
        fprintf(stderr, "dispatch: connect %s: %s\n", b->o.endpoint, zmq_strerror(errno));
        exit(1);
    }
    return s;
}

/* Sends the message in b->wb on s; exits on failure (the benchmark is void then). */
static void send_wb(struct bench *b, void *s)
{
    if (zmq_send(s, b->wb.sb.data, b->wb.sb.size, 0) < 0) {
        fprintf(stderr, "dispatch: send: %s\n", zmq_strerror(errno));
        exit(1);
    }
}

/* Receives one reply on s into a decoded message (buffer in *msg); 0 or -1. */
static int recv_reply(void *s, zmq_msg_t *msg, struct wire_msg *m, int flags)
{
    struct wire_error e;
    zmq_msg_init(msg);
    if (zmq_msg_recv(msg, s, flags) < 0) {
        zmq_msg_close(msg);
        return -1;
    }
    if (wire_decode(zmq_msg_data(msg), zmq_msg_size(msg), false, m, &e) < 0) {
        fprintf(stderr, "dispatch: bad reply: %s\n", e.text);
        exit(1);
    }
    if (m->type == WT_ERROR) {
        char text[256];
        wire_get_strbuf(m->root, "msg", text, sizeof text);
        fprintf(stderr, "dispatch: error reply %s: %s\n",
                wire_err_name((int)wire_get_u64(m->root, "code", 0)), text);
        exit(1);
    }
    return 0;
}

/* Submits a job of n tasks running `true` and waits for SUBMITTED. */
static void submit_job(struct bench *b, long n)
{
    void *s = open_dealer(b);
    int timeout = 30000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    wire_buf_reset(&b->wb);
    wire_begin(&b->wb, WT_SUBMIT, 1, 3);
    wire_put_key(&b->wb, "argv");
    wire_pack_array(&b->wb, 1);
    wire_pack_str(&b->wb, "true");
    wire_put_u64(&b->wb, "ntasks", (uint64_t)n);
    wire_put_str(&b->wb, "name", "bench-dispatch");
    send_wb(b, s);
    zmq_msg_t msg;
    struct wire_msg m;
    if (recv_reply(s, &msg, &m, 0) < 0 || m.type != WT_SUBMITTED) {
        fprintf(stderr, "dispatch: no SUBMITTED reply within 30 s\n");
        exit(1);
    }
    fprintf(stderr, "dispatch: job %" PRIu64 " submitted with %ld tasks\n",
            wire_get_u64(m.root, "job", 0), n);
    wire_msg_free(&m);
    zmq_msg_close(&msg);
    zmq_close(s);
}

static void send_hello(struct bench *b, struct client *c, int i)
{
    char name[32];
    snprintf(name, sizeof name, "bench-%d", i);
    wire_buf_reset(&b->wb);
    wire_begin(&b->wb, WT_HELLO, ++c->next_id, b->o.req > 0 ? 4 : 3);
    wire_put_str(&b->wb, "client", "bench-dispatch");
    wire_put_str(&b->wb, "node", name);
    wire_put_u64(&b->wb, "cores", 1);
    if (b->o.req > 0) /* a known speed: every task's est_s is the same */
        wire_put_f64(&b->wb, "cpu_gflops", 10.0);
    c->sent_ns = now_ns();
    send_wb(b, c->sock);
    b->inflight++;
}

/* RESULT with the previous task's result (if any) asking for the next one. */
static void send_result(struct bench *b, struct client *c)
{
    struct wire_buf *wb = &b->wb;
    wire_buf_reset(wb);
    wire_begin(wb, WT_RESULT, ++c->next_id, b->o.req > 0 ? 4 : 3);
    wire_put_str(wb, "sid", c->sid);
    wire_put_u64(wb, "want", b->o.req > 0 ? 0 : 1);
    if (b->o.req > 0) { /* seconds of CPU work: the first task reaches them */
        wire_put_key(wb, "req");
        wire_pack_map(wb, 1);
        wire_pack_str(wb, "cpu");
        msgpack_pack_double(&wb->pk, b->o.req);
    }
    wire_put_key(wb, "results");
    wire_pack_array(wb, c->has_task ? 1 : 0);
    if (c->has_task) {
        wire_pack_map(wb, 8);
        wire_put_u64(wb, "job", c->job);
        wire_put_u64(wb, "idx", c->idx);
        wire_put_u64(wb, "issue", c->issue);
        wire_put_i64(wb, "exit", 0);
        wire_put_f64(wb, "cpu_s", 0.0005);
        wire_put_f64(wb, "wall_s", 0.001);
        wire_put_bin(wb, "stdout", "", 0);
        wire_put_bin(wb, "stderr", "", 0);
    }
    c->sent_ns = now_ns();
    send_wb(b, c->sock);
    b->inflight++;
}

static void record_latency(struct bench *b, int64_t ns)
{
    if (b->nlat == b->caplat) {
        long cap = b->caplat ? b->caplat * 2 : 1 << 16;
        uint32_t *n = realloc(b->lat_us, (size_t)cap * sizeof *n);
        if (!n) {
            fprintf(stderr, "dispatch: out of memory\n");
            exit(1);
        }
        b->lat_us = n;
        b->caplat = cap;
    }
    int64_t us = ns / 1000;
    b->lat_us[b->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* Handles one reply of client c; sends its next request unless the run ends. */
static void on_reply(struct bench *b, struct client *c, const struct wire_msg *m, int64_t t)
{
    b->inflight--;
    if (c->state == C_HELLO) {
        if (m->type != WT_WELCOME) {
            fprintf(stderr, "dispatch: expected WELCOME, got type %u\n", m->type);
            exit(1);
        }
        wire_get_strbuf(m->root, "sid", c->sid, sizeof c->sid);
        c->state = C_RUNNING;
        if (++b->welcomed < b->o.clients)
            return; /* every node starts together, once all sessions are open */
        fprintf(stderr, "dispatch: %d sessions open, measuring\n", b->welcomed);
        b->t0_ns = t;
        for (int i = 0; i < b->o.clients; i++)
            send_result(b, &b->cl[i]);
        return;
    } else {
        const msgpack_object *tasks = wire_get(m->root, "tasks");
        if (m->type != WT_TASKS || !tasks) {
            fprintf(stderr, "dispatch: expected TASKS, got type %u\n", m->type);
            exit(1);
        }
        long acked = (long)wire_get_u64(m->root, "acked", 0);
        if (b->t0_ns && c->sent_ns >= b->t0_ns) {
            record_latency(b, t - c->sent_ns);
            b->results += acked;
            b->t_last_ns = t;
        }
        c->has_task = tasks->via.array.size > 0;
        if (c->has_task) {
            const msgpack_object *k = &tasks->via.array.ptr[0];
            c->job = wire_get_u64(k, "job", 0);
            c->idx = (uint32_t)wire_get_u64(k, "idx", 0);
            c->issue = (uint32_t)wire_get_u64(k, "issue", 0);
        }
    }
    if (b->stopping || (m->type == WT_TASKS && !c->has_task)) {
        c->state = C_DONE; /* the run is over, or the job has no tasks left */
        b->done++;
        return;
    }
    send_result(b, c);
}

/* Reads every reply waiting on client i's socket. */
static void drain(struct bench *b, int i)
{
    struct client *c = &b->cl[i];
    for (;;) {
        zmq_msg_t msg;
        struct wire_msg m;
        if (recv_reply(c->sock, &msg, &m, ZMQ_DONTWAIT) < 0)
            return;
        on_reply(b, c, &m, now_ns());
        wire_msg_free(&m);
        zmq_msg_close(&msg);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Polls every socket until the run is over and every request answered. */
static void run(struct bench *b)
{
    int64_t start = now_ns(), last_progress = start, deadline = 0;
    while (b->inflight > 0) {
        int64_t t = now_ns();
        if (!b->stopping &&
            (b->results >= b->o.requests || (b->t0_ns && t - b->t0_ns >= b->o.seconds * 1e9) ||
             b->done == b->o.clients)) {
            b->stopping = true;
            deadline = t + REPLY_TIMEOUT_NS;
        }
        if ((b->stopping && t > deadline) || (!b->t0_ns && t - start > REPLY_TIMEOUT_NS)) {
            fprintf(stderr, "dispatch: %ld replies missing; giving up\n", b->inflight);
            exit(1);
        }
        if (b->t0_ns && last_progress < b->t0_ns)
            last_progress = b->t0_ns;
        if (b->t0_ns && t - last_progress >= 1000000000ll) {
            double s = (double)(t - b->t0_ns) / 1e9;
            fprintf(stderr, "dispatch: %.1f s, %ld results, %.0f/s\n", s, b->results,
                    (double)b->results / s);
            last_progress = t;
        }
        int n = zmq_poll(b->items, b->o.clients, 100);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "dispatch: poll: %s\n", zmq_strerror(errno));
            exit(1);
        }
        for (int i = 0; i < b->o.clients && n > 0; i++)
            if (b->items[i].revents & ZMQ_POLLIN) {
                n--;
                drain(b, i);
            }
    }
}

static void report(struct bench *b)
{
    double secs = b->t_last_ns > b->t0_ns ? (double)(b->t_last_ns - b->t0_ns) / 1e9 : 0;
    uint32_t p50 = 0, p99 = 0;
    if (b->nlat > 0) {
        qsort(b->lat_us, (size_t)b->nlat, sizeof *b->lat_us, cmp_u32);
        p50 = b->lat_us[b->nlat * 50 / 100];
        p99 = b->lat_us[b->nlat * 99 / 100];
    }
    double rate = secs > 0 ? (double)b->results / secs : 0;
    fprintf(stderr, "dispatch: %ld results by %d clients in %.2f s (%ld round trips timed)\n",
            b->results, b->o.clients, secs, b->nlat);
    printf("{\"bench\":\"dispatch\",\"mode\":\"%s\",\"tasks_per_s\":%.0f,\"p50_us\":%u,"
           "\"p99_us\":%u}\n",
           b->o.req > 0 ? "req" : "want", rate, p50, p99);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static struct bench b;
    struct rlimit rl;
    parse_args(argc, argv, &b.o);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* a socket needs a descriptor or two */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    wire_buf_init(&b.wb);
    b.ctx = zmq_ctx_new();
    zmq_ctx_set(b.ctx, ZMQ_MAX_SOCKETS, b.o.clients + 16);
    zmq_ctx_set(b.ctx, ZMQ_IO_THREADS, b.o.io_threads);
    if (b.o.submit > 0)
        submit_job(&b, b.o.submit);
    b.cl = calloc((size_t)b.o.clients, sizeof *b.cl);
    b.items = calloc((size_t)b.o.clients, sizeof *b.items);
    if (!b.cl || !b.items) {
        fprintf(stderr, "dispatch: out of memory\n");
        return 1;
    }
    for (int i = 0; i < b.o.clients; i++) {
        b.cl[i].sock = open_dealer(&b);
        b.items[i] = (zmq_pollitem_t){b.cl[i].sock, 0, ZMQ_POLLIN, 0};
    }
    for (int i = 0; i < b.o.clients; i++)
        send_hello(&b, &b.cl[i], i);
    run(&b);
    report(&b);
    for (int i = 0; i < b.o.clients; i++)
        zmq_close(b.cl[i].sock);
    zmq_ctx_term(b.ctx);
    free(b.cl);
    free(b.items);
    free(b.lat_us);
    wire_buf_free(&b.wb);
    return b.results > 0 ? 0 : 1;
}

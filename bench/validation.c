/*
 * validation.c - load generator of the result-validation benchmark (bench/validation.sh).
 *
 * Simulates --nodes nodes in one process, one DEALER each, speaking the wire protocol
 * (docs/wire.md 5): HELLO, then RESULT(want=1) in a loop. A task is "run" by echoing
 * its argv[1] and argv[2] ("ok 17"), so known-answer tasks ("k 3") and ordinary ones
 * are computed alike. The first --faulty nodes are faulty: with probability --rate
 * they return a wrong answer, independently ("wrong <random>") or colluding (every
 * colluder lies on the same tasks, chosen by a hash of job and index, with the same
 * answer "bad <job> <idx>").
 *
 * One case: optional known-answer pool (adaptive_spot), a warm-up job (adaptive
 * settings) run to its end, then the measured job of --tasks tasks. Prints one JSON
 * line: setting, faults, wrong_accepted (measured tasks whose final stdout is wrong),
 * wrong_accepted_fraction, results_per_task (results the nodes computed for measured
 * tasks / tasks), wall_s (measured job, submit to done).
 *
 *   validation --endpoint EP --setting none|quorum2|adaptive|adaptive_spot
 *              --faults independent|colluding [--nodes 100] [--faulty 10] [--rate 0.3]
 *              [--tasks 20000] [--warmup 5000] [--seconds 240] [--seed N]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "wire/wire.h"

struct sim {
    void *sock;
    bool faulty, welcomed, waiting, has;
    char sid[72];
    uint64_t job, next_id;
    uint32_t idx, issue;
    char out[64];
    int out_exit;
    int64_t retry_ns;
};

struct opts {
    const char *endpoint, *setting, *faults;
    int nodes, faulty;
    double rate, seconds;
    long tasks, warmup;
    uint64_t seed;
};

static struct opts o = {NULL, NULL, NULL, 100, 10, 0.3, 240, 20000, 5000, 1};
static void *ctx, *ctl;
static uint64_t rng_state;
static struct wire_buf wb;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static double rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* A request on the control socket; the reply decoded into m (msg to be closed). */
static int ctl_call(zmq_msg_t *msg, struct wire_msg *m)
{
    struct wire_error e;
    if (zmq_send(ctl, wb.sb.data, wb.sb.size, 0) < 0)
        return -1;
    zmq_msg_init(msg);
    if (zmq_msg_recv(msg, ctl, 0) < 0 ||
        wire_decode(zmq_msg_data(msg), zmq_msg_size(msg), false, m, &e) < 0) {
        zmq_msg_close(msg);
        fprintf(stderr, "validation: no reply from the cluster\n");
        return -1;
    }
    if (m->type == WT_ERROR) {
        char text[300];
        wire_get_strbuf(m->root, "msg", text, sizeof text);
        fprintf(stderr, "validation: error: %s\n", text);
        wire_msg_free(m);
        zmq_msg_close(msg);
        return -1;
    }
    return 0;
}

static bool adaptive(void)
{
    return !strncmp(o.setting, "adaptive", 8);
}

/* Submits a job of n tasks "sim WORD {i}" with the setting's checking; its id or 0. */
static uint64_t submit(const char *word, long n, bool known)
{
    bool q2 = !strcmp(o.setting, "quorum2"), ad = adaptive();
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_SUBMIT, 1, 3 + q2 + ad + known);
    wire_put_key(&wb, "argv");
    wire_pack_array(&wb, 3);
    wire_pack_str(&wb, "sim");
    wire_pack_str(&wb, word);
    wire_pack_str(&wb, "{i}");
    wire_put_u64(&wb, "ntasks", (uint64_t)n);
    wire_put_str(&wb, "name", word);
    if (q2)
        wire_put_u64(&wb, "quorum", 2);
    if (ad)
        wire_put_bool(&wb, "adaptive", true);
    if (known) {
        wire_put_key(&wb, "known");
        wire_pack_array(&wb, (uint32_t)n);
        for (long i = 0; i < n; i++) {
            char ans[64];
            int len = snprintf(ans, sizeof ans, "%s %ld\n", word, i);
            wire_pack_map(&wb, 2);
            wire_put_i64(&wb, "exit", 0);
            wire_put_bin(&wb, "stdout", ans, (size_t)len);
        }
    }
    zmq_msg_t msg;
    struct wire_msg m;
    if (ctl_call(&msg, &m) < 0)
        return 0;
    uint64_t id = wire_get_u64(m.root, "job", 0);
    wire_msg_free(&m);
    zmq_msg_close(&msg);
    return id;
}

static int job_state(uint64_t id, char *st, size_t n)
{
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_GET, 2, 1);
    wire_put_u64(&wb, "job", id);
    zmq_msg_t msg;
    struct wire_msg m;
    if (ctl_call(&msg, &m) < 0)
        return -1;
    wire_get_strbuf(wire_get(m.root, "job"), "state", st, n);
    wire_msg_free(&m);
    zmq_msg_close(&msg);
    return 0;
}

/* Measured tasks whose final stdout is not the right answer. */
static long count_wrong(uint64_t id)
{
    long wrong = 0;
    for (long from = 0; from < o.tasks; from += 2000) {
        wire_buf_reset(&wb);
        wire_begin(&wb, WT_JOB_GET, 3, 5);
        wire_put_u64(&wb, "job", id);
        wire_put_bool(&wb, "tasks", true);
        wire_put_bool(&wb, "output", true);
        wire_put_u64(&wb, "from", (uint64_t)from);
        wire_put_u64(&wb, "count", 2000);
        zmq_msg_t msg;
        struct wire_msg m;
        if (ctl_call(&msg, &m) < 0)
            return -1;
        const msgpack_object *ts = wire_get(m.root, "tasks");
        for (uint32_t i = 0; ts && i < ts->via.array.size; i++) {
            const msgpack_object *t = &ts->via.array.ptr[i];
            char want[64];
            size_t len = 0;
            int wl = snprintf(want, sizeof want, "ok %llu\n",
                              (unsigned long long)wire_get_u64(t, "idx", 0));
            const void *out = wire_get_bin(t, "stdout", &len);
            if (out && (len != (size_t)wl || memcmp(out, want, len))) { /* failed: none */
                wrong++;
                if (getenv("VALIDATION_DEBUG")) {
                    char sb[32];
                    wire_get_strbuf(t, "state", sb, sizeof sb);
                    const msgpack_object *rs = wire_get(t, "results");
                    fprintf(stderr, "wrong: task %llu state %s results %u out %.*s",
                            (unsigned long long)wire_get_u64(t, "idx", 0), sb,
                            rs ? rs->via.array.size : 0, out ? (int)len : 0,
                            out ? (const char *)out : "");
                }
            }
        }
        wire_msg_free(&m);
        zmq_msg_close(&msg);
    }
    return wrong;
}

/* "Runs" a task: argv[1] argv[2], or a lie. */
static void run_task(struct sim *s, const msgpack_object *t)
{
    const msgpack_object *argv = wire_get(t, "argv");
    s->job = wire_get_u64(t, "job", 0);
    s->idx = (uint32_t)wire_get_u64(t, "idx", 0);
    s->issue = (uint32_t)wire_get_u64(t, "issue", 0);
    s->has = true;
    const msgpack_object *a1 = &argv->via.array.ptr[1], *a2 = &argv->via.array.ptr[2];
    snprintf(s->out, sizeof s->out, "%.*s %.*s\n", (int)a1->via.str.size, a1->via.str.ptr,
             (int)a2->via.str.size, a2->via.str.ptr);
    if (!s->faulty)
        return;
    if (!strcmp(o.faults, "colluding")) {
        uint64_t h = (s->job * 0x9E3779B97F4A7C15ULL) ^ (s->idx * 0xC2B2AE3D27D4EB4FULL);
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 32;
        if ((double)(h % 1000000) / 1e6 < o.rate)
            snprintf(s->out, sizeof s->out, "bad %llu %u\n", (unsigned long long)s->job, s->idx);
    } else if (rnd() < o.rate) {
        snprintf(s->out, sizeof s->out, "wrong %llx\n", (unsigned long long)(rnd() * 1e15));
    }
}

static int send_next(struct sim *s)
{
    wire_buf_reset(&wb);
    if (!s->welcomed) {
        wire_begin(&wb, WT_HELLO, ++s->next_id, 3);
        wire_put_str(&wb, "client", "bench-validation");
        wire_put_str(&wb, "node", s->faulty ? "faulty" : "honest");
        wire_put_u64(&wb, "cores", 1);
    } else {
        wire_begin(&wb, WT_RESULT, ++s->next_id, 3);
        wire_put_str(&wb, "sid", s->sid);
        wire_put_u64(&wb, "want", 1);
        wire_put_key(&wb, "results");
        wire_pack_array(&wb, s->has);
        if (s->has) {
            wire_pack_map(&wb, 5);
            wire_put_u64(&wb, "job", s->job);
            wire_put_u64(&wb, "idx", s->idx);
            wire_put_u64(&wb, "issue", s->issue);
            wire_put_i64(&wb, "exit", 0);
            wire_put_bin(&wb, "stdout", s->out, strlen(s->out));
        }
    }
    return zmq_send(s->sock, wb.sb.data, wb.sb.size, 0) < 0 ? -1 : 0;
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--endpoint"))
            o.endpoint = v;
        else if (!strcmp(a, "--setting"))
            o.setting = v;
        else if (!strcmp(a, "--faults"))
            o.faults = v;
        else if (!strcmp(a, "--nodes"))
            o.nodes = atoi(v);
        else if (!strcmp(a, "--faulty"))
            o.faulty = atoi(v);
        else if (!strcmp(a, "--rate"))
            o.rate = atof(v);
        else if (!strcmp(a, "--tasks"))
            o.tasks = atol(v);
        else if (!strcmp(a, "--warmup"))
            o.warmup = atol(v);
        else if (!strcmp(a, "--seconds"))
            o.seconds = atof(v);
        else if (!strcmp(a, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else
            return -1;
    }
    return o.endpoint && o.setting && o.faults && o.nodes > 0 && o.nodes <= 4096 && o.tasks > 0
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    if (parse(argc, argv) < 0) {
        fprintf(stderr, "usage: validation --endpoint EP --setting S --faults F [--nodes N] "
                        "[--faulty N] [--rate P] [--tasks N] [--warmup N] [--seconds S]\n");
        return 2;
    }
    rng_state = o.seed * 0x9E3779B97F4A7C15ULL | 1;
    wire_buf_init(&wb);
    ctx = zmq_ctx_new();
    int zero = 0, tmo = 60000;
    ctl = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(ctl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(ctl, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_connect(ctl, o.endpoint);
    struct sim *s = calloc((size_t)o.nodes, sizeof *s);
    zmq_pollitem_t *items = calloc((size_t)o.nodes, sizeof *items);
    if (!s || !items)
        return 1;
    if (!strcmp(o.setting, "adaptive_spot") && !submit("k", 100, true))
        return 1;
    uint64_t warm = adaptive() && o.warmup > 0 ? submit("w", o.warmup, false) : 0;
    uint64_t meas = 0;
    int64_t t0 = now_ns(), deadline = t0 + (int64_t)(o.seconds * 1e9), tmeas = 0;
    if (!warm) {
        meas = submit("ok", o.tasks, false);
        tmeas = now_ns();
    }
    for (int i = 0; i < o.nodes; i++) {
        s[i].faulty = (long)i * o.faulty / o.nodes != (long)(i + 1) * o.faulty / o.nodes;
        s[i].sock = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(s[i].sock, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(s[i].sock, o.endpoint);
        items[i] = (zmq_pollitem_t){s[i].sock, 0, ZMQ_POLLIN, 0};
        send_next(&s[i]);
    }
    long computed = 0;
    int64_t next_check = now_ns();
    char st[32] = "";
    while (now_ns() < deadline) {
        if (zmq_poll(items, o.nodes, 10) < 0 && errno != EINTR)
            break;
        int64_t now = now_ns();
        int start = (int)(rnd() * o.nodes); /* no node is always served first */
        for (int k = 0; k < o.nodes; k++) {
            int i = (start + k) % o.nodes;
            struct sim *n = &s[i];
            if (n->waiting && now >= n->retry_ns) {
                n->waiting = false;
                send_next(n);
            }
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            zmq_msg_t msg;
            struct wire_msg m;
            struct wire_error e;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, n->sock, ZMQ_DONTWAIT) < 0 ||
                wire_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), false, &m, &e) < 0) {
                zmq_msg_close(&msg);
                continue;
            }
            if (m.type == WT_WELCOME) {
                wire_get_strbuf(m.root, "sid", n->sid, sizeof n->sid);
                n->welcomed = true;
            }
            n->has = false;
            const msgpack_object *ts = wire_get(m.root, "tasks");
            if (m.type == WT_TASKS && ts && ts->via.array.size > 0) {
                run_task(n, &ts->via.array.ptr[0]);
                computed += meas && n->job == meas;
                send_next(n);
            } else if (m.type == WT_WELCOME) {
                send_next(n);
            } else {
                n->waiting = true;
                n->retry_ns = now + 20000000; /* 20 ms: keep the simulation moving */
            }
            wire_msg_free(&m);
            zmq_msg_close(&msg);
        }
        if (now >= next_check) {
            next_check = now + 250000000;
            if (!meas && job_state(warm, st, sizeof st) == 0 && strcmp(st, "running") &&
                strcmp(st, "queued")) {
                meas = submit("ok", o.tasks, false);
                tmeas = now_ns();
                fprintf(stderr, "validation: warm-up done, measuring\n");
            } else if (meas && job_state(meas, st, sizeof st) == 0 &&
                       (!strcmp(st, "done") || !strcmp(st, "failed"))) {
                break;
            }
        }
    }
    double wall = meas ? (double)(now_ns() - tmeas) / 1e9 : 0;
    long wrong = meas ? count_wrong(meas) : -1;
    if (strcmp(st, "done") && strcmp(st, "failed"))
        fprintf(stderr, "validation: the measured job did not finish in %.0f s (state %s)\n",
                o.seconds, st);
    printf("{\"setting\":\"%s\",\"faults\":\"%s\",\"wrong_accepted\":%ld,"
           "\"wrong_accepted_fraction\":%.6f,\"results_per_task\":%.3f,\"wall_s\":%.2f}\n",
           o.setting, o.faults, wrong, wrong >= 0 ? (double)wrong / (double)o.tasks : -1.0,
           (double)computed / (double)o.tasks, wall);
    for (int i = 0; i < o.nodes; i++)
        zmq_close(s[i].sock);
    zmq_close(ctl);
    zmq_ctx_term(ctx);
    free(s);
    free(items);
    wire_buf_free(&wb);
    return strcmp(st, "done") && strcmp(st, "failed") ? 1 : 0;
}

/*
 * handshake.c - load generator of the handshake benchmark (bench/handshake.sh): how
 * many new connections per second a cluster accepts. Each connection is a fresh DEALER
 * that connects (a CURVE handshake and a ZAP check when GRIDNODE_KEY is set, see
 * daemon/curve.h), sends one NODE_LIST (count 1) and waits for its reply; then it is
 * closed. --parallel connections are opened at a time, in waves, until --connections
 * are done or --seconds pass. One JSON line on stdout.
 *
 *   handshake --endpoint EP [--connections N] [--parallel P] [--seconds S]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "wire/wire.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *open_one(void *ctx, const char *ep, const struct wire_buf *wb)
{
    int zero = 0;
    char err[800];
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) < 0) {
        fprintf(stderr, "handshake: zmq_socket: %s\n", zmq_strerror(errno));
        exit(1);
    }
    if (curve_client_apply(s, NULL, ep, err, sizeof err) < 0) {
        fprintf(stderr, "handshake: %s\n", err);
        exit(1);
    }
    if (zmq_connect(s, ep) < 0 || zmq_send(s, wb->sb.data, wb->sb.size, 0) < 0) {
        fprintf(stderr, "handshake: %s: %s\n", ep, zmq_strerror(errno));
        exit(1);
    }
    return s;
}

/* Waits for the reply of each of the n sockets (bounded); returns how many replied. */
static int wave_wait(void **s, int n, double deadline)
{
    zmq_pollitem_t *it = calloc((size_t)n, sizeof *it);
    int got = 0;
    for (int i = 0; i < n; i++)
        it[i] = (zmq_pollitem_t){s[i], 0, ZMQ_POLLIN, 0};
    while (got < n && now_s() < deadline) {
        if (zmq_poll(it, n, 100) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            if (it[i].events && (it[i].revents & ZMQ_POLLIN)) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, s[i], ZMQ_DONTWAIT) >= 0) {
                    got++;
                    it[i].events = 0; /* answered: no longer polled */
                }
                zmq_msg_close(&m);
            }
    }
    free(it);
    return got;
}

int main(int argc, char **argv)
{
    const char *ep = NULL;
    long total = 2000, par = 50;
    double seconds = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--endpoint"))
            ep = argv[i + 1];
        else if (!strcmp(argv[i], "--connections"))
            total = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--parallel"))
            par = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
    }
    if (!ep || total < 1 || par < 1 || par > 1000 || seconds <= 0) {
        fprintf(stderr, "usage: handshake --endpoint EP [--connections N] [--parallel P] "
                        "[--seconds S]\n");
        return 2;
    }
    void *ctx = zmq_ctx_new();
    void **s = calloc((size_t)par, sizeof *s);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_NODE_LIST, 1, 1);
    wire_put_u64(&wb, "count", 1);
    double t0 = now_s(), end = t0 + seconds;
    long done = 0, lost = 0;
    while (done < total && now_s() < end) {
        int n = (int)(total - done < par ? total - done : par);
        for (int i = 0; i < n; i++)
            s[i] = open_one(ctx, ep, &wb);
        int got = wave_wait(s, n, end + 10);
        done += got;
        lost += n - got;
        for (int i = 0; i < n; i++)
            zmq_close(s[i]);
        if (got == 0)
            break;
    }
    double wall = now_s() - t0;
    printf("{\"bench\":\"handshake\",\"connections_per_s\":%.0f,\"connections\":%ld,"
           "\"parallel\":%ld,\"unanswered\":%ld,\"wall_s\":%.2f}\n",
           wall > 0 ? (double)done / wall : 0.0, done, par, lost, wall);
    wire_buf_free(&wb);
    free(s);
    zmq_ctx_term(ctx);
    return done > 0 ? 0 : 1;
}

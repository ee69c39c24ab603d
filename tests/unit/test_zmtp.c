/*
 * test_zmtp.c - the tools' own ZMTP client (cmd/zmtp.c) against a real libzmq
 * ROUTER (loaded through daemon/zmqdl.c) on loopback: the handshake, small, long
 * (8-byte size) and large messages both ways, several requests on one connection,
 * a refused connection retried until the deadline, a silent peer timing out, a
 * frame over the size limit, a peer that is not ZMTP, a connection closed before the
 * greeting tried again, and which endpoints it takes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cmd/zmtp.h"

/* A ROUTER echo server in a thread: answers each message with its bytes reversed,
 * `answers` times, then waits for stop. */
struct server {
    void *ctx, *sock;
    char endpoint[64];
    int answers;
    int delay_ms; /* before each answer */
    pthread_t th;
};

static void *serve(void *arg)
{
    struct server *s = arg;
    for (int k = 0; k < s->answers; k++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, s->sock, 0) < 0 || zmq_msg_recv(&body, s->sock, 0) < 0)
            break;
        size_t n = zmq_msg_size(&body);
        unsigned char *in = zmq_msg_data(&body), *out = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            out[i] = in[n - 1 - i];
        if (s->delay_ms)
            usleep((useconds_t)s->delay_ms * 1000);
        zmq_send(s->sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
        zmq_send(s->sock, out, n, 0);
        free(out);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return NULL;
}

/* heartbeat_ms > 0: the ROUTER pings every heartbeat_ms and drops a peer silent for
 * 3 intervals. */
static void server_start_hb(struct server *s, int answers, int heartbeat_ms)
{
    int zero = 0, timeout = 3 * heartbeat_ms;
    size_t len = sizeof s->endpoint;
    s->answers = answers;
    s->ctx = zmq_ctx_new();
    s->sock = zmq_socket(s->ctx, ZMQ_ROUTER);
    assert_non_null(s->sock);
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (heartbeat_ms > 0) {
        zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_IVL, &heartbeat_ms, sizeof heartbeat_ms);
        zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    }
    assert_int_equal(zmq_bind(s->sock, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len), 0);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_start(struct server *s, int answers)
{
    s->delay_ms = 0;
    server_start_hb(s, answers, 0);
}

static void server_stop(struct server *s)
{
    pthread_join(s->th, NULL);
    zmq_close(s->sock);
    zmq_ctx_term(s->ctx);
}

static void roundtrip(struct zmtp *z, size_t n)
{
    unsigned char *msg = calloc(1, n ? n : 1);
    assert_non_null(msg);
    for (size_t i = 0; i < n; i++)
        msg[i] = (unsigned char)(i * 7 + 3);
    assert_int_equal(zmtp_send(z, msg, n), 0);
    const unsigned char *got;
    size_t len;
    assert_int_equal(zmtp_recv(z, &got, &len), 0);
    assert_int_equal(len, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], msg[n - 1 - i]);
    free(msg);
}

static void test_roundtrips(void **state)
{
    (void)state;
    struct server s;
    struct zmtp z;
    static const size_t sizes[] = {0, 1, 255, 256, 4096, 4097, 70000, 3u << 20};
    size_t nsizes = sizeof sizes / sizeof sizes[0];
    server_start(&s, (int)nsizes);
    assert_int_equal(zmtp_open(&z, s.endpoint, 10000, 10000, 64u << 20), 0);
    for (size_t i = 0; i < nsizes; i++)
        roundtrip(&z, sizes[i]);
    zmtp_close(&z);
    server_stop(&s);
}

/* The request sent with the handshake (zmtp_open_send) reaches a libzmq ROUTER, small
 * (one write with the greeting) and large (sent after the handshake), then the
 * connection carries more round trips as usual. */
static void test_open_send_eager(void **state)
{
    (void)state;
    struct server s;
    struct zmtp z;
    static const size_t sizes[] = {0, 17, ZMTP_EAGER_MAX, ZMTP_EAGER_MAX + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *msg = calloc(1, n ? n : 1);
        assert_non_null(msg);
        for (size_t i = 0; i < n; i++)
            msg[i] = (unsigned char)(i * 5 + 1);
        server_start(&s, 2);
        int rr = zmtp_open_send(&z, s.endpoint, 10000, 10000, 1u << 20, msg, n);
        if (rr)
            fprintf(stderr, "size %zu: %s\n", n, z.err);
        assert_int_equal(rr, 0);
        const unsigned char *got;
        size_t len;
        assert_int_equal(zmtp_recv(&z, &got, &len), 0);
        assert_int_equal(len, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(got[i], msg[n - 1 - i]);
        roundtrip(&z, 100);
        zmtp_close(&z);
        server_stop(&s);
        free(msg);
    }
}

/* A peer with heartbeats on that answers slowly: the client answers its PINGs
 * (PONG), so the connection stays up until the answer. */
static void test_heartbeat_peer_slow_answer(void **state)
{
    (void)state;
    struct server s;
    struct zmtp z;
    s.delay_ms = 1000;
    server_start_hb(&s, 1, 50);
    assert_int_equal(zmtp_open(&z, s.endpoint, 20000, 20000, 1024), 0);
    roundtrip(&z, 10);
    zmtp_close(&z);
    server_stop(&s);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A port nothing listens on: bound then closed. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_refused_until_deadline(void **state)
{
    (void)state;
    char ep[64];
    struct zmtp z;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", free_port());
    double t0 = now_s();
    assert_int_equal(zmtp_open(&z, ep, 300, 300, 1024), -1);
    double took = now_s() - t0;
    assert_true(took >= 0.25); /* retried, like libzmq's reconnection */
    assert_true(took < 30);
    assert_non_null(strstr(z.err, "refused"));
    zmtp_close(&z);
}

static void test_silent_peer_times_out(void **state)
{
    (void)state;
    struct server s;
    struct zmtp z;
    server_start(&s, 0); /* handshakes, never answers */
    assert_int_equal(zmtp_open(&z, s.endpoint, 300, 300, 1024), 0);
    assert_int_equal(zmtp_send(&z, "x", 1), 0);
    const unsigned char *d;
    size_t n;
    assert_int_equal(zmtp_recv(&z, &d, &n), -1);
    assert_non_null(strstr(z.err, "timed out"));
    zmtp_close(&z);
    server_stop(&s);
}

static void test_oversized_reply(void **state)
{
    (void)state;
    struct server s;
    struct zmtp z;
    char big[2000] = {0};
    server_start(&s, 1);
    assert_int_equal(zmtp_open(&z, s.endpoint, 10000, 10000, 1000), 0);
    assert_int_equal(zmtp_send(&z, big, sizeof big), 0);
    const unsigned char *d;
    size_t n;
    assert_int_equal(zmtp_recv(&z, &d, &n), -1);
    assert_non_null(strstr(z.err, "limit"));
    zmtp_close(&z);
    server_stop(&s);
}

/* A TCP server that answers the greeting with HTTP. */
static void *not_zmtp(void *arg)
{
    int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
        static const char resp[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
        char buf[64];
        if (recv(fd, buf, sizeof buf, 0) >= 0 && send(fd, resp, sizeof resp - 1, 0) >= 0)
            shutdown(fd, SHUT_WR);
        close(fd);
    }
    return NULL;
}

static void test_not_zmtp(void **state)
{
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 1), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, not_zmtp, &lfd), 0);
    char ep[64];
    struct zmtp z;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(zmtp_open(&z, ep, 5000, 5000, 1024), -1);
    assert_true(strstr(z.err, "ZMTP") || strstr(z.err, "closed"));
    zmtp_close(&z);
    pthread_join(th, NULL);
    close(lfd);
}

/* Closes the first connection before sending a byte (a role going down), then speaks
 * just enough ZMTP on the second: greeting, READY, one message "ok". */
static void *close_then_serve(void *arg)
{
    int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
    if (fd >= 0)
        close(fd);
    if ((fd = accept(lfd, NULL, NULL)) < 0)
        return NULL;
    unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    static const unsigned char ready[] = {4,   28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                          'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                          0,   0,   0,   6,   'R', 'O', 'U', 'T', 'E', 'R'};
    static const unsigned char msg[] = {0, 2, 'o', 'k'};
    unsigned char in[64];
    size_t got = 0;
    ssize_t n;
    if (send(fd, g, sizeof g, 0) == (ssize_t)sizeof g) {
        while (got < sizeof in && (n = recv(fd, in + got, sizeof in - got, 0)) > 0)
            got += (size_t)n;
        if (got == sizeof in && send(fd, ready, sizeof ready, 0) == (ssize_t)sizeof ready)
            (void)!send(fd, msg, sizeof msg, 0);
    }
    usleep(200000);
    close(fd);
    return NULL;
}

/* A connection closed before the peer's greeting is tried again (like a refused one,
 * for connect_ms): nothing of the request went out on it. */
static void test_closed_before_greeting_retried(void **state)
{
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_then_serve, &lfd), 0);
    char ep[64];
    struct zmtp z;
    const unsigned char *d;
    size_t n;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    int rc = zmtp_open_send(&z, ep, 5000, 5000, 1024, "hi", 2);
    if (rc != 0)
        fprintf(stderr, "zmtp_open_send: %s\n", z.err);
    assert_int_equal(rc, 0);
    assert_int_equal(zmtp_recv(&z, &d, &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(d, "ok", 2);
    zmtp_close(&z);
    pthread_join(th, NULL);
    close(lfd);
}

static void test_supported(void **state)
{
    (void)state;
    assert_true(zmtp_supported("tcp://127.0.0.1:7300"));
    assert_true(zmtp_supported("tcp://localhost:7300"));
    assert_true(zmtp_supported("tcp://[::1]:7300"));
    assert_false(zmtp_supported("ipc:///tmp/x"));
    assert_false(zmtp_supported("tcp://127.0.0.1"));
    assert_false(zmtp_supported("tcp://127.0.0.1:"));
    assert_false(zmtp_supported("tcp://127.0.0.1:*"));
    assert_false(zmtp_supported("tcp://*:7300"));
    assert_false(zmtp_supported("tcp://10.0.0.1:5555;127.0.0.1:7300"));
    assert_false(zmtp_supported("tcp://[::1:7300"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrips),
        cmocka_unit_test(test_open_send_eager),
        cmocka_unit_test(test_heartbeat_peer_slow_answer),
        cmocka_unit_test(test_refused_until_deadline),
        cmocka_unit_test(test_silent_peer_times_out),
        cmocka_unit_test(test_oversized_reply),
        cmocka_unit_test(test_not_zmtp),
        cmocka_unit_test(test_closed_before_greeting_retried),
        cmocka_unit_test(test_supported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

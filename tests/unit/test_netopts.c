/*
 * test_netopts.c - transport settings (daemon/netopts.c): the options are accepted by this
 * libzmq, the monitor reports "up" when a connection is made and "down" when the peer
 * goes away (over real TCP on loopback), a connect to nothing reports retries, not
 * "up"; the round-trip estimator raises the request timeout above its floor only for
 * long or varying round trips, and caps it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/netopts.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits (bounded) for event want on mon; returns 1 if seen. */
static int wait_event(void *mon, int want, int64_t limit_ms)
{
    int64_t end = now_ms() + limit_ms;
    while (now_ms() < end) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        int ev;
        while ((ev = netopts_monitor_read(mon)) >= 0)
            if (ev == want)
                return 1;
    }
    return 0;
}

/*
 * A loopback TCP endpoint nobody listens on: a port the kernel hands out, released at
 * once. (A ZeroMQ socket bound and closed would do for the port, but its close is
 * asynchronous: its listener can still accept the first connect, and the client then
 * sees a connection lost before any server came, which is a heal when one does.)
 */
static void free_endpoint(char *ep, size_t n)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    snprintf(ep, n, "tcp://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
}

static void test_monitor_up_and_down(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *srv = zmq_socket(ctx, ZMQ_ROUTER), *cli = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    char ep[256];
    size_t eplen = sizeof ep;
    zmq_setsockopt(srv, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(cli, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(netopts_liveness(srv, 1000), 0);
    assert_int_equal(netopts_liveness(cli, 1000), 0);
    assert_int_equal(netopts_connecting(cli), 0);
    assert_int_equal(zmq_bind(srv, "tcp://127.0.0.1:*"), 0);
    zmq_getsockopt(srv, ZMQ_LAST_ENDPOINT, ep, &eplen);
    void *mon = netopts_monitor(ctx, cli, "t1");
    assert_non_null(mon);
    assert_int_equal(zmq_connect(cli, ep), 0);
    assert_true(wait_event(mon, NETOPTS_EV_UP, 10000));
    zmq_close(srv); /* the peer goes away: the connection is lost */
    assert_true(wait_event(mon, NETOPTS_EV_DOWN, 10000));
    zmq_close(mon);
    zmq_close(cli);
    zmq_ctx_term(ctx);
}

static void test_monitor_retry_without_server(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *cli = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, one = 1;
    char ep[256];
    zmq_setsockopt(cli, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(cli, ZMQ_IMMEDIATE, &one, sizeof one);
    free_endpoint(ep, sizeof ep); /* a port nobody listens on */
    netopts_connecting(cli);
    void *mon = netopts_monitor(ctx, cli, "t2");
    assert_non_null(mon);
    assert_int_equal(zmq_connect(cli, ep), 0);
    assert_true(wait_event(mon, NETOPTS_EV_RETRY, 10000));
    /* nothing is queued while not connected: the caller sees EAGAIN, not a failure */
    assert_int_equal(zmq_send(cli, "x", 1, ZMQ_DONTWAIT), -1);
    zmq_close(mon);
    zmq_close(cli);
    zmq_ctx_term(ctx);
}

/* Reads link events until want (or the limit); returns 1 if seen. */
static int link_wait(struct netopts_link *k, int want, int64_t limit_ms)
{
    int64_t end = now_ms() + limit_ms;
    while (now_ms() < end) {
        zmq_pollitem_t it = {k->mon, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        int ev;
        while ((ev = netopts_link_event(k, now_ms())) >= 0)
            if (ev == want)
                return 1;
    }
    return 0;
}

/*
 * The link state the clients act on: a fresh socket is "connecting" (a send's EAGAIN is
 * no failed round); a refused attempt ends that (the server is absent); the first UP is
 * no heal, an UP after a lost connection is one (backoff cut); DOWN marks it lost.
 */
static void test_link_states(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *srv, *cli = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, one = 1;
    char ep[256];
    zmq_setsockopt(cli, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(cli, ZMQ_IMMEDIATE, &one, sizeof one);
    free_endpoint(ep, sizeof ep); /* nobody listens yet */
    struct netopts_link k;
    assert_int_equal(netopts_link_open(&k, ctx, cli, 1000, "t3", now_ms()), 0);
    assert_true(netopts_link_connecting(&k));
    assert_int_equal(zmq_connect(cli, ep), 0);
    assert_true(link_wait(&k, NETOPTS_EV_RETRY, 10000));
    assert_true(k.refused && k.down && !netopts_link_connecting(&k));
    srv = zmq_socket(ctx, ZMQ_ROUTER); /* the server comes: a first connection */
    zmq_setsockopt(srv, ZMQ_LINGER, &zero, sizeof zero);
    netopts_liveness(srv, 1000);
    assert_int_equal(zmq_bind(srv, ep), 0);
    assert_true(link_wait(&k, NETOPTS_EV_UP, 15000));
    assert_true(!k.down && !k.refused && !k.healed);
    zmq_close(srv); /* lost */
    assert_true(link_wait(&k, NETOPTS_EV_DOWN, 10000));
    assert_true(k.down && k.lost && netopts_link_connecting(&k));
    srv = zmq_socket(ctx, ZMQ_ROUTER); /* back on the same port: healed */
    zmq_setsockopt(srv, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(srv, ep), 0);
    assert_true(link_wait(&k, NETOPTS_EV_UP, 15000));
    assert_true(k.healed && !k.lost && !k.down);
    int64_t h = netopts_link_heal_ms();
    assert_true(h >= 0 && h <= 2000);
    netopts_link_close(&k);
    assert_null(k.mon);
    zmq_close(srv);
    zmq_close(cli);
    zmq_ctx_term(ctx);
}

static void test_rtt_timeout(void **state)
{
    (void)state;
    struct netopts_rtt r;
    memset(&r, 0, sizeof r);
    assert_int_equal(netopts_rtt_timeout(&r, 5000), 5000); /* no samples: the floor */
    for (int i = 0; i < 20; i++)
        netopts_rtt_sample(&r, 10);
    assert_int_equal(netopts_rtt_timeout(&r, 5000), 5000); /* short trips keep the floor */
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 20; i++)
        netopts_rtt_sample(&r, 1000 + (i % 2) * 2000); /* 1 s and 3 s alternating */
    int64_t t = netopts_rtt_timeout(&r, 5000);
    assert_true(t > 8000 && t <= 120000);
    for (int i = 0; i < 50; i++)
        netopts_rtt_sample(&r, 100000);
    assert_int_equal(netopts_rtt_timeout(&r, 5000), 120000);   /* capped */
    assert_int_equal(netopts_rtt_timeout(&r, 200000), 200000); /* a floor above the cap */
    memset(&r, 0, sizeof r); /* the queue's cover: two round trips and their variation */
    assert_true(netopts_rtt_cover_s(&r) == 0);
    r.srtt = 400;
    r.rttvar = 10;
    r.samples = 3;
    assert_true(netopts_rtt_cover_s(&r) > 0.839 && netopts_rtt_cover_s(&r) < 0.841);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_monitor_up_and_down),
        cmocka_unit_test(test_monitor_retry_without_server),
        cmocka_unit_test(test_link_states),
        cmocka_unit_test(test_rtt_timeout),
    };
    return cmocka_run_group_tests_name("netopts", tests, NULL, NULL);
}

/*
 * test_daemon.c - the shared request/reply skeleton (daemon/daemon.c) over inproc:
 * dispatch and replies after the commit, a failed commit turning the turn's replies
 * into STORAGE errors and reloading, bad and multi-frame requests refused before
 * dispatch, the per-peer reply bound, the state-directory lock across processes, and
 * held (deferred) replies: sent after a later commit, expired at their deadline, one
 * per peer and kind, bounded in number.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "daemon/daemon.h"
#include "daemon/loop.h"
#include "wire/wire.h"

struct daemon *g_daemon; /* for dispatch to hold requests */

struct role {
    int dispatched, commits, reloads;
    int fail_commit;
    /* holding: hold every request for hold_ms, kind = id % kinds (0: do not hold) */
    int64_t hold_ms;
    uint64_t kinds;
    uint64_t last_handle;
    int expired;
};

#define EXPIRED_CODE 99

static void dispatch(void *arg, const struct wire_msg *m, const char *peer, struct wire_buf *reply)
{
    struct role *r = arg;
    (void)peer;
    r->dispatched++;
    if (r->kinds) {
        uint64_t h = daemon_hold(g_daemon, (uint32_t)(m->id % r->kinds), r->hold_ms);
        if (h) {
            r->last_handle = h;
            wire_begin(reply, WT_OK, m->id, 0); /* ignored: held */
            return;
        }
    }
    wire_begin(reply, WT_OK, m->id, 0);
}

static void expire(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id,
                   struct wire_buf *reply)
{
    struct role *r = arg;
    (void)handle;
    (void)kind;
    r->expired++;
    wire_error_msg(reply, req_id, EXPIRED_CODE, "expired");
}

static int commit(void *arg)
{
    struct role *r = arg;
    r->commits++;
    return r->fail_commit ? -1 : 0;
}

static void reload(void *arg)
{
    ((struct role *)arg)->reloads++;
}

static void stop(struct loop *l, void *arg)
{
    (void)arg;
    loop_stop(l);
}

struct fixture {
    char dir[64];
    struct loop *l;
    struct daemon *d;
    void *peer;
    struct role role;
};

static void setup_fx(struct fixture *f, long peer_queue, int peer_rcvhwm)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/test_daemon.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->l = loop_new();
    assert_non_null(f->l);
    static const struct curve_conf plain = {.plain = 1}; /* inproc: CURVE in test_curve.c */
    struct daemon_opts o = {"test", "inproc://daemon", f->dir, peer_queue, .security = &plain};
    struct daemon_ops ops = {dispatch, commit, reload, &f->role, expire};
    f->d = daemon_new(f->l, &o, &ops);
    assert_non_null(f->d);
    g_daemon = f->d;
    assert_string_equal(daemon_endpoint(f->d), "inproc://daemon");
    f->peer = zmq_socket(daemon_zctx(f->d), ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(f->peer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->peer, ZMQ_RCVHWM, &peer_rcvhwm, sizeof peer_rcvhwm);
    assert_int_equal(zmq_connect(f->peer, "inproc://daemon"), 0);
}

static void teardown_fx(struct fixture *f)
{
    char path[128];
    zmq_close(f->peer);
    daemon_destroy(&f->d);
    assert_null(f->d);
    loop_destroy(&f->l);
    snprintf(path, sizeof path, "%s/endpoint", f->dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/lock", f->dir);
    unlink(path);
    rmdir(f->dir);
}

static void send_req(void *s, uint64_t id, int flags)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_NODE_LIST, id, 0);
    assert_true(zmq_send(s, wb.sb.data, wb.sb.size, flags) >= 0);
    wire_buf_free(&wb);
}

/* Runs loop turns for about ms milliseconds. */
static void run_ms(struct fixture *f, int ms)
{
    loop_timer(f->l, ms, 0, stop, NULL);
    assert_int_equal(loop_run(f->l), 0);
}

static int recv_reply_ms(void *s, uint64_t *id, uint64_t *code, long ms);

/* The next reply's type and code (0 when not an ERROR); -1 when none within 1 s. */
static int recv_reply(void *s, uint64_t *id, uint64_t *code)
{
    return recv_reply_ms(s, id, code, 1000);
}

static int recv_reply_ms(void *s, uint64_t *id, uint64_t *code, long ms)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return -1;
    zmq_msg_t m;
    zmq_msg_init(&m);
    assert_true(zmq_msg_recv(&m, s, 0) >= 0);
    struct wire_msg msg;
    struct wire_error err;
    assert_int_equal(wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &msg, &err), 0);
    int t = (int)msg.type;
    *id = msg.id;
    *code = wire_get_u64(msg.root, "code", 0);
    wire_msg_free(&msg);
    zmq_msg_close(&m);
    return t;
}

static void test_replies_after_commit(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    for (uint64_t i = 1; i <= 5; i++)
        send_req(f.peer, i, 0);
    run_ms(&f, 100);
    assert_int_equal(f.role.dispatched, 5);
    assert_true(f.role.commits >= 1);
    assert_int_equal(f.role.reloads, 0);
    for (uint64_t i = 1; i <= 5; i++) {
        uint64_t id, code;
        assert_int_equal(recv_reply(f.peer, &id, &code), WT_OK);
        assert_int_equal(id, i);
    }
    teardown_fx(&f);
}

static void test_failed_commit_storage(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    f.role.fail_commit = 1;
    send_req(f.peer, 41, 0);
    send_req(f.peer, 42, 0);
    run_ms(&f, 50);
    assert_int_equal(f.role.dispatched, 2);
    assert_true(f.role.reloads >= 1);
    for (uint64_t i = 41; i <= 42; i++) {
        uint64_t id, code;
        assert_int_equal(recv_reply(f.peer, &id, &code), WT_ERROR);
        assert_int_equal(id, i);
        assert_int_equal(code, WE_STORAGE);
    }
    teardown_fx(&f);
}

static void test_bad_and_multiframe_refused(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    assert_int_equal(zmq_send(f.peer, "\xc1", 1, 0), 1); /* not msgpack */
    send_req(f.peer, 7, ZMQ_SNDMORE);
    assert_int_equal(zmq_send(f.peer, "extra", 5, ZMQ_SNDMORE), 5);
    assert_int_equal(zmq_send(f.peer, "extra", 5, 0), 5);
    send_req(f.peer, 8, 0);
    run_ms(&f, 100);
    assert_int_equal(f.role.dispatched, 1); /* only the good one reached the role */
    uint64_t id, code;
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_ERROR);
    assert_int_equal(code, WE_MALFORMED);
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_ERROR);
    assert_int_equal(code, WE_MALFORMED);
    assert_int_equal(id, 0);
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_OK);
    assert_int_equal(id, 8);
    teardown_fx(&f);
}

static void test_peer_queue_bound(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 2, 1); /* the peer reads nothing while the daemon answers */
    for (uint64_t i = 1; i <= 200; i++)
        send_req(f.peer, i, 0);
    run_ms(&f, 200);
    assert_int_equal(f.role.dispatched, 200);
    assert_true(daemon_dropped(f.d) >= 150);
    int got = 0;
    uint64_t id, code;
    while (recv_reply(f.peer, &id, &code) == WT_OK)
        got++;
    assert_true(got >= 1 && got <= 50);
    assert_int_equal((uint64_t)got + daemon_dropped(f.d), 200);
    teardown_fx(&f);
}

static void test_state_dir_lock(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_daemon_lock.XXXXXX", err[512], path[128];
    assert_non_null(mkdtemp(dir));
    int fd = daemon_lock_state_dir(dir, err, sizeof err);
    assert_true(fd >= 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) { /* another process: refused, naming the holder */
        char e[512] = "";
        int rc = daemon_lock_state_dir(dir, e, sizeof e);
        ssize_t w = write(p[1], e, strlen(e) + 1);
        _exit(rc < 0 && w > 0 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(WEXITSTATUS(st), 0);
    char msg[512] = "", want[128];
    assert_true(read(p[0], msg, sizeof msg - 1) > 0);
    snprintf(want, sizeof want, "(pid %ld)", (long)getpid());
    assert_non_null(strstr(msg, "is in use by another gridnode process"));
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, dir));
    close(fd); /* the holder ends: another process gets it */
    pid = fork();
    if (pid == 0)
        _exit(daemon_lock_state_dir(dir, err, sizeof err) >= 0 ? 0 : 1);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(WEXITSTATUS(st), 0);
    close(p[0]);
    close(p[1]);
    snprintf(path, sizeof path, "%s/lock", dir);
    unlink(path);
    rmdir(dir);
}

/* A held request is answered only by daemon_reply_held, and only after a commit. */
static struct fixture *g_fx;
static int g_commits_at_reply, g_seen_early;

static void reply_later(struct loop *l, void *arg)
{
    struct fixture *f = g_fx;
    uint64_t id, code;
    (void)l;
    (void)arg;
    assert_int_equal(daemon_held_count(f->d), 1);
    g_seen_early += recv_reply_ms(f->peer, &id, &code, 0) != -1; /* still held */
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_OK, 7, 0);
    g_commits_at_reply = f->role.commits;
    assert_int_equal(daemon_reply_held(f->d, f->role.last_handle, &wb), 0);
    assert_int_equal(daemon_reply_held(f->d, f->role.last_handle, &wb), -1); /* answered */
    assert_int_equal(daemon_held_count(f->d), 0);
    g_seen_early += recv_reply_ms(f->peer, &id, &code, 0) != -1; /* waits for the commit */
    wire_buf_free(&wb);
}

static void test_held_reply_after_commit(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    g_fx = &f;
    g_seen_early = 0;
    f.role.kinds = 1;
    f.role.hold_ms = 60000;
    send_req(f.peer, 7, 0);
    loop_timer(f.l, 150, 0, reply_later, NULL);
    run_ms(&f, 300);
    uint64_t id, code;
    assert_int_equal(f.role.dispatched, 1);
    assert_int_equal(g_seen_early, 0);
    assert_true(f.role.commits > g_commits_at_reply);
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_OK);
    assert_int_equal(id, 7);
    assert_int_equal(f.role.expired, 0);
    teardown_fx(&f);
}

/* At its deadline a held request gets the role's expiry reply, without a new request. */
static void test_held_deadline(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    f.role.kinds = 1;
    f.role.hold_ms = 100;
    send_req(f.peer, 9, 0);
    run_ms(&f, 500);
    uint64_t id, code;
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_ERROR);
    assert_int_equal(id, 9);
    assert_int_equal(code, EXPIRED_CODE);
    assert_int_equal(f.role.expired, 1);
    assert_int_equal(daemon_held_count(f.d), 0);
    teardown_fx(&f);
}

/* One held request per peer and kind: a second one answers the first at once. */
static void test_held_one_per_peer_and_kind(void **state)
{
    (void)state;
    struct fixture f;
    setup_fx(&f, 0, 1000);
    f.role.kinds = 2;
    f.role.hold_ms = 60000;
    send_req(f.peer, 2, 0); /* kind 0 */
    send_req(f.peer, 3, 0); /* kind 1 */
    send_req(f.peer, 4, 0); /* kind 0 again: 2 is answered */
    run_ms(&f, 100);
    uint64_t id, code;
    assert_int_equal(recv_reply(f.peer, &id, &code), WT_ERROR);
    assert_int_equal(id, 2);
    assert_int_equal(code, EXPIRED_CODE);
    assert_int_equal(recv_reply_ms(f.peer, &id, &code, 50), -1);
    assert_int_equal(daemon_held_count(f.d), 2);
    teardown_fx(&f); /* held requests are freed (ASan checks) */
}

/* At most DAEMON_HELD_MAX held in all: beyond, the role answers at once. */
static void test_held_bounded(void **state)
{
    (void)state;
    struct fixture f;
    uint32_t extra = 10, n = DAEMON_HELD_MAX + extra;
    setup_fx(&f, 100000, 100000);
    f.role.kinds = 1u << 30; /* a kind per request */
    f.role.hold_ms = 60000;
    for (uint64_t i = 1; i <= n; i++)
        send_req(f.peer, i, 0);
    run_ms(&f, 1000); /* several turns of DAEMON_TURN_MAX requests */
    assert_int_equal(f.role.dispatched, n);
    assert_int_equal(daemon_held_count(f.d), DAEMON_HELD_MAX);
    uint64_t id, code;
    for (uint32_t i = 0; i < extra; i++) {
        assert_int_equal(recv_reply(f.peer, &id, &code), WT_OK);
        assert_true(id > DAEMON_HELD_MAX);
    }
    assert_int_equal(recv_reply_ms(f.peer, &id, &code, 50), -1);
    teardown_fx(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies_after_commit),
        cmocka_unit_test(test_failed_commit_storage),
        cmocka_unit_test(test_bad_and_multiframe_refused),
        cmocka_unit_test(test_peer_queue_bound),
        cmocka_unit_test(test_state_dir_lock),
        cmocka_unit_test(test_held_reply_after_commit),
        cmocka_unit_test(test_held_deadline),
        cmocka_unit_test(test_held_one_per_peer_and_kind),
        cmocka_unit_test(test_held_bounded),
    };
    return cmocka_run_group_tests_name("daemon", tests, NULL, NULL);
}

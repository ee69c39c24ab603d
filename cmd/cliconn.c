/*
 * cliconn.c - the user tools' transport (cli.h): a request and its reply over the
 * tools' own ZMTP client (cmd/zmtp.c: tcp://, plain or CURVE, no libzmq to load) or
 * over libzmq (ipc://, a source address, ...); one connection per request, or one kept
 * connection for all of a tool's requests (cli_keep: over a long link every new
 * connection costs the TCP, ZMTP and CURVE handshakes, several round trips).
 */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sodium.h>
#include <zmq.h>

#include "cmd/cli.h"
#include "cmd/zmtp.h"
#include "daemon/curve.h"
#include "lib/text.h"

enum fail {
    F_NONE,
    F_TIMEOUT, /* no answer in time */
    F_UNREACH, /* cannot reach the role: err says why */
    F_TALK,    /* reached, but the handshake failed: err says why */
    F_SAID,    /* err is the whole message */
};

#define STASH_MAX 64 /* replies kept for a request not asked about yet */

struct raw {
    uint64_t id;
    unsigned char *d;
    size_t n;
};

struct cli_conn {
    bool open, kept, zmq;
    struct zmtp z;           /* the own ZMTP client's connection */
    void *ctx, *s, *mon;     /* libzmq's */
    bool connected, retried; /* libzmq monitor events seen on this socket */
    enum fail fail;
    bool lost; /* the last failure lost the connection */
    char err[800];
    struct raw stash[STASH_MAX];
    uint32_t nstash;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 3, 4))) static int fail(struct cli_conn *k, enum fail f,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->err, sizeof k->err, fmt, ap);
    va_end(ap);
    k->fail = f;
    return -1;
}

static void print_unreachable(const struct cli *c, const char *why)
{
    if (why)
        fprintf(stderr, "%s: cannot reach %s: %s\n", c->prog, c->endpoint, why);
    else
        fprintf(stderr, "%s: no answer from %s within %d ms\n", c->prog, c->endpoint,
                c->timeout_ms);
    if (why && strstr(why, "resolve"))
        fprintf(stderr,
                "  check the host name in the endpoint (-e ENDPOINT or GRIDNODE_CLUSTER)\n");
    else
        fprintf(stderr, "  is the role running and listening there? (scripts/grid status; or pass "
                        "-e ENDPOINT / set GRIDNODE_CLUSTER)\n");
}

static void report(const struct cli *c, const struct cli_conn *k)
{
    if (k->fail == F_UNREACH)
        print_unreachable(c, k->err);
    else if (k->fail == F_TALK)
        fprintf(stderr, "%s: cannot talk to %s: %s\n", c->prog, c->endpoint, k->err);
    else if (k->fail == F_SAID)
        fprintf(stderr, "%s: %s\n", c->prog, k->err);
    else
        print_unreachable(c, NULL);
}

static void conn_close(struct cli_conn *k)
{
    if (!k->open)
        return;
    if (k->zmq) {
        if (k->mon)
            zmq_close(k->mon);
        if (k->s)
            zmq_close(k->s);
        if (k->ctx)
            zmq_ctx_term(k->ctx);
        k->ctx = k->s = k->mon = NULL;
    } else {
        zmtp_close(&k->z);
    }
    k->open = k->connected = k->retried = false;
}

/* True (err set) when endpoint is tcp://HOST:PORT with a HOST that does not resolve:
 * libzmq would retry it silently until the timeout. */
static bool tcp_host_unresolvable(const char *endpoint, char *err, size_t errlen)
{
    char host[256];
    if (strncmp(endpoint, "tcp://", 6))
        return false;
    const char *h = endpoint + 6, *colon = strrchr(endpoint, ':'), *semi = strchr(h, ';');
    if (semi) /* tcp://SOURCE;DESTINATION: the destination's host */
        h = semi + 1;
    if (!colon || colon < h)
        return false;
    size_t n = (size_t)(colon - h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
        h++, n -= 2;
    if (n == 0 || n >= sizeof host || (n == 1 && h[0] == '*'))
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, NULL, &hints, &ai);
    if (ai)
        freeaddrinfo(ai);
    if (g == 0)
        return false;
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
    return true;
}

/*
 * A libzmq DEALER (loaded on this first use) connected to the endpoint, with a monitor
 * of its connection events: a failed CURVE handshake ends a request at once with a
 * message saying which key is wrong. 0, or -1 (k->fail set).
 */
static int zmq_open_conn(const struct cli *c, struct cli_conn *k)
{
    int zero = 0;
    int64_t maxmsg = WIRE_MAX_FRAME;
    char err[700];
    k->zmq = k->open = true;
    k->ctx = zmq_ctx_new();
    k->s = k->ctx ? zmq_socket(k->ctx, ZMQ_DEALER) : NULL;
    if (!k->s)
        return fail(k, F_TIMEOUT, "no socket");
    zmq_setsockopt(k->s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(k->s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    /* An ipc:// endpoint whose socket file is missing can never answer: say so at once
     * instead of waiting out the timeout. */
    struct stat st;
    if (!strncmp(c->endpoint, "ipc://", 6) && stat(c->endpoint + 6, &st) != 0)
        return fail(k, F_UNREACH, "%s: %s", c->endpoint + 6, strerror(errno));
    /* libzmq 4.3.4: a server that cannot open our HELLO (we hold the wrong server key,
     * or it runs plain) ends the handshake without a reason (NO_DETAIL or PROTOCOL); a
     * server whose ZAP handler refused our key says so (AUTH) */
    if (curve_client_apply(k->s, NULL, c->endpoint, err, sizeof err) < 0)
        return fail(k, F_SAID, "%s", err);
    zmq_setsockopt(k->s, ZMQ_HANDSHAKE_IVL, &c->timeout_ms, sizeof c->timeout_ms);
    if (tcp_host_unresolvable(c->endpoint, err, sizeof err))
        return fail(k, F_UNREACH, "%s", err);
    /* a kept connection also watches for its loss (the request in flight is lost) */
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED |
                 (k->kept ? ZMQ_EVENT_DISCONNECTED : 0);
    if (zmq_socket_monitor(k->s, "inproc://cli-monitor", events) == 0 &&
        (k->mon = zmq_socket(k->ctx, ZMQ_PAIR))) {
        zmq_setsockopt(k->mon, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(k->mon, "inproc://cli-monitor");
    }
    if (zmq_connect(k->s, c->endpoint) < 0)
        return fail(k, F_SAID, "bad endpoint '%s': %s", c->endpoint, zmq_strerror(errno));
    return 0;
}

/* Records why the own ZMTP client failed (k->z.err) as k's failure; -1. A refused
 * CURVE handshake gets the words the libzmq path uses (curve_handshake_failure). */
static int zmtp_failed(struct cli_conn *k)
{
    if (k->z.refused == ZMTP_KEY_REFUSED)
        return fail(k, F_TALK, "%s", curve_handshake_failure(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH));
    if (k->z.refused == ZMTP_HANDSHAKE)
        return fail(k, F_TALK, "%s", curve_handshake_failure(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL));
    bool timeout = strstr(k->z.err, "timed out") || strstr(k->z.err, "Connection timed out");
    return fail(k, timeout ? F_TIMEOUT : F_UNREACH, "%s", k->z.err);
}

/*
 * Opens the own ZMTP client's connection to a tcp:// endpoint, plain or (with keys)
 * CURVE, with the request in wb going out with the handshake. 0, or -1 (k->fail set;
 * F_SAID when the keys cannot be read).
 */
static int own_open_send(const struct cli *c, struct cli_conn *k, struct wire_buf *wb, int left)
{
    struct zmtp_keys keys;
    char err[700];
    k->zmq = false;
    k->open = true;
    memset(&k->z, 0, sizeof k->z);
    k->z.fd = -1;
    int rc = curve_client_keys(NULL, c->endpoint, keys.secret, keys.server, err, sizeof err);
    if (rc < 0)
        return fail(k, F_SAID, "%s", err);
    if (rc == 1)
        rc = zmtp_open_send(&k->z, c->endpoint, left, c->connect_ms, WIRE_MAX_FRAME, wb->sb.data,
                            wb->sb.size);
    else
        rc = zmtp_open_curve(&k->z, c->endpoint, left, c->connect_ms, WIRE_MAX_FRAME, &keys,
                             wb->sb.data, wb->sb.size);
    sodium_memzero(&keys, sizeof keys);
    return rc < 0 ? zmtp_failed(k) : 0;
}

/* Sends the request in wb, opening the connection first if needed. 0, or -1. */
static int conn_send(const struct cli *c, struct cli_conn *k, struct wire_buf *wb, int64_t deadline)
{
    k->fail = F_NONE;
    k->lost = false;
    WIRE_CHECK_OUT(wb->sb.data, wb->sb.size, "a request");
    int left = (int)(deadline - now_ms());
    if (left < 1)
        left = 1;
    if (!k->open && zmtp_supported(c->endpoint)) {
        if (own_open_send(c, k, wb, left) == 0)
            return 0;
        conn_close(k);
        k->lost = true;
        return -1;
    } else if (!k->open) {
        if (zmq_open_conn(c, k) == 0 && zmq_send(k->s, wb->sb.data, wb->sb.size, 0) >= 0)
            return 0;
        if (k->fail == F_NONE)
            fail(k, F_TIMEOUT, "send failed");
        conn_close(k);
        k->lost = true;
        return -1;
    } else if (k->zmq) {
        if (zmq_send(k->s, wb->sb.data, wb->sb.size, 0) >= 0)
            return 0;
        fail(k, F_UNREACH, "send: %s", zmq_strerror(errno));
        conn_close(k);
        k->lost = true;
        return -1;
    } else {
        k->z.deadline_ms = deadline;
        if (zmtp_send(&k->z, wb->sb.data, wb->sb.size) == 0)
            return 0;
    }
    zmtp_failed(k);
    conn_close(k);
    k->lost = true;
    return -1;
}

/* libzmq: waits for the next message until deadline; 0 with *frame set, or -1. */
static int zmq_recv_until(const struct cli *c, struct cli_conn *k, int64_t deadline,
                          zmq_msg_t *frame)
{
    zmq_pollitem_t it[2] = {{k->s, 0, ZMQ_POLLIN, 0}, {k->mon, 0, ZMQ_POLLIN, 0}};
    int64_t t0 = now_ms();
    /* connection events: a refused connection (nothing listens) is retried by libzmq
     * for ever; like the plain path, give up after --connect-timeout */
    for (int64_t left = deadline - t0; left > 0; left = deadline - now_ms()) {
        if (zmq_poll(it, k->mon ? 2 : 1, left < 100 ? (long)left : 100) < 0 && errno != EINTR)
            break;
        if (k->mon && (it[1].revents & ZMQ_POLLIN)) {
            unsigned ev = curve_monitor_event(k->mon);
            const char *why = curve_handshake_failure(ev);
            if (ev == ZMQ_EVENT_CONNECTED)
                k->connected = true;
            else if (ev == ZMQ_EVENT_CONNECT_RETRIED)
                k->retried = true;
            else if (ev == ZMQ_EVENT_DISCONNECTED && k->kept)
                return fail(k, F_UNREACH, "the connection was lost");
            else if (why)
                return fail(k, F_TALK, "%s", why);
        }
        if ((it[0].revents & ZMQ_POLLIN) && zmq_msg_recv(frame, k->s, ZMQ_DONTWAIT) >= 0)
            return 0;
        if (!k->connected && k->retried && now_ms() - t0 >= c->connect_ms)
            break;
    }
    if (k->retried && !k->connected)
        return fail(k, F_UNREACH, "cannot connect: Connection refused");
    return fail(k, F_TIMEOUT, "no answer");
}

/* The next raw reply until deadline, copied into malloc'd *d. 0 or -1. */
static int conn_recv(const struct cli *c, struct cli_conn *k, int64_t deadline, unsigned char **d,
                     size_t *n)
{
    const unsigned char *p = NULL;
    zmq_msg_t frame;
    int rc;
    k->fail = F_NONE;
    k->lost = false;
    if (!k->open)
        return fail(k, F_UNREACH, "not connected");
    if (k->zmq) {
        zmq_msg_init(&frame);
        rc = zmq_recv_until(c, k, deadline, &frame);
        if (rc == 0) {
            p = zmq_msg_data(&frame);
            *n = zmq_msg_size(&frame);
        }
    } else {
        k->z.deadline_ms = deadline;
        rc = zmtp_recv(&k->z, &p, n);
        if (rc < 0)
            zmtp_failed(k);
    }
    if (rc == 0 && !(*d = malloc(*n ? *n : 1)))
        rc = fail(k, F_SAID, "out of memory");
    else if (rc == 0)
        memcpy(*d, p, *n);
    if (k->zmq)
        zmq_msg_close(&frame);
    /* a timeout leaves the connection as it was (a late reply is skipped by its id) */
    if (rc < 0 && k->fail != F_TIMEOUT) {
        conn_close(k);
        k->lost = true;
    }
    return rc;
}

/* Decodes raw reply bytes d (taken over) into r. 0, or -1 (k->err set; d freed). */
static int decode(const struct cli *c, struct cli_conn *k, unsigned char *d, size_t n,
                  struct cli_reply *r)
{
    struct wire_error err;
    r->frame = d;
    r->len = n;
    if (wire_decode(d, n, false, &r->msg, &err) == 0)
        return 0;
    free(d);
    r->frame = NULL;
    memset(&r->msg, 0, sizeof r->msg);
    return fail(k, F_SAID, "unreadable reply from %s: %s", c->endpoint, err.text);
}

static void stash_put(struct cli_conn *k, uint64_t id, unsigned char *d, size_t n)
{
    if (k->nstash == STASH_MAX) { /* the oldest: no one will ask for it now */
        free(k->stash[0].d);
        memmove(k->stash, k->stash + 1, --k->nstash * sizeof *k->stash);
    }
    k->stash[k->nstash++] = (struct raw){id, d, n};
}

/* Takes the stashed reply to id (any when any); true with *d, *n set. */
static bool stash_take(struct cli_conn *k, uint64_t id, bool any, unsigned char **d, size_t *n)
{
    for (uint32_t i = 0; i < k->nstash; i++)
        if (any || k->stash[i].id == id) {
            *d = k->stash[i].d;
            *n = k->stash[i].n;
            memmove(k->stash + i, k->stash + i + 1, (--k->nstash - i) * sizeof *k->stash);
            return true;
        }
    return false;
}

void cli_reply_free(struct cli_reply *r)
{
    wire_msg_free(&r->msg);
    free(r->frame);
    r->frame = NULL;
}

/* Plain (no CURVE) only to loopback: false after printing why. */
static bool plain_allowed(const struct cli *c)
{
    if (!zmtp_supported(c->endpoint) || curve_client_secure(NULL) ||
        curve_endpoint_local(c->endpoint))
        return true;
    fprintf(stderr,
            "%s: plain (GRIDNODE_PLAIN) is allowed only to loopback or ipc:// "
            "endpoints, not %s: set GRIDNODE_KEY and GRIDNODE_SERVER_KEY\n",
            c->prog, c->endpoint);
    return false;
}

/* The reply to request id until deadline, other replies kept (kept connection) or
 * skipped; as cli_call. */
static int await_reply(const struct cli *c, struct cli_conn *k, uint64_t id, int64_t deadline,
                       struct cli_reply *r)
{
    unsigned char *d;
    size_t n;
    for (;;) {
        if (!stash_take(k, id, false, &d, &n) && conn_recv(c, k, deadline, &d, &n) < 0)
            break;
        if (decode(c, k, d, n, r) < 0)
            break;
        if (r->msg.id == id) {
            if (r->msg.type != WT_ERROR)
                return 0;
            cli_print_error(c, r);
            cli_reply_free(r);
            return 1;
        }
        /* a reply to another request: kept for it (kept connection), else skipped */
        uint64_t other = r->msg.id;
        wire_msg_free(&r->msg);
        if (k->kept)
            stash_put(k, other, r->frame, r->len);
        else
            free(r->frame);
        r->frame = NULL;
    }
    report(c, k);
    return -1;
}

int cli_call(const struct cli *c, struct wire_buf *wb, uint64_t id, struct cli_reply *r)
{
    struct cli_conn one = {0}, *k = c->conn ? c->conn : &one;
    int64_t deadline = now_ms() + c->timeout_ms;
    int rc = -1;
    r->frame = NULL;
    r->len = 0;
    memset(&r->msg, 0, sizeof r->msg);
    if (!plain_allowed(c))
        return -1;
    if (conn_send(c, k, wb, deadline) < 0)
        report(c, k);
    else
        rc = await_reply(c, k, id, deadline, r);
    if (!k->kept)
        conn_close(k);
    return rc;
}

int cli_await(const struct cli *c, uint64_t id, struct cli_reply *r)
{
    r->frame = NULL;
    r->len = 0;
    memset(&r->msg, 0, sizeof r->msg);
    return await_reply(c, c->conn, id, now_ms() + c->timeout_ms, r);
}

int cli_keep(struct cli *c)
{
    if (c->conn)
        return 0;
    if (!(c->conn = calloc(1, sizeof *c->conn))) {
        fprintf(stderr, "%s: out of memory\n", c->prog);
        return -1;
    }
    c->conn->kept = true;
    return 0;
}

void cli_unkeep(struct cli *c)
{
    if (!c->conn)
        return;
    conn_close(c->conn);
    for (uint32_t i = 0; i < c->conn->nstash; i++)
        free(c->conn->stash[i].d);
    free(c->conn);
    c->conn = NULL;
}

int cli_send(const struct cli *c, struct wire_buf *wb)
{
    if (!plain_allowed(c)) {
        c->conn->lost = false;
        return fail(c->conn, F_SAID, "plain is allowed only to loopback");
    }
    return conn_send(c, c->conn, wb, now_ms() + c->timeout_ms);
}

int cli_recv(const struct cli *c, int timeout_ms, struct cli_reply *r)
{
    struct cli_conn *k = c->conn;
    unsigned char *d;
    size_t n;
    r->frame = NULL;
    memset(&r->msg, 0, sizeof r->msg);
    if (!stash_take(k, 0, true, &d, &n) && conn_recv(c, k, now_ms() + timeout_ms, &d, &n) < 0)
        return -1;
    return decode(c, k, d, n, r);
}

bool cli_lost(const struct cli *c)
{
    return c->conn && c->conn->lost;
}

void cli_report(const struct cli *c)
{
    if (c->conn)
        report(c, c->conn);
}

/*
 * zmtp.c - a minimal ZMTP 3.0 DEALER client over TCP (see zmtp.h; the protocol is
 * ZeroMQ RFC 23): the 64-byte greeting with the NULL mechanism, a READY command
 * each way (ours says Socket-Type DEALER), then frames of a flags byte, a 1- or
 * 8-byte big-endian size and the body. With CURVE (RFC 25/26, commands built in
 * cmd/zmtp_curve.c) the greeting names CURVE, HELLO/WELCOME and INITIATE/READY replace
 * the READYs, and every message travels as an encrypted MESSAGE. Everything waits with
 * poll() against one deadline, so a tool never waits longer than its --timeout.
 */
#include "cmd/zmtp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cmd/zmtp_curve.h"

#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_CMD 0x04
#define RECONNECT_MS 100 /* libzmq's default ZMQ_RECONNECT_IVL */

__attribute__((format(printf, 2, 3))) static int fail(struct zmtp *z, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->err, sizeof z->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before the deadline (0 once it has passed). */
static int left_ms(const struct zmtp *z)
{
    int64_t l = z->deadline_ms - now_ms();
    return l < 0 ? 0 : l > 1000000 ? 1000000 : (int)l;
}

/* Splits "tcp://HOST:PORT" (HOST may be [v6]); 0 or -1. */
static int split_endpoint(const char *ep, char *host, size_t hn, char *port, size_t pn)
{
    if (strncmp(ep, "tcp://", 6) != 0)
        return -1;
    ep += 6;
    if (strchr(ep, ';')) /* "tcp://source;destination": libzmq's */
        return -1;
    const char *colon = strrchr(ep, ':'), *h = ep, *he = colon;
    if (!colon || colon == ep || !colon[1])
        return -1;
    if (*ep == '[') {
        if (colon[-1] != ']')
            return -1;
        h = ep + 1;
        he = colon - 1;
    }
    size_t n = (size_t)(he - h), p = strlen(colon + 1);
    if (n == 0 || n >= hn || p >= pn || strspn(colon + 1, "0123456789") != p || memchr(h, '*', n))
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    memcpy(port, colon + 1, p + 1);
    return 0;
}

int zmtp_supported(const char *endpoint)
{
    char host[256], port[16];
    return split_endpoint(endpoint, host, sizeof host, port, sizeof port) == 0;
}

/* Waits until fd is ready for events; 1 ready, 0 deadline, -1 error. */
static int wait_fd(struct zmtp *z, short events)
{
    struct pollfd p = {z->fd, events, 0};
    for (;;) {
        int r = poll(&p, 1, left_ms(z));
        if (r >= 0 || errno != EINTR)
            return r < 0 ? -1 : r;
    }
}

/* One connection attempt to one address; 0 or -1 (errno). */
static int try_connect(struct zmtp *z, const struct addrinfo *a)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    z->fd = fd;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
        return 0;
    if (errno == EINPROGRESS && wait_fd(z, POLLOUT) > 0) {
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
            return 0;
        errno = e ? e : ETIMEDOUT;
    } else if (errno == EINPROGRESS) {
        errno = ETIMEDOUT;
    }
    int e = errno;
    close(fd);
    z->fd = -1;
    errno = e;
    return -1;
}

static int send_all(struct zmtp *z, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(z->fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(z, POLLOUT);
            if (r <= 0)
                return fail(z, r == 0 ? "timed out sending" : "send: %s", strerror(errno));
        } else {
            return fail(z, "send: %s", strerror(errno));
        }
    }
    return 0;
}

/* Makes at least need bytes available at z->buf + z->off; 0 or -1. */
static int fill(struct zmtp *z, size_t need)
{
    if (z->have - z->off >= need)
        return 0;
    if (z->off > 0) {
        memmove(z->buf, z->buf + z->off, z->have - z->off);
        z->have -= z->off;
        z->off = 0;
    }
    if (need > z->cap) {
        size_t nc = z->cap ? z->cap : 65536;
        while (nc < need)
            nc *= 2;
        unsigned char *p = realloc(z->buf, nc);
        if (!p)
            return fail(z, "out of memory");
        z->buf = p;
        z->cap = nc;
    }
    while (z->have < need) {
        ssize_t n = recv(z->fd, z->buf + z->have, z->cap - z->have, 0);
        if (n > 0) {
            z->have += (size_t)n;
        } else if (n == 0) {
            return fail(z, "the connection was closed by the peer");
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            int r = wait_fd(z, POLLIN);
            if (r == 0)
                return fail(z, "timed out");
            if (r < 0)
                return fail(z, "poll: %s", strerror(errno));
        } else {
            return fail(z, "recv: %s", strerror(errno));
        }
    }
    return 0;
}

/* Reads one frame: its flags, body and size. 0 or -1. */
static int read_frame(struct zmtp *z, unsigned *flags, unsigned char **body, size_t *len)
{
    size_t max = z->max_msg + (z->curve ? ZCURVE_MSG_OVERHEAD : 0);
    if (fill(z, 2) < 0)
        return -1;
    unsigned f = z->buf[z->off];
    uint64_t n = z->buf[z->off + 1];
    size_t head = 2;
    if (f & ~(unsigned)(FLAG_MORE | FLAG_LONG | FLAG_CMD))
        return fail(z, "malformed frame (flags 0x%02x)", f);
    if (f & FLAG_LONG) {
        if (fill(z, 9) < 0)
            return -1;
        n = 0;
        for (int i = 1; i <= 8; i++)
            n = n << 8 | z->buf[z->off + (size_t)i];
        head = 9;
    }
    if (n > max)
        return fail(z, "a frame of %llu bytes is over the %zu-byte limit", (unsigned long long)n,
                    max);
    if (fill(z, head + (size_t)n) < 0)
        return -1;
    *flags = f;
    *body = z->buf + z->off + head;
    *len = (size_t)n;
    z->off += head + (size_t)n;
    return 0;
}

/* A message frame's header for len bytes (last frame) into head; its size. */
static size_t frame_head(unsigned char head[9], size_t len)
{
    if (len <= 255) {
        head[0] = 0;
        head[1] = (unsigned char)len;
        return 2;
    }
    head[0] = FLAG_LONG;
    for (int i = 0; i < 8; i++)
        head[1 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    return 9;
}

/* An ERROR command (b, n) from the peer: its reason into z->err; -1. */
static int refused(struct zmtp *z, const unsigned char *b, size_t n)
{
    int rn = n > 6 ? b[6] : 0;
    if (rn > (int)n - 7)
        rn = (int)n - 7 > 0 ? (int)n - 7 : 0;
    for (int i = 0; i < rn; i++) /* shown to people: printable ASCII only */
        if (b[7 + i] < 0x20 || b[7 + i] > 0x7e)
            rn = i;
    z->refused = z->curve ? ZMTP_KEY_REFUSED : ZMTP_OK;
    return fail(z, "the peer refused the connection: %.*s", rn, (const char *)b + 7);
}

/* Our greeting for mechanism mech (NULL or CURVE), as a client. */
static void greeting(unsigned char g[64], const char *mech)
{
    static const unsigned char head[12] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
    memset(g, 0, 64);
    memcpy(g, head, sizeof head);
    memcpy(g + 12, mech, strlen(mech));
}

/* Sends our greeting, with (extra, elen) in the same write, and reads the peer's (64
 * bytes, checked to be ZMTP 3 with mechanism mech; consumed). 0 or -1. */
static int greet(struct zmtp *z, const char *mech, const void *extra, size_t elen)
{
    unsigned char g[64 + 2 + ZCURVE_HELLO_LEN];
    greeting(g, mech);
    if (elen > sizeof g - 64)
        return fail(z, "internal error: too much to send with the greeting");
    if (elen)
        memcpy(g + 64, extra, elen);
    if (send_all(z, g, 64 + elen) < 0 || fill(z, 64) < 0) {
        /* closed before a byte came: a role going down or coming up (open_conn tries
         * again; nothing of ours was taken); else not a ZMTP peer */
        z->no_greeting = z->have == z->off;
        return -1;
    }
    const unsigned char *p = z->buf + z->off;
    if (p[0] != 0xff || (p[9] & 1) != 1 || p[10] < 3)
        return fail(z, "the peer does not speak ZMTP 3");
    if (memcmp(p + 12, mech, strlen(mech) + 1) != 0) {
        char theirs[21];
        size_t i = 0;
        for (; i < 20 && p[12 + i] >= 0x21 && p[12 + i] <= 0x7e; i++)
            theirs[i] = (char)p[12 + i];
        theirs[i] = '\0';
        if (z->curve)
            z->refused = ZMTP_HANDSHAKE;
        return fail(z, "the peer wants security mechanism '%s', not %s", theirs, mech);
    }
    z->off += 64;
    return 0;
}

/* The name of command (b, n) for a message: printable ASCII, at most 20 characters. */
static const char *command_name(const unsigned char *b, size_t n, char out[21])
{
    size_t l = n ? b[0] : 0, i = 0;
    for (; i < l && i < 20 && i + 1 < n && b[1 + i] >= 0x21 && b[1 + i] <= 0x7e; i++)
        out[i] = (char)b[1 + i];
    out[i] = '\0';
    return out;
}

/* A command frame's header for len bytes into head; its size. */
static size_t command_head(unsigned char head[9], size_t len)
{
    size_t hn = frame_head(head, len);
    head[0] |= FLAG_CMD;
    return hn;
}

/* Reads the next command of the CURVE handshake into (*b, *n): an ERROR is the
 * server refusing our key, a closed connection its failing to open our box. 0 or -1. */
static int curve_command(struct zmtp *z, const char *want, unsigned char **b, size_t *n)
{
    unsigned f;
    if (read_frame(z, &f, b, n) < 0) {
        if (strstr(z->err, "closed") || strstr(z->err, "reset"))
            z->refused = ZMTP_HANDSHAKE;
        return -1;
    }
    if (!(f & FLAG_CMD) || *n < 1 || (*b)[0] + 1u > *n)
        return fail(z, "the server's CURVE handshake is malformed (expected %s)", want);
    if (zcurve_is(*b, *n, "ERROR"))
        return refused(z, *b, *n);
    char name[21];
    if (!zcurve_is(*b, *n, want))
        return fail(z, "the server's CURVE handshake sent %s, not %s", command_name(*b, *n, name),
                    want);
    return 0;
}

static int send_curve(struct zmtp *z, unsigned flags, const void *data, size_t len);

/*
 * The CURVE handshake on the connected z->fd (RFC 25/26), then the first message (NULL:
 * none): our greeting with our HELLO in the same write (eager; else the HELLO after
 * the server's greeting), the server's greeting and WELCOME, our INITIATE, its READY,
 * then the message. A round trip each: TCP connect + 3 before the reply. The message
 * cannot go with the INITIATE: libzmq 4.3.4 closes the connection on any message that
 * comes while its ZAP handler has not answered yet (measured, and in its
 * curve_server.cpp). 0 or -1.
 */
static int handshake_curve(struct zmtp *z, const void *first, size_t flen, bool eager)
{
    unsigned char hello[2 + ZCURVE_HELLO_LEN], ini[9 + ZCURVE_INITIATE_LEN], vouch_nonce[16], *b;
    size_t n;
    hello[0] = FLAG_CMD;
    hello[1] = ZCURVE_HELLO_LEN;
    if (zcurve_hello(z->curve, hello + 2) < 0) {
        z->refused = ZMTP_HANDSHAKE;
        return fail(z, "the server key we hold is not a usable CURVE key");
    }
    if (greet(z, "CURVE", eager ? hello : NULL, eager ? sizeof hello : 0) < 0) {
        /* libzmq answers a HELLO it cannot open (we hold the wrong server key), or a
         * greeting naming another mechanism, by closing the connection, often before
         * its greeting is out; with no byte of it, open_conn tries again (a role being
         * restarted looks the same), the HELLO then after the greeting */
        if (!z->no_greeting && (strstr(z->err, "closed") || strstr(z->err, "reset")))
            z->refused = ZMTP_HANDSHAKE;
        return -1;
    }
    if ((!eager && send_all(z, hello, sizeof hello) < 0) || curve_command(z, "WELCOME", &b, &n) < 0)
        return -1;
    if (zcurve_welcome(z->curve, b, n) < 0) {
        z->refused = ZMTP_HANDSHAKE;
        return fail(z, "the server's WELCOME does not open with the server key we hold");
    }
    size_t o = command_head(ini, ZCURVE_INITIATE_LEN);
    randombytes_buf(vouch_nonce, sizeof vouch_nonce);
    if (zcurve_initiate(z->curve, ini + o, vouch_nonce) < 0)
        return fail(z, "the server's connection key is not a usable CURVE key");
    if (send_all(z, ini, o + ZCURVE_INITIATE_LEN) < 0 || curve_command(z, "READY", &b, &n) < 0)
        return -1;
    if (zcurve_ready(z->curve, b, n) < 0)
        return fail(z, "the server's READY is malformed or does not open");
    return first ? send_curve(z, 0, first, flen) : 0;
}

/*
 * The ZMTP 3.0 greeting and NULL handshake on the connected z->fd. Once the peer's
 * greeting is read, our READY and (first, flen: a small first message, or NULL) go out
 * in one write, before the peer's READY is read: the handshake and the request share
 * a round trip, which matters over wide-area links (issue 16). (Measured: libzmq 4.3.4
 * closes the connection when our READY comes in the same write as our greeting, so the
 * greeting is not sent eagerly; tests/unit/test_zmtp.c test_open_send_eager.) 0 or -1.
 */
static int handshake(struct zmtp *z, const void *first, size_t flen)
{
    static const unsigned char ready[] = {FLAG_CMD, 28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                          'o',      'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                          0,        0,   0,   6,   'D', 'E', 'A', 'L', 'E', 'R'};
    unsigned char out[sizeof ready + 9 + ZMTP_EAGER_MAX];
    size_t n0 = sizeof ready;
    if (greet(z, "NULL", NULL, 0) < 0)
        return -1;
    memcpy(out, ready, sizeof ready);
    if (first && flen <= ZMTP_EAGER_MAX) {
        n0 += frame_head(out + n0, flen);
        memcpy(out + n0, first, flen);
        n0 += flen;
    }
    if (send_all(z, out, n0) < 0)
        return -1;
    unsigned f;
    unsigned char *b;
    size_t n;
    if (read_frame(z, &f, &b, &n) < 0)
        return -1;
    if (!(f & FLAG_CMD) || n < 1 || b[0] + 1u > n)
        return fail(z, "the peer's handshake is malformed");
    if (zcurve_is(b, n, "ERROR"))
        return refused(z, b, n);
    if (b[0] != 5 || memcmp(b + 1, "READY", 5) != 0)
        return fail(z, "the peer's handshake is not READY");
    return 0;
}

static int open_conn(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                     size_t max_msg, const struct zmtp_keys *keys, const void *first, size_t flen);

int zmtp_open(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms, size_t max_msg)
{
    return open_conn(z, endpoint, timeout_ms, connect_ms, max_msg, NULL, NULL, 0);
}

int zmtp_open_send(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                   size_t max_msg, const void *data, size_t len)
{
    if (len > ZMTP_EAGER_MAX)
        return zmtp_open(z, endpoint, timeout_ms, connect_ms, max_msg) < 0
                   ? -1
                   : zmtp_send(z, data, len);
    return open_conn(z, endpoint, timeout_ms, connect_ms, max_msg, NULL, data, len);
}

int zmtp_open_curve(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                    size_t max_msg, const struct zmtp_keys *keys, const void *data, size_t len)
{
    return open_conn(z, endpoint, timeout_ms, connect_ms, max_msg, keys, data, len);
}

/* One attempt's handshake: a CURVE one makes this connection's key pair anew, and
 * sends its HELLO with the greeting on the first attempt only (handshake_curve). */
static int attempt(struct zmtp *z, const struct zmtp_keys *keys, const void *first, size_t flen,
                   int shakes)
{
    if (!keys)
        return handshake(z, first, flen);
    if (zcurve_init(z->curve, keys->secret, keys->server, z->err, sizeof z->err) < 0)
        return -1;
    return handshake_curve(z, first, flen, shakes == 0);
}

static int open_conn(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                     size_t max_msg, const struct zmtp_keys *keys, const void *first, size_t flen)
{
    char host[256], port[16];
    memset(z, 0, sizeof *z);
    z->fd = -1;
    z->max_msg = max_msg;
    z->deadline_ms = now_ms() + timeout_ms;
    if (split_endpoint(endpoint, host, sizeof host, port, sizeof port) < 0)
        return fail(z, "not a tcp://HOST:PORT endpoint");
    if (keys && (sodium_init() < 0 || !(z->curve = calloc(1, sizeof *z->curve))))
        return fail(z, "out of memory");
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return fail(z, "cannot resolve %s: %s", host, gai_strerror(g));
    int rc = -1, shakes = 0;
    bool retried_eager = false;
    int64_t give_up_ms = now_ms() + (connect_ms < timeout_ms ? connect_ms : timeout_ms);
    for (;;) {
        for (const struct addrinfo *a = ai; a && rc < 0; a = a->ai_next)
            if (try_connect(z, a) == 0)
                rc = 0;
            else
                fail(z, "cannot connect: %s", strerror(errno));
        /* A connection closed before the peer's greeting (a role going down or coming
         * up, a proxy in front of a role not running yet) is retried like a refused one:
         * our READY and request were not sent yet. */
        z->no_greeting = false;
        if (rc == 0 && attempt(z, keys, first, flen, shakes++) < 0) {
            rc = z->no_greeting && (strstr(z->err, "closed") || strstr(z->err, "reset") ||
                                    strstr(z->err, "pipe"))
                     ? -1
                     : -2;
            if (rc == -1) {
                close(z->fd);
                z->fd = -1;
                z->have = z->off = 0;
            }
        }
        /* a CURVE connection closed before the greeting that carried our HELLO is tried
         * once more at once, the HELLO then after the greeting: a HELLO the server could
         * not open (a wrong server key) then shows as such (handshake_curve) */
        bool again = keys && shakes == 1 && rc == -1 && !retried_eager;
        retried_eager = retried_eager || again;
        int64_t now = now_ms();
        if (rc != -1 || left_ms(z) == 0 || (now >= give_up_ms && !again))
            break;
        int nap = give_up_ms - now < RECONNECT_MS ? (int)(give_up_ms - now) : RECONNECT_MS;
        if (!again && nap > 0)
            poll(NULL, 0, nap);
    }
    freeaddrinfo(ai);
    return rc < 0 ? -1 : 0;
}

/* Sends (data, len) as one encrypted MESSAGE with plaintext flags. 0 or -1. */
static int send_curve(struct zmtp *z, unsigned flags, const void *data, size_t len)
{
    size_t blen = len + ZCURVE_MSG_OVERHEAD;
    unsigned char small[9 + ZCURVE_MSG_OVERHEAD + 4096];
    unsigned char *out = blen + 9 <= sizeof small ? small : malloc(blen + 9);
    if (!out)
        return fail(z, "out of memory");
    size_t hn = frame_head(out, blen);
    zcurve_message(z->curve, out + hn, flags, data, len);
    int rc = send_all(z, out, hn + blen);
    if (out != small)
        free(out);
    return rc;
}

int zmtp_send(struct zmtp *z, const void *data, size_t len)
{
    if (z->curve)
        return send_curve(z, 0, data, len);
    unsigned char head[9];
    size_t hn = frame_head(head, len);
    if (len <= 4096) { /* one segment for the usual small request */
        unsigned char one[9 + 4096];
        memcpy(one, head, hn);
        memcpy(one + hn, data, len);
        return send_all(z, one, hn + len);
    }
    return send_all(z, head, hn) < 0 ? -1 : send_all(z, data, len);
}

/* The PONG to a PING command (b, n; ZMTP 3.1: name, 2-byte TTL, up to 16 bytes of
 * context), so a peer with heartbeats on keeps the connection; other commands are
 * skipped. 0 or -1. */
static int answer_command(struct zmtp *z, const unsigned char *b, size_t n)
{
    if (n < 7 || !zcurve_is(b, n, "PING"))
        return 0;
    size_t ctx = n - 7 > 16 ? 16 : n - 7;
    unsigned char pong[2 + 5 + 16] = {FLAG_CMD, (unsigned char)(5 + ctx), 4, 'P', 'O', 'N', 'G'};
    memcpy(pong + 7, b + 7, ctx);
    if (z->curve) /* over CURVE a command is a MESSAGE flagged as one */
        return send_curve(z, ZCURVE_FLAG_CMD, pong + 2, 5 + ctx);
    return send_all(z, pong, 7 + ctx);
}

int zmtp_recv(struct zmtp *z, const unsigned char **data, size_t *len)
{
    for (;;) {
        unsigned f, inner = 0;
        unsigned char *b;
        size_t n;
        if (read_frame(z, &f, &b, &n) < 0)
            return -1;
        char name[21];
        if (z->curve && (f & FLAG_CMD)) /* after the handshake every command is a MESSAGE */
            return fail(z, "the server sent an unencrypted command (%s) after the CURVE handshake",
                        command_name(b, n, name));
        if (z->curve && zcurve_open(z->curve, b, n, &inner, &b, &n) < 0)
            return fail(z, "a message from the server does not open (malformed, replayed or "
                           "not from the server)");
        if (!(f & FLAG_CMD) && !(inner & ZCURVE_FLAG_CMD)) {
            *data = b;
            *len = n;
            return 0;
        }
        if (answer_command(z, b, n) < 0)
            return -1;
    }
}

void zmtp_close(struct zmtp *z)
{
    if (z->fd >= 0)
        close(z->fd);
    free(z->buf);
    if (z->curve) /* it holds this connection's secrets */
        sodium_memzero(z->curve, sizeof *z->curve);
    free(z->curve);
    z->curve = NULL;
    z->buf = NULL;
    z->fd = -1;
}

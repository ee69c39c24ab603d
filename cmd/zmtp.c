/*
 * zmtp.c - a minimal ZMTP 3.0 DEALER client over TCP (see zmtp.h; the protocol is
 * ZeroMQ RFC 23): the 64-byte greeting with the NULL mechanism, a READY command
 * each way (ours says Socket-Type DEALER), then frames of a flags byte, a 1- or
 * 8-byte big-endian size and the body. Everything waits with poll() against one
 * deadline, so a tool never waits longer than its --timeout.
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
static int read_frame(struct zmtp *z, unsigned *flags, const unsigned char **body, size_t *len)
{
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
    if (n > z->max_msg)
        return fail(z, "a frame of %llu bytes is over the %zu-byte limit", (unsigned long long)n,
                    z->max_msg);
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
    unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    static const unsigned char ready[] = {FLAG_CMD, 28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                          'o',      'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                          0,        0,   0,   6,   'D', 'E', 'A', 'L', 'E', 'R'};
    unsigned char out[sizeof ready + 9 + ZMTP_EAGER_MAX];
    size_t n0 = sizeof ready;
    if (send_all(z, g, sizeof g) < 0 || fill(z, 64) < 0) {
        /* closed before a byte came: a role going down or coming up (open_conn tries
         * again; nothing of ours was taken); else not a ZMTP peer */
        z->no_greeting = z->have == z->off;
        return -1;
    }
    const unsigned char *p = z->buf + z->off;
    if (p[0] != 0xff || (p[9] & 1) != 1 || p[10] < 3)
        return fail(z, "the peer does not speak ZMTP 3");
    if (memcmp(p + 12, "NULL", 5) != 0)
        return fail(z, "the peer wants a security mechanism other than NULL");
    z->off += 64;
    memcpy(out, ready, sizeof ready);
    if (first && flen <= ZMTP_EAGER_MAX) {
        n0 += frame_head(out + n0, flen);
        memcpy(out + n0, first, flen);
        n0 += flen;
    }
    if (send_all(z, out, n0) < 0)
        return -1;
    unsigned f;
    const unsigned char *b;
    size_t n;
    if (read_frame(z, &f, &b, &n) < 0)
        return -1;
    if (!(f & FLAG_CMD) || n < 1 || b[0] + 1u > n)
        return fail(z, "the peer's handshake is malformed");
    if (b[0] == 5 && memcmp(b + 1, "ERROR", 5) == 0) {
        int rn = n > 6 ? b[6] : 0;
        if (rn > (int)n - 7)
            rn = (int)n - 7 > 0 ? (int)n - 7 : 0;
        return fail(z, "the peer refused the connection: %.*s", rn, (const char *)b + 7);
    }
    if (b[0] != 5 || memcmp(b + 1, "READY", 5) != 0)
        return fail(z, "the peer's handshake is not READY");
    return 0;
}

static int open_conn(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                     size_t max_msg, const void *first, size_t flen);

int zmtp_open(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms, size_t max_msg)
{
    return open_conn(z, endpoint, timeout_ms, connect_ms, max_msg, NULL, 0);
}

int zmtp_open_send(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                   size_t max_msg, const void *data, size_t len)
{
    if (len > ZMTP_EAGER_MAX)
        return zmtp_open(z, endpoint, timeout_ms, connect_ms, max_msg) < 0
                   ? -1
                   : zmtp_send(z, data, len);
    return open_conn(z, endpoint, timeout_ms, connect_ms, max_msg, data, len);
}

static int open_conn(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                     size_t max_msg, const void *first, size_t flen)
{
    char host[256], port[16];
    memset(z, 0, sizeof *z);
    z->fd = -1;
    z->max_msg = max_msg;
    z->deadline_ms = now_ms() + timeout_ms;
    if (split_endpoint(endpoint, host, sizeof host, port, sizeof port) < 0)
        return fail(z, "not a tcp://HOST:PORT endpoint");
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return fail(z, "cannot resolve %s: %s", host, gai_strerror(g));
    int rc = -1;
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
        if (rc == 0 && handshake(z, first, flen) < 0) {
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
        int64_t now = now_ms();
        if (rc != -1 || left_ms(z) == 0 || now >= give_up_ms)
            break;
        int nap = give_up_ms - now < RECONNECT_MS ? (int)(give_up_ms - now) : RECONNECT_MS;
        poll(NULL, 0, nap);
    }
    freeaddrinfo(ai);
    return rc < 0 ? -1 : 0;
}

int zmtp_send(struct zmtp *z, const void *data, size_t len)
{
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

int zmtp_recv(struct zmtp *z, const unsigned char **data, size_t *len)
{
    for (;;) {
        unsigned f;
        if (read_frame(z, &f, data, len) < 0)
            return -1;
        if (!(f & FLAG_CMD))
            return 0;
        /* A heartbeat PING (ZMTP 3.1: name, 2-byte TTL, up to 16 bytes of context)
         * gets its PONG, so a peer with heartbeats on keeps the connection. */
        if (*len >= 7 && (*data)[0] == 4 && memcmp(*data + 1, "PING", 4) == 0) {
            size_t ctx = *len - 7 > 16 ? 16 : *len - 7;
            unsigned char pong[2 + 5 + 16] = {FLAG_CMD, (unsigned char)(5 + ctx), 4, 'P', 'O', 'N',
                                              'G'};
            memcpy(pong + 7, *data + 7, ctx);
            if (send_all(z, pong, 7 + ctx) < 0)
                return -1;
        }
    }
}

void zmtp_close(struct zmtp *z)
{
    if (z->fd >= 0)
        close(z->fd);
    free(z->buf);
    z->buf = NULL;
    z->fd = -1;
}

/*
 * zmtp.h - a minimal ZMTP 3.0 DEALER over TCP for the user tools: one connection,
 * NULL or CURVE security (the client side of CurveZMQ, cmd/zmtp_curve.c), single-frame
 * messages. It lets a tool (submit, jobs, ...) talk to a
 * role's ROUTER without loading libzmq, whose loading is most of a short tool's run
 * time (see daemon/zmqdl.c). Anything it does not handle (ipc://, a source address,
 * ...) is left to libzmq by the caller.
 */
#ifndef GRIDNODE_ZMTP_H
#define GRIDNODE_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zmtp_curve;

/* Why a CURVE handshake failed, for the caller's message (zmtp.refused). */
enum zmtp_refusal {
    ZMTP_OK = 0,
    ZMTP_KEY_REFUSED, /* the server answered ERROR: its ZAP handler refused our key */
    ZMTP_HANDSHAKE,   /* the server closed the handshake or does not run CURVE: most
                       * likely we hold the wrong server key */
};

/* Our secret key and the server's public key, each 40 Z85 characters. */
struct zmtp_keys {
    char secret[41], server[41];
};

struct zmtp {
    int fd;
    int64_t deadline_ms; /* CLOCK_MONOTONIC, for every wait */
    size_t max_msg;      /* a larger incoming message is refused (ZMQ_MAXMSGSIZE) */
    unsigned char *buf;  /* received bytes not yet consumed */
    size_t have, off, cap;
    char err[160];    /* why the last call failed */
    bool no_greeting; /* the handshake failed before the peer's greeting arrived */
    enum zmtp_refusal refused;
    struct zmtp_curve *curve; /* NULL: NULL security */
};

/* Whether endpoint is a plain tcp://HOST:PORT this module can connect to. */
int zmtp_supported(const char *endpoint);

/*
 * Connects to endpoint and completes the ZMTP handshake before the deadline
 * (timeout_ms from now); a refused or failed connection is retried every 100 ms
 * like libzmq's reconnection, for at most connect_ms (a role being restarted is
 * reached; one that is not running is reported at once, not after the whole
 * timeout). 0, or -1 with z->err set (z needs zmtp_close either way).
 */
int zmtp_open(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms, size_t max_msg);

/* Requests up to this size go out with the handshake (zmtp_open_send). */
#define ZMTP_EAGER_MAX 4096

/*
 * zmtp_open, then the message (data, len) as zmtp_send would send it; a small message
 * goes out in the same write as the greeting and handshake, so a request costs the TCP
 * connect and one round trip. 0, or -1 with z->err set.
 */
int zmtp_open_send(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                   size_t max_msg, const void *data, size_t len);
/*
 * zmtp_open_send over CURVE with keys: our greeting and HELLO in one write (the server's
 * greeting and WELCOME back), then INITIATE (READY back), then the message (data, len;
 * any size, or NULL), so a request costs the TCP connect and three round trips before
 * its reply. 0, or -1 with z->err set, and z->refused when the server refused the
 * handshake.
 */
int zmtp_open_curve(struct zmtp *z, const char *endpoint, int timeout_ms, int connect_ms,
                    size_t max_msg, const struct zmtp_keys *keys, const void *data, size_t len);
/* Sends one single-frame message. 0 or -1 (z->err). */
int zmtp_send(struct zmtp *z, const void *data, size_t len);
/*
 * Receives the next message frame, opened when CURVE (commands are skipped; a PING
 * gets its PONG): *data points
 * into z's buffer, valid until the next call. 0, or -1 with z->err (timeout, closed
 * connection, oversized or malformed frame).
 */
int zmtp_recv(struct zmtp *z, const unsigned char **data, size_t *len);
void zmtp_close(struct zmtp *z);

#endif

/*
 * netopts.h - transport settings for wide-area links, shared by every role: dead-peer
 * detection (ZMTP heartbeats and TCP keepalive), bounded connect attempts, a socket
 * monitor for connect/disconnect events, and a round-trip-time estimator for request
 * timeouts. See docs/deploy.md ("When a link fails").
 */
#ifndef GRIDNODE_NETOPTS_H
#define GRIDNODE_NETOPTS_H

#include <stdint.h>

#define NETOPTS_PEER_TIMEOUT_MS 30000   /* a serving role drops a silent peer after this */
#define NETOPTS_CONNECT_TIMEOUT_MS 2500 /* one TCP connect attempt at most (SYN back-off) */
#define NETOPTS_RECONNECT_MS 1000       /* between connect attempts: this to twice this */

/*
 * Dead-peer detection on a socket, before bind/connect: a ZMTP PING every
 * timeout_ms/3 (at least 200 ms), the connection dropped when nothing arrived for
 * timeout_ms after a PING, the same limit announced to the peer (TTL), and TCP keepalive
 * as a backstop for peers without heartbeats. Returns 0, or -1 (errno) if libzmq refused.
 */
int netopts_liveness(void *sock, int64_t timeout_ms);

/*
 * A connecting socket: each TCP connect attempt is abandoned after
 * NETOPTS_CONNECT_TIMEOUT_MS (a SYN lost in a partition does not sit in the kernel's
 * back-off), and attempts are NETOPTS_RECONNECT_MS to twice that apart, chosen at random
 * per socket, so thousands of hosts do not reconnect in step after a server restart.
 */
int netopts_connecting(void *sock);

/* Monitor events of interest (a subset of libzmq's). */
enum netopts_event {
    NETOPTS_EV_NONE = 0,
    NETOPTS_EV_UP,   /* handshake done: requests can flow */
    NETOPTS_EV_DOWN, /* an established connection was lost (peer gone, heartbeat timeout) */
    NETOPTS_EV_RETRY /* a connect attempt failed (refused or timed out) */
};

/*
 * Starts a monitor on sock and returns a PAIR socket (in ctx) that receives its events,
 * or NULL. The name makes the inproc endpoint unique (e.g. the socket's address as hex).
 * Close the returned socket before closing sock's context.
 */
void *netopts_monitor(void *ctx, void *sock, const char *name);

/* Reads one pending event without blocking: NETOPTS_EV_*; -1 when none is pending. */
int netopts_monitor_read(void *mon);

/* Round-trip-time estimate (RFC 6298 smoothing), in ms. Zero it to start. */
struct netopts_rtt {
    double srtt, rttvar;
    uint32_t samples;
};

void netopts_rtt_sample(struct netopts_rtt *r, int64_t ms);

/*
 * The request timeout: at least floor_ms (the configured timeout), raised to
 * 4 * srtt + 8 * rttvar when the measured round trips are long or vary (loss and
 * retransmission), capped at 120 s.
 */
int64_t netopts_rtt_timeout(const struct netopts_rtt *r, int64_t floor_ms);

#endif

/*
 * netopts.h - transport settings for wide-area links, shared by every role: dead-peer
 * detection (ZMTP heartbeats and TCP keepalive), bounded connect attempts, a socket
 * monitor for connect/disconnect events, and a round-trip-time estimator for request
 * timeouts. See docs/deploy.md ("When a link fails").
 */
#ifndef GRIDNODE_NETOPTS_H
#define GRIDNODE_NETOPTS_H

#include <stdbool.h>
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
    NETOPTS_EV_UP,       /* handshake done: requests can flow */
    NETOPTS_EV_DOWN,     /* an established connection was lost (peer gone, heartbeat timeout) */
    NETOPTS_EV_RETRY,    /* a connect attempt failed (refused or timed out) */
    NETOPTS_EV_HANDSHAKE /* the security handshake failed (the raw event: curve_handshake_failure)
                          */
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

/*
 * The seconds of work a client's queue must cover so no slot waits for its next task: a
 * request goes out at most one round trip after the need arises (one request is
 * outstanding at a time) and its tasks arrive one round trip later, so 2 x srtt +
 * 4 x rttvar. 0 without a measurement.
 */
double netopts_rtt_cover_s(const struct netopts_rtt *r);

/*
 * The state of one connecting DEALER's link as a client sees it (issue 16's transport,
 * shared by every client driver: roles/client/live/live_link.c). netopts_link_open applies
 * netopts_liveness and netopts_connecting and starts the monitor; netopts_link_event
 * reads one event and keeps the flags below. Rules the drivers follow:
 *  - a send that fails with EAGAIN while netopts_link_connecting() is no failed round:
 *    libzmq is still making the connection (each attempt bounded), try again shortly;
 *  - EAGAIN after a failed connect attempt (refused, or SYN unanswered within
 *    NETOPTS_CONNECT_TIMEOUT_MS) means the server is absent: a failed round, with the
 *    driver's randomised backoff;
 *  - a connection lost (DOWN) ends the request in flight on it at once (its reply
 *    cannot come: DEALER replies follow the connection);
 *  - UP after a loss (link.healed) is a healed link: the driver cuts a backoff wait to a
 *    random 0-2 s (netopts_link_heal_ms), spread so that many hosts reconnecting to a
 *    restarted server do not all send at once;
 *  - request timeouts follow the measured round trips (netopts_rtt_timeout on rtt).
 */
struct netopts_link {
    void *mon;          /* PAIR receiving the monitor's events (NULL: none) */
    bool down;          /* not connected (never yet, or the connection was lost) */
    bool lost;          /* an established connection was lost since the last UP */
    bool refused;       /* a connect attempt failed since the socket was made or last UP */
    bool said;          /* the driver logged "waiting for the connection" */
    bool healed;        /* the last UP followed a lost connection (not a first connect) */
    int64_t down_ms;    /* when it went down (or the socket was made) */
    unsigned raw_event; /* libzmq's number of the last event (ZMQ_EVENT_*) */
    struct netopts_rtt rtt;
};

/* Sets liveness (timeout_ms) and connect options on sock and starts its monitor (name:
 * unique, for the inproc endpoint). Before connect. 0, or -1 if the monitor could not
 * be started (the link then works without heal detection). */
int netopts_link_open(struct netopts_link *k, void *ctx, void *sock, int64_t timeout_ms,
                      const char *name, int64_t now_ms);

/* Reads one pending event and updates k: NETOPTS_EV_*, or -1 when none is pending. */
int netopts_link_event(struct netopts_link *k, int64_t now_ms);

/* True while libzmq is still making a connection that has not failed yet. */
bool netopts_link_connecting(const struct netopts_link *k);

/* A healed link's random wait, 0 to 2,000 ms. */
int64_t netopts_link_heal_ms(void);

/* Closes the monitor socket (before the context goes). */
void netopts_link_close(struct netopts_link *k);

#endif

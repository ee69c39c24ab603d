/*
 * netopts.c - transport settings for wide-area links (see netopts.h).
 */
#include "daemon/netopts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int set_int(void *sock, int opt, int64_t v)
{
    int i = v > 0x7fffffff ? 0x7fffffff : (int)v;
    return zmq_setsockopt(sock, opt, &i, sizeof i);
}

int netopts_liveness(void *sock, int64_t timeout_ms)
{
    if (timeout_ms <= 0)
        timeout_ms = NETOPTS_PEER_TIMEOUT_MS;
    if (timeout_ms > 6553500) /* ZMTP's TTL is 16 bits of deciseconds */
        timeout_ms = 6553500;
    int64_t ivl = timeout_ms / 3 < 200 ? 200 : timeout_ms / 3;
    int64_t secs = (timeout_ms + 999) / 1000;
    int rc = set_int(sock, ZMQ_HEARTBEAT_IVL, ivl);
    rc |= set_int(sock, ZMQ_HEARTBEAT_TIMEOUT, timeout_ms);
    rc |= set_int(sock, ZMQ_HEARTBEAT_TTL, timeout_ms);
    rc |= set_int(sock, ZMQ_TCP_KEEPALIVE, 1);
    rc |= set_int(sock, ZMQ_TCP_KEEPALIVE_IDLE, secs);
    rc |= set_int(sock, ZMQ_TCP_KEEPALIVE_INTVL, secs / 3 ? secs / 3 : 1);
    rc |= set_int(sock, ZMQ_TCP_KEEPALIVE_CNT, 3);
    return rc ? -1 : 0;
}

int netopts_connecting(void *sock)
{
    int rc = set_int(sock, ZMQ_CONNECT_TIMEOUT, NETOPTS_CONNECT_TIMEOUT_MS);
    rc |= set_int(sock, ZMQ_RECONNECT_IVL,
                  NETOPTS_RECONNECT_MS + random() % (NETOPTS_RECONNECT_MS + 1));
    rc |= set_int(sock, ZMQ_RECONNECT_IVL_MAX, 0); /* no libzmq back-off: ours is per request */
    return rc ? -1 : 0;
}

void *netopts_monitor(void *ctx, void *sock, const char *name)
{
    char ep[128];
    int zero = 0;
    snprintf(ep, sizeof ep, "inproc://netopts-monitor-%s", name);
    /* one monitor per socket (a second zmq_socket_monitor replaces the first): the
       failed CURVE handshakes come here too, for daemon/curve.h's texts */
    if (zmq_socket_monitor(sock, ep,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                               ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) < 0)
        return NULL;
    void *mon = zmq_socket(ctx, ZMQ_PAIR);
    if (!mon)
        return NULL;
    zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(mon, ep) < 0) {
        zmq_close(mon);
        return NULL;
    }
    return mon;
}

static int monitor_read(void *mon, unsigned *raw);

int netopts_monitor_read(void *mon)
{
    return monitor_read(mon, NULL);
}

static int monitor_read(void *mon, unsigned *raw)
{
    zmq_msg_t m;
    int ev = -1, more = 0;
    size_t sz = sizeof more;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    if (zmq_msg_size(&m) >= 2) { /* frame 1: u16 event, u32 value; frame 2: endpoint */
        uint16_t e;
        memcpy(&e, zmq_msg_data(&m), 2);
        if (raw)
            *raw = e;
        ev = e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ? NETOPTS_EV_UP
             : e == ZMQ_EVENT_DISCONNECTED      ? NETOPTS_EV_DOWN
             : e == ZMQ_EVENT_CONNECT_RETRIED   ? NETOPTS_EV_RETRY
             : e == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                     e == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                     e == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                 ? NETOPTS_EV_HANDSHAKE
                 : NETOPTS_EV_NONE;
    }
    while (zmq_getsockopt(mon, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_close(&m);
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_msg_close(&m);
    return ev;
}

void netopts_rtt_sample(struct netopts_rtt *r, int64_t ms)
{
    double s = ms < 0 ? 0 : (double)ms;
    if (r->samples++ == 0) {
        r->srtt = s;
        r->rttvar = s / 2;
        return;
    }
    double d = s > r->srtt ? s - r->srtt : r->srtt - s;
    r->rttvar = 0.75 * r->rttvar + 0.25 * d;
    r->srtt = 0.875 * r->srtt + 0.125 * s;
}

double netopts_rtt_cover_s(const struct netopts_rtt *r)
{
    if (r->samples == 0 || !(r->srtt >= 0) || !(r->rttvar >= 0))
        return 0;
    return (2 * r->srtt + 4 * r->rttvar) / 1000.0;
}

int64_t netopts_rtt_timeout(const struct netopts_rtt *r, int64_t floor_ms)
{
    int64_t t = r->samples ? (int64_t)(4 * r->srtt + 8 * r->rttvar) : 0;
    if (t < floor_ms)
        t = floor_ms;
    int64_t cap = floor_ms > 120000 ? floor_ms : 120000;
    return t < cap ? t : cap;
}

int netopts_link_open(struct netopts_link *k, void *ctx, void *sock, int64_t timeout_ms,
                      const char *name, int64_t now_ms)
{
    memset(k, 0, sizeof *k);
    k->down = true;
    k->down_ms = now_ms;
    netopts_liveness(sock, timeout_ms);
    netopts_connecting(sock);
    k->mon = netopts_monitor(ctx, sock, name);
    return k->mon ? 0 : -1;
}

int netopts_link_event(struct netopts_link *k, int64_t now_ms)
{
    if (!k->mon)
        return -1;
    int ev = monitor_read(k->mon, &k->raw_event);
    if (ev == NETOPTS_EV_DOWN) {
        k->down = k->lost = true;
        k->down_ms = now_ms;
    } else if (ev == NETOPTS_EV_UP) {
        k->healed = k->lost;
        k->down = k->refused = k->lost = false;
    } else if (ev == NETOPTS_EV_RETRY) {
        k->refused = true;
    }
    return ev;
}

bool netopts_link_connecting(const struct netopts_link *k)
{
    return k->down && !k->refused;
}

int64_t netopts_link_heal_ms(void)
{
    return random() % 2001;
}

void netopts_link_close(struct netopts_link *k)
{
    if (k->mon)
        zmq_close(k->mon);
    k->mon = NULL;
}

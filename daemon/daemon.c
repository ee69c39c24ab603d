/*
 * daemon.c - the shared request/reply skeleton of serving roles: ROUTER socket,
 * validation before dispatch, group commit, replies after the commit, per-peer queue
 * bounds, and the state-directory lock (see daemon.h).
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/netopts.h"

#define RID_MAX 256
#define DROP_PEERS 8 /* peers named in one drop report; the rest are summed */

struct pending_reply {
    uint8_t rid[RID_MAX];
    size_t rlen;
    bool delim; /* the peer is a REQ socket: echo the empty delimiter frame */
    uint64_t req_id;
    char peer[48]; /* Peer-Address, for the drop report */
    void *data;
    size_t len;
};

/* A request held open by the role (daemon_hold). */
struct held {
    uint64_t handle, req_id;
    uint32_t kind;
    uint8_t rid[RID_MAX];
    size_t rlen;
    bool delim;
    char peer[48];
    int64_t deadline_ms; /* loop_now_ms() time */
};

/* The request being dispatched (for daemon_hold). */
struct current {
    zmq_msg_t *rid;
    bool delim;
    const char *peer;
    uint64_t req_id;
    uint64_t held; /* set by daemon_hold: no reply now */
};

struct drop_peer {
    uint8_t rid[RID_MAX];
    size_t rlen;
    char peer[48];
    uint64_t n;
};

struct daemon {
    struct daemon_opts o;
    struct daemon_ops ops;
    struct loop *loop;
    void *zctx, *sock;
    struct curve_server *sec; /* CURVE + ZAP, or plain (daemon/curve.h) */
    struct wire_buf ab;       /* a request rewritten by curve_access */
    char endpoint[256];
    struct wire_buf wb; /* scratch for building one reply */
    struct pending_reply *replies;
    uint32_t nreplies, capreplies;
    size_t turn_bytes;
    /* replies dropped since the last report */
    struct drop_peer drops[DROP_PEERS];
    uint32_t ndrops;
    uint64_t drops_other, dropped_total;
    int64_t last_report_ms;
    /* held requests (daemon_hold) and the one-shot timer at the earliest deadline */
    struct held *held;
    uint32_t nheld, capheld;
    uint64_t next_handle;
    struct current *cur;
    struct wire_buf hb; /* scratch for expiry replies */
    int held_timer;
    int64_t timer_at;
};

static int queue_raw(struct daemon *d, const void *rid, size_t rlen, bool delim, uint64_t req_id,
                     const char *peer, const struct wire_buf *wb);

static int queue_reply(struct daemon *d, zmq_msg_t *rid, bool delim, uint64_t req_id,
                       const char *peer)
{
    return queue_raw(d, zmq_msg_data(rid), zmq_msg_size(rid), delim, req_id, peer, &d->wb);
}

/* Queues the message in wb as the reply to routing id rid, sent after the commit. */
static int queue_raw(struct daemon *d, const void *rid, size_t rlen, bool delim, uint64_t req_id,
                     const char *peer, const struct wire_buf *wb)
{
    if (d->nreplies == d->capreplies) {
        uint32_t cap = d->capreplies ? d->capreplies * 2 : 256;
        struct pending_reply *n = realloc(d->replies, cap * sizeof *n);
        if (!n)
            return -1;
        d->replies = n;
        d->capreplies = cap;
    }
    struct pending_reply *p = &d->replies[d->nreplies];
    p->rlen = rlen;
    if (p->rlen > RID_MAX || !(p->data = malloc(wb->sb.size ? wb->sb.size : 1)))
        return -1;
    memcpy(p->rid, rid, p->rlen);
    memcpy(p->data, wb->sb.data, wb->sb.size);
    p->len = wb->sb.size;
    p->delim = delim;
    p->req_id = req_id;
    snprintf(p->peer, sizeof p->peer, "%s", peer);
    d->nreplies++;
    d->turn_bytes += p->len;
    return 0;
}

static bool rcvmore(void *sock)
{
    int more = 0;
    size_t sz = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more;
}

/* Discards the rest of a multi-frame message (libzmq hands it over whole). */
static size_t drain_more(void *sock)
{
    size_t n = 0;
    while (rcvmore(sock)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) >= 0)
            n++;
        zmq_msg_close(&m);
    }
    return n;
}

/*
 * Applies access control (daemon/access.c) to a decoded request: 0 to dispatch *msg
 * (replaced by the rewritten request when curve_access rewrote it), or -1 with the
 * error reply in d->wb.
 */
static int check_access(struct daemon *d, struct wire_msg *msg, const char *user_id,
                        const char *peer)
{
    if (!curve_server_secure(d->sec))
        return 0;
    const struct curve_ident *id = curve_server_ident(d->sec, user_id);
    char why[400];
    bool rewritten = false;
    if (!id) {
        wire_error_msg(&d->wb, msg->id, WE_AUTH,
                       "your key is no longer authorized by the %s; ask an administrator",
                       d->o.role);
        return -1;
    }
    if (curve_access(id, msg, &d->ab, &rewritten, why, sizeof why) < 0) {
        log_info("denied %s from '%s' (%s): %s", msg->desc->name, id->name, *peer ? peer : "?",
                 why);
        wire_error_msg(&d->wb, msg->id, WE_DENIED, "%s", why);
        return -1;
    }
    curve_set_current(d->sec, id);
    if (!rewritten)
        return 0;
    struct wire_error err;
    struct wire_msg m2;
    if (wire_decode(d->ab.sb.data, d->ab.sb.size, true, &m2, &err) < 0) {
        wire_error_msg(&d->wb, msg->id, err.code, "%s", err.text);
        return -1;
    }
    wire_msg_free(msg);
    *msg = m2;
    msg->root = &msg->up.data; /* root points into the struct itself: re-aim it */
    return 0;
}

/* Decodes a request body and dispatches it; the reply (or error) is left in d->wb. */
static uint64_t handle_body(struct daemon *d, zmq_msg_t *body, const char *peer)
{
    struct wire_msg msg;
    struct wire_error err;
    if (wire_decode(zmq_msg_data(body), zmq_msg_size(body), true, &msg, &err) < 0) {
        log_debug("bad request from %s: %s", *peer ? peer : "a peer", err.text);
        wire_error_msg(&d->wb, err.id, err.code, "%s", err.text);
        return err.id;
    }
    uint64_t id = msg.id;
    if (check_access(d, &msg, zmq_msg_gets(body, "User-Id"), peer) == 0) {
        d->cur->req_id = msg.id;
        d->ops.dispatch(d->ops.arg, &msg, peer, &d->wb);
    }
    curve_set_current(d->sec, NULL);
    wire_msg_free(&msg);
    return id;
}

/* Reads one request (routing id, optional empty delimiter, body) and handles it. */
static int read_one(struct daemon *d)
{
    zmq_msg_t rid, body;
    bool delim = false;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, d->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return -1;
    }
    zmq_msg_init(&body);
    int ok = rcvmore(d->sock) && zmq_msg_recv(&body, d->sock, ZMQ_DONTWAIT) >= 0;
    if (ok && zmq_msg_size(&body) == 0 && rcvmore(d->sock)) {
        delim = true;
        zmq_msg_close(&body);
        zmq_msg_init(&body);
        ok = zmq_msg_recv(&body, d->sock, ZMQ_DONTWAIT) >= 0;
    }
    const char *pa = ok ? zmq_msg_gets(&body, "Peer-Address") : NULL;
    char peer[48];
    snprintf(peer, sizeof peer, "%s", pa ? pa : "");
    bool extra = ok && rcvmore(d->sock);
    if (extra) /* refused before looking inside; free the big frames at once */
        zmq_msg_close(&body), zmq_msg_init(&body);
    size_t dropped = drain_more(d->sock);
    uint64_t id = 0;
    wire_buf_reset(&d->wb);
    if (!ok) {
        wire_error_msg(&d->wb, 0, WE_MALFORMED, "a request is one frame after the routing id");
    } else if (extra) {
        log_debug("multi-frame request (%zu extra frames) from %s refused", dropped + 1,
                  *peer ? peer : "a peer");
        wire_error_msg(&d->wb, 0, WE_MALFORMED, "a request must be exactly one frame");
    } else {
        struct current cur = {&rid, delim, peer, 0, 0};
        d->cur = &cur;
        id = handle_body(d, &body, peer);
        d->cur = NULL;
        if (cur.held) { /* answered in a later turn (daemon_reply_held, or expiry) */
            zmq_msg_close(&body);
            zmq_msg_close(&rid);
            return 0;
        }
    }
    if (queue_reply(d, &rid, delim, id, peer) < 0)
        log_warnx("out of memory queueing a reply; the peer will retry");
    zmq_msg_close(&body);
    zmq_msg_close(&rid);
    return 0;
}

static void on_socket(struct loop *l, void *arg)
{
    struct daemon *d = arg;
    (void)l;
    for (int i = 0; i < DAEMON_TURN_MAX && d->turn_bytes < DAEMON_TURN_BYTES; i++)
        if (read_one(d) < 0)
            break;
}

static void hex_id(const uint8_t *rid, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 3 < outlen; i++)
        o += (size_t)snprintf(out + o, outlen - o, "%02x", rid[i]);
    out[o] = '\0';
}

/* Logs the drops since the last report, at most once per DAEMON_DROP_LOG_MS. */
static void report_drops(struct daemon *d, bool force)
{
    int64_t now = loop_now_ms();
    if (d->ndrops == 0 || (!force && now - d->last_report_ms < DAEMON_DROP_LOG_MS))
        return;
    char line[1024], id[24];
    size_t o = 0;
    for (uint32_t i = 0; i < d->ndrops && o < sizeof line; i++) {
        hex_id(d->drops[i].rid, d->drops[i].rlen, id, sizeof id);
        o += (size_t)snprintf(line + o, sizeof line - o, "%s%llu to %s (id %s)", i ? ", " : "",
                              (unsigned long long)d->drops[i].n,
                              d->drops[i].peer[0] ? d->drops[i].peer : "?", id);
    }
    if (d->drops_other && o < sizeof line)
        snprintf(line + o, sizeof line - o, ", %llu to other peers",
                 (unsigned long long)d->drops_other);
    log_warnx("replies dropped: %s; these peers send requests without reading the replies "
              "(limits.peer_queue = %ld replies per peer)",
              line, d->o.peer_queue);
    d->ndrops = 0;
    d->drops_other = 0;
    d->last_report_ms = now;
}

static void count_drop(struct daemon *d, const struct pending_reply *p)
{
    d->dropped_total++;
    for (uint32_t i = 0; i < d->ndrops; i++)
        if (d->drops[i].rlen == p->rlen && memcmp(d->drops[i].rid, p->rid, p->rlen) == 0) {
            d->drops[i].n++;
            return;
        }
    if (d->ndrops == DROP_PEERS) {
        d->drops_other++;
        return;
    }
    struct drop_peer *e = &d->drops[d->ndrops++];
    memcpy(e->rid, p->rid, p->rlen);
    e->rlen = p->rlen;
    memcpy(e->peer, p->peer, sizeof e->peer);
    e->n = 1;
}

static void send_replies(struct daemon *d)
{
    for (uint32_t i = 0; i < d->nreplies; i++) {
        struct pending_reply *p = &d->replies[i];
        int rc = zmq_send(d->sock, p->rid, p->rlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc >= 0 && p->delim)
            rc = zmq_send(d->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        WIRE_CHECK_OUT(p->data, p->len, "a reply");
        if (rc >= 0)
            rc = zmq_send(d->sock, p->data, p->len, ZMQ_DONTWAIT);
        if (rc < 0 && errno == EAGAIN)
            count_drop(d, p); /* the peer's queue is at limits.peer_queue */
        else if (rc < 0)
            log_debug("reply dropped: %s (the peer retries)", zmq_strerror(errno));
        free(p->data);
    }
    d->nreplies = 0;
    d->turn_bytes = 0;
    report_drops(d, false);
}

/* The turn's writes failed: answer STORAGE to everyone and let the role reload. */
static void undo_turn(struct daemon *d, int err)
{
    const char *why =
        err == ENOSPC || err == EDQUOT ? "its disk is full" : "disk full or I/O error";
    for (uint32_t i = 0; i < d->nreplies; i++) {
        struct pending_reply *p = &d->replies[i];
        wire_buf_reset(&d->wb);
        wire_error_msg(&d->wb, p->req_id, WE_STORAGE,
                       "the %s could not save state (%s); nothing was changed, retry later",
                       d->o.role, why);
        void *n = malloc(d->wb.sb.size);
        if (n) {
            memcpy(n, d->wb.sb.data, d->wb.sb.size);
            free(p->data);
            p->data = n;
            p->len = d->wb.sb.size;
        }
    }
    d->ops.reload(d->ops.arg);
}

/* ---- held requests ---- */

static void held_arm(struct daemon *d);

/* Answers held[i] through the role's expire callback and removes it. */
static void held_expire(struct daemon *d, uint32_t i)
{
    struct held h = d->held[i];
    d->held[i] = d->held[--d->nheld];
    wire_buf_reset(&d->hb);
    d->ops.expire(d->ops.arg, h.handle, h.kind, h.req_id, &d->hb);
    if (queue_raw(d, h.rid, h.rlen, h.delim, h.req_id, h.peer, &d->hb) < 0)
        log_warnx("out of memory queueing a reply; the peer will retry");
}

/* Expires every held request whose deadline has passed. */
static void held_due(struct daemon *d)
{
    int64_t now = loop_now_ms();
    for (uint32_t i = 0; i < d->nheld;)
        if (d->held[i].deadline_ms <= now)
            held_expire(d, i);
        else
            i++;
}

static void on_held_timer(struct loop *l, void *arg)
{
    struct daemon *d = arg;
    (void)l;
    d->held_timer = 0;
    d->timer_at = 0;
    held_due(d);
    held_arm(d);
}

/* Arms the one-shot timer at the earliest deadline (if earlier than the armed one). */
static void held_arm(struct daemon *d)
{
    int64_t first = 0;
    for (uint32_t i = 0; i < d->nheld; i++)
        if (!first || d->held[i].deadline_ms < first)
            first = d->held[i].deadline_ms;
    if (!first || (d->held_timer > 0 && d->timer_at <= first))
        return;
    if (d->held_timer > 0)
        loop_timer_cancel(d->loop, d->held_timer);
    int64_t ms = first - loop_now_ms();
    d->held_timer = loop_timer(d->loop, ms > 0 ? ms : 0, 0, on_held_timer, d);
    d->timer_at = d->held_timer > 0 ? first : 0;
}

uint64_t daemon_hold(struct daemon *d, uint32_t kind, int64_t wait_ms)
{
    struct current *cur = d->cur;
    if (!cur || cur->held || !d->ops.expire)
        return 0;
    size_t rlen = zmq_msg_size(cur->rid);
    const void *rid = zmq_msg_data(cur->rid);
    for (uint32_t i = 0; i < d->nheld; i++) /* one per peer and kind: answer the old one */
        if (d->held[i].kind == kind && d->held[i].rlen == rlen &&
            !memcmp(d->held[i].rid, rid, rlen)) {
            held_expire(d, i);
            break;
        }
    if (d->nheld >= DAEMON_HELD_MAX || rlen > RID_MAX)
        return 0;
    if (d->nheld == d->capheld) {
        uint32_t cap = d->capheld ? d->capheld * 2 : 64;
        struct held *n = realloc(d->held, cap * sizeof *n);
        if (!n)
            return 0;
        d->held = n;
        d->capheld = cap;
    }
    struct held *h = &d->held[d->nheld++];
    h->handle = ++d->next_handle;
    h->req_id = cur->req_id;
    h->kind = kind;
    memcpy(h->rid, rid, rlen);
    h->rlen = rlen;
    h->delim = cur->delim;
    snprintf(h->peer, sizeof h->peer, "%s", cur->peer);
    h->deadline_ms = loop_now_ms() + (wait_ms > 0 ? wait_ms : 0);
    cur->held = h->handle;
    held_arm(d);
    return h->handle;
}

int daemon_reply_held(struct daemon *d, uint64_t handle, const struct wire_buf *reply)
{
    for (uint32_t i = 0; i < d->nheld; i++)
        if (d->held[i].handle == handle) {
            struct held h = d->held[i];
            d->held[i] = d->held[--d->nheld];
            if (queue_raw(d, h.rid, h.rlen, h.delim, h.req_id, h.peer, reply) < 0)
                log_warnx("out of memory queueing a reply; the peer will retry");
            return 0;
        }
    return -1;
}

uint32_t daemon_held_count(const struct daemon *d)
{
    return d->nheld;
}

static void before_sleep(struct loop *l, void *arg)
{
    struct daemon *d = arg;
    (void)l;
    if (d->ops.commit(d->ops.arg) < 0)
        undo_turn(d, errno);
    send_replies(d);
}

static void on_drop_timer(struct loop *l, void *arg)
{
    (void)l;
    report_drops(arg, false);
}

/* Creates the socket and binds it; writes the bound endpoint to state_dir/endpoint. */
static int open_socket(struct daemon *d)
{
    int zero = 0, one = 1, hwm = (int)d->o.peer_queue;
    int64_t maxmsg = WIRE_MAX_FRAME;
    size_t eplen = sizeof d->endpoint;
    d->zctx = zmq_ctx_new();
    d->sock = d->zctx ? zmq_socket(d->zctx, ZMQ_ROUTER) : NULL;
    if (!d->sock) {
        log_warnx("cannot create the %s socket: %s", d->o.role, zmq_strerror(errno));
        return -1;
    }
    zmq_setsockopt(d->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(d->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(d->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(d->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(d->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    /* clients vanish behind partitions and NATs without a FIN: without this their
     * connections (and descriptors) stayed for ever (issue 16) */
    if (netopts_liveness(d->sock, d->o.peer_timeout_ms) < 0)
        log_warnx("cannot enable heartbeats on the %s socket: %s", d->o.role, zmq_strerror(errno));
    char err[800];
    if (!(d->sec =
              curve_server_new(d->zctx, d->loop, d->o.security, d->o.listen, err, sizeof err)) ||
        curve_server_apply(d->sec, d->sock) < 0) {
        log_warnx("%s: %s", d->o.role, d->sec ? zmq_strerror(errno) : err);
        fprintf(stderr, "gridnode %s: %s\n", d->o.role, d->sec ? zmq_strerror(errno) : err);
        return -1;
    }
    if (zmq_bind(d->sock, d->o.listen) < 0) {
        log_warnx("cannot listen on %s: %s", d->o.listen, zmq_strerror(errno));
        return -1;
    }
    zmq_getsockopt(d->sock, ZMQ_LAST_ENDPOINT, d->endpoint, &eplen);
    char line[sizeof d->endpoint + 1];
    int n = snprintf(line, sizeof line, "%s\n", d->endpoint);
    if (fs_write_atomic(d->o.state_dir, "endpoint", line, (size_t)n) < 0)
        log_warn("cannot write %s/endpoint", d->o.state_dir);
    log_info("listening on %s (%s)", d->endpoint,
             curve_server_secure(d->sec) ? "CURVE" : "plain, no security");
    printf("gridnode %s: listening on %s\n", d->o.role, d->endpoint);
    fflush(stdout);
    return 0;
}

struct daemon *daemon_new(struct loop *l, const struct daemon_opts *o, const struct daemon_ops *ops)
{
    struct daemon *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->o = *o;
    if (d->o.peer_queue <= 0)
        d->o.peer_queue = DAEMON_PEER_QUEUE_DEFAULT;
    d->ops = *ops;
    d->loop = l;
    d->last_report_ms = loop_now_ms() - DAEMON_DROP_LOG_MS;
    wire_buf_init(&d->wb);
    wire_buf_init(&d->hb);
    wire_buf_init(&d->ab);
    if (open_socket(d) < 0 || loop_add_socket(l, d->sock, on_socket, d) < 0 ||
        loop_timer(l, DAEMON_DROP_LOG_MS, 1, on_drop_timer, d) < 0) {
        daemon_destroy(&d);
        return NULL;
    }
    loop_before_sleep(l, before_sleep, d);
    return d;
}

void daemon_destroy(struct daemon **dp)
{
    if (!dp || !*dp)
        return;
    struct daemon *d = *dp;
    int saved = errno;
    report_drops(d, true);
    for (uint32_t i = 0; i < d->nreplies; i++)
        free(d->replies[i].data);
    free(d->replies);
    free(d->held);
    if (d->held_timer > 0 && d->loop)
        loop_timer_cancel(d->loop, d->held_timer);
    if (d->sock) {
        if (d->loop)
            loop_remove_socket(d->loop, d->sock);
        zmq_close(d->sock);
    }
    curve_server_destroy(&d->sec); /* the ZAP socket, after the ROUTER */
    if (d->zctx)
        zmq_ctx_term(d->zctx);
    wire_buf_free(&d->wb);
    wire_buf_free(&d->hb);
    wire_buf_free(&d->ab);
    free(d);
    *dp = NULL;
    errno = saved;
}

void *daemon_zctx(struct daemon *d)
{
    return d->zctx;
}

const char *daemon_endpoint(const struct daemon *d)
{
    return d->endpoint;
}

uint64_t daemon_dropped(const struct daemon *d)
{
    return d->dropped_total;
}

/* Reads the PID recorded in an existing lock file; 0 if none. */
static long lock_file_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

int daemon_lock_state_dir(const char *state_dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    /* fcntl locks: released by the kernel when the process ends (kill -9 too), not
     * inherited by fork, so task children never hold the state directory. */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        int e = errno;
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        long pid = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
        if (pid <= 0)
            pid = lock_file_pid(fd);
        if (e == EACCES || e == EAGAIN)
            snprintf(err, errlen,
                     "state directory %s is in use by another gridnode process (pid %ld); "
                     "stop it first (kill %ld) or use another state_dir",
                     state_dir, pid, pid);
        else
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        log_warn("cannot record the PID in %s", path); /* the lock itself holds */
    return fd;
}

/*
 * daemon.h - the request/reply skeleton every serving role shares (cluster, batch and
 * meta; the client serves its control socket with it too).
 *
 * A daemon owns one ZeroMQ context and one ROUTER socket bound to an endpoint, and
 * plugs itself into the role's loop (daemon/loop.h):
 *
 *   - each turn it reads up to DAEMON_TURN_MAX requests (routing id, optional empty REQ
 *     delimiter, exactly one body frame), validates each with wire_decode() and hands
 *     the valid ones to the role's dispatch callback, which writes exactly one reply;
 *     bad input gets an ERROR reply built here, never reaches the role;
 *   - replies are queued for the turn; in the loop's before-sleep hook the daemon calls
 *     the role's commit callback (one store transaction for the whole turn: group
 *     commit) and only then sends the replies. If the commit fails, every reply of the
 *     turn becomes a STORAGE error and the role's reload callback restores the state
 *     from the store, so acknowledged and stored state never differ;
 *   - bounds: at most `peer_queue` replies wait in libzmq for one peer (ZMQ_SNDHWM) and
 *     at most `peer_queue` requests per peer wait to be read (ZMQ_RCVHWM); a reply to a
 *     peer over its bound is dropped (the peer sends without reading; a live peer
 *     retries after its timeout) and counted, and drops are logged at most once every
 *     DAEMON_DROP_LOG_MS per role, naming the peers. A turn stops reading once its
 *     queued replies hold DAEMON_TURN_BYTES; the rest waits in libzmq for the next turn.
 *
 * A role using it (about 30 lines):
 *
 *   static void dispatch(void *arg, const struct wire_msg *m, const char *peer,
 *                        struct wire_buf *reply) { ...write one reply into reply... }
 *   static int commit(void *arg) { return store_commit(((struct r *)arg)->store); }
 *   static void reload(void *arg) { store_discard(...); ...reload memory state... }
 *
 *   if (daemon_lock_state_dir(cfg.state_dir, err, sizeof err) < 0) -> print err, exit 1
 *   struct loop *l = loop_new();
 *   struct daemon_opts o = {"batch", cfg.listen, cfg.state_dir, cfg.peer_queue};
 *   struct daemon_ops ops = {dispatch, commit, reload, &role};
 *   struct daemon *d = daemon_new(l, &o, &ops);
 *   void *up = zmq_socket(daemon_zctx(d), ZMQ_DEALER);   (extra sockets: same context,
 *   loop_add_socket(l, up, on_up, &role);                  same loop)
 *   loop_run(l);
 *   zmq_close(up); daemon_destroy(&d); loop_destroy(&l);
 *
 * The daemon takes the loop's before-sleep hook: work a role wants done before every
 * commit (e.g. scheduling) goes at the start of its commit callback.
 *
 * Held (deferred) replies, for long-polls: a dispatch callback may, instead of writing
 * its reply, call daemon_hold() to keep the request open and answer it in a later turn
 * with daemon_reply_held() (e.g. "tell me when something changes, or after wait_ms").
 * A held reply goes out like any other: after the commit of the turn that writes it.
 * Bounds: at most one held request per peer and kind (holding a second answers the
 * first at once through ops.expire), at most DAEMON_HELD_MAX in all (daemon_hold then
 * refuses and the role answers at once), and a deadline after which ops.expire builds
 * the role's timeout reply. The daemon wakes the loop itself at the earliest deadline.
 */
#ifndef GRIDNODE_DAEMON_H
#define GRIDNODE_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "lib/config.h"
#include "wire/wire.h"

/*
 * The configuration keys every role shares, written once. `type` is the role's config
 * struct, with these fields: listen, state_dir, log_level (char[CONFIG_STR_MAX]),
 * sync (int), map_mb and peer_queue (long). A role lists the groups it has, in its key
 * table, where their sections belong:
 *   DAEMON_LISTEN_KEY   [SECTION] listen (a role that serves a socket)
 *   DAEMON_STATE_KEYS   [SECTION] state_dir, log_level
 *   DAEMON_STORE_KEYS   [store] sync, map_mb (store/store.h)
 *   DAEMON_LIMIT_KEYS   [limits] peer_queue (struct daemon_opts)
 */
// clang-format off
#define DAEMON_LISTEN_KEY(type, section, dflt)                                                     \
    {section, "listen", CONFIG_STR, dflt, offsetof(type, listen), 0, 0, NULL,                      \
     "ZeroMQ endpoint that peers and user tools connect to (tcp://127.0.0.1:* picks a port)"}
#define DAEMON_STATE_KEYS(type, section, dflt, help)                                               \
    {section, "state_dir", CONFIG_STR, dflt, offsetof(type, state_dir), 0, 0, NULL, help},         \
    {section, "log_level", CONFIG_STR, "info", offsetof(type, log_level), 0, 0, NULL,              \
     "error, warn, info or debug"}
#define DAEMON_STORE_KEYS(type)                                                                    \
    {"store", "sync", CONFIG_ENUM, "full", offsetof(type, sync), 0, 0, "full|meta|none",           \
     "full: fsync every commit; meta: skip the meta-page sync; none: no fsync"},                   \
    {"store", "map_mb", CONFIG_INT, "64", offsetof(type, map_mb), 1, 1L << 20, NULL,               \
     "initial LMDB map size in MiB (grows when full)"}
#define DAEMON_LIMIT_KEYS(type)                                                                    \
    {"limits", "peer_queue", CONFIG_INT, "1000", offsetof(type, peer_queue), 1, 1000000, NULL,     \
     "replies (and requests) queued per peer; replies beyond it are dropped and logged"}
// clang-format on

struct loop;
struct daemon;
struct curve_conf;

#define DAEMON_TURN_MAX 1024           /* requests read per turn */
#define DAEMON_TURN_BYTES (64u << 20)  /* stop reading a turn once replies hold this */
#define DAEMON_PEER_QUEUE_DEFAULT 1000 /* replies (and requests) queued per peer */
#define DAEMON_DROP_LOG_MS 10000       /* at most one drop report per this period */
#define DAEMON_HELD_MAX 4096           /* held requests at most, all peers together */

struct daemon_ops {
    /*
     * Handles one validated request from the peer at Peer-Address `peer` ("" when
     * unknown): writes exactly one reply into `reply` (already reset). msg and its
     * objects live until the callback returns.
     */
    void (*dispatch)(void *arg, const struct wire_msg *msg, const char *peer,
                     struct wire_buf *reply);
    /* Makes the turn's state changes durable: 0, or -1 to fail the whole turn. */
    int (*commit)(void *arg);
    /* After a failed commit: drop the turn's writes and reload the state from the store. */
    void (*reload)(void *arg);
    void *arg;
    /*
     * Optional (needed only by roles that hold requests): writes into reply (already
     * reset) the answer to the held request `handle` of `kind` and request id req_id
     * that is answered without the role asking: its deadline passed, or its peer held
     * another request of the same kind. The role forgets the handle; the daemon sends
     * the reply after the turn's commit.
     */
    void (*expire)(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id,
                   struct wire_buf *reply);
};

struct daemon_opts {
    const char *role;      /* in messages, e.g. "cluster" */
    const char *listen;    /* endpoint to bind, e.g. tcp://127.0.0.1:* */
    const char *state_dir; /* the bound endpoint is written to state_dir/endpoint */
    long peer_queue;       /* per-peer bound; <= 0 means DAEMON_PEER_QUEUE_DEFAULT */
    /* a peer silent this long (ZMTP heartbeats, TCP keepalive) is disconnected and its
     * descriptor released; <= 0 means NETOPTS_PEER_TIMEOUT_MS (daemon/netopts.h) */
    long peer_timeout_ms;
    /* [security] keys (daemon/curve.h); NULL: the environment only. Without keys or
     * plain the daemon does not start. */
    const struct curve_conf *security;
};

/*
 * Creates the context and the ROUTER, binds it, writes state_dir/endpoint, prints
 * "gridnode ROLE: listening on EP" on stdout and registers the socket and the
 * before-sleep hook with l. Returns NULL after logging why (e.g. endpoint in use).
 */
struct daemon *daemon_new(struct loop *l, const struct daemon_opts *o,
                          const struct daemon_ops *ops);
/*
 * Sends nothing more, closes the ROUTER and ends the context (NULL-safe, sets *dp to
 * NULL). Close every extra socket made in daemon_zctx() first, or this hangs.
 */
void daemon_destroy(struct daemon **dp);

/* The context, for the role's extra sockets (DEALERs to other daemons, inproc). */
void *daemon_zctx(struct daemon *d);
/* The bound endpoint (tcp://127.0.0.1:PORT once a wildcard port is resolved). */
const char *daemon_endpoint(const struct daemon *d);
/* Replies dropped so far because a peer was over its queue bound (for stats/tests). */
uint64_t daemon_dropped(const struct daemon *d);

/*
 * Only from inside ops.dispatch: keeps the request being dispatched open instead of
 * answering it now (whatever dispatch writes into its reply buffer is then ignored).
 * kind groups requests (a role uses e.g. the message type): a peer holds at most one
 * of each kind, so a second one answers the first at once via ops.expire. After
 * wait_ms (>= 0) ops.expire answers it. Returns a handle (> 0), or 0 when it cannot
 * hold it (DAEMON_HELD_MAX reached, out of memory, no ops.expire, not in dispatch):
 * the role must then write its reply now, as usual.
 */
uint64_t daemon_hold(struct daemon *d, uint32_t kind, int64_t wait_ms);
/*
 * Answers held request `handle` with the message in reply (the role writes the request
 * id it saved). The reply is queued with the turn's replies and sent after the turn's
 * commit, so call it from a handler, a timer or the commit callback. Returns 0, or -1
 * when the handle is not held (already answered or expired).
 */
int daemon_reply_held(struct daemon *d, uint64_t handle, const struct wire_buf *reply);
/* Requests held now (for stats and tests). */
uint32_t daemon_held_count(const struct daemon *d);

/*
 * Takes an exclusive lock on state_dir/lock (created) for the life of the process and
 * writes the PID into it. The kernel releases the lock when the process ends, kill -9
 * included, so a restart after a crash works. Read-only tools (gridnode dump) do not
 * take it. Returns the descriptor (keep it open; it is close-on-exec so task children
 * do not inherit the lock), or -1 with a message in err naming the directory, the PID
 * holding it and what to do.
 */
int daemon_lock_state_dir(const char *state_dir, char *err, size_t errlen);

#endif

/*
 * curve.h - transport security shared by every role and tool (docs/security.md): CURVE
 * encryption with key pairs, a ZAP handler that admits only the keys of an
 * authorized-keys file, the identity (name, kind, groups, grant) bound to each key,
 * and the one function that decides what an identity may ask (curve_access).
 *
 * Configuration, the same four keys in every role's [security] section (each empty
 * value falls back to an environment variable, so that tools and test harnesses need
 * no file):
 *
 *   secret_key       own secret key file ($GRIDNODE_KEY), written by `gridnode keygen`;
 *                    a role uses it both to serve and to connect to other roles
 *   server_key       the public key of the role(s) this one connects to: its NAME.pub
 *                    file, or the literal "z85:KEY" ($GRIDNODE_SERVER_KEY); the only
 *                    setting where a literal key is accepted
 *   authorized_keys  file of the keys a serving role admits ($GRIDNODE_AUTHORIZED_KEYS)
 *   plain            no CURVE at all; allowed only on loopback and ipc:// endpoints
 *                    (also $GRIDNODE_PLAIN=1)
 *
 * With neither keys nor `plain` a role refuses to start: there is no silent insecure
 * default.
 */
#ifndef GRIDNODE_CURVE_H
#define GRIDNODE_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"

struct loop;
struct wire_msg;
struct wire_buf;

#define CURVE_KEY_Z85 40 /* characters of a z85 key */
#define CURVE_NAME_MAX 64
#define CURVE_KEYFILE_MAX 4096 /* bytes of a key file: a few comment lines and the key */
/* The one literal key form (server_key only): a value never names a key by its length. */
#define CURVE_LITERAL_PREFIX "z85:"

struct curve_conf {
    char secret_key[CONFIG_STR_MAX];
    char server_key[CONFIG_STR_MAX];
    char authorized_keys[CONFIG_STR_MAX];
    int plain;
};

/* The [security] keys of a role whose config struct `type` has a struct curve_conf `m`. */
#define CURVE_CONFIG_KEYS(type, m)                                                                 \
    {"security",                                                                                   \
     "secret_key",                                                                                 \
     CONFIG_STR,                                                                                   \
     "",                                                                                           \
     offsetof(type, m.secret_key),                                                                 \
     0,                                                                                            \
     0,                                                                                            \
     NULL,                                                                                         \
     "own CURVE secret key file (gridnode keygen); empty: $GRIDNODE_KEY"},                         \
        {"security",                                                                               \
         "server_key",                                                                             \
         CONFIG_STR,                                                                               \
         "",                                                                                       \
         offsetof(type, m.server_key),                                                             \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "public key of the roles this one connects to: a .pub file or z85:KEY; empty: "           \
         "$GRIDNODE_SERVER_KEY"},                                                                  \
        {"security",                                                                               \
         "authorized_keys",                                                                        \
         CONFIG_STR,                                                                               \
         "",                                                                                       \
         offsetof(type, m.authorized_keys),                                                        \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "file of admitted keys: KEY NAME KIND [groups=..] [grant=..]; empty: "                    \
         "$GRIDNODE_AUTHORIZED_KEYS"},                                                             \
    {                                                                                              \
        "security", "plain", CONFIG_BOOL, "false", offsetof(type, m.plain), 0, 0, NULL,            \
            "no CURVE (testing only): allowed on loopback and ipc:// endpoints only"               \
    }

enum curve_kind { CURVE_USER = 0, CURVE_ADMIN, CURVE_NODE, CURVE_PEER };

/* Who sent a request: the entry of the authorized-keys file its key matched. */
struct curve_ident {
    char key[CURVE_KEY_Z85 + 1];
    char name[CURVE_NAME_MAX];
    enum curve_kind kind;
    char groups[256]; /* comma-separated; "" none */
    char grant[512];  /* peers: comma-separated request names ("" = user requests) */
};

/* ---- keys ---- */

/*
 * Writes DIR/NAME.key (the secret key, mode 0600) and DIR/NAME.pub (the public key),
 * refusing to overwrite either. 0, or -1 with a message in err.
 */
int curve_keygen(const char *dir, const char *name, char *err, size_t errlen);
/*
 * Reads a key from a key file (docs/security.md "Key files"), never from the text of
 * `path` itself: a secret key from NAME.key (a regular file of at most
 * CURVE_KEYFILE_MAX bytes, not readable by group or others), a public key from
 * NAME.pub. The file holds '#' comment lines and exactly one line that is the 40
 * z85 characters of the key (a key may start with '#'). out gets 41 bytes. 0, or -1
 * with a message naming the file and the fix in err (also for a "z85:" literal).
 */
int curve_read_key(const char *path, bool secret, char out[CURVE_KEY_Z85 + 1], char *err,
                   size_t errlen);
/*
 * Reads security.server_key: "z85:" followed by the 40 z85 characters of a public key
 * (the only literal form, documented for this one setting: a public key is not
 * secret), or else a .pub file as curve_read_key. 0, or -1 with a message in err.
 */
int curve_read_server_key(const char *value, char out[CURVE_KEY_Z85 + 1], char *err, size_t errlen);
/* Fills the empty fields of c from the environment (see the top of this file). */
void curve_conf_env(struct curve_conf *c);
/* Is endpoint a loopback TCP address or ipc:// / inproc://? */
bool curve_endpoint_local(const char *endpoint);

/* ---- serving roles (daemon/daemon.c) ---- */

struct curve_server;

/*
 * Prepares the security of a ROUTER that will bind `listen` in context zctx: with
 * CURVE, loads the secret key and the authorized keys and starts the ZAP handler (a
 * REP socket at inproc://zeromq.zap.01 watched by loop l; it must exist before the
 * ROUTER binds). With plain, checks that listen is local. NULL with a message in err
 * (the role must not start).
 */
struct curve_server *curve_server_new(void *zctx, struct loop *l, const struct curve_conf *conf,
                                      const char *listen, char *err, size_t errlen);
/* Sets the CURVE server options on sock (before zmq_bind). 0 or -1. */
int curve_server_apply(struct curve_server *s, void *sock);
/* Is this server running CURVE (false: plain)? */
bool curve_server_secure(const struct curve_server *s);
/*
 * The identity of a connection from its "User-Id" property (the z85 key the ZAP
 * handler put there). Re-reads the authorized-keys file when it changed (checked at
 * most once a second), so a key removed from it stops working at once, even on an
 * open connection. NULL when the key is no longer authorized.
 */
const struct curve_ident *curve_server_ident(struct curve_server *s, const char *user_id);
/* The entry for a name (a user a peer acts for), or NULL. */
const struct curve_ident *curve_server_by_name(struct curve_server *s, const char *name);
/* Stops the ZAP handler (close before the context ends). NULL-safe; sets *sp NULL. */
void curve_server_destroy(struct curve_server **sp);

/*
 * The identity of the request being dispatched, for handlers that check ownership or
 * groups (set by daemon/daemon.c around each dispatch). NULL when the role runs plain or
 * outside a dispatch.
 */
const struct curve_ident *curve_current(void);
void curve_set_current(struct curve_server *s, const struct curve_ident *id);

/* ---- access control: every decision in one place (daemon/access.c) ---- */

/*
 * May identity id send request m? With CURVE on, for user identities the request's
 * "user" field is set to the identity's name (a user cannot act for another) and a
 * "group" field must be one of its groups; *rewritten (scratch wb) then holds the new
 * frame to decode instead. Returns 0 (allowed), or -1 with the reason in why.
 */
int curve_access(const struct curve_ident *id, const struct wire_msg *m, struct wire_buf *wb,
                 bool *rewritten, char *why, size_t whylen);
/*
 * May the current requester touch an object owned by `owner` (a job)? True when
 * plain, for admins and peers, and for the user named owner.
 */
bool curve_may_touch(const char *owner);
/* "user", "admin", "node" or "peer". */
const char *curve_kind_name(enum curve_kind k);
/*
 * The current requester for a log line: "'NAME' (KIND)", or a text saying the role runs
 * plain. Always NUL-terminated.
 */
void curve_requester(char *buf, size_t len);
/*
 * May the current requester see session ids (NODE_LIST, task maps)? False for user
 * identities only: a session id is a node's credential within its key (issue 23).
 */
bool curve_may_see_sessions(void);
/*
 * May the current requester act for the node session opened by identity `owner`
 * ("" = not recorded: a session stored before sessions were bound to keys, or opened
 * plain)? True when plain, for admins, and for the identity named owner. For an
 * unrecorded owner it is true and *claim is set: the caller records the requester as
 * the session's owner from then on.
 */
bool curve_may_use_session(const char *owner, bool *claim);
/*
 * Is `user` a member of `group`? In a secure role: the groups of the user's
 * authorized-keys entry when it has one; *known is then true. Otherwise *known is
 * false and the caller asks the host (NSS), as before.
 */
bool curve_user_in_group(const char *user, const char *group, bool *known);

/* ---- connecting (roles' DEALERs, tools) ---- */

/*
 * Sets the CURVE client options on sock for connecting to endpoint (before
 * zmq_connect), or checks that plain is allowed there. conf NULL: environment only.
 * 0, or -1 with a message in err.
 */
int curve_client_apply(void *sock, const struct curve_conf *conf, const char *endpoint, char *err,
                       size_t errlen);
/*
 * The keys curve_client_apply would set, read without libzmq (the user tools' own CURVE
 * client, cmd/zmtp_curve.c): our secret key and the server's public key (Z85). 0 (keys
 * set), 1 (plain, allowed to this endpoint), or -1 with a message in err.
 */
int curve_client_keys(const struct curve_conf *conf, const char *endpoint,
                      char sec[CURVE_KEY_Z85 + 1], char srv[CURVE_KEY_Z85 + 1], char *err,
                      size_t errlen);
/* Does the configuration (conf or the environment) ask for CURVE? */
bool curve_client_secure(const struct curve_conf *conf);

/*
 * Handshake failures, for messages that say what is wrong instead of a timeout: the
 * text for a monitor event (ZMQ_EVENT_HANDSHAKE_FAILED_*; NULL for other events), and
 * reading one event from a monitor PAIR socket (0 when none).
 */
const char *curve_handshake_failure(unsigned event);
unsigned curve_monitor_event(void *mon);

struct curve_watch;
/*
 * Watches the handshakes of a role's DEALER sock (connecting to endpoint) from loop l:
 * a failed CURVE handshake is logged at once, naming the endpoint and the key that is
 * wrong, at most once a minute per socket. NULL when plain or on error (nothing is
 * watched then). Destroy it before closing sock.
 */
struct curve_watch *curve_watch_new(void *zctx, struct loop *l, void *sock, const char *endpoint);
void curve_watch_destroy(struct curve_watch **wp);

#endif

/*
 * access.c - who may send which request: the one place gridnode decides it
 * (docs/security.md "Access control"). Requests are classified by their name in the
 * descriptor table (wire/msgs.c), so the rule for a request type added later is
 * decided here too: a type not listed is a user request.
 *
 *   node protocol (HELLO .. PSYNC,     node and admin identities (and peers whose grant
 *   CKPT)
 *                                      names the request); a node key acts only for the
 *                                      sessions it opened (roles/cluster/sessions.c)
 *   MASTER_GET, FILE_HAVE, FILE_PUT,   every admitted identity (the project's public
 *   FILE_GET                           scheduler list; files, whose handler checks
 *                                      the job's owner; peers within their grant)
 *   admin requests (CONSOLE, PURGE,    admin identities, and peers whose grant names
 *   RESV_SET, RESV_RELEASE, ATTACH,    the request
 *   DETACH, NODE_CTL, ...)
 *   peer requests (EVENTS, RESERVE,    admins and peers (within their grant)
 *   TASK_PIN)
 *   user requests (everything else:    users (as themselves), admins, and peers
 *   SUBMIT .. JOB_CTL, ACCT, ...)      (for any user; within their grant when set);
 *                                      a user's PSUBMIT may not pick hosts ("hosts")
 *
 * Every refusal's text names the identity, its kind and the rule; the daemon logs it.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/curve.h"
#include "wire/wire.h"

enum req_class { RC_USER, RC_NODE, RC_ADMIN, RC_PEER, RC_ANY };

/* NODE_CTL (drain / resume, issue 23): an operator's act on a machine, as Slurm's
 * scontrol update state=drain is SlurmUser/root only */
static const char *const admin_reqs[] = {"CONSOLE",  "PURGE",  "RESV_SET",  "RESV_RELEASE",
                                         "ATTACH",   "DETACH", "LIMIT_SET", "QUEUE_SET",
                                         "NODE_CTL", NULL};
/* TASK_PIN (issue 26) moves a pinned task to a host a batch role's scheduler chose */
static const char *const peer_reqs[] = {"EVENTS", "RESERVE", "TASK_PIN", NULL};
/* node protocol outside HELLO .. PSYNC_ACK: a task's checkpoint (issue 26), sent by the
 * node running it, for a session it opened (roles/cluster/files_ckpt.c); an idle node's
 * wait for new work (roles/cluster/workwait.c) */
static const char *const node_reqs[] = {"CKPT", "WORK_WAIT", NULL};
/* readable by every admitted key: a node asks it before it has work (issue 11); files
 * (issue 26) go both ways between users and nodes: the handler checks the job's owner */
static const char *const any_reqs[] = {"MASTER_GET", "FILE_HAVE", "FILE_PUT", "FILE_GET", NULL};
static const char *const kinds[] = {"user", "admin", "node", "peer"};

static bool in_names(const char *const *names, const char *n)
{
    for (; *names; names++)
        if (!strcmp(*names, n))
            return true;
    return false;
}

static enum req_class classify(const struct wire_desc *d)
{
    if ((d->type >= WT_HELLO && d->type <= WT_PSYNC_ACK) || in_names(node_reqs, d->name))
        return RC_NODE;
    if (in_names(admin_reqs, d->name))
        return RC_ADMIN;
    if (in_names(peer_reqs, d->name))
        return RC_PEER;
    if (in_names(any_reqs, d->name))
        return RC_ANY;
    return RC_USER;
}

/* Is name in the comma-separated list? */
static bool in_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == nl && !strncmp(p, name, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Rewrites m into wb with "user" = name (every other field copied as it is). */
static void rewrite_user(const struct wire_msg *m, const char *name, struct wire_buf *wb)
{
    const msgpack_object_map *map = &m->root->via.map;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object *k = &map->ptr[i].key;
        if (!(k->type == MSGPACK_OBJECT_STR && k->via.str.size == 4 &&
              !memcmp(k->via.str.ptr, "user", 4)))
            keep++;
    }
    wire_buf_reset(wb);
    wire_pack_map(wb, keep + 1);
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object *k = &map->ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 4 &&
            !memcmp(k->via.str.ptr, "user", 4))
            continue;
        wire_pack_object(wb, k);
        wire_pack_object(wb, &map->ptr[i].val);
    }
    wire_put_str(wb, "user", name);
}

/*
 * What a request asked, for the log line of a refusal that an operator reads later
 * ("drain node17"): NODE_CTL's op and node; "" for the rest.
 */
static void asked(const struct wire_msg *m, char *out, size_t n)
{
    char op[16], node[64];
    *out = '\0';
    if (m->type != WT_NODE_CTL)
        return;
    wire_get_strbuf(m->root, "op", op, sizeof op);
    wire_get_strbuf(m->root, "node", node, sizeof node);
    snprintf(out, n, " (asked: %s %s)", op, node);
    for (char *p = out; *p; p++) /* one log line per refusal, whatever the name holds */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

int curve_access(const struct curve_ident *id, const struct wire_msg *m, struct wire_buf *wb,
                 bool *rewritten, char *why, size_t wl)
{
    char what[96];
    *rewritten = false;
    if (!id || id->kind == CURVE_ADMIN)
        return 0;
    const char *req = m->desc->name;
    enum req_class rc = classify(m->desc);
    asked(m, what, sizeof what);
    if (id->kind == CURVE_NODE) {
        if (rc == RC_NODE || rc == RC_ANY)
            return 0;
        snprintf(why, wl, "'%s' is a node key: nodes may send only the node protocol, not %s%s",
                 id->name, req, what);
        return -1;
    }
    if (id->kind == CURVE_PEER) {
        /* default grant: user and peer requests, and RESV_RELEASE (the batch role lets a
         * peer release only the site reservations it owns) */
        if (*id->grant
                ? in_list(id->grant, req)
                : rc == RC_USER || rc == RC_PEER || rc == RC_ANY || !strcmp(req, "RESV_RELEASE"))
            return 0;
        snprintf(why, wl, "%s%s is outside the grant of peer '%s' (grant: %s)", req, what, id->name,
                 *id->grant ? id->grant : "user and peer requests, MASTER_GET, RESV_RELEASE");
        return -1;
    }
    if (rc != RC_USER && rc != RC_ANY) { /* a user */
        snprintf(why, wl, "%s%s is for %s only; '%s' is a %s key", req, what,
                 rc == RC_NODE    ? "nodes"
                 : rc == RC_ADMIN ? "administrators"
                                  : "peer roles",
                 id->name, kinds[id->kind]);
        return -1;
    }
    /* host picking (issue 23): the cluster admits a placed job at once, outside its
     * scheduling, on cores the batch role counts on; only the role that owns those
     * cores (a peer) or an operator may do that */
    if ((m->type == WT_PSUBMIT && wire_get(m->root, "hosts")) ||
        (m->type == WT_SUBMIT && wire_get(m->root, "host"))) {
        snprintf(why, wl,
                 "'%s' is a user key: %s with %s (picking the hosts) is for "
                 "administrators and peer roles; submit without it and the scheduler "
                 "places the job",
                 id->name, req, m->type == WT_SUBMIT ? "host" : "hosts");
        return -1;
    }
    size_t gl;
    const char *g = wire_get_str(m->root, "group", &gl);
    if (g && gl) {
        char group[128];
        bool known;
        snprintf(group, sizeof group, "%.*s", (int)(gl < 127 ? gl : 127), g);
        if (gl >= 127 || !(curve_user_in_group(id->name, group, &known) && known)) {
            snprintf(why, wl, "'%s' is not a member of group '%s' (groups: %s)", id->name, group,
                     *id->groups ? id->groups : "none");
            return -1;
        }
    }
    size_t ul;
    const char *u = wire_get_str(m->root, "user", &ul);
    if (u && ul == strlen(id->name) && !memcmp(u, id->name, ul))
        return 0;
    rewrite_user(m, id->name, wb);
    *rewritten = true;
    return 0;
}

const char *curve_kind_name(enum curve_kind k)
{
    return (unsigned)k < sizeof kinds / sizeof kinds[0] ? kinds[k] : "?";
}

void curve_requester(char *buf, size_t len)
{
    const struct curve_ident *id = curve_current();
    if (id)
        snprintf(buf, len, "'%s' (%s)", id->name, curve_kind_name(id->kind));
    else
        snprintf(buf, len, "a plain requester (no CURVE identity)");
}

bool curve_may_see_sessions(void)
{
    const struct curve_ident *id = curve_current();
    return !id || id->kind != CURVE_USER;
}

bool curve_may_use_session(const char *owner, bool *claim)
{
    const struct curve_ident *id = curve_current();
    *claim = false;
    if (!id || id->kind == CURVE_ADMIN)
        return true;
    if (!*owner) { /* stored before sessions were bound to keys, or opened plain */
        *claim = true;
        return true;
    }
    return !strcmp(owner, id->name);
}

bool curve_may_touch(const char *owner)
{
    const struct curve_ident *id = curve_current();
    if (!id || id->kind == CURVE_ADMIN || id->kind == CURVE_PEER)
        return true;
    return id->kind == CURVE_USER && owner && !strcmp(owner, id->name);
}

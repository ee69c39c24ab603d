/*
 * access.c - who may send which request: the one place gridnode decides it
 * (docs/security.md "Access control"). Requests are classified by their name in the
 * descriptor table (wire/msgs.c), so the rule for a request type added later is
 * decided here too: a type not listed is a user request.
 *
 *   node protocol (HELLO .. PSYNC)     node and admin identities
 *   admin requests (CONSOLE, PURGE,    admin identities, and peers whose grant names
 *   RESV_SET, RESV_RELEASE, ATTACH,    the request
 *   DETACH, ...)
 *   peer requests (EVENTS, RESERVE)    admins and peers (within their grant)
 *   user requests (everything else)    users (as themselves), admins, and peers
 *                                      (for any user; within their grant when set)
 */
#include <stdio.h>
#include <string.h>

#include "daemon/curve.h"
#include "wire/wire.h"

enum req_class { RC_USER, RC_NODE, RC_ADMIN, RC_PEER };

static const char *const admin_reqs[] = {"CONSOLE",      "PURGE",     "RESV_SET",
                                         "RESV_RELEASE", "ATTACH",    "DETACH",
                                         "LIMIT_SET",    "QUEUE_SET", NULL};
static const char *const peer_reqs[] = {"EVENTS", "RESERVE", NULL};

static bool in_names(const char *const *names, const char *n)
{
    for (; *names; names++)
        if (!strcmp(*names, n))
            return true;
    return false;
}

static enum req_class classify(const struct wire_desc *d)
{
    if (d->type >= WT_HELLO && d->type <= WT_PSYNC_ACK)
        return RC_NODE;
    if (in_names(admin_reqs, d->name))
        return RC_ADMIN;
    if (in_names(peer_reqs, d->name))
        return RC_PEER;
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

int curve_access(const struct curve_ident *id, const struct wire_msg *m, struct wire_buf *wb,
                 bool *rewritten, char *why, size_t wl)
{
    static const char *const kinds[] = {"user", "admin", "node", "peer"};
    *rewritten = false;
    if (!id || id->kind == CURVE_ADMIN)
        return 0;
    const char *req = m->desc->name;
    enum req_class rc = classify(m->desc);
    if (id->kind == CURVE_NODE) {
        if (rc == RC_NODE)
            return 0;
        snprintf(why, wl, "'%s' is a node key: nodes may send only the node protocol, not %s",
                 id->name, req);
        return -1;
    }
    if (id->kind == CURVE_PEER) {
        /* default grant: user and peer requests, and RESV_RELEASE (the batch role lets a
         * peer release only the site reservations it owns) */
        if (*id->grant ? in_list(id->grant, req)
                       : rc == RC_USER || rc == RC_PEER || !strcmp(req, "RESV_RELEASE"))
            return 0;
        snprintf(why, wl, "%s is outside the grant of peer '%s' (grant: %s)", req, id->name,
                 *id->grant ? id->grant : "user and peer requests, RESV_RELEASE");
        return -1;
    }
    if (rc != RC_USER) { /* a user */
        snprintf(why, wl, "%s is for %s only; '%s' is a %s key", req,
                 rc == RC_NODE    ? "nodes"
                 : rc == RC_ADMIN ? "administrators"
                                  : "peer roles",
                 id->name, kinds[id->kind]);
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

bool curve_may_touch(const char *owner)
{
    const struct curve_ident *id = curve_current();
    if (!id || id->kind == CURVE_ADMIN || id->kind == CURVE_PEER)
        return true;
    return id->kind == CURVE_USER && owner && !strcmp(owner, id->name);
}

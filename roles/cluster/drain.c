/*
 * drain.c - nodes drained by name (issue 15), like Slurm's
 * `scontrol update nodename=X state=drain reason=...` and `state=resume`.
 *
 * A drain belongs to a node name, not a session: a node that restarts or joins again
 * under the same name is still drained. A drained node gets no new tasks and is not
 * chosen as a host for new parallel jobs; what it runs finishes and its results are
 * taken. `gridnode nodes` shows it as "drain" while it still runs tasks and "drained"
 * once it runs none. Drains are stored in the "drain" table (name -> {reason, since})
 * in the turn that makes them, so they survive kill -9 once acknowledged. The NODE_CTL
 * handler (drain, resume; logged with who asked) is here too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/curve.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "store/store.h"
#include "wire/wire.h"

const struct drain_ent *drain_find(const struct cluster *c, const char *name)
{
    for (const struct drain_ent *d = c->drains; d; d = d->next)
        if (!strcmp(d->name, name))
            return d;
    return NULL;
}

/* Points every session of d's name at d (or at nothing: d NULL, name given). */
static void refresh(struct cluster *c, const char *name, const struct drain_ent *d)
{
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (!strcmp(c->nodes[i].name, name))
            c->nodes[i].drain = d;
}

static struct drain_ent *add(struct cluster *c, const char *name, const char *reason, int64_t since)
{
    struct drain_ent *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->reason, sizeof d->reason, "%s", reason);
    d->since_ms = since;
    d->next = c->drains;
    c->drains = d;
    c->ndrains++;
    refresh(c, d->name, d);
    return d;
}

static int load_one(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    char name[64], reason[256];
    if (klen == 0 || klen >= sizeof name || cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    memcpy(name, key, klen);
    name[klen] = '\0';
    wire_get_strbuf(&up.data, "reason", reason, sizeof reason);
    if (!drain_find(c, name) && !add(c, name, reason, wire_get_i64(&up.data, "since", 0)))
        log_warnx("drain: out of memory loading the drain of node %s", name);
    msgpack_unpacked_destroy(&up);
    return RECORD_TAKEN;
}

int drain_load(struct cluster *c)
{
    drain_free(c);
    /* unreadable drains are warned of, not counted in load_skipped (as before) */
    if (record_load(c->store, c->t_drain, load_one, c) < 0)
        return -1;
    if (c->ndrains)
        log_info("%u node(s) drained", c->ndrains);
    return 0;
}

void drain_free(struct cluster *c)
{
    while (c->drains) {
        struct drain_ent *d = c->drains;
        c->drains = d->next;
        refresh(c, d->name, NULL);
        free(d);
    }
    c->ndrains = 0;
}

void drain_pack(const struct node *n, struct wire_buf *wb)
{
    wire_put_str(wb, "drain", n->drain->reason);
    wire_put_i64(wb, "drain_since", n->drain->since_ms);
}

int drain_set(struct cluster *c, const char *name, const char *reason)
{
    struct drain_ent **pp = &c->drains;
    while (*pp && strcmp((*pp)->name, name))
        pp = &(*pp)->next;
    if (!reason) { /* resume */
        if (!*pp)
            return 0;
        if (store_del(c->store, c->t_drain, name, strlen(name)) < 0)
            return -1;
        struct drain_ent *d = *pp;
        *pp = d->next;
        c->ndrains--;
        refresh(c, name, NULL);
        free(d);
        log_info("node %s resumed", name);
        return 0;
    }
    struct drain_ent *d = *pp;
    int64_t since = d ? d->since_ms : wall_now_ms(); /* a new reason keeps the first time */
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 2);
    wire_put_str(&wb, "reason", reason);
    wire_put_i64(&wb, "since", since);
    int rc = store_put(c->store, c->t_drain, name, strlen(name), wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    if (rc < 0)
        return -1;
    if (d) {
        snprintf(d->reason, sizeof d->reason, "%s", reason);
    } else if (!add(c, name, reason, since)) {
        return -1; /* the caller fails the turn: the put is discarded */
    }
    log_info("node %s drained: %s", name, reason);
    return 0;
}

/*
 * NODE_CTL (issue 15): drain / resume a node by name, like Slurm's scontrol update
 * nodename=X state=drain reason=... / state=resume (drain.c). A drain needs a reason
 * (as in Slurm) and a name some session has used; resume of a node not drained is OK.
 * Admin only (daemon/access.c, issue 23). Returns 0 (done), or an error code with its
 * text in why.
 */
static int node_ctl(struct cluster *c, const msgpack_object *m, bool drain, const char *name,
                    char *why, size_t wl)
{
    char reason[256];
    size_t rn = 0;
    const char *rs = wire_get_str(m, "reason", &rn);
    wire_get_strbuf(m, "reason", reason, sizeof reason);
    if (!name[0]) {
        snprintf(why, wl, "node must be a node name");
        return WE_INVALID;
    }
    if (drain && (!rs || !reason[0])) {
        snprintf(why, wl, "a drain needs a reason (gridnode nodes --drain NODE --reason TEXT)");
        return WE_INVALID;
    }
    bool known = drain_find(c, name) != NULL;
    for (uint32_t i = 0; i < c->nnodes && !known; i++)
        known = !c->nodes[i].gone && !strcmp(c->nodes[i].name, name);
    if (!known) {
        snprintf(why, wl, "no node named %s (names as gridnode nodes shows them)", name);
        return WE_NOT_FOUND;
    }
    if (drain_set(c, name, drain ? reason : NULL) < 0)
        return WE_STORAGE;
    return 0;
}

/* Bytes that would break a log line become '?' (names come from the wire). */
static void log_safe(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

/* NODE_CTL: every request, done or refused, is logged with who asked (issue 23). */
void drain_h_node_ctl(struct cluster *c, struct request *r)
{
    char name[64], op[17], why[300], who[CURVE_NAME_MAX + 16];
    wire_get_strbuf(r->msg->root, "op", op, sizeof op);
    wire_get_strbuf(r->msg->root, "node", name, sizeof name);
    bool drain = !strcmp(op, "drain");
    int code = WE_INVALID;
    snprintf(why, sizeof why, "op must be drain or resume");
    if (drain || !strcmp(op, "resume"))
        code = node_ctl(c, r->msg->root, drain, name, why, sizeof why);
    curve_requester(who, sizeof who);
    log_safe(op);
    log_safe(name);
    if (code == WE_STORAGE) {
        c->turn_failed = true; /* the turn is undone, as every storage failure */
        cluster_reply_error(r, WE_STORAGE,
                            "the cluster could not save state (out of memory or disk); "
                            "nothing was changed, retry later");
    } else if (code)
        cluster_reply_error(r, code, "%s", why);
    else
        wire_begin(r->reply, WT_OK, r->msg->id, 0);
    log_info("NODE_CTL %s %s from %s: %s", op, name, who,
             !code                ? "done"
             : code == WE_STORAGE ? "not saved (storage)"
                                  : why);
}

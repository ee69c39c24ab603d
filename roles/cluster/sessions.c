/*
 * sessions.c - forgetting sessions (nodes) that hold no work, and the per-address cap on
 * sessions.
 *
 * A session is "idle" when it is inactive (tasks.c marked it so after its silence), no
 * task is issued to it (inflight == 0) and no parallel job that has not ended runs on
 * it. nodes.forget_after_s after its last request an idle session is forgotten: its
 * record leaves the store in the turn's commit and its next request (if it ever comes
 * back) gets a SESSION error, so the client says HELLO again and carries on.
 *
 * A HELLO that would create a session from an address that already has
 * nodes.max_sessions_per_address of them first forgets that address's oldest idle
 * session (at any age); only when none of its oldest sessions is idle is the HELLO
 * refused (REFUSED). Each address keeps its sessions in a list, oldest first; a HELLO
 * looks at no more than ADMIT_LOOK of them and moves the busy ones it looked at to the
 * end, so a HELLO costs O(1) amortized however many sessions the address has.
 *
 * Node indices are stored in tasks (t->node), in parallel jobs (hosts[]) and in the
 * session-id hash, so a node cannot simply leave nodes[]. Forgetting marks the slot
 * "gone" (cluster_node_find and the lists skip it) in O(1); a compaction then removes
 * every gone slot in one pass, remapping t->node and hosts[] (a forgotten node becomes
 * UINT32_MAX: "no node", which is what a done task or an ended parallel job naming it
 * needs) and rebuilding the hashes and lists. It runs from the 1 s timer when the gone
 * slots are at least 1/8 of the table or 10 s after the last one: O(nodes + tasks in
 * memory), a few milliseconds per million tasks, never inside a request.
 *
 * Each session remembers the identity that opened it (n->owner, stored with the node
 * record as "owner"): a node key acts only for its own sessions (sessions_authorize,
 * issue 23), so a session id learnt elsewhere is no credential. Decision: the owner is
 * the key's name, not the key, so a key rotated under the same name (docs/security.md
 * "Rotation") keeps its sessions; a session without an owner (stored before this, or
 * opened plain) is claimed by the first identity that uses it.
 *
 * Decision: a done task does not keep its node's session alive (only issued tasks and
 * unfinished parallel jobs do). The stored task keeps the node's sid for history; the
 * in-memory link only recognised a resend of the winning result, which a forgotten
 * session cannot send any more (its sid is unknown).
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

#define NONE UINT32_MAX
#define ADMIT_LOOK 64          /* sessions a HELLO over the cap looks at */
#define COMPACT_EVERY_MS 10000 /* compact at least this often while slots are gone */
/*
 * Sessions one sweep (1 s) forgets at most: bounds the turn's work and its write
 * transaction (LMDB keeps the dirty pages of its largest transaction cached for reuse).
 */
#define SWEEP_MAX 10000

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void sessions_free(struct cluster *c)
{
    free(c->addrs);
    free(c->addr_hash);
    c->addrs = NULL;
    c->addr_hash = NULL;
    c->naddrs = c->capaddrs = c->addr_hash_cap = 0;
    c->ngone = 0; /* callers (load, compaction) have no gone slot left */
}

static int addr_rehash(struct cluster *c, uint32_t cap)
{
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return -1;
    for (uint32_t i = 0; i < c->naddrs; i++) {
        uint32_t p = str_hash(c->addrs[i].ip) & (cap - 1);
        while (h[p])
            p = (p + 1) & (cap - 1);
        h[p] = i + 1;
    }
    free(c->addr_hash);
    c->addr_hash = h;
    c->addr_hash_cap = cap;
    return 0;
}

/* The entry of ip (cut to 63 bytes), created if create; NONE if absent or out of memory. */
static uint32_t addr_get(struct cluster *c, const char *ip, bool create)
{
    char key[sizeof c->addrs[0].ip];
    snprintf(key, sizeof key, "%s", ip);
    if (c->addr_hash_cap) {
        uint32_t p = str_hash(key) & (c->addr_hash_cap - 1);
        for (; c->addr_hash[p]; p = (p + 1) & (c->addr_hash_cap - 1))
            if (!strcmp(c->addrs[c->addr_hash[p] - 1].ip, key))
                return c->addr_hash[p] - 1;
    }
    if (!create)
        return NONE;
    if (c->naddrs == c->capaddrs) {
        uint32_t cap = c->capaddrs ? c->capaddrs * 2 : 16;
        struct addr_ent *a = realloc(c->addrs, cap * sizeof *a);
        if (!a)
            return NONE;
        c->addrs = a;
        c->capaddrs = cap;
    }
    if ((c->naddrs + 1) * 2 > c->addr_hash_cap &&
        addr_rehash(c, c->addr_hash_cap ? c->addr_hash_cap * 2 : 64) < 0)
        return NONE;
    struct addr_ent *a = &c->addrs[c->naddrs];
    memcpy(a->ip, key, sizeof key);
    a->count = 0;
    a->head = a->tail = NONE;
    uint32_t p = str_hash(key) & (c->addr_hash_cap - 1);
    while (c->addr_hash[p])
        p = (p + 1) & (c->addr_hash_cap - 1);
    c->addr_hash[p] = c->naddrs + 1;
    return c->naddrs++;
}

static void list_unlink(struct cluster *c, uint32_t idx)
{
    struct node *n = &c->nodes[idx];
    struct addr_ent *a = &c->addrs[n->addr];
    if (n->aprev != NONE)
        c->nodes[n->aprev].anext = n->anext;
    else
        a->head = n->anext;
    if (n->anext != NONE)
        c->nodes[n->anext].aprev = n->aprev;
    else
        a->tail = n->aprev;
    n->aprev = n->anext = NONE;
}

static void list_append(struct cluster *c, uint32_t idx)
{
    struct node *n = &c->nodes[idx];
    struct addr_ent *a = &c->addrs[n->addr];
    n->aprev = a->tail;
    n->anext = NONE;
    if (a->tail != NONE)
        c->nodes[a->tail].anext = idx;
    else
        a->head = idx;
    a->tail = idx;
}

/* Counts node idx (its sid set) against the address in its ip. */
int sessions_attach(struct cluster *c, uint32_t idx)
{
    uint32_t a = addr_get(c, c->nodes[idx].ip, true);
    if (a == NONE)
        return -1;
    c->nodes[idx].addr = a;
    c->addrs[a].count++;
    list_append(c, idx);
    return 0;
}

/* Rebuilds the address table and lists from nodes[] (index order = creation order). */
int sessions_index(struct cluster *c)
{
    sessions_free(c);
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (!c->nodes[i].gone && sessions_attach(c, i) < 0)
            return -1;
    return 0;
}

/* A parallel job that has not ended runs (or will run) on node idx. */
static bool named_by_pjob(const struct cluster *c, uint32_t idx)
{
    for (uint32_t i = 0; c->sd && i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        if (PJ_TERMINAL(j->state))
            continue;
        for (uint32_t h = 0; h < j->nhosts; h++)
            if (j->hosts[h] == idx)
                return true;
    }
    return false;
}

static bool idle(const struct cluster *c, uint32_t idx)
{
    const struct node *n = &c->nodes[idx];
    return !n->gone && !n->active && n->inflight == 0 && !named_by_pjob(c, idx);
}

/* Forgets node idx now: out of the lookups and the lists, its record deleted this turn. */
static void forget(struct cluster *c, uint32_t idx, const char *why)
{
    struct node *n = &c->nodes[idx];
    list_unlink(c, idx);
    c->addrs[n->addr].count--;
    if (store_del(c->store, c->t_nodes, n->sid, strlen(n->sid)) < 0)
        c->turn_failed = true; /* the turn is undone and the state reloaded */
    log_info("node %s (%s) from %s forgotten: %s", n->name, n->sid, n->ip, why);
    n->gone = true;
    n->active = n->procs = n->dirty = false;
    c->ngone++;
}

int sessions_admit(struct cluster *c, const char *peer, char *why, size_t whylen)
{
    long cap = c->cfg.max_sessions_per_address;
    uint32_t a = addr_get(c, peer, false);
    if (cap <= 0 || a == NONE || c->addrs[a].count < (uint64_t)cap)
        return 0;
    for (uint32_t look = 0; look < ADMIT_LOOK && c->addrs[a].head != NONE; look++) {
        uint32_t idx = c->addrs[a].head;
        if (idle(c, idx)) {
            forget(c, idx, "the oldest idle session of an address at its session cap");
            return 0;
        }
        list_unlink(c, idx); /* busy: look at it again only after all the others */
        list_append(c, idx);
    }
    snprintf(why, whylen,
             "address %s already has %u sessions (nodes.max_sessions_per_address) and none "
             "of its oldest is idle: reuse a session id (send it in HELLO), stop idle "
             "clients, or raise the cap",
             c->addrs[a].ip, c->addrs[a].count);
    return -1;
}

/*
 * Removes the gone slots from nodes[]: every stored node index is remapped in one pass
 * (tasks of every job in memory, hosts of every parallel job), then the session-id hash,
 * the address lists and the array itself are rebuilt at their new, smaller size.
 */
static void compact(struct cluster *c)
{
    uint32_t *map = malloc(((size_t)c->nnodes + 1) * sizeof *map), m = 0;
    if (!map)
        return; /* try again at the next tick */
    for (uint32_t i = 0; i < c->nnodes; i++) {
        map[i] = c->nodes[i].gone ? NONE : m;
        if (!c->nodes[i].gone && m != i)
            c->nodes[m] = c->nodes[i];
        m += !c->nodes[i].gone;
    }
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        for (uint32_t k = 0; k < j->next_new; k++)
            if (j->tasks[k].node < c->nnodes)
                j->tasks[k].node = map[j->tasks[k].node];
    }
    for (uint32_t i = 0; c->sd && i < c->sd->njobs; i++) {
        struct pjob *j = c->sd->jobs[i];
        for (uint32_t h = 0; h < j->nhosts; h++)
            if (j->hosts[h] < c->nnodes)
                j->hosts[h] = map[j->hosts[h]];
    }
    valid_remap(c, map); /* copies and results of checked jobs */
    free(map);
    log_info("sessions: %u forgotten session(s) removed, %u left", c->nnodes - m, m);
    c->nnodes = m;
    c->ngone = 0;
    uint32_t cap = 64;
    while (cap < m)
        cap *= 2;
    if (cap < c->capnodes) {
        struct node *n = realloc(c->nodes, cap * sizeof *n);
        if (n) {
            c->nodes = n;
            c->capnodes = cap;
        }
    }
    if (cluster_node_rehash(c) < 0 || sessions_index(c) < 0)
        c->turn_failed = true; /* out of memory: the turn is undone, the state reloaded */
    malloc_trim(0);
}

void sessions_sweep(struct cluster *c)
{
    int64_t now = wall_now_ms();
    if (c->cfg.forget_after_s > 0) {
        int64_t limit = (int64_t)c->cfg.forget_after_s * 1000;
        for (uint32_t i = 0, n = 0; i < c->nnodes && n < SWEEP_MAX; i++)
            if (!c->nodes[i].gone && now - c->nodes[i].last_ms > limit && idle(c, i)) {
                forget(c, i, "idle for longer than nodes.forget_after_s");
                n++;
            }
    }
    if (c->ngone && !c->turn_failed &&
        ((uint64_t)c->ngone * 8 >= c->nnodes || now - c->compact_ms >= COMPACT_EVERY_MS)) {
        compact(c);
        c->compact_ms = now;
    }
}

int sessions_authorize(struct cluster *c, struct node *n, const char *req, char *why, size_t wl)
{
    bool claim;
    const struct curve_ident *id = curve_current();
    char who[CURVE_NAME_MAX + 16];
    curve_requester(who, sizeof who);
    if (curve_may_use_session(n->owner, &claim)) {
        if (claim && id) {
            snprintf(n->owner, sizeof n->owner, "%s", id->name);
            cluster_mark_node(c, n);
            log_info("session %s of node %s had no recorded owner: now bound to %s", n->sid,
                     n->name, who);
        }
        return 0;
    }
    snprintf(why, wl,
             "session %s was opened by another key; %s may act only for the sessions it "
             "opened (send HELLO without sid for a session of your own)",
             n->sid, who);
    log_info("denied %s for session %s (node %s, opened by '%s') from %s", req, n->sid, n->name,
             n->owner, who);
    return -1;
}

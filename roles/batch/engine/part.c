/*
 * part.c - the partition of the up nodes into classes, kept from one regrouping to
 * the next. A class is a group's key (base class: class, features, capacity; and the
 * set of live reservations holding the nodes) with its nodes in ascending index; the
 * groups are the non-empty classes in key order (group.c).
 *
 * A reservation created or released moves only its own nodes between classes, so
 * bringing the partition up to date costs the nodes of the reservations that changed
 * (and a pass over each class that lost or gained nodes), not a visit of every node.
 * Everything starts again from the base classes (one visit per node) when a node is
 * added, goes up or down or changes features, and when the classes emptied by
 * releases outnumber the others (their keys hold released reservations, which never
 * come back).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

int bs_part_base_cmp(const struct bnode *x, const struct bnode *y)
{
    int r;
    if ((r = cmp_i64(x->cls, y->cls)) || (r = cmp_i64(x->fset, y->fset)) ||
        (r = cmp_i64(x->cap.procs, y->cap.procs)) || (r = cmp_i64(x->cap.mem, y->cap.mem)) ||
        (r = cmp_i64(x->cap.disk, y->cap.disk)))
        return r;
    return cmp_i64(x->cap.swap, y->cap.swap);
}

/* ---- hash tables of ids (open addressing, at most half full) ---- */

/* Makes room in (*slot, *cap) for id n, rehashing ids 0..n-1 by hash(id). 0 or -1. */
static int table_room(int32_t **slot, int32_t *cap, int32_t n, const uint64_t *hash, size_t stride)
{
    if (2 * (n + 1) <= *cap)
        return 0;
    int32_t ncap = *cap ? 2 * *cap : 64;
    int32_t *v = malloc((size_t)ncap * sizeof *v);
    if (!v)
        return -1;
    memset(v, -1, (size_t)ncap * sizeof *v);
    for (int32_t k = 0; k < n; k++) {
        uint64_t h = *(const uint64_t *)((const char *)hash + (size_t)k * stride);
        uint32_t at = (uint32_t)h & (uint32_t)(ncap - 1);
        while (v[at] >= 0)
            at = (at + 1) & (uint32_t)(ncap - 1);
        v[at] = k;
    }
    free(*slot);
    *slot = v;
    *cap = ncap;
    return 0;
}

static void table_put(int32_t *slot, int32_t cap, int32_t id, uint64_t h)
{
    uint32_t at = (uint32_t)h & (uint32_t)(cap - 1);
    while (slot[at] >= 0)
        at = (at + 1) & (uint32_t)(cap - 1);
    slot[at] = id;
}

/* ---- base classes ---- */

/* Computes e->nbase (every up node's base class, -1 when down) and e->base_rep. */
static int bases_make(struct batch_engine *e)
{
    if (VEC_RESERVE(e->nbase, e->capnbase, e->nnodes + 1) < 0)
        return -1;
    uint64_t *hash = NULL;
    int32_t *slot = NULL, tcap = 0, cap = 0, rc = -1;
    e->nbases = 0;
    for (int32_t i = 0; i < e->nnodes; i++) {
        const struct bnode *x = &e->nodes[i];
        if (!x->up) {
            e->nbase[i] = -1;
            continue;
        }
        uint64_t h = 0x9e3779b97f4a7c15ULL;
        h = mix(mix(mix(h, (uint64_t)x->cls), (uint64_t)x->fset), (uint64_t)x->cap.procs);
        h = mix(mix(mix(h, (uint64_t)x->cap.mem), (uint64_t)x->cap.disk), (uint64_t)x->cap.swap);
        h ^= h >> 29;
        int32_t b = -1;
        for (uint32_t at = tcap ? (uint32_t)h & (uint32_t)(tcap - 1) : 0; tcap && slot[at] >= 0;
             at = (at + 1) & (uint32_t)(tcap - 1))
            if (hash[slot[at]] == h && bs_part_base_cmp(&e->nodes[e->base_rep[slot[at]]], x) == 0) {
                b = slot[at];
                break;
            }
        if (b < 0) {
            b = e->nbases;
            if (VEC_RESERVE(e->base_rep, e->capbase_rep, b + 1) < 0 ||
                VEC_RESERVE(hash, cap, b + 1) < 0 ||
                table_room(&slot, &tcap, b, hash, sizeof *hash) < 0)
                goto out;
            e->base_rep[b] = i;
            hash[b] = h;
            table_put(slot, tcap, b, h);
            e->nbases++;
        }
        e->nbase[i] = b;
    }
    e->nbase_ok = true;
    rc = 0;
out:
    free(hash);
    free(slot);
    return rc;
}

/* ---- classes ---- */

static uint64_t key_hash(int32_t base, const int32_t *resv, int32_t n)
{
    uint64_t h = mix(mix(0x84222325cbf29ce4ULL, (uint64_t)base), (uint64_t)n);
    for (int32_t k = 0; k < n; k++)
        h = mix(h, (uint64_t)resv[k]);
    return h ^ (h >> 29);
}

static void classes_free(struct bpart *p)
{
    for (int32_t k = 0; k < p->nc; k++) {
        free(p->c[k].resv);
        free(p->c[k].nodes);
    }
    p->nc = 0;
    if (p->slot)
        memset(p->slot, -1, (size_t)p->cap * sizeof *p->slot);
}

void bs_part_free(struct bpart *p)
{
    classes_free(p);
    free(p->c);
    free(p->slot);
    free(p->ncls);
    free(p->acc);
    free(p->fresh);
    free(p->touch);
    free(p->in);
    free(p->buf);
    free(p->seen);
    memset(p, 0, sizeof *p);
}

/* The class of key (base, resv[0, n)), made (empty) when new; -1 when out of memory. */
static int32_t class_with(struct bpart *p, int32_t base, const int32_t *resv, int32_t n)
{
    uint64_t h = key_hash(base, resv, n);
    for (uint32_t at = p->cap ? (uint32_t)h & (uint32_t)(p->cap - 1) : 0;
         p->cap && p->slot[at] >= 0; at = (at + 1) & (uint32_t)(p->cap - 1)) {
        const struct bclass *c = &p->c[p->slot[at]];
        if (c->hash == h && c->base == base && c->nresv == n &&
            memcmp(c->resv, resv, (size_t)n * sizeof *resv) == 0)
            return p->slot[at];
    }
    if (VEC_RESERVE(p->c, p->capc, p->nc + 1) < 0 ||
        table_room(&p->slot, &p->cap, p->nc, &p->c[0].hash, sizeof *p->c) < 0)
        return -1;
    struct bclass *c = &p->c[p->nc];
    memset(c, 0, sizeof *c);
    if (!(c->resv = malloc(((size_t)n + 1) * sizeof *c->resv)))
        return -1;
    memcpy(c->resv, resv, (size_t)n * sizeof *resv);
    c->base = base;
    c->nresv = n;
    c->hash = h;
    c->group = -1;
    table_put(p->slot, p->cap, p->nc, h);
    return p->nc++;
}

static int touch(struct bpart *p, int32_t k)
{
    if (p->c[k].touched)
        return 0;
    if (VEC_RESERVE(p->touch, p->captouch, p->ntouch + 1) < 0)
        return -1;
    p->c[k].touched = true;
    p->touch[p->ntouch++] = k;
    return 0;
}

/* Memo of the last move (consecutive nodes of a reservation mostly share a class). */
struct move_memo {
    int32_t from, r, to;
    bool add;
};

/* Moves node i to the class with reservation r added to (or removed from) its key. */
static int move(struct bpart *p, int32_t i, int32_t r, bool add, struct move_memo *m)
{
    int32_t from = p->ncls[i], to;
    if (from < 0) /* down: in no class */
        return 0;
    if (m->from == from && m->r == r && m->add == add) {
        to = m->to;
    } else {
        const struct bclass *c = &p->c[from];
        int32_t n = c->nresv, *key = malloc(((size_t)n + 2) * sizeof *key), nk = 0;
        if (!key)
            return -1;
        int32_t x = 0;
        for (; x < n && c->resv[x] < r; x++)
            key[nk++] = c->resv[x];
        if (add)
            key[nk++] = r;
        else if (x < n && c->resv[x] == r)
            x++;
        for (; x < n; x++)
            key[nk++] = c->resv[x];
        to = class_with(p, c->base, key, nk); /* may move p->c: c is not used after */
        free(key);
        if (to < 0)
            return -1;
        *m = (struct move_memo){from, r, to, add};
    }
    if (touch(p, from) < 0 || touch(p, to) < 0 || VEC_RESERVE(p->in, p->capin, p->nin + 1) < 0)
        return -1;
    p->ncls[i] = to;
    p->in[p->nin++] = i;
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    return cmp_i64(*(const int32_t *)a, *(const int32_t *)b);
}

/* Rewrites the node lists of the touched classes: the nodes that stayed, merged with
 * the ones that arrived (bucketed by class, each bucket ascending). 0 or -1. */
static int settle(struct bpart *p, int32_t nnodes)
{
    if (VEC_RESERVE(p->buf, p->capbuf, p->nin + 1) < 0)
        return -1;
    if (p->capseen < nnodes) { /* new entries zeroed: never equal to a serial */
        int32_t old = p->capseen;
        if (VEC_RESERVE(p->seen, p->capseen, nnodes) < 0)
            return -1;
        memset(p->seen + old, 0, (size_t)(p->capseen - old) * sizeof *p->seen);
    }
    if (p->serial > INT32_MAX - 2) {
        memset(p->seen, 0, (size_t)p->capseen * sizeof *p->seen);
        p->serial = 0;
    }
    int32_t s1 = ++p->serial, s2 = ++p->serial;
    for (int32_t t = 0; t < p->ntouch; t++)
        p->c[p->touch[t]].nin = 0;
    for (int32_t x = 0; x < p->nin; x++) { /* a node moved twice counts where it ended */
        int32_t i = p->in[x];
        if (p->seen[i] != s1) {
            p->seen[i] = s1;
            p->c[p->ncls[i]].nin++;
        }
    }
    for (int32_t t = 0, off = 0; t < p->ntouch; t++) {
        struct bclass *c = &p->c[p->touch[t]];
        c->inoff = off;
        off += c->nin;
        c->nin = 0;
    }
    for (int32_t x = 0; x < p->nin; x++) {
        int32_t i = p->in[x];
        if (p->seen[i] != s2) {
            p->seen[i] = s2;
            struct bclass *c = &p->c[p->ncls[i]];
            p->buf[c->inoff + c->nin++] = i;
        }
    }
    for (int32_t t = 0; t < p->ntouch; t++) {
        int32_t k = p->touch[t];
        struct bclass *c = &p->c[k];
        int32_t kept = 0, nin = c->nin, *in = p->buf + c->inoff;
        for (int32_t x = 1; x < nin; x++)
            if (in[x - 1] > in[x]) { /* reservations by name, or several */
                qsort(in, (size_t)nin, sizeof *in, cmp_i32);
                break;
            }
        for (int32_t x = 0; x < c->nnodes; x++)
            if (p->ncls[c->nodes[x]] == k)
                c->nodes[kept++] = c->nodes[x];
        if (VEC_RESERVE(c->nodes, c->capnodes, kept + nin + 1) < 0)
            return -1;
        for (int32_t a = kept - 1, b = nin - 1, w = kept + nin - 1; b >= 0; w--)
            c->nodes[w] = a >= 0 && c->nodes[a] > in[b] ? c->nodes[a--] : in[b--];
        c->nnodes = kept + nin;
        c->touched = false;
        c->changed = true;
    }
    p->ntouch = p->nin = 0;
    return 0;
}

/* Starts again from the base classes: every up node in the class of its base class
 * and no reservation; every live reservation is then counted as new. 0 or -1. */
static int reset(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    classes_free(p);
    p->nacc = p->nfresh = p->ntouch = p->nin = 0;
    if (bases_make(e) < 0 || VEC_RESERVE(p->ncls, p->capncls, e->nnodes + 1) < 0)
        return -1;
    int32_t none = 0;
    for (int32_t b = 0; b < e->nbases; b++)
        if (class_with(p, b, &none, 0) != b)
            return -1;
    for (int32_t i = 0; i < e->nnodes; i++) {
        int32_t b = p->ncls[i] = e->nbase[i];
        if (b < 0) {
            e->npos[i].group = -1;
            continue;
        }
        struct bclass *c = &p->c[b];
        if (VEC_RESERVE(c->nodes, c->capnodes, c->nnodes + 1) < 0)
            return -1;
        c->nodes[c->nnodes++] = i;
    }
    for (int32_t r = 0; r < e->nresv; r++)
        if (e->resv[r].live) {
            if (VEC_RESERVE(p->fresh, p->capfresh, p->nfresh + 1) < 0)
                return -1;
            p->fresh[p->nfresh++] = r;
        }
    p->ok = true;
    return 0;
}

void bs_part_note_resv(struct batch_engine *e, int32_t r)
{
    struct bpart *p = &e->part;
    if (!p->ok)
        return;
    if (VEC_RESERVE(p->fresh, p->capfresh, p->nfresh + 1) < 0)
        p->ok = false; /* started again at the next regrouping */
    else
        p->fresh[p->nfresh++] = r;
}

int bs_part_update(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    int rc = -1;
    if ((!p->ok || !e->nbase_ok || p->nc > 2 * p->nlive + 64) && reset(e) < 0)
        goto out;
    struct move_memo m = {-1, -1, -1, false};
    int32_t keep = 0;
    for (int32_t a = 0; a < p->nacc; a++) { /* released or ended since */
        int32_t r = p->acc[a];
        const struct bresv *v = &e->resv[r];
        if (v->live) {
            p->acc[keep++] = r;
            continue;
        }
        for (int32_t x = 0; x < v->nnodes; x++)
            if (move(p, v->nodes[x], r, false, &m) < 0)
                goto out;
    }
    p->nacc = keep;
    for (int32_t f = 0; f < p->nfresh; f++) { /* created since (and still live) */
        int32_t r = p->fresh[f];
        const struct bresv *v = &e->resv[r];
        if (!v->live)
            continue;
        for (int32_t x = 0; x < v->nnodes; x++)
            if (move(p, v->nodes[x], r, true, &m) < 0)
                goto out;
        if (VEC_RESERVE(p->acc, p->capacc, p->nacc + 1) < 0)
            goto out;
        p->acc[p->nacc++] = r;
    }
    p->nfresh = 0;
    if (settle(p, e->nnodes) < 0)
        goto out;
    p->nlive = 0;
    for (int32_t k = 0; k < p->nc; k++)
        p->nlive += p->c[k].nnodes > 0;
    rc = 0;
out:
    if (rc < 0) {
        for (int32_t t = 0; t < p->ntouch; t++)
            p->c[p->touch[t]].touched = false;
        p->ok = false;
        errno = ENOMEM;
    }
    return rc;
}

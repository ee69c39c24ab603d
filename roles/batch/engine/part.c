/*
 * part.c - the partition of the up nodes into classes, kept from one regrouping to
 * the next. A class is a group's key (base class: class, features, capacity; and the
 * set of live reservations holding the nodes) with its nodes in ascending index; the
 * groups are the non-empty classes in key order (group.c).
 *
 * A class's nodes are the set bits of a bitmap over node indexes (internal.h), kept
 * over a window of words. A reservation created or released moves only its own
 * nodes between classes (a bit cleared in one bitmap, set in another), so bringing
 * the partition up to date costs the nodes of the reservations that changed, not a
 * visit of every node. A running job whose nodes changed class has its bitmap words
 * made again. Everything starts again from the base classes (one visit per node, and
 * every running job's words and busy bits made again) when a node is added, goes up
 * or down or changes features or capacity. The classes emptied by releases are freed
 * for reuse when they outnumber the others by recycle_slack (their keys hold released
 * reservations, which never come back): class ids in use never change but at a start
 * from the base classes.
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
        free(p->c[k].mem);
    }
    p->nc = p->nfreec = 0;
    if (p->slot)
        memset(p->slot, -1, (size_t)p->cap * sizeof *p->slot);
}

/* Makes room in the hash table for one more class (rehashing the classes in use). */
static int class_table_room(struct bpart *p)
{
    if (2 * (p->nc + 1) <= p->cap)
        return 0;
    int32_t ncap = p->cap ? 2 * p->cap : 64, *v = malloc((size_t)ncap * sizeof *v);
    if (!v)
        return -1;
    memset(v, -1, (size_t)ncap * sizeof *v);
    for (int32_t k = 0; k < p->nc; k++)
        if (p->c[k].base >= 0)
            table_put(v, ncap, k, p->c[k].hash);
    free(p->slot);
    p->slot = v;
    p->cap = ncap;
    return 0;
}

/* Frees the empty classes that are not base classes (their keys hold reservations)
 * for reuse when they outnumber the classes with nodes: a key with a released
 * reservation never comes back, so they would pile up. Class ids in use do not
 * change (the running jobs' bitmap words name them). 0 or -1. */
static int classes_recycle(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    int32_t empty = 0;
    for (int32_t k = e->nbases; k < p->nc; k++)
        empty += p->c[k].base >= 0 && p->c[k].nnodes == 0;
    if (empty <= p->nlive + p->recycle_slack)
        return 0;
    if (VEC_RESERVE(p->freec, p->capfreec, p->nfreec + empty) < 0)
        return -1;
    for (int32_t k = e->nbases; k < p->nc; k++) {
        struct bclass *c = &p->c[k];
        if (c->base < 0 || c->nnodes > 0)
            continue;
        free(c->resv);
        free(c->mem);
        memset(c, 0, sizeof *c);
        c->base = c->group = -1;
        p->freec[p->nfreec++] = k;
    }
    memset(p->slot, -1, (size_t)p->cap * sizeof *p->slot);
    for (int32_t k = 0; k < p->nc; k++)
        if (p->c[k].base >= 0)
            table_put(p->slot, p->cap, k, p->c[k].hash);
    return 0;
}

void bs_part_free(struct bpart *p)
{
    classes_free(p);
    free(p->c);
    free(p->slot);
    free(p->ncls);
    free(p->acc);
    free(p->fresh);
    free(p->rerun);
    free(p->freec);
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
    int32_t *key = malloc(((size_t)n + 1) * sizeof *key), k;
    if (!key)
        return -1;
    if (p->nfreec > 0) {
        k = p->freec[--p->nfreec];
    } else if (VEC_RESERVE(p->c, p->capc, p->nc + 1) < 0 || class_table_room(p) < 0) {
        free(key);
        return -1;
    } else {
        k = p->nc++;
    }
    struct bclass *c = &p->c[k];
    memset(c, 0, sizeof *c);
    if (n > 0) /* resv may be NULL when empty */
        memcpy(key, resv, (size_t)n * sizeof *resv);
    c->resv = key;
    c->base = base;
    c->nresv = n;
    c->hash = h;
    c->group = -1;
    table_put(p->slot, p->cap, k, h);
    return k;
}

/* Makes class c's window hold word w (of `words` in all), growing it by at least its
 * size towards w (so that a class filled in index order grows in O(1) amortized).
 * 0 or -1. */
static int class_cover(struct bclass *c, int32_t w, int32_t words)
{
    if (c->mem && w >= c->wlo && w < c->wlo + c->nw)
        return 0;
    int32_t lo = c->wlo, hi = c->wlo + c->nw, grow = c->nw > 4 ? c->nw : 4;
    if (!c->mem)
        lo = hi = w;
    if (w < lo)
        lo = w - grow < 0 ? 0 : w - grow;
    if (w >= hi)
        hi = w + 1 + grow > words ? words : w + 1 + grow;
    uint64_t *m = calloc((size_t)(hi - lo), sizeof *m);
    if (!m)
        return -1;
    if (c->mem)
        memcpy(m + (c->wlo - lo), c->mem, (size_t)c->nw * sizeof *m);
    free(c->mem);
    c->mem = m;
    c->wlo = lo;
    c->nw = hi - lo;
    return 0;
}

/* Puts node i (down: in no class) in class k; 0 or -1. */
static int class_add(struct batch_engine *e, int32_t k, int32_t i)
{
    struct bclass *c = &e->part.c[k];
    if (class_cover(c, i / 64, (e->nnodes + 63) / 64) < 0)
        return -1;
    c->mem[i / 64 - c->wlo] |= 1ULL << (i % 64);
    c->nnodes++;
    e->part.ncls[i] = k;
    return 0;
}

/* Lists running job slot s for new bitmap words at the end of the update. 0 or -1. */
static int rerun_add(struct bpart *p, struct bjob *j, int32_t s)
{
    if (j->rerun || p->rerun_all)
        return 0;
    if (VEC_RESERVE(p->rerun, p->caprerun, p->nrerun + 1) < 0)
        return -1;
    j->rerun = true;
    p->rerun[p->nrerun++] = s;
    return 0;
}

void bs_part_note_job(struct batch_engine *e, int32_t s)
{
    if (rerun_add(&e->part, &e->jobs[s], s) < 0)
        e->part.ok = false; /* everything made again at the next update */
}

int32_t bs_part_node_group(const struct batch_engine *e, int32_t i)
{
    const struct bpart *p = &e->part;
    int32_t k = p->ok && i < p->capncls ? p->ncls[i] : -1;
    return k >= 0 ? p->c[k].group : -1;
}

/* Memo of the last move (consecutive nodes of a reservation mostly share a class). */
struct move_memo {
    int32_t from, r, to;
    bool add;
};

/* The class of class `from`'s key with reservation r added (or removed); -1 (ENOMEM). */
static int32_t class_moved(struct bpart *p, int32_t from, int32_t r, bool add, struct move_memo *m)
{
    if (m->from == from && m->r == r && m->add == add)
        return m->to;
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
    int32_t to = class_with(p, c->base, key, nk); /* may move p->c: c is not used after */
    free(key);
    if (to >= 0)
        *m = (struct move_memo){from, r, to, add};
    return to;
}

/* Moves the nodes of word w in mask (a reservation's) to the classes with reservation
 * r added to (or removed from) their keys, the nodes of one class together; the jobs
 * running on them get new bitmap words. 0 or -1. */
static int move_word(struct batch_engine *e, int32_t w, uint64_t mask, int32_t r, bool add,
                     struct move_memo *m)
{
    struct bpart *p = &e->part;
    while (mask) {
        int32_t from = p->ncls[w * 64 + __builtin_ctzll(mask)];
        if (from < 0) { /* down: in no class */
            mask &= mask - 1;
            continue;
        }
        uint64_t bits = mask & p->c[from].mem[w - p->c[from].wlo];
        mask &= ~bits;
        int32_t to = class_moved(p, from, r, add, m);
        if (to < 0)
            return -1;
        if (to == from)
            continue;
        struct bclass *c = &p->c[from], *d = &p->c[to];
        if (class_cover(d, w, (e->nnodes + 63) / 64) < 0)
            return -1;
        int32_t cnt = bs_pop64(bits);
        c->mem[w - c->wlo] &= ~bits;
        c->nnodes -= cnt;
        d->mem[w - d->wlo] |= bits;
        d->nnodes += cnt;
        for (uint64_t b = bits, run; b; b &= ~run) { /* run by run (a tight fill) */
            int32_t lo, *nc = p->ncls + (size_t)w * 64;
            run = bs_run64(b, &lo);
            bs_fill32(nc + lo, bs_pop64(run), to);
        }
        for (uint64_t b = bits & e->busy[w], last = (uint64_t)-1; b; b &= b - 1) {
            int32_t s = e->node_job[w * 64 + __builtin_ctzll(b)]; /* valid for a busy node:
                                                                   * bs_engine_fill_all ran */
            if ((uint64_t)s == last)                              /* the job of the node before */
                continue;
            last = (uint64_t)s;
            if (s >= 0 && s < e->njobs && e->jobs[s].live &&
                e->jobs[s].state == BATCH_JOB_RUNNING && rerun_add(p, &e->jobs[s], s) < 0)
                return -1;
        }
    }
    return 0;
}

/* Moves the nodes of reservation slot r (its bitmap words, else its node list in any
 * order: runs of nodes in one bitmap word moved together) as move_word does. 0 or -1. */
static int move_resv(struct batch_engine *e, int32_t r, bool add, struct move_memo *m)
{
    const struct bresv *v = &e->resv[r];
    if (v->words) {
        for (int32_t x = 0; x < v->nwords; x++)
            if (move_word(e, v->words[x].word, v->words[x].mask, r, add, m) < 0)
                return -1;
        return 0;
    }
    int32_t w = -1;
    uint64_t mask = 0;
    for (int32_t x = 0; x < v->nnodes; x++) {
        int32_t i = v->nodes[x];
        if (i / 64 != w) {
            if (mask && move_word(e, w, mask, r, add, m) < 0)
                return -1;
            w = i / 64;
            mask = 0;
        }
        mask |= 1ULL << (i % 64);
    }
    return mask ? move_word(e, w, mask, r, add, m) : 0;
}

/* Frees the nodes of released reservation v: once they are out of the classes (or
 * were never counted in them) nothing reads them, and a site keeps every slot it
 * ever made (bresv), so they would add up. */
static void resv_drop_nodes(struct bresv *v)
{
    free(v->nodes);
    free(v->words);
    v->nodes = NULL;
    v->words = NULL;
    v->nnodes = v->nwords = 0;
}

/* Starts again from the base classes: every up node in the class of its base class
 * and no reservation; every live reservation is then counted as new, and every
 * running job's bitmap words and busy bits are made again (the released ones' nodes
 * freed: a pass over every slot, as rare as a node changing). 0 or -1. */
static int reset(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    for (int32_t r = 0; r < e->nresv; r++)
        if (!e->resv[r].live && e->resv[r].nodes)
            resv_drop_nodes(&e->resv[r]);
    classes_free(p);
    p->nacc = p->nfresh = 0;
    if (bases_make(e) < 0 || VEC_RESERVE(p->ncls, p->capncls, e->nnodes + 1) < 0)
        return -1;
    int32_t none = 0;
    for (int32_t b = 0; b < e->nbases; b++)
        if (class_with(p, b, &none, 0) != b)
            return -1;
    for (int32_t i = 0; i < e->nnodes; i++) {
        p->ncls[i] = -1;
        if (e->nbase[i] >= 0 && class_add(e, e->nbase[i], i) < 0)
            return -1;
    }
    if (VEC_RESERVE(p->fresh, p->capfresh, e->nrlive + 1) < 0)
        return -1;
    if (e->nrlive > 0) /* rlive is NULL before the first reservation */
        memcpy(p->fresh, e->rlive, (size_t)e->nrlive * sizeof *p->fresh);
    p->nfresh = e->nrlive;
    p->rerun_all = true;
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

/* Class c's membership word w (0 outside its window, or when empty). */
static uint64_t class_word(const struct bclass *c, int32_t w)
{
    return c->mem && w >= c->wlo && w < c->wlo + c->nw ? c->mem[w - c->wlo] : 0;
}

/* Splits run u of a job by the classes its nodes are in now: the nodes still in its
 * class, then the others a class at a time; writes the pieces to out (when not NULL)
 * and returns how many. */
static int32_t run_split(const struct bpart *p, const struct bjob_run *u, struct bjob_run *out)
{
    int32_t n = 0, w = u->word;
    uint64_t in = u->mask & class_word(&p->c[u->part], w), rest = u->mask & ~in;
    if (in && out)
        out[n] = (struct bjob_run){u->part, w, in};
    n += in != 0;
    while (rest) {
        int32_t k = p->ncls[w * 64 + __builtin_ctzll(rest)];
        uint64_t bits = k >= 0 ? rest & class_word(&p->c[k], w) : 0;
        if (!bits) { /* in no class (cannot happen: moves keep nodes up) */
            rest &= rest - 1;
            continue;
        }
        if (out)
            out[n] = (struct bjob_run){k, w, bits};
        n++;
        rest &= ~bits;
    }
    return n;
}

/* Makes running job j's bitmap words follow its nodes that changed class since they
 * were made: its words split by class, a pass over its words and moved nodes (where
 * bs_engine_job_runs visits all its nodes). A job without words (adopted) has them
 * made. 0 or -1. */
static int runs_follow(struct batch_engine *e, struct bjob *j)
{
    if (j->nruns == 0)
        return bs_engine_job_runs(e, j);
    int32_t n = 0;
    bool moved = false;
    for (int32_t i = 0; i < j->nruns; i++) {
        const struct bjob_run *u = &j->runs[i];
        moved = moved || (u->mask & ~class_word(&e->part.c[u->part], u->word));
        n += run_split(&e->part, u, NULL);
    }
    if (!moved) /* a node moved twice, back where it was */
        return 0;
    struct bjob_run *v = malloc(((size_t)n + 1) * sizeof *v);
    if (!v)
        return -1;
    n = 0;
    for (int32_t i = 0; i < j->nruns; i++)
        n += run_split(&e->part, &j->runs[i], v + n);
    free(j->runs);
    j->runs = v;
    j->nruns = n;
    return 0;
}

/* Makes the bitmap words of the listed running jobs (all of them after a reset, with
 * the busy bits from scratch). 0 or -1. */
static int reruns(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    if (p->rerun_all) {
        if (e->busy) /* none before the first node */
            memset(e->busy, 0, (size_t)e->capbusy * sizeof *e->busy);
        for (int32_t i = 0; i < e->nrunning; i++)
            if (bs_engine_job_runs(e, &e->jobs[e->running[i]]) < 0)
                return -1;
    } else {
        for (int32_t x = 0; x < p->nrerun; x++) {
            struct bjob *j = &e->jobs[p->rerun[x]];
            if (j->live && j->state == BATCH_JOB_RUNNING && runs_follow(e, j) < 0)
                return -1;
        }
    }
    for (int32_t x = 0; x < p->nrerun; x++)
        e->jobs[p->rerun[x]].rerun = false;
    p->nrerun = 0;
    p->rerun_all = false;
    return 0;
}

int bs_part_update(struct batch_engine *e)
{
    struct bpart *p = &e->part;
    int rc = -1;
    if ((!p->ok || !e->nbase_ok) && reset(e) < 0)
        goto out;
    struct move_memo m = {-1, -1, -1, false};
    int32_t keep = 0;
    for (int32_t a = 0; a < p->nacc; a++) { /* released or ended since */
        int32_t r = p->acc[a];
        struct bresv *v = &e->resv[r];
        if (v->live) {
            p->acc[keep++] = r;
            continue;
        }
        if (move_resv(e, r, false, &m) < 0)
            goto out;
        resv_drop_nodes(v);
    }
    p->nacc = keep;
    for (int32_t f = 0; f < p->nfresh; f++) { /* created since (and still live) */
        int32_t r = p->fresh[f];
        struct bresv *v = &e->resv[r];
        if (!v->live) {
            resv_drop_nodes(v); /* released before it was counted */
            continue;
        }
        if (move_resv(e, r, true, &m) < 0)
            goto out;
        if (VEC_RESERVE(p->acc, p->capacc, p->nacc + 1) < 0)
            goto out;
        p->acc[p->nacc++] = r;
    }
    p->nfresh = 0;
    p->nlive = 0;
    for (int32_t k = 0; k < p->nc; k++) {
        struct bclass *c = &p->c[k];
        p->nlive += c->nnodes > 0;
        if (c->nnodes == 0 && c->mem) {
            free(c->mem);
            c->mem = NULL;
            c->nw = 0;
        }
    }
    if (reruns(e) < 0 || classes_recycle(e) < 0)
        goto out;
    rc = 0;
out:
    if (rc < 0) {
        p->ok = false;
        errno = ENOMEM;
    }
    return rc;
}

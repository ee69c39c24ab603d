/*
 * resv.c - administrative reservations (seed 003 section 3.1, MISSION B2/B5/B6):
 * setres (batch_resv_create), showres (batch_resv_get / batch_resv_on_node),
 * releaseres (batch_resv_release).
 *
 * A reservation holds concrete nodes from its start to its end: named ones, or
 * enough free nodes for `tasks` tasks of a given shape. A node is in at most one
 * reservation at any moment: Maui lets reservations overlap (a job then has to
 * satisfy every ACL), which the seed points out lets two reservations made for two
 * different jobs deadlock each other; refusing any overlap rules that out (B5).
 * Nodes still running a job past the start are not taken. Job reservations of
 * pending jobs are not an obstacle: they are planned again around it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "roles/batch/engine/internal.h"

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int32_t resv_by_name(const struct batch_engine *e, const char *name)
{
    return bs_resv_by_name(e, name);
}

/* Why node n cannot be held over [s, t): NULL if it can; the text goes in buf. */
static const char *node_busy(struct batch_engine *e, int32_t n, int64_t s, int64_t t, char *buf,
                             size_t len)
{
    const struct bnode *nd = &e->nodes[n];
    if (!nd->up) {
        snprintf(buf, len, "node %s is down", nd->name);
        return buf;
    }
    int32_t js = bs_engine_node_job(e, n);
    if (js >= 0 && e->jobs[js].end_est > s) {
        snprintf(buf, len, "node %s runs job %" PRIu64 " until %" PRId64, nd->name, e->jobs[js].id,
                 e->jobs[js].end_est);
        return buf;
    }
    for (int32_t x = 0; x < e->nrlive; x++) {
        const struct bresv *v = &e->resv[e->rlive[x]];
        if (v->start >= t || v->end <= s)
            continue;
        for (int32_t i = 0; i < v->nnodes; i++)
            if (v->nodes[i] == n) {
                if (v->njobs == 1)
                    snprintf(buf, len, "node %s is reserved by %s (bound to job %" PRIu64 ")",
                             nd->name, v->name, v->jobs[0]);
                else
                    snprintf(buf, len, "node %s is reserved by %s", nd->name, v->name);
                return buf;
            }
    }
    return NULL;
}

/* Named nodes: all must exist, be distinct and be free over [s, t). */
static int pick_named(struct batch_engine *e, const struct batch_resv_req *q, int64_t s, int64_t t,
                      int32_t *out, char *why, size_t len)
{
    char buf[256];
    for (size_t i = 0; i < q->nnodes; i++) {
        int32_t n = q->nodes[i] ? batch_node_find(e, q->nodes[i]) : -1;
        if (n < 0) {
            errno = EINVAL;
            return fail(why, len, "no node named '%s'", q->nodes[i] ? q->nodes[i] : "(null)");
        }
        for (size_t k = 0; k < i; k++)
            if (out[k] == n) {
                errno = EINVAL;
                return fail(why, len, "node %s is listed twice", q->nodes[i]);
            }
        if (!q->restore && node_busy(e, n, s, t, buf, sizeof buf)) {
            errno = EBUSY;
            return fail(why, len, "%s", buf);
        }
        out[i] = n;
    }
    return (int)q->nnodes;
}

/* Sets in held[] the nodes of reservation slot r when it is live and overlaps [s, t). */
static void resv_held(const struct batch_engine *e, int32_t r, int64_t s, int64_t t, uint64_t *held)
{
    const struct bresv *v = &e->resv[r];
    if (!v->live || v->start >= t || v->end <= s)
        return;
    for (int32_t i = 0; i < v->nnodes; i++)
        held[v->nodes[i] / 64] |= 1ULL << (v->nodes[i] % 64);
}

/* Sets in held[] (bit per node) the nodes node_busy would refuse over [s, t) for a
 * running job or a reservation: the running jobs' bitmap words (their node lists
 * when the words do not cover them all: a node that came up since the last
 * regrouping) and the overlapping reservations' nodes, instead of a search of both
 * per node. */
static void nodes_held(struct batch_engine *e, int64_t s, int64_t t, uint64_t *held)
{
    for (int32_t i = 0; i < e->nrunning; i++) {
        int32_t slot = e->running[i];
        struct bjob *j = &e->jobs[slot];
        if (j->end_est <= s)
            continue;
        int32_t cover = 0;
        for (int32_t k = 0; k < j->nruns; k++)
            cover += bs_pop64(j->runs[k].mask);
        if (cover == j->nnodes) {
            for (int32_t k = 0; k < j->nruns; k++)
                held[j->runs[k].word] |= j->runs[k].mask;
            continue;
        }
        bs_engine_fill_nodes(e, slot);
        for (int32_t k = 0; k < j->nnodes; k++) /* the job bs_engine_node_job names */
            if (e->node_job[j->nodes[k]] == slot)
                held[j->nodes[k] / 64] |= 1ULL << (j->nodes[k] % 64);
    }
    const struct bpart *p = &e->part;
    if (!p->ok || !e->nbase_ok) { /* the classes may not hold every up node: by nodes */
        for (int32_t x = 0; x < e->nrlive; x++)
            resv_held(e, e->rlive[x], s, t, held);
        return;
    }
    /* The up nodes of the reservations counted in the classes are those of the classes
     * whose keys hold them (a down node is never chosen: it need not be marked); the
     * ones made since by their nodes. */
    for (int32_t k = 0; k < p->nc; k++) {
        const struct bclass *c = &p->c[k];
        bool hit = false;
        for (int32_t x = 0; x < c->nresv && !hit && c->nnodes > 0; x++) {
            const struct bresv *v = &e->resv[c->resv[x]];
            hit = v->live && v->start < t && v->end > s;
        }
        for (int32_t w = 0; hit && w < c->nw; w++)
            held[c->wlo + w] |= c->mem[w];
    }
    for (int32_t f = 0; f < p->nfresh; f++)
        resv_held(e, p->fresh[f], s, t, held);
}

static int not_enough(int64_t tasks, const struct batch_resv_req *q, int64_t s, int64_t t,
                      char *why, size_t len)
{
    errno = ENOSPC;
    return fail(why, len,
                "only %" PRId64 " of %d tasks fit on nodes free from %" PRId64 " to %" PRId64,
                tasks, q->tasks, s, t);
}

/* pick_tasks without a per-machine limit while the base classes are known (a node's
 * class, features, capacity and being up are its base class's): the tasks a node
 * holds are computed once per base class, and a node visited is one read of its base
 * class. Returns the node count, or -1. */
static int pick_by_base(struct batch_engine *e, const struct batch_resv_req *q, int32_t cls,
                        const uint64_t *held, int64_t s, int64_t t, int32_t *out, char *why,
                        size_t len)
{
    if (VEC_RESERVE(e->scr_basek, e->capbasek, e->nbases + 1) < 0 ||
        VEC_RESERVE(e->scr_words, e->capscr_words, (e->nnodes + 63) / 64 + 1) < 0)
        return fail(why, len, "out of memory");
    int32_t *kb = e->scr_basek, n = 0, words = (e->nnodes + 63) / 64;
    for (int32_t b = 0; b < e->nbases; b++) {
        const struct bnode *nd = &e->nodes[e->base_rep[b]];
        kb[b] = bs_engine_kpn(&nd->cap, &q->per_task);
        if ((cls >= 0 && nd->cls != cls) ||
            (q->constraint && *q->constraint &&
             !constraint_match(q->constraint, nd->fset >= 0 ? e->fsets[nd->fset] : "")))
            kb[b] = 0;
    }
    int64_t tasks = 0;
    int32_t nw = 0;
    for (int32_t w = 0; w < words && tasks < q->tasks; w++) {
        uint64_t avail = ~held[w], took = 0;
        if (w == words - 1 && e->nnodes % 64)
            avail &= (1ULL << (e->nnodes % 64)) - 1;
        while (avail && tasks < q->tasks) {
            /* a run of free nodes of one suitable base class (the common case) is
             * taken at once: as many of its nodes as the tasks left need */
            int32_t lo, i0 = w * 64, rl;
            uint64_t run = bs_run64(avail, &lo);
            const int32_t *nb = e->nbase + i0 + lo;
            rl = bs_pop64(run);
            int32_t b = nb[0];
            if (b >= 0 && kb[b] >= 1 && bs_all32(nb, rl, b)) {
                int64_t want = (q->tasks - tasks + kb[b] - 1) / kb[b];
                int32_t take = want < rl ? (int32_t)want : rl;
                bs_iota32(out + n, take, i0 + lo);
                n += take;
                tasks += (int64_t)take * kb[b];
                uint64_t got = take == 64 ? ~0ULL : ((1ULL << take) - 1) << lo;
                took |= got;
                avail &= ~got;
                continue;
            }
            for (uint64_t m = run; m && tasks < q->tasks; m &= m - 1) {
                int32_t i = i0 + __builtin_ctzll(m);
                b = e->nbase[i];
                if (b < 0 || kb[b] < 1) /* down, or not suitable */
                    continue;
                out[n++] = i;
                took |= m & -m;
                tasks += kb[b];
            }
            avail &= ~run;
        }
        if (took)
            e->scr_words[nw++] = (struct bword){w, took};
    }
    if (tasks < q->tasks)
        return not_enough(tasks, q, s, t, why, len);
    e->nscr_words = nw; /* the words of the nodes chosen */
    return n;
}

/* Tasks x shape: free suitable nodes in index order until the tasks fit (a bitmap
 * word of held nodes passed over at once). Returns the node count, or -1. */
static int pick_tasks(struct batch_engine *e, const struct batch_resv_req *q, int64_t s, int64_t t,
                      int32_t *out, char *why, size_t len)
{
    int32_t cls = -1, n = 0, words = (e->nnodes + 63) / 64;
    int64_t tasks = 0;
    if (q->partition && q->partition[0] &&
        (cls = bs_cred_lookup(e, BATCH_CRED_CLASS, q->partition)) < 0) {
        errno = EINVAL;
        return fail(why, len, "no node has class '%s'", q->partition);
    }
    if (q->ppn > 0 && bs_engine_hostcnt_zero(e) < 0)
        return -1;
    if (VEC_RESERVE(e->scr_held, e->capheld, words + 1) < 0)
        return fail(why, len, "out of memory");
    uint64_t *held = e->scr_held;
    memset(held, 0, ((size_t)words + 1) * sizeof *held);
    nodes_held(e, s, t, held);
    if (e->nbase_ok && q->ppn <= 0) /* tasks per node from the base classes */
        return pick_by_base(e, q, cls, held, s, t, out, why, len);
    const struct batch_res *last = NULL; /* kpn of the last capacity seen (nodes alike) */
    int32_t klast = 0;
    for (int32_t w = 0; w < words && tasks < q->tasks; w++) {
        uint64_t avail = ~held[w];
        if (w == words - 1 && e->nnodes % 64)
            avail &= (1ULL << (e->nnodes % 64)) - 1;
        for (; avail && tasks < q->tasks; avail &= avail - 1) {
            int32_t i = w * 64 + __builtin_ctzll(avail);
            const struct bnode *nd = &e->nodes[i];
            if (!last || last->procs != nd->cap.procs || last->mem != nd->cap.mem ||
                last->disk != nd->cap.disk || last->swap != nd->cap.swap) {
                last = &nd->cap;
                klast = bs_engine_kpn(&nd->cap, &q->per_task);
            }
            int32_t k = klast;
            if (q->ppn > 0 && k > q->ppn) /* at most ppn per machine */
                k = q->ppn;
            if (q->ppn > 0 && nd->host >= 0 && k > q->ppn - e->hostcnt[nd->host])
                k = q->ppn - e->hostcnt[nd->host];
            if (k < 1 || (cls >= 0 && nd->cls != cls) ||
                (q->constraint && *q->constraint &&
                 !constraint_match(q->constraint, nd->fset >= 0 ? e->fsets[nd->fset] : "")) ||
                !nd->up)
                continue;
            if (q->ppn > 0 && nd->host >= 0)
                e->hostcnt[nd->host] += k;
            out[n++] = i;
            tasks += k;
        }
    }
    return tasks < q->tasks ? not_enough(tasks, q, s, t, why, len) : n;
}

/* Copies the ACL of q into r (credential names interned). 0 or -1 (ENOMEM). */
static int acl_copy(struct batch_engine *e, struct bresv *r, const struct batch_acl *a)
{
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        if (a->n[k] == 0)
            continue;
        if (!(r->acl[k] = malloc(a->n[k] * sizeof *r->acl[k])))
            return -1;
        for (size_t i = 0; i < a->n[k]; i++) {
            int32_t id = bs_cred_intern(e, k, a->names[k][i] ? a->names[k][i] : "");
            if (id < 0)
                return -1;
            r->acl[k][r->nacl[k]++] = id;
        }
    }
    if (a->njobs && !(r->jobs = malloc(a->njobs * sizeof *r->jobs)))
        return -1;
    if (a->njobs)
        memcpy(r->jobs, a->jobs, a->njobs * sizeof *r->jobs);
    r->njobs = (int32_t)a->njobs;
    return 0;
}

static void resv_free(struct bresv *r)
{
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        free(r->acl[k]);
    free(r->jobs);
    free(r->nodes);
    free(r->words);
    memset(r, 0, sizeof *r);
}

/* Checks the time and name fields of q; fills *s, *t and the name. */
static int resv_check(struct batch_engine *e, const struct batch_resv_req *q, int64_t now,
                      int64_t *s, int64_t *t, char *name, char *why, size_t len)
{
    errno = EINVAL;
    *s = q->start > now || (q->restore && q->start > 0) ? q->start : now;
    if (q->end > 0 && q->duration > 0 && q->end != q->start + q->duration)
        return fail(why, len, "end and duration disagree");
    if (q->duration < 0 || q->end < 0)
        return fail(why, len, "negative end or duration");
    *t = q->end > 0 ? q->end : q->duration > 0 ? *s + q->duration : 0;
    if (*t == 0)
        return fail(why, len, "give an end time or a duration");
    if (*t <= *s)
        return fail(why, len, "the reservation would end before it starts (or in the past)");
    if ((q->tasks > 0) == (q->nnodes > 0))
        return fail(why, len, "give either tasks (with a per-task request) or node names");
    if (q->tasks > 0 && (q->per_task.procs < 1 || q->per_task.mem < 0 || q->per_task.disk < 0 ||
                         q->per_task.swap < 0))
        return fail(why, len, "a task needs at least one processor");
    if (q->name && q->name[0]) {
        if (strlen(q->name) >= BATCH_NAME_MAX || strpbrk(q->name, " \t\r\n"))
            return fail(why, len, "bad reservation name");
        if (resv_by_name(e, q->name) >= 0) {
            errno = EEXIST;
            return fail(why, len, "reservation %s exists", q->name);
        }
        strcpy(name, q->name);
    } else {
        do
            snprintf(name, BATCH_NAME_MAX, "res.%" PRId64, ++e->resv_seq);
        while (resv_by_name(e, name) >= 0);
    }
    return 0;
}

int batch_resv_create(struct batch_engine *e, const struct batch_resv_req *q, int64_t now,
                      char *name_out, size_t name_len, char *why, size_t why_len)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    char name[BATCH_NAME_MAX];
    int64_t s = 0, t = 0;
    if (now > e->now)
        e->now = now;
    if (resv_check(e, q, e->now, &s, &t, name, why, why_len) < 0)
        return -1;
    if (VEC_RESERVE(e->resv, e->capresv, e->nresv + 1) < 0)
        return fail(why, why_len, "out of memory");
    struct bresv *r = &e->resv[e->nresv];
    memset(r, 0, sizeof *r);
    /* the nodes are chosen into scratch, then copied at their number */
    if (q->nnodes > (size_t)(INT32_MAX - 1 - e->nnodes)) {
        errno = EINVAL;
        return fail(why, why_len, "too many node names");
    }
    if (VEC_RESERVE(e->scr_pick, e->cappick, e->nnodes + (int32_t)q->nnodes + 1) < 0) {
        errno = ENOMEM;
        return fail(why, why_len, "out of memory");
    }
    e->nscr_words = -1;
    int n = q->nnodes ? pick_named(e, q, s, t, e->scr_pick, why, why_len)
                      : pick_tasks(e, q, s, t, e->scr_pick, why, why_len);
    if (n >= 0 && (r->nodes = malloc(((size_t)n + 1) * sizeof *r->nodes)) && n > 0)
        memcpy(r->nodes, e->scr_pick, (size_t)n * sizeof *r->nodes);
    if (n < 0 || !r->nodes || acl_copy(e, r, &q->acl) < 0) {
        int saved = n < 0 ? errno : ENOMEM;
        resv_free(r);
        errno = saved;
        return n < 0 ? -1 : fail(why, why_len, "out of memory");
    }
    strcpy(r->name, name);
    r->nnodes = n;
    r->start = s;
    r->end = t;
    r->tasks = q->tasks;
    r->per_task = q->per_task;
    r->grid = q->grid;
    r->created = e->now;
    r->pool = -1;
    if (e->nscr_words >= 0 && (r->words = malloc(((size_t)e->nscr_words + 1) * sizeof *r->words))) {
        memcpy(r->words, e->scr_words, (size_t)e->nscr_words * sizeof *r->words);
        r->nwords = e->nscr_words;
    } else {
        (void)bs_resv_words(e, e->nresv); /* without them the partition reads the nodes */
    }
    if (bs_resv_live_add(e, e->nresv) < 0) {
        resv_free(r);
        errno = ENOMEM;
        return fail(why, why_len, "out of memory");
    }
    bs_part_note_resv(e, e->nresv);
    e->nresv++;
    e->groups_dirty = true; /* regrouped once at the next cycle or estimate (as a release) */
    bs_engine_memo_clear(e);
    if (name_out && name_len)
        snprintf(name_out, name_len, "%s", name);
    return 0;
}

int batch_resv_release(struct batch_engine *e, const char *name)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    int32_t r = name ? resv_by_name(e, name) : -1;
    if (r < 0) {
        errno = ENOENT;
        return -1;
    }
    bs_resv_live_drop(e, r);
    e->groups_dirty = true;
    e->moveup_due = true; /* its nodes may let another grid reservation move up */
    bs_engine_memo_clear(e);
    return 0;
}

static void resv_info(const struct batch_engine *e, int32_t r, struct batch_resv_info *out)
{
    const struct bresv *v = &e->resv[r];
    memset(out, 0, sizeof *out);
    out->name = v->name;
    out->start = v->start;
    out->end = v->end;
    out->nnodes = v->nnodes;
    out->nodes = v->nodes;
    out->tasks = v->tasks;
    out->per_task = v->per_task;
    out->jobs_running = v->running;
    out->bound_job = v->njobs == 1 ? v->jobs[0] : 0;
    out->grid = v->grid;
}

size_t batch_resv_count(const struct batch_engine *e)
{
    return (size_t)e->nrlive;
}

int batch_resv_get(const struct batch_engine *e, size_t i, struct batch_resv_info *out)
{
    /* the i-th live reservation by (start, name): selection without sorting */
    int32_t prev = -1;
    for (size_t k = 0; k <= i; k++) {
        int32_t best = -1;
        for (int32_t x = 0; x < e->nrlive; x++) {
            int32_t r = e->rlive[x];
            const struct bresv *v = &e->resv[r];
            if (prev >= 0) {
                const struct bresv *p = &e->resv[prev];
                if (v->start < p->start || (v->start == p->start && strcmp(v->name, p->name) <= 0))
                    continue;
            }
            if (best < 0 || v->start < e->resv[best].start ||
                (v->start == e->resv[best].start && strcmp(v->name, e->resv[best].name) < 0))
                best = r;
        }
        if (best < 0) {
            errno = ENOENT;
            return -1;
        }
        prev = best;
    }
    resv_info(e, prev, out);
    return 0;
}

int batch_resv_find(const struct batch_engine *e, const char *name, struct batch_resv_info *out)
{
    int32_t r = name ? resv_by_name(e, name) : -1;
    if (r < 0) {
        errno = ENOENT;
        return -1;
    }
    resv_info(e, r, out);
    return 0;
}

size_t batch_resv_on_node(const struct batch_engine *e, int32_t node, const char **names,
                          size_t max)
{
    size_t n = 0;
    for (int32_t x = 0; x < e->nrlive; x++) {
        const struct bresv *v = &e->resv[e->rlive[x]];
        for (int32_t i = 0; i < v->nnodes; i++)
            if (v->nodes[i] == node) {
                if (n < max)
                    names[n] = v->name;
                n++;
                break;
            }
    }
    return n;
}

bool batch_resv_admits(const struct batch_engine *e, const char *name, uint64_t id)
{
    int32_t r = name ? resv_by_name(e, name) : -1;
    const struct bjob *j = bs_engine_job(e, id);
    return r >= 0 && j && bs_engine_admits(e, &e->resv[r], j);
}

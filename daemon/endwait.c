/*
 * endwait.c - JOB_WAIT held at every level (endwait.h): the held requests, an index of
 * them by job id (open addressing, linear probing), and the jobs changed since the last
 * commit that some held request names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/endwait.h"

#define ENDWAIT_DEFAULT_MS 25000 /* a JOB_WAIT without wait_ms */

struct held {
    uint64_t handle, req_id;
    uint32_t pos; /* in endwait.h */
    uint32_t njobs;
    uint64_t jobs[WIRE_JOB_WAIT_JOBS];
};

/* One job named by held requests (v[0..n), each once); n == 0: a free slot. */
struct slot {
    uint64_t job;
    struct held **v;
    uint32_t n, cap;
    bool due; /* on endwait.due */
};

struct endwait {
    struct endwait_ops ops;
    void *role;
    struct held **h; /* the held requests */
    uint32_t n, cap;
    struct slot *s; /* the index: cap a power of two (0: none yet), at most half used */
    uint32_t nused, scap;
    uint64_t *due; /* jobs changed since the last commit that a slot names */
    uint32_t ndue, capdue;
    bool all; /* a change could not be listed (no memory): look at every held request */
};

struct endwait *endwait_new(const struct endwait_ops *ops, void *role)
{
    struct endwait *w = calloc(1, sizeof *w);
    if (w) {
        w->ops = *ops;
        w->role = role;
    }
    return w;
}

void endwait_free(struct endwait **wp)
{
    if (!wp || !*wp)
        return;
    struct endwait *w = *wp;
    for (uint32_t i = 0; i < w->n; i++)
        free(w->h[i]);
    for (uint32_t i = 0; i < w->scap; i++)
        free(w->s[i].v);
    free(w->h);
    free(w->s);
    free(w->due);
    free(w);
    *wp = NULL;
}

/* ---- the index: job id -> the held requests naming it ---- */

static uint32_t home(const struct endwait *w, uint64_t job)
{
    return (uint32_t)((job * 0x9E3779B97F4A7C15ull) >> 32) & (w->scap - 1);
}

static struct slot *slot_find(struct endwait *w, uint64_t job)
{
    for (uint32_t i = w->scap ? home(w, job) : 0; w->scap && w->s[i].n; i = (i + 1) & (w->scap - 1))
        if (w->s[i].job == job)
            return &w->s[i];
    return NULL;
}

/* Doubles the table (or makes the first): 0, or -1 (no memory; the table is as it was). */
static int grow(struct endwait *w)
{
    uint32_t oc = w->scap, nc = oc ? oc * 2 : 64;
    struct slot *old = w->s, *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    w->s = ns;
    w->scap = nc;
    for (uint32_t i = 0; i < oc; i++) {
        if (!old[i].n)
            continue;
        uint32_t k = home(w, old[i].job);
        while (ns[k].n)
            k = (k + 1) & (nc - 1);
        ns[k] = old[i];
    }
    free(old);
    return 0;
}

/* q named under job (once, however often q names it): 0, or -1 (no memory). */
static int slot_add(struct endwait *w, uint64_t job, struct held *q)
{
    struct slot *s = slot_find(w, job);
    if (!s) {
        if ((w->nused + 1) * 2 > w->scap && grow(w) < 0)
            return -1;
        uint32_t i = home(w, job);
        while (w->s[i].n)
            i = (i + 1) & (w->scap - 1);
        s = &w->s[i]; /* a free slot is all zeros */
        s->job = job;
        w->nused++;
    } else if (s->v[s->n - 1] == q) {
        return 0; /* q's jobs are added one after another: named already */
    }
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 2;
        void *v = realloc(s->v, nc * sizeof *s->v);
        if (!v) {
            if (!s->n) /* back to a free slot */
                w->nused--;
            return -1;
        }
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n++] = q;
    return 0;
}

/* Frees slot i and moves the slots after it that belong before the hole (linear
 * probing's deletion without tombstones). */
static void slot_free(struct endwait *w, uint32_t i)
{
    free(w->s[i].v);
    w->s[i] = (struct slot){0};
    w->nused--;
    for (uint32_t j = (i + 1) & (w->scap - 1); w->s[j].n; j = (j + 1) & (w->scap - 1)) {
        uint32_t k = home(w, w->s[j].job);
        /* j may move to the hole i unless its home lies cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        w->s[i] = w->s[j];
        w->s[j] = (struct slot){0};
        i = j;
    }
}

/* q no longer named under job (nothing when it is not). */
static void slot_drop(struct endwait *w, uint64_t job, const struct held *q)
{
    struct slot *s = slot_find(w, job);
    for (uint32_t i = 0; s && i < s->n; i++)
        if (s->v[i] == q) {
            s->v[i] = s->v[--s->n];
            if (!s->n)
                slot_free(w, (uint32_t)(s - w->s));
            return;
        }
}

/* Forgets held request q (its index entries, its place) and frees it. */
static void forget(struct endwait *w, struct held *q)
{
    for (uint32_t k = 0; k < q->njobs; k++)
        slot_drop(w, q->jobs[k], q);
    w->h[q->pos] = w->h[--w->n];
    w->h[q->pos]->pos = q->pos;
    free(q);
}

/* ---- answers ---- */

/* Whether a packed row's "state" is an end (the words `gridnode job --wait` ends on). */
static bool row_ended(const char *data, size_t len)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    bool end = false;
    if (msgpack_unpack_next(&up, data, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        char st[16];
        wire_get_strbuf(&up.data, "state", st, sizeof st);
        end = !strcmp(st, "done") || !strcmp(st, "failed") || !strcmp(st, "killed") ||
              !strcmp(st, "cancelled");
    }
    msgpack_unpacked_destroy(&up);
    return end;
}

/* Job id may be waited for (check: the request's own turn, whose requester is known): 0,
 * or -1 with an ERROR written into reply (no such job, or not the requester's). */
static int may_wait(struct endwait *w, uint64_t id, bool check, uint64_t req_id,
                    struct wire_buf *reply)
{
    bool found = false;
    const char *owner = w->ops.owner(w->role, id, &found);
    char msg[300];
    if (found && (!check || curve_may_touch(owner)))
        return 0;
    if (found)
        snprintf(msg, sizeof msg,
                 "job %llu belongs to another user; only its owner and the administrators "
                 "may wait for it",
                 (unsigned long long)id);
    else
        snprintf(msg, sizeof msg, "no job %llu%s (gridnode jobs lists them)",
                 (unsigned long long)id, w->ops.at);
    wire_error_msg(reply, req_id, found ? WE_DENIED : WE_NOT_FOUND, msg);
    return -1;
}

/* The answer naming the ended ones of jobs[0..n) (check: the requester's turn). 0, or
 * -1 with an error reply written (a job not found or not the requester's). */
static int answer(struct endwait *w, const uint64_t *jobs, uint32_t n, bool check, uint64_t req_id,
                  struct wire_buf *reply, uint32_t *ended)
{
    struct wire_buf rows;
    wire_buf_init(&rows);
    *ended = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (may_wait(w, jobs[i], check, req_id, reply) < 0) {
            wire_buf_free(&rows);
            return -1;
        }
        size_t at = rows.sb.size;
        w->ops.pack(w->role, jobs[i], &rows);
        if (row_ended(rows.sb.data + at, rows.sb.size - at))
            ++*ended;
        else
            rows.sb.size = at; /* only the ended ones are named */
    }
    wire_begin(reply, WT_JOB_ENDED, req_id, 1);
    wire_put_key(reply, "jobs");
    wire_pack_array(reply, *ended);
    msgpack_sbuffer_write(&reply->sb, rows.sb.data, rows.sb.size);
    wire_buf_free(&rows);
    return 0;
}

/* q kept and indexed under its jobs: 0, or -1 (no memory; q is not kept). */
static int keep(struct endwait *w, struct held *q)
{
    if (w->n == w->cap) {
        uint32_t nc = w->cap ? w->cap * 2 : 16;
        void *v = realloc(w->h, nc * sizeof *w->h);
        if (!v)
            return -1;
        w->h = v;
        w->cap = nc;
    }
    q->pos = w->n;
    w->h[w->n++] = q;
    for (uint32_t k = 0; k < q->njobs; k++)
        if (slot_add(w, q->jobs[k], q) < 0) {
            forget(w, q); /* frees q */
            return -1;
        }
    return 0;
}

void endwait_request(struct endwait *w, struct daemon *d, const struct wire_msg *m,
                     struct wire_buf *reply)
{
    const msgpack_object *a = wire_get(m->root, "jobs");
    struct held q = {.req_id = m->id};
    for (uint32_t i = 0; a && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size &&
                         q.njobs < WIRE_JOB_WAIT_JOBS;
         i++)
        if (a->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            q.jobs[q.njobs++] = a->via.array.ptr[i].via.u64;
    uint32_t ended;
    if (answer(w, q.jobs, q.njobs, true, m->id, reply, &ended) < 0 || ended || !q.njobs)
        return; /* an error, or an end to tell now */
    int64_t wait = (int64_t)wire_get_u64(m->root, "wait_ms", ENDWAIT_DEFAULT_MS);
    struct held *p = w->n < DAEMON_HELD_MAX ? malloc(sizeof *p) : NULL;
    if (!p)
        return; /* not held: the answer (nothing ended yet) goes now; the tool asks again */
    *p = q;
    if (keep(w, p) < 0) /* frees p */
        return;
    if (!(p->handle = daemon_hold(d, WT_JOB_WAIT, wait)))
        forget(w, p);
}

void endwait_changed(struct endwait *w, uint64_t job)
{
    struct slot *s = w && w->nused ? slot_find(w, job) : NULL;
    if (!s || s->due)
        return;
    if (w->ndue == w->capdue) {
        uint32_t nc = w->capdue ? w->capdue * 2 : 16;
        void *v = realloc(w->due, nc * sizeof *w->due);
        if (!v) {
            w->all = true; /* the next commit looks at every held request */
            return;
        }
        w->due = v;
        w->capdue = nc;
    }
    w->due[w->ndue++] = job;
    s->due = true;
}

/* Answers q if one of its jobs has ended or is gone (forgetting it): true when it did. */
static bool settle(struct endwait *w, struct daemon *d, struct held *q, struct wire_buf *wb)
{
    uint32_t ended = 0;
    wire_buf_reset(wb);
    /* a job gone meanwhile (-1) is an answer too: the tool reads it and says so */
    if (answer(w, q->jobs, q->njobs, false, q->req_id, wb, &ended) == 0 && !ended)
        return false;
    (void)daemon_reply_held(d, q->handle, wb); /* -1: expired meanwhile */
    forget(w, q);
    return true;
}

void endwait_after_commit(struct endwait *w, struct daemon *d)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (uint32_t i = 0; w->all && i < w->n;)
        i += !settle(w, d, w->h[i], &wb);
    for (uint32_t k = 0; k < w->ndue; k++) {
        struct slot *s = slot_find(w, w->due[k]);
        if (s)
            s->due = false;
        /* settle moves the slots (a freed one's followers): find it again each time */
        for (uint32_t i = 0; !w->all && (s = slot_find(w, w->due[k])) && i < s->n;)
            i += !settle(w, d, s->v[i], &wb);
    }
    w->ndue = 0;
    w->all = false;
    wire_buf_free(&wb);
}

bool endwait_expire(struct endwait *w, uint64_t handle, uint64_t req_id, struct wire_buf *reply)
{
    for (uint32_t i = 0; i < w->n; i++)
        if (w->h[i]->handle == handle) {
            forget(w, w->h[i]);
            wire_begin(reply, WT_JOB_ENDED, req_id, 1);
            wire_put_key(reply, "jobs");
            wire_pack_array(reply, 0);
            return true;
        }
    return false;
}

/*
 * endwait.c - JOB_WAIT held at every level (endwait.h): the held requests, an index of
 * them by job id (lib/idmap.h), and the jobs changed since the last commit that some
 * held request names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/endwait.h"
#include "lib/idmap.h"

#define ENDWAIT_DEFAULT_MS 25000 /* a JOB_WAIT without wait_ms */

struct held {
    uint64_t handle, req_id;
    uint32_t pos; /* its index in endwait.h[] */
    uint32_t njobs;
    uint64_t jobs[WIRE_JOB_WAIT_JOBS];
};

struct endwait {
    struct endwait_ops ops;
    void *role;
    struct held **h; /* the held requests */
    uint32_t n, cap;
    struct idmap byjob; /* job id -> the held requests naming it; marked: on due */
    uint64_t *due;      /* jobs changed since the last commit that a held request names */
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
    idmap_free(&w->byjob);
    free(w->h);
    free(w->due);
    free(w);
    *wp = NULL;
}

/* Forgets held request q (its index entries, its place) and frees it. */
static void forget(struct endwait *w, struct held *q)
{
    for (uint32_t k = 0; k < q->njobs; k++)
        idmap_del(&w->byjob, q->jobs[k], q);
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
        if (idmap_add(&w->byjob, q->jobs[k], q) < 0) {
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
    if (!w || !w->n || !idmap_has(&w->byjob, job))
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
    if (idmap_mark(&w->byjob, job)) /* not listed yet */
        w->due[w->ndue++] = job;
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
        idmap_unmark(&w->byjob, w->due[k]);
        /* settle changes the map: the job's list is read again after each */
        uint32_t n;
        void *const *v;
        for (uint32_t i = 0; !w->all && (v = idmap_get(&w->byjob, w->due[k], &n)) && i < n;)
            i += !settle(w, d, v[i], &wb);
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

/*
 * endwait.c - JOB_WAIT held at the batch role and the grid spool (endwait.h).
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/endwait.h"

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

#define ENDWAIT_DEFAULT_MS 25000 /* a JOB_WAIT without wait_ms */

struct held {
    uint64_t handle, req_id;
    uint32_t njobs;
    uint64_t jobs[WIRE_JOB_WAIT_JOBS];
};

struct endwait {
    struct endwait_ops ops;
    void *role;
    struct held *h;
    uint32_t n, cap;
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
    free((*wp)->h);
    free(*wp);
    *wp = NULL;
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
        char why[300] = "";
        int code = WE_NOT_FOUND;
        size_t at = rows.sb.size;
        if (w->ops.row(w->role, jobs[i], check, &rows, &code, why, sizeof why) < 0) {
            wire_buf_free(&rows);
            wire_begin(reply, WT_ERROR, req_id, 2);
            wire_put_u64(reply, "code", (uint64_t)code);
            wire_put_str(reply, "msg", why[0] ? why : "no such job");
            return -1;
        }
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

void endwait_request(struct endwait *w, struct daemon *d, const struct wire_msg *m,
                     struct wire_buf *reply)
{
    const msgpack_object *a = wire_get(m->root, "jobs");
    struct held q = {0, m->id, 0, {0}};
    for (uint32_t i = 0; a && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size &&
                         q.njobs < WIRE_JOB_WAIT_JOBS;
         i++)
        if (a->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            q.jobs[q.njobs++] = a->via.array.ptr[i].via.u64;
    uint32_t ended;
    if (answer(w, q.jobs, q.njobs, true, m->id, reply, &ended) < 0 || ended || !q.njobs)
        return; /* an error, or an end to tell now */
    int64_t wait = (int64_t)wire_get_u64(m->root, "wait_ms", ENDWAIT_DEFAULT_MS);
    if (w->n == w->cap && w->cap < DAEMON_HELD_MAX) {
        uint32_t nc = w->cap ? w->cap * 2 : 16;
        void *v = realloc(w->h, nc * sizeof *w->h);
        if (v)
            w->h = v, w->cap = nc;
    }
    if (w->n == w->cap || !(q.handle = daemon_hold(d, WT_JOB_WAIT, wait)))
        return; /* not held: the answer (nothing ended yet) goes now; the tool asks again */
    w->h[w->n++] = q;
}

void endwait_after_commit(struct endwait *w, struct daemon *d)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (uint32_t i = 0; i < w->n;) {
        struct held *q = &w->h[i];
        uint32_t ended = 0;
        wire_buf_reset(&wb);
        /* a job gone meanwhile (-1) is an answer too: the tool reads it and says so */
        if (answer(w, q->jobs, q->njobs, false, q->req_id, &wb, &ended) < 0 || ended) {
            (void)daemon_reply_held(d, q->handle, &wb); /* -1: expired meanwhile */
            w->h[i] = w->h[--w->n];
            continue;
        }
        i++;
    }
    wire_buf_free(&wb);
}

bool endwait_expire(struct endwait *w, uint64_t handle, uint64_t req_id, struct wire_buf *reply)
{
    for (uint32_t i = 0; i < w->n; i++)
        if (w->h[i].handle == handle) {
            w->h[i] = w->h[--w->n];
            wire_begin(reply, WT_JOB_ENDED, req_id, 1);
            wire_put_key(reply, "jobs");
            wire_pack_array(reply, 0);
            return true;
        }
    return false;
}

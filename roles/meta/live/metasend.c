/*
 * metasend.c - the spool's messages to its sites (docs/wire.md 6.12): each request is
 * recorded with its kind, job and deadline (struct mreq) and queued until the turn's
 * commit (meta_out_flush sends them then, or drops them when the commit failed);
 * SUBMIT/PSUBMIT (the user's request again with the spool's key, user and
 * reservation), ESTIMATE, RESERVE and the one-field requests (RESV_RELEASE and CANCEL
 * are orders of the outbox, metaorder.c). The
 * reservation and key names the spool gives a placement. It calls nothing of the role.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/meta/live/meta_int.h"
#include "roles/meta/slurm/slurm.h"

/* ---- sending ---- */

void meta_queue_out(struct meta *M, int site, const struct wire_buf *wb)
{
    if (M->nout == M->capout) {
        uint32_t nc = M->capout ? M->capout * 2 : 64;
        void *p = realloc(M->out, nc * sizeof *M->out);
        if (!p)
            return; /* the request's deadline handles it */
        M->out = p;
        M->capout = nc;
    }
    void *d = malloc(wb->sb.size);
    if (!d)
        return;
    memcpy(d, wb->sb.data, wb->sb.size);
    M->out[M->nout++] = (struct mout){site, d, wb->sb.size};
}

void meta_out_flush(struct meta *M, bool send)
{
    for (uint32_t i = 0; i < M->nout; i++) {
        struct msite *s = &M->site[M->out[i].site];
        WIRE_CHECK_OUT(M->out[i].data, M->out[i].len, "a request to a site");
        if (send && s->slurm)
            slurm_site_request(s->slurm, M->out[i].data, M->out[i].len);
        else if (send && s->sock &&
                 zmq_send(s->sock, M->out[i].data, M->out[i].len, ZMQ_DONTWAIT) < 0)
            log_debug("cannot send to site %s: %s", s->name, zmq_strerror(errno));
        free(M->out[i].data);
    }
    M->nout = 0;
}

void meta_req_begin(struct meta *M, struct msite *s, int kind, uint64_t job, uint32_t type,
                    uint32_t nfields, int64_t timeout, struct wire_buf *wb)
{
    uint64_t rid = ++M->req_seq;
    if (s->nreq == s->capreq) {
        uint32_t nc = s->capreq ? s->capreq * 2 : 16;
        void *p = realloc(s->req, nc * sizeof *s->req);
        if (p) {
            s->req = p;
            s->capreq = nc;
        }
    }
    if (s->nreq < s->capreq)
        s->req[s->nreq++] = (struct mreq){rid, kind, job, loop_now_ms() + timeout};
    wire_buf_reset(wb);
    wire_begin(wb, type, rid, nfields);
}

void meta_send_simple(struct meta *M, struct msite *s, int kind, uint64_t job, uint32_t type,
                      const char *k, uint64_t v)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, kind, job, type, k ? 1 : 0, M->cfg.request_timeout_ms, &wb);
    if (k)
        wire_put_u64(&wb, k, v);
    meta_queue_out(M, s->idx, &wb);
    wire_buf_free(&wb);
}

void meta_send_withdraw(struct meta *M, struct mjob *j)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, &M->site[j->site], RK_WITHDRAW, j->id, WT_CANCEL, 2,
                   M->cfg.request_timeout_ms, &wb);
    wire_put_u64(&wb, "job", j->sjob);
    wire_put_bool(&wb, "unstarted", true);
    meta_queue_out(M, j->site, &wb);
    wire_buf_free(&wb);
}

/* The user the site sees: the job's, or the spool's when the job named none. */
const char *meta_job_user(const struct meta *M, const struct mjob *j)
{
    return j->user[0] ? j->user : M->cfg.user;
}

void meta_resv_name(struct meta *M, const struct mjob *j, uint32_t attempt, char *out, size_t n)
{
    snprintf(out, n, "m%s-%" PRIu64 "-%u", M->inc, j->id, attempt);
}

/* The user's request again, with resv, key and user set for the site. */
void meta_send_submit(struct meta *M, struct msite *s, struct mjob *j, const char *resv,
                      uint32_t attempt, bool hold)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)j->req, j->reqlen, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return;
    }
    /* dependency: the spool's own ids, decided here (issue 27), meaningless at a site */
    static const char *const skip[] = {"v",    "t",     "id",         "key",  "resv",
                                       "user", "early", "dependency", "hold", NULL};
    const msgpack_object_map *mp = &up.data.via.map;
    uint32_t keep = 0;
    bool *k = calloc(mp->size + 1, sizeof *k);
    for (uint32_t i = 0; k && i < mp->size; i++) {
        const msgpack_object *key = &mp->ptr[i].key;
        bool drop = key->type != MSGPACK_OBJECT_STR;
        for (int x = 0; !drop && skip[x]; x++)
            drop = key->via.str.size == strlen(skip[x]) && /* a user's `hold` is the spool's */
                   !memcmp(key->via.str.ptr, skip[x], key->via.str.size);
        k[i] = !drop;
        keep += !drop;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, RK_SUBMIT, j->id, j->parallel ? WT_PSUBMIT : WT_SUBMIT,
                   keep + 3 + (resv[0] ? 1 : 0) + hold, M->cfg.request_timeout_ms, &wb);
    for (uint32_t i = 0; k && i < mp->size; i++)
        if (k[i]) {
            msgpack_pack_object(&wb.pk, mp->ptr[i].key);
            msgpack_pack_object(&wb.pk, mp->ptr[i].val);
        }
    char key[96];
    snprintf(key, sizeof key, "meta:%s:%" PRIu64 ".%u", M->inc, j->id, attempt);
    wire_put_str(&wb, "key", key);
    wire_put_str(&wb, "user", meta_job_user(M, j));
    wire_put_bool(&wb, "early", j->early); /* true unless the user asked otherwise */
    if (resv[0])
        wire_put_str(&wb, "resv", resv);
    if (hold) /* a copy made now never starts before the cancel that follows */
        wire_put_bool(&wb, "hold", true);
    meta_queue_out(M, s->idx, &wb);
    wire_buf_free(&wb);
    free(k);
    msgpack_unpacked_destroy(&up);
}

void meta_send_estimate(struct meta *M, struct msite *s, struct mjob *j, int kind, uint64_t id)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, kind, id, WT_ESTIMATE, 6 + (j->ppn > 0) + !!j->constraint,
                   M->cfg.estimate_timeout_ms, &wb);
    if (j->constraint) /* issue 27: the site plans on the hosts that satisfy it */
        wire_put_str(&wb, "constraint", j->constraint);
    wire_put_u64(&wb, "procs", (uint64_t)j->rq.procs);
    if (j->ppn > 0) /* --ppn: the site plans at most ppn per host, as it will run it */
        wire_put_u64(&wb, "ppn", j->ppn);
    wire_put_u64(&wb, "walltime_s", (uint64_t)(j->rq.walltime / 1000));
    wire_put_u64(&wb, "mem_mb", (uint64_t)j->rq.mem);
    wire_put_u64(&wb, "disk_mb", (uint64_t)j->rq.disk);
    wire_put_str(&wb, "user", meta_job_user(M, j));
    /* the possible starts after the earliest matter only where staging is counted */
    bool staged = false;
    for (int i = 0; i < M->nsites && !staged; i++)
        staged = M->site[i].info.bandwidth_mb_s > 0;
    wire_put_u64(&wb, "max", staged ? META_EST_WINDOWS : 1);
    meta_queue_out(M, s->idx, &wb);
    wire_buf_free(&wb);
}

void meta_send_reserve(struct meta *M, struct msite *s, struct mjob *j, const char *name,
                       int64_t start)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, RK_RESERVE, j->id, WT_RESERVE, 9 + (j->ppn > 0) + !!j->constraint,
                   M->cfg.request_timeout_ms, &wb);
    if (j->constraint) /* issue 27: cores of hosts that satisfy it */
        wire_put_str(&wb, "constraint", j->constraint);
    wire_put_str(&wb, "user", M->cfg.user);
    wire_put_str(&wb, "name", name);
    wire_put_u64(&wb, "procs", (uint64_t)j->rq.procs);
    if (j->ppn > 0) /* the reserved cores on hosts the job may use together */
        wire_put_u64(&wb, "ppn", j->ppn);
    wire_put_u64(&wb, "mem_mb", (uint64_t)j->rq.mem);
    wire_put_u64(&wb, "disk_mb", (uint64_t)j->rq.disk);
    wire_put_i64(&wb, "start", start > 0 && start != META_NEVER ? start : 0);
    /* the walltime plus a margin: the job is submitted into the reservation a moment
     * after it starts (at once when the site gave no estimate), and must still fit in it
     * with its whole walltime; the spool releases it when the job ends */
    wire_put_u64(&wb, "duration_s", (uint64_t)((j->rq.walltime + 999) / 1000) + META_RESV_SLACK_S);
    /* taken at `start` by another placement under way since the estimate: the site
     * reserves at its next start instead of refusing (the reply says when) */
    wire_put_bool(&wb, "flex", true);
    wire_put_key(&wb, "users"); /* only this job's user may use it (and the spool releases it) */
    wire_pack_array(&wb, 1);
    wire_pack_str(&wb, meta_job_user(M, j));
    meta_queue_out(M, s->idx, &wb);
    wire_buf_free(&wb);
}

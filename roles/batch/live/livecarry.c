/*
 * livecarry.c - a moving task's checkpoint carried to another cluster (issue 26,
 * docs/data.md "Checkpoints", docs/wire.md 6.19 "Moving a pinned task").
 *
 * When the scheduler places a moving element (its cluster job kept for the move,
 * mig_cjob: livemigrate.c) on another cluster than that job's, the batch role asks the
 * old cluster for the task's latest checkpoint (JOB_GET with tasks: the row's "ckpt"),
 * copies its files into its own store (FILE_GET of the old job, one chunk in flight,
 * appended as an upload is), offers them to the new cluster with the task's inputs
 * (livestage.c), and names them in the SUBMIT there ("ckpt", livestart.c): the new
 * cluster records them as the task's latest checkpoint and its node starts from them.
 * The old job is cancelled once the new cluster took the SUBMIT (livemigrate.c).
 *
 * Never blocking: an old cluster that does not answer (it is down, or silent past the
 * request deadline), that holds no checkpoint of the task, or a copy that fails ends
 * the carry without one: the task starts from the start there, as before, and its
 * reason says why. Nothing here is stored: after kill -9 of the batch role the element
 * is still starting with its kept job, and the carry begins again (the chunks already
 * copied are durable in the store, so the copy resumes where it was). Checkpoint files
 * are charged to nobody, as at the clusters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fileoffer.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"

enum { CK_LIST, CK_GET, CK_DONE, CK_FAILED };

static struct lcarry *find(struct live *L, uint64_t eid)
{
    for (uint32_t i = 0; i < L->ncarries; i++)
        if (L->carries[i].eid == eid)
            return &L->carries[i];
    return NULL;
}

static void drop(struct live *L, struct lcarry *k)
{
    free(k->list);
    free(k->why);
    *k = L->carries[--L->ncarries];
}

/* The element's start goes on (liveclu.c's start_staged): with the checkpoint or not. */
static void wake(struct live *L, uint64_t eid)
{
    if (L->nready == L->capready) {
        uint32_t nc = L->capready ? L->capready * 2 : 64;
        void *p = realloc(L->stage_ready, nc * sizeof *L->stage_ready);
        if (!p)
            return; /* it stays starting: the next resync of its cluster starts it */
        L->stage_ready = p, L->capready = nc;
    }
    L->stage_ready[L->nready++] = eid;
}

/* The carry ends without a checkpoint (why): the task starts from the start (its start
 * goes on at once when woken; otherwise the caller goes on). */
static void fail(struct live *L, struct lcarry *k, bool woken, const char *fmt, const char *arg)
{
    char why[700];
    struct ljob *j;
    struct lelem *el = live_elem_find(L, k->eid, &j);
    uint32_t e = (uint32_t)(k->eid & ((1u << LIVE_ELEM_BITS) - 1));
    snprintf(why, sizeof why, fmt, arg);
    free(k->list);
    k->list = NULL;
    k->st = CK_FAILED;
    free(k->why);
    k->why = strdup(why);
    if (el) {
        char r[800];
        snprintf(r, sizeof r, "starts from the start on cluster %s: %s",
                 el->cl >= 0 ? L->cl[el->cl].name : "?", why);
        log_info("job %llu element %u: %s", (unsigned long long)j->id, e, r);
        live_elem_reason(L, j, e, r);
    }
    if (woken)
        wake(L, k->eid);
}

static void send_list(struct live *L, struct lcarry *k)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, &L->cl[k->cl], RK_CKLIST, k->eid, WT_JOB_GET, 4, 0, &wb);
    wire_put_u64(&wb, "job", k->cjob);
    wire_put_bool(&wb, "tasks", true);
    wire_put_u64(&wb, "from", 0);
    wire_put_u64(&wb, "count", 1);
    live_queue_out(L, k->cl, &wb);
    wire_buf_free(&wb);
}

/* The carry's file entry i (of up, destroyed by the caller), or NULL. */
static const msgpack_object *entry(const struct lcarry *k, uint32_t i, msgpack_unpacked *up)
{
    msgpack_unpacked_init(up);
    if (!k->list || msgpack_unpack_next(up, k->list, k->list_len, NULL) != MSGPACK_UNPACK_SUCCESS)
        return NULL;
    const msgpack_object *fl = wire_get(&up->data, "inputs");
    return fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size ? &fl->via.array.ptr[i]
                                                                            : NULL;
}

/* Asks the old cluster for the next chunk the store lacks; done once all are whole. */
static void next_chunk(struct live *L, struct lcarry *k)
{
    for (; k->cur < k->nfiles; k->cur++) {
        msgpack_unpacked up;
        const msgpack_object *f = entry(k, k->cur, &up);
        uint8_t d[SHA256_LEN];
        size_t hl;
        const char *h = f ? wire_get_str(f, "hash", &hl) : NULL;
        if (!h || filestore_parse_hash(h, hl, d) < 0) {
            msgpack_unpacked_destroy(&up);
            fail(L, k, true, "cluster %s named a checkpoint file without a proper hash",
                 L->cl[k->cl].name);
            return;
        }
        struct fsfile *have = filestore_find(L->files, d);
        if (have && have->done) {
            msgpack_unpacked_destroy(&up);
            continue;
        }
        struct wire_buf wb; /* FILE_GET without idx: a file the job names (its checkpoint) */
        wire_buf_init(&wb);
        live_req_begin(L, &L->cl[k->cl], RK_CKGET, k->eid, WT_FILE_GET, 4, 0, &wb);
        wire_put_strn(&wb, "hash", h, 64);
        wire_put_u64(&wb, "job", k->cjob);
        wire_put_u64(&wb, "off", have ? have->have : 0);
        wire_put_u64(&wb, "len", WIRE_FILE_CHUNK);
        live_queue_out(L, k->cl, &wb);
        wire_buf_free(&wb);
        msgpack_unpacked_destroy(&up);
        k->st = CK_GET;
        return;
    }
    k->st = CK_DONE;
    struct ljob *j;
    struct lelem *el = live_elem_find(L, k->eid, &j);
    if (el)
        log_info("job %llu element %u: its checkpoint (%u file(s), issue %llu) copied from "
                 "cluster %s",
                 (unsigned long long)j->id, (uint32_t)(k->eid & ((1u << LIVE_ELEM_BITS) - 1)),
                 k->nfiles, (unsigned long long)k->issue, L->cl[k->cl].name);
    wake(L, k->eid);
}

/* The old job's task row: its "ckpt" becomes the carry's list ({"inputs": [...]}, the
 * shape fileoffer_inputs offers). */
static void list_reply(struct live *L, struct lcarry *k, const struct wire_msg *m)
{
    const msgpack_object *t = wire_get(m->root, "tasks");
    t = t && t->type == MSGPACK_OBJECT_ARRAY && t->via.array.size ? &t->via.array.ptr[0] : NULL;
    const msgpack_object *fl = t ? wire_get(t, "ckpt") : NULL;
    if (!fl || fl->type != MSGPACK_OBJECT_ARRAY || !fl->via.array.size) {
        fail(L, k, true, "cluster %s holds no checkpoint of it", L->cl[k->cl].name);
        return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 1);
    wire_put_key(&wb, "inputs");
    wire_pack_object(&wb, fl);
    if (!(k->list = malloc(wb.sb.size))) {
        wire_buf_free(&wb);
        fail(L, k, true, "the batch role ran out of memory%s", "");
        return;
    }
    memcpy(k->list, wb.sb.data, wb.sb.size);
    k->list_len = wb.sb.size;
    wire_buf_free(&wb);
    k->nfiles = fl->via.array.size;
    k->issue = wire_get_u64(t, "ckpt_issue", 0);
    k->cur = 0;
    next_chunk(L, k);
}

int live_carry_step(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    uint64_t eid = live_eid(j->id, e);
    struct lcarry *k = find(L, eid);
    if (!el || !el->mig_cjob || el->mig_cl < 0 || el->mig_cl >= L->ncl)
        return -1;
    if (k && k->cjob != el->mig_cjob) { /* about another kept job: begin again */
        drop(L, k);
        k = NULL;
    }
    if (k)
        return k->st == CK_DONE ? 0 : k->st == CK_FAILED ? -1 : 1;
    if (L->ncarries == L->capcarries) {
        uint32_t nc = L->capcarries ? L->capcarries * 2 : 16;
        void *p = realloc(L->carries, nc * sizeof *L->carries);
        if (!p)
            return -1; /* starts from the start */
        L->carries = p, L->capcarries = nc;
    }
    k = &L->carries[L->ncarries++];
    *k = (struct lcarry){eid, el->mig_cjob, el->mig_cl, CK_LIST, NULL, 0, 0, 0, 0, NULL};
    struct lclu *old = &L->cl[k->cl];
    if (old->st == 0) { /* down (liveclu.c): a request would wait for its resync */
        fail(L, k, false, "cluster %s, which holds its checkpoint, does not answer", old->name);
        return -1;
    }
    char r[300];
    snprintf(r, sizeof r, "copying its checkpoint from cluster %s", old->name);
    live_elem_reason(L, j, e, r);
    send_list(L, k);
    return 1;
}

uint32_t live_carry_nfields(struct live *L, uint64_t eid)
{
    struct lcarry *k = find(L, eid);
    return k && k->st == CK_DONE;
}

void live_carry_put(struct live *L, uint64_t eid, struct wire_buf *wb)
{
    struct lcarry *k = find(L, eid);
    msgpack_unpacked up;
    if (!k || k->st != CK_DONE)
        return;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, k->list, k->list_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        wire_put_key(wb, "ckpt");
        wire_pack_object(wb, wire_get(&up.data, "inputs"));
    }
    msgpack_unpacked_destroy(&up);
}

int live_carry_offer(struct live *L, struct lclu *c, uint64_t eid, char *why, size_t wl)
{
    struct lcarry *k = find(L, eid);
    if (!k || k->st != CK_DONE || !c->offer)
        return 1;
    /* charged to nobody at the cluster, as a node's checkpoint upload */
    int rc =
        fileoffer_inputs(c->offer, L, c, k->list, k->list_len, UINT32_MAX, NULL, false, why, wl);
    if (rc < 0) { /* refused there (its limits): the task starts from the start */
        char w[600];
        snprintf(w, sizeof w, "%s", why);
        fail(L, k, false, "%s", w);
        return 1;
    }
    return rc;
}

bool live_carry_refused(struct live *L, uint64_t eid, const char *msg)
{
    struct lcarry *k = find(L, eid);
    if (!k || k->st != CK_DONE)
        return false;
    fail(L, k, false, "the cluster refused the checkpoint carried to it (%s)", msg);
    return true;
}

bool live_carry_forget(struct live *L, uint64_t eid)
{
    struct lcarry *k = find(L, eid);
    bool had = k && k->st == CK_DONE;
    if (k)
        drop(L, k);
    return had;
}

void live_carry_reply(struct live *L, struct lclu *c, int kind, uint64_t arg,
                      const struct wire_msg *m)
{
    struct lcarry *k = find(L, arg);
    if (!k || k->cl != c->idx || (k->st != CK_LIST && k->st != CK_GET))
        return;
    if (m->type == WT_ERROR) {
        char msg[400];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        char w[500];
        snprintf(w, sizeof w, "cluster %s: %s", c->name, msg);
        fail(L, k, true, "its checkpoint could not be copied from %s", w);
    } else if (kind == RK_CKLIST && k->st == CK_LIST && m->type == WT_JOB) {
        list_reply(L, k, m);
    } else if (kind == RK_CKGET && k->st == CK_GET && m->type == WT_FILE_DATA) {
        char peer[BATCH_NAME_MAX + 16], note[700];
        snprintf(peer, sizeof peer, "cluster %s", c->name);
        if (fileoffer_take_chunk(L->files, m, UINT64_MAX, "the cluster", peer, NULL, note,
                                 sizeof note) < 0)
            fail(L, k, true, "%s", note);
        else
            next_chunk(L, k);
    }
}

void live_carry_reset(struct live *L, struct lclu *c)
{
    for (uint32_t i = 0; i < L->ncarries; i++) {
        struct lcarry *k = &L->carries[i];
        if (k->cl == c->idx && (k->st == CK_LIST || k->st == CK_GET))
            fail(L, k, true, "cluster %s, which holds its checkpoint, does not answer", c->name);
    }
}

void live_carry_free(struct live *L)
{
    while (L->ncarries)
        drop(L, &L->carries[0]);
    free(L->carries);
    L->carries = NULL;
    L->capcarries = 0;
}

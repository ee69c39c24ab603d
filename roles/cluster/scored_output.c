/*
 * scored_output.c - the output of parallel processes: each rank's stdout and stderr
 * (bounded and marked truncated by the node, run.max_output_kb) arrive with its exit in
 * PSYNC and are kept in the "poutput" table, key (job, rank), value a map {stdout,
 * stderr, out_trunc, err_trunc, received} and, for a rank that kept output files (issue
 * 26), "files" and "files_note" as a task result's. The record is written in the turn that
 * records the exit, so it is committed before the PSYNC_ACK that stops listing the
 * process (after which the node forgets it); a repeated exit report is ignored with the
 * exit (scored_psync.c). JOB replies read the records back (JOB_GET output).
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

int scored_output_put(struct cluster *c, const struct pjob *j, uint32_t rank,
                      const msgpack_object *e, const char *files_bad)
{
    size_t no = 0, ne = 0, nl = 0;
    const void *out = wire_get_bin(e, "stdout", &no), *err = wire_get_bin(e, "stderr", &ne);
    bool ot = wire_get_bool(e, "out_trunc", false), et = wire_get_bool(e, "err_trunc", false);
    const msgpack_object *fl = files_bad ? NULL : wire_get(e, "files");
    const char *note = files_bad ? files_bad : wire_get_str(e, "files_note", &nl);
    if (files_bad)
        nl = strlen(files_bad);
    bool files = fl && fl->type == MSGPACK_OBJECT_ARRAY && fl->via.array.size > 0;
    if (no == 0 && ne == 0 && !ot && !et && !files && !nl)
        return 0; /* nothing to keep */
    struct wire_buf wb;
    uint8_t key[12];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 5 + files + (nl > 0));
    wire_put_bin(&wb, "stdout", out ? out : "", no);
    wire_put_bin(&wb, "stderr", err ? err : "", ne);
    wire_put_bool(&wb, "out_trunc", ot);
    wire_put_bool(&wb, "err_trunc", et);
    wire_put_i64(&wb, "received", wall_now_ms());
    if (files) { /* issue 26: checked whole here by the caller */
        wire_put_key(&wb, "files");
        wire_pack_object(&wb, fl);
    }
    if (nl)
        wire_put_strn(&wb, "files_note", note, nl > 1024 ? 1024 : nl);
    store_key_u64_u32(key, j->id, rank);
    int rc = store_put(c->store, c->sd->t_poutput, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

/* ---- reading back (JOB) ---- */

static const char *const out_keys[] = {"stdout",    "stderr", "out_trunc",
                                       "err_trunc", "files",  "files_note"};

struct out_walk {
    const struct cluster *c;
    const struct pjob *j;
    struct wire_buf *wb;
    struct pj_output *out;
    uint32_t next; /* next rank to pack */
};

/* Packs the ranks [w->next, upto) without output. */
static void walk_plain(struct out_walk *w, uint32_t upto)
{
    for (; w->next < upto; w->next++)
        scored_pack_rank(w->c, w->j, w->next, w->wb, 0);
}

/* One stored record of the job, in rank order: its rank with its output. */
static int walk_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct out_walk *w = arg;
    if (klen != 12 || store_key_get_u64(key) != w->j->id)
        return 1;
    uint32_t rank = store_key_get_u32((const uint8_t *)key + 8);
    if (rank >= w->out->to || rank < w->next)
        return rank >= w->out->to;
    if (w->wb->sb.size > CLUSTER_REPLY_MAX) {
        w->out->next = rank; /* the reply is full: the rest without output */
        return 1;
    }
    walk_plain(w, rank);
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (wire_precheck(val, vlen) < 0 || msgpack_unpack_next(&up, val, vlen, &off) != 2 ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return 0; /* unreadable: packed plain by the next call */
    }
    uint32_t n = 0;
    for (size_t i = 0; i < sizeof out_keys / sizeof out_keys[0]; i++)
        n += wire_get(&up.data, out_keys[i]) != NULL;
    scored_pack_rank(w->c, w->j, rank, w->wb, n);
    for (size_t i = 0; i < sizeof out_keys / sizeof out_keys[0]; i++) {
        const msgpack_object *v = wire_get(&up.data, out_keys[i]);
        if (v) {
            wire_put_key(w->wb, out_keys[i]);
            wire_pack_object(w->wb, v);
        }
    }
    w->next = rank + 1;
    msgpack_unpacked_destroy(&up);
    return 0;
}

/* Packs the nprocs rank maps of j, with stored outputs for out's window. */
static void pack_ranks(const struct cluster *c, const struct pjob *j, struct wire_buf *wb,
                       struct pj_output *out)
{
    struct out_walk w = {c, j, wb, out, 0};
    uint8_t key[12];
    if (out->to > j->rq.nprocs)
        out->to = j->rq.nprocs;
    if (out->from > out->to)
        out->from = out->to;
    out->next = out->to;
    store_key_u64_u32(key, j->id, out->from);
    if (out->from < out->to)
        store_iter(c->store, c->sd->t_poutput, key, sizeof key, walk_one, &w);
    walk_plain(&w, j->rq.nprocs);
}

void scored_pack_job_output(const struct cluster *c, const struct pjob *j, struct wire_buf *wb,
                            struct pj_output *out)
{
    scored_pack_job_head(c, j, wb);
    if (j->ranks)
        pack_ranks(c, j, wb, out);
}

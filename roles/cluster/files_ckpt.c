/*
 * files_ckpt.c - tasks' checkpoints at the cluster (issue 26, files.h, docs/data.md
 * "Checkpoints"): a node running a task of a job submitted with --checkpoint-s uploads
 * the files of the task's checkpoint directory (FILE_HAVE, FILE_PUT) and names them with
 * CKPT; the latest is kept per task in table "ckpt" (key: job, task; value: the issue
 * that made it, when, its files), replacing the older one, and handed to the node the
 * task is issued to next. A batch role moving a task from another cluster names that
 * cluster's latest checkpoint in its SUBMIT ("ckpt"): kept with the job's files map,
 * it is the task's latest until the task records its own. Records of finished tasks and of purged
 * jobs go at the sweep, and with them the files only they named.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "store/store.h"

void files_h_ckpt(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root, *fl = wire_get(m, "files");
    size_t len;
    char why[600];
    const char *sid = wire_get_str(m, "sid", &len);
    struct node *n = cluster_node_find(c, sid, len);
    uint64_t id = wire_get_u64(m, "job", 0), idx = wire_get_u64(m, "idx", 0);
    struct job *j = cluster_job_find(c, id);
    if (!n) {
        cluster_reply_error(r, WE_SESSION, "unknown session id '%.*s': send HELLO to get a new one",
                            (int)(len > 64 ? 64 : len), sid ? sid : "");
        return;
    }
    if (sessions_authorize(c, n, r->msg->desc->name, why, sizeof why) < 0) {
        cluster_reply_error(r, WE_DENIED, "%s", why);
        return;
    }
    if (wire_get(m, "gen")) { /* a parallel job's rank (files_pckpt.c) */
        files_pckpt_h(c, r, (uint32_t)(n - c->nodes));
        return;
    }
    if (!j || idx >= j->next_new || j->tasks[idx].state != TS_ISSUED ||
        j->tasks[idx].node != (uint32_t)(n - c->nodes)) {
        cluster_reply_error(r, WE_REFUSED, "task %llu.%llu is not issued to this node (any more)",
                            (unsigned long long)id, (unsigned long long)idx);
        return;
    }
    if (!j->ckpt_s) {
        cluster_reply_error(r, WE_REFUSED, "job %llu was not submitted with --checkpoint-s",
                            (unsigned long long)id);
        return;
    }
    const char *bad = files_ckpt_check(c, fl, "task", why, sizeof why);
    if (bad) {
        cluster_reply_error(r, WE_REFUSED, "%s", bad);
        return;
    }
    struct wire_buf wb;
    uint8_t key[12];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 3);
    wire_put_u64(&wb, "issue", wire_get_u64(m, "issue", 0));
    wire_put_i64(&wb, "t", wall_now_ms());
    wire_put_key(&wb, "files");
    wire_pack_object(&wb, fl);
    store_key_u64_u32(key, id, (uint32_t)idx);
    int rc = store_put(c->store, c->t_ckpt, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    if (rc < 0) {
        cluster_reply_error(r, WE_STORAGE,
                            "the cluster could not record the checkpoint; retry later");
        return;
    }
    log_debug("task %llu.%llu: checkpoint of %u file(s) from %s", (unsigned long long)id,
              (unsigned long long)idx, fl->via.array.size, n->name);
    wire_begin(r->reply, WT_OK, r->msg->id, 0); /* sent after the turn's commit */
}

/* ---- a checkpoint carried in by SUBMIT "ckpt" (a batch role moving a task) ---- */

/* Issue 26: the SUBMIT's "ckpt" kept in the job's files map (j->data, table "jobdata"),
 * an array of up (which the caller destroys), or NULL. Kept there rather than in table
 * "ckpt" because the map is in memory from the SUBMIT's turn on: a node asking for the
 * task in that very turn (before the commit makes a record readable) gets it too. */
static const msgpack_object *carried(const struct job *j, msgpack_unpacked *up)
{
    msgpack_unpacked_init(up);
    if (!j->ckpt_s || !j->data ||
        msgpack_unpack_next(up, j->data, j->data_len, NULL) != MSGPACK_UNPACK_SUCCESS)
        return NULL;
    const msgpack_object *fl = wire_get(&up->data, "ckpt");
    return fl && fl->type == MSGPACK_OBJECT_ARRAY && fl->via.array.size ? fl : NULL;
}

const char *files_ckpt_submit_check(struct cluster *c, const msgpack_object *m, uint64_t ntasks,
                                    char *why, size_t wl)
{
    const msgpack_object *fl = wire_get(m, "ckpt");
    if (!fl)
        return NULL;
    if (!wire_get_u64(m, "checkpoint_s", 0))
        return "ckpt (a task's checkpoint carried from another cluster) needs checkpoint_s";
    if (ntasks != 1)
        return "ckpt (a task's checkpoint carried from another cluster) needs ntasks 1";
    return files_ckpt_check(c, fl, "task", why, wl);
}

int files_ckpt_jobdata_pack(const msgpack_object *m, struct wire_buf *wb)
{
    wire_pack_map(wb, 4); /* filestore_jobdata_pack's map, and "ckpt" */
    wire_put_u64(wb, "checkpoint_s", wire_get_u64(m, "checkpoint_s", 0));
    filestore_put_lists(m, wb);
    wire_put_key(wb, "ckpt");
    wire_pack_object(wb, wire_get(m, "ckpt"));
    return 1;
}

void files_ckpt_mark_carried(struct cluster *c, const struct job *j,
                             int (*fn)(void *arg, const msgpack_object *e), void *arg)
{
    msgpack_unpacked up;
    const msgpack_object *fl = carried(j, &up);
    (void)c;
    if (fl && j->state != JS_DONE && j->state != JS_CANCELLED &&
        (j->next_new == 0 || j->tasks[0].state != TS_DONE))
        for (uint32_t i = 0; i < fl->via.array.size; i++)
            fn(arg, &fl->via.array.ptr[i]);
    msgpack_unpacked_destroy(&up);
}

/* ---- the latest checkpoint of a task in its maps ---- */

/* The record files_ckpt_nfields (or files_ckpt_row_nfields) read for the pack that
 * follows (one task map at a time); carried: none recorded, the SUBMIT's "ckpt" is. */
static struct {
    uint64_t job;
    uint32_t idx;
    struct files_rec rec;
    bool carried;
} last;

/* Reads task idx's latest checkpoint into last: whether it has one. */
static bool latest_read(struct cluster *c, const struct job *j, uint32_t idx)
{
    uint8_t key[12];
    files_rec_clear(&last.rec);
    last.carried = false;
    if (!j->ckpt_s)
        return false;
    last.job = j->id, last.idx = idx;
    store_key_u64_u32(key, j->id, idx);
    if (!files_rec_get(c, c->t_ckpt, key, sizeof key, &last.rec) && idx == 0) {
        msgpack_unpacked up;
        last.carried = carried(j, &up) != NULL;
        msgpack_unpacked_destroy(&up);
    }
    return last.rec.have || last.carried;
}

/* Writes "ckpt" and "ckpt_issue" of what latest_read found for task idx of j. */
static void latest_pack(const struct job *j, uint32_t idx, struct wire_buf *tb)
{
    if (last.job != j->id || last.idx != idx)
        return;
    if (last.rec.have) {
        wire_put_key(tb, "ckpt");
        wire_pack_object(tb, wire_get(&last.rec.up.data, "files"));
        wire_put_u64(tb, "ckpt_issue", wire_get_u64(&last.rec.up.data, "issue", 0));
    } else if (last.carried) {
        msgpack_unpacked up;
        wire_put_key(tb, "ckpt");
        wire_pack_object(tb, carried(j, &up));
        wire_put_u64(tb, "ckpt_issue", 0); /* no issue here made it */
        msgpack_unpacked_destroy(&up);
    }
    files_rec_clear(&last.rec);
    last.carried = false;
}

uint32_t files_ckpt_nfields(struct cluster *c, const struct job *j, uint32_t idx)
{
    bool have = latest_read(c, j, idx);
    return j->ckpt_s ? 2 + 2 * have : 0;
}

void files_ckpt_pack(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *tb)
{
    if (!j->ckpt_s)
        return;
    wire_put_u64(tb, "checkpoint_s", j->ckpt_s);
    wire_put_u64(tb, "ckpt_mb", (uint64_t)c->cfg.files_ckpt_mb);
    latest_pack(j, idx, tb);
}

uint32_t files_ckpt_row_nfields(struct cluster *c, const struct job *j, uint32_t idx)
{
    return latest_read(c, j, idx) ? 2 : 0;
}

void files_ckpt_row_pack(const struct job *j, uint32_t idx, struct wire_buf *tb)
{
    latest_pack(j, idx, tb);
}

/* ---- finding and sweeping ---- */

struct ck_walk {
    struct cluster *c;
    uint64_t job; /* UINT64_MAX: every job */
    const uint8_t *d;
    bool found;
    int rc;
};

/* Calls fn for each file map of the record val. */
static void each_file(const void *val, size_t vlen, void (*fn)(struct ck_walk *w, const uint8_t *d),
                      struct ck_walk *w)
{
    msgpack_unpacked up;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return;
    const msgpack_object *fl = wire_get(&up.data, "files");
    for (uint32_t i = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++) {
        size_t hl;
        uint8_t d[SHA256_LEN];
        const char *h = wire_get_str(&fl->via.array.ptr[i], "hash", &hl);
        if (filestore_parse_hash(h, hl, d) == 0)
            fn(w, d);
    }
    msgpack_unpacked_destroy(&up);
}

static void match(struct ck_walk *w, const uint8_t *d)
{
    if (!memcmp(d, w->d, SHA256_LEN))
        w->found = true;
}

static int find_in(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct ck_walk *w = arg;
    if (klen != 12 || store_key_get_u64(key) != w->job)
        return 1;
    each_file(val, vlen, match, w);
    return w->found;
}

bool files_ckpt_names(struct cluster *c, const struct job *j, const uint8_t d[SHA256_LEN])
{
    uint8_t key[12];
    struct ck_walk w = {c, j->id, d, false, 0};
    if (!j->ckpt_s)
        return false;
    store_key_u64_u32(key, j->id, 0);
    store_iter(c->store, c->t_ckpt, key, sizeof key, find_in, &w);
    if (w.found)
        return true;
    msgpack_unpacked up; /* a checkpoint carried in with the SUBMIT */
    const msgpack_object *fl = carried(j, &up);
    for (uint32_t i = 0; fl && !w.found && i < fl->via.array.size; i++) {
        size_t hl;
        uint8_t d2[SHA256_LEN];
        const char *h = wire_get_str(&fl->via.array.ptr[i], "hash", &hl);
        w.found = filestore_parse_hash(h, hl, d2) == 0 && !memcmp(d2, d, SHA256_LEN);
    }
    msgpack_unpacked_destroy(&up);
    return w.found;
}

static void mark(struct ck_walk *w, const uint8_t *d)
{
    struct fsfile *f = filestore_find(w->c->files, d);
    if (f)
        f->mark = true;
}

static int sweep_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct ck_walk *w = arg;
    if (klen != 12)
        return 0;
    uint64_t id = store_key_get_u64(key);
    uint32_t idx = store_key_get_u32((const uint8_t *)key + 8);
    struct job *j = cluster_job_find(w->c, id);
    if (j && idx < j->next_new && j->tasks[idx].state != TS_DONE && j->state != JS_DONE &&
        j->state != JS_CANCELLED) {
        each_file(val, vlen, mark, w);
        return 0;
    }
    if (store_del(w->c->store, w->c->t_ckpt, key, klen) < 0)
        w->rc = -1;
    return 0;
}

int files_ckpt_sweep(struct cluster *c)
{
    struct ck_walk w = {c, UINT64_MAX, NULL, false, 0};
    if (store_iter(c->store, c->t_ckpt, NULL, 0, sweep_one, &w) < 0)
        return -1;
    return w.rc;
}

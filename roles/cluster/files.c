/*
 * files.c - files through the cluster (issue 26, files.h, docs/data.md): the FILE_HAVE,
 * FILE_PUT and FILE_GET requests, a job's "inputs" and "outputs" checked and kept at
 * SUBMIT (table "jobdata"), and the part of each task map that names them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/loop.h"
#include "lib/datapath.h"
#include "lib/log.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

static uint64_t limit_bytes(const struct cluster *c)
{
    return (uint64_t)c->cfg.files_job_mb << 20;
}

/* The level's limits (filestore.h). */
static struct filestore_limits limits(const struct cluster *c)
{
    /* a SUBMIT may name an upload under way: another user takes it over only once it
       counts as stalled for the reads waiting on it too (files.upload_wait_s) */
    return (struct filestore_limits){limit_bytes(c), (uint64_t)c->cfg.files_user_mb << 20, true,
                                     NULL, (int64_t)c->cfg.files_upload_wait_s * 1000};
}

/* Whom a new upload is charged to: the request's "user" (access control sets it to the
 * key's name under CURVE), nobody for a node (its outputs and checkpoints). */
static const char *uploader(const struct request *r, char *buf, size_t n)
{
    const struct curve_ident *who = curve_current();
    if (who && who->kind == CURVE_NODE)
        return NULL;
    wire_get_strbuf(r->msg->root, "user", buf, n);
    return *buf ? buf : NULL;
}

void files_h_have(struct cluster *c, struct request *r)
{
    struct filestore_limits lim = limits(c);
    char user[FILESTORE_USER_MAX];
    filestore_h_have(c->files, &lim, r->msg, uploader(r, user, sizeof user), r->reply);
}

void files_h_put(struct cluster *c, struct request *r)
{
    struct filestore_limits lim = limits(c);
    char user[FILESTORE_USER_MAX];
    size_t hl;
    uint8_t d[SHA256_LEN];
    const char *hex = wire_get_str(r->msg->root, "hash", &hl);
    filestore_h_put(c->files, &lim, r->msg, uploader(r, user, sizeof user), r->reply);
    if (filestore_parse_hash(hex, hl, d) == 0)
        files_cut_progress(c, d); /* the reads waiting for this chunk (cut-through) */
}

/* Calls fn for each entry of j's "inputs" that task idx gets (filestore.h). */
typedef int input_fn(void *arg, const msgpack_object *in);
static int each_input(const struct job *j, uint32_t idx, input_fn *fn, void *arg)
{
    return filestore_each_input(j->data, j->data_len, idx, fn, arg);
}

static int is_hash(void *arg, const msgpack_object *in)
{
    size_t hl;
    const char *h = wire_get_str(in, "hash", &hl);
    return h && hl == 64 && !memcmp(h, arg, 64);
}

/* Whether hex names an output task idx of j kept (its stored result's "files"). */
static bool is_output(struct cluster *c, const struct job *j, uint32_t idx, const char *hex)
{
    uint8_t key[12];
    void *val;
    size_t vlen;
    bool found = false;
    store_key_u64_u32(key, j->id, idx);
    if (store_get(c->store, c->t_results, key, sizeof key, &val, &vlen) != 0)
        return false;
    msgpack_unpacked up;
    if (cluster_unpack_map(&up, val, vlen) == 0) {
        const msgpack_object *fl = wire_get(&up.data, "files");
        for (uint32_t i = 0;
             !found && fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
            found = is_hash((void *)hex, &fl->via.array.ptr[i]);
        msgpack_unpacked_destroy(&up);
    }
    free(val);
    return found;
}

void files_h_get(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    uint8_t d[SHA256_LEN];
    size_t hl;
    const char *hex = wire_get_str(m, "hash", &hl);
    uint64_t id = wire_get_u64(m, "job", 0), off = wire_get_u64(m, "off", 0);
    uint64_t len = wire_get_u64(m, "len", 0);
    bool out = wire_get(m, "idx") != NULL;
    uint32_t idx = (uint32_t)wire_get_u64(m, "idx", 0);
    struct job *j = cluster_job_find(c, id);
    struct pjob *pj = j || !c->sd ? NULL : scored_job_find(c, id); /* a parallel job's */
    const struct curve_ident *who = curve_current();
    if (filestore_parse_hash(hex, hl, d) < 0) {
        cluster_reply_error(r, WE_INVALID, "hash must be a SHA-256 as 64 lower-case hex digits");
        return;
    }
    if (!j && !pj) {
        cluster_reply_error(r, WE_NOT_FOUND, "no job %llu (gridnode jobs lists them)",
                            (unsigned long long)id);
        return;
    }
    bool node = who && who->kind == CURVE_NODE;
    if (!node && !curve_may_touch(j ? j->user : pj->user)) {
        cluster_reply_error(
            r, WE_DENIED,
            "job %llu belongs to another user; only its owner and the administrators "
            "may read its files",
            (unsigned long long)id);
        return;
    }
    if (node && out) {
        cluster_reply_error(r, WE_DENIED, "nodes read the inputs of jobs, not their outputs");
        return;
    }
    struct fsfile *f = filestore_find(c->files, d);
    bool named = pj ? files_par_names(c, pj, out, idx, hex) ||
                          (!out && files_pckpt_names(c, pj, hex)) /* a rank's checkpoint */
                 : out ? idx < j->ntasks && is_output(c, j, idx, hex)
                       : each_input(j, UINT32_MAX, is_hash, (void *)hex) > 0 ||
                             files_ckpt_names(c, j, d); /* a checkpoint to migrate */
    if (!named || !f || (!f->done && out)) {
        cluster_reply_error(r, WE_NOT_FOUND, "job %llu has no %s file %.12s%s",
                            (unsigned long long)id, out ? "output" : "input", hex,
                            named ? " here: its upload failed, or it was purged" : "");
        return;
    }
    if (off > f->size)
        off = f->size;
    if (len > f->size - off)
        len = f->size - off;
    files_cut_get(c, r, f, off, len); /* an input may still be uploading (cut-through) */
}

/* ---- a job's files ---- */

const char *files_submit_check(struct cluster *c, const msgpack_object *m, uint64_t ntasks,
                               char *why, size_t wl)
{
    struct filestore_limits lim = limits(c);
    char user[FILESTORE_USER_MAX];
    wire_get_strbuf(m, "user", user, sizeof user); /* a user names only its own uploads */
    lim.early_user = user;
    const char *bad = filestore_submit_check(c->files, &lim, m, ntasks, why, wl);
    return bad ? bad : files_ckpt_submit_check(c, m, ntasks, why, wl); /* a carried one */
}

int files_job_attach(struct cluster *c, struct job *j, const msgpack_object *m)
{
    j->ckpt_s = (uint32_t)wire_get_u64(m, "checkpoint_s", 0); /* bounded by its descriptor */
    struct wire_buf wb;
    uint8_t key[8];
    wire_buf_init(&wb);
    if (!(wire_get(m, "ckpt") ? files_ckpt_jobdata_pack(m, &wb) : filestore_jobdata_pack(m, &wb))) {
        wire_buf_free(&wb);
        return 0;
    }
    store_key_u64(key, j->id);
    int rc = -1;
    if ((j->data = malloc(wb.sb.size))) {
        memcpy(j->data, wb.sb.data, wb.sb.size);
        j->data_len = wb.sb.size;
        rc = store_put(c->store, c->t_jobdata, key, sizeof key, wb.sb.data, wb.sb.size);
    }
    wire_buf_free(&wb);
    return rc;
}

uint32_t files_task_nfields(struct cluster *c, const struct job *j, uint32_t idx)
{
    return j->data ? 2 + files_ckpt_nfields(c, j, idx) : 0;
}

void files_task_pack(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *tb)
{
    uint32_t n = 0;
    if (!j->data)
        return;
    files_ckpt_pack(c, j, idx, tb); /* its latest checkpoint, when it has one */
    each_input(j, idx, filestore_count_input, &n);
    wire_put_key(tb, "inputs");
    wire_pack_array(tb, n);
    each_input(j, idx, filestore_pack_input, tb);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    const msgpack_object *out = NULL;
    if (msgpack_unpack_next(&up, j->data, j->data_len, NULL) == MSGPACK_UNPACK_SUCCESS)
        out = wire_get(&up.data, "outputs");
    wire_put_key(tb, "outputs");
    if (out && out->type == MSGPACK_OBJECT_ARRAY)
        wire_pack_object(tb, out);
    else
        wire_pack_array(tb, 0);
    msgpack_unpacked_destroy(&up);
}

/* The i-th entry of a result's "files" as held here, or NULL. */
static struct fsfile *result_file(struct cluster *c, const msgpack_object *fl, uint32_t i)
{
    const msgpack_object *e = &fl->via.array.ptr[i];
    size_t hl;
    const char *h = wire_get_str(e, "hash", &hl);
    uint8_t d[SHA256_LEN];
    return filestore_parse_hash(h, hl, d) < 0 ? NULL : filestore_find(c->files, d);
}

const char *files_result_check(struct cluster *c, const char *owner, const msgpack_object *res,
                               char *why, size_t wl)
{
    const msgpack_object *fl = wire_get(res, "files");
    for (uint32_t i = 0; fl && i < fl->via.array.size; i++) {
        const msgpack_object *e = &fl->via.array.ptr[i];
        size_t nl, hl;
        const char *name = wire_get_str(e, "name", &nl), *h = wire_get_str(e, "hash", &hl);
        const char *bad = datapath_problem(name, nl);
        uint8_t d[SHA256_LEN];
        struct fsfile *f = filestore_parse_hash(h, hl, d) < 0 ? NULL : filestore_find(c->files, d);
        if (!bad && (!f || !f->done || f->size != wire_get_u64(e, "size", 0)))
            bad = "was not uploaded whole before the result";
        if (bad) {
            snprintf(why, wl, "output '%.*s' %s", (int)(nl > 200 ? 200 : nl), name, bad);
            return why;
        }
    }
    for (uint32_t i = 0; fl && i < fl->via.array.size; i++)
        if (filestore_charge(c->files, result_file(c, fl, i), owner) < 0)
            c->turn_failed = true;
    return NULL;
}

/* One stored "jobdata" record onto its job; a record of a purged job is deleted. */
static int load_jobdata(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    if (klen != 8)
        return 0;
    struct job *j = cluster_job_find(c, store_key_get_u64(key));
    if (!j)
        return store_del(c->store, c->t_jobdata, key, klen) < 0 ? -1 : 0;
    free(j->data);
    if (!(j->data = malloc(vlen ? vlen : 1)))
        return -1;
    memcpy(j->data, val, vlen);
    j->data_len = vlen;
    msgpack_unpacked up;
    if (cluster_unpack_map(&up, val, vlen) == 0) {
        uint64_t s = wire_get_u64(&up.data, "checkpoint_s", 0);
        j->ckpt_s = s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
        msgpack_unpacked_destroy(&up);
    }
    return 0;
}

/* ---- the sweep (docs/data.md "Retention") ---- */

static bool sweep_due;
static int64_t sweep_last_ms;

void files_sweep_note(struct cluster *c)
{
    (void)c;
    sweep_due = true;
}

static int mark_named(void *arg, const msgpack_object *e)
{
    size_t hl;
    uint8_t d[SHA256_LEN];
    const char *h = wire_get_str(e, "hash", &hl);
    struct fsfile *f = filestore_parse_hash(h, hl, d) < 0
                           ? NULL
                           : filestore_find(((struct cluster *)arg)->files, d);
    if (f)
        f->mark = true;
    return 0;
}

struct mark_res {
    struct cluster *c;
    uint64_t job;
};

/* One result record of the job being marked: its kept files. */
static int mark_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct mark_res *m = arg;
    msgpack_unpacked up;
    if (klen != 12 || store_key_get_u64(key) != m->job)
        return 1;
    if (cluster_unpack_map(&up, val, vlen) == 0) {
        const msgpack_object *fl = wire_get(&up.data, "files");
        for (uint32_t i = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
            mark_named(m->c, &fl->via.array.ptr[i]);
        msgpack_unpacked_destroy(&up);
    }
    return 0;
}

static int unmark(struct filestore *fs, struct fsfile *f, void *arg)
{
    (void)fs, (void)arg;
    f->mark = false;
    return 0;
}

static int drop_unnamed(struct filestore *fs, struct fsfile *f, void *arg)
{
    int64_t older = *(int64_t *)arg;
    if (f->mark || f->t_ms > older)
        return 0;
    char hex[SHA256_HEX];
    sha256_hex(f->d, hex);
    log_info("file %.12s (%llu bytes) deleted: no job names it", hex, (unsigned long long)f->size);
    return filestore_drop(fs, f) < 0 ? -1 : 0;
}

void files_sweep(struct cluster *c)
{
    int64_t now = wall_now_ms();
    if (!c->files || c->purge.n || (!sweep_due && now - sweep_last_ms < 3600 * 1000))
        return;
    sweep_due = false;
    sweep_last_ms = now;
    filestore_each(c->files, unmark, NULL);
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        uint8_t key[12];
        struct mark_res m = {c, j->id};
        if (!j->data)
            continue;
        each_input(j, UINT32_MAX, mark_named, c);
        files_ckpt_mark_carried(c, j, mark_named, c); /* a checkpoint its SUBMIT carried in */
        store_key_u64_u32(key, j->id, 0);
        store_iter(c->store, c->t_results, key, sizeof key, mark_result, &m);
    }
    files_par_each(c, mark_named, c);            /* parallel jobs' inputs and ranks' outputs */
    if (files_ckpt_sweep(c) < 0 ||               /* the checkpoints of unfinished tasks are kept */
        files_pckpt_sweep(c, mark_named, c) < 0) /* and those of parallel jobs not done */
        c->turn_failed = true;
    int64_t older = now - (int64_t)c->cfg.files_keep_s * 1000;
    if (filestore_each(c->files, drop_unnamed, &older) < 0)
        c->turn_failed = true;
}

int files_load(struct cluster *c)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/files", c->cfg.state_dir);
    struct filestore_cfg fc = {c->store,      c->t_files,      dir,
                               "the cluster", &c->turn_failed, &c->load_skipped};
    filestore_destroy(&c->files);
    if (!(c->files = filestore_open(&fc)))
        return -1;
    if (files_pckpt_load(c) < 0) /* parallel jobs' checkpoints (loaded by then) */
        return -1;
    return store_iter(c->store, c->t_jobdata, NULL, 0, load_jobdata, c);
}

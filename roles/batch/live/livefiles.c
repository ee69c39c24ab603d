/*
 * livefiles.c - the batch role's files (issue 26, docs/data.md "Through the batch role"):
 * its content-addressed store (daemon/filestore.h, the cluster's code: STATE_DIR/files,
 * table "files"), FILE_HAVE and FILE_PUT from the user's tool exactly as at a cluster,
 * FILE_GET of a job's inputs and of its tasks' outputs once copied back here, a job's
 * "inputs"/"outputs"/"checkpoint_s" checked and kept at SUBMIT (table "jobdata", the
 * cluster's record shape), and each task's copied outputs (table "elemfiles", key job
 * and task: the cluster's "files" list and "files_note").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

static struct filestore_limits limits(const struct live *L)
{
    return (struct filestore_limits){(uint64_t)L->cfg.live.files_job_mb << 20,
                                     (uint64_t)L->cfg.live.files_user_mb << 20};
}

int live_files_open(struct live *L)
{
    char dir[CONFIG_STR_MAX + 16];
    snprintf(dir, sizeof dir, "%s/files", L->cfg.live.state_dir);
    struct filestore_cfg fc = {L->store, L->t_files, dir, "the batch role", &L->turn_failed, NULL};
    filestore_destroy(&L->files);
    return (L->files = filestore_open(&fc)) ? 0 : -1;
}

void live_files_close(struct live *L)
{
    filestore_destroy(&L->files);
}

/* ---- a job's files ---- */

const char *live_files_check(struct live *L, const msgpack_object *m, bool parallel,
                             uint32_t ntasks, char *why, size_t wl)
{
    if (!wire_get(m, "inputs") && !wire_get(m, "outputs") && !wire_get(m, "checkpoint_s"))
        return NULL;
    if (parallel && wire_get(m, "checkpoint_s"))
        return "checkpoint_s is for task arrays: a parallel job's ranks take inputs and "
               "outputs, not checkpoints (docs/data.md \"Parallel jobs\")";
    struct filestore_limits lim = limits(L);
    if (parallel) /* "task" names a rank (docs/data.md "Parallel jobs") */
        ntasks = (uint32_t)wire_get_u64(m, "procs", 1);
    return filestore_submit_check(L->files, &lim, m, ntasks, why, wl);
}

int live_files_attach(struct live *L, struct ljob *j, const msgpack_object *m)
{
    struct wire_buf wb;
    uint8_t key[8];
    wire_buf_init(&wb);
    if (!filestore_jobdata_pack(m, &wb)) {
        wire_buf_free(&wb);
        return 0;
    }
    store_key_u64(key, j->id);
    int rc = -1;
    if ((j->data = malloc(wb.sb.size))) {
        memcpy(j->data, wb.sb.data, wb.sb.size);
        j->data_len = wb.sb.size;
        rc = store_put(L->store, L->t_jobdata, key, sizeof key, wb.sb.data, wb.sb.size);
    }
    wire_buf_free(&wb);
    return rc;
}

/* One stored "jobdata" record onto its job (a record of no job is dropped). */
static int load_jobdata(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct live *L = arg;
    if (klen != 8)
        return 0;
    struct ljob *j = live_job_find(L, store_key_get_u64(key));
    if (!j)
        return store_del(L->store, L->t_jobdata, key, klen) < 0 ? -1 : 0;
    free(j->data);
    if (!(j->data = malloc(vlen ? vlen : 1)))
        return -1;
    memcpy(j->data, val, vlen);
    j->data_len = vlen;
    return 0;
}

int live_files_load(struct live *L)
{
    if (live_files_open(L) < 0)
        return -1;
    return store_iter(L->store, L->t_jobdata, NULL, 0, load_jobdata, L);
}

int live_files_each_input(const struct ljob *j, uint32_t e,
                          int (*fn)(void *arg, const msgpack_object *in), void *arg)
{
    return filestore_each_input(j->data, j->data_len, e, fn, arg);
}

/* The kept map's field k (an object of up, which the caller destroys), or NULL. */
static const msgpack_object *data_field(const struct ljob *j, msgpack_unpacked *up, const char *k)
{
    msgpack_unpacked_init(up);
    if (!j->data || msgpack_unpack_next(up, j->data, j->data_len, NULL) != MSGPACK_UNPACK_SUCCESS)
        return NULL;
    return wire_get(&up->data, k);
}

bool live_files_has_outputs(const struct ljob *j)
{
    msgpack_unpacked up;
    const msgpack_object *o = data_field(j, &up, "outputs");
    bool has = o && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0;
    msgpack_unpacked_destroy(&up);
    return has;
}

uint32_t live_files_ckpt_s(const struct ljob *j)
{
    msgpack_unpacked up;
    const msgpack_object *o = data_field(j, &up, "checkpoint_s");
    uint64_t s = o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
    msgpack_unpacked_destroy(&up);
    return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

uint32_t live_files_submit_nfields(const struct ljob *j)
{
    return 1 + live_files_has_outputs(j) + (live_files_ckpt_s(j) > 0);
}

void live_files_submit_put(const struct ljob *j, uint32_t e, struct wire_buf *wb)
{
    uint32_t n = 0, ck = live_files_ckpt_s(j);
    live_files_each_input(j, e, filestore_count_input, &n);
    wire_put_key(wb, "inputs");
    wire_pack_array(wb, n);
    live_files_each_input(j, e, filestore_pack_input, wb);
    if (live_files_has_outputs(j)) {
        msgpack_unpacked up;
        const msgpack_object *o = data_field(j, &up, "outputs");
        wire_put_key(wb, "outputs");
        wire_pack_object(wb, o);
        msgpack_unpacked_destroy(&up);
    }
    if (ck) /* the cluster keeps the latest checkpoint of its task (docs/data.md) */
        wire_put_u64(wb, "checkpoint_s", ck);
}

/* ---- a task's outputs, copied back ---- */

int live_files_elem_save(struct live *L, const struct ljob *j, uint32_t e, const void *list,
                         size_t len)
{
    uint8_t key[12];
    store_key_u64_u32(key, j->id, e);
    return store_put(L->store, L->t_elemfiles, key, sizeof key, list, len);
}

uint32_t live_files_row_nfields(struct live *L, const struct ljob *j, uint32_t e, void **rec,
                                size_t *len)
{
    uint8_t key[12];
    msgpack_unpacked up;
    uint32_t n = 0;
    *rec = NULL;
    if (!j->data)
        return 0;
    store_key_u64_u32(key, j->id, e);
    if (store_get(L->store, L->t_elemfiles, key, sizeof key, rec, len) != 0)
        return 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, *rec, *len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP)
        n = up.data.via.map.size;
    msgpack_unpacked_destroy(&up);
    if (!n) {
        free(*rec);
        *rec = NULL;
    }
    return n;
}

void live_files_row_put(void *rec, size_t len, struct wire_buf *wb)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (rec && msgpack_unpack_next(&up, rec, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < up.data.via.map.size; i++) {
            wire_pack_object(wb, &up.data.via.map.ptr[i].key);
            wire_pack_object(wb, &up.data.via.map.ptr[i].val);
        }
    msgpack_unpacked_destroy(&up);
    free(rec);
}

/* ---- the sweep (docs/data.md "Retention") ---- */

static int unmark(struct filestore *fs, struct fsfile *f, void *arg)
{
    (void)fs, (void)arg;
    f->mark = false;
    return 0;
}

static int mark_named(void *arg, const msgpack_object *e)
{
    size_t hl;
    uint8_t d[SHA256_LEN];
    const char *h = wire_get_str(e, "hash", &hl);
    struct fsfile *f = filestore_parse_hash(h, hl, d) < 0 ? NULL : filestore_find(arg, d);
    if (f)
        f->mark = true;
    return 0;
}

/* One "elemfiles" record: the outputs it names are kept. */
static int mark_outputs(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, val, vlen, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *fl = wire_get(&up.data, "files");
        for (uint32_t i = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
            mark_named(arg, &fl->via.array.ptr[i]);
    }
    msgpack_unpacked_destroy(&up);
    return 0;
}

struct sweep {
    int64_t older;
    uint32_t kept, dropped;
};

static int drop_unnamed(struct filestore *fs, struct fsfile *f, void *arg)
{
    struct sweep *sw = arg;
    if (f->mark || f->t_ms > sw->older) {
        sw->kept++;
        return 0;
    }
    sw->dropped++;
    char hex[SHA256_HEX];
    sha256_hex(f->d, hex);
    log_info("file %.12s (%llu bytes) deleted: no job names it", hex, (unsigned long long)f->size);
    return filestore_drop(fs, f) < 0 ? -1 : 0;
}

void live_files_sweep(struct live *L)
{
    static int64_t last_ms;
    int64_t now = wall_now_ms();
    if (!L->files || (last_ms && now - last_ms < 3600 * 1000))
        return;
    last_ms = now;
    filestore_each(L->files, unmark, NULL);
    for (uint32_t i = 0; i < L->njobs; i++)
        live_files_each_input(L->jobs[i], UINT32_MAX, mark_named, L->files);
    for (uint32_t i = 0; i < L->npulls; i++) /* outputs being copied: not listed yet */
        if (L->pulls[i].list)
            mark_outputs(L->files, NULL, 0, L->pulls[i].list, L->pulls[i].list_len);
    struct sweep sw = {now - L->cfg.live.files_keep_s * 1000, 0, 0};
    if (store_iter(L->store, L->t_elemfiles, NULL, 0, mark_outputs, L->files) < 0 ||
        filestore_each(L->files, drop_unnamed, &sw) < 0)
        L->turn_failed = true;
    log_debug("files: swept: %u kept, %u deleted", sw.kept, sw.dropped);
}

/* ---- the requests ---- */

/* Whom a new upload is charged to: the request's "user" (set by access control to the
 * key's name under CURVE). */
static const char *uploader(const struct wire_msg *m, char *buf, size_t n)
{
    wire_get_strbuf(m->root, "user", buf, n);
    return *buf ? buf : NULL;
}

static int is_hash(void *arg, const msgpack_object *in)
{
    size_t hl;
    const char *h = wire_get_str(in, "hash", &hl);
    return h && hl == 64 && !memcmp(h, arg, 64);
}

/* Whether hex is an output of element e of j copied back here. */
static bool is_output(struct live *L, const struct ljob *j, uint32_t e, const char *hex)
{
    void *rec;
    size_t len;
    bool found = false;
    if (!live_files_row_nfields(L, j, e, &rec, &len))
        return false;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, rec, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *fl = wire_get(&up.data, "files");
        for (uint32_t i = 0;
             !found && fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
            found = is_hash((void *)hex, &fl->via.array.ptr[i]);
    }
    msgpack_unpacked_destroy(&up);
    free(rec);
    return found;
}

/* FILE_GET: a chunk of an input of a job, or of an output of one of its tasks. */
static void h_get(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    uint8_t d[SHA256_LEN];
    size_t hl;
    const char *hex = wire_get_str(m->root, "hash", &hl);
    uint64_t id = wire_get_u64(m->root, "job", 0), off = wire_get_u64(m->root, "off", 0);
    uint64_t len = wire_get_u64(m->root, "len", 0);
    bool out = wire_get(m->root, "idx") != NULL;
    uint64_t idx = wire_get_u64(m->root, "idx", 0);
    struct ljob *j = live_job_find(L, id);
    const struct curve_ident *who = curve_current();
    if (filestore_parse_hash(hex, hl, d) < 0) {
        live_fail(reply, m->id, WE_INVALID, "hash must be a SHA-256 as 64 lower-case hex digits");
        return;
    }
    if (!j) {
        live_fail(reply, m->id, WE_NOT_FOUND, "no job %llu (gridnode jobs lists them)",
                  (unsigned long long)id);
        return;
    }
    if ((who && who->kind == CURVE_NODE) || !curve_may_touch(j->user)) {
        live_fail(reply, m->id, WE_DENIED,
                  "job %llu belongs to another user; only its owner and the administrators "
                  "may read its files",
                  (unsigned long long)id);
        return;
    }
    struct fsfile *f = filestore_find(L->files, d);
    bool named = out ? idx < j->ntasks && is_output(L, j, (uint32_t)idx, hex)
                     : live_files_each_input(j, UINT32_MAX, is_hash, (void *)hex) > 0;
    if (!named || !f || !f->done) {
        live_fail(reply, m->id, WE_NOT_FOUND, "job %llu has no %s file %.12s%s",
                  (unsigned long long)id, out ? "output" : "input", hex,
                  named ? " stored here (it was removed)" : "");
        return;
    }
    off = off > f->size ? f->size : off;
    len = len > f->size - off ? f->size - off : len;
    void *buf = malloc(len ? len : 1);
    ssize_t got = buf ? filestore_read(L->files, f, off, buf, len) : -1;
    if (got != (ssize_t)len) {
        log_warn("files: cannot read %.12s", hex);
        live_fail(reply, m->id, WE_STORAGE, "the batch role could not read file %.12s; retry later",
                  hex);
        free(buf);
        return;
    }
    wire_begin(reply, WT_FILE_DATA, m->id, 4);
    wire_put_strn(reply, "hash", hex, 64);
    wire_put_u64(reply, "size", f->size);
    wire_put_u64(reply, "off", off);
    wire_put_bin(reply, "data", buf, len);
    free(buf);
}

void live_files_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    struct filestore_limits lim = limits(L);
    char user[FILESTORE_USER_MAX];
    if (m->type == WT_FILE_HAVE)
        filestore_h_have(L->files, &lim, m, uploader(m, user, sizeof user), reply);
    else if (m->type == WT_FILE_PUT)
        filestore_h_put(L->files, &lim, m, uploader(m, user, sizeof user), reply);
    else
        h_get(L, m, reply);
}

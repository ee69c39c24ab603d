/*
 * metafiles.c - the grid spool's files (issue 26, docs/data.md "Through the grid
 * spool"): its content-addressed store (daemon/filestore.h, the cluster's and the batch
 * role's code: STATE_DIR/files, table "files"), FILE_HAVE and FILE_PUT from the user's
 * tool exactly as at a cluster, FILE_GET of a job's inputs and of its tasks' outputs
 * once copied back here, a SUBMIT's "inputs"/"outputs"/"checkpoint_s" checked (they are
 * kept with the job's request, which the spool sends on to its site), each task's row as
 * its site gave it once its outputs are here (table "taskfiles", key job and task), and
 * the sweep of files no job names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"

static struct filestore_limits limits(const struct meta *M)
{
    return (struct filestore_limits){(uint64_t)M->cfg.files_job_mb << 20,
                                     (uint64_t)M->cfg.files_user_mb << 20};
}

int meta_files_open(struct meta *M)
{
    char dir[CONFIG_STR_MAX + 16];
    snprintf(dir, sizeof dir, "%s/files", M->cfg.state_dir);
    struct filestore_cfg fc = {M->store, M->t_files, dir, "the grid spool", &M->turn_failed, NULL};
    filestore_destroy(&M->files);
    return (M->files = filestore_open(&fc)) ? 0 : -1;
}

void meta_files_close(struct meta *M)
{
    filestore_destroy(&M->files);
}

const char *meta_files_check(struct meta *M, const msgpack_object *o, bool parallel,
                             uint64_t ntasks, char *why, size_t wl)
{
    if (!wire_get(o, "inputs") && !wire_get(o, "outputs") && !wire_get(o, "checkpoint_s"))
        return NULL;
    if (parallel && wire_get(o, "checkpoint_s"))
        return "checkpoint_s is for task arrays: a parallel job's ranks take inputs and "
               "outputs, not checkpoints (docs/data.md \"Parallel jobs\")";
    struct filestore_limits lim = limits(M);
    if (parallel) /* issue 26: "task" names a rank, as at a batch site and a cluster */
        ntasks = wire_get_u64(o, "procs", 1);
    return filestore_submit_check(M->files, &lim, o, ntasks, why, wl);
}

static int count_in(void *arg, const msgpack_object *in)
{
    (void)in;
    ++*(uint32_t *)arg;
    return 0;
}

int meta_files_each_input(const struct mjob *j, int (*fn)(void *arg, const msgpack_object *in),
                          void *arg)
{
    return filestore_each_input(j->req, j->reqlen, UINT32_MAX, fn, arg);
}

bool meta_files_has_inputs(const struct mjob *j)
{
    uint32_t n = 0;
    meta_files_each_input(j, count_in, &n);
    return n > 0;
}

bool meta_files_has_outputs(const struct mjob *j)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    bool has = false;
    if (j->req &&
        msgpack_unpack_next(&up, (const char *)j->req, j->reqlen, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *o = wire_get(&up.data, "outputs");
        has = o && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0;
    }
    msgpack_unpacked_destroy(&up);
    return has;
}

/* ---- the task rows of the outputs copied back ---- */

int meta_files_row_save(struct meta *M, const struct mjob *j, const msgpack_object *t)
{
    uint8_t key[12];
    uint64_t idx = wire_get_u64(t, "idx", 0);
    if (idx >= j->ntasks && !(idx == 0 && j->ntasks <= 1))
        return 0; /* not one of its tasks: ignored */
    store_key_u64_u32(key, j->id, (uint32_t)idx);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_object(&wb, t);
    int rc = store_put(M->store, M->t_taskfiles, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

/* Task idx's stored row (malloc'd into *rec), or false. */
static bool row_get(struct meta *M, uint64_t job, uint32_t idx, void **rec, size_t *len)
{
    uint8_t key[12];
    store_key_u64_u32(key, job, idx);
    return store_get(M->store, M->t_taskfiles, key, sizeof key, rec, len) == 0;
}

/* The site's task rows of the last poll without their "files" and "files_note": those
 * are the site's copies, not the spool's yet (its FILE_GET would not find them). */
static bool rows_without_files(const struct mjob *j, struct wire_buf *wb)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (!j->tasks_raw ||
        msgpack_unpack_next(&up, (const char *)j->tasks_raw, j->tasks_len, NULL) !=
            MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_ARRAY) {
        msgpack_unpacked_destroy(&up);
        return false;
    }
    wire_pack_array(wb, up.data.via.array.size);
    for (uint32_t i = 0; i < up.data.via.array.size; i++) {
        const msgpack_object *t = &up.data.via.array.ptr[i];
        uint32_t n = 0, keep = t->type == MSGPACK_OBJECT_MAP ? t->via.map.size : 0;
        for (uint32_t k = 0; k < keep; k++) {
            const msgpack_object *key = &t->via.map.ptr[k].key;
            n += !(key->type == MSGPACK_OBJECT_STR &&
                   ((key->via.str.size == 5 && !memcmp(key->via.str.ptr, "files", 5)) ||
                    (key->via.str.size == 10 && !memcmp(key->via.str.ptr, "files_note", 10))));
        }
        wire_pack_map(wb, n);
        for (uint32_t k = 0; k < keep; k++) {
            const msgpack_object *key = &t->via.map.ptr[k].key;
            if (key->type == MSGPACK_OBJECT_STR &&
                ((key->via.str.size == 5 && !memcmp(key->via.str.ptr, "files", 5)) ||
                 (key->via.str.size == 10 && !memcmp(key->via.str.ptr, "files_note", 10))))
                continue;
            wire_pack_object(wb, key);
            wire_pack_object(wb, &t->via.map.ptr[k].val);
        }
    }
    msgpack_unpacked_destroy(&up);
    return true;
}

bool meta_files_tasks(struct meta *M, const struct mjob *j, uint64_t from, uint64_t count,
                      struct wire_buf *wb, uint64_t *next)
{
    uint32_t nt = j->ntasks ? j->ntasks : 1;
    void *rec;
    size_t len;
    *next = 0;
    if (!MJ_ENDED(j->state) || !row_get(M, j->id, 0, &rec, &len))
        return meta_files_has_outputs(j) && rows_without_files(j, wb);
    free(rec);
    if (count == 0 || count > 1000)
        count = 1000;
    uint64_t end = from + count < nt ? from + count : nt;
    uint32_t n = 0;
    for (uint64_t i = from; i < end; i++)
        if (row_get(M, j->id, (uint32_t)i, &rec, &len)) {
            n++;
            free(rec);
        }
    wire_pack_array(wb, n);
    for (uint64_t i = from; i < end; i++)
        if (row_get(M, j->id, (uint32_t)i, &rec, &len)) {
            msgpack_sbuffer_write(&wb->sb, rec, len);
            free(rec);
        }
    *next = end < nt ? end : 0;
    return true;
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

/* One "taskfiles" record: the outputs it names are kept. */
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

void meta_files_sweep(struct meta *M)
{
    static int64_t last_ms;
    int64_t now = wall_now_ms();
    if (!M->files || (last_ms && now - last_ms < 3600 * 1000))
        return;
    last_ms = now;
    filestore_each(M->files, unmark, NULL);
    for (uint32_t i = 0; i < M->njobs; i++)
        meta_files_each_input(M->jobs[i], mark_named, M->files);
    for (uint32_t i = 0; i < M->npulls; i++) { /* outputs being copied: not stored yet */
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        if (M->pulls[i].page &&
            msgpack_unpack_next(&up, M->pulls[i].page, M->pulls[i].page_len, NULL) ==
                MSGPACK_UNPACK_SUCCESS &&
            up.data.type == MSGPACK_OBJECT_ARRAY)
            for (uint32_t r = 0; r < up.data.via.array.size; r++) {
                const msgpack_object *fl = wire_get(&up.data.via.array.ptr[r], "files");
                for (uint32_t k = 0;
                     fl && fl->type == MSGPACK_OBJECT_ARRAY && k < fl->via.array.size; k++)
                    mark_named(M->files, &fl->via.array.ptr[k]);
            }
        msgpack_unpacked_destroy(&up);
    }
    struct sweep sw = {now - M->cfg.files_keep_s * 1000, 0, 0};
    if (store_iter(M->store, M->t_taskfiles, NULL, 0, mark_outputs, M->files) < 0 ||
        filestore_each(M->files, drop_unnamed, &sw) < 0)
        M->turn_failed = true;
    log_debug("files: swept: %u kept, %u deleted", sw.kept, sw.dropped);
}

/* ---- the requests ---- */

static void fail(struct wire_buf *reply, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct wire_buf *reply, uint64_t id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wire_error_msg(reply, id, code, msg);
}

static int is_hash(void *arg, const msgpack_object *in)
{
    size_t hl;
    const char *h = wire_get_str(in, "hash", &hl);
    return h && hl == 64 && !memcmp(h, arg, 64);
}

/* Whether hex is an output of task idx of j copied back here. */
static bool is_output(struct meta *M, const struct mjob *j, uint32_t idx, const char *hex)
{
    void *rec;
    size_t len;
    bool found = false;
    if (!MJ_ENDED(j->state) || !row_get(M, j->id, idx, &rec, &len))
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
static void h_get(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    uint8_t d[SHA256_LEN];
    size_t hl;
    const char *hex = wire_get_str(m->root, "hash", &hl);
    uint64_t id = wire_get_u64(m->root, "job", 0), off = wire_get_u64(m->root, "off", 0);
    uint64_t len = wire_get_u64(m->root, "len", 0);
    bool out = wire_get(m->root, "idx") != NULL;
    uint64_t idx = wire_get_u64(m->root, "idx", 0);
    struct mjob *j = meta_job_find(M, id);
    const struct curve_ident *who = curve_current();
    if (filestore_parse_hash(hex, hl, d) < 0) {
        fail(reply, m->id, WE_INVALID, "hash must be a SHA-256 as 64 lower-case hex digits");
        return;
    }
    if (!j) {
        fail(reply, m->id, WE_NOT_FOUND, "no job %llu at the grid spool (gridnode jobs lists them)",
             (unsigned long long)id);
        return;
    }
    if ((who && who->kind == CURVE_NODE) || !curve_may_touch(j->user)) {
        fail(reply, m->id, WE_DENIED,
             "job %llu belongs to another user; only its owner and the administrators may "
             "read its files",
             (unsigned long long)id);
        return;
    }
    struct fsfile *f = filestore_find(M->files, d);
    uint32_t nt = j->ntasks ? j->ntasks : 1;
    bool named = out ? idx < nt && is_output(M, j, (uint32_t)idx, hex)
                     : meta_files_each_input(j, is_hash, (void *)hex) > 0;
    if (!named || !f || !f->done) {
        fail(reply, m->id, WE_NOT_FOUND, "job %llu has no %s file %.12s%s at the grid spool",
             (unsigned long long)id, out ? "output" : "input", hex,
             named ? " stored (it was removed)" : "");
        return;
    }
    off = off > f->size ? f->size : off;
    len = len > WIRE_FILE_CHUNK_MAX ? WIRE_FILE_CHUNK_MAX : len;
    len = len > f->size - off ? f->size - off : len;
    void *buf = malloc(len ? len : 1);
    ssize_t got = buf ? filestore_read(M->files, f, off, buf, len) : -1;
    if (got != (ssize_t)len) {
        log_warn("files: cannot read %.12s", hex);
        fail(reply, m->id, WE_STORAGE, "the grid spool could not read file %.12s; retry later",
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

void meta_files_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct filestore_limits lim = limits(M);
    char user[FILESTORE_USER_MAX];
    /* whom a new upload is charged to: the request's "user" (the key's name under CURVE) */
    wire_get_strbuf(m->root, "user", user, sizeof user);
    if (m->type == WT_FILE_HAVE)
        filestore_h_have(M->files, &lim, m, user[0] ? user : NULL, reply);
    else if (m->type == WT_FILE_PUT)
        filestore_h_put(M->files, &lim, m, user[0] ? user : NULL, reply);
    else
        h_get(M, m, reply);
}

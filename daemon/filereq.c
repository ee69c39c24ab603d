/*
 * filereq.c - the file requests every level that keeps files answers alike (filestore.h,
 * docs/wire.md 6.19): FILE_HAVE (how much of a file is held; an empty file is stored at
 * once) and FILE_PUT (one chunk, in order), with the level's limits: one file at most
 * files.job_mb, a user's files together at most files.user_mb.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/datapath.h"
#include "lib/log.h"

/* True if f is being received for another user than user: its chunks are not user's to
 * send (one user's bytes in another's upload would fail its hash check at the end). */
static bool foreign(const struct fsfile *f, const char *user)
{
    return f && !f->done && strcmp(f->user, user ? user : "");
}

/* True while foreign upload f is under way (a chunk came within lim's foreign_ms). */
static bool foreign_busy(const struct filestore_limits *lim, const struct fsfile *f)
{
    int64_t quiet = lim->foreign_ms > 0 ? lim->foreign_ms : FILESTORE_FOREIGN_MS;
    return wall_now_ms() - f->t_ms < quiet;
}

/* FILE_STATE of file f (NULL: none held yet) into reply. "early" (cut-through) only for
 * a file that is new or charged to the requester: a SUBMIT may name no one else's.
 * With wait: another user's upload of f is under way, ask again later ("wait_ms"). */
static void reply_state(const struct filestore_limits *lim, const struct wire_msg *m,
                        struct wire_buf *reply, const char *hex, uint64_t size,
                        const struct fsfile *f, const char *user, bool wait)
{
    bool early = !wait && lim->early && (!f || !strcmp(f->user, user ? user : ""));
    wire_begin(reply, WT_FILE_STATE, m->id, 5 + early + wait);
    wire_put_strn(reply, "hash", hex, 64);
    wire_put_u64(reply, "size", size);
    wire_put_u64(reply, "have", f ? f->have : 0);
    wire_put_bool(reply, "done", f && f->done);
    wire_put_u64(reply, "chunk", WIRE_FILE_CHUNK);
    if (early) /* cut-through: a SUBMIT may name the file before its last chunk */
        wire_put_bool(reply, "early", true);
    if (wait)
        wire_put_u64(reply, "wait_ms", FILESTORE_WAIT_MS);
}

/*
 * f (from file_args) being received for another user: true with the "wait" reply
 * written while that upload is under way; else the stalled upload is dropped (it
 * restarts from 0 for this user: *f NULL, file_args again for the limits) and false,
 * or true with an ERROR reply written.
 */
static bool take_over(struct filestore *fs, const struct filestore_limits *lim,
                      const struct wire_msg *m, const char *user, struct wire_buf *reply,
                      uint8_t d[SHA256_LEN], const char **hex, uint64_t *size, struct fsfile **f);

/* Replaces reply with an ERROR reply of code and text. */
__attribute__((format(printf, 4, 5))) static void
fail(const struct wire_msg *m, struct wire_buf *reply, int code, const char *fmt, ...)
{
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    wire_buf_reset(reply);
    wire_error_msg(reply, m->id, code, "%s", text);
}

/*
 * The request's "hash" and "size" checked against the store and the limits (a file not
 * held yet: files.job_mb, and the user's files.user_mb): true, or false with the ERROR
 * reply written.
 */
static bool file_args(struct filestore *fs, const struct filestore_limits *lim,
                      const struct wire_msg *m, const char *user, struct wire_buf *reply,
                      uint8_t d[SHA256_LEN], const char **hex, uint64_t *size, struct fsfile **f)
{
    size_t hl;
    *hex = wire_get_str(m->root, "hash", &hl);
    *size = wire_get_u64(m->root, "size", 0);
    if (filestore_parse_hash(*hex, hl, d) < 0) {
        fail(m, reply, WE_INVALID, "hash must be a SHA-256 as 64 lower-case hex digits");
        return false;
    }
    *f = filestore_find(fs, d);
    if (*f && (*f)->size != *size) {
        fail(m, reply, WE_INVALID, "file %.12s is stored with %llu bytes, not %llu", *hex,
             (unsigned long long)(*f)->size, (unsigned long long)*size);
        return false;
    }
    if (*f)
        return true;
    if (*size > lim->job_bytes) {
        fail(m, reply, WE_REFUSED,
             "a file of %llu bytes is larger than this level takes for one job "
             "(files.job_mb = %llu MB)",
             (unsigned long long)*size, (unsigned long long)(lim->job_bytes >> 20));
        return false;
    }
    uint64_t held = filestore_user_bytes(fs, user);
    if (lim->user_bytes && user && *user && held + *size > lim->user_bytes) {
        fail(m, reply, WE_REFUSED,
             "user %s holds %llu MB of files here; this file of %llu MB would pass the limit "
             "of %llu MB per user (files.user_mb): wait until finished jobs are purged, "
             "purge your own (gridnode purge), or ask the administrator",
             user, (unsigned long long)((held + (1 << 20) - 1) >> 20),
             (unsigned long long)((*size + (1 << 20) - 1) >> 20),
             (unsigned long long)(lim->user_bytes >> 20));
        return false;
    }
    return true;
}

void filestore_h_have(struct filestore *fs, const struct filestore_limits *lim,
                      const struct wire_msg *m, const char *user, struct wire_buf *reply)
{
    uint8_t d[SHA256_LEN];
    const char *hex;
    uint64_t size;
    struct fsfile *f;
    if (!file_args(fs, lim, m, user, reply, d, &hex, &size, &f))
        return;
    if (foreign(f, user)) { /* another user's upload: wait, or (stalled) start afresh */
        reply_state(lim, m, reply, hex, size, foreign_busy(lim, f) ? f : NULL, user,
                    foreign_busy(lim, f));
        return;
    }
    if (!f && size == 0) { /* nothing to send: an empty file is stored at once */
        int code;
        char why[400];
        if (!(f = filestore_append(fs, NULL, d, 0, user, "", 0, &code, why, sizeof why))) {
            fail(m, reply, code, "%s", why);
            return;
        }
    }
    reply_state(lim, m, reply, hex, size, f, user, false);
}

static bool take_over(struct filestore *fs, const struct filestore_limits *lim,
                      const struct wire_msg *m, const char *user, struct wire_buf *reply,
                      uint8_t d[SHA256_LEN], const char **hex, uint64_t *size, struct fsfile **f)
{
    if (foreign_busy(lim, *f)) {
        reply_state(lim, m, reply, *hex, *size, *f, user, true);
        return true;
    }
    log_info("file %.12s: the upload charged to %s brought nothing for %lld s: it starts "
             "again from 0 for %s",
             *hex, (*f)->user[0] ? (*f)->user : "nobody",
             (long long)((wall_now_ms() - (*f)->t_ms) / 1000), user && *user ? user : "nobody");
    if (filestore_drop(fs, *f) < 0) {
        fail(m, reply, WE_STORAGE, "%s could not drop a stalled upload of file %.12s; retry later",
             filestore_level(fs), *hex);
        return true;
    }
    return !file_args(fs, lim, m, user, reply, d, hex, size, f);
}

void filestore_h_put(struct filestore *fs, const struct filestore_limits *lim,
                     const struct wire_msg *m, const char *user, struct wire_buf *reply)
{
    uint8_t d[SHA256_LEN];
    const char *hex;
    uint64_t size, off = wire_get_u64(m->root, "off", 0);
    size_t len;
    struct fsfile *f;
    const void *data = wire_get_bin(m->root, "data", &len);
    if (!file_args(fs, lim, m, user, reply, d, &hex, &size, &f))
        return;
    if (foreign(f, user) && take_over(fs, lim, m, user, reply, d, &hex, &size, &f))
        return;
    if ((f && (f->done || off != f->have)) || (!f && off != 0)) {
        reply_state(lim, m, reply, hex, size, f, user,
                    false); /* a repeat, or out of order: go on from "have" */
        return;
    }
    if (off + len > size || (len == 0 && size > 0)) {
        fail(m, reply, WE_INVALID, "a chunk of %zu bytes at %llu does not fit in a file of %llu",
             len, (unsigned long long)off, (unsigned long long)size);
        return;
    }
    int code;
    char why[400];
    if (!(f = filestore_append(fs, f, d, size, user, data, len, &code, why, sizeof why))) {
        fail(m, reply, code, "%s", why);
        return;
    }
    reply_state(lim, m, reply, hex, size, f, user, false);
}

/* ---- a job's inputs and outputs at SUBMIT ---- */

struct in_ent {
    const char *name;
    size_t nlen;
    uint64_t task; /* UINT64_MAX: every task */
    uint8_t d[SHA256_LEN];
    uint64_t size;
};

static int by_name(const void *a, const void *b)
{
    const struct in_ent *x = a, *y = b;
    size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
    int k = memcmp(x->name, y->name, n);
    if (k || x->nlen != y->nlen)
        return k ? k : (x->nlen < y->nlen ? -1 : 1);
    return x->task < y->task ? -1 : x->task > y->task;
}

static int by_hash(const void *a, const void *b)
{
    return memcmp(((const struct in_ent *)a)->d, ((const struct in_ent *)b)->d, SHA256_LEN);
}

/* Two entries that would land on one name in one task's directory: the first, or NULL. */
static const struct in_ent *name_clash(const struct in_ent *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        const struct in_ent *a = &v[i - 1], *b = &v[i];
        if (a->nlen == b->nlen && !memcmp(a->name, b->name, a->nlen) &&
            (a->task == b->task || b->task == UINT64_MAX))
            return b;
    }
    return NULL;
}

/* Whether a SUBMIT may name f while it is being received (cut-through): the level takes
 * it, and f is charged to the submitting user (a user names only its own uploads). */
static bool early_ok(const struct filestore_limits *lim, const struct fsfile *f)
{
    const char *u = lim->early_user ? lim->early_user : "";
    return lim->early && !strcmp(f->user, u);
}

/* Each input entry checked and copied into v; NULL, or the reason in why. */
static const char *check_inputs(struct filestore *fs, const struct filestore_limits *lim,
                                const msgpack_object *in, uint64_t ntasks, struct in_ent *v,
                                char *why, size_t wl)
{
    for (uint32_t i = 0; i < in->via.array.size; i++) {
        const msgpack_object *e = &in->via.array.ptr[i];
        struct in_ent *x = &v[i];
        size_t hl;
        const char *h = wire_get_str(e, "hash", &hl), *bad;
        x->name = wire_get_str(e, "name", &x->nlen);
        x->size = wire_get_u64(e, "size", 0);
        x->task = wire_get(e, "task") ? wire_get_u64(e, "task", 0) : UINT64_MAX;
        int nl = (int)(x->nlen > 200 ? 200 : x->nlen);
        if ((bad = datapath_problem(x->name, x->nlen))) {
            snprintf(why, wl, "input '%.*s' %s", nl, x->name, bad);
            return why;
        }
        if (x->task != UINT64_MAX && x->task >= ntasks) {
            snprintf(why, wl, "input '%.*s' is for task %llu, but the job has %llu tasks", nl,
                     x->name, (unsigned long long)x->task, (unsigned long long)ntasks);
            return why;
        }
        struct fsfile *f = filestore_parse_hash(h, hl, x->d) < 0 ? NULL : filestore_find(fs, x->d);
        if (f && !f->done && f->size == x->size && !early_ok(lim, f)) {
            snprintf(why, wl,
                     "input '%.*s': file %.12s is still being uploaded to %s (%llu of %llu "
                     "bytes)%s; submit once its upload is done",
                     nl, x->name, h, filestore_level(fs), (unsigned long long)f->have,
                     (unsigned long long)f->size, lim->early ? " by another user" : "");
            return why;
        }
        if (!f || (!f->done && !early_ok(lim, f)) || f->size != x->size) {
            snprintf(why, wl,
                     "input '%.*s': %s holds no file %.*s of %llu bytes (upload it "
                     "first: gridnode submit --input does)",
                     nl, x->name, filestore_level(fs), (int)(hl > 64 ? 64 : hl), h ? h : "",
                     (unsigned long long)x->size);
            return why;
        }
    }
    return NULL;
}

const char *filestore_submit_check(struct filestore *fs, const struct filestore_limits *lim,
                                   const msgpack_object *m, uint64_t ntasks, char *why, size_t wl)
{
    const msgpack_object *in = wire_get(m, "inputs"), *out = wire_get(m, "outputs");
    for (uint32_t i = 0; out && i < out->via.array.size; i++) {
        const msgpack_object *o = &out->via.array.ptr[i];
        const char *bad = datapath_problem(o->via.str.ptr, o->via.str.size);
        if (bad) {
            snprintf(why, wl, "output '%.*s' %s",
                     (int)(o->via.str.size > 200 ? 200 : o->via.str.size), o->via.str.ptr, bad);
            return why;
        }
    }
    if (!in || in->via.array.size == 0)
        return NULL;
    uint32_t n = in->via.array.size;
    struct in_ent *v = calloc(n, sizeof *v);
    if (!v)
        return "out of memory";
    const char *bad = check_inputs(fs, lim, in, ntasks, v, why, wl);
    if (!bad) {
        qsort(v, n, sizeof *v, by_name);
        const struct in_ent *x = name_clash(v, n);
        if (x) {
            snprintf(why, wl, "input '%.*s' is given twice to one task",
                     (int)(x->nlen > 200 ? 200 : x->nlen), x->name);
            bad = why;
        }
    }
    if (!bad) { /* distinct contents count once */
        uint64_t sum = 0;
        qsort(v, n, sizeof *v, by_hash);
        for (uint32_t i = 0; i < n; i++)
            if (i == 0 || memcmp(v[i].d, v[i - 1].d, SHA256_LEN))
                sum += v[i].size;
        if (sum > lim->job_bytes) {
            snprintf(why, wl,
                     "the inputs hold %llu MB, more than %s takes for one job "
                     "(files.job_mb = %llu MB)",
                     (unsigned long long)((sum + (1 << 20) - 1) >> 20), filestore_level(fs),
                     (unsigned long long)(lim->job_bytes >> 20));
            bad = why;
        }
    }
    free(v);
    return bad;
}

/* ---- a job's kept files ---- */

void filestore_put_lists(const msgpack_object *m, struct wire_buf *wb)
{
    static const char *const keys[] = {"inputs", "outputs"};
    for (int i = 0; i < 2; i++) {
        const msgpack_object *v = wire_get(m, keys[i]);
        wire_put_key(wb, keys[i]);
        if (v)
            wire_pack_object(wb, v);
        else
            wire_pack_array(wb, 0);
    }
}

int filestore_jobdata_pack(const msgpack_object *m, struct wire_buf *wb)
{
    uint64_t ck = wire_get_u64(m, "checkpoint_s", 0); /* bounded by its descriptor */
    if (!wire_get(m, "inputs") && !wire_get(m, "outputs") && !ck)
        return 0;
    wire_pack_map(wb, 2 + (ck > 0));
    if (ck) /* a record without it (older ones too) reads 0: no checkpoints */
        wire_put_u64(wb, "checkpoint_s", ck);
    filestore_put_lists(m, wb);
    return 1;
}

int filestore_each_input(const void *data, size_t len, uint32_t idx,
                         int (*fn)(void *arg, const msgpack_object *in), void *arg)
{
    msgpack_unpacked up;
    int rc = 0;
    if (!data)
        return 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, data, len, NULL) != MSGPACK_UNPACK_SUCCESS) {
        msgpack_unpacked_destroy(&up);
        return 0;
    }
    const msgpack_object *in = wire_get(&up.data, "inputs");
    for (uint32_t i = 0; !rc && in && in->type == MSGPACK_OBJECT_ARRAY && i < in->via.array.size;
         i++) {
        const msgpack_object *e = &in->via.array.ptr[i];
        if (idx == UINT32_MAX || !wire_get(e, "task") || wire_get_u64(e, "task", 0) == idx)
            rc = fn(arg, e);
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

int filestore_count_input(void *arg, const msgpack_object *in)
{
    (void)in;
    ++*(uint32_t *)arg;
    return 0;
}

int filestore_pack_input(void *arg, const msgpack_object *in)
{
    struct wire_buf *wb = arg;
    size_t nl, hl;
    const char *name = wire_get_str(in, "name", &nl), *h = wire_get_str(in, "hash", &hl);
    wire_pack_map(wb, 3);
    wire_put_strn(wb, "name", name, nl);
    wire_put_strn(wb, "hash", h, hl);
    wire_put_u64(wb, "size", wire_get_u64(in, "size", 0));
    return 0;
}

/*
 * filereq.c - the file requests every level that keeps files answers alike (filestore.h,
 * docs/wire.md 6.19): FILE_HAVE (how much of a file is held; an empty file is stored at
 * once) and FILE_PUT (one chunk, in order), with the level's limits: one file at most
 * files.job_mb, a user's files together at most files.user_mb.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/filestore.h"

static void reply_state(const struct wire_msg *m, struct wire_buf *reply, const char *hex,
                        uint64_t size, const struct fsfile *f)
{
    wire_begin(reply, WT_FILE_STATE, m->id, 5);
    wire_put_strn(reply, "hash", hex, 64);
    wire_put_u64(reply, "size", size);
    wire_put_u64(reply, "have", f ? f->have : 0);
    wire_put_bool(reply, "done", f && f->done);
    wire_put_u64(reply, "chunk", WIRE_FILE_CHUNK);
}

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
    if (!f && size == 0) { /* nothing to send: an empty file is stored at once */
        int code;
        char why[400];
        if (!(f = filestore_append(fs, NULL, d, 0, user, "", 0, &code, why, sizeof why))) {
            fail(m, reply, code, "%s", why);
            return;
        }
    }
    reply_state(m, reply, hex, size, f);
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
    if ((f && (f->done || off != f->have)) || (!f && off != 0)) {
        reply_state(m, reply, hex, size, f); /* a repeat, or out of order: go on from "have" */
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
    reply_state(m, reply, hex, size, f);
}

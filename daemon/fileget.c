/*
 * fileget.c - FILE_GET answered from a level's store (issue 26, docs/wire.md 6.19),
 * shared by the batch role and the grid spool: a chunk of an input of a job, or of an
 * output of one of its tasks once copied back to the level, read by the job's owner or
 * an administrator only. What differs (how a job and its files are found) comes from
 * the level's callbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/curve.h"
#include "daemon/fileoffer.h"
#include "lib/log.h"

bool fileget_row_names(const void *rec, size_t len, const char *hex)
{
    bool found = false;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (rec && msgpack_unpack_next(&up, rec, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *fl = wire_get(&up.data, "files");
        for (uint32_t i = 0;
             !found && fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
            found = fileget_is_hash((void *)hex, &fl->via.array.ptr[i]);
    }
    msgpack_unpacked_destroy(&up);
    return found;
}

int fileget_is_hash(void *hex, const msgpack_object *in)
{
    size_t hl;
    const char *h = wire_get_str(in, "hash", &hl);
    return h && hl == 64 && !memcmp(h, hex, 64);
}

/* The chunk [off, off+len) of whole file f into reply (FILE_DATA), or an ERROR. */
static void answer_data(const struct fileget_level *lv, struct fsfile *f, const struct wire_msg *m,
                        const char *hex, struct wire_buf *reply)
{
    uint64_t off = wire_get_u64(m->root, "off", 0), len = wire_get_u64(m->root, "len", 0);
    off = off > f->size ? f->size : off;
    len = len > WIRE_FILE_CHUNK_MAX ? WIRE_FILE_CHUNK_MAX : len;
    len = len > f->size - off ? f->size - off : len;
    void *buf = malloc(len ? len : 1);
    ssize_t got = buf ? filestore_read(lv->files, f, off, buf, len) : -1;
    if (got != (ssize_t)len) {
        char msg[200];
        log_warn("files: cannot read %.12s", hex);
        snprintf(msg, sizeof msg, "%s could not read file %.12s; retry later",
                 filestore_level(lv->files), hex);
        wire_error_msg(reply, m->id, WE_STORAGE, msg);
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

void fileget_answer(const struct fileget_level *lv, void *role, const struct wire_msg *m,
                    struct wire_buf *reply)
{
    uint8_t d[SHA256_LEN];
    size_t hl;
    char msg[512];
    const char *hex = wire_get_str(m->root, "hash", &hl);
    uint64_t id = wire_get_u64(m->root, "job", 0), idx = wire_get_u64(m->root, "idx", 0);
    bool out = wire_get(m->root, "idx") != NULL, found = false;
    const struct curve_ident *who = curve_current();
    if (filestore_parse_hash(hex, hl, d) < 0) {
        wire_error_msg(reply, m->id, WE_INVALID,
                       "hash must be a SHA-256 as 64 lower-case hex digits");
        return;
    }
    const char *owner = lv->owner(role, id, &found);
    if (!found) {
        snprintf(msg, sizeof msg, "no job %llu%s (gridnode jobs lists them)",
                 (unsigned long long)id, lv->at);
        wire_error_msg(reply, m->id, WE_NOT_FOUND, msg);
        return;
    }
    if ((who && who->kind == CURVE_NODE) || !curve_may_touch(owner)) {
        snprintf(msg, sizeof msg,
                 "job %llu belongs to another user; only its owner and the administrators "
                 "may read its files",
                 (unsigned long long)id);
        wire_error_msg(reply, m->id, WE_DENIED, msg);
        return;
    }
    struct fsfile *f = filestore_find(lv->files, d);
    bool named = lv->named(role, id, out, idx, hex);
    if (!named || !f || !f->done) {
        snprintf(msg, sizeof msg, "job %llu has no %s file %.12s%s%s", (unsigned long long)id,
                 out ? "output" : "input", hex, named ? " stored (it was removed)" : "", lv->at);
        wire_error_msg(reply, m->id, WE_NOT_FOUND, msg);
        return;
    }
    answer_data(lv, f, m, hex, reply);
}

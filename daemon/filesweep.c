/*
 * filesweep.c - the sweep of a level's files that no job names (issue 26, docs/data.md
 * "Retention"), shared by the batch role and the grid spool: every file unmarked, the
 * role marks what its jobs, its stored task rows and its copies under way name, and
 * what is left unmarked and unchanged for files.keep_s is deleted.
 */
#include <stdio.h>

#include "daemon/fileoffer.h"
#include "lib/log.h"

bool filesweep_due(int64_t *last_ms, int64_t now_ms)
{
    if (*last_ms && now_ms - *last_ms < 3600 * 1000)
        return false;
    *last_ms = now_ms;
    return true;
}

static int unmark(struct filestore *fs, struct fsfile *f, void *arg)
{
    (void)fs, (void)arg;
    f->mark = false;
    return 0;
}

void filesweep_begin(struct filestore *fs)
{
    filestore_each(fs, unmark, NULL);
}

int filesweep_mark(void *fs, const msgpack_object *e)
{
    size_t hl;
    uint8_t d[SHA256_LEN];
    const char *h = wire_get_str(e, "hash", &hl);
    struct fsfile *f = filestore_parse_hash(h, hl, d) < 0 ? NULL : filestore_find(fs, d);
    if (f)
        f->mark = true;
    return 0;
}

void filesweep_mark_row(struct filestore *fs, const msgpack_object *row)
{
    const msgpack_object *fl = wire_get(row, "files");
    for (uint32_t i = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size; i++)
        filesweep_mark(fs, &fl->via.array.ptr[i]);
}

int filesweep_mark_record(void *fs, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, val, vlen, NULL) == MSGPACK_UNPACK_SUCCESS)
        filesweep_mark_row(fs, &up.data);
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

int filesweep_end(struct filestore *fs, int64_t older_ms)
{
    struct sweep sw = {older_ms, 0, 0};
    int rc = filestore_each(fs, drop_unnamed, &sw);
    log_debug("files: swept: %u kept, %u deleted", sw.kept, sw.dropped);
    return rc < 0 ? -1 : 0;
}

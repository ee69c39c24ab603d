/*
 * record.c - loading and saving a role's records (record.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/record.h"
#include "lib/log.h"

/* The key length a table's format implies; 0 for text keys (any length). */
static size_t key_len(enum store_keyfmt kf)
{
    switch (kf) {
    case STORE_KEY_U64:
        return 8;
    case STORE_KEY_U64_U32:
        return 12;
    case STORE_KEY_U64_U32_U32:
        return 16;
    case STORE_KEY_STR:
        break;
    }
    return 0;
}

/* The key as a person reads it: "12", "12.3", "12.3.4", or the text (cut). */
static void key_text(enum store_keyfmt kf, const uint8_t *k, size_t n, char *out, size_t len)
{
    if (kf == STORE_KEY_STR || n < 8) {
        snprintf(out, len, "'%.*s'", (int)(n < 64 ? n : 64), (const char *)k);
        return;
    }
    int w = snprintf(out, len, "%" PRIu64, store_key_get_u64(k));
    for (size_t off = 8; off + 4 <= n && w > 0 && (size_t)w < len; off += 4)
        w += snprintf(out + w, len - (size_t)w, ".%" PRIu32, store_key_get_u32(k + off));
}

struct load_ctx {
    struct store *s;
    int table;
    size_t klen;
    record_load_fn fn;
    void *arg;
    long skipped;
    int failed;
};

static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *x = arg;
    int rc = RECORD_UNREADABLE;
    if (x->klen == 0 || klen == x->klen)
        rc = x->fn(x->arg, key, klen, val, vlen);
    if (rc < 0) {
        x->failed = 1;
        return 1;
    }
    if (rc == RECORD_UNREADABLE) {
        char k[96];
        key_text(store_table_keyfmt(x->s, x->table), key, klen, k, sizeof k);
        log_warnx("%s record %s is unreadable: skipped (gridnode dump shows it)",
                  store_table_name(x->s, x->table), k);
        x->skipped++;
    }
    return 0;
}

long record_load(struct store *s, int table, record_load_fn fn, void *arg)
{
    struct load_ctx x = {s, table, key_len(store_table_keyfmt(s, table)), fn, arg, 0, 0};
    if (store_iter(s, table, NULL, 0, load_one, &x) < 0 || x.failed)
        return -1;
    return x.skipped;
}

int record_save(struct store *s, int table, const void *key, size_t klen, const void *rec,
                record_encode_fn enc, struct wire_buf *wb)
{
    wire_buf_reset(wb);
    if (enc(rec, wb) < 0) {
        errno = EINVAL;
        return -1;
    }
    WIRE_CHECK_OUT(wb->sb.data, wb->sb.size, "a record");
    return store_put(s, table, key, klen, wb->sb.data, wb->sb.size);
}

int record_save_u64(struct store *s, int table, uint64_t id, const void *rec, record_encode_fn enc,
                    struct wire_buf *wb)
{
    uint8_t k[8];
    store_key_u64(k, id);
    return record_save(s, table, k, sizeof k, rec, enc, wb);
}

int record_save_u64_u32(struct store *s, int table, uint64_t id, uint32_t idx, const void *rec,
                        record_encode_fn enc, struct wire_buf *wb)
{
    uint8_t k[12];
    store_key_u64_u32(k, id, idx);
    return record_save(s, table, k, sizeof k, rec, enc, wb);
}

int record_get_u64(struct store *s, int table, const char *name, uint64_t *v)
{
    void *val;
    size_t vl;
    int rc = store_get(s, table, name, strlen(name), &val, &vl);
    if (rc != 0)
        return rc;
    char buf[24];
    int ok = vl > 0 && vl < sizeof buf;
    if (ok) {
        memcpy(buf, val, vl);
        buf[vl] = '\0';
        char *end;
        errno = 0;
        unsigned long long n = strtoull(buf, &end, 10);
        ok = errno == 0 && *end == '\0' && buf[0] >= '0' && buf[0] <= '9';
        if (ok)
            *v = n;
    }
    free(val);
    if (!ok)
        log_warnx("%s record '%s' is not a number: ignored", store_table_name(s, table), name);
    return ok ? 0 : -1;
}

int record_put_u64(struct store *s, int table, const char *name, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
    return store_put(s, table, name, strlen(name), buf, (size_t)n);
}

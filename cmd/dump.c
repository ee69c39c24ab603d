/*
 * dump.c - `gridnode dump STATE_DIR`: prints any role's stored state, decoded. Opens
 * the LMDB environment read-only, so it works while the role runs. Tables and their
 * key formats are discovered from the environment's meta table; values are msgpack.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "wire/mpjson.h"
#include "store/store.h"

static const char usage[] =
    "usage: gridnode dump STATE_DIR [--table T] [--json] [--limit N]\n"
    "\n"
    "Prints every table of a role's state directory (cluster, client, ...), decoded:\n"
    "a readable table per table by default, or one JSON object per record with --json\n"
    "({\"table\":..., \"key\":..., \"value\":...}). Safe while the role runs.\n"
    "  --table T    only table T\n"
    "  --limit N    at most N records per table in the readable form (default 200)\n";

#define CELL_MAX 28

static json_t *key_json(enum store_keyfmt kf, const uint8_t *k, size_t n)
{
    if (kf == STORE_KEY_U64 && n == 8)
        return json_integer((json_int_t)store_key_get_u64(k));
    if ((kf == STORE_KEY_U64_U32 && n == 12) || (kf == STORE_KEY_U64_U32_U32 && n == 16)) {
        char b[64];
        if (n == 12)
            snprintf(b, sizeof b, "%" PRIu64 ".%" PRIu32, store_key_get_u64(k),
                     store_key_get_u32(k + 8));
        else
            snprintf(b, sizeof b, "%" PRIu64 ".%" PRIu32 ".%" PRIu32, store_key_get_u64(k),
                     store_key_get_u32(k + 8), store_key_get_u32(k + 12));
        return json_string(b);
    }
    json_t *s = json_stringn((const char *)k, n);
    if (s)
        return s;
    char hex[1100];
    for (size_t i = 0; i < n && i < 511; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
    return json_string(hex);
}

/*
 * Records stored as plain text rather than msgpack: the named counters of the batch and
 * meta roles (daemon/record.h record_put_u64) and their incarnation. A one-byte text
 * such as "2" is also a valid msgpack number (50), so the table says which are text.
 */
static const struct {
    const char *role, *table, *key;
} text_records[] = {
    {"batch", "meta", "inc"},     {"batch", "meta", "next_job"},  {"meta", "meta", "inc"},
    {"meta", "meta", "next_job"}, {"meta", "meta", "next_order"}, {NULL, NULL, NULL},
};

static bool is_text_record(const char *role, const char *table, const void *key, size_t klen)
{
    for (int i = 0; text_records[i].role; i++)
        if (!strcmp(role, text_records[i].role) && !strcmp(table, text_records[i].table) &&
            strlen(text_records[i].key) == klen && !memcmp(key, text_records[i].key, klen))
            return true;
    return false;
}

struct dump_ctx {
    const char *role;
    const char *table;
    enum store_keyfmt kf;
    bool json;
    size_t limit, count;
    json_t *rows; /* readable form: [key, value] pairs */
};

static int on_record(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct dump_ctx *d = arg;
    json_t *k = key_json(d->kf, key, klen), *v = NULL;
    if (is_text_record(d->role, d->table, key, klen))
        v = json_stringn(val, vlen);
    if (!v)
        v = mpjson_bytes(val, vlen);
    if (!v)
        v = json_pack("{s:s, s:I}", "undecodable", "not msgpack", "bytes", (json_int_t)vlen);
    d->count++;
    if (d->json) {
        json_t *o = json_pack("{s:s, s:o, s:o}", "table", d->table, "key", k, "value", v);
        json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
        putchar('\n');
        json_decref(o);
        return 0;
    }
    if (d->count > d->limit) {
        json_decref(k);
        json_decref(v);
        return 0;
    }
    json_array_append_new(d->rows, json_pack("[o, o]", k, v));
    return 0;
}

/* Text of a cell, shortened to CELL_MAX characters. */
static void cell(json_t *v, char *out, size_t n)
{
    char *s = json_is_string(v)
                  ? strdup(json_string_value(v))
                  : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
    snprintf(out, n, "%s", s ? s : "?");
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    if (s && strlen(s) >= n)
        memcpy(out + n - 4, "...", 4);
    free(s);
}

static void print_table(struct dump_ctx *d)
{
    json_t *cols = json_array();
    size_t i, j;
    json_t *row;
    json_array_foreach(d->rows, i, row)
    {
        json_t *v = json_array_get(row, 1);
        const char *k;
        json_t *x;
        if (!json_is_object(v))
            continue;
        json_object_foreach(v, k, x)
        {
            bool have = false;
            json_t *c;
            json_array_foreach(cols, j, c) have |= !strcmp(json_string_value(c), k);
            if (!have)
                json_array_append_new(cols, json_string(k));
        }
    }
    size_t nc = json_array_size(cols) + 1;
    size_t *w = calloc(nc, sizeof *w);
    char buf[CELL_MAX + 1];
    w[0] = 3;
    for (j = 1; j < nc; j++)
        w[j] = strlen(json_string_value(json_array_get(cols, j - 1)));
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            printf("%-*s", (int)w[0], "KEY");
            for (j = 1; j < nc; j++)
                printf("  %-*s", (int)w[j], json_string_value(json_array_get(cols, j - 1)));
            putchar('\n');
        }
        json_array_foreach(d->rows, i, row)
        {
            json_t *v = json_array_get(row, 1);
            for (j = 0; j < nc; j++) {
                json_t *x = j == 0 ? json_array_get(row, 0)
                            : json_is_object(v)
                                ? json_object_get(v, json_string_value(json_array_get(cols, j - 1)))
                            : j == 1 ? v
                                     : NULL;
                if (x)
                    cell(x, buf, sizeof buf);
                else
                    snprintf(buf, sizeof buf, "-");
                if (pass == 0 && strlen(buf) > w[j])
                    w[j] = strlen(buf);
                else if (pass == 1)
                    printf(j ? "  %-*s" : "%-*s", (int)w[j], buf);
            }
            if (pass == 1)
                putchar('\n');
        }
    }
    free(w);
    json_decref(cols);
}

int cmd_dump(int argc, char **argv)
{
    const char *dir = NULL, *only = NULL;
    bool json = false;
    size_t limit = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--table") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            uint64_t v;
            if (cli_uint("gridnode dump", "--limit", argv[++i], 0, SIZE_MAX, &v) < 0)
                return 2;
            limit = (size_t)v;
        } else if (!dir && argv[i][0] != '-') {
            dir = argv[i];
        } else {
            fprintf(stderr, "gridnode dump: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "gridnode dump: give a state directory\n%s", usage);
        return 2;
    }
    char err[512];
    struct store_opts so = {NULL, NULL, STORE_SYNC_FULL, 0, true};
    struct store *s = store_open(dir, &so, err, sizeof err);
    if (!s) {
        fprintf(stderr, "gridnode dump: %s\n", err);
        return 1;
    }
    int found = 0, rc = 0;
    if (!json)
        printf("state of a %s role in %s\n", store_role(s)[0] ? store_role(s) : "gridnode", dir);
    for (int t = 0; t < store_ntables(s); t++) {
        const char *name = store_table_name(s, t);
        if (only && strcmp(only, name))
            continue;
        found = 1;
        struct dump_ctx d = {store_role(s), name, store_table_keyfmt(s, t), json, limit, 0,
                             json_array()};
        if (store_iter(s, t, NULL, 0, on_record, &d) < 0) {
            fprintf(stderr, "gridnode dump: cannot read table %s\n", name);
            rc = 1;
        }
        if (!json) {
            printf("\n== %s (%zu record%s%s)\n", name, d.count, d.count == 1 ? "" : "s",
                   d.count > limit ? ", first ones shown; --limit N for more" : "");
            if (d.count)
                print_table(&d);
        }
        json_decref(d.rows);
    }
    store_close(&s);
    if (only && !found) {
        fprintf(stderr, "gridnode dump: no table '%s' in %s\n", only, dir);
        return 1;
    }
    return rc;
}

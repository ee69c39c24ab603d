/*
 * store.c - LMDB environments with buffered group commit (see store.h).
 */
#include "store/store.h"

#include <errno.h>
#include <lmdb.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORE_MAX_TABLES 32
#define STORE_DEFAULT_MAP (64u << 20)

struct store_op {
    int table;
    bool del;
    size_t klen, vlen;
    uint8_t *key; /* key bytes followed by value bytes, one allocation */
};

struct store {
    MDB_env *env;
    bool readonly;
    enum store_sync sync;
    int ntables;
    MDB_dbi dbi[STORE_MAX_TABLES];
    char *names[STORE_MAX_TABLES];
    enum store_keyfmt keyfmt[STORE_MAX_TABLES];
    char role[64];
    size_t map_size;
    struct store_op *ops;
    size_t nops, capops;
    int fault_nth;
};

enum store_sync store_sync_mode(const struct store *s)
{
    return s->sync;
}

const char *store_strerror(int rc)
{
    return mdb_strerror(rc);
}

void store_key_u64(uint8_t out[8], uint64_t a)
{
    for (int i = 7; i >= 0; i--, a >>= 8)
        out[i] = (uint8_t)a;
}

void store_key_u64_u32(uint8_t out[12], uint64_t a, uint32_t b)
{
    store_key_u64(out, a);
    for (int i = 11; i >= 8; i--, b >>= 8)
        out[i] = (uint8_t)b;
}

uint64_t store_key_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

uint32_t store_key_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Begins a read transaction, adopting a map grown by another process. */
static int txn_begin_read(struct store *s, MDB_txn **txn)
{
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(s->env, 0);
        rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, txn);
    }
    return rc;
}

static int add_table(struct store *s, const char *name, enum store_keyfmt kf)
{
    if (s->ntables >= STORE_MAX_TABLES)
        return -1;
    s->names[s->ntables] = strdup(name);
    s->keyfmt[s->ntables] = kf;
    return s->names[s->ntables] ? s->ntables++ : -1;
}

/* msgpack helpers for the meta values */
static int meta_put_packed(MDB_txn *txn, MDB_dbi dbi, const char *key, int is_str, uint64_t u,
                           const char *str)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (is_str)
        msgpack_pack_str_with_body(&pk, str, strlen(str));
    else
        msgpack_pack_uint64(&pk, u);
    MDB_val k = {strlen(key), (void *)key}, v = {sb.size, sb.data};
    int rc = mdb_put(txn, dbi, &k, &v, 0);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Reads a meta value packed as uint (is_str 0) or str into out; 0, MDB_NOTFOUND, or -1. */
static int meta_get_packed(MDB_txn *txn, MDB_dbi dbi, const char *key, uint64_t *u, char *out,
                           size_t outlen)
{
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, dbi, &k, &v);
    if (rc)
        return rc;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    rc = -1;
    if (msgpack_unpack_next(&up, v.mv_data, v.mv_size, &off) == MSGPACK_UNPACK_SUCCESS) {
        if (u && up.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            *u = up.data.via.u64;
            rc = 0;
        } else if (out && up.data.type == MSGPACK_OBJECT_STR) {
            size_t n = up.data.via.str.size < outlen ? up.data.via.str.size : outlen - 1;
            memcpy(out, up.data.via.str.ptr, n);
            out[n] = '\0';
            rc = 0;
        }
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

/* Creates or checks meta and the tables (write mode). */
static int open_tables_rw(struct store *s, const struct store_opts *o, char *err, size_t el)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc) {
        snprintf(err, el, "cannot begin transaction: %s", mdb_strerror(rc));
        return -1;
    }
    add_table(s, "meta", STORE_KEY_STR);
    for (const struct store_table *t = o->tables; t && t->name; t++)
        if (add_table(s, t->name, t->keyfmt) < 0) {
            snprintf(err, el, "too many tables");
            goto fail;
        }
    for (int i = 0; i < s->ntables; i++)
        if ((rc = mdb_dbi_open(txn, s->names[i], MDB_CREATE, &s->dbi[i]))) {
            snprintf(err, el, "cannot open table %s: %s", s->names[i], mdb_strerror(rc));
            goto fail;
        }
    uint64_t schema = 0;
    char role[64] = "";
    rc = meta_get_packed(txn, s->dbi[0], "schema", &schema, NULL, 0);
    if (rc == 0) {
        if (schema > STORE_SCHEMA) {
            snprintf(err, el,
                     "state was written by a newer gridnode (schema %llu, this one "
                     "reads up to %d); use a newer binary or another state directory",
                     (unsigned long long)schema, STORE_SCHEMA);
            goto fail;
        }
        meta_get_packed(txn, s->dbi[0], "role", NULL, role, sizeof role);
        if (o->role && role[0] && strcmp(role, o->role)) {
            snprintf(err, el, "state directory belongs to the %s role, not %s", role, o->role);
            goto fail;
        }
    } else if (rc != MDB_NOTFOUND) {
        snprintf(err, el, "cannot read the schema version");
        goto fail;
    }
    snprintf(s->role, sizeof s->role, "%s", o->role ? o->role : role);
    rc = meta_put_packed(txn, s->dbi[0], "schema", 0, STORE_SCHEMA, NULL);
    if (!rc)
        rc = meta_put_packed(txn, s->dbi[0], "role", 1, 0, s->role);
    for (int i = 0; !rc && i < s->ntables; i++) {
        char key[96];
        snprintf(key, sizeof key, "keyfmt.%s", s->names[i]);
        rc = meta_put_packed(txn, s->dbi[0], key, 0, (uint64_t)s->keyfmt[i], NULL);
    }
    if (rc || (rc = mdb_txn_commit(txn))) {
        snprintf(err, el, "cannot write metadata: %s", mdb_strerror(rc));
        return -1;
    }
    return 0;
fail:
    mdb_txn_abort(txn);
    return -1;
}

/* Discovers the tables of an existing environment (read-only mode). */
static int open_tables_ro(struct store *s, char *err, size_t el)
{
    MDB_txn *txn;
    MDB_dbi main;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = txn_begin_read(s, &txn);
    if (rc || (rc = mdb_dbi_open(txn, NULL, 0, &main)) || (rc = mdb_cursor_open(txn, main, &cur))) {
        snprintf(err, el, "cannot read the table list: %s", mdb_strerror(rc));
        if (txn)
            mdb_txn_abort(txn);
        return -1;
    }
    while (mdb_cursor_get(cur, &k, &v, s->ntables ? MDB_NEXT : MDB_FIRST) == 0) {
        char name[96];
        if (k.mv_size == 0 || k.mv_size >= sizeof name)
            continue;
        memcpy(name, k.mv_data, k.mv_size);
        name[k.mv_size] = '\0';
        if (add_table(s, name, STORE_KEY_STR) < 0)
            break;
    }
    mdb_cursor_close(cur);
    for (int i = 0; i < s->ntables; i++)
        if ((rc = mdb_dbi_open(txn, s->names[i], 0, &s->dbi[i]))) {
            snprintf(err, el, "cannot open table %s: %s", s->names[i], mdb_strerror(rc));
            mdb_txn_abort(txn);
            return -1;
        }
    int meta = -1;
    for (int i = 0; i < s->ntables; i++)
        if (!strcmp(s->names[i], "meta"))
            meta = i;
    if (meta < 0) {
        snprintf(err, el, "not a gridnode state directory (no meta table)");
        mdb_txn_abort(txn);
        return -1;
    }
    meta_get_packed(txn, s->dbi[meta], "role", NULL, s->role, sizeof s->role);
    uint64_t schema = 0;
    if (meta_get_packed(txn, s->dbi[meta], "schema", &schema, NULL, 0) == 0 &&
        schema > STORE_SCHEMA) {
        snprintf(err, el,
                 "state was written by a newer gridnode (schema %llu, this one reads "
                 "up to %d); use a newer binary",
                 (unsigned long long)schema, STORE_SCHEMA);
        mdb_txn_abort(txn);
        return -1;
    }
    for (int i = 0; i < s->ntables; i++) {
        char key[128];
        uint64_t kf = STORE_KEY_STR;
        snprintf(key, sizeof key, "keyfmt.%s", s->names[i]);
        meta_get_packed(txn, s->dbi[meta], key, &kf, NULL, 0);
        s->keyfmt[i] = kf <= STORE_KEY_U64_U32_U32 ? (enum store_keyfmt)kf : STORE_KEY_STR;
    }
    mdb_txn_commit(txn);
    return 0;
}

struct store *store_open(const char *dir, const struct store_opts *o, char *err, size_t el)
{
    struct store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, el, "out of memory");
        return NULL;
    }
    s->readonly = o->readonly;
    s->sync = o->sync;
    s->map_size = o->map_size ? o->map_size : STORE_DEFAULT_MAP;
    unsigned flags = MDB_NOTLS;
    if (o->readonly)
        flags |= MDB_RDONLY;
    if (o->sync == STORE_SYNC_META)
        flags |= MDB_NOMETASYNC;
    else if (o->sync == STORE_SYNC_NONE)
        flags |= MDB_NOSYNC;
    int rc = mdb_env_create(&s->env);
    if (!rc)
        rc = mdb_env_set_maxdbs(s->env, STORE_MAX_TABLES);
    if (!rc)
        rc = mdb_env_set_mapsize(s->env, s->map_size);
    if (!rc)
        rc = mdb_env_open(s->env, dir, flags, 0644);
    if (rc) {
        snprintf(err, el, "cannot open state in %s: %s%s", dir, mdb_strerror(rc),
                 rc == ENOENT ? " (does the directory exist and hold a gridnode state?)" : "");
        goto fail;
    }
    MDB_envinfo info;
    MDB_stat est;
    if (mdb_env_info(s->env, &info) == 0 && info.me_mapsize > s->map_size)
        s->map_size = info.me_mapsize;
    /* LMDB reopens a grown environment with a map just as big as its data: leave room
     * for the next commits (the map is address space; the file grows as used) */
    if (!o->readonly && mdb_env_stat(s->env, &est) == 0) {
        size_t used = (info.me_last_pgno + 1) * (size_t)est.ms_psize;
        while (used * 2 > s->map_size)
            s->map_size *= 2;
        if (mdb_env_set_mapsize(s->env, s->map_size) != 0) {
            snprintf(err, el, "cannot size the map of %s to %zu bytes", dir, s->map_size);
            goto fail;
        }
    }
    if ((o->readonly ? open_tables_ro(s, err, el) : open_tables_rw(s, o, err, el)) < 0)
        goto fail;
    return s;
fail:
    store_close(&s);
    return NULL;
}

void store_close(struct store **sp)
{
    struct store *s = sp ? *sp : NULL;
    if (!s)
        return;
    store_discard(s);
    free(s->ops);
    if (s->env)
        mdb_env_close(s->env);
    for (int i = 0; i < s->ntables; i++)
        free(s->names[i]);
    free(s);
    *sp = NULL;
}

int store_table(const struct store *s, const char *name)
{
    for (int i = 0; i < s->ntables; i++)
        if (!strcmp(s->names[i], name))
            return i;
    return -1;
}

int store_ntables(const struct store *s)
{
    return s->ntables;
}
const char *store_table_name(const struct store *s, int t)
{
    return s->names[t];
}
enum store_keyfmt store_table_keyfmt(const struct store *s, int t)
{
    return s->keyfmt[t];
}
const char *store_role(const struct store *s)
{
    return s->role;
}
size_t store_map_size(const struct store *s)
{
    return s->map_size;
}
void store_fault_commit(struct store *s, int nth)
{
    s->fault_nth = nth;
}

static int push_op(struct store *s, int table, bool del, const void *key, size_t klen,
                   const void *val, size_t vlen)
{
    if (s->readonly || table < 0 || table >= s->ntables || klen == 0 || klen > 511) {
        errno = EINVAL;
        return -1;
    }
    if (s->nops == s->capops) {
        size_t cap = s->capops ? s->capops * 2 : 64;
        struct store_op *n = realloc(s->ops, cap * sizeof *n);
        if (!n)
            return -1;
        s->ops = n;
        s->capops = cap;
    }
    uint8_t *buf = malloc(klen + vlen + 1);
    if (!buf)
        return -1;
    memcpy(buf, key, klen);
    if (vlen)
        memcpy(buf + klen, val, vlen);
    s->ops[s->nops++] = (struct store_op){table, del, klen, vlen, buf};
    return 0;
}

int store_put(struct store *s, int table, const void *key, size_t klen, const void *val,
              size_t vlen)
{
    return push_op(s, table, false, key, klen, val, vlen);
}

int store_del(struct store *s, int table, const void *key, size_t klen)
{
    return push_op(s, table, true, key, klen, NULL, 0);
}

size_t store_pending(const struct store *s)
{
    return s->nops;
}

void store_discard(struct store *s)
{
    for (size_t i = 0; i < s->nops; i++)
        free(s->ops[i].key);
    s->nops = 0;
}

/* Applies the buffered ops in one transaction; returns an LMDB or errno code. */
static int apply_ops(struct store *s)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->nops && !rc; i++) {
        struct store_op *op = &s->ops[i];
        MDB_val k = {op->klen, op->key}, v = {op->vlen, op->key + op->klen};
        if (op->del) {
            rc = mdb_del(txn, s->dbi[op->table], &k, NULL);
            if (rc == MDB_NOTFOUND)
                rc = 0;
        } else {
            rc = mdb_put(txn, s->dbi[op->table], &k, &v, 0);
        }
    }
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

int store_commit(struct store *s)
{
    if (s->nops == 0)
        return 0;
    if (s->fault_nth > 0 && --s->fault_nth == 0) {
        store_discard(s);
        errno = EIO;
        return -1;
    }
    int rc;
    for (int tries = 0;; tries++) {
        rc = apply_ops(s);
        if (rc != MDB_MAP_FULL || tries >= 16)
            break;
        size_t grown = s->map_size * 2;
        if (mdb_env_set_mapsize(s->env, grown))
            break;
        s->map_size = grown;
    }
    store_discard(s);
    if (rc) {
        errno = rc == MDB_MAP_FULL ? ENOSPC : rc > 0 && rc < 1000 ? rc : EIO;
        return -1;
    }
    return 0;
}

const char *store_error_text(int err)
{
    if (err == ENOSPC || err == EDQUOT)
        return "disk full (no space left for the state directory's database: free space "
               "there; until then requests that change state are refused, reads still work)";
    if (err == EIO)
        return "I/O error writing the state directory's database (a failing or full disk: "
               "check the system log and df)";
    return strerror(err);
}

int store_get(struct store *s, int table, const void *key, size_t klen, void **val, size_t *vlen)
{
    MDB_txn *txn;
    if (table < 0 || table >= s->ntables || klen == 0 || klen > 511 || txn_begin_read(s, &txn))
        return -1;
    MDB_val k = {klen, (void *)key}, v;
    int rc = mdb_get(txn, s->dbi[table], &k, &v), ret = -1;
    if (rc == MDB_NOTFOUND) {
        ret = 1;
    } else if (rc == 0 && (*val = malloc(v.mv_size + 1))) {
        memcpy(*val, v.mv_data, v.mv_size);
        ((char *)*val)[v.mv_size] = '\0';
        *vlen = v.mv_size;
        ret = 0;
    }
    mdb_txn_abort(txn);
    return ret;
}

int store_iter(struct store *s, int table, const void *from, size_t fromlen, store_iter_fn fn,
               void *arg)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    if (table < 0 || table >= s->ntables || txn_begin_read(s, &txn))
        return -1;
    if (mdb_cursor_open(txn, s->dbi[table], &cur)) {
        mdb_txn_abort(txn);
        return -1;
    }
    MDB_val k = {fromlen, (void *)from}, v;
    int rc =
        from ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    while (rc == 0) {
        if (fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size))
            break;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}

size_t store_count(struct store *s, int table)
{
    MDB_txn *txn;
    MDB_stat st;
    if (table < 0 || table >= s->ntables || txn_begin_read(s, &txn))
        return 0;
    size_t n = mdb_stat(txn, s->dbi[table], &st) == 0 ? st.ms_entries : 0;
    mdb_txn_abort(txn);
    return n;
}

/*
 * store.h - durable state: the only module that touches LMDB.
 *
 * A store is one LMDB environment in a role's state directory holding named tables.
 * Writes are buffered in memory (store_put / store_del) and applied together, in one
 * write transaction, by store_commit() - the group commit at the end of an event-loop
 * turn. A reply that reports a change must be sent only after the commit that holds it
 * returned 0. Reads (store_get, store_iter) see committed state only, never the
 * buffered writes of the current turn.
 *
 * Every environment records its schema version, the role that owns it and the key
 * format of each table in the "meta" table, so `gridnode dump` can decode any of them.
 */
#ifndef GRIDNODE_STORE_H
#define GRIDNODE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA 1

/* How a table's keys are laid out (for dump). Integers are big-endian. */
enum store_keyfmt {
    STORE_KEY_STR,     /* text */
    STORE_KEY_U64,     /* 8 bytes */
    STORE_KEY_U64_U32, /* 12 bytes: e.g. job id, task index */
    STORE_KEY_U64_U32_U32,
};

enum store_sync {
    STORE_SYNC_FULL = 0, /* fsync data and meta on every commit (default) */
    STORE_SYNC_META,     /* MDB_NOMETASYNC: a system crash may lose the last commit */
    STORE_SYNC_NONE,     /* MDB_NOSYNC: a system crash may lose recent commits */
};

struct store_table {
    const char *name;
    enum store_keyfmt keyfmt;
};

struct store_opts {
    const char *role;                 /* owner role; checked on reopen */
    const struct store_table *tables; /* terminated by {NULL}; "meta" is always added */
    enum store_sync sync;
    size_t map_size; /* initial map size in bytes; 0 = 64 MiB */
    bool readonly;   /* for dump: no writes, works beside a running role */
};

struct store;

/*
 * Opens (creating if needed, unless readonly) the environment in dir, which must exist.
 * Returns NULL on failure with a human-readable reason in err.
 */
struct store *store_open(const char *dir, const struct store_opts *opts, char *err, size_t errlen);
/* The sync mode it was opened with (the files beside it follow it: daemon/filestore.c). */
enum store_sync store_sync_mode(const struct store *s);
/* Discards uncommitted writes, closes, sets *sp to NULL. NULL-safe. */
void store_close(struct store **sp);

/* Index of a table by name, or -1. */
int store_table(const struct store *s, const char *name);

/* Buffers a write (the bytes are copied). 0, or -1 with errno (ENOMEM, EINVAL). */
int store_put(struct store *s, int table, const void *key, size_t klen, const void *val,
              size_t vlen);
int store_del(struct store *s, int table, const void *key, size_t klen);
/* Number of buffered writes. */
size_t store_pending(const struct store *s);

/*
 * Applies every buffered write in one transaction, growing the map and retrying on
 * MDB_MAP_FULL. Returns 0 when durable (per the sync mode); -1 with errno on failure,
 * in which case nothing was written and the buffer is discarded.
 */
int store_commit(struct store *s);
/* What a failed commit's errno means for an operator: "disk full (...)" for ENOSPC and
 * EDQUOT (MDB_MAP_FULL is reported as ENOSPC), else strerror's text. */
const char *store_error_text(int err);
/* Drops the buffered writes. */
void store_discard(struct store *s);

/*
 * Reads a committed value: 0 and a malloc'd copy in *val (caller frees), 1 if absent,
 * -1 on error.
 */
int store_get(struct store *s, int table, const void *key, size_t klen, void **val, size_t *vlen);

/*
 * Calls fn for each committed record of table in key order, starting at the first key
 * >= from (all when from is NULL), until fn returns nonzero. key and val are valid only
 * during the call. Returns 0, or -1 on error.
 */
typedef int (*store_iter_fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen);
int store_iter(struct store *s, int table, const void *from, size_t fromlen, store_iter_fn fn,
               void *arg);

/* Number of committed records in a table (0 on error). */
size_t store_count(struct store *s, int table);

/* Describing an environment, for dump. */
int store_ntables(const struct store *s);
const char *store_table_name(const struct store *s, int table);
enum store_keyfmt store_table_keyfmt(const struct store *s, int table);
const char *store_role(const struct store *s);
size_t store_map_size(const struct store *s);
const char *store_strerror(int rc);

/* Test hook: the next n-th commit fails with EIO (0 = off). */
void store_fault_commit(struct store *s, int nth);

/* Big-endian key helpers. */
void store_key_u64(uint8_t out[8], uint64_t a);
void store_key_u64_u32(uint8_t out[12], uint64_t a, uint32_t b);
uint64_t store_key_get_u64(const uint8_t *p);
uint32_t store_key_get_u32(const uint8_t *p);

#endif

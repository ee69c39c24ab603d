/*
 * record.h - a role's records in its store: one way to load them at start-up and one
 * way to save them at the end of a turn, for every role.
 *
 * A record is a msgpack value (the role's own encoding, through struct wire_buf) under
 * a key of its table's format (store.h: STORE_KEY_U64 is a job id, STORE_KEY_U64_U32 a
 * job id and an index, ...). Loading checks each key against its table's format, hands
 * the record to the role's function, and skips what the role cannot read with one
 * warning naming the table and key: a damaged or newer record never stops a role from
 * starting, and `gridnode dump` still shows it.
 */
#ifndef GRIDNODE_RECORD_H
#define GRIDNODE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "wire/wire.h"

/* What a record_load_fn says of one record. */
enum record_rc {
    RECORD_TAKEN = 0,      /* loaded */
    RECORD_UNREADABLE = 1, /* skipped: record_load warns, naming the table and key */
    RECORD_IGNORED = 2,    /* skipped on purpose (the role logged why, if it matters) */
};

/*
 * Called once per record whose key has its table's length: RECORD_TAKEN,
 * RECORD_UNREADABLE, RECORD_IGNORED, or -1 to stop loading (out of memory).
 */
typedef int (*record_load_fn)(void *arg, const uint8_t *key, size_t klen, const void *val,
                              size_t vlen);

/*
 * Loads every committed record of table in key order. Returns the number of records
 * skipped as unreadable (0 when all were read), or -1 if fn or the store failed.
 */
long record_load(struct store *s, int table, record_load_fn fn, void *arg);

/* Encodes one record into a buffer (reset first); 0, or -1 when it cannot be encoded. */
typedef int (*record_encode_fn)(const void *rec, struct wire_buf *wb);

/* Buffers the record under key (store_put): 0, or -1 with errno. wb is scratch space. */
int record_save(struct store *s, int table, const void *key, size_t klen, const void *rec,
                record_encode_fn enc, struct wire_buf *wb);
/* The same under an 8-byte id key, and a 12-byte id + index key. */
int record_save_u64(struct store *s, int table, uint64_t id, const void *rec, record_encode_fn enc,
                    struct wire_buf *wb);
int record_save_u64_u32(struct store *s, int table, uint64_t id, uint32_t idx, const void *rec,
                        record_encode_fn enc, struct wire_buf *wb);

/*
 * Named counters of a role's "meta"-like table (next job id and the like), stored as
 * decimal text so that `gridnode dump` shows them as they are. get: 0 and *v, 1 when
 * absent (*v untouched), -1 when unreadable or on error.
 */
int record_get_u64(struct store *s, int table, const char *name, uint64_t *v);
int record_put_u64(struct store *s, int table, const char *name, uint64_t v);

#endif

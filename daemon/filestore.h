/*
 * filestore.h - a level's content-addressed file store (issue 26, docs/data.md "Where
 * copies live"), shared by the cluster manager and the batch role: one copy per content
 * (SHA-256) under DIR/XX/HASH, a file being received under DIR/part/HASH, one record
 * per file in a table of the role's store (size, bytes received in order, the running
 * hash state, the user it is charged to), so an upload cut by kill -9 goes on from the
 * last acknowledged chunk.
 *
 *   filestore.c   the index, the records, the bytes on disk, the per-user sums
 *   filereq.c     what every level checks alike: FILE_HAVE, FILE_PUT, a SUBMIT's
 *                 "inputs" and "outputs" (calls filestore.c)
 *
 * The role calls filestore_sync before each commit (the files written in the turn made
 * durable), and after a failed commit destroys the store and opens it again (the index
 * is rebuilt from the records).
 */
#ifndef GRIDNODE_DAEMON_FILESTORE_H
#define GRIDNODE_DAEMON_FILESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/sha256.h"
#include "wire/wire.h"

struct store;
struct filestore;

#define FILESTORE_USER_MAX 64

/* One stored file: whole and verified (done), or being received (have bytes of size). */
struct fsfile {
    uint8_t d[SHA256_LEN];
    uint64_t size, have;
    bool done;
    bool mark;                     /* the role's sweep: a job names it */
    int64_t t_ms;                  /* last change */
    struct sha256 sha;             /* the bytes 0..have hashed (while not done) */
    char user[FILESTORE_USER_MAX]; /* charged to (files.user_mb), "" nobody */
    struct fsfile *next;
};

struct filestore_cfg {
    struct store *store;
    int table;         /* the role's table of file records ("files") */
    const char *dir;   /* STATE_DIR/files */
    const char *level; /* "the cluster", "the batch role": in error texts */
    bool *turn_failed; /* set when a write could not be buffered (the turn is undone) */
    uint32_t *skipped; /* unreadable records skipped at load, counted; may be NULL */
};

/* The store from its records (DIR/part made): the handle, or NULL (logged). */
struct filestore *filestore_open(const struct filestore_cfg *cfg);
/* NULL-safe; sets *p NULL. */
void filestore_destroy(struct filestore **p);

/* A file by digest, or NULL. */
struct fsfile *filestore_find(struct filestore *fs, const uint8_t d[SHA256_LEN]);
/* Digest of 64 lower-case hex digits: 0, or -1 when not a hash. */
int filestore_parse_hash(const char *s, size_t len, uint8_t d[SHA256_LEN]);
/*
 * Appends data (its bytes at offset f->have) to the file being received (made durable by
 * filestore_sync before the turn's commit); when it completes the file, checks its hash,
 * syncs it and moves it into the store. The record is buffered. f NULL: a new file of
 * size `size` charged to user (NULL or "": nobody), created in the index. Returns the
 * file, or NULL with the reason in why and *code (WE_STORAGE: disk full or I/O error,
 * nothing kept beyond the last chunk; WE_INVALID: the bytes do not hash to the name,
 * the partial file dropped).
 */
struct fsfile *filestore_append(struct filestore *fs, struct fsfile *f, const uint8_t d[SHA256_LEN],
                                uint64_t size, const char *user, const void *data, size_t len,
                                int *code, char *why, size_t wl);
/* Makes the files written this turn durable; called before the turn's commit: 0, or -1
 * (errno; the turn fails). */
int filestore_sync(struct filestore *fs);
/* Every stored file to fn (stops at nonzero and returns it; fn may drop f). */
int filestore_each(struct filestore *fs,
                   int (*fn)(struct filestore *fs, struct fsfile *f, void *arg), void *arg);
/* Removes a file: its bytes, its record, its index entry (f freed): 0, or -1 (out of
 * memory: the turn fails). */
int filestore_drop(struct filestore *fs, struct fsfile *f);
/* A whole file charged to nobody (a node's output) charged to user from now on (the
 * job's owner, once a result names it: files.user_mb counts a user's outputs too); no
 * change for a file charged to someone already, or user NULL or "". 0, or -1 (the
 * record could not be buffered). */
int filestore_charge(struct filestore *fs, struct fsfile *f, const char *user);
/* Reads up to len bytes at off of a file into buf (a whole file, or the bytes received
 * so far of one being received: the caller keeps off + len within f->have): bytes read,
 * or -1 (errno). */
ssize_t filestore_read(struct filestore *fs, const struct fsfile *f, uint64_t off, void *buf,
                       size_t len);
/* The level's name for error texts ("the cluster"). */
const char *filestore_level(const struct filestore *fs);
/* The bytes of the files charged to user (whole and being received). */
uint64_t filestore_user_bytes(struct filestore *fs, const char *user);

/* ---- filereq.c: the requests ---- */

/* A level's limits on what it takes. */
struct filestore_limits {
    uint64_t job_bytes;  /* one file at most (files.job_mb) */
    uint64_t user_bytes; /* a user's files together at most (files.user_mb), 0: no limit */
    /* cut-through (docs/data.md "Speed"): a SUBMIT may name a file still being received
     * when it is charged to the submitting user (early_user; NULL: ""), and FILE_STATE
     * says so ("early"). False at the levels that take only whole files. */
    bool early;
    const char *early_user;
    /* a file being received takes chunks only from whom it is charged to; another user's
     * FILE_HAVE/FILE_PUT is told to wait (FILE_STATE "wait_ms") until it brought no
     * chunk for this long (ms; 0: FILESTORE_FOREIGN_MS), then the upload restarts from 0
     * charged to that user (docs/data.md "Limits") */
    int64_t foreign_ms;
};
#define FILESTORE_FOREIGN_MS 60000
#define FILESTORE_WAIT_MS 1000 /* "ask again after": FILE_STATE wait_ms */

/*
 * FILE_HAVE and FILE_PUT (docs/wire.md 6.19) of message m answered into reply: FILE_STATE
 * (how much of the file is held), or an ERROR (a bad hash or size, a file over
 * files.job_mb, a new file over the user's files.user_mb, a write that failed). user is
 * whom a new file is charged to (the request's "user", set by access control under
 * CURVE; NULL: nobody, as a node's outputs).
 */
void filestore_h_have(struct filestore *fs, const struct filestore_limits *lim,
                      const struct wire_msg *m, const char *user, struct wire_buf *reply);
void filestore_h_put(struct filestore *fs, const struct filestore_limits *lim,
                     const struct wire_msg *m, const char *user, struct wire_buf *reply);

/*
 * A SUBMIT's "inputs" and "outputs" (m) checked: names (lib/datapath.h), every input a
 * whole file held here with its size (with lim->early, or one being received charged to
 * lim->early_user), no two inputs on one name in one task, "task" below
 * ntasks, the distinct inputs together within lim->job_bytes. NULL, or the reason (in
 * why, or a constant text).
 */
const char *filestore_submit_check(struct filestore *fs, const struct filestore_limits *lim,
                                   const msgpack_object *m, uint64_t ntasks, char *why, size_t wl);
/*
 * A job's files as kept with it (the cluster's and the batch role's table "jobdata"):
 * a map of "inputs" and "outputs" (the SUBMIT's, else empty arrays) and, when given,
 * "checkpoint_s". Written into wb (empty) from SUBMIT m: 1, or 0 when m names none.
 */
int filestore_jobdata_pack(const msgpack_object *m, struct wire_buf *wb);
/* The "inputs" and "outputs" keys of that map, with m's lists (else empty arrays). */
void filestore_put_lists(const msgpack_object *m, struct wire_buf *wb);
/* Calls fn for each entry of a kept map's "inputs" that task idx gets (idx UINT32_MAX:
 * every entry); stops at the first nonzero return and returns it. */
int filestore_each_input(const void *data, size_t len, uint32_t idx,
                         int (*fn)(void *arg, const msgpack_object *in), void *arg);
/* For filestore_each_input: counts the entries (arg: a uint32_t), or packs each as the
 * level below takes it, a map of name, hash and size (arg: a struct wire_buf). */
int filestore_count_input(void *arg, const msgpack_object *in);
int filestore_pack_input(void *arg, const msgpack_object *in);

#endif

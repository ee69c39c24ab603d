/*
 * stage.h - a node's side of files through the grid (issue 26, docs/data.md): a task's
 * file lists (task map "inputs" / "outputs"), the node's cache of input files
 * (STATE_DIR/cache, one copy per content, least recently used files dropped beyond
 * client.cache_mb), placing a task's inputs into its working directory, and collecting
 * the outputs it left there. No sockets: the transfers are live_stage.c's.
 */
#ifndef GRIDNODE_STAGE_H
#define GRIDNODE_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

/* One input of a task: its name in the working directory, its content. */
struct stage_in {
    char *name;
    char hex[65];
    uint64_t size;
};

/* One output a task kept: name, size, SHA-256 (the bytes are in the outbox). */
struct stage_out {
    char *name;
    char hex[65];
    uint64_t size;
};

/* A task's checkpoint directory in its working directory (ckpt.h): never an output. */
#define CKPT_DIRNAME ".gridnode-checkpoint"

struct stage_files {
    struct stage_in *in;
    uint32_t nin;
    /* checkpoints (ckpt.h, task map "checkpoint_s", "ckpt_mb", "ckpt", "ckpt_issue"): the
       upload period (0: none), the cap, the latest at the cluster and its issue */
    uint32_t ckpt_s, ckpt_mb, ck_issue;
    struct stage_in *ck;
    uint32_t nck;
    bool ck_local;     /* staged: this node's own checkpoint is used (newer or the same) */
    char ck_note[300]; /* why a checkpoint was not uploaded (goes into the result) */
    /* the upload in progress (live_stage.c; not stored): its snapshot (ckpt_snapshot),
       the next file to upload, the CKPT in flight, the next snapshot, the last sent */
    struct stage_out *snap;
    uint32_t nsnap, snap_next;
    bool ck_busy, ck_sent_ok;
    uint64_t ck_id;
    int64_t ck_sent_ms, ck_next_ms;
    uint8_t ck_sum[32];
    /* a parallel job's rank (PSYNC_ACK "ckpt_run", docs/data.md "Checkpoints of parallel
       jobs"): the job's run (sent back as CKPT "issue"), and the newest generation the
       cluster holds from this rank's run or was restored from ("ckpt_gen"; -1: none):
       only a higher one in the marker is sent */
    bool ck_par;
    uint32_t ck_run, ck_snap_gen; /* and the generation of the snapshot being sent */
    int64_t ck_gen;
    char **globs; /* the job's --output patterns */
    uint32_t nglobs;
    struct stage_out *out; /* collected when the task ended (stage_collect) */
    uint32_t nout;
    bool collected;
};

/*
 * The "inputs", "outputs" (and, in a stored record, "kept") of map m into *out (NULL
 * when it has none). A name that escapes, or a hash that is not one, writes why into
 * bad (the task then fails with it). 0, or -1 when memory ran out.
 */
int stage_files_take(struct stage_files **out, const msgpack_object *m, char *bad, size_t n);
/* Fields stage_files_pack writes, and writing them (a task's stored record). */
uint32_t stage_files_nfields(const struct stage_files *f);
void stage_files_pack(const struct stage_files *f, struct wire_buf *wb);
void stage_files_free(struct stage_files **f);

/* The node's cache of input files. */
struct stage_cache {
    char dir[600];      /* STATE_DIR/cache */
    uint64_t cap, used; /* bytes */
    struct stage_centry *e;
    uint32_t n, capn;
    uint64_t tick;
};

/* Opens (making) STATE_DIR/cache and lists what it holds: 0, or -1 (errno). */
int stage_cache_open(struct stage_cache *c, const char *state_dir, uint64_t cap_bytes);
void stage_cache_close(struct stage_cache *c);
/* Whether the cache holds hex (of size bytes); marks it used now. */
bool stage_cache_has(struct stage_cache *c, const char *hex, uint64_t size);
/* The path of hex in the cache, and of its download in progress. */
void stage_cache_path(const struct stage_cache *c, const char *hex, char *buf, size_t n);
void stage_cache_part(const struct stage_cache *c, const char *hex, char *buf, size_t n);
/*
 * A download of hex (size bytes, hash checked) is complete in its part file: moves it
 * into the cache (read-only), then drops the least recently used files not in keep
 * (hashes, nkeep of them) while the cache holds more than its cap. 0, or -1 (errno).
 */
int stage_cache_add(struct stage_cache *c, const char *hex, uint64_t size, char *const *keep,
                    uint32_t nkeep);

/*
 * Places f's inputs from the cache into workdir (an empty directory just made): hard
 * links when link is set (the task runs under another uid and cannot write them), else
 * copies. 0, or -1 with why in err.
 */
int stage_place(const struct stage_cache *c, const struct stage_files *f, const char *workdir,
                bool link, char *err, size_t n);

/*
 * The files below workdir matching f's globs (fnmatch, '/' only matched by '/'), never
 * following a symbolic link: each is hashed and linked or copied into outbox
 * (STATE_DIR/outbox/HASH), and listed in f->out. A symbolic link that matches is
 * refused: its name goes into note (the result tells the user). 0, or -1 with err.
 */
int stage_collect(struct stage_files *f, const char *workdir, const char *outbox, char *note,
                  size_t nn, char *err, size_t n);

/* key and its value, the list of n files v (name, hash, size: a result's kept outputs,
 * a rank's, a checkpoint's snapshot; docs/wire.md), into wb's map. */
void stage_pack_files(struct wire_buf *wb, const char *key, const struct stage_out *v, uint32_t n);
/* Adds "files" (f's kept outputs) and, when note is not empty, "files_note" to the result
 * map *res (replaced by a new malloc'd copy): 0, or -1 (out of memory, *res unchanged). */
int stage_result_files(void **res, size_t *len, const struct stage_files *f, const char *note);

/* Copies from to a new file to (0644): 0, or -1 (errno). The directories of dir/name
 * above its last component made (0755): 0, or -1 (errno). */
int stage_copy_file(const char *from, const char *to);
int stage_make_parents(const char *dir, const char *name);

/* SHA-256 of the file at path as hex: 0, or -1 (errno). */
int stage_hash_file(const char *path, char hex[65], uint64_t *size);

#endif

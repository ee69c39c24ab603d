/*
 * ckpt.h - a node's side of task checkpoints (issue 26, docs/data.md "Checkpoints"):
 * the directory a task finds in GRIDNODE_CHECKPOINT_DIR (WORKDIR/.gridnode-checkpoint),
 * kept between runs in STATE_DIR/ckpt/JOB.IDX/ISSUE (ISSUE: the issue of the task that
 * wrote it), put back in place when the task runs again on this node, and copied
 * (hashed, into the outbox) for an upload to the cluster. No sockets: the uploads are
 * live_stage.c's. Nothing here follows a symbolic link the task made.
 */
#ifndef GRIDNODE_CKPT_H
#define GRIDNODE_CKPT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "roles/client/live/stage.h"

/* The issue of the checkpoint this node keeps for task idx of job: 0 and *issue, or -1
 * (none). */
int ckpt_local(const char *state_dir, uint64_t job, uint32_t idx, uint32_t *issue);
/*
 * Keeps workdir's checkpoint directory (left by a run that ended without success, or
 * by a client killed while the task ran) as task idx of job's, made by issue, replacing
 * the one kept before. A checkpoint "directory" that is not one (a symbolic link the
 * task put there) is not kept. 0, or -1 (nothing there, or it could not be moved).
 */
int ckpt_keep(const char *state_dir, const char *workdir, uint64_t job, uint32_t idx,
              uint32_t issue);
/* Forgets the checkpoint kept for task idx of job (it finished), and removes workdir's
 * (NULL: none), so that the working directory can be pooled again when empty. */
void ckpt_drop(const char *state_dir, const char *workdir, uint64_t job, uint32_t idx);
/* Removes kept checkpoints untouched for a week (tasks that never came back), and the
 * working directories STATE_DIR/work/ID a killed client left for tasks it no longer
 * holds (keep(arg, ID) false): their checkpoint must never reach a later task given the
 * same local ID. */
void ckpt_sweep(const char *state_dir, bool (*keep)(void *arg, uint64_t id), void *arg);
/*
 * Makes workdir's checkpoint directory: the kept one moved into place when use_local,
 * else made empty and, when f names a migrated checkpoint (f->ck, f->nck), its files
 * copied there from the cache. Owned by uid (every file, not following links) when
 * chown is set. 0, or -1 with why in err.
 */
int ckpt_place(const char *state_dir, const struct stage_cache *c, const struct stage_files *f,
               const char *workdir, uint64_t job, uint32_t idx, bool use_local, char *err,
               size_t n);
/*
 * A snapshot of workdir's checkpoint directory for an upload: each regular file copied
 * into outbox and hashed there (the copy: the task may be writing the original), listed
 * in *out (*n of them, malloc'd; names relative to the directory). Symbolic links are
 * not followed (named in note). More than cap bytes in all: -1 with why in note,
 * nothing listed. 0, or -1 (note says why).
 */
int ckpt_snapshot(const char *workdir, const char *outbox, uint64_t cap, struct stage_out **out,
                  uint32_t *n, char *note, size_t nn);
void ckpt_snapshot_free(struct stage_out **out, uint32_t *n);

/* A parallel job's rank marks a complete generation of its checkpoint by writing its
 * number into this file of its checkpoint directory, last (docs/data.md). */
#define CKPT_GEN_FILE ".generation"
/*
 * The generation workdir's marker names: 1 and *gen, 0 (no marker yet, or an empty one:
 * being written), or -1 with why in note (not a decimal number 0..4294967295, or not a
 * regular file).
 */
int ckpt_generation(const char *workdir, uint32_t *gen, char *note, size_t nn);
/* Whether workdir's checkpoint directory holds files but no marker (a rank that never
 * marked a generation: nothing of it was sent). */
bool ckpt_unmarked(const char *workdir);
/*
 * ckpt_snapshot of a complete generation, for a parallel job's rank: taken only while
 * the directory is at rest (no regular file modified after the marker), and dropped
 * when the marker or that changed during the copy (the rank began its next generation).
 * 1: taken, *gen its generation; 0: no marker, or not at rest (try again soon); -1:
 * note says why (a bad marker, too large, ...). The marker is one of the files.
 */
int ckpt_snapshot_gen(const char *workdir, const char *outbox, uint64_t cap, uint32_t *gen,
                      struct stage_out **out, uint32_t *n, char *note, size_t nn);

#endif

/*
 * files.h - the cluster's file store (issue 26, docs/data.md): files are kept once per
 * content (SHA-256) under STATE_DIR/files, received in order in chunks (FILE_HAVE,
 * FILE_PUT), served in chunks (FILE_GET), and named by a job's SUBMIT ("inputs",
 * "outputs") and by its tasks' results ("files").
 *
 *   files.c        the requests (FILE_*), a job's files at SUBMIT, a task's files in its
 *                  task map and in its result
 *   files_par.c    a parallel job's files (PSUBMIT "inputs", "outputs"): kept with the
 *                  job, named in each rank's PSYNC_ACK command, its ranks' kept outputs
 *                  (stored with their stdout, scored_output.c) found for FILE_GET and
 *                  the sweep
 *   files_ckpt.c   tasks' checkpoints (CKPT): the latest per task, kept in table "ckpt",
 *                  handed with the task when it is issued again, dropped once it is done
 *   files_pckpt.c  parallel jobs' checkpoints (CKPT with "gen"): per rank and generation
 *                  in table "pckpt", the newest generation every rank delivered handed
 *                  to each rank when the job starts again; the check of a checkpoint
 *   files_cut.c    cut-through: reads of a file still being uploaded (a job may name
 *                  one) held until its chunks arrive; the FILE_DATA reply
 *
 * The store itself (the index, the records, the bytes on disk, FILE_HAVE and FILE_PUT)
 * is daemon/filestore.h, shared with the batch role.
 */
#ifndef GRIDNODE_CLUSTER_FILES_H
#define GRIDNODE_CLUSTER_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/filestore.h"
#include "lib/sha256.h"
#include "wire/wire.h"

struct cluster;
struct job;
struct pjob;
struct request;

/* ---- files_par.c ---- */

/* Input entries one rank of a parallel job may have (the job's shared ones and its own):
 * each is named in the rank's start command, and one PSYNC_ACK holds at most 65,536
 * msgpack values (docs/wire.md 2), 7 per entry. A PSYNC_ACK carries the inputs of this
 * many entries at most (the first rank's always): the other ranks' starts follow in the
 * next ones. */
#define FILES_PAR_INPUTS_MAX 4096u
/* PSUBMIT m's files checked: files_submit_check with ntasks = procs ("task" names a
 * rank), and no rank over FILES_PAR_INPUTS_MAX entries. NULL, or the reason. */
const char *files_par_check(struct cluster *c, const msgpack_object *m, char *why, size_t wl);
/* How many input entries rank of j gets (0 for a job without files). */
uint32_t files_par_rank_inputs(const struct pjob *j, uint32_t rank);

/* PSUBMIT m's "inputs" / "outputs" (checked by files_submit_check with ntasks = procs:
 * "task" names a rank) kept with j (j->data, saved with its record): 0, or -1 (out of
 * memory). */
int files_par_attach(struct pjob *j, const msgpack_object *m);
/* Fields the PSYNC_ACK command starting a rank of j adds ("inputs": those of the rank,
 * "outputs": the globs), and writing them. */
uint32_t files_par_cmd_nfields(const struct pjob *j);
void files_par_cmd_pack(const struct pjob *j, uint32_t rank, struct wire_buf *wb);
/* Whether j names the file hex (64 hex digits): as an input (out false), or as an output
 * rank kept. */
/* Calls fn for each entry of the "files" array of a stored record (a rank's kept outputs,
 * a checkpoint generation) until fn returns nonzero; that value, or 0. */
int files_rec_each(const void *val, size_t vlen, int (*fn)(void *arg, const msgpack_object *e),
                   void *arg);
/* A files-entry callback: nonzero if e's "hash" is the 64 hex digits at arg. */
int files_same_hash(void *arg, const msgpack_object *e);
bool files_par_names(struct cluster *c, const struct pjob *j, bool out, uint32_t rank,
                     const char *hex);
/* Calls fn for every file a parallel job names (its inputs, its ranks' kept outputs). */
void files_par_each(struct cluster *c, int (*fn)(void *arg, const msgpack_object *e), void *arg);

/* ---- files_ckpt.c ---- */

/* CKPT (docs/wire.md 6.19): a node holding task idx of job names its latest checkpoint,
 * every file of it stored whole here; recorded (replacing the older one), reply OK. */
void files_h_ckpt(struct cluster *c, struct request *r);
/* Fields of task idx's checkpoint in its task map ("checkpoint_s", "ckpt_mb" and, when
 * one was recorded, "ckpt", "ckpt_issue"), and writing them (files_ckpt_nfields first:
 * it reads the record files_ckpt_pack writes). */
uint32_t files_ckpt_nfields(struct cluster *c, const struct job *j, uint32_t idx);
/* A checkpoint record read and unpacked (files_pckpt.c), kept until the next read: the
 * start command's fields are counted, then packed, from one read. */
struct files_rec {
    void *val;
    size_t vlen;
    msgpack_unpacked up;
    bool have; /* up holds a map with a "files" array */
};
void files_rec_clear(struct files_rec *r);
/* Reads key of table into r (cleared first): true when r->have. */
bool files_rec_get(struct cluster *c, int table, const void *key, size_t klen, struct files_rec *r);
void files_ckpt_pack(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *tb);
/* The same "ckpt" and "ckpt_issue" in a JOB task row (docs/wire.md 6.3): 2 fields when
 * task idx has a checkpoint here (recorded, or carried in), else 0; then writing them. */
uint32_t files_ckpt_row_nfields(struct cluster *c, const struct job *j, uint32_t idx);
void files_ckpt_row_pack(const struct job *j, uint32_t idx, struct wire_buf *tb);
/* SUBMIT m's "ckpt" (issue 26: a batch role moving a task from another cluster carries
 * its latest checkpoint) checked: only with "checkpoint_s" and ntasks 1, each file
 * stored whole here, names as CKPT's, at most files.ckpt_mb. NULL, or the reason. */
const char *files_ckpt_submit_check(struct cluster *c, const msgpack_object *m, uint64_t ntasks,
                                    char *why, size_t wl);
/* The job's files map of SUBMIT m with "ckpt" (filestore_jobdata_pack's, and "ckpt":
 * task 0's latest checkpoint until it records one) into wb: 1. */
int files_ckpt_jobdata_pack(const msgpack_object *m, struct wire_buf *wb);
/* For files_sweep: fn for each file of j's carried-in checkpoint while its task is not
 * done. */
void files_ckpt_mark_carried(struct cluster *c, const struct job *j,
                             int (*fn)(void *arg, const msgpack_object *e), void *arg);
/* Whether a checkpoint of one of j's tasks names the file of digest d. */
bool files_ckpt_names(struct cluster *c, const struct job *j, const uint8_t d[SHA256_LEN]);
/* For files_sweep: marks the files of the checkpoints of unfinished tasks, deletes the
 * records of finished tasks and of jobs that are gone. 0, or -1 (the turn fails). */
int files_ckpt_sweep(struct cluster *c);

/* ---- files_pckpt.c ---- */

/* A checkpoint's files (CKPT "files") checked against the store and files.ckpt_mb (per
 * unit: "task", "rank"): NULL, or why (in why). */
const char *files_ckpt_check(struct cluster *c, const msgpack_object *fl, const char *unit,
                             char *why, size_t wl);
/* CKPT with "gen" from node index me (its session checked): a rank's checkpoint of a
 * generation, recorded; the job's complete generation moves up; reply OK or an error. */
void files_pckpt_h(struct cluster *c, struct request *r, uint32_t me);
/* j's checkpoint period from its files map (PSUBMIT "checkpoint_s", j->data). */
void files_pckpt_attach(struct pjob *j);
/* Fields a rank's PSYNC_ACK start command adds ("checkpoint_s", "ckpt_mb", "ckpt_run"
 * and, from a complete generation, "ckpt" and "ckpt_gen"), the number of "ckpt" entries
 * (after nfields) and writing them (right after nfields: it reads the record). */
uint32_t files_pckpt_cmd_nfields(struct cluster *c, const struct pjob *j, uint32_t rank);
uint32_t files_pckpt_cmd_files(void);
void files_pckpt_cmd_pack(struct cluster *c, const struct pjob *j, uint32_t rank,
                          struct wire_buf *wb);
/* Whether a stored checkpoint of j names the file hex (64 hex digits). */
bool files_pckpt_names(struct cluster *c, struct pjob *j, const char *hex);
/* PSUBMIT m's "ckpt_from" (a batch role running a job again): the complete generation
 * of that earlier job of the same user and size copied to j (added, its id set), as
 * its own. 0 (also when there is none to copy), or -1 (the turn fails). */
int files_pckpt_from(struct cluster *c, struct pjob *j, const msgpack_object *m);
/* At load: every parallel job's period and stored checkpoints. 0, or -1. */
int files_pckpt_load(struct cluster *c);
/* For files_sweep: calls fn for each file of the checkpoints kept, deletes those of jobs
 * done, cancelled or gone. 0, or -1 (the turn fails). */
int files_pckpt_sweep(struct cluster *c, int (*fn)(void *arg, const msgpack_object *e), void *arg);

/* ---- files_cut.c ---- */

/* The daemon's hold kinds of the reads held here (FILES_CUT_KIND + a slot). */
#define FILES_CUT_KIND 0x10000u
bool files_cut_kind(uint32_t kind);
/* FILE_DATA of [off, off+len) of f (whole, or held that far) into wb (reset first), with
 * "have" while f is being uploaded; an ERROR when it cannot be read. */
void files_cut_data(struct cluster *c, struct wire_buf *wb, uint64_t req_id, const struct fsfile *f,
                    uint64_t off, uint64_t len);
/* FILE_GET r of [off, off+len) of f (a file r's job names, whole or being uploaded):
 * answered now, or held until the chunk arrives (files_cut_progress), the upload fails or
 * stalls (files.upload_wait_s), or a short wait passes ("not yet"). */
void files_cut_get(struct cluster *c, struct request *r, struct fsfile *f, uint64_t off,
                   uint64_t len);
/* After a FILE_PUT of file d (stored further, completed, or dropped): the held reads it
 * answers, answered in the order of their chunks. */
void files_cut_progress(struct cluster *c, const uint8_t d[SHA256_LEN]);
/* The daemon's expiry of held read `handle` (files_cut_kind): its answer into reply. */
void files_cut_expire(struct cluster *c, uint64_t handle, uint64_t req_id, struct wire_buf *reply);

/* ---- files.c ---- */

/* The file index and every job's files (cluster_load). */
int files_load(struct cluster *c);

void files_h_have(struct cluster *c, struct request *r);
void files_h_put(struct cluster *c, struct request *r);
void files_h_get(struct cluster *c, struct request *r);
/* A purge removed a job with files: the next files_sweep looks for files no job names. */
void files_sweep_note(struct cluster *c);
/* When noted (or hourly), deletes the stored files no job names any more that have not
 * changed for files.keep_s (an upload waiting for its SUBMIT is younger). */
void files_sweep(struct cluster *c);
/* SUBMIT's "inputs"/"outputs" checked (names, known whole files, size limit, ntasks):
 * NULL, or the reason. */
const char *files_submit_check(struct cluster *c, const msgpack_object *m, uint64_t ntasks,
                               char *why, size_t wl);
/* Keeps them with j (j->data) and buffers its record: 0, or -1 (out of memory). */
int files_job_attach(struct cluster *c, struct job *j, const msgpack_object *m);
/* Fields task idx of j adds to its task map (inputs, outputs, its checkpoint), and
 * writing them (right after: the checkpoint record read by the first is reused). */
uint32_t files_task_nfields(struct cluster *c, const struct job *j, uint32_t idx);
void files_task_pack(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *tb);
/* A result's "files" checked against the store: NULL, or why they cannot be kept. When
 * they are kept, each is charged to owner (the job's user) unless charged already
 * (docs/data.md "Limits": a user's outputs count in files.user_mb). */
const char *files_result_check(struct cluster *c, const char *owner, const msgpack_object *res,
                               char *why, size_t wl);

#endif

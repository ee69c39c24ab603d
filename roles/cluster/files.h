/*
 * files.h - the cluster's file store (issue 26, docs/data.md): files are kept once per
 * content (SHA-256) under STATE_DIR/files, received in order in chunks (FILE_HAVE,
 * FILE_PUT), served in chunks (FILE_GET), and named by a job's SUBMIT ("inputs",
 * "outputs") and by its tasks' results ("files").
 *
 *   files.c        the requests (FILE_*), a job's files at SUBMIT, a task's files in its
 *                  task map and in its result
 *   files_ckpt.c   tasks' checkpoints (CKPT): the latest per task, kept in table "ckpt",
 *                  handed with the task when it is issued again, dropped once it is done
 *   files_store.c  the index of stored files, their records, the bytes on disk
 */
#ifndef GRIDNODE_CLUSTER_FILES_H
#define GRIDNODE_CLUSTER_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/sha256.h"
#include "wire/wire.h"

struct cluster;
struct job;
struct request;

/* One stored file: whole and verified (done), or being received (have bytes of size). */
struct cfile {
    uint8_t d[SHA256_LEN];
    uint64_t size, have;
    bool done;
    bool mark;         /* files_sweep: a job names it */
    int64_t t_ms;      /* last change */
    struct sha256 sha; /* the bytes 0..have hashed (while not done) */
    struct cfile *next;
};

/* ---- files_store.c ---- */

/* The index from the records of table "files"; the index freed. */
int files_store_load(struct cluster *c);
void files_free(struct cluster *c);
/* A file by digest, or NULL. */
struct cfile *files_find(struct cluster *c, const uint8_t d[SHA256_LEN]);
/* Digest of 64 hex digits: 0, or -1 when not a hash. */
int files_parse_hash(const char *s, size_t len, uint8_t d[SHA256_LEN]);
/*
 * Appends data (its bytes at offset f->have) to the file being received (made durable by
 * files_sync before the turn's commit); when it completes the file, checks its hash,
 * syncs it and moves it into the store. The record is buffered. f NULL: a new file of
 * size `size` (created in the index). Returns the file, or NULL with the reason in why
 * and *code (WE_STORAGE: disk full or I/O error, nothing kept beyond the last chunk;
 * WE_INVALID: the bytes do not hash to the name, the partial file dropped).
 */
struct cfile *files_append(struct cluster *c, struct cfile *f, const uint8_t d[SHA256_LEN],
                           uint64_t size, const void *data, size_t len, int *code, char *why,
                           size_t wl);
/* Makes the files written this turn durable; called before the turn's commit: 0, or -1
 * (errno; the turn fails). */
int files_sync(struct cluster *c);
/* Every stored file to fn (stops at nonzero), and removing one (its bytes, its record,
 * its index entry; f freed): 0, or -1 (out of memory: the turn fails). */
int files_each(struct cluster *c, int (*fn)(struct cluster *c, struct cfile *f, void *arg),
               void *arg);
int files_drop(struct cluster *c, struct cfile *f);
/* Reads up to len bytes at off of a whole file into buf: bytes read, or -1 (errno). */
ssize_t files_read(struct cluster *c, const struct cfile *f, uint64_t off, void *buf, size_t len);

/* ---- files_ckpt.c ---- */

/* CKPT (docs/wire.md 6.19): a node holding task idx of job names its latest checkpoint,
 * every file of it stored whole here; recorded (replacing the older one), reply OK. */
void files_h_ckpt(struct cluster *c, struct request *r);
/* Fields of task idx's checkpoint in its task map ("checkpoint_s", "ckpt_mb" and, when
 * one was recorded, "ckpt", "ckpt_issue"), and writing them (files_ckpt_nfields first:
 * it reads the record files_ckpt_pack writes). */
uint32_t files_ckpt_nfields(struct cluster *c, const struct job *j, uint32_t idx);
void files_ckpt_pack(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *tb);
/* Whether a checkpoint of one of j's tasks names the file of digest d. */
bool files_ckpt_names(struct cluster *c, const struct job *j, const uint8_t d[SHA256_LEN]);
/* For files_sweep: marks the files of the checkpoints of unfinished tasks, deletes the
 * records of finished tasks and of jobs that are gone. 0, or -1 (the turn fails). */
int files_ckpt_sweep(struct cluster *c);

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
/* A result's "files" checked against the store: NULL, or why they cannot be kept. */
const char *files_result_check(struct cluster *c, const msgpack_object *res, char *why, size_t wl);

#endif

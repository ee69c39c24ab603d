/*
 * submit_data.h - gridnode submit --input / --output (issue 26, docs/data.md): the
 * input files found, hashed and uploaded to the cluster in chunks (resuming what it
 * already holds) before the SUBMIT that names them by hash.
 */
#ifndef GRIDNODE_SUBMIT_DATA_H
#define GRIDNODE_SUBMIT_DATA_H

#include <stdint.h>

#include "cmd/cli.h"
#include "wire/wire.h"

struct submit_data;

/*
 * Expands the --input arguments (a file; a directory, taken whole; a pattern with {i},
 * one file per task), hashes each file and uploads those the cluster lacks (where the
 * endpoint allows cut-through, only their first chunk: submit_data_finish sends the
 * rest after the SUBMIT). Returns 0
 * with *out set (NULL when there is neither input nor output), or -1 after printing
 * why (a missing file, a name that escapes, a refused or failed upload).
 */
int submit_data_prepare(struct cli *c, const char *user, char *const *inputs, int nin,
                        char *const *outputs, int nout, uint64_t ntasks, struct submit_data **out);
/*
 * After the SUBMIT that names sd's inputs was accepted as job: the rest of the inputs
 * whose upload was left going (cut-through), a reply that does not come retried from
 * what the cluster holds up to `tries` times. 0, or -1 (printed, naming the job and the
 * file: its tasks then fail at the cluster's files.upload_wait_s). sd NULL: 0.
 */
int submit_data_finish(struct cli *c, struct submit_data *sd, uint64_t job, uint64_t tries);
/* Fields submit_data_put writes (0, 1 or 2), and writing them ("inputs", "outputs"). */
uint32_t submit_data_nfields(const struct submit_data *sd);
void submit_data_put(struct wire_buf *wb, const struct submit_data *sd);
void submit_data_free(struct submit_data **sd);

/* Uploads the file at path (hex: its SHA-256, size bytes) unless the endpoint already
 * holds it, charged to user (files.user_mb; NULL: none named): 0, or -1 (printed). Used
 * by submit and by nothing else yet. */
int submit_data_upload(struct cli *c, const char *user, const char *path, const char *hex,
                       uint64_t size);
/* SHA-256 of the file at path as hex, and its size: 0, or -1 (errno). */
int submit_data_hash(const char *path, char hex[65], uint64_t *size);

#endif

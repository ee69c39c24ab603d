/*
 * joblist.h - JOB_LIST's filters (issue 15; docs/wire.md 6.2): user, state, name and
 * queue, applied the same way by every role that answers JOB_LIST (the cluster manager,
 * the batch role, the grid spool), so `gridnode jobs -u alice` means one thing wherever
 * it is pointed.
 */
#ifndef GRIDNODE_JOBLIST_H
#define GRIDNODE_JOBLIST_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "wire/wire.h"

/*
 * Does a job with these values pass every filter of the JOB_LIST request req? user and
 * name NULL count as ""; state is the job's shown state; queue -1: the job has none
 * (a queue filter then leaves it out).
 */
bool joblist_allows(const msgpack_object *req, const char *user, const char *state,
                    const char *name, int64_t queue);

/* Does req carry any filter? (When not, a role may skip building rows to test them.) */
bool joblist_filtered(const msgpack_object *req);

/*
 * Does the job row at row[0, len) (one map as the role puts it in JOBS: "user", "state",
 * "name", "queue", and optionally "gstate", the grid spool's own state, which a state
 * filter may name too) pass the filters of req? A row that cannot be read passes (it is
 * the role's own encoding: shown rather than silently lost).
 */
bool joblist_row_allows(const msgpack_object *req, const void *row, size_t len);

#endif

/*
 * endwait.h - JOB_WAIT (docs/wire.md 6.11, issue 28): a user tool's long-poll for the end
 * of its jobs at a role that offers no change feed (the batch role, the grid spool), so
 * `gridnode job --wait` there sees an end within one one-way delay, as at a cluster
 * manager (EVENTS), instead of at its next poll. The held requests are the daemon's
 * (daemon_hold, kind WT_JOB_WAIT: one per peer); this module keeps their handles, request
 * ids and job ids, and answers them after the commit of a turn in which one of their
 * jobs ended.
 */
#ifndef GRIDNODE_DAEMON_ENDWAIT_H
#define GRIDNODE_DAEMON_ENDWAIT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "wire/wire.h"

/* What the role tells the module about one job. */
struct endwait_ops {
    /*
     * Job id's row, as JOB_GET's "job" (its "state" tells whether it ended: done,
     * failed, killed or cancelled), packed into row: 0; or -1 when there is no such job
     * or (check: the request's own turn, whose requester is known) the requester may
     * not see it, with why and NOT_FOUND or DENIED in *code.
     */
    int (*row)(void *role, uint64_t job, bool check, struct wire_buf *row, int *code, char *why,
               size_t wl);
};

struct endwait;

/* NULL when out of memory. */
struct endwait *endwait_new(const struct endwait_ops *ops, void *role);
/* NULL-safe; the daemon's held requests are the daemon's to drop. */
void endwait_free(struct endwait **wp);

/* From the role's dispatch: a JOB_WAIT answered now (a job ended already, an error) or
 * held until one of its jobs ends or its wait_ms passes. */
void endwait_request(struct endwait *w, struct daemon *d, const struct wire_msg *m,
                     struct wire_buf *reply);
/* After each commit (or from a timer): the held requests one of whose jobs has ended
 * are answered (their replies go out after the next commit). */
void endwait_after_commit(struct endwait *w, struct daemon *d);
/* ops.expire for kind WT_JOB_WAIT: the empty answer ({jobs: []}). True when the handle
 * was one of ours. */
bool endwait_expire(struct endwait *w, uint64_t handle, uint64_t req_id, struct wire_buf *reply);

#endif

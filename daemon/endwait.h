/*
 * endwait.h - JOB_WAIT (docs/wire.md 6.20, issue 28): a user tool's long-poll for the end
 * of its jobs, so `gridnode job --wait` sees an end within one one-way delay at every
 * level (a cluster manager's users, whom its change feed is refused to; the batch role;
 * the grid spool). The held requests are the daemon's (daemon_hold, kind WT_JOB_WAIT:
 * one per peer); this module keeps their handles, request ids and job ids, indexed by
 * job id, and answers them after the commit of a turn in which one of their jobs
 * changed (endwait_changed) and has ended.
 */
#ifndef GRIDNODE_DAEMON_ENDWAIT_H
#define GRIDNODE_DAEMON_ENDWAIT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "wire/wire.h"

/* What the role tells the module about its jobs (role: the pointer given to
 * endwait_new, given back). */
struct endwait_ops {
    const char *at; /* "" or e.g. " at the grid spool": after the job in error texts */
    /* Job's owner (NULL: none); *found false when there is no such job. */
    const char *(*owner)(void *role, uint64_t job, bool *found);
    /* Existing job's row, as JOB_GET's "job" (its "state" tells whether it ended: done,
     * failed, killed or cancelled), packed into row. */
    void (*pack)(void *role, uint64_t job, struct wire_buf *row);
};

struct endwait;

/* NULL when out of memory. ops is copied. */
struct endwait *endwait_new(const struct endwait_ops *ops, void *role);
/* NULL-safe; the daemon's held requests are the daemon's to drop. */
void endwait_free(struct endwait **wp);

/* From the role's dispatch: a JOB_WAIT answered now (a job ended already; an error: a
 * job not found, or not the requester's) or held until one of its jobs ends or its
 * wait_ms passes. */
void endwait_request(struct endwait *w, struct daemon *d, const struct wire_msg *m,
                     struct wire_buf *reply);
/* The role's hook, wherever a job's record is marked for the turn's commit: job may have
 * changed (ended). Cheap: a lookup when some JOB_WAIT names the job, nothing when none
 * is held. NULL-safe (w NULL: before start-up). A change not told here is still answered
 * by the request's deadline (the tool then asks again). */
void endwait_changed(struct endwait *w, uint64_t job);
/* After each commit: the held requests naming a job changed since the last call
 * (endwait_changed) one of whose jobs has ended are answered (their replies go out
 * after the next commit). Looks at those jobs only, not at every held request. */
void endwait_after_commit(struct endwait *w, struct daemon *d);
/* ops.expire for kind WT_JOB_WAIT: the empty answer ({jobs: []}). True when the handle
 * was one of ours. */
bool endwait_expire(struct endwait *w, uint64_t handle, uint64_t req_id, struct wire_buf *reply);

#endif

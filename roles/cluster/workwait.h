/*
 * workwait.h - idle nodes told of new work at once (issue 26 evidence 8, docs/wire.md
 * 5.7): a node with no task holds a WORK_WAIT open at the cluster (on its transfer
 * connection, beside its RPCs), answered WORK_WAKE {work: true} after the commit of the
 * turn that accepted a job, or {work: false} when its wait_ms passed. The node then asks
 * for tasks as usual (TASK_GET): the reply carries no state, only the news.
 */
#ifndef GRIDNODE_CLUSTER_WORKWAIT_H
#define GRIDNODE_CLUSTER_WORKWAIT_H

#include <stdint.h>

#include "wire/wire.h"

struct cluster;
struct request;

/* WORK_WAIT: held (answered later), or answered now {work: false} when it cannot be
 * held (DAEMON_HELD_MAX held requests already). */
void workwait_h_wait(struct cluster *c, struct request *r);
/* After each commit: every held WORK_WAIT answered {work: true} when a job was accepted
 * since the last call. */
void workwait_after_commit(struct cluster *c);
/* The daemon's expiry of held request `handle` (kind WT_WORK_WAIT): {work: false}. */
void workwait_expire(struct cluster *c, uint64_t handle, uint64_t req_id, struct wire_buf *reply);

#endif

/*
 * purgeq.h - purged jobs whose records are still being deleted, shared by the cluster
 * manager (roles/cluster/purge.c) and the batch role (roles/batch/live/livepurge.c).
 *
 * A purge removes a job's own record in the turn that answers, and writes a marker
 * "purge/<id, 20 digits>" in the role's meta table; its per-task (per-element) records,
 * keyed by the job id's 8 bytes first, go afterwards, a bounded number per turn, and
 * the marker with the last of them. A restart reads the markers back (in key order:
 * by id) and carries on, so kill -9 at any point leaves no record behind for good.
 * Also the sorted-id helpers every purge uses (the grid spool's metapurge.c too).
 */
#ifndef GRIDNODE_PURGEQ_H
#define GRIDNODE_PURGEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct purgeq {
    uint64_t *ids; /* in id order after a load; pushes append */
    uint32_t n, cap;
};

/* Writes job id's marker into the turn and queues it: 0, or -1 (store, memory). */
int purgeq_mark(struct purgeq *q, struct store *s, int t_meta, uint64_t id);
/* The markers read back into q (empty before): 0, or -1. */
int purgeq_load(struct purgeq *q, struct store *s, int t_meta);
void purgeq_free(struct purgeq *q);
/* Whether id is queued (q as loaded: sorted). */
bool purgeq_has(const struct purgeq *q, uint64_t id);
/* Deletes into the turn the records of the queued jobs in tables (keys starting with the
 * job id's 8 bytes), at most budget keys, newest queued job first; a job's marker goes
 * with its last record and it leaves q. 0 (done, or the budget reached: the rest next
 * turn), or -1 (store: the turn fails). */
int purgeq_step(struct purgeq *q, struct store *s, int t_meta, const int *tables, size_t ntables,
                uint32_t budget);

/* Sorts ids and drops repeats: the new count. */
uint32_t ids_sort_unique(uint64_t *ids, uint32_t n);
/* Whether sorted ids hold id. */
bool ids_has(const uint64_t *ids, uint32_t n, uint64_t id);

#endif

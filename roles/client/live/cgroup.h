/*
 * cgroup.h - memory and process-count limits of tasks through Linux control groups
 * (issue 23; docs/security.md "Resource limits"). Pure C: no zmq, no LMDB.
 *
 * At start the client finds the cgroup version (v2: /sys/fs/cgroup/cgroup.controllers;
 * else v1 with the memory and pids hierarchies at /sys/fs/cgroup/memory and
 * /sys/fs/cgroup/pids) and makes its parent cgroup `gridnode/client-PID` where it may
 * write: v1 under its own cgroup of each hierarchy, else the hierarchy's root; v2 under
 * its own cgroup's parent (systemd's Delegate= with DelegateSubgroup=), or the root,
 * where memory and pids are already enabled for children (the client never enables a
 * controller in a cgroup it did not make). It removes the empty `client-PID`
 * directories of clients that are gone. Each bag task gets a cgroup of its own, the
 * ranks of one parallel job on this host share one; the task's process joins it before
 * it executes its program, so every descendant is inside from the start.
 *
 * Not thread-safe: the client's loop thread only.
 */
#ifndef GRIDNODE_CGROUP_H
#define GRIDNODE_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CGROUP_NONE = 0, CGROUP_V1 = 1, CGROUP_V2 = 2 };
/* A task's memory limit is never below this (a smaller one could make the kernel's
 * OOM killer act while the task still shares the client's memory, before its exec). */
#define CGROUP_MEMORY_MIN_MB 16

/*
 * Finds the cgroups of this host and makes the client's parent cgroup, once at start
 * and before any thread exists. memory_mb (0: none) and pids_max (0: none) are the
 * limits of one task (client.task_memory_mb, client.task_pids_max). Writes into desc
 * the text of the start log: "v1 memory+pids (task memory 64 MiB, pids 4096; PATHS)"
 * or "none (WHY)". Returns the version in use (CGROUP_NONE when cgroups are absent,
 * not writable, or both limits are 0).
 */
int cgroup_init(uint64_t memory_mb, uint64_t pids_max, char *desc, size_t n);
/* The version in use (CGROUP_NONE before cgroup_init or when it found none). */
int cgroup_version(void);
/* The limits of one task given to cgroup_init. */
uint64_t cgroup_task_memory_mb(void);
uint64_t cgroup_task_pids_max(void);
/*
 * Removes the client's parent cgroups (and `gridnode` when no other client uses it);
 * every task's cgroup must be gone (cgroup_put). Called once at the client's end.
 */
void cgroup_shutdown(void);

struct cgroup;
/*
 * The cgroup of a task (job 0) or of the ranks of parallel job `job` of owner on this
 * host (one per (owner, job): a second call adds a reference and raises the limits by
 * one more rank's). memory_mb: the job's own request (0: none); the smaller of it and
 * the task limit applies. Returns NULL with errno (ENOSYS: no cgroups in use).
 */
struct cgroup *cgroup_take(const void *owner, uint64_t job, uint64_t memory_mb);
/*
 * Drops a reference of cgroup_take (NULL-safe; sets *g NULL). With the last one, kills
 * what is left in the cgroup (a task's escaped descendants) and removes it, retrying
 * for up to a second while the kernel lets go of it; a cgroup still present then is
 * logged and left.
 */
void cgroup_put(struct cgroup **g);
/* Its memory limit in MiB (0: none). */
uint64_t cgroup_memory_mb(const struct cgroup *g);
/* How many times the kernel's OOM killer killed a process of it so far. */
uint64_t cgroup_oom_kills(const struct cgroup *g);
/*
 * Opens its cgroup.procs files (one per hierarchy: fd[1] is -1 under v2) write-only,
 * close-on-exec: a process that writes "0" to each joins the cgroup. 0 or -1 (none
 * left open).
 */
int cgroup_open_procs(const struct cgroup *g, int fd[2]);
/* Writes "0" to fd[0] and fd[1] (those >= 0): the calling process joins. Safe after
 * fork or in a clone child (system calls only). 0 or -1 with errno. */
int cgroup_join(const int fd[2]);

/* ---- parsing (pure: unit-tested) ---- */

/*
 * The value of key in a flat-keyed cgroup file ("key value" lines: memory.events,
 * memory.oom_control, pids.events). 0, or -1 when the key is missing or its value is
 * not a number.
 */
int cgroup_parse_key(const char *text, const char *key, uint64_t *value);
/*
 * The cgroup path of a /proc/PID/cgroup text: the "0::PATH" line for v2 (controller
 * NULL), or for v1 the line whose controller list holds controller ("4:memory:/a",
 * "2:cpu,cpuacct:/b"). Copies PATH (starting with '/') into path. 0, or -1 when there is
 * no such line or PATH does not fit.
 */
int cgroup_parse_self(const char *text, const char *controller, char *path, size_t n);

#endif

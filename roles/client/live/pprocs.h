/*
 * pprocs.h - the parallel processes a node runs for the cluster manager's SCore-D side
 * (docs/wire.md 5.6): started, stopped (SIGSTOP), continued (SIGCONT) and killed as the
 * cluster's PSYNC_ACK says, each in its own process group and working directory, and
 * measured from /proc (CPU time and resident memory summed over the process group) and
 * the file system (disk used by its working directory) for the next PSYNC.
 */
#ifndef GRIDNODE_PPROCS_H
#define GRIDNODE_PPROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "roles/client/live/runner.h"
#include "roles/client/live/stage.h"
#include "wire/wire.h"

/* Output bytes one PSYNC carries at most (beyond the first exited process's). */
#define PPROCS_OUTPUT_MAX (24u << 20)
/* Kept files (issue 26) one PSYNC names at most (beyond the first exited process's, at
 * most 1,024): 7 msgpack values each, within a message's 65,536 (docs/wire.md 2). */
#define PPROCS_FILES_MAX 4096u
/* CPU, memory and disk of live processes are measured at most this often. */
#define PPROCS_MEASURE_MS 200

struct pproc {
    uint64_t job;
    uint32_t rank;
    struct run run;
    bool stopped, exited;
    double cpu_s;
    uint64_t rss_kb, disk_kb;
    /* issue 26 (docs/data.md "Parallel jobs"): the rank's files (PSYNC_ACK "inputs",
       "outputs"; NULL: none). While waiting, its inputs are being fetched into the node's
       cache (live_stage.c) and it is not started: the start's spec is kept below. Once
       exited, its kept outputs are uploaded (uploading) before its exit is reported. */
    struct stage_files *files;
    bool waiting, uploading;
    uint32_t up_next; /* the next output to upload */
    char note[300];   /* files_note: outputs not kept, and why */
    char **av, **env; /* the spec of a waiting start */
    char *cwd;
    bool shell, network;
    uint64_t mem_mb;
};

#define PPROCS_SPARE_MAX 128

struct pprocs {
    struct pproc **p;
    uint32_t n, cap;
    char workroot[300]; /* state_dir/work */
    char state_dir[256];
    char watchfs[8][256];
    uint32_t nwatch;
    size_t max_output;   /* stdout and stderr sent per process, each (run.max_output_kb) */
    uint32_t changes;    /* processes started (or failed to), continued, stopped, killed */
    int64_t measured_ms; /* monotonic time of the last measurement (pprocs_pack) */
    /* spare working directories (workroot/spare/s<seq>), reused instead of created */
    uint32_t spare[PPROCS_SPARE_MAX], nspare, spare_seq;
    bool spare_ready;
    const struct stage_cache *cache; /* the node's file cache (issue 26), NULL: none */
};

/*
 * Writes the PSYNC fields "procs" (measured now) and "disk_mb" into wb. An exited
 * process carries its stdout and stderr; when they would push the message past
 * PPROCS_OUTPUT_MAX, its exit waits for the next PSYNC (reported as still running).
 */
void pprocs_pack(struct pprocs *pp, struct wire_buf *wb);
/* Applies a PSYNC_ACK: start, continue, stop, kill; forgets what it no longer lists. */
void pprocs_apply(struct pprocs *pp, const msgpack_object *ack);
/* A child was reaped: true if it was one of ours. */
bool pprocs_reaped(struct pprocs *pp, pid_t pid, int status, const struct rusage *ru);
/* Kills every live process (continuing it first) and frees everything. */
void pprocs_shutdown(struct pprocs *pp);
/*
 * Issue 26: starts waiting process p now that its inputs are all in pp->cache: a fresh
 * working directory, the inputs placed in it (stage_place), then the process. A failure
 * is its own (reported as a start error).
 */
void pprocs_launch(struct pprocs *pp, struct pproc *p);
/* Issue 26: waiting process p cannot start (an input the cluster no longer has): it is
 * reported exited with why as its error. */
void pprocs_fail(struct pprocs *pp, struct pproc *p, const char *why);
/* Free disk in MiB of the state directory's file system plus distinct watchfs ones. */
uint64_t pprocs_free_disk_mb(const struct pprocs *pp);

#endif

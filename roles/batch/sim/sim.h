/*
 * sim.h - trace-driven simulation of the batch engine (MISSION B1: "a simulation
 * mode to try a configuration before using it"). The simulator owns a simulated
 * clock and a machine of identical nodes, feeds the engine exactly what the live
 * role would (submissions, completions) and calls batch_cycle() at every event
 * time. No I/O here: the trace comes in as a struct swf_trace (sim_prepare) or as
 * blocks of records from a source (sim_stream, which overlaps the reading), results
 * go out as numbers; cmd/batch.c prints them.
 *
 * Trace records and how they are treated:
 *  - size: allocated processors (field 5), else requested (field 8); a record with
 *    neither is skipped, as is one wider than the machine;
 *  - run time (field 4) -1 (the job never ran: cancelled while queued) is skipped;
 *  - a negative submit time is skipped;
 *  - walltime: --estimate requested uses the requested time (field 9), or the run
 *    time when the request is missing; --estimate actual uses the run time;
 *  - a job whose run time exceeds its walltime is killed at the walltime, as the
 *    resource manager enforces the limit: its simulated run time is the walltime;
 *  - with a time scale K (sim_opts.time_scale), every time of the trace (submit, run,
 *    requested time) is divided by K and the engine counts milliseconds, as in the
 *    live role (config unit_per_s 1000, which the caller sets): a time t becomes
 *    t * 1000 / K ms (at least 1 ms for run and walltime). Results (sim_job times,
 *    CSV) are then in milliseconds; sim_result's figures stay in seconds.
 */
#ifndef GRIDNODE_BATCH_SIM_H
#define GRIDNODE_BATCH_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roles/batch/engine/batch.h"
#include "roles/batch/sim/swf.h"

enum sim_estimate { SIM_EST_REQUESTED, SIM_EST_ACTUAL };

#define SIM_MAX_NODES (1 << 20)

struct sim_job {
    int64_t id; /* SWF job number */
    int64_t submit, run, walltime;
    int32_t procs;
    int32_t user, group, queue;
    int64_t start, end;     /* results; start = -1 if it never started */
    int64_t first_estimate; /* with estimates on: the estimate of its first cycle */
};

struct sim_input {
    struct sim_job *jobs;
    size_t njobs;
    /* records skipped, by reason, and jobs adjusted */
    size_t skip_no_procs, skip_no_run, skip_too_wide, skip_bad_submit;
    size_t no_request, truncated, before_window;
};

struct sim_opts {
    int64_t procs;      /* machine size */
    int32_t node_procs; /* processors per node (1: the processor-pool model) */
    int64_t time_scale; /* K > 0: trace times / K, in ms (cfg->unit_per_s 1000); 0: seconds */
    enum sim_estimate estimate;
    size_t start, count; /* job window over the kept jobs; count 0 = all */
    const struct batch_config *cfg;
    const char *const *queue_names; /* SWF_MAX_QUEUES entries or NULL */
    bool record_nodes;              /* keep each job's nodes (for the Gantt chart) */
    /* called every few thousand events; may be NULL */
    void (*progress)(void *arg, size_t done, size_t total, int64_t simtime);
    void *arg;
    int64_t diag_at; /* call diag once, at the first cycle at or after this time */
    void (*diag)(void *arg, struct batch_engine *e, int64_t now);
    /* --start-delays: job d_id[k] (SWF number, sorted ascending) was started by its
     * resource manager d_delay[k] trace time units after the cycle decided it (a live
     * role's record): the engine is told so (batch_job_started_at) once that instant's
     * cycle has run, as the live role learns it from the cluster; or, where d_heard[k]
     * >= 0 (the instant the role heard of that start, after the decision), in the
     * turn of that instant, before its cycle, which then runs; NULL: none */
    const int64_t *d_id, *d_delay, *d_heard;
    size_t nd;
};

struct sim_result {
    size_t jobs;
    double utilization, mean_wait, median_wait, max_wait, mean_bsld;
    double sim_wall_s, jobs_per_s;
    int64_t first_submit, last_end;
    size_t cycles, idle_cycles, replans;
    double est_mae; /* mean |first estimate - start| (estimates on), else -1 */
    /* with record_nodes: job i ran on nodes run_node[k] .. run_node[k] + run_len[k] - 1
     * for k in [run_off[i], run_off[i] + run_cnt[i]) */
    size_t *run_off, nruns;
    int32_t *run_cnt, *run_node, *run_len;
};

/* Reads a --start-delays file: one "JOB DELAY [HEARD]" line a job (SWF job number,
 * trace time units after the decision; spaces, tabs or a comma between; '#' / ';' lines
 * and blank lines skipped) into *ids / *delays / *heard (-1 where absent) sorted by job
 * (malloc'd, free all three). 0, or -1 with a message naming the file and line. */
int sim_load_delays(const char *path, int64_t **ids, int64_t **delays, int64_t **heard, size_t *n,
                    char *err, size_t errlen);

/* Selects and converts the trace's jobs (rules above) into in (zeroed by the
 * caller), sorted by submit time, windowed by o->start / o->count. 0 or -1 with a
 * message in err. */
int sim_prepare(const struct swf_trace *t, const struct sim_opts *o, struct sim_input *in,
                char *err, size_t errlen);
/* Runs the simulation; fills in->jobs[].start/end and r (zeroed by the caller).
 * 0, or -1 with a message in err. */
int sim_run(struct sim_input *in, const struct sim_opts *o, struct sim_result *r, char *err,
            size_t errlen);

/* Where sim_stream takes the trace's records from: next() hands over the next
 * records in file order (*n = 0 at the end), which stay valid for the whole run;
 * 0, or -1 with a message in err. swf_stream_next fits. */
struct sim_source {
    int (*next)(void *arg, const struct swf_job **recs, size_t *n, char *err, size_t errlen);
    void *arg;
};
/* sim_prepare and sim_run in one, taking the records from src only as the simulated
 * clock reaches their submit time, so that the simulation overlaps the reading of
 * the trace. A trace is normally in submit order; if a record turns out to be
 * submitted before the one ahead of it, the rest of src is taken, the jobs are
 * sorted and the simulation starts again: the results are those of sim_prepare and
 * sim_run either way. Fills in (zeroed by the caller) and r. 0, or -1 with a
 * message in err; src may still hold records then (and after a --count window). */
int sim_stream(struct sim_input *in, const struct sim_opts *o, const struct sim_source *src,
               struct sim_result *r, char *err, size_t errlen);
void sim_input_free(struct sim_input *in);
void sim_result_free(struct sim_result *r);

#endif

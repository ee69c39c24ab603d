/*
 * sim.h - the metascheduler's simulator, `gridnode meta --simulate` (issue #10 items 7-8).
 *
 * Several sites, each a batch engine (roles/batch/engine/batch.h, the engine of the batch role)
 * with its own node count, speed and batch policy, run in one process on one simulated
 * clock. A workload (one SWF trace) is split into local load, submitted straight to a
 * site, and grid jobs, which arrive at the spool and are placed by the same placement
 * code as the live role (roles/meta/engine/place.h): eligible sites, each one's earliest start
 * from its engine (batch_estimate), ranking by policy, a reservation at the chosen site
 * bound to the job and the job submitted into it with the early-start flag. A site may
 * have its own SWF trace as local load besides (`local_trace`): every job of it is
 * submitted straight to that site, competing with the grid jobs. Placed jobs
 * that have not started are re-examined when a site's plan changes (a job ended before
 * its walltime) and moved when another site offers a start earlier by the margin.
 *
 * Two references run on the same jobs: "slurm_m" (Slurm's sbatch -M: the site with the
 * earliest start estimate at submit, no reservation, no re-evaluation) and "pooled" (all
 * sites as one machine of the same total size: the bound placement cannot beat).
 *
 * Times are seconds of the trace. Nothing here prints; simout.c and simcmd.c do.
 */
#ifndef GRIDNODE_META_SIM_H
#define GRIDNODE_META_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roles/batch/engine/batch.h"
#include "roles/batch/sim/sim.h"
#include "roles/meta/engine/place.h"

/* `gridnode meta --simulate ...`: parses argv (argv[0] "meta"), runs, prints; returns
 * the exit status (0 ok, 1 failure, 2 usage error). */
int meta_simulate_main(int argc, char **argv);

#define MSIM_POOLED META_NPOLICIES /* the run kind after the placement policies */
#define MSIM_KINDS (META_NPOLICIES + 1)
#define MSIM_MAX_SITES 64

struct msim_site {
    char name[BATCH_NAME_MAX];
    int32_t nodes, node_procs;
    double share; /* > 0: nodes from this share of the processors (msim_scenario_resolve) */
    double speed; /* a job runs run / speed seconds here */
    struct batch_config cfg;
    char local_trace[1024]; /* "" or an SWF trace: this site's own local load */
};

enum msim_split { MSIM_SPLIT_JOB, MSIM_SPLIT_USER };

struct msim_scenario {
    struct msim_site sites[MSIM_MAX_SITES];
    size_t nsites;
    double grid_share;     /* share of the jobs that arrive at the grid spool, 0..1 */
    enum msim_split split; /* how the local load is spread over the sites */
    int64_t margin;        /* s: a placed job moves only for a start earlier by more */
    bool reevaluate;
    size_t reeval_max; /* placed jobs re-examined per site change, oldest first */
    uint64_t seed;
    enum sim_estimate estimate;
    size_t count; /* first N usable jobs; 0 = all */
};

/* The workload, split: in.jobs sorted by submit time; grid[i] whether job i arrives at
 * the spool, else home[i] is its site. */
struct msim_workload {
    struct sim_input in;
    bool *grid;
    int32_t *home;
    size_t ngrid, refused; /* refused: wider than every site (not simulated) */
    size_t local_traced;   /* jobs from the sites' own local traces (in in.jobs) */
    size_t local_refused;  /* of those, wider than their site (not simulated) */
};

struct msim_job {
    int32_t site;
    uint16_t moves;
    int64_t start, end, run; /* run: at the site's speed */
};

struct msim_result {
    int kind; /* enum meta_policy, or MSIM_POOLED */
    double mean_wait, mean_bsld, mean_turnaround;
    double grid_wait, grid_bsld;   /* over the grid jobs */
    double local_wait, local_bsld; /* over the local jobs */
    int64_t grid_wait_max, local_wait_max;
    size_t local_starved; /* local jobs that waited more than 2 days */
    double util[MSIM_MAX_SITES];
    size_t moved;          /* moves made by re-evaluation */
    size_t resv_failed;    /* placements that found no reservation and queued plainly */
    size_t guard_released; /* grid reservations the sites' grid rule released */
    size_t moved_up;       /* grid reservations the sites moved up (docs/batch.md) */
    size_t cycles;
    double wall_s;
    struct msim_job *jobs; /* per job of the workload */
};

/* Defaults: no sites, grid share 0.5, split by job, margin 600 s, re-evaluation on (64
 * jobs per change), seed 1, requested walltimes. */
void msim_scenario_defaults(struct msim_scenario *s);
void msim_scenario_clear(struct msim_scenario *s);
/* Adds `n` equal sites splitting `procs` processors (speed 1, batch defaults). 0 or -1. */
int msim_scenario_split(struct msim_scenario *s, size_t n, int64_t procs, char *err, size_t len);
/* Adds sites splitting `procs` processors in proportion to weights[0..n) (speed 1,
 * batch defaults), e.g. 4:3:2:1. 0 or -1. */
int msim_scenario_split_weights(struct msim_scenario *s, const double *weights, size_t n,
                                int64_t procs, char *err, size_t len);
/* Gives every site with a `share` and no `nodes` its nodes from `procs`. 0 or -1. */
int msim_scenario_resolve(struct msim_scenario *s, int64_t procs, char *err, size_t len);
/* Reads a scenario INI file on top of s ([meta] and [site NAME] sections; docs/meta.md).
 * 0, or -1 with "FILE:LINE: problem" in err. */
int msim_scenario_load(struct msim_scenario *s, const char *path, char *err, size_t len);
/* The same from a string (tests). */
int msim_scenario_load_string(struct msim_scenario *s, const char *text, const char *name,
                              char *err, size_t len);

/* Converts and splits trace t under s into w (zeroed by the caller), and adds every job
 * of each site's local_trace as local load there (read here; ids become
 * (site + 1) * 1e9 + the SWF number, users (site + 1) * 1e6 + the SWF user, so they
 * collide with nobody's; all traces start at their own time 0). 0 or -1 (err). */
int msim_workload(const struct msim_scenario *s, const struct swf_trace *t, struct msim_workload *w,
                  char *err, size_t len);
void msim_workload_free(struct msim_workload *w);

/* Runs one kind (a policy or MSIM_POOLED) over w; fills r (its old contents are dropped
 * without freeing). 0 or -1 with err. */
int msim_run(const struct msim_scenario *s, const struct msim_workload *w, int kind,
             struct msim_result *r, char *err, size_t len);
void msim_result_free(struct msim_result *r);
/* The name of a run kind: a policy name or "pooled". */
const char *msim_kind_name(int kind);

/* The bounded slowdown (10 s bound) of a job waiting `wait` and running `run` seconds. */
double msim_bsld(int64_t wait, int64_t run);

#endif

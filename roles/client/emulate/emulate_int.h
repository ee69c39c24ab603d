/*
 * emulate_int.h - the client emulator's pieces, shared by emulate*.c: the scenario
 * (emulate_scenario.c), the simulation and its figures of merit (emulate_run.c), the
 * SVG timeline (emulate_svg.c) and the command line (emulate.c).
 */
#ifndef GRIDNODE_EMULATE_INT_H
#define GRIDNODE_EMULATE_INT_H

#include <stdint.h>
#include <stdio.h>

#include "roles/client/engine/engine.h"

#define EMU_NAME_MAX 64
#define EMU_MAX_GPUS (ENGINE_MAX_PTYPES - 1)
#define EMU_MAX_PROJECTS 64
#define EMU_MAX_APPS 128
#define EMU_MAX_WINDOWS 32

/* A list of [start, end) time windows (outages, off periods, no-work periods). */
struct emu_windows {
    double start[EMU_MAX_WINDOWS], end[EMU_MAX_WINDOWS];
    int n;
};

enum emu_dist { EMU_DIST_NORMAL = 0, EMU_DIST_FIXED, EMU_DIST_EXP, EMU_DIST_UNIFORM };

struct emu_gpu {
    char name[EMU_NAME_MAX];
    int count;
    double flops;
    int line;
    uint64_t seen; /* keys given (duplicate detection) */
};

/* An application: the jobs a project hands out for one processor type. */
struct emu_app {
    char name[EMU_NAME_MAX];
    char project_name[EMU_NAME_MAX];
    char type[EMU_NAME_MAX];             /* "cpu" or a [gpu NAME] */
    int project, ptype;                  /* resolved by emulate_scenario_check */
    double usage;                        /* instances per job */
    int dist;                            /* enum emu_dist */
    double size_mean, size_sd, size_est; /* FLOPs (toy units: seconds at 1 FLOPS) */
    double deadline;                     /* latency bound: deadline = issue + this */
    double checkpoint;                   /* run seconds between checkpoints; 0 never */
    double weight;
    int line;
    uint64_t seen;
};

struct emu_project {
    char name[EMU_NAME_MAX];
    double share;
    double up_frac, up_mean; /* random server availability */
    struct emu_windows outages, no_work;
    double rpc_failure_rate;
    int schedulers;  /* scheduler endpoints */
    double moved_at; /* the endpoints change at this time (<0: never) */
    double request_delay;
    int deadline_check; /* the server refuses jobs that cannot meet their deadline */
    int max_jobs_per_rpc;
    int line;
    uint64_t seen;
    int has_app; /* app keys given in the [project] section itself */
};

struct emu_scenario {
    char path[512];
    double duration;
    uint64_t seed;
    struct engine_config cfg;
    int cpus;
    double cpu_flops;
    double on_frac, on_mean;
    struct emu_windows off;
    struct emu_gpu gpus[EMU_MAX_GPUS];
    int ngpus;
    struct emu_project projects[EMU_MAX_PROJECTS];
    int nprojects;
    struct emu_app apps[EMU_MAX_APPS];
    int napps;
    uint64_t seen_emulation, seen_client, seen_host;
};

/* ---- emulate_scenario.c ---- */

/* Parses "90", "90s", "10m", "6h", "1.5d", "1w", "1d6h"; 0 or -1. */
int emulate_parse_time(const char *s, double *out);
/* Fills sc with the defaults of every [emulation], [client] and [host] key. */
void emulate_scenario_init(struct emu_scenario *sc);
/* Parses an INI file into sc. 0, or -1 with "FILE:LINE: message" in err. */
int emulate_scenario_load(struct emu_scenario *sc, const char *path, char *err, size_t errlen);
/* Applies one "section.key=value" (e.g. "client.policy=debt2004",
 * "project P1.share=50"), as if it were in the file. 0 or -1 with a message. */
int emulate_scenario_set(struct emu_scenario *sc, const char *assignment, char *err, size_t errlen);
/* Checks cross-references and required keys, resolves names to indices. 0 or -1. */
int emulate_scenario_check(struct emu_scenario *sc, char *err, size_t errlen);
/* Prints the effective scenario as an INI file. */
void emulate_scenario_print(const struct emu_scenario *sc, FILE *out);
/* Prints every key with its default and meaning (for --help and the docs). */
void emulate_scenario_help(FILE *out);

/* ---- emulate_run.c ---- */

struct emu_project_result {
    double used_flops, wasted_flops;
    unsigned long jobs, met, missed, aborted, rpcs_ok, rpc_failed;
    double used_share, share; /* normalised */
};

struct emu_result {
    char policy[32]; /* "rec", "debt2004", "rec/boinc", ... */
    double idle_fraction, wasted_fraction, share_violation, monotony, rpcs_per_job;
    double lost_fraction; /* run time redone after restarts from checkpoints */
    double capacity_flops, used_flops, wasted_flops, lost_flops, on_time;
    unsigned long jobs, met, missed, aborted, rpcs_ok, rpc_attempts, master_fetches;
    unsigned long missed_report; /* missed, though finished before the deadline */
    unsigned long rr_runs, sched_runs;
    double sim_wall_s;
    int nprojects;
    struct emu_project_result projects[EMU_MAX_PROJECTS];
};

/* One bar of the timeline: instance `row` ran a task of `project` over [t0, t1);
 * project -1 = host off; row EMU_ROW_SERVER: the server of `project` was down. */
#define EMU_ROW_SERVER (-1)
struct emu_segment {
    double t0, t1;
    int row, project;
};

#define EMU_TL_MAX_ROWS 128

struct emu_timeline {
    double from, to; /* the window recorded */
    struct emu_segment *seg;
    size_t nseg, cap;
    int nrows; /* instances drawn (at most EMU_TL_MAX_ROWS) */
    char row_names[EMU_TL_MAX_ROWS][EMU_NAME_MAX + 8];
};

struct emu_options {
    FILE *rpc_log;                 /* NULL: none */
    struct emu_timeline *timeline; /* NULL: none */
    const char *label;             /* the policy, first column of the RPC log */
};

/* Runs sc (already checked) with its engine configuration. 0, or -1 on ENOMEM with a
 * message in err. */
int emulate_run(const struct emu_scenario *sc, const struct emu_options *o, struct emu_result *res,
                char *err, size_t errlen);

/* ---- emulate_svg.c ---- */

/* Records a segment (clipped to the window); 0 or -1 on ENOMEM. */
int emulate_timeline_add(struct emu_timeline *tl, double t0, double t1, int row, int project);
/* Records that the server of project was down over [t0, t1) (clipped; joined to the
 * project's previous down period where it goes on from it); 0 or -1 on ENOMEM. */
int emulate_timeline_down(struct emu_timeline *tl, double t0, double t1, int project);
void emulate_timeline_free(struct emu_timeline *tl);
/* Writes one SVG with a panel per run (titles[i], tls[i]). 0 or -1 (errno). */
int emulate_svg_write(const char *path, const struct emu_scenario *sc,
                      struct emu_timeline *const *tls, const char *const *titles, int n);

#endif

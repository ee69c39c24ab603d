/*
 * prefetch.h - latency tolerance of the live single-cluster client (issue 16 item 7):
 * how many tasks to ask for so that no slot waits a round trip for its next task.
 *
 * The client keeps, beyond its running tasks, a queue of received tasks that covers
 * what its slots will consume while a request is on its way and back: the tasks it
 * expects to start within `cover` seconds (two round trips, see prefetch_cover_s). A
 * slot whose task is expected to end later than that needs nothing yet, so long tasks
 * are not hoarded: their replacement is asked for shortly before they end. Durations
 * are those this client measured for the task's job (prefetch_observe), else the
 * cluster's estimate (TASKS `est_s`), else unknown (no prefetch beyond free slots).
 * Pure functions over plain structs: no I/O, unit-tested in tests/unit/test_prefetch.c.
 */
#ifndef GRIDNODE_PREFETCH_H
#define GRIDNODE_PREFETCH_H

#include <stdint.h>

#define PREFETCH_JOBS 16 /* jobs whose measured task durations are remembered */

struct prefetch_job {
    uint64_t job;
    double s;      /* smoothed wall seconds of one of its tasks here */
    uint64_t used; /* last update (for replacing the least recently used) */
    uint32_t n;    /* samples (0: free entry) */
};

struct prefetch {
    struct prefetch_job jobs[PREFETCH_JOBS];
    uint64_t clock;
};

/* One finished task of job ran wall_s seconds here (ignored when not > 0). */
void prefetch_observe(struct prefetch *p, uint64_t job, double wall_s);

/* The measured duration of job's tasks here; 0 when none was measured. */
double prefetch_job_s(const struct prefetch *p, uint64_t job);

/*
 * Seconds a running task is expected to go on: est_s - elapsed_s; 0 while it overruns
 * its estimate by less than half of it (it is due); past that the estimate was wrong
 * for this task and it is expected to run as long again (elapsed_s). -1 when est_s is
 * unknown (<= 0).
 */
double prefetch_left_s(double est_s, double elapsed_s);

/*
 * The time the queue must cover, from the smoothed round trip and its variation (ms,
 * lib/netopts.h): a request goes out at most one round trip after the need arises (one
 * request is outstanding at a time) and its tasks arrive one round trip later, so
 * 2 x srtt + 4 x rttvar. 0 without a measurement.
 */
double prefetch_cover_s(double srtt_ms, double rttvar_ms, uint32_t samples);

struct prefetch_need {
    uint32_t slots;       /* tasks run at once */
    uint32_t running;     /* tasks holding a slot */
    const double *left_s; /* per running task: seconds left (prefetch_left_s; < 0 unknown) */
    uint32_t queued;      /* received, not started */
    double next_s;        /* expected run time of the next tasks (0: unknown) */
    double cover_s;       /* prefetch_cover_s */
    uint32_t max_held;    /* most tasks held at once, running and queued (>= slots) */
};

/*
 * The number of tasks to ask for now: each free slot needs the tasks it starts within
 * cover_s (at least one), each running task expected to end within cover_s the tasks
 * its slot starts in the rest of the window; minus the queue; never more than brings
 * the tasks held to max_held. Without duration or round-trip knowledge: the free slots.
 */
uint32_t prefetch_want(const struct prefetch_need *n);

#endif

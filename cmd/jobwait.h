/*
 * jobwait.h - `gridnode job --wait` (jobwait.c) as job.c uses it: the state of each job
 * waited for, the wait, and freeing the final rows it kept. Internal to cmd/.
 */
#ifndef GRIDNODE_JOBWAIT_H
#define GRIDNODE_JOBWAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

struct cli;

/* The state of one job being waited for. */
struct wjob {
    uint64_t id;
    int end;        /* the exit status once ended (1: unknown job or no answer), else -1 */
    uint64_t ask;   /* request id of its JOB_GET in flight, 0 none */
    bool pjob;      /* a parallel job: a state, no task counts */
    char state[16]; /* as last seen */
    uint64_t n, done, failed, run;
    bool shown;          /* its line was printed since it last changed */
    bool has_row;        /* its end came from the feed with its final JOBS row: */
    msgpack_sbuffer row; /* that row, packed (shown without asking again) */
};

/*
 * Waits until every job of ids ended, with progress on stderr; w (n entries, zeroed by
 * the caller) gets each one's end (and final row, free with free_rows). Returns the
 * worst of them (1 unknown or not answered, over 5 cancelled, 4 killed, 3 failed, 0
 * done), or 1 when the role could not be asked. Uses c's kept connection, or keeps one
 * for the wait.
 */
int wait_jobs(struct cli *c, const uint64_t *ids, size_t n, struct wjob *w);
void free_rows(struct wjob *w, size_t n);

#endif

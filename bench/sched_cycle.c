/*
 * sched_cycle.c - benchmark of one batch scheduling cycle (bench/sched_cycle.sh).
 *
 * Builds an engine with N identical nodes (32 processors, 128 GB), starts a set of
 * jobs that keep about half of them busy, queues J more jobs of mixed shapes (1 to
 * 64 nodes, some whole-node, some packed several tasks per node, walltimes from
 * minutes to a day), then times the next batch_cycle() with conservative backfill:
 * ordering, starting what fits and a job reservation for every other job. Each run
 * uses a fresh engine with the same (seeded) workload; the best and median of the
 * runs are printed as one JSON line on stdout.
 *
 *   sched_cycle [--nodes N] [--jobs J] [--runs R] [--seed S] [--depth D]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/batch/engine/batch.h"

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33) % n;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A job of a random shape: whole nodes (tasks of 32 procs) or packed tasks. */
static void shape(struct batch_job_spec *s, uint64_t id, int64_t submit)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    snprintf(s->user, sizeof s->user, "u%u", rnd(200));
    snprintf(s->group, sizeof s->group, "g%u", rnd(20));
    uint32_t k = rnd(10);
    int32_t nodes = k < 4   ? 1
                    : k < 7 ? 1 + (int32_t)rnd(8)
                    : k < 9 ? 8 + (int32_t)rnd(24)
                            : 32 + (int32_t)rnd(33);
    if (rnd(3) == 0) { /* packed: 1-proc tasks with some memory */
        s->tasks = nodes * 32 - (int32_t)rnd(16);
        s->per_task = (struct batch_res){1, 2000, 0, 0};
        if (s->tasks < 1)
            s->tasks = 1;
    } else {
        s->tasks = nodes;
        s->per_task = (struct batch_res){32, 100000, 0, 0};
    }
    static const int64_t walls[] = {600, 1800, 3600, 4 * 3600, 12 * 3600, 86400};
    s->walltime = walls[rnd(6)] - (int64_t)rnd(300);
    s->submit = submit;
}

/* One run: returns the cycle's milliseconds; fills the cycle statistics. */
static double run(int32_t nodes, int32_t jobs, int32_t depth, uint64_t seed,
                  struct batch_cycle_stats *st)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.reservation_depth = depth;
    struct batch_engine *e = batch_engine_new(&c);
    if (!e) {
        perror("sched_cycle: batch_engine_new");
        exit(1);
    }
    for (int32_t i = 0; i < nodes; i++) {
        struct batch_node_spec n = {.cap = {32, 128000, 0, 0}};
        snprintf(n.name, sizeof n.name, "node%04d", i);
        if (batch_node_add(e, &n) < 0) {
            perror("sched_cycle: batch_node_add");
            exit(1);
        }
    }
    rng = seed;
    struct batch_job_spec s;
    uint64_t id = 1;
    for (int32_t busy = 0; busy < nodes / 2;) { /* running load: about half the nodes */
        shape(&s, id++, 0);
        s.per_task = (struct batch_res){32, 100000, 0, 0};
        s.tasks = 1 + (int32_t)rnd(16);
        busy += s.tasks;
        if (busy > nodes / 2 || batch_job_submit(e, &s) < 0)
            break;
    }
    if (batch_cycle(e, 0, st) < 0) {
        perror("sched_cycle: batch_cycle");
        exit(1);
    }
    for (int32_t j = 0; j < jobs; j++) {
        shape(&s, id++, 1 + (int64_t)rnd(600));
        if (batch_job_submit(e, &s) < 0) {
            perror("sched_cycle: batch_job_submit");
            exit(1);
        }
    }
    double t0 = now_ms();
    if (batch_cycle(e, 601, st) < 0) {
        perror("sched_cycle: batch_cycle");
        exit(1);
    }
    double ms = now_ms() - t0;
    batch_engine_destroy(&e);
    batch_config_clear(&c);
    return ms;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int32_t nodes = 1000, jobs = 10000, runs = 5, depth = BATCH_UNLIMITED;
    uint64_t seed = 42;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--nodes") && v > 0)
            nodes = (int32_t)v;
        else if (!strcmp(argv[i], "--jobs") && v > 0)
            jobs = (int32_t)v;
        else if (!strcmp(argv[i], "--runs") && v > 0 && v <= 100)
            runs = (int32_t)v;
        else if (!strcmp(argv[i], "--seed"))
            seed = (uint64_t)v;
        else if (!strcmp(argv[i], "--depth"))
            depth = (int32_t)v;
        else {
            fprintf(stderr, "usage: sched_cycle [--nodes N] [--jobs J] [--runs R] [--seed S] "
                            "[--depth D (-1 unlimited)]\n");
            return 2;
        }
    }
    double ms[100];
    struct batch_cycle_stats st;
    for (int32_t r = 0; r < runs; r++) {
        ms[r] = run(nodes, jobs, depth, seed, &st);
        fprintf(stderr, "sched_cycle: run %d/%d: %.2f ms (%d started, %d reserved)\n", r + 1, runs,
                ms[r], st.started + st.backfilled, st.reserved);
    }
    qsort(ms, (size_t)runs, sizeof ms[0], cmp_d);
    printf("{\"bench\":\"sched_cycle\",\"ms\":%.3f,\"median_ms\":%.3f,\"pending\":%d,"
           "\"nodes\":%d,\"started\":%d,\"reserved\":%d,\"depth\":\"%s\"}\n",
           ms[0], ms[runs / 2], jobs, nodes, st.started + st.backfilled, st.reserved,
           depth == BATCH_UNLIMITED ? "unlimited" : "limited");
    return 0;
}

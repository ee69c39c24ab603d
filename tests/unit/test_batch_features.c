/*
 * test_batch_features.c - node features and job constraints in the batch engine (issue
 * 27): a constrained job starts, is planned and estimated only on nodes whose features
 * satisfy it (the one policy the simulator and the live role share); one no node
 * satisfies never fits until a node gains the features; unconstrained jobs use every
 * node as before.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

/* n0, n1: "gpu,linux"; n2, n3: "linux"; one processor each. */
static struct batch_engine *eng(void)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.estimates = true;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    for (int i = 0; i < 4; i++) {
        struct batch_node_spec s = {.cap = {1, 1000, 0, 0},
                                    .features = i < 2 ? "gpu,linux" : "linux"};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_int_equal(batch_node_add(e, &s), i);
    }
    return e;
}

static void submit(struct batch_engine *e, uint64_t id, int32_t tasks, const char *constraint,
                   int64_t wall)
{
    struct batch_job_spec s = {.id = id,
                               .tasks = tasks,
                               .per_task = {1, 0, 0, 0},
                               .walltime = wall,
                               .constraint = constraint};
    snprintf(s.user, sizeof s.user, "u");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static void cycle(struct batch_engine *e, int64_t now)
{
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, now, &st), 0);
}

/* Whether job id runs, and on which nodes (bit i: node i). */
static unsigned nodes_of(struct batch_engine *e, uint64_t id)
{
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, id, &i), 0);
    unsigned m = 0;
    for (int32_t k = 0; i.state == BATCH_JOB_RUNNING && k < i.nnodes; k++)
        m |= 1u << i.nodes[k];
    return m;
}

static void test_constrained_jobs_use_matching_nodes(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    assert_string_equal(batch_node_features(e, 0), "gpu,linux");
    assert_null(batch_node_features(e, 9));
    submit(e, 1, 2, "gpu", 100);      /* n0, n1 */
    submit(e, 2, 1, "gpu&linux", 50); /* must wait for them, though n2, n3 are free */
    submit(e, 3, 2, NULL, 100);       /* n2, n3 */
    cycle(e, 0);
    assert_int_equal(nodes_of(e, 1), 0x3);
    assert_int_equal(nodes_of(e, 2), 0);
    assert_int_equal(nodes_of(e, 3), 0xc);
    int64_t start;
    assert_int_equal(batch_job_estimate(e, 2, 0, &start), 0);
    assert_int_equal(start, 100); /* when job 1's gpu nodes are free */
    /* an estimate for a request: gpu waits, linux-only waits too (all busy), arm never */
    struct batch_request r = {.tasks = 1, .per_task = {1, 0, 0, 0}, .constraint = "arm|fpga"};
    struct batch_window w[4];
    assert_int_equal(batch_estimate(e, &r, 10, 0, w, 4), 0);
    r.constraint = "gpu";
    assert_true(batch_estimate(e, &r, 10, 0, w, 4) > 0);
    assert_true(w[0].from >= 100);
    assert_int_equal(batch_job_finish(e, 1, 100), 0);
    cycle(e, 100);
    assert_true(nodes_of(e, 2) == 0x1 || nodes_of(e, 2) == 0x2);
    batch_engine_destroy(&e);
}

static void test_unsatisfiable_until_a_node_has_it(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    submit(e, 1, 1, "fpga", 10);
    submit(e, 2, 1, "gpu|fpga", 10);
    cycle(e, 0);
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 1, &i), 0);
    assert_int_equal(i.state, BATCH_JOB_PENDING);
    assert_int_equal(i.estimate, BATCH_NEVER);
    assert_true(nodes_of(e, 2) == 0x1 || nodes_of(e, 2) == 0x2);
    /* n3 gains fpga: job 1 starts there next cycle */
    assert_int_equal(batch_node_set_features(e, 3, "fpga,linux"), 0);
    assert_string_equal(batch_node_features(e, 3), "fpga,linux");
    cycle(e, 1);
    assert_int_equal(nodes_of(e, 1), 0x8);
    assert_int_equal(batch_node_set_features(e, 7, "x"), -1);
    batch_engine_destroy(&e);
}

static void test_bad_constraint_never_fits(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    submit(e, 1, 1, "gpu&", 10); /* the drivers parse first; damaged text matches nothing */
    submit(e, 2, 4, "", 10);     /* "" is no constraint */
    cycle(e, 0);
    assert_int_equal(nodes_of(e, 1), 0);
    assert_int_equal(nodes_of(e, 2), 0xf);
    batch_engine_destroy(&e);
}

static void test_reservation_takes_matching_nodes(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    char name[64], why[200];
    struct batch_resv_req q = {
        .tasks = 2, .per_task = {1, 0, 0, 0}, .constraint = "gpu", .start = 10, .duration = 5};
    assert_int_equal(batch_resv_create(e, &q, 0, name, sizeof name, why, sizeof why), 0);
    struct batch_resv_info ri;
    assert_int_equal(batch_resv_find(e, name, &ri), 0);
    assert_int_equal(ri.nnodes, 2);
    assert_true(ri.nodes[0] < 2 && ri.nodes[1] < 2); /* n0, n1: the gpu nodes */
    q.constraint = "fpga";
    q.name = NULL;
    assert_int_equal(batch_resv_create(e, &q, 0, name, sizeof name, why, sizeof why), -1);
    batch_engine_destroy(&e);
}

/* Maui's showbf: procs free now and for how long, from the plan. */
static void test_backfill_windows(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    struct batch_bf_window w[8];
    assert_int_equal(batch_backfill_windows(e, 0, NULL, w, 8), 1);
    assert_int_equal(w[0].procs, 4);
    assert_true(w[0].duration == BATCH_NEVER);
    submit(e, 1, 2, NULL, 100); /* n0, n1 until 100 */
    cycle(e, 0);
    assert_int_equal(batch_backfill_windows(e, 0, NULL, w, 8), 1);
    assert_int_equal(w[0].procs, 2);
    assert_true(w[0].duration == BATCH_NEVER);
    submit(e, 2, 4, NULL, 100); /* the whole site from 100: reserved, 2 free until then */
    cycle(e, 10);
    assert_int_equal(batch_backfill_windows(e, 10, NULL, w, 8), 1);
    assert_int_equal(w[0].procs, 2);
    assert_int_equal(w[0].duration, 90);
    assert_int_equal(batch_backfill_windows(e, 10, "nosuch", w, 8), 0);
    batch_engine_destroy(&e);
}

/* Constraint counts (issue 27, NAME*N): nodes that are their own machines (the
 * simulator's): at least N of the job's nodes have NAME, the rest anywhere. */
static void test_counts_own_machines(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    submit(e, 1, 1, "gpu", 100);        /* one gpu node busy until 100 */
    submit(e, 2, 2, "gpu*2", 50);       /* both gpu nodes: waits for job 1, free n2, n3 or not */
    submit(e, 3, 2, "gpu*1&linux", 50); /* n1 and a linux node, now */
    submit(e, 4, 1, "gpu*3", 10);       /* two gpu machines only: never */
    cycle(e, 0);
    unsigned g = nodes_of(e, 1), o = nodes_of(e, 3);
    assert_true(g == 0x1 || g == 0x2);
    assert_int_equal(nodes_of(e, 2), 0);
    assert_int_equal(__builtin_popcount(o & 0x3), 1);
    assert_int_equal(__builtin_popcount(o & 0xc), 1);
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 4, &i), 0);
    assert_int_equal(i.estimate, BATCH_NEVER);
    int64_t start;
    assert_int_equal(batch_job_estimate(e, 2, 0, &start), 0);
    assert_int_equal(start, 100); /* both gpu nodes free: job 1 and job 3 ended */
    assert_int_equal(batch_job_finish(e, 1, 40), 0);
    assert_int_equal(batch_job_finish(e, 3, 40), 0);
    cycle(e, 40);
    assert_int_equal(nodes_of(e, 2), 0x3);
    /* an estimate for a request with counts: as a job */
    struct batch_request r = {.tasks = 1, .per_task = {1, 0, 0, 0}, .constraint = "gpu*3"};
    struct batch_window w[4];
    assert_int_equal(batch_estimate(e, &r, 10, 40, w, 4), 0);
    batch_engine_destroy(&e);
}

/* Counts over machines of several cores (the live role: a node per core, named by its
 * machine): the job's tasks go to N different machines having NAME, not packed on one;
 * a start that cannot find the machines waits. */
static void test_counts_spread_over_machines(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    c.estimates = true;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    /* A: cores 0-3 gpu; B: cores 4-7 gpu; C: cores 8-11 plain */
    for (int i = 0; i < 12; i++) {
        struct batch_node_spec s = {.cap = {1, 1000, 0, 0},
                                    .features = i < 8 ? "gpu,linux" : "linux"};
        snprintf(s.name, sizeof s.name, "%c/%d", 'A' + i / 4, i % 4);
        snprintf(s.host, sizeof s.host, "%c", 'A' + i / 4);
        assert_int_equal(batch_node_add(e, &s), i);
    }
    submit(e, 1, 2, "gpu", 100);   /* packed: two cores of one machine */
    submit(e, 2, 3, "gpu*2", 100); /* two gpu machines at least */
    submit(e, 3, 4, "gpu*3", 10);  /* three gpu machines: never */
    cycle(e, 0);
    unsigned a = nodes_of(e, 1), b = nodes_of(e, 2);
    assert_int_equal(__builtin_popcount(a), 2);
    assert_int_equal(__builtin_popcount(b), 3);
    assert_true((b & 0xff) == b);          /* gpu machines only */
    assert_true((b & 0x0f) && (b & 0xf0)); /* on both */
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 3, &i), 0);
    assert_int_equal(i.estimate, BATCH_NEVER);
    /* machine A fully busy (job 4): a gpu*2 job waits for a core on A, though B has 4 */
    assert_int_equal(batch_job_finish(e, 1, 10), 0);
    assert_int_equal(batch_job_finish(e, 2, 10), 0);
    submit(e, 4, 4, "gpu*1", 100); /* packed on one gpu machine: its 4 cores */
    cycle(e, 10);
    unsigned d = nodes_of(e, 4);
    assert_true(d == 0x0f || d == 0xf0);
    submit(e, 5, 2, "gpu*2", 50);
    cycle(e, 11);
    assert_int_equal(nodes_of(e, 5), 0); /* the other gpu machine alone: waits */
    assert_int_equal(batch_job_finish(e, 4, 20), 0);
    cycle(e, 20);
    unsigned f = nodes_of(e, 5);
    assert_int_equal(__builtin_popcount(f), 2);
    assert_true((f & 0x0f) && (f & 0xf0));
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constrained_jobs_use_matching_nodes),
        cmocka_unit_test(test_unsatisfiable_until_a_node_has_it),
        cmocka_unit_test(test_bad_constraint_never_fits),
        cmocka_unit_test(test_reservation_takes_matching_nodes),
        cmocka_unit_test(test_backfill_windows),
        cmocka_unit_test(test_counts_own_machines),
        cmocka_unit_test(test_counts_spread_over_machines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

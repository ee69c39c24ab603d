/*
 * test_batch_ppn.c - the engine's processes-per-host limit (issue 27): a job with
 * ppn puts at most ppn tasks on one machine, whether the machine is one node (the
 * simulator) or several one-core nodes naming the same host (the live role); a job
 * the machines can never hold says so; reservations for tasks keep the limit; jobs
 * without ppn are packed as before.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

static struct batch_engine *eng(void)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.estimates = true;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    return e;
}

/* hosts machines h0.. of `cores` one-core nodes each ("hK/C"), as the live role. */
static void cores(struct batch_engine *e, int hosts, int ncores)
{
    for (int h = 0; h < hosts; h++)
        for (int c = 0; c < ncores; c++) {
            struct batch_node_spec s = {.cap = {1, 1000, 0, 0}};
            snprintf(s.name, sizeof s.name, "h%d/%d", h, c);
            snprintf(s.host, sizeof s.host, "h%d", h);
            assert_true(batch_node_add(e, &s) >= 0);
        }
}

static void submit(struct batch_engine *e, uint64_t id, int32_t tasks, int32_t ppn, int64_t wall)
{
    struct batch_job_spec s = {
        .id = id, .tasks = tasks, .per_task = {1, 0, 0, 0}, .walltime = wall, .ppn = ppn};
    snprintf(s.user, sizeof s.user, "u");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static void cycle(struct batch_engine *e, int64_t now)
{
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, now, &st), 0);
}

/* The machines job id runs on: how many of its tasks each holds, in counts[h]. */
static void per_host(struct batch_engine *e, uint64_t id, int *counts, int n)
{
    struct batch_job_info i;
    memset(counts, 0, (size_t)n * sizeof *counts);
    assert_int_equal(batch_job_info(e, id, &i), 0);
    if (i.state != BATCH_JOB_RUNNING)
        fprintf(stderr, "job %llu pending: %s\n", (unsigned long long)id, i.reason);
    assert_int_equal(i.state, BATCH_JOB_RUNNING);
    for (int32_t k = 0; k < i.nnodes; k++) {
        int h = -1;
        assert_int_equal(sscanf(batch_node_name(e, i.nodes[k]), "h%d/", &h), 1);
        assert_true(h >= 0 && h < n);
        counts[h]++;
    }
}

/* One-core nodes sharing machines: ppn 1 spreads, no ppn packs. */
static void test_shared_hosts(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    cores(e, 3, 2);
    submit(e, 1, 2, 0, 100); /* packed: the lowest free nodes, both cores of h0 */
    submit(e, 2, 2, 1, 100); /* one per machine: h1 and h2 */
    cycle(e, 0);
    int c[3];
    per_host(e, 1, c, 3);
    assert_true(c[0] == 2 && c[1] == 0 && c[2] == 0);
    per_host(e, 2, c, 3);
    assert_true(c[0] == 0 && c[1] == 1 && c[2] == 1);
    /* two free cores, on h1 and h2: 3 tasks at one per machine wait, though a
     * node count alone would say nothing of machines */
    submit(e, 3, 3, 1, 100);
    cycle(e, 1);
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 3, &i), 0);
    assert_int_equal(i.state, BATCH_JOB_PENDING);
    /* 2 tasks at one per machine: h1 and h2 */
    submit(e, 6, 2, 1, 50);
    cycle(e, 2);
    per_host(e, 6, c, 3);
    assert_true(c[1] == 1 && c[2] == 1);
    /* more machines than exist: pending for good, never started */
    submit(e, 4, 4, 1, 100);
    cycle(e, 2);
    assert_int_equal(batch_job_info(e, 4, &i), 0);
    assert_int_equal(i.state, BATCH_JOB_PENDING);
    assert_non_null(i.reason);
    /* after everything ends job 3 (if waiting) runs on three machines */
    assert_int_equal(batch_job_finish(e, 1, 200), 0);
    assert_int_equal(batch_job_finish(e, 2, 200), 0);
    assert_int_equal(batch_job_finish(e, 6, 200), 0);
    cycle(e, 200);
    per_host(e, 3, c, 3);
    assert_true(c[0] == 1 && c[1] == 1 && c[2] == 1);
    batch_engine_destroy(&e);
}

/* Multi-core nodes that are machines of their own (the simulator): ppn caps the
 * tasks per node, so a job takes ceil(tasks / ppn) nodes. */
static void test_own_hosts(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    for (int i = 0; i < 4; i++) {
        struct batch_node_spec s = {.cap = {4, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    submit(e, 1, 4, 2, 100);
    submit(e, 2, 4, 0, 100);
    cycle(e, 0);
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 1, &i), 0);
    assert_int_equal(i.nnodes, 2);
    assert_int_equal(batch_job_info(e, 2, &i), 0);
    assert_int_equal(i.nnodes, 1);
    /* estimates follow the limit: 4 tasks at 1 per node need all 4 nodes */
    struct batch_request q = {.tasks = 4, .per_task = {1, 0, 0, 0}, .ppn = 1};
    struct batch_window w[2];
    assert_int_equal(batch_estimate(e, &q, 10, 1, w, 2), 1);
    assert_int_equal(w[0].from, 100);
    batch_engine_destroy(&e);
}

/* A reservation of tasks with ppn takes cores of distinct machines. */
static void test_resv_ppn(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    cores(e, 2, 2);
    struct batch_resv_req r = {.tasks = 2, .per_task = {1, 0, 0, 0}, .ppn = 1, .duration = 50};
    char name[64], why[256];
    assert_int_equal(batch_resv_create(e, &r, 0, name, sizeof name, why, sizeof why), 0);
    struct batch_resv_info ri;
    assert_int_equal(batch_resv_find(e, name, &ri), 0);
    assert_int_equal(ri.nnodes, 2);
    /* "hK/C": the machines differ */
    assert_int_not_equal(batch_node_name(e, ri.nodes[0])[1], batch_node_name(e, ri.nodes[1])[1]);
    r.tasks = 3; /* a third core on a third machine: there is none */
    assert_int_equal(batch_resv_create(e, &r, 0, name, sizeof name, why, sizeof why), -1);
    batch_engine_destroy(&e);
}

/* Machines whose nodes differ a little (free disk reported 1 MB apart, as two live
 * clients do) fall into different node groups: a ppn 1 job placed over both groups
 * must still take one node per machine and start now (it took both cores of one
 * machine, was refused, and waited for ever). */
static void test_ppn_over_groups(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < 2; c++) {
            struct batch_node_spec s = {.cap = {1, 1000, 5000 + h, 0}};
            snprintf(s.name, sizeof s.name, "h%d/%d", h, c);
            snprintf(s.host, sizeof s.host, "h%d", h);
            assert_true(batch_node_add(e, &s) >= 0);
        }
    submit(e, 1, 2, 1, 100);
    cycle(e, 0);
    int n[2];
    per_host(e, 1, n, 2);
    assert_int_equal(n[0], 1);
    assert_int_equal(n[1], 1);
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_hosts),
        cmocka_unit_test(test_own_hosts),
        cmocka_unit_test(test_resv_ppn),
        cmocka_unit_test(test_ppn_over_groups),
    };
    return cmocka_run_group_tests_name("batch_ppn", tests, NULL, NULL);
}

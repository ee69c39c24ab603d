/*
 * test_batch_engine_live.c - the engine calls of the live driver (engine_live.c):
 * a running job's start moved to what the resource manager reports (its end, the
 * reservation of the next blocked job and estimates follow), and a node's capacity
 * changed while a job runs on it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

static struct batch_engine *eng(void)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.estimates = true;
    c.unit_per_s = 1000;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    return e;
}

static void node(struct batch_engine *e, const char *name, int32_t procs, int64_t mem)
{
    struct batch_node_spec s = {.cap = {procs, mem, 0, 0}};
    snprintf(s.name, sizeof s.name, "%s", name);
    assert_true(batch_node_add(e, &s) >= 0);
}

static void submit(struct batch_engine *e, uint64_t id, int32_t tasks, int64_t mem, int64_t wall,
                   int64_t at)
{
    struct batch_job_spec s = {
        .id = id, .tasks = tasks, .per_task = {1, mem, 0, 0}, .walltime = wall, .submit = at};
    snprintf(s.user, sizeof s.user, "u");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static struct batch_job_info info(struct batch_engine *e, uint64_t id)
{
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, id, &i), 0);
    return i;
}

static void cycle(struct batch_engine *e, int64_t now)
{
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, now, &st), 0);
}

/* The cluster started job 1 at 1300, not at 1000 when the cycle decided it: the wide
 * job behind it is reserved at 1300 + walltime, and a backfill candidate that would
 * only have fitted before the later end is judged against the real one. */
static void test_started_at(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    node(e, "a", 1, 0);
    node(e, "b", 1, 0);
    submit(e, 1, 1, 0, 5000, 0);
    cycle(e, 1000);
    assert_int_equal(info(e, 1).state, BATCH_JOB_RUNNING);
    assert_int_equal(info(e, 1).end_est, 6000);
    submit(e, 2, 2, 0, 1000, 1000); /* wide: blocked until 1 ends */
    cycle(e, 1100);
    assert_int_equal(info(e, 2).reserved, 6000);
    assert_int_equal(batch_job_started_at(e, 1, 1300), 0);
    assert_int_equal(info(e, 1).start, 1300);
    assert_int_equal(info(e, 1).end_est, 6300);
    cycle(e, 1400);
    assert_int_equal(info(e, 2).reserved, 6300);
    assert_int_equal(info(e, 2).estimate, 6300);
    /* estimates of a request see the new end too */
    struct batch_request rq = {.tasks = 2, .per_task = {1, 0, 0, 0}};
    struct batch_window w[4];
    assert_true(batch_estimate(e, &rq, 100, 1400, w, 4) >= 1);
    assert_int_equal(w[0].from, 7300); /* after job 2's reservation [6300, 7300) */
    /* earlier again (clock differences): back to 1100 */
    assert_int_equal(batch_job_started_at(e, 1, 1100), 0);
    cycle(e, 1500);
    assert_int_equal(info(e, 2).reserved, 6100);
    /* job 2 starts at its reservation, when 1 ends at its walltime */
    assert_int_equal(batch_job_finish(e, 1, 6100), 0);
    cycle(e, 6100);
    assert_int_equal(info(e, 2).state, BATCH_JOB_RUNNING);
    /* bad calls change nothing */
    assert_int_equal(batch_job_started_at(e, 99, 1), -1);
    assert_int_equal(errno, ENOENT);
    submit(e, 3, 1, 0, 1000, 6100);
    assert_int_equal(batch_job_started_at(e, 3, 6100), -1); /* pending */
    assert_int_equal(errno, EINVAL);
    assert_int_equal(batch_job_started_at(e, 2, 6100), 0); /* same start: no change */
    batch_engine_destroy(&e);
}

/* A start reported before anyone asked for the job's nodes (the simulator's replay of
 * a live record: no batch_job_info between the cycle and the report): the node list
 * the engine writes on first use is written first (it read an unwritten list). */
static void test_started_at_before_node_list(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    for (int i = 0; i < 8; i++) {
        char n[8];
        snprintf(n, sizeof n, "n%d", i);
        node(e, n, 1, 0);
    }
    submit(e, 1, 3, 0, 5000, 0);
    submit(e, 2, 8, 0, 1000, 0); /* wide: reserved at 1's end */
    cycle(e, 1000);
    assert_int_equal(batch_job_started_at(e, 1, 1040), 0);
    cycle(e, 1100);
    struct batch_job_info i1 = info(e, 1);
    assert_int_equal(i1.end_est, 6040);
    assert_int_equal(i1.nnodes, 3);
    for (int32_t k = 0; k < i1.nnodes; k++)
        assert_true(i1.nodes[k] >= 0 && i1.nodes[k] < 8);
    assert_int_equal(info(e, 2).reserved, 6040);
    batch_engine_destroy(&e);
}

/* A start reported after the job's walltime would already have passed: overrun, the
 * plan does not go back in time. */
static void test_started_at_late_report(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    node(e, "a", 1, 0);
    submit(e, 1, 1, 0, 1000, 0);
    cycle(e, 0);
    submit(e, 2, 1, 0, 1000, 0);
    cycle(e, 5000); /* 1 overran: assumed to end shortly */
    assert_int_equal(batch_job_started_at(e, 1, 100), 0);
    assert_true(info(e, 1).end_est >= 5000);
    cycle(e, 5001);
    assert_true(info(e, 2).estimate >= 5000);
    batch_engine_destroy(&e);
}

/* Capacity changes: a node grows and takes a job it could not hold before; a node
 * shrinks under a running job, which keeps it. */
static void test_set_cap(void **state)
{
    (void)state;
    struct batch_engine *e = eng();
    node(e, "a", 1, 1000);
    submit(e, 1, 1, 2000, 1000, 0); /* needs 2000 MB */
    cycle(e, 0);
    assert_int_equal(info(e, 1).state, BATCH_JOB_PENDING);
    struct batch_res big = {1, 4000, 0, 0};
    assert_int_equal(batch_node_set_cap(e, 0, &big), 0);
    cycle(e, 10);
    assert_int_equal(info(e, 1).state, BATCH_JOB_RUNNING);
    struct batch_res small = {1, 500, 0, 0};
    assert_int_equal(batch_node_set_cap(e, 0, &small), 0);
    cycle(e, 20);
    assert_int_equal(info(e, 1).state, BATCH_JOB_RUNNING);
    assert_int_equal(info(e, 1).nnodes, 1);
    submit(e, 2, 1, 400, 1000, 20);
    cycle(e, 30); /* busy */
    assert_int_equal(info(e, 2).state, BATCH_JOB_PENDING);
    assert_int_equal(batch_job_finish(e, 1, 40), 0);
    cycle(e, 40);
    assert_int_equal(info(e, 2).state, BATCH_JOB_RUNNING);
    /* bad calls */
    struct batch_res bad = {0, 0, 0, 0};
    assert_int_equal(batch_node_set_cap(e, 0, &bad), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(batch_node_set_cap(e, 7, &big), -1);
    assert_int_equal(errno, ENOENT);
    batch_engine_destroy(&e);
}

/* A job that outlives its walltime is assumed to end overrun_grace after the cycle that
 * notices it (the live role sets 1 s = 1000 ms; the default is 60 units), and every later
 * cycle that still sees it running extends it again. */
static void test_overrun_grace_in_engine_units(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    assert_int_equal(c.overrun_grace, 60);
    c.unit_per_s = 1000;
    c.overrun_grace = 1000;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    node(e, "n1", 1, 0);
    submit(e, 1, 1, 0, 1000, 0);
    cycle(e, 0);
    assert_int_equal(info(e, 1).state, BATCH_JOB_RUNNING);
    cycle(e, 1500); /* past its 1 s walltime, not reported ended */
    assert_int_equal(info(e, 1).end_est, 2500);
    cycle(e, 2600); /* still running: extended again */
    assert_int_equal(info(e, 1).end_est, 3600);
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_started_at),
        cmocka_unit_test(test_started_at_late_report),
        cmocka_unit_test(test_started_at_before_node_list),
        cmocka_unit_test(test_set_cap),
        cmocka_unit_test(test_overrun_grace_in_engine_units),
    };
    return cmocka_run_group_tests_name("batch_engine_live", tests, NULL, NULL);
}

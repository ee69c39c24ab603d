/*
 * test_batch_showstart.c - batch_job_estimate (Maui's showstart, issue 27): pending
 * jobs that each need the whole partition get starts one after the other, in
 * priority order, whether or not the engine keeps estimates every cycle and whether
 * the last cycle planned (an idle cycle does not). The answers are kept between
 * requests (issue 28), but never across a change of the engine's state.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "roles/batch/engine/batch.h"

static void run(bool estimates, int32_t depth)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.estimates = estimates;
    c.reservation_depth = depth;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    for (int i = 0; i < 4; i++) {
        struct batch_node_spec s = {.cap = {1, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    int64_t wall[] = {100, 200, 300, 50};
    for (uint64_t id = 1; id <= 4; id++) { /* each needs all 4 nodes */
        struct batch_job_spec s = {.id = id,
                                   .tasks = 4,
                                   .per_task = {1, 0, 0, 0},
                                   .walltime = wall[id - 1],
                                   .submit = (int64_t)id};
        snprintf(s.user, sizeof s.user, "u");
        assert_int_equal(batch_job_submit(e, &s), 0);
        if (id == 1)
            assert_int_equal(batch_cycle(e, 0, NULL), 0); /* job 1 runs [0, 100) */
    }
    assert_int_equal(batch_cycle(e, 5, NULL), 0); /* nothing free: an idle cycle */
    int64_t t2, t3, t4;
    assert_int_equal(batch_job_estimate(e, 2, 5, &t2), 0);
    assert_int_equal(batch_job_estimate(e, 3, 5, &t3), 0);
    assert_int_equal(batch_job_estimate(e, 4, 5, &t4), 0);
    assert_int_equal(t2, 100);
    assert_int_equal(t3, 300);
    assert_int_equal(t4, 600);
    assert_int_equal(batch_job_estimate(e, 1, 5, &t2), -1); /* running */
    assert_int_equal(batch_job_estimate(e, 99, 5, &t2), -1);
    batch_engine_destroy(&e);
}

static void test_in_priority_order(void **state)
{
    (void)state;
    run(false, 1);
    run(true, 1);
    run(false, 0);
    run(false, BATCH_UNLIMITED);
}

/* The estimates kept for the next requests (one estimate pass answers them, issue 28)
 * are dropped by any change: a hold, a job ending, a submission ahead. */
static void test_kept_until_a_change(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    for (int i = 0; i < 4; i++) {
        struct batch_node_spec s = {.cap = {1, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    int64_t wall[] = {100, 200, 300, 50, 10};
    for (uint64_t id = 1; id <= 4; id++) {
        struct batch_job_spec s = {.id = id,
                                   .tasks = 4,
                                   .per_task = {1, 0, 0, 0},
                                   .walltime = wall[id - 1],
                                   .submit = (int64_t)id};
        snprintf(s.user, sizeof s.user, "u");
        assert_int_equal(batch_job_submit(e, &s), 0);
        if (id == 1)
            assert_int_equal(batch_cycle(e, 0, NULL), 0); /* job 1 runs [0, 100) */
    }
    assert_int_equal(batch_cycle(e, 5, NULL), 0);
    int64_t t;
    assert_int_equal(batch_job_estimate(e, 3, 5, &t), 0);
    assert_int_equal(t, 300);
    assert_int_equal(batch_job_estimate(e, 3, 5, &t), 0); /* kept: the same answer */
    assert_int_equal(t, 300);
    assert_int_equal(batch_job_hold(e, 2, true), 0); /* job 3 moves up to 100 */
    assert_int_equal(batch_job_estimate(e, 3, 5, &t), 0);
    assert_int_equal(t, 100);
    assert_int_equal(batch_job_estimate(e, 4, 5, &t), 0);
    assert_int_equal(t, 400);
    assert_int_equal(batch_job_finish(e, 1, 5), 0); /* the nodes are free at 5 */
    assert_int_equal(batch_job_estimate(e, 3, 5, &t), 0);
    assert_int_equal(t, 5);
    assert_int_equal(batch_job_estimate(e, 4, 5, &t), 0);
    assert_int_equal(t, 305);
    struct batch_job_spec s = {.id = 5, /* queued behind the others until a cycle */
                               .tasks = 4,
                               .per_task = {1, 0, 0, 0},
                               .walltime = wall[4],
                               .submit = 5};
    snprintf(s.user, sizeof s.user, "u");
    assert_int_equal(batch_job_submit(e, &s), 0);
    assert_int_equal(batch_job_estimate(e, 5, 5, &t), 0); /* a new pass plans it */
    assert_int_equal(t, 355);
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_in_priority_order),
                                       cmocka_unit_test(test_kept_until_a_change)};
    return cmocka_run_group_tests_name("batch_showstart", tests, NULL, NULL);
}

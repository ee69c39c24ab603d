/*
 * test_batch_showstart.c - batch_job_estimate (Maui's showstart, issue 27): pending
 * jobs that each need the whole partition get starts one after the other, in
 * priority order, whether or not the engine keeps estimates every cycle and whether
 * the last cycle planned (an idle cycle does not).
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_in_priority_order)};
    return cmocka_run_group_tests_name("batch_showstart", tests, NULL, NULL);
}

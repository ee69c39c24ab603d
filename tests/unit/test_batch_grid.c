/*
 * test_batch_grid.c - the batch engine's rules for a metascheduler's jobs (issue 25):
 * the grid guard (config.grid_wait_bound: a local job that has waited the bound and
 * holds a job reservation is no longer held back by grid reservations made before
 * it), and estimates that see the queue's job reservations after a reservation change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

static struct batch_engine *site(int64_t bound)
{
    struct batch_config c;
    batch_config_defaults(&c); /* EASY: one job reservation; no estimate pass */
    c.grid_wait_bound = bound;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    for (int i = 0; i < 2; i++) {
        struct batch_node_spec s = {.cap = {1, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    return e;
}

static void submit(struct batch_engine *e, uint64_t id, int64_t at, bool grid)
{
    struct batch_job_spec s = {.id = id,
                               .tasks = 2,
                               .per_task = {1, 0, 0, 0},
                               .walltime = 100,
                               .submit = at,
                               .early_start = grid,
                               .grid = grid};
    snprintf(s.user, sizeof s.user, "%s", grid ? "spool" : "local");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

/* The earliest start the site offers a 2-node, 100 s request now. */
static int64_t estimate(struct batch_engine *e, int64_t now)
{
    struct batch_request q = {.tasks = 2, .per_task = {1, 0, 0, 0}};
    struct batch_window w;
    assert_true(batch_estimate(e, &q, 100, now, &w, 1) >= 1);
    return w.from;
}

/* A spool's placement: estimate, a grid reservation bound to the job, the job. */
static int64_t place_grid(struct batch_engine *e, uint64_t id, int64_t now)
{
    int64_t t = estimate(e, now);
    struct batch_resv_req r = {
        .tasks = 2, .per_task = {1, 0, 0, 0}, .start = t, .duration = 100, .grid = true};
    r.acl.jobs = &id;
    r.acl.njobs = 1;
    char name[BATCH_NAME_MAX], why[256];
    assert_int_equal(batch_resv_create(e, &r, now, name, sizeof name, why, sizeof why), 0);
    submit(e, id, now, true);
    return t;
}

static struct batch_job_info info(struct batch_engine *e, uint64_t id)
{
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, id, &i), 0);
    return i;
}

static void cycle(struct batch_engine *e, int64_t now)
{
    assert_int_equal(batch_cycle(e, now, NULL), 0);
}

/*
 * Job 1 runs on both nodes until 100; local jobs 2 and 3 wait (2 holds the one job
 * reservation, at 100, planned by the first estimate although the full site's cycle
 * was idle); the spool places grid jobs 4 and 5 at 200 and 300. When 2
 * starts, 3 becomes the top job behind the grid reservations (at 400). Once 3 has
 * waited the bound (100 s, at 101) they are released and 3 moves up to 200; without
 * the bound it stays at 400.
 */
static void test_guard_releases_older_grid_reservations(void **state)
{
    (void)state;
    for (int on = 0; on < 2; on++) {
        struct batch_engine *e = site(on ? 100 : 0);
        submit(e, 1, 0, false);
        cycle(e, 0);
        assert_int_equal(info(e, 1).state, BATCH_JOB_RUNNING);
        submit(e, 2, 1, false);
        submit(e, 3, 1, false);
        cycle(e, 1); /* the site is full: an idle cycle, no job reservation yet */
        /* the estimate plans the top job first (job 2 at 100) and goes after it */
        assert_int_equal(place_grid(e, 4, 2), 200);
        assert_int_equal(info(e, 2).reserved, 100);
        /* the estimate after a reservation still sees job 2's job reservation */
        assert_int_equal(place_grid(e, 5, 2), 300);
        cycle(e, 2);
        assert_int_equal(batch_job_finish(e, 1, 100), 0);
        cycle(e, 100);
        assert_int_equal(info(e, 2).state, BATCH_JOB_RUNNING);
        assert_int_equal(info(e, 3).reserved, 400);
        const struct batch_released *rel;
        assert_int_equal(batch_cycle_released(e, &rel), 0);
        /* the guard's moment is a wakeup: job 3 reaches the bound at 101 */
        assert_int_equal(batch_next_wakeup(e), on ? 101 : 200);
        cycle(e, 101);
        size_t n = batch_cycle_released(e, &rel);
        if (!on) {
            assert_int_equal(n, 0);
            assert_int_equal(info(e, 3).reserved, 400);
            assert_int_equal(batch_resv_count(e), 2);
            batch_engine_destroy(&e);
            continue;
        }
        assert_int_equal(n, 2);
        assert_true((rel[0].job == 4 && rel[1].job == 5) || (rel[0].job == 5 && rel[1].job == 4));
        assert_int_equal(batch_resv_count(e), 0);
        assert_int_equal(info(e, 3).reserved, 200);
        /* the grid jobs stay queued; a new placement goes around job 3 and is kept */
        assert_int_equal(info(e, 4).state, BATCH_JOB_PENDING);
        assert_int_equal(place_grid(e, 6, 102), 300);
        cycle(e, 102);
        assert_int_equal(batch_cycle_released(e, &rel), 0);
        assert_int_equal(batch_resv_count(e), 1);
        assert_int_equal(info(e, 3).reserved, 200);
        assert_int_equal(batch_job_finish(e, 2, 150), 0);
        cycle(e, 150);
        assert_int_equal(info(e, 3).state, BATCH_JOB_RUNNING);
        batch_engine_destroy(&e);
    }
}

/* Grid jobs are never protected by the guard, and a grid reservation whose job runs is
 * never released. */
static void test_guard_spares_grid_jobs_and_running_reservations(void **state)
{
    (void)state;
    struct batch_engine *e = site(10);
    submit(e, 1, 0, false);
    cycle(e, 0);
    submit(e, 2, 1, true); /* a grid job without a reservation waits as any job */
    cycle(e, 1);
    assert_int_equal(place_grid(e, 3, 5), 200); /* after job 2's job reservation */
    cycle(e, 50);
    const struct batch_released *rel;
    assert_int_equal(batch_cycle_released(e, &rel), 0); /* job 2 is a grid job */
    assert_int_equal(batch_resv_count(e), 1);
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard_releases_older_grid_reservations),
        cmocka_unit_test(test_guard_spares_grid_jobs_and_running_reservations),
    };
    return cmocka_run_group_tests_name("batch_grid", tests, NULL, NULL);
}

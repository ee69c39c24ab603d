/*
 * test_batch_grid.c - the batch engine's rules for a metascheduler's jobs (issue 25):
 * the grid guard (config.grid_wait_bound: a local job that has waited the bound and
 * holds a job reservation is no longer held back by grid reservations made before
 * it), estimates that see the queue's job reservations after a reservation change, and
 * grid reservations that move up when their job can start sooner (moveup.c).
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

/* ---- grid reservations move up (moveup.c) ---- */

static struct batch_engine *site_of(int nodes)
{
    struct batch_config c;
    batch_config_defaults(&c);
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    for (int i = 0; i < nodes; i++) {
        struct batch_node_spec s = {.cap = {1, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    return e;
}

static void job(struct batch_engine *e, uint64_t id, int64_t at, int32_t tasks, int64_t wall,
                bool grid, bool early)
{
    struct batch_job_spec s = {.id = id,
                               .tasks = tasks,
                               .per_task = {1, 0, 0, 0},
                               .walltime = wall,
                               .submit = at,
                               .early_start = early,
                               .grid = grid};
    snprintf(s.user, sizeof s.user, "%s", grid ? "spool" : "local");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

/* The spool's placement of a grid job: its reservation at the site's estimate (name
 * into name); returns that start. */
static int64_t place(struct batch_engine *e, uint64_t id, int64_t now, int32_t tasks, int64_t wall,
                     bool early, char *name)
{
    struct batch_request q = {.tasks = tasks, .per_task = {1, 0, 0, 0}};
    struct batch_window w;
    assert_true(batch_estimate(e, &q, wall, now, &w, 1) >= 1);
    struct batch_resv_req r = {
        .tasks = tasks, .per_task = {1, 0, 0, 0}, .start = w.from, .duration = wall, .grid = true};
    r.acl.jobs = &id;
    r.acl.njobs = 1;
    char why[256];
    assert_int_equal(batch_resv_create(e, &r, now, name, BATCH_NAME_MAX, why, sizeof why), 0);
    job(e, id, now, tasks, wall, true, early);
    return w.from;
}

static int64_t resv_start(struct batch_engine *e, const char *name)
{
    struct batch_resv_info i;
    assert_int_equal(batch_resv_find(e, name, &i), 0);
    return i.start;
}

/* Five nodes: local job 1 runs on one until 600, grid job 2 on the four others until
 * 1000 (asked), its reservation released once it runs (as the spool does). */
static struct batch_engine *busy_site(void)
{
    struct batch_engine *e = site_of(5);
    char ra[BATCH_NAME_MAX];
    job(e, 1, 0, 1, 600, false, false);
    cycle(e, 0);
    assert_int_equal(place(e, 2, 0, 4, 1000, true, ra), 0);
    cycle(e, 0);
    assert_int_equal(info(e, 2).state, BATCH_JOB_RUNNING);
    assert_int_equal(batch_resv_release(e, ra), 0);
    return e;
}

/*
 * Five nodes. Local job 1 runs on one until 600; grid job 2 runs on the four others in
 * its reservation until 1000; grid job 3 (four nodes) is reserved from 1000 on four
 * nodes, job 1's among them. Local job 4 (four nodes, 500 s) waits. Job 2 ends at 10:
 * job 3 fits now on the four free nodes, but not all of its reserved nodes are free, so
 * its early start cannot pull the reservation forward, and job 4 would fill the hole
 * until 510. Its reservation moves up to now and it starts (job 4 then waits); a job
 * that asked for its exact start keeps its reservation, and job 4 backfills.
 */
static void test_grid_reservation_moves_up(void **state)
{
    (void)state;
    for (int early = 0; early < 2; early++) {
        struct batch_engine *e = busy_site();
        char rb[BATCH_NAME_MAX];
        assert_int_equal(place(e, 3, 0, 4, 1000, early, rb), 1000);
        job(e, 4, 1, 4, 500, false, false);
        cycle(e, 1);
        assert_int_equal(batch_job_finish(e, 2, 10), 0);
        cycle(e, 10);
        const struct batch_moved *mv;
        size_t n = batch_cycle_moved(e, &mv);
        if (!early) { /* --exact-start: it stays; job 4 backfills into the hole */
            assert_int_equal(n, 0);
            assert_int_equal(resv_start(e, rb), 1000);
            assert_int_equal(info(e, 4).state, BATCH_JOB_RUNNING);
            assert_int_equal(info(e, 3).state, BATCH_JOB_PENDING);
            batch_engine_destroy(&e);
            continue;
        }
        assert_int_equal(n, 1);
        assert_string_equal(mv[0].name, rb);
        assert_int_equal(mv[0].job, 3);
        assert_int_equal(mv[0].start, 10);
        assert_int_equal(mv[0].end, 1010);
        assert_int_equal(resv_start(e, rb), 10);
        assert_int_equal(batch_resv_count(e), 1); /* the old window is gone */
        assert_int_equal(info(e, 3).state, BATCH_JOB_RUNNING);
        assert_int_equal(info(e, 4).state, BATCH_JOB_PENDING);
        batch_engine_destroy(&e);
    }
}

/* A move never delays a job ahead of the grid job: local job 4 (all five nodes, 100
 * s), queued before grid job 3 was placed, holds the job reservation at 600 when job 2
 * ends. Job 3 (four nodes) starts at once if it ends by 600 (a 500 s walltime: in the
 * general pool, before its own reservation); asking 1000 s, it would need its own
 * reserved nodes past 600, where job 4's reservation is: it does not move. */
static void test_move_goes_around_jobs_ahead(void **state)
{
    (void)state;
    for (int wall = 500; wall <= 1000; wall += 500) {
        struct batch_engine *e = busy_site();
        char rb[BATCH_NAME_MAX];
        job(e, 4, 0, 5, 100, false, false);
        cycle(e, 0);
        int64_t at = place(e, 3, 1, 4, wall, true, rb);
        assert_true(at >= 1000);
        cycle(e, 1);
        assert_int_equal(batch_job_finish(e, 2, 10), 0);
        cycle(e, 10);
        assert_int_equal(info(e, 4).reserved, 600);
        const struct batch_moved *mv;
        if (wall == 500) {
            assert_int_equal(info(e, 3).state, BATCH_JOB_RUNNING);
        } else {
            assert_int_equal(batch_cycle_moved(e, &mv), 0);
            assert_int_equal(resv_start(e, rb), at);
            assert_int_equal(info(e, 3).state, BATCH_JOB_PENDING);
        }
        batch_engine_destroy(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard_releases_older_grid_reservations),
        cmocka_unit_test(test_guard_spares_grid_jobs_and_running_reservations),
        cmocka_unit_test(test_grid_reservation_moves_up),
        cmocka_unit_test(test_move_goes_around_jobs_ahead),
    };
    return cmocka_run_group_tests_name("batch_grid", tests, NULL, NULL);
}

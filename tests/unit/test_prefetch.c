/*
 * test_prefetch.c - the client's prefetch sizing (roles/client/prefetch.c): without
 * round-trip or duration knowledge it asks for the free slots only; with them it keeps
 * what the slots consume in two round trips, asks for a long task's successor only
 * shortly before that task ends, subtracts the queue, and never passes its cap.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "roles/client/prefetch.h"

static void test_no_knowledge_free_slots(void **state)
{
    (void)state;
    double left[2] = {-1, -1};
    struct prefetch_need n = {.slots = 4,
                              .running = 2,
                              .left_s = left,
                              .queued = 0,
                              .next_s = 0,
                              .cover_s = 0.8,
                              .max_held = 64};
    assert_int_equal(prefetch_want(&n), 2); /* no durations known */
    n.next_s = 0.1;
    n.cover_s = 0; /* no round trip measured */
    assert_int_equal(prefetch_want(&n), 2);
    n.running = 4;
    assert_int_equal(prefetch_want(&n), 0);
}

static void test_short_tasks_cover_round_trips(void **state)
{
    (void)state;
    /* 2 slots, 0.1 s tasks, 0.8 s to cover: each free slot runs 8 in the window */
    struct prefetch_need n = {
        .slots = 2, .running = 0, .queued = 0, .next_s = 0.1, .cover_s = 0.8, .max_held = 64};
    assert_int_equal(prefetch_want(&n), 16);
    n.queued = 10; /* the queue counts */
    assert_int_equal(prefetch_want(&n), 6);
    n.queued = 20;
    assert_int_equal(prefetch_want(&n), 0);
    /* running tasks about to end need their successors too */
    double left[2] = {0.05, 0.3};
    n.running = 2;
    n.left_s = left;
    n.queued = 0;
    assert_int_equal(prefetch_want(&n), 8 + 5);
    /* the cap: never more held than max_held */
    n.max_held = 6;
    assert_int_equal(prefetch_want(&n), 4);
    n.queued = 4;
    assert_int_equal(prefetch_want(&n), 0);
    /* max_held == slots: prefetching off, the free slots only */
    n.running = 1;
    n.queued = 0;
    n.max_held = 2;
    assert_int_equal(prefetch_want(&n), 1);
}

static void test_long_tasks_not_hoarded(void **state)
{
    (void)state;
    /* 2 slots running 5 s tasks, 0.8 s to cover */
    double left[2] = {4.0, 2.5};
    struct prefetch_need n = {.slots = 2,
                              .running = 2,
                              .left_s = left,
                              .queued = 0,
                              .next_s = 5,
                              .cover_s = 0.8,
                              .max_held = 64};
    assert_int_equal(prefetch_want(&n), 0); /* neither ends within the window */
    left[1] = 0.5;
    assert_int_equal(prefetch_want(&n), 1); /* its successor, shortly before it ends */
    n.queued = 1;
    assert_int_equal(prefetch_want(&n), 0);
    left[1] = -1; /* unknown: nothing ahead of time */
    n.queued = 0;
    assert_int_equal(prefetch_want(&n), 0);
}

static void test_tiny_estimates_bounded(void **state)
{
    (void)state;
    struct prefetch_need n = {
        .slots = 3, .running = 0, .queued = 0, .next_s = 1e-9, .cover_s = 100, .max_held = 40};
    assert_int_equal(prefetch_want(&n), 40);
    n.slots = 0;
    assert_int_equal(prefetch_want(&n), 0);
}

static void test_left_and_cover(void **state)
{
    (void)state;
    assert_true(prefetch_left_s(0, 3) < 0);
    assert_true(prefetch_left_s(5, 1) == 4);
    assert_true(prefetch_left_s(5, 6) == 0);   /* overrunning a little: due */
    assert_true(prefetch_left_s(5, 10) == 10); /* far off its estimate: as long again */
    assert_true(prefetch_cover_s(400, 10, 0) == 0);
    assert_true(prefetch_cover_s(400, 10, 3) > 0.839 && prefetch_cover_s(400, 10, 3) < 0.841);
}

static void test_observe_per_job(void **state)
{
    (void)state;
    struct prefetch p = {0};
    assert_true(prefetch_job_s(&p, 7) == 0);
    prefetch_observe(&p, 7, 5.0);
    prefetch_observe(&p, 8, 0.1);
    prefetch_observe(&p, 8, 0);  /* ignored */
    prefetch_observe(&p, 8, -1); /* ignored */
    assert_true(prefetch_job_s(&p, 7) == 5.0);
    assert_true(prefetch_job_s(&p, 8) == 0.1);
    prefetch_observe(&p, 8, 0.2);
    assert_true(prefetch_job_s(&p, 8) > 0.12 && prefetch_job_s(&p, 8) < 0.14);
    /* more jobs than entries: the least recently used goes, the recent ones stay */
    for (uint64_t j = 100; j < 100 + PREFETCH_JOBS; j++) {
        prefetch_observe(&p, 8, 0.1);
        prefetch_observe(&p, j, 1.0);
    }
    assert_true(prefetch_job_s(&p, 7) == 0);
    assert_true(prefetch_job_s(&p, 8) > 0);
    assert_true(prefetch_job_s(&p, 100 + PREFETCH_JOBS - 1) == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_knowledge_free_slots),
        cmocka_unit_test(test_short_tasks_cover_round_trips),
        cmocka_unit_test(test_long_tasks_not_hoarded),
        cmocka_unit_test(test_tiny_estimates_bounded),
        cmocka_unit_test(test_left_and_cover),
        cmocka_unit_test(test_observe_per_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_engine.c - the client scheduling engine's formulas (roles/client/engine*.c):
 * backoff growth and caps, REC and exp_avg_cpu decay, priorities, the round-robin
 * simulation (the seed's shortfall of 13, saturated time, idle instances, deadline-miss
 * flags), the EDF busy time, and task scheduling (EDF order, priority with a charged
 * copy of REC, time slices, preemption only after a checkpoint).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "roles/client/engine/engine.h"

static struct engine *mk(int ncpus, void (*tweak)(struct engine_config *))
{
    struct engine_config c;
    engine_config_defaults(&c);
    if (tweak)
        tweak(&c);
    struct engine *e = engine_new(&c, ncpus, 1, 42);
    assert_non_null(e);
    return e;
}

static int add_project(struct engine *e, const char *name, double share)
{
    char url[64];
    snprintf(url, sizeof url, "%s/sched0", name);
    const char *eps[] = {url};
    int p = engine_project_add(e, name, share, eps, 1, "master");
    assert_true(p >= 0);
    return p;
}

static long add_task(struct engine *e, double now, int p, double est, double deadline)
{
    static uint64_t id = 1;
    struct engine_new_task t = {id, id, 0, 1, est, deadline};
    id++;
    long i = engine_task_add(e, now, p, &t);
    assert_true(i >= 0);
    return i;
}

static void check_near(double got, double want, double tol)
{
    if (fabs(got - want) > tol)
        fail_msg("got %.9g, want %.9g (+- %g)", got, want, tol);
}

/* ---- backoff ---- */

static void test_rpc_backoff_growth_and_cap(void **state)
{
    (void)state;
    struct engine *e = mk(1, NULL);
    for (int n = 1; n <= 12; n++) {
        double bound = fmin(60 * ldexp(1, n), 4 * 3600), lo = INFINITY, hi = 0;
        for (int k = 0; k < 2000; k++) {
            double x = engine_rpc_backoff(e, n);
            lo = fmin(lo, x);
            hi = fmax(hi, x);
        }
        /* BOINC: 60 s x 2^n capped at 4 h, times U[0.5, 1] */
        assert_true(lo >= 0.5 * bound - 1e-9);
        assert_true(hi <= bound + 1e-9);
        assert_true(lo < 0.52 * bound && hi > 0.98 * bound);
    }
    assert_true(engine_rpc_backoff(e, 1000) <= 4 * 3600); /* no overflow */
    engine_destroy(&e);
    assert_null(e);
    engine_destroy(&e); /* NULL-safe */
}

static void test_rsc_backoff_doubles_and_resets(void **state)
{
    (void)state;
    struct engine *e = mk(2, NULL);
    int p = add_project(e, "a", 100);
    double want[] = {600, 1200, 2400, 4800, 9600, 19200, 38400, 76800, 86400, 86400};
    for (int k = 0; k < 10; k++) {
        engine_rsc_backoff(e, 1000, p, 0);
        check_near(e->projects[p].rsc[0].backoff_interval, want[k], 1e-9);
        check_near(e->projects[p].rsc[0].backoff_until, 1000 + want[k], 1e-9);
    }
    /* a task of that type arriving clears the backoff */
    add_task(e, 2000, p, 100, 5000);
    assert_true(e->projects[p].rsc[0].backoff_interval == 0);
    assert_true(e->projects[p].rsc[0].backoff_until == 0);
    engine_destroy(&e);
}

/* ---- REC, exp_avg_cpu, priorities ---- */

static void test_rec_half_life(void **state)
{
    (void)state;
    struct engine *e = mk(1, NULL);
    int p = add_project(e, "a", 100);
    e->projects[p].rec = 1000;
    e->projects[p].exp_avg_cpu = 1000;
    engine_tick(e, 0, 1);
    engine_tick(e, 10 * 86400, 1); /* one REC half-life, nothing running */
    check_near(e->projects[p].rec, 500, 1e-6);
    check_near(e->projects[p].exp_avg_cpu, 1000 * exp(-10.0 / 7), 1e-6); /* e per week */
    engine_tick(e, 20 * 86400, 1);
    check_near(e->projects[p].rec, 250, 1e-6);
    engine_destroy(&e);
}

static void test_rec_accrues_running_time(void **state)
{
    (void)state;
    struct engine *e = mk(1, NULL);
    int p = add_project(e, "a", 100);
    add_task(e, 0, p, 1e9, 1e12);
    engine_tick(e, 0, 1);
    const struct engine_sched *s = engine_schedule(e, 0);
    assert_non_null(s);
    assert_int_equal(s->nstart, 1);
    double h = 10 * 86400, dt = 86400;
    engine_tick(e, dt, 1);
    /* the integral of a decaying credit at 1 FLOPS: (h/ln2)(1 - 2^(-dt/h)) */
    check_near(e->projects[p].rec, h / M_LN2 * (1 - exp2(-dt / h)), 1e-6);
    check_near(e->tasks[0].elapsed, dt, 1e-9);
    engine_tick(e, 2 * dt, 0); /* host turns off: the off interval does not count */
    engine_tick(e, 3 * dt, 0);
    check_near(e->tasks[0].elapsed, 2 * dt, 1e-9);
    assert_true(e->on_frac < 1);
    engine_destroy(&e);
}

static void debt_policy(struct engine_config *c)
{
    c->policy = ENGINE_POLICY_DEBT2004;
}

static void test_priorities(void **state)
{
    (void)state;
    struct engine *e = mk(1, NULL);
    int a = add_project(e, "a", 100), b = add_project(e, "b", 300);
    e->projects[a].rec = 30;
    e->projects[b].rec = 70;
    double pr[2];
    engine_priorities(e, NULL, pr);
    /* SP = -REC_norm / share_norm */
    check_near(pr[a], -0.3 / 0.25, 1e-12);
    check_near(pr[b], -0.7 / 0.75, 1e-12);
    assert_true(pr[b] > pr[a]);
    double extra[2] = {0, 100}; /* queued work counts against b */
    engine_priorities(e, extra, pr);
    check_near(pr[b], -(170.0 / 200) / 0.75, 1e-12);
    engine_destroy(&e);

    e = mk(1, debt_policy);
    a = add_project(e, "a", 100);
    b = add_project(e, "b", 100);
    e->projects[a].exp_avg_cpu = 10;
    e->projects[b].exp_avg_cpu = 30;
    engine_priorities(e, NULL, pr);
    /* resource_debt = share / exp_avg_cpu (normalised) */
    check_near(pr[a], 0.5 / 0.25, 1e-12);
    check_near(pr[b], 0.5 / 0.75, 1e-12);
    engine_destroy(&e);
}

/* ---- round-robin simulation ---- */

static void horizon10(struct engine_config *c)
{
    c->min_buf = 0;
    c->additional_buf = 10;
    c->fetch = ENGINE_FETCH_BOINC;
}

/* The seed's picture: 4 instances, queued work 10, 7, 6 and 4 s, buffer 10 s: the idle
 * area before the horizon, the shortfall, is 0 + 3 + 4 + 6 = 13. */
static void test_rr_shortfall_13(void **state)
{
    (void)state;
    struct engine *e = mk(4, horizon10);
    int p = add_project(e, "a", 100);
    double est[] = {10, 7, 6, 4};
    for (int k = 0; k < 4; k++)
        add_task(e, 0, p, est[k], 1000);
    assert_int_equal(engine_rr_simulate(e, 0), 0);
    check_near(e->rr[0].shortfall, 13, 1e-9);
    check_near(e->rr[0].saturated, 4, 1e-9);
    check_near(e->rr[0].idle_now, 0, 1e-9);
    check_near(e->rr[0].queued, 27, 1e-9);
    assert_int_equal(e->rr[0].nmiss, 0);
    engine_destroy(&e);
}

static void test_rr_idle_and_shares(void **state)
{
    (void)state;
    struct engine *e = mk(3, horizon10);
    int a = add_project(e, "a", 100), b = add_project(e, "b", 200);
    /* 2 instances' worth of work only: one instance idle now */
    add_task(e, 0, a, 6, 1000);
    add_task(e, 0, b, 6, 1000);
    assert_int_equal(engine_rr_simulate(e, 0), 0);
    check_near(e->rr[0].idle_now, 1, 1e-9);
    check_near(e->rr[0].saturated, 0, 1e-9);
    check_near(e->rr[0].shortfall, 10 + 4 + 4, 1e-9);
    engine_destroy(&e);

    /* 1 instance shared 1:2 by two projects with plenty of work: b's first task runs at
       2/3 speed and a's at 1/3, so b's 4 s task ends at 6 s */
    e = mk(1, horizon10);
    a = add_project(e, "a", 100);
    b = add_project(e, "b", 200);
    add_task(e, 0, a, 100, 1000);
    long kb = add_task(e, 0, b, 4, 1000);
    add_task(e, 0, b, 100, 1000);
    assert_int_equal(engine_rr_simulate(e, 0), 0);
    check_near(e->tasks[kb].rr_finish, 6, 1e-9);
    check_near(e->rr[0].shortfall, 0, 1e-9);
    engine_destroy(&e);
}

static void test_rr_deadline_miss_flags(void **state)
{
    (void)state;
    struct engine *e = mk(1, horizon10);
    int p = add_project(e, "a", 100);
    long first = add_task(e, 0, p, 10, 15);  /* FIFO: done at 10, in time */
    long second = add_task(e, 0, p, 10, 12); /* done at 20, after 12 */
    assert_int_equal(engine_rr_simulate(e, 0), 0);
    assert_false(e->tasks[first].deadline_miss);
    assert_true(e->tasks[second].deadline_miss);
    assert_int_equal(e->rr[0].nmiss, 1);
    engine_destroy(&e);
}

/* EDF simulation of the deadline-miss tasks: on 2 instances, tasks of 30, 20 and 10 s
 * (in deadline order) go to the instance that frees up first: 30 on one, 20 then 10 on
 * the other, so both stay busy until 30. */
static void test_edf_busy_time(void **state)
{
    (void)state;
    struct engine *e = mk(2, horizon10);
    int p = add_project(e, "a", 100);
    add_task(e, 0, p, 30, 1);
    add_task(e, 0, p, 20, 2);
    add_task(e, 0, p, 10, 3);
    assert_int_equal(engine_rr_simulate(e, 0), 0);
    assert_int_equal(e->rr[0].nmiss, 3);
    check_near(e->rr[0].busy, 30, 1e-9);
    engine_destroy(&e);
}

/* ---- scheduling ---- */

static int running(const struct engine *e, long i)
{
    return e->tasks[i].state == ENGINE_TASK_RUNNING;
}

static void test_sched_edf_order(void **state)
{
    (void)state;
    struct engine *e = mk(1, horizon10);
    int p = add_project(e, "a", 100);
    long t30 = add_task(e, 0, p, 50, 30);
    long t20 = add_task(e, 0, p, 50, 20);
    long t25 = add_task(e, 0, p, 50, 25);
    engine_tick(e, 0, 1);
    const struct engine_sched *s = engine_schedule(e, 0);
    assert_non_null(s);
    assert_int_equal(s->nstart, 1);
    assert_true(running(e, t20)); /* all miss their deadlines: earliest first */
    assert_false(running(e, t25) || running(e, t30));
    engine_destroy(&e);
}

static void slice100(struct engine_config *c)
{
    c->time_slice = 100;
    c->fetch = ENGINE_FETCH_BOINC;
}

static void test_sched_priority_with_charged_rec(void **state)
{
    (void)state;
    /* 2 CPUs, equal shares, equal REC: charging a copy of REC after the first pick makes
       the second pick go to the other project */
    struct engine *e = mk(2, slice100);
    int a = add_project(e, "a", 100), b = add_project(e, "b", 100);
    long a1 = add_task(e, 0, a, 1000, 1e9), a2 = add_task(e, 0, a, 1000, 1e9);
    long b1 = add_task(e, 0, b, 1000, 1e9), b2 = add_task(e, 0, b, 1000, 1e9);
    engine_tick(e, 0, 1);
    assert_non_null(engine_schedule(e, 0));
    assert_true(running(e, a1) + running(e, a2) == 1);
    assert_true(running(e, b1) + running(e, b2) == 1);
    engine_destroy(&e);

    /* a project with much more REC than its share waits */
    e = mk(1, slice100);
    a = add_project(e, "a", 100);
    b = add_project(e, "b", 100);
    e->projects[a].rec = 1000;
    a1 = add_task(e, 0, a, 1000, 1e9);
    b1 = add_task(e, 0, b, 1000, 1e9);
    engine_tick(e, 0, 1);
    assert_non_null(engine_schedule(e, 0));
    assert_true(running(e, b1));
    assert_false(running(e, a1));
    engine_destroy(&e);
}

/* Time slices rotate the projects; a task past its slice is preempted only once it has
 * checkpointed, and nothing is lost. */
static void test_sched_slice_and_checkpoint(void **state)
{
    (void)state;
    struct engine *e = mk(1, slice100);
    int a = add_project(e, "a", 100), b = add_project(e, "b", 100);
    long ta = add_task(e, 0, a, 1000, 1e9);
    long tb = add_task(e, 0, b, 1000, 1e9);
    engine_tick(e, 0, 1);
    assert_non_null(engine_schedule(e, 0));
    long first = running(e, ta) ? ta : tb, other = first == ta ? tb : ta;
    assert_true(running(e, first));
    check_near(e->next_resched, 100, 1e-9);

    /* inside the slice nothing changes */
    engine_tick(e, 50, 1);
    const struct engine_sched *s = engine_schedule(e, 50);
    assert_int_equal(s->changed, 0);

    /* slice over, but the task has not checkpointed: it runs on, wanted out */
    engine_tick(e, 100, 1);
    s = engine_schedule(e, 100);
    assert_non_null(s);
    assert_true(running(e, first));
    assert_true(e->tasks[first].preempt_wanted);
    assert_false(running(e, other));

    /* it checkpoints at 130: it gives way at once, losing nothing */
    engine_tick(e, 130, 1);
    engine_task_checkpoint(e, (size_t)first, 130);
    s = engine_schedule(e, 130);
    assert_non_null(s);
    assert_int_equal(s->npreempt, 1);
    assert_int_equal(s->nstart, 1);
    assert_false(running(e, first));
    assert_true(running(e, other));
    check_near(e->tasks[first].elapsed, 130, 1e-9);
    check_near(e->tasks[first].lost, 0, 1e-9);
    engine_destroy(&e);
}

/* Instances reserved for work the engine does not schedule (a cluster's parallel ranks):
 * a running task over the new count is preempted at its checkpoint, no work is asked
 * for a type with none left, tasks still arrive, and the instances come back. */
static void test_reserved_instances(void **state)
{
    (void)state;
    struct engine *e = mk(2, slice100);
    int a = add_project(e, "a", 100);
    long t1 = add_task(e, 0, a, 1000, 1e9), t2 = add_task(e, 0, a, 1000, 1e9);
    engine_tick(e, 0, 1);
    assert_non_null(engine_schedule(e, 0));
    assert_true(running(e, t1) && running(e, t2));

    engine_ptype_reserve(e, 0, 1);
    assert_int_equal(e->ptypes[0].ninstances, 1);
    assert_int_equal(e->ptypes[0].reserved, 1);
    engine_tick(e, 10, 1);
    engine_task_checkpoint(e, (size_t)t1, 10);
    engine_task_checkpoint(e, (size_t)t2, 10);
    const struct engine_sched *s = engine_schedule(e, 10);
    assert_non_null(s);
    assert_int_equal(s->npreempt, 1);
    assert_int_equal(e->nrunning, 1);

    /* all taken: nothing runs, no work is asked for; a task still arrives */
    engine_ptype_reserve(e, 0, 5); /* clamped to the host's 2 */
    assert_int_equal(e->ptypes[0].ninstances, 0);
    assert_int_equal(e->ptypes[0].reserved, 2);
    engine_tick(e, 20, 1);
    for (size_t k = 0; k < e->nrunning; k++)
        engine_task_checkpoint(e, e->running[k], 20);
    assert_non_null(engine_schedule(e, 20));
    assert_int_equal(e->nrunning, 0);
    long t3 = add_task(e, 20, a, 10, 1e9);
    assert_true(t3 >= 0);
    assert_int_equal(engine_rr_simulate(e, 20), 0);
    check_near(e->rr[0].shortfall, 0, 1e-9);

    /* given back: the tasks run again */
    engine_ptype_reserve(e, 0, 0);
    assert_int_equal(e->ptypes[0].ninstances, 2);
    engine_tick(e, 30, 1);
    assert_non_null(engine_schedule(e, 30));
    assert_int_equal(e->nrunning, 2);
    engine_destroy(&e);
}

static void test_host_off_restarts_from_checkpoint(void **state)
{
    (void)state;
    struct engine *e = mk(1, slice100);
    int a = add_project(e, "a", 100);
    long t = add_task(e, 0, a, 1000, 1e9);
    engine_tick(e, 0, 1);
    assert_non_null(engine_schedule(e, 0));
    engine_tick(e, 70, 1);
    engine_task_checkpoint(e, (size_t)t, 60);
    engine_host_avail(e, 70, 0);
    assert_false(running(e, t));
    assert_int_equal(e->nrunning, 0);
    check_near(e->tasks[t].elapsed, 60, 1e-9);
    check_near(e->tasks[t].lost, 10, 1e-9);
    engine_host_avail(e, 200, 1);
    assert_non_null(engine_schedule(e, 200));
    assert_true(running(e, t));
    engine_destroy(&e);
}

static void test_config_and_names(void **state)
{
    (void)state;
    struct engine_config c;
    engine_config_defaults(&c);
    assert_null(engine_config_check(&c));
    check_near(c.min_buf, 8640, 0);
    check_near(c.additional_buf, 43200, 0);
    check_near(c.time_slice, 3600, 0);
    check_near(c.poll_period, 60, 0);
    c.burst_slack = 1; /* the batch rule's two numbers are checked like the others */
    assert_string_equal(engine_config_check(&c), "burst_slack must be in [0, 1)");
    c.burst_slack = 0.78;
    c.burst_min_jobs = 0;
    assert_string_equal(engine_config_check(&c), "burst_min_jobs must be in [1, 100]");
    c.burst_min_jobs = 3;
    c.time_slice = 0;
    assert_non_null(engine_config_check(&c));
    assert_null(engine_new(&c, 1, 1, 1));
    assert_int_equal(engine_policy_parse("rec"), ENGINE_POLICY_REC);
    assert_int_equal(engine_policy_parse("debt2004"), ENGINE_POLICY_DEBT2004);
    assert_int_equal(engine_policy_parse("fifo"), -1);
    assert_int_equal(engine_fetch_parse("boinc"), ENGINE_FETCH_BOINC);
    assert_int_equal(engine_fetch_parse("x"), -1);

    struct engine *e = mk(2, NULL);
    const char *none[] = {NULL};
    assert_int_equal(engine_project_add(e, "a", 0, none, 0, "m"), -1); /* share 0 */
    assert_int_equal(engine_project_add(e, "a", 1, none, 0, ""), -1);  /* no way in */
    int p = engine_project_add(e, "a", 1, none, 0, "m");
    assert_true(p >= 0);
    assert_true(e->projects[p].master_pending);
    struct engine_new_task bad = {1, 1, 0, 3, 10, 100}; /* 3 CPUs on a 2-CPU host */
    assert_int_equal(engine_task_add(e, 0, p, &bad), -1);
    assert_int_equal(engine_ptype_add(e, "cpu", 1, 1), -1); /* duplicate */
    assert_int_equal(engine_ptype_add(e, "gpu", 2, 10), 1);
    engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_backoff_growth_and_cap),
        cmocka_unit_test(test_rsc_backoff_doubles_and_resets),
        cmocka_unit_test(test_rec_half_life),
        cmocka_unit_test(test_rec_accrues_running_time),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_rr_shortfall_13),
        cmocka_unit_test(test_rr_idle_and_shares),
        cmocka_unit_test(test_rr_deadline_miss_flags),
        cmocka_unit_test(test_edf_busy_time),
        cmocka_unit_test(test_sched_edf_order),
        cmocka_unit_test(test_sched_priority_with_charged_rec),
        cmocka_unit_test(test_sched_slice_and_checkpoint),
        cmocka_unit_test(test_host_off_restarts_from_checkpoint),
        cmocka_unit_test(test_reserved_instances),
        cmocka_unit_test(test_config_and_names),
    };
    return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}

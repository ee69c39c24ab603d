/*
 * test_engine_fetch.c - the engine's RPC policy and work fetch (roles/client/
 * engine_fetch.c): who is asked for how much, per-(project, type) backoff set on an
 * empty reply and cleared by a task, one try per scheduler endpoint per session, the
 * exponential RPC backoff, the master list re-read every 10 failures (new endpoints
 * reset failures and backoff), reports with piggy-backed requests, the server's
 * request delay, the debt2004 water marks and the deadline mode's caps and probes; the
 * prefetch rule of a host of one cluster (engine_prefetch_room) over jittered round trips.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/netopts.h"
#include "roles/client/engine/engine.h"

static uint64_t next_id = 1;

static void boinc_small(struct engine_config *c)
{
    c->fetch = ENGINE_FETCH_BOINC;
    c->min_buf = 100;
    c->additional_buf = 200;
    c->time_slice = 60;
}

static struct engine *mk(int ncpus, void (*tweak)(struct engine_config *))
{
    struct engine_config c;
    engine_config_defaults(&c);
    if (tweak)
        tweak(&c);
    struct engine *e = engine_new(&c, ncpus, 1, 7);
    assert_non_null(e);
    engine_tick(e, 0, 1);
    return e;
}

static int project(struct engine *e, const char *name, double share, int nendpoints)
{
    char urls[3][64];
    const char *eps[3];
    for (int k = 0; k < nendpoints; k++) {
        snprintf(urls[k], sizeof urls[k], "%s/sched%d", name, k);
        eps[k] = urls[k];
    }
    char master[64];
    snprintf(master, sizeof master, "%s/master", name);
    int p = engine_project_add(e, name, share, eps, nendpoints, master);
    assert_true(p >= 0);
    return p;
}

/* A successful reply with n tasks of est seconds due deadline seconds after now. */
static int reply_ok(struct engine *e, double now, const struct engine_action *a, int n, double est,
                    double deadline)
{
    struct engine_new_task t[16];
    assert_true(n <= 16);
    for (int k = 0; k < n; k++) {
        t[k] = (struct engine_new_task){next_id, next_id, 0, 1, est, now + deadline};
        next_id++;
    }
    struct engine_reply r = {1, t, (size_t)n, 0};
    return engine_rpc_done(e, now, a, &r);
}

static void reply_fail(struct engine *e, double now, const struct engine_action *a)
{
    struct engine_reply r = {0};
    assert_int_equal(engine_rpc_done(e, now, a, &r), 0);
}

static void test_fetch_asks_top_project_for_shortfall(void **state)
{
    (void)state;
    struct engine *e = mk(2, boinc_small);
    int a = project(e, "a", 100, 1), b = project(e, "b", 300, 1);
    e->projects[a].rec = 100; /* a has had its share: b is the top project */
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.reason, ENGINE_WHY_FETCH);
    assert_int_equal(act.project, b);
    assert_string_equal(act.url, "b/sched0");
    /* empty queue: all of max_buf = 300 s on 2 instances is missing, both are idle */
    assert_true(fabs(act.req[0].secs - 600) < 1e-9);
    assert_true(fabs(act.req[0].instances - 2) < 1e-9);
    assert_int_equal(reply_ok(e, 0, &act, 2, 200, 10000), 0);
    assert_int_equal(e->ntasks, 2);
    /* work fetch is considered once per poll period */
    engine_poll(e, 1, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_destroy(&e);
}

static void test_rsc_backoff_on_empty_reply(void **state)
{
    (void)state;
    struct engine *e = mk(1, boinc_small);
    int a = project(e, "a", 100, 1), b = project(e, "b", 100, 1);
    e->projects[a].rec = 10;
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.project, b);
    assert_int_equal(reply_ok(e, 0, &act, 0, 0, 0), 0); /* b has no CPU work */
    assert_true(e->projects[b].rsc[0].backoff_interval == 600);
    assert_true(e->projects[b].rsc[0].backoff_until == 600);
    assert_int_equal(e->projects[b].nrpc_failures, 0); /* not an RPC failure */
    /* nothing came: the next project is tried right away */
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.project, a);
    assert_int_equal(reply_ok(e, 0, &act, 1, 50, 10000), 0);
    assert_true(e->projects[a].rsc[0].backoff_interval == 0);
    engine_destroy(&e);
}

static void test_session_tries_each_endpoint_once(void **state)
{
    (void)state;
    struct engine *e = mk(1, boinc_small);
    int p = project(e, "a", 100, 2);
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.endpoint, 0);
    reply_fail(e, 0, &act);
    assert_int_equal(e->projects[p].nrpc_failures, 0); /* the session goes on */
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.reason, ENGINE_WHY_RETRY);
    assert_int_equal(act.endpoint, 1);
    assert_string_equal(act.url, "a/sched1");
    assert_true(act.req[0].secs > 0); /* still a work request */
    reply_fail(e, 0, &act);
    /* every endpoint failed once: back off 60 * 2^1 * U[0.5, 1] */
    assert_int_equal(e->projects[p].nrpc_failures, 1);
    double t = e->projects[p].min_rpc_time;
    assert_true(t >= 60 - 1e-9 && t <= 120 + 1e-9);
    engine_poll(e, 1, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_poll(e, t, &act); /* the next session starts with the first endpoint */
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.endpoint, 0);
    engine_destroy(&e);
}

static void test_master_fetch_every_10_failures(void **state)
{
    (void)state;
    struct engine *e = mk(1, boinc_small);
    int p = project(e, "a", 100, 1);
    struct engine_action act;
    double now = 0, last_gap = 0;
    for (int n = 1; n <= 10; n++) {
        engine_poll(e, now, &act);
        assert_int_equal(act.kind, ENGINE_ACT_RPC);
        reply_fail(e, now, &act);
        assert_int_equal(e->projects[p].nrpc_failures, n);
        double gap = e->projects[p].min_rpc_time - now;
        double bound = fmin(60 * ldexp(1, n), 14400);
        assert_true(gap >= 0.5 * bound - 1e-9 && gap <= bound + 1e-9);
        if (n < 8) /* below the cap the intervals never shrink */
            assert_true(gap >= last_gap - 1e-9);
        last_gap = gap;
        now = e->projects[p].min_rpc_time;
    }
    /* the 10th failure schedules a master list re-read, right away */
    assert_true(e->projects[p].master_pending);
    engine_poll(e, now - last_gap, &act);
    assert_int_equal(act.kind, ENGINE_ACT_MASTER);
    assert_string_equal(act.url, "a/master");
    /* same list: nothing reset */
    const char *same[] = {"a/sched0"};
    engine_master_done(e, now - last_gap, p, 1, same, 1);
    assert_false(e->projects[p].master_pending);
    assert_int_equal(e->projects[p].nrpc_failures, 10);
    /* a new endpoint resets the failures and the backoff */
    e->projects[p].master_pending = 1;
    e->projects[p].master_time = 0;
    engine_poll(e, now - last_gap, &act);
    assert_int_equal(act.kind, ENGINE_ACT_MASTER);
    const char *moved[] = {"a/v2/sched0", "a/v2/sched1"};
    engine_master_done(e, now - last_gap, p, 1, moved, 2);
    assert_int_equal(e->projects[p].nrpc_failures, 0);
    assert_true(e->projects[p].min_rpc_time == 0);
    assert_int_equal(e->projects[p].nendpoints, 2);
    engine_poll(e, now - last_gap + 1, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_string_equal(act.url, "a/v2/sched0");
    engine_destroy(&e);
}

static void test_report_near_deadline_with_piggyback(void **state)
{
    (void)state;
    struct engine *e = mk(1, boinc_small);
    int p = project(e, "a", 100, 1);
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(reply_ok(e, 0, &act, 1, 50, 5000), 0);
    assert_non_null(engine_schedule(e, 0));
    engine_tick(e, 50, 1);
    engine_task_done(e, 50, 0);
    engine_poll(e, 50, &act);
    /* deadline 5000 is within the 1-day cushion: report now, asking for work too since
       the CPU is idle and a is the top project */
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.reason, ENGINE_WHY_REPORT);
    assert_int_equal(act.project, p);
    assert_int_equal(act.nreport, 1);
    assert_true(act.fetch && act.req[0].secs > 0);
    struct engine_new_task t = {next_id++, 0, 0, 1, 40, 9000};
    struct engine_reply r = {1, &t, 1, 300};
    assert_int_equal(engine_rpc_done(e, 50, &act, &r), 0);
    assert_int_equal(e->ntasks, 1); /* the result went, the new task came */
    assert_true(e->tasks[0].est_duration == 40);
    assert_true(e->projects[p].min_rpc_time == 350); /* the server's request delay */
    assert_int_equal(e->nfinished, 0);
    engine_destroy(&e);
}

static void debt_small(struct engine_config *c)
{
    boinc_small(c);
    c->policy = ENGINE_POLICY_DEBT2004;
}

/* 2004: a get-work session opens below the low water mark (min_buf 100 s per instance)
 * and goes on until the high water mark (max_buf 300 s) is reached. */
static void test_debt2004_water_marks(void **state)
{
    (void)state;
    struct engine *e = mk(1, debt_small);
    project(e, "a", 100, 1);
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_true(fabs(act.req[0].secs - 300) < 1e-9);
    assert_int_equal(reply_ok(e, 0, &act, 3, 50, 1e6), 0); /* 150 s queued */
    engine_poll(e, 60, &act); /* above the low mark, but the session is open */
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_true(fabs(act.req[0].secs - 150) < 1e-9);
    assert_int_equal(reply_ok(e, 60, &act, 4, 50, 1e6), 0); /* 350 s queued */
    engine_poll(e, 120, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE); /* closed at the high mark */
    for (size_t i = 0; i < 3; i++)               /* 200 s left: above the low mark */
        e->tasks[i].state = ENGINE_TASK_ABORTED;
    e->nfinished = 0; /* keep them out of reporting for this check */
    e->rr_dirty = 1;
    engine_poll(e, 180, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_destroy(&e);
}

static void deadline_small(struct engine_config *c)
{
    c->min_buf = 100;
    c->additional_buf = 10000;
}

static void test_deadline_mode_caps_request(void **state)
{
    (void)state;
    struct engine *e = mk(1, deadline_small);
    int p = project(e, "a", 100, 1);
    /* a's tasks: 100 s, due 1000 s after issue; plan to finish within 150 s */
    e->projects[p].rsc[0].latency = 1000;
    e->projects[p].rsc[0].job_work = 100;
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    /* room 150 s; the server overshoots by up to one task: ask for 150 - 100 */
    assert_true(fabs(act.req[0].secs - 50) < 1e-9);
    assert_true(fabs(act.req[0].instances - 1) < 1e-9);
    assert_int_equal(reply_ok(e, 0, &act, 1, 100, 1000), 0);
    engine_poll(e, 60, &act); /* no room for another: not fetchable */
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_destroy(&e);
}

/* Deadline mode: a room of exactly n jobs is asked for n of them (the server sends
 * while the request is positive); with less than fetch_min_jobs of room the project is
 * asked for nothing until an instance is idle. */
static void deadline_poll5(struct engine_config *c)
{
    deadline_small(c);
    c->poll_period = 5; /* so that the polls below are not skipped for the period */
}

static void test_deadline_whole_jobs_and_min_batch(void **state)
{
    (void)state;
    struct engine *e = mk(2, deadline_poll5);
    int p = project(e, "a", 100, 1);
    /* 100 s tasks due 1000 s after issue: plan to finish within 150 s; 2 instances */
    e->projects[p].rsc[0].latency = 1000;
    e->projects[p].rsc[0].job_work = 100;
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    /* room 300 s = 3 jobs: ask for 2.5 jobs' worth (250 s), which brings 3; asking for
       room - job (200 s) brought only 2 */
    assert_true(fabs(act.req[0].secs - 250) < 1e-9);
    assert_true(fabs(act.req[0].instances - 2) < 1e-9);
    assert_int_equal(reply_ok(e, 0, &act, 2, 100, 1000), 0);
    assert_non_null(engine_schedule(e, 0));
    /* at 10 s: 180 s queued, room 2 x 150 - 180 = 120 s, one job: not worth an RPC
       while nothing would idle */
    engine_tick(e, 10, 1);
    engine_poll(e, 10, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    /* at 55 s: 90 s queued, room 210 s, two jobs: asked for 1.5 jobs' worth */
    engine_tick(e, 55, 1);
    engine_poll(e, 55, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.reason, ENGINE_WHY_FETCH);
    assert_true(fabs(act.req[0].secs - 150) < 1e-6);
    engine_destroy(&e);

    /* one instance: the plan window (150 s) never holds two 100 s jobs; one is fetched
       once the instance is idle, not before (not even when it idles within a poll) */
    e = mk(1, deadline_poll5);
    p = project(e, "a", 100, 1);
    e->projects[p].rsc[0].latency = 1000;
    e->projects[p].rsc[0].job_work = 100;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(reply_ok(e, 0, &act, 1, 100, 1000), 0);
    assert_non_null(engine_schedule(e, 0));
    engine_tick(e, 60, 1); /* room 150 - 40 = 110 s: one job, busy for 40 s more */
    engine_poll(e, 60, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_tick(e, 96, 1); /* idle in 4 s < poll period: still busy */
    engine_poll(e, 96, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_tick(e, 100, 1);
    engine_task_done(e, 100, 0); /* idle now: one job (room 150 s), asked as half a job */
    engine_tick(e, 101, 1);      /* (the last fetch check was less than a poll ago) */
    engine_poll(e, 101, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_true(fabs(act.req[0].secs - 50) < 1e-6);
    engine_destroy(&e);
}

/* Rule 8 (burst): min_buf 500 s is more than the plan window of 1,000 s deadlines
 * (1000 - 0.84 x 1000 = 160 s), so with two projects each works in batches. */
static void burst_cfg(struct engine_config *c)
{
    deadline_poll5(c);
    c->min_buf = 500;
}

static void test_burst_batches(void **state)
{
    (void)state;
    struct engine *e = mk(2, burst_cfg);
    int a = project(e, "a", 100, 1);
    e->projects[a].rsc[0].latency = 1000;
    e->projects[a].rsc[0].job_work = 100;
    assert_int_equal(engine_burst(e, a, 0), 0); /* the only project: nothing to alternate */
    int b = project(e, "b", 100, 1);
    e->projects[b].rsc[0].latency = 1000;
    e->projects[b].rsc[0].job_work = 100;
    assert_int_equal(engine_burst(e, a, 0), 1);
    e->projects[a].rsc[0].latency = 10000; /* window 9,160 s >= min_buf: a continuous queue */
    assert_int_equal(engine_burst(e, a, 0), 0);
    e->projects[a].rsc[0].latency = 1000;

    /* burst_slack 0.78: window 220 s, room 440 s = 4 jobs, asked as 3.5 jobs' worth */
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    int p = act.project, q = p == a ? b : a;
    assert_true(fabs(act.req[0].secs - 350) < 1e-6);
    assert_int_equal(reply_ok(e, 0, &act, 4, 100, 1000), 0);
    assert_non_null(engine_schedule(e, 0));
    /* p's batch runs: p is not asked again, q's room (60 s) holds no job */
    engine_tick(e, 10, 1);
    engine_poll(e, 10, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    /* half the batch done: its results wait for the rest (a report is due at 415 s) */
    engine_tick(e, 100, 1);
    engine_task_done(e, 100, 0);
    engine_task_done(e, 100, 1);
    assert_non_null(engine_schedule(e, 100));
    engine_poll(e, 100, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    /* the batch's last task ends: all four results are reported at once */
    engine_tick(e, 200, 1);
    engine_task_done(e, 200, 2);
    engine_task_done(e, 200, 3);
    engine_poll(e, 200, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.project, p);
    assert_int_equal(act.reason, ENGINE_WHY_REPORT);
    assert_int_equal(act.nreport, 4);
    assert_int_equal(reply_ok(e, 200, &act, 0, 100, 1000), 0);
    /* q (which has not run) is asked next; it brings one job */
    engine_poll(e, 200, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_int_equal(act.project, q);
    assert_int_equal(reply_ok(e, 200, &act, 1, 100, 1000), 0);
    assert_non_null(engine_schedule(e, 200));
    /* p's room holds 3 jobs again, but q ranks above p and its batch still runs: p waits,
       so that the batches alternate in priority order and the shares hold */
    engine_tick(e, 205, 1);
    engine_poll(e, 205, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    engine_destroy(&e);
}

/* fetch_min_jobs = 1: the old rule, one job of room is enough. */
static void min_batch_1(struct engine_config *c)
{
    deadline_poll5(c);
    c->fetch_min_jobs = 1;
}

static void test_deadline_min_batch_1(void **state)
{
    (void)state;
    struct engine *e = mk(2, min_batch_1);
    int p = project(e, "a", 100, 1);
    e->projects[p].rsc[0].latency = 1000;
    e->projects[p].rsc[0].job_work = 100;
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(reply_ok(e, 0, &act, 2, 100, 1000), 0);
    assert_non_null(engine_schedule(e, 0));
    engine_tick(e, 10, 1);
    engine_poll(e, 10, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    assert_true(fabs(act.req[0].secs - 0.5 * 100) < 1e-6);
    engine_destroy(&e);
}

/* Deadline mode: a finished result due soon is retried inside the backoff (probes)
 * without making the backoff itself grow. */
static void test_deadline_probes(void **state)
{
    (void)state;
    struct engine *e = mk(1, deadline_small);
    int p = project(e, "a", 100, 1);
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(reply_ok(e, 0, &act, 1, 50, 3000), 0);
    assert_non_null(engine_schedule(e, 0));
    engine_tick(e, 50, 1);
    engine_task_done(e, 50, 0);
    /* the plan left deadline_slack (0.84) of the 3000 s latency, 2520 s, for reporting;
       the result may wait a quarter of that for another RPC to share, so it is due at
       3000 - 0.75 * 2520 */
    assert_true(fabs(e->cfg.deadline_slack - 0.84) < 1e-12);
    e->projects[p].no_new_work = 1; /* no fetch RPC to carry the report earlier */
    engine_poll(e, 1000, &act);
    assert_int_equal(act.kind, ENGINE_ACT_NONE);
    double now = 3000 - 0.75 * 2520;
    int probes = 0;
    for (int k = 0; k < 8 && now < 3000; k++) {
        engine_poll(e, now, &act);
        assert_int_equal(act.kind, ENGINE_ACT_RPC);
        assert_int_equal(act.reason, k == 0 ? ENGINE_WHY_REPORT : act.reason);
        assert_int_equal(act.nreport, 1);
        int n = e->projects[p].nrpc_failures;
        int probe = now < e->projects[p].backoff_until - 1e-9;
        reply_fail(e, now, &act);
        /* a probe leaves the exponential backoff as it was; a regular try extends it */
        assert_int_equal(e->projects[p].nrpc_failures, probe ? n : n + 1);
        probes += probe;
        double next = e->projects[p].min_rpc_time;
        /* never later than halfway to the deadline; never sooner than 60 s unless the
           regular backoff ends first */
        assert_true(next - now >= fmin(60, e->projects[p].backoff_until - now) - 1e-9);
        assert_true(next <= e->projects[p].backoff_until + 1e-9);
        assert_true(next - now <= fmax(60, (3000 - now) / 2) + 1e-9);
        now = next;
    }
    assert_true(probes >= 2);
    engine_destroy(&e);
}

/* Deadline mode: a result that finishes while its project is deep in a failure backoff
 * (failed contacts from before the result existed) does not wait for the end of that
 * backoff: the project may be tried rpc_backoff_min after its last failed contact. */
static void test_deadline_result_cuts_backoff(void **state)
{
    (void)state;
    struct engine *e = mk(1, deadline_small);
    int p = project(e, "a", 100, 1);
    struct engine_action act;
    engine_poll(e, 0, &act);
    assert_int_equal(reply_ok(e, 0, &act, 1, 3000, 30000), 0);
    assert_non_null(engine_schedule(e, 0));
    /* the server asks for a contact; every try fails: the backoff grows */
    e->projects[p].rpc_requested = 1;
    double now = 1;
    while (e->projects[p].nrpc_failures < 4) {
        engine_tick(e, now, 1);
        engine_poll(e, now, &act);
        assert_int_equal(act.kind, ENGINE_ACT_RPC);
        assert_int_equal(act.nreport, 0);
        reply_fail(e, now, &act);
        assert_true(e->projects[p].min_rpc_time >= now + 60 - 1e-9);
        now = e->projects[p].min_rpc_time;
    }
    assert_true(now < 3000); /* 4 failures: a backoff of 8-16 min from the last */
    /* the task ends (at 3000 s) inside a long backoff */
    e->projects[p].backoff_until = e->projects[p].min_rpc_time = 1e6;
    engine_tick(e, 3000, 1);
    engine_task_done(e, 3000, 0);
    /* the last failure was long ago: the project may be tried right now */
    assert_true(fabs(e->projects[p].min_rpc_time - 3000) < 1e-9);
    engine_destroy(&e);

    /* a failure 10 s before the result: tried 60 s after it */
    e = mk(1, deadline_small);
    p = project(e, "a", 100, 1);
    engine_poll(e, 0, &act);
    assert_int_equal(reply_ok(e, 0, &act, 1, 100, 30000), 0);
    assert_non_null(engine_schedule(e, 0));
    e->projects[p].rpc_requested = 1;
    engine_tick(e, 90, 1);
    engine_poll(e, 90, &act);
    assert_int_equal(act.kind, ENGINE_ACT_RPC);
    reply_fail(e, 90, &act);
    e->projects[p].backoff_until = e->projects[p].min_rpc_time = 1e6; /* a long backoff */
    engine_tick(e, 100, 1);
    engine_task_done(e, 100, 0);
    assert_true(fabs(e->projects[p].min_rpc_time - 150) < 1e-9);
    engine_destroy(&e);
}

/* The rule alone: the cap before a finish rate is known; then what the slots finish
 * over the cover plus one a slot, at most the cap; what finishes during the round trip
 * counted, at most what is held. */
static void test_prefetch_room_rule(void **state)
{
    (void)state;
    assert_true(fabs(engine_prefetch_room(34, 2, 0, 0, 1, 2.5) - 34) < 1e-9);
    assert_true(fabs(engine_prefetch_room(34, 2, 10, 0, 1, 2.5) - 24) < 1e-9);
    assert_true(engine_prefetch_room(34, 2, 40, 0, 1, 2.5) == 0); /* over the cap: nothing */
    /* 30 tasks/s: hold 30 x 2.5 + 2 = 77 (the cap 130 allows it); 30 of the 40 held
       finish meanwhile */
    assert_true(fabs(engine_prefetch_room(130, 2, 40, 30, 1, 2.5) - 67) < 1e-9);
    assert_true(fabs(engine_prefetch_room(34, 2, 40, 30, 1, 2.5) - 24) < 1e-9); /* cap 34 */
    /* ... but no more finish than are held: 5 held, 5 finish */
    assert_true(fabs(engine_prefetch_room(130, 2, 5, 30, 1, 2.5) - 77) < 1e-9);
    /* 5 s tasks on 2 slots (0.4/s): hold 2 + 1, so 1 more while 2 run, none while 4 held */
    assert_true(fabs(engine_prefetch_room(130, 2, 2, 0.4, 1, 2.5) - 1.4) < 1e-9);
    assert_true(engine_prefetch_room(130, 2, 4, 0.4, 1, 2.5) == 0);
}

/*
 * A host of 2 slots running 0.05 s tasks across a link of 500 ms +-25 % each way (the
 * jitter form of bench/wan.sh): one request at a time, the next sent when a reply
 * arrives, the round trip measured into a netopts_rtt as the client does, tasks always
 * available at the server; before the first task ends the host asks for its free slots
 * alone (the engine's own request, its task length unknown). Simulated time, a seeded
 * generator: no clock is read.
 * Returns the slots' idle fraction over the last 50 of 60 s; *peak: the most tasks held
 * at once. old_rule: the room before issue 28 (the cap less what is held).
 */
static double sim_jittered(bool old_rule, double task_s, int prefetch_max, double *peak)
{
    const int slots = 2;
    const double dt = 0.001, cap = slots * (1 + prefetch_max);
    double left[2] = {0, 0}, idle = 0, t = 0, rate = 0;
    double queued = 0, arrive = -1, asked = 0, sent_at = 0;
    uint64_t finished = 0, rng = 12345;
    struct netopts_rtt rtt = {0};
    *peak = 0;
    for (; t < 60; t += dt) {
        if (arrive < 0 || t >= arrive) { /* a reply (or the start): the next request */
            if (arrive >= 0) {
                queued += asked;
                netopts_rtt_sample(&rtt, (int64_t)((t - sent_at) * 1000));
            }
            double held = queued + (left[0] > 0) + (left[1] > 0);
            rate = finished ? slots / task_s : 0; /* the observed run time */
            asked = old_rule ? fmax(cap - held, 0)
                             : floor(engine_prefetch_room(cap, slots, held, rate,
                                                          rtt.samples ? rtt.srtt / 1000 : 0,
                                                          netopts_rtt_cover_s(&rtt)));
            if (finished == 0)
                asked = fmin(asked, slots - held > 0 ? slots - held : 0);
            double rt = 0;
            for (int w = 0; w < 2; w++) { /* two one-way delays of 0.5 s +-25 % */
                rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                rt += 0.5 + 0.25 * 0.5 * (2 * (double)(rng >> 11) / 9007199254740992.0 - 1);
            }
            sent_at = t;
            arrive = t + rt;
        }
        for (int k = 0; k < slots; k++) {
            if (left[k] > 0 && (left[k] -= dt) <= 1e-12) {
                left[k] = 0;
                finished++;
            }
            if (left[k] <= 0 && queued >= 1) {
                queued--;
                left[k] = task_s;
            } else if (left[k] <= 0 && t >= 10)
                idle += dt;
        }
        double held = queued + (left[0] > 0) + (left[1] > 0);
        *peak = fmax(*peak, held);
    }
    return idle / (slots * 50.0);
}

static void test_prefetch_room_jittered(void **state)
{
    (void)state;
    double peak_old, peak_new, peak16, peak_long;
    double old_idle = sim_jittered(true, 0.05, 16, &peak_old);
    double new_idle = sim_jittered(false, 0.05, 64, &peak_new);
    double idle16 = sim_jittered(false, 0.05, 16, &peak16);
    double long_idle = sim_jittered(false, 5, 64, &peak_long);
    fprintf(stderr,
            "prefetch, 0.05 s tasks over 500 ms +-25 %%: idle %.3f (prefetch_max 16: %.3f, "
            "before: %.3f), held at most %.0f (%.0f, %.0f); 5 s tasks: idle %.3f, held %.0f\n",
            new_idle, idle16, old_idle, peak_new, peak16, peak_old, long_idle, peak_long);
    assert_true(old_idle > 0.2);                  /* the cap less what is held starves the slots */
    assert_true(new_idle < 0.02);                 /* prefetch_max 64: the cap does not bind */
    assert_true(idle16 < 0.5 * old_idle);         /* the default 16: the cap binds, less often */
    assert_true(peak_new < 2 * (2 * 2.5 / 0.05)); /* about the cover's consumption */
    /* long tasks: few are held beyond the slots (one here: 2.5 s of cover is half a task
       a slot), so a slot may wait a round trip when both end at once */
    assert_true(long_idle < 0.05);
    assert_true(peak_long <= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_asks_top_project_for_shortfall),
        cmocka_unit_test(test_rsc_backoff_on_empty_reply),
        cmocka_unit_test(test_session_tries_each_endpoint_once),
        cmocka_unit_test(test_master_fetch_every_10_failures),
        cmocka_unit_test(test_report_near_deadline_with_piggyback),
        cmocka_unit_test(test_debt2004_water_marks),
        cmocka_unit_test(test_deadline_mode_caps_request),
        cmocka_unit_test(test_deadline_probes),
        cmocka_unit_test(test_deadline_result_cuts_backoff),
        cmocka_unit_test(test_deadline_whole_jobs_and_min_batch),
        cmocka_unit_test(test_deadline_min_batch_1),
        cmocka_unit_test(test_burst_batches),
        cmocka_unit_test(test_prefetch_room_rule),
        cmocka_unit_test(test_prefetch_room_jittered),
    };
    return cmocka_run_group_tests_name("engine_fetch", tests, NULL, NULL);
}

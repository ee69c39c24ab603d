/*
 * test_batch_estimate.c - start-time estimates (batch_estimate, B6 / showstart)
 * against a brute-force reference on random queues: random nodes (several node
 * groups through classes and node sizes, down nodes), admin reservations with
 * ACLs, pending and running jobs, planned with and without the estimate pass,
 * then random requests. The reference asks the planner at every single time
 * step whether the request fits there, in the general pool or in a reservation
 * that admits it, and joins the feasible times into ranges; batch_estimate, which
 * only searches the cached plan from one candidate start to the next, must give
 * exactly the same ranges. The seed is printed; set BATCH_TEST_SEED to repeat.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/batch/engine/batch.h"
#include "roles/batch/engine/internal.h" /* the reference reads the pools and asks the planner */

static unsigned seed;
static int64_t H; /* every breakpoint of the random plan lies before H */

static unsigned rnd(unsigned n)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % n;
}

/* The temporary job batch_estimate builds from a request (estimate.c). */
static void ref_job(struct batch_engine *e, const struct batch_request *r, int64_t wall,
                    struct bjob *j)
{
    memset(j, 0, sizeof *j);
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        j->cred[k] = r->cred[k] ? bs_cred_lookup(e, k, r->cred[k]) : -2;
        if (j->cred[k] == -1)
            j->cred[k] = -2;
    }
    if (!r->cred[BATCH_CRED_CLASS])
        j->cred[BATCH_CRED_CLASS] = bs_cred_lookup(e, BATCH_CRED_CLASS, "");
    j->id = r->job;
    j->tasks = r->tasks;
    j->per_task = r->per_task;
    j->procs = r->tasks * r->per_task.procs;
    j->walltime = wall;
    j->early_start = true;
    j->fit_epoch = -1;
}

/* Whether the request fits from t in some pool it may use. */
static bool ref_fits(struct batch_engine *e, const struct bjob *j, int64_t t)
{
    for (int32_t pi = 0; pi < e->npools; pi++) {
        const struct bpool *p = &e->pools[pi];
        if (pi > 0 && !bs_engine_admits(e, &e->resv[p->resv], j))
            continue;
        int64_t hi = p->resv >= 0 ? p->end - j->walltime : BATCH_NEVER;
        if (t < p->start || t > hi)
            continue;
        if (bs_plan_pool_find(e, pi, j, t, t, e->est_valid, NULL) == t)
            return true;
    }
    return false;
}

/* Every feasible range from e->now on, by testing each time step. */
static size_t ref_estimate(struct batch_engine *e, const struct batch_request *r, int64_t wall,
                           struct batch_window *w, size_t max)
{
    struct bjob j;
    ref_job(e, r, wall, &j);
    size_t n = 0;
    bool in = false;
    for (int64_t t = e->now; t <= H; t++) {
        bool f = ref_fits(e, &j, t);
        if (f && !in) {
            assert_true(n < max);
            w[n++] = (struct batch_window){t, BATCH_NEVER};
        } else if (!f && in) {
            w[n - 1].to = t - 1;
        }
        in = f;
    }
    return n; /* a range still open at H lasts for ever */
}

static void build(struct batch_engine *e, int64_t *now)
{
    int nn = 1 + (int)rnd(12);
    for (int i = 0; i < nn; i++) {
        struct batch_node_spec s = {.cap = {1 + (int32_t)rnd(3), rnd(2) ? 0 : 1000, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        snprintf(s.class_, sizeof s.class_, "%s", rnd(4) == 0 ? "x" : "");
        assert_true(batch_node_add(e, &s) >= 0);
    }
    if (rnd(4) == 0)
        assert_int_equal(batch_node_set_up(e, batch_node_find(e, "n0"), false), 0);
    for (int r = (int)rnd(3); r > 0; r--) { /* admin reservations on named nodes */
        const char *users[] = {"alice"}, *names[12];
        char buf[12][8];
        size_t k = 0;
        for (int i = 0; i < nn; i++)
            if (rnd(3) == 0) {
                snprintf(buf[k], sizeof buf[k], "n%d", i);
                names[k] = buf[k];
                k++;
            }
        if (!k)
            continue;
        int64_t start = rnd(400), end = start + 1 + rnd(300);
        struct batch_resv_req q = {.nodes = names, .nnodes = k, .start = start, .end = end};
        q.acl.names[BATCH_CRED_USER] = users;
        q.acl.n[BATCH_CRED_USER] = 1;
        char out[BATCH_NAME_MAX], why[256];
        (void)batch_resv_create(e, &q, 0, out, sizeof out, why, sizeof why); /* may overlap */
    }
    int nj = (int)rnd(30);
    H = 700 + 150 + 60 + 250 + 2; /* reservations, now, request */
    for (int i = 0; i < nj; i++) {
        struct batch_job_spec s = {.id = (uint64_t)i + 1,
                                   .tasks = 1 + (int32_t)rnd((unsigned)nn + 1),
                                   .per_task = {1 + (int32_t)rnd(2), rnd(3) ? 0 : 400, 0, 0},
                                   .walltime = 1 + rnd(100),
                                   .submit = 0,
                                   .early_start = rnd(2)};
        snprintf(s.user, sizeof s.user, "%s", rnd(3) ? "bob" : "alice");
        snprintf(s.class_, sizeof s.class_, "%s", rnd(5) ? "" : "x");
        assert_int_equal(batch_job_submit(e, &s), 0);
        H += s.walltime; /* the plan of the queue ends before all of them in a row */
    }
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, 0, &st), 0);
    *now = rnd(3) ? 0 : rnd(150); /* later: some running jobs ended, cycle again */
    if (*now) {
        for (int i = 0; i < nj; i++) {
            struct batch_job_info bi;
            if (batch_job_info(e, (uint64_t)i + 1, &bi) == 0 && bi.state == BATCH_JOB_RUNNING &&
                rnd(2))
                batch_job_finish(e, (uint64_t)i + 1, *now);
        }
        assert_int_equal(batch_cycle(e, *now, &st), 0);
    }
}

static void test_estimate_vs_reference(void **state)
{
    (void)state;
    const char *env = getenv("BATCH_TEST_SEED");
    unsigned seed0 = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    seed = seed0;
    print_message("test_batch_estimate seed %u\n", seed0);
    for (int round = 0; round < 150; round++) {
        struct batch_config c;
        batch_config_defaults(&c);
        c.estimates = rnd(3) != 0; /* the estimate pass's plan, or the job reservations' */
        struct batch_engine *e = batch_engine_new(&c);
        assert_non_null(e);
        int64_t now;
        build(e, &now);
        for (int q = 0; q < 20; q++) {
            const char *users[] = {NULL, "alice", "bob", "carol"}, *cls[] = {NULL, "x"};
            struct batch_request rq = {.tasks = 1 + (int32_t)rnd(8),
                                       .per_task = {1 + (int32_t)rnd(3), rnd(3) ? 0 : 500, 0, 0}};
            rq.cred[BATCH_CRED_USER] = users[rnd(4)];
            rq.cred[BATCH_CRED_CLASS] = cls[rnd(2)];
            int64_t wall = 1 + rnd(250), at = now + rnd(60);
            struct batch_window got[256], want[256];
            size_t ng = batch_estimate(e, &rq, wall, at, got, 256);
            size_t nw = ref_estimate(e, &rq, wall, want, 256);
            bool same = ng == nw;
            for (size_t i = 0; same && i < ng; i++)
                same = got[i].from == want[i].from && got[i].to == want[i].to;
            if (!same) {
                for (size_t i = 0; i < ng || i < nw; i++)
                    print_message(
                        "  %zu: got [%lld,%lld] want [%lld,%lld]\n", i,
                        i < ng ? (long long)got[i].from : -1, i < ng ? (long long)got[i].to : -1,
                        i < nw ? (long long)want[i].from : -1, i < nw ? (long long)want[i].to : -1);
                fail_msg("seed %u round %d request %d (tasks %d x %d procs, wall %lld, now "
                         "%lld): %zu ranges, reference %zu",
                         seed0, round, q, rq.tasks, rq.per_task.procs, (long long)wall,
                         (long long)at, ng, nw);
            }
            /* a short max writes a prefix and still counts every range */
            struct batch_window one[1];
            assert_int_equal(batch_estimate(e, &rq, wall, at, one, 1), ng);
            if (ng)
                assert_true(one[0].from == got[0].from && one[0].to == got[0].to);
        }
        batch_engine_destroy(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_vs_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_meta_sim.c - the meta simulator (roles/meta/sim*.c): scenario files, the trace
 * split, placement by estimate with reservations, re-evaluation, the pooled bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "roles/meta/sim/sim.h"

static void test_bsld(void **st)
{
    (void)st;
    assert_true(msim_bsld(0, 100) == 1.0);
    assert_true(msim_bsld(100, 100) == 2.0);
    assert_true(msim_bsld(19, 1) == 2.0); /* bounded at 10 s */
    assert_true(msim_bsld(0, 1) == 1.0);
}

static void test_scenario_file(void **st)
{
    (void)st;
    struct msim_scenario s;
    char err[600];
    msim_scenario_defaults(&s);
    const char *good = "[meta]\ngrid_share = 0.25\nsplit = user\nmargin = 60\nreevaluate = no\n"
                       "[site fast]\nnodes = 16\nnode_procs = 2\nspeed = 2\n"
                       "scheduler.reservationdepth = unlimited\n"
                       "[site slow]\nnodes = 8\n";
    assert_int_equal(msim_scenario_load_string(&s, good, "good.ini", err, sizeof err), 0);
    assert_int_equal(s.nsites, 2);
    assert_true(s.grid_share == 0.25);
    assert_int_equal(s.split, MSIM_SPLIT_USER);
    assert_int_equal(s.margin, 60);
    assert_false(s.reevaluate);
    assert_string_equal(s.sites[0].name, "fast");
    assert_int_equal(s.sites[0].nodes, 16);
    assert_int_equal(s.sites[0].node_procs, 2);
    assert_true(s.sites[0].speed == 2);
    assert_int_equal(s.sites[0].cfg.reservation_depth, BATCH_UNLIMITED);
    assert_int_equal(s.sites[1].cfg.reservation_depth, 1);
    msim_scenario_clear(&s);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[meta]\ngrid_share = 2\n", "bad.ini:2: grid_share '2'"},
        {"[meta]\nsplit = site\n", "split 'site'"},
        {"[site a]\nnodes = 4\nspeed = 0\n", "bad.ini:3: speed '0'"},
        {"[site a]\nspeed = 1\n", "[site a] needs nodes"},
        {"[site a]\nnodes = 4\ncolour = red\n", "unknown key 'colour' in [site a]"},
        {"[site a]\nnodes = 4\nscheduler.nosuchkey = 1\n", "bad.ini:3:"},
        {"[sites]\nx = 1\n", "unknown section [sites]"},
        {"[site a]\nnodes = 4\nbatch_config = /nonexistent/batch.ini\n", "batch_config:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msim_scenario_defaults(&s);
        err[0] = '\0';
        assert_int_equal(msim_scenario_load_string(&s, bad[i].text, "bad.ini", err, sizeof err),
                         -1);
        if (!strstr(err, bad[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].want);
        msim_scenario_clear(&s);
    }
}

/* A hand-made workload over two sites of `procs` processors each. */
struct fixture {
    struct msim_scenario s;
    struct msim_workload w;
};

static void setup(struct fixture *f, int32_t procs, size_t n)
{
    char err[200];
    msim_scenario_defaults(&f->s);
    assert_int_equal(msim_scenario_split(&f->s, 2, 2 * procs, err, sizeof err), 0);
    memset(&f->w, 0, sizeof f->w);
    f->w.in.jobs = calloc(n, sizeof *f->w.in.jobs);
    f->w.grid = calloc(n, sizeof *f->w.grid);
    f->w.home = calloc(n, sizeof *f->w.home);
    f->w.in.njobs = n;
}

static void job(struct fixture *f, size_t i, int64_t submit, int32_t procs, int64_t run,
                int64_t wall, int home)
{
    struct sim_job *j = &f->w.in.jobs[i];
    j->id = (int64_t)i + 1;
    j->submit = submit;
    j->procs = procs;
    j->run = run;
    j->walltime = wall;
    j->start = j->end = -1;
    f->w.grid[i] = home < 0;
    f->w.home[i] = home < 0 ? 0 : home;
    f->w.ngrid += home < 0;
}

static void teardown(struct fixture *f)
{
    msim_workload_free(&f->w);
    msim_scenario_clear(&f->s);
}

/* A busy site and an idle one: the estimate policy places the grid job on the idle one,
 * in a reservation starting at once; round robin (first turn: site 0) waits. */
static void test_busy_and_idle(void **st)
{
    (void)st;
    struct fixture f;
    char err[300];
    setup(&f, 4, 2);
    job(&f, 0, 0, 4, 1000, 1000, 0); /* local, fills site 0 */
    job(&f, 1, 10, 4, 100, 100, -1); /* grid */
    struct msim_result r = {0}, rr = {0}, pool = {0};
    assert_int_equal(msim_run(&f.s, &f.w, META_EARLIEST_COMPLETION, &r, err, sizeof err), 0);
    assert_int_equal(r.jobs[1].site, 1);
    assert_int_equal(r.jobs[1].start, 10);
    assert_int_equal(r.resv_failed, 0);
    assert_int_equal(msim_run(&f.s, &f.w, META_ROUND_ROBIN, &rr, err, sizeof err), 0);
    assert_int_equal(rr.jobs[1].site, 0);
    assert_int_equal(rr.jobs[1].start, 1000);
    assert_true(rr.mean_bsld > r.mean_bsld);
    assert_int_equal(msim_run(&f.s, &f.w, MSIM_POOLED, &pool, err, sizeof err), 0);
    assert_true(pool.mean_bsld <= r.mean_bsld);
    assert_true(r.util[0] > 0 && r.util[1] > 0);
    msim_result_free(&r);
    msim_result_free(&rr);
    msim_result_free(&pool);
    teardown(&f);
}

/* A job placed at site 0 (start 3000) moves to site 1 when site 1's long job ends early
 * at 200; without re-evaluation (or with a margin too large) it stays. */
static void test_reevaluation_moves(void **st)
{
    (void)st;
    struct fixture f;
    char err[300];
    setup(&f, 4, 3);
    job(&f, 0, 0, 4, 3000, 3000, 0); /* site 0 busy until 3000 */
    job(&f, 1, 0, 4, 200, 10000, 1); /* site 1 "until 10000", ends at 200 */
    job(&f, 2, 10, 4, 100, 100, -1); /* grid: site 0 looks earlier at 10 */
    struct msim_result r = {0};
    assert_int_equal(msim_run(&f.s, &f.w, META_EARLIEST_COMPLETION, &r, err, sizeof err), 0);
    assert_int_equal(r.jobs[2].site, 1);
    assert_int_equal(r.jobs[2].start, 200);
    assert_int_equal(r.jobs[2].moves, 1);
    assert_int_equal(r.moved, 1);
    msim_result_free(&r);

    f.s.margin = 5000;
    assert_int_equal(msim_run(&f.s, &f.w, META_EARLIEST_COMPLETION, &r, err, sizeof err), 0);
    assert_int_equal(r.jobs[2].site, 0);
    assert_int_equal(r.jobs[2].start, 3000);
    assert_int_equal(r.moved, 0);
    msim_result_free(&r);

    f.s.margin = 600;
    f.s.reevaluate = false;
    assert_int_equal(msim_run(&f.s, &f.w, META_EARLIEST_COMPLETION, &r, err, sizeof err), 0);
    assert_int_equal(r.jobs[2].start, 3000);
    msim_result_free(&r);

    /* slurm -M never re-evaluates either */
    f.s.reevaluate = true;
    assert_int_equal(msim_run(&f.s, &f.w, META_SLURM_M, &r, err, sizeof err), 0);
    assert_int_equal(r.jobs[2].site, 0);
    assert_int_equal(r.moved, 0);
    msim_result_free(&r);
    teardown(&f);
}

/* The trace split: the grid share is honoured roughly, local jobs go to sites wide
 * enough, jobs wider than every site are refused. */
static void test_workload_split(void **st)
{
    (void)st;
    struct msim_scenario s;
    struct swf_trace t;
    struct msim_workload w;
    char err[300], *text = malloc(1 << 20);
    size_t len = 0;
    memset(&t, 0, sizeof t);
    memset(&w, 0, sizeof w);
    for (int i = 1; i <= 1000; i++)
        len += (size_t)snprintf(
            text + len, 200, "%d %d -1 100 %d -1 -1 %d 200 -1 1 %d 1 -1 1 -1 -1 -1\n", i, i * 10,
            i % 10 == 0 ? 64 : (i % 7) + 1, i % 10 == 0 ? 64 : (i % 7) + 1, i % 5);
    assert_int_equal(swf_parse(text, len, "t.swf", &t, err, sizeof err), 0);
    msim_scenario_defaults(&s);
    assert_int_equal(msim_scenario_split(&s, 4, 128, err, sizeof err), 0);
    s.grid_share = 0.3;
    assert_int_equal(msim_workload(&s, &t, &w, err, sizeof err), 0);
    assert_int_equal(w.refused, 100); /* 64 > 32 */
    assert_int_equal(w.in.njobs, 900);
    assert_true(w.ngrid > 200 && w.ngrid < 340);
    size_t per[4] = {0};
    for (size_t i = 0; i < w.in.njobs; i++)
        if (!w.grid[i])
            per[w.home[i]]++;
    for (int k = 0; k < 4; k++)
        assert_true(per[k] > 100);
    msim_workload_free(&w);
    msim_scenario_clear(&s);
    assert_int_equal(msim_workload(&s, &t, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "no sites"));
    swf_free(&t);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bsld),           cmocka_unit_test(test_scenario_file),
        cmocka_unit_test(test_busy_and_idle),  cmocka_unit_test(test_reevaluation_moves),
        cmocka_unit_test(test_workload_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

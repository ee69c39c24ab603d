/*
 * test_scored.c - the pure SCore-D policy of the cluster manager: limit arithmetic (K8),
 * admission and cluster choice by load relative to speed (K2, K3), host choice, the
 * gang / exclusive / space-sharing slot decision (K6), CPU time checks (K7) and the
 * console language (K9); and, on the node side, how a parallel process's output is
 * collected from its working directory for the exit report (bounded, truncation marked).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "roles/client/live/runner.h"
#include "roles/cluster/engine/scored.h"

static void test_limits(void **state)
{
    (void)state;
    assert_int_equal(sd_job_limit(1000, 0, 0), 0); /* queue unset: no limit */
    assert_int_equal(sd_job_limit(0, 50, 0), 0);   /* cluster unset: no limit */
    /* an explicit user limit applies on its own (issue #8 item 14) */
    assert_int_equal(sd_job_limit(0, 50, 100), 100);
    assert_int_equal(sd_job_limit(1000, 0, 100), 100);
    assert_int_equal(sd_job_limit(0, 0, 100), 100);
    assert_int_equal(sd_job_limit(1000, 50, 0), 500);
    assert_int_equal(sd_job_limit(1000, 50, 200), 200); /* the user's, smaller */
    assert_int_equal(sd_job_limit(1000, 50, 900), 500); /* the user's, larger: ignored */
    assert_int_equal(sd_job_limit(1000, 100, 0), 1000);
}

static uint32_t cores[8] = {2, 2, 2, 2, 4, 4, 1, 1};
static uint32_t hs0[] = {0, 1}, hs1[] = {2, 3};

static void mk(struct sd_cluster *k, const char *name, double speed, uint32_t *hosts, uint32_t n,
               uint64_t procs)
{
    memset(k, 0, sizeof *k);
    strcpy(k->name, name);
    k->speed = speed;
    k->hosts = hosts;
    k->nhosts = n;
    for (uint32_t i = 0; i < n; i++)
        k->cores += cores[hosts[i]];
    k->procs = procs;
}

static void test_admit_speed_and_load(void **state)
{
    struct sd_cluster cl[2];
    struct sd_queue q = {SDQ_ACTIVATED, SDQ_GANG, 0, 0, 0, 0, ""};
    struct sd_request rq = {2, 1, 0, 0, 1, false};
    struct sd_admission a;
    (void)state;
    mk(&cl[0], "slow", 1, hs0, 2, 0);
    mk(&cl[1], "fast", 2, hs1, 2, 0);
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), 0);
    assert_int_equal(a.cluster, 1); /* equal load: the faster */
    cl[1].procs = 2;                /* fast: load 0.5, relative 0.25; slow: 0 */
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), 0);
    assert_int_equal(a.cluster, 0);
    cl[0].procs = 2; /* both load 0.5: slow 0.5, fast 0.25 */
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), 0);
    assert_int_equal(a.cluster, 1);
}

static void test_admit_refusals(void **state)
{
    struct sd_cluster cl[2], coc;
    struct sd_queue q = {SDQ_ACTIVATED, SDQ_GANG, 0, 0, 60, 0, ""};
    struct sd_request rq = {3, 1, 0, 0, 1, false};
    struct sd_admission a;
    uint32_t all[] = {0, 1, 2, 3};
    (void)state;
    mk(&cl[0], "a", 1, hs0, 2, 0);
    mk(&cl[1], "b", 1, hs1, 2, 0);
    cl[0].mem_mb = cl[1].mem_mb = 1000;
    /* three hosts: no single cluster; never, unless a cluster of clusters is allowed */
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), -1);
    assert_true(a.never);
    assert_non_null(strstr(a.why, "hosts"));
    mk(&coc, SD_COC, 1, all, 4, 0);
    coc.mem_mb = 1000;
    rq.coc = true;
    assert_int_equal(sd_admit(cl, 2, &coc, &q, &rq, cores, &a), 0);
    assert_int_equal(a.cluster, 2);
    /* memory: 60 % of 1000 held already in both: not now */
    rq = (struct sd_request){1, 1, 0, 0, 1, false};
    cl[0].held_mem = cl[1].held_mem = 600;
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), -1);
    assert_false(a.never);
    assert_non_null(strstr(a.why, "memory"));
    rq.mem_mb = 400; /* an explicit smaller limit fits */
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), 0);
    assert_int_equal(a.mem_lim, 400);
    /* an explicit limit without any queue percentage or cluster limit is kept */
    struct sd_queue q0 = {SDQ_ACTIVATED, SDQ_GANG, 0, 0, 0, 0, ""};
    struct sd_cluster bare[1];
    mk(&bare[0], "z", 1, hs0, 2, 0);
    rq.disk_mb = 70;
    assert_int_equal(sd_admit(bare, 1, NULL, &q0, &rq, cores, &a), 0);
    assert_int_equal(a.mem_lim, 400);
    assert_int_equal(a.disk_lim, 70);
    /* a user limit larger than the cluster's: never */
    bare[0].disk_mb = 50;
    assert_int_equal(sd_admit(bare, 1, NULL, &q0, &rq, cores, &a), -1);
    assert_true(a.never);
    assert_non_null(strstr(a.why, "disk"));
    rq.disk_mb = 0;
    /* job count */
    cl[0].max_jobs = cl[1].max_jobs = 1;
    cl[0].njobs = cl[1].njobs = 1;
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), -1);
    assert_non_null(strstr(a.why, "jobs"));
    /* ppn larger than any host's cores */
    cl[0].max_jobs = cl[1].max_jobs = 0;
    rq = (struct sd_request){4, 4, 0, 0, 1, false};
    assert_int_equal(sd_admit(cl, 2, NULL, &q, &rq, cores, &a), -1);
    assert_true(a.never);
}

static void test_pick_hosts(void **state)
{
    struct sd_cluster k;
    uint32_t procs[8] = {3, 0, 1, 0, 0, 0, 0, 0}, out[4];
    uint32_t hs[] = {0, 1, 2, 4};
    (void)state;
    mk(&k, "k", 1, hs, 4, 0);
    assert_int_equal(sd_pick_hosts(&k, 2, 1, cores, procs, out), 0);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 4);
    assert_int_equal(sd_pick_hosts(&k, 1, 4, cores, procs, out), 0);
    assert_int_equal(out[0], 4); /* the only host with 4 cores */
    assert_int_equal(sd_pick_hosts(&k, 2, 4, cores, procs, out), -1);
}

/* Constraint counts (issue 27): the hosts the counts need first (a host helping two
 * counts before one helping one), then the least loaded; too few: refused. */
static void test_pick_hosts_counted(void **state)
{
    struct sd_cluster k;
    uint32_t procs[8] = {0, 0, 0, 0, 0, 0, 0, 0}, out[4];
    uint32_t hs[] = {0, 1, 2, 4};
    const char *feat[8] = {"", "a", "b", "", "a,b"};
    char why[256];
    (void)state;
    mk(&k, "k", 1, hs, 4, 0);
    assert_true(sd_counts_fit(&k, 1, cores, feat, "a*2&b*2", why, sizeof why));
    assert_false(sd_counts_fit(&k, 1, cores, feat, "a*3", why, sizeof why));
    assert_non_null(strstr(why, "has 2 active host(s) with a"));
    assert_false(sd_counts_fit(&k, 4, cores, feat, "a*2", why, sizeof why)); /* ppn 4 */
    /* a*1&b*1 over 2 hosts: host 4 has both, then the least loaded other one */
    assert_int_equal(sd_pick_hosts_counted(&k, 2, 1, cores, procs, feat, "a*1&b*1", out), 0);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 0);
    assert_int_equal(sd_pick_hosts_counted(&k, 3, 1, cores, procs, feat, "a*2&b*2", out), 0);
    assert_int_equal(out[0], 4);
    assert_true((out[1] == 1 && out[2] == 2) || (out[1] == 2 && out[2] == 1));
    assert_int_equal(sd_pick_hosts_counted(&k, 2, 1, cores, procs, feat, "a*2&b*2", out), -1);
    assert_int_equal(sd_pick_hosts_counted(&k, 2, 1, cores, procs, feat, "a*3", out), -1);
}

static void test_schedule_gang_rotation(void **state)
{
    uint32_t h[] = {0, 1};
    struct sd_slot_job j[2] = {
        {1, 1, true, false, false, SDQ_GANG, 0, 2, h, false},
        {2, 1, true, false, false, SDQ_GANG, 0, 2, h, false},
    };
    (void)state;
    sd_schedule(j, 2, 4, true);
    assert_true(j[0].run);
    assert_false(j[1].run);
    j[0].running = true, j[0].last_ran_ms = 10;
    sd_schedule(j, 2, 4, false); /* an event between ticks: the running one keeps going */
    assert_true(j[0].run && !j[1].run);
    sd_schedule(j, 2, 4, true); /* the next tick: the other's turn */
    assert_true(!j[0].run && j[1].run);
    j[0].running = false, j[0].last_ran_ms = 20;
    j[1].running = true, j[1].last_ran_ms = 20;
    sd_schedule(j, 2, 4, true);
    assert_true(j[0].run && !j[1].run);
}

static void test_schedule_exclusive_priority_space(void **state)
{
    uint32_t h01[] = {0, 1}, h1[] = {1}, h23[] = {2, 3};
    struct sd_slot_job j[4] = {
        {1, 2, true, true, true, SDQ_EXCLUSIVE, 5, 2, h01, false},   /* started, low queue */
        {2, 2, true, false, false, SDQ_EXCLUSIVE, 0, 2, h01, false}, /* waits its turn */
        {3, 2, true, false, false, SDQ_EXCLUSIVE, 0, 2, h23, false}, /* space sharing */
        {4, 0, false, false, false, SDQ_GANG, 0, 1, h1, false},      /* deactivated */
    };
    (void)state;
    sd_schedule(j, 4, 4, true);
    assert_true(j[0].run); /* exclusive: runs to its end */
    assert_false(j[1].run);
    assert_true(j[2].run); /* other hosts are free */
    assert_false(j[3].run);
    j[3].runnable = true; /* a higher queue gets work on host 1: preempts job 1 */
    sd_schedule(j, 4, 4, true);
    assert_true(j[3].run);
    assert_false(j[0].run);
    assert_false(j[1].run);
    assert_true(j[2].run);
}

static void test_cpu_checks(void **state)
{
    (void)state;
    assert_int_equal(sd_cpu_check(5, 0, 0, 0, 0, 3), SD_CPU_OK);
    assert_int_equal(sd_cpu_check(5, 0, 4, 0, 0, 3), SD_CPU_KILL);
    assert_int_equal(sd_cpu_check(5, 0, 0, 4, 0, 3), SD_CPU_DEMOTE);
    assert_int_equal(sd_cpu_check(5, 2, 0, 4, 0, 3), SD_CPU_OK); /* residence restarted */
    assert_int_equal(sd_cpu_check(9, 0, 0, 4, 2, 3), SD_CPU_OK); /* lowest queue stays */
}

static void test_console(void **state)
{
    struct sd_settings s;
    char msg[300], out[4096] = "";
    (void)state;
    sd_settings_default(&s, 3);
    assert_int_equal(s.q[0].state, SDQ_ACTIVATED);
    assert_int_equal(sd_console_line(&s, "  # comment", msg, sizeof msg), SDC_NOTHING);
    assert_int_equal(sd_console_line(&s, "disable 2", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(s.q[2].state, SDQ_DISABLED);
    assert_int_equal(sd_console_line(&s, "deactivate 0", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(s.q[0].state, SDQ_ENABLED);
    assert_int_equal(sd_console_line(&s, "queue 1 mode exclusive", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_console_line(&s, "queue 1 cpu 100", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_console_line(&s, "queue 1 mem 50", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_console_line(&s, "queue 1 group staff", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(s.q[1].mode, SDQ_EXCLUSIVE);
    assert_int_equal(s.q[1].max_cpu_s, 100);
    assert_int_equal(s.q[1].mem_pct, 50);
    assert_string_equal(s.q[1].group, "staff");
    assert_int_equal(sd_console_line(&s, "queue 1 cpu unlimited", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(s.q[1].max_cpu_s, 0);
    assert_int_equal(sd_console_line(&s, "limit big mem 4096", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_limit_find(&s, "big")->mem_mb, 4096);
    assert_int_equal(sd_limit_find(&s, "big")->disk_mb, -1);
    assert_int_equal(sd_console_line(&s, "limit big mem none", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_limit_find(&s, "big")->mem_mb, 0);
    struct sd_settings before = s;
    assert_int_equal(sd_console_line(&s, "queue 3 mode gang", msg, sizeof msg), SDC_ERROR);
    assert_int_equal(sd_console_line(&s, "queue 1 mem 101", msg, sizeof msg), SDC_ERROR);
    assert_int_equal(sd_console_line(&s, "queue 1 state sleepy", msg, sizeof msg), SDC_ERROR);
    assert_int_equal(sd_console_line(&s, "frobnicate", msg, sizeof msg), SDC_ERROR);
    assert_memory_equal(&before, &s, sizeof s);
    assert_int_equal(sd_console_line(&s, "queues", msg, sizeof msg), SDC_QUEUES);
    sd_console_queues(&s, out, sizeof out);
    assert_non_null(strstr(out, "exclusive"));
    assert_non_null(strstr(out, "disabled"));
}

static void put_file(const char *dir, const char *name, char c, size_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc(c, f);
    fclose(f);
}

/* runner_collect: the first max bytes of each file, trunc only when a file is longer. */
static void test_rank_output_collect(void **state)
{
    (void)state;
    struct run r;
    char dir[] = "/tmp/gridnode-test-scored-XXXXXX";
    assert_non_null(mkdtemp(dir));
    memset(&r, 0, sizeof r);
    r.out.fd = r.err.fd = -1;
    snprintf(r.workdir, sizeof r.workdir, "%s", dir);
    put_file(dir, "stdout", 'x', 3000);
    put_file(dir, "stderr", 'e', 1024);
    assert_int_equal(runner_collect(&r, 1024), 0);
    assert_int_equal(r.out.len, 1024);
    assert_true(r.out.trunc);
    assert_int_equal(r.out.buf[1023], 'x');
    assert_int_equal(r.err.len, 1024); /* exactly the bound: complete */
    assert_false(r.err.trunc);
    /* collecting again replaces; a missing file reads as empty */
    char path[600];
    snprintf(path, sizeof path, "%s/stderr", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(runner_collect(&r, 100000), 0);
    assert_int_equal(r.out.len, 3000);
    assert_false(r.out.trunc);
    assert_int_equal(r.err.len, 0);
    assert_false(r.err.trunc);
    /* a bound of 0 keeps nothing and marks any output */
    assert_int_equal(runner_collect(&r, 0), 0);
    assert_int_equal(r.out.len, 0);
    assert_true(r.out.trunc);
    assert_false(r.err.trunc);
    runner_cleanup(&r); /* frees and removes the directory */
    struct stat st;
    assert_int_equal(stat(dir, &st), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_admit_speed_and_load),
        cmocka_unit_test(test_admit_refusals),
        cmocka_unit_test(test_pick_hosts),
        cmocka_unit_test(test_pick_hosts_counted),
        cmocka_unit_test(test_schedule_gang_rotation),
        cmocka_unit_test(test_schedule_exclusive_priority_space),
        cmocka_unit_test(test_cpu_checks),
        cmocka_unit_test(test_console),
        cmocka_unit_test(test_rank_output_collect),
    };
    return cmocka_run_group_tests_name("scored", tests, NULL, NULL);
}

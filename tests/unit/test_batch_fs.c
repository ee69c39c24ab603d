/*
 * test_batch_fs.c - fairshare history (windows, depth, decay) with hand-computed
 * usage, its effect on priority, and batch.ini: the shipped file, every kind of
 * error with its line, duplicate keys, --set, and print/load round trips.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/batch.h"
#include "roles/batch/conffile.h"
#include "roles/batch/liveconf.h"

static void job(struct batch_engine *e, uint64_t id, const char *user, int32_t tasks, int64_t wall,
                int64_t submit)
{
    struct batch_job_spec s = {
        .id = id, .tasks = tasks, .per_task = {1, 0, 0, 0}, .walltime = wall, .submit = submit};
    snprintf(s.user, sizeof s.user, "%s", user);
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static void near(double got, double want)
{
    if (fabs(got - want) > 1e-6)
        fail_msg("got %.9f, want %.9f", got, want);
}

static bool started(struct batch_engine *e, uint64_t id)
{
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, id, &i), 0);
    return i.state == BATCH_JOB_RUNNING;
}

/* FSINTERVAL 100, FSDEPTH 3, FSDECAY 0.5: a window `age` old counts 0.5^age and
 * is forgotten at age 3. */
static void test_decay(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    c.fspolicy = BATCH_FS_DEDICATEDPS;
    c.fsinterval = 100;
    c.fsdepth = 3;
    c.fsdecay = 0.5;
    struct batch_engine *e = batch_engine_new(&c);
    assert_non_null(e);
    struct batch_node_spec n = {.name = "n0", .cap = {2, 0, 0, 0}};
    assert_int_equal(batch_node_add(e, &n), 0);
    job(e, 1, "a", 1, 100, 0);
    assert_int_equal(batch_cycle(e, 0, NULL), 0);
    assert_int_equal(batch_job_finish(e, 1, 100), 0); /* a: 100 in window 0 */
    job(e, 2, "b", 1, 100, 100);
    assert_int_equal(batch_cycle(e, 100, NULL), 0);
    /* at 150, b has run 50 s in window 1 (charged while it runs) */
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "a", 150), 50.0);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "b", 150), 50.0);
    assert_int_equal(batch_job_finish(e, 2, 200), 0);
    /* at 250 (window 2): a 100 x 0.25 = 25, b 100 x 0.5 = 50 of 75 */
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "a", 250), 100.0 / 3);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "b", 250), 200.0 / 3);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "u", 250), -1); /* unknown */
    /* at 350 window 0 is 3 windows old: forgotten */
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "a", 350), 0);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "b", 350), 100);
    /* a job across windows is split at the boundaries: 2 procs from 400 to 600 */
    job(e, 3, "a", 2, 300, 400);
    assert_int_equal(batch_cycle(e, 400, NULL), 0);
    assert_int_equal(batch_job_finish(e, 3, 600), 0);
    /* at 650: a has 200 in window 4 (x0.5) and 200 in window 5 (x1); b nothing */
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "a", 650), 100);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "b", 650), 0);
    batch_engine_destroy(&e);
    /* the kept usage of purged jobs (livepurge.c): the same amounts added per window
       give the same usage as the charges they were split from */
    e = batch_engine_new(&c);
    assert_non_null(e);
    assert_int_equal(batch_fairshare_add(e, "a", "", "", 400, 200), 0);
    assert_int_equal(batch_fairshare_add(e, "a", "", "", 500, 200), 0);
    assert_int_equal(batch_fairshare_add(e, "b", "", "", 50, 1000), 0); /* forgotten at 650 */
    assert_int_equal(batch_fairshare_add(e, "b", "", "", 599, 0), 0);   /* nothing */
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "a", 650), 100);
    near(batch_fairshare_usage(e, BATCH_CRED_USER, "b", 650), 0);
    batch_engine_destroy(&e);
    batch_config_clear(&c);
}

/* With a target, the user further below it gets the higher priority. */
static void test_fairshare_priority(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    c.fspolicy = BATCH_FS_DEDICATEDPS;
    c.fsinterval = 1000;
    c.w.fsuser = 10;
    batch_config_cred(&c, BATCH_CRED_USER, "DEFAULT")->fstarget = 50;
    struct batch_engine *e = batch_engine_new(&c);
    batch_config_clear(&c);
    struct batch_node_spec n = {.name = "n0", .cap = {1, 0, 0, 0}};
    assert_int_equal(batch_node_add(e, &n), 0);
    job(e, 1, "a", 1, 100, 0);
    assert_int_equal(batch_cycle(e, 0, NULL), 0);
    job(e, 2, "a", 1, 100, 10); /* queued first */
    job(e, 3, "b", 1, 100, 20);
    assert_int_equal(batch_job_finish(e, 1, 100), 0);
    assert_int_equal(batch_cycle(e, 100, NULL), 0);
    assert_true(started(e, 3)); /* a used 100 %, b nothing */
    assert_false(started(e, 2));
    struct batch_prio p;
    assert_int_equal(batch_priority_explain(e, 2, 100, &p), 0);
    near(p.value[BATCH_F_FSUSER], 50 - 100);
    near(p.contrib[BATCH_F_FSUSER], -500);
    batch_engine_destroy(&e);
}

static int load(struct batch_config *c, const char *text, char *err)
{
    batch_config_defaults(c);
    return batch_conf_load_string(c, text, "t.ini", err, 256);
}

static void expect_error(const char *text, const char *want)
{
    struct batch_config c;
    char err[256] = "";
    assert_int_equal(load(&c, text, err), -1);
    if (strcmp(err, want))
        fail_msg("error '%s', expected '%s'", err, want);
    batch_config_clear(&c);
}

static void test_config(void **state)
{
    (void)state;
    struct batch_config c;
    char err[256] = "";
    const char *good = "[scheduler]\nreservationdepth = unlimited\nBACKFILLPOLICY = bestfit\n"
                       "estimates = yes\n[priority]\nxfactorweight = 2.5\n[fairshare]\n"
                       "fspolicy = dedicatedps\nfsinterval = 1:00:00\nfsdepth = 4\n"
                       "fsdecay = 0.8\n[user alice]\nmaxjob = 3\nfstarget = 25\n"
                       "[class express]\npriority = 100\n";
    assert_int_equal(load(&c, good, err), 0);
    assert_int_equal(c.reservation_depth, BATCH_UNLIMITED);
    assert_int_equal(c.backfill, BATCH_BF_BESTFIT);
    assert_true(c.estimates);
    assert_true(c.w.xfactor == 2.5 && c.w.queuetime == 1);
    assert_int_equal(c.fsinterval, 3600);
    assert_int_equal(c.fsdepth, 4);
    assert_int_equal(c.ncreds, 2);
    assert_int_equal(batch_config_cred(&c, BATCH_CRED_USER, "alice")->maxjob, 3);
    assert_true(batch_config_cred(&c, BATCH_CRED_CLASS, "express")->priority == 100);
    /* --set, then print and read back */
    assert_int_equal(batch_conf_set(&c, "priority.queuetimeweight=7", err, sizeof err), 0);
    assert_int_equal(batch_conf_set(&c, "user:bob.maxproc=16", err, sizeof err), 0);
    assert_int_equal(batch_conf_set(&c, "priority.nosuch=1", err, sizeof err), -1);
    assert_string_equal(err, "--set priority.nosuch=1: unknown key 'nosuch' in [priority]");
    assert_int_equal(batch_conf_set(&c, "xfactorweight=1", err, sizeof err), -1);
    assert_non_null(strstr(err, "SECTION.KEY=VALUE"));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct batch_ini whole;
    batch_ini_defaults(&whole);
    batch_config_clear(&whole.eng);
    assert_int_equal(batch_config_copy(&whole.eng, &c), 0);
    batch_ini_print(&whole, f);
    batch_ini_clear(&whole);
    fclose(f);
    struct batch_config d;
    assert_int_equal(load(&d, buf, err), 0);
    assert_int_equal(d.reservation_depth, c.reservation_depth);
    assert_true(d.w.queuetime == 7 && d.fsdecay == c.fsdecay && d.fsinterval == 3600);
    assert_int_equal(batch_config_cred(&d, BATCH_CRED_USER, "bob")->maxproc, 16);
    assert_true(isnan(batch_config_cred(&d, BATCH_CRED_USER, "bob")->fstarget));
    assert_true(batch_config_cred(&d, BATCH_CRED_USER, "alice")->fstarget == 25);
    free(buf);
    batch_config_clear(&c);
    batch_config_clear(&d);
    /* errors name the line and the problem */
    expect_error("[fairshare]\nfsdepth = 4\n\nfsdepth = 5\n",
                 "t.ini:4: duplicate key 'fsdepth' in [fairshare]");
    expect_error("[priority]\nqueuetimeweight = lots\n",
                 "t.ini:2: queuetimeweight must be a number, not 'lots'");
    expect_error("[scheduler]\nbackfillpolicy = easy\n",
                 "t.ini:2: backfillpolicy must be none, firstfit or bestfit, not 'easy'");
    expect_error("[scheduler]\nreservationdepth = -2\n",
                 "t.ini:2: reservationdepth must be a count or 'unlimited', not '-2'");
    expect_error("[fairshare]\nfsdecay = 1.5\n", "t.ini:2: fsdecay must be in (0, 1], not '1.5'");
    expect_error("[fairshare]\nfsinterval = 1:xx\n",
                 "t.ini:2: fsinterval must be a positive duration ([[DD:]HH:]MM:SS), not '1:xx'");
    expect_error("[nonsense]\na = 1\n", "t.ini:2: unknown section [nonsense]");
    expect_error("[scheduler]\nfoo = 1\n", "t.ini:2: unknown key 'foo' in [scheduler]");
    expect_error("[user bob]\nmaxjob = many\n",
                 "t.ini:2: maxjob must be a count (-1: no limit), not 'many'");
    expect_error("[scheduler]\nthis line has no equals sign\n",
                 "t.ini:2: syntax error (expected [section] or key = value)");
    expect_error("[user bob]\nfstarget = 101\n",
                 "t.ini:2: fstarget must be a percentage 0..100, not '101'");
    /* the shipped file parses and changes nothing */
    struct batch_config def;
    batch_config_defaults(&def);
    batch_config_defaults(&c);
    if (batch_conf_load(&c, "configs/batch.ini", err, sizeof err) != 0)
        fail_msg("configs/batch.ini: %s", err);
    assert_int_equal(c.reservation_depth, def.reservation_depth);
    assert_int_equal(c.backfill, def.backfill);
    assert_int_equal(memcmp(&c.w, &def.w, sizeof c.w), 0);
    assert_int_equal(c.fsinterval, def.fsinterval);
    assert_int_equal(c.ncreds, 0);
    batch_config_clear(&c);
    assert_int_equal(batch_conf_load(&c, "/nonexistent/batch.ini", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/batch.ini: cannot open"));
}

static void expect_ini_error(const char *text, const char *want)
{
    struct batch_ini f;
    char err[256] = "";
    batch_ini_defaults(&f);
    assert_int_equal(batch_ini_load_string(&f, text, "t.ini", err, sizeof err), -1);
    if (strcmp(err, want))
        fail_msg("error '%s', expected '%s'", err, want);
    batch_ini_clear(&f);
}

/* The live driver's sections: the shared daemon keys (daemon/daemon.h's key block)
 * and the batch role's own, their defaults, messages and the printed file. */
static void test_live_config(void **state)
{
    (void)state;
    struct batch_ini f, g;
    char err[256] = "";
    batch_ini_defaults(&f);
    assert_string_equal(f.live.listen, "tcp://127.0.0.1:7400");
    assert_string_equal(f.live.state_dir, "run/batch");
    assert_string_equal(f.live.log_level, "info");
    assert_int_equal(f.live.sync, 0);
    assert_int_equal(f.live.map_mb, 64);
    assert_int_equal(f.live.peer_queue, 1000);
    assert_int_equal(f.live.max_interval_s, 30);
    assert_int_equal(f.live.stats_interval_s, 10);
    assert_int_equal(f.live.sec.plain, 0);
    assert_int_equal(f.live.retention_s, 604800); /* as the cluster's jobs.retention_s */
    const char *text = "[Batch]\nListen = tcp://127.0.0.1:9\nclusters = a=tcp://h:1\n"
                       "log_level = debug\n[store]\nsync = none\nmap_mb = 3\n[limits]\n"
                       "peer_queue = 4\n[security]\nplain = yes\nsecret_key = /k\n"
                       "[stats]\ninterval_s = 5\n[jobs]\nretention_s = 0\n";
    assert_int_equal(batch_ini_load_string(&f, text, "t.ini", err, sizeof err), 0);
    assert_string_equal(f.live.listen, "tcp://127.0.0.1:9");
    assert_string_equal(f.live.clusters, "a=tcp://h:1");
    assert_int_equal(f.live.sync, 2);
    assert_int_equal(f.live.map_mb, 3);
    assert_int_equal(f.live.peer_queue, 4);
    assert_int_equal(f.live.sec.plain, 1);
    assert_string_equal(f.live.sec.secret_key, "/k");
    assert_int_equal(f.live.retention_s, 0);
    assert_int_equal(batch_ini_set(&f, "store.sync=meta", err, sizeof err), 0);
    assert_int_equal(f.live.sync, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    batch_ini_print(&f, o);
    fclose(o);
    batch_ini_defaults(&g);
    assert_int_equal(batch_ini_load_string(&g, buf, "printed", err, sizeof err), 0);
    assert_int_equal(memcmp(&f.live, &g.live, sizeof f.live), 0);
    free(buf);
    batch_ini_clear(&f);
    batch_ini_clear(&g);
    /* the engine-only reader checks the live sections and drops them */
    struct batch_config c;
    batch_config_defaults(&c);
    assert_int_equal(batch_conf_load_string(&c, text, "t.ini", err, sizeof err), 0);
    assert_int_equal(batch_conf_set(&c, "store.sync=maybe", err, sizeof err), -1);
    assert_string_equal(err, "--set store.sync=maybe: store.sync must be full, meta or none, not "
                             "'maybe'");
    batch_config_clear(&c);
    expect_ini_error("[store]\nsync = Full\n",
                     "t.ini:2: store.sync must be full, meta or none, not 'Full'");
    expect_ini_error("[store]\nmap_mb = 0\n",
                     "t.ini:2: store.map_mb must be 1 to 1048576, not '0'");
    expect_ini_error("[limits]\npeer_queue = x\n",
                     "t.ini:2: limits.peer_queue must be 1 to 1000000, not 'x'");
    expect_ini_error("[security]\nplain = 1\n",
                     "t.ini:2: security.plain must be true or false, not '1'");
    expect_ini_error("[batch]\nstate_dir =\n", "t.ini:2: state_dir must not be empty");
    expect_ini_error("[batch]\nlog_level = loud\n",
                     "t.ini:2: log_level must be error, warn, info or debug, not 'loud'");
    expect_ini_error("[batch]\nmax_interval_s = 0\n",
                     "t.ini:2: max_interval_s must be 1 to 86400 seconds, not '0'");
    expect_ini_error("[limits]\nlisten = x\n", "t.ini:2: unknown key 'listen' in [limits]");
    expect_ini_error("[jobs]\nretention_s = -1\n",
                     "t.ini:2: jobs.retention_s must be 0 (never) to 1099511627776 seconds, "
                     "not '-1'");
    expect_ini_error("[store]\nsync = none\nSYNC = full\n",
                     "t.ini:3: duplicate key 'SYNC' in [store]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay),
        cmocka_unit_test(test_fairshare_priority),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_live_config),
    };
    return cmocka_run_group_tests_name("batch_fs", tests, NULL, NULL);
}

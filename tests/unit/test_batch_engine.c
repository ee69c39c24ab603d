/*
 * test_batch_engine.c - the engine through batch.h on hand-built clusters:
 * multi-resource nodes and classes, holds and throttles, priorities, and the
 * administrative reservations of B2/B5/B6 (ACLs, named and counted nodes,
 * refusals, showres by node, release, expiry, the early-start flag), start-time
 * estimates and bad calls.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

static struct batch_engine *eng(const struct batch_config *cfg)
{
    struct batch_config c;
    if (!cfg) {
        batch_config_defaults(&c);
        c.estimates = true;
        cfg = &c;
    }
    struct batch_engine *e = batch_engine_new(cfg);
    assert_non_null(e);
    return e;
}

static void nodes(struct batch_engine *e, int n, int32_t procs, int64_t mem, const char *cls,
                  const char *prefix)
{
    for (int i = 0; i < n; i++) {
        struct batch_node_spec s = {.cap = {procs, mem, 0, 0}};
        snprintf(s.name, sizeof s.name, "%s%d", prefix, i);
        snprintf(s.class_, sizeof s.class_, "%s", cls ? cls : "");
        assert_true(batch_node_add(e, &s) >= 0);
    }
}

struct js { /* a job in one line */
    uint64_t id;
    const char *user;
    int32_t tasks, procs;
    int64_t mem, wall, submit;
    const char *cls;
    bool early;
};

static void submit(struct batch_engine *e, struct js j)
{
    struct batch_job_spec s = {.id = j.id,
                               .tasks = j.tasks,
                               .per_task = {j.procs, j.mem, 0, 0},
                               .walltime = j.wall,
                               .submit = j.submit,
                               .early_start = j.early};
    snprintf(s.user, sizeof s.user, "%s", j.user ? j.user : "u");
    snprintf(s.class_, sizeof s.class_, "%s", j.cls ? j.cls : "");
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static struct batch_job_info info(struct batch_engine *e, uint64_t id)
{
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, id, &i), 0);
    return i;
}

static bool running(struct batch_engine *e, uint64_t id)
{
    return info(e, id).state == BATCH_JOB_RUNNING;
}

static void cycle(struct batch_engine *e, int64_t now)
{
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, now, &st), 0);
}

/* Multi-resource nodes: tasks are packed per node by every resource. */
static void test_resources(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 2, 8, 16000, NULL, "big");
    nodes(e, 2, 2, 2000, NULL, "small");
    /* 4 tasks of 2 procs + 4000 MB: 4 fit a big node, none a small one */
    submit(e, (struct js){1, "a", 4, 2, 4000, 100, 0});
    /* 3 tasks of 1 proc + 500 MB: a big node holds all 3 */
    submit(e, (struct js){2, "a", 3, 1, 500, 100, 0});
    /* 2 tasks of 2 procs + 1500 MB: only small nodes are left, one task each */
    submit(e, (struct js){3, "a", 2, 2, 1500, 100, 0});
    /* 1 task of 16 procs: larger than any node */
    submit(e, (struct js){4, "a", 1, 16, 0, 100, 0});
    cycle(e, 0);
    assert_int_equal(info(e, 1).nnodes, 1);
    assert_int_equal(info(e, 2).nnodes, 1);
    assert_int_equal(info(e, 3).nnodes, 2);
    assert_true(running(e, 1) && running(e, 2) && running(e, 3));
    assert_false(running(e, 4));
    assert_string_equal(info(e, 4).reason, "larger than every compatible set of nodes");
    assert_int_equal(info(e, 4).estimate, BATCH_NEVER);
    assert_string_equal(batch_node_name(e, info(e, 3).nodes[0]), "small0");
    batch_engine_destroy(&e);
}

/* Classes partition the nodes (an unclassed node takes any class, after the
 * job's own class); down nodes take no work. */
static void test_classes_and_down(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 2, 4, 0, "gpu", "g");
    nodes(e, 2, 4, 0, NULL, "c");
    submit(e, (struct js){1, "a", 5, 4, 0, 100, 0, "gpu"}); /* 4 usable nodes: never */
    submit(e, (struct js){2, "a", 2, 4, 0, 100, 0, "gpu"});
    submit(e, (struct js){3, "a", 2, 4, 0, 100, 0, "batch"}); /* unclassed nodes only */
    submit(e, (struct js){4, "a", 1, 4, 0, 100, 0, "batch"});
    assert_int_equal(batch_node_set_up(e, batch_node_find(e, "c1"), false), 0);
    cycle(e, 0);
    assert_false(running(e, 1));
    assert_true(running(e, 2));
    for (int k = 0; k < 2; k++)
        assert_int_equal(batch_node_name(e, info(e, 2).nodes[k])[0], 'g');
    /* job 3 needs both unclassed nodes and one is down: it cannot run at all now,
     * so it holds no reservation and job 4 takes c0 */
    assert_false(running(e, 3));
    assert_string_equal(info(e, 3).reason, "larger than every compatible set of nodes");
    assert_true(running(e, 4));
    assert_string_equal(batch_node_name(e, info(e, 4).nodes[0]), "c0");
    assert_int_equal(batch_node_set_up(e, batch_node_find(e, "c1"), true), 0);
    cycle(e, 1);
    assert_false(running(e, 3));
    assert_int_equal(info(e, 3).reserved, 100);
    assert_int_equal(batch_node_set_up(e, 99, true), -1);
    batch_engine_destroy(&e);
}

static void test_hold_and_throttle(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    struct batch_cred_cfg *u = batch_config_cred(&c, BATCH_CRED_USER, "alice");
    assert_non_null(u);
    u->maxjob = 1;
    u = batch_config_cred(&c, BATCH_CRED_USER, "DEFAULT");
    u->maxproc = 2;
    struct batch_engine *e = eng(&c);
    batch_config_clear(&c);
    nodes(e, 8, 1, 0, NULL, "n");
    submit(e, (struct js){1, "alice", 1, 1, 0, 100, 0});
    submit(e, (struct js){2, "alice", 1, 1, 0, 100, 0});
    submit(e, (struct js){3, "bob", 2, 1, 0, 100, 0});
    submit(e, (struct js){4, "bob", 1, 1, 0, 100, 0});
    submit(e, (struct js){5, "carol", 1, 1, 0, 100, 0});
    assert_int_equal(batch_job_hold(e, 5, true), 0);
    cycle(e, 0);
    assert_true(running(e, 1));
    assert_false(running(e, 2));
    assert_string_equal(info(e, 2).reason, "throttled: user limit (MAXJOB/MAXPROC)");
    assert_true(running(e, 3));
    assert_false(running(e, 4)); /* bob: 2 + 1 processors > MAXPROC 2 (DEFAULT) */
    assert_false(running(e, 5));
    assert_string_equal(info(e, 5).reason, "held");
    assert_int_equal(batch_job_hold(e, 5, false), 0);
    assert_int_equal(batch_job_finish(e, 1, 50), 0);
    cycle(e, 50);
    assert_true(running(e, 2) && running(e, 5));
    assert_int_equal(batch_job_hold(e, 2, true), -1); /* running */
    assert_int_equal(errno, EINVAL);
    batch_engine_destroy(&e);
}

/* Priority: XFACTOR favours short jobs; class priority; diagnose -p factors. */
static void test_priority(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    c.w.xfactor = 100;
    c.w.class_ = 5;
    batch_config_cred(&c, BATCH_CRED_CLASS, "high")->priority = 1000;
    struct batch_engine *e = eng(&c);
    batch_config_clear(&c);
    nodes(e, 1, 1, 0, NULL, "n");
    submit(e, (struct js){1, "a", 1, 1, 0, 1000, 0}); /* runs first: the only job */
    cycle(e, 0);
    submit(e, (struct js){2, "a", 1, 1, 0, 6000, 0});
    submit(e, (struct js){3, "a", 1, 1, 0, 60, 60});
    submit(e, (struct js){4, "a", 1, 1, 0, 6000, 120, "high"});
    cycle(e, 600);
    struct batch_prio p;
    assert_int_equal(batch_priority_explain(e, 3, 600, &p), 0);
    assert_true(p.value[BATCH_F_QUEUETIME] > 8.99 && p.value[BATCH_F_QUEUETIME] < 9.01);
    assert_true(p.value[BATCH_F_XFACTOR] > 9.99 &&
                p.value[BATCH_F_XFACTOR] < 10.01); /* (540+60)/60 */
    assert_true(p.weight[BATCH_F_XFACTOR] == 100 && p.weight[BATCH_F_QUEUETIME] == 1);
    assert_true(p.total > 1008.99 && p.total < 1009.01);
    assert_int_equal(batch_priority_explain(e, 4, 600, &p), 0);
    assert_true(p.contrib[BATCH_F_CLASS] == 5000);
    assert_string_equal(batch_factor_name(BATCH_F_CLASS), "class");
    /* order: 4 (class), 3 (short), 2 */
    uint64_t ids[8];
    assert_int_equal(batch_job_ids(e, true, ids, 8), 3);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 2);
    assert_int_equal(batch_job_finish(e, 1, 700), 0);
    cycle(e, 700);
    assert_true(running(e, 4));
    assert_int_equal(batch_priority_explain(e, 99, 0, &p), -1);
    batch_engine_destroy(&e);
}

/* ---- reservations ---- */

static int resv(struct batch_engine *e, const char *name, const char *const *users, size_t nu,
                const uint64_t *jobs, size_t nj, const char *const *nn, size_t nnodes,
                int32_t tasks, int32_t procs, int64_t start, int64_t end, char *why)
{
    struct batch_resv_req r = {.name = name,
                               .tasks = tasks,
                               .per_task = {procs, 0, 0, 0},
                               .nodes = nn,
                               .nnodes = nnodes,
                               .start = start,
                               .end = end};
    r.acl.names[BATCH_CRED_USER] = users;
    r.acl.n[BATCH_CRED_USER] = nu;
    r.acl.jobs = jobs;
    r.acl.njobs = nj;
    char out[BATCH_NAME_MAX];
    why[0] = '\0';
    return batch_resv_create(e, &r, 0, out, sizeof out, why, 256);
}

/* A reservation's nodes go only to jobs its ACL admits (seed 3.1). */
static void test_resv_acl(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 2, 1, 0, NULL, "n");
    const char *alice[] = {"alice"}, *both[] = {"n0", "n1"};
    char why[256];
    assert_int_equal(resv(e, "R", alice, 1, NULL, 0, both, 2, 0, 0, 0, 1000, why), 0);
    submit(e, (struct js){1, "bob", 1, 1, 0, 100, 0});
    submit(e, (struct js){2, "alice", 1, 1, 0, 100, 0});
    submit(e, (struct js){3, "alice", 1, 1, 0, 2000, 0}); /* outlasts R: general nodes */
    cycle(e, 0);
    assert_false(running(e, 1));
    assert_true(running(e, 2));
    assert_string_equal(info(e, 2).resv, "R");
    assert_false(running(e, 3));
    assert_int_equal(info(e, 1).estimate, 1000);
    assert_int_equal(info(e, 3).estimate, 1000);
    assert_true(batch_resv_admits(e, "R", 2));
    assert_false(batch_resv_admits(e, "R", 1));
    struct batch_resv_info ri;
    assert_int_equal(batch_resv_find(e, "R", &ri), 0);
    assert_int_equal(ri.jobs_running, 1);
    assert_int_equal(batch_next_wakeup(e), 1000);
    /* at its end the reservation goes and the nodes are general again */
    assert_int_equal(batch_job_finish(e, 2, 100), 0);
    cycle(e, 1000);
    assert_true(running(e, 1) && running(e, 3));
    assert_int_equal(batch_resv_count(e), 0);
    batch_engine_destroy(&e);
}

/* B5: no two reservations share a node at the same time; refusals say why. */
static void test_resv_refusals(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 4, 2, 0, NULL, "n");
    const char *a01[] = {"n0", "n1"}, *a2[] = {"n2"}, *bad[] = {"n9"}, *dup[] = {"n3", "n3"};
    const uint64_t j42[] = {42}, j43[] = {43};
    char why[256];
    assert_int_equal(resv(e, "A", NULL, 0, NULL, 0, a01, 2, 0, 0, 100, 200, why), 0);
    /* 2 tasks of 2 procs from 150 to 250: n0, n1 are taken then, n2 and n3 are not */
    assert_int_equal(resv(e, "B", NULL, 0, j42, 1, NULL, 0, 2, 2, 150, 250, why), 0);
    struct batch_resv_info ri;
    assert_int_equal(batch_resv_find(e, "B", &ri), 0);
    assert_int_equal(ri.nnodes, 2);
    assert_int_equal(ri.bound_job, 42);
    assert_string_equal(batch_node_name(e, ri.nodes[0]), "n2");
    /* a reservation for another job on n2 at an overlapping time */
    assert_int_equal(resv(e, "C", NULL, 0, j43, 1, a2, 1, 0, 0, 160, 300, why), -1);
    assert_int_equal(errno, EBUSY);
    assert_string_equal(why, "node n2 is reserved by B (bound to job 42)");
    /* the same node after B is fine */
    assert_int_equal(resv(e, "C", NULL, 0, j43, 1, a2, 1, 0, 0, 250, 300, why), 0);
    assert_int_equal(resv(e, "D", NULL, 0, NULL, 0, NULL, 0, 3, 2, 120, 130, why), -1);
    assert_int_equal(errno, ENOSPC);
    assert_non_null(strstr(why, "only 2 of 3 tasks"));
    assert_int_equal(resv(e, "A", NULL, 0, NULL, 0, a2, 1, 0, 0, 500, 600, why), -1);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(resv(e, "E", NULL, 0, NULL, 0, bad, 1, 0, 0, 500, 600, why), -1);
    assert_string_equal(why, "no node named 'n9'");
    assert_int_equal(resv(e, "E", NULL, 0, NULL, 0, dup, 2, 0, 0, 500, 600, why), -1);
    assert_int_equal(resv(e, "E", NULL, 0, NULL, 0, a2, 1, 0, 0, 600, 500, why), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(resv(e, "E", NULL, 0, NULL, 0, a2, 1, 1, 1, 500, 600, why), -1);
    assert_int_equal(resv(e, "E", NULL, 0, NULL, 0, NULL, 0, 0, 0, 500, 600, why), -1);
    /* a generated name */
    char out[BATCH_NAME_MAX];
    struct batch_resv_req r = {.tasks = 1, .per_task = {1, 0, 0, 0}, .start = 2000, .duration = 10};
    assert_int_equal(batch_resv_create(e, &r, 0, out, sizeof out, why, sizeof why), 0);
    assert_int_equal(strncmp(out, "res.", 4), 0);
    /* showres: by reservation (start order) and by node */
    assert_int_equal(batch_resv_count(e), 4);
    assert_int_equal(batch_resv_get(e, 0, &ri), 0);
    assert_string_equal(ri.name, "A");
    assert_int_equal(batch_resv_get(e, 3, &ri), 0);
    assert_string_equal(ri.name, out);
    assert_int_equal(batch_resv_get(e, 4, &ri), -1);
    const char *names[4];
    assert_int_equal(batch_resv_on_node(e, batch_node_find(e, "n2"), names, 4), 2);
    assert_string_equal(names[0], "B");
    assert_string_equal(names[1], "C");
    assert_int_equal(batch_resv_release(e, "B"), 0);
    assert_int_equal(batch_resv_release(e, "B"), -1);
    assert_int_equal(batch_resv_on_node(e, batch_node_find(e, "n2"), names, 4), 1);
    batch_engine_destroy(&e);
    /* a node running a job past the start is not taken */
    e = eng(NULL);
    nodes(e, 1, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 1, 1, 0, 1000, 0});
    cycle(e, 0);
    const char *n0[] = {"n0"};
    assert_int_equal(resv(e, NULL, NULL, 0, NULL, 0, n0, 1, 0, 0, 700, 800, why), -1);
    assert_string_equal(why, "node n0 runs job 1 until 1000");
    assert_int_equal(resv(e, NULL, NULL, 0, NULL, 0, n0, 1, 0, 0, 1000, 1100, why), 0);
    batch_engine_destroy(&e);
}

/* B5's flag: a job bound to a reservation waits for it unless it may start early. */
static void test_early_start(void **state)
{
    (void)state;
    for (int early = 0; early < 2; early++) {
        struct batch_engine *e = eng(NULL);
        nodes(e, 2, 1, 0, NULL, "n");
        const char *n0[] = {"n0"};
        const uint64_t j7[] = {7};
        char why[256];
        assert_int_equal(resv(e, "M", NULL, 0, j7, 1, n0, 1, 0, 0, 500, 600, why), 0);
        submit(e, (struct js){7, "u", 1, 1, 0, 100, 0, NULL, early});
        cycle(e, 0);
        if (early) {
            assert_true(running(e, 7));
            assert_null(info(e, 7).resv);
        } else {
            assert_false(running(e, 7));
            assert_int_equal(info(e, 7).reserved, 500);
            assert_string_equal(info(e, 7).reason, "waiting for its admin reservation");
            assert_int_equal(batch_next_wakeup(e), 500);
            cycle(e, 500);
            assert_true(running(e, 7));
            assert_string_equal(info(e, 7).resv, "M");
            assert_string_equal(batch_node_name(e, info(e, 7).nodes[0]), "n0");
        }
        batch_engine_destroy(&e);
    }
}

/* Issue 25: early jobs bound to back-to-back reservations (what a metascheduler lays on
 * requested walltimes) start as soon as their reservation's nodes free up, pulling the
 * reservation forward; not over another reservation, not over a higher-priority job's
 * job reservation, and not without the early flag. */
static void release_bound(struct batch_engine *e, uint64_t id)
{
    for (size_t i = 0; i < batch_resv_count(e); i++) {
        struct batch_resv_info ri;
        assert_int_equal(batch_resv_get(e, i, &ri), 0);
        if (ri.bound_job == id) {
            char name[BATCH_NAME_MAX];
            snprintf(name, sizeof name, "%s", ri.name);
            assert_int_equal(batch_resv_release(e, name), 0);
            return;
        }
    }
}

static void test_early_start_pulls_its_reservation(void **state)
{
    (void)state;
    for (int early = 0; early < 2; early++) {
        struct batch_engine *e = eng(NULL);
        nodes(e, 2, 1, 0, NULL, "n");
        char why[256];
        /* jobs 1-6, 300 s each, reserved as a spool does: 1-2 now, 3-4 at 300, 5-6 at 600 */
        for (uint64_t id = 1; id <= 6; id++) {
            int64_t at = (int64_t)(id - 1) / 2 * 300;
            assert_int_equal(resv(e, NULL, NULL, 0, &id, 1, NULL, 0, 1, 1, at, at + 300, why), 0);
            submit(e, (struct js){id, "u", 1, 1, 0, 300, 0, NULL, early});
        }
        cycle(e, 0);
        assert_true(running(e, 1) && running(e, 2));
        release_bound(e, 1); /* the site releases a reservation once its job runs */
        release_bound(e, 2);
        assert_int_equal(batch_job_finish(e, 1, 2), 0);
        assert_int_equal(batch_job_finish(e, 2, 2), 0);
        cycle(e, 2);
        if (!early) { /* they wait for their reservations */
            assert_false(running(e, 3) || running(e, 4));
            assert_int_equal(info(e, 3).reserved, 300);
            batch_engine_destroy(&e);
            continue;
        }
        assert_true(running(e, 3) && running(e, 4));
        assert_false(running(e, 5) || running(e, 6)); /* 3's and 4's reservations are in the way */
        struct batch_resv_info ri;
        for (size_t i = 0; i < batch_resv_count(e); i++) {
            assert_int_equal(batch_resv_get(e, i, &ri), 0);
            if (ri.bound_job == 3) /* pulled forward to the start, on the job's node */
                assert_true(ri.start == 2 && ri.nodes[0] == info(e, 3).nodes[0]);
        }
        release_bound(e, 3);
        release_bound(e, 4);
        assert_int_equal(batch_job_finish(e, 3, 4), 0);
        cycle(e, 4); /* 4 still runs: only 5 or 6, the one whose node is free */
        assert_true(running(e, 5) != running(e, 6));
        assert_int_equal(batch_job_finish(e, 4, 5), 0);
        cycle(e, 5);
        assert_true(running(e, 5) && running(e, 6));
        batch_engine_destroy(&e);
    }
    /* a higher-priority job's job reservation on the nodes holds the early job back */
    struct batch_engine *e = eng(NULL);
    nodes(e, 2, 1, 0, NULL, "n");
    char why[256];
    submit(e, (struct js){1, "u", 1, 1, 0, 100, 0});
    cycle(e, 0);                                     /* 1 runs on one node until 100 */
    submit(e, (struct js){2, "u", 2, 1, 0, 100, 1}); /* both nodes: reserved at 100 */
    const uint64_t j3[] = {3};
    const char *other[1] = {!strcmp(batch_node_name(e, info(e, 1).nodes[0]), "n0") ? "n1" : "n0"};
    assert_int_equal(resv(e, "G", NULL, 0, j3, 1, other, 1, 0, 0, 400, 700, why), 0);
    submit(e, (struct js){3, "v", 1, 1, 0, 300, 2, NULL, true});
    cycle(e, 2);
    assert_false(running(e, 3)); /* 2 needs that node from 100 */
    assert_int_equal(info(e, 2).reserved, 100);
    assert_int_equal(batch_job_finish(e, 1, 50), 0);
    cycle(e, 50); /* 2 starts at once; 3 then has no free node until 150 */
    assert_true(running(e, 2));
    assert_false(running(e, 3));
    assert_int_equal(batch_job_finish(e, 2, 60), 0);
    cycle(e, 60);
    assert_true(running(e, 3));
    batch_engine_destroy(&e);
}

/* B6: estimates are the ranges of feasible starts in the current plan. */
static void test_estimate(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 4, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 2, 1, 0, 100, 0});
    cycle(e, 0); /* job 1 holds two nodes until 100 */
    const char *free2[2];
    int k = 0;
    for (int32_t n = 0; n < 4; n++)
        if (n != info(e, 1).nodes[0] && n != info(e, 1).nodes[1])
            free2[k++] = batch_node_name(e, n);
    char why[256];
    assert_int_equal(resv(e, "R", NULL, 0, NULL, 0, free2, 2, 0, 0, 200, 300, why), 0);
    struct batch_request rq = {.tasks = 1, .per_task = {1, 0, 0, 0}};
    struct batch_window w[8];
    /* one node for 150 s: the free pair until 50 (then R at 200), any from 100 */
    assert_int_equal(batch_estimate(e, &rq, 150, 0, w, 8), 2);
    assert_int_equal(w[0].from, 0);
    assert_int_equal(w[0].to, 50);
    assert_int_equal(w[1].from, 100);
    assert_int_equal(w[1].to, BATCH_NEVER);
    /* three nodes for 50 s: from 100 to 150, then from 300 */
    rq.tasks = 3;
    assert_int_equal(batch_estimate(e, &rq, 50, 0, w, 8), 2);
    assert_int_equal(w[0].from, 100);
    assert_int_equal(w[0].to, 150);
    assert_int_equal(w[1].from, 300);
    /* five nodes: never */
    rq.tasks = 5;
    assert_int_equal(batch_estimate(e, &rq, 50, 0, w, 8), 0);
    rq.tasks = 0;
    assert_int_equal(batch_estimate(e, &rq, 50, 0, w, 8), 0);
    assert_int_equal(errno, EINVAL);
    /* a request R admits may use R's nodes inside R's time */
    batch_engine_destroy(&e);
    e = eng(NULL);
    nodes(e, 1, 1, 0, NULL, "n");
    const char *n0[] = {"n0"}, *alice[] = {"alice"};
    assert_int_equal(resv(e, "R", alice, 1, NULL, 0, n0, 1, 0, 0, 100, 200, why), 0);
    rq.tasks = 1;
    assert_int_equal(batch_estimate(e, &rq, 50, 0, w, 8), 2); /* [0,50] and [200,...) */
    rq.cred[BATCH_CRED_USER] = "alice"; /* R's nodes, while the job fits inside R */
    assert_int_equal(batch_estimate(e, &rq, 50, 0, w, 8), 3);
    assert_int_equal(w[1].from, 100);
    assert_int_equal(w[1].to, 150);
    assert_int_equal(w[2].from, 200);
    batch_engine_destroy(&e);
}

static void test_bad_calls(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    c.fsdepth = 0;
    assert_null(batch_engine_new(&c));
    assert_int_equal(errno, EINVAL);
    struct batch_engine *e = eng(NULL);
    struct batch_node_spec ns = {.name = "n0", .cap = {1, 0, 0, 0}};
    assert_int_equal(batch_node_add(e, &ns), 0);
    assert_int_equal(batch_node_add(e, &ns), -1);
    assert_int_equal(errno, EEXIST);
    ns.cap.procs = 0;
    strcpy(ns.name, "n1");
    assert_int_equal(batch_node_add(e, &ns), -1);
    struct batch_job_spec s = {.id = 1, .tasks = 1, .per_task = {1, 0, 0, 0}, .walltime = 0};
    assert_int_equal(batch_job_submit(e, &s), -1);
    assert_int_equal(errno, EINVAL);
    s.walltime = 10;
    s.tasks = 0;
    assert_int_equal(batch_job_submit(e, &s), -1);
    s.tasks = 1;
    memset(s.user, 'x', sizeof s.user); /* not terminated */
    assert_int_equal(batch_job_submit(e, &s), -1);
    s.user[0] = '\0';
    assert_int_equal(batch_job_submit(e, &s), 0);
    assert_int_equal(batch_job_submit(e, &s), -1);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(batch_job_finish(e, 2, 0), -1);
    assert_int_equal(errno, ENOENT);
    /* a pending job can be withdrawn */
    assert_int_equal(batch_job_finish(e, 1, 0), 0);
    assert_int_equal(batch_job_count(e), 0);
    struct batch_job_info i;
    assert_int_equal(batch_job_info(e, 1, &i), -1);
    cycle(e, 5);
    cycle(e, 3); /* time never goes back */
    batch_engine_destroy(&e);
    batch_engine_destroy(&e); /* NULL-safe */
}

/* The backfill memo (cycle.c): jobs that could not start at the last cycle are
 * skipped while nothing gave capacity back; a hold released, a node brought up, a
 * job ending early, a reservation released or a reservation's start coming must
 * each make them candidates again. Default config: EASY, FIRSTFIT. */
static void test_backfill_memo(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c); /* no estimates: the cycles are the plain ones */
    struct batch_engine *e = eng(&c);
    nodes(e, 4, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 3, 1, 0, 100, 0});
    submit(e, (struct js){2, "u", 2, 1, 0, 10, 0});
    submit(e, (struct js){3, "u", 1, 1, 0, 10, 0});
    assert_int_equal(batch_job_hold(e, 3, true), 0);
    cycle(e, 0); /* 1 runs on 3 nodes; 2 needs 2 of the 1 free (reserved at 100);
                  * 3, behind it, would backfill but is held */
    assert_true(running(e, 1));
    assert_false(running(e, 2));
    assert_false(running(e, 3));
    assert_int_equal(info(e, 2).reserved, 100);
    submit(e, (struct js){4, "u", 2, 1, 0, 10, 1});
    cycle(e, 1); /* only job 4 is new, and it does not fit either */
    assert_false(running(e, 2));
    assert_false(running(e, 4));
    assert_int_equal(batch_job_hold(e, 3, false), 0);
    cycle(e, 2); /* released: backfills the free node although it is an old job */
    assert_true(running(e, 3));
    assert_int_equal(info(e, 3).start, 2);
    /* job 1 ends early: 3 free nodes; 2 (2 nodes) starts, then 4 waits for 1 node */
    assert_int_equal(batch_job_finish(e, 1, 5), 0);
    cycle(e, 5);
    assert_true(running(e, 2));
    assert_false(running(e, 4));
    /* a node that comes back up is room for an old job */
    assert_int_equal(batch_job_finish(e, 3, 12), 0);
    int32_t down = 0; /* a node job 2 does not use */
    while (down == info(e, 2).nodes[0] || down == info(e, 2).nodes[1])
        down++;
    assert_int_equal(batch_node_set_up(e, down, false), 0);
    cycle(e, 12); /* free: one up node; 4 needs 2 */
    assert_false(running(e, 4));
    assert_int_equal(batch_node_set_up(e, down, true), 0);
    cycle(e, 13);
    assert_true(running(e, 4));
    assert_int_equal(info(e, 4).start, 13);
    batch_engine_destroy(&e);

    /* an admin reservation released gives its nodes back to old jobs */
    e = eng(&c);
    nodes(e, 2, 1, 0, NULL, "n");
    char why[256];
    const char *all[2] = {"n0", "n1"};
    const char *users[1] = {"nobody"};
    assert_int_equal(resv(e, "R", users, 1, NULL, 0, all, 2, 0, 0, 0, 1000, why), 0);
    submit(e, (struct js){1, "u", 1, 1, 0, 10, 0});
    cycle(e, 0);
    submit(e, (struct js){2, "u", 1, 1, 0, 10, 1});
    cycle(e, 1);
    assert_false(running(e, 1));
    assert_int_equal(batch_resv_release(e, "R"), 0);
    cycle(e, 2);
    assert_true(running(e, 1));
    assert_true(running(e, 2));
    batch_engine_destroy(&e);

    /* a job reservation's time comes: the job starts on its nodes and the job
     * behind it runs when they free again */
    e = eng(&c);
    nodes(e, 2, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 1, 1, 0, 50, 0});
    cycle(e, 0); /* 1 runs until 50 */
    submit(e, (struct js){2, "u", 2, 1, 0, 20, 1});
    submit(e, (struct js){3, "u", 1, 1, 0, 60, 1});
    cycle(e, 1); /* 2 reserved at 50..70; 3 (60 s) does not fit before 50 */
    assert_int_equal(info(e, 2).reserved, 50);
    assert_false(running(e, 3));
    assert_int_equal(batch_job_finish(e, 1, 50), 0);
    cycle(e, 50); /* 2 starts at its reservation; 3 still waits (no node) */
    assert_true(running(e, 2));
    assert_false(running(e, 3));
    assert_int_equal(batch_job_finish(e, 2, 70), 0);
    cycle(e, 70);
    assert_true(running(e, 3));
    batch_engine_destroy(&e);
}

/* The FIRSTFIT walk after a replan passes over jobs wider than the free nodes by a
 * slot -> need table, and the queue is compacted from the first position a job
 * started at: a job in a reused slot (of a cancelled wide job) must still be
 * backfilled, a job started behind waiting ones must leave the queue without
 * disturbing them, and a start takes the lowest free nodes of a bitmap word
 * whether it needs few of them or most. */
static void test_walk_and_slots(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    struct batch_engine *e = eng(&c);
    nodes(e, 8, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 2, 1, 0, 100, 0}); /* 2 of 8 free: n0 n1 */
    submit(e, (struct js){2, "u", 5, 1, 0, 200, 0}); /* 5 of 6 free: n2..n6 */
    submit(e, (struct js){3, "u", 4, 1, 0, 10, 0});  /* head: reserved at 200 */
    submit(e, (struct js){4, "u", 3, 1, 0, 10, 0});  /* wider than the free node */
    submit(e, (struct js){5, "u", 1, 1, 0, 50, 0});  /* backfills n7 */
    cycle(e, 0);
    struct batch_job_info i1 = info(e, 1), i2 = info(e, 2);
    assert_int_equal(i1.nnodes, 2);
    assert_int_equal(i1.nodes[0], 0);
    assert_int_equal(i1.nodes[1], 1);
    assert_int_equal(i2.nnodes, 5);
    for (int k = 0; k < 5; k++)
        assert_int_equal(i2.nodes[k], 2 + k);
    assert_true(running(e, 5));
    assert_int_equal(info(e, 5).nodes[0], 7);
    assert_int_equal(info(e, 3).reserved, 200);
    assert_false(running(e, 4));
    assert_int_equal(batch_job_finish(e, 4, 1), 0); /* cancelled: its slot is free */
    submit(e, (struct js){6, "u", 1, 1, 0, 20, 1}); /* takes that slot */
    cycle(e, 1);                                    /* nothing free */
    assert_false(running(e, 6));
    assert_int_equal(batch_job_finish(e, 5, 10), 0); /* early: replan, full walk */
    cycle(e, 10);
    assert_true(running(e, 6));
    assert_int_equal(info(e, 6).start, 10);
    assert_int_equal(info(e, 6).nodes[0], 7);
    assert_int_equal(info(e, 3).reserved, 200);
    assert_int_equal(batch_job_finish(e, 6, 30), 0);
    assert_int_equal(batch_job_finish(e, 1, 100), 0);
    cycle(e, 100);
    assert_false(running(e, 3)); /* 3 free of 4 until 200 */
    assert_int_equal(batch_job_finish(e, 2, 200), 0);
    cycle(e, 200);
    assert_true(running(e, 3));
    struct batch_job_info i3 = info(e, 3);
    assert_int_equal(i3.nnodes, 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(i3.nodes[k], k);
    batch_engine_destroy(&e);
}

/* A start records only its nodes' bitmap words; the node list is written when it is
 * asked for. It must come out right after the groups changed (a busy node went
 * down), and a reservation must see nodes whose list was never asked for. */
static void test_lazy_nodes(void **state)
{
    (void)state;
    struct batch_config c;
    batch_config_defaults(&c);
    struct batch_engine *e = eng(&c);
    nodes(e, 4, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 2, 1, 0, 100, 0});
    submit(e, (struct js){2, "u", 1, 1, 0, 100, 0});
    cycle(e, 0); /* no batch_job_info yet: both lists are still unwritten */
    assert_int_equal(batch_node_set_up(e, 0, false), 0); /* n0 (job 1's) fails */
    cycle(e, 1); /* regroups: n0 leaves the group, positions shift */
    struct batch_job_info a = info(e, 1), b = info(e, 2);
    assert_int_equal(a.nnodes, 2);
    assert_int_equal(b.nnodes, 1);
    assert_int_equal(a.nodes[0], 0);
    assert_int_equal(a.nodes[1], 1);
    assert_int_equal(b.nodes[0], 2);
    /* n3 is the only free up node: a 1-node job starts there, a 2-node one waits */
    submit(e, (struct js){3, "u", 2, 1, 0, 10, 1});
    submit(e, (struct js){4, "u", 1, 1, 0, 10, 1});
    cycle(e, 2);
    assert_false(running(e, 3));
    assert_true(running(e, 4));
    assert_int_equal(info(e, 4).nodes[0], 3);
    batch_engine_destroy(&e);

    /* a reservation over nodes whose lists were never asked for */
    e = eng(&c);
    nodes(e, 2, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 1, 1, 0, 100, 0});
    cycle(e, 0);
    char why[256];
    const char *all[2] = {"n0", "n1"};
    assert_int_equal(resv(e, "R", NULL, 0, NULL, 0, all, 2, 0, 0, 10, 20, why), -1);
    assert_non_null(strstr(why, "runs job 1"));
    batch_engine_destroy(&e);
}

/* A node's record of its job is only a hint once the job ended: a reservation or
 * an adopted job may take the node, a running job's node stays refused. */
static void test_node_after_job(void **state)
{
    (void)state;
    struct batch_engine *e = eng(NULL);
    nodes(e, 2, 1, 0, NULL, "n");
    submit(e, (struct js){1, "u", 2, 1, 0, 100, 0});
    cycle(e, 0);
    assert_true(running(e, 1));
    char why[256];
    const char *n0[1] = {"n0"};
    assert_int_equal(resv(e, "R", NULL, 0, NULL, 0, n0, 1, 0, 0, 10, 20, why), -1);
    assert_non_null(strstr(why, "runs job 1"));
    assert_int_equal(batch_job_finish(e, 1, 5), 0);
    assert_int_equal(resv(e, "R", NULL, 0, NULL, 0, n0, 1, 0, 0, 10, 20, why), 0);
    /* slot reused by a job on other nodes: n0 is still free for adoption */
    struct batch_job_spec s = {.id = 7, .tasks = 1, .per_task = {1, 0, 0, 0}, .walltime = 50};
    int32_t nn[1] = {1};
    assert_int_equal(batch_job_adopt(e, &s, nn, 1, 0), 0);
    s.id = 8;
    assert_int_equal(batch_job_adopt(e, &s, nn, 1, 0), -1); /* n1 busy with 7 */
    assert_int_equal(errno, EINVAL);
    nn[0] = 0;
    assert_int_equal(batch_job_adopt(e, &s, nn, 1, 0), 0);
    cycle(e, 6);
    assert_true(running(e, 7));
    assert_true(running(e, 8));
    batch_engine_destroy(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_classes_and_down),
        cmocka_unit_test(test_hold_and_throttle),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_resv_acl),
        cmocka_unit_test(test_resv_refusals),
        cmocka_unit_test(test_early_start),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_bad_calls),
        cmocka_unit_test(test_backfill_memo),
        cmocka_unit_test(test_node_after_job),
        cmocka_unit_test(test_lazy_nodes),
        cmocka_unit_test(test_walk_and_slots),
        cmocka_unit_test(test_early_start_pulls_its_reservation),
    };
    return cmocka_run_group_tests_name("batch_engine", tests, NULL, NULL);
}

/*
 * test_sessions.c - forgetting idle sessions and the per-address cap (sessions.c) over
 * a struct cluster built in memory around a real store in a temporary directory: which
 * sessions are idle, the compaction remapping node indices held by tasks, the lookups
 * after it, the cap replacing the oldest idle session, and the deletions surviving a
 * reload.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "store/store.h"

struct fixture {
    char dir[64];
    struct cluster c;
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int open_state(struct fixture *f)
{
    char err[512];
    struct cluster *c = &f->c;
    struct store_opts so = {"cluster", cluster_store_tables, STORE_SYNC_NONE, 0, false};
    if (!(c->store = store_open(f->dir, &so, err, sizeof err)))
        return -1;
    cluster_store_find_tables(c);
    return cluster_load(c);
}

static int setup(void **state)
{
    char err[512];
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    log_init("test", LOG_LEVEL_WARN);
    snprintf(f->dir, sizeof f->dir, "/tmp/gridnode-test-sessions-XXXXXX");
    if (!mkdtemp(f->dir) ||
        config_load(cluster_keys, &f->c.cfg, NULL, NULL, 0, err, sizeof err) < 0) {
        free(f);
        return -1;
    }
    *state = f;
    return open_state(f);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    cluster_free_state(&f->c);
    store_close(&f->c.store);
    nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* A session from ip, last heard from age_s ago, active or not, as HELLO registers it. */
static uint32_t add_node(struct cluster *c, const char *name, const char *ip, bool active,
                         int64_t age_s)
{
    struct node *n = cluster_node_new(c);
    assert_non_null(n);
    snprintf(n->sid, sizeof n->sid, "sid-%s", name);
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->ip, sizeof n->ip, "%s", ip);
    n->cores = n->slots = 1;
    n->active = active;
    n->last_ms = wall_now_ms() - age_s * 1000;
    assert_int_equal(cluster_node_register(c), 0);
    assert_int_equal(sessions_attach(c, c->nnodes - 1), 0);
    cluster_mark_node(c, &c->nodes[c->nnodes - 1]);
    return c->nnodes - 1;
}

static struct node *find(struct cluster *c, const char *sid)
{
    return cluster_node_find(c, sid, strlen(sid));
}

static void commit(struct cluster *c)
{
    assert_int_equal(cluster_save_dirty(c), 0);
    assert_int_equal(store_commit(c->store), 0);
}

/* A job of 4 tasks: done by a, b and d, the last one issued to c. */
static struct job *add_job(struct cluster *c)
{
    static const char *argv[] = {"true"};
    struct job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->id = c->next_job++;
    j->name = strdup("t");
    j->user = strdup("u");
    j->argv = calloc(2, sizeof *j->argv);
    j->argv[0] = strdup(argv[0]);
    j->argc = 1;
    j->ntasks = j->next_new = 4;
    j->state = JS_RUNNING;
    assert_int_equal(job_grow_tasks(j, 4), 0);
    assert_int_equal(cluster_job_add(c, j), 0);
    return j;
}

static void test_idle_sessions_forgotten_and_indices_remapped(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    c->cfg.forget_after_s = 60;
    uint32_t a = add_node(c, "a", "10.0.0.1", true, 0);
    uint32_t b = add_node(c, "b", "10.0.0.1", false, 120);  /* idle, old: goes */
    uint32_t cc = add_node(c, "c", "10.0.0.2", false, 120); /* holds a task: stays */
    uint32_t d = add_node(c, "d", "10.0.0.2", false, 10);   /* idle, recent: stays */
    struct job *j = add_job(c);
    uint32_t owner[4] = {a, b, d, cc};
    for (uint32_t i = 0; i < 4; i++) {
        j->tasks[i].node = owner[i];
        j->tasks[i].state = i < 3 ? TS_DONE : TS_ISSUED;
    }
    c->nodes[cc].inflight = 1;
    commit(c);
    sessions_sweep(c); /* 1 of 4 gone: compacted at once */
    commit(c);
    assert_int_equal(c->nnodes, 3);
    assert_int_equal(c->ngone, 0);
    assert_null(find(c, "sid-b"));
    assert_string_equal(find(c, "sid-a")->name, "a");
    assert_string_equal(find(c, "sid-c")->name, "c");
    assert_string_equal(find(c, "sid-d")->name, "d");
    /* the tasks follow their nodes; the forgotten one's done task names no node */
    assert_int_equal(j->tasks[0].node, (uint32_t)(find(c, "sid-a") - c->nodes));
    assert_int_equal(j->tasks[1].node, UINT32_MAX);
    assert_int_equal(j->tasks[2].node, (uint32_t)(find(c, "sid-d") - c->nodes));
    assert_int_equal(j->tasks[3].node, (uint32_t)(find(c, "sid-c") - c->nodes));
    /* the record is gone from the store too */
    cluster_free_state(c);
    assert_int_equal(cluster_load(c), 0);
    assert_int_equal(c->nnodes, 3);
    assert_null(find(c, "sid-b"));
    assert_non_null(find(c, "sid-d"));
}

static void test_cap_replaces_the_oldest_idle_session(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    char why[300];
    c->cfg.max_sessions_per_address = 3;
    c->cfg.forget_after_s = 0;
    add_node(c, "a", "10.0.0.1", true, 0);
    add_node(c, "b", "10.0.0.1", true, 0);
    add_node(c, "c", "10.0.0.1", true, 0);
    add_node(c, "x", "10.0.0.9", false, 999); /* another address: never touched */
    assert_int_equal(sessions_admit(c, "10.0.0.2", why, sizeof why), 0);
    assert_int_equal(sessions_admit(c, "10.0.0.1", why, sizeof why), -1);
    assert_non_null(strstr(why, "10.0.0.1"));
    assert_non_null(strstr(why, "max_sessions_per_address"));
    find(c, "sid-b")->active = false;
    find(c, "sid-c")->active = false;
    find(c, "sid-c")->inflight = 2; /* holds work: never replaced */
    assert_int_equal(sessions_admit(c, "10.0.0.1", why, sizeof why), 0);
    assert_null(find(c, "sid-b"));
    assert_non_null(find(c, "sid-c"));
    assert_int_equal(c->ngone, 1);
    add_node(c, "e", "10.0.0.1", true, 0); /* takes b's place in the count */
    assert_int_equal(sessions_admit(c, "10.0.0.1", why, sizeof why), -1);
    commit(c);
    sessions_sweep(c); /* compacts: 1 of 5 gone */
    assert_int_equal(c->nnodes, 4);
    assert_int_equal(sessions_admit(c, "10.0.0.1", why, sizeof why), -1);
    assert_non_null(find(c, "sid-x"));
    c->cfg.max_sessions_per_address = 0; /* no cap */
    assert_int_equal(sessions_admit(c, "10.0.0.1", why, sizeof why), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_idle_sessions_forgotten_and_indices_remapped),
        T(test_cap_replaces_the_oldest_idle_session),
    };
    return cmocka_run_group_tests_name("sessions", tests, NULL, NULL);
}

/*
 * test_cluster_policy.c - the cluster's pure policy and its task bookkeeping, without
 * sockets: work and wait estimates, the command template, and - over a struct cluster
 * built in memory around a real store in a temporary directory - issuing (X3),
 * re-issue of expired tasks (X4), results, heartbeats extending tasks, nodes leaving,
 * and the state surviving a reload.
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
#include <unistd.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/app.h"
#include "roles/cluster/cluster.h"
#include "store/store.h"

#define MAX_TASKS 1024

/* The cluster's tables, as cluster.c opens them. */
struct fixture {
    char dir[64];
    struct cluster c;
};

/* One task as a node receives it. */
struct tk {
    uint64_t job;
    uint32_t idx, issue;
    char argv[3][64];
    uint32_t argc;
    size_t stdin_len;
    char stdin_data[64];
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
    if (!(c->store = store_open(f->dir, &so, err, sizeof err))) {
        fprintf(stderr, "store_open: %s\n", err);
        return -1;
    }
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
    snprintf(f->dir, sizeof f->dir, "/tmp/gridnode-test-cluster-XXXXXX");
    if (!mkdtemp(f->dir) ||
        config_load(cluster_keys, &f->c.cfg, NULL, NULL, 0, err, sizeof err) < 0) {
        free(f);
        return -1;
    }
    snprintf(f->c.cfg.state_dir, sizeof f->c.cfg.state_dir, "%s", f->dir);
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

/* ---- building the state ---- */

/* A job of n tasks running argv (NULL-terminated), as h_submit would make it. */
static struct job *add_job(struct cluster *c, uint32_t n, const char *const *argv)
{
    struct job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    while (argv[j->argc])
        j->argc++;
    j->argv = calloc(j->argc + 1, sizeof *j->argv);
    assert_non_null(j->argv);
    for (uint32_t i = 0; i < j->argc; i++)
        j->argv[i] = strdup(argv[i]);
    j->id = c->next_job++;
    j->name = strdup("test");
    j->user = strdup("tester");
    j->ntasks = n;
    j->complexity = 1;
    j->limit_s = 3600;
    j->state = JS_QUEUED;
    j->issuable = true; /* as after the commit of the SUBMIT turn */
    j->submitted_ms = wall_now_ms();
    assert_int_equal(cluster_job_add(c, j), 0);
    c->meta_dirty = true;
    cluster_mark_job(c, j);
    return j;
}

static const char *const true_argv[] = {"true", NULL};

/* Registers a node; returns its index (node pointers move when the table grows). */
static uint32_t add_node(struct cluster *c, const char *name)
{
    struct node *n = cluster_node_new(c);
    assert_non_null(n);
    snprintf(n->sid, sizeof n->sid, "sid-%s", name);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->cores = n->slots = 1;
    n->active = true;
    assert_int_equal(cluster_node_register(c), 0);
    cluster_mark_node(c, &c->nodes[c->nnodes - 1]);
    return c->nnodes - 1;
}

static void commit(struct cluster *c)
{
    assert_int_equal(cluster_save_dirty(c), 0);
    assert_int_equal(store_commit(c->store), 0);
}

/* Asks for want tasks for node ni, as a TASKS reply validated by its descriptor. */
static uint32_t issue(struct cluster *c, uint32_t ni, uint32_t want, struct tk *out)
{
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    uint32_t count = 99;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_TASKS, 1, 3);
    assert_int_equal(tasks_issue(c, &c->nodes[ni], want, &wb, &count), 0);
    wire_put_bool(&wb, "more", true);
    wire_put_u64(&wb, "wait_s", 0);
    if (wire_decode(wb.sb.data, wb.sb.size, false, &m, &e) < 0)
        fail_msg("TASKS reply invalid: %s", e.text);
    const msgpack_object *arr = wire_get(m.root, "tasks");
    assert_int_equal(arr->via.array.size, count);
    assert_true(count <= want);
    for (uint32_t i = 0; i < count && out; i++) {
        const msgpack_object *t = &arr->via.array.ptr[i], *argv = wire_get(t, "argv");
        struct tk *k = &out[i];
        memset(k, 0, sizeof *k);
        k->job = wire_get_u64(t, "job", 0);
        k->idx = (uint32_t)wire_get_u64(t, "idx", 0);
        k->issue = (uint32_t)wire_get_u64(t, "issue", 0);
        k->argc = argv->via.array.size;
        for (uint32_t a = 0; a < k->argc && a < 3; a++)
            snprintf(k->argv[a], sizeof k->argv[a], "%.*s",
                     (int)argv->via.array.ptr[a].via.str.size, argv->via.array.ptr[a].via.str.ptr);
        const void *in = wire_get_bin(t, "stdin", &k->stdin_len);
        if (in && k->stdin_len < sizeof k->stdin_data)
            memcpy(k->stdin_data, in, k->stdin_len);
    }
    wire_msg_free(&m);
    wire_buf_free(&wb);
    return count;
}

/* Node ni reports a result: exit code, or a node-side error when error != NULL. */
static int result(struct cluster *c, uint32_t ni, uint64_t job, uint32_t idx, uint32_t iss,
                  int64_t exit_code, const char *error, double wall_s)
{
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESULT, 2, 3);
    wire_put_str(&wb, "sid", c->nodes[ni].sid);
    wire_put_u64(&wb, "want", 0);
    wire_put_key(&wb, "results");
    wire_pack_array(&wb, 1);
    wire_pack_map(&wb, error ? 8 : 7);
    wire_put_u64(&wb, "job", job);
    wire_put_u64(&wb, "idx", idx);
    wire_put_u64(&wb, "issue", iss);
    wire_put_i64(&wb, "exit", exit_code);
    wire_put_f64(&wb, "wall_s", wall_s);
    wire_put_bin(&wb, "stdout", "out", 3);
    wire_put_bin(&wb, "stderr", "", 0);
    if (error)
        wire_put_str(&wb, "error", error);
    if (wire_decode(wb.sb.data, wb.sb.size, true, &m, &e) < 0)
        fail_msg("RESULT invalid: %s", e.text);
    const msgpack_object *res = wire_get(m.root, "results");
    int rc = tasks_result(c, &c->nodes[ni], &res->via.array.ptr[0]);
    wire_msg_free(&m);
    wire_buf_free(&wb);
    return rc;
}

/* Makes every issue from now on expire after a few milliseconds. */
static void short_waits(struct cluster *c)
{
    c->cfg.default_estimate_s = 0.001;
    c->cfg.min_wait_s = 0;
}

static void let_expire(void)
{
    usleep(30 * 1000);
}

/* ---- pure functions ---- */

static void test_tasks_work(void **state)
{
    (void)state;
    struct job j = {0};
    j.complexity = 0; /* unset: one unit */
    assert_true(tasks_work(&j, 0, 1024) == 1.0);
    j.complexity = 2;
    assert_true(tasks_work(&j, 0, 1024) == 2.0);
    assert_true(tasks_work(&j, 512 * 1024, 1024) == 3.0); /* half an input unit more */
    assert_true(tasks_work(&j, 2048 * 1024, 1024) == 6.0);
    assert_true(tasks_work(&j, 1024, 1) == 4.0);
    assert_true(tasks_work(&j, 512 * 1024, 0) == 3.0); /* bad unit: 1024 KiB */
    assert_true(tasks_work(&j, 512 * 1024, -5) == 3.0);
    j.complexity = -1;
    assert_true(tasks_work(&j, 0, 1024) == 1.0);
}

static void test_wait_ms(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct node n = {0};
    c->cfg.k_wait = 3;
    c->cfg.default_estimate_s = 60;
    c->cfg.min_wait_s = 5;
    c->global_spu = 0;
    assert_int_equal(tasks_wait_ms(c, &n, 1.0), 180000);   /* default estimate */
    assert_int_equal(tasks_wait_ms(c, NULL, 2.0), 360000); /* no node: the same */
    c->global_spu = 2;
    assert_int_equal(tasks_wait_ms(c, &n, 1.0), 6000); /* global measurement */
    assert_int_equal(tasks_wait_ms(c, NULL, 1.0), 6000);
    n.spu = 10;
    assert_int_equal(tasks_wait_ms(c, &n, 1.0), 30000); /* the node's own */
    n.spu = 0.5;
    assert_int_equal(tasks_wait_ms(c, &n, 1.0), 5000); /* 1.5 s, clamped to min_wait */
    assert_int_equal(tasks_wait_ms(c, &n, 0.0), 5000);
    c->cfg.min_wait_s = 0;
    assert_int_equal(tasks_wait_ms(c, &n, 1.0), 1500);
    assert_int_equal(tasks_wait_ms(c, &n, 0.0), 0);
}

static void expect_expand(const char *in, uint64_t job, uint32_t idx, uint32_t n, const char *want)
{
    char *out = app_expand(in, job, idx, n);
    assert_non_null(out);
    assert_string_equal(out, want);
    free(out);
}

static void test_app_expand(void **state)
{
    (void)state;
    expect_expand("", 1, 2, 3, "");
    expect_expand("plain", 1, 2, 3, "plain");
    expect_expand("{i}", 1, 2, 3, "2");
    expect_expand("{n}", 1, 2, 3, "3");
    expect_expand("{job}", 18446744073709551615ull, 0, 0, "18446744073709551615");
    expect_expand("in-{i}-of-{n}.{job}", 7, 4294967295u, 10, "in-4294967295-of-10.7");
    expect_expand("{i}{i}{i}", 1, 12, 3, "121212");
    expect_expand("{{i}}", 1, 5, 3, "{5}");
    expect_expand("{i", 1, 5, 3, "{i");
    expect_expand("{I} {x} {jo} i}", 1, 5, 3, "{I} {x} {jo} i}");
    expect_expand("{job}{", 9, 0, 0, "9{");
    /* long strings and many expansions: the buffer grows */
    size_t reps = 5000;
    char *in = malloc(reps * 5 + 1), *want = malloc(reps * 20 + 1);
    assert_non_null(in);
    assert_non_null(want);
    in[0] = want[0] = '\0';
    for (size_t i = 0; i < reps; i++) {
        strcat(in, i % 2 ? "{job}" : "{i}");
        strcat(want, i % 2 ? "123456789012" : "4000000000");
    }
    expect_expand(in, 123456789012ull, 4000000000u, 1, want);
    memset(in, 'a', reps * 5);
    in[reps * 5] = '\0';
    expect_expand(in, 1, 1, 1, in);
    free(in);
    free(want);
}

/* ---- issuing ---- */

static void test_new_in_job_order(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[MAX_TASKS];
    struct job *j1 = add_job(c, 3, true_argv), *j2 = add_job(c, 2, true_argv);
    uint32_t a = add_node(c, "a");
    commit(c);
    assert_int_equal(issue(c, a, 4, t), 4);
    static const uint32_t want_idx[] = {0, 1, 2, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t[i].job, i < 3 ? j1->id : j2->id);
        assert_int_equal(t[i].idx, want_idx[i]);
        assert_int_equal(t[i].issue, 1);
        assert_string_equal(t[i].argv[0], "true");
    }
    assert_int_equal(j1->state, JS_RUNNING);
    assert_int_equal(j1->next_new, 3);
    assert_int_equal(j2->next_new, 1);
    assert_int_equal(c->nodes[a].inflight, 4);
    assert_int_equal(issue(c, a, 4, t), 1);
    assert_int_equal(t[0].job, j2->id);
    assert_int_equal(t[0].idx, 1);
    assert_int_equal(issue(c, a, 4, t), 0); /* nothing left, nothing expired */
    assert_int_equal(j1->tasks[2].state, TS_ISSUED);
    assert_int_equal(j1->tasks[2].issues, 1);
    assert_int_equal(j1->tasks[2].node, a);
    commit(c);
}

static void test_skips_unissuable_and_cancelled(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j1 = add_job(c, 2, true_argv), *j2 = add_job(c, 2, true_argv);
    struct job *j3 = add_job(c, 1, true_argv);
    uint32_t a = add_node(c, "a");
    j1->state = JS_CANCELLED;
    j2->issuable = false; /* submitted in this turn: not before its commit */
    assert_int_equal(issue(c, a, 8, t), 1);
    assert_int_equal(t[0].job, j3->id);
    j2->issuable = true;
    assert_int_equal(issue(c, a, 8, t), 2);
    assert_int_equal(t[0].job, j2->id);
    assert_int_equal(j1->next_new, 0);
}

static void test_expired_reissued_first(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 10, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    short_waits(c);
    assert_int_equal(issue(c, a, 2, t), 2); /* idx 0, 1 to a */
    let_expire();
    assert_int_equal(issue(c, b, 3, t), 3);
    assert_int_equal(t[0].idx, 0); /* the expired ones first, oldest first */
    assert_int_equal(t[0].issue, 2);
    assert_int_equal(t[1].idx, 1);
    assert_int_equal(t[1].issue, 2);
    assert_int_equal(t[2].idx, 2); /* then a new portion */
    assert_int_equal(t[2].issue, 1);
    assert_int_equal(j->tasks[0].node, b);
    assert_int_equal(j->tasks[0].issues, 2);
    assert_int_equal(c->nodes[a].inflight, 0);
    assert_int_equal(c->nodes[b].inflight, 3);
    commit(c);
}

static void test_expired_goes_to_first_asker(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 2, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    short_waits(c);
    assert_int_equal(issue(c, a, 1, t), 1);
    assert_int_equal(t[0].idx, 0);
    let_expire();
    /* a asks again without having named task 0 in a heartbeat: it lost it, so it may
     * take it back (a lone node must be able to finish its job), before new work */
    assert_int_equal(issue(c, a, 1, t), 1);
    assert_int_equal(t[0].idx, 0);
    assert_int_equal(t[0].issue, 2);
    assert_int_equal(j->tasks[0].node, a);
    let_expire();
    assert_int_equal(issue(c, b, 2, t), 2); /* b: the expired one first, then new */
    assert_int_equal(t[0].idx, 0);
    assert_int_equal(t[0].issue, 3);
    assert_int_equal(t[1].idx, 1);
    assert_int_equal(t[1].issue, 1);
}

/*
 * A node holding many expired tasks asks for one: every other expired task must stay
 * re-issuable (an earlier version popped and dropped entries it set aside).
 */
static void test_many_expired_held_by_one_node(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    static struct tk t[MAX_TASKS];
    add_job(c, 300, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    short_waits(c);
    assert_int_equal(issue(c, a, 100, t), 100);
    let_expire();
    assert_int_equal(issue(c, a, 1, t), 1); /* one of its own expired ones */
    assert_int_equal(t[0].issue, 2);
    c->cfg.default_estimate_s = 60; /* b's issues do not expire */
    uint32_t n = issue(c, b, 300, t), again = 0;
    for (uint32_t i = 0; i < n; i++)
        again += t[i].issue == 2;
    assert_int_equal(again, 99);
    assert_int_equal(n, 300 - 1);
}

static void test_release_node(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    add_job(c, 3, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    assert_int_equal(issue(c, a, 2, t), 2); /* long waits: nothing expires by itself */
    assert_int_equal(issue(c, b, 1, t), 1);
    assert_int_equal(issue(c, b, 5, t), 0);
    tasks_release_node(c, &c->nodes[a]);
    assert_int_equal(c->nodes[a].inflight, 0);
    assert_int_equal(issue(c, b, 5, t), 2);
    assert_int_equal(t[0].idx, 0);
    assert_int_equal(t[0].issue, 2);
    assert_int_equal(t[1].idx, 1);
    assert_int_equal(c->nodes[b].inflight, 3);
    tasks_release_node(c, &c->nodes[a]); /* holds nothing now: no effect */
    assert_int_equal(issue(c, a, 5, t), 0);
}

static void test_extend(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 3, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    short_waits(c);
    assert_int_equal(issue(c, a, 3, t), 3);
    int64_t before = j->tasks[0].expiry_ms;
    tasks_extend(c, &c->nodes[a], j->id, 0, 1);     /* right node and issue */
    tasks_extend(c, &c->nodes[b], j->id, 1, 1);     /* not b's task */
    tasks_extend(c, &c->nodes[a], j->id, 2, 7);     /* not the current issue */
    tasks_extend(c, &c->nodes[a], j->id + 1, 0, 1); /* no such job */
    tasks_extend(c, &c->nodes[a], j->id, 99, 1);    /* no such task */
    int64_t want = wall_now_ms() + (int64_t)(c->cfg.hb_s * 1000 * c->cfg.k_wait);
    assert_true(j->tasks[0].expiry_ms > before);
    assert_true(j->tasks[0].expiry_ms >= want - 1000 && j->tasks[0].expiry_ms <= want);
    let_expire();
    assert_int_equal(issue(c, b, 5, t), 2); /* 1 and 2 expired; 0 was extended */
    assert_int_equal(t[0].idx, 1);
    assert_int_equal(t[1].idx, 2);
    /* with heartbeat_extends off, a heartbeat changes nothing */
    c->cfg.heartbeat_extends = 0;
    before = j->tasks[1].expiry_ms;
    tasks_extend(c, &c->nodes[b], j->id, 1, 2);
    assert_int_equal(j->tasks[1].expiry_ms, before);
}

static void test_stdin_and_template(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    static const char *const argv[] = {"echo", "{i}", "{job}/{n}", NULL};
    struct job *j = add_job(c, 2, argv);
    j->has_stdin = true;
    uint8_t key[12];
    store_key_u64_u32(key, j->id, 1);
    assert_int_equal(store_put(c->store, c->t_stdin, key, sizeof key, "input-one", 9), 0);
    uint32_t a = add_node(c, "a");
    commit(c);
    assert_int_equal(issue(c, a, 2, t), 2);
    char want[64];
    snprintf(want, sizeof want, "%llu/2", (unsigned long long)j->id);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(t[i].argc, 3);
        assert_string_equal(t[i].argv[0], "echo");
        assert_int_equal(atoi(t[i].argv[1]), i);
        assert_string_equal(t[i].argv[2], want);
    }
    assert_int_equal(t[0].stdin_len, 0); /* no stored input: empty */
    assert_int_equal(t[1].stdin_len, 9);
    assert_memory_equal(t[1].stdin_data, "input-one", 9);
}

/* ---- results ---- */

/* The stored result of (job, idx) in table tbl: its "node" field; "" if absent. */
static void stored_node(struct cluster *c, int tbl, const uint8_t *key, size_t klen, char *out,
                        size_t cap)
{
    void *val;
    size_t vlen;
    out[0] = '\0';
    if (store_get(c->store, tbl, key, klen, &val, &vlen) != 0)
        return;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    assert_int_equal(wire_precheck(val, vlen), 0);
    assert_int_equal(msgpack_unpack_next(&up, val, vlen, &off), MSGPACK_UNPACK_SUCCESS);
    wire_get_strbuf(&up.data, "node", out, cap);
    assert_non_null(wire_get(&up.data, "received"));
    assert_non_null(wire_get(&up.data, "exit"));
    msgpack_unpacked_destroy(&up);
    free(val);
}

static void test_first_result_wins(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 2, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    short_waits(c);
    assert_int_equal(issue(c, a, 1, t), 1);
    let_expire();
    c->cfg.default_estimate_s = 60;
    assert_int_equal(issue(c, b, 1, t), 1);
    assert_int_equal(t[0].idx, 0);
    assert_int_equal(t[0].issue, 2);
    /* b (issue 2) answers first and wins; a's late answer (issue 1) is a duplicate */
    assert_int_equal(result(c, b, j->id, 0, 2, 0, NULL, 2.0), 0);
    assert_int_equal(j->tasks[0].state, TS_DONE);
    assert_int_equal(j->tasks[0].ok, 1);
    assert_int_equal(j->tasks[0].node, b);
    assert_int_equal(j->ndone, 1);
    assert_int_equal(c->nodes[b].results, 1);
    assert_int_equal(c->nodes[b].inflight, 0);
    assert_true(c->nodes[b].spu == 2.0); /* learnt: 2 s for 1 unit */
    assert_true(c->global_spu == 2.0);
    assert_int_equal(result(c, a, j->id, 0, 1, 1, NULL, 3.0), 0);
    assert_int_equal(j->ndups, 1);
    assert_int_equal(j->tasks[0].node, b);
    assert_int_equal(j->tasks[0].ok, 1);
    assert_int_equal(j->ndone, 1);
    assert_int_equal(c->nodes[a].results, 0);
    /* b repeating its delivery (a lost acknowledgement) is not a duplicate */
    assert_int_equal(result(c, b, j->id, 0, 2, 0, NULL, 2.0), 0);
    assert_int_equal(j->ndups, 1);
    /* results for unknown jobs or never issued tasks are acknowledged and ignored */
    assert_int_equal(result(c, a, j->id + 5, 0, 1, 0, NULL, 1.0), 0);
    assert_int_equal(result(c, a, j->id, 1, 1, 0, NULL, 1.0), 0);
    assert_int_equal(j->tasks[1].state, TS_NEW);
    commit(c);
    char node[64];
    uint8_t key[16];
    store_key_u64_u32(key, j->id, 0);
    stored_node(c, c->t_results, key, 12, node, sizeof node);
    assert_string_equal(node, c->nodes[b].sid);
    key[12] = key[13] = key[14] = 0, key[15] = 1; /* duplicate number 1 */
    stored_node(c, c->t_dups, key, 16, node, sizeof node);
    assert_string_equal(node, c->nodes[a].sid);
    assert_int_equal(store_count(c->store, c->t_results), 1);
    assert_int_equal(store_count(c->store, c->t_dups), 1);
}

static void test_failed_result_is_final(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 1, true_argv);
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    assert_int_equal(issue(c, a, 1, t), 1);
    /* the task ran and failed (exit 3): that is a result, not a reason to retry */
    assert_int_equal(result(c, a, j->id, 0, 1, 3, NULL, 0.5), 0);
    assert_int_equal(j->tasks[0].state, TS_DONE);
    assert_int_equal(j->tasks[0].ok, 0);
    assert_int_equal(j->nfailed, 1);
    assert_int_equal(j->state, JS_DONE);
    assert_true(c->nodes[a].spu == 0); /* failures teach no speed */
    assert_int_equal(issue(c, b, 1, t), 0);
}

static void test_node_error_reissues_until_max(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 1, true_argv);
    uint32_t n[4] = {add_node(c, "a"), add_node(c, "b"), add_node(c, "c"), add_node(c, "d")};
    c->cfg.max_attempts = 3;
    for (uint32_t attempt = 1; attempt <= 3; attempt++) {
        assert_int_equal(issue(c, n[attempt - 1], 1, t), 1);
        assert_int_equal(t[0].idx, 0);
        assert_int_equal(t[0].issue, attempt);
        assert_int_equal(result(c, n[attempt - 1], j->id, 0, attempt, -1, "cannot exec", 0), 0);
        if (attempt < 3) {
            /* re-issuable at once, by any node (a one-node cluster must retry too) */
            assert_int_equal(j->tasks[0].state, TS_ISSUED);
            assert_int_equal(j->tasks[0].errors, attempt);
            assert_int_equal(j->tasks[0].node, UINT32_MAX);
            assert_int_equal(j->state, JS_RUNNING);
        }
    }
    /* the third node-side error is final: the task failed */
    assert_int_equal(j->tasks[0].state, TS_DONE);
    assert_int_equal(j->tasks[0].ok, 0);
    assert_int_equal(j->nfailed, 1);
    assert_int_equal(j->ndone, 1);
    assert_int_equal(j->state, JS_DONE);
    assert_int_equal(issue(c, n[3], 1, t), 0);
    commit(c);
    /* the two earlier error reports are kept as duplicates */
    assert_int_equal(store_count(c->store, c->t_dups), 2);
    assert_int_equal(store_count(c->store, c->t_results), 1);
}

static void test_job_done(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 3, true_argv), *k = add_job(c, 1, true_argv);
    uint32_t a = add_node(c, "a");
    assert_int_equal(issue(c, a, 3, t), 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(j->state, JS_RUNNING);
        assert_int_equal(result(c, a, j->id, t[i].idx, 1, 0, NULL, 1.0), 0);
    }
    assert_int_equal(j->state, JS_DONE);
    assert_int_equal(j->ndone, 3);
    assert_int_equal(j->nfailed, 0);
    assert_true(j->finished_ms > 0);
    assert_int_equal(k->state, JS_QUEUED);
    assert_int_equal(issue(c, a, 3, t), 1); /* the next job */
    assert_int_equal(t[0].job, k->id);
    assert_int_equal(result(c, a, k->id, 0, 1, 0, NULL, 1.0), 0);
    assert_int_equal(k->state, JS_DONE);
    assert_int_equal(issue(c, a, 3, t), 0);
    assert_int_equal(c->open_from, 2); /* finished jobs are no longer scanned */
    commit(c);
}

/* What was committed is what a restarted cluster loads. */
static void test_state_reload(void **state)
{
    struct fixture *f = *state;
    struct cluster *c = &f->c;
    struct tk t[8];
    struct job *j = add_job(c, 4, true_argv);
    uint64_t jid = j->id;
    uint32_t a = add_node(c, "a"), b = add_node(c, "b");
    assert_int_equal(issue(c, a, 3, t), 3);
    assert_int_equal(result(c, a, jid, 0, 1, 0, NULL, 1.0), 0);
    assert_int_equal(result(c, a, jid, 1, 1, 2, NULL, 1.0), 0);
    commit(c);
    /* a change that is never committed is lost on reload */
    assert_int_equal(result(c, a, jid, 2, 1, 0, NULL, 1.0), 0);
    store_discard(c->store);
    char sid_a[33];
    snprintf(sid_a, sizeof sid_a, "%s", c->nodes[a].sid);
    cluster_free_state(c);
    c->next_job = 0;
    assert_int_equal(cluster_load(c), 0);
    assert_int_equal(c->njobs, 1);
    assert_int_equal(c->nnodes, 2);
    assert_int_equal(c->next_job, jid + 1);
    j = cluster_job_find(c, jid);
    assert_non_null(j);
    assert_int_equal(j->state, JS_RUNNING);
    assert_int_equal(j->next_new, 3);
    assert_int_equal(j->ndone, 2);
    assert_int_equal(j->nfailed, 1);
    assert_int_equal(j->tasks[0].state, TS_DONE);
    assert_int_equal(j->tasks[0].ok, 1);
    assert_int_equal(j->tasks[1].ok, 0);
    assert_int_equal(j->tasks[2].state, TS_ISSUED);
    struct node *na = cluster_node_find(c, sid_a, strlen(sid_a));
    assert_non_null(na);
    assert_int_equal(j->tasks[2].node, (uint32_t)(na - c->nodes));
    assert_int_equal(na->inflight, 1);
    assert_int_equal(c->nheap, 1); /* the issued task waits for re-issue again */
    /* the rest of the job carries on */
    b = (uint32_t)(cluster_node_find(c, "sid-b", 5) - c->nodes);
    assert_int_equal(issue(c, b, 5, t), 1);
    assert_int_equal(t[0].idx, 3);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tasks_work),
        T(test_wait_ms),
        cmocka_unit_test(test_app_expand),
        T(test_new_in_job_order),
        T(test_skips_unissuable_and_cancelled),
        T(test_expired_reissued_first),
        T(test_expired_goes_to_first_asker),
        T(test_many_expired_held_by_one_node),
        T(test_release_node),
        T(test_extend),
        T(test_stdin_and_template),
        T(test_first_result_wins),
        T(test_failed_result_is_final),
        T(test_node_error_reissues_until_max),
        T(test_job_done),
        T(test_state_reload),
    };
    return cmocka_run_group_tests_name("cluster_policy", tests, NULL, NULL);
}

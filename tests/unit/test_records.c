/*
 * test_records.c - every record shape the cluster role writes loads again (issue #8
 * item 10): jobs in every state, tasks in every state, results and duplicates with every
 * optional field, parallel jobs in every state (including cancelled while waiting, which
 * used to be skipped), nodes, the scored settings and meta. The records are written by
 * the role's own save functions into a real LMDB store, the store is closed, reopened
 * and loaded by cluster_load, and every field is compared. A loader that skips a record
 * counts it (c->load_skipped, logged with the key); any skip fails the test.
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

#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

static char dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void cl_open(struct cluster *c)
{
    char err[256];
    memset(c, 0, sizeof *c);
    c->cfg.hb_s = 1;
    c->cfg.sd_queues = 4;
    c->cfg.max_attempts = 3;
    c->cfg.input_unit_kb = 64;
    struct store_opts so = {"cluster", cluster_store_tables, STORE_SYNC_NONE, 0, false};
    c->store = store_open(dir, &so, err, sizeof err);
    if (!c->store)
        fail_msg("store_open: %s", err);
    cluster_store_find_tables(c);
    assert_non_null(c->sd = calloc(1, sizeof *c->sd));
    assert_int_equal(scored_open(c), 0);
    c->next_job = 1;
}

static void cl_close(struct cluster *c)
{
    store_close(&c->store);
    cluster_free_state(c);
    scored_close(c);
}

static struct node *add_node(struct cluster *c, const char *sid, const char *name)
{
    struct node *n = cluster_node_new(c);
    assert_non_null(n);
    snprintf(n->sid, sizeof n->sid, "%s", sid);
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->cluster, sizeof n->cluster, "c1");
    snprintf(n->client, sizeof n->client, "gridnode-client");
    snprintf(n->os, sizeof n->os, "Linux");
    snprintf(n->ip, sizeof n->ip, "127.0.0.1");
    snprintf(n->arch, sizeof n->arch, "x86_64");
    snprintf(n->model, sizeof n->model, "model %s", name);
    n->mhz = 2400;
    n->cores = 4;
    n->slots = 2;
    n->mem_mb = 8000;
    n->disk_mb = 12345;
    n->procs = true;
    n->active = sid[0] == 'a';
    n->first_ms = 1000;
    n->last_ms = 2000;
    n->spu = 0.25;
    n->results = 7;
    n->dirty = true;
    assert_int_equal(cluster_node_register(c), 0);
    return &c->nodes[c->nnodes - 1];
}

static char **argv2(const char *a, const char *b)
{
    char **v = calloc(3, sizeof *v);
    v[0] = strdup(a);
    v[1] = strdup(b);
    return v;
}

/* A bag-of-tasks job in state st with ntasks tasks, next_new of them issued at least once. */
static struct job *add_job(struct cluster *c, enum job_state st, uint32_t ntasks, uint32_t next_new)
{
    struct job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->id = c->next_job++;
    j->name = strdup("job name");
    j->user = strdup("alice");
    j->argv = argv2("/bin/echo", "hello world");
    j->argc = 2;
    j->shell = st == JS_DONE;
    j->has_stdin = st == JS_RUNNING;
    j->complexity = 2.5;
    j->limit_s = 77;
    j->ntasks = ntasks;
    j->next_new = next_new;
    j->state = st;
    j->submitted_ms = 111;
    j->finished_ms = st >= JS_DONE ? 222 : 0;
    j->issuable = true;
    j->key = st == JS_DONE ? strdup("request-key-1") : NULL;
    j->host = st == JS_RUNNING ? strdup("node7") : NULL; /* issue 26: SUBMIT "host" */
    assert_int_equal(job_grow_tasks(j, next_new), 0);
    assert_int_equal(cluster_job_add(c, j), 0);
    cluster_mark_job(c, j); /* listed for the commit (state.c) */
    c->meta_dirty = true;
    return j;
}

static struct pjob *add_pjob(struct cluster *c, enum pj_state st, bool placed)
{
    struct pjob *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->id = c->next_job++;
    j->name = strdup("pj");
    j->user = strdup("bob");
    j->group = strdup("staff");
    j->argv = argv2("sh", "-c");
    j->argc = 2;
    j->shell = true;
    j->wait = true;
    j->rq = (struct sd_request){3, 2, 64, 32, 1, true};
    j->req_cpu_s = 50;
    j->limit_s = 60;
    j->queue = j->rq.queue;
    j->queue0 = 0;
    j->demotions = 1;
    j->state = st;
    j->key = st == PJ_QUEUED ? strdup("request-key-2") : NULL;
    snprintf(j->reason, sizeof j->reason, "reason of %s", pj_state_name(st));
    j->submitted_ms = 10;
    if (placed) {
        snprintf(j->cluster, sizeof j->cluster, "c1");
        j->nhosts = 2;
        j->hosts = calloc(3, sizeof *j->hosts);
        j->hosts[0] = 0;
        j->hosts[1] = 1;
        j->ranks = calloc(j->rq.nprocs, sizeof *j->ranks);
        for (uint32_t r = 0; r < j->rq.nprocs; r++) {
            j->ranks[r].host = r / j->rq.ppn;
            j->ranks[r].st = (uint8_t)(r % 3);
            j->ranks[r].exit = r == 2 ? 3 : 0;
            j->ranks[r].sig = r == 1 ? 9 : 0;
            j->ranks[r].cpu_s = 1.5 * r;
            j->ranks[r].error = r == 2 ? strdup("could not start: ENOENT") : NULL;
        }
        j->mem_lim = 64;
        j->disk_lim = 32;
        j->max_cpu_s = 50;
        j->cpu_s = 4.5;
        j->res_base = 1.25;
        j->run_ms = 1234;
        j->last_ran_ms = 99;
        j->started_ms = 20;
    }
    if (PJ_TERMINAL(st))
        j->finished_ms = 30;
    assert_int_equal(scored_job_add(c, j), 0);
    j->dirty = true;
    c->meta_dirty = true;
    return j;
}

/* A result map with every field of wire_result_fields, as a node sends it. */
static void result_map(struct wire_buf *wb, uint64_t job, uint32_t idx, uint32_t issue, bool error)
{
    wire_pack_map(wb, error ? 15 : 14);
    wire_put_u64(wb, "job", job);
    wire_put_u64(wb, "idx", idx);
    wire_put_u64(wb, "issue", issue);
    wire_put_i64(wb, "exit", -3);
    wire_put_u64(wb, "signal", 15);
    wire_put_bool(wb, "timeout", true);
    wire_put_f64(wb, "cpu_s", 0.5);
    wire_put_f64(wb, "wall_s", 1.5);
    wire_put_bin(wb, "stdout", "out\0put", 7);
    wire_put_bin(wb, "stderr", "err", 3);
    wire_put_bool(wb, "out_trunc", true);
    wire_put_bool(wb, "err_trunc", false);
    wire_put_key(wb, "files"); /* issue 26: kept outputs (none here) and the note */
    wire_pack_array(wb, 0);
    wire_put_str(wb, "files_note", "output 'x' is a symbolic link: not kept");
    if (error)
        wire_put_str(wb, "error", "cannot exec");
}

static void deliver(struct cluster *c, struct node *n, uint64_t job, uint32_t idx, uint32_t issue,
                    bool error)
{
    struct wire_buf wb;
    msgpack_unpacked up;
    size_t off = 0;
    wire_buf_init(&wb);
    result_map(&wb, job, idx, issue, error);
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, wb.sb.data, wb.sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(tasks_result(c, n, &up.data), 0);
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

/* Checks one stored result record: every field of the node's map plus node/received. */
static void check_result(struct cluster *c, int table, const uint8_t *key, size_t klen, bool error)
{
    void *val;
    size_t vlen, n;
    msgpack_unpacked up;
    size_t off = 0;
    struct wire_error err;
    assert_int_equal(store_get(c->store, table, key, klen, &val, &vlen), 0);
    msgpack_unpacked_init(&up);
    assert_int_equal(wire_precheck(val, vlen), 0);
    assert_int_equal(msgpack_unpack_next(&up, val, vlen, &off), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *m = &up.data;
    assert_int_equal(wire_check_map(m, wire_result_fields, &err), 0);
    for (const struct wire_field *f = wire_result_fields; f->key; f++)
        if (strcmp(f->key, "error") || error)
            assert_non_null(wire_get(m, f->key));
    assert_int_equal(wire_get_i64(m, "exit", 0), -3);
    assert_int_equal(wire_get_u64(m, "signal", 0), 15);
    assert_true(wire_get_bool(m, "timeout", false));
    assert_true(wire_get_f64(m, "wall_s", 0) == 1.5);
    const char *o = wire_get_bin(m, "stdout", &n);
    assert_int_equal(n, 7);
    assert_memory_equal(o, "out\0put", 7);
    assert_true(wire_get_bool(m, "out_trunc", false));
    assert_non_null(wire_get_str(m, "node", &n));
    assert_true(wire_get_i64(m, "received", 0) > 0);
    msgpack_unpacked_destroy(&up);
    free(val);
}

static void save_all(struct cluster *c)
{
    for (uint32_t i = 0; i < c->njobs; i++)
        for (uint32_t k = 0; k < c->jobs[i]->next_new; k++)
            assert_int_equal(cluster_task_save(c, c->jobs[i], k), 0);
    c->sd->set_dirty = true;
    assert_int_equal(cluster_save_dirty(c), 0);
    assert_int_equal(scored_save_dirty(c), 0);
    assert_int_equal(store_commit(c->store), 0);
}

static void same_str(const char *a, const char *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
}

static void check_pjob(const struct pjob *a, const struct pjob *b)
{
    assert_int_equal(a->id, b->id);
    same_str(a->name, b->name);
    same_str(a->user, b->user);
    same_str(a->group, b->group);
    assert_int_equal(a->argc, b->argc);
    for (uint32_t i = 0; i < a->argc; i++)
        same_str(a->argv[i], b->argv[i]);
    assert_int_equal(a->shell, b->shell);
    assert_int_equal(a->wait, b->wait);
    assert_int_equal(a->key == NULL, b->key == NULL);
    if (a->key)
        assert_string_equal(a->key, b->key);
    assert_memory_equal(&a->rq, &b->rq, sizeof a->rq);
    assert_int_equal(a->req_cpu_s, b->req_cpu_s);
    assert_int_equal(a->limit_s, b->limit_s);
    assert_int_equal(a->queue, b->queue);
    assert_int_equal(a->queue0, b->queue0);
    assert_int_equal(a->demotions, b->demotions);
    assert_int_equal(a->state, b->state);
    assert_string_equal(a->reason, b->reason);
    assert_string_equal(a->cluster, b->cluster);
    assert_int_equal(a->nhosts, b->nhosts);
    for (uint32_t i = 0; i < a->nhosts; i++)
        assert_int_equal(a->hosts[i], b->hosts[i]);
    assert_int_equal(a->mem_lim, b->mem_lim);
    assert_int_equal(a->disk_lim, b->disk_lim);
    assert_int_equal(a->max_cpu_s, b->max_cpu_s);
    assert_true(a->cpu_s == b->cpu_s && a->res_base == b->res_base);
    assert_int_equal(a->run_ms, b->run_ms);
    assert_int_equal(a->last_ran_ms, b->last_ran_ms);
    assert_int_equal(a->submitted_ms, b->submitted_ms);
    assert_int_equal(a->started_ms, b->started_ms);
    assert_int_equal(a->finished_ms, b->finished_ms);
    assert_int_equal(a->ranks == NULL, b->ranks == NULL);
    for (uint32_t r = 0; a->ranks && r < a->rq.nprocs; r++) {
        const struct prank *p = &a->ranks[r], *q = &b->ranks[r];
        assert_int_equal(p->host, q->host);
        assert_int_equal(p->st, q->st);
        assert_int_equal(p->exit, q->exit);
        assert_int_equal(p->sig, q->sig);
        assert_true(p->cpu_s == q->cpu_s);
        assert_int_equal(p->error == NULL, q->error == NULL);
        if (p->error)
            assert_string_equal(p->error, q->error);
    }
}

static void check_job(const struct cluster *c1, const struct job *a, const struct cluster *c2,
                      const struct job *b)
{
    assert_int_equal(a->id, b->id);
    same_str(a->name, b->name);
    same_str(a->user, b->user);
    assert_int_equal(a->argc, b->argc);
    for (uint32_t i = 0; i < a->argc; i++)
        same_str(a->argv[i], b->argv[i]);
    assert_int_equal(a->shell, b->shell);
    assert_int_equal(a->has_stdin, b->has_stdin);
    assert_int_equal(a->key == NULL, b->key == NULL);
    if (a->key)
        assert_string_equal(a->key, b->key);
    assert_int_equal(a->host == NULL, b->host == NULL);
    if (a->host)
        assert_string_equal(a->host, b->host);
    assert_true(a->complexity == b->complexity);
    assert_int_equal(a->limit_s, b->limit_s);
    assert_int_equal(a->ntasks, b->ntasks);
    assert_int_equal(a->next_new, b->next_new);
    assert_int_equal(a->ndone, b->ndone);
    assert_int_equal(a->nfailed, b->nfailed);
    assert_int_equal(a->ndups, b->ndups);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->submitted_ms, b->submitted_ms);
    assert_int_equal(a->finished_ms, b->finished_ms);
    for (uint32_t i = 0; i < a->next_new; i++) {
        const struct task *t = &a->tasks[i], *u = &b->tasks[i];
        assert_int_equal(t->state, u->state);
        assert_int_equal(t->ok, u->ok);
        assert_int_equal(t->issues, u->issues);
        assert_int_equal(t->errors, u->errors);
        assert_int_equal(t->won, u->won);
        assert_int_equal(t->node < c1->nnodes, u->node < c2->nnodes);
        if (t->node < c1->nnodes)
            assert_string_equal(c1->nodes[t->node].sid, c2->nodes[u->node].sid);
        if (t->state == TS_ISSUED && a->state == JS_RUNNING)
            assert_true(u->expiry_ms >= t->expiry_ms); /* extended by the restart grace */
        else
            assert_int_equal(t->expiry_ms, u->expiry_ms);
    }
}

static void check_node(const struct node *a, const struct node *b)
{
    assert_string_equal(a->sid, b->sid);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->cluster, b->cluster);
    assert_string_equal(a->client, b->client);
    assert_string_equal(a->os, b->os);
    assert_string_equal(a->ip, b->ip);
    assert_string_equal(a->arch, b->arch);
    assert_string_equal(a->model, b->model);
    assert_int_equal(a->mhz, b->mhz);
    assert_int_equal(a->cores, b->cores);
    assert_int_equal(a->slots, b->slots);
    assert_int_equal(a->mem_mb, b->mem_mb);
    assert_int_equal(a->disk_mb, b->disk_mb);
    assert_int_equal(a->procs, b->procs);
    assert_int_equal(a->active, b->active);
    assert_int_equal(a->first_ms, b->first_ms);
    assert_int_equal(a->last_ms, b->last_ms);
    assert_true(a->spu == b->spu);
    assert_int_equal(a->results, b->results);
}

static void test_every_record_round_trips(void **state)
{
    static struct cluster c1, c2;
    (void)state;
    cl_open(&c1);
    assert_int_equal(cluster_load(&c1), 0); /* a new state: makes its incarnation */
    assert_int_equal(strlen(c1.incarnation), 32);
    struct node *n0 = add_node(&c1, "aaaa0000", "alpha");
    add_node(&c1, "bbbb1111", "beta");
    /* jobs in every state; tasks new, issued (to a node, to none), ok, failed, errored */
    struct job *jq = add_job(&c1, JS_QUEUED, 5, 0);
    struct job *jr = add_job(&c1, JS_RUNNING, 6, 5);
    struct job *jd = add_job(&c1, JS_DONE, 1, 1);
    struct job *jc = add_job(&c1, JS_CANCELLED, 4, 2);
    (void)jq;
    for (uint32_t i = 0; i < jr->next_new; i++) {
        struct task *t = &jr->tasks[i];
        t->state = TS_ISSUED;
        t->issues = 1 + i;
        t->node = i == 4 ? UINT32_MAX : (uint32_t)(n0 - c1.nodes);
        t->expiry_ms = 5000 + i;
    }
    n0 = &c1.nodes[0];
    deliver(&c1, n0, jr->id, 0, 1, false);           /* task 0: failed (signal, timeout) */
    deliver(&c1, n0, jr->id, 0, 1, false);           /* a resend of the winner: ignored */
    deliver(&c1, &c1.nodes[1], jr->id, 0, 7, false); /* a duplicate from elsewhere */
    deliver(&c1, n0, jr->id, 1, 2, true);            /* task 1: node-side error, re-issuable */
    jd->tasks[0] = (struct task){TS_DONE, 1, 0, 1, 1, 0, 1, 0};
    jd->ndone = 1;
    jc->tasks[0] = (struct task){TS_DONE, 0, 2, 3, 0, 0, 3, 0};
    jc->tasks[1] = (struct task){TS_ISSUED, 0, 0, 1, UINT32_MAX, 0, 0, 4242};
    jc->ndone = jc->nfailed = 1;
    /* parallel jobs in every state */
    add_pjob(&c1, PJ_WAITING, false);
    add_pjob(&c1, PJ_CANCELLED, false); /* cancelled while waiting: the issue's case */
    add_pjob(&c1, PJ_FAILED, false);    /* failed while waiting (host gone) */
    add_pjob(&c1, PJ_QUEUED, true);
    add_pjob(&c1, PJ_RUNNING, true);
    add_pjob(&c1, PJ_STOPPED, true); /* suspended */
    add_pjob(&c1, PJ_DONE, true);
    add_pjob(&c1, PJ_FAILED, true);
    add_pjob(&c1, PJ_KILLED, true);
    add_pjob(&c1, PJ_CANCELLED, true); /* cancelled while running */
    /* scored settings and the startup-file mark */
    sd_settings_default(&c1.sd->set, 4);
    char msg[256];
    assert_int_equal(sd_console_line(&c1.sd->set, "queue 2 mode exclusive", msg, sizeof msg),
                     SDC_CHANGED);
    assert_int_equal(sd_console_line(&c1.sd->set, "queue 1 mem 60", msg, sizeof msg), SDC_CHANGED);
    assert_int_equal(sd_console_line(&c1.sd->set, "limit c1 mem 1000", msg, sizeof msg),
                     SDC_CHANGED);
    c1.sd->rc_applied = true;
    save_all(&c1);
    store_close(&c1.store); /* c1's memory stays as the reference */

    cl_open(&c2);
    assert_int_equal(cluster_load(&c2), 0);
    assert_int_equal(c2.load_skipped, 0);
    assert_int_equal(c2.next_job, c1.next_job);
    assert_string_equal(c2.incarnation, c1.incarnation);
    assert_int_equal(c2.nnodes, c1.nnodes);
    for (uint32_t i = 0; i < c1.nnodes; i++)
        check_node(&c1.nodes[i], &c2.nodes[i]);
    assert_int_equal(c2.njobs, c1.njobs);
    for (uint32_t i = 0; i < c1.njobs; i++)
        check_job(&c1, c1.jobs[i], &c2, c2.jobs[i]);
    assert_int_equal(c2.sd->njobs, c1.sd->njobs);
    for (uint32_t i = 0; i < c1.sd->njobs; i++)
        check_pjob(c1.sd->jobs[i], c2.sd->jobs[i]);
    assert_memory_equal(&c2.sd->set, &c1.sd->set, sizeof c1.sd->set);
    assert_true(c2.sd->rc_applied);
    /* results and duplicates with every optional field */
    uint8_t key[16];
    store_key_u64_u32(key, jr->id, 0);
    check_result(&c2, c2.t_results, key, 12, false);
    assert_int_equal(store_count(c2.store, c2.t_dups), 2); /* the duplicate and the error */
    assert_int_equal(c2.jobs[1]->ndups, 2);
    cl_close(&c2);
    c1.store = NULL;
    cl_close(&c1);
}

/* A record the loaders cannot read is skipped loudly and counted, never silently. */
static void test_bad_records_are_counted(void **state)
{
    static struct cluster c;
    uint8_t key[12];
    (void)state;
    cl_open(&c);
    store_key_u64(key, 5);
    assert_int_equal(store_put(c.store, c.t_jobs, key, 8, "\xc1", 1), 0);
    assert_int_equal(store_put(c.store, c.sd->t_pjobs, key, 8, "\x80", 1), 0); /* {} */
    store_key_u64_u32(key, 99, 0);
    assert_int_equal(store_put(c.store, c.t_tasks, key, 12, "\x80", 1), 0); /* no job 99 */
    assert_int_equal(store_commit(c.store), 0);
    assert_int_equal(cluster_load(&c), 0);
    assert_int_equal(c.load_skipped, 3);
    cl_close(&c);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/gridnode-records-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_record_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_records_are_counted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

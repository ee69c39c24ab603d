/*
 * test_batch_live.c - the pure parts of the live batch role: the engine's time unit
 * (unit_per_s 1 and 1000 give the same priorities for scaled inputs), batch_job_adopt,
 * and round-trips of every record shape the role writes (encode, store, reopen, load,
 * compare: a skipped record fails).
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
#include <unistd.h>

#include "roles/batch/live/live_int.h"
#include "store/store.h"

/* ---- time unit ---- */

static struct batch_engine *eng_unit(int64_t unit)
{
    struct batch_config c;
    batch_config_defaults(&c);
    c.unit_per_s = unit;
    c.estimates = true;
    c.w.queuetime = 3;
    c.w.xfactor = 100;
    c.w.ps = 0.01;
    c.fspolicy = BATCH_FS_DEDICATEDPS;
    c.w.fsuser = 10;
    c.fsinterval = 3600;
    struct batch_cred_cfg *u = batch_config_cred(&c, BATCH_CRED_USER, "DEFAULT");
    assert_non_null(u);
    u->fstarget = 50;
    struct batch_engine *e = batch_engine_new(&c);
    batch_config_clear(&c);
    assert_non_null(e);
    for (int i = 0; i < 4; i++) {
        struct batch_node_spec s = {.cap = {1, 0, 0, 0}};
        snprintf(s.name, sizeof s.name, "n%d", i);
        assert_true(batch_node_add(e, &s) >= 0);
    }
    return e;
}

static void sub(struct batch_engine *e, uint64_t id, const char *user, int32_t tasks,
                int64_t wall_s, int64_t submit_s, int64_t unit)
{
    struct batch_job_spec s = {.id = id, .tasks = tasks, .per_task = {1, 0, 0, 0}};
    snprintf(s.user, sizeof s.user, "%s", user);
    s.walltime = wall_s * unit;
    s.submit = submit_s * unit;
    assert_int_equal(batch_job_submit(e, &s), 0);
}

static void unit_per_s_gives_the_same_priorities(void **state)
{
    (void)state;
    struct batch_engine *e[2] = {eng_unit(1), eng_unit(1000)};
    int64_t units[2] = {1, 1000};
    for (int k = 0; k < 2; k++) {
        int64_t u = units[k];
        /* alice uses the whole machine for 10 minutes: fairshare usage */
        sub(e[k], 1, "alice", 4, 600, 0, u);
        struct batch_cycle_stats st;
        assert_int_equal(batch_cycle(e[k], 0, &st), 0);
        assert_int_equal(batch_job_finish(e[k], 1, 600 * u), 0);
        sub(e[k], 2, "alice", 4, 300, 610, u);
        sub(e[k], 3, "bob", 4, 1200, 620, u);
        sub(e[k], 4, "bob", 2, 90, 700, u);
    }
    for (uint64_t id = 2; id <= 4; id++) {
        struct batch_prio p[2];
        for (int k = 0; k < 2; k++)
            assert_int_equal(batch_priority_explain(e[k], id, 900 * units[k], &p[k]), 0);
        for (int f = 0; f < BATCH_NFACTORS; f++)
            assert_true(fabs(p[0].contrib[f] - p[1].contrib[f]) <=
                        1e-9 * (1 + fabs(p[0].contrib[f])));
        assert_true(fabs(p[0].total - p[1].total) <= 1e-9 * (1 + fabs(p[0].total)));
        assert_true(p[0].total != 0);
    }
    /* fairshare: bob (no usage) ahead of alice in both */
    assert_true(batch_fairshare_usage(e[0], BATCH_CRED_USER, "alice", 900) > 99);
    assert_true(batch_fairshare_usage(e[1], BATCH_CRED_USER, "alice", 900000) > 99);
    struct batch_cycle_stats st;
    uint64_t ids[2][8];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(batch_cycle(e[k], 900 * units[k], &st), 0);
        assert_int_equal(batch_job_ids(e[k], true, ids[k], 8), 2);
    }
    assert_memory_equal(ids[0], ids[1], 2 * sizeof ids[0][0]);
    /* estimates scale with the unit */
    struct batch_job_info a, b;
    assert_int_equal(batch_job_info(e[0], ids[0][1], &a), 0);
    assert_int_equal(batch_job_info(e[1], ids[1][1], &b), 0);
    assert_true(a.estimate != BATCH_NEVER);
    assert_true(b.estimate == a.estimate * 1000);
    batch_engine_destroy(&e[0]);
    batch_engine_destroy(&e[1]);
}

/* ---- batch_job_adopt ---- */

static void adopt_takes_nodes_and_refuses_bad_ones(void **state)
{
    (void)state;
    struct batch_engine *e = eng_unit(1000);
    struct batch_job_spec s = {.id = 10, .tasks = 2, .per_task = {1, 0, 0, 0}, .walltime = 60000};
    snprintf(s.user, sizeof s.user, "u");
    int32_t n01[2] = {0, 1};
    assert_int_equal(batch_job_adopt(e, &s, n01, 2, 1000), 0);
    struct batch_job_info bi;
    assert_int_equal(batch_job_info(e, 10, &bi), 0);
    assert_int_equal(bi.state, BATCH_JOB_RUNNING);
    assert_int_equal(bi.nnodes, 2);
    assert_int_equal(bi.start, 1000);
    assert_int_equal(bi.end_est, 61000);
    /* the same id again, a busy node, a node listed twice, an unknown node, a down one,
     * a count that does not match the tasks: refused, nothing changed */
    assert_int_equal(batch_job_adopt(e, &s, n01, 2, 1000), -1);
    s.id = 11;
    int32_t busy[2] = {1, 2}, twice[2] = {2, 2}, unknown[2] = {2, 9}, n23[2] = {2, 3};
    assert_int_equal(batch_job_adopt(e, &s, busy, 2, 1000), -1);
    assert_int_equal(batch_job_adopt(e, &s, twice, 2, 1000), -1);
    assert_int_equal(batch_job_adopt(e, &s, unknown, 2, 1000), -1);
    assert_int_equal(batch_job_adopt(e, &s, n23, 1, 1000), -1);
    assert_int_equal(batch_node_set_up(e, 3, false), 0);
    assert_int_equal(batch_job_adopt(e, &s, n23, 2, 1000), -1);
    assert_int_equal(batch_job_info(e, 11, &bi), -1);
    assert_int_equal(batch_node_set_up(e, 3, true), 0);
    /* a 3-node job cannot start while the adopted one holds two of four nodes */
    struct batch_job_spec w = {.id = 12, .tasks = 3, .per_task = {1, 0, 0, 0}, .walltime = 1000};
    snprintf(w.user, sizeof w.user, "u");
    w.submit = 2000;
    assert_int_equal(batch_job_submit(e, &w), 0);
    struct batch_cycle_stats st;
    assert_int_equal(batch_cycle(e, 2000, &st), 0);
    assert_int_equal(batch_job_info(e, 12, &bi), 0);
    assert_int_equal(bi.state, BATCH_JOB_PENDING);
    assert_true(bi.estimate == 61000 || bi.reserved == 61000);
    /* ended: its nodes are free again */
    assert_int_equal(batch_job_finish(e, 10, 3000), 0);
    assert_int_equal(batch_cycle(e, 3000, &st), 0);
    assert_int_equal(batch_job_info(e, 12, &bi), 0);
    assert_int_equal(bi.state, BATCH_JOB_RUNNING);
    batch_engine_destroy(&e);
}

/* ---- records ---- */

static const struct store_table tables[] = {
    {"jobs", STORE_KEY_U64},
    {"elems", STORE_KEY_U64_U32},
    {NULL},
};

static struct store *open_store(const char *dir)
{
    char err[256];
    struct store_opts o = {"batch", tables, STORE_SYNC_NONE, 0, false};
    struct store *s = store_open(dir, &o, err, sizeof err);
    assert_non_null(s);
    return s;
}

static char *sd(const char *s)
{
    return s ? strdup(s) : NULL;
}

static struct ljob *mkjob(uint64_t id, bool parallel, uint32_t ntasks, bool full)
{
    struct ljob *j = calloc(1, sizeof *j);
    j->id = id;
    j->parallel = parallel;
    j->ntasks = ntasks;
    j->procs = parallel ? 6 : 1;
    j->ppn = parallel ? 2 : 1;
    j->mem_mb = full ? 512 : 0;
    j->disk_mb = full ? 1024 : 0;
    j->limit_s = 3600 + (int64_t)id;
    j->submitted = 1700000000123 + (int64_t)id;
    j->finished = full ? 1700000009999 : 0;
    j->queue = full ? 3 : 1;
    j->shell = full;
    j->hold = full;
    j->early = full;
    j->cancelled = full && !parallel;
    if (full) {
        j->name = sd("name é");
        j->user = sd("alice");
        j->group = sd("physics");
        j->account = sd("acct");
        j->class_ = sd("c1");
        j->qos = sd("high");
        j->key = sd("k-1");
        j->resv = sd("r1");
    }
    bool cancelled = j->cancelled;
    j->cancelled = false;
    for (uint32_t e = 0; e < ntasks; e++) /* every element a record, pending at first */
        assert_non_null(live_elem_make(j, e));
    j->cancelled = cancelled;
    return j;
}

static void str_eq(const char *a, const char *b)
{
    assert_string_equal(a ? a : "", b ? b : "");
}

static void job_eq(const struct ljob *a, const struct ljob *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->parallel, b->parallel);
    assert_int_equal(a->ntasks, b->ntasks);
    assert_int_equal(a->procs, b->procs);
    assert_int_equal(a->ppn, b->ppn);
    assert_int_equal(a->mem_mb, b->mem_mb);
    assert_int_equal(a->disk_mb, b->disk_mb);
    assert_int_equal(a->limit_s, b->limit_s);
    assert_int_equal(a->submitted, b->submitted);
    assert_int_equal(a->finished, b->finished);
    assert_int_equal(a->queue, b->queue);
    assert_int_equal(a->shell, b->shell);
    assert_int_equal(a->hold, b->hold);
    assert_int_equal(a->early, b->early);
    assert_int_equal(a->cancelled, b->cancelled);
    assert_int_equal(a->requeues, b->requeues);
    str_eq(a->name, b->name);
    str_eq(a->user, b->user);
    str_eq(a->group, b->group);
    str_eq(a->account, b->account);
    str_eq(a->class_, b->class_);
    str_eq(a->qos, b->qos);
    str_eq(a->key, b->key);
    str_eq(a->resv, b->resv);
}

static void elem_eq(const struct lelem *a, const struct lelem *b)
{
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->cl, b->cl);
    assert_int_equal(a->cjob, b->cjob);
    assert_int_equal(a->start, b->start);
    assert_int_equal(a->end, b->end);
    assert_int_equal(a->exit, b->exit);
    assert_int_equal(a->signal, b->signal);
    assert_int_equal(a->want_cancel, b->want_cancel);
    assert_int_equal(a->want_requeue, b->want_requeue);
    assert_int_equal(a->run, b->run);
    str_eq(a->reason, b->reason);
    str_eq(a->hosts, b->hosts);
}

static void records_round_trip_through_the_store(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_batch_live.XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct store *s = open_store(dir);
    int tj = store_table(s, "jobs"), te = store_table(s, "elems");
    /* every shape: a parallel job with every field, a bare one, a task array whose
     * elements take every state (pending ones are never written) */
    struct ljob *jobs[3] = {mkjob(1, true, 1, true), mkjob(2, true, 1, false),
                            mkjob(3, false, EL_CANCELLED + 2, true)};
    *live_elem_rec(jobs[0], 0) =
        (struct lelem){.used = true,
                       .state = EL_RUNNING,
                       .cl = 2,
                       .cjob = 77,
                       .start = 5,
                       .want_requeue = true, /* JOB_CTL requeue under way */
                       .run = 3,
                       .hosts = sd("a,a,b,b,c,c"),
                       .reason = NULL};
    *live_elem_rec(jobs[1], 0) = (struct lelem){.used = true,
                                                .state = EL_STARTING,
                                                .cl = 0,
                                                .want_cancel = true,
                                                .hosts = sd("h1"),
                                                .start = 9};
    for (uint32_t e = 1; e < jobs[2]->ntasks; e++) {
        struct lelem *el = live_elem_rec(jobs[2], e);
        el->state = (uint8_t)(e - 1 < EL_STARTING ? EL_STARTING : e - 1);
        el->cl = (int8_t)(e % 3);
        el->cjob = 1000 + e;
        el->start = 100 + e;
        el->end = el->state >= EL_DONE ? 200 + e : 0;
        el->exit = el->state == EL_FAILED ? -1 : el->state == EL_KILLED ? 137 : 0;
        el->signal = el->state == EL_KILLED ? 9 : 0;
        el->reason = e % 2 ? sd("wall-clock limit") : NULL;
        el->hosts = sd("node1");
    }
    jobs[0]->requeues = 4;
    const char *argv[] = {"sh", "-c", "echo {i}", ""};
    struct wire_buf wb;
    wire_buf_init(&wb);
    uint32_t nelems = 0;
    for (int i = 0; i < 3; i++) {
        uint8_t k[12];
        wire_buf_reset(&wb);
        live_job_encode(jobs[i], argv, 3 + (uint32_t)i % 2, &wb);
        store_key_u64(k, jobs[i]->id);
        assert_int_equal(store_put(s, tj, k, 8, wb.sb.data, wb.sb.size), 0);
        for (uint32_t e = 0; e < jobs[i]->ntasks; e++) {
            if (live_elem_peek(jobs[i], e)->state == EL_PENDING)
                continue;
            wire_buf_reset(&wb);
            live_elem_encode(live_elem_peek(jobs[i], e), &wb);
            store_key_u64_u32(k, jobs[i]->id, e);
            assert_int_equal(store_put(s, te, k, 12, wb.sb.data, wb.sb.size), 0);
            nelems++;
        }
    }
    assert_int_equal(nelems, 1 + 1 + EL_CANCELLED + 1);
    wire_buf_free(&wb);
    assert_int_equal(store_commit(s), 0);
    store_close(&s);

    static struct live L;
    memset(&L, 0, sizeof L);
    L.store = open_store(dir);
    L.t_jobs = store_table(L.store, "jobs");
    L.t_elems = store_table(L.store, "elems");
    L.next_id = 1;
    assert_int_equal(live_load(&L), 0);
    assert_int_equal(L.njobs, 3);
    assert_int_equal(L.next_id, 4);
    for (int i = 0; i < 3; i++) {
        job_eq(jobs[i], L.jobs[i]);
        for (uint32_t e = 0; e < jobs[i]->ntasks; e++) {
            struct lelem want = *live_elem_peek(jobs[i], e);
            /* a cancelled array's pending elements load as cancelled (implicit ones: no
             * record, seen as cancelled) */
            if (jobs[i]->cancelled && want.state == EL_PENDING)
                want.state = EL_CANCELLED;
            elem_eq(&want, live_elem_peek(L.jobs[i], e));
            /* only the stored elements have a record after loading */
            assert_int_equal(live_elem_rec(L.jobs[i], e) != NULL,
                             want.state != EL_PENDING && (e || !jobs[i]->cancelled));
        }
        uint32_t argc = 0;
        char **av = live_job_argv(&L, jobs[i]->id, &argc);
        assert_non_null(av);
        assert_int_equal(argc, 3 + (uint32_t)i % 2);
        for (uint32_t a = 0; a < argc; a++)
            assert_string_equal(av[a], argv[a]);
        live_argv_free(av, argc);
    }
    /* the counters rebuilt from the elements */
    assert_int_equal(L.jobs[0]->nrun, 1);
    assert_int_equal(L.jobs[2]->nended, 4 + 1); /* done, failed, killed, cancelled + pending */
    assert_int_equal(L.jobs[2]->nrun, 3);       /* starting (e=1, 2), running (e=3) */
    /* a damaged record is refused by the decoders, not half-read */
    struct lelem el;
    assert_int_equal(live_elem_decode("\x81\xa5state\xa3xyz", 11, &el), -1);
    assert_null(live_job_decode("\x80", 1));
    assert_null(live_job_decode("\xc1", 1));
    for (int i = 0; i < 3; i++)
        live_job_free(jobs[i]);
    live_jobs_free(&L);
    store_close(&L.store);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A move's kept cluster job (issue 26, livemigrate.c) is stored with the element and read
 * back; a record without it (an older one) reads as no move. */
static void a_move_is_kept_in_the_element_record(void **state)
{
    (void)state;
    struct lelem a = {.state = EL_PENDING,
                      .cl = 1,
                      .run = 2,
                      .lost = 1,
                      .mig_cjob = 77,
                      .mig_cl = 1,
                      .mig_run = 1,  /* the move went to another cluster: run moved on */
                      .ck_cjob = 55, /* and a parallel job's run before (its checkpoints) */
                      .ck_cl = 1},
                 b;
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_elem_encode(&a, &wb);
    assert_int_equal(live_elem_decode(wb.sb.data, wb.sb.size, &b), 0);
    assert_int_equal(b.mig_cjob, 77);
    assert_int_equal(b.mig_cl, 1);
    assert_int_equal(b.mig_run, 1);
    assert_int_equal(b.ck_cjob, 55);
    assert_int_equal(b.ck_cl, 1);
    assert_int_equal(b.run, 2);
    assert_int_equal(b.lost, 1);
    free(b.reason);
    free(b.hosts);
    /* a record written before mig_run: the kept job's run is the element's */
    wire_buf_reset(&wb);
    wire_pack_map(&wb, 5);
    wire_put_str(&wb, "state", "pending");
    wire_put_i64(&wb, "cl", 1);
    wire_put_u64(&wb, "run", 2);
    wire_put_u64(&wb, "mig_cjob", 77);
    wire_put_i64(&wb, "mig_cl", 1);
    assert_int_equal(live_elem_decode(wb.sb.data, wb.sb.size, &b), 0);
    assert_int_equal(b.mig_cjob, 77);
    assert_int_equal(b.mig_run, 2);
    free(b.reason);
    free(b.hosts);
    a.mig_cjob = a.ck_cjob = 0;
    wire_buf_reset(&wb);
    live_elem_encode(&a, &wb);
    assert_int_equal(live_elem_decode(wb.sb.data, wb.sb.size, &b), 0);
    assert_int_equal(b.mig_cjob, 0);
    assert_int_equal(b.mig_cl, -1);
    assert_int_equal(b.ck_cjob, 0);
    assert_int_equal(b.ck_cl, -1);
    free(b.reason);
    free(b.hosts);
    wire_buf_free(&wb);
}

/* A job's element pages hold its elements only (issue 28): the last page of a job has
 * the slots its remaining elements need, so a one-element job's first record costs one
 * slot, not LIVE_PAGE (it cost 21 KB a pending job); an index past the job has none. */
static void element_pages_hold_only_the_job_elements(void **state)
{
    (void)state;
    struct ljob *one = mkjob(1, false, 1, false);
    assert_int_equal(one->npages, 1);
    assert_int_equal(one->pages[0]->n, 1);
    assert_int_equal(one->cappages, 1);
    assert_null(live_elem_make(one, 1));
    struct ljob *arr = calloc(1, sizeof *arr);
    arr->id = 2;
    arr->ntasks = LIVE_PAGE + 44;
    struct lelem *last = live_elem_make(arr, LIVE_PAGE + 43);
    assert_non_null(last);
    assert_int_equal(arr->npages, 1);
    assert_int_equal(arr->pages[0]->base, LIVE_PAGE);
    assert_int_equal(arr->pages[0]->n, 44);
    last->reason = sd("the last one");
    assert_non_null(live_elem_make(arr, 0)); /* a full page, ahead of the short one */
    assert_int_equal(arr->npages, 2);
    assert_int_equal(arr->pages[0]->n, LIVE_PAGE);
    assert_int_equal(arr->nrec, 2);
    assert_null(live_elem_make(arr, LIVE_PAGE + 44));
    /* the walk sees both records, and nothing past the short page */
    uint32_t e = 1;
    assert_ptr_equal(live_elem_next(arr, &e), last);
    assert_int_equal(e, LIVE_PAGE + 43);
    e++;
    assert_null(live_elem_next(arr, &e));
    assert_null(live_elem_rec(arr, LIVE_PAGE + 42)); /* a slot without a record */
    assert_int_equal(live_elem_peek(arr, LIVE_PAGE + 42)->state, EL_PENDING);
    struct live L = {0};
    live_elem_mark(&L, arr, LIVE_PAGE + 43);
    assert_int_equal(L.ndirty, 1);
    assert_ptr_equal(L.dirty[0], arr);
    live_elem_mark(&L, arr, 0); /* listed once */
    assert_int_equal(L.ndirty, 1);
    live_dirty_forget(&L, arr); /* a job freed without being added leaves no pointer */
    assert_int_equal(L.ndirty, 0);
    free(L.dirty);
    assert_true(arr->pages[1]->dirty);
    live_job_free(one);
    live_job_free(arr); /* frees the reason of the short page's last slot (ASan) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unit_per_s_gives_the_same_priorities),
        cmocka_unit_test(adopt_takes_nodes_and_refuses_bad_ones),
        cmocka_unit_test(records_round_trip_through_the_store),
        cmocka_unit_test(element_pages_hold_only_the_job_elements),
        cmocka_unit_test(a_move_is_kept_in_the_element_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

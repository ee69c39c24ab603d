/*
 * test_acct.c - daemon/acct.h: a record saved comes back as an ACCTS row; the filters
 * (user, state, window, job) and paging; the retention sweep deletes only records past
 * keep_days, the oldest ids over max_records, and looks at no more than
 * ACCT_SWEEP_SCAN records per call (a big table is swept over several calls).
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

#include "daemon/acct.h"
#include "store/store.h"

static const struct store_table tables[] = {{ACCT_TABLE, STORE_KEY_U64}, {NULL}};

struct fx {
    char dir[64];
    struct store *s;
    int t;
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/gridnode-acct-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    char err[256];
    struct store_opts o = {"test", tables, STORE_SYNC_NONE, 0, false};
    if (!(f->s = store_open(f->dir, &o, err, sizeof err)))
        return -1;
    f->t = store_table(f->s, ACCT_TABLE);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_close(&f->s);
    nftw(f->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* n records: job i+1 of user u<i%2>, state done or failed, finished at 1000 * (i+1). */
static void fill(struct fx *f, uint32_t n)
{
    struct wire_buf wb;
    const char *hosts[] = {"n1", "n2"};
    wire_buf_init(&wb);
    for (uint32_t i = 0; i < n; i++) {
        struct acct_rec r = {.job = i + 1,
                             .user = i % 2 ? "u1" : "u0",
                             .name = "x",
                             .kind = "parallel",
                             .state = i % 3 ? "done" : "failed",
                             .submitted_ms = 1000 * (int64_t)(i + 1) - 500,
                             .finished_ms = 1000 * (int64_t)(i + 1),
                             .cpu_s = 1.5,
                             .procs = 2,
                             .nhosts = 2,
                             .hosts = hosts};
        assert_int_equal(acct_save(f->s, f->t, &r, &wb), 0);
    }
    wire_buf_free(&wb);
    assert_int_equal(store_commit(f->s), 0);
}

/* Sends ACCT with the fields packed by the caller (nf of them) and decodes ACCTS. */
struct ans {
    struct wire_buf req, rep;
    struct wire_msg m, r;
};

static const msgpack_object *ask(struct fx *f, struct ans *a)
{
    struct wire_error e;
    assert_int_equal(wire_decode(a->req.sb.data, a->req.sb.size, true, &a->m, &e), 0);
    wire_buf_init(&a->rep);
    acct_reply(f->s, f->t, &a->m, &a->rep);
    assert_int_equal(wire_decode(a->rep.sb.data, a->rep.sb.size, false, &a->r, &e), 0);
    return a->r.root;
}

static void done(struct ans *a)
{
    wire_msg_free(&a->m);
    wire_msg_free(&a->r);
    wire_buf_free(&a->req);
    wire_buf_free(&a->rep);
}

static void test_rows_filters_and_paging(void **state)
{
    struct fx *f = *state;
    struct ans a;
    fill(f, 10);
    wire_buf_init(&a.req);
    wire_begin(&a.req, WT_ACCT, 7, 3);
    wire_put_str(&a.req, "user", "u1");
    wire_put_str(&a.req, "state", "done,cancelled");
    wire_put_u64(&a.req, "start", 4000);
    const msgpack_object *r = ask(f, &a);
    assert_int_equal(a.r.type, WT_ACCTS);
    const msgpack_object *rows = wire_get(r, "rows");
    /* u1: jobs 2,4,6,8,10; done: not 1,4,7,10; finished >= 4000: 4.. -> 6, 8 */
    assert_int_equal(rows->via.array.size, 2);
    assert_int_equal(wire_get_u64(&rows->via.array.ptr[0], "job", 0), 6);
    assert_int_equal(wire_get_u64(&rows->via.array.ptr[1], "job", 0), 8);
    assert_int_equal(wire_get(&rows->via.array.ptr[0], "hosts")->via.array.size, 2);
    assert_null(wire_get(r, "next"));
    done(&a);
    /* a page of 3 from job 5 says where to go on */
    wire_buf_init(&a.req);
    wire_begin(&a.req, WT_ACCT, 8, 2);
    wire_put_u64(&a.req, "from", 5);
    wire_put_u64(&a.req, "count", 3);
    r = ask(f, &a);
    assert_int_equal(wire_get(r, "rows")->via.array.size, 3);
    assert_int_equal(wire_get_u64(r, "next", 0), 8);
    done(&a);
    /* one job; an absent one is NOT_FOUND */
    wire_buf_init(&a.req);
    wire_begin(&a.req, WT_ACCT, 9, 1);
    wire_put_u64(&a.req, "job", 11);
    r = ask(f, &a);
    assert_int_equal(a.r.type, WT_ERROR);
    assert_int_equal(wire_get_u64(r, "code", 0), WE_NOT_FOUND);
    done(&a);
}

static void test_sweep_keeps_days_and_count_in_bounded_batches(void **state)
{
    struct fx *f = *state;
    uint32_t n = ACCT_SWEEP_SCAN + 100;
    fill(f, n);
    struct acct_sweep st = {0};
    /* keep 1 day at 1 day + 50.5 s: jobs finished before 50,500 ms go (1..50) */
    struct acct_conf keep = {1, 0};
    assert_int_equal(acct_sweep(f->s, f->t, &keep, 86400000 + 50500, &st), 50);
    assert_int_equal(st.cursor, ACCT_SWEEP_SCAN + 1); /* stopped after one batch */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(acct_sweep(f->s, f->t, &keep, 86400000 + 50500, &st), 0);
    assert_int_equal(st.cursor, 0); /* the end reached: next time from the top */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_count(f->s, f->t), n - 50);
    /* the cap: the lowest ids go first, at most one batch a call */
    struct acct_conf cap = {0, 10};
    assert_int_equal(acct_sweep(f->s, f->t, &cap, 0, &st), ACCT_SWEEP_SCAN);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(acct_sweep(f->s, f->t, &cap, 0, &st), n - 50 - ACCT_SWEEP_SCAN - 10);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_count(f->s, f->t), 10);
    uint8_t key[8];
    void *v;
    size_t vl;
    store_key_u64(key, n - 10);
    assert_int_equal(store_get(f->s, f->t, key, 8, &v, &vl), 1); /* gone */
    store_key_u64(key, n - 9);
    assert_int_equal(store_get(f->s, f->t, key, 8, &v, &vl), 0); /* kept */
    free(v);
    /* nothing to do with both bounds off */
    struct acct_conf off = {0, 0};
    assert_int_equal(acct_sweep(f->s, f->t, &off, 0, &st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_filters_and_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_keeps_days_and_count_in_bounded_batches, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

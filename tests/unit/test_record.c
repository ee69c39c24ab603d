/*
 * test_record.c - daemon/record.h, the one way roles load and save their records:
 * records come back in key order with their bytes; a record the role cannot read, or
 * whose key has the wrong length for its table, is skipped and counted (the role goes
 * on); a failing loader stops the load; saved keys have the table's layout; named
 * counters round-trip and a damaged one is refused rather than read as a number.
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

#include "daemon/record.h"
#include "lib/log.h"
#include "store/store.h"

static const struct store_table tables[] = {
    {"jobs", STORE_KEY_U64}, {"elems", STORE_KEY_U64_U32}, {"named", STORE_KEY_STR}, {NULL}};

struct fx {
    char dir[64];
    struct store *s;
    int jobs, elems, named;
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/gridnode-record-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    char err[256];
    struct store_opts o = {"test", tables, STORE_SYNC_NONE, 0, false};
    if (!(f->s = store_open(f->dir, &o, err, sizeof err)))
        return -1;
    f->jobs = store_table(f->s, "jobs");
    f->elems = store_table(f->s, "elems");
    f->named = store_table(f->s, "named");
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

/* A record of the test: one unsigned number, encoded as msgpack. */
static int enc_num(const void *rec, struct wire_buf *wb)
{
    const uint64_t *v = rec;
    if (*v == 666)
        return -1; /* cannot be encoded */
    msgpack_pack_uint64(&wb->pk, *v);
    return 0;
}

struct seen {
    uint64_t ids[16], vals[16];
    int n;
    int fail_at; /* loader returns -1 at this record (0: never) */
};

static int load_num(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct seen *s = arg;
    (void)klen;
    if (s->fail_at && s->n + 1 == s->fail_at)
        return -1;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    int ok = msgpack_unpack_next(&up, val, vlen, NULL) == MSGPACK_UNPACK_SUCCESS &&
             up.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER;
    uint64_t v = ok ? up.data.via.u64 : 0;
    msgpack_unpacked_destroy(&up);
    if (!ok)
        return RECORD_UNREADABLE;
    if (v == 7)
        return RECORD_IGNORED;
    s->ids[s->n] = store_key_get_u64(key);
    s->vals[s->n++] = v;
    return RECORD_TAKEN;
}

static void test_save_load(void **state)
{
    struct fx *f = *state;
    struct wire_buf wb;
    wire_buf_init(&wb);
    uint64_t v1 = 11, v2 = 22, v7 = 7, bad = 666;
    assert_int_equal(record_save_u64(f->s, f->jobs, 2, &v2, enc_num, &wb), 0);
    assert_int_equal(record_save_u64(f->s, f->jobs, 1, &v1, enc_num, &wb), 0);
    assert_int_equal(record_save_u64(f->s, f->jobs, 3, &v7, enc_num, &wb), 0);
    assert_int_equal(record_save_u64(f->s, f->jobs, 4, &bad, enc_num, &wb), -1);
    /* damaged records: not msgpack, and a key of the wrong length */
    uint8_t k[8];
    store_key_u64(k, 5);
    assert_int_equal(store_put(f->s, f->jobs, k, 8, "\xc1", 1), 0);
    assert_int_equal(store_put(f->s, f->jobs, "abc", 3, "\x01", 1), 0);
    assert_int_equal(store_commit(f->s), 0);

    struct seen s = {0};
    assert_int_equal(record_load(f->s, f->jobs, load_num, &s), 2); /* 5 and "abc" */
    assert_int_equal(s.n, 2);
    assert_int_equal(s.ids[0], 1);
    assert_int_equal(s.vals[0], 11);
    assert_int_equal(s.ids[1], 2);
    assert_int_equal(s.vals[1], 22);

    struct seen stop = {.fail_at = 2};
    assert_int_equal(record_load(f->s, f->jobs, load_num, &stop), -1);
    wire_buf_free(&wb);
}

static void test_u64_u32_key(void **state)
{
    struct fx *f = *state;
    struct wire_buf wb;
    wire_buf_init(&wb);
    uint64_t v = 5;
    assert_int_equal(record_save_u64_u32(f->s, f->elems, 9, 3, &v, enc_num, &wb), 0);
    assert_int_equal(store_commit(f->s), 0);
    uint8_t k[12];
    store_key_u64_u32(k, 9, 3);
    void *val;
    size_t vl;
    assert_int_equal(store_get(f->s, f->elems, k, sizeof k, &val, &vl), 0);
    assert_int_equal(vl, 1);
    assert_int_equal(((uint8_t *)val)[0], 5);
    free(val);
    struct seen s = {0};
    assert_int_equal(record_load(f->s, f->elems, load_num, &s), 0);
    assert_int_equal(s.n, 1);
    wire_buf_free(&wb);
}

static void test_counters(void **state)
{
    struct fx *f = *state;
    uint64_t v = 42;
    assert_int_equal(record_get_u64(f->s, f->named, "next_job", &v), 1);
    assert_int_equal(v, 42);
    assert_int_equal(record_put_u64(f->s, f->named, "next_job", 18446744073709551615ULL), 0);
    assert_int_equal(store_put(f->s, f->named, "damaged", 7, "12x", 3), 0);
    assert_int_equal(store_put(f->s, f->named, "negative", 8, "-3", 2), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(record_get_u64(f->s, f->named, "next_job", &v), 0);
    assert_true(v == 18446744073709551615ULL);
    v = 1;
    assert_int_equal(record_get_u64(f->s, f->named, "damaged", &v), -1);
    assert_int_equal(record_get_u64(f->s, f->named, "negative", &v), -1);
    assert_int_equal(v, 1);
    /* stored as decimal text, as gridnode dump shows it */
    void *val;
    size_t vl;
    assert_int_equal(store_get(f->s, f->named, "next_job", 8, &val, &vl), 0);
    assert_memory_equal(val, "18446744073709551615", 20);
    free(val);
}

int main(void)
{
    log_init("test", LOG_LEVEL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_save_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_u64_u32_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

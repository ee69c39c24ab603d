/*
 * test_jobenv.c - the shared checks of issue 15: JOB_LIST's filters (wire/joblist.c, used
 * by the cluster, batch and meta roles) and a job's env / chdir (wire/jobenv.c, checked
 * by every role and by the node).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "wire/jobenv.h"
#include "wire/joblist.h"
#include "wire/wire.h"

/* Unpacks wb's map into up (kept alive by the caller with wb). */
static const msgpack_object *map_of(struct wire_buf *wb, msgpack_unpacked *up)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    assert_int_equal(msgpack_unpack_next(up, wb->sb.data, wb->sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    return &up->data;
}

static void test_filters(void **state)
{
    (void)state;
    struct wire_buf wb;
    msgpack_unpacked up;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 3);
    wire_put_str(&wb, "user", "alice");
    wire_put_str(&wb, "state", "queued,held");
    wire_put_u64(&wb, "queue", 2);
    const msgpack_object *m = map_of(&wb, &up);
    assert_true(joblist_filtered(m));
    assert_true(joblist_allows(m, "alice", "held", "x", 2));
    assert_false(joblist_allows(m, "alice", "held", "x", 1));
    assert_false(joblist_allows(m, "alice", "held", "x", -1)); /* no queue: left out */
    assert_false(joblist_allows(m, "alicex", "queued", "x", 2));
    assert_false(joblist_allows(m, "alice", "queue", "x", 2)); /* whole words only */
    assert_false(joblist_allows(m, NULL, "queued", "x", 2));

    /* a row as a role packs it: its gstate may match too (the grid spool) */
    struct wire_buf row;
    wire_buf_init(&row);
    wire_pack_map(&row, 4);
    wire_put_str(&row, "user", "alice");
    wire_put_str(&row, "state", "running");
    wire_put_str(&row, "gstate", "held");
    wire_put_u64(&row, "queue", 2);
    assert_true(joblist_row_allows(m, row.sb.data, row.sb.size));
    wire_buf_reset(&row);
    wire_pack_map(&row, 2);
    wire_put_str(&row, "user", "bob");
    wire_put_str(&row, "state", "queued");
    assert_false(joblist_row_allows(m, row.sb.data, row.sb.size));
    wire_buf_free(&row);
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);

    wire_buf_init(&wb); /* no filter: everything */
    wire_pack_map(&wb, 1);
    wire_put_u64(&wb, "from", 3);
    m = map_of(&wb, &up);
    assert_false(joblist_filtered(m));
    assert_true(joblist_allows(m, NULL, "done", NULL, -1));
    assert_true(joblist_row_allows(m, "\xc1", 1)); /* not even read */
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

/* jobenv_check of {"env": env[0..n), "chdir": dir (NULL: absent)}. */
static int check(char *const *env, uint32_t n, const char *dir, char *why, size_t wl)
{
    struct wire_buf wb;
    msgpack_unpacked up;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 1 + (dir != NULL));
    wire_put_strv(&wb, "env", env, n);
    if (dir)
        wire_put_str(&wb, "chdir", dir);
    int rc = jobenv_check(map_of(&wb, &up), why, wl);
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
    return rc;
}

static void test_env_checks(void **state)
{
    (void)state;
    char why[200];
    char *ok[] = {"A=1", "_x9=", "PATH=/a:/b=c"};
    assert_int_equal(check(ok, 3, "/tmp", why, sizeof why), 0);
    char *bad1[] = {"1A=x"}, *bad2[] = {"NOEQ"}, *bad3[] = {"=x"}, *bad4[] = {"A-B=1"};
    char **bads[] = {bad1, bad2, bad3, bad4};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(check(bads[i], 1, NULL, why, sizeof why), -1);
        assert_non_null(strstr(why, "env entry 0"));
    }
    assert_int_equal(check(ok, 1, "relative", why, sizeof why), -1);
    assert_non_null(strstr(why, "absolute"));
    /* 64 KiB together: one byte per entry counted for its terminator */
    char *big = malloc(JOBENV_MAX_BYTES);
    memset(big, 'x', JOBENV_MAX_BYTES - 1);
    big[0] = 'A';
    big[1] = '=';
    big[JOBENV_MAX_BYTES - 1] = '\0';
    char *one[] = {big};
    assert_int_equal(check(one, 1, NULL, why, sizeof why), 0);
    char *two[] = {big, "B=1"};
    assert_int_equal(check(two, 2, NULL, why, sizeof why), -1);
    assert_non_null(strstr(why, "64 KiB"));
    free(big);
}

static void test_env_dup_put(void **state)
{
    (void)state;
    struct wire_buf wb, out;
    msgpack_unpacked up;
    char *env[] = {"A=1", "B=2", NULL};
    wire_buf_init(&wb);
    wire_buf_init(&out);
    assert_int_equal(jobenv_put(NULL, env, "/d"), 2);
    assert_int_equal(jobenv_put(NULL, NULL, ""), 0);
    wire_pack_map(&wb, jobenv_put(NULL, env, "/d"));
    jobenv_put(&wb, env, "/d");
    uint32_t n;
    int oom;
    char **d = jobenv_dup(map_of(&wb, &up), &n, &oom);
    assert_int_equal(n, 2);
    assert_int_equal(oom, 0);
    assert_string_equal(d[0], "A=1");
    assert_string_equal(d[1], "B=2");
    assert_null(d[2]);
    jobenv_free(d);
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
    wire_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_env_checks),
        cmocka_unit_test(test_env_dup_put),
    };
    return cmocka_run_group_tests_name("jobenv", tests, NULL, NULL);
}

/*
 * test_dependency.c - the dependency parser and evaluation shared by every role
 * (wire/depend.c, issue 27).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "wire/depend.h"

static int parse(const char *s, struct depend *d, char *why)
{
    return depend_parse(s, strlen(s), d, why, 200);
}

static void test_parse_ok(void **state)
{
    (void)state;
    struct depend d;
    char why[200], buf[256];
    assert_int_equal(parse("afterok:12:13,afterany:7,singleton", &d, why), 0);
    assert_false(d.any);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.t[0].type, DEP_AFTEROK);
    assert_int_equal(d.t[1].id, 13);
    assert_int_equal(d.t[3].type, DEP_SINGLETON);
    depend_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "afterok:12:13,afterany:7,singleton");
    assert_true(depend_has_singleton(&d));
    depend_free(&d);
    assert_int_equal(parse("after:1?afternotok:2", &d, why), 0);
    assert_true(d.any);
    depend_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "after:1?afternotok:2");
    depend_free(&d);
    assert_int_equal(parse("afterok:1:2?after:3", &d, why), 0); /* any of the three */
    depend_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "afterok:1?afterok:2?after:3");
    depend_free(&d);
}

static void test_parse_bad(void **state)
{
    (void)state;
    static const char *bad[] = {"",
                                "afterok",
                                "afterok:",
                                "afterok:x",
                                "afterok:0",
                                "afterok:1:",
                                "aftercorr:1",
                                "afterok:1,",
                                ",afterok:1",
                                "after:1+5",
                                "singleton:3",
                                "afterok:1,after:2?after:3",
                                "AFTEROK:1",
                                "afterok: 1",
                                "afterok:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct depend d;
        char why[200] = "";
        assert_int_equal(parse(bad[i], &d, why), -1);
        assert_true(strlen(why) > 10);
        assert_null(d.t);
    }
    char why[200];
    struct depend d;
    assert_int_equal(parse("aftercorr:1", &d, why), -1);
    assert_non_null(strstr(why, "aftercorr"));
    char big[1100];
    memset(big, '1', sizeof big - 1);
    memcpy(big, "afterok:", 8);
    big[sizeof big - 1] = 0;
    assert_int_equal(parse(big, &d, why), -1);
}

/* A fake role: job i's state is jobs[i]. */
static enum dep_job jobs[16];
static enum dep_job look(void *arg, uint64_t id, const char **shown)
{
    (void)arg;
    *shown = id < 16 && jobs[id] == DJ_NOTOK ? "failed" : NULL;
    return id < 16 ? jobs[id] : DJ_UNKNOWN;
}

/* The verdict; for DEP_WAIT why gets the first term still waited for (as the roles'
 * reasons show it: the first term of the canonical text). */
static enum dep_verdict eval(struct depend *d, bool blocked, char *why)
{
    bool ch = false;
    enum dep_verdict v = depend_eval(d, look, NULL, blocked, &ch, why, 200);
    if (v == DEP_WAIT) {
        assert_string_equal(why, "");
        depend_format(d, why, 200);
        why[strcspn(why, ",?")] = 0;
    }
    return v;
}

static void test_eval(void **state)
{
    (void)state;
    struct depend d;
    char why[200], buf[64];
    memset(jobs, 0, sizeof jobs);
    jobs[1] = DJ_PENDING;
    jobs[2] = DJ_PENDING;
    assert_int_equal(parse("afterok:1,afterany:2", &d, why), 0);
    assert_int_equal(depend_unknown(&d, look, NULL), -1);
    assert_int_equal(eval(&d, false, why), DEP_WAIT);
    assert_string_equal(why, "afterok:1");
    jobs[1] = DJ_OK;
    assert_int_equal(eval(&d, false, why), DEP_WAIT);
    assert_string_equal(why, "afterany:2");
    depend_format(&d, buf, sizeof buf); /* met terms are no longer shown nor stored */
    assert_string_equal(buf, "afterany:2");
    jobs[1] = DJ_UNKNOWN; /* purged after it was met: no matter */
    jobs[2] = DJ_NOTOK;
    assert_int_equal(eval(&d, false, why), DEP_MET);
    depend_free(&d);

    jobs[3] = DJ_NOTOK;
    assert_int_equal(parse("afterok:3", &d, why), 0);
    assert_int_equal(eval(&d, false, why), DEP_NEVER);
    assert_string_equal(why, "afterok:3 (job 3 failed)");
    depend_free(&d);
    jobs[4] = DJ_OK;
    assert_int_equal(parse("afternotok:4", &d, why), 0);
    assert_int_equal(eval(&d, false, why), DEP_NEVER);
    depend_free(&d);
    assert_int_equal(parse("afterok:9", &d, why), 0); /* 9 purged before it was checked */
    assert_int_equal(depend_unknown(&d, look, NULL), 0);
    assert_int_equal(eval(&d, false, why), DEP_NEVER);
    assert_non_null(strstr(why, "purged"));
    depend_free(&d);
    assert_int_equal(parse("afterany:9,after:9", &d, why), 0); /* purged: ended */
    assert_int_equal(eval(&d, false, why), DEP_MET);
    depend_free(&d);

    jobs[5] = DJ_PENDING;
    assert_int_equal(parse("after:5", &d, why), 0);
    assert_int_equal(eval(&d, false, why), DEP_WAIT);
    jobs[5] = DJ_STARTED;
    assert_int_equal(eval(&d, false, why), DEP_MET);
    depend_free(&d);

    /* any: one holding is enough; never only when none can */
    jobs[6] = DJ_PENDING;
    assert_int_equal(parse("afterok:3?afterok:6", &d, why), 0);
    assert_int_equal(eval(&d, false, why), DEP_WAIT);
    assert_string_equal(why, "afterok:6");
    depend_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "afterok:6");
    jobs[6] = DJ_NOTOK;
    assert_int_equal(eval(&d, false, why), DEP_NEVER);
    assert_string_equal(why, "afterok:6 (job 6 failed)");
    depend_free(&d);
    assert_int_equal(parse("afterok:1?afterok:6", &d, why), 0);
    jobs[1] = DJ_OK;
    assert_int_equal(eval(&d, false, why), DEP_MET);
    depend_free(&d);

    /* singleton: waits while blocked, never marked met for good */
    assert_int_equal(parse("singleton", &d, why), 0);
    assert_int_equal(eval(&d, true, why), DEP_WAIT);
    assert_string_equal(why, "singleton");
    assert_int_equal(eval(&d, false, why), DEP_MET);
    depend_free(&d);
    assert_int_equal(parse("singleton,afterany:2", &d, why), 0);
    jobs[2] = DJ_STARTED;
    assert_int_equal(eval(&d, false, why), DEP_WAIT);
    assert_true(depend_has_singleton(&d));
    depend_free(&d);
}

/* Random text of the vocabulary's characters: no crash; what parses prints back in
 * canonical form that parses to the same terms. */
static void test_random_roundtrip(void **state)
{
    (void)state;
    static const char *const words[] = {"after", "afterok", "afterany", "afternotok", "singleton",
                                        ":",     ",",       "?",        "1",          "23",
                                        "0",     "x",       ":7"};
    unsigned seed = 12345;
    for (int round = 0; round < 20000; round++) {
        char s[256] = "", why[200], buf[DEPEND_LEN_MAX + 1];
        int n = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 12;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            strcat(s, words[(seed >> 16) % (sizeof words / sizeof *words)]);
        }
        struct depend d, e;
        if (depend_parse(s, strlen(s), &d, why, sizeof why) < 0) {
            assert_true(strlen(why) > 0);
            continue;
        }
        depend_format(&d, buf, sizeof buf);
        assert_int_equal(depend_parse(buf, strlen(buf), &e, why, sizeof why), 0);
        assert_int_equal(d.n, e.n);
        if (d.n >= 2) /* one term: all and any are the same */
            assert_int_equal(d.any, e.any);
        for (uint32_t k = 0; k < d.n; k++) {
            assert_int_equal(d.t[k].type, e.t[k].type);
            assert_true(d.t[k].id == e.t[k].id);
        }
        depend_free(&d);
        depend_free(&e);
    }
    /* the term bound: 1 KiB holds at most DEPEND_TERMS_MAX ids */
    char big[DEPEND_LEN_MAX + 1] = "afterok";
    while (strlen(big) + 2 <= DEPEND_LEN_MAX)
        strcat(big, ":1");
    struct depend d;
    char why[200];
    assert_int_equal(depend_parse(big, strlen(big), &d, why, sizeof why), 0);
    assert_true(d.n <= DEPEND_TERMS_MAX);
    depend_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_eval),
        cmocka_unit_test(test_random_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

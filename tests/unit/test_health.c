/*
 * test_health.c - node health (roles/client/live/health.c), shared by both clients: the
 * probe fails on an unusable working directory and passes once it is repaired; a sick
 * node is re-probed with a doubling backoff capped at HEALTH_MAX_S.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roles/client/live/health.h"

static void test_probe_and_backoff(void **state)
{
    (void)state;
    char dir[] = "/tmp/gridnode-health-XXXXXX", work[64], why[256];
    assert_non_null(mkdtemp(dir));
    snprintf(work, sizeof work, "%s/work", dir);
    assert_int_equal(health_probe(dir, why, sizeof why), 0);
    assert_int_equal(access(work, F_OK), 0);
    assert_int_equal(rmdir(work), 0);

    /* the working directory is a file: the probe says so */
    FILE *f = fopen(work, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(health_probe(dir, why, sizeof why), -1);
    assert_non_null(strstr(why, "cannot write in"));

    struct health h = {0};
    assert_true(health_sick(&h, "disk on fire", 1000));
    assert_false(health_sick(&h, "again", 1000)); /* once */
    assert_string_equal(h.sick, "disk on fire");
    assert_int_equal(h.next_ms, 1000 + HEALTH_FIRST_S * 1000);
    assert_false(health_check(&h, dir, 1000)); /* not due */
    int64_t now = h.next_ms, last = HEALTH_FIRST_S;
    for (int k = 0; k < 10; k++) { /* 10, 20, 40, ... capped at HEALTH_MAX_S */
        assert_false(health_check(&h, dir, now));
        int64_t d = (h.next_ms - now) / 1000;
        assert_true(d == (last * 2 < HEALTH_MAX_S ? last * 2 : HEALTH_MAX_S));
        last = d;
        now = h.next_ms;
    }
    assert_int_equal(last, HEALTH_MAX_S);

    /* repaired: healthy again at the next probe */
    assert_int_equal(unlink(work), 0);
    assert_true(health_check(&h, dir, now));
    assert_string_equal(h.sick, "");
    assert_int_equal(rmdir(work), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_and_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

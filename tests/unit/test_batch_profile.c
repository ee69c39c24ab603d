/*
 * test_batch_profile.c - the availability profile (roles/batch/engine/profile.c) against a
 * plain array holding one value per second: random range additions, trims and
 * queries must agree exactly, across block splits and merges. The seed is printed
 * and can be set with BATCH_TEST_SEED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/batch/engine/profile.h"

#define H 400 /* model horizon: times [0, H); the profile's last step covers >= H */

static unsigned seed;

static unsigned rnd(unsigned n)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % n;
}

static int32_t model_min(const int32_t *m, int64_t a, int64_t b)
{
    int32_t x = m[a];
    for (int64_t t = a + 1; t < b && t < H; t++)
        if (m[t] < x)
            x = m[t];
    return x;
}

/* Earliest t in [t0, tmax] with m >= need over [t, t + len). Changes stay below
 * H - 100, so the model's tail is flat like the profile's last step, and a window
 * cut at H reads the same minimum. */
static int64_t model_find(const int32_t *m, int64_t t0, int64_t tmax, int64_t len, int32_t need)
{
    for (int64_t t = t0; t <= tmax && t < H; t++) {
        int64_t e = t + len < H ? t + len : H;
        if (model_min(m, t, e) >= need)
            return t;
    }
    return PROFILE_INF;
}

static void test_random_ops(void **state)
{
    (void)state;
    for (int round = 0; round < 60; round++) {
        struct profile p;
        int32_t m[H];
        memset(&p, 0, sizeof p);
        int64_t origin = 0;
        int32_t cap = 1 + (int32_t)rnd(50);
        assert_int_equal(bs_profile_reset(&p, 0, cap), 0);
        for (int t = 0; t < H; t++)
            m[t] = cap;
        for (int op = 0; op < 400; op++) {
            int64_t a = origin + rnd((unsigned)(H - 100 - origin)), b = a + 1 + rnd(60);
            if (b > H - 100)
                b = H - 100; /* keep the model's tail flat */
            int32_t d = (int32_t)rnd(7) - 3;
            switch (rnd(8)) {
            case 0:
                if (origin < H - 50 && rnd(4) == 0) {
                    origin += rnd(5);
                    bs_profile_trim(&p, origin);
                }
                break;
            case 1: /* open-ended: [a, for ever) */
                assert_int_equal(bs_profile_add(&p, a, PROFILE_INF, d), 0);
                for (int64_t t = a; t < H; t++)
                    m[t] += d;
                break;
            default:
                if (a < b) {
                    assert_int_equal(bs_profile_add(&p, a, b, d), 0);
                    for (int64_t t = a; t < b; t++)
                        m[t] += d;
                }
            }
            int64_t q = origin + rnd((unsigned)(H - 100 - origin));
            assert_int_equal(bs_profile_at(&p, q), m[q]);
            int64_t q2 = q + rnd(80);
            assert_int_equal(bs_profile_min(&p, q, q2), model_min(m, q, q2 > q ? q2 : q + 1));
            /* the first step above v, and a step holding none at "now" (the planner's
             * skips of groups without free nodes) */
            int32_t v = (int32_t)rnd((unsigned)cap + 6) - 3;
            int64_t above = PROFILE_INF;
            for (int64_t t = origin; t < H && above == PROFILE_INF; t++)
                if (m[t] > v)
                    above = t == origin ? INT64_MIN : t;
            assert_int_equal(bs_profile_first_above(&p, v), above);
            assert_int_equal(bs_profile_none_at_head(&p, origin), m[origin] <= 0);
            if (bs_profile_none_at_head(&p, q))
                assert_true(m[q] <= 0);
            int32_t need = (int32_t)rnd((unsigned)cap + 4) - 2;
            int64_t len = 1 + rnd(90), tmax = rnd(3) ? PROFILE_INF : q + rnd(100);
            int64_t want = model_find(m, q, tmax, len, need);
            int64_t got = bs_profile_find(&p, q, tmax, len, need);
            if (want != got)
                fail_msg("seed %u round %d op %d: find(t0=%lld tmax=%lld len=%lld need=%d) = "
                         "%lld, model %lld",
                         seed, round, op, (long long)q, (long long)tmax, (long long)len, need,
                         (long long)got, (long long)want);
        }
        /* breakpoints are strictly increasing and adjacent steps differ or were kept */
        int64_t prev = INT64_MIN;
        for (int32_t i = 0; i < bs_profile_steps(&p); i++) {
            int64_t t;
            int32_t v;
            bs_profile_step(&p, i, &t, &v);
            assert_true(t > prev);
            prev = t;
        }
        bs_profile_free(&p);
    }
}

static void test_copy_next_merge(void **state)
{
    (void)state;
    struct profile p, q;
    memset(&p, 0, sizeof p);
    memset(&q, 0, sizeof q);
    assert_int_equal(bs_profile_reset(&p, 10, 8), 0);
    for (int i = 0; i < 300; i++) /* many blocks */
        assert_int_equal(bs_profile_add(&p, 20 + 3 * i, 21 + 3 * i, -1), 0);
    assert_true(bs_profile_steps(&p) > 2 * PROFILE_BLOCK);
    assert_int_equal(bs_profile_copy(&q, &p), 0);
    assert_int_equal(bs_profile_steps(&q), bs_profile_steps(&p));
    assert_int_equal(bs_profile_next(&q, 10), 20);
    assert_int_equal(bs_profile_next(&q, 20), 21);
    assert_int_equal(bs_profile_min(&q, 10, 1000), 7);
    assert_int_equal(bs_profile_find(&q, 10, PROFILE_INF, 10, 8), 10);
    assert_int_equal(bs_profile_find(&q, 10, PROFILE_INF, 11, 8), 21 + 3 * 299);
    assert_int_equal(bs_profile_find(&q, 20, PROFILE_INF, 2, 8), 21); /* gaps of 2 only */
    assert_int_equal(bs_profile_find(&q, 20, PROFILE_INF, 3, 8), 21 + 3 * 299);
    assert_int_equal(bs_profile_find(&q, 20, PROFILE_INF, 3, 7), 20);
    assert_int_equal(bs_profile_find(&q, 10, 15, 1, 8), 10);
    assert_int_equal(bs_profile_find(&q, 10, 15, 1, 9), PROFILE_INF);
    /* giving the capacity back merges the breakpoints away */
    for (int i = 0; i < 300; i++)
        assert_int_equal(bs_profile_add(&q, 20 + 3 * i, 21 + 3 * i, +1), 0);
    assert_int_equal(bs_profile_steps(&q), 1);
    assert_int_equal(bs_profile_at(&q, 500), 8);
    bs_profile_trim(&p, 500);
    assert_int_equal(bs_profile_origin(&p), 500);
    assert_int_equal(bs_profile_at(&p, 0), bs_profile_at(&p, 500));
    int64_t t[4];
    int32_t v[4];
    assert_int_equal(bs_profile_steps_from(&p, 505, t, v, 4), 4);
    assert_int_equal(t[0], 505);
    bs_profile_free(&p);
    bs_profile_free(&q);
}

int main(void)
{
    const char *s = getenv("BATCH_TEST_SEED");
    seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
    printf("test_batch_profile: seed %u (set BATCH_TEST_SEED to repeat)\n", seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ops),
        cmocka_unit_test(test_copy_next_merge),
    };
    return cmocka_run_group_tests_name("batch_profile", tests, NULL, NULL);
}

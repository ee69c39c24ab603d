/* test_meta_place.c - the metascheduler's placement policy (roles/meta/engine/place.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "roles/meta/engine/place.h"

static const struct meta_site sites[4] = {
    {true, 1.0, 128, 128, 0, 0, 1000},  /* 0: reference speed */
    {true, 2.0, 64, 64, 512, 0, 64000}, /* 1: twice as fast, narrower, 512 MB */
    {false, 1.0, 256, 256, 0, 0, 0},    /* 2: down */
    {true, 0.5, 512, 256, 0, 100, 0},   /* 3: slow, widest job 256, 100 MB disk */
};

static void test_can_hold(void **st)
{
    (void)st;
    char why[160];
    struct meta_request r = {100, 256, 50, 3600000};
    assert_true(meta_site_can_hold(&sites[0], &r, why, sizeof why));
    assert_false(meta_site_can_hold(&sites[1], &r, why, sizeof why));
    assert_non_null(strstr(why, "widest job it can run has 64"));
    assert_false(meta_site_can_hold(&sites[2], &r, why, sizeof why));
    assert_string_equal(why, "the site is down");
    r.procs = 8;
    r.mem = 1024;
    assert_false(meta_site_can_hold(&sites[1], &r, why, sizeof why));
    assert_non_null(strstr(why, "memory"));
    r.mem = 0;
    r.disk = 200;
    assert_false(meta_site_can_hold(&sites[3], &r, why, sizeof why));
    assert_non_null(strstr(why, "disk"));
}

/* issue 27: a constraint needs one host list satisfying it; counts (NAME*N) need the
 * lists holding NAME to stand for N hosts (SITE feature_hosts; one each when unknown). */
static void test_can_hold_features(void **st)
{
    (void)st;
    char why[160];
    const char *fs[] = {"gpu,linux", "linux"};
    uint32_t fh[] = {3, 10};
    struct meta_site s = {true, 1.0, 128, 128, 0, 0, 0, fs, 2, fh};
    struct meta_request r = {8, 0, 0, 3600000, "gpu&linux"};
    assert_true(meta_site_can_hold(&s, &r, why, sizeof why));
    r.constraint = "gpu*3&linux";
    assert_true(meta_site_can_hold(&s, &r, why, sizeof why));
    r.constraint = "gpu*4&linux";
    assert_false(meta_site_can_hold(&s, &r, why, sizeof why));
    assert_non_null(strstr(why, "too few hosts for its counts"));
    r.constraint = "linux*13";
    assert_true(meta_site_can_hold(&s, &r, why, sizeof why));
    r.constraint = "fpga";
    assert_false(meta_site_can_hold(&s, &r, why, sizeof why));
    assert_non_null(strstr(why, "no host has such features"));
    s.fhosts = NULL; /* a site that does not say: one host per list */
    r.constraint = "gpu*2";
    assert_false(meta_site_can_hold(&s, &r, why, sizeof why));
    r.constraint = "linux*2";
    assert_true(meta_site_can_hold(&s, &r, why, sizeof why));
}

static void test_estimate_policies(void **st)
{
    (void)st;
    struct meta_request r = {8, 0, 0, 3600000}; /* an hour at speed 1 */
    int cand[3] = {0, 1, 3};
    /* site 0 starts now, site 1 in 20 min (but runs the hour in 30 min), site 3 never */
    int64_t start[3] = {1000000, 1000000 + 1200000, META_NEVER};
    int out[3];
    uint64_t state = 0;
    /* earliest completion: site 1 ends at +50 min, site 0 at +60 min; site 3 left out */
    assert_int_equal(meta_rank(META_EARLIEST_COMPLETION, sites, cand, start, 3, &r, &state, out),
                     2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
    assert_int_equal(meta_completion(&sites[1], &r, start[1]), 1000000 + 1200000 + 1800000);
    /* earliest start (and Slurm's -M): site 0 first */
    assert_int_equal(meta_rank(META_EARLIEST_START, sites, cand, start, 3, &r, &state, out), 2);
    assert_int_equal(out[0], 0);
    assert_int_equal(meta_rank(META_SLURM_M, sites, cand, start, 3, &r, &state, out), 2);
    assert_int_equal(out[0], 0);
}

/* Issue 25: equally good sites take turns (round robin among the tied ones), for every
 * policy of the spool's own; Slurm's -M keeps the first listed. Better sites still win. */
static void test_ties_take_turns(void **st)
{
    (void)st;
    static const struct meta_site eq[4] = {
        {true, 1.0, 64, 64, 0, 0, 0},
        {true, 1.0, 64, 64, 0, 0, 0},
        {true, 1.0, 64, 64, 0, 0, 0},
        {true, 1.0, 64, 64, 0, 0, 0},
    };
    struct meta_request r = {1, 0, 0, 60000};
    int cand[4] = {2, 0, 3, 1}, out[4];
    int64_t same[4] = {5000, 5000, 5000, 5000};
    const enum meta_policy pols[] = {META_EARLIEST_COMPLETION, META_EARLIEST_START,
                                     META_LEAST_QUEUED};
    for (size_t p = 0; p < sizeof pols / sizeof *pols; p++) {
        uint64_t state = 0;
        int count[4] = {0};
        for (int k = 0; k < 8; k++) {
            assert_int_equal(meta_rank(pols[p], eq, cand, same, 4, &r, &state, out), 4);
            assert_int_equal(out[0], k % 4); /* 0, 1, 2, 3, 0, ... */
            for (int i = 1; i < 4; i++)      /* the rest in turn after it */
                assert_int_equal(out[i], (k + i) % 4);
            count[out[0]]++;
        }
        for (int s = 0; s < 4; s++)
            assert_int_equal(count[s], 2);
    }
    /* a tie among some: the better one first, the tied ones in turn behind the best */
    uint64_t state = 0;
    int64_t two[4] = {9000, 5000, 9000, 5000}; /* sites 2, 0, 3, 1: 0 and 1 tie best */
    int firsts[4];
    for (int k = 0; k < 4; k++) {
        assert_int_equal(meta_rank(META_EARLIEST_START, eq, cand, two, 4, &r, &state, out), 4);
        firsts[k] = out[0];
        assert_true(out[0] == 0 || out[0] == 1);
        assert_true(out[1] == 0 || out[1] == 1);
        assert_true(out[2] == 2 || out[2] == 3);
    }
    assert_int_equal(firsts[0], 0);
    assert_int_equal(firsts[1], 1);
    assert_int_equal(firsts[2], 0);
    assert_int_equal(firsts[3], 1);
    /* a strictly better site wins whatever the turn */
    int64_t one[4] = {5000, 5000, 4000, 5000}; /* site 3 */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(meta_rank(META_EARLIEST_START, eq, cand, one, 4, &r, &state, out), 4);
        assert_int_equal(out[0], 3);
    }
    /* Slurm's -M: the first listed cluster wins a tie, every time */
    state = 0;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(meta_rank(META_SLURM_M, eq, cand, same, 4, &r, &state, out), 4);
        assert_int_equal(out[0], 0);
        assert_int_equal(out[3], 3);
    }
}

static void test_queue_and_rotation(void **st)
{
    (void)st;
    struct meta_request r = {1, 0, 0, 60000};
    int cand[3] = {3, 0, 1};
    int out[3];
    uint64_t state = 0;
    /* least queued work per processor: 3 (0/512), 0 (1000/128), 1 (64000/64) */
    assert_int_equal(meta_rank(META_LEAST_QUEUED, sites, cand, NULL, 3, &r, &state, out), 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 0);
    assert_int_equal(out[2], 1);
    /* round robin: 0, 1, 3, 0, ... each time a rotation of all candidates */
    int firsts[4];
    for (int k = 0; k < 4; k++) {
        assert_int_equal(meta_rank(META_ROUND_ROBIN, sites, cand, NULL, 3, &r, &state, out), 3);
        firsts[k] = out[0];
        assert_true(out[0] != out[1] && out[1] != out[2] && out[0] != out[2]);
    }
    assert_int_equal(firsts[0], 0);
    assert_int_equal(firsts[1], 1);
    assert_int_equal(firsts[2], 3);
    assert_int_equal(firsts[3], 0);
    /* random: reproducible from the seed, every candidate reached */
    uint64_t a = 42, b = 42;
    int seen[4] = {0};
    for (int k = 0; k < 200; k++) {
        int o2[3];
        meta_rank(META_RANDOM, sites, cand, NULL, 3, &r, &a, out);
        meta_rank(META_RANDOM, sites, cand, NULL, 3, &r, &b, o2);
        assert_memory_equal(out, o2, sizeof out);
        seen[out[0]]++;
    }
    assert_true(seen[0] > 20 && seen[1] > 20 && seen[3] > 20);
}

static void test_names(void **st)
{
    (void)st;
    for (int p = 0; p < META_NPOLICIES; p++)
        assert_int_equal(meta_policy_parse(meta_policy_name(p)), p);
    assert_int_equal(meta_policy_parse("fastest"), -1);
    assert_true(meta_policy_uses_estimates(META_EARLIEST_COMPLETION));
    assert_false(meta_policy_uses_estimates(META_ROUND_ROBIN));
}

/* Issue 26: the staging time of a job's inputs joins the start a ranking sees. */
static void test_staging_time(void **st)
{
    (void)st;
    struct meta_site s[3] = {
        {.up = true, .speed = 1.0, .total_procs = 8, .max_procs = 8, .bandwidth_mb_s = 100},
        {.up = true, .speed = 1.0, .total_procs = 8, .max_procs = 8, .bandwidth_mb_s = 100},
        {.up = true, .speed = 1.0, .total_procs = 8, .max_procs = 8, .bandwidth_mb_s = 0},
    };
    struct meta_request r = {1, 0, 0, 600000};
    uint64_t gb = 1000000000ull; /* 1 GB at 100 MB/s: 10 s */
    assert_int_equal(meta_stage_ms(&s[0], gb), 10000);
    assert_int_equal(meta_stage_ms(&s[0], 1), 1); /* rounded up */
    assert_int_equal(meta_stage_ms(&s[0], 0), 0);
    assert_int_equal(meta_stage_ms(&s[2], gb), 0); /* no bandwidth configured: nothing */
    assert_int_equal(meta_start_staged(&s[0], META_NEVER, gb), META_NEVER);
    int cand[2] = {0, 1}, out[2];
    uint64_t state = 0;
    int64_t now = 5000000;
    for (int p = META_EARLIEST_COMPLETION; p <= META_EARLIEST_START; p++) {
        /* equal starts: site 1 already holds the input (0 bytes to move), site 0 not */
        int64_t start[2] = {meta_start_staged(&s[0], now, gb), meta_start_staged(&s[1], now, 0)};
        assert_int_equal(meta_rank((enum meta_policy)p, s, cand, start, 2, &r, &state, out), 2);
        assert_int_equal(out[0], 1);
        /* both lack it: the faster link first */
        s[0].bandwidth_mb_s = 1000;
        start[0] = meta_start_staged(&s[0], now, gb);
        start[1] = meta_start_staged(&s[1], now, gb);
        assert_int_equal(meta_rank((enum meta_policy)p, s, cand, start, 2, &r, &state, out), 2);
        assert_int_equal(out[0], 0);
        /* but not when its site starts later by more than the staging saves */
        start[0] = meta_start_staged(&s[0], now + 20000, gb);
        assert_int_equal(meta_rank((enum meta_policy)p, s, cand, start, 2, &r, &state, out), 2);
        assert_int_equal(out[0], 1);
        s[0].bandwidth_mb_s = 100;
    }
    /* a site without a bandwidth adds nothing: it wins against a link to stage over */
    int cand2[2] = {0, 2};
    int64_t start2[2] = {meta_start_staged(&s[0], now, gb), meta_start_staged(&s[2], now, gb)};
    assert_int_equal(start2[1], now);
    assert_int_equal(meta_rank(META_EARLIEST_START, s, cand2, start2, 2, &r, &state, out), 2);
    assert_int_equal(out[0], 2);
}

/* Issue 25 item 4: the first possible start once the inputs can be there. */
static void test_first_start_after_staging(void **st)
{
    (void)st;
    struct meta_window w[3] = {{1000, 2000}, {5000, 6000}, {9000, -1}};
    assert_int_equal(meta_first_start(w, 3, 500), 1000);  /* staged before it opens */
    assert_int_equal(meta_first_start(w, 3, 1500), 1500); /* inside the first window */
    assert_int_equal(meta_first_start(w, 3, 2000), 5000); /* the first one closed: next */
    assert_int_equal(meta_first_start(w, 3, 7000), 9000);
    assert_int_equal(meta_first_start(w, 3, 20000), 20000);     /* the open last one */
    assert_int_equal(meta_first_start(w, 2, 7000), META_NEVER); /* beyond the list */
    assert_int_equal(meta_first_start(w, 0, 0), META_NEVER);
    /* the staging overlaps the wait: a site busy until 9,000 loses nothing to 4 s of it,
     * where the sum (meta_start_staged) would say 13,000 */
    struct meta_site s = {
        .up = true, .speed = 1.0, .total_procs = 8, .max_procs = 8, .bandwidth_mb_s = 1};
    assert_int_equal(meta_first_start(&w[2], 1, 1000 + meta_stage_ms(&s, 4000000)), 9000);
    assert_int_equal(meta_start_staged(&s, 9000, 4000000), 13000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_can_hold),        cmocka_unit_test(test_estimate_policies),
        cmocka_unit_test(test_ties_take_turns), cmocka_unit_test(test_queue_and_rotation),
        cmocka_unit_test(test_names),           cmocka_unit_test(test_can_hold_features),
        cmocka_unit_test(test_staging_time),    cmocka_unit_test(test_first_start_after_staging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

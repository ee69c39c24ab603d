/*
 * test_constraint.c - node features and submit --constraint (lib/constraint.c, issue
 * 27): the parser's canonical text and refusals, the match, feature lists.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"

static int parse(const char *s, char *out, char *why)
{
    return constraint_parse(s, strlen(s), out, 256, why, 200);
}

static void test_parse_ok(void **state)
{
    (void)state;
    char out[256], why[200];
    assert_int_equal(parse("a&b", out, why), 0);
    assert_string_equal(out, "a&b");
    assert_int_equal(parse(" gpu_a100 | x86_64 & rack-2.b+ ", out, why), 0);
    assert_string_equal(out, "gpu_a100|x86_64&rack-2.b+");
    assert_int_equal(parse("(a|b)&(c|(d&e))", out, why), 0);
    assert_string_equal(out, "(a|b)&(c|(d&e))");
}

static void test_parse_bad(void **state)
{
    (void)state;
    static const struct {
        const char *s, *want; /* want: a piece of the reason */
    } bad[] = {
        {"", "ends"},
        {"a&", "ends"},
        {"&a", "position 1"},
        {"a||b", "position 3"},
        {"a&&b", "position 3"},
        {"(a|b", "')'"},
        {"a|b)", "position 4"},
        {"a b", "position 3"},
        {"a*2|b", "only with &"},
        {"a|(b&c*2)", "only with &"},
        {"a*0", "1 to 4096"},
        {"a*", "1 to 4096"},
        {"a*4097", "1 to 4096"},
        {"a*02", "1 to 4096"},
        {"(a&b)*2", "a count follows a feature name"},
        {"[a|b]", "brackets"},
        {"a,b", "write & for AND"},
        {"!a", "negation"},
        {"a&\xc3\xa9", "not allowed"},
        {"()", "feature name"},
    };
    char out[256], why[200];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(parse(bad[i].s, out, why), -1);
        if (!strstr(why, bad[i].want))
            fail_msg("'%s': reason '%s' lacks '%s'", bad[i].s, why, bad[i].want);
        assert_string_equal(out, "");
    }
    /* limits: a name too long, too many names, too deep, too long a text */
    char big[2048];
    memset(big, 'x', 65);
    big[65] = '\0';
    assert_int_equal(parse(big, out, why), -1);
    assert_non_null(strstr(why, "longer than 64"));
    size_t o = 0;
    for (int i = 0; i < 65; i++)
        o += (size_t)sprintf(big + o, "%sa", i ? "&" : "");
    assert_int_equal(constraint_parse(big, o, out, 0, why, 200), -1);
    char wide[512];
    assert_int_equal(constraint_parse(big, o, wide, sizeof wide, why, 200), -1);
    assert_non_null(strstr(why, "more than 64"));
    o = 0;
    for (int i = 0; i < 17; i++)
        big[o++] = '(';
    big[o++] = 'a';
    for (int i = 0; i < 17; i++)
        big[o++] = ')';
    assert_int_equal(constraint_parse(big, o, wide, sizeof wide, why, 200), -1);
    assert_non_null(strstr(why, "nested"));
    memset(big, 'a', 2000);
    assert_int_equal(constraint_parse(big, 2000, wide, sizeof wide, why, 200), -1);
    assert_non_null(strstr(why, "longer than 1024"));
}

static void test_match(void **state)
{
    (void)state;
    const char *f = "avx2,gpu,linux,x86_64";
    assert_true(constraint_match(NULL, f));
    assert_true(constraint_match("", NULL));
    assert_true(constraint_match("gpu", f));
    assert_false(constraint_match("gp", f));  /* whole names only */
    assert_false(constraint_match("GPU", f)); /* case matters */
    assert_true(constraint_match("gpu&avx2", f));
    assert_false(constraint_match("gpu&arm", f));
    assert_true(constraint_match("arm|x86_64", f));
    assert_false(constraint_match("arm|ppc", f));
    /* & before |: arm|(gpu&linux) holds, (arm|gpu)&fast does not */
    assert_true(constraint_match("arm|gpu&linux", f));
    assert_false(constraint_match("(arm|gpu)&fast", f));
    assert_true(constraint_match("fast|gpu&(arm|linux)", f));
    assert_false(constraint_match("gpu", ""));
    assert_false(constraint_match("gpu", NULL));
    /* damaged text never matches */
    assert_false(constraint_match("gpu&", f));
    assert_false(constraint_match("gpu)", f));
}

/* Slurm's counts (NAME*N): canonical text, the per-host match ignores them, the counts
 * over a set of hosts, the plain form. */
static void test_counts(void **state)
{
    (void)state;
    char out[256], why[200];
    assert_int_equal(parse(" gpu * 4 & linux ", out, why), -1); /* no blank inside a term */
    assert_int_equal(parse("gpu*4 & linux", out, why), 0);
    assert_string_equal(out, "gpu*4&linux");
    assert_int_equal(parse("(a*2&b)&c*4096", out, why), 0);
    assert_string_equal(out, "(a*2&b)&c*4096");
    /* per host: the counted name asks nothing, the plain one everything */
    assert_true(constraint_match("gpu*2&linux", "linux"));
    assert_false(constraint_match("gpu*2&linux", "gpu"));
    struct constraint_count v[4];
    assert_int_equal(constraint_counts("gpu*2&linux&big*3", v, 4), 2);
    assert_string_equal(v[0].name, "gpu");
    assert_int_equal(v[0].n, 2);
    assert_string_equal(v[1].name, "big");
    assert_int_equal(v[1].n, 3);
    assert_int_equal(constraint_counts("gpu*2&big*3", v, 1), 2); /* only the first kept */
    assert_int_equal(constraint_counts("a&b", v, 4), 0);
    assert_int_equal(constraint_counts("a*2|b", v, 4), -1);
    assert_int_equal(constraint_counts(NULL, v, 4), 0);
    assert_int_equal(constraint_hosts_min("gpu*2&linux&big*3"), 3);
    assert_int_equal(constraint_hosts_min("gpu&linux"), 0);
    /* over hosts: each count on its own (a host with both counts for both) */
    const char *h[] = {"big,gpu,linux", "gpu,linux", "linux", "big,linux"};
    assert_true(constraint_counts_met("gpu*2&linux", h, NULL, 4));
    assert_false(constraint_counts_met("gpu*3&linux", h, NULL, 4));
    assert_true(constraint_counts_met("gpu*2&big*2", h, NULL, 4));
    assert_false(constraint_counts_met("gpu*2&big*2", h, NULL, 3));
    assert_true(constraint_counts_met("a&b", h, NULL, 0)); /* no counts */
    assert_false(constraint_counts_met("a*2|", h, NULL, 4));
    /* weighed: a site's list standing for several hosts */
    uint32_t w[] = {1, 5, 9, 1};
    assert_true(constraint_counts_met("gpu*6", h, w, 4));
    assert_false(constraint_counts_met("gpu*7", h, w, 4));
    assert_int_equal(constraint_plain("gpu*24&(big*3&x)", out, sizeof out), 0);
    assert_string_equal(out, "gpu&(big&x)");
    assert_int_equal(constraint_plain("gpu*24", out, 3), -1);
}

static void test_features(void **state)
{
    (void)state;
    char out[FEATURES_LEN_MAX + 1], why[200];
    const char *s = "x86_64, gpu linux,gpu,,avx2";
    assert_int_equal(features_norm(s, strlen(s), out, sizeof out, why, sizeof why), 0);
    assert_string_equal(out, "avx2,gpu,linux,x86_64");
    assert_int_equal(features_norm("", 0, out, sizeof out, why, sizeof why), 0);
    assert_string_equal(out, "");
    s = "ok,b@d";
    assert_int_equal(features_norm(s, strlen(s), out, sizeof out, why, sizeof why), -1);
    assert_non_null(strstr(why, "b@d"));
    char many[1024];
    size_t o = 0;
    for (int i = 0; i < 65; i++)
        o += (size_t)sprintf(many + o, "f%d,", i);
    assert_int_equal(features_norm(many, o, out, sizeof out, why, sizeof why), -1);
    assert_non_null(strstr(why, "more than 64"));

    char acc[64] = "";
    assert_int_equal(features_union(acc, sizeof acc, "b,d"), 0);
    assert_int_equal(features_union(acc, sizeof acc, "a,b,c"), 0);
    assert_string_equal(acc, "a,b,c,d");
    assert_int_equal(features_union(acc, sizeof acc, ""), 0);
    assert_string_equal(acc, "a,b,c,d");
    char tiny[6] = "a,b";
    assert_int_equal(features_union(tiny, sizeof tiny, "c,d"), -1);
    assert_string_equal(tiny, "a,b");
}

/* Random texts: parse never crashes, a parsed text parses again to itself, and the
 * match agrees with the parser on validity. */
static void test_random(void **state)
{
    (void)state;
    unsigned seed = getenv("SEED") ? (unsigned)atoi(getenv("SEED")) : 27;
    printf("seed %u (SEED=N to repeat)\n", seed);
    srand(seed);
    static const char alpha[] = "ab&|() *,";
    char s[40], out[256], again[256], why[200];
    for (int it = 0; it < 20000; it++) {
        size_t n = (size_t)(rand() % 12);
        for (size_t i = 0; i < n; i++)
            s[i] = alpha[rand() % (int)(sizeof alpha - 1)];
        if (constraint_parse(s, n, out, sizeof out, why, sizeof why) < 0)
            continue;
        assert_int_equal(constraint_parse(out, strlen(out), again, sizeof again, why, 200), 0);
        assert_string_equal(out, again);
        /* a host with every name the text uses satisfies it; one with none does not */
        char names[256], list[256];
        size_t k = 0;
        for (const char *p = out; *p; p++)
            names[k++] = strchr("&|()", *p) ? ',' : *p;
        names[k] = '\0';
        assert_int_equal(features_norm(names, k, list, sizeof list, why, sizeof why), 0);
        assert_true(constraint_match(out, list));
        assert_false(constraint_match(out, "zz"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok), cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_match),    cmocka_unit_test(test_features),
        cmocka_unit_test(test_random),   cmocka_unit_test(test_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

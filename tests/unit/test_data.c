/*
 * test_data.c - the pure parts of files through the grid (issue 26): SHA-256 against
 * the FIPS 180-4 examples, fed in every split and across a saved and restored state
 * (as the cluster does across a restart), and the check of file names
 * (lib/datapath.c) that keeps inputs and outputs inside a task's directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "lib/datapath.h"
#include "lib/sha256.h"

static void hex_of(const void *p, size_t n, char out[SHA256_HEX])
{
    struct sha256 s;
    uint8_t d[SHA256_LEN];
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
    sha256_hex(d, out);
}

static void test_known_vectors(void **state)
{
    (void)state;
    char h[SHA256_HEX];
    hex_of("", 0, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m, strlen(m), h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    static char a[1000000];
    memset(a, 'a', sizeof a);
    hex_of(a, sizeof a, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Every split of a 200-byte message in two, with the state saved and loaded between. */
static void test_split_and_saved_state(void **state)
{
    (void)state;
    uint8_t msg[200], want[SHA256_LEN], got[SHA256_LEN], saved[SHA256_SAVED];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    struct sha256 s, t;
    sha256_init(&s);
    sha256_update(&s, msg, sizeof msg);
    sha256_final(&s, want);
    for (size_t cut = 0; cut <= sizeof msg; cut++) {
        sha256_init(&s);
        sha256_update(&s, msg, cut);
        sha256_save(&s, saved);
        memset(&t, 0xee, sizeof t);
        assert_int_equal(sha256_load(&t, saved, sizeof saved), 0);
        sha256_update(&t, msg + cut, sizeof msg - cut);
        sha256_final(&t, got);
        assert_memory_equal(got, want, SHA256_LEN);
    }
    assert_int_equal(sha256_load(&t, saved, sizeof saved - 1), -1);
}

static void test_hex_check(void **state)
{
    (void)state;
    char h[SHA256_HEX];
    hex_of("x", 1, h);
    assert_true(sha256_is_hex(h, 64));
    assert_false(sha256_is_hex(h, 63));
    h[5] = 'A';
    assert_false(sha256_is_hex(h, 64));
}

static void test_datapath(void **state)
{
    (void)state;
    static const char *const good[] = {"a",       "a.dat",     "dir/a", "..a",   "a..",
                                       ".hidden", "d/e/f.txt", "*.out", "x/...", NULL};
    static const char *const bad[] = {"",    "/a",    "../a", "a/../b", "a/..", "..",   ".",
                                      "./a", "a/./b", "a//b", "a/",     "/",    "a\nb", NULL};
    for (int i = 0; good[i]; i++)
        assert_null(datapath_problem(good[i], strlen(good[i])));
    for (int i = 0; bad[i]; i++)
        assert_non_null(datapath_problem(bad[i], strlen(bad[i])));
    char big[DATAPATH_MAX + 2];
    memset(big, 'a', sizeof big);
    assert_null(datapath_problem(big, DATAPATH_MAX));
    assert_non_null(datapath_problem(big, DATAPATH_MAX + 1));
    assert_non_null(datapath_problem("a\0b", 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_split_and_saved_state),
        cmocka_unit_test(test_hex_check),
        cmocka_unit_test(test_datapath),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

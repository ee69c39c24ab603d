/*
 * test_stage.c - a node's file helpers (roles/client/live/stage.c, issue 26) on real
 * files in a temporary directory: the cache drops the least recently used files beyond
 * its cap but never one a task waits for; inputs are placed under their names (sub-
 * directories made); outputs are collected by glob, a matching symbolic link refused
 * and named; a task's file lists survive their stored record.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/sha256.h"
#include "roles/client/live/stage.h"

static char root[64];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void hex_of(const char *text, char out[65])
{
    struct sha256 s;
    uint8_t d[SHA256_LEN];
    sha256_init(&s);
    sha256_update(&s, text, strlen(text));
    sha256_final(&s, d);
    sha256_hex(d, out);
}

/* Puts text into the cache as a finished download. */
static void cache_put(struct stage_cache *c, const char *text, char hex[65], char *const *keep,
                      uint32_t nkeep)
{
    char part[800];
    hex_of(text, hex);
    stage_cache_part(c, hex, part, sizeof part);
    put(part, text);
    assert_int_equal(stage_cache_add(c, hex, strlen(text), keep, nkeep), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/gn-stage-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd);
}

static void test_cache_lru_keeps_what_tasks_wait_for(void **state)
{
    (void)state;
    struct stage_cache c;
    char a[65], b[65], d[65], e[65];
    assert_int_equal(stage_cache_open(&c, root, 20), 0); /* 20 bytes */
    cache_put(&c, "aaaaaaaaaa", a, NULL, 0);             /* 10 */
    char *keep[] = {a};
    cache_put(&c, "bbbbbbbbbb", b, keep, 1); /* 20: full */
    assert_true(stage_cache_has(&c, a, 10)); /* a used after b */
    cache_put(&c, "dddddddddd", d, keep, 1); /* b is the least recently used: dropped */
    assert_true(stage_cache_has(&c, a, 10));
    assert_false(stage_cache_has(&c, b, 10));
    assert_true(stage_cache_has(&c, d, 10));
    assert_false(stage_cache_has(&c, a, 11)); /* another size: not the same file */
    char *keep2[] = {a, d};
    cache_put(&c, "eeeee", e, keep2, 2); /* nothing may go: over the cap for now */
    assert_true(stage_cache_has(&c, a, 10) && stage_cache_has(&c, d, 10));
    stage_cache_close(&c);
    assert_int_equal(stage_cache_open(&c, root, 20), 0); /* a restart finds them again */
    assert_true(stage_cache_has(&c, e, 5) && stage_cache_has(&c, a, 10));
    assert_false(stage_cache_has(&c, b, 10));
    stage_cache_close(&c);
}

static void test_place_and_collect(void **state)
{
    (void)state;
    struct stage_cache c;
    struct stage_files f = {0};
    struct stage_in in[2];
    char wd[128], box[128], path[300], note[300], err[300], h1[65], h2[65];
    assert_int_equal(stage_cache_open(&c, root, 1 << 20), 0);
    cache_put(&c, "one\n", h1, NULL, 0);
    cache_put(&c, "two\n", h2, NULL, 0);
    in[0] = (struct stage_in){"one.txt", "", 4};
    in[1] = (struct stage_in){"d/e/two.txt", "", 4};
    memcpy(in[0].hex, h1, 65);
    memcpy(in[1].hex, h2, 65);
    f.in = in, f.nin = 2;
    snprintf(wd, sizeof wd, "%s/wd", root);
    snprintf(box, sizeof box, "%s/outbox", root);
    assert_int_equal(mkdir(wd, 0700), 0);
    assert_int_equal(stage_place(&c, &f, wd, false, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/d/e/two.txt", wd);
    assert_int_equal(access(path, R_OK), 0);
    /* outputs: two match *.out (one below a directory: "*" does not cross '/'), one is
       a symbolic link (refused), one matches nothing */
    snprintf(path, sizeof path, "%s/r.out", wd);
    put(path, "result\n");
    snprintf(path, sizeof path, "%s/d/x.out", wd);
    put(path, "deeper\n");
    snprintf(path, sizeof path, "%s/leak.out", wd);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    char *globs[] = {"*.out", "d/*.out"};
    f.globs = globs, f.nglobs = 2;
    assert_int_equal(stage_collect(&f, wd, box, note, sizeof note, err, sizeof err), 0);
    assert_int_equal(f.nout, 2);
    assert_non_null(strstr(note, "leak.out"));
    char hr[65];
    hex_of("result\n", hr);
    bool found = false;
    for (uint32_t i = 0; i < f.nout; i++)
        if (!strcmp(f.out[i].name, "r.out")) {
            found = true;
            assert_string_equal(f.out[i].hex, hr);
            assert_int_equal(f.out[i].size, 7);
        }
    assert_true(found);
    snprintf(path, sizeof path, "%s/%s", box, hr);
    assert_int_equal(access(path, R_OK), 0);
    for (uint32_t i = 0; i < f.nout; i++)
        free(f.out[i].name);
    free(f.out);
    stage_cache_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cache_lru_keeps_what_tasks_wait_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_place_and_collect, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

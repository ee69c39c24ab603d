/*
 * test_ckpt.c - a node's task checkpoints on disk (roles/client/live/ckpt.c, issue 26)
 * on real files in a temporary directory: a snapshot copies and hashes the regular
 * files, never follows a symbolic link (named in the note), and refuses a checkpoint
 * over its cap with a note; a kept checkpoint goes back into a new working directory
 * with its issue, a directory replaced by a link is not kept, and a dropped one is gone.
 * A parallel job's rank (issue 26, "Checkpoints of parallel jobs"): its generation
 * marker is read strictly, and a snapshot is taken only while the directory is at rest
 * at its marker.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "roles/client/live/ckpt.h"

static char root[64];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/gn-ckpt-XXXXXX");
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

static void test_snapshot_copies_files_not_links_within_the_cap(void **state)
{
    (void)state;
    char wd[128], p[256], outbox[128], note[300];
    struct stage_out *out;
    uint32_t n;
    snprintf(wd, sizeof wd, "%s/work", root);
    snprintf(outbox, sizeof outbox, "%s/outbox", root);
    assert_int_equal(mkdir(wd, 0700), 0);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME, wd);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/sub", wd);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/n", wd);
    put(p, "7\n");
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/sub/state", wd);
    put(p, "0123456789");
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/leak", wd);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    assert_int_equal(ckpt_snapshot(wd, outbox, 1 << 20, &out, &n, note, sizeof note), 0);
    assert_int_equal(n, 2);
    assert_non_null(strstr(note, "'leak' is a symbolic link: not followed"));
    for (uint32_t i = 0; i < n; i++) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", outbox, out[i].hex);
        assert_int_equal(stat(p, &st), 0); /* the copy, named by its hash */
        assert_int_equal((uint64_t)st.st_size, out[i].size);
        assert_true(!strcmp(out[i].name, "n") || !strcmp(out[i].name, "sub/state"));
    }
    ckpt_snapshot_free(&out, &n);
    /* over the cap: nothing listed, the note says why */
    assert_int_equal(ckpt_snapshot(wd, outbox, 5, &out, &n, note, sizeof note), -1);
    assert_int_equal(n, 0);
    assert_null(out);
    assert_non_null(strstr(note, "files.ckpt_mb"));
}

static void test_kept_checkpoint_comes_back_and_links_are_not_kept(void **state)
{
    (void)state;
    char wd[128], wd2[128], p[256], err[200];
    uint32_t issue = 0;
    snprintf(wd, sizeof wd, "%s/w1", root);
    snprintf(wd2, sizeof wd2, "%s/w2", root);
    assert_int_equal(mkdir(wd, 0700), 0);
    assert_int_equal(mkdir(wd2, 0700), 0);
    assert_int_equal(ckpt_local(root, 5, 3, &issue), -1);
    assert_int_equal(ckpt_place(root, NULL, NULL, wd, 5, 3, true, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/n", wd);
    put(p, "12\n");
    assert_int_equal(ckpt_keep(root, wd, 5, 3, 2), 0);
    assert_int_equal(ckpt_local(root, 5, 3, &issue), 0);
    assert_int_equal(issue, 2);
    assert_int_equal(ckpt_place(root, NULL, NULL, wd2, 5, 3, true, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME "/n", wd2);
    assert_int_equal(access(p, R_OK), 0);
    assert_int_equal(ckpt_local(root, 5, 3, &issue), -1); /* moved into place */
    /* a checkpoint "directory" that is a link is not kept */
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME, wd);
    assert_int_equal(symlink("/etc", p), 0);
    assert_int_equal(ckpt_keep(root, wd, 5, 4, 1), -1);
    assert_int_equal(ckpt_local(root, 5, 4, &issue), -1);
    /* kept, then dropped: gone, with the working directory's */
    assert_int_equal(ckpt_keep(root, wd2, 5, 3, 3), 0);
    assert_int_equal(ckpt_place(root, NULL, NULL, wd2, 5, 3, false, err, sizeof err), 0);
    ckpt_drop(root, wd2, 5, 3);
    assert_int_equal(ckpt_local(root, 5, 3, &issue), -1);
    snprintf(p, sizeof p, "%s/" CKPT_DIRNAME, wd2);
    assert_int_equal(access(p, F_OK), -1);
}

static bool only_7(void *arg, uint64_t id)
{
    (void)arg;
    return id == 7;
}

/* A working directory a killed client left for a task it no longer holds goes at the
 * next start (its checkpoint must not reach a later task given the same local id). */
static void test_sweep_removes_orphaned_working_directories(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/work", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/work/7", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/work/8", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/work/8/" CKPT_DIRNAME, root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/work/par-x", root);
    assert_int_equal(mkdir(p, 0700), 0);
    ckpt_sweep(root, only_7, NULL);
    snprintf(p, sizeof p, "%s/work/7", root);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/work/par-x", root);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/work/8", root);
    assert_int_equal(access(p, F_OK), -1);
}

/* Sets path's modification time to sec (since the epoch). */
static void mtime(const char *path, time_t sec)
{
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_generation_marker_and_snapshot_at_rest(void **state)
{
    (void)state;
    char wd[128], dir[256], mk[300], data[300], outbox[128], note[300];
    struct stage_out *out;
    uint32_t n, gen = 0;
    snprintf(wd, sizeof wd, "%s/w", root);
    snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, wd);
    snprintf(mk, sizeof mk, "%s/" CKPT_GEN_FILE, dir);
    snprintf(data, sizeof data, "%s/state", dir);
    snprintf(outbox, sizeof outbox, "%s/outbox", root);
    assert_int_equal(mkdir(wd, 0700), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_false(ckpt_unmarked(wd)); /* empty: nothing to say */
    put(data, "x");
    assert_true(ckpt_unmarked(wd));
    assert_int_equal(ckpt_generation(wd, &gen, note, sizeof note), 0); /* none yet */
    put(mk, "");
    assert_int_equal(ckpt_generation(wd, &gen, note, sizeof note), 0); /* being written */
    const char *bad[] = {"one\n", "12abc", "-1", "4294967296", " 7", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put(mk, bad[i]);
        note[0] = '\0';
        assert_int_equal(ckpt_generation(wd, &gen, note, sizeof note), -1);
        assert_non_null(strstr(note, "not a generation number"));
        assert_int_equal(ckpt_snapshot_gen(wd, outbox, 1 << 20, &gen, &out, &n, note, sizeof note),
                         -1);
    }
    put(mk, "4294967295\n");
    assert_int_equal(ckpt_generation(wd, &gen, note, sizeof note), 1);
    assert_int_equal(gen, 4294967295u);
    assert_false(ckpt_unmarked(wd));
    /* a file newer than the marker: the rank is writing its next generation */
    put(mk, "3\n");
    mtime(mk, 1000);
    mtime(data, 2000);
    assert_int_equal(ckpt_snapshot_gen(wd, outbox, 1 << 20, &gen, &out, &n, note, sizeof note), 0);
    assert_null(out);
    /* at rest: every file, the marker included, in the snapshot */
    mtime(data, 900);
    assert_int_equal(ckpt_snapshot_gen(wd, outbox, 1 << 20, &gen, &out, &n, note, sizeof note), 1);
    assert_int_equal(gen, 3);
    assert_int_equal(n, 2);
    ckpt_snapshot_free(&out, &n);
    /* too large for the cap: refused, the note names a rank */
    assert_int_equal(ckpt_snapshot_gen(wd, outbox, 1, &gen, &out, &n, note, sizeof note), -1);
    assert_non_null(strstr(note, "for a rank"));
    /* a marker that is a directory is no marker */
    assert_int_equal(unlink(mk), 0);
    assert_int_equal(mkdir(mk, 0700), 0);
    assert_int_equal(ckpt_generation(wd, &gen, note, sizeof note), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_snapshot_copies_files_not_links_within_the_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kept_checkpoint_comes_back_and_links_are_not_kept,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_removes_orphaned_working_directories, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_generation_marker_and_snapshot_at_rest, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_runner.c - runner_start's error paths: which failures are the host's (the node
 * must stop taking work) and which the task's, and that no path leaves or closes a
 * descriptor it does not own (descriptor 0 stays open, nothing leaks).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "roles/client/live/runner.h"

static char dir[] = "/tmp/gridnode-test-runner-XXXXXX";

/* Highest open descriptor number below 1024 (a leak shows as a higher one). */
static int max_fd(void)
{
    int m = -1;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            m = fd;
    return m;
}

static void reap(struct run *r)
{
    if (r->pid > 0) {
        int st;
        waitpid(r->pid, &st, 0);
    }
}

static void test_missing_program_is_not_a_host_fault(void **state)
{
    (void)state;
    char wd[600];
    char *argv[] = {"/nonexistent/gridnode-prog", NULL};
    struct run r;
    int before = max_fd();
    snprintf(wd, sizeof wd, "%s/t1", dir);
    assert_int_equal(runner_start(&r, argv, false, "", 0, wd, 1024), -1);
    assert_non_null(strstr(r.error, "cannot run '/nonexistent/gridnode-prog'"));
    assert_false(r.host_fault);
    reap(&r);
    runner_cleanup(&r);
    runner_cleanup(&r); /* twice is harmless: descriptors were reset to -1 */
    assert_int_equal(max_fd(), before);
    assert_true(fcntl(0, F_GETFD) >= 0);
}

static void test_unusable_workdir_is_a_host_fault(void **state)
{
    (void)state;
    char parent[600], wd[700];
    char *argv[] = {"/bin/true", NULL};
    struct run r;
    int before = max_fd();
    snprintf(parent, sizeof parent, "%s/afile", dir);
    FILE *f = fopen(parent, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(wd, sizeof wd, "%s/t2", parent); /* under a regular file: ENOTDIR */
    assert_int_equal(runner_start(&r, argv, false, "in", 2, wd, 1024), -1);
    assert_non_null(strstr(r.error, "cannot prepare working directory"));
    assert_true(r.host_fault);
    assert_int_equal(r.pid, -1);
    runner_cleanup(&r);
    assert_int_equal(max_fd(), before);
    assert_true(fcntl(0, F_GETFD) >= 0);
}

static void test_good_start_is_clean(void **state)
{
    (void)state;
    char wd[600];
    char *argv[] = {"/bin/true", NULL};
    struct run r;
    snprintf(wd, sizeof wd, "%s/t3", dir);
    assert_int_equal(runner_start(&r, argv, false, "", 0, wd, 1024), 0);
    assert_false(r.host_fault);
    assert_int_equal(r.error[0], '\0');
    reap(&r);
    runner_cleanup(&r);
    struct stat st;
    assert_int_equal(stat(wd, &st), -1); /* removed */
}

/* Runs argv in wd to its end (reads its pipes, reaps it); returns the exit status. */
static int run_to_end(struct run *r, char **argv, bool shell, const char *in, const char *wd)
{
    assert_int_equal(runner_start(r, argv, shell, in, strlen(in), wd, 4096), 0);
    int st;
    assert_int_equal(waitpid(r->pid, &st, 0), r->pid);
    struct rusage ru = {0};
    runner_reaped(r, st, &ru);
    for (int i = 0; i < 1000 && !runner_finished(r); i++) {
        runner_read(r, r->out.fd);
        runner_read(r, r->err.fd);
        usleep(1000);
    }
    assert_true(runner_finished(r));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Counts the entries of d whose names start with prefix. */
static int count_entries(const char *d, const char *prefix)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c '^%s' > %s/.count", d, prefix, dir);
    if (system(cmd) < 0)
        return -1;
    snprintf(cmd, sizeof cmd, "%s/.count", dir);
    FILE *f = fopen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        fclose(f);
    unlink(cmd);
    return n;
}

/*
 * Working directories are reused (issue 11): an empty one is pooled and handed to the
 * next task; one a task left files in is removed; every task starts in an empty
 * directory of its own name, stdin (a file, or /dev/null) arrives, and nothing leaks.
 */
static void test_workdirs_are_reused_empty(void **state)
{
    (void)state;
    char parent[600], wd[700], wd2[700];
    struct run r;
    snprintf(parent, sizeof parent, "%s/pool", dir);
    assert_int_equal(mkdir(parent, 0700), 0);
    int before = max_fd();
    char *count[] = {"test -z \"$(ls -A | grep -vx .stdin)\" && cat && : > left", NULL};
    for (int i = 0; i < 20; i++) {
        snprintf(wd, sizeof wd, "%s/%d.0", parent, i);
        /* each task checks its directory is empty, echoes its stdin, leaves a file */
        assert_int_equal(run_to_end(&r, count, true, i % 2 ? "in" : "", wd), 0);
        assert_int_equal(r.out.len, i % 2 ? 2 : 0);
        runner_cleanup(&r);
        struct stat st;
        assert_int_equal(stat(wd, &st), -1); /* removed: it held "left" */
    }
    char *quiet[] = {"/bin/true", NULL};
    for (int i = 0; i < 50; i++) {
        snprintf(wd, sizeof wd, "%s/q%d", parent, i);
        assert_int_equal(run_to_end(&r, quiet, false, i % 3 ? "" : "x", wd), 0);
        runner_cleanup(&r);
    }
    assert_int_equal(count_entries(parent, "q"), 0);
    assert_int_equal(count_entries(parent, ".pool-"), 1); /* one directory, reused */
    /* a pooled directory a stray process wrote into is not handed out as it is */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "for d in %s/.pool-*; do : > \"$d/stray\"; done", parent);
    assert_int_equal(system(cmd), 0);
    char *empty[] = {"test -z \"$(ls -A)\"", NULL};
    snprintf(wd2, sizeof wd2, "%s/after", parent);
    assert_int_equal(run_to_end(&r, empty, true, "", wd2), 0);
    runner_cleanup(&r);
    assert_int_equal(max_fd(), before);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_program_is_not_a_host_fault),
        cmocka_unit_test(test_unusable_workdir_is_a_host_fault),
        cmocka_unit_test(test_good_start_is_clean),
        cmocka_unit_test(test_workdirs_are_reused_empty),
    };
    int rc = cmocka_run_group_tests_name("runner", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc++;
    return rc;
}

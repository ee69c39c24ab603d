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

#include "roles/client/runner.h"

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

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_program_is_not_a_host_fault),
        cmocka_unit_test(test_unusable_workdir_is_a_host_fault),
        cmocka_unit_test(test_good_start_is_clean),
    };
    int rc = cmocka_run_group_tests_name("runner", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc++;
    return rc;
}

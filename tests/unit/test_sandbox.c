/*
 * test_sandbox.c - sandboxed starts at once: every init alive at the same time runs on
 * a thread pointer (TLS, errno) of its own, donors are reused once their init is gone,
 * and every start succeeds while each init takes the tolerated ENOENT path (a file to
 * cover that does not exist). Skipped when not root and the boundary cannot be set up;
 * as root (CI) a boundary that cannot be set up fails it.
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

#include "roles/client/live/sandbox.h"

#define N 24

static char dir[] = "/tmp/gridnode-test-sandbox-XXXXXX";
static bool usable;

static pid_t start(int i, int nul, void **mem, int *rep)
{
    static char wd[N + 1][600];
    char *av[] = {"sh", "-c", "sleep 0.3", NULL}, *ev[] = {"PATH=/usr/bin:/bin", NULL};
    snprintf(wd[i], sizeof wd[i], "%s/w%d", dir, i);
    mkdir(wd[i], 0755);
    struct sandbox_task t = {"/bin/sh", av,  ev,        wd[i], NULL,    nul,
                             nul,       nul, geteuid(), false, {-1, -1}};
    int stage;
    return sandbox_spawn(&t, rep, mem, &stage);
}

static void test_concurrent_inits_never_share_a_thread_pointer(void **state)
{
    (void)state;
    if (!usable)
        skip();
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(nul >= 0);
    void *mem[N], *tp[N];
    int rep[N];
    pid_t pid[N];
    for (int i = 0; i < N; i++) {
        pid[i] = start(i, nul, &mem[i], &rep[i]);
        assert_true(pid[i] > 0);
        tp[i] = sandbox_tp(mem[i]);
        assert_non_null(tp[i]);
        for (int k = 0; k < i; k++)
            assert_ptr_not_equal(tp[i], tp[k]);
    }
    for (int i = 0; i < N; i++) {
        int ws, st = -1, e = 0;
        const char *step = "";
        assert_int_equal(waitpid(pid[i], &ws, 0), pid[i]);
        int stage = sandbox_report(rep[i], mem[i], &st, &e, &step);
        if (stage != SANDBOX_DONE)
            fail_msg("start %d: stage %d at '%s': %s", i, stage, step, strerror(e));
        assert_int_equal(st, 0);
        sandbox_free(mem[i]);
    }
    /* a start after they ended takes a donor of theirs: none is started per task */
    void *m;
    int r;
    pid_t p = start(N, nul, &m, &r);
    assert_true(p > 0);
    bool reused = false;
    for (int i = 0; i < N; i++)
        reused |= sandbox_tp(m) == tp[i];
    assert_true(reused);
    int ws, st = -1, e = 0;
    const char *step = "";
    assert_int_equal(waitpid(p, &ws, 0), p);
    assert_int_equal(sandbox_report(r, m, &st, &e, &step), SANDBOX_DONE);
    sandbox_free(m);
    close(nul);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    char state[600], err[512];
    snprintf(state, sizeof state, "%s/state", dir);
    mkdir(state, 0700);
    struct sandbox_conf c = {
        .on = true, .state_dir = state, .slot_uids = "61900-61931", .cgroups = "none"};
    c.files[0] = "/etc/gridnode-test-sandbox-missing.key"; /* covered by /dev/null: ENOENT */
    usable = sandbox_init(&c, err, sizeof err) == 0;
    if (!usable && geteuid() == 0) { /* root (CI) has namespaces: not a reason to skip */
        fprintf(stderr, "test_sandbox: sandbox_init failed as root: %s\n", err);
        return 1;
    }
    if (!usable)
        fprintf(stderr, "test_sandbox: skipped (not root): %s\n", err);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_inits_never_share_a_thread_pointer),
    };
    int rc = cmocka_run_group_tests_name("sandbox", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc++;
    return rc;
}

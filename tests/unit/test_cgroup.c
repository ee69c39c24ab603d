/*
 * test_cgroup.c - the parsing parts of roles/client/live/cgroup.c: flat-keyed cgroup
 * files (v2 memory.events, v1 memory.oom_control) and the client's own cgroup from
 * /proc/self/cgroup lines (v1 controller lists, v2's "0::" line).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "roles/client/live/cgroup.h"

static void test_events_v2(void **state)
{
    (void)state;
    const char *ev = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
    uint64_t v = 99;
    assert_int_equal(cgroup_parse_key(ev, "oom_kill", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(cgroup_parse_key(ev, "oom", &v), 0); /* not oom_kill's prefix */
    assert_int_equal(v, 2);
    assert_int_equal(cgroup_parse_key(ev, "max", &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(cgroup_parse_key(ev, "oom_group", &v), -1);
    assert_int_equal(cgroup_parse_key("", "oom_kill", &v), -1);
    /* the last line without a newline */
    assert_int_equal(cgroup_parse_key("oom 0\noom_kill 7", "oom_kill", &v), 0);
    assert_int_equal(v, 7);
}

static void test_oom_control_v1(void **state)
{
    (void)state;
    const char *oc = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    uint64_t v = 0;
    assert_int_equal(cgroup_parse_key(oc, "oom_kill", &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(cgroup_parse_key(oc, "under_oom", &v), 0);
    assert_int_equal(v, 0);
    /* a kernel before 4.13: no oom_kill line */
    assert_int_equal(cgroup_parse_key("oom_kill_disable 0\nunder_oom 0\n", "oom_kill", &v), -1);
    /* values that are not numbers */
    assert_int_equal(cgroup_parse_key("oom_kill x\n", "oom_kill", &v), -1);
    assert_int_equal(cgroup_parse_key("oom_kill \n", "oom_kill", &v), -1);
    assert_int_equal(cgroup_parse_key("oom_kill 5x\n", "oom_kill", &v), -1);
    assert_int_equal(cgroup_parse_key("oom_kill 99999999999999999999999\n", "oom_kill", &v), -1);
}

static void test_self_v1(void **state)
{
    (void)state;
    const char *t = "12:pids:/user.slice/user-0.slice\n"
                    "4:memory:/process_api/b8b7\n"
                    "2:cpu,cpuacct:/\n"
                    "1:name=systemd:/user.slice\n"
                    "0::/\n";
    char p[64];
    assert_int_equal(cgroup_parse_self(t, "memory", p, sizeof p), 0);
    assert_string_equal(p, "/process_api/b8b7");
    assert_int_equal(cgroup_parse_self(t, "pids", p, sizeof p), 0);
    assert_string_equal(p, "/user.slice/user-0.slice");
    assert_int_equal(cgroup_parse_self(t, "cpuacct", p, sizeof p), 0);
    assert_string_equal(p, "/");
    assert_int_equal(cgroup_parse_self(t, "cpu", p, sizeof p), 0);
    assert_string_equal(p, "/");
    assert_int_equal(cgroup_parse_self(t, "blkio", p, sizeof p), -1);
    assert_int_equal(cgroup_parse_self(t, "mem", p, sizeof p), -1); /* whole names only */
    /* a path that does not fit, or is not absolute */
    assert_int_equal(cgroup_parse_self(t, "memory", p, 8), -1);
    assert_int_equal(cgroup_parse_self("4:memory:relative\n", "memory", p, sizeof p), -1);
    assert_int_equal(cgroup_parse_self("4:memory:\n", "memory", p, sizeof p), -1);
}

static void test_self_v2(void **state)
{
    (void)state;
    char p[128];
    assert_int_equal(
        cgroup_parse_self("0::/system.slice/gridnode.service/supervisor\n", NULL, p, sizeof p), 0);
    assert_string_equal(p, "/system.slice/gridnode.service/supervisor");
    assert_int_equal(cgroup_parse_self("0::/", NULL, p, sizeof p), 0); /* no newline */
    assert_string_equal(p, "/");
    /* hybrid: v1 lines before the unified one */
    assert_int_equal(cgroup_parse_self("4:memory:/a\n0::/b\n", NULL, p, sizeof p), 0);
    assert_string_equal(p, "/b");
    /* only v1 lines, or malformed ones */
    assert_int_equal(cgroup_parse_self("4:memory:/a\n", NULL, p, sizeof p), -1);
    assert_int_equal(cgroup_parse_self("garbage\n0:/x\n10::/y\n", NULL, p, sizeof p), -1);
    assert_int_equal(cgroup_parse_self("", NULL, p, sizeof p), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_v2),
        cmocka_unit_test(test_oom_control_v1),
        cmocka_unit_test(test_self_v1),
        cmocka_unit_test(test_self_v2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

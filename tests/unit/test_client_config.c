/*
 * test_client_config.c - the one client's engine parameters (roles/client/live/live_sched.c,
 * vcl_engine_config): the [sched] keys left at -1 take BOINC's values for a volunteer
 * with projects and the single-cluster values for a host of one cluster (results at
 * once, a short poll, the [rpc] backoff, no extra buffer); a value given always wins;
 * the defaults of the key table are -1 and every result passes the engine's check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "roles/client/live/client.h"
#include "roles/client/engine/engine.h"
#include "roles/client/live/live.h"

static void defaults(struct client_cfg *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    assert_int_equal(config_load(client_keys, cfg, NULL, NULL, 0, err, sizeof err), 0);
}

static void test_projects_get_boinc_values(void **state)
{
    (void)state;
    struct client_cfg cfg;
    struct engine_config c;
    defaults(&cfg);
    assert_true(cfg.min_buf == -1 && cfg.poll_s == -1 && cfg.report_max_delay == -1);
    vcl_engine_config(&cfg, false, &c);
    assert_true(c.min_buf == 8640 && c.additional_buf == 43200 && c.poll_period == 60);
    assert_true(c.rpc_backoff_min == 60 && c.rpc_backoff_max == 14400);
    assert_true(c.rsc_backoff_min == 600 && c.rsc_backoff_max == 86400);
    assert_true(c.report_max_delay == 86400);
    assert_null(engine_config_check(&c));
}

static void test_single_cluster_values(void **state)
{
    (void)state;
    struct client_cfg cfg;
    struct engine_config c;
    defaults(&cfg);
    cfg.backoff_min_s = 0.2;
    cfg.backoff_max_s = 3;
    vcl_engine_config(&cfg, true, &c);
    assert_true(c.report_max_delay == 0); /* every result reported at once */
    assert_true(c.poll_period > 0 && c.poll_period <= 0.1);
    assert_true(c.min_buf == c.poll_period); /* + the round trips, once measured */
    assert_true(c.additional_buf == 0);
    assert_true(c.rpc_backoff_min == 0.2 && c.rpc_backoff_max == 3); /* [rpc] */
    assert_null(engine_config_check(&c));
}

static void test_given_values_win(void **state)
{
    (void)state;
    struct client_cfg cfg;
    struct engine_config c;
    defaults(&cfg);
    cfg.min_buf = 4;
    cfg.poll_s = 0.5;
    cfg.report_max_delay = 1;
    cfg.rpc_backoff_min = 2;
    cfg.rpc_backoff_max = 1; /* below the minimum: raised to it */
    for (int single = 0; single < 2; single++) {
        vcl_engine_config(&cfg, single, &c);
        assert_true(c.min_buf == 4 && c.poll_period == 0.5 && c.report_max_delay == 1);
        assert_true(c.rpc_backoff_min == 2 && c.rpc_backoff_max == 2);
        assert_null(engine_config_check(&c));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_projects_get_boinc_values),
        cmocka_unit_test(test_single_cluster_values),
        cmocka_unit_test(test_given_values_win),
    };
    return cmocka_run_group_tests_name("client_config", tests, NULL, NULL);
}

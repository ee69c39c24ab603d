/*
 * client.h - `gridnode client`, the live execution host: its configuration and start.
 * One client, driven by the BOINC-style engine (roles/client/live/): the projects of
 * the config's [project NAME] sections, or one cluster manager (client.server) as one
 * project. It pulls tasks, runs them as real processes (runner.h), returns results with
 * the next request, heartbeats while computing, waits for or backs off from a server
 * that is away, and keeps its tasks in its own store so that a restarted client reports
 * finished results and reruns unfinished tasks.
 */
#ifndef GRIDNODE_CLIENT_H
#define GRIDNODE_CLIENT_H

#include "lib/config.h"
#include "daemon/curve.h"

struct client_cfg {
    char server[CONFIG_STR_MAX];
    char state_dir[CONFIG_STR_MAX];
    char name[CONFIG_STR_MAX];
    char cluster[CONFIG_STR_MAX];
    char code[CONFIG_STR_MAX];
    char arch[CONFIG_STR_MAX], model[CONFIG_STR_MAX];
    char features[CONFIG_STR_MAX]; /* client.features (issue 27): lib/constraint.h */
    int parallel;
    char log_level[CONFIG_STR_MAX];
    long slots;
    long prefetch_max; /* client.prefetch_max: queued tasks, a multiple of slots */
    long timeout_ms;
    long link_timeout_s; /* rpc.link_timeout_s: transport heartbeats (daemon/netopts.h) */
    double backoff_min_s, backoff_max_s;
    long max_output_kb;
    long cache_mb; /* client.cache_mb: the input file cache (issue 26, live_stage.c) */
    double kill_grace_s;
    int sync;
    long map_mb;
    /* multi-project (live engine) client, roles/client/live/ */
    char control[CONFIG_STR_MAX];
    double cpu_gflops;
    int policy, fetch; /* enum engine_policy, enum engine_fetch */
    double min_buf, additional_buf, time_slice, poll_s, tick_s;
    double rpc_backoff_min, rpc_backoff_max, rsc_backoff_min, rsc_backoff_max;
    long master_fetch_period;
    double report_cushion, report_max_delay, default_deadline_s, default_est_s;
    struct curve_conf sec; /* [security] (daemon/curve.h) */
    /* the execution boundary (sandbox.h) */
    int sandbox;
    char slot_uids[CONFIG_STR_MAX];
    long task_memory_mb, task_pids_max; /* cgroup limits of one task (cgroup.h) */
};

extern const struct config_key client_keys[];
int client_main(int argc, char **argv);
/* The multi-project client (live.c): config file (may be NULL) for [project]/[gpu]. */
int vcl_main(struct client_cfg *cfg, const char *file);
/* `gridnode client status|attach|detach` (cmd/clientctl.c). */
int vcl_cmd(int argc, char **argv);

#endif

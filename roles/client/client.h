/*
 * client.h - the live execution host: identifies to one cluster manager, pulls tasks,
 * runs them as real processes (runner.h), returns results with the next request
 * ("take result, give next" in one round trip), heartbeats while computing, backs off
 * while the server is unreachable, and keeps its tasks in its own store so that a
 * restarted client reports finished results and reruns unfinished tasks.
 */
#ifndef GRIDNODE_CLIENT_H
#define GRIDNODE_CLIENT_H

#include "lib/config.h"
#include "lib/curve.h"

struct client_cfg {
    char server[CONFIG_STR_MAX];
    char state_dir[CONFIG_STR_MAX];
    char name[CONFIG_STR_MAX];
    char cluster[CONFIG_STR_MAX];
    char code[CONFIG_STR_MAX];
    char arch[CONFIG_STR_MAX], model[CONFIG_STR_MAX];
    int parallel;
    char log_level[CONFIG_STR_MAX];
    long slots;
    long timeout_ms;
    double backoff_min_s, backoff_max_s;
    long max_output_kb;
    double kill_grace_s;
    int sync;
    long map_mb;
    struct curve_conf sec; /* [security] (lib/curve.h) */
};

extern const struct config_key client_keys[];
int client_main(int argc, char **argv);

#endif

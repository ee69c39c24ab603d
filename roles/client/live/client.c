/*
 * client.c - `gridnode client`: the configuration (every key, its default and check)
 * and the start of the execution host. There is one live client: the engine-driven one
 * (roles/client/live/live*.c, live.h; docs/client-scheduling.md 2b). A config with
 * [project NAME] sections makes it a volunteer of those projects; one with only
 * client.server makes it a host of that cluster: one project named after the server,
 * the [sched] keys left at -1 taking the single-cluster values (live_sched.c,
 * vcl_engine_config). The runner (runner.c), the parallel processes (pprocs.c) and node
 * health (health.c) are modules of their own.
 */
#include "roles/client/live/client.h"
#include "daemon/daemon.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/client/live/cgroup.h"

#define OFF(f) offsetof(struct client_cfg, f)
const struct config_key client_keys[] = {
    {"client", "server", CONFIG_STR, "tcp://127.0.0.1:7300", OFF(server), 0, 0, NULL,
     "endpoint of the cluster manager to pull tasks from"},
    DAEMON_STATE_KEYS(
        struct client_cfg, "client", "run/client",
        "directory of this client's LMDB state and task working directories (created)"),
    {"client", "name", CONFIG_STR, "", OFF(name), 0, 0, NULL,
     "node name reported to the server (empty: the host name)"},
    {"client", "cluster", CONFIG_STR, "", OFF(cluster), 0, 0, NULL,
     "cluster name reported to the server, for statistics"},
    {"client", "code", CONFIG_STR, "gridnode-client/1", OFF(code), 0, 0, NULL,
     "client code reported to the server (statistics group nodes by it)"},
    {"client", "arch", CONFIG_STR, "", OFF(arch), 0, 0, NULL,
     "architecture reported to the server (empty: uname's machine); hosts of one type form a "
     "cluster"},
    {"client", "model", CONFIG_STR, "", OFF(model), 0, 0, NULL,
     "CPU model reported to the server (empty: /proc/cpuinfo's model name)"},
    {"client", "features", CONFIG_STR, "", OFF(features), 0, 0, NULL,
     "node features this host offers, separated by commas (names of letters, digits and "
     "_.+-); submit --constraint asks for them; the architecture and the OS (x86_64, "
     "linux) are always added"},
    {"client", "parallel", CONFIG_BOOL, "true", OFF(parallel), 0, 0, NULL,
     "run the processes of parallel jobs the server assigns to this host (PSYNC)"},
    {"client", "slots", CONFIG_INT, "0", OFF(slots), 0, 4096, NULL,
     "tasks run at once (0: the number of online cores)"},
    {"client", "prefetch_max", CONFIG_INT, "16", OFF(prefetch_max), 0, 1024, NULL,
     "tasks held beyond the running ones at most, as a multiple of slots, to cover the round "
     "trip to the server (0: ask only for free slots)"},
    {"rpc", "timeout_ms", CONFIG_INT, "5000", OFF(timeout_ms), 10, 3600000, NULL,
     "a request unanswered this long counts as a failed exchange"},
    {"rpc", "link_timeout_s", CONFIG_INT, "10", OFF(link_timeout_s), 1, 6553, NULL,
     "the connection to the server is dropped and re-made after this long without traffic "
     "(transport heartbeats every third of it)"},
    {"rpc", "backoff_min_s", CONFIG_DOUBLE, "1", OFF(backoff_min_s), 0.01, 86400, NULL,
     "first retry delay after a failure (doubles per failure, times U[0.5,1])"},
    {"rpc", "backoff_max_s", CONFIG_DOUBLE, "60", OFF(backoff_max_s), 0.01, 86400, NULL,
     "longest retry delay"},
    {"client", "cache_mb", CONFIG_INT, "10240", OFF(cache_mb), 1, 1L << 30, NULL,
     "input files kept in STATE_DIR/cache, in MB; the least recently used go first "
     "(docs/data.md)"},
    {"run", "max_output_kb", CONFIG_INT, "64", OFF(max_output_kb), 0, 16384, NULL,
     "stdout and stderr kept per task or parallel rank, each; the rest is dropped, marked "
     "truncated"},
    {"client", "sandbox", CONFIG_BOOL, "true", OFF(sandbox), 0, 0, NULL,
     "run tasks in the execution boundary (docs/security.md); false: as this client's user, "
     "seeing all it sees"},
    {"client", "slot_uids", CONFIG_STR, "61000-61127", OFF(slot_uids), 0, 0, NULL,
     "FIRST-LAST: uids a root client runs tasks under, one per running task (gid the same)"},
    {"client", "task_memory_mb", CONFIG_INT, "0", OFF(task_memory_mb), 0, 1099511627776.0, NULL,
     "memory (and swap) limit of one task, through cgroups (docs/security.md \"Resource "
     "limits\"); 0: none; at least 16 otherwise; a parallel job's ranks on this host share "
     "one limit of this times their number"},
    {"client", "task_pids_max", CONFIG_INT, "4096", OFF(task_pids_max), 0, 4194304, NULL,
     "processes and threads of one task at most, through cgroups (a fork bomb stops there); "
     "0: none"},
    {"run", "kill_grace_s", CONFIG_DOUBLE, "2", OFF(kill_grace_s), 0, 3600, NULL,
     "after the wall-clock limit: SIGTERM, then SIGKILL this much later"},
    DAEMON_STORE_KEYS(struct client_cfg),
    /* the multi-project client (docs/client-scheduling.md, "The live client") */
    {"client", "control", CONFIG_STR, "tcp://127.0.0.1:*", OFF(control), 0, 0, NULL,
     "control endpoint for gridnode client status/attach/detach "
     "(written to state_dir/endpoint)"},
    {"client", "cpu_gflops", CONFIG_DOUBLE, "0", OFF(cpu_gflops), 0, 1e9, NULL,
     "peak GFLOPS of one CPU slot (credit, REC and the clusters' run-time estimates); 0: "
     "not declared (REC counts 1 GFLOPS, clusters measure the host's speed)"},
    {"sched", "policy", CONFIG_ENUM, "rec", OFF(policy), 0, 0, "rec|debt2004",
     "project priority: rec (SP = -REC/share) or debt2004 (share / exp_avg_cpu)"},
    {"sched", "fetch", CONFIG_ENUM, "deadline", OFF(fetch), 0, 0, "deadline|boinc",
     "deadline: fetch only what can meet its deadline; boinc: BOINC-faithful buffer fill"},
    {"sched", "min_buf", CONFIG_DOUBLE, "-1", OFF(min_buf), -1, 1e9, NULL,
     "seconds: fetch work when a processor type stays saturated less than this (-1: 8640 "
     "with projects; with only client.server, what covers poll_s and two measured round "
     "trips)"},
    {"sched", "additional_buf", CONFIG_DOUBLE, "-1", OFF(additional_buf), -1, 1e9, NULL,
     "seconds of work wanted beyond min_buf (-1: 43200 with projects, 0 with only "
     "client.server)"},
    {"sched", "time_slice", CONFIG_DOUBLE, "3600", OFF(time_slice), 0.01, 1e9, NULL,
     "round-robin time slice: a task runs this long before another project's may take its slot"},
    {"sched", "poll_s", CONFIG_DOUBLE, "-1", OFF(poll_s), -1, 1e9, NULL,
     "work fetch is considered at most this often (-1: 60 with projects, 0.05 with only "
     "client.server)"},
    {"sched", "tick_s", CONFIG_DOUBLE, "1", OFF(tick_s), 0.01, 60, NULL,
     "how often the engine accounts time and decides what runs (events also trigger it)"},
    {"sched", "rpc_backoff_min", CONFIG_DOUBLE, "-1", OFF(rpc_backoff_min), -1, 1e9, NULL,
     "after n failed RPCs to a project wait min(min * 2^n, max) * U[0.5, 1] (-1: 60 with "
     "projects, rpc.backoff_min_s with only client.server)"},
    {"sched", "rpc_backoff_max", CONFIG_DOUBLE, "-1", OFF(rpc_backoff_max), -1, 1e9, NULL,
     "cap of the RPC backoff (-1: 14400 with projects, rpc.backoff_max_s with only "
     "client.server)"},
    {"sched", "rsc_backoff_min", CONFIG_DOUBLE, "-1", OFF(rsc_backoff_min), -1, 1e9, NULL,
     "first per-(project, processor type) backoff after a request for that type got nothing "
     "(-1: 600 with projects; with only client.server the cluster's wait_s)"},
    {"sched", "rsc_backoff_max", CONFIG_DOUBLE, "-1", OFF(rsc_backoff_max), -1, 1e9, NULL,
     "cap of that backoff (it doubles each time) (-1: 86400 with projects, 30 with only "
     "client.server)"},
    {"sched", "master_fetch_period", CONFIG_INT, "10", OFF(master_fetch_period), 1, 1000, NULL,
     "re-read a project's master list every this many consecutive RPC failures"},
    {"sched", "report_cushion", CONFIG_DOUBLE, "86400", OFF(report_cushion), 0, 1e9, NULL,
     "report a result once its deadline is this close"},
    {"sched", "report_max_delay", CONFIG_DOUBLE, "-1", OFF(report_max_delay), -1, 1e9, NULL,
     "report a result at the latest this long after it finished (-1: 86400 with projects, 0 "
     "with only client.server: at once)"},
    {"sched", "default_deadline_s", CONFIG_DOUBLE, "86400", OFF(default_deadline_s), 1, 1e9, NULL,
     "report deadline of a task whose server gave none (seconds after it arrived)"},
    {"sched", "default_est_s", CONFIG_DOUBLE, "60", OFF(default_est_s), 0.001, 1e9, NULL,
     "run-time estimate of a task whose server gave none, until the project's own tasks "
     "have been timed"},
    {"project *", "share", CONFIG_STR, "100", 0, 0, 0, NULL, "resource share"},
    {"project *", "endpoints", CONFIG_STR, "", 0, 0, 0, NULL,
     "scheduler endpoints (cluster managers), comma-separated, tried in order"},
    {"project *", "master", CONFIG_STR, "", 0, 0, 0, NULL,
     "master endpoint answering MASTER_GET with the current scheduler endpoints"},
    {"gpu *", "count", CONFIG_STR, "1", 0, 0, 0, NULL, "instances of this GPU type (the NAME)"},
    {"gpu *", "gflops", CONFIG_STR, "1", 0, 0, 0, NULL, "peak GFLOPS of one instance"},
    CURVE_CONFIG_KEYS(struct client_cfg, sec),
    {NULL},
};

static const char usage[] =
    "usage: gridnode client [-c FILE] [--set section.key=value]... [--check-config]\n"
    "       gridnode client status|attach|detach ...   (see gridnode client status --help)\n"
    "       gridnode client --emulate ...   a volunteer population emulated (see\n"
    "                                       gridnode client --emulate --help)\n"
    "\n"
    "Runs an execution host: pulls tasks from its cluster manager (client.server) or\n"
    "from the projects of the config's [project NAME] sections, runs each as a real\n"
    "process (up to client.slots at once, CPU and declared GPU instances), keeps a\n"
    "work buffer covering the round trip, returns results, heartbeats while\n"
    "computing, waits for a server that is away and backs off from one that does not\n"
    "answer. SIGTERM or SIGINT: stop the running tasks; a host of one cluster reports\n"
    "its finished results and leaves.\n"
    "  -c, --config FILE   INI file (see configs/client.ini)\n"
    "  --set S.K=V         override one key (repeatable)\n"
    "  --check-config      print the effective configuration and exit\n"
    "  --emulate           emulate many volunteer hosts instead of running this one\n";

/* Every configuration check start-up makes (role_configure runs it for --check-config
 * and before starting alike). */
static int client_check(const void *p, char *err, size_t errlen)
{
    const struct client_cfg *cfg = p;
    if (config_check_log_level("client.log_level", cfg->log_level, err, errlen) < 0 ||
        (cfg->server[0] && /* empty: the projects of the multi-project client */
         config_check_endpoint("client.server", cfg->server, 0, err, errlen) < 0))
        return -1;
    if (cfg->task_memory_mb > 0 && cfg->task_memory_mb < CGROUP_MEMORY_MIN_MB) {
        snprintf(err, errlen, "client.task_memory_mb (%ld) must be 0 (no limit) or at least %d",
                 cfg->task_memory_mb, CGROUP_MEMORY_MIN_MB);
        return -1;
    }
    char fl[CONFIG_STR_MAX + 1], fwhy[200];
    if (features_norm(cfg->features, strlen(cfg->features), fl, sizeof fl, fwhy, sizeof fwhy) < 0) {
        snprintf(err, errlen, "client.features: %s", fwhy);
        return -1;
    }
    if (cfg->backoff_max_s < cfg->backoff_min_s) {
        snprintf(err, errlen, "rpc.backoff_max_s (%g) must be at least rpc.backoff_min_s (%g)",
                 cfg->backoff_max_s, cfg->backoff_min_s);
        return -1;
    }
    return 0;
}

int client_main(int argc, char **argv)
{
    static struct client_cfg cfg;
    int rc = role_configure("client", usage, client_keys, &cfg, argc, argv, client_check);
    if (rc >= 0)
        return rc;
    const char *file = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config"))
            file = argv[i + 1];
    log_init("client", (enum log_level)log_level_parse(cfg.log_level));
    loop_signals();
    return vcl_main(&cfg, file);
}

/*
 * cluster.c - the cluster role's start-up and loop: configuration, the state, and the
 * callbacks it gives the shared request/reply skeleton (daemon/daemon.h).
 *
 * One loop turn reads up to DAEMON_TURN_MAX requests, lets their handlers change the
 * state in memory and buffer the matching store writes, then (before sleeping) writes
 * the changed records, commits them in one transaction and only then sends the
 * replies. If the commit fails, every reply of the turn becomes a STORAGE error and the
 * in-memory state is reloaded from the store, so what was acknowledged and what is
 * stored never differ.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/endwait.h"
#include "daemon/daemon.h"
#include "lib/fsutil.h"
#include "daemon/httpstats.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/statspage.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "roles/cluster/workwait.h"
#include "store/store.h"

#define OFF(f) offsetof(struct cluster_cfg, f)
const struct config_key cluster_keys[] = {
    DAEMON_LISTEN_KEY(struct cluster_cfg, "cluster", "tcp://127.0.0.1:7300"),
    DAEMON_STATE_KEYS(
        struct cluster_cfg, "cluster", "run/cluster",
        "directory of the LMDB state, stats.json/html and the endpoint file (created)"),
    {"tasks", "k_wait", CONFIG_DOUBLE, "3", OFF(k_wait), 1, 1000, NULL,
     "re-issue a task after estimated time x k_wait without its result (X4)"},
    {"tasks", "k_wait_dead", CONFIG_DOUBLE, "6", OFF(k_wait_dead), 1, 1000, NULL,
     "mark a node inactive after its expected silence x k_wait_dead (> k_wait) (X5)"},
    {"tasks", "heartbeat_s", CONFIG_INT, "10", OFF(hb_s), 1, 86400, NULL,
     "interval at which computing nodes send STATUS heartbeats"},
    {"tasks", "idle_wait_s", CONFIG_INT, "2", OFF(idle_wait_s), 1, 86400, NULL,
     "delay a node is told to wait before asking again when there are no tasks"},
    {"tasks", "default_estimate_s", CONFIG_DOUBLE, "60", OFF(default_estimate_s), 0.001, 1e7, NULL,
     "estimated seconds per work unit before any node has reported a result"},
    {"tasks", "min_wait_s", CONFIG_DOUBLE, "5", OFF(min_wait_s), 0, 1e7, NULL,
     "never re-issue a task sooner than this after handing it out"},
    {"tasks", "input_unit_kb", CONFIG_INT, "1024", OFF(input_unit_kb), 1, 1L << 30, NULL,
     "task work = complexity x (1 + input size / input_unit_kb)"},
    {"tasks", "default_limit_s", CONFIG_INT, "3600", OFF(default_limit_s), 1, 366L * 86400, NULL,
     "wall-clock limit of a task when the job gives none"},
    {"tasks", "max_attempts", CONFIG_INT, "3", OFF(max_attempts), 1, 1000, NULL,
     "results saying a task could not run before that failure is final"},
    {"tasks", "node_daily_quota", CONFIG_INT, "1000", OFF(node_daily_quota), 1, 100000000, NULL,
     "tasks a day for a node after a node-side error: halved on each, doubled on each valid "
     "result; a node at the full quota is not limited (BOINC's host daily quota)"},
    {"tasks", "node_poll_s", CONFIG_INT, "2", OFF(node_poll_s), 1, 86400, NULL,
     "a node running tasks checks in this often (at most heartbeat_s), so a cancel reaches it"},
    {"tasks", "heartbeat_extends", CONFIG_BOOL, "true", OFF(heartbeat_extends), 0, 0, NULL,
     "a heartbeat naming a running task postpones its re-issue (false: pure X-Com)"},
    {"tasks", "deadline_s", CONFIG_INT, "86400", OFF(deadline_s), 1, 366L * 86400, NULL,
     "report deadline of a task after it is handed out, when its job gives none "
     "(submit --deadline); later results are still taken and counted as late"},
    {"tasks", "unit_gflop", CONFIG_DOUBLE, "600", OFF(unit_gflop), 1e-6, 1e12, NULL,
     "GFLOP in one work unit: a task's est_s on a processor that declared its GFLOPS is "
     "work x unit_gflop / GFLOPS (600: 60 s on a 10 GFLOPS core)"},
    {"project", "name", CONFIG_STR, "", OFF(project_name), 0, 0, NULL,
     "project name served by MASTER_GET; empty: this cluster serves no master list"},
    {"project", "endpoints", CONFIG_STR, "", OFF(project_endpoints), 0, 0, NULL,
     "the project's scheduler endpoints, comma-separated (MASTER)"},
    {"project", "endpoints_file", CONFIG_STR, "", OFF(project_endpoints_file), 0, 0, NULL,
     "file of scheduler endpoints (one per line or comma-separated, # comments), re-read "
     "on every MASTER_GET; used instead of endpoints when set"},
    STATSPAGE_CONFIG_KEYS(struct cluster_cfg, stats_interval_s, stats_http),
    DAEMON_STORE_KEYS(struct cluster_cfg),
    {"queues", "count", CONFIG_INT, "3", OFF(sd_queues), 1, SD_MAXQ, NULL,
     "priority queues of parallel jobs; queue 0 is the highest (K4)"},
    {"queues", "default", CONFIG_INT, "1", OFF(sd_default_queue), 0, SD_MAXQ - 1, NULL,
     "queue of a parallel job that names none"},
    {"queues", "quantum_ms", CONFIG_INT, "1000", OFF(sd_quantum_ms), 50, 3600000, NULL,
     "gang time slice: jobs sharing hosts take turns this often (K6)"},
    {"queues", "sync_ms", CONFIG_INT, "500", OFF(sd_sync_ms), 20, 60000, NULL,
     "how often nodes report their parallel processes and fetch commands (PSYNC)"},
    {"queues", "lost_requeues", CONFIG_INT, "5", OFF(sd_lost_requeues), 0, 1000, NULL,
     "a parallel job whose host or process was lost is requeued this many times at most "
     "(Slurm's MaxBatchRequeue), then it fails; a batch role's jobs are rerun there"},
    {"queues", "hosts", CONFIG_STR, "", OFF(sd_hosts), 0, 0, NULL,
     "hosts file ([host] sections: cluster, speed, watchfs); empty: none (K1)"},
    {"queues", "rc", CONFIG_STR, "", OFF(sd_rc), 0, 0, NULL,
     "startup file of console commands, applied once to a new state (K9)"},
    DAEMON_LIMIT_KEYS(struct cluster_cfg),
    {"limits", "peer_timeout_s", CONFIG_INT, "30", OFF(peer_timeout_s), 1, 6553, NULL,
     "a connection silent this long (heartbeats unanswered) is closed and its descriptor freed"},
    {"nodes", "forget_after_s", CONFIG_INT, "86400", OFF(forget_after_s), 0, 1L << 40, NULL,
     "forget an inactive session holding no work this long after its last request (0: "
     "never)"},
    {"nodes", "max_sessions_per_address", CONFIG_INT, "10000", OFF(max_sessions_per_address), 0,
     1L << 31, NULL,
     "sessions per peer address; a new one over it replaces the oldest idle one, or is "
     "refused (0: no cap)"},
    {"jobs", "retention_s", CONFIG_INT, "604800", OFF(retention_s), 0, 1L << 40, NULL,
     "purge finished jobs this long after they ended (0: keep them until gridnode purge)"},
    {"files", "job_mb", CONFIG_INT, "10240", OFF(files_job_mb), 1, 1L << 30, NULL,
     "a job's input files at most, in MB (shared files counted once); also the largest "
     "file one upload may be (docs/data.md)"},
    {"files", "user_mb", CONFIG_INT, "0", OFF(files_user_mb), 0, 1L << 30, NULL,
     "the files one user's uploads keep here at most, in MB (0: no limit); an upload over "
     "it is refused naming the limit and what the user holds (docs/data.md)"},
    {"files", "keep_s", CONFIG_INT, "86400", OFF(files_keep_s), 0, 1L << 40, NULL,
     "a stored file no job names (its jobs purged, or uploaded and never submitted) is "
     "deleted once unchanged this long, by a sweep after each purge and hourly"},
    {"files", "upload_wait_s", CONFIG_INT, "300", OFF(files_upload_wait_s), 1, 1L << 30, NULL,
     "a job may name an input still being uploaded (cut-through); a node's read of it fails "
     "the task, naming the file, once no chunk of it came for this long (docs/data.md)"},
    {"files", "ckpt_mb", CONFIG_INT, "1024", OFF(files_ckpt_mb), 1, 1L << 30, NULL,
     "one task's checkpoint (submit --checkpoint-s) at most, in MB; a larger one is not "
     "uploaded and the task's result says so (docs/data.md)"},
    {"events", "keep", CONFIG_INT, "100000", OFF(ev_keep), 16, 10000000, NULL,
     "job and host events kept in memory for EVENTS (at most 64 MiB; older ones dropped)"},
    {"validation", "spot_fraction", CONFIG_DOUBLE, "0.05", OFF(v_spot_fraction), 0, 1, NULL,
     "share of any node's work that is a known-answer task (when a job supplies some)"},
    {"validation", "trust_after", CONFIG_INT, "20", OFF(v_trust_after), 1, 1000000, NULL,
     "checked valid results in a row before a node's results may be accepted alone"},
    {"validation", "check_min", CONFIG_DOUBLE, "0.05", OFF(v_check_min), 0, 1, NULL,
     "a trusted node's result is still replicated with at least this probability"},
    {"validation", "redeem_spots", CONFIG_INT, "3", OFF(v_redeem_spots), 1, 1000, NULL,
     "spot checks a node must pass (getting nothing else) after failing one"},
    {"validation", "validator_timeout_s", CONFIG_INT, "60", OFF(v_validator_timeout_s), 1, 86400,
     NULL, "a validator running longer is killed and the run counts as failed"},
    {"validation", "validator_attempts", CONFIG_INT, "3", OFF(v_validator_attempts), 1, 100, NULL,
     "failed validator runs (crash, timeout, bad output) before the task fails"},
    {"validation", "validator_max", CONFIG_INT, "4", OFF(v_validator_max), 1, 64, NULL,
     "validators running at once"},
    CURVE_CONFIG_KEYS(struct cluster_cfg, sec),
    ACCT_CONFIG_KEYS(struct cluster_cfg, acct),
    {NULL},
};

static const struct store_table cluster_tables[] = {
    {"jobs", STORE_KEY_U64},
    {"tasks", STORE_KEY_U64_U32},
    {"results", STORE_KEY_U64_U32},
    {"dups", STORE_KEY_U64_U32_U32},
    {"stdin", STORE_KEY_U64_U32},
    {"nodes", STORE_KEY_STR},
    {"pjobs", STORE_KEY_U64},
    {"scored", STORE_KEY_STR},
    {"poutput", STORE_KEY_U64_U32},
    {"vres", STORE_KEY_U64_U32_U32},
    {"known", STORE_KEY_U64_U32},
    {"drain", STORE_KEY_STR},
    {ACCT_TABLE, STORE_KEY_U64},      /* acct.c: accounting records (issue 27) */
    {"files", STORE_KEY_STR},         /* daemon/filestore.c: the file store's records (issue 26) */
    {"jobdata", STORE_KEY_U64},       /* files.c: a job's inputs and outputs (issue 26) */
    {"ckpt", STORE_KEY_U64_U32},      /* files_ckpt.c: a task's latest checkpoint (issue 26) */
    {"pckpt", STORE_KEY_U64_U32_U32}, /* files_pckpt.c: parallel jobs' ranks' (issue 26) */
    {NULL},
};

const struct store_table *const cluster_store_tables = cluster_tables;

void cluster_store_find_tables(struct cluster *c)
{
    c->t_meta = store_table(c->store, "meta");
    c->t_jobs = store_table(c->store, "jobs");
    c->t_tasks = store_table(c->store, "tasks");
    c->t_results = store_table(c->store, "results");
    c->t_dups = store_table(c->store, "dups");
    c->t_stdin = store_table(c->store, "stdin");
    c->t_nodes = store_table(c->store, "nodes");
    c->t_vres = store_table(c->store, "vres");
    c->t_known = store_table(c->store, "known");
    c->t_drain = store_table(c->store, "drain");
    c->t_acct = store_table(c->store, ACCT_TABLE);
    c->t_files = store_table(c->store, "files");
    c->t_jobdata = store_table(c->store, "jobdata");
    c->t_ckpt = store_table(c->store, "ckpt");
}

static const char usage[] =
    "usage: gridnode cluster [-c FILE] [--set section.key=value]... [--check-config]\n"
    "\n"
    "Runs the cluster manager / task server: nodes (gridnode client) pull numbered\n"
    "tasks of submitted jobs, return results, send heartbeats. State is kept in\n"
    "state_dir; a restarted cluster carries on where it stopped.\n"
    "  -c, --config FILE   INI file (see configs/cluster.ini)\n"
    "  --set S.K=V         override one key (repeatable)\n"
    "  --check-config      print the effective configuration and exit\n";

/* daemon callback: one validated request -> the handler table (handlers.c). */
static void on_request(void *arg, const struct wire_msg *msg, const char *peer,
                       struct wire_buf *reply)
{
    struct request r = {msg, peer, reply};
    handlers_dispatch(arg, &r);
}

/* Jobs held back during the turn may be handed out again once it is committed. */
static void release_issuable(struct cluster *c)
{
    for (uint32_t i = c->njobs; i > 0 && !c->jobs[i - 1]->issuable; i--)
        c->jobs[i - 1]->issuable = true;
}

/* daemon callback, before the turn's replies are sent: schedule, write, commit. */
static int on_commit(void *arg)
{
    struct cluster *c = arg;
    if (c->turn_failed) /* a handler could not buffer its writes */
        return -1;
    if (c->purge.n)
        purge_step(c); /* a bounded batch of purged jobs' records */
    if (c->turn_failed)
        return -1;
    jobdep_step(c);     /* issue 27: waiting jobs whose dependency now holds, or never can */
    if (c->sd->resched) /* submissions, ends, console changes: fill freed hosts now */
        scored_schedule(c, false);
    if (cluster_save_dirty(c) < 0 || scored_save_dirty(c) < 0 || filestore_sync(c->files) < 0 ||
        store_commit(c->store) < 0) {
        int e = errno;
        log_warnx("commit failed: %s", store_error_text(e));
        errno = e; /* the daemon tells the requesters */
        return -1;
    }
    release_issuable(c);
    feed_after_commit(c);     /* events of what is now durable; answers held requests */
    workwait_after_commit(c); /* idle nodes told of a new job */
    if (c->endwait)           /* users' JOB_WAITs one of whose jobs ended (issue 28) */
        endwait_after_commit(c->endwait, c->daemon);
    scored_settle(c);
    return 0;
}

/*
 * The whole state from the store: jobs, nodes, tasks and meta (state_rec.c), then what
 * hangs on them: validation candidates and known answers, drains, parallel jobs, the
 * session index, the purge queue. Skipped records are counted in c->load_skipped.
 */
int cluster_load(struct cluster *c)
{
    c->load_skipped = 0;
    c->dep_maybe = true; /* loaded jobs may wait on dependencies: the first pass tells */
    if (cluster_load_records(c) < 0 || valid_load(c) < 0)
        return -1;
    return drain_load(c) < 0 || scored_load(c) < 0 || sessions_index(c) < 0 || purge_load(c) < 0 ||
                   files_load(c) < 0
               ? -1
               : 0;
}

void cluster_free_state(struct cluster *c)
{
    free(c->dep_chg); /* jobdep.c */
    c->dep_chg = NULL;
    c->ndep_chg = c->capdep_chg = 0;
    free(c->dirty_ids); /* state.c: the turn's dirty jobs */
    c->dirty_ids = NULL;
    c->ndirty = c->capdirty = 0;
    c->dirty_all = false;
    c->dep_maybe = false;
    free(c->acct_notes); /* acct.c: this turn's winning results (an undone turn's too) */
    c->acct_notes = NULL;
    c->nacct_notes = c->capacct_notes = 0;
    cluster_free_records(c);
    sessions_free(c);
    drain_free(c);
    purge_free(c);
    filestore_destroy(&c->files);
    scored_free_state(c);
    valid_reset(c);
}

/* daemon callback after a failed commit: forget the turn, reload what is stored. */
static void on_reload(void *arg)
{
    struct cluster *c = arg;
    store_discard(c->store);
    feed_discard(c);
    cluster_free_state(c);
    if (cluster_load(c) < 0)
        fatalx("cannot reload the state after a failed commit; restart the cluster");
    c->turn_failed = false;
    release_issuable(c);
}

static void on_check(struct loop *l, void *arg)
{
    (void)l;
    struct cluster *c = arg;
    feed_keepalive(c); /* a held PSYNC long-poll is contact */
    nodes_check_active(c);
    valid_tick(c);
    sessions_sweep(c);
    cluster_acct_tick(c);
    files_sweep(c); /* issue 26: files no job names any more */
    long every = c->cfg.retention_s < 10 ? c->cfg.retention_s : 10; /* seconds */
    if (every > 0 && ++c->retention_ticks >= every) {
        c->retention_ticks = 0;
        purge_retention(c);
    }
}

static void on_quantum(struct loop *l, void *arg)
{
    (void)l;
    scored_schedule(arg, true);
}

/* Sets up the statistics and starts the stats.http server (state_dir/stats.url). */
static int stats_http_start(struct cluster *c)
{
    char err[512];
    if (stats_open(c, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode cluster: %s\n", err);
        log_warnx("%s", err);
        return -1;
    }
    return 0;
}

static int cluster_open(struct cluster *c)
{
    char err[512];
    if (fs_mkdir_p(c->cfg.state_dir) < 0) {
        log_warn("cannot create state_dir %s", c->cfg.state_dir);
        return -1;
    }
    if ((c->lockfd = daemon_lock_state_dir(c->cfg.state_dir, err, sizeof err)) < 0) {
        fprintf(stderr, "gridnode cluster: %s\n", err);
        return -1;
    }
    struct store_opts so = {"cluster", cluster_tables, (enum store_sync)c->cfg.sync,
                            (size_t)c->cfg.map_mb << 20, false};
    if (!(c->store = store_open(c->cfg.state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    cluster_store_find_tables(c);
    if (!c->vs && valid_init(c) < 0)
        return -1;
    if (scored_open(c) < 0 || feed_open(c) < 0)
        return -1;
    if (cluster_load(c) < 0) {
        log_warnx("cannot load the state from %s", c->cfg.state_dir);
        return -1;
    }
    if (store_commit(c->store) < 0) { /* a new state's incarnation */
        log_warn("cannot save the state's incarnation");
        return -1;
    }
    const char *fault = getenv("GRIDNODE_FAULT_COMMIT"); /* counts commits after loading */
    if (fault)
        store_fault_commit(c->store, atoi(fault));
    if (scored_startup(c) < 0)
        return -1;
    log_info("state loaded: %u jobs, %u nodes, %u tasks in flight", c->njobs, c->nnodes, c->nheap);
    if (c->load_skipped)
        log_warnx("%u stored record(s) could not be loaded (see the warnings above); they are "
                  "kept in %s for inspection (gridnode dump)",
                  c->load_skipped, c->cfg.state_dir);
    return 0;
}

static void cluster_close(struct cluster *c)
{
    valid_free(c); /* kills running validators */
    if (c->store)
        store_commit(c->store);
    store_close(&c->store);
    statspage_free(&c->stats); /* before the state it was published from goes */
    cluster_free_state(c);
    feed_close(c);
    scored_close(c);
    daemon_destroy(&c->daemon);
    endwait_free(&c->endwait);
    loop_destroy(&c->loop);
    if (c->lockfd >= 0)
        close(c->lockfd); /* last: the state is closed */
}

/* Every configuration check start-up makes (role_configure runs it for --check-config
 * and before starting alike). */
static int cluster_check(const void *p, char *err, size_t errlen)
{
    const struct cluster_cfg *cfg = p;
    if (config_check_log_level("cluster.log_level", cfg->log_level, err, errlen) < 0 ||
        config_check_endpoint("cluster.listen", cfg->listen, 1, err, errlen) < 0 ||
        config_check_file("queues.rc", cfg->sd_rc, err, errlen) < 0 ||
        httpstats_check("stats.http", cfg->stats_http, err, errlen) < 0)
        return -1;
    if (cfg->k_wait_dead <= cfg->k_wait) {
        snprintf(err, errlen, "tasks.k_wait_dead (%g) must be greater than tasks.k_wait (%g)",
                 (double)cfg->k_wait_dead, (double)cfg->k_wait);
        return -1;
    }
    return scored_check_config(cfg, err, errlen);
}

int cluster_main(int argc, char **argv)
{
    static struct cluster c;
    int rc = role_configure("cluster", usage, cluster_keys, &c.cfg, argc, argv, cluster_check);
    if (rc >= 0)
        return rc;
    log_init("cluster", (enum log_level)log_level_parse(c.cfg.log_level));
    loop_signals();
    c.lockfd = -1;
    rc = 1;
    if (!(c.sd = calloc(1, sizeof *c.sd)))
        goto out;
    struct daemon_opts dop = {
        "cluster", c.cfg.listen, c.cfg.state_dir, c.cfg.peer_queue, c.cfg.peer_timeout_s * 1000,
        &c.cfg.sec};
    struct daemon_ops ops = {on_request, on_commit, on_reload, &c, feed_expire};
    /* the HTTP port before the ZeroMQ one: "listening on" means everything is up */
    if (cluster_open(&c) < 0 || stats_http_start(&c) < 0 || !(c.loop = loop_new()) ||
        !(c.endwait = endwait_new(&handlers_endwait_ops, &c)) ||
        !(c.daemon = daemon_new(c.loop, &dop, &ops)))
        goto out;
    loop_timer(c.loop, 1000, 1, on_check, &c);
    statspage_timer(c.stats, c.loop);
    loop_timer(c.loop, c.cfg.sd_quantum_ms, 1, on_quantum, &c);
    stats_write(&c);
    rc = loop_run(c.loop) < 0 ? 1 : 0;
    stats_write(&c);
    log_info("stopping");
out:
    cluster_close(&c);
    return rc;
}

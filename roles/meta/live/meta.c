/*
 * meta.c - the live metascheduler role's top: configuration, start-up (state-dir lock,
 * LMDB store, incarnation, the jobs loaded), the daemon callbacks and the loop. Below it
 * (meta_int.h): the user requests (metareq.c) and statistics (metastats.c), the sites
 * (metasite.c, metaplace.c, metasend.c), the jobs and their records (metajob.c).
 *
 * A turn: requests and site replies change jobs (marked dirty); the commit callback
 * starts placements, writes the dirty jobs, commits once (group commit), and only then
 * sends the replies and the messages to the sites. A reservation is therefore named
 * in the store before it is asked for, and a submission's key before it is sent.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/endwait.h"
#include "daemon/daemon.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/filestore.h"
#include "daemon/httpstats.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "daemon/statspage.h"
#include "lib/text.h"
#include "roles/meta/live/meta.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"

#define OFF(f) offsetof(struct meta_cfg, f)
static const struct config_key meta_keys[] = {
    DAEMON_LISTEN_KEY(struct meta_cfg, "meta", "tcp://127.0.0.1:7500"),
    DAEMON_STATE_KEYS(struct meta_cfg, "meta", "run/meta",
                      "directory of the LMDB spool and the endpoint file (created)"),
    {"meta", "sites", CONFIG_STR, "", OFF(sites), 0, 0, NULL,
     "sites, comma-separated: NAME=tcp://HOST:PORT (a batch role) or "
     "NAME=slurm://SLURM_CONF?partition=P&... (a Slurm cluster, docs/meta.md)"},
    {"meta", "sites_file", CONFIG_STR, "", OFF(sites_file), 0, 0, NULL,
     "a file of more sites, one a line: NAME=ENDPOINT [speed=S] [bandwidth_mb_s=B] "
     "(# comments); for more sites than meta.sites' 160 bytes hold (up to 64 in all)"},
    {"meta", "speeds", CONFIG_STR, "", OFF(speeds), 0, 0, NULL,
     "relative site speeds, NAME=SPEED,... (default 1): run time = walltime / speed"},
    {"meta", "policy", CONFIG_STR, "estimate", OFF(policy), 0, 0, NULL,
     "estimate | earliest_start | least_queued | round_robin | random | slurm_m"},
    {"meta", "user", CONFIG_STR, "meta", OFF(user), 0, 0, NULL,
     "the name the spool owns its site reservations under (RESERVE user)"},
    {"meta", "estimate_timeout_ms", CONFIG_INT, "1000", OFF(estimate_timeout_ms), 10, 600000, NULL,
     "a site that has not answered ESTIMATE by then is left out of this placement"},
    {"meta", "request_timeout_ms", CONFIG_INT, "5000", OFF(request_timeout_ms), 100, 600000, NULL,
     "a site request other than ESTIMATE unanswered by then: the site is taken as down"},
    {"meta", "move_margin_s", CONFIG_INT, "60", OFF(move_margin_s), 0, 1L << 30, NULL,
     "re-evaluation moves a waiting job when another site starts it earlier by more"},
    {"meta", "reeval_s", CONFIG_INT, "10", OFF(reeval_s), 0, 86400, NULL,
     "how often placed jobs that have not started are re-examined (0: never)"},
    {"meta", "site_down_s", CONFIG_INT, "30", OFF(site_down_s), 1, 86400 * 7, NULL,
     "a site silent this long loses its not-yet-started jobs to other sites"},
    {"meta", "max_attempts", CONFIG_INT, "20", OFF(max_attempts), 1, 1000000, NULL,
     "placement rounds before a job fails (a round tries every eligible site)"},
    DAEMON_STORE_KEYS(struct meta_cfg),
    DAEMON_LIMIT_KEYS(struct meta_cfg),
    CURVE_CONFIG_KEYS(struct meta_cfg, sec),
    STATSPAGE_CONFIG_KEYS(struct meta_cfg, stats_interval_s, stats_http),
    ACCT_CONFIG_KEYS(struct meta_cfg, acct),
    /* issue 26 (docs/data.md "Through the grid spool"), as at the batch role */
    {"files", "job_mb", CONFIG_INT, "10240", OFF(files_job_mb), 1, 1L << 30, NULL,
     "the largest file one upload may be, and a job's distinct inputs together, in MB"},
    {"files", "user_mb", CONFIG_INT, "0", OFF(files_user_mb), 0, 1L << 30, NULL,
     "the files one user's uploads keep at the spool at most, in MB (0: no limit)"},
    {"files", "keep_s", CONFIG_INT, "86400", OFF(files_keep_s), 0, 1L << 40, NULL,
     "a stored file no job names is deleted once unchanged this long (seconds)"},
    {"files", "recheck_s", CONFIG_INT, "60", OFF(files_recheck_s), 1, 1L << 30, NULL,
     "a file a site said it held longer ago than this is asked about again before a job "
     "names it (seconds)"},
    {"jobs", "retention_s", CONFIG_INT, "604800", OFF(retention_s), 0, 1L << 40, NULL,
     "purge ended jobs this long after they ended (0: keep them until gridnode purge)"},
    {NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL},
};

static const char usage[] =
    "usage: gridnode meta [-c FILE] [--set SECTION.KEY=VALUE]... [--check-config]\n"
    "\n"
    "The metascheduler: a grid spool on meta.listen. Users submit with\n"
    "`gridnode submit -e META_EP ...`; each job is placed on one of the batch sites in\n"
    "meta.sites (ESTIMATE at every site that can hold it, best by meta.policy, RESERVE\n"
    "there, SUBMIT into the reservation) and followed to its end: gridnode jobs/job/cancel\n"
    "-e META_EP. See docs/meta.md and configs/meta.ini.\n"
    "\n"
    "gridnode meta --simulate TRACE ... compares the placement policies on a trace\n"
    "(gridnode meta --simulate --help).\n";

static const struct store_table meta_tables[] = {
    {"jobs", STORE_KEY_U64},
    {"orders", STORE_KEY_U64}, /* the outbox (metaorder.c, issue 24) */
    {ACCT_TABLE, STORE_KEY_U64},
    {"files", STORE_KEY_STR},         /* daemon/filestore.c (issue 26) */
    {"taskfiles", STORE_KEY_U64_U32}, /* metafiles.c: a task's row, its outputs copied here */
    {NULL},
};

/* ---- daemon callbacks ---- */

static void on_request(void *arg, const struct wire_msg *m, const char *peer,
                       struct wire_buf *reply)
{
    (void)peer;
    meta_dispatch(arg, m, reply);
}

/* A held JOB_GET `output` (metaout.c) past its deadline, or replaced by another. */
static void on_expire(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id,
                      struct wire_buf *reply)
{
    struct meta *M = arg;
    if (kind == WT_JOB_WAIT && M->endwait && endwait_expire(M->endwait, handle, req_id, reply))
        return; /* issue 28 */
    if (!meta_out_fail(arg, handle, "its site did not answer in time (try again)", reply))
        wire_error_msg(reply, req_id, WE_STATE, "the request could not be relayed: try again");
}

static int on_commit(void *arg)
{
    struct meta *M = arg;
    if (M->turn_failed)
        return -1;
    meta_dep_step(M); /* issue 27: waiting jobs whose dependency holds now, or never can */
    meta_place_some(M);
    if (M->meta_dirty) {
        if (record_put_u64(M->store, M->t_meta, "next_job", M->next_id) < 0 ||
            record_put_u64(M->store, M->t_meta, "next_order", M->next_order) < 0)
            return -1;
        M->meta_dirty = false;
    }
    meta_files_sweep(M); /* hourly (issue 26) */
    /* the file chunks written this turn are durable before their records (issue 26) */
    if (meta_acct_save_dirty(M) < 0 || meta_jobs_save(M) < 0 || meta_orders_save(M) < 0 ||
        M->turn_failed || filestore_sync(M->files) < 0 || store_commit(M->store) < 0) {
        int e = errno;
        log_warnx("commit failed: %s", store_error_text(e));
        errno = e; /* the daemon tells the requesters */
        meta_out_flush(M, false);
        return -1;
    }
    meta_out_flush(M, true);
    if (M->endwait) /* JOB_WAITs one of whose jobs ended, answered (issue 28) */
        endwait_after_commit(M->endwait, M->daemon);
    return 0;
}

static int load_all(struct meta *M);

static void on_reload(void *arg)
{
    struct meta *M = arg;
    store_discard(M->store);
    meta_out_flush(M, false);
    meta_dirty_reset(M);
    for (uint32_t i = 0; i < M->njobs; i++)
        meta_job_free(M->jobs[i]);
    M->njobs = 0;
    M->nest = 0;
    meta_key_reset(M);
    meta_orders_free(M);
    meta_sites_forget(M);
    if (load_all(M) < 0)
        fatalx("cannot reload the state after a failed commit; restart the meta role");
    M->turn_failed = false;
}

static void on_tick(struct loop *l, void *arg)
{
    (void)l;
    meta_sites_tick(arg);
}

static void on_acct(struct loop *l, void *arg)
{
    (void)l;
    meta_acct_tick(arg);
    meta_purge_tick(arg); /* jobs.retention_s (metapurge.c) */
}

static int load_all(struct meta *M)
{
    void *v;
    size_t vl;
    int rc = store_get(M->store, M->t_meta, "inc", 3, &v, &vl);
    if (rc == 0 && vl < sizeof M->inc) {
        memcpy(M->inc, v, vl);
        M->inc[vl] = '\0';
        free(v);
    } else {
        if (rc == 0)
            free(v);
        uint8_t raw[8];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
            return -1;
        for (int i = 0; i < 8; i++)
            snprintf(M->inc + 2 * i, 3, "%02x", raw[i]);
        if (store_put(M->store, M->t_meta, "inc", 3, M->inc, strlen(M->inc)) < 0)
            return -1;
    }
    M->next_id = 1;
    if (record_get_u64(M->store, M->t_meta, "next_job", &M->next_id) != 0 || M->next_id < 1)
        M->next_id = 1;
    M->njobs = 0;
    M->inflight = 0;
    if (meta_files_open(M) < 0) /* issue 26: before the jobs, whose submissions name files */
        return -1;
    if (record_load(M->store, M->t_jobs, meta_job_load, M) < 0)
        return -1;
    /* the outbox (issue 24; absent before: empty): sent again once each site is up */
    M->next_order = 1;
    if (record_get_u64(M->store, M->t_meta, "next_order", &M->next_order) != 0 || M->next_order < 1)
        M->next_order = 1;
    M->norders = 0;
    if (record_load(M->store, M->t_orders, meta_order_load, M) < 0)
        return -1;
    for (uint32_t i = 0; i < M->njobs; i++)
        meta_resume(M, M->jobs[i]);
    return 0;
}

static int meta_open(struct meta *M)
{
    char err[512];
    const struct meta_cfg *c = &M->cfg;
    if (fs_mkdir_p(c->state_dir) < 0) {
        log_warn("cannot create state_dir %s", c->state_dir);
        return -1;
    }
    if ((M->lockfd = daemon_lock_state_dir(c->state_dir, err, sizeof err)) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        return -1;
    }
    struct store_opts so = {"meta", meta_tables, (enum store_sync)c->sync, (size_t)c->map_mb << 20,
                            false};
    if (!(M->store = store_open(c->state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    M->t_meta = store_table(M->store, "meta");
    M->t_jobs = store_table(M->store, "jobs");
    M->t_orders = store_table(M->store, "orders");
    M->t_acct = store_table(M->store, ACCT_TABLE);
    M->t_files = store_table(M->store, "files");
    M->t_taskfiles = store_table(M->store, "taskfiles");
    if (load_all(M) < 0 || meta_jobs_save(M) < 0 || store_commit(M->store) < 0) {
        log_warnx("cannot load the state from %s", c->state_dir);
        return -1;
    }
    log_info("state loaded: %u jobs, %u orders to sites, incarnation %s, %d sites, policy %s",
             M->njobs, M->norders, M->inc, M->nsites, meta_policy_name(M->policy));
    return 0;
}

/* Every configuration check start-up makes (role_configure runs it for --check-config
 * and before starting alike); the site list is parsed into a scratch role. */
static int meta_check(const void *p, char *err, size_t errlen)
{
    const struct meta_cfg *cfg = p;
    if (config_check_log_level("meta.log_level", cfg->log_level, err, errlen) < 0 ||
        config_check_endpoint("meta.listen", cfg->listen, 1, err, errlen) < 0 ||
        httpstats_check("stats.http", cfg->stats_http, err, errlen) < 0)
        return -1;
    if (meta_policy_parse(cfg->policy) < 0) {
        snprintf(err, errlen,
                 "meta.policy must be estimate, earliest_start, least_queued, "
                 "round_robin, random or slurm_m, not '%s'",
                 cfg->policy);
        return -1;
    }
    struct meta *scratch = calloc(1, sizeof *scratch);
    if (!scratch) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    scratch->cfg = *cfg;
    int rc = meta_sites_parse(scratch, err, errlen);
    free(scratch);
    return rc;
}

int meta_main(int argc, char **argv)
{
    static struct meta M;
    int rc = role_configure("meta", usage, meta_keys, &M.cfg, argc, argv, meta_check);
    if (rc >= 0)
        return rc;
    char err[512];
    int lvl = log_level_parse(M.cfg.log_level), pol = meta_policy_parse(M.cfg.policy);
    M.policy = (enum meta_policy)pol;
    M.lockfd = -1;
    if (meta_sites_parse(&M, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: configuration error: %s\n", err);
        return 1;
    }
    log_init("meta", (enum log_level)lvl);
    loop_signals();
    M.rr_state = (uint64_t)getpid();
    rc = 1;
    struct daemon_opts dop = {"meta", M.cfg.listen, M.cfg.state_dir, M.cfg.peer_queue,
                              .security = &M.cfg.sec};
    struct daemon_ops ops = {on_request, on_commit, on_reload, &M, on_expire};
    /* the HTTP port before the ZeroMQ one: "listening on" means everything is up */
    if (meta_open(&M) < 0 || metastats_open(&M, err, sizeof err) < 0 || !(M.loop = loop_new()) ||
        !(M.endwait = endwait_new(&meta_endwait_ops, &M)) ||
        !(M.daemon = daemon_new(M.loop, &dop, &ops)))
        goto out;
    if (meta_sites_open(&M) < 0) {
        fprintf(stderr, "gridnode meta: cannot connect to the sites\n");
        goto out;
    }
    loop_timer(M.loop, 50, 1, on_tick, &M);
    loop_timer(M.loop, 1000, 1, on_acct, &M); /* accounting and job retention */
    statspage_timer(M.stats, M.loop);
    statspage_write(M.stats);
    rc = loop_run(M.loop) < 0 ? 1 : 0;
    statspage_write(M.stats);
    log_info("stopping");
out:
    metastats_close(&M); /* before the state it was published from goes */
    meta_sites_close(&M);
    if (M.store)
        store_commit(M.store);
    store_close(&M.store);
    for (uint32_t i = 0; i < M.njobs; i++)
        meta_job_free(M.jobs[i]);
    free(M.jobs);
    meta_key_reset(&M);
    meta_orders_free(&M);
    meta_out_free(&M);
    meta_stage_free(&M);
    meta_files_close(&M);
    daemon_destroy(&M.daemon);
    endwait_free(&M.endwait);
    loop_destroy(&M.loop);
    if (M.lockfd >= 0)
        close(M.lockfd);
    return rc;
}

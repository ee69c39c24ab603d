/*
 * live.c - the live batch role: start-up (config, state-dir lock, store, incarnation),
 * the daemon callbacks and the scheduling cycle.
 *
 * A turn: requests (livereq.c) and cluster replies/events (liveclu.c) change the jobs
 * and tell the engine; in the commit callback the cycle runs if anything asked for
 * it (submit, end, host change, admin command, the engine's next boundary, or
 * batch.max_interval_s passed), the jobs it starts become "starting" records, one
 * store commit makes the turn durable, and only then go the replies and the PSUBMITs
 * to the cluster managers. A start is therefore stored before it is sent, and its
 * key makes a re-sent one harmless after a restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/config.h"
#include "daemon/daemon.h"
#include "daemon/endwait.h"
#include "lib/fsutil.h"
#include "daemon/httpstats.h"
#include "lib/log.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "daemon/statspage.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

static const struct store_table live_tables[] = {
    {"jobs", STORE_KEY_U64},
    {"elems", STORE_KEY_U64_U32},
    {"resv", STORE_KEY_STR},
    {ACCT_TABLE, STORE_KEY_U64},
    {"files", STORE_KEY_STR},         /* daemon/filestore.c (issue 26) */
    {"jobdata", STORE_KEY_U64},       /* livefiles.c: a job's inputs and outputs */
    {"elemfiles", STORE_KEY_U64_U32}, /* livefiles.c: a task's outputs copied back */
    {"orders", STORE_KEY_U64},        /* liveorder.c: cancels owed to clusters */
    {"fshist", STORE_KEY_U64},        /* livepurge.c: fairshare usage of purged jobs */
    {NULL},
};

static void on_request(void *arg, const struct wire_msg *m, const char *peer,
                       struct wire_buf *reply)
{
    live_dispatch(arg, m, peer, reply);
}

/* The cycle: the engine decides, the started elements become "starting". */
static void run_cycle(struct live *L)
{
    int64_t now = live_now(L);
    live_resv_apply(L);
    for (uint32_t i = 0; i < L->njobs; i++)
        if (L->jobs[i]->nfed < L->jobs[i]->ntasks)
            live_job_feed(L, L->jobs[i]);
    struct batch_cycle_stats st;
    L->engine_now = now;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (batch_cycle(L->eng, now, &st) < 0)
        log_warnx("the scheduling cycle stopped part way (out of memory)");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    L->cycle_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    L->cycle_s_total += L->cycle_s;
    L->n_backfilled += (uint64_t)(st.backfilled > 0 ? st.backfilled : 0);
    L->cycles++;
    L->want_cycle = false;
    L->last_cycle = loop_now_ms();
    L->next_wakeup = batch_next_wakeup(L->eng);
    const struct batch_released *rel;
    size_t nrel = batch_cycle_released(L->eng, &rel);
    for (size_t i = 0; i < nrel; i++) { /* [grid] local_wait_bound (issue 25) */
        struct lresv *v = live_resv_find(L, rel[i].name);
        if (!v)
            continue;
        log_info("reservation %s of job %" PRIu64 " released: a local job has waited longer "
                 "than grid.local_wait_bound; the job stays queued",
                 v->name, v->job);
        v->in_engine = false; /* the engine released it already */
        live_resv_drop(L, v);
        L->grid_released++;
    }
    live_resv_moved(L);
    const uint64_t *ids;
    size_t n = batch_cycle_started(L->eng, &ids);
    for (size_t i = 0; i < n; i++) {
        struct ljob *j;
        struct lelem *el = live_elem_find(L, ids[i], &j);
        struct batch_job_info bi;
        if (!el || batch_job_info(L->eng, ids[i], &bi) < 0 || bi.nnodes < 1)
            continue;
        /* hosts: one rank per engine node (a node is one core of a host) */
        size_t cap = (size_t)bi.nnodes * (BATCH_NAME_MAX + 1) + 1, len = 0;
        char *h = malloc(cap);
        int cl = -1;
        if (!h)
            continue;
        h[0] = '\0';
        for (int32_t k = 0; k < bi.nnodes; k++) {
            int c;
            const char *name = live_slot_host(L, bi.nodes[k], &c);
            len += (size_t)snprintf(h + len, cap - len, "%s%s", k ? "," : "", name);
            if (cl < 0)
                cl = c;
        }
        uint32_t e = (uint32_t)(ids[i] & ((1u << LIVE_ELEM_BITS) - 1));
        free(el->hosts);
        el->hosts = h;
        el->cl = (int8_t)cl;
        el->start = el->decided = now;
        el->cjob = 0;
        live_elem_reason(L, j, e, NULL);
        live_elem_set(L, j, e, EL_STARTING);
        live_clu_start(L, j, e);
        L->starts++;
    }
    if (n)
        log_debug("cycle at %lld: %zu started, %d pending", (long long)now, n, st.pending);
}

/* Stores the turn's changes, then sends its replies and starts (or drops them). */
static int commit_turn(struct live *L)
{
    if (L->meta_dirty) {
        if (record_put_u64(L->store, L->t_meta, "next_job", L->next_id) < 0)
            return -1;
        L->meta_dirty = false;
    }
    if (live_acct_save_dirty(L) < 0 || live_save_dirty(L) < 0 || filestore_sync(L->files) < 0 ||
        store_commit(L->store) < 0) {
        int e = errno;
        log_warnx("commit failed: %s", store_error_text(e));
        errno = e; /* the daemon tells the requesters */
        live_out_flush(L, false);
        return -1;
    }
    live_out_flush(L, true);
    return 0;
}

static void on_wake(struct loop *l, void *arg)
{
    (void)l;
    ((struct live *)arg)->wake_timer = 0; /* the commit after this turn runs the cycle */
}

/* Runs the cycle if one is due. A cycle in the millisecond of the last one waits for
 * the next (a one-shot timer wakes the loop): the engine's instants, like the
 * simulator's event times, carry at most one cycle each (see live_now). Returns true
 * when the cycle waits: the turn's instant, already given to the engine with this
 * turn's changes, is then kept for the turns until it runs. */
static bool maybe_cycle(struct live *L)
{
    int64_t mono = loop_now_ms(), wall = wall_now_ms();
    if (!(L->want_cycle || mono - L->last_cycle >= L->cfg.live.max_interval_s * 1000 ||
          (L->next_wakeup != BATCH_NEVER && wall >= L->next_wakeup)))
        return false;
    if (live_now(L) == wall + 1) { /* wall == the last cycle's ms (not a clock step back) */
        L->want_cycle = true;
        if (!L->wake_timer)
            L->wake_timer = loop_timer(L->loop, 1, 0, on_wake, L);
        if (L->wake_timer > 0)
            return true;
        L->wake_timer = 0; /* no timer: run it now, 1 ms early, rather than late */
    }
    run_cycle(L);
    return false;
}

static int on_commit(void *arg)
{
    struct live *L = arg;
    if (L->turn_failed) {
        L->turn_now = 0;
        return -1;
    }
    live_dep_step(L);   /* issue 27: waiting jobs whose dependency holds now, or never can */
    live_purge_step(L); /* a bounded batch of purged jobs' element records */
    L->flex_hint.valid = false; /* the cycle and the turn's other changes may free cores */
    bool waits = maybe_cycle(L);
    int rc = commit_turn(L);
    if (rc == 0 && L->endwait) /* JOB_WAITs one of whose jobs ended, answered (issue 28) */
        endwait_after_commit(L->endwait, L->daemon);
    if (!waits)
        L->turn_now = 0; /* the next turn takes a new instant */
    return rc;
}

static int load_all(struct live *L);

/* A held JOB_WAIT past its wait_ms, or replaced by the same peer's next one. */
static void on_expire(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id,
                      struct wire_buf *reply)
{
    struct live *L = arg;
    (void)kind;
    if (!L->endwait || !endwait_expire(L->endwait, handle, req_id, reply))
        wire_error_msg(reply, req_id, WE_STATE, "the request was not held: ask again");
}

static void on_reload(void *arg)
{
    struct live *L = arg;
    store_discard(L->store);
    L->turn_now = 0;
    live_out_flush(L, false);
    live_clusters_close(L);
    live_stage_free(L);
    live_files_close(L);
    live_jobs_free(L);
    live_purge_free(L);
    batch_engine_destroy(&L->eng);
    char err[256];
    if (load_all(L) < 0 || live_clusters_open(L, err, sizeof err) < 0)
        fatalx("cannot reload the state after a failed commit; restart the batch role");
    L->turn_failed = false;
}

static void on_tick(struct loop *l, void *arg)
{
    (void)l;
    live_clu_tick(arg);
}

static void on_acct(struct loop *l, void *arg)
{
    (void)l;
    live_acct_tick(arg);
    live_files_sweep(arg); /* issue 26: files no job names, hourly */
    live_purge_tick(arg);  /* jobs.retention_s */
}

/* Reads or makes the incarnation and the next job id. */
static int load_meta(struct live *L)
{
    void *v;
    size_t vl;
    int rc = store_get(L->store, L->t_meta, "inc", 3, &v, &vl);
    if (rc == 0 && vl < sizeof L->inc) {
        memcpy(L->inc, v, vl);
        L->inc[vl] = '\0';
        free(v);
    } else {
        if (rc == 0)
            free(v);
        uint8_t raw[16];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
            return -1;
        for (int i = 0; i < 16; i++)
            snprintf(L->inc + 2 * i, 3, "%02x", raw[i]);
        if (store_put(L->store, L->t_meta, "inc", 3, L->inc, strlen(L->inc)) < 0)
            return -1;
    }
    uint64_t next = 1; /* absent (a new store) or unreadable: ids from 1, then load_job */
    if (record_get_u64(L->store, L->t_meta, "next_job", &next) != 0 || next < 1)
        next = 1;
    L->next_id = next;
    return 0;
}

static int load_all(struct live *L)
{
    struct batch_config ec;
    if (batch_config_copy(&ec, &L->cfg.eng) < 0)
        return -1;
    ec.unit_per_s = 1000;
    ec.overrun_grace = 1000;
    L->eng = batch_engine_new(&ec);
    batch_config_clear(&ec);
    if (!L->eng) {
        log_warnx("the scheduler configuration is not valid");
        return -1;
    }
    L->nslots = 0;
    if (load_meta(L) < 0 || live_purge_load(L) < 0 || live_load(L) < 0 || live_files_load(L) < 0 ||
        live_resv_load(L) < 0 || live_order_load(L) < 0)
        return -1;
    L->want_cycle = true;
    return 0;
}

static int live_open(struct live *L)
{
    char err[512];
    const struct batch_live_cfg *c = &L->cfg.live;
    if (fs_mkdir_p(c->state_dir) < 0) {
        log_warn("cannot create state_dir %s", c->state_dir);
        return -1;
    }
    if ((L->lockfd = daemon_lock_state_dir(c->state_dir, err, sizeof err)) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        return -1;
    }
    struct store_opts so = {"batch", live_tables, (enum store_sync)c->sync, (size_t)c->map_mb << 20,
                            false};
    if (!(L->store = store_open(c->state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    L->t_meta = store_table(L->store, "meta");
    L->t_jobs = store_table(L->store, "jobs");
    L->t_elems = store_table(L->store, "elems");
    L->t_resv = store_table(L->store, "resv");
    L->t_acct = store_table(L->store, ACCT_TABLE);
    L->t_files = store_table(L->store, "files");
    L->t_jobdata = store_table(L->store, "jobdata");
    L->t_elemfiles = store_table(L->store, "elemfiles");
    L->t_orders = store_table(L->store, "orders");
    L->t_fshist = store_table(L->store, "fshist");
    if (load_all(L) < 0 || store_commit(L->store) < 0) {
        if (loop_stopping())
            log_info("stopping while loading the state (nothing was changed)");
        else
            log_warnx("cannot load the state from %s", c->state_dir);
        return -1;
    }
    const char *fault = getenv("GRIDNODE_FAULT_COMMIT");
    if (fault)
        store_fault_commit(L->store, atoi(fault));
    log_info("state loaded: %u jobs, incarnation %s", L->njobs, L->inc);
    return 0;
}

int live_check_config(const struct batch_ini *cfg, char *err, size_t errlen)
{
    const struct batch_live_cfg *l = &cfg->live;
    if (config_check_log_level("batch.log_level", l->log_level, err, errlen) < 0 ||
        config_check_endpoint("batch.listen", l->listen, 1, err, errlen) < 0 ||
        httpstats_check("stats.http", l->stats_http, err, errlen) < 0)
        return -1;
    if (!l->clusters[0]) {
        snprintf(err, errlen,
                 "batch.clusters is empty: name at least one cluster manager "
                 "endpoint (e.g. --set batch.clusters=tcp://127.0.0.1:7300)");
        return -1;
    }
    char list[BATCH_LIVE_STR];
    snprintf(list, sizeof list, "%s", l->clusters);
    for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        char *eq = strchr(t, '=');
        if (config_check_endpoint("batch.clusters", eq ? eq + 1 : t, 0, err, errlen) < 0)
            return -1;
    }
    return 0;
}

int live_main(int argc, char **argv, struct batch_ini *cfg)
{
    (void)argc;
    (void)argv;
    static struct live L;
    char err[512];
    int rc = 1;
    L.lockfd = -1;
    L.default_cl = -1;
    if (batch_ini_copy(&L.cfg, cfg) < 0)
        return 1;
    if (live_check_config(&L.cfg, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: configuration error: %s\n", err);
        batch_ini_clear(&L.cfg);
        return 1;
    }
    log_init("batch", (enum log_level)log_level_parse(L.cfg.live.log_level));
    loop_signals();
    struct daemon_opts dop = {"batch", L.cfg.live.listen, L.cfg.live.state_dir,
                              L.cfg.live.peer_queue, .security = &L.cfg.live.sec};
    struct daemon_ops ops = {on_request, on_commit, on_reload, &L, on_expire};
    if (live_clusters_open(&L, err, sizeof err) < 0) { /* parses the list first */
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    live_clusters_close(&L);
    /* the HTTP port before the ZeroMQ one: "listening on" means everything is up */
    if (live_open(&L) < 0 || livestats_open(&L, err, sizeof err) < 0 || !(L.loop = loop_new()) ||
        !(L.endwait = endwait_new(&live_endwait_ops, &L)) ||
        !(L.daemon = daemon_new(L.loop, &dop, &ops)))
        goto out;
    if (live_clusters_open(&L, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    loop_timer(L.loop, 100, 1, on_tick, &L);
    loop_timer(L.loop, 1000, 1, on_acct, &L); /* accounting retention (liveacct.c) */
    statspage_timer(L.stats, L.loop);
    statspage_write(L.stats);
    L.turn_now = 0; /* start-up's instant is not the first turn's */
    rc = loop_run(L.loop) < 0 ? 1 : 0;
    statspage_write(L.stats);
    log_info("stopping");
out:
    livestats_close(&L); /* before the state it was published from goes */
    live_clusters_close(&L);
    if (L.store)
        store_commit(L.store);
    live_stage_free(&L);
    live_files_close(&L);
    store_close(&L.store);
    live_jobs_free(&L);
    live_purge_free(&L);
    live_resv_free(&L);
    live_order_free(&L);
    batch_engine_destroy(&L.eng);
    daemon_destroy(&L.daemon);
    endwait_free(&L.endwait);
    loop_destroy(&L.loop);
    free(L.slot_cl);
    free(L.slot_host);
    batch_ini_clear(&L.cfg);
    if (L.lockfd >= 0)
        close(L.lockfd);
    return rc && loop_stopping() && !L.loop ? 0 : rc; /* SIGTERM during start-up */
}

/*
 * live_sched.c - the multi-project client's engine pass (live.h), what the emulator
 * does in simulated time: engine_tick (time, REC), a checkpoint of every running task
 * at its current run time (a stopped process loses nothing, so any instant is a
 * checkpoint), engine_schedule (start, resume with SIGCONT, or suspend with SIGSTOP of
 * the task's process group), and engine_poll for the next scheduler RPC or master
 * fetch (live_rpc.c). vcl_pump is one loop turn's share of the driver: the RPC's
 * timeouts, the passes asked for, heartbeats, PSYNC and the periodic save. Also the
 * engine's parameters from the [sched] keys, for a volunteer of projects or a host of
 * one cluster.
 */
#include "roles/client/live/live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/loop.h"

#define SINGLE_POLL_S 0.05 /* sched.poll_s of a single-cluster host (-1) */

/* ---- the single-cluster case (a config with only client.server) ---- */

/* A [sched] key left at -1 takes the value for the kind of client this is. */
static double pick(double v, double projects, double single, bool is_single)
{
    return v >= 0 ? v : is_single ? single : projects;
}

/*
 * The engine's parameters from the [sched] keys. Left at -1 ("automatic") they are
 * BOINC's defaults for a volunteer attached to projects, and for a host of one cluster
 * (only client.server) what the single-cluster client did: results reported at once,
 * work asked for whenever a slot frees, a buffer covering poll_s and the measured round
 * trip (min_buf is recomputed as the round trips are measured, see buffer_update), the
 * [rpc] backoff, and an empty reply waited out for the cluster's wait_s (on_tasks in
 * live_rpc.c). docs/client-scheduling.md 2b, "The single-cluster client".
 */
void vcl_engine_config(const struct client_cfg *cfg, bool single, struct engine_config *c)
{
    engine_config_defaults(c);
    c->policy = (enum engine_policy)cfg->policy;
    c->fetch = (enum engine_fetch)cfg->fetch;
    c->time_slice = cfg->time_slice;
    c->poll_period = pick(cfg->poll_s, 60, SINGLE_POLL_S, single);
    if (!(c->poll_period > 0))
        c->poll_period = 0.01;
    c->min_buf = pick(cfg->min_buf, 8640, c->poll_period, single);
    c->additional_buf = pick(cfg->additional_buf, 43200, 0, single);
    c->rpc_backoff_min = pick(cfg->rpc_backoff_min, 60, cfg->backoff_min_s, single);
    c->rpc_backoff_max = pick(cfg->rpc_backoff_max, 14400, cfg->backoff_max_s, single);
    c->rsc_backoff_min = pick(cfg->rsc_backoff_min, 600, 1, single);
    c->rsc_backoff_max = pick(cfg->rsc_backoff_max, 86400, 30, single);
    c->master_fetch_period = (int)cfg->master_fetch_period;
    c->report_cushion = cfg->report_cushion;
    c->report_max_delay = pick(cfg->report_max_delay, 86400, 0, single);
    if (c->rpc_backoff_max < c->rpc_backoff_min)
        c->rpc_backoff_max = c->rpc_backoff_min;
    if (c->rsc_backoff_max < c->rsc_backoff_min)
        c->rsc_backoff_max = c->rsc_backoff_min;
}

/*
 * The work buffer of a single-cluster host with an automatic min_buf: what its slots
 * consume between two work requests (poll_s) and while a request is on its way and back
 * (two measured round trips and their variation, netopts_rtt_cover_s), so that no slot
 * waits a round trip for its next task. The engine's shortfall then asks for that much
 * work in seconds (the cluster's est_s corrected by the DCF); client.prefetch_max caps
 * the count (build_result, live_rpc.c).
 */
static void buffer_update(struct live *l)
{
    if (!l->single || l->cfg->min_buf >= 0 || l->e->nprojects < 1)
        return;
    const struct lproj *lp = &l->proj[0];
    double cover = 0;
    for (int k = 0; k < lp->nsocks; k++) {
        const struct netopts_rtt *r = lp->socks[k] ? &lp->socks[k]->link.rtt : NULL;
        if (r && r->samples)
            cover = fmax(cover, netopts_rtt_cover_s(r));
    }
    double want = l->e->cfg.poll_period + cover;
    if (fabs(want - l->e->cfg.min_buf) > 0.1 * l->e->cfg.min_buf) {
        l->e->cfg.min_buf = l->ecfg.min_buf = want;
        l->e->rr_dirty = 1;
    }
}

/* ---- the engine's decisions ---- */

static void apply_schedule(struct live *l, const struct engine_sched *s)
{
    /* suspend first: the instances they free are the ones the starts take */
    for (size_t k = 0; k < s->npreempt; k++) {
        struct ltask *t = vcl_task_of(l, s->preempt[k]);
        if (t && t->state == LT_RUNNING)
            vcl_task_suspend(l, t);
    }
    size_t nstart = s->nstart;
    size_t *start = nstart ? malloc(nstart * sizeof *start) : NULL;
    if (nstart && !start)
        return;
    if (nstart) /* a decision may only preempt (parallel ranks took instances) */
        memcpy(start, s->start, nstart * sizeof *start); /* vcl_task_start may call the engine */
    uint64_t *ids = nstart ? malloc(nstart * sizeof *ids) : NULL;
    for (size_t k = 0; ids && k < nstart; k++)
        ids[k] = l->e->tasks[start[k]].id;
    for (size_t k = 0; ids && k < nstart; k++) {
        long i = engine_task_find(l->e, ids[k]);
        if (i < 0)
            continue;
        struct ltask *t = vcl_task_of(l, (size_t)i);
        if (t->state == LT_STOPPED)
            vcl_task_resume(l, t);
        else if (t->state == LT_QUEUED)
            vcl_task_start(l, t);
    }
    free(ids);
    free(start);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One pass: time, checkpoints, schedule, next RPC. */
static void step(struct live *l)
{
    double c0 = cpu_now();
    double now = vcl_now();
    struct engine *e = l->e;
    vcl_capacity(l); /* parallel ranks' cores and node health, live_par.c */
    engine_tick(e, now, 1);
    for (size_t k = 0; k < e->nrunning; k++) {
        struct engine_task *et = &e->tasks[e->running[k]];
        engine_task_checkpoint(e, e->running[k], et->elapsed);
    }
    const struct engine_sched *s = engine_schedule(e, now);
    l->engine_calls++;
    l->sched_cpu_s += cpu_now() - c0;
    if (s && s->changed)
        apply_schedule(l, s);
    c0 = cpu_now();
    buffer_update(l);
    if (!l->rpc.active) {
        struct engine_action act;
        engine_poll(l->e, vcl_now(), &act);
        if (act.kind != ENGINE_ACT_NONE)
            vcl_rpc_start(l, &act);
    }
    l->sched_cpu_s += cpu_now() - c0;
}

/* One loop turn of the driver, before its commit (the daemon's before-sleep hook). */
void vcl_pump(struct live *l)
{
    int64_t now = loop_now_ms();
    vcl_stage_pump(l); /* issue 26: inputs fetched, outputs uploaded */
    vcl_rpc_pump(l);
    for (int k = 0; k < 4 && l->kicked; k++) { /* a decision may lead to another */
        l->kicked = false;
        step(l);
    }
    vcl_heartbeats(l);
    vcl_par_pump(l);
    if (now - l->last_save_ms >= 10000) { /* REC and backoffs, at most 10 s old */
        l->last_save_ms = now;
        for (int p = 0; p < l->e->nprojects; p++)
            vcl_project_save(l, p);
        vcl_commit(l);
    }
}

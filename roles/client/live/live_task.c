/*
 * live_task.c - the multi-project client's tasks on this host (live.h): the driver's
 * list beside the engine's, their processes (start with the GPU instances they take,
 * suspend with SIGSTOP, resume with SIGCONT, the wall-clock limit over running time
 * only), their end (the result built, the run-time estimate and the duration
 * correction factor learned) and the "finished" lines once the result is durable.
 */
#include "roles/client/live/live.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/client/live/ckpt.h"
#include "roles/client/live/sandbox.h"
#include "roles/client/live/stage.h"

double vcl_task_estimate(const struct live *l, const struct ltask *t)
{
    const struct lproj *lp = &l->proj[t->project];
    if (t->est_s > 0) {
        int pt = engine_ptype_find(l->e, t->ptype);
        double f = pt >= 0 ? lp->dcf[pt] : 0;
        return f > 0 ? t->est_s * f : t->est_s;
    }
    return lp->est_avg > 0 ? lp->est_avg : l->cfg->default_est_s;
}

/* Adds t to the driver's list and to the engine (QUEUED, or DONE with a result). */
int vcl_task_adopt(struct live *l, struct ltask *t)
{
    if (l->ntasks == l->captasks) {
        size_t cap = l->captasks ? l->captasks * 2 : 64;
        struct ltask **n = realloc(l->tasks, cap * sizeof *n);
        if (!n)
            return -1;
        l->tasks = n;
        l->captasks = cap;
    }
    int pt = engine_ptype_find(l->e, t->ptype);
    struct engine_new_task nt = {t->id,
                                 (uint64_t)(uintptr_t)t,
                                 pt < 0 ? 0 : pt,
                                 pt > 0 ? (double)t->gpus : 1.0,
                                 vcl_task_estimate(l, t),
                                 t->deadline};
    double now = vcl_now();
    long i = engine_task_add(l->e, now, t->project, &nt);
    if (i < 0)
        return -1;
    l->e->tasks[i].received = t->received;
    if (t->bad[0] && !t->result) {
        /* nothing to run: its failure is its result (built at the first tick) */
    }
    if (t->result) {
        t->state = LT_DONE;
        /* issue 26: kept outputs are (again) made sure of at the cluster first */
        t->uploading = t->files && t->files->nout > 0;
        if (!t->uploading)
            engine_task_done(l->e, now, (size_t)i);
    }
    l->tasks[l->ntasks++] = t;
    return 0;
}

void vcl_task_drop(struct live *l, struct ltask *t)
{
    for (size_t i = 0; i < l->ntasks; i++)
        if (l->tasks[i] == t) {
            l->tasks[i] = l->tasks[--l->ntasks];
            break;
        }
    if (t->run.pid > 0 && !t->run.reaped) {
        runner_signal(&t->run, SIGKILL);
        runner_signal(&t->run, SIGCONT);
    }
    if (t->run.out.fd >= 0)
        loop_remove_fd(l->loop, t->run.out.fd);
    if (t->run.err.fd >= 0)
        loop_remove_fd(l->loop, t->run.err.fd);
    loop_timer_cancel(l->loop, t->limit_timer);
    loop_timer_cancel(l->loop, t->kill_timer);
    int pt = engine_ptype_find(l->e, t->ptype);
    for (int k = 0; k < t->ngpu && pt > 0; k++)
        l->gpu_busy[pt][t->gpu[k]] = 0;
    vcl_task_free(t);
}

/* Drops and forgets every task of project p (a reset cluster, LEAVE, detach); with
   in_engine, each is taken out of the engine too (detach rebuilds the engine instead).
   The number dropped. */
size_t vcl_project_drop_tasks(struct live *l, int p, bool in_engine)
{
    size_t n = 0;
    for (size_t i = 0; i < l->ntasks;) {
        struct ltask *t = l->tasks[i];
        if (t->project != p) {
            i++;
            continue;
        }
        long ei = in_engine ? vcl_engine_index(l, t) : -1;
        if (ei >= 0)
            engine_task_remove(l->e, (size_t)ei);
        vcl_task_forget(l, t);
        vcl_task_drop(l, t); /* the last task takes index i */
        n++;
    }
    return n;
}

/* ---- running ---- */

static int64_t task_run_ms(const struct ltask *t, int64_t now)
{
    return t->run_ms + (t->episode_ms ? now - t->episode_ms : 0);
}

static void release_gpus(struct live *l, struct ltask *t)
{
    int pt = engine_ptype_find(l->e, t->ptype);
    for (int k = 0; k < t->ngpu && pt > 0; k++)
        l->gpu_busy[pt][t->gpu[k]] = 0;
    t->ngpu = 0;
}

/*
 * The duration correction factor of t's (project, type) learns from t's run time ratio
 * r = wall / est_s: the first sample is taken as is, a larger one at once (an
 * underestimate risks deadlines), a smaller one by a 0.2 moving average (BOINC's DCF
 * rises fast and falls slowly; 0.5 on a host of one cluster). When it moves by more than 5 %, the
 * estimates of the project's other tasks of that type are corrected in the engine.
 */
static void dcf_update(struct live *l, const struct ltask *t, double r)
{
    struct lproj *lp = &l->proj[t->project];
    int pt = engine_ptype_find(l->e, t->ptype);
    if (pt < 0 || !isfinite(r) || r <= 0)
        return;
    double old = lp->dcf[pt];
    /* a host of one cluster comes down faster, so that its work fetch follows a job of
       short tasks after long ones within a few of them (issue 28 3b), not dozens */
    double down = l->single ? 0.5 : 0.2;
    lp->dcf[pt] = old <= 0 || r > old ? r : (1 - down) * old + down * r;
    if (old > 0 && fabs(lp->dcf[pt] - old) <= 0.05 * old)
        return;
    /* the engine's typical task of this (project, type), used for its deadline room,
       was learned from uncorrected estimates too */
    l->e->projects[t->project].rsc[pt].job_work *= lp->dcf[pt] / (old > 0 ? old : 1);
    for (size_t k = 0; k < l->ntasks; k++) {
        const struct ltask *o = l->tasks[k];
        if (o == t || o->project != t->project || o->est_s <= 0 || o->state == LT_DONE ||
            strcmp(o->ptype, t->ptype))
            continue;
        long i = vcl_engine_index(l, o);
        if (i >= 0)
            l->e->tasks[i].est_duration = vcl_task_estimate(l, o);
    }
    l->e->rr_dirty = l->e->sched_dirty = 1;
}

/*
 * The "finished" lines of the tasks whose results a commit has just made durable: the
 * log says a task finished only once a kill -9 can no longer lose its result (results
 * are committed together, once per loop turn or before an RPC, not one fsync each).
 */
void vcl_log_finished(struct live *l)
{
    for (size_t i = 0; i < l->ntasks && l->nlog_pending; i++) {
        struct ltask *t = l->tasks[i];
        if (!t->log_pending)
            continue;
        t->log_pending = false;
        l->nlog_pending--;
        log_info("task %llu.%u finished: %s (%s, %.2f s)", (unsigned long long)t->job, t->idx,
                 t->bad[0]          ? t->bad
                 : t->run.error[0]  ? t->run.error
                 : t->run.timed_out ? "wall-clock limit"
                                    : "ran",
                 l->e->projects[t->project].name, (double)t->run_ms / 1000.0);
    }
    l->nlog_pending = 0; /* a task dropped before its commit is not logged */
}

/* The process ended (or never started): build the result, hand it to the engine. */
static void task_finish(struct live *l, struct ltask *t)
{
    struct run *r = &t->run;
    struct wire_buf wb;
    int64_t now = loop_now_ms();
    bool err = r->error[0] != '\0', bad = t->bad[0] != '\0';
    double wall = (double)task_run_ms(t, now) / 1000.0;
    t->run_ms = task_run_ms(t, now);
    t->episode_ms = 0;
    loop_timer_cancel(l->loop, t->limit_timer);
    loop_timer_cancel(l->loop, t->kill_timer);
    t->limit_timer = t->kill_timer = 0;
    char note[600] = "", cerr[300] = "", outbox[CONFIG_STR_MAX + 16];
    snprintf(outbox, sizeof outbox, "%s/outbox", l->cfg->state_dir);
    if (t->files && t->files->nglobs && !bad && !err && r->workdir[0] &&
        stage_collect(t->files, r->workdir, outbox, note, sizeof note, cerr, sizeof cerr) < 0) {
        snprintf(r->error, sizeof r->error, "%s", cerr); /* this host's fault: re-issued */
        err = true;
    }
    if (t->files && t->files->ck_note[0]) { /* issue 26: a checkpoint not uploaded */
        size_t nl = strlen(note);
        snprintf(note + nl, sizeof note - nl, "%s%s", nl ? "; " : "", t->files->ck_note);
        t->files->collected = true;
    }
    /* issue 26: a task that ran to its end (a final result, ok or failed) needs its
       checkpoint no more; one that ended with a node-side error is issued again, maybe
       here: its checkpoint is kept for that run */
    if (err && r->workdir[0])
        ckpt_keep(l->cfg->state_dir, r->workdir, t->job, t->idx, t->issue);
    else
        ckpt_drop(l->cfg->state_dir, r->workdir, t->job, t->idx);
    wire_buf_init(&wb);
    /* a task this host cannot run (a GPU type it lacks) is a node-side error; a malformed
       task (empty argv) is the task's own fault: a final failed result */
    runner_pack_result(r, t->job, t->idx, t->issue, wall, bad && t->bad_host ? t->bad : NULL,
                       bad && !t->bad_host ? t->bad : NULL, &wb);
    free(t->result);
    t->result = malloc(wb.sb.size);
    if (t->result) {
        memcpy(t->result, wb.sb.data, wb.sb.size);
        t->rlen = wb.sb.size;
    }
    wire_buf_free(&wb);
    /* issue 26: the outputs it kept go with its result, uploaded before it is reported */
    t->uploading = false;
    if (t->files && t->files->collected && !err && !bad &&
        stage_result_files(&t->result, &t->rlen, t->files, note) == 0)
        t->uploading = t->files->nout > 0;
    if (r->out.fd >= 0)
        loop_remove_fd(l->loop, r->out.fd);
    if (r->err.fd >= 0)
        loop_remove_fd(l->loop, r->err.fd);
    runner_cleanup(r);
    release_gpus(l, t);
    t->state = LT_DONE;
    l->proj[t->project].run_s += wall;
    if (!bad && !err && wall > 0) { /* the project's own run-time estimate */
        struct lproj *lp = &l->proj[t->project];
        lp->est_avg = lp->est_avg > 0 ? 0.8 * lp->est_avg + 0.2 * wall : wall;
        lp->last_s = wall;
        if (t->est_s > 0 && !r->timed_out)
            dcf_update(l, t, wall / t->est_s);
    }
    long i = vcl_engine_index(l, t);
    if (i >= 0) {
        l->e->tasks[i].elapsed = wall;
        if (!t->uploading) /* else once its outputs are at the cluster (live_stage.c) */
            engine_task_done(l->e, vcl_now(), (size_t)i);
    }
    vcl_task_save(l, t);
    l->unsaved = true;     /* committed before it is reported (send_rpc_stage), or at the end
                              of this loop turn with the rest: one fsync for many tasks */
    t->log_pending = true; /* logged once durable: vcl_log_finished */
    l->nlog_pending++;
    vcl_kick(l);
}

static void check_finished(struct live *l, struct ltask *t)
{
    if ((t->state != LT_RUNNING && t->state != LT_STOPPED) || !runner_finished(&t->run))
        return;
    if (t->abandon) {
        long i = vcl_engine_index(l, t);
        if (i >= 0)
            engine_task_remove(l->e, (size_t)i);
        log_info("task %llu.%u stopped (cancelled by the server)", (unsigned long long)t->job,
                 t->idx);
        vcl_task_drop(l, t);
        vcl_kick(l);
        return;
    }
    task_finish(l, t);
}

/* The node is sick: every task not started yet goes back as a node-side error. */
void vcl_hand_back_queued(struct live *l)
{
    for (size_t i = 0; i < l->ntasks; i++) {
        struct ltask *t = l->tasks[i];
        if (t->state != LT_QUEUED || t->result || t->abandon)
            continue;
        snprintf(t->run.error, sizeof t->run.error, "node unhealthy: %.200s", l->health.sick);
        task_finish(l, t);
    }
}

static void read_pipe(struct live *l, struct ltask *t, int fd)
{
    if (fd < 0)
        return;
    runner_read(&t->run, fd);
    if (fd != t->run.out.fd && fd != t->run.err.fd)
        loop_remove_fd(l->loop, fd);
}

static void on_out(struct loop *lp, void *arg)
{
    struct ltask *t = arg;
    (void)lp;
    read_pipe(t->l, t, t->run.out.fd);
    check_finished(t->l, t);
}

static void on_err(struct loop *lp, void *arg)
{
    struct ltask *t = arg;
    (void)lp;
    read_pipe(t->l, t, t->run.err.fd);
    check_finished(t->l, t);
}

static void on_kill(struct loop *lp, void *arg)
{
    struct ltask *t = arg;
    (void)lp;
    t->kill_timer = 0;
    runner_signal(&t->run, SIGKILL);
    runner_signal(&t->run, SIGCONT);
}

/* The wall-clock limit counts running time only: the timer is armed while it runs. */
static void on_limit(struct loop *lp, void *arg)
{
    struct ltask *t = arg;
    t->limit_timer = 0;
    t->limit_left_ms = 0;
    t->run.timed_out = true;
    log_info("task %llu.%u over its %u s limit: stopping it", (unsigned long long)t->job, t->idx,
             t->limit_s);
    runner_signal(&t->run, SIGTERM);
    runner_signal(&t->run, SIGCONT);
    t->kill_timer = loop_timer(lp, (int64_t)(t->l->cfg->kill_grace_s * 1000), 0, on_kill, t);
}

/* Takes free instances of the task's GPU type; 0, or -1 if too few are free. */
static int take_gpus(struct live *l, struct ltask *t, int pt)
{
    int need = (int)t->gpus, n = l->e->ptypes[pt].ninstances;
    t->ngpu = 0;
    for (int k = 0; k < n && t->ngpu < need; k++)
        if (!l->gpu_busy[pt][k])
            t->gpu[t->ngpu++] = k;
    if (t->ngpu < need) {
        t->ngpu = 0;
        return -1;
    }
    for (int k = 0; k < t->ngpu; k++)
        l->gpu_busy[pt][t->gpu[k]] = 1;
    return 0;
}

/* runner_env.prepare (issue 26): t's inputs from the cache into its fresh directory, hard
 * links when the task runs under a slot uid (it cannot write them), else copies; and its
 * checkpoint directory: the one kept here, or the cluster's latest (ckpt.h). */
static int place_inputs(void *arg, const char *workdir, char *err, size_t n)
{
    struct ltask *t = arg;
    uint32_t issue;
    bool local = t->files && t->files->nck
                     ? t->files->ck_local
                     : ckpt_local(t->l->cfg->state_dir, t->job, t->idx, &issue) == 0;
    if (t->files && stage_place(t->l->cache, t->files, workdir, sandbox_slot_uids(), err, n) < 0)
        return -1;
    return ckpt_place(t->l->cfg->state_dir, t->l->cache, t->files, workdir, t->job, t->idx, local,
                      err, n);
}

static const char *const gpu_env[] = {"CUDA_VISIBLE_DEVICES",
                                      "GPU_DEVICE_ORDINAL",
                                      "ROCR_VISIBLE_DEVICES",
                                      "GRIDNODE_GPU",
                                      "GRIDNODE_GPU_TYPE",
                                      "GRIDNODE_CHECKPOINT_DIR",
                                      NULL};

/*
 * Starts t's process. A GPU task gets its instances in its environment, the way BOINC
 * passes the device to an application: CUDA_VISIBLE_DEVICES (NVIDIA), GPU_DEVICE_ORDINAL
 * and ROCR_VISIBLE_DEVICES (AMD), GRIDNODE_GPU (the list, any vendor) and
 * GRIDNODE_GPU_TYPE. A CPU task sees none of them. The environment is set around the
 * fork only (one thread).
 */
void vcl_task_start(struct live *l, struct ltask *t)
{
    char wd[CONFIG_STR_MAX + 64], list[LIVE_MAX_GPU * 4] = "";
    char *saved[8] = {0};
    int64_t now = loop_now_ms();
    snprintf(wd, sizeof wd, "%s/work/%llu", l->cfg->state_dir, (unsigned long long)t->id);
    t->state = LT_RUNNING;
    t->episode_ms = now;
    if (t->bad[0]) {
        log_warnx("task %llu.%u: %s", (unsigned long long)t->job, t->idx, t->bad);
        task_finish(l, t);
        return;
    }
    if (t->files && (t->files->nin || t->files->nck) && !t->staged) { /* issue 26: inputs */
        t->state = LT_QUEUED;
        t->episode_ms = 0;
        return; /* live_stage.c starts it once they are in the cache */
    }
    if (l->health.sick[0]) { /* hand it back at once: a healthy node should run it */
        snprintf(t->run.error, sizeof t->run.error, "node unhealthy: %.200s", l->health.sick);
        task_finish(l, t);
        return;
    }
    int pt = engine_ptype_find(l->e, t->ptype);
    if (pt > 0 && take_gpus(l, t, pt) < 0) { /* cannot happen: the engine counts instances */
        log_warnx("task %llu.%u: no free '%s' GPU; it waits", (unsigned long long)t->job, t->idx,
                  t->ptype);
        t->state = LT_QUEUED;
        t->episode_ms = 0;
        return;
    }
    for (int k = 0; k < t->ngpu; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", k ? "," : "", t->gpu[k]);
    char ckdir[PATH_MAX + 64], abs[PATH_MAX];
    snprintf(ckdir, sizeof ckdir, "%s/work/%llu/" CKPT_DIRNAME, /* issue 26: ckpt.h */
             realpath(l->cfg->state_dir, abs) ? abs : l->cfg->state_dir, (unsigned long long)t->id);
    for (int k = 0; gpu_env[k]; k++) {
        const char *v = getenv(gpu_env[k]);
        saved[k] = v ? strdup(v) : NULL;
        if (k == 5)
            setenv(gpu_env[k], ckdir, 1);
        else if (t->ngpu == 0)
            unsetenv(gpu_env[k]);
        else
            setenv(gpu_env[k], k == 4 ? t->ptype : list, 1);
    }
    /* issue 26: a checkpoint a killed client left in wd is kept first (wd is emptied) */
    ckpt_keep(l->cfg->state_dir, wd, t->job, t->idx, t->issue);
    t->renv.prepare = place_inputs;
    t->renv.prepare_arg = t;
    int rc = runner_start_env(&t->run, t->argv, t->shell, t->in, t->inlen, wd,
                              (size_t)l->cfg->max_output_kb * 1024, &t->renv);
    for (int k = 0; gpu_env[k]; k++) {
        if (saved[k])
            setenv(gpu_env[k], saved[k], 1);
        else
            unsetenv(gpu_env[k]);
        free(saved[k]);
    }
    if (rc < 0) {
        log_warnx("task %llu.%u: %s", (unsigned long long)t->job, t->idx, t->run.error);
        if (t->run.host_fault)
            vcl_sick(l, t->run.error);
        t->run.reaped = false;
        task_finish(l, t);
        return;
    }
    loop_add_fd(l->loop, t->run.out.fd, on_out, t);
    loop_add_fd(l->loop, t->run.err.fd, on_err, t);
    t->limit_timer =
        loop_timer(l->loop, t->limit_left_ms > 0 ? t->limit_left_ms : 1, 0, on_limit, t);
    log_debug("task %llu.%u of %s started: pid %d%s%s", (unsigned long long)t->job, t->idx,
              l->e->projects[t->project].name, (int)t->run.pid, t->ngpu ? ", GPU " : "", list);
}

/* Suspends a running task: SIGSTOP to its process group; run time and limit kept. */
void vcl_task_suspend(struct live *l, struct ltask *t)
{
    int64_t now = loop_now_ms();
    if (t->state != LT_RUNNING)
        return;
    runner_signal(&t->run, SIGSTOP);
    t->run_ms = task_run_ms(t, now);
    t->limit_left_ms -= now - t->episode_ms;
    t->episode_ms = 0;
    loop_timer_cancel(l->loop, t->limit_timer);
    t->limit_timer = 0;
    t->state = LT_STOPPED;
    log_debug("task %llu.%u of %s suspended after %.1f s", (unsigned long long)t->job, t->idx,
              l->e->projects[t->project].name, (double)t->run_ms / 1000);
}

void vcl_task_resume(struct live *l, struct ltask *t)
{
    t->state = LT_RUNNING;
    t->episode_ms = loop_now_ms();
    runner_signal(&t->run, SIGCONT);
    t->limit_timer =
        loop_timer(l->loop, t->limit_left_ms > 0 ? t->limit_left_ms : 1, 0, on_limit, t);
    log_debug("task %llu.%u of %s resumed", (unsigned long long)t->job, t->idx,
              l->e->projects[t->project].name);
}

/* A child exited: true if it was the process of one of the tasks (see vcl_par_reaped). */
bool vcl_task_reaped(struct live *l, pid_t pid, int status, const struct rusage *ru)
{
    for (size_t i = 0; i < l->ntasks; i++) {
        struct ltask *t = l->tasks[i];
        if ((t->state == LT_RUNNING || t->state == LT_STOPPED) && t->run.pid == pid) {
            runner_reaped(&t->run, status, ru);
            read_pipe(l, t, t->run.out.fd);
            read_pipe(l, t, t->run.err.fd);
            check_finished(l, t);
            return true;
        }
    }
    return false;
}

/* The server cancelled t: forgotten at once, its process killed (its end drops it
   without a result: t->abandon) or, not running, taken out of the engine and dropped. */
void vcl_task_cancel(struct live *l, struct ltask *t)
{
    vcl_task_forget(l, t);
    if (t->state == LT_RUNNING || t->state == LT_STOPPED) {
        t->abandon = true;
        loop_timer_cancel(l->loop, t->limit_timer);
        t->limit_timer = 0;
        runner_signal(&t->run, SIGKILL);
        runner_signal(&t->run, SIGCONT);
        check_finished(l, t);
    } else {
        long ei = vcl_engine_index(l, t);
        if (ei >= 0)
            engine_task_remove(l->e, (size_t)ei);
        vcl_task_drop(l, t);
    }
}

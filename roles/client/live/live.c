/*
 * live.c - the multi-project volunteer client driven by the engine (live.h).
 *
 * Every tick (sched.tick_s, and after every event that changes the task set) the driver
 * does what the emulator does in simulated time: engine_tick (time, REC), a checkpoint
 * of every running task at its current run time (a stopped process loses nothing, so
 * any instant is a checkpoint), engine_schedule (start, resume with SIGCONT, or suspend
 * with SIGSTOP of the task's process group), and engine_poll for the next scheduler RPC
 * or master fetch, which it carries out on the project's sockets without blocking.
 *
 * Each scheduler endpoint of each project has its own DEALER, connected at start and
 * kept (ZeroMQ reconnects in the background; ZMQ_IMMEDIATE makes a send to an endpoint
 * that is down fail at once), so a project that is down costs no waiting: its RPC fails
 * at once, the engine backs it off and goes on with the others. A server that accepts
 * the connection but does not answer costs rpc.timeout_ms once per try.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "daemon/daemon.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "store/store.h"

#define MAX_RESULTS 1024   /* MAX_BATCH of the wire */
#define SINGLE_POLL_S 0.05 /* sched.poll_s of a single-cluster host (-1) */

static void kick(struct live *l);

double vcl_now(void)
{
    return (double)wall_now_ms() / 1000.0;
}

struct ltask *vcl_task_of(const struct live *l, size_t i)
{
    return (struct ltask *)(uintptr_t)l->e->tasks[i].user;
}

long vcl_engine_index(const struct live *l, const struct ltask *t)
{
    return engine_task_find(l->e, t->id);
}

/* ---- tasks ---- */

void vcl_task_free(struct ltask *t)
{
    if (!t)
        return;
    runner_cleanup(&t->run);
    for (uint32_t i = 0; i < t->argc; i++)
        free(t->argv[i]);
    free(t->argv);
    free(t->in);
    runner_env_free(&t->renv);
    free(t->result);
    free(t);
}

/*
 * A task from a server's map (or a stored record): job, idx, issue, limit_s, shell,
 * argv, stdin, and the issue #11 fields ptype, gpus, deadline, est_s. A task that cannot
 * run here gets t->bad (it is reported as failed, not dropped). NULL: out of memory.
 */
struct ltask *vcl_task_from_map(struct live *l, int project, const msgpack_object *m)
{
    const msgpack_object *argv = wire_get(m, "argv");
    struct ltask *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->run.out.fd = t->run.err.fd = -1;
    t->run.pid = -1;
    t->l = l;
    t->project = project;
    t->job = wire_get_u64(m, "job", 0);
    t->idx = (uint32_t)wire_get_u64(m, "idx", 0);
    t->issue = (uint32_t)wire_get_u64(m, "issue", 0);
    uint64_t lim = wire_get_u64(m, "limit_s", 3600);
    t->limit_s = lim > UINT32_MAX ? UINT32_MAX : (uint32_t)lim;
    t->shell = wire_get_bool(m, "shell", false);
    t->argc = argv && argv->type == MSGPACK_OBJECT_ARRAY ? argv->via.array.size : 0;
    if (!(t->argv = calloc(t->argc + 1, sizeof *t->argv)))
        goto fail;
    if (t->argc == 0)
        snprintf(t->bad, sizeof t->bad, "invalid task: argv is empty");
    for (uint32_t i = 0; i < t->argc; i++) {
        const msgpack_object *a = &argv->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_STR || memchr(a->via.str.ptr, 0, a->via.str.size)) {
            snprintf(t->bad, sizeof t->bad, "invalid task: argv[%u] is not a string", i);
            t->argc = i;
            break;
        }
        if (!(t->argv[i] = strndup(a->via.str.ptr, a->via.str.size)))
            goto fail;
    }
    if (!t->bad[0] && t->argv[0][0] == '\0')
        snprintf(t->bad, sizeof t->bad, "invalid task: argv[0] is empty");
    size_t n;
    const void *in = wire_get_bin(m, "stdin", &n);
    if (in && n && !(t->in = malloc(n)))
        goto fail;
    if (in && n)
        memcpy(t->in, in, n);
    t->inlen = in ? n : 0;
    if (runner_env_take(&t->renv, m, t->bad[0] ? NULL : t->bad, t->bad[0] ? 0 : sizeof t->bad))
        goto fail; /* --export / --chdir (issue 15) */
    wire_get_strbuf(m, "ptype", t->ptype, sizeof t->ptype);
    if (!t->ptype[0])
        snprintf(t->ptype, sizeof t->ptype, "cpu");
    uint64_t g = wire_get_u64(m, "gpus", 0);
    t->gpus = g > LIVE_MAX_GPU ? LIVE_MAX_GPU + 1 : (uint32_t)g;
    if (t->gpus > 0 && !strcmp(t->ptype, "cpu"))
        snprintf(t->ptype, sizeof t->ptype, "%s", l->e->nptypes > 1 ? l->e->ptypes[1].name : "gpu");
    double now = vcl_now();
    t->received = wire_get_f64(m, "received", now);
    double dl = wire_get_f64(m, "deadline", 0);
    t->deadline = isfinite(dl) && dl > 0 ? dl : now + l->cfg->default_deadline_s;
    double est = wire_get_f64(m, "est_s", 0);
    t->est_s = isfinite(est) && est > 0 && est < 1e9 ? est : 0;
    int pt = engine_ptype_find(l->e, t->ptype);
    t->bad_host = !t->bad[0]; /* what follows is about this host, not the task */
    if (!t->bad[0] && pt < 0)
        snprintf(t->bad, sizeof t->bad, "this host has no processor of type '%.60s'", t->ptype);
    else if (!t->bad[0] && pt > 0 && (t->gpus == 0 || (int)t->gpus > l->e->ptypes[pt].ninstances))
        snprintf(t->bad, sizeof t->bad, "needs %u '%.60s' GPU(s); this host has %d", t->gpus,
                 t->ptype, l->e->ptypes[pt].ninstances);
    t->limit_left_ms = (int64_t)t->limit_s * 1000;
    return t;
fail:
    vcl_task_free(t);
    return NULL;
}

static double task_estimate(const struct live *l, const struct ltask *t)
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
                                 task_estimate(l, t),
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
 * rises fast and falls slowly). When it moves by more than 5 %, the estimates of the
 * project's other tasks of that type are corrected in the engine.
 */
static void dcf_update(struct live *l, const struct ltask *t, double r)
{
    struct lproj *lp = &l->proj[t->project];
    int pt = engine_ptype_find(l->e, t->ptype);
    if (pt < 0 || !isfinite(r) || r <= 0)
        return;
    double old = lp->dcf[pt];
    lp->dcf[pt] = old <= 0 || r > old ? r : 0.8 * old + 0.2 * r;
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
            l->e->tasks[i].est_duration = task_estimate(l, o);
    }
    l->e->rr_dirty = l->e->sched_dirty = 1;
}

/*
 * The "finished" lines of the tasks whose results a commit has just made durable: the
 * log says a task finished only once a kill -9 can no longer lose its result (results
 * are committed together, once per loop turn or before an RPC, not one fsync each).
 */
static void log_finished(struct live *l)
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
        if (t->est_s > 0 && !r->timed_out)
            dcf_update(l, t, wall / t->est_s);
    }
    long i = vcl_engine_index(l, t);
    if (i >= 0) {
        l->e->tasks[i].elapsed = wall;
        engine_task_done(l->e, vcl_now(), (size_t)i);
    }
    vcl_task_save(l, t);
    l->unsaved = true;     /* committed before it is reported (send_rpc_stage), or at the end
                              of this loop turn with the rest: one fsync for many tasks */
    t->log_pending = true; /* logged once durable: log_finished */
    l->nlog_pending++;
    kick(l);
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
        kick(l);
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

static const char *const gpu_env[] = {"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                                      "ROCR_VISIBLE_DEVICES", "GRIDNODE_GPU",
                                      "GRIDNODE_GPU_TYPE",    NULL};

/*
 * Starts t's process. A GPU task gets its instances in its environment, the way BOINC
 * passes the device to an application: CUDA_VISIBLE_DEVICES (NVIDIA), GPU_DEVICE_ORDINAL
 * and ROCR_VISIBLE_DEVICES (AMD), GRIDNODE_GPU (the list, any vendor) and
 * GRIDNODE_GPU_TYPE. A CPU task sees none of them. The environment is set around the
 * fork only (one thread).
 */
static void task_start(struct live *l, struct ltask *t)
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
    for (int k = 0; gpu_env[k]; k++) {
        const char *v = getenv(gpu_env[k]);
        saved[k] = v ? strdup(v) : NULL;
        if (t->ngpu == 0)
            unsetenv(gpu_env[k]);
        else
            setenv(gpu_env[k], k == 4 ? t->ptype : list, 1);
    }
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
static void task_suspend(struct live *l, struct ltask *t)
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

static void task_resume(struct live *l, struct ltask *t)
{
    t->state = LT_RUNNING;
    t->episode_ms = loop_now_ms();
    runner_signal(&t->run, SIGCONT);
    t->limit_timer =
        loop_timer(l->loop, t->limit_left_ms > 0 ? t->limit_left_ms : 1, 0, on_limit, t);
    log_debug("task %llu.%u of %s resumed", (unsigned long long)t->job, t->idx,
              l->e->projects[t->project].name);
}

static void on_sigchld(struct loop *lp, void *arg)
{
    struct live *l = arg;
    struct signalfd_siginfo si;
    (void)lp;
    while (read(l->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    int status;
    struct rusage ru;
    pid_t pid;
    while ((pid = wait4(-1, &status, WNOHANG | WUNTRACED | WCONTINUED, &ru)) > 0) {
        if (WIFSTOPPED(status) || WIFCONTINUED(status))
            continue;
        if (vcl_par_reaped(l, pid, status, &ru))
            continue;
        for (size_t i = 0; i < l->ntasks; i++) {
            struct ltask *t = l->tasks[i];
            if ((t->state == LT_RUNNING || t->state == LT_STOPPED) && t->run.pid == pid) {
                runner_reaped(&t->run, status, &ru);
                read_pipe(l, t, t->run.out.fd);
                read_pipe(l, t, t->run.err.fd);
                check_finished(l, t);
                break;
            }
        }
    }
}

/* ---- the engine's decisions ---- */

static void apply_schedule(struct live *l, const struct engine_sched *s)
{
    /* suspend first: the instances they free are the ones the starts take */
    for (size_t k = 0; k < s->npreempt; k++) {
        struct ltask *t = vcl_task_of(l, s->preempt[k]);
        if (t && t->state == LT_RUNNING)
            task_suspend(l, t);
    }
    size_t nstart = s->nstart;
    size_t *start = nstart ? malloc(nstart * sizeof *start) : NULL;
    if (nstart && !start)
        return;
    if (nstart) /* a decision may only preempt (parallel ranks took instances) */
        memcpy(start, s->start, nstart * sizeof *start); /* task_start may call the engine */
    uint64_t *ids = nstart ? malloc(nstart * sizeof *ids) : NULL;
    for (size_t k = 0; ids && k < nstart; k++)
        ids[k] = l->e->tasks[start[k]].id;
    for (size_t k = 0; ids && k < nstart; k++) {
        long i = engine_task_find(l->e, ids[k]);
        if (i < 0)
            continue;
        struct ltask *t = vcl_task_of(l, (size_t)i);
        if (t->state == LT_STOPPED)
            task_resume(l, t);
        else if (t->state == LT_QUEUED)
            task_start(l, t);
    }
    free(ids);
    free(start);
}

static void send_rpc_stage(struct live *l);
static void buffer_update(struct live *l);
static void rpc_fail(struct live *l, const char *why);
static void start_action(struct live *l, const struct engine_action *a);

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
            start_action(l, &act);
    }
    l->sched_cpu_s += cpu_now() - c0;
}

static bool kicked;

static void kick(struct live *l)
{
    (void)l;
    kicked = true;
}

void vcl_kick(struct live *l)
{
    kick(l);
}

/* ---- sockets ---- */

static void on_lsock(struct loop *lp, void *arg);
static void on_lmon(struct loop *lp, void *arg);

struct lsock *vcl_sock_open(struct live *l, int p, const char *url)
{
    struct lsock *s = calloc(1, sizeof *s);
    int zero = 0, one = 1;
    int64_t maxmsg = WIRE_MAX_FRAME;
    if (!s)
        return NULL;
    s->l = l;
    s->project = p;
    snprintf(s->url, sizeof s->url, "%s", url);
    s->created_ms = loop_now_ms();
    if (!(s->sock = zmq_socket(l->zctx, ZMQ_DEALER))) {
        free(s);
        return NULL;
    }
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    char err[800], name[40];
    snprintf(name, sizeof name, "vcl-%p", s->sock);
    if (netopts_link_open(&s->link, l->zctx, s->sock, l->cfg->link_timeout_s * 1000, name,
                          s->created_ms) < 0)
        log_warnx("project %s: cannot watch the connection to %s (%s): heal detection waits "
                  "for the backoff",
                  l->e->projects[p].name, url, zmq_strerror(errno));
    if (curve_client_apply(s->sock, &l->cfg->sec, url, err, sizeof err) < 0) {
        log_warnx("project %s: %s", l->e->projects[p].name, err);
        goto fail;
    }
    if (zmq_connect(s->sock, url) < 0) {
        log_warnx("project %s: cannot connect to %s: %s", l->e->projects[p].name, url,
                  zmq_strerror(errno));
        goto fail;
    }
    loop_add_socket(l->loop, s->sock, on_lsock, s);
    if (s->link.mon)
        loop_add_socket(l->loop, s->link.mon, on_lmon, s);
    return s;
fail:
    netopts_link_close(&s->link);
    zmq_close(s->sock);
    free(s);
    return NULL;
}

void vcl_sock_close(struct live *l, struct lsock **sp)
{
    struct lsock *s = *sp;
    if (!s)
        return;
    if (l->rpc.sock == s)
        l->rpc.sock = NULL;
    if (l->rpc.master == s)
        l->rpc.master = NULL;
    for (int p = 0; p < l->e->nprojects; p++)
        if (l->proj[p].status_sock == s) {
            l->proj[p].status_sock = NULL;
            l->proj[p].status_id = 0;
        }
    loop_remove_socket(l->loop, s->sock);
    if (s->link.mon)
        loop_remove_socket(l->loop, s->link.mon);
    netopts_link_close(&s->link);
    zmq_close(s->sock);
    free(s);
    *sp = NULL;
}

/* (Re)creates one DEALER per scheduler endpoint of project p, keeping unchanged ones. */
int vcl_project_sockets(struct live *l, int p)
{
    struct lproj *lp = &l->proj[p];
    const struct engine_project *q = &l->e->projects[p];
    struct lsock *keep[ENGINE_MAX_ENDPOINTS] = {0};
    for (int k = 0; k < q->nendpoints; k++)
        for (int j = 0; j < lp->nsocks; j++)
            if (lp->socks[j] && !strcmp(lp->socks[j]->url, q->endpoints[k])) {
                keep[k] = lp->socks[j];
                lp->socks[j] = NULL;
                break;
            }
    for (int j = 0; j < lp->nsocks; j++)
        vcl_sock_close(l, &lp->socks[j]);
    for (int k = 0; k < q->nendpoints; k++)
        lp->socks[k] = keep[k] ? keep[k] : vcl_sock_open(l, p, q->endpoints[k]);
    lp->nsocks = q->nendpoints;
    return 0;
}

static struct lsock *project_sock(struct live *l, int p, const char *url)
{
    struct lproj *lp = &l->proj[p];
    for (int k = 0; k < lp->nsocks; k++)
        if (lp->socks[k] && !strcmp(lp->socks[k]->url, url))
            return lp->socks[k];
    return NULL;
}

struct lsock *vcl_project_session_sock(struct live *l, int p)
{
    return project_sock(l, p, l->proj[p].session_url);
}

/* ---- RPC: HELLO, RESULT/TASK_GET, MASTER_GET ---- */

/* The CPU model and clock reported in HELLO (the cluster groups hosts by them). */
static void cpu_info(struct live *l)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        if (!strncmp(line, "cpu MHz", 7) && !l->cpu_mhz)
            l->cpu_mhz = strtol(colon + 1, NULL, 10);
        if (!strncmp(line, "model name", 10) && !l->cpu_model[0] && colon[1]) {
            snprintf(l->cpu_model, sizeof l->cpu_model, "%s", colon + 2);
            l->cpu_model[strcspn(l->cpu_model, "\n")] = '\0';
        }
    }
    if (f)
        fclose(f);
}

static void build_hello(struct live *l, int p)
{
    struct lproj *lp = &l->proj[p];
    struct utsname u;
    struct sysinfo si;
    char os[200] = "";
    memset(&u, 0, sizeof u);
    if (uname(&u) == 0)
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    uint64_t mem = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit >> 20 : 0;
    bool sid = lp->sid[0] && !strcmp(lp->session_url, l->rpc.url);
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, WT_HELLO, l->rpc.id = ++l->next_req,
               13 + sid + (lp->inc[0] != 0) + (l->cfg->cpu_gflops > 0));
    if (sid)
        wire_put_str(&l->wb, "sid", lp->sid);
    if (lp->inc[0])
        wire_put_str(&l->wb, "inc", lp->inc);
    wire_put_str(&l->wb, "client", l->cfg->code);
    wire_put_str(&l->wb, "node", l->cfg->name[0] ? l->cfg->name : l->host);
    wire_put_str(&l->wb, "cluster", l->cfg->cluster);
    wire_put_str(&l->wb, "os", os);
    wire_put_u64(&l->wb, "cores", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    wire_put_u64(&l->wb, "mem_mb", mem);
    wire_put_u64(&l->wb, "slots", (uint64_t)l->slots);
    wire_put_str(&l->wb, "arch", l->cfg->arch[0] ? l->cfg->arch : u.machine);
    wire_put_str(&l->wb, "model", l->cfg->model[0] ? l->cfg->model : l->cpu_model);
    wire_put_u64(&l->wb, "mhz", (uint64_t)l->cpu_mhz);
    wire_put_bool(&l->wb, "procs", l->cfg->parallel != 0); /* PSYNC: live_par.c */
    wire_put_u64(&l->wb, "disk_mb", vcl_par_disk_mb(l, p));
    if (l->cfg->cpu_gflops > 0) /* else the cluster measures this host's speed */
        wire_put_f64(&l->wb, "cpu_gflops", l->cfg->cpu_gflops);
    wire_put_key(&l->wb, "gpus");
    wire_pack_array(&l->wb, (uint32_t)(l->e->nptypes - 1));
    for (int t = 1; t < l->e->nptypes; t++) {
        wire_pack_map(&l->wb, 3);
        wire_put_str(&l->wb, "type", l->e->ptypes[t].name);
        wire_put_u64(&l->wb, "count", (uint64_t)l->e->ptypes[t].ninstances);
        wire_put_f64(&l->wb, "gflops", l->e->ptypes[t].flops / 1e9);
    }
}

/*
 * RESULT (the results the engine chose to report, and the request) or TASK_GET when
 * there is nothing to report. The request: `req` in seconds per processor type (the
 * engine's shortfall), and `want`, a task count for clusters that do not read `req`:
 * per type the larger of the idle instances and the seconds over the project's
 * estimated task length.
 */
static void build_result(struct live *l)
{
    const struct engine_action *a = &l->rpc.act;
    struct lproj *lp = &l->proj[a->project];
    uint32_t nrep = 0, nreq = 0;
    double want = 0;
    for (size_t k = 0; k < l->rpc.nreport; k++) {
        long i = engine_task_find(l->e, l->rpc.report_ids[k]);
        nrep += i >= 0 && vcl_task_of(l, (size_t)i)->result != NULL && nrep < MAX_RESULTS;
    }
    double est = lp->est_avg > 0 ? lp->est_avg : l->cfg->default_est_s;
    for (int t = 0; t < l->e->nptypes; t++)
        if (a->req[t].secs > 0 || a->req[t].instances > 0) {
            nreq++;
            double n = ceil(a->req[t].secs / est);
            want += fmax(n, ceil(a->req[t].instances));
        }
    if (want > MAX_RESULTS)
        want = MAX_RESULTS;
    if (a->fetch && want < 1)
        want = 1;
    if (l->single && nreq) { /* client.prefetch_max: tasks held beyond the slots, at most */
        size_t held = 0;
        for (size_t i = 0; i < l->ntasks; i++)
            held += l->tasks[i]->state != LT_DONE;
        double cap = (double)l->slots * (1 + (double)l->cfg->prefetch_max) - (double)held;
        if (want > cap)
            want = cap > 0 ? cap : 0;
        if (want < 1)
            nreq = 0; /* enough held: no request */
    }
    /* a single cluster gets `want` alone, as from any node of it: the tasks it hands out
       are then re-issued after missed heartbeats (tasks.k_wait), not only after their
       report deadline as a volunteer's queued work (docs/client-scheduling.md 2b) */
    bool send_req = nreq > 0 && !l->single;
    uint32_t type = nrep ? WT_RESULT : WT_TASK_GET;
    bool inc = type == WT_RESULT && lp->inc[0];
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, type, l->rpc.id = ++l->next_req, 2 + send_req + inc + (nrep > 0));
    wire_put_str(&l->wb, "sid", lp->sid);
    if (inc)
        wire_put_str(&l->wb, "inc", lp->inc);
    if (nrep) {
        wire_put_key(&l->wb, "results");
        wire_pack_array(&l->wb, nrep);
        uint32_t n = 0;
        for (size_t k = 0; k < l->rpc.nreport && n < nrep; k++) {
            long i = engine_task_find(l->e, l->rpc.report_ids[k]);
            struct ltask *t = i >= 0 ? vcl_task_of(l, (size_t)i) : NULL;
            if (t && t->result) {
                msgpack_sbuffer_write(&l->wb.sb, t->result, t->rlen);
                n++;
            }
        }
    }
    wire_put_u64(&l->wb, "want", a->fetch && nreq ? (uint64_t)want : 0);
    if (send_req) {
        wire_put_key(&l->wb, "req");
        wire_pack_map(&l->wb, nreq);
        for (int t = 0; t < l->e->nptypes; t++)
            if (a->req[t].secs > 0 || a->req[t].instances > 0) {
                /* in the server's scale: it sums its own est_s (see struct lproj dcf) */
                double f = lp->dcf[t] > 0 ? lp->dcf[t] : 1;
                wire_pack_str(&l->wb, l->e->ptypes[t].name);
                msgpack_pack_double(&l->wb.pk, fmax(a->req[t].secs, a->req[t].instances * est) / f);
            }
    }
}

static void send_now(struct live *l)
{
    struct lsock *s = l->rpc.stage == 2 ? l->rpc.master : l->rpc.sock;
    if (!s) {
        rpc_fail(l, "no socket for the endpoint");
        return;
    }
    if (zmq_send(s->sock, l->rpc.msg, l->rpc.msglen, ZMQ_DONTWAIT) < 0) {
        /* still connecting (no attempt failed yet): no failed round, the UP event or the
           next pass sends it (daemon/netopts.h, struct netopts_link) */
        /* a single cluster is waited for however long it is absent (as any node of it
           does): a failed round is only a server that is connected and does not answer;
           a project's endpoint that refuses fails at once, so the others go on */
        if (errno == EAGAIN && (l->single || (netopts_link_connecting(&s->link) &&
                                              loop_now_ms() < l->rpc.send_until_ms))) {
            if (!l->rpc.unsent && !s->link.said)
                log_info("project %s: waiting for the connection to %s",
                         l->e->projects[l->rpc.act.project].name, s->url);
            s->link.said = true;
            l->rpc.unsent = true;
            return;
        }
        char why[300];
        snprintf(why, sizeof why, "%s unreachable (%s)", s->url,
                 errno != EAGAIN   ? zmq_strerror(errno)
                 : s->link.refused ? "no connection: refused or timed out"
                                   : "not connected");
        rpc_fail(l, why);
        return;
    }
    l->rpc.unsent = false;
    l->rpc.sent_ms = loop_now_ms();
}

/* The request timeout on s: rpc.timeout_ms, longer when its measured round trips are. */
static int64_t rpc_timeout(const struct live *l, const struct lsock *s)
{
    return s ? netopts_rtt_timeout(&s->link.rtt, l->cfg->timeout_ms) : l->cfg->timeout_ms;
}

static void send_rpc_stage(struct live *l)
{
    struct lsock *s = l->rpc.stage == 2 ? l->rpc.master : l->rpc.sock;
    if (l->unsaved) { /* no result leaves before it is durable */
        l->unsaved = false;
        vcl_commit(l);
        log_finished(l);
    }
    if (l->rpc.stage == 0)
        build_hello(l, l->rpc.act.project);
    else if (l->rpc.stage == 1)
        build_result(l);
    else {
        wire_buf_reset(&l->wb);
        wire_begin(&l->wb, WT_MASTER_GET, l->rpc.id = ++l->next_req, 0);
    }
    /* the request is kept apart: heartbeats reuse l->wb while it waits to be sent */
    if (l->rpc.msgcap < l->wb.sb.size) {
        void *m = realloc(l->rpc.msg, l->wb.sb.size);
        if (!m) {
            rpc_fail(l, "out of memory");
            return;
        }
        l->rpc.msg = m;
        l->rpc.msgcap = l->wb.sb.size;
    }
    memcpy(l->rpc.msg, l->wb.sb.data, l->wb.sb.size);
    l->rpc.msglen = l->wb.sb.size;
    /* a connection still being made is waited for, at most a request timeout (each
       connect attempt ends within NETOPTS_CONNECT_TIMEOUT_MS, failed or made) */
    int64_t now = loop_now_ms();
    int64_t wait = rpc_timeout(l, s);
    if (wait < 2 * NETOPTS_CONNECT_TIMEOUT_MS)
        wait = 2 * NETOPTS_CONNECT_TIMEOUT_MS;
    l->rpc.send_until_ms = now + wait;
    l->rpc.sent_ms = now;
    send_now(l);
}

static void start_action(struct live *l, const struct engine_action *a)
{
    struct lrpc *r = &l->rpc;
    r->act = *a;
    snprintf(r->url, sizeof r->url, "%s", a->url ? a->url : "");
    r->act.url = r->url;
    if (a->nreport > r->report_cap) {
        uint64_t *ids = realloc(r->report_ids, a->nreport * sizeof *ids);
        size_t *idx = realloc(r->report_idx, a->nreport * sizeof *idx);
        if (ids)
            r->report_ids = ids;
        if (idx)
            r->report_idx = idx;
        if (!ids || !idx)
            return; /* the engine asks again */
        r->report_cap = a->nreport;
    }
    r->nreport = a->nreport;
    for (size_t k = 0; k < a->nreport; k++)
        r->report_ids[k] = l->e->tasks[a->report[k]].id;
    r->act.report = NULL;
    r->active = true;
    r->rehello = false;
    r->unsent = false;
    int p = a->project;
    if (a->kind == ENGINE_ACT_MASTER) {
        r->stage = 2;
        r->master = vcl_sock_open(l, p, r->url);
        log_info("project %s: reading the master list at %s", l->e->projects[p].name, r->url);
    } else {
        r->sock = project_sock(l, p, r->url);
        struct lproj *lp = &l->proj[p];
        r->stage = lp->welcomed && !strcmp(lp->session_url, r->url) ? 1 : 0;
        log_debug("project %s: RPC to %s (%s%s, %zu result(s))", l->e->projects[p].name, r->url,
                  a->fetch ? "work fetch" : "report",
                  a->reason == ENGINE_WHY_RETRY ? ", retry" : "", a->nreport);
    }
    send_rpc_stage(l);
}

static void rpc_end(struct live *l)
{
    if (l->rpc.master)
        vcl_sock_close(l, &l->rpc.master);
    l->rpc.active = false;
    l->rpc.sock = NULL;
    kick(l);
}

/* The action failed: the engine tries the next endpoint or backs the project off. */
static void rpc_fail(struct live *l, const char *why)
{
    struct lrpc *r = &l->rpc;
    int p = r->act.project;
    double now = vcl_now();
    if (r->stage == 2) {
        log_warnx("project %s: master list %s: %s", l->e->projects[p].name, r->url, why);
        engine_master_done(l->e, now, p, 0, NULL, 0);
    } else {
        struct engine_reply rep = {0};
        r->act.report = r->report_idx;
        r->act.nreport = 0;
        engine_rpc_done(l->e, now, &r->act, &rep);
        const struct engine_project *q = &l->e->projects[p];
        log_warnx("project %s: scheduler %s: %s; retry %d in %.1f s", q->name, r->url, why,
                  q->nrpc_failures,
                  fmax(0, q->min_rpc_time > q->backoff_until ? q->min_rpc_time - now
                                                             : q->backoff_until - now));
        /* the socket is kept: its heartbeats tell a dead link from a slow server, and a
           late reply is dropped by its id */
    }
    vcl_project_save(l, p);
    vcl_commit(l);
    rpc_end(l);
}

/* The server's "cancel" list: stop those tasks and forget them without a result. */
static void apply_cancel(struct live *l, int p, const msgpack_object *cancel)
{
    if (!cancel || cancel->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t k = 0; k < cancel->via.array.size; k++) {
        const msgpack_object *c = &cancel->via.array.ptr[k];
        uint64_t job = wire_get_u64(c, "job", 0), idx = wire_get_u64(c, "idx", UINT64_MAX);
        for (size_t i = 0; i < l->ntasks; i++) {
            struct ltask *t = l->tasks[i];
            if (t->project != p || t->job != job || t->idx != idx || t->abandon)
                continue;
            log_info("task %llu.%u of %s abandoned at the server's request",
                     (unsigned long long)job, t->idx, l->e->projects[p].name);
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
            break;
        }
    }
}

/*
 * Project p's cluster state was replaced (its state directory was reset: a new
 * incarnation in WELCOME): the tasks we hold from it, queued, running or finished,
 * belong to jobs that no longer exist there, and their ids may now name other jobs.
 * Forget them all without reporting (running ones are killed), as the single-cluster
 * client always did; the other projects are not touched.
 */
static void forget_incarnation(struct live *l, int p, const char *inc, size_t il)
{
    size_t n = vcl_project_drop_tasks(l, p, true);
    l->e->rr_dirty = l->e->sched_dirty = 1;
    log_warnx("project %s: the cluster's state changed (incarnation %s -> %.*s): forgot %zu "
              "task(s) and result(s) of the old state",
              l->e->projects[p].name, l->proj[p].inc, (int)il, inc, n);
}

static void on_welcome(struct live *l, int p, const msgpack_object *m)
{
    struct lproj *lp = &l->proj[p];
    size_t il;
    const char *inc = wire_get_str(m, "inc", &il);
    if (inc && il > 0 && il < sizeof lp->inc) {
        if (lp->inc[0] && (strlen(lp->inc) != il || memcmp(lp->inc, inc, il)))
            forget_incarnation(l, p, inc, il);
        memcpy(lp->inc, inc, il);
        lp->inc[il] = '\0';
    }
    wire_get_strbuf(m, "sid", lp->sid, sizeof lp->sid);
    snprintf(lp->session_url, sizeof lp->session_url, "%s", l->rpc.url);
    lp->hb_s = (uint32_t)wire_get_u64(m, "hb_s", 10);
    lp->poll_s = (uint32_t)wire_get_u64(m, "poll_s", 0);
    if (lp->hb_s == 0)
        lp->hb_s = 1;
    lp->welcomed = true;
    lp->last_status_ms = loop_now_ms();
    vcl_project_save(l, p);
    log_info("project %s: session %s with %s", l->e->projects[p].name, lp->sid, l->rpc.url);
}

/*
 * The server handed us a task we already hold (it expired while we were cut off and was
 * re-issued to us): keep the copy we have, under the new issue number, so that our
 * heartbeats name the issue the server waits for and protect it from another re-issue.
 * A finished result keeps the issue it was packed with: the server takes the first
 * result of a task whatever its issue. Never a second copy of one task.
 */
static void adopt_issue(struct live *l, struct ltask *t, uint32_t issue)
{
    if (issue == 0 || issue == t->issue || t->result || t->abandon)
        return;
    log_info("task %llu.%u of %s was re-issued to us (issue %u -> %u): keeping the copy we run",
             (unsigned long long)t->job, t->idx, l->e->projects[t->project].name, t->issue, issue);
    t->issue = issue;
    vcl_task_save(l, t);
}

/* TASKS answering our RESULT/TASK_GET: reported results forgotten, new tasks kept. */
static void on_tasks(struct live *l, int p, const msgpack_object *m)
{
    struct lrpc *r = &l->rpc;
    struct lproj *lp = &l->proj[p];
    double now = vcl_now();
    const msgpack_object *tasks = wire_get(m, "tasks");
    uint32_t n = tasks && tasks->type == MSGPACK_OBJECT_ARRAY ? tasks->via.array.size : 0;
    /* the results sent are acknowledged: the engine removes them, so do we */
    struct ltask **gone = calloc(r->nreport + 1, sizeof *gone);
    size_t ngone = 0, nidx = 0;
    for (size_t k = 0; k < r->nreport; k++) {
        long i = engine_task_find(l->e, r->report_ids[k]);
        if (i < 0)
            continue;
        r->report_idx[nidx++] = (size_t)i;
        if (gone)
            gone[ngone++] = vcl_task_of(l, (size_t)i);
    }
    if (l->ntcap < n + 1) {
        struct engine_new_task *nt = realloc(l->nt, (n + 1) * sizeof *nt);
        if (nt) {
            l->nt = nt;
            l->ntcap = n + 1;
        }
    }
    size_t nnew = 0;
    for (uint32_t k = 0; k < n && k < l->ntcap; k++) {
        const msgpack_object *tm = &tasks->via.array.ptr[k];
        uint64_t job = wire_get_u64(tm, "job", 0);
        uint32_t idx = (uint32_t)wire_get_u64(tm, "idx", 0);
        struct ltask *have = NULL;
        for (size_t i = 0; i < l->ntasks && !have; i++)
            if (l->tasks[i]->project == p && l->tasks[i]->job == job && l->tasks[i]->idx == idx)
                have = l->tasks[i];
        if (have) {
            adopt_issue(l, have, (uint32_t)wire_get_u64(tm, "issue", 0));
            continue;
        }
        struct ltask *t = vcl_task_from_map(l, p, tm);
        if (!t) {
            log_warn("cannot hold task %llu.%u (the server will re-issue it)",
                     (unsigned long long)job, idx);
            continue;
        }
        t->id = ++l->next_id;
        t->received = now;
        int pt = engine_ptype_find(l->e, t->ptype);
        l->nt[nnew++] = (struct engine_new_task){t->id,
                                                 (uint64_t)(uintptr_t)t,
                                                 pt < 0 ? 0 : pt,
                                                 pt > 0 ? (double)t->gpus : 1.0,
                                                 task_estimate(l, t),
                                                 t->deadline};
        vcl_task_save(l, t);
        if (l->ntasks == l->captasks) {
            size_t cap = l->captasks ? l->captasks * 2 : 64;
            struct ltask **nl = realloc(l->tasks, cap * sizeof *nl);
            if (!nl) {
                vcl_task_forget(l, t);
                vcl_task_free(t);
                nnew--;
                continue;
            }
            l->tasks = nl;
            l->captasks = cap;
        }
        l->tasks[l->ntasks++] = t;
    }
    struct engine_reply rep = {1, l->nt, nnew, 0};
    r->act.report = r->report_idx;
    r->act.nreport = nidx;
    if (engine_rpc_done(l->e, now, &r->act, &rep) < 0)
        log_warn("project %s: not every new task could be taken", l->e->projects[p].name);
    uint64_t wait_s = wire_get_u64(m, "wait_s", 0);
    if (l->single && l->cfg->rsc_backoff_min < 0 && nnew == 0 && r->act.fetch && wait_s > 0) {
        /* a single cluster's "nothing for you now, ask again in wait_s" replaces the
           doubling per-type backoff (which is for volunteers with several projects) */
        for (int t = 0; t < l->e->nptypes; t++) {
            struct engine_rsc *rs = &l->e->projects[p].rsc[t];
            if (rs->backoff_until > now)
                rs->backoff_until = now + (double)(wait_s < 3600 ? wait_s : 3600);
        }
    }
    size_t rn;
    const char *reason = wire_get_str(m, "reason", &rn);
    if (reason && !lp->held)
        log_warnx("project %s: the server holds back tasks from this node: %.*s",
                  l->e->projects[p].name, (int)rn, reason);
    lp->held = reason != NULL;
    for (size_t k = 0; k < ngone; k++) {
        vcl_task_forget(l, gone[k]);
        vcl_task_drop(l, gone[k]);
    }
    lp->results_sent += ngone;
    lp->tasks_got += nnew;
    free(gone);
    /* tasks the engine could not take (out of memory) are dropped: the server re-issues */
    for (size_t i = 0; i < l->ntasks;) {
        struct ltask *t = l->tasks[i];
        if (t->project == p && t->state == LT_QUEUED && vcl_engine_index(l, t) < 0) {
            vcl_task_forget(l, t);
            vcl_task_drop(l, t);
        } else
            i++;
    }
    apply_cancel(l, p, wire_get(m, "cancel"));
    vcl_project_save(l, p);
    vcl_commit(l);
    log_debug("project %s: %zu result(s) reported, %zu task(s) received", l->e->projects[p].name,
              ngone, nnew);
    rpc_end(l);
}

static void on_master(struct live *l, int p, const msgpack_object *m)
{
    const msgpack_object *eps = wire_get(m, "endpoints");
    const char *list[ENGINE_MAX_ENDPOINTS];
    char buf[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    int n = 0;
    for (uint32_t k = 0; eps && k < eps->via.array.size && n < ENGINE_MAX_ENDPOINTS; k++) {
        const msgpack_object *s = &eps->via.array.ptr[k];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 ||
            s->via.str.size >= ENGINE_URL_MAX || memchr(s->via.str.ptr, 0, s->via.str.size))
            continue;
        memcpy(buf[n], s->via.str.ptr, s->via.str.size);
        buf[n][s->via.str.size] = '\0';
        list[n] = buf[n];
        n++;
    }
    if (n == 0) {
        rpc_fail(l, "the master list names no usable endpoint");
        return;
    }
    engine_master_done(l->e, vcl_now(), p, 1, list, n);
    vcl_project_sockets(l, p);
    log_info("project %s: master list read: %d scheduler endpoint(s), first %s",
             l->e->projects[p].name, n, list[0]);
    vcl_project_save(l, p);
    vcl_commit(l);
    rpc_end(l);
}

static void on_rpc_reply(struct live *l, const struct wire_msg *msg)
{
    struct lrpc *r = &l->rpc;
    int p = r->act.project;
    if (msg->type == WT_ERROR) {
        uint64_t code = wire_get_u64(msg->root, "code", 0);
        size_t n;
        const char *text = wire_get_str(msg->root, "msg", &n);
        char why[600];
        if (code == WE_SESSION && r->stage == 1 && !r->rehello) {
            l->proj[p].welcomed = false;
            r->rehello = true;
            r->stage = 0;
            send_rpc_stage(l);
            return;
        }
        snprintf(why, sizeof why, "error %s: %.*s", wire_err_name((int)code), (int)n,
                 text ? text : "");
        rpc_fail(l, why);
        return;
    }
    if (r->stage == 0 && msg->type == WT_WELCOME) {
        on_welcome(l, p, msg->root);
        r->stage = 1;
        send_rpc_stage(l);
    } else if (r->stage == 1 && msg->type == WT_TASKS) {
        on_tasks(l, p, msg->root);
    } else if (r->stage == 2 && msg->type == WT_MASTER) {
        on_master(l, p, msg->root);
    } else {
        char why[100];
        snprintf(why, sizeof why, "unexpected %s reply", msg->desc->name);
        rpc_fail(l, why);
    }
}

static void on_status_reply(struct live *l, int p, const struct wire_msg *msg)
{
    struct lproj *lp = &l->proj[p];
    lp->status_id = 0;
    lp->status_sock = NULL;
    if (msg->type == WT_ERROR) {
        if (wire_get_u64(msg->root, "code", 0) == WE_SESSION)
            lp->welcomed = false; /* the next RPC says HELLO first */
        return;
    }
    if (msg->type == WT_STATUS_ACK) {
        apply_cancel(l, p, wire_get(msg->root, "cancel"));
        vcl_commit(l);
    }
}

static void on_lsock(struct loop *lp, void *arg)
{
    struct lsock *s = arg;
    struct live *l = s->l;
    (void)lp;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        int more = 0;
        size_t sz = sizeof more;
        struct wire_msg msg;
        struct wire_error err;
        if (zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
            while (zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more &&
                   zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) >= 0)
                ;
            log_warnx("multi-frame reply from %s ignored", s->url);
        } else if (wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &msg, &err) < 0) {
            log_warnx("bad reply from %s ignored: %s", s->url, err.text);
        } else {
            int p = s->project;
            bool ours = l->rpc.active && (l->rpc.sock == s || l->rpc.master == s) &&
                        msg.id == l->rpc.id && !l->rpc.unsent;
            if (ours) { /* it may close this very socket (a master fetch's): stop here */
                netopts_rtt_sample(&s->link.rtt, loop_now_ms() - l->rpc.sent_ms);
                on_rpc_reply(l, &msg);
                wire_msg_free(&msg);
                zmq_msg_close(&m);
                return;
            }
            if (p < l->e->nprojects && vcl_par_reply(l, p, &msg))
                ; /* a PSYNC_ACK (live_par.c) */
            else if (p < l->e->nprojects && l->proj[p].status_id == msg.id && msg.id) {
                netopts_rtt_sample(&s->link.rtt, loop_now_ms() - l->proj[p].status_sent_ms);
                on_status_reply(l, p, &msg);
            } else
                log_debug("stale reply %llu from %s ignored", (unsigned long long)msg.id, s->url);
            wire_msg_free(&msg);
        }
        zmq_msg_close(&m);
    }
}

/*
 * Connection events of a project's socket (daemon/netopts.h, struct netopts_link). Lost: the
 * RPC or STATUS in flight on it cannot be answered any more, so it ends now. Up after a
 * loss: the link healed or the server is back, so the project's backoff wait is cut to a
 * random 0-2 s (a server that answers with errors or not at all while connected keeps
 * its exponential backoff). Up or a failed attempt: an RPC waiting for the connection
 * is sent, or fails, at once.
 */
static void on_lmon(struct loop *lp, void *arg)
{
    struct lsock *s = arg;
    struct live *l = s->l;
    struct lrpc *r = &l->rpc;
    int p = s->project, ev;
    (void)lp;
    while ((ev = netopts_link_event(&s->link, loop_now_ms())) >= 0) {
        bool waiting = r->active && r->unsent && (r->sock == s || r->master == s);
        bool in_flight = r->active && !r->unsent && (r->sock == s || r->master == s);
        if (ev == NETOPTS_EV_DOWN) {
            log_warnx("project %s: connection to %s lost", l->e->projects[p].name, s->url);
            if (p < l->e->nprojects && l->proj[p].status_sock == s) {
                l->proj[p].status_sock = NULL;
                l->proj[p].status_id = 0;
            }
            if (in_flight) {
                rpc_fail(l, "the request in flight was lost with the connection");
                return; /* rpc_fail may close a master fetch's socket: s */
            }
        } else if (ev == NETOPTS_EV_UP) {
            if (s->link.said)
                log_info("project %s: connected to %s", l->e->projects[p].name, s->url);
            s->link.said = false;
            if (s->link.healed && p < l->e->nprojects) {
                struct engine_project *q = &l->e->projects[p];
                double at = vcl_now() + (double)netopts_link_heal_ms() / 1000;
                if (q->backoff_until > at)
                    q->backoff_until = at;
                if (q->min_rpc_time > at)
                    q->min_rpc_time = at;
                kick(l);
            }
            if (waiting) {
                send_now(l);
                return;
            }
        } else if (ev == NETOPTS_EV_HANDSHAKE) {
            /* say what is wrong instead of timing out: at most once a minute */
            const char *why = curve_handshake_failure(s->link.raw_event);
            int64_t now = loop_now_ms();
            if (why && (!s->said_ms || now - s->said_ms >= 60000)) {
                log_warnx("project %s: cannot talk to %s: %s", l->e->projects[p].name, s->url, why);
                s->said_ms = now;
            }
        } else if (ev == NETOPTS_EV_RETRY && waiting) {
            send_now(l); /* fails now: the server is absent */
            return;
        }
    }
}

/*
 * Heartbeats: a project's cluster re-issues a task it hears nothing about (X4), so
 * every poll_s (at most hb_s) each project with unfinished tasks gets STATUS naming
 * them, queued and suspended ones included; its answer may cancel some.
 */
static void heartbeats(struct live *l)
{
    int64_t now = loop_now_ms();
    for (int p = 0; p < l->e->nprojects; p++) {
        struct lproj *lp = &l->proj[p];
        if (!lp->welcomed)
            continue;
        if (lp->status_id && now - lp->status_sent_ms > rpc_timeout(l, lp->status_sock)) {
            lp->status_id = 0; /* unanswered: the next one goes */
            lp->status_sock = NULL;
        }
        uint32_t every = lp->poll_s && lp->poll_s < lp->hb_s ? lp->poll_s : lp->hb_s;
        if (lp->status_id || now - lp->last_status_ms < (int64_t)every * 1000)
            continue;
        uint32_t n = 0;
        for (size_t i = 0; i < l->ntasks; i++)
            n += l->tasks[i]->project == p && l->tasks[i]->state != LT_DONE;
        if (n == 0)
            continue;
        struct lsock *s = project_sock(l, p, lp->session_url);
        if (!s)
            continue;
        wire_buf_reset(&l->wb);
        wire_begin(&l->wb, WT_STATUS, lp->status_id = ++l->next_req, 2);
        wire_put_str(&l->wb, "sid", lp->sid);
        wire_put_key(&l->wb, "running");
        wire_pack_array(&l->wb, n);
        for (size_t i = 0; i < l->ntasks; i++) {
            const struct ltask *t = l->tasks[i];
            if (t->project != p || t->state == LT_DONE)
                continue;
            wire_pack_map(&l->wb, 3);
            wire_put_u64(&l->wb, "job", t->job);
            wire_put_u64(&l->wb, "idx", t->idx);
            wire_put_u64(&l->wb, "issue", t->issue);
        }
        lp->last_status_ms = lp->status_sent_ms = now;
        if (zmq_send(s->sock, l->wb.sb.data, l->wb.sb.size, ZMQ_DONTWAIT) < 0) {
            lp->status_id = 0;
            continue;
        }
        lp->status_sock = s;
    }
}

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
 * [rpc] backoff, and an empty reply waited out for the cluster's wait_s (on_tasks).
 * docs/client-scheduling.md 2b, "The single-cluster client".
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
 * the count (build_result).
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

/* ---- the loop ---- */

static void on_tick(struct loop *lp, void *arg)
{
    struct live *l = arg;
    (void)lp;
    kicked = true;
    (void)l;
}

static void pump(struct live *l)
{
    int64_t now = loop_now_ms();
    struct lrpc *r = &l->rpc;
    if (r->active && r->unsent)
        send_now(l);
    struct lsock *rs = r->stage == 2 ? r->master : r->sock;
    if (r->active && !r->unsent && now - r->sent_ms >= rpc_timeout(l, rs)) {
        char why[100];
        snprintf(why, sizeof why, "did not answer within %lld ms", (long long)rpc_timeout(l, rs));
        rpc_fail(l, why);
    }
    for (int k = 0; k < 4 && kicked; k++) { /* a decision may lead to another */
        kicked = false;
        step(l);
    }
    heartbeats(l);
    vcl_par_pump(l);
    if (now - l->last_save_ms >= 10000) { /* REC and backoffs, at most 10 s old */
        l->last_save_ms = now;
        for (int p = 0; p < l->e->nprojects; p++)
            vcl_project_save(l, p);
        vcl_commit(l);
    }
}

/*
 * A single-cluster host stopping (SIGTERM, SIGINT) leaves like any node of a cluster:
 * its processes are stopped, its finished results go with LEAVE, and only the server's
 * OK (within min(rpc.timeout_ms, 3 s)) lets it forget its tasks: the server then
 * re-issues the unfinished ones at once instead of waiting for missed heartbeats.
 * Without the OK they stay in the store, to be reported or rerun at the next start. A
 * volunteer with projects keeps its queue across restarts, as BOINC does: no LEAVE.
 */
static void leave(struct live *l)
{
    if (l->unsaved) {
        l->unsaved = false;
        vcl_commit(l);
        log_finished(l);
    }
    if (!l->single || !l->e || l->e->nprojects < 1 || !l->proj[0].welcomed)
        return;
    struct lproj *lp = &l->proj[0];
    struct lsock *s = project_sock(l, 0, lp->session_url);
    if (!s)
        return;
    for (size_t i = 0; i < l->ntasks; i++) { /* no result from a killed process */
        struct ltask *t = l->tasks[i];
        if ((t->state == LT_RUNNING || t->state == LT_STOPPED) && t->run.pid > 0 &&
            !t->run.reaped) {
            runner_signal(&t->run, SIGKILL);
            runner_signal(&t->run, SIGCONT);
        }
    }
    uint32_t n = 0;
    for (size_t i = 0; i < l->ntasks; i++)
        n += l->tasks[i]->project == 0 && l->tasks[i]->result && n < MAX_RESULTS;
    uint64_t id = ++l->next_req;
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, WT_LEAVE, id, 2 + (lp->inc[0] != 0));
    wire_put_str(&l->wb, "sid", lp->sid);
    if (lp->inc[0])
        wire_put_str(&l->wb, "inc", lp->inc);
    wire_put_key(&l->wb, "results");
    wire_pack_array(&l->wb, n);
    for (size_t i = 0, k = 0; i < l->ntasks && k < n; i++) {
        const struct ltask *t = l->tasks[i];
        if (t->project == 0 && t->result) {
            msgpack_sbuffer_write(&l->wb.sb, t->result, t->rlen);
            k++;
        }
    }
    int64_t until = loop_now_ms() + (l->cfg->timeout_ms < 3000 ? l->cfg->timeout_ms : 3000);
    bool sent = false, ok = false;
    while (!ok && loop_now_ms() < until) {
        if (!sent && zmq_send(s->sock, l->wb.sb.data, l->wb.sb.size, ZMQ_DONTWAIT) < 0) {
            zmq_poll(NULL, 0, 50); /* not connected: try again shortly */
            continue;
        }
        sent = true;
        zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        struct wire_msg msg;
        struct wire_error err;
        if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) >= 0 &&
            wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &msg, &err) == 0) {
            ok = msg.id == id && msg.type == WT_OK;
            if (msg.id == id && !ok)
                until = 0; /* refused: keep the tasks */
            wire_msg_free(&msg);
        }
        zmq_msg_close(&m);
    }
    if (!ok) {
        log_warnx("the server did not acknowledge LEAVE; tasks are kept for the next start");
        return;
    }
    vcl_project_drop_tasks(l, 0, true);
    lp->welcomed = false;
    lp->sid[0] = '\0';
    vcl_commit(l);
    log_info("left the server");
}

/* The daemon owns the before-sleep hook: the driver's pass runs before its commit. */
static int on_commit(void *arg)
{
    struct live *l = arg;
    pump(l);
    l->unsaved = false;
    int rc = store_commit(l->store);
    if (rc == 0)
        log_finished(l);
    return rc;
}

static void on_reload(void *arg)
{
    struct live *l = arg;
    store_discard(l->store);
}

static void on_fast(struct loop *lp, void *arg)
{
    (void)lp;
    (void)arg; /* wakes the loop so that pump() sees unsent requests and timeouts */
}

int vcl_main(struct client_cfg *cfg, const char *file)
{
    static struct live l;
    int rc = 1;
    l.cfg = cfg;
    l.file = file;
    l.slots = cfg->slots > 0 ? (int)cfg->slots : (int)sysconf(_SC_NPROCESSORS_ONLN);
    gethostname(l.host, sizeof l.host - 1);
    cpu_info(&l);
    wire_buf_init(&l.wb);
    l.single = vcl_single(cfg, file);
    vcl_engine_config(cfg, l.single, &l.ecfg);
    const char *bad = engine_config_check(&l.ecfg);
    if (bad) {
        fprintf(stderr, "gridnode client: configuration error: %s\n", bad);
        return 1;
    }
    if ((l.sigfd = runner_sigchld_fd()) < 0) {
        log_warn("cannot watch child processes");
        return 1;
    }
    if (!(l.loop = loop_new()))
        return 1;
    if (vcl_store_open(&l) < 0)
        goto out;
    struct daemon_opts o = {"client", cfg->control, cfg->state_dir, 0, .security = &cfg->sec};
    struct daemon_ops ops = {vcl_control, on_commit, on_reload, &l, NULL};
    if (!(l.d = daemon_new(l.loop, &o, &ops)))
        goto out;
    l.zctx = daemon_zctx(l.d);
    if (vcl_load(&l, vcl_now()) < 0)
        goto out;
    loop_add_fd(l.loop, l.sigfd, on_sigchld, &l);
    loop_timer(l.loop, (int64_t)(cfg->tick_s * 1000), 1, on_tick, &l);
    loop_timer(l.loop, 50, 1, on_fast, &l);
    kicked = true;
    log_info("volunteer client: %d project(s), %d CPU slot(s), %d GPU type(s), policy %s/%s",
             l.e->nprojects, l.slots, l.e->nptypes - 1, engine_policy_name(l.ecfg.policy),
             engine_fetch_name(l.ecfg.fetch));
    rc = loop_run(l.loop) < 0 ? 1 : 0;
    leave(&l);
    /* leaving: running processes are killed; their tasks rerun at the next start */
    for (size_t i = 0; i < l.ntasks; i++) {
        struct ltask *t = l.tasks[i];
        if ((t->state == LT_RUNNING || t->state == LT_STOPPED) && t->run.pid > 0 &&
            !t->run.reaped) {
            runner_signal(&t->run, SIGKILL);
            runner_signal(&t->run, SIGCONT);
        }
    }
    for (int p = 0; l.e && p < l.e->nprojects; p++) {
        vcl_par_drop(&l, p); /* its parallel processes are killed, as client.c does */
        vcl_project_save(&l, p);
    }
    vcl_commit(&l);
    log_info("client stopped; %zu task(s) kept for the next start", l.ntasks);
out:
    for (size_t i = 0; i < l.ntasks; i++)
        vcl_task_free(l.tasks[i]);
    free(l.tasks);
    if (l.rpc.master)
        vcl_sock_close(&l, &l.rpc.master);
    for (int p = 0; l.e && p < l.e->nprojects; p++)
        for (int k = 0; k < l.proj[p].nsocks; k++)
            vcl_sock_close(&l, &l.proj[p].socks[k]);
    daemon_destroy(&l.d);
    store_close(&l.store);
    engine_destroy(&l.e);
    loop_destroy(&l.loop);
    wire_buf_free(&l.wb);
    free(l.nt);
    free(l.rpc.report_ids);
    free(l.rpc.msg);
    free(l.rpc.report_idx);
    return rc;
}

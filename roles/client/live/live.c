/*
 * live.c - the multi-project volunteer client's start-up and loop (live.h): the
 * driver's context built (config, engine parameters, store, daemon, state loaded), the
 * loop run with its timers, the children reaped, and the way out (a single-cluster
 * host leaves its server with LEAVE; processes are killed, the state committed).
 *
 * One process, several projects, one BOINC-style engine deciding what runs and whom
 * to ask for how much work (the same engine code the emulator drives). Every tick
 * (sched.tick_s, and after every event that changes the task set) the driver makes an
 * engine pass (live_sched.c) before the loop turn's commit. The files below it, from
 * the bottom: live_state.c (store, records), live_task.c (tasks and their processes),
 * live_link.c (connections), live_par.c (parallel jobs, node health), live_status.c
 * (heartbeats), live_rpc.c (RPCs), live_sched.c (the engine pass), live_load.c
 * (start-up state) and live_control.c (the control socket).
 */
#include "roles/client/live/live.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/daemon.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/client/live/ckpt.h"
#include "roles/client/live/cgroup.h"
#include "roles/client/live/sandbox.h"
#include "store/store.h"

#define MAX_RESULTS 1024 /* MAX_BATCH of the wire */

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

static void on_tick(struct loop *lp, void *arg)
{
    (void)lp;
    vcl_kick(arg);
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
        if (!vcl_par_reaped(l, pid, status, &ru))
            vcl_task_reaped(l, pid, status, &ru);
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
        vcl_log_finished(l);
    }
    if (!l->single || !l->e || l->e->nprojects < 1 || !l->proj[0].welcomed)
        return;
    struct lproj *lp = &l->proj[0];
    struct lsock *s = vcl_project_sock(l, 0, lp->session_url);
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
        n += l->tasks[i]->project == 0 && l->tasks[i]->result && !l->tasks[i]->uploading &&
             n < MAX_RESULTS; /* a result waiting for its outputs' upload stays (26) */
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
        if (t->project == 0 && t->result && !t->uploading) {
            msgpack_sbuffer_write(&l->wb.sb, t->result, t->rlen);
            k++;
        }
    }
    int64_t until = loop_now_ms() + (l->cfg->timeout_ms < 3000 ? l->cfg->timeout_ms : 3000);
    bool sent = false, ok = false;
    while (!ok && loop_now_ms() < until) {
        WIRE_CHECK_OUT(l->wb.sb.data, l->wb.sb.size, "LEAVE");
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
    vcl_pump(l);
    l->unsaved = false;
    int rc = store_commit(l->store);
    if (rc == 0)
        vcl_log_finished(l);
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
    (void)arg; /* wakes the loop so that vcl_pump sees unsent requests and timeouts */
}

/*
 * The execution boundary (sandbox.h), set up before any thread exists: its state
 * directory, key files and config file are what tasks must not see. -1 (logged) when
 * it cannot be had and the operator did not opt out (client.sandbox = off).
 */
static int start_sandbox(const struct client_cfg *cfg, const char *file, int slots)
{
    struct curve_conf sec = cfg->sec;
    char err[1024];
    curve_conf_env(&sec);
    char cgroups[1024];
    cgroup_init((uint64_t)cfg->task_memory_mb, (uint64_t)cfg->task_pids_max, cgroups,
                sizeof cgroups);
    struct sandbox_conf c = {cfg->sandbox,
                             cfg->state_dir,
                             {sec.secret_key, sec.server_key, sec.authorized_keys, file},
                             cfg->slot_uids,
                             cgroups};
    if (sandbox_init(&c, err, sizeof err) < 0) {
        log_warnx("%s", err);
        fprintf(stderr, "gridnode client: %s\n", err);
        return -1;
    }
    if (sandbox_slot_uids()) {
        unsigned long a = 0, b = 0;
        sscanf(cfg->slot_uids, "%lu-%lu", &a, &b);
        if (b - a + 1 < (unsigned long)slots)
            log_warnx("client.slot_uids (%s) has fewer uids than client.slots (%d): tasks "
                      "beyond them fail to start",
                      cfg->slot_uids, slots);
    }
    return 0;
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
    if (start_sandbox(cfg, file, l.slots) < 0)
        goto out;
    struct daemon_opts o = {"client", cfg->control, cfg->state_dir, 0, .security = &cfg->sec};
    struct daemon_ops ops = {vcl_control, on_commit, on_reload, &l, NULL};
    if (!(l.d = daemon_new(l.loop, &o, &ops)))
        goto out;
    l.zctx = daemon_zctx(l.d);
    if (vcl_stage_open(&l) < 0 || vcl_load(&l, vcl_now()) < 0) /* the cache first (26) */
        goto out;
    vcl_ckpt_sweep(&l); /* issue 26: once the tasks held are known */
    loop_add_fd(l.loop, l.sigfd, on_sigchld, &l);
    loop_timer(l.loop, (int64_t)(cfg->tick_s * 1000), 1, on_tick, &l);
    loop_timer(l.loop, 50, 1, on_fast, &l);
    l.kicked = true;
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
        if (t->state == LT_RUNNING || t->state == LT_STOPPED) /* its checkpoint stays */
            ckpt_keep(l.cfg->state_dir, t->run.workdir, t->job, t->idx, t->issue);
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
    vcl_stage_close(&l); /* issue 26: its sockets before the context goes */
    cgroup_shutdown();   /* every task's cgroup went with it */
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

/*
 * live_control.c - the multi-project client's control socket (live.h; a ROUTER through
 * daemon/daemon.c, client.control): CLIENT_STATUS, ATTACH, DETACH (docs/wire.md 6.15).
 * An attach of a project attached already updates it (as BOINC's); a detach stops and
 * forgets the project's tasks (their results are not reported, as boinccmd
 * --project_detach) and rebuilds the engine without it.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "lib/log.h"

/*
 * Detaches project p: its tasks are stopped and forgotten with their results, its
 * record deleted, and the engine rebuilt without it (the others keep their accounting;
 * their processes are suspended and the next decision resumes what it wants).
 */
int vcl_project_detach(struct live *l, int p)
{
    struct engine *old = l->e;
    double now = vcl_now();
    vcl_par_drop(l, p);                  /* its parallel processes are killed */
    vcl_project_drop_tasks(l, p, false); /* the engine is rebuilt below */
    vcl_project_delete(l, old->projects[p].name);
    for (int k = 0; k < l->proj[p].nsocks; k++)
        vcl_sock_close(l, &l->proj[p].socks[k]);
    if (l->rpc.active) { /* the engine it belongs to goes: a late reply is stale */
        if (l->rpc.master)
            vcl_sock_close(l, &l->rpc.master);
        l->rpc.active = false;
        l->rpc.sock = NULL;
    }
    /* the new engine: same types, the other projects with their state, their tasks */
    l->e = NULL;
    if (vcl_engine_new(l) < 0) {
        l->e = old;
        return -1;
    }
    for (int t = 1; t < old->nptypes; t++)
        engine_ptype_add(l->e, old->ptypes[t].name, old->ptypes[t].ninstances,
                         old->ptypes[t].flops);
    for (int k = 0, n = 0; k < old->nprojects; k++) {
        if (k == p)
            continue;
        const struct engine_project *q = &old->projects[k];
        const char *list[ENGINE_MAX_ENDPOINTS];
        for (int j = 0; j < q->nendpoints; j++)
            list[j] = q->endpoints[j];
        engine_project_add(l->e, q->name, q->share, list, q->nendpoints, q->master);
        l->proj[n++] = l->proj[k];
    }
    memset(&l->proj[old->nprojects - 1], 0, sizeof l->proj[0]);
    for (int k = 0; k < l->e->nprojects; k++)
        for (int j = 0; j < l->proj[k].nsocks; j++)
            if (l->proj[k].socks[j])
                l->proj[k].socks[j]->project = k;
    size_t n = l->ntasks;
    struct ltask **list = l->tasks;
    l->tasks = NULL;
    l->ntasks = l->captasks = 0;
    for (size_t i = 0; i < n; i++) {
        struct ltask *t = list[i];
        if (t->project > p)
            t->project--;
        if (t->state == LT_RUNNING) {
            runner_signal(&t->run, SIGSTOP);
            t->run_ms += loop_now_ms() - t->episode_ms;
            t->limit_left_ms -= loop_now_ms() - t->episode_ms;
            t->episode_ms = 0;
            loop_timer_cancel(l->loop, t->limit_timer);
            t->limit_timer = 0;
            t->state = LT_STOPPED;
        }
        int st = t->state;
        void *res = t->result;
        if (st != LT_DONE)
            t->result = NULL;
        if (vcl_task_adopt(l, t) < 0) {
            vcl_task_free(t);
            continue;
        }
        t->result = res;
        t->state = st;
        long ei = vcl_engine_index(l, t);
        if (ei >= 0)
            l->e->tasks[ei].elapsed = l->e->tasks[ei].checkpoint_elapsed =
                (double)t->run_ms / 1000.0;
    }
    free(list);
    for (int k = 0, j = 0; k < old->nprojects; k++) {
        if (k == p)
            continue;
        l->e->projects[j] = old->projects[k];
        j++;
    }
    engine_destroy(&old);
    engine_tick(l->e, now, 1);
    return 0;
}

static void state_reply(struct live *l, uint64_t id, struct wire_buf *w)
{
    struct engine *e = l->e;
    double now = vcl_now();
    double prio[LIVE_MAX_PROJECTS];
    engine_rr_simulate(e, now);
    engine_priorities(e, NULL, prio);
    wire_begin(w, WT_CLIENT_STATE, id, 9);
    /* issue 26: input files fetched from the servers since start (live_stage.c) */
    wire_put_u64(w, "files_fetched", l->files_fetched);
    wire_put_u64(w, "bytes_fetched", l->bytes_fetched);
    wire_put_str(w, "policy", l->ecfg.policy == ENGINE_POLICY_REC ? "rec" : "debt2004");
    wire_put_str(w, "health", l->health.sick); /* "" = healthy (live_par.c) */
    /* the engine's CPU time since start (tick, schedule, poll): issue 11 item 12 */
    wire_put_f64(w, "sched_cpu_s", l->sched_cpu_s);
    wire_put_u64(w, "engine_calls", (uint64_t)l->engine_calls);
    wire_put_key(w, "projects");
    wire_pack_array(w, (uint32_t)e->nprojects);
    for (int p = 0; p < e->nprojects; p++) {
        const struct engine_project *q = &e->projects[p];
        const struct lproj *lp = &l->proj[p];
        double cpu_s = 0;
        wire_pack_map(w, 18);
        wire_put_str(w, "name", q->name);
        wire_put_f64(w, "run_s", lp->run_s);
        wire_put_f64(w, "share", q->share);
        wire_put_f64(w, "rec", q->rec);
        wire_put_f64(w, "priority", prio[p]);
        wire_put_u64(w, "failures", (uint64_t)q->nrpc_failures);
        wire_put_f64(w, "backoff_s", fmax(0, q->backoff_until - now));
        wire_put_f64(w, "next_rpc_s", fmax(0, q->min_rpc_time - now));
        wire_put_key(w, "endpoints");
        wire_pack_array(w, (uint32_t)q->nendpoints);
        for (int k = 0; k < q->nendpoints; k++)
            wire_pack_str(w, q->endpoints[k]);
        wire_put_str(w, "master", q->master);
        wire_put_bool(w, "master_pending", q->master_pending != 0);
        wire_put_str(w, "session", lp->welcomed ? lp->session_url : "");
        wire_put_u64(w, "rpcs_ok", q->rpcs_ok);
        wire_put_u64(w, "rpcs_failed", q->rpcs_failed);
        wire_put_u64(w, "tasks_got", lp->tasks_got);
        wire_put_u64(w, "results_reported", lp->results_sent);
        for (size_t i = 0; i < l->ntasks; i++)
            if (l->tasks[i]->project == p)
                cpu_s += (double)l->tasks[i]->run_ms / 1000.0;
        wire_put_f64(w, "est_task_s", lp->est_avg > 0 ? lp->est_avg : l->cfg->default_est_s);
        wire_put_key(w, "rsc_backoff");
        wire_pack_map(w, (uint32_t)e->nptypes);
        for (int t = 0; t < e->nptypes; t++) {
            wire_pack_str(w, e->ptypes[t].name);
            msgpack_pack_double(&w->pk, fmax(0, q->rsc[t].backoff_until - now));
        }
        (void)cpu_s;
    }
    wire_put_key(w, "tasks");
    wire_pack_array(w, (uint32_t)e->ntasks);
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *et = &e->tasks[i];
        const struct ltask *t = vcl_task_of(l, i);
        static const char *const st[] = {"queued", "running", "suspended", "done"};
        wire_pack_map(w, 12);
        wire_put_str(w, "project", e->projects[et->project].name);
        wire_put_u64(w, "job", t->job);
        wire_put_u64(w, "idx", t->idx);
        wire_put_str(w, "state", st[t->state]);
        wire_put_str(w, "ptype", e->ptypes[et->ptype].name);
        wire_put_f64(w, "usage", et->usage);
        wire_put_f64(w, "deadline", et->deadline);
        wire_put_f64(w, "elapsed_s", et->elapsed);
        wire_put_f64(w, "remaining_s", t->state == LT_DONE ? 0 : engine_task_remaining(et));
        wire_put_bool(w, "deadline_miss", et->deadline_miss != 0);
        wire_put_f64(w, "finish", et->rr_finish);
        char glist[LIVE_MAX_GPU * 4] = "";
        for (int k = 0; k < t->ngpu; k++)
            snprintf(glist + strlen(glist), sizeof glist - strlen(glist), "%s%d", k ? "," : "",
                     t->gpu[k]);
        wire_put_str(w, "gpus", glist);
    }
    wire_put_key(w, "ptypes");
    wire_pack_array(w, (uint32_t)e->nptypes);
    for (int t = 0; t < e->nptypes; t++) {
        int busy = 0;
        for (size_t k = 0; k < e->nrunning; k++)
            busy +=
                e->tasks[e->running[k]].ptype == t ? (int)ceil(e->tasks[e->running[k]].usage) : 0;
        wire_pack_map(w, 8);
        wire_put_str(w, "type", e->ptypes[t].name);
        wire_put_u64(w, "instances", (uint64_t)e->ptypes[t].ninstances);
        wire_put_u64(w, "ranks", (uint64_t)e->ptypes[t].reserved); /* parallel ranks */
        wire_put_u64(w, "busy", (uint64_t)busy);
        wire_put_f64(w, "gflops", e->ptypes[t].flops / 1e9);
        wire_put_f64(w, "shortfall", e->rr[t].shortfall);
        wire_put_f64(w, "saturated", e->rr[t].saturated);
        wire_put_f64(w, "queued", e->rr[t].queued);
    }
}

static int find_project(const struct live *l, const char *name)
{
    for (int p = 0; p < l->e->nprojects; p++)
        if (!strcmp(l->e->projects[p].name, name))
            return p;
    return -1;
}

static void do_attach(struct live *l, const struct wire_msg *m, struct wire_buf *w)
{
    char name[ENGINE_NAME_MAX], master[ENGINE_URL_MAX];
    char eps[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    const char *list[ENGINE_MAX_ENDPOINTS];
    int n = 0;
    wire_get_strbuf(m->root, "project", name, sizeof name);
    wire_get_strbuf(m->root, "master", master, sizeof master);
    double share = wire_get_f64(m->root, "share", 100);
    const msgpack_object *e = wire_get(m->root, "endpoints");
    for (uint32_t k = 0; e && k < e->via.array.size && n < ENGINE_MAX_ENDPOINTS; k++) {
        const msgpack_object *s = &e->via.array.ptr[k];
        if (s->via.str.size == 0 || s->via.str.size >= ENGINE_URL_MAX ||
            memchr(s->via.str.ptr, 0, s->via.str.size)) {
            wire_error_msg(w, m->id, WE_INVALID, "endpoint %u is empty or too long", k + 1);
            return;
        }
        memcpy(eps[n], s->via.str.ptr, s->via.str.size);
        eps[n][s->via.str.size] = '\0';
        list[n] = eps[n];
        n++;
    }
    if (!name[0] || strpbrk(name, " \t\n[]")) {
        wire_error_msg(w, m->id, WE_INVALID, "a project name is 1-63 characters without spaces");
        return;
    }
    if (!(share > 0) || !isfinite(share) || share > 1e9) {
        wire_error_msg(w, m->id, WE_INVALID, "share must be a number > 0");
        return;
    }
    if (n == 0 && !master[0]) {
        wire_error_msg(w, m->id, WE_INVALID, "give scheduler endpoints, a master endpoint or both");
        return;
    }
    int p = find_project(l, name);
    if (p >= 0) { /* attached already: new settings (BOINC: attach = update) */
        struct engine_project *q = &l->e->projects[p];
        q->share = share;
        if (n > 0) {
            engine_master_done(l->e, vcl_now(), p, 1, list, n);
            vcl_project_sockets(l, p);
        }
        snprintf(q->master, sizeof q->master, "%s", master);
        log_info("project %s updated: share %g, %d endpoint(s)", name, share, q->nendpoints);
    } else {
        if (n == 0) { /* master only: read it first */
            list[0] = master;
            n = 0;
        }
        p = vcl_project_add(l, name, share, list, n, master);
        if (p < 0) {
            wire_error_msg(w, m->id, WE_INVALID, "cannot attach %s: %s", name,
                           errno == ENOSPC ? "too many projects" : "bad endpoint or share");
            return;
        }
        if (n == 0)
            l->e->projects[p].master_pending = 1;
        log_info("project %s attached: share %g, %d endpoint(s)%s%s", name, share, n,
                 master[0] ? ", master " : "", master);
    }
    vcl_project_save(l, p);
    wire_begin(w, WT_OK, m->id, 0);
}

void vcl_control(void *arg, const struct wire_msg *m, const char *peer, struct wire_buf *w)
{
    struct live *l = arg;
    (void)peer;
    switch (m->type) {
    case WT_CLIENT_STATUS:
        state_reply(l, m->id, w);
        break;
    case WT_ATTACH:
        do_attach(l, m, w);
        break;
    case WT_DETACH: {
        char name[ENGINE_NAME_MAX];
        wire_get_strbuf(m->root, "project", name, sizeof name);
        int p = find_project(l, name);
        if (p < 0) {
            wire_error_msg(w, m->id, WE_NOT_FOUND, "no project %s is attached", name);
            return;
        }
        if (vcl_project_detach(l, p) < 0) {
            wire_error_msg(w, m->id, WE_STORAGE, "out of memory; try again");
            return;
        }
        log_info("project %s detached", name);
        wire_begin(w, WT_OK, m->id, 0);
        break;
    }
    default:
        wire_error_msg(w, m->id, WE_TYPE,
                       "a client's control socket takes CLIENT_STATUS, ATTACH "
                       "and DETACH");
    }
}

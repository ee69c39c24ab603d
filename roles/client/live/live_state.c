/*
 * live_state.c - the bottom of the multi-project client (live.h): what it keeps in
 * LMDB, its records, and the flags every other part raises.
 *
 * Tables: "projects" (key: name) holds each attached project's share, endpoints,
 * master, session and the engine's accounting (REC, exp_avg_cpu, failures, backoffs,
 * per-type backoffs), rewritten after every RPC and at least every 10 s; "ltasks" (key:
 * the local task id) holds every task from its arrival until its result was
 * acknowledged, the result included once it finished. So after kill -9 nothing
 * acknowledged is lost (a task that was running restarts from the beginning: live
 * processes have no checkpoints), and nothing acknowledged is reported again. The
 * records are read back at start-up by live_load.c.
 *
 * Also here: the engine pass asked for (vcl_kick), a host fault (vcl_sick), the clock
 * and the engine's index of a task, which every file above uses.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "roles/client/live/stage.h"
#include "store/store.h"

static const struct store_table live_tables[] = {
    {"tasks", STORE_KEY_U64_U32}, {"ltasks", STORE_KEY_U64}, {"projects", STORE_KEY_STR}, {NULL}};

int vcl_store_open(struct live *l)
{
    char err[512], work[CONFIG_STR_MAX + 8];
    snprintf(work, sizeof work, "%s/work", l->cfg->state_dir);
    if (fs_mkdir_p(work) < 0) {
        log_warn("cannot create %s", work);
        return -1;
    }
    if (daemon_lock_state_dir(l->cfg->state_dir, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode client: %s\n", err);
        return -1;
    }
    struct store_opts so = {"client", live_tables, (enum store_sync)l->cfg->sync,
                            (size_t)l->cfg->map_mb << 20, false};
    if (!(l->store = store_open(l->cfg->state_dir, &so, err, sizeof err))) {
        log_warnx("%s", err);
        return -1;
    }
    l->t_tasks = store_table(l->store, "ltasks");
    l->t_projects = store_table(l->store, "projects");
    l->t_meta = store_table(l->store, "meta");
    if (!l->single) { /* the next start stays a volunteer of its projects (vcl_single) */
        char mark[CONFIG_STR_MAX + 16];
        snprintf(mark, sizeof mark, "%s/projects", l->cfg->state_dir);
        FILE *f = fopen(mark, "w");
        if (f) {
            fputs("this state directory belongs to a multi-project client\n", f);
            fclose(f);
        }
    }
    return 0;
}

void vcl_commit(struct live *l)
{
    if (store_commit(l->store) < 0) {
        char why[CONFIG_STR_MAX + 64];
        log_warn("cannot save the client state in %s", l->cfg->state_dir);
        snprintf(why, sizeof why, "cannot write its state in %s: %s", l->cfg->state_dir,
                 strerror(errno));
        vcl_sick(l, why);
    }
}

void vcl_kick(struct live *l)
{
    l->kicked = true;
}

void vcl_sick(struct live *l, const char *why)
{
    if (health_sick(&l->health, why, loop_now_ms()))
        vcl_kick(l);
}

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

/* A new engine of this host's CPU (l->e; the caller adds GPU types and projects). */
int vcl_engine_new(struct live *l)
{
    uint64_t seed = (uint64_t)getpid() ^ (uint64_t)wall_now_ms();
    l->e = engine_new(&l->ecfg, l->slots, (l->cfg->cpu_gflops > 0 ? l->cfg->cpu_gflops : 1) * 1e9,
                      seed);
    return l->e ? 0 : -1;
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
    stage_files_free(&t->files);
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
    if (stage_files_take(&t->files, m, t->bad, sizeof t->bad) < 0)
        goto fail; /* issue 26: inputs and outputs */
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

/* A task's record (key: its local id): what vcl_task_from_map reads back. */
static int encode_task(const void *rec, struct wire_buf *wb)
{
    const struct ltask *t = rec;
    uint32_t nenv = 0;
    while (t->renv.env && t->renv.env[nenv])
        nenv++;
    /* env, chdir and network too: a rerun after a restart starts as the first run did */
    wire_pack_map(wb, 13 + (t->result != NULL) + (nenv > 0) + (t->renv.cwd != NULL) +
                          t->renv.network + stage_files_nfields(t->files));
    stage_files_pack(t->files, wb); /* issue 26 */
    wire_put_str(wb, "project", t->l->e->projects[t->project].name);
    wire_put_u64(wb, "job", t->job);
    wire_put_u64(wb, "idx", t->idx);
    wire_put_u64(wb, "issue", t->issue);
    wire_put_u64(wb, "limit_s", t->limit_s);
    wire_put_bool(wb, "shell", t->shell);
    wire_put_strv(wb, "argv", t->argv, t->argc);
    wire_put_bin(wb, "stdin", t->in ? t->in : "", t->inlen);
    wire_put_str(wb, "ptype", t->ptype);
    wire_put_u64(wb, "gpus", t->gpus);
    wire_put_f64(wb, "est_s", t->est_s);
    wire_put_f64(wb, "deadline", t->deadline);
    wire_put_f64(wb, "received", t->received);
    if (t->result)
        wire_put_bin(wb, "result", t->result, t->rlen);
    if (nenv > 0)
        wire_put_strv(wb, "env", t->renv.env, nenv);
    if (t->renv.cwd)
        wire_put_str(wb, "chdir", t->renv.cwd);
    if (t->renv.network)
        wire_put_bool(wb, "network", true);
    return 0;
}

void vcl_task_save(struct live *l, const struct ltask *t)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    record_save_u64(l->store, l->t_tasks, t->id, t, encode_task, &wb);
    wire_buf_free(&wb);
}

void vcl_task_forget(struct live *l, const struct ltask *t)
{
    uint8_t key[8];
    store_key_u64(key, t->id);
    store_del(l->store, l->t_tasks, key, sizeof key);
}

/* ---- projects ---- */

/* Project p of l, as record_save hands it to encode_project. */
struct proj_rec {
    const struct live *l;
    int p;
};

/* A project's record (key: its name): what vcl_project_restore reads back. */
static int encode_project(const void *rec, struct wire_buf *wb)
{
    const struct live *l = ((const struct proj_rec *)rec)->l;
    int p = ((const struct proj_rec *)rec)->p;
    const struct engine_project *q = &l->e->projects[p];
    const struct lproj *lp = &l->proj[p];
    wire_pack_map(wb, 14);
    wire_put_f64(wb, "share", q->share);
    wire_put_key(wb, "endpoints");
    wire_pack_array(wb, (uint32_t)q->nendpoints);
    for (int k = 0; k < q->nendpoints; k++)
        wire_pack_str(wb, q->endpoints[k]);
    wire_put_str(wb, "master", q->master);
    wire_put_f64(wb, "rec", q->rec);
    wire_put_f64(wb, "exp_avg_cpu", q->exp_avg_cpu);
    wire_put_f64(wb, "min_rpc_time", q->min_rpc_time);
    wire_put_f64(wb, "backoff_until", q->backoff_until);
    wire_put_u64(wb, "nrpc_failures", (uint64_t)q->nrpc_failures);
    wire_put_u64(wb, "master_pending", (uint64_t)q->master_pending);
    wire_put_str(wb, "sid", lp->sid);
    wire_put_str(wb, "inc", lp->inc);
    wire_put_str(wb, "session_url", lp->session_url);
    wire_put_f64(wb, "est_avg", lp->est_avg);
    wire_put_key(wb, "rsc");
    wire_pack_array(wb, (uint32_t)l->e->nptypes);
    for (int t = 0; t < l->e->nptypes; t++) {
        wire_pack_map(wb, 6);
        wire_put_str(wb, "type", l->e->ptypes[t].name);
        wire_put_f64(wb, "dcf", lp->dcf[t]);
        wire_put_f64(wb, "interval", q->rsc[t].backoff_interval);
        wire_put_f64(wb, "until", q->rsc[t].backoff_until);
        wire_put_f64(wb, "latency", q->rsc[t].latency);
        wire_put_f64(wb, "job_work", q->rsc[t].job_work);
    }
    return 0;
}

void vcl_project_save(struct live *l, int p)
{
    const char *name = l->e->projects[p].name;
    struct proj_rec r = {l, p};
    struct wire_buf wb;
    wire_buf_init(&wb);
    record_save(l->store, l->t_projects, name, strlen(name), &r, encode_project, &wb);
    wire_buf_free(&wb);
}

void vcl_project_delete(struct live *l, const char *name)
{
    store_del(l->store, l->t_projects, name, strlen(name));
}

/* Project p's accounting and session from its stored record m (live_load.c). */
void vcl_project_restore(struct live *l, int p, const msgpack_object *m)
{
    struct engine_project *q = &l->e->projects[p];
    struct lproj *lp = &l->proj[p];
    q->rec = wire_get_f64(m, "rec", 0);
    q->exp_avg_cpu = wire_get_f64(m, "exp_avg_cpu", 0);
    q->min_rpc_time = wire_get_f64(m, "min_rpc_time", 0);
    q->backoff_until = wire_get_f64(m, "backoff_until", 0);
    q->nrpc_failures = (int)wire_get_u64(m, "nrpc_failures", 0);
    q->master_pending = (int)wire_get_u64(m, "master_pending", 0);
    wire_get_strbuf(m, "sid", lp->sid, sizeof lp->sid);
    wire_get_strbuf(m, "inc", lp->inc, sizeof lp->inc);
    wire_get_strbuf(m, "session_url", lp->session_url, sizeof lp->session_url);
    lp->est_avg = wire_get_f64(m, "est_avg", 0);
    const msgpack_object *rsc = wire_get(m, "rsc");
    for (uint32_t k = 0; rsc && rsc->type == MSGPACK_OBJECT_ARRAY && k < rsc->via.array.size; k++) {
        const msgpack_object *r = &rsc->via.array.ptr[k];
        char type[ENGINE_NAME_MAX];
        wire_get_strbuf(r, "type", type, sizeof type);
        int t = engine_ptype_find(l->e, type);
        if (t < 0)
            continue;
        q->rsc[t].backoff_interval = wire_get_f64(r, "interval", 0);
        q->rsc[t].backoff_until = wire_get_f64(r, "until", 0);
        q->rsc[t].latency = wire_get_f64(r, "latency", 0);
        q->rsc[t].job_work = wire_get_f64(r, "job_work", 0);
        double f = wire_get_f64(r, "dcf", 0);
        lp->dcf[t] = isfinite(f) && f > 0 ? f : 0;
    }
}

/* A text record of the meta table ("" when absent or unreadable). */
void vcl_meta_str(struct live *l, const char *key, char *buf, size_t cap)
{
    void *val;
    size_t n;
    buf[0] = '\0';
    if (store_get(l->store, l->t_meta, key, strlen(key), &val, &n) != 0)
        return;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (wire_precheck(val, n) == 0 &&
        msgpack_unpack_next(&up, val, n, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_STR && up.data.via.str.size < cap &&
        !memchr(up.data.via.str.ptr, 0, up.data.via.str.size)) {
        memcpy(buf, up.data.via.str.ptr, up.data.via.str.size);
        buf[up.data.via.str.size] = '\0';
    }
    msgpack_unpacked_destroy(&up);
    free(val);
}

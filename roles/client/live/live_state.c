/*
 * live_state.c - what the multi-project client keeps (LMDB) and its control socket.
 *
 * Tables: "projects" (key: name) holds each attached project's share, endpoints,
 * master, session and the engine's accounting (REC, exp_avg_cpu, failures, backoffs,
 * per-type backoffs), rewritten after every RPC and at least every 10 s; "ltasks" (key:
 * the local task id) holds every task from its arrival until its result was
 * acknowledged, the result included once it finished. So after kill -9 nothing
 * acknowledged is lost (a task that was running restarts from the beginning: live
 * processes have no checkpoints), and nothing acknowledged is reported again.
 *
 * Control (a ROUTER through daemon/daemon.c, client.control): CLIENT_STATUS, ATTACH,
 * DETACH (docs/wire.md 6.15). A detach stops and forgets the project's tasks (their
 * results are not reported, as boinccmd --project_detach) and rebuilds the engine.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "store/store.h"

struct lsock *vcl_sock_open(struct live *l, int p, const char *url);
void vcl_sock_close(struct live *l, struct lsock **sp);

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

void vcl_task_save(struct live *l, const struct ltask *t)
{
    struct wire_buf wb;
    uint8_t key[8];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 13 + (t->result != NULL));
    wire_put_str(&wb, "project", l->e->projects[t->project].name);
    wire_put_u64(&wb, "job", t->job);
    wire_put_u64(&wb, "idx", t->idx);
    wire_put_u64(&wb, "issue", t->issue);
    wire_put_u64(&wb, "limit_s", t->limit_s);
    wire_put_bool(&wb, "shell", t->shell);
    wire_put_strv(&wb, "argv", t->argv, t->argc);
    wire_put_bin(&wb, "stdin", t->in ? t->in : "", t->inlen);
    wire_put_str(&wb, "ptype", t->ptype);
    wire_put_u64(&wb, "gpus", t->gpus);
    wire_put_f64(&wb, "est_s", t->est_s);
    wire_put_f64(&wb, "deadline", t->deadline);
    wire_put_f64(&wb, "received", t->received);
    if (t->result)
        wire_put_bin(&wb, "result", t->result, t->rlen);
    store_key_u64(key, t->id);
    store_put(l->store, l->t_tasks, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

void vcl_task_forget(struct live *l, const struct ltask *t)
{
    uint8_t key[8];
    store_key_u64(key, t->id);
    store_del(l->store, l->t_tasks, key, sizeof key);
}

void vcl_project_save(struct live *l, int p)
{
    const struct engine_project *q = &l->e->projects[p];
    const struct lproj *lp = &l->proj[p];
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 14);
    wire_put_f64(&wb, "share", q->share);
    wire_put_key(&wb, "endpoints");
    wire_pack_array(&wb, (uint32_t)q->nendpoints);
    for (int k = 0; k < q->nendpoints; k++)
        wire_pack_str(&wb, q->endpoints[k]);
    wire_put_str(&wb, "master", q->master);
    wire_put_f64(&wb, "rec", q->rec);
    wire_put_f64(&wb, "exp_avg_cpu", q->exp_avg_cpu);
    wire_put_f64(&wb, "min_rpc_time", q->min_rpc_time);
    wire_put_f64(&wb, "backoff_until", q->backoff_until);
    wire_put_u64(&wb, "nrpc_failures", (uint64_t)q->nrpc_failures);
    wire_put_u64(&wb, "master_pending", (uint64_t)q->master_pending);
    wire_put_str(&wb, "sid", lp->sid);
    wire_put_str(&wb, "inc", lp->inc);
    wire_put_str(&wb, "session_url", lp->session_url);
    wire_put_f64(&wb, "est_avg", lp->est_avg);
    wire_put_key(&wb, "rsc");
    wire_pack_array(&wb, (uint32_t)l->e->nptypes);
    for (int t = 0; t < l->e->nptypes; t++) {
        wire_pack_map(&wb, 6);
        wire_put_str(&wb, "type", l->e->ptypes[t].name);
        wire_put_f64(&wb, "dcf", lp->dcf[t]);
        wire_put_f64(&wb, "interval", q->rsc[t].backoff_interval);
        wire_put_f64(&wb, "until", q->rsc[t].backoff_until);
        wire_put_f64(&wb, "latency", q->rsc[t].latency);
        wire_put_f64(&wb, "job_work", q->rsc[t].job_work);
    }
    store_put(l->store, l->t_projects, q->name, strlen(q->name), wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

void vcl_project_delete(struct live *l, const char *name)
{
    store_del(l->store, l->t_projects, name, strlen(name));
}

/* Adds a project to the engine and the driver; its index, or -1 (errno). */
int vcl_project_add(struct live *l, const char *name, double share, const char *const *eps,
                    int neps, const char *master)
{
    if (l->e->nprojects >= LIVE_MAX_PROJECTS) {
        errno = ENOSPC;
        return -1;
    }
    int p = engine_project_add(l->e, name, share, eps, neps, master);
    if (p < 0)
        return -1;
    memset(&l->proj[p], 0, sizeof l->proj[p]);
    vcl_project_sockets(l, p);
    return p;
}

/* ---- loading ---- */

static void restore_project(struct live *l, int p, const msgpack_object *m)
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

struct loadctx {
    struct live *l;
    int phase; /* 0: projects, 1: tasks, 2: the single-cluster client's old tasks */
    struct engine_project saved[LIVE_MAX_PROJECTS];
    int project;   /* phase 2: the server's project */
    uint8_t *keys; /* phase 2: keys of the old records, deleted once moved */
    size_t nkeys, capkeys;
};

static int grow_keys(struct loadctx *c)
{
    size_t cap = c->capkeys ? 2 * c->capkeys : 64;
    uint8_t *k = realloc(c->keys, 12 * cap);
    if (!k)
        return -1;
    c->keys = k;
    c->capkeys = cap;
    return 0;
}

static int load_record(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct loadctx *c = arg;
    struct live *l = c->l;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (wire_precheck(val, vlen) != 0 ||
        msgpack_unpack_next(&up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        log_warnx("a damaged %s record in the store is skipped", c->phase ? "task" : "project");
        goto out;
    }
    const msgpack_object *m = &up.data;
    if (c->phase == 2) { /* (job, idx) -> the old client's record: a task of the server */
        if (klen != 12 || (c->nkeys == c->capkeys && grow_keys(c) < 0))
            goto out;
        struct ltask *t = vcl_task_from_map(l, c->project, m);
        if (!t)
            goto out;
        t->id = ++l->next_id;
        t->received = vcl_now();
        size_t rl;
        const void *res = wire_get_bin(m, "result", &rl);
        if (res && rl && (t->result = malloc(rl))) {
            memcpy(t->result, res, rl);
            t->rlen = rl;
        }
        if (vcl_task_adopt(l, t) < 0) {
            vcl_task_free(t);
            goto out;
        }
        vcl_task_save(l, t);
        memcpy(c->keys + 12 * c->nkeys++, key, 12);
    } else if (c->phase == 0) {
        char name[ENGINE_NAME_MAX], master[ENGINE_URL_MAX];
        char eps[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
        const char *list[ENGINE_MAX_ENDPOINTS];
        int n = 0;
        if (klen == 0 || klen >= sizeof name)
            goto out;
        memcpy(name, key, klen);
        name[klen] = '\0';
        const msgpack_object *e = wire_get(m, "endpoints");
        for (uint32_t k = 0; e && e->type == MSGPACK_OBJECT_ARRAY && k < e->via.array.size &&
                             n < ENGINE_MAX_ENDPOINTS;
             k++) {
            const msgpack_object *s = &e->via.array.ptr[k];
            if (s->type != MSGPACK_OBJECT_STR || s->via.str.size >= ENGINE_URL_MAX)
                continue;
            memcpy(eps[n], s->via.str.ptr, s->via.str.size);
            eps[n][s->via.str.size] = '\0';
            list[n] = eps[n];
            n++;
        }
        wire_get_strbuf(m, "master", master, sizeof master);
        int p = vcl_project_add(l, name, wire_get_f64(m, "share", 100), list, n, master);
        if (p < 0) {
            log_warn("project %s in the store cannot be attached", name);
            goto out;
        }
        restore_project(l, p, m);
    } else {
        char pname[ENGINE_NAME_MAX];
        wire_get_strbuf(m, "project", pname, sizeof pname);
        int p = -1;
        for (int k = 0; k < l->e->nprojects; k++)
            if (!strcmp(l->e->projects[k].name, pname))
                p = k;
        if (p < 0 || klen != 8)
            goto out;
        struct ltask *t = vcl_task_from_map(l, p, m);
        if (!t)
            goto out;
        const uint8_t *kb = key;
        for (int k = 0; k < 8; k++)
            t->id = t->id << 8 | kb[k];
        if (t->id > l->next_id)
            l->next_id = t->id;
        t->received = wire_get_f64(m, "received", vcl_now());
        size_t rl;
        const void *res = wire_get_bin(m, "result", &rl);
        if (res && rl && (t->result = malloc(rl))) {
            memcpy(t->result, res, rl);
            t->rlen = rl;
        }
        if (vcl_task_adopt(l, t) < 0)
            vcl_task_free(t);
    }
out:
    msgpack_unpacked_destroy(&up);
    return 0;
}

/* ini handler for [project NAME] and [gpu NAME] sections of the config file. */
struct inictx {
    struct live *l;
    int phase; /* 0: gpus, 1: projects */
    char cur[ENGINE_NAME_MAX];
    double share, count, gflops;
    char eps[1024], master[ENGINE_URL_MAX];
    char err[300];
};

static void ini_flush(struct inictx *c)
{
    struct live *l = c->l;
    if (!c->cur[0])
        return;
    if (c->phase == 0) {
        if (engine_ptype_add(l->e, c->cur, (int)c->count, c->gflops * 1e9) < 0 && !c->err[0])
            snprintf(c->err, sizeof c->err, "[gpu %s]: cannot add (count 1..%d, at most 7 types)",
                     c->cur, LIVE_MAX_GPU);
    } else {
        bool known = false;
        for (int k = 0; k < l->e->nprojects; k++)
            known |= !strcmp(l->e->projects[k].name, c->cur);
        if (!known) { /* a project in the store keeps its stored (attached) settings */
            char eps[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
            const char *list[ENGINE_MAX_ENDPOINTS];
            int n = 0;
            char *save = NULL, *tok = strtok_r(c->eps, ", ", &save);
            for (; tok && n < ENGINE_MAX_ENDPOINTS; tok = strtok_r(NULL, ", ", &save)) {
                snprintf(eps[n], sizeof eps[n], "%s", tok);
                list[n] = eps[n];
                n++;
            }
            int p = vcl_project_add(l, c->cur, c->share, list, n, c->master);
            if (p < 0 && !c->err[0])
                snprintf(c->err, sizeof c->err,
                         "[project %s]: needs share > 0 and endpoints or a master (%s)", c->cur,
                         strerror(errno));
            else if (p >= 0)
                vcl_project_save(l, p);
        }
    }
    c->cur[0] = '\0';
}

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
    struct inictx *c = user;
    const char *kind = c->phase == 0 ? "gpu " : "project ";
    size_t kl = strlen(kind);
    if (strncmp(section, kind, kl) != 0)
        return 1;
    if (strcmp(section + kl, c->cur)) {
        ini_flush(c);
        snprintf(c->cur, sizeof c->cur, "%s", section + kl);
        c->share = 100;
        c->count = 1;
        c->gflops = 1;
        c->eps[0] = c->master[0] = '\0';
    }
    char *end;
    double d = strtod(value, &end);
    bool num = end != value && !*end && isfinite(d);
    if (!strcmp(name, "share") && num && d > 0)
        c->share = d;
    else if (!strcmp(name, "count") && num && d >= 1 && d <= LIVE_MAX_GPU)
        c->count = d;
    else if (!strcmp(name, "gflops") && num && d > 0)
        c->gflops = d;
    else if (!strcmp(name, "endpoints"))
        snprintf(c->eps, sizeof c->eps, "%s", value);
    else if (!strcmp(name, "master"))
        snprintf(c->master, sizeof c->master, "%s", value);
    else if (!c->err[0])
        snprintf(c->err, sizeof c->err, "[%s] %s = %s: bad value", section, name, value);
    return 1;
}

static int engine_fresh(struct live *l)
{
    uint64_t seed = (uint64_t)getpid() ^ (uint64_t)wall_now_ms();
    l->e = engine_new(&l->ecfg, l->slots, (l->cfg->cpu_gflops > 0 ? l->cfg->cpu_gflops : 1) * 1e9,
                      seed);
    return l->e ? 0 : -1;
}

/*
 * A config with only client.server: one project named after the server (its endpoint
 * as written, cut to the last ENGINE_NAME_MAX - 1 bytes), share 100, the server its
 * only endpoint. A stored project of that name keeps its accounting and gets the
 * endpoint back if it was changed; projects attached at run time stay attached.
 */
/* A text record of the meta table ("" when absent or unreadable). */
static void meta_str(struct live *l, const char *key, char *buf, size_t cap)
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

static int server_project(struct live *l)
{
    const char *url = l->cfg->server;
    size_t n = strlen(url);
    char name[ENGINE_NAME_MAX];
    const char *from = n >= sizeof name ? url + n - (sizeof name - 1) : url;
    memcpy(name, from, strlen(from) + 1);
    for (int k = 0; k < l->e->nprojects; k++)
        if (!strcmp(l->e->projects[k].name, name)) {
            struct engine_project *q = &l->e->projects[k];
            if (q->nendpoints != 1 || strcmp(q->endpoints[0], url)) {
                snprintf(q->endpoints[0], sizeof q->endpoints[0], "%s", url);
                q->nendpoints = 1;
                vcl_project_sockets(l, k);
                vcl_project_save(l, k);
            }
            return 0;
        }
    const char *eps[1] = {url};
    int p = vcl_project_add(l, name, 100, eps, 1, "");
    if (p < 0) {
        fprintf(stderr, "gridnode client: cannot use client.server %s: %s\n", url, strerror(errno));
        return -1;
    }
    /* a state directory of the single-cluster client before it ran on the engine: its
       session and the incarnation its tasks came from (meta) carry over */
    struct lproj *lp = &l->proj[p];
    meta_str(l, "sid", lp->sid, sizeof lp->sid);
    meta_str(l, "inc", lp->inc, sizeof lp->inc);
    if (lp->sid[0])
        snprintf(lp->session_url, sizeof lp->session_url, "%s", url);
    vcl_project_save(l, p);
    return 0;
}

/*
 * Moves the tasks and results a single-cluster client of an earlier version left in
 * the table "tasks" to the server's project (table "ltasks"), in one commit: nothing
 * it held is lost when it starts on the engine.
 */
static int migrate_old_tasks(struct live *l)
{
    static struct loadctx mc;
    int old = store_table(l->store, "tasks");
    const char *url = l->cfg->server;
    mc.l = l;
    mc.phase = 2;
    mc.project = -1;
    for (int k = 0; k < l->e->nprojects; k++)
        for (int j = 0; j < l->e->projects[k].nendpoints; j++)
            if (!strcmp(l->e->projects[k].endpoints[j], url))
                mc.project = k;
    if (old < 0 || mc.project < 0 || store_iter(l->store, old, NULL, 0, load_record, &mc) < 0)
        return 0;
    for (size_t k = 0; k < mc.nkeys; k++)
        store_del(l->store, old, mc.keys + 12 * k, 12);
    if (mc.nkeys)
        log_info("moved %zu task(s) and result(s) of the single-cluster client's state to "
                 "project %s",
                 mc.nkeys, l->e->projects[mc.project].name);
    free(mc.keys);
    mc.keys = NULL;
    mc.nkeys = mc.capkeys = 0;
    vcl_commit(l);
    return 0;
}

int vcl_load(struct live *l, double now)
{
    struct inictx ic = {.l = l};
    if (engine_fresh(l) < 0)
        return -1;
    if (l->file) {
        ini_parse(l->file, on_ini, &ic);
        ini_flush(&ic);
    }
    if (ic.err[0]) {
        fprintf(stderr, "gridnode client: configuration error: %s\n", ic.err);
        return -1;
    }
    static struct loadctx lc;
    lc.l = l;
    lc.phase = 0;
    if (store_iter(l->store, l->t_projects, NULL, 0, load_record, &lc) < 0)
        return -1;
    if (l->file) {
        ic.phase = 1;
        ini_parse(l->file, on_ini, &ic);
        ini_flush(&ic);
        if (ic.err[0]) {
            fprintf(stderr, "gridnode client: configuration error: %s\n", ic.err);
            return -1;
        }
    }
    if (l->single && server_project(l) < 0)
        return -1;
    /* tasks: adding one clears its (project, type) backoff; the stored one is put back */
    for (int p = 0; p < l->e->nprojects; p++)
        lc.saved[p] = l->e->projects[p];
    lc.phase = 1;
    if (store_iter(l->store, l->t_tasks, NULL, 0, load_record, &lc) < 0)
        return -1;
    for (int p = 0; p < l->e->nprojects; p++)
        memcpy(l->e->projects[p].rsc, lc.saved[p].rsc, sizeof lc.saved[p].rsc);
    if (l->single)
        migrate_old_tasks(l);
    size_t done = 0;
    for (size_t i = 0; i < l->ntasks; i++)
        done += l->tasks[i]->result != NULL;
    engine_tick(l->e, now, 1);
    vcl_commit(l);
    log_info("state loaded: %d project(s), %zu finished result(s) to report, %zu task(s) to rerun",
             l->e->nprojects, done, l->ntasks - done);
    return 0;
}

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
    if (engine_fresh(l) < 0) {
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

/* ---- control ---- */

static void state_reply(struct live *l, uint64_t id, struct wire_buf *w)
{
    struct engine *e = l->e;
    double now = vcl_now();
    double prio[LIVE_MAX_PROJECTS];
    engine_rr_simulate(e, now);
    engine_priorities(e, NULL, prio);
    wire_begin(w, WT_CLIENT_STATE, id, 7);
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

/* [project NAME] sections in the config file (vcl_single). */
static int find_project_section(void *user, const char *section, const char *name,
                                const char *value)
{
    (void)name;
    (void)value;
    if (!strncmp(section, "project ", 8))
        *(int *)user = 1;
    return 1;
}

bool vcl_single(const struct client_cfg *cfg, const char *file)
{
    int found = 0;
    char mark[CONFIG_STR_MAX + 16];
    if (!cfg->server[0])
        return false;
    if (file)
        ini_parse(file, find_project_section, &found);
    /* a state directory a volunteer of projects used keeps being one (projects
       attached at run time, a config without [project] sections) */
    snprintf(mark, sizeof mark, "%s/projects", cfg->state_dir);
    return !found && access(mark, F_OK) != 0;
}

/*
 * live_load.c - the multi-project client's start-up state (live.h): the [gpu NAME] and
 * [project NAME] sections of its config file, the projects and tasks its store holds
 * (the records of live_state.c), the one project of a single-cluster host
 * (client.server) and the tasks an earlier single-cluster client left in the old table
 * "tasks"; and whether a config makes a single-cluster host at all (vcl_single).
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/record.h"
#include "lib/log.h"
#include "store/store.h"

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

/*
 * A config with only client.server: one project named after the server (its endpoint
 * as written, cut to the last ENGINE_NAME_MAX - 1 bytes), share 100, the server its
 * only endpoint. A stored project of that name keeps its accounting and gets the
 * endpoint back if it was changed; projects attached at run time stay attached.
 */
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
    vcl_meta_str(l, "sid", lp->sid, sizeof lp->sid);
    vcl_meta_str(l, "inc", lp->inc, sizeof lp->inc);
    if (lp->sid[0])
        snprintf(lp->session_url, sizeof lp->session_url, "%s", url);
    vcl_project_save(l, p);
    return 0;
}

/* ---- the store's records (daemon/record.h: an unreadable one is skipped, named) ---- */

struct loadctx {
    struct live *l;
    struct engine_project saved[LIVE_MAX_PROJECTS];
    int project;   /* migration: the server's project */
    uint8_t *keys; /* migration: keys of the old records, deleted once moved */
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

/* The map a record holds, or NULL when it holds none (up: the caller's to destroy). */
static const msgpack_object *record_map(msgpack_unpacked *up, const void *val, size_t vlen)
{
    size_t off = 0;
    if (wire_precheck(val, vlen) != 0 ||
        msgpack_unpack_next(up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        up->data.type != MSGPACK_OBJECT_MAP)
        return NULL;
    return &up->data;
}

/* A stored task's result, if it has one (left out when there is no memory for it). */
static void take_result(struct ltask *t, const msgpack_object *m)
{
    size_t rl;
    const void *res = wire_get_bin(m, "result", &rl);
    if (res && rl && (t->result = malloc(rl))) {
        memcpy(t->result, res, rl);
        t->rlen = rl;
    }
}

/* A record of "projects" (key: the name): the project attached with its accounting. */
static int load_project(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct loadctx *c = arg;
    struct live *l = c->l;
    char name[ENGINE_NAME_MAX], master[ENGINE_URL_MAX];
    char eps[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    const char *list[ENGINE_MAX_ENDPOINTS];
    int n = 0, rc = RECORD_UNREADABLE;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    const msgpack_object *m = record_map(&up, val, vlen);
    if (!m || klen == 0 || klen >= sizeof name)
        goto out;
    memcpy(name, key, klen);
    name[klen] = '\0';
    const msgpack_object *e = wire_get(m, "endpoints");
    for (uint32_t k = 0;
         e && e->type == MSGPACK_OBJECT_ARRAY && k < e->via.array.size && n < ENGINE_MAX_ENDPOINTS;
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
        rc = RECORD_IGNORED;
        goto out;
    }
    vcl_project_restore(l, p, m);
    rc = RECORD_TAKEN;
out:
    msgpack_unpacked_destroy(&up);
    return rc;
}

/*
 * A record of "ltasks" (key: the local id): the task back in the engine, with its
 * result if it has one. One of a project no longer attached is left in the store; one
 * that finds no memory is left too (the server re-issues it), as the others load.
 */
static int load_task(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct loadctx *c = arg;
    struct live *l = c->l;
    int rc = RECORD_UNREADABLE;
    (void)klen; /* 8: record_load checks it */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    const msgpack_object *m = record_map(&up, val, vlen);
    if (!m)
        goto out;
    rc = RECORD_IGNORED;
    char pname[ENGINE_NAME_MAX];
    wire_get_strbuf(m, "project", pname, sizeof pname);
    int p = -1;
    for (int k = 0; k < l->e->nprojects; k++)
        if (!strcmp(l->e->projects[k].name, pname))
            p = k;
    if (p < 0)
        goto out;
    struct ltask *t = vcl_task_from_map(l, p, m);
    if (!t)
        goto out;
    t->id = store_key_get_u64(key);
    if (t->id > l->next_id)
        l->next_id = t->id;
    t->received = wire_get_f64(m, "received", vcl_now());
    take_result(t, m);
    if (vcl_task_adopt(l, t) < 0) {
        vcl_task_free(t);
        goto out;
    }
    rc = RECORD_TAKEN;
out:
    msgpack_unpacked_destroy(&up);
    return rc;
}

/* A record of the old table "tasks" (key: job, idx): a task of the server's project,
   saved in "ltasks" under a new local id; its key kept, to be deleted once all moved. */
static int migrate_task(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct loadctx *c = arg;
    struct live *l = c->l;
    int rc = RECORD_UNREADABLE;
    (void)klen; /* 12: record_load checks it */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    const msgpack_object *m = record_map(&up, val, vlen);
    if (!m)
        goto out;
    rc = RECORD_IGNORED; /* out of memory: it stays in the old table */
    if (c->nkeys == c->capkeys && grow_keys(c) < 0)
        goto out;
    struct ltask *t = vcl_task_from_map(l, c->project, m);
    if (!t)
        goto out;
    t->id = ++l->next_id;
    t->received = vcl_now();
    take_result(t, m);
    if (vcl_task_adopt(l, t) < 0) {
        vcl_task_free(t);
        goto out;
    }
    vcl_task_save(l, t);
    memcpy(c->keys + 12 * c->nkeys++, key, 12);
    rc = RECORD_TAKEN;
out:
    msgpack_unpacked_destroy(&up);
    return rc;
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
    mc.project = -1;
    for (int k = 0; k < l->e->nprojects; k++)
        for (int j = 0; j < l->e->projects[k].nendpoints; j++)
            if (!strcmp(l->e->projects[k].endpoints[j], url))
                mc.project = k;
    if (old < 0 || mc.project < 0 || record_load(l->store, old, migrate_task, &mc) < 0)
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
    if (vcl_engine_new(l) < 0)
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
    if (record_load(l->store, l->t_projects, load_project, &lc) < 0)
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
    if (record_load(l->store, l->t_tasks, load_task, &lc) < 0)
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

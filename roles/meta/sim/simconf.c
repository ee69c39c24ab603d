/*
 * simconf.c - the meta simulator's scenario (sim.h): defaults, the --sites N shortcut,
 * the scenario INI file, and splitting a trace into local load and grid jobs.
 *
 * Scenario file:
 *   [meta]        grid_share = 0.5, split = job|user, margin = 600 (s),
 *                 reevaluate = yes|no, reeval_max = 64, seed = 1,
 *                 estimate = requested|actual
 *   [site NAME]   nodes = N, or share = F (that share of the trace's processors, or of
 *                 --procs: scenario files that fit every trace), node_procs = 1, speed = 1.0,
 *                 batch_config = PATH (a batch.ini; relative to the scenario file),
 *                 local_trace = PATH (an SWF trace: this site's own local load),
 *                 SECTION.KEY = VALUE (any batch.ini key, e.g. scheduler.policy = conservative)
 */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "roles/batch/conffile.h"
#include "roles/meta/sim/sim.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void msim_scenario_defaults(struct msim_scenario *s)
{
    memset(s, 0, sizeof *s);
    s->grid_share = 0.5;
    s->split = MSIM_SPLIT_JOB;
    s->margin = 600;
    s->reevaluate = true;
    s->reeval_max = 64;
    s->seed = 1;
    s->estimate = SIM_EST_REQUESTED;
}

void msim_scenario_clear(struct msim_scenario *s)
{
    for (size_t i = 0; i < s->nsites; i++)
        batch_config_clear(&s->sites[i].cfg);
    s->nsites = 0;
}

static struct msim_site *site_add(struct msim_scenario *s, const char *name)
{
    if (s->nsites == MSIM_MAX_SITES || strlen(name) >= BATCH_NAME_MAX || !*name)
        return NULL;
    struct msim_site *x = &s->sites[s->nsites++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->node_procs = 1;
    x->speed = 1;
    batch_config_defaults(&x->cfg);
    return x;
}

int msim_scenario_split_weights(struct msim_scenario *s, const double *weights, size_t n,
                                int64_t procs, char *err, size_t len)
{
    if (n < 1 || n > MSIM_MAX_SITES)
        return fail(err, len, "--sites: between 1 and %d sites", MSIM_MAX_SITES);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(weights[i] > 0))
            return fail(err, len, "--sites: every weight must be above 0");
        sum += weights[i];
    }
    for (size_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "site%zu", i);
        struct msim_site *x = site_add(s, name);
        if (!x)
            return fail(err, len, "too many sites");
        x->share = weights[i] / sum;
    }
    return msim_scenario_resolve(s, procs, err, len);
}

int msim_scenario_resolve(struct msim_scenario *s, int64_t procs, char *err, size_t len)
{
    for (size_t i = 0; i < s->nsites; i++) {
        struct msim_site *x = &s->sites[i];
        if (x->nodes > 0 || x->share <= 0)
            continue;
        double n = x->share * (double)procs / (double)(x->node_procs > 0 ? x->node_procs : 1);
        if (n < 0.5)
            return fail(err, len, "site %s: share %g of %lld processors is less than one node",
                        x->name, x->share, (long long)procs);
        x->nodes = (int32_t)(n + 0.5);
    }
    return 0;
}

int msim_scenario_split(struct msim_scenario *s, size_t n, int64_t procs, char *err, size_t len)
{
    if (n < 1 || n > MSIM_MAX_SITES)
        return fail(err, len, "--sites %zu: between 1 and %d sites", n, MSIM_MAX_SITES);
    if (procs < (int64_t)n)
        return fail(err, len, "%lld processors cannot be split into %zu sites", (long long)procs,
                    n);
    for (size_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "site%zu", i);
        struct msim_site *x = site_add(s, name);
        if (!x)
            return fail(err, len, "too many sites");
        x->nodes = (int32_t)(procs / (int64_t)n);
    }
    return 0;
}

struct loadctx {
    struct msim_scenario *s;
    const char *name; /* the file, for messages and relative paths */
    char err[512];
};

static int parse_num(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1"))
        *out = true;
    else if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0"))
        *out = false;
    else
        return -1;
    return 0;
}

static int meta_key(struct loadctx *c, const char *key, const char *v)
{
    struct msim_scenario *s = c->s;
    double d;
    bool b;
    if (!strcmp(key, "grid_share")) {
        if (parse_num(v, 0, 1, &d) < 0)
            return fail(c->err, sizeof c->err, "grid_share '%s': a number from 0 to 1", v);
        s->grid_share = d;
    } else if (!strcmp(key, "split")) {
        if (!strcmp(v, "job"))
            s->split = MSIM_SPLIT_JOB;
        else if (!strcmp(v, "user"))
            s->split = MSIM_SPLIT_USER;
        else
            return fail(c->err, sizeof c->err, "split '%s': job or user", v);
    } else if (!strcmp(key, "margin") || !strcmp(key, "reeval_max") || !strcmp(key, "seed")) {
        if (parse_num(v, 0, 1e15, &d) < 0 || d != (double)(int64_t)d)
            return fail(c->err, sizeof c->err, "%s '%s': a whole number >= 0", key, v);
        if (!strcmp(key, "margin"))
            s->margin = (int64_t)d;
        else if (!strcmp(key, "seed"))
            s->seed = (uint64_t)d;
        else
            s->reeval_max = (size_t)d;
    } else if (!strcmp(key, "reevaluate")) {
        if (parse_bool(v, &b) < 0)
            return fail(c->err, sizeof c->err, "reevaluate '%s': yes or no", v);
        s->reevaluate = b;
    } else if (!strcmp(key, "estimate")) {
        if (!strcmp(v, "requested"))
            s->estimate = SIM_EST_REQUESTED;
        else if (!strcmp(v, "actual"))
            s->estimate = SIM_EST_ACTUAL;
        else
            return fail(c->err, sizeof c->err, "estimate '%s': requested or actual", v);
    } else {
        return fail(c->err, sizeof c->err, "unknown key '%s' in [meta]", key);
    }
    return 0;
}

static int site_key(struct loadctx *c, struct msim_site *x, const char *key, const char *v)
{
    double d;
    char e2[400];
    if (!strcmp(key, "nodes") || !strcmp(key, "node_procs")) {
        if (parse_num(v, 1, 1 << 20, &d) < 0 || d != (double)(int32_t)d)
            return fail(c->err, sizeof c->err, "%s '%s': a whole number from 1 to %d", key, v,
                        1 << 20);
        *(!strcmp(key, "nodes") ? &x->nodes : &x->node_procs) = (int32_t)d;
    } else if (!strcmp(key, "share")) {
        if (parse_num(v, 1e-6, 1, &d) < 0)
            return fail(c->err, sizeof c->err, "share '%s': a number above 0, at most 1", v);
        x->share = d;
    } else if (!strcmp(key, "speed")) {
        if (parse_num(v, 0.01, 100, &d) < 0)
            return fail(c->err, sizeof c->err, "speed '%s': a number from 0.01 to 100", v);
        x->speed = d;
    } else if (!strcmp(key, "batch_config") || !strcmp(key, "local_trace")) {
        char path[PATH_MAX];
        const char *slash = strrchr(c->name, '/');
        if (v[0] != '/' && slash)
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - c->name), c->name, v);
        else
            snprintf(path, sizeof path, "%s", v);
        if (!strcmp(key, "local_trace")) {
            if (strlen(path) >= sizeof x->local_trace)
                return fail(c->err, sizeof c->err, "local_trace: the path is too long");
            snprintf(x->local_trace, sizeof x->local_trace, "%s", path);
        } else if (batch_conf_load(&x->cfg, path, e2, sizeof e2) < 0) {
            return fail(c->err, sizeof c->err, "batch_config: %s", e2);
        }
    } else if (strchr(key, '.')) {
        char as[512];
        snprintf(as, sizeof as, "%s=%s", key, v);
        if (batch_conf_set(&x->cfg, as, e2, sizeof e2) < 0)
            return fail(c->err, sizeof c->err, "%s", e2);
    } else {
        return fail(c->err, sizeof c->err,
                    "unknown key '%s' in [site %s] (nodes, share, node_procs, speed, batch_config, "
                    "local_trace, or a batch.ini SECTION.KEY)",
                    key, x->name);
    }
    return 0;
}

static int on_kv(void *arg, const char *section, const char *key, const char *v)
{
    struct loadctx *c = arg;
    if (c->err[0])
        return 0;
    int rc;
    if (!strcmp(section, "meta")) {
        rc = meta_key(c, key, v);
    } else if (!strncmp(section, "site ", 5)) {
        const char *name = section + 5;
        struct msim_site *x = NULL;
        for (size_t i = 0; i < c->s->nsites; i++)
            if (!strcmp(c->s->sites[i].name, name))
                x = &c->s->sites[i];
        if (!x && !(x = site_add(c->s, name)))
            rc = fail(c->err, sizeof c->err, "[site %s]: a name of 1 to %d bytes, at most %d sites",
                      name, BATCH_NAME_MAX - 1, MSIM_MAX_SITES);
        else
            rc = site_key(c, x, key, v);
    } else {
        rc = fail(c->err, sizeof c->err, "unknown section [%s] ([meta] or [site NAME])", section);
    }
    return rc == 0;
}

static int finish(struct loadctx *c, int rc, char *err, size_t len)
{
    if (rc == -1)
        return fail(err, len, "%s: cannot read: %s", c->name, strerror(errno));
    if (rc == -2)
        return fail(err, len, "%s: out of memory", c->name);
    if (rc > 0)
        return fail(err, len, "%s:%d: %s", c->name, rc, c->err[0] ? c->err : "syntax error");
    for (size_t i = 0; i < c->s->nsites; i++)
        if (c->s->sites[i].nodes < 1 && c->s->sites[i].share <= 0)
            return fail(err, len, "%s: [site %s] needs nodes = N or share = F", c->name,
                        c->s->sites[i].name);
    return 0;
}

int msim_scenario_load(struct msim_scenario *s, const char *path, char *err, size_t len)
{
    struct loadctx c = {.s = s, .name = path};
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, len, "%s: cannot open: %s", path, strerror(errno));
    int rc = ini_parse_file(f, on_kv, &c);
    fclose(f);
    return finish(&c, rc, err, len);
}

int msim_scenario_load_string(struct msim_scenario *s, const char *text, const char *name,
                              char *err, size_t len)
{
    struct loadctx c = {.s = s, .name = name};
    return finish(&c, ini_parse_string(text, on_kv, &c), err, len);
}

/* A uniform number in [0, 1) from a job id and the seed (splitmix64). */
static double unit_hash(int64_t id, uint64_t seed)
{
    uint64_t z = (uint64_t)id * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* Submit order, ties in the order they were added. */
struct ord {
    int64_t submit;
    size_t i;
};

static int by_submit(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Adds site si's local trace to w as local load there, keeping w in submit order. */
static int add_local(const struct msim_scenario *s, size_t si, struct msim_workload *w, char *err,
                     size_t len)
{
    const struct msim_site *x = &s->sites[si];
    struct swf_trace t;
    struct sim_input in;
    memset(&t, 0, sizeof t);
    memset(&in, 0, sizeof in);
    char e2[512];
    if (swf_read(x->local_trace, &t, e2, sizeof e2) < 0)
        return fail(err, len, "[site %s] local_trace: %s", x->name, e2);
    struct sim_opts o = {
        .procs = (int64_t)x->nodes * x->node_procs, .node_procs = 1, .estimate = s->estimate};
    int rc = sim_prepare(&t, &o, &in, e2, sizeof e2);
    swf_free(&t);
    if (rc < 0)
        return fail(err, len, "[site %s] local_trace %s: %s", x->name, x->local_trace, e2);
    size_t n = w->in.njobs + in.njobs;
    struct sim_job *jobs = malloc((n ? n : 1) * sizeof *jobs);
    bool *grid = malloc((n ? n : 1) * sizeof *grid);
    int32_t *home = malloc((n ? n : 1) * sizeof *home);
    struct ord *o2 = malloc((n ? n : 1) * sizeof *o2);
    if (!jobs || !grid || !home || !o2) {
        free(jobs), free(grid), free(home), free(o2);
        sim_input_free(&in);
        return fail(err, len, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        o2[i] = (struct ord){
            i < w->in.njobs ? w->in.jobs[i].submit : in.jobs[i - w->in.njobs].submit, i};
    qsort(o2, n, sizeof *o2, by_submit);
    for (size_t k = 0; k < n; k++) {
        size_t i = o2[k].i;
        if (i < w->in.njobs) {
            jobs[k] = w->in.jobs[i];
            grid[k] = w->grid[i];
            home[k] = w->home[i];
        } else {
            jobs[k] = in.jobs[i - w->in.njobs];
            jobs[k].id += (int64_t)(si + 1) * 1000000000;
            jobs[k].user =
                jobs[k].user < 0 ? jobs[k].user : jobs[k].user + (int32_t)(si + 1) * 1000000;
            grid[k] = false;
            home[k] = (int32_t)si;
        }
    }
    w->local_traced += in.njobs;
    w->local_refused += in.skip_too_wide;
    free(w->in.jobs);
    free(w->grid);
    free(w->home);
    free(o2);
    w->in.jobs = jobs;
    w->in.njobs = n;
    w->grid = grid;
    w->home = home;
    sim_input_free(&in);
    return 0;
}

int msim_workload(const struct msim_scenario *s, const struct swf_trace *t, struct msim_workload *w,
                  char *err, size_t len)
{
    if (s->nsites == 0)
        return fail(err, len, "no sites: give --sites N or a scenario with [site NAME] sections");
    int64_t widest = 0;
    for (size_t i = 0; i < s->nsites; i++) {
        int64_t p = (int64_t)s->sites[i].nodes * s->sites[i].node_procs;
        widest = p > widest ? p : widest;
    }
    struct sim_opts o = {
        .procs = widest, .node_procs = 1, .estimate = s->estimate, .count = s->count};
    if (sim_prepare(t, &o, &w->in, err, len) < 0)
        return -1;
    w->refused = w->in.skip_too_wide;
    w->grid = calloc(w->in.njobs, sizeof *w->grid);
    w->home = calloc(w->in.njobs, sizeof *w->home);
    if (!w->grid || !w->home) {
        msim_workload_free(w);
        return fail(err, len, "out of memory");
    }
    size_t rr = 0;
    for (size_t i = 0; i < w->in.njobs; i++) {
        const struct sim_job *j = &w->in.jobs[i];
        w->grid[i] = unit_hash(j->id, s->seed) < s->grid_share;
        w->ngrid += w->grid[i];
        /* local: the next site in turn (or the user's site) that is wide enough */
        size_t first = s->split == MSIM_SPLIT_USER ? (size_t)(j->user < 0 ? 0 : j->user) : rr;
        for (size_t k = 0; k < s->nsites; k++) {
            size_t si = (first + k) % s->nsites;
            const struct msim_site *x = &s->sites[si];
            if ((int64_t)x->nodes * x->node_procs >= j->procs) {
                w->home[i] = (int32_t)si;
                break;
            }
        }
        if (!w->grid[i])
            rr = ((size_t)w->home[i] + 1) % s->nsites;
    }
    for (size_t i = 0; i < s->nsites; i++)
        if (s->sites[i].local_trace[0] && add_local(s, i, w, err, len) < 0) {
            msim_workload_free(w);
            return -1;
        }
    return 0;
}

void msim_workload_free(struct msim_workload *w)
{
    sim_input_free(&w->in);
    free(w->grid);
    free(w->home);
    memset(w, 0, sizeof *w);
}

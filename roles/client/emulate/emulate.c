/*
 * emulate.c - the command line of `gridnode client --emulate SCENARIO.ini`: loads the
 * scenario, runs one or several policies on the same simulated world (emulate_run.c)
 * and prints the figures of merit as a table or as JSON, optionally with an SVG
 * timeline and a CSV log of every RPC.
 */
#include "roles/client/emulate/emulate.h"
#include "roles/client/emulate/emulate_int.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POLICIES 8
#define MAX_SETS 64

struct emu_cli {
    const char *scenario;
    const char *duration, *seed;
    const char *policies[MAX_POLICIES];
    int npolicies;
    int json, check, help;
    const char *timeline, *window, *rpc_log;
    const char *sets[MAX_SETS];
    int nsets;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gridnode client --emulate SCENARIO.ini [options]\n"
            "\n"
            "Runs the client scheduling engine against simulated projects in simulated time\n"
            "and prints BOINC's client-emulator figures of merit: idle fraction, wasted\n"
            "fraction (work reported after its deadline), share violation, monotony, RPCs\n"
            "per job (RPCs that reached a server / jobs received), each project's used share.\n"
            "\n"
            "options:\n"
            "  --duration TIME         simulated time, e.g. 30d (default: [emulation] duration)\n"
            "  --seed N                random seed of the world and the engine (printed)\n"
            "  --policy SPEC           rec, debt2004, rec/boinc, debt2004/boinc, boinc\n"
            "                          (= rec/boinc); /boinc selects BOINC-faithful fetch,\n"
            "                          /deadline the deadline-aware default\n"
            "  --compare SPEC,SPEC...  run each policy on the same world, side by side\n"
            "  --json                  one JSON object per policy, one per line\n"
            "  --timeline FILE.svg     draw which project ran on which instance\n"
            "  --timeline-window A:B   time window drawn (default 0:2d)\n"
            "  --rpc-log FILE          CSV of every scheduler RPC and master fetch\n"
            "  --set SECTION.KEY=VAL   override a scenario key, e.g. --set client.min_buf=1h\n"
            "                          or --set 'project P1.share=50' (repeatable)\n"
            "  --check                 print the effective scenario and exit\n"
            "  --help                  this text\n"
            "\n"
            "TIME values take a unit: 90, 90s, 10m, 6h, 1.5d, 1w, 1d6h.\n"
            "\n"
            "Scenario keys (key, default, meaning):\n");
    emulate_scenario_help(out);
}

/* Returns the option's value (--opt VALUE or --opt=VALUE), or NULL if missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (strcmp(argv[*i], name))
        return NULL;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static int is_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

static int split_policies(struct emu_cli *c, const char *list)
{
    static char buf[512];
    if (strlen(list) >= sizeof buf)
        return -1;
    strcpy(buf, list);
    char *save = NULL;
    for (char *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        if (c->npolicies == MAX_POLICIES)
            return -1;
        c->policies[c->npolicies++] = s;
    }
    return c->npolicies ? 0 : -1;
}

/* Parses argv; 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, struct emu_cli *c)
{
    static const char *const valued[] = {"--emulate",         "--duration", "--seed",
                                         "--policy",          "--compare",  "--timeline",
                                         "--timeline-window", "--rpc-log",  "--set"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int k = -1;
        for (int j = 0; j < (int)(sizeof valued / sizeof valued[0]) && k < 0; j++)
            if (is_opt(a, valued[j]))
                k = j;
        if (k >= 0) {
            v = opt_value(argc, argv, &i, valued[k]);
            if (k == 0 && v && !strncmp(v, "--", 2)) { /* --emulate --help */
                i--;
                v = NULL;
                continue;
            }
            if (!v) {
                fprintf(stderr, "gridnode client: %s needs %s\n", valued[k],
                        k == 0 ? "a scenario file (see --emulate --help)" : "a value");
                return 2;
            }
        }
        switch (k) {
        case 0:
            c->scenario = v;
            break;
        case 1:
            c->duration = v;
            break;
        case 2:
            c->seed = v;
            break;
        case 3:
        case 4:
            c->npolicies = 0;
            if (split_policies(c, v)) {
                fprintf(stderr, "gridnode client: %s: at most %d policies\n", a, MAX_POLICIES);
                return 2;
            }
            break;
        case 5:
            c->timeline = v;
            break;
        case 6:
            c->window = v;
            break;
        case 7:
            c->rpc_log = v;
            break;
        case 8:
            if (c->nsets == MAX_SETS) {
                fprintf(stderr, "gridnode client: more than %d --set\n", MAX_SETS);
                return 2;
            }
            c->sets[c->nsets++] = v;
            break;
        default:
            if (!strcmp(a, "--json"))
                c->json = 1;
            else if (!strcmp(a, "--check"))
                c->check = 1;
            else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
                c->help = 1;
            else {
                fprintf(stderr, "gridnode client --emulate: unknown option '%s' (see --help)\n", a);
                return 2;
            }
        }
    }
    return 0;
}

/* "rec", "debt2004/boinc", "boinc" into cfg; -1 if unknown. */
static int policy_apply(const char *spec, struct engine_config *cfg)
{
    char buf[64];
    if (strlen(spec) >= sizeof buf)
        return -1;
    strcpy(buf, spec);
    if (!strcmp(buf, "boinc"))
        strcpy(buf, "rec/boinc");
    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = 0;
        int f = engine_fetch_parse(slash + 1);
        if (f < 0)
            return -1;
        cfg->fetch = (enum engine_fetch)f;
    }
    int p = engine_policy_parse(buf);
    if (p < 0)
        return -1;
    cfg->policy = (enum engine_policy)p;
    return 0;
}

static void policy_label(const struct engine_config *cfg, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", engine_policy_name(cfg->policy),
             cfg->fetch == ENGINE_FETCH_BOINC ? "/boinc" : "");
}

static json_t *result_json(const struct emu_scenario *sc, const struct emu_result *r)
{
    json_t *o = json_object(), *projects = json_array();
    json_object_set_new(o, "policy", json_string(r->policy));
    json_object_set_new(o, "scenario", json_string(sc->path));
    json_object_set_new(o, "seed", json_integer((json_int_t)sc->seed));
    json_object_set_new(o, "duration_s", json_real(sc->duration));
    json_object_set_new(o, "idle_fraction", json_real(r->idle_fraction));
    json_object_set_new(o, "wasted_fraction", json_real(r->wasted_fraction));
    json_object_set_new(o, "share_violation", json_real(r->share_violation));
    json_object_set_new(o, "monotony", json_real(r->monotony));
    json_object_set_new(o, "rpcs_per_job", json_real(r->rpcs_per_job));
    json_object_set_new(o, "lost_fraction", json_real(r->lost_fraction));
    json_object_set_new(o, "jobs", json_integer((json_int_t)r->jobs));
    json_object_set_new(o, "met", json_integer((json_int_t)r->met));
    json_object_set_new(o, "missed", json_integer((json_int_t)r->missed));
    json_object_set_new(o, "missed_report", json_integer((json_int_t)r->missed_report));
    json_object_set_new(o, "aborted", json_integer((json_int_t)r->aborted));
    json_object_set_new(o, "rpcs", json_integer((json_int_t)r->rpcs_ok));
    json_object_set_new(o, "rpc_attempts", json_integer((json_int_t)r->rpc_attempts));
    json_object_set_new(o, "master_fetches", json_integer((json_int_t)r->master_fetches));
    json_object_set_new(o, "sim_wall_s", json_real(r->sim_wall_s));
    json_object_set_new(o, "rr_simulations", json_integer((json_int_t)r->rr_runs));
    json_object_set_new(o, "schedules", json_integer((json_int_t)r->sched_runs));
    for (int p = 0; p < r->nprojects; p++) {
        const struct emu_project_result *pr = &r->projects[p];
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(sc->projects[p].name));
        json_object_set_new(j, "share", json_real(pr->share));
        json_object_set_new(j, "used_share", json_real(pr->used_share));
        json_object_set_new(j, "jobs", json_integer((json_int_t)pr->jobs));
        json_object_set_new(j, "met", json_integer((json_int_t)pr->met));
        json_object_set_new(j, "missed", json_integer((json_int_t)pr->missed));
        json_object_set_new(j, "aborted", json_integer((json_int_t)pr->aborted));
        json_object_set_new(j, "rpcs", json_integer((json_int_t)pr->rpcs_ok));
        json_array_append_new(projects, j);
    }
    json_object_set_new(o, "projects", projects);
    return o;
}

static int print_json(const struct emu_scenario *sc, const struct emu_result *r)
{
    json_t *o = result_json(sc, r);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    if (!s)
        return -1;
    printf("%s\n", s);
    free(s);
    return 0;
}

#define ROW(label, fmt, expr)                                                                      \
    do {                                                                                           \
        printf("%-26s", label);                                                                    \
        for (int i = 0; i < n; i++)                                                                \
            printf(" %14" fmt, expr);                                                              \
        printf("\n");                                                                              \
    } while (0)

static void print_table(const struct emu_scenario *sc, const struct emu_result *r, int n)
{
    printf("scenario %s, seed %llu, %.4g days simulated\n", sc->path, (unsigned long long)sc->seed,
           sc->duration / 86400);
    ROW("policy", "s", r[i].policy);
    ROW("idle_fraction", ".4f", r[i].idle_fraction);
    ROW("wasted_fraction", ".4f", r[i].wasted_fraction);
    ROW("share_violation", ".4f", r[i].share_violation);
    ROW("monotony", ".4f", r[i].monotony);
    ROW("rpcs_per_job", ".4f", r[i].rpcs_per_job);
    ROW("lost_fraction", ".4f", r[i].lost_fraction);
    ROW("jobs received", "lu", r[i].jobs);
    ROW("results met deadline", "lu", r[i].met);
    ROW("results missed deadline", "lu", r[i].missed);
    ROW("  finished in time", "lu", r[i].missed_report);
    ROW("tasks aborted", "lu", r[i].aborted);
    ROW("rpcs reaching a server", "lu", r[i].rpcs_ok);
    ROW("rpc attempts", "lu", r[i].rpc_attempts);
    ROW("sim_wall_s", ".3f", r[i].sim_wall_s);
    for (int p = 0; p < sc->nprojects; p++) {
        char label[96];
        snprintf(label, sizeof label, "used share %s (%.3f)", sc->projects[p].name,
                 r[0].projects[p].share);
        ROW(label, ".4f", r[i].projects[p].used_share);
    }
}

/* Loads the scenario and applies the command line; 0 or the exit status. */
static int load(const struct emu_cli *c, struct emu_scenario *sc)
{
    char err[768];
    emulate_scenario_init(sc);
    if (emulate_scenario_load(sc, c->scenario, err, sizeof err))
        goto bad;
    for (int i = 0; i < c->nsets; i++)
        if (emulate_scenario_set(sc, c->sets[i], err, sizeof err))
            goto bad;
    if (c->duration) {
        char kv[128];
        snprintf(kv, sizeof kv, "emulation.duration=%s", c->duration);
        if (emulate_scenario_set(sc, kv, err, sizeof err)) {
            snprintf(err, sizeof err, "--duration %s: not a positive time (e.g. 30d)", c->duration);
            goto bad;
        }
    }
    if (c->seed) {
        char kv[128];
        snprintf(kv, sizeof kv, "emulation.seed=%s", c->seed);
        if (emulate_scenario_set(sc, kv, err, sizeof err)) {
            snprintf(err, sizeof err, "--seed %s: not an unsigned integer", c->seed);
            goto bad;
        }
    }
    if (emulate_scenario_check(sc, err, sizeof err))
        goto bad;
    return 0;
bad:
    fprintf(stderr, "gridnode client --emulate: %s\n", err);
    return 1;
}

/* Parses --timeline-window A:B (default 0:2d, clipped to the run). */
static int parse_window(const char *w, double duration, double *from, double *to)
{
    *from = 0;
    *to = fmin(duration, 2 * 86400);
    if (!w)
        return 0;
    char buf[128];
    if (strlen(w) >= sizeof buf)
        return -1;
    strcpy(buf, w);
    char *colon = strchr(buf, ':');
    if (!colon)
        return -1;
    *colon = 0;
    if (emulate_parse_time(buf, from) || emulate_parse_time(colon + 1, to) || !(*to > *from))
        return -1;
    *to = fmin(*to, duration);
    return *to > *from ? 0 : -1;
}

/* Runs every policy on its own copy of the scenario; fills res[] and the timelines. */
static int run_all(const struct emu_cli *c, const struct emu_scenario *sc, int n,
                   struct emu_result *res, struct emu_timeline *tls, FILE *log)
{
    struct emu_scenario *run = malloc(sizeof *run);
    if (!run)
        return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        *run = *sc;
        if (c->npolicies)
            policy_apply(c->policies[i], &run->cfg);
        char label[32];
        policy_label(&run->cfg, label, sizeof label);
        struct emu_options o = {log, c->timeline ? &tls[i] : NULL, label};
        char err[256];
        fprintf(stderr, "emulate: %s: policy %s, seed %llu, %.4g days\n", sc->path, label,
                (unsigned long long)sc->seed, sc->duration / 86400);
        if (emulate_run(run, &o, &res[i], err, sizeof err)) {
            fprintf(stderr, "gridnode client --emulate: %s: %s\n", label, err);
            rc = -1;
        }
        snprintf(res[i].policy, sizeof res[i].policy, "%s", label);
    }
    free(run);
    return rc;
}

int emulate_main(int argc, char **argv)
{
    struct emu_cli c = {0};
    int rc = parse_args(argc, argv, &c);
    if (rc)
        return rc;
    if (c.help) {
        usage(stdout);
        return 0;
    }
    if (!c.scenario) {
        fprintf(stderr, "gridnode client: --emulate needs a scenario file (see --emulate "
                        "--help)\n");
        return 2;
    }
    struct engine_config probe;
    engine_config_defaults(&probe);
    for (int i = 0; i < c.npolicies; i++)
        if (policy_apply(c.policies[i], &probe)) {
            fprintf(stderr,
                    "gridnode client --emulate: unknown policy '%s' (rec, debt2004, "
                    "rec/boinc, debt2004/boinc, boinc)\n",
                    c.policies[i]);
            return 2;
        }
    int n = c.npolicies ? c.npolicies : 1;
    struct emu_scenario *sc = malloc(sizeof *sc);
    struct emu_result *res = calloc((size_t)n, sizeof *res);
    struct emu_timeline *tls = calloc((size_t)n, sizeof *tls);
    FILE *log = NULL;
    rc = 1;
    if (!sc || !res || !tls) {
        fprintf(stderr, "gridnode client --emulate: out of memory\n");
        goto out;
    }
    if ((rc = load(&c, sc)))
        goto out;
    if (c.check) {
        emulate_scenario_print(sc, stdout);
        goto out;
    }
    rc = 2;
    double from, to;
    if (parse_window(c.window, sc->duration, &from, &to)) {
        fprintf(stderr,
                "gridnode client --emulate: --timeline-window %s: expected START:END "
                "within the run\n",
                c.window);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        tls[i].from = from;
        tls[i].to = to;
    }
    rc = 1;
    if (c.rpc_log) {
        if (!(log = fopen(c.rpc_log, "w"))) {
            fprintf(stderr, "gridnode client --emulate: %s: %s\n", c.rpc_log, strerror(errno));
            goto out;
        }
        fprintf(log, "policy,time,project,kind,reason,url,ok,reported,jobs,req_secs,"
                     "req_instances,nrpc_failures,min_rpc_time\n");
    }
    if (run_all(&c, sc, n, res, tls, log))
        goto out;
    for (int i = 0; i < n && c.json; i++)
        if (print_json(sc, &res[i])) {
            fprintf(stderr, "gridnode client --emulate: cannot format JSON\n");
            goto out;
        }
    if (!c.json)
        print_table(sc, res, n);
    if (c.timeline) {
        struct emu_timeline *ptr[MAX_POLICIES];
        const char *titles[MAX_POLICIES];
        for (int i = 0; i < n; i++) {
            ptr[i] = &tls[i];
            titles[i] = res[i].policy;
        }
        if (emulate_svg_write(c.timeline, sc, ptr, titles, n)) {
            fprintf(stderr, "gridnode client --emulate: %s: %s\n", c.timeline, strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    if (log && fclose(log) && rc == 0) {
        fprintf(stderr, "gridnode client --emulate: %s: %s\n", c.rpc_log, strerror(errno));
        rc = 1;
    }
    for (int i = 0; tls && i < n; i++)
        emulate_timeline_free(&tls[i]);
    free(tls);
    free(res);
    free(sc);
    return rc;
}

/*
 * simcmd.c - `gridnode meta --simulate TRACE ...`: options, reading the trace, running the
 * policies and the two references, printing (see sim.h, docs/meta.md "Simulation").
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/batch/sim/swf.h"
#include "roles/meta/sim/sim.h"
#include "roles/meta/sim/simout.h"

static const char usage_text[] =
    "usage: gridnode meta --simulate TRACE.swf[.gz] (--sites N | --scenario FILE) [options]\n"
    "\n"
    "Replays a workload trace on several simulated sites, each a batch scheduler (the\n"
    "engine of 'gridnode batch') with its own size, speed and policy, with a share of the\n"
    "jobs arriving at the grid spool and placed by the metascheduler's policies. Compares\n"
    "the policies with two references: slurm_m (sbatch -M: earliest start at submit, no\n"
    "reservation, no re-evaluation) and pooled (all sites as one machine).\n"
    "\n"
    "options:\n"
    "  --simulate TRACE     the SWF trace (plain or .gz)\n"
    "  --sites N|W:W:...    N equal sites splitting the trace's MaxProcs (or --procs), or\n"
    "                       sites in proportion to weights (4:3:2:1: 40, 30, 20, 10 %)\n"
    "  --procs P            processors to split with --sites (default: the trace's MaxProcs)\n"
    "  --scenario FILE      sites and settings from an INI file ([meta], [site NAME]; see\n"
    "                       docs/meta.md)\n"
    "  --policy NAME|all    estimate, earliest_start, least_queued, round_robin, random,\n"
    "                       slurm_m, pooled, or all of them (default: all)\n"
    "  --grid-share F       share of the jobs arriving at the grid spool, 0..1 (default 0.5);\n"
    "                       the others are local load of one site each\n"
    "  --split job|user     how local load is spread: jobs in turn, or by user (default job)\n"
    "  --local SITE=TRACE[,SITE=TRACE...]  a site's own SWF trace as extra local load there\n"
    "                       (every job of it, at that site; use --grid-share 1 to send the\n"
    "                       whole main trace to the spool)\n"
    "  --margin S           a placed job moves only to start S seconds earlier (default 600)\n"
    "  --no-reevaluate      never move placed jobs\n"
    "  --local-wait-bound S every site's grid rule (batch.ini grid.local_wait_bound): a\n"
    "                       local job that has waited S seconds is no longer held back by\n"
    "                       grid reservations (0: off; default: each site's batch config)\n"
    "  --seed N             grid share and random policy seed (default 1)\n"
    "  --count N            the first N usable jobs only (default: all)\n"
    "  --estimate requested|actual   walltimes: the trace's requests (default) or run times\n"
    "  --json               one JSON object instead of the table\n"
    "  --jobs-out FILE      a CSV row per job and run\n"
    "  --svg FILE           a chart comparing the runs\n"
    "  --help               this text\n"
    "\n"
    "exit status: 0 done, 1 the trace or scenario cannot be used, 2 bad options\n";

struct opts {
    const char *trace, *scenario, *policy, *jobs_out, *svg;
    const char *grid_share, *split, *margin, *seed, *count, *estimate, *sites, *procs, *local;
    const char *bound;
    bool json, no_reeval;
};

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "gridnode meta: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nrun 'gridnode meta --simulate --help' for the options\n");
    return 2;
}

static const struct {
    const char *name;
    size_t off;
} value_opts[] = {
    {"--simulate", offsetof(struct opts, trace)},
    {"--scenario", offsetof(struct opts, scenario)},
    {"--policy", offsetof(struct opts, policy)},
    {"--jobs-out", offsetof(struct opts, jobs_out)},
    {"--svg", offsetof(struct opts, svg)},
    {"--grid-share", offsetof(struct opts, grid_share)},
    {"--split", offsetof(struct opts, split)},
    {"--margin", offsetof(struct opts, margin)},
    {"--seed", offsetof(struct opts, seed)},
    {"--count", offsetof(struct opts, count)},
    {"--estimate", offsetof(struct opts, estimate)},
    {"--sites", offsetof(struct opts, sites)},
    {"--procs", offsetof(struct opts, procs)},
    {"--local", offsetof(struct opts, local)},
    {"--local-wait-bound", offsetof(struct opts, bound)},
};

/* 0, 1 (--help printed) or 2 (usage error printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) /* --help anywhere, even where a value is expected */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 1;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(a, "--no-reevaluate")) {
            o->no_reeval = true;
            continue;
        }
        size_t k = 0, n = sizeof value_opts / sizeof *value_opts;
        for (; k < n; k++) {
            size_t l = strlen(value_opts[k].name);
            if (!strncmp(a, value_opts[k].name, l) && (a[l] == '\0' || a[l] == '='))
                break;
        }
        if (k == n)
            return usage_error("unknown option '%s'", a);
        const char **slot = (const char **)((char *)o + value_opts[k].off);
        const char *eq = strchr(a, '=');
        if (eq)
            *slot = eq + 1;
        else if (i + 1 < argc)
            *slot = argv[++i];
        else
            return usage_error("%s needs a value", a);
    }
    if (!o->trace)
        return usage_error("%s", "--simulate TRACE is required (the live role is 'gridnode meta -c "
                                 "FILE')");
    if (!o->sites && !o->scenario)
        return usage_error("%s", "give the sites: --sites N or --scenario FILE");
    return 0;
}

static int whole(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

/* --local SITE=TRACE,...: each named site's local_trace. 0 or 2 (printed). */
static int apply_local(const char *arg, struct msim_scenario *s)
{
    char list[4096];
    if (strlen(arg) >= sizeof list)
        return usage_error("%s", "--local: the list is too long");
    snprintf(list, sizeof list, "%s", arg);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        size_t k = 0;
        if (eq)
            *eq = '\0';
        while (eq && k < s->nsites && strcmp(s->sites[k].name, t))
            k++;
        if (!eq || !eq[1] || k == s->nsites || strlen(eq + 1) >= sizeof s->sites[k].local_trace)
            return usage_error("--local '%s': SITE=TRACE for a site of the run (--sites N "
                               "names them site0, site1, ...)",
                               t);
        snprintf(s->sites[k].local_trace, sizeof s->sites[k].local_trace, "%s", eq + 1);
    }
    return 0;
}

/* Applies the command-line settings on top of the scenario. 0 or 2 (printed). */
static int apply_opts(const struct opts *o, struct msim_scenario *s)
{
    long long v;
    if (o->grid_share) {
        char *end;
        double d = strtod(o->grid_share, &end);
        if (end == o->grid_share || *end || !(d >= 0 && d <= 1))
            return usage_error("--grid-share '%s': a number from 0 to 1", o->grid_share);
        s->grid_share = d;
    }
    if (o->split) {
        if (strcmp(o->split, "job") && strcmp(o->split, "user"))
            return usage_error("--split '%s': job or user", o->split);
        s->split = strcmp(o->split, "job") ? MSIM_SPLIT_USER : MSIM_SPLIT_JOB;
    }
    if (o->margin) {
        if (whole(o->margin, 0, (long long)1e12, &v) < 0)
            return usage_error("--margin '%s': whole seconds >= 0", o->margin);
        s->margin = v;
    }
    if (o->seed) {
        if (whole(o->seed, 0, (long long)1e15, &v) < 0)
            return usage_error("--seed '%s': a whole number >= 0", o->seed);
        s->seed = (uint64_t)v;
    }
    if (o->count) {
        if (whole(o->count, 1, (long long)1e12, &v) < 0)
            return usage_error("--count '%s': a whole number >= 1", o->count);
        s->count = (size_t)v;
    }
    if (o->estimate) {
        if (strcmp(o->estimate, "requested") && strcmp(o->estimate, "actual"))
            return usage_error("--estimate '%s': requested or actual", o->estimate);
        s->estimate = strcmp(o->estimate, "actual") ? SIM_EST_REQUESTED : SIM_EST_ACTUAL;
    }
    if (o->no_reeval)
        s->reevaluate = false;
    if (o->bound) {
        if (whole(o->bound, 0, 10LL * 365 * 86400, &v) < 0)
            return usage_error("--local-wait-bound '%s': whole seconds >= 0 (0: off)", o->bound);
        for (size_t i = 0; i < s->nsites; i++)
            s->sites[i].cfg.grid_wait_bound = v;
    }
    return o->local ? apply_local(o->local, s) : 0;
}

/* The run kinds asked for: 0 or 2 (printed). */
static int kinds(const char *policy, int *out, size_t *n)
{
    *n = 0;
    if (!policy || !strcmp(policy, "all")) {
        for (int k = 0; k < MSIM_KINDS; k++)
            out[(*n)++] = k;
        return 0;
    }
    int k = !strcmp(policy, "pooled") ? MSIM_POOLED : meta_policy_parse(policy);
    if (k < 0)
        return usage_error("--policy '%s': estimate, earliest_start, least_queued, round_robin, "
                           "random, slurm_m, pooled or all",
                           policy);
    out[(*n)++] = k;
    return 0;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Loads the sites: 0, 1 (a problem, printed) or 2 (usage, printed). */
static int load_sites(const struct opts *o, const struct swf_trace *t, struct msim_scenario *s)
{
    char err[600];
    if (o->scenario && msim_scenario_load(s, o->scenario, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        return 1;
    }
    long long p = t->max_procs;
    if (o->procs && whole(o->procs, 1, 1 << 30, &p) < 0)
        return usage_error("--procs '%s': a whole number >= 1", o->procs);
    if (o->sites) {
        double wt[MSIM_MAX_SITES];
        size_t n = 0;
        long long one;
        if (s->nsites)
            return usage_error("%s", "--sites and [site] sections in the scenario: give one");
        if (strchr(o->sites, ':')) { /* weights: 4:3:2:1 */
            const char *c = o->sites;
            while (*c) {
                char *end;
                errno = 0;
                double d = strtod(c, &end);
                if (end == c || errno || !(d > 0 && d <= 1e6) || n == MSIM_MAX_SITES ||
                    (*end && *end != ':') || (*end == ':' && !end[1]))
                    return usage_error("--sites '%s': N, or weights W:W:... (2 to 64 numbers "
                                       "above 0)",
                                       o->sites);
                wt[n++] = d;
                c = *end ? end + 1 : end;
            }
        } else {
            if (whole(o->sites, 1, MSIM_MAX_SITES, &one) < 0)
                return usage_error("--sites '%s': a whole number from 1 to 64, or weights W:W:...",
                                   o->sites);
            for (n = 0; n < (size_t)one; n++)
                wt[n] = 1;
        }
        if (p < 1) {
            fprintf(stderr, "gridnode meta: %s has no MaxProcs header: give --procs P\n", o->trace);
            return 1;
        }
        int bad = n > 1 && strchr(o->sites, ':')
                      ? msim_scenario_split_weights(s, wt, n, p, err, sizeof err)
                      : msim_scenario_split(s, n, p, err, sizeof err);
        if (bad < 0) {
            fprintf(stderr, "gridnode meta: %s\n", err);
            return 1;
        }
    } else if (s->nsites && msim_scenario_resolve(s, p, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s (give --procs P for a trace without MaxProcs)\n", err);
        return 1;
    }
    return 0;
}

int meta_simulate_main(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o), kind[MSIM_KINDS];
    size_t nk = 0, nr = 0;
    if (rc)
        return rc == 1 ? 0 : rc;
    if ((rc = kinds(o.policy, kind, &nk)))
        return rc;
    double t0 = mono();
    struct msim_scenario *s = malloc(sizeof *s);
    struct swf_trace t;
    struct msim_workload w;
    struct msim_result r[MSIM_KINDS];
    memset(&t, 0, sizeof t);
    memset(&w, 0, sizeof w);
    memset(r, 0, sizeof r);
    char err[600];
    if (!s) {
        fprintf(stderr, "gridnode meta: out of memory\n");
        return 1;
    }
    msim_scenario_defaults(s);
    rc = 1;
    if (swf_read(o.trace, &t, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        goto out;
    }
    if ((rc = load_sites(&o, &t, s)) || (rc = apply_opts(&o, s)))
        goto out;
    rc = 1;
    if (msim_workload(s, &t, &w, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        goto out;
    }
    for (; nr < nk; nr++)
        if (msim_run(s, &w, kind[nr], &r[nr], err, sizeof err) < 0) {
            fprintf(stderr, "gridnode meta: %s: %s\n", msim_kind_name(kind[nr]), err);
            goto out;
        }
    if (o.jobs_out && msimout_csv(o.jobs_out, s, &w, r, nr, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        goto out;
    }
    if (o.svg && msimout_svg(o.svg, o.trace, r, nr, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        goto out;
    }
    if (o.json) {
        if (msimout_json(stdout, s, &w, o.trace, r, nr, mono() - t0) < 0) {
            fprintf(stderr, "gridnode meta: out of memory\n");
            goto out;
        }
    } else {
        msimout_table(stdout, s, &w, o.trace, r, nr);
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    for (size_t k = 0; k < nr; k++)
        msim_result_free(&r[k]);
    msim_workload_free(&w);
    swf_free(&t);
    msim_scenario_clear(s);
    free(s);
    return rc;
}

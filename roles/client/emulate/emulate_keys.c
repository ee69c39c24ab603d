/*
 * emulate_keys.c - every key of the emulator's scenario file: type, range, default and
 * meaning, and the code that parses and prints values. The parser, `--set`, `--check`
 * and `--help` all read this one table.
 */
#include "roles/client/emulate/emulate_keys.h"
#include "roles/client/emulate/emulate_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define SC(f) offsetof(struct emu_scenario, f)
#define CF(f) offsetof(struct engine_config, f)
#define GP(f) offsetof(struct emu_gpu, f)
#define PR(f) offsetof(struct emu_project, f)
#define AP(f) offsetof(struct emu_app, f)
#define BIG 1e15

const struct emu_key emulate_keys[] = {
    {SK_EMULATION, "duration", KT_TIME, SC(duration), 0, 100 * 365 * 86400.0, 1, "30d",
     "simulated time to run (at most 100 years)"},
    {SK_EMULATION, "seed", KT_SEED, SC(seed), 0, 0, 0, "1",
     "random seed of the simulated world and the engine (also --seed)"},

    {SK_CLIENT, "policy", KT_POLICY, CF(policy), 0, 0, 0, "rec",
     "project priority: rec (SP = -REC/share) or debt2004 (share / exp_avg_cpu)"},
    {SK_CLIENT, "fetch", KT_FETCH, CF(fetch), 0, 0, 0, "deadline",
     "deadline: fetch only what can meet its deadline; boinc: BOINC-faithful buffer fill"},
    {SK_CLIENT, "min_buf", KT_TIME, CF(min_buf), 0, BIG, 0, "0.1d",
     "fetch when a type's saturated time (rec) or queue (debt2004) falls below this"},
    {SK_CLIENT, "additional_buf", KT_TIME, CF(additional_buf), 0, BIG, 0, "0.5d",
     "max_buf = min_buf + additional_buf"},
    {SK_CLIENT, "time_slice", KT_TIME, CF(time_slice), 0, BIG, 1, "1h",
     "round-robin time slice (BOINC's scheduling period)"},
    {SK_CLIENT, "poll", KT_TIME, CF(poll_period), 0, BIG, 1, "60",
     "the client's poll period; work fetch is considered at most this often"},
    {SK_CLIENT, "rec_half_life", KT_TIME, CF(rec_half_life), 0, BIG, 1, "10d", "REC half-life"},
    {SK_CLIENT, "debt_decay", KT_TIME, CF(debt_decay), 0, BIG, 1, "7d",
     "exp_avg_cpu decays by a factor e over this time (debt2004)"},
    {SK_CLIENT, "rpc_backoff_min", KT_TIME, CF(rpc_backoff_min), 0, BIG, 1, "60",
     "after n failed RPCs wait min(rpc_backoff_min * 2^n, rpc_backoff_max) * U[0.5, 1]"},
    {SK_CLIENT, "rpc_backoff_max", KT_TIME, CF(rpc_backoff_max), 0, BIG, 1, "4h",
     "cap of the RPC backoff"},
    {SK_CLIENT, "rsc_backoff_min", KT_TIME, CF(rsc_backoff_min), 0, BIG, 1, "10m",
     "first per-(project, type) backoff after a request for that type got nothing"},
    {SK_CLIENT, "rsc_backoff_max", KT_TIME, CF(rsc_backoff_max), 0, BIG, 1, "1d",
     "cap of that backoff (it doubles each time)"},
    {SK_CLIENT, "master_fetch_period", KT_INT, CF(master_fetch_period), 1, 1000, 0, "10",
     "re-read a project's master list every this many consecutive RPC failures"},
    {SK_CLIENT, "report_cushion", KT_TIME, CF(report_cushion), 0, BIG, 0, "1d",
     "report a result once its deadline is this close"},
    {SK_CLIENT, "report_max_delay", KT_TIME, CF(report_max_delay), 0, BIG, 0, "1d",
     "report a result at the latest this long after it finished"},
    {SK_CLIENT, "report_batch", KT_NUM, CF(report_batch), 0, 1, 0, "0.25",
     "deadline fetch: share of a result's reporting reserve it may wait for another RPC"},
    {SK_CLIENT, "deadline_slack", KT_NUM, CF(deadline_slack), 0, 0.95, 0, "0.84",
     "deadline fetch: fraction of a task's latency kept free for reporting"},
    {SK_CLIENT, "deadline_reserve_max", KT_TIME, CF(deadline_reserve_max), 0, BIG, 0, "12h",
     "deadline fetch: at most this much of a task's latency is kept free"},
    {SK_CLIENT, "fetch_min_jobs", KT_NUM, CF(fetch_min_jobs), 1, 100, 0, "2",
     "deadline fetch: ask for work when room for this many jobs (or an instance is idle)"},
    {SK_CLIENT, "burst", KT_BOOL, CF(burst), 0, 0, 0, "yes",
     "deadline fetch: a project whose deadlines hold less than min_buf works in batches"},
    {SK_CLIENT, "burst_slack", KT_NUM, CF(burst_slack), 0, 0.95, 0, "0.78",
     "deadline fetch: deadline_slack of a project working in batches"},
    {SK_CLIENT, "burst_min_jobs", KT_NUM, CF(burst_min_jobs), 1, 100, 0, "3",
     "deadline fetch: fetch_min_jobs of a project working in batches"},
    {SK_CLIENT, "avail_half_life", KT_TIME, CF(avail_half_life), 0, BIG, 1, "10d",
     "averaging half-life of the host's on-fraction estimate"},

    {SK_HOST, "cpus", KT_INT, SC(cpus), 0, 4096, 0, NULL, "number of CPU instances"},
    {SK_HOST, "cpu_flops", KT_NUM, SC(cpu_flops), 0, BIG, 1, "1", "peak FLOPS of one CPU"},
    {SK_HOST, "on_frac", KT_NUM, SC(on_frac), 0, 1, 0, "1", "fraction of time the host is on"},
    {SK_HOST, "on_mean", KT_TIME, SC(on_mean), 0, BIG, 1, "1d",
     "mean on-period (exponential on and off periods)"},
    {SK_HOST, "off", KT_WINDOWS, SC(off), 0, 0, 0, "", "extra off periods: START-END,..."},

    {SK_GPU, "count", KT_INT, GP(count), 1, 64, 0, NULL, "instances of this GPU type"},
    {SK_GPU, "flops", KT_NUM, GP(flops), 0, BIG, 1, "1", "peak FLOPS of one instance"},

    {SK_PROJECT, "share", KT_NUM, PR(share), 0, BIG, 1, "100", "resource share"},
    {SK_PROJECT, "up_frac", KT_NUM, PR(up_frac), 0, 1, 0, "1",
     "fraction of time the project's servers are up"},
    {SK_PROJECT, "up_mean", KT_TIME, PR(up_mean), 0, BIG, 1, "1d",
     "mean up-period (exponential up and down periods)"},
    {SK_PROJECT, "outage", KT_WINDOWS, PR(outages), 0, 0, 0, "",
     "server outages: START-END or START+LENGTH, comma separated"},
    {SK_PROJECT, "no_work", KT_WINDOWS, PR(no_work), 0, 0, 0, "",
     "periods when the servers are up but have no work"},
    {SK_PROJECT, "rpc_failure_rate", KT_NUM, PR(rpc_failure_rate), 0, 1, 0, "0",
     "probability that an RPC fails although the servers are up"},
    {SK_PROJECT, "schedulers", KT_INT, PR(schedulers), 1, ENGINE_MAX_ENDPOINTS, 0, "1",
     "scheduler endpoints listed by the master"},
    {SK_PROJECT, "moved_at", KT_NEVER, PR(moved_at), 0, BIG, 0, "never",
     "the scheduler endpoints change at this time (only a master re-read finds them)"},
    {SK_PROJECT, "request_delay", KT_TIME, PR(request_delay), 0, BIG, 0, "0",
     "minimum time the server asks between two RPCs"},
    {SK_PROJECT, "deadline_check", KT_BOOL, PR(deadline_check), 0, 0, 0, "yes",
     "the server sends no job that the client's reported queue would make late"},
    {SK_PROJECT, "max_jobs_per_rpc", KT_INT, PR(max_jobs_per_rpc), 0, 100000, 0, "0",
     "jobs per RPC at most (0 = no limit)"},

    {SK_APP, "project", KT_NAME, AP(project_name), 0, 0, 0, NULL,
     "[app] only: the project handing out these jobs"},
    {SK_APP, "type", KT_NAME, AP(type), 0, 0, 0, "cpu", "processor type: cpu or a [gpu NAME]"},
    {SK_APP, "usage", KT_NUM, AP(usage), 0, 64, 1, "1", "instances of that type per job"},
    {SK_APP, "size_dist", KT_DIST, AP(dist), 0, 0, 0, "normal",
     "job size distribution: normal, fixed, exp or uniform"},
    {SK_APP, "size_mean", KT_NUM, AP(size_mean), 0, BIG, 1, NULL,
     "mean job size in FLOPs (run time = size / (flops * usage))"},
    {SK_APP, "size_sd", KT_NUM, AP(size_sd), 0, BIG, 0, "0", "standard deviation of the size"},
    {SK_APP, "size_est", KT_NUM, AP(size_est), 0, BIG, 1, "size_mean",
     "the size the client is told (its estimate)"},
    {SK_APP, "deadline", KT_TIME, AP(deadline), 0, BIG, 1, NULL,
     "deadline of a job, counted from when it is sent"},
    {SK_APP, "checkpoint", KT_TIME, AP(checkpoint), 0, BIG, 0, "60",
     "run time between checkpoints (0 = never checkpoints)"},
    {SK_APP, "weight", KT_NUM, AP(weight), 0, BIG, 1, "1",
     "relative frequency among the project's apps of the same type"},
};
const size_t emulate_nkeys = sizeof emulate_keys / sizeof emulate_keys[0];
#define NKEYS emulate_nkeys
#define keys emulate_keys

const char *const emulate_sec_names[6] = {"emulation", "client", "host", "gpu", "project", "app"};

/* ---- value parsing ---- */

int emulate_parse_time(const char *s, double *out)
{
    double total = 0;
    int parts = 0;
    while (*s) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno || !isfinite(v) || v < 0 || *s == '-' || *s == '+')
            return -1;
        s = end;
        double mul = 1;
        switch (*s) {
        case 's':
            mul = 1;
            s++;
            break;
        case 'm':
            mul = 60;
            s++;
            break;
        case 'h':
            mul = 3600;
            s++;
            break;
        case 'd':
            mul = 86400;
            s++;
            break;
        case 'w':
            mul = 7 * 86400;
            s++;
            break;
        default:
            if (*s && !isspace((unsigned char)*s))
                return -1;
            if (parts > 0)
                return -1; /* "1d 30" is ambiguous */
        }
        total += v * mul;
        parts++;
    }
    if (parts == 0)
        return -1;
    *out = total;
    return 0;
}

static int parse_windows(const char *s, struct emu_windows *w, char *msg, size_t n)
{
    w->n = 0;
    char buf[1024];
    if (strlen(s) >= sizeof buf) {
        snprintf(msg, n, "value too long");
        return -1;
    }
    strcpy(buf, s);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*item))
            item++;
        if (!*item || !strcmp(item, "none"))
            continue;
        size_t k = strcspn(item, "+-");
        if (!item[k] || k == 0) {
            snprintf(msg, n, "'%s' is not START-END or START+LENGTH", item);
            return -1;
        }
        char sep = item[k];
        item[k] = 0;
        double a, b;
        if (emulate_parse_time(item, &a) || emulate_parse_time(item + k + 1, &b)) {
            snprintf(msg, n, "bad time in window '%s%c%s'", item, sep, item + k + 1);
            return -1;
        }
        if (sep == '+')
            b += a;
        if (!(b > a)) {
            snprintf(msg, n, "window %s%c%s ends before it starts", item, sep, item + k + 1);
            return -1;
        }
        if (w->n == EMU_MAX_WINDOWS) {
            snprintf(msg, n, "more than %d windows", EMU_MAX_WINDOWS);
            return -1;
        }
        w->start[w->n] = a;
        w->end[w->n] = b;
        w->n++;
    }
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

static int parse_choice(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

static const char *const dist_names[] = {"normal", "fixed", "exp", "uniform"};

static int check_range(const struct emu_key *k, double v, char *msg, size_t n)
{
    if (k->min == 0 && k->max == 0)
        return 0;
    if (v < k->min || (k->min_open && v == k->min) || v > k->max) {
        snprintf(msg, n, "%g is out of range (%s%g .. %g)", v, k->min_open ? "> " : "", k->min,
                 k->max);
        return -1;
    }
    return 0;
}

/* Stores value into the field of key k at base; 0 or -1 with a message. */
int emulate_key_apply(const struct emu_key *k, void *base, const char *value, char *msg, size_t n)
{
    char *field = (char *)base + k->off;
    double v;
    char *end;
    int iv;
    if (!*value && k->type != KT_WINDOWS) {
        snprintf(msg, n, "empty value");
        return -1;
    }
    switch (k->type) {
    case KT_NEVER:
        if (!strcmp(value, "never")) {
            *(double *)field = -1;
            return 0;
        }
        /* fall through */
    case KT_TIME:
        if (emulate_parse_time(value, &v)) {
            snprintf(msg, n, "'%s' is not a time (e.g. 90, 10m, 6h, 1.5d, 1d6h)", value);
            return -1;
        }
        if (check_range(k, v, msg, n))
            return -1;
        *(double *)field = v;
        return 0;
    case KT_NUM:
        errno = 0;
        v = strtod(value, &end);
        if (*end || errno || !isfinite(v)) {
            snprintf(msg, n, "'%s' is not a number", value);
            return -1;
        }
        if (check_range(k, v, msg, n))
            return -1;
        *(double *)field = v;
        return 0;
    case KT_INT: {
        errno = 0;
        long l = strtol(value, &end, 10);
        if (*end || errno) {
            snprintf(msg, n, "'%s' is not an integer", value);
            return -1;
        }
        if (check_range(k, (double)l, msg, n))
            return -1;
        *(int *)field = (int)l;
        return 0;
    }
    case KT_SEED: {
        errno = 0;
        unsigned long long u = strtoull(value, &end, 0);
        if (*end || errno || value[0] == '-') {
            snprintf(msg, n, "'%s' is not an unsigned integer", value);
            return -1;
        }
        *(uint64_t *)field = u;
        return 0;
    }
    case KT_BOOL:
        if (parse_bool(value, &iv)) {
            snprintf(msg, n, "'%s' is not yes or no", value);
            return -1;
        }
        *(int *)field = iv;
        return 0;
    case KT_POLICY:
        if ((iv = engine_policy_parse(value)) < 0) {
            snprintf(msg, n, "'%s' is not rec or debt2004", value);
            return -1;
        }
        *(enum engine_policy *)field = (enum engine_policy)iv;
        return 0;
    case KT_FETCH:
        if ((iv = engine_fetch_parse(value)) < 0) {
            snprintf(msg, n, "'%s' is not deadline or boinc", value);
            return -1;
        }
        *(enum engine_fetch *)field = (enum engine_fetch)iv;
        return 0;
    case KT_DIST:
        if (parse_choice(value, dist_names, 4, &iv)) {
            snprintf(msg, n, "'%s' is not normal, fixed, exp or uniform", value);
            return -1;
        }
        *(int *)field = iv;
        return 0;
    case KT_WINDOWS:
        return parse_windows(value, (struct emu_windows *)field, msg, n);
    case KT_NAME:
        if (strlen(value) >= EMU_NAME_MAX) {
            snprintf(msg, n, "name longer than %d characters", EMU_NAME_MAX - 1);
            return -1;
        }
        strcpy(field, value);
        return 0;
    }
    return -1;
}

void emulate_keys_defaults(int sec, void *base)
{
    char msg[128];
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].sec == sec && keys[i].dflt && strcmp(keys[i].dflt, "size_mean") != 0)
            emulate_key_apply(&keys[i], base, keys[i].dflt, msg, sizeof msg);
}

int emulate_key_index(int sec, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].sec == sec && !strcmp(keys[i].name, name))
            return (int)i;
    return -1;
}

/* ---- printing ---- */

static void value_print(const struct emu_key *k, const void *base, FILE *out)
{
    const char *field = (const char *)base + k->off;
    switch (k->type) {
    case KT_NEVER:
        if (*(const double *)field < 0) {
            fputs("never", out);
            break;
        }
        /* fall through */
    case KT_TIME:
    case KT_NUM:
        fprintf(out, "%.10g", *(const double *)field);
        break;
    case KT_INT:
        fprintf(out, "%d", *(const int *)field);
        break;
    case KT_SEED:
        fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case KT_BOOL:
        fputs(*(const int *)field ? "yes" : "no", out);
        break;
    case KT_POLICY:
        fputs(engine_policy_name(*(const enum engine_policy *)field), out);
        break;
    case KT_FETCH:
        fputs(engine_fetch_name(*(const enum engine_fetch *)field), out);
        break;
    case KT_DIST:
        fputs(dist_names[*(const int *)field & 3], out);
        break;
    case KT_WINDOWS: {
        const struct emu_windows *w = (const struct emu_windows *)field;
        for (int i = 0; i < w->n; i++)
            fprintf(out, "%s%.10g-%.10g", i ? ", " : "", w->start[i], w->end[i]);
        break;
    }
    case KT_NAME:
        fputs(field, out);
        break;
    }
}

void emulate_section_print(int sec, const void *base, FILE *out)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (keys[i].sec != sec)
            continue;
        fprintf(out, "%s = ", keys[i].name);
        value_print(&keys[i], base, out);
        fputc('\n', out);
    }
}

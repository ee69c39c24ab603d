/*
 * batch.c - `gridnode batch`: the batch scheduler role. One policy (roles/batch/engine/),
 * two drivers: the live role (roles/batch/live/, driving cluster managers over ZeroMQ),
 * and the trace simulator (roles/batch/sim/), `gridnode batch --simulate TRACE`, which
 * replays a Standard Workload Format trace through exactly that engine.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "roles/batch/liveconf.h"
#include "roles/batch/live/live.h"
#include "roles/batch/sim/sim.h"
#include "roles/batch/sim/simout.h"

static const char usage_text[] =
    "usage: gridnode batch --simulate TRACE.swf[.gz] [options]\n"
    "       gridnode batch --check-config [-c FILE] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "       gridnode batch -c FILE [--set SECTION.KEY=VALUE]...   (the live role)\n"
    "\n"
    "Without --simulate it runs the live role: schedules jobs submitted to batch.listen\n"
    "(gridnode submit/jobs/job/cancel -e ENDPOINT) onto the cluster managers in\n"
    "batch.clusters. --simulate replays a\n"
    "Standard Workload Format trace (plain or gzip) through the scheduling engine.\n"
    "\n"
    "configuration:\n"
    "  -c, --config FILE       scheduler settings (see configs/batch.ini)\n"
    "  --set SECTION.KEY=VAL   override one key, e.g. priority.xfactorweight=10 or\n"
    "                          user:alice.maxjob=4 (repeatable; after -c)\n"
    "  --check-config          print the effective configuration and exit\n"
    "simulation:\n"
    "  --simulate TRACE        the workload to replay\n"
    "  --procs N               machine size (default: the trace's MaxProcs, else MaxNodes)\n"
    "  --node-procs K          processors per node (default 1: the processor-pool model;\n"
    "                          a node runs one job at a time)\n"
    "  --policy P              fcfs | easy | conservative (sets RESERVATIONDEPTH and\n"
    "                          BACKFILLPOLICY; default: from the config, Maui's EASY)\n"
    "  --depth N               RESERVATIONDEPTH: N or 'unlimited' (after --policy)\n"
    "  --backfill B            BACKFILLPOLICY: none | firstfit | bestfit\n"
    "  --estimate E            walltimes: requested (default) or actual run times\n"
    "  --start K               skip the first K usable jobs of the trace\n"
    "  --count N               simulate N usable jobs (default: all)\n"
    "  --time-scale K          divide every time of the trace by K and schedule in\n"
    "                          milliseconds, as the live role does (times in --jobs-out\n"
    "                          are then milliseconds; e.g. K 1000 for a trace written\n"
    "                          in milliseconds)\n"
    "  --estimates             estimate every pending job's start every cycle and\n"
    "                          report the error of each job's first estimate\n"
    "  --start-delays FILE     replaying a live role's record: lines 'JOB DELAY [HEARD]',\n"
    "                          the time from the cycle's start decision to the cluster's\n"
    "                          start and to the role hearing of it (trace units); the\n"
    "                          engine counts that job's walltime from the start, as\n"
    "                          the live role does (JOB_GET started, start_heard)\n"
    "output:\n"
    "  --json                  the figures as one JSON object on stdout\n"
    "  --jobs-out FILE.csv     per job: id,submit,start,end,procs,wait,bsld\n"
    "  --gantt FILE.svg        draw the schedule (processors x time)\n"
    "  --gantt-range A:B       its time range, seconds after the first submission\n"
    "                          (default 0:172800, two days)\n"
    "  --diagnose-at T         print diagnose -p (priority factors of every pending job)\n"
    "                          at the first cycle T seconds after the first submission\n"
    "  -q, --quiet             no progress on stderr\n"
    "  -h, --help              this text\n"
    "\n"
    "Records without run time or processor count, with a negative submit time, or wider\n"
    "than the machine are skipped; a job running longer than its walltime is killed at\n"
    "the walltime. See docs/batch.md.\n";

struct opts {
    const char *trace, *config, *jobs_out, *gantt, *delays;
    const char **sets;
    int nsets;
    bool check, json, quiet, estimates, have_gantt_range;
    int64_t procs, diag_at, g_from, g_to;
    long long node_procs, start, count, time_scale;
    const char *policy, *depth, *backfill, *estimate;
};

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "gridnode batch: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nrun 'gridnode batch --help' for the options\n");
    return 2;
}

static int parse_ll(const char *s, long long lo, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || (*s != '-' && (*s < '0' || *s > '9')) || *end || errno || v < lo)
        return -1;
    *out = v;
    return 0;
}

/* The value of option argv[*i] (--opt VALUE or --opt=VALUE), or NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0' || *i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static int parse_range(const char *v, struct opts *o)
{
    long long a, b;
    const char *colon = strchr(v, ':');
    char first[32];
    if (!colon || (size_t)(colon - v) >= sizeof first)
        return -1;
    snprintf(first, sizeof first, "%.*s", (int)(colon - v), v);
    if (parse_ll(first, 0, &a) < 0 || parse_ll(colon + 1, 0, &b) < 0 || b <= a)
        return -1;
    o->g_from = a;
    o->g_to = b;
    o->have_gantt_range = true;
    return 0;
}

static const char *const value_opts[] = {
    "--simulate", "--config",      "--set",         "--procs",      "--node-procs",   "--policy",
    "--depth",    "--backfill",    "--estimate",    "--start",      "--count",        "--jobs-out",
    "--gantt",    "--gantt-range", "--diagnose-at", "--time-scale", "--start-delays", "-c"};

/* Applies one option taking a value; 0, or the exit status of a usage error. */
static int value_opt(struct opts *o, const char *name, const char *v)
{
    long long n;
    if (!strcmp(name, "--simulate"))
        o->trace = v;
    else if (!strcmp(name, "--config") || !strcmp(name, "-c"))
        o->config = v;
    else if (!strcmp(name, "--set"))
        o->sets[o->nsets++] = v;
    else if (!strcmp(name, "--procs")) {
        if (parse_ll(v, 1, &n) < 0 || n > INT32_MAX)
            return usage_error("--procs wants a positive count, not '%s'", v);
        o->procs = n;
    } else if (!strcmp(name, "--node-procs")) {
        if (parse_ll(v, 1, &o->node_procs) < 0 || o->node_procs > 1 << 20)
            return usage_error("--node-procs wants a positive count, not '%s'", v);
    } else if (!strcmp(name, "--policy"))
        o->policy = v;
    else if (!strcmp(name, "--depth"))
        o->depth = v;
    else if (!strcmp(name, "--backfill"))
        o->backfill = v;
    else if (!strcmp(name, "--estimate"))
        o->estimate = v;
    else if (!strcmp(name, "--start")) {
        if (parse_ll(v, 0, &o->start) < 0)
            return usage_error("--start wants a count, not '%s'", v);
    } else if (!strcmp(name, "--count")) {
        if (parse_ll(v, 1, &o->count) < 0)
            return usage_error("--count wants a positive count, not '%s'", v);
    } else if (!strcmp(name, "--time-scale")) {
        if (parse_ll(v, 1, &o->time_scale) < 0 || o->time_scale > 1000000000)
            return usage_error("--time-scale wants a positive divisor, not '%s'", v);
    } else if (!strcmp(name, "--jobs-out"))
        o->jobs_out = v;
    else if (!strcmp(name, "--start-delays"))
        o->delays = v;
    else if (!strcmp(name, "--gantt"))
        o->gantt = v;
    else if (!strcmp(name, "--gantt-range")) {
        if (parse_range(v, o) < 0)
            return usage_error("--gantt-range wants FROM:TO seconds with FROM < TO, not '%s'", v);
    } else if (!strcmp(name, "--diagnose-at")) {
        if (parse_ll(v, 0, &n) < 0)
            return usage_error("--diagnose-at wants seconds, not '%s'", v);
        o->diag_at = n;
    }
    return 0;
}

/* Parses argv into o; 0, -1 for --help (already printed), or an exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (!strcmp(a, "--check-config"))
            o->check = true;
        else if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            o->quiet = true;
        else if (!strcmp(a, "--estimates"))
            o->estimates = true;
        else {
            size_t k = 0;
            for (; k < sizeof value_opts / sizeof value_opts[0]; k++)
                if ((v = opt_value(argc, argv, &i, value_opts[k])))
                    break;
            if (!v)
                return usage_error("unknown option or missing value: '%s'", a);
            int rc = value_opt(o, value_opts[k], v);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Builds the effective configuration: defaults, -c FILE, --set, then the policy
 * flags. 0 or an exit status. */
static int make_config(const struct opts *o, struct batch_ini *f)
{
    char err[8192];
    struct batch_config *c = &f->eng;
    batch_ini_defaults(f);
    if (o->config && batch_ini_load(f, o->config, err, sizeof err) < 0) {
        /* every error of the file, one a line (issue 27) */
        for (char *p = err, *nl; p; p = nl ? nl + 1 : NULL) {
            nl = strchr(p, '\n');
            fprintf(stderr, "gridnode batch: %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
        }
        return 1;
    }
    for (int i = 0; i < o->nsets; i++)
        if (batch_ini_set(f, o->sets[i], err, sizeof err) < 0) {
            fprintf(stderr, "gridnode batch: %s\n", err);
            return 2;
        }
    if (o->policy) {
        if (!strcmp(o->policy, "fcfs")) {
            c->backfill = BATCH_BF_NONE;
            c->reservation_depth = 1;
        } else if (!strcmp(o->policy, "easy")) {
            c->backfill = c->backfill == BATCH_BF_NONE ? BATCH_BF_FIRSTFIT : c->backfill;
            c->reservation_depth = 1;
        } else if (!strcmp(o->policy, "conservative")) {
            c->backfill = c->backfill == BATCH_BF_NONE ? BATCH_BF_FIRSTFIT : c->backfill;
            c->reservation_depth = BATCH_UNLIMITED;
        } else {
            return usage_error("--policy wants fcfs, easy or conservative, not '%s'", o->policy);
        }
    }
    char set[128];
    if (o->depth) {
        snprintf(set, sizeof set, "scheduler.reservationdepth=%s", o->depth);
        if (batch_ini_set(f, set, err, sizeof err) < 0)
            return usage_error("--depth wants a count or 'unlimited', not '%s'", o->depth);
    }
    if (o->backfill) {
        snprintf(set, sizeof set, "scheduler.backfillpolicy=%s", o->backfill);
        if (batch_ini_set(f, set, err, sizeof err) < 0)
            return usage_error("--backfill wants none, firstfit or bestfit, not '%s'", o->backfill);
    }
    if (o->estimates)
        c->estimates = true;
    if (o->time_scale)
        c->unit_per_s = 1000; /* milliseconds, as the live role */
    return 0;
}

static const char *policy_name(const struct batch_config *c, char *buf, size_t len)
{
    static const char *const bf[] = {"none", "firstfit", "bestfit"};
    if (c->backfill == BATCH_BF_NONE)
        return "fcfs";
    if (c->reservation_depth == BATCH_UNLIMITED)
        snprintf(buf, len, "conservative (%s)", bf[c->backfill]);
    else if (c->reservation_depth == 1)
        snprintf(buf, len, "easy (%s)", bf[c->backfill]);
    else
        snprintf(buf, len, "depth %d (%s)", c->reservation_depth, bf[c->backfill]);
    return buf;
}

struct progress {
    double t0, last;
    bool quiet;
    const struct sim_input *in; /* to print trace job numbers */
};

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_progress(void *arg, size_t done, size_t total, int64_t simtime)
{
    struct progress *p = arg;
    double now = wall();
    if (p->quiet || now - p->last < 1.0)
        return;
    p->last = now;
    fprintf(stderr, "gridnode batch: %zu/%zu jobs done, simulated time %" PRId64 " s, %.1f s\n",
            done, total, simtime, now - p->t0);
}

static void on_diag(void *arg, struct batch_engine *e, int64_t now)
{
    const struct progress *p = arg;
    simout_diagnose(stdout, e, now, p->in);
}

static void print_text(const struct opts *o, const struct batch_config *c,
                       const struct sim_input *in, const struct sim_result *r, int64_t procs,
                       const struct swf_trace *t)
{
    char pb[64], depth[32] = "unlimited";
    if (c->reservation_depth != BATCH_UNLIMITED)
        snprintf(depth, sizeof depth, "%d", c->reservation_depth);
    printf("trace         %s (%zu records)\n", o->trace, t->njobs);
    printf("machine       %" PRId64 " processors, %" PRId64 " nodes of %lld\n", procs,
           (int64_t)(procs / o->node_procs), o->node_procs);
    printf("policy        %s, RESERVATIONDEPTH %s, walltimes %s\n", policy_name(c, pb, sizeof pb),
           depth, o->estimate ? o->estimate : "requested");
    printf("skipped       %zu no processors, %zu no run time, %zu wider than the machine, "
           "%zu bad submit time\n",
           in->skip_no_procs, in->skip_no_run, in->skip_too_wide, in->skip_bad_submit);
    printf("adjusted      %zu killed at their walltime, %zu without a requested time\n",
           in->truncated, in->no_request);
    printf("jobs          %zu\n", r->jobs);
    printf("utilization   %.4f\n", r->utilization);
    printf("wait          mean %.1f s, median %.1f s, max %.0f s\n", r->mean_wait, r->median_wait,
           r->max_wait);
    printf("slowdown      mean bounded (10 s) %.3f\n", r->mean_bsld);
    if (r->est_mae >= 0)
        printf("estimates     mean |first estimate - start| %.1f s\n", r->est_mae);
    printf("cycles        %zu (%zu idle, %zu replans)\n", r->cycles, r->idle_cycles, r->replans);
    printf("speed         %.3f s simulated wall time, %.0f jobs/s\n", r->sim_wall_s, r->jobs_per_s);
}

static int print_json(const struct opts *o, const struct batch_config *c,
                      const struct sim_input *in, const struct sim_result *r, int64_t procs,
                      double read_s)
{
    char pb[64];
    json_t *j = json_pack(
        "{s:s, s:s, s:o, s:I, s:I, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I,"
        " s:{s:I, s:I, s:I, s:I}, s:I, s:I}",
        "trace", o->trace, "policy", policy_name(c, pb, sizeof pb), "reservation_depth",
        c->reservation_depth == BATCH_UNLIMITED ? json_string("unlimited")
                                                : json_integer(c->reservation_depth),
        "procs", (json_int_t)procs, "node_procs", (json_int_t)o->node_procs, "estimate",
        o->estimate ? o->estimate : "requested", "jobs", (json_int_t)r->jobs, "utilization",
        r->utilization, "mean_wait_s", r->mean_wait, "median_wait_s", r->median_wait, "max_wait_s",
        r->max_wait, "mean_bsld", r->mean_bsld, "sim_wall_s", r->sim_wall_s, "read_s", read_s,
        "jobs_per_s", r->jobs_per_s, "cycles", (json_int_t)r->cycles, "replans",
        (json_int_t)r->replans, "makespan_s",
        (json_int_t)((r->last_end - r->first_submit) / (o->time_scale ? 1000 : 1)), "skipped",
        "no_procs", (json_int_t)in->skip_no_procs, "no_run_time", (json_int_t)in->skip_no_run,
        "too_wide", (json_int_t)in->skip_too_wide, "bad_submit", (json_int_t)in->skip_bad_submit,
        "killed_at_walltime", (json_int_t)in->truncated, "no_request", (json_int_t)in->no_request);
    if (!j)
        return -1;
    if (r->est_mae >= 0)
        json_object_set_new(j, "estimate_mae_s", json_real(r->est_mae));
    if (o->time_scale)
        json_object_set_new(j, "time_scale", json_integer(o->time_scale));
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!s)
        return -1;
    printf("%s\n", s);
    free(s);
    return 0;
}

/* The machine size: --procs, else the header's MaxProcs, else MaxNodes (<= 0: none). */
static int64_t machine_procs(const struct opts *o, const struct swf_trace *h)
{
    return o->procs ? o->procs : h->max_procs > 0 ? h->max_procs : h->max_nodes;
}

static int stream_next(void *arg, const struct swf_job **recs, size_t *n, char *err, size_t len)
{
    return swf_stream_next(arg, recs, n, err, len);
}

/* Simulates the whole trace t (records and final header) the classic way: sorted
 * job list first, then the run. 0 or -1 with a message in err. */
static int simulate_read(const struct opts *o, struct swf_stream *s, struct swf_trace *t,
                         struct sim_opts *so, struct sim_input *in, struct sim_result *r, char *err,
                         size_t errlen)
{
    so->procs = machine_procs(o, t);
    so->queue_names = (const char *const *)t->queue_name;
    if (so->procs <= 0) {
        snprintf(err, errlen, "%s has no MaxProcs or MaxNodes header; give --procs N", o->trace);
        return -1;
    }
    if (swf_stream_records(s, t, err, errlen) < 0 || sim_prepare(t, so, in, err, errlen) < 0)
        return -1;
    if (so->diag_at >= 0)
        so->diag_at += in->jobs[0].submit;
    return sim_run(in, so, r, err, errlen);
}

/* Loads the trace and runs the simulation described by o. Returns the exit status.
 *
 * The trace is read by a thread of its own (swf_stream) while the simulation runs
 * on the records read so far (sim_stream), with the header as it stood at the
 * first record. The result is kept if the final header is the same, which is the
 * case for every trace with its header on top; otherwise, and with --diagnose-at
 * (which prints during the run, and a run may have to be done again), the whole
 * trace is read first and then simulated (simulate_read). Either way a reading
 * error is reported before a simulation error, as the trace comes first. */
static int simulate(struct opts *o, const struct batch_config *c)
{
    char err[512], serr[512] = "";
    int64_t *d_id = NULL, *d_delay = NULL, *d_heard = NULL;
    struct swf_stream *s = NULL;
    const struct swf_trace *head = NULL;
    struct swf_trace t;
    struct sim_input in;
    struct sim_result r;
    struct progress pr = {wall(), wall(), o->quiet, &in};
    int rc = 1;
    memset(&t, 0, sizeof t);
    memset(&in, 0, sizeof in);
    memset(&r, 0, sizeof r);
    if (swf_stream_open(o->trace, &s, err, sizeof err) < 0 ||
        !(head = swf_stream_header(s, err, sizeof err))) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    struct sim_opts so = {.procs = machine_procs(o, head),
                          .node_procs = (int32_t)o->node_procs,
                          .time_scale = o->time_scale,
                          .estimate = o->estimate && !strcmp(o->estimate, "actual")
                                          ? SIM_EST_ACTUAL
                                          : SIM_EST_REQUESTED,
                          .start = (size_t)o->start,
                          .count = (size_t)o->count,
                          .cfg = c,
                          .queue_names = (const char *const *)head->queue_name,
                          .record_nodes = o->gantt != NULL,
                          .progress = on_progress,
                          .arg = &pr,
                          .diag_at = o->diag_at * (o->time_scale ? 1000 : 1),
                          .diag = o->diag_at >= 0 ? on_diag : NULL};
    if (o->delays &&
        sim_load_delays(o->delays, &d_id, &d_delay, &d_heard, &so.nd, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    so.d_id = d_id;
    so.d_delay = d_delay;
    so.d_heard = d_heard;
    struct sim_source src = {stream_next, s};
    bool streamed = so.procs > 0 && so.diag == NULL;
    int sim_rc = streamed ? sim_stream(&in, &so, &src, &r, serr, sizeof serr) : 0;
    if (swf_stream_finish(s, &t, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    if (streamed && !swf_same_header(head, &t)) { /* a header line below the first job */
        streamed = false;
        sim_input_free(&in);
        sim_result_free(&r);
    }
    if (streamed ? sim_rc < 0 : simulate_read(o, s, &t, &so, &in, &r, serr, sizeof serr) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", serr);
        goto out;
    }
    int64_t procs = so.procs;
    if (o->jobs_out && simout_csv(o->jobs_out, &in, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    int64_t unit = o->time_scale ? 1000 : 1; /* engine units per second */
    int64_t g0 = r.first_submit + (o->have_gantt_range ? o->g_from : 0) * unit;
    int64_t g1 = r.first_submit + (o->have_gantt_range ? o->g_to : 172800) * unit;
    if (o->gantt && simout_gantt(o->gantt, &in, &r, procs, (int32_t)o->node_procs, g0, g1, unit,
                                 err, sizeof err) < 0) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        goto out;
    }
    if (o->json ? print_json(o, c, &in, &r, procs, t.read_s) < 0
                : (print_text(o, c, &in, &r, procs, &t), 0)) {
        fprintf(stderr, "gridnode batch: out of memory\n");
        goto out;
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    sim_input_free(&in);
    sim_result_free(&r);
    swf_stream_close(&s);
    swf_free(&t);
    free(d_id);
    free(d_delay);
    free(d_heard);
    return rc;
}

int cmd_batch(int argc, char **argv)
{
    struct opts o = {.node_procs = 1, .diag_at = -1};
    struct batch_ini c;
    if (!(o.sets = calloc((size_t)argc + 1, sizeof *o.sets))) {
        fprintf(stderr, "gridnode batch: out of memory\n");
        return 1;
    }
    int rc = parse_args(argc, argv, &o);
    batch_ini_defaults(&c);
    if (rc < 0) {
        rc = 0; /* --help */
    } else if (rc == 0 && (rc = make_config(&o, &c)) == 0) {
        if (o.estimate && strcmp(o.estimate, "requested") && strcmp(o.estimate, "actual"))
            rc = usage_error("--estimate wants requested or actual, not '%s'", o.estimate);
        else if (o.check) {
            char err[512];
            if (!o.trace && live_check_config(&c, err, sizeof err) < 0) {
                fprintf(stderr, "gridnode batch: configuration error: %s\n", err);
                rc = 1;
            } else {
                batch_ini_print(&c, stdout);
            }
        } else if (!o.trace && (o.time_scale || o.delays))
            rc = usage_error("%s only applies to --simulate",
                             o.time_scale ? "--time-scale" : "--start-delays");
        else if (!o.trace) {
            rc = live_main(argc, argv, &c);
        } else {
            rc = simulate(&o, &c.eng);
        }
    }
    batch_ini_clear(&c);
    free(o.sets);
    return rc;
}

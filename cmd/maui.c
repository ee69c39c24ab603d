/*
 * maui.c - the batch role's commands under Maui's names: showq, checkjob, showstart,
 * diagnose, canceljob, setres, showres, releaseres (docs/wire.md 6.12). Tables by
 * default, --json for scripts; the endpoint is -e, else $GRIDNODE_BATCH, else
 * tcp://127.0.0.1:7400. Exit status: 0 done, 1 the batch role refused or did not
 * answer (the reason on stderr), 2 bad usage.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "lib/text.h"
#include "cmd/cmd.h"
#include "cmd/maui.h"

static const char batch_help[] =
    "  -e, --endpoint EP   batch role endpoint (default $GRIDNODE_BATCH, else\n"
    "                      tcp://127.0.0.1:7400)\n"
    "  --timeout MS        give up waiting for the reply after MS ms (default 10000)\n"
    "  --json              machine-readable output\n";

static bool want_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s\noptions:\n%s", usage, batch_help);
            return true;
        }
    }
    return false;
}

/* cli_common with the batch role's default endpoint. */
static int common(struct cli *c, const char *prog, int *argc, char **argv)
{
    bool given = false;
    for (int i = 1; i < *argc && strcmp(argv[i], "--"); i++)
        given |= !strcmp(argv[i], "-e") || !strcmp(argv[i], "--endpoint");
    if (cli_common(c, prog, argc, argv) < 0)
        return -1;
    if (!given) {
        const char *e = getenv("GRIDNODE_BATCH");
        c->endpoint = e && *e ? e : "tcp://127.0.0.1:7400";
    }
    return 0;
}

static const char *me(void)
{
    const char *u = getenv("USER");
    if (u && *u)
        return u;
    struct passwd *pw = getpwuid(getuid());
    return pw ? pw->pw_name : "";
}

/* Sends wb; on success prints JSON if asked and returns 0 with r to free. */
static int call(struct cli *c, struct wire_buf *wb, struct cli_reply *r)
{
    int rc = cli_call(c, wb, 1, r);
    wire_buf_free(wb);
    return rc == 0 ? 0 : 1;
}

static const char *ms_time(int64_t ms, char *b, size_t n)
{
    if (ms < 0)
        return "never";
    return cli_time(ms, b, n);
}

/* "1:02:03" from milliseconds (negative: "-"). */
static const char *dur(int64_t ms, char *b, size_t n)
{
    if (ms < 0)
        return "-";
    int64_t s = (ms + 500) / 1000;
    if (s >= 86400)
        snprintf(b, n, "%lld:%02lld:%02lld:%02lld", (long long)(s / 86400),
                 (long long)(s / 3600 % 24), (long long)(s / 60 % 60), (long long)(s % 60));
    else
        snprintf(b, n, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                 (long long)(s % 60));
    return b;
}

/* Seconds from "SS", "MM:SS", "HH:MM:SS" or "DD:HH:MM:SS"; -1 if bad. */
static int64_t parse_dur(const char *s)
{
    int64_t parts[4], n = 0;
    const char *p = s;
    while (*p && n < 4) {
        char *end;
        if (*p < '0' || *p > '9') /* strtoll would take a sign or a space */
            return -1;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > 366LL * 86400 * 100)
            return -1;
        parts[n++] = v;
        if (*end == ':')
            p = end + 1;
        else if (*end == '\0')
            p = end;
        else
            return -1;
    }
    if (*p || n == 0)
        return -1;
    static const int64_t mul[4] = {1, 60, 3600, 86400};
    int64_t t = 0;
    for (int64_t i = 0; i < n; i++)
        t += parts[n - 1 - i] * mul[i];
    return t;
}

/* A time: "now", "+DURATION" (from now) or seconds since the epoch; ms, or -1. */
static int64_t parse_when(const char *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (!strcmp(s, "now"))
        return now;
    if (*s == '+') {
        int64_t d = parse_dur(s + 1);
        return d < 0 ? -1 : now + d * 1000;
    }
    uint64_t v;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    if (!*s || (v = strtoull(s, NULL, 10)) == 0 || v > (1ULL << 40))
        return -1;
    return (int64_t)v * 1000;
}

/* ---- showq ---- */

static const char showq_usage[] =
    "usage: gridnode showq [options] [-u USER] [--all]\n\n"
    "The batch queue as the scheduler sees it, in three parts like Maui's showq:\n"
    "active jobs (running), eligible jobs (waiting, in priority order), and blocked jobs\n"
    "(held, throttled by a MAXJOB/MAXPROC limit, or larger than any partition) with\n"
    "the reason. --all also lists ended jobs still kept.\n";

static void showq_part(const msgpack_object *jobs, const char *which, int64_t now)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < jobs->via.array.size; i++) {
        const msgpack_object *j = &jobs->via.array.ptr[i];
        char qs[16];
        cli_text(j, "queue_state", qs, sizeof qs);
        if (strcmp(qs, which))
            continue;
        if (!n++) {
            printf("%s jobs:\n", which);
            if (!strcmp(which, "active"))
                printf("%8s %-10s %-10s %6s %6s %10s %10s  %s\n", "JOB", "USER", "CLASS", "PROCS",
                       "TASKS", "WALLTIME", "REMAINING", "STARTED");
            else
                printf("%8s %-10s %-10s %6s %6s %10s %10s  %s\n", "JOB", "USER", "CLASS", "PROCS",
                       "TASKS", "WALLTIME", "PRIORITY", "REASON");
        }
        char user[41], cls[41], reason[80], b1[32], b2[32], t[32];
        cli_cell(j, "user", 10, user, sizeof user);
        cli_cell(j, "class", 10, cls, sizeof cls);
        cli_text(j, "reason", reason, sizeof reason);
        int64_t wall = (int64_t)wire_get_u64(j, "walltime_s", 0) * 1000;
        int64_t st = wire_get_i64(j, "started", 0);
        printf("%8llu %s %s %6llu %6llu %10s ", (unsigned long long)wire_get_u64(j, "job", 0), user,
               cls, (unsigned long long)wire_get_u64(j, "procs", 0),
               (unsigned long long)wire_get_u64(j, "ntasks", 0), dur(wall, b1, sizeof b1));
        if (!strcmp(which, "active"))
            printf("%10s  %s\n", dur(st ? st + wall - now : -1, b2, sizeof b2),
                   cli_time(st, t, sizeof t));
        else
            printf("%10.1f  %s\n", wire_get_f64(j, "priority", 0), reason[0] ? reason : "-");
    }
    if (!n)
        printf("%s jobs: none\n", which);
    printf("\n");
}

struct showq_args {
    const char *user;
    bool all;
};

static void showq_fill(struct wire_buf *wb, const void *arg)
{
    const struct showq_args *a = arg;
    if (a->user)
        wire_put_str(wb, "user", a->user);
    if (a->all)
        wire_put_bool(wb, "all", true);
}

int cmd_showq(int argc, char **argv)
{
    struct cli c;
    if (want_help(argc, argv, showq_usage))
        return 0;
    if (common(&c, "gridnode showq", &argc, argv) < 0)
        return 2;
    const char *user = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-u") && i + 1 < argc)
            user = argv[++i];
        else if (!strcmp(argv[i], "--all"))
            all = true;
        else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], showq_usage);
            return 2;
        }
    }
    /* every page (a long queue comes in 1 MiB pages, docs/wire.md 6.12) */
    struct showq_args a = {user, all};
    struct cli_pages p;
    msgpack_object jobs;
    if (cli_list_fields(&c, WT_SHOWQ, (user != NULL) + all, showq_fill, &a, &p) != 0)
        return 1;
    if (cli_pages_merge(&c, &p, "jobs", &jobs) < 0) {
        cli_pages_free(&p);
        return 1;
    }
    if (c.json) {
        cli_print_json(&jobs);
    } else {
        int64_t now = wire_get_i64(p.r[0]->msg.root, "now", 0);
        showq_part(&jobs, "active", now);
        showq_part(&jobs, "eligible", now);
        showq_part(&jobs, "blocked", now);
        if (all)
            showq_part(&jobs, "ended", now);
        printf("%u jobs\n", jobs.via.array.size);
    }
    free(jobs.via.array.ptr);
    cli_pages_free(&p);
    return 0;
}

/* ---- checkjob ---- */

static const char checkjob_usage[] =
    "usage: gridnode checkjob [options] JOB\n\n"
    "One job as the scheduler sees it: state, credentials, priority, its job\n"
    "reservation or estimated start, why it is not running, and the hosts it runs on.\n";

int cmd_checkjob(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    uint64_t id;
    if (want_help(argc, argv, checkjob_usage))
        return 0;
    if (common(&c, "gridnode checkjob", &argc, argv) < 0)
        return 2;
    if (argc != 2) {
        fprintf(stderr, "%s: give exactly one job id\n%s", c.prog, checkjob_usage);
        return 2;
    }
    if (cli_u64(&c, "JOB", argv[1], &id) < 0)
        return 2;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_CHECKJOB, 1, 1);
    wire_put_u64(&wb, "job", id);
    if (call(&c, &wb, &r))
        return 1;
    const msgpack_object *j = wire_get(r.msg.root, "job");
    if (c.json) {
        cli_print_json(j);
        cli_reply_free(&r);
        return 0;
    }
    static const char *const strs[] = {"queue_state", "state",   "name",    "user",
                                       "group",       "account", "class",   "qos",
                                       "kind",        "resv",    "cluster", "constraint"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        char v[128];
        cli_text(j, strs[i], v, sizeof v);
        printf("%-12s %s\n", strs[i], v[0] ? v : "-");
    }
    char b[40];
    printf("%-12s %llu x %llu procs\n", "tasks", (unsigned long long)wire_get_u64(j, "ntasks", 0),
           (unsigned long long)wire_get_u64(j, "procs", 0));
    printf("%-12s %s\n", "walltime",
           dur((int64_t)wire_get_u64(j, "walltime_s", 0) * 1000, b, sizeof b));
    printf("%-12s %llu MB per proc, disk %llu MB\n", "memory",
           (unsigned long long)wire_get_u64(j, "mem_mb", 0),
           (unsigned long long)wire_get_u64(j, "disk_mb", 0));
    printf("%-12s %s\n", "submitted", cli_time(wire_get_i64(j, "submitted", 0), b, sizeof b));
    printf("%-12s %s\n", "started", cli_time(wire_get_i64(j, "started", 0), b, sizeof b));
    printf("%-12s %.2f\n", "priority", wire_get_f64(j, "priority", 0));
    int64_t res = wire_get_i64(j, "reserved", -1), est = wire_get_i64(j, "estimate", -1);
    printf("%-12s %s\n", "reservation", res >= 0 ? ms_time(res, b, sizeof b) : "-");
    printf("%-12s %s\n", "estimate", est >= 0 ? ms_time(est, b, sizeof b) : "-");
    printf("%-12s %s\n", "hold", wire_get_bool(j, "hold", false) ? "yes" : "no");
    printf("%-12s %s\n", "early", wire_get_bool(j, "early", false) ? "yes" : "no");
    if (wire_get_u64(j, "requeues", 0)) /* gridnode requeue -e BATCH (issue 15) */
        printf("%-12s %llu\n", "requeues", (unsigned long long)wire_get_u64(j, "requeues", 0));
    char reason[256];
    cli_text(j, "reason", reason, sizeof reason);
    printf("%-12s %s\n", "why waiting", reason[0] ? reason : "-");
    const msgpack_object *h = wire_get(j, "hosts");
    printf("%-12s ", "hosts");
    for (uint32_t i = 0; h && i < h->via.array.size; i++)
        printf("%s%.*s", i ? " " : "", (int)h->via.array.ptr[i].via.str.size,
               h->via.array.ptr[i].via.str.ptr);
    printf("%s\n", h && h->via.array.size ? "" : "-");
    cli_reply_free(&r);
    return 0;
}

/* ---- showstart ---- */

static const char showstart_usage[] =
    "usage: gridnode showstart [options] JOB\n"
    "       gridnode showstart [options] PROCS@DURATION [-n N]\n\n"
    "When a pending job will start (its job reservation if it has one, else the\n"
    "earliest start that fits the current plan), or when a request of PROCS\n"
    "processors for DURATION ([[DD:]HH:]MM:]SS) could start and the next N-1 possible\n"
    "starts (default 5). Estimates assume jobs end at their walltimes.\n";

int cmd_showstart(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (want_help(argc, argv, showstart_usage))
        return 0;
    if (common(&c, "gridnode showstart", &argc, argv) < 0)
        return 2;
    const char *what = NULL;
    uint64_t max = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            if (cli_uint(c.prog, "-n", argv[++i], 1, 100, &max) < 0)
                return 2;
        } else if (!what) {
            what = argv[i];
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], showstart_usage);
            return 2;
        }
    }
    if (!what) {
        fprintf(stderr, "%s: give a job id or PROCS@DURATION\n%s", c.prog, showstart_usage);
        return 2;
    }
    wire_buf_init(&wb);
    const char *at = strchr(what, '@');
    if (at) {
        char pstr[24];
        uint64_t procs = 0;
        snprintf(pstr, sizeof pstr, "%.*s", (int)(at - what < 23 ? at - what : 23), what);
        int64_t d = parse_dur(at + 1);
        bool num = at > what && at - what < 20 && strspn(pstr, "0123456789") == strlen(pstr);
        if (num)
            procs = strtoull(pstr, NULL, 10);
        if (!num || procs < 1 || d < 1) {
            fprintf(stderr, "%s: '%s' is not PROCS@DURATION (e.g. 16@1:00:00)\n", c.prog, what);
            wire_buf_free(&wb);
            return 2;
        }
        wire_begin(&wb, WT_ESTIMATE, 1, 4);
        wire_put_u64(&wb, "procs", procs);
        wire_put_u64(&wb, "walltime_s", (uint64_t)d);
        wire_put_u64(&wb, "max", max);
        wire_put_str(&wb, "user", me());
    } else {
        uint64_t id;
        if (cli_u64(&c, "JOB", what, &id) < 0) {
            wire_buf_free(&wb);
            return 2;
        }
        wire_begin(&wb, WT_ESTIMATE, 1, 2);
        wire_put_u64(&wb, "job", id);
        wire_put_u64(&wb, "max", max);
    }
    if (call(&c, &wb, &r))
        return 1;
    if (c.json) {
        cli_print_json(r.msg.root);
        cli_reply_free(&r);
        return 0;
    }
    char b[40], b2[40];
    int64_t e = wire_get_i64(r.msg.root, "earliest", -1), now = wire_get_i64(r.msg.root, "now", 0);
    const char *who = at ? what : NULL;
    char jb[40];
    if (!who) {
        snprintf(jb, sizeof jb, "job %llu", (unsigned long long)wire_get_u64(r.msg.root, "job", 0));
        who = jb;
    }
    if (e < 0) {
        char reason[256];
        cli_text(r.msg.root, "reason", reason, sizeof reason);
        printf("%s: no start can be estimated%s%s\n", who, reason[0] ? ": " : "", reason);
    } else {
        printf("%s: estimated start %s (in %s)\n", who, cli_time(e, b, sizeof b),
               dur(e > now ? e - now : 0, b2, sizeof b2));
    }
    const msgpack_object *s = wire_get(r.msg.root, "starts");
    if (at && s && s->via.array.size) {
        printf("%-20s %s\n", "FROM", "UNTIL");
        for (uint32_t i = 0; i < s->via.array.size; i++) {
            const msgpack_object *w = &s->via.array.ptr[i];
            int64_t to = wire_get_i64(w, "to", -1);
            printf("%-20s %s\n", cli_time(wire_get_i64(w, "from", 0), b, sizeof b),
                   to < 0 ? "(open)" : cli_time(to, b2, sizeof b2));
        }
    }
    cli_reply_free(&r);
    return 0;
}

/* ---- diagnose ---- */

static const char diagnose_usage[] =
    "usage: gridnode diagnose [options] -p [JOB]\n"
    "       gridnode diagnose [options] -f | -n | -j\n\n"
    "-p: the priority of each pending job factor by factor (raw value x weight =\n"
    "contribution; only factors with a weight are shown). -f: fairshare, the decayed\n"
    "usage of each user, group and account against its target (-1: no target).\n"
    "-n: every host (state, cores, memory, features, batch jobs, reservations) and what\n"
    "is wrong with it (down with jobs on it, refusing starts, its cluster silent).\n"
    "-j: every job not finished (state, procs, hosts, walltime, start) and what is wrong\n"
    "with it (past its walltime, start unconfirmed, held, waiting on a dependency, too\n"
    "large for any host it may use). A user key sees only its own jobs.\n";

struct diag_args {
    char mode;
    uint64_t job;
};

static void diag_fill(struct wire_buf *wb, const void *arg)
{
    const struct diag_args *a = arg;
    wire_put_str(wb, "what",
                 a->mode == 'p'   ? "priority"
                 : a->mode == 'n' ? "nodes"
                 : a->mode == 'j' ? "jobs"
                                  : "fairshare");
    if (a->job)
        wire_put_u64(wb, "job", a->job);
}

int cmd_diagnose(int argc, char **argv)
{
    struct cli c;
    if (want_help(argc, argv, diagnose_usage))
        return 0;
    if (common(&c, "gridnode diagnose", &argc, argv) < 0)
        return 2;
    int mode = 0;
    uint64_t job = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p"))
            mode = 'p';
        else if (!strcmp(argv[i], "-f"))
            mode = 'f';
        else if (!strcmp(argv[i], "-n"))
            mode = 'n';
        else if (!strcmp(argv[i], "-j"))
            mode = 'j';
        else if (mode == 'p' && !job) {
            if (cli_u64(&c, "JOB", argv[i], &job) < 0)
                return 2;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], diagnose_usage);
            return 2;
        }
    }
    if (!mode) {
        fprintf(stderr, "%s: give -p (priority), -f (fairshare), -n (nodes) or -j (jobs)\n%s",
                c.prog, diagnose_usage);
        return 2;
    }
    struct diag_args a = {mode, job};
    struct cli_pages p;
    msgpack_object all;
    const msgpack_object *rows = &all;
    if (cli_list_fields(&c, WT_DIAGNOSE, 1 + (job != 0), diag_fill, &a, &p) != 0)
        return 1;
    if (cli_pages_merge(&c, &p, mode == 'f' ? "creds" : mode == 'n' ? "nodes" : "jobs", &all) < 0) {
        cli_pages_free(&p);
        return 1;
    }
    if (c.json) {
        cli_print_json(rows);
    } else if (mode == 'n') {
        maui_diag_nodes(rows);
    } else if (mode == 'j') {
        maui_diag_jobs(rows);
    } else if (mode == 'f') {
        printf("%-8s %-20s %10s %10s\n", "KIND", "NAME", "USAGE%", "TARGET%");
        for (uint32_t i = 0; i < rows->via.array.size; i++) {
            const msgpack_object *o = &rows->via.array.ptr[i];
            char k[16], n[81], t[16];
            cli_text(o, "kind", k, sizeof k);
            cli_cell(o, "name", 20, n, sizeof n);
            double tg = wire_get_f64(o, "target_pct", -1);
            if (tg < 0)
                snprintf(t, sizeof t, "-");
            else
                snprintf(t, sizeof t, "%.2f", tg);
            printf("%-8s %s %10.2f %10s\n", k, n, wire_get_f64(o, "usage_pct", 0), t);
        }
        if (!rows->via.array.size)
            printf("(no credentials yet)\n");
    } else {
        for (uint32_t i = 0; i < rows->via.array.size; i++) {
            const msgpack_object *o = &rows->via.array.ptr[i];
            printf("job %llu: priority %.2f\n", (unsigned long long)wire_get_u64(o, "job", 0),
                   wire_get_f64(o, "priority", 0));
            const msgpack_object *f = wire_get(o, "factors");
            printf("  %-12s %12s %10s %12s\n", "FACTOR", "VALUE", "WEIGHT", "CONTRIB");
            for (uint32_t k = 0; f && k < f->via.map.size; k++) {
                const msgpack_object_kv *kv = &f->via.map.ptr[k];
                printf("  %-12.*s %12.2f %10.2f %12.2f\n", (int)kv->key.via.str.size,
                       kv->key.via.str.ptr, wire_get_f64(&kv->val, "value", 0),
                       wire_get_f64(&kv->val, "weight", 0), wire_get_f64(&kv->val, "contrib", 0));
            }
        }
        if (!rows->via.array.size)
            printf("(no pending jobs)\n");
    }
    free(all.via.array.ptr);
    cli_pages_free(&p);
    return 0;
}

/* ---- canceljob ---- */

static const char canceljob_usage[] = "usage: gridnode canceljob [options] JOB...\n\n"
                                      "Cancels batch jobs: pending ones never start, running "
                                      "ones are stopped on their cluster.\n";

int cmd_canceljob(int argc, char **argv)
{
    struct cli c;
    if (want_help(argc, argv, canceljob_usage))
        return 0;
    if (common(&c, "gridnode canceljob", &argc, argv) < 0)
        return 2;
    if (argc < 2) {
        fprintf(stderr, "%s: give at least one job id\n%s", c.prog, canceljob_usage);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        uint64_t id;
        struct wire_buf wb;
        struct cli_reply r;
        if (cli_u64(&c, "JOB", argv[i], &id) < 0)
            return 2;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_CANCEL, 1, 1);
        wire_put_u64(&wb, "job", id);
        if (call(&c, &wb, &r)) {
            rc = 1;
            continue;
        }
        if (c.json)
            printf("{\"job\":%llu,\"cancelled\":true}\n", (unsigned long long)id);
        else
            printf("job %llu cancelled\n", (unsigned long long)id);
        cli_reply_free(&r);
    }
    return rc;
}

/* ---- setres / showres / releaseres ---- */

static const char setres_usage[] =
    "usage: gridnode setres [options] [-r NAME] (-t TASKS [-p PROCS] [-m MB] [--disk MB]\n"
    "                       [-c CLASS] | HOST[,HOST...]) (-d DURATION | --end WHEN)\n"
    "                       [-s WHEN] [-U USERS] [-G GROUPS] [-A ACCOUNTS] [-C CLASSES]\n"
    "                       [-Q QOS]\n\n"
    "Sets an administrative reservation (batch administrators only, batch.admins):\n"
    "TASKS tasks of PROCS processors (MB memory, disk per processor) on nodes the\n"
    "scheduler picks, or the whole of the named hosts, from WHEN (now, +DURATION, or\n"
    "seconds since the epoch; default now) for DURATION ([[DD:]HH:]MM:]SS) or until\n"
    "WHEN. Only jobs its access list admits (comma-separated users, groups, accounts,\n"
    "classes, QOS; any one match) may run there meanwhile; with no list it blocks the\n"
    "nodes (maintenance). It is stored and survives restarts.\n";

int cmd_setres(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (want_help(argc, argv, setres_usage))
        return 0;
    if (common(&c, "gridnode setres", &argc, argv) < 0)
        return 2;
    const char *name = NULL, *hosts = NULL, *cls = NULL, *acl[5] = {0};
    static const char *const aclopt[5] = {"-U", "-G", "-A", "-C", "-Q"};
    static const char *const aclkey[5] = {"users", "groups", "accounts", "classes", "qoss"};
    uint64_t tasks = 0, procs = 1, mem = 0, disk = 0;
    int64_t start = 0, end = 0, d = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = -1;
        for (int q = 0; q < 5; q++)
            if (!strcmp(a, aclopt[q]))
                k = q;
        if (k >= 0 && v) {
            acl[k] = v;
            i++;
        } else if (!strcmp(a, "-r") && v) {
            name = v, i++;
        } else if (!strcmp(a, "-c") && v) {
            cls = v, i++;
        } else if (!strcmp(a, "-t") && v) {
            if (cli_u64(&c, "-t", v, &tasks) < 0)
                return 2;
            i++;
        } else if (!strcmp(a, "-p") && v) {
            if (cli_u64(&c, "-p", v, &procs) < 0)
                return 2;
            i++;
        } else if (!strcmp(a, "-m") && v) {
            if (cli_u64(&c, "-m", v, &mem) < 0)
                return 2;
            i++;
        } else if (!strcmp(a, "--disk") && v) {
            if (cli_u64(&c, "--disk", v, &disk) < 0)
                return 2;
            i++;
        } else if ((!strcmp(a, "-s") || !strcmp(a, "--end")) && v) {
            int64_t t = parse_when(v);
            if (t < 0) {
                fprintf(stderr,
                        "%s: %s wants now, +DURATION or seconds since the epoch, not '%s'\n",
                        c.prog, a, v);
                return 2;
            }
            *(a[1] == 's' ? &start : &end) = t;
            i++;
        } else if (!strcmp(a, "-d") && v) {
            if ((d = parse_dur(v)) < 1) {
                fprintf(stderr, "%s: -d wants [[DD:]HH:]MM:]SS, not '%s'\n", c.prog, v);
                return 2;
            }
            i++;
        } else if (a[0] != '-' && !hosts) {
            hosts = a;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, a, setres_usage);
            return 2;
        }
    }
    if (!hosts && !tasks) {
        fprintf(stderr, "%s: give -t TASKS or host names\n%s", c.prog, setres_usage);
        return 2;
    }
    if (!d && !end) {
        fprintf(stderr, "%s: give -d DURATION or --end WHEN\n%s", c.prog, setres_usage);
        return 2;
    }
    uint32_t n = 1 + (name != NULL) + (cls != NULL) + (start != 0) + (end != 0) + (d != 0);
    n += hosts ? 1 : 4;
    for (int k = 0; k < 5; k++)
        n += acl[k] != NULL;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESV_SET, 1, n);
    wire_put_str(&wb, "user", me());
    if (name)
        wire_put_str(&wb, "name", name);
    if (cls)
        wire_put_str(&wb, "class", cls);
    if (start)
        wire_put_i64(&wb, "start", start);
    if (end)
        wire_put_i64(&wb, "end", end);
    if (d)
        wire_put_u64(&wb, "duration_s", (uint64_t)d);
    for (int k = 0; k < 6; k++) {
        const char *list = k < 5 ? acl[k] : hosts;
        if (!list)
            continue;
        uint32_t cnt = 1;
        for (const char *p = list; *p; p++)
            cnt += *p == ',';
        wire_put_key(&wb, k < 5 ? aclkey[k] : "hosts");
        wire_pack_array(&wb, cnt);
        for (const char *p = list;;) {
            size_t l = strcspn(p, ",");
            wire_pack_strn(&wb, p, l);
            if (!p[l])
                break;
            p += l + 1;
        }
    }
    if (!hosts) {
        wire_put_u64(&wb, "tasks", tasks);
        wire_put_u64(&wb, "procs", procs);
        wire_put_u64(&wb, "mem_mb", mem);
        wire_put_u64(&wb, "disk_mb", disk);
    }
    if (call(&c, &wb, &r))
        return 1;
    const msgpack_object *v = wire_get(r.msg.root, "resv");
    if (c.json) {
        cli_print_json(v);
    } else {
        char nm[80], b[32], b2[32];
        cli_text(v, "name", nm, sizeof nm);
        printf("reservation %s set: %s to %s on ", nm,
               cli_time(wire_get_i64(v, "start", 0), b, sizeof b),
               cli_time(wire_get_i64(v, "end", 0), b2, sizeof b2));
        const msgpack_object *h = wire_get(v, "hosts");
        for (uint32_t i = 0; h && i < h->via.array.size; i++)
            printf("%s%.*s", i ? "," : "", (int)h->via.array.ptr[i].via.str.size,
                   h->via.array.ptr[i].via.str.ptr);
        printf("\n");
    }
    cli_reply_free(&r);
    return 0;
}

static const char showres_usage[] =
    "usage: gridnode showres [options] [NAME]\n"
    "       gridnode showres [options] -n [HOST]\n\n"
    "Lists the reservations (administrative and site ones): time window, hosts,\n"
    "access list, the job bound to it. -n lists them host by host.\n";

static void acl_text(const msgpack_object *v, char *buf, size_t cap)
{
    static const char *const keys[5] = {"users", "groups", "accounts", "classes", "qoss"};
    static const char *const tag[5] = {"U", "G", "A", "C", "Q"};
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < 5; k++) {
        const msgpack_object *a = wire_get(v, keys[k]);
        for (uint32_t i = 0; a && i < a->via.array.size && len + 1 < cap; i++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s:%.*s", len ? "," : "", tag[k],
                                    (int)a->via.array.ptr[i].via.str.size,
                                    a->via.array.ptr[i].via.str.ptr);
    }
    if (len >= cap)
        buf[cap - 1] = '\0';
}

struct resv_args {
    bool by_host;
    const char *arg;
};

static void resv_fill(struct wire_buf *wb, const void *arg)
{
    const struct resv_args *a = arg;
    if (a->arg)
        wire_put_str(wb, a->by_host ? "host" : "name", a->arg);
}

int cmd_showres(int argc, char **argv)
{
    struct cli c;
    if (want_help(argc, argv, showres_usage))
        return 0;
    if (common(&c, "gridnode showres", &argc, argv) < 0)
        return 2;
    bool by_host = false;
    const char *arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n"))
            by_host = true;
        else if (!arg && argv[i][0] != '-')
            arg = argv[i];
        else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], showres_usage);
            return 2;
        }
    }
    struct resv_args a = {by_host, arg};
    struct cli_pages p;
    msgpack_object all;
    const msgpack_object *rs = &all;
    if (cli_list_fields(&c, WT_RESV_LIST, arg != NULL, resv_fill, &a, &p) != 0)
        return 1;
    if (cli_pages_merge(&c, &p, "resvs", &all) < 0) {
        cli_pages_free(&p);
        return 1;
    }
    if (c.json) {
        cli_print_json(rs);
        free(all.via.array.ptr);
        cli_pages_free(&p);
        return 0;
    }
    char b[32], b2[32], nm[81], acl[128];
    if (by_host) {
        printf("%-20s %-20s %-19s  %s\n", "HOST", "RESERVATION", "START", "END");
        uint32_t rows = 0;
        for (uint32_t i = 0; i < rs->via.array.size; i++) {
            const msgpack_object *v = &rs->via.array.ptr[i];
            const msgpack_object *h = wire_get(v, "hosts");
            cli_cell(v, "name", 20, nm, sizeof nm);
            for (uint32_t k = 0; h && k < h->via.array.size; k++) {
                const msgpack_object *o = &h->via.array.ptr[k];
                char host[256], hc[81];
                if (arg && (strlen(arg) != o->via.str.size ||
                            memcmp(arg, o->via.str.ptr, o->via.str.size)))
                    continue;
                text_escape(host, sizeof host, o->via.str.ptr, o->via.str.size);
                printf("%s %s %-19s  %s\n", cli_pad(host, 20, hc, sizeof hc), nm,
                       cli_time(wire_get_i64(v, "start", 0), b, sizeof b),
                       cli_time(wire_get_i64(v, "end", 0), b2, sizeof b2));
                rows++;
            }
        }
        if (!rows)
            printf("(no reserved hosts)\n");
    } else {
        printf("%-20s %-5s %-19s  %-19s %6s %6s  %s\n", "RESERVATION", "TYPE", "START", "END",
               "HOSTS", "JOB", "ACCESS");
        for (uint32_t i = 0; i < rs->via.array.size; i++) {
            const msgpack_object *v = &rs->via.array.ptr[i];
            const msgpack_object *h = wire_get(v, "hosts");
            cli_cell(v, "name", 20, nm, sizeof nm);
            acl_text(v, acl, sizeof acl);
            uint64_t job = wire_get_u64(v, "job", 0);
            char jb[24];
            snprintf(jb, sizeof jb, "%llu", (unsigned long long)job);
            printf("%s %-5s %-19s  %-19s %6u %6s  %s\n", nm,
                   wire_get_bool(v, "site", false) ? "site" : "admin",
                   cli_time(wire_get_i64(v, "start", 0), b, sizeof b),
                   cli_time(wire_get_i64(v, "end", 0), b2, sizeof b2), h ? h->via.array.size : 0,
                   job ? jb : "-", acl[0] ? acl : "(nobody)");
        }
        if (!rs->via.array.size)
            printf("(no reservations)\n");
    }
    free(all.via.array.ptr);
    cli_pages_free(&p);
    return 0;
}

static const char releaseres_usage[] =
    "usage: gridnode releaseres [options] NAME...\n\n"
    "Releases reservations (batch administrators; the owner of a site reservation).\n"
    "Jobs already running in one keep their hosts.\n";

int cmd_releaseres(int argc, char **argv)
{
    struct cli c;
    if (want_help(argc, argv, releaseres_usage))
        return 0;
    if (common(&c, "gridnode releaseres", &argc, argv) < 0)
        return 2;
    if (argc < 2) {
        fprintf(stderr, "%s: give at least one reservation name\n%s", c.prog, releaseres_usage);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct wire_buf wb;
        struct cli_reply r;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_RESV_RELEASE, 1, 2);
        wire_put_str(&wb, "user", me());
        wire_put_str(&wb, "name", argv[i]);
        if (call(&c, &wb, &r)) {
            rc = 1;
            continue;
        }
        if (c.json) {
            printf("{\"name\":\"");
            for (const char *q = argv[i]; *q; q++)
                printf((unsigned char)*q < 0x20  ? "\\u%04x"
                       : *q == '"' || *q == '\\' ? "\\%c"
                                                 : "%c",
                       *q);
            printf("\",\"released\":true}\n");
        } else
            printf("reservation %s released\n", argv[i]);
        cli_reply_free(&r);
    }
    return rc;
}

/* ---- shared with mauinode.c (cmd/maui.h) ---- */

bool maui_want_help(int argc, char **argv, const char *usage)
{
    return want_help(argc, argv, usage);
}

int maui_common(struct cli *c, const char *prog, int *argc, char **argv)
{
    return common(c, prog, argc, argv);
}

int maui_call(struct cli *c, struct wire_buf *wb, struct cli_reply *r)
{
    return call(c, wb, r);
}

const char *maui_dur(int64_t ms, char *b, size_t n)
{
    return dur(ms, b, n);
}

/*
 * mauinode.c - Maui's node and site commands at the batch role (issue 27, docs/wire.md
 * 6.12): showbf (the backfill windows), checknode NODE (a host's state, jobs, features
 * and reservations), showstats (the site's statistics from its accounting records), and
 * the tables of diagnose -n (every host with what is wrong with it) and -j (every job
 * not finished with what is wrong with it) for maui.c.
 * Tables by default, --json for scripts; -e or $GRIDNODE_BATCH. Exit status: 0 done,
 * 1 refused or no answer (the reason on stderr), 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "cmd/maui.h"

/* "1:02:03" for a duration in seconds, "INFINITY" (Maui's word) for none (-1). */
static const char *window(int64_t s, char *b, size_t n)
{
    if (s < 0)
        return "INFINITY";
    return maui_dur(s * 1000, b, n);
}

/* ---- showbf ---- */

static const char showbf_usage[] =
    "usage: gridnode showbf [options] [-c CLASS]\n\n"
    "Backfill windows (Maui's showbf): the processors free now and for how long a job\n"
    "started now could hold them without delaying a running job, a reservation or a\n"
    "queued job's reservation; then fewer processors for longer. A job of P processors\n"
    "and walltime W starts at once if a window has at least P for at least W.\n"
    "  -c, --class CLASS   only the hosts of that class (a cluster of the batch role)\n";

int cmd_showbf(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (maui_want_help(argc, argv, showbf_usage))
        return 0;
    if (maui_common(&c, "gridnode showbf", &argc, argv) < 0)
        return 2;
    const char *cls = NULL;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--class")) && i + 1 < argc) {
            cls = argv[++i];
        } else {
            fprintf(stderr, "%s: unexpected '%s'\n%s", c.prog, argv[i], showbf_usage);
            return 2;
        }
    }
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SHOWBF, 1, cls ? 1 : 0);
    if (cls)
        wire_put_str(&wb, "class", cls);
    if (maui_call(&c, &wb, &r))
        return 1;
    if (c.json) {
        cli_print_json(r.msg.root);
        cli_reply_free(&r);
        return 0;
    }
    const msgpack_object *w = wire_get(r.msg.root, "windows");
    uint32_t n = w ? w->via.array.size : 0;
    printf("backfill window%s%s%s (now):\n", cls ? " of class " : "", cls ? cls : "",
           n ? "" : ": no processor is free now");
    for (uint32_t i = 0; i < n; i++) {
        char b[40];
        const msgpack_object *x = &w->via.array.ptr[i];
        printf("  %6llu procs available for %s\n", (unsigned long long)wire_get_u64(x, "procs", 0),
               window(wire_get_i64(x, "duration_s", -1), b, sizeof b));
    }
    cli_reply_free(&r);
    return 0;
}

/* ---- checknode ---- */

static const char checknode_usage[] =
    "usage: gridnode checknode [options] NODE\n\n"
    "One host of the batch role (Maui's checknode): its state (idle, running, busy,\n"
    "down, blocked after a refused start), cores in use, memory and disk, its features\n"
    "(what submit --constraint matches), the jobs running on it and the reservations\n"
    "holding it. NODE is a host name as `gridnode nodes -e BATCH` lists it, or\n"
    "CLUSTER:HOST.\n";

int cmd_checknode(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (maui_want_help(argc, argv, checknode_usage))
        return 0;
    if (maui_common(&c, "gridnode checknode", &argc, argv) < 0)
        return 2;
    if (argc != 2 || !argv[1][0]) {
        fprintf(stderr, "%s: give exactly one host name\n%s", c.prog, checknode_usage);
        return 2;
    }
    wire_buf_init(&wb);
    wire_begin(&wb, WT_CHECKNODE, 1, 1);
    wire_put_str(&wb, "node", argv[1]);
    if (maui_call(&c, &wb, &r))
        return 1;
    const msgpack_object *nd = wire_get(r.msg.root, "node");
    if (c.json) {
        cli_print_json(nd);
        cli_reply_free(&r);
        return 0;
    }
    char v[1100];
    static const char *const strs[] = {"node", "cluster", "state"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        cli_text(nd, strs[i], v, sizeof v);
        printf("%-13s %s\n", strs[i], v[0] ? v : "-");
    }
    printf("%-13s %llu of %llu busy\n", "cores",
           (unsigned long long)wire_get_u64(nd, "cores_busy", 0),
           (unsigned long long)wire_get_u64(nd, "cores", 0));
    printf("%-13s %llu MB, disk %llu MB\n", "memory",
           (unsigned long long)wire_get_u64(nd, "mem_mb", 0),
           (unsigned long long)wire_get_u64(nd, "disk_mb", 0));
    cli_text(nd, "features", v, sizeof v);
    printf("%-13s %s\n", "features", v[0] ? v : "-");
    const char *lists[] = {"jobs", "reservations"};
    for (size_t k = 0; k < 2; k++) {
        const msgpack_object *a = wire_get(nd, lists[k]);
        printf("%-13s", lists[k]);
        for (uint32_t i = 0; a && i < a->via.array.size; i++) {
            const msgpack_object *e = &a->via.array.ptr[i];
            if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                printf(" %llu", (unsigned long long)e->via.u64);
            else if (e->type == MSGPACK_OBJECT_STR)
                printf(" %.*s", (int)e->via.str.size, e->via.str.ptr);
        }
        printf("%s\n", a && a->via.array.size ? "" : " -");
    }
    cli_reply_free(&r);
    return 0;
}

/* ---- showstats ---- */

static const char showstats_usage[] =
    "usage: gridnode showstats [options] [--since WHEN]\n\n"
    "The batch role's statistics (Maui's showstats) from its accounting records, which\n"
    "survive restarts and purges (kept acct.keep_days): jobs ended by state, average and\n"
    "longest wait, average and largest expansion factor ((wait + run) / run), processor\n"
    "hours used, and the load now (cores busy of cores up, jobs running and queued).\n"
    "  --since WHEN        only jobs that ended from WHEN on: seconds since the epoch,\n"
    "                      or -DURATION back from now (-3600, -1:00:00, -7:00:00:00)\n";

/* WHEN of --since: ms since the epoch; -1 if bad. */
static int64_t since_ms(const char *s)
{
    char *end;
    if (s[0] == '-') {
        long long parts[4], n = 0;
        const char *p = s + 1;
        while (n < 4) {
            parts[n++] = strtoll(p, &end, 10);
            if (end == p || parts[n - 1] < 0)
                return -1;
            if (*end != ':')
                break;
            p = end + 1;
        }
        if (*end)
            return -1;
        long long sec = 0;
        static const long long mul[4] = {1, 60, 3600, 86400};
        for (long long i = 0; i < n; i++)
            sec += parts[i] * mul[n - 1 - i];
        return (int64_t)(time(NULL) - sec) * 1000;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < 0)
        return -1;
    return (int64_t)v * 1000;
}

static void print_stats(const msgpack_object *s)
{
    char b[40], b2[40];
    printf("jobs ended      %llu: %llu done, %llu failed or killed, %llu cancelled, %llu other\n",
           (unsigned long long)wire_get_u64(s, "jobs", 0),
           (unsigned long long)wire_get_u64(s, "done", 0),
           (unsigned long long)wire_get_u64(s, "failed", 0),
           (unsigned long long)wire_get_u64(s, "cancelled", 0),
           (unsigned long long)wire_get_u64(s, "other", 0));
    int64_t f = wire_get_i64(s, "first_finished", 0), l = wire_get_i64(s, "last_finished", 0);
    printf("ended between   %s and %s\n", f ? cli_time(f, b, sizeof b) : "-",
           l ? cli_time(l, b2, sizeof b2) : "-");
    printf("wait            average %s, longest %s (%llu jobs that started)\n",
           maui_dur((int64_t)(wire_get_f64(s, "avg_wait_s", 0) * 1000), b, sizeof b),
           maui_dur((int64_t)(wire_get_f64(s, "max_wait_s", 0) * 1000), b2, sizeof b2),
           (unsigned long long)wire_get_u64(s, "started", 0));
    printf("xfactor         average %.2f, largest %.2f\n", wire_get_f64(s, "avg_xfactor", 0),
           wire_get_f64(s, "max_xfactor", 0));
    printf("proc hours      %.2f\n", wire_get_f64(s, "proc_hours", 0));
    printf("now             %llu of %llu cores busy (%.1f %%), %llu jobs running, %llu queued\n",
           (unsigned long long)wire_get_u64(s, "cores_busy", 0),
           (unsigned long long)wire_get_u64(s, "cores_up", 0),
           100.0 * wire_get_f64(s, "utilization", 0),
           (unsigned long long)wire_get_u64(s, "running", 0),
           (unsigned long long)wire_get_u64(s, "queued", 0));
}

int cmd_showstats(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (maui_want_help(argc, argv, showstats_usage))
        return 0;
    if (maui_common(&c, "gridnode showstats", &argc, argv) < 0)
        return 2;
    int64_t since = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--since") && i + 1 < argc) {
            if ((since = since_ms(argv[++i])) < 0) {
                fprintf(stderr,
                        "%s: --since '%s': give seconds since the epoch or -DURATION "
                        "(-3600, -1:00:00)\n",
                        c.prog, argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "%s: unexpected '%s'\n%s", c.prog, argv[i], showstats_usage);
            return 2;
        }
    }
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SHOWSTATS, 1, since >= 0);
    if (since >= 0)
        wire_put_i64(&wb, "since", since);
    if (maui_call(&c, &wb, &r))
        return 1;
    const msgpack_object *s = wire_get(r.msg.root, "stats");
    if (c.json)
        cli_print_json(s);
    else
        print_stats(s);
    cli_reply_free(&r);
    return 0;
}

/* ---- diagnose -n, -j (tables) ---- */

/* The str or u64 items of array key of o, comma-separated, into b ("-" when none). */
static const char *joined(const msgpack_object *o, const char *key, char *b, size_t n)
{
    const msgpack_object *a = wire_get(o, key);
    size_t at = 0;
    b[0] = 0;
    for (uint32_t i = 0; a && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size; i++) {
        const msgpack_object *e = &a->via.array.ptr[i];
        int w = 0;
        if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            w = snprintf(b + at, n - at, "%s%llu", i ? "," : "", (unsigned long long)e->via.u64);
        else if (e->type == MSGPACK_OBJECT_STR)
            w = snprintf(b + at, n - at, "%s%.*s", i ? "," : "", (int)e->via.str.size,
                         e->via.str.ptr);
        if (w < 0 || (size_t)w >= n - at)
            break;
        at += (size_t)w;
    }
    if (!b[0])
        snprintf(b, n, "-");
    return b;
}

void maui_diag_nodes(const msgpack_object *rows)
{
    printf("%-16s %-10s %-8s %11s %8s %-16s %-12s %-12s %s\n", "NODE", "CLUSTER", "STATE",
           "CORES(BUSY)", "MEM_MB", "FEATURES", "JOBS", "RESV", "PROBLEM");
    for (uint32_t i = 0; i < rows->via.array.size; i++) {
        const msgpack_object *o = &rows->via.array.ptr[i];
        char nm[65], cl[41], st[33], ft[65], jb[1024], rv[1024], pr[1024], cores[40];
        snprintf(cores, sizeof cores, "%llu(%llu)", (unsigned long long)wire_get_u64(o, "cores", 0),
                 (unsigned long long)wire_get_u64(o, "cores_busy", 0));
        cli_text(o, "problem", pr, sizeof pr);
        printf("%s %s %s %11s %8llu %s %-12s %-12s %s\n", cli_cell(o, "node", 16, nm, sizeof nm),
               cli_cell(o, "cluster", 10, cl, sizeof cl), cli_cell(o, "state", 8, st, sizeof st),
               cores, (unsigned long long)wire_get_u64(o, "mem_mb", 0),
               cli_cell(o, "features", 16, ft, sizeof ft), joined(o, "jobs", jb, sizeof jb),
               joined(o, "reservations", rv, sizeof rv), pr[0] ? pr : "-");
    }
    if (!rows->via.array.size)
        printf("(no hosts yet: is a cluster of the batch role up?)\n");
}

void maui_diag_jobs(const msgpack_object *rows)
{
    printf("%-8s %-12s %-9s %6s %-16s %9s %-19s %s\n", "JOB", "USER", "STATE", "PROCS", "HOSTS",
           "WALLTIME", "STARTED", "PROBLEM");
    for (uint32_t i = 0; i < rows->via.array.size; i++) {
        const msgpack_object *o = &rows->via.array.ptr[i];
        char us[49], st[37], hs[1024], pr[1024], wt[40], sb[40];
        cli_text(o, "problem", pr, sizeof pr);
        uint64_t procs = wire_get_u64(o, "procs", 1) * wire_get_u64(o, "ntasks", 1);
        printf("%-8llu %s %s %6llu %-16s %9s %-19s %s\n",
               (unsigned long long)wire_get_u64(o, "job", 0),
               cli_cell(o, "user", 12, us, sizeof us), cli_cell(o, "state", 9, st, sizeof st),
               (unsigned long long)procs, joined(o, "hosts", hs, sizeof hs),
               maui_dur((int64_t)wire_get_u64(o, "walltime_s", 0) * 1000, wt, sizeof wt),
               cli_time(wire_get_i64(o, "started", 0), sb, sizeof sb), pr[0] ? pr : "-");
    }
    if (!rows->via.array.size)
        printf("(no unfinished jobs)\n");
}

/*
 * acct.c - `gridnode acct`: the accounting records of finished jobs (sacct), and with
 * --usage the use per user and account over a time window (sreport's
 * UserUtilizationByAccount). docs/accounting.md.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cmd/acct_usage.h"
#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] =
    "usage: gridnode acct [options]\n"
    "\n"
    "Shows the accounting record of every finished job (done, failed, cancelled, killed)\n"
    "that the role (a cluster manager, a batch role or a grid spool) keeps: kept after\n"
    "gridnode purge, for acct.keep_days (365 by default). Like Slurm's sacct; a user key\n"
    "sees only its own records.\n"
    "\n"
    "Filters:\n"
    "  -u, --user USER[,USER...]    only these users' jobs\n"
    "  -A, --account GROUP[,...]    only jobs charged to these groups (accounts)\n"
    "  -s, --state S[,S...]         only jobs that ended in these states (done, failed,\n"
    "                               cancelled, killed; at a grid spool also lost)\n"
    "  -j, --job JOB                only this job\n"
    "  -n, --name NAME              only jobs of this name\n"
    "  -S, --starttime TIME         only jobs still in the system at TIME or later\n"
    "  -E, --endtime TIME           only jobs submitted at TIME or earlier\n"
    "                               TIME: YYYY-MM-DD[THH:MM[:SS]] (local time), now, or\n"
    "                               now-N[s|min|hour|day|week] (e.g. now-7day)\n"
    "Output:\n"
    "  -o, --format F1,F2,...       columns (default: jobid,name,user,account,kind,state,\n"
    "                               exitcode,start,end,elapsed,cputime,procs,nodelist);\n"
    "                               also submit, reason, site, nhosts, cores\n"
    "  --csv                        comma-separated values, one header line\n"
    "  --json                       one JSON array of the records as the role keeps them\n"
    "  --usage                      use per user and account over the window: jobs,\n"
    "                               elapsed seconds, core-seconds, CPU seconds\n"
    "Exit status: 0 shown (also when nothing matched), 1 the role could not be asked or\n"
    "refused, 2 a usage error.\n";

struct filt {
    const char *user, *group, *state, *name;
    uint64_t job, start, end;
    bool has_start, has_end;
};

static uint32_t nfields(const struct filt *f)
{
    return (f->user != NULL) + (f->group != NULL) + (f->state != NULL) + (f->name != NULL) +
           (f->job != 0) + f->has_start + f->has_end;
}

static void fill(struct wire_buf *wb, const void *arg)
{
    const struct filt *f = arg;
    if (f->user)
        wire_put_str(wb, "user", f->user);
    if (f->group)
        wire_put_str(wb, "group", f->group);
    if (f->state)
        wire_put_str(wb, "state", f->state);
    if (f->name)
        wire_put_str(wb, "name", f->name);
    if (f->job)
        wire_put_u64(wb, "job", f->job);
    if (f->has_start)
        wire_put_u64(wb, "start", f->start);
    if (f->has_end)
        wire_put_u64(wb, "end", f->end);
}

/* "now[-N[unit]]" -> ms; -1 when s is not one. */
static int64_t parse_now(const char *s, int64_t now_ms)
{
    static const struct {
        const char *u;
        int64_t s;
    } units[] = {{"", 1},        {"s", 1},        {"sec", 1},       {"seconds", 1},
                 {"min", 60},    {"minutes", 60}, {"hour", 3600},   {"hours", 3600},
                 {"day", 86400}, {"days", 86400}, {"week", 604800}, {"weeks", 604800}};
    if (strncmp(s, "now", 3))
        return -1;
    if (!s[3])
        return now_ms;
    if (s[3] != '-' || !isdigit((unsigned char)s[4]))
        return -1;
    char *end;
    long long n = strtoll(s + 4, &end, 10);
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (!strcmp(end, units[i].u) && n <= 100000LL * 365)
            return now_ms - (int64_t)n * units[i].s * 1000;
    return -1;
}

/* TIME (see usage) -> ms since the epoch; -1 when it is not one. */
static int64_t parse_time(const char *s)
{
    int64_t now_ms = (int64_t)time(NULL) * 1000;
    int64_t n = parse_now(s, now_ms);
    if (n >= 0 || !strncmp(s, "now", 3))
        return n;
    struct tm tm = {0};
    int y, mo, d, h = 0, mi = 0, se = 0, used = 0;
    size_t len = strlen(s);
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || used != 10)
        return -1;
    if (len > 10 &&
        !(sscanf(s + 10, "T%2d:%2d%n", &h, &mi, &used) == 2 && used == 6 &&
          (len == 16 || (sscanf(s + 16, ":%2d%n", &se, &used) == 1 && used == 3 && len == 19))))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970)
        return -1;
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d;
    tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = se, tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t < 0 ? -1 : (int64_t)t * 1000;
}

/* [D-]HH:MM:SS as sacct writes an elapsed time. */
static const char *hms(double sec, char *buf, size_t n)
{
    long long s = sec > 0 ? (long long)(sec + 0.5) : 0;
    if (s >= 86400)
        snprintf(buf, n, "%lld-%02lld:%02lld:%02lld", s / 86400, s / 3600 % 24, s / 60 % 60,
                 s % 60);
    else
        snprintf(buf, n, "%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

/* The columns: name, header, width, record key. */
static const struct col {
    const char *name, *head;
    int width;
} cols[] = {
    {"jobid", "JOBID", 8},        {"name", "NAME", 16},       {"user", "USER", 10},
    {"account", "ACCOUNT", 10},   {"kind", "KIND", 8},        {"state", "STATE", 10},
    {"exitcode", "EXITCODE", 8},  {"submit", "SUBMIT", 19},   {"start", "START", 19},
    {"end", "END", 19},           {"elapsed", "ELAPSED", 11}, {"cputime", "CPUTIME", 11},
    {"procs", "PROCS", 6},        {"cores", "CORES", 6},      {"nhosts", "NNODES", 6},
    {"nodelist", "NODELIST", 24}, {"reason", "REASON", 24},   {"site", "SITE", 12},
};
#define NCOLS (sizeof cols / sizeof *cols)
static const char dflt_format[] =
    "jobid,name,user,account,kind,state,exitcode,start,end,elapsed,cputime,procs,nodelist";

/* The value of column k of record r as text in buf (escaped as cli_text does); ""
 * when unknown or empty. Times are local "YYYY-mm-dd HH:MM:SS" ("-" when unknown). */
static const char *cell(size_t k, const msgpack_object *r, char *buf, size_t n)
{
    const char *c = cols[k].name;
    buf[0] = '\0';
    if (!strcmp(c, "jobid")) {
        snprintf(buf, n, "%llu", (unsigned long long)wire_get_u64(r, "job", 0));
    } else if (!strcmp(c, "account")) {
        cli_text(r, "group", buf, n);
    } else if (!strcmp(c, "exitcode")) {
        snprintf(buf, n, "%lld:%llu", (long long)wire_get_i64(r, "exit", 0),
                 (unsigned long long)wire_get_u64(r, "signal", 0));
    } else if (!strcmp(c, "submit") || !strcmp(c, "start") || !strcmp(c, "end")) {
        const char *key = c[0] == 'e' ? "finished" : c[2] == 'a' ? "started" : "submitted";
        int64_t ms = wire_get_time(r, key, 0);
        if (ms > 0)
            cli_time(ms, buf, n);
    } else if (!strcmp(c, "elapsed")) {
        hms(wire_get_f64(r, "run_s", 0), buf, n);
    } else if (!strcmp(c, "cputime")) {
        if (wire_get(r, "cpu_s"))
            hms(wire_get_f64(r, "cpu_s", 0), buf, n);
    } else if (!strcmp(c, "procs") || !strcmp(c, "cores") || !strcmp(c, "nhosts")) {
        snprintf(buf, n, "%llu", (unsigned long long)wire_get_u64(r, c, 0));
    } else if (!strcmp(c, "nodelist")) {
        const msgpack_object *h = wire_get(r, "hosts");
        size_t w = 0;
        for (uint32_t i = 0; h && h->type == MSGPACK_OBJECT_ARRAY && i < h->via.array.size; i++) {
            const msgpack_object *e = &h->via.array.ptr[i];
            if (e->type == MSGPACK_OBJECT_STR && w + e->via.str.size + 2 < n)
                w += (size_t)snprintf(buf + w, n - w, "%s%.*s", i ? "," : "", (int)e->via.str.size,
                                      e->via.str.ptr);
        }
    } else {
        cli_text(r, c, buf, n);
    }
    return buf;
}

/* "a,b,c" -> column indexes; -1 (printed) on an unknown name. */
static int parse_format(const char *prog, const char *f, size_t *idx, size_t *n)
{
    *n = 0;
    for (const char *p = f; *p;) {
        size_t l = strcspn(p, ","), k;
        if (*n == 32) {
            fprintf(stderr, "%s: --format takes at most 32 fields\n", prog);
            return -1;
        }
        for (k = 0; k < NCOLS; k++)
            if (strlen(cols[k].name) == l && !strncasecmp(p, cols[k].name, l))
                break;
        if (k == NCOLS) {
            fprintf(stderr, "%s: unknown field '%.*s' in --format; the fields are:", prog, (int)l,
                    p);
            for (k = 0; k < NCOLS; k++)
                fprintf(stderr, "%s %s", k ? "," : "", cols[k].name);
            fputc('\n', stderr);
            return -1;
        }
        idx[(*n)++] = k;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* One CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(const char *s, bool last)
{
    if (strpbrk(s, ",\"\n\r")) {
        putchar('"');
        for (; *s; s++) {
            if (*s == '"')
                putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else {
        fputs(s, stdout);
    }
    putchar(last ? '\n' : ',');
}

static void print_rows(const msgpack_object *rows, const size_t *idx, size_t n, bool csv)
{
    char buf[4096], pad[4 * 64 + 1];
    for (size_t i = 0; i < n; i++) {
        if (csv)
            csv_field(cols[idx[i]].name, i + 1 == n);
        else if (i + 1 == n) /* the last column is not padded */
            printf("%s\n", cols[idx[i]].head);
        else
            printf("%s ", cli_pad(cols[idx[i]].head, cols[idx[i]].width, pad, sizeof pad));
    }
    for (uint32_t r = 0; r < rows->via.array.size; r++)
        for (size_t i = 0; i < n; i++) {
            const char *v = cell(idx[i], &rows->via.array.ptr[r], buf, sizeof buf);
            if (!csv && !*v) /* unknown or none: "-" in a table, empty in CSV */
                v = "-";
            if (csv)
                csv_field(v, i + 1 == n);
            else if (i + 1 == n) /* the last column is not cut */
                printf("%s\n", v);
            else
                printf("%s ", cli_pad(v, cols[idx[i]].width, pad, sizeof pad));
        }
}

/* The options into f, format, flags: 0, or 2 (printed). */
static int parse_args(struct cli *c, int argc, char **argv, struct filt *f, const char **format,
                      bool *csv, bool *use)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *t = NULL;
        if (!strcmp(a, "--csv") || !strcmp(a, "--usage")) {
            *(a[2] == 'c' ? csv : use) = true;
            continue;
        }
        const char **dst = !strcmp(a, "-u") || !strcmp(a, "--user")        ? &f->user
                           : !strcmp(a, "-A") || !strcmp(a, "--account")   ? &f->group
                           : !strcmp(a, "-s") || !strcmp(a, "--state")     ? &f->state
                           : !strcmp(a, "-n") || !strcmp(a, "--name")      ? &f->name
                           : !strcmp(a, "-o") || !strcmp(a, "--format")    ? format
                           : !strcmp(a, "-j") || !strcmp(a, "--job")       ? &t
                           : !strcmp(a, "-S") || !strcmp(a, "--starttime") ? &t
                           : !strcmp(a, "-E") || !strcmp(a, "--endtime")   ? &t
                                                                           : NULL;
        if (!dst) {
            fprintf(stderr, "%s: unexpected argument '%s' (gridnode acct --help)\n", c->prog, a);
            return 2;
        }
        if (!v || !*v) {
            fprintf(stderr, "%s: %s needs a value\n", c->prog, a);
            return 2;
        }
        i++;
        *dst = v;
        if (dst != &t)
            continue;
        if (a[1] == 'j' || !strcmp(a, "--job")) {
            if (cli_uint(c->prog, a, v, 1, UINT64_MAX, &f->job) < 0)
                return 2;
            continue;
        }
        int64_t ms = parse_time(v);
        if (ms < 0) {
            fprintf(stderr,
                    "%s: %s wants YYYY-MM-DD[THH:MM[:SS]], now or now-N[s|min|hour|day|week], "
                    "not '%s'\n",
                    c->prog, a, v);
            return 2;
        }
        bool start = !strcmp(a, "-S") || !strcmp(a, "--starttime");
        *(start ? &f->start : &f->end) = (uint64_t)ms;
        *(start ? &f->has_start : &f->has_end) = true;
    }
    return 0;
}

int cmd_acct(int argc, char **argv)
{
    struct cli c;
    struct cli_pages p;
    struct filt f = {0};
    const char *format = dflt_format;
    bool csv = false, use = false;
    size_t idx[32], n;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode acct", &argc, argv) < 0)
        return 2;
    int rc = parse_args(&c, argc, argv, &f, &format, &csv, &use);
    if (rc)
        return rc;
    if (parse_format(c.prog, format, idx, &n) < 0)
        return 2;
    if (csv && c.json) {
        fprintf(stderr, "%s: --csv and --json exclude each other\n", c.prog);
        return 2;
    }
    if (cli_list_fields(&c, WT_ACCT, nfields(&f), fill, &f, &p) != 0)
        return 1;
    msgpack_object all;
    if (cli_pages_merge(&c, &p, "rows", &all) < 0) {
        cli_pages_free(&p);
        return 1;
    }
    if (use)
        rc = acct_usage_print(&all, c.json, csv);
    else if (c.json)
        cli_print_json(&all);
    else
        print_rows(&all, idx, n, csv);
    free(all.via.array.ptr);
    cli_pages_free(&p);
    return rc;
}

/* jobs.c - `gridnode jobs`: the jobs of a cluster manager as a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] =
    "usage: gridnode jobs [options]\n\nLists every job of the cluster "
    "manager with its progress (a job whose tasks all ended is \"done\",\nor \"failed\" when "
    "any task failed). Long lists are fetched page by page. Against a grid spool\n"
    "(gridnode meta) each job's site, the site's job id and the grid state are shown.\n"
    "\n"
    "Filters (the cluster manager applies them, like squeue's):\n"
    "  -u, --user USER        only this user's jobs\n"
    "  -t, --state S[,S...]   only jobs in these states (queued, running, held, done,\n"
    "                         failed, cancelled; parallel jobs also waiting, stopped,\n"
    "                         killed, requeueing; at a batch role pending, starting; at a\n"
    "                         grid spool placing, placed); an unknown state is refused\n"
    "  -q, --queue Q          only parallel jobs of this queue\n"
    "  -n, --name NAME        only jobs of this name\n"
    "  --sort KEY             order by job (default), name, user, state, submitted, tasks\n"
    "                         or done; -KEY for descending (e.g. --sort=-submitted)\n"
    "Exit status: 0 listed (also when no job matches), 1 the role could not be asked or\n"
    "refused, 2 a usage error (an unknown option, state or value).\n";

/* A row of the grid spool (gridnode meta, docs/wire.md 6.13): it carries "gstate". */
static bool is_grid_row(const msgpack_object *j)
{
    return wire_get(j, "gstate") != NULL;
}

static void print_grid_row(const msgpack_object *j)
{
    char name[65], user[41], gstate[10], site[49], reason[200], t[32];
    cli_cell(j, "name", 16, name, sizeof name);
    cli_cell(j, "user", 10, user, sizeof user);
    cli_text(j, "gstate", gstate, sizeof gstate);
    cli_cell(j, "site", 12, site, sizeof site);
    cli_text(j, "reason", reason, sizeof reason);
    uint64_t sj = wire_get_u64(j, "site_job", 0);
    char sjs[24] = "-", ex[24] = "-";
    if (sj)
        snprintf(sjs, sizeof sjs, "%llu", (unsigned long long)sj);
    if (wire_get_u64(j, "done", 0) && strcmp(gstate, "cancelled"))
        snprintf(ex, sizeof ex, "%lld", (long long)wire_get_i64(j, "exit", 0));
    char done[48]; /* tasks done of the job (an array's elements, else 0/1 or 1/1) */
    uint64_t nt = wire_get_u64(j, "ntasks", 1);
    snprintf(done, sizeof done, "%llu/%llu", (unsigned long long)wire_get_u64(j, "done", 0),
             (unsigned long long)(nt ? nt : 1));
    printf("%6llu  %s %s %-9s %s %8s %5llu %9s %4s  %s  %s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name, user, gstate, site, sjs,
           (unsigned long long)wire_get_u64(j, "procs", 0), done, ex,
           cli_time(wire_get_i64(j, "submitted", 0), t, sizeof t), reason);
}

static void print_row(const msgpack_object *j)
{
    char name[65], user[41], state[10], t[32], reason[300];
    cli_cell(j, "name", 16, name, sizeof name);
    cli_cell(j, "user", 10, user, sizeof user);
    cli_text(j, "state", state, sizeof state);
    cli_text(j, "reason", reason, sizeof reason); /* Dependency: ... (issue 27) */
    printf("%6llu  %s %s %-9s %8llu %8llu %8llu %8llu %5llu  %-19s  %s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name, user, state,
           (unsigned long long)wire_get_u64(j, "ntasks", 0),
           (unsigned long long)wire_get_u64(j, "done", 0),
           (unsigned long long)wire_get_u64(j, "failed", 0),
           (unsigned long long)wire_get_u64(j, "running", 0),
           (unsigned long long)wire_get_u64(j, "dups", 0),
           cli_time(wire_get_i64(j, "submitted", 0), t, sizeof t), reason);
}

/* The table: bag jobs of every page, then the parallel jobs of every page. */
static void print_table(const struct cli_pages *p)
{
    uint32_t npar = 0, nall = 0;
    const msgpack_object *first = p->n ? wire_get(p->r[0]->msg.root, "jobs") : NULL;
    if (first && first->via.array.size && is_grid_row(&first->via.array.ptr[0])) {
        printf("%6s  %-16s %-10s %-9s %-12s %8s %5s %9s %4s  %-19s  %s\n", "JOB", "NAME", "USER",
               "STATE", "SITE", "SITE_JOB", "PROCS", "DONE", "EXIT", "SUBMITTED", "REASON");
        for (uint32_t k = 0; k < p->n; k++) {
            const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
            for (uint32_t i = 0; i < jobs->via.array.size; i++)
                print_grid_row(&jobs->via.array.ptr[i]);
        }
        return;
    }
    printf("%6s  %-16s %-10s %-9s %8s %8s %8s %8s %5s  %-19s  %s\n", "JOB", "NAME", "USER", "STATE",
           "TASKS", "DONE", "FAILED", "RUNNING", "DUPS", "SUBMITTED", "REASON");
    for (uint32_t k = 0; k < p->n; k++) {
        const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
        for (uint32_t i = 0; i < jobs->via.array.size; i++, nall++)
            if (cli_is_pjob(&jobs->via.array.ptr[i]))
                npar++;
            else
                print_row(&jobs->via.array.ptr[i]);
    }
    if (nall == 0)
        printf("(no jobs; submit one with gridnode submit)\n");
    if (!npar)
        return;
    printf("\nparallel jobs:\n");
    cli_pjob_header();
    for (uint32_t k = 0; k < p->n; k++) {
        const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
        for (uint32_t i = 0; i < jobs->via.array.size; i++)
            if (cli_is_pjob(&jobs->via.array.ptr[i]))
                cli_pjob_row(&jobs->via.array.ptr[i]);
    }
}

struct filters {
    const char *user, *state, *name;
    uint64_t queue;
    bool has_queue;
};

static void fill(struct wire_buf *wb, const void *arg)
{
    const struct filters *f = arg;
    if (f->user)
        wire_put_str(wb, "user", f->user);
    if (f->state)
        wire_put_str(wb, "state", f->state);
    if (f->name)
        wire_put_str(wb, "name", f->name);
    if (f->has_queue)
        wire_put_u64(wb, "queue", f->queue);
}

/*
 * Every state a role shows in JOBS (docs/wire.md 6.2, 6.6, 6.11, 6.13): bags of tasks,
 * parallel jobs at the cluster and the batch role, and the grid spool's own states.
 * A -t naming none of them can match nothing: it is a typing error, refused here as
 * squeue refuses an unknown state, rather than answered with an empty table.
 */
static const char *const known_states[] = {
    "queued",  "running", "held",       "done",    "failed",   "cancelled", "waiting",
    "stopped", "killed",  "requeueing", "pending", "starting", "placing",   "placed",
};

/* 0 when every comma-separated state of list is known; else -1, printed. */
static int check_states(const char *prog, const char *list)
{
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        bool ok = false;
        for (size_t k = 0; !ok && k < sizeof known_states / sizeof *known_states; k++)
            ok = strlen(known_states[k]) == n && !strncmp(p, known_states[k], n);
        if (!ok) {
            fprintf(stderr, "%s: unknown job state '%.*s' in --state; the states are:", prog,
                    (int)n, p);
            for (size_t k = 0; k < sizeof known_states / sizeof *known_states; k++)
                fprintf(stderr, "%s %s", k ? "," : "", known_states[k]);
            fputc('\n', stderr);
            return -1;
        }
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

static const char *sort_key; /* for by_key: a key of the rows */
static int sort_dir = 1;

static int by_key(const void *pa, const void *pb)
{
    const msgpack_object *a = pa, *b = pb;
    const msgpack_object *x = wire_get(a, sort_key), *y = wire_get(b, sort_key);
    int d = 0;
    if (x && y && x->type == MSGPACK_OBJECT_STR && y->type == MSGPACK_OBJECT_STR) {
        size_t n = x->via.str.size < y->via.str.size ? x->via.str.size : y->via.str.size;
        d = memcmp(x->via.str.ptr, y->via.str.ptr, n);
        if (!d)
            d = (x->via.str.size > y->via.str.size) - (x->via.str.size < y->via.str.size);
    } else {
        double u = x ? (x->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (double)x->via.i64
                                                                   : (double)x->via.u64)
                     : 0,
               v = y ? (y->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (double)y->via.i64
                                                                   : (double)y->via.u64)
                     : 0;
        d = (u > v) - (u < v);
    }
    if (!d) { /* ties by job id, always ascending: a stable, repeatable order */
        uint64_t i = wire_get_u64(a, "job", 0), k = wire_get_u64(b, "job", 0);
        return (i > k) - (i < k);
    }
    return d * sort_dir;
}

int cmd_jobs(int argc, char **argv)
{
    struct cli c;
    struct cli_pages p;
    struct filters f = {0};
    const char *sort = NULL;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode jobs", &argc, argv) < 0)
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **dst = !strcmp(a, "-u") || !strcmp(a, "--user")    ? &f.user
                           : !strcmp(a, "-t") || !strcmp(a, "--state") ? &f.state
                           : !strcmp(a, "-n") || !strcmp(a, "--name")  ? &f.name
                           : !strcmp(a, "--sort")                      ? &sort
                           : !strcmp(a, "-q") || !strcmp(a, "--queue") ? &v
                                                                       : NULL;
        if (!dst) {
            fprintf(stderr, "%s: unexpected argument '%s' (gridnode jobs --help)\n", c.prog, a);
            return 2;
        }
        if (!v || !*v) {
            fprintf(stderr, "%s: %s needs a value\n", c.prog, a);
            return 2;
        }
        i++;
        if (dst != &v) {
            *dst = v;
        } else if (cli_uint(c.prog, "--queue", v, 0, 255, &f.queue) < 0) {
            return 2;
        } else {
            f.has_queue = true;
        }
    }
    static const char *const keys[][2] = {{"job", "job"},
                                          {"name", "name"},
                                          {"user", "user"},
                                          {"state", "state"},
                                          {"submitted", "submitted"},
                                          {"tasks", "ntasks"},
                                          {"done", "done"},
                                          {NULL, NULL}};
    if (sort) {
        if (*sort == '-')
            sort_dir = -1, sort++;
        for (size_t k = 0; keys[k][0]; k++)
            if (!strcmp(sort, keys[k][0]))
                sort_key = keys[k][1];
        if (!sort_key) {
            fprintf(stderr,
                    "%s: --sort takes job, name, user, state, submitted, tasks or done (- "
                    "before it: descending), not '%s'\n",
                    c.prog, sort);
            return 2;
        }
    }
    if (f.state && check_states(c.prog, f.state) < 0)
        return 2;
    uint32_t nf = (f.user != NULL) + (f.state != NULL) + (f.name != NULL) + f.has_queue;
    if (cli_list_fields(&c, WT_JOB_LIST, nf, fill, &f, &p) != 0)
        return 1;
    if (!sort_key) {
        if (c.json)
            cli_print_json_pages(&p, "jobs");
        else
            print_table(&p);
        cli_pages_free(&p);
        return 0;
    }
    /* sorted: the rows of every page (the filters cut them already) in one array, kept
     * in the first page's reply so that print_table prints it */
    msgpack_object all;
    if (cli_pages_merge(&c, &p, "jobs", &all) < 0) {
        cli_pages_free(&p);
        return 1;
    }
    qsort(all.via.array.ptr, all.via.array.size, sizeof *all.via.array.ptr, by_key);
    if (c.json) {
        cli_print_json(&all);
    } else {
        msgpack_object *rows = (msgpack_object *)wire_get(p.r[0]->msg.root, "jobs");
        msgpack_object saved = *rows;
        struct cli_pages one = {p.r, 1};
        *rows = all;
        print_table(&one);
        *rows = saved;
    }
    free(all.via.array.ptr);
    cli_pages_free(&p);
    return 0;
}

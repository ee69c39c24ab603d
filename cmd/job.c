/* job.c - `gridnode job ID`: one job's status and its tasks' results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "lib/mpjson.h"

static const char usage[] =
    "usage: gridnode job [options] JOB\n"
    "\n"
    "Shows a job's status and a table of its tasks (state, exit status, times, node);\n"
    "for a parallel job, its limits and a table of its processes (ranks).\n"
    "  --output            also print each finished task's (or rank's) stdout and stderr\n"
    "  --summary           only the job's status line\n"
    "  --from I            first task (or rank, for --output) shown (default 0)\n"
    "  --count N           tasks (or ranks, for --output) shown (default 1000)\n"
    "  --wait              poll until the job ends, with progress on stderr. Exit status:\n"
    "                      0 done (every task or process succeeded), 3 failed (a task\n"
    "                      failed, or the parallel job failed), 4 killed (a parallel job\n"
    "                      over a limit), 5 cancelled; 1 the cluster manager could not\n"
    "                      be asked, 2 bad arguments\n"
    "\n"
    "Job states: queued, running, done (every task succeeded), failed (every task ended,\n"
    "some failed), cancelled; parallel jobs also waiting, stopped, killed.\n"
    "Long task lists and outputs are fetched page by page (--json prints them as one).\n";

/* Requests JOB_GET; 0 with r filled, else the exit status. */
static int fetch(struct cli *c, uint64_t job, bool tasks, bool output, uint64_t from,
                 uint64_t count, struct cli_reply *r)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_GET, 1, tasks ? 5 : 1);
    wire_put_u64(&wb, "job", job);
    if (tasks) {
        wire_put_bool(&wb, "tasks", true);
        wire_put_bool(&wb, "output", output);
        wire_put_u64(&wb, "from", from);
        wire_put_u64(&wb, "count", count);
    }
    int rc = cli_call(c, &wb, 1, r);
    wire_buf_free(&wb);
    return rc == 0 ? 0 : 1;
}

static void print_summary(const msgpack_object *j)
{
    char state[16], name[64], t1[32], t2[32];
    cli_text(j, "state", state, sizeof state);
    cli_text(j, "name", name, sizeof name);
    printf("job %llu%s%s: %s, %llu tasks: %llu done (%llu failed), %llu running, %llu "
           "duplicates, %llu late\nsubmitted %s, finished %s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name[0] ? " " : "", name, state,
           (unsigned long long)wire_get_u64(j, "ntasks", 0),
           (unsigned long long)wire_get_u64(j, "done", 0),
           (unsigned long long)wire_get_u64(j, "failed", 0),
           (unsigned long long)wire_get_u64(j, "running", 0),
           (unsigned long long)wire_get_u64(j, "dups", 0),
           (unsigned long long)wire_get_u64(j, "late", 0),
           cli_time(wire_get_i64(j, "submitted", 0), t1, sizeof t1),
           cli_time(wire_get_i64(j, "finished", 0), t2, sizeof t2));
    if (wire_get_u64(j, "requeues", 0)) /* gridnode requeue: Slurm's Restarts */
        printf("requeued %llu times\n", (unsigned long long)wire_get_u64(j, "requeues", 0));
}

static void print_bytes(const char *label, const msgpack_object *t, const char *key,
                        const char *trunc)
{
    size_t n;
    const void *p = wire_get_bin(t, key, &n);
    if (!p || n == 0)
        return;
    printf("  %s:\n", label);
    fwrite(p, 1, n, stdout);
    if (((const char *)p)[n - 1] != '\n')
        putchar('\n');
    if (wire_get_bool(t, trunc, false))
        printf("  [%s truncated by the client]\n", label);
}

/* The node name of a session id from the NODES pages, or the id itself. */
static const char *node_name(const struct cli_pages *nodes, const char *sid, char *buf, size_t n)
{
    size_t sl;
    for (uint32_t k = 0; nodes && k < nodes->n; k++) {
        const msgpack_object *arr = wire_get(nodes->r[k]->msg.root, "nodes");
        for (uint32_t i = 0; arr && i < arr->via.array.size; i++) {
            const char *s = wire_get_str(&arr->via.array.ptr[i], "sid", &sl);
            if (s && sl == strlen(sid) && !memcmp(s, sid, sl)) {
                cli_text(&arr->via.array.ptr[i], "node", buf, n);
                return buf;
            }
        }
    }
    return sid;
}

/* A checked task's every result: its verdict, and the output of those not canonical. */
static void print_results(const msgpack_object *res, const struct cli_pages *nodes)
{
    if (!res || res->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < res->via.array.size; i++) {
        const msgpack_object *r = &res->via.array.ptr[i];
        char status[16], why[160], node[40], name[64], err[120];
        cli_text(r, "status", status, sizeof status);
        cli_text(r, "why", why, sizeof why);
        cli_text(r, "node", node, sizeof node);
        cli_text(r, "error", err, sizeof err);
        printf("  result %llu from %s: %s, exit %lld%s%s%s%s\n",
               (unsigned long long)wire_get_u64(r, "seq", 0),
               node_name(nodes, node, name, sizeof name), status,
               (long long)wire_get_i64(r, "exit", -1), why[0] ? " (" : "", why, why[0] ? ")" : "",
               err[0] ? err : "");
        if (strcmp(status, "canonical") && strcmp(status, "agrees"))
            print_bytes("  its stdout", r, "stdout", "out_trunc");
    }
}

static void print_tasks(const msgpack_object *tasks, bool output, const struct cli_pages *nodes)
{
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        const msgpack_object *t = &tasks->via.array.ptr[i];
        char state[12], node[40], name[64], err[120];
        cli_text(t, "state", state, sizeof state);
        cli_text(t, "node", node, sizeof node);
        cli_text(t, "error", err, sizeof err);
        bool has = wire_get(t, "exit") != NULL;
        char ex[16] = "-", sg[8] = "-", cpu[16] = "-", wall[16] = "-";
        if (has) {
            snprintf(ex, sizeof ex, "%lld", (long long)wire_get_i64(t, "exit", -1));
            snprintf(sg, sizeof sg, "%llu", (unsigned long long)wire_get_u64(t, "signal", 0));
            snprintf(cpu, sizeof cpu, "%.2f", wire_get_f64(t, "cpu_s", 0));
            snprintf(wall, sizeof wall, "%.2f", wire_get_f64(t, "wall_s", 0));
        }
        printf("%6llu  %-8s %6llu %5s %4s %8s %8s  %s%s%s%s\n",
               (unsigned long long)wire_get_u64(t, "idx", 0), state,
               (unsigned long long)wire_get_u64(t, "issues", 0), ex, sg, cpu, wall,
               node_name(nodes, node, name, sizeof name),
               wire_get_bool(t, "timeout", false) ? " (timed out)" : "",
               wire_get_bool(t, "late", false) ? " (late)" : "", err[0] ? err : "");
        if (output) {
            print_bytes("stdout", t, "stdout", "out_trunc");
            print_bytes("stderr", t, "stderr", "err_trunc");
            print_results(wire_get(t, "results"), nodes);
        }
    }
}

/* Prints the stdout and stderr of the ranks of reply r that carry them. */
static void print_rank_output(const msgpack_object *ranks)
{
    for (uint32_t i = 0; ranks && i < ranks->via.array.size; i++) {
        const msgpack_object *p = &ranks->via.array.ptr[i];
        char host[64];
        if (!wire_get(p, "stdout") && !wire_get(p, "stderr"))
            continue;
        cli_text(p, "host", host, sizeof host);
        printf("\nrank %llu (host %s):\n", (unsigned long long)wire_get_u64(p, "rank", 0),
               host[0] ? host : "-");
        print_bytes("stdout", p, "stdout", "out_trunc");
        print_bytes("stderr", p, "stderr", "err_trunc");
    }
}

/*
 * A parallel job: the summary and the rank table; with output, the ranks' stdout and
 * stderr, fetching further pages while the cluster cut the reply short ("next").
 */
static int print_pjob(struct cli *c, uint64_t job, struct cli_reply *r, bool output,
                      uint64_t from, uint64_t count)
{
    const msgpack_object *j = wire_get(r->msg.root, "job");
    cli_pjob_print(j);
    if (!output)
        return 0;
    print_rank_output(wire_get(j, "ranks"));
    uint64_t end = from + count;
    while (wire_get(r->msg.root, "next")) {
        uint64_t next = wire_get_u64(r->msg.root, "next", end);
        if (next <= from || next >= end)
            break;
        from = next;
        cli_reply_free(r);
        if (fetch(c, job, true, true, from, end - from, r) != 0)
            return 1;
        print_rank_output(wire_get(wire_get(r->msg.root, "job"), "ranks"));
    }
    return 0;
}

/* The --wait exit status of an ended job's state, or -1 while it has not ended. */
static int end_status(const char *state, uint64_t failed)
{
    if (!strcmp(state, "done"))
        return failed ? CLI_EXIT_FAILED : 0; /* a cluster before "failed" was shown */
    if (!strcmp(state, "failed"))
        return CLI_EXIT_FAILED;
    if (!strcmp(state, "killed"))
        return CLI_EXIT_KILLED;
    if (!strcmp(state, "cancelled"))
        return CLI_EXIT_CANCELLED;
    return -1;
}

int cmd_job_wait(struct cli *c, uint64_t job)
{
    bool tty = isatty(2);
    for (;;) {
        struct cli_reply r;
        if (fetch(c, job, false, false, 0, 0, &r) != 0)
            return 1;
        const msgpack_object *j = wire_get(r.msg.root, "job");
        char state[16];
        cli_text(j, "state", state, sizeof state);
        uint64_t failed = wire_get_u64(j, "failed", 0);
        int end = end_status(state, failed);
        if (cli_is_pjob(j)) {
            if (end >= 0 || !tty)
                fprintf(stderr, "job %llu %s\n", (unsigned long long)job, state);
            cli_reply_free(&r);
            if (end >= 0)
                return end;
            usleep(tty ? 250000 : 1000000);
            continue;
        }
        uint64_t n = wire_get_u64(j, "ntasks", 0), done = wire_get_u64(j, "done", 0);
        uint64_t run = wire_get_u64(j, "running", 0);
        int width = 30, fill = n ? (int)(done * (uint64_t)width / n) : width;
        fprintf(stderr, "%sjob %llu [%.*s%*s] %llu/%llu done, %llu failed, %llu running%s",
                tty ? "\r" : "", (unsigned long long)job, fill,
                "##############################", width - fill, "", (unsigned long long)done,
                (unsigned long long)n, (unsigned long long)failed, (unsigned long long)run,
                tty ? "   " : "\n");
        cli_reply_free(&r);
        /* Once the job was seen, a role restarting under a long wait is waited for
         * (up to the reply timeout per poll), not reported as unreachable. */
        if (c->connect_ms < c->timeout_ms)
            c->connect_ms = c->timeout_ms;
        if (end >= 0) {
            fprintf(stderr, "%sjob %llu %s\n", tty ? "\n" : "", (unsigned long long)job,
                    end == CLI_EXIT_FAILED ? "failed" : state);
            return end;
        }
        usleep(tty ? 250000 : 1000000);
    }
}

/*
 * A bag job's tasks from `from` for `count`, page after page while the cluster cut a
 * reply short ("next"): printed as a table, or, with json, gathered into the first
 * reply's shape (one "tasks" array, no "next"). r holds the first page; freed here.
 */
static int print_bag(struct cli *c, uint64_t job, struct cli_reply *r, bool output, uint64_t from,
                     uint64_t count, const struct cli_pages *nodes)
{
    json_t *all = c->json ? mpjson(r->msg.root) : NULL;
    json_t *tasks = all ? json_object_get(all, "tasks") : NULL;
    uint64_t end = from + count;
    int rc = 0;
    if (all)
        json_object_del(all, "next");
    else
        printf("\n%6s  %-8s %6s %5s %4s %8s %8s  %s\n", "TASK", "STATE", "ISSUES", "EXIT", "SIG",
               "CPU_S", "WALL_S", "NODE / NOTE");
    for (bool first = true;; first = false) {
        const msgpack_object *t = wire_get(r->msg.root, "tasks");
        if (!all && t)
            print_tasks(t, output, nodes);
        if (all && t && !first) {
            json_t *more = mpjson(t);
            if (more && tasks)
                json_array_extend(tasks, more);
            json_decref(more);
        }
        const msgpack_object *next = wire_get(r->msg.root, "next");
        if (!next || next->via.u64 <= from || next->via.u64 >= end)
            break;
        from = next->via.u64;
        cli_reply_free(r);
        if (fetch(c, job, true, output || c->json, from, end - from, r) != 0) {
            rc = 1;
            goto out;
        }
    }
    cli_reply_free(r);
out:
    if (all && rc == 0) {
        json_dumpf(all, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
        putchar('\n');
    }
    json_decref(all);
    return rc;
}

/*
 * A job of the grid spool (gridnode meta: its row carries "gstate"): where it went and
 * how it ended. The spool keeps no outputs (the site's cluster manager does): the
 * lines name the site's endpoint (from SITE_INFO, a nicety) and the command that shows
 * the site's job, whose tasks name the cluster job holding the output.
 */
static void print_grid(struct cli *c, const msgpack_object *j)
{
    char name[64], st[16], site[64], resv[80], reason[256], t1[32], t2[32], t3[32], ep[128] = "";
    cli_text(j, "name", name, sizeof name);
    cli_text(j, "gstate", st, sizeof st);
    cli_text(j, "site", site, sizeof site);
    cli_text(j, "resv", resv, sizeof resv);
    cli_text(j, "reason", reason, sizeof reason);
    printf("job %llu %s: %s (grid spool), %llu procs, %llu placement(s)\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name[0] ? name : "-", st,
           (unsigned long long)wire_get_u64(j, "procs", 0),
           (unsigned long long)wire_get_u64(j, "attempts", 0));
    printf("submitted %s, started %s, finished %s",
           cli_time(wire_get_i64(j, "submitted", 0), t1, sizeof t1),
           cli_time(wire_get_i64(j, "started", 0), t2, sizeof t2),
           cli_time(wire_get_i64(j, "finished", 0), t3, sizeof t3));
    if (wire_get_u64(j, "done", 0) && strcmp(st, "cancelled"))
        printf(", exit %lld", (long long)wire_get_i64(j, "exit", 0));
    printf("\n%s\n", reason);
    if (!site[0])
        return;
    struct wire_buf wb;
    struct cli_reply r;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SITE_INFO, 2, 0);
    int timeout = c->timeout_ms;
    c->timeout_ms = timeout < 2000 ? timeout : 2000;
    if (cli_call(c, &wb, 2, &r) == 0) {
        const msgpack_object *sites = wire_get(r.msg.root, "sites");
        for (uint32_t i = 0; sites && sites->via.array.size > i; i++) {
            char n[64];
            cli_text(&sites->via.array.ptr[i], "name", n, sizeof n);
            if (!strcmp(n, site))
                cli_text(&sites->via.array.ptr[i], "endpoint", ep, sizeof ep);
        }
        cli_reply_free(&r);
    }
    c->timeout_ms = timeout;
    wire_buf_free(&wb);
    printf("site %s%s%s%s, its job %llu%s%s\n", site, ep[0] ? " (" : "", ep, ep[0] ? ")" : "",
           (unsigned long long)wire_get_u64(j, "site_job", 0), resv[0] ? ", reservation " : "",
           resv);
    if (ep[0])
        printf("the site's view and the output's cluster job: gridnode job %llu -e %s --json\n",
               (unsigned long long)wire_get_u64(j, "site_job", 0), ep);
}

int cmd_job(int argc, char **argv)
{
    struct cli c;
    struct cli_reply r;
    bool output = false, wait = false, summary = false;
    uint64_t job = 0, from = 0, count = 1000;
    const char *id = NULL;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode job", &argc, argv) < 0)
        return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--output"))
            output = true;
        else if (!strcmp(argv[i], "--wait"))
            wait = true;
        else if (!strcmp(argv[i], "--summary"))
            summary = true;
        else if (!strcmp(argv[i], "--from") && i + 1 < argc) {
            if (cli_u64(&c, "--from", argv[++i], &from) < 0)
                return 2;
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (cli_u64(&c, "--count", argv[++i], &count) < 0)
                return 2;
        } else if (!id && argv[i][0] != '-')
            id = argv[i];
        else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], usage);
            return 2;
        }
    }
    if (!id) {
        fprintf(stderr, "%s: give a job id (gridnode jobs lists them)\n%s", c.prog, usage);
        return 2;
    }
    if (cli_u64(&c, "JOB", id, &job) < 0)
        return 2;
    if (count > 100000)
        count = 100000;
    int wrc = wait ? cmd_job_wait(&c, job) : 0; /* the exit status, after printing */
    if (wrc == 1)
        return 1;
    if (fetch(&c, job, !summary, output || c.json, from, count, &r) != 0)
        return 1;
    const msgpack_object *j = wire_get(r.msg.root, "job"), *tasks = wire_get(r.msg.root, "tasks");
    if (wire_get(j, "gstate") && !c.json) {
        print_grid(&c, j);
        cli_reply_free(&r);
        return wrc;
    }
    if (cli_is_pjob(j) && !c.json) {
        int prc = print_pjob(&c, job, &r, output, from, count);
        cli_reply_free(&r);
        return prc ? prc : wrc;
    }
    if (!tasks) {
        if (c.json)
            cli_print_json(r.msg.root);
        else
            print_summary(j);
        cli_reply_free(&r);
        return wrc;
    }
    struct cli_pages nodes = {NULL, 0};
    if (!c.json) {
        print_summary(j);
        if (cli_list(&c, WT_NODE_LIST, &nodes) != 0) /* names are a nicety */
            nodes.n = 0;
    }
    int prc = print_bag(&c, job, &r, output, from, count, &nodes);
    cli_pages_free(&nodes);
    return prc ? prc : wrc;
}

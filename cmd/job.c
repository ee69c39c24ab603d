/* job.c - `gridnode job ID`: one job's status and its tasks' results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/fetch.h"
#include "cmd/cmd.h"
#include "cmd/jobwait.h"
#include "wire/mpjson.h"

static const char usage[] =
    "usage: gridnode job [options] JOB [JOB...]\n"
    "\n"
    "Shows a job's status and a table of its tasks (state, exit status, times, node);\n"
    "for a parallel job, its limits and a table of its processes (ranks). Several jobs\n"
    "are shown one after the other (--json: one line each).\n"
    "  --output            also print each finished task's (or rank's) stdout and stderr,\n"
    "                      and the files it kept (submit --output) with their sizes\n"
    "  --summary           only the job's status line (no task or rank table)\n"
    "  --from I            first task (or rank, for --output) shown (default 0)\n"
    "  --count N           tasks (or ranks, for --output) shown (default 1000); a table\n"
    "                      that leaves tasks out says so and how to see them\n"
    "  --all               every task (or rank), however many\n"
    "  --wait              wait until every job given has ended, with progress on\n"
    "                      stderr, then show them. One connection for the whole wait;\n"
    "                      where the role offers its change feed (a cluster manager,\n"
    "                      to admins and peers) an end is seen as it happens, else the\n"
    "                      jobs are read every second. A role restarting meanwhile is\n"
    "                      waited for (up to --timeout). Exit status: 0 done (every\n"
    "                      task or process succeeded), 3 failed (a task failed, or the\n"
    "                      parallel job failed), 4 killed (a parallel job over a\n"
    "                      limit), 5 cancelled; 1 the role could not be asked or a job\n"
    "                      does not exist, 2 bad arguments. Several jobs: the worst of\n"
    "                      them (1 over 5 over 4 over 3 over 0)\n"
    "\n"
    "Job states: queued, running, done (every task succeeded), failed (every task ended,\n"
    "some failed), cancelled; parallel jobs also waiting, stopped, killed.\n"
    "Long task lists and outputs are fetched page by page (--json prints them as one).\n"
    "Outputs are kept by the cluster manager that ran the job: --output at a batch role\n"
    "says where they are (the command to run there) and exits 1; a batch role keeps the\n"
    "files of submit --output itself (listed; gridnode fetch gets them); at a grid spool\n"
    "it shows what the job's site gives (a Slurm site: the job's slurm-ID.out and .err;\n"
    "a batch site: where its cluster keeps them).\n";

#define PAGE_MAX 100000 /* JOB_GET's largest count (docs/wire.md 6.3): more in pages */

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
        wire_put_u64(&wb, "count", count < PAGE_MAX ? count : PAGE_MAX);
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
    if (wire_get_bool(j, "network", false)) /* submit --network (issue 23) */
        printf("network: on (submit --network): its tasks keep the node's network\n");
    char con[1100]; /* submit --constraint (issue 27) */
    cli_text(j, "constraint", con, sizeof con);
    if (con[0])
        printf("constraint: %s (only nodes with these features)\n", con);
    if (wire_get_u64(j, "checkpoint_s", 0)) /* issue 26 */
        printf("checkpoints: every %llu s to the cluster (submit --checkpoint-s)\n",
               (unsigned long long)wire_get_u64(j, "checkpoint_s", 0));
    char reason[320];
    cli_text(j, "reason", reason, sizeof reason); /* Dependency: TERM (issue 27) */
    if (reason[0])
        printf("reason: %s\n", reason);
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
    if (!*sid) /* users see no session ids (issue 23): nothing to look up */
        return sid;
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
            fetch_print_files(t); /* issue 26: its kept output files */
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
        if (!wire_get(p, "stdout") && !wire_get(p, "stderr") && !wire_get(p, "files_note"))
            continue;
        cli_text(p, "host", host, sizeof host);
        printf("\nrank %llu (host %s):\n", (unsigned long long)wire_get_u64(p, "rank", 0),
               host[0] ? host : "-");
        print_bytes("stdout", p, "stdout", "out_trunc");
        print_bytes("stderr", p, "stderr", "err_trunc");
        fetch_print_files(p); /* issue 26: the files it kept (submit -p --output) */
    }
}

/* A batch role's parallel job has no ranks: its output is at the cluster manager that
 * ran it (at: "output_at", NULL while not started there). Says where; 1. */
static int output_at_hint(const struct cli *c, uint64_t job, const msgpack_object *at)
{
    char cl[64], ep[256];
    cli_text(at, "cluster", cl, sizeof cl);
    cli_text(at, "endpoint", ep, sizeof ep);
    if (!at)
        fprintf(stderr,
                "%s: job %llu: no output here: the job has not started on a cluster "
                "manager yet (a batch role keeps no output; the cluster it runs on does)\n",
                c->prog, (unsigned long long)job);
    else
        fprintf(stderr,
                "%s: job %llu: the batch role keeps no output; it is kept at the cluster "
                "%s, as its job %llu: run gridnode job %llu --output -e %s\n",
                c->prog, (unsigned long long)job, cl,
                (unsigned long long)wire_get_u64(at, "cjob", 0),
                (unsigned long long)wire_get_u64(at, "cjob", 0), ep);
    return 1;
}

/*
 * A parallel job: the summary and the rank table; with output, the ranks' stdout and
 * stderr, fetching further pages while the cluster cut the reply short ("next").
 */
static int print_pjob(struct cli *c, uint64_t job, struct cli_reply *r, bool output, bool summary,
                      uint64_t from, uint64_t count)
{
    const msgpack_object *j = wire_get(r->msg.root, "job");
    cli_pjob_print(j, !summary);
    if (!output)
        return 0;
    if (!wire_get(j, "ranks")) { /* a batch role's job: the cluster keeps the output */
        struct cli_reply t;      /* issue 26: the files it copied back, named RANK/NAME */
        bool files = false;
        if (fetch(c, job, true, false, 0, 1, &t) == 0) {
            const msgpack_object *rows = wire_get(t.msg.root, "tasks");
            if (rows && rows->type == MSGPACK_OBJECT_ARRAY && rows->via.array.size &&
                (files = wire_get(&rows->via.array.ptr[0], "files") != NULL)) {
                printf("\nfiles kept at the batch role (gridnode fetch downloads them):\n");
                fetch_print_files(&rows->via.array.ptr[0]);
            }
            cli_reply_free(&t);
        }
        int rc = output_at_hint(c, job, wire_get(r->msg.root, "output_at"));
        return files ? 0 : rc;
    }
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

/*
 * Where the outputs of a batch role's task array are (its task rows carry "cjob": each
 * element ran as a job of a cluster manager, which keeps the output; docs/wire.md
 * 6.11): per cluster, its endpoint and the first of those jobs.
 */
#define WHERE_MAX 8
struct where {
    struct {
        char name[64], ep[256], ids[160];
        uint32_t n;
    } cl[WHERE_MAX];
    uint32_t n;
    bool batch; /* rows of a batch role were seen */
    bool files; /* ... listing output files the batch role keeps (issue 26) */
};

static void where_add(struct where *w, const msgpack_object *tasks)
{
    for (uint32_t i = 0; tasks && i < tasks->via.array.size; i++) {
        const msgpack_object *t = &tasks->via.array.ptr[i];
        if (!wire_get(t, "cjob"))
            continue;
        w->batch = true;
        w->files |= wire_get(t, "files") != NULL;
        uint64_t cj = wire_get_u64(t, "cjob", 0);
        char name[64], ep[256];
        cli_text(t, "cluster", name, sizeof name);
        cli_text(t, "endpoint", ep, sizeof ep);
        if (!cj || !name[0])
            continue; /* not started: no output anywhere yet */
        uint32_t k = 0;
        while (k < w->n && strcmp(w->cl[k].name, name))
            k++;
        if (k == w->n) {
            if (w->n == WHERE_MAX)
                continue;
            memset(&w->cl[k], 0, sizeof w->cl[k]);
            snprintf(w->cl[k].name, sizeof w->cl[k].name, "%s", name);
            snprintf(w->cl[k].ep, sizeof w->cl[k].ep, "%s", ep);
            w->n++;
        }
        size_t used = strlen(w->cl[k].ids);
        if (w->cl[k].n++ < 10 && used + 24 < sizeof w->cl[k].ids)
            snprintf(w->cl[k].ids + used, sizeof w->cl[k].ids - used, "%s%llu", used ? " " : "",
                     (unsigned long long)cj);
    }
}

/* --output at a batch role: says where the outputs are instead. 1 (not shown here); 0
 * when the rows listed output files the batch role keeps (gridnode fetch gets them). */
static int where_print(const struct cli *c, const struct where *w, uint64_t job)
{
    fprintf(stderr,
            "%s: job %llu: the batch role keeps %s; each task ran as a job of a "
            "cluster manager, which keeps it%s\n",
            c->prog, (unsigned long long)job,
            w->files ? "the files listed above (gridnode fetch downloads them), not the tasks' "
                       "stdout and stderr"
                     : "no task output",
            w->n ? ":" : " (none of these has started yet)");
    for (uint32_t k = 0; k < w->n; k++)
        fprintf(stderr, "  cluster %s: gridnode job %s%s --output -e %s\n", w->cl[k].name,
                w->cl[k].ids, w->cl[k].n > 10 ? " ..." : "",
                w->cl[k].ep[0] ? w->cl[k].ep : "CLUSTER_EP");
    return w->files ? 0 : 1;
}

/*
 * A bag job's tasks from `from` for `count`, page after page (a reply holds at most
 * PAGE_MAX tasks, and the role may cut it shorter: "next"): printed as a table, or,
 * with json, gathered into the first reply's shape (one "tasks" array, no "next"). A
 * table that does not show every task says so, and how to see the rest. r holds the
 * first page; freed here.
 */
static int print_bag(struct cli *c, uint64_t job, struct cli_reply *r, bool output, uint64_t from,
                     uint64_t count, const struct cli_pages *nodes)
{
    json_t *all = c->json ? mpjson(r->msg.root) : NULL;
    json_t *tasks = all ? json_object_get(all, "tasks") : NULL;
    uint64_t ntasks = wire_get_u64(wire_get(r->msg.root, "job"), "ntasks", 0);
    uint64_t first = from, end = count < ntasks - from || from >= ntasks ? from + count : ntasks;
    uint64_t shown_to = from;
    struct where wh = {.n = 0};
    int rc = 0;
    if (all)
        json_object_del(all, "next");
    else
        printf("\n%6s  %-8s %6s %5s %4s %8s %8s  %s\n", "TASK", "STATE", "ISSUES", "EXIT", "SIG",
               "CPU_S", "WALL_S", "NODE / NOTE");
    for (bool first_page = true;; first_page = false) {
        const msgpack_object *t = wire_get(r->msg.root, "tasks");
        if (!all && t)
            print_tasks(t, output, nodes);
        if (all && t && !first_page) {
            json_t *more = mpjson(t);
            if (more && tasks)
                json_array_extend(tasks, more);
            json_decref(more);
        }
        if (output)
            where_add(&wh, t);
        uint64_t got = from + (t && t->type == MSGPACK_OBJECT_ARRAY ? t->via.array.size : 0);
        const msgpack_object *next = wire_get(r->msg.root, "next");
        uint64_t nf = next ? next->via.u64 : got;
        if (got > shown_to)
            shown_to = got;
        if (nf <= from || nf >= end)
            break;
        from = nf;
        cli_reply_free(r);
        if (fetch(c, job, true, output || c->json, from, end - from, r) != 0) {
            rc = 1;
            goto out;
        }
    }
    cli_reply_free(r);
    if (!all && shown_to <= first && ntasks)
        printf("(no task from --from %llu: the job has %llu, 0 to %llu)\n",
               (unsigned long long)first, (unsigned long long)ntasks,
               (unsigned long long)(ntasks - 1));
    else if (!all && (first > 0 || shown_to < ntasks))
        printf("\nshowing tasks %llu to %llu of %llu (0 to %llu); --all shows every task, "
               "--from %llu the next ones\n",
               (unsigned long long)first, (unsigned long long)(shown_to - 1),
               (unsigned long long)ntasks, (unsigned long long)(ntasks - 1),
               (unsigned long long)(shown_to < ntasks ? shown_to : 0));
out:
    if (all && rc == 0) {
        json_dumpf(all, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
        putchar('\n');
    }
    json_decref(all);
    if (rc == 0 && output && wh.batch)
        rc = where_print(c, &wh, job);
    return rc;
}

/*
 * A job of the grid spool (gridnode meta: its row carries "gstate"): where it went and
 * how it ended. The spool keeps no outputs (the site's cluster manager does): the
 * lines name the site's endpoint (from SITE_INFO, a nicety) and the command that shows
 * the site's job, whose tasks name the cluster job holding the output.
 */
static void print_grid(struct cli *c, const msgpack_object *j, bool summary)
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
    if (wire_get_bool(j, "network", false)) /* submit --network (issue 23) */
        printf("network: on (submit --network): its tasks keep the node's network\n");
    if (wire_get_u64(j, "orders", 0)) /* the spool's outbox (issue 24, docs/meta.md) */
        printf("%llu order(s) to its site (cancel, release) not acknowledged yet: sent again "
               "until the site answers\n",
               (unsigned long long)wire_get_u64(j, "orders", 0));
    char con[1100]; /* submit --constraint (issue 27) */
    cli_text(j, "constraint", con, sizeof con);
    if (con[0])
        printf("constraint: %s (only nodes with these features)\n", con);
    if (!site[0] || summary)
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
    if (ep[0] && !strncmp(ep, "slurm://", 8))
        printf("the site's view: squeue -j %llu (a Slurm cluster); its output: gridnode job "
               "%llu --output\n",
               (unsigned long long)wire_get_u64(j, "site_job", 0),
               (unsigned long long)wire_get_u64(j, "job", 0));
    else if (ep[0])
        printf("the site's view and the output's cluster job: gridnode job %llu -e %s --json\n",
               (unsigned long long)wire_get_u64(j, "site_job", 0), ep);
}

/* The output files a spool copied back from its site (issue 26: its `tasks` rows with
 * "files"), listed; whether there were any. */
static bool print_spool_files(const struct cli *c, uint64_t job, const msgpack_object *tasks)
{
    bool any = false;
    for (uint32_t i = 0; tasks && tasks->type == MSGPACK_OBJECT_ARRAY && i < tasks->via.array.size;
         i++) {
        const msgpack_object *fl = wire_get(&tasks->via.array.ptr[i], "files");
        any |= fl && fl->type == MSGPACK_OBJECT_ARRAY && fl->via.array.size > 0;
    }
    if (!any)
        return false;
    printf("\nfiles kept at the grid spool (gridnode fetch %llu DIR -e %s downloads them):\n",
           (unsigned long long)job, c->endpoint);
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        const msgpack_object *t = &tasks->via.array.ptr[i];
        char state[16];
        cli_text(t, "state", state, sizeof state);
        printf("%6llu  %s\n", (unsigned long long)wire_get_u64(t, "idx", 0), state);
        fetch_print_files(t);
    }
    return true;
}

/*
 * job --output of a spool's job (issue 27): the spool relays its site's JOB (at_site):
 * the ranks' or tasks' outputs as the site gave them, or, from a batch site, where its
 * cluster keeps them. 0 when outputs were shown, else 1 with the reason on stderr.
 */
static int print_grid_output(struct cli *c, uint64_t job, struct cli_reply *r)
{
    const msgpack_object *j = wire_get(r->msg.root, "job"), *as = wire_get(r->msg.root, "at_site");
    const msgpack_object *sj = wire_get(as, "job");
    char err[1100];
    cli_text(r->msg.root, "site_error", err, sizeof err);
    if (c->json) {
        cli_print_json(r->msg.root);
        return sj ? 0 : 1;
    }
    print_grid(c, j, true); /* the site's lines point to the output shown here */
    bool kept = print_spool_files(c, job, wire_get(r->msg.root, "tasks"));
    if (!sj && kept)
        return 0; /* the files are here; the site's stdout is not reachable now */
    if (!sj) {
        fprintf(stderr, "%s: job %llu: no output: %s\n", c->prog, (unsigned long long)job,
                err[0] ? err
                : wire_get_u64(j, "site_job", 0)
                    ? "its site is down now (the spool keeps no output; its site does)"
                    : "the job has not been placed on a site yet");
        return 1;
    }
    printf("\noutput, as site job %llu reports it:\n",
           (unsigned long long)wire_get_u64(sj, "job", 0));
    if (cli_is_pjob(sj)) {
        if (!wire_get(sj, "ranks"))
            return output_at_hint(c, wire_get_u64(sj, "job", 0), wire_get(as, "output_at"));
        print_rank_output(wire_get(sj, "ranks"));
    } else {
        const msgpack_object *t = wire_get(as, "tasks");
        struct where wh = {.n = 0};
        if (t && t->type == MSGPACK_OBJECT_ARRAY) {
            printf("%6s  %-8s %6s %5s %4s %8s %8s  %s\n", "TASK", "STATE", "ISSUES", "EXIT", "SIG",
                   "CPU_S", "WALL_S", "NODE / NOTE");
            print_tasks(t, true, NULL);
        }
        where_add(&wh, t);
        if (wh.batch)
            return where_print(c, &wh, wire_get_u64(sj, "job", 0));
    }
    if (wire_get(as, "next"))
        printf("\n(more at the site: gridnode job %llu --output --from %llu)\n",
               (unsigned long long)job, (unsigned long long)wire_get_u64(as, "next", 0));
    return 0;
}

/* Job job's reply r (the first page), printed as the options say; r is freed. 0, or 1. */
static int print_job(struct cli *c, uint64_t job, struct cli_reply *r, bool output, bool summary,
                     uint64_t from, uint64_t count)
{
    const msgpack_object *j = wire_get(r->msg.root, "job"), *tasks = wire_get(r->msg.root, "tasks");
    if (wire_get(j, "gstate") && output) { /* the spool relays its site's (issue 27) */
        int orc = print_grid_output(c, job, r);
        cli_reply_free(r);
        return orc;
    }
    if (wire_get(j, "gstate") && !c->json) {
        print_grid(c, j, summary);
        cli_reply_free(r);
        return 0;
    }
    if (cli_is_pjob(j) && !c->json) {
        int prc = print_pjob(c, job, r, output, summary, from, count);
        cli_reply_free(r);
        return prc;
    }
    if (!tasks) {
        if (c->json)
            cli_print_json(r->msg.root);
        else
            print_summary(j);
        cli_reply_free(r);
        return 0;
    }
    struct cli_pages nodes = {NULL, 0};
    if (!c->json) {
        print_summary(j);
        if (cli_list(c, WT_NODE_LIST, &nodes) != 0) /* names are a nicety */
            nodes.n = 0;
    }
    int prc = print_bag(c, job, r, output, from, count, &nodes);
    cli_pages_free(&nodes);
    return prc;
}

#define PRINT_AHEAD 4 /* JOB_GETs sent ahead of the one being printed */
#define PRINT_ID 1000 /* request ids of those: PRINT_ID + the job's index */

/* Sends the first JOB_GET of job k of ids (id PRINT_ID + k). 0 or -1. */
static int send_first(struct cli *c, const uint64_t *ids, size_t k, bool tasks, bool output,
                      uint64_t from, uint64_t count)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_GET, PRINT_ID + k, tasks ? 5 : 1);
    wire_put_u64(&wb, "job", ids[k]);
    if (tasks) {
        wire_put_bool(&wb, "tasks", true);
        wire_put_bool(&wb, "output", output);
        wire_put_u64(&wb, "from", from);
        wire_put_u64(&wb, "count", count < PAGE_MAX ? count : PAGE_MAX);
    }
    int rc = cli_send(c, &wb);
    wire_buf_free(&wb);
    return rc;
}

/* A job's final row from the feed (w->row), printed as JOB_GET's summary would be. */
static int print_row(const struct cli *c, const struct wjob *w, uint64_t id)
{
    msgpack_unpacked up;
    size_t off = 0;
    int rc = 1;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, w->row.data, w->row.size, &off) == MSGPACK_UNPACK_SUCCESS) {
        rc = 0;
        if (!c->json) {
            print_summary(&up.data);
        } else {
            json_t *o = json_pack("{s:i, s:i, s:I, s:o*}", "v", WIRE_VERSION, "t", WT_JOB, "id",
                                  (json_int_t)id, "job", mpjson(&up.data));
            if (o)
                json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
            putchar('\n');
            json_decref(o);
        }
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

/*
 * Every job of ids (but those w marks unknown), one after the other, over the kept
 * connection: the first page of the next few is asked for before the current one is
 * printed, so several jobs cost one round trip, not one each; with summary, a job
 * whose final row came with its end (w, after --wait) is not asked for again. The exit
 * status: 0, or 1 when a job could not be read (printed).
 */
static int print_jobs(struct cli *c, const uint64_t *ids, size_t n, const struct wjob *w,
                      bool output, bool summary, uint64_t from, uint64_t count)
{
    int rc = 0;
    size_t sent = 0;
    for (size_t k = 0; k < n; k++) {
        for (; sent < n && sent < k + PRINT_AHEAD; sent++)
            if ((!w || (w[sent].end != 1 && !(summary && w[sent].has_row))) &&
                send_first(c, ids, sent, !summary, output || c->json, from, count) < 0) {
                cli_report(c);
                return 1;
            }
        if (w && w[k].end == 1) { /* unknown: said while waiting */
            rc = 1;
            continue;
        }
        if (k > 0 && !c->json)
            putchar('\n');
        if (w && summary && w[k].has_row) {
            rc |= print_row(c, &w[k], PRINT_ID + k);
            continue;
        }
        struct cli_reply r;
        int got = cli_await(c, PRINT_ID + k, &r);
        if (got < 0)
            return 1;
        if (got > 0) {
            rc = 1;
            continue;
        }
        if (print_job(c, ids[k], &r, output, summary, from, count) != 0)
            rc = 1;
        fflush(stdout);
    }
    return rc;
}

int cmd_job(int argc, char **argv)
{
    struct cli c;
    bool output = false, wait = false, summary = false;
    uint64_t from = 0, count = 1000;
    size_t n = 0;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode job", &argc, argv) < 0)
        return 2;
    uint64_t *ids = calloc((size_t)argc, sizeof *ids);
    struct wjob *w = calloc((size_t)argc, sizeof *w);
    int rc = 2;
    if (!ids || !w) {
        fprintf(stderr, "%s: out of memory\n", c.prog);
        rc = 1;
        goto out;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--output"))
            output = true;
        else if (!strcmp(argv[i], "--wait"))
            wait = true;
        else if (!strcmp(argv[i], "--summary"))
            summary = true;
        else if (!strcmp(argv[i], "--from") && i + 1 < argc) {
            if (cli_uint(c.prog, "--from", argv[++i], 0, UINT32_MAX, &from) < 0)
                goto out;
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (cli_uint(c.prog, "--count", argv[++i], 1, UINT32_MAX, &count) < 0)
                goto out;
        } else if (!strcmp(argv[i], "--all")) {
            count = (uint64_t)UINT32_MAX + 1; /* every task: more than a job can have */
        } else if (argv[i][0] != '-') {
            if (cli_u64(&c, "JOB", argv[i], &ids[n++]) < 0)
                goto out;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[i], usage);
            goto out;
        }
    }
    if (n == 0) {
        fprintf(stderr, "%s: give a job id (gridnode jobs lists them)\n%s", c.prog, usage);
        goto out;
    }
    if (cli_keep(&c) < 0) {
        rc = 1;
        goto out;
    }
    int wrc = 0; /* the exit status of the wait, after printing */
    if (wait) {
        wrc = wait_jobs(&c, ids, n, w);
        for (size_t k = 0; k < n; k++)
            if (w[k].end < 0) { /* the role could not be asked (said) */
                rc = 1;
                goto out;
            }
    }
    int prc = print_jobs(&c, ids, n, wait ? w : NULL, output, summary, from, count);
    rc = wrc ? wrc : prc;
out:
    cli_unkeep(&c);
    free(ids);
    free_rows(w, n);
    free(w);
    return rc;
}

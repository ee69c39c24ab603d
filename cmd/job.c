/* job.c - `gridnode job ID`: one job's status and its tasks' results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "wire/mpjson.h"

static const char usage[] =
    "usage: gridnode job [options] JOB [JOB...]\n"
    "\n"
    "Shows a job's status and a table of its tasks (state, exit status, times, node);\n"
    "for a parallel job, its limits and a table of its processes (ranks). Several jobs\n"
    "are shown one after the other (--json: one line each).\n"
    "  --output            also print each finished task's (or rank's) stdout and stderr\n"
    "  --summary           only the job's status line\n"
    "  --from I            first task (or rank, for --output) shown (default 0)\n"
    "  --count N           tasks (or ranks, for --output) shown (default 1000)\n"
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
    if (wire_get_bool(j, "network", false)) /* submit --network (issue 23) */
        printf("network: on (submit --network): its tasks keep the node's network\n");
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
static int print_pjob(struct cli *c, uint64_t job, struct cli_reply *r, bool output, uint64_t from,
                      uint64_t count)
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

/* The state of one job being waited for. */
struct wjob {
    uint64_t id;
    int end;        /* the exit status once ended (1: unknown job or no answer), else -1 */
    uint64_t ask;   /* request id of its JOB_GET in flight, 0 none */
    bool pjob;      /* a parallel job: a state, no task counts */
    char state[16]; /* as last seen */
    uint64_t n, done, failed, run;
    bool shown;          /* its line was printed since it last changed */
    bool has_row;        /* its end came from the feed with its final JOBS row: */
    msgpack_sbuffer row; /* that row, packed (shown without asking again) */
};

/* What --wait keeps: the jobs, the feed position, the requests in flight. */
struct waiter {
    struct cli *c;
    struct wjob *w;
    size_t n, left; /* jobs, jobs not ended */
    bool tty;
    int feed;         /* EVENTS: 1 offered, 0 not (TYPE, DENIED, ...), -1 not known yet */
    char epoch[80];   /* the feed's, "" before the first EVENT_LIST */
    uint64_t next;    /* the feed position */
    uint64_t ev_ask;  /* request id of the EVENTS in flight, 0 none */
    int64_t ev_sent;  /* when it was sent */
    int64_t get_sent; /* when the JOB_GETs in flight were sent */
    int64_t refresh;  /* when the jobs are read again (progress, or polling) */
    uint64_t rid;     /* the last request id used */
};

#define WAIT_HOLD_MS 25000 /* EVENTS held this long (the role's limit is 30 s) */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How often the jobs are read: progress on a terminal, lines in a log, or (no feed)
 * the only way to see an end. */
static int refresh_ms(const struct waiter *x)
{
    return x->tty ? 1000 : x->feed == 1 ? 5000 : 1000;
}

/* Prints job j's progress (a terminal: one line redrawn for one job; else a line when
 * something changed) and its end. */
static void show(struct waiter *x, struct wjob *j)
{
    if (j->shown)
        return;
    j->shown = true;
    if (j->end >= 0 && j->end != 1) {
        const char *pre = !x->tty ? "" : x->n > 1 ? "\r" : !j->pjob ? "\n" : "";
        fprintf(stderr, "%sjob %llu %s%s\n", pre, (unsigned long long)j->id,
                j->end == CLI_EXIT_FAILED ? "failed" : j->state,
                x->tty && x->n > 1 ? "                                                  " : "");
        return;
    }
    if (j->end >= 0 || (x->tty && x->n > 1))
        return;
    if (j->pjob) {
        if (!x->tty)
            fprintf(stderr, "job %llu %s\n", (unsigned long long)j->id, j->state);
        return;
    }
    int width = 30, fill = j->n ? (int)(j->done * (uint64_t)width / j->n) : width;
    fprintf(stderr, "%sjob %llu [%.*s%*s] %llu/%llu done, %llu failed, %llu running%s",
            x->tty ? "\r" : "", (unsigned long long)j->id, fill, "##############################",
            width - fill, "", (unsigned long long)j->done, (unsigned long long)j->n,
            (unsigned long long)j->failed, (unsigned long long)j->run, x->tty ? "   " : "\n");
}

/* Several jobs on a terminal: one summary line, redrawn. */
static void show_all(const struct waiter *x)
{
    if (!x->tty || x->n < 2 || !x->left)
        return;
    uint64_t n = 0, done = 0, failed = 0, run = 0;
    for (size_t i = 0; i < x->n; i++) {
        n += x->w[i].n;
        done += x->w[i].done;
        failed += x->w[i].failed;
        run += x->w[i].run;
    }
    fprintf(stderr, "\r%zu jobs: %zu ended; tasks %llu/%llu done, %llu failed, %llu running   ",
            x->n, x->n - x->left, (unsigned long long)done, (unsigned long long)n,
            (unsigned long long)failed, (unsigned long long)run);
}

/* Job j's state (and counts when has_counts) as just read; prints what changed. */
static void job_seen(struct waiter *x, struct wjob *j, const msgpack_object *m, bool has_counts)
{
    char state[16];
    cli_text(m, "state", state, sizeof state);
    uint64_t n = wire_get_u64(m, "ntasks", j->n), done = wire_get_u64(m, "done", j->done);
    uint64_t failed = wire_get_u64(m, "failed", j->failed);
    uint64_t run = has_counts ? wire_get_u64(m, "running", 0) : j->run;
    int end = end_status(state, failed);
    if (end == CLI_EXIT_FAILED && j->pjob == false && !strcmp(state, "done"))
        snprintf(state, sizeof state, "failed");
    if (strcmp(state, j->state) || n != j->n || done != j->done || failed != j->failed ||
        run != j->run)
        j->shown = false;
    snprintf(j->state, sizeof j->state, "%s", state);
    j->n = n;
    j->done = done;
    j->failed = failed;
    j->run = end >= 0 ? 0 : run;
    if (end >= 0 && j->end < 0) {
        j->end = end;
        x->left--;
        const msgpack_object *row = has_counts ? NULL : wire_get(m, "row");
        if (row && row->type == MSGPACK_OBJECT_MAP && !j->has_row) {
            msgpack_packer pk;
            msgpack_sbuffer_init(&j->row);
            msgpack_packer_init(&pk, &j->row, msgpack_sbuffer_write);
            j->has_row = msgpack_pack_object(&pk, *row) == 0;
        }
    }
    show(x, j);
}

static int send_job_get(struct waiter *x, struct wjob *j)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    j->ask = ++x->rid;
    wire_begin(&wb, WT_JOB_GET, j->ask, 1);
    wire_put_u64(&wb, "job", j->id);
    int rc = cli_send(x->c, &wb);
    wire_buf_free(&wb);
    return rc;
}

/* EVENTS: the first (epoch "": the feed's end at once, and whether it is offered at
 * all), then held ones from the position reached. */
static int send_events(struct waiter *x)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    x->ev_ask = ++x->rid;
    x->ev_sent = mono_ms();
    wire_begin(&wb, WT_EVENTS, x->ev_ask, x->epoch[0] ? 4 : 1);
    wire_put_str(&wb, "epoch", x->epoch);
    if (x->epoch[0]) {
        wire_put_u64(&wb, "from", x->next);
        wire_put_u64(&wb, "wait_ms", WAIT_HOLD_MS);
        wire_put_u64(&wb, "max", 1000);
    }
    int rc = cli_send(x->c, &wb);
    wire_buf_free(&wb);
    return rc;
}

/* Reads every job not ended (one JOB_GET each, all sent before any reply is read). */
static int refresh(struct waiter *x)
{
    x->get_sent = mono_ms();
    x->refresh = x->get_sent + refresh_ms(x);
    for (size_t i = 0; i < x->n; i++)
        if (x->w[i].end < 0 && !x->w[i].ask && send_job_get(x, &x->w[i]) < 0)
            return -1;
    return 0;
}

static struct wjob *find_job(struct waiter *x, uint64_t id)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->w[i].id == id)
            return &x->w[i];
    return NULL;
}

/* An EVENT_LIST: the feed's position; events of our jobs are their new state. */
static void on_events(struct waiter *x, const struct cli_reply *r)
{
    size_t el;
    const char *ep = wire_get_str(r->msg.root, "epoch", &el);
    bool fresh = !x->epoch[0];
    snprintf(x->epoch, sizeof x->epoch, "%.*s", (int)(el < 79 ? el : 79), ep ? ep : "");
    x->next = wire_get_u64(r->msg.root, "next", 0);
    x->feed = 1;
    if (!fresh && wire_get_bool(r->msg.root, "reset", false)) {
        x->refresh = 0; /* a restarted role (new epoch) or missed events: read the jobs */
        return;
    }
    const msgpack_object *ev = wire_get(r->msg.root, "events");
    for (uint32_t i = 0; ev && ev->type == MSGPACK_OBJECT_ARRAY && i < ev->via.array.size; i++) {
        const msgpack_object *e = &ev->via.array.ptr[i];
        char kind[8];
        cli_text(e, "kind", kind, sizeof kind);
        struct wjob *j = find_job(x, wire_get_u64(e, "job", 0));
        if (j && j->end < 0 && (!strcmp(kind, "bag") || !strcmp(kind, "job")))
            job_seen(x, j, e, false);
    }
}

/* A reply of request id: to a JOB_GET or the EVENTS in flight (others are late
 * replies to requests given up, ignored). */
static void on_reply(struct waiter *x, struct cli_reply *r)
{
    if (x->ev_ask && r->msg.id == x->ev_ask) {
        x->ev_ask = 0;
        if (r->msg.type == WT_EVENT_LIST) {
            on_events(x, r);
        } else { /* no feed here (a batch or meta role, an older cluster, a user key) */
            x->feed = 0;
            x->refresh = mono_ms() + refresh_ms(x);
        }
        return;
    }
    for (size_t i = 0; i < x->n; i++) {
        struct wjob *j = &x->w[i];
        if (!j->ask || j->ask != r->msg.id)
            continue;
        j->ask = 0;
        if (r->msg.type == WT_ERROR) { /* no such job (NOT_FOUND), or refused */
            char prog[160];
            struct cli named = *x->c;
            snprintf(prog, sizeof prog, "%s: job %llu", x->c->prog, (unsigned long long)j->id);
            named.prog = prog;
            cli_print_error(&named, r);
            if (j->end < 0)
                x->left--;
            j->end = 1;
        } else if (j->end < 0) {
            const msgpack_object *m = wire_get(r->msg.root, "job");
            j->pjob = cli_is_pjob(m);
            job_seen(x, j, m, true);
        }
        return;
    }
}

static bool gets_in_flight(const struct waiter *x)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->w[i].ask)
            return true;
    return false;
}

/* The connection was lost (a role restart): forget what was in flight; it is sent
 * again on a new connection (cli_send reconnects, retrying for --timeout). */
static void forget_in_flight(struct waiter *x)
{
    for (size_t i = 0; i < x->n; i++)
        x->w[i].ask = 0;
    x->ev_ask = 0;
    x->refresh = 0;
}

/*
 * The wait: every job's state read once (with the feed's position: EVENTS and JOB_GETs
 * go out together, answered in order), then, where the role offers the change feed
 * (docs/wire.md 6.9, events of kind "bag" and "job"), one EVENTS held by the role at a
 * time: a job's end arrives within one one-way delay. The jobs are read again every
 * refresh_ms for progress; without a feed (batch, meta, a user key the feed is denied
 * to) that polling is what sees the end. All over one connection. Returns 0 when the
 * jobs ended (their statuses in w[].end), 1 when the role could not be asked.
 */
static int wait_loop(struct waiter *x)
{
    struct cli *c = x->c;
    int losses = 0; /* connections lost in a row, no reply between them */
    while (x->left > 0) {
        int64_t now = mono_ms();
        /* a request that cannot be sent: the role could not be reached (a lost
         * connection is made again first, retried for --connect-timeout, which is
         * raised to --timeout once the jobs were seen) */
        if ((x->feed != 0 && !x->ev_ask && (x->epoch[0] || x->feed == -1) && send_events(x) < 0) ||
            (!gets_in_flight(x) && now >= x->refresh && refresh(x) < 0)) {
            cli_report(c);
            return 1;
        }
        /* wait for a reply, at most until the next refresh or a request's deadline */
        int64_t until = gets_in_flight(x) ? x->get_sent + c->timeout_ms : x->refresh;
        if (x->ev_ask && x->ev_sent + WAIT_HOLD_MS + c->timeout_ms < until)
            until = x->ev_sent + WAIT_HOLD_MS + c->timeout_ms;
        struct cli_reply r;
        if (cli_recv(c, (int)(until > now ? until - now : 0), &r) == 0) {
            on_reply(x, &r);
            cli_reply_free(&r);
            show_all(x);
            losses = 0;
            /* Once the jobs were seen, a role restarting under a long wait is waited
             * for (up to the reply timeout), not reported as unreachable. */
            if (c->connect_ms < c->timeout_ms)
                c->connect_ms = c->timeout_ms;
            continue;
        }
        if (cli_lost(c) && ++losses <= 3) { /* sent again on a new connection */
            forget_in_flight(x);
            continue;
        }
        now = mono_ms();
        if (cli_lost(c) || (gets_in_flight(x) && now >= x->get_sent + c->timeout_ms) ||
            (x->ev_ask && now >= x->ev_sent + WAIT_HOLD_MS + c->timeout_ms)) {
            cli_report(c);
            return 1;
        }
    }
    return 0;
}

/* The worst of the jobs' exit statuses: 1 (unknown, or not answered) over 5 cancelled,
 * 4 killed, 3 failed, 0 done. */
static int worst(const struct wjob *w, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i].end == 1 || (rc != 1 && w[i].end > rc))
            rc = w[i].end;
    return rc;
}

/*
 * Waits until every job of ids ended, with progress on stderr; w (n entries, zeroed by
 * the caller) gets each one's end (and final row, free with free_rows). Returns the
 * worst of them (worst()), or 1 when the role could not be asked. Uses c's kept
 * connection, or keeps one for the wait.
 */
static int wait_jobs(struct cli *c, const uint64_t *ids, size_t n, struct wjob *w)
{
    struct waiter x = {.c = c, .w = w, .n = n, .left = n, .tty = isatty(2), .feed = -1};
    bool own = !c->conn;
    if (own && cli_keep(c) < 0)
        return 1;
    for (size_t i = 0; i < n; i++) {
        w[i].id = ids[i];
        w[i].end = -1;
        w[i].shown = true;
    }
    int rc = wait_loop(&x);
    if (x.tty && x.n > 1 && rc == 0)
        fputc('\n', stderr);
    if (rc == 0)
        rc = worst(w, n);
    if (own)
        cli_unkeep(c);
    return rc;
}

static void free_rows(struct wjob *w, size_t n)
{
    for (size_t i = 0; w && i < n; i++)
        if (w[i].has_row)
            msgpack_sbuffer_destroy(&w[i].row);
}

int cmd_job_wait(struct cli *c, uint64_t job)
{
    struct wjob w = {0};
    int rc = wait_jobs(c, &job, 1, &w);
    free_rows(&w, 1);
    cli_unkeep(c);
    return rc;
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
    if (wire_get_bool(j, "network", false)) /* submit --network (issue 23) */
        printf("network: on (submit --network): its tasks keep the node's network\n");
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

/* Job job's reply r (the first page), printed as the options say; r is freed. 0, or 1. */
static int print_job(struct cli *c, uint64_t job, struct cli_reply *r, bool output, bool summary,
                     uint64_t from, uint64_t count)
{
    (void)summary;
    const msgpack_object *j = wire_get(r->msg.root, "job"), *tasks = wire_get(r->msg.root, "tasks");
    if (wire_get(j, "gstate") && !c->json) {
        print_grid(c, j);
        cli_reply_free(r);
        return 0;
    }
    if (cli_is_pjob(j) && !c->json) {
        int prc = print_pjob(c, job, r, output, from, count);
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
        wire_put_u64(&wb, "count", count);
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
            if (cli_u64(&c, "--from", argv[++i], &from) < 0)
                goto out;
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (cli_u64(&c, "--count", argv[++i], &count) < 0)
                goto out;
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
    if (count > 100000)
        count = 100000;
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

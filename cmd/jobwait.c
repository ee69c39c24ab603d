/*
 * jobwait.c - `gridnode job --wait` and `submit --wait` (cmd_job_wait): waits until jobs
 * have ended, with progress on stderr, over one kept connection; ends are seen on the
 * role's change feed where it offers one (EVENTS, a cluster manager), else through a
 * held JOB_WAIT (the batch role, the grid spool: issue 28), else the jobs are read
 * every second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/jobwait.h"

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
    int jw;           /* JOB_WAIT: 1 answered, 0 not (TYPE: an older role), -1 not known */
    uint64_t jw_ask;  /* request id of the JOB_WAIT in flight, 0 none */
    int64_t jw_sent;  /* when it was sent */
    int64_t jw_next;  /* not sent again before (an empty answer at once: nothing held) */
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
    return x->tty ? 1000 : x->feed == 1 || x->jw == 1 ? 5000 : 1000;
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

/* JOB_WAIT naming the jobs not ended (the first WIRE_JOB_WAIT_JOBS of them), held by
 * the role until one ends: the ended ones' rows come back. */
static int send_job_wait(struct waiter *x)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    x->jw_ask = ++x->rid;
    x->jw_sent = mono_ms();
    uint32_t n = 0;
    for (size_t i = 0; i < x->n && n < WIRE_JOB_WAIT_JOBS; i++)
        n += x->w[i].end < 0;
    wire_begin(&wb, WT_JOB_WAIT, x->jw_ask, 2);
    wire_put_key(&wb, "jobs");
    wire_pack_array(&wb, n);
    for (size_t i = 0, k = 0; i < x->n && k < n; i++)
        if (x->w[i].end < 0) {
            wire_pack_u64(&wb, x->w[i].id);
            k++;
        }
    wire_put_u64(&wb, "wait_ms", WAIT_HOLD_MS);
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
    if (x->jw_ask && r->msg.id == x->jw_ask) {
        x->jw_ask = 0;
        if (r->msg.type != WT_JOB_ENDED) { /* TYPE: an older role; else read the jobs */
            x->jw = r->msg.type == WT_ERROR && wire_get_u64(r->msg.root, "code", 0) == WE_TYPE
                        ? 0
                        : x->jw;
            x->refresh = 0;
            return;
        }
        x->jw = 1;
        const msgpack_object *a = wire_get(r->msg.root, "jobs");
        if ((!a || a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size) &&
            mono_ms() - x->jw_sent < 1000)
            x->jw_next = mono_ms() + 1000; /* the role could not hold it: not at once again */
        for (uint32_t i = 0; a && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size; i++) {
            struct wjob *j = find_job(x, wire_get_u64(&a->via.array.ptr[i], "job", 0));
            if (j && j->end < 0) {
                j->pjob = cli_is_pjob(&a->via.array.ptr[i]);
                job_seen(x, j, &a->via.array.ptr[i], true);
            }
        }
        return;
    }
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
    x->jw_ask = 0;
    x->refresh = 0;
}

/*
 * The wait: every job's state read once (with the feed's position: EVENTS and JOB_GETs
 * go out together, answered in order), then, where the role offers the change feed
 * (docs/wire.md 6.9, events of kind "bag" and "job"), one EVENTS held by the role at a
 * time: a job's end arrives within one one-way delay. Without the feed (a batch role,
 * the grid spool, a user key the feed is refused to) one JOB_WAIT held by the role at
 * a time does the same (docs/wire.md 6.20). The jobs are read again every refresh_ms
 * for progress; against a role that knows neither, that polling is what sees the end.
 * All over one connection. Returns 0 when the
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
            (x->feed == 0 && x->jw != 0 && !x->jw_ask && now >= x->jw_next &&
             send_job_wait(x) < 0) ||
            (!gets_in_flight(x) && now >= x->refresh && refresh(x) < 0)) {
            cli_report(c);
            return 1;
        }
        /* wait for a reply, at most until the next refresh or a request's deadline */
        int64_t until = gets_in_flight(x) ? x->get_sent + c->timeout_ms : x->refresh;
        if (x->ev_ask && x->ev_sent + WAIT_HOLD_MS + c->timeout_ms < until)
            until = x->ev_sent + WAIT_HOLD_MS + c->timeout_ms;
        if (x->jw_ask && x->jw_sent + WAIT_HOLD_MS + c->timeout_ms < until)
            until = x->jw_sent + WAIT_HOLD_MS + c->timeout_ms;
        if (!x->jw_ask && x->feed == 0 && x->jw != 0 && x->jw_next > now && x->jw_next < until)
            until = x->jw_next;
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
            (x->ev_ask && now >= x->ev_sent + WAIT_HOLD_MS + c->timeout_ms) ||
            (x->jw_ask && now >= x->jw_sent + WAIT_HOLD_MS + c->timeout_ms)) {
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
int wait_jobs(struct cli *c, const uint64_t *ids, size_t n, struct wjob *w)
{
    struct waiter x = {.c = c, .w = w, .n = n, .left = n, .tty = isatty(2), .feed = -1, .jw = -1};
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

void free_rows(struct wjob *w, size_t n)
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

/*
 * livestats.c - the live batch role's statistics (docs/batch.md "Statistics"): the
 * content of stats.json, of the page (Maui's showq, showres and showstats on one
 * screen) and of /metrics (gridnode_batch_...). The files, the timer, the HTTP server
 * and the page's frame are shared by every role (daemon/statspage.h).
 *
 * Decisions:
 * - The job rows are CHECKJOB's (livecmd_job_row), so the page, stats.json and
 *   `gridnode checkjob` never disagree on a state, a priority or an estimate.
 * - The batch role keeps its jobs for good (no retention), so stats.json lists the
 *   latest LIVESTATS_FINISHED finished jobs and at most LIVESTATS_UNFINISHED unfinished
 *   ones, the active ones first (`gridnode showq --all` has them all); the summary
 *   counts every job; the totals are counters since the role started. Listing every
 *   unfinished job (issue 28) cost 12 us a job a rebuild: at 10^5 pending jobs a
 *   rebuild took longer than stats.interval_s = 1 and the role stopped answering.
 * - Utilisation is the cores of the running elements over the cores of the hosts that
 *   are up; mean wait is over the elements started among the jobs in memory
 *   (start - submission), Maui's showstats "average queue time".
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "wire/mpjson.h"
#include "daemon/statspage.h"
#include "roles/batch/live/live_int.h"

#define LIVESTATS_FINISHED 1000   /* finished jobs in stats.json (the latest ones) */
#define LIVESTATS_UNFINISHED 5000 /* unfinished jobs in stats.json (active ones first) */

static bool elem_active(const struct lelem *el)
{
    return el->state == EL_STARTING || el->state == EL_RUNNING;
}

static bool job_ended(const struct ljob *j)
{
    return j->nended == j->ntasks || (j->cancelled && j->nstarted == j->nended);
}

static json_t *packed(struct wire_buf *wb)
{
    json_t *v = mpjson_bytes(wb->sb.data, wb->sb.size);
    wire_buf_free(wb);
    return v ? v : json_null();
}

/* One row per cluster manager: its state and its hosts' cores (busy: running elements). */
static json_t *clusters(struct live *L, uint64_t *up_total, uint64_t *busy_total)
{
    uint64_t busy[LIVE_MAX_CLUSTERS] = {0};
    for (uint32_t i = 0; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        const struct lelem *el;
        for (uint32_t e = 0; j->nrun && (el = live_elem_next(j, &e)); e++)
            if (elem_active(el) && el->cl >= 0 && el->cl < L->ncl)
                busy[el->cl] += j->parallel ? j->procs : 1;
    }
    json_t *arr = json_array();
    for (int c = 0; c < L->ncl; c++) {
        const struct lclu *cl = &L->cl[c];
        uint64_t hosts_up = 0, cores = 0, cores_up = 0;
        for (uint32_t h = 0; h < cl->nhosts; h++) {
            cores += (uint64_t)cl->hosts[h].ncores;
            if (cl->hosts[h].up) {
                hosts_up++;
                cores_up += (uint64_t)cl->hosts[h].ncores;
            }
        }
        /* liveclu.c: state 0 is down; synced means its hosts and jobs are known */
        const char *state = cl->st == 0 ? "down" : cl->synced ? "up" : "syncing";
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "name", cl->name,
                           "endpoint", cl->ep, "state", state, "events", cl->events_ok, "hosts",
                           (json_int_t)cl->nhosts, "hosts_up", (json_int_t)hosts_up, "cores",
                           (json_int_t)cores, "cores_up", (json_int_t)cores_up, "cores_busy",
                           (json_int_t)busy[c], "cores_free",
                           (json_int_t)(cores_up > busy[c] ? cores_up - busy[c] : 0)));
        *up_total += cores_up;
        *busy_total += busy[c];
    }
    return arr;
}

static void build(void *arg, json_t *root, int64_t now)
{
    struct live *L = arg;
    (void)now;
    json_t *jobs = json_array(), *resv = json_array();
    uint32_t nfin = 0, cut = 0, counts[3] = {0}; /* active, eligible, blocked */
    double wait_sum = 0;
    uint64_t nwait = 0;
    for (uint32_t i = L->njobs; i > 0; i--) /* ended jobs before `cut` are left out */
        if (job_ended(L->jobs[i - 1]) && ++nfin == LIVESTATS_FINISHED) {
            cut = i - 1;
            break;
        }
    for (uint32_t i = 0; i < L->njobs; i++) { /* the counts, the active ones listed first */
        const struct ljob *j = L->jobs[i];
        const struct lelem *el;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) /* started ones have records */
            if (el->start > 0 && j->submitted > 0 && el->start >= j->submitted) {
                wait_sum += (double)(el->start - j->submitted) / 1000.0;
                nwait++;
            }
        if (job_ended(j))
            continue;
        const char *qs = livecmd_queue_state(L, j);
        counts[!strcmp(qs, "active") ? 0 : !strcmp(qs, "eligible") ? 1 : 2]++;
    }
    uint32_t act = counts[0] < LIVESTATS_UNFINISHED ? counts[0] : LIVESTATS_UNFINISHED;
    uint32_t others = LIVESTATS_UNFINISHED - act;
    for (uint32_t i = 0; i < L->njobs; i++) {
        if (!act && !others && i < cut)
            i = cut; /* nothing more to list before the finished jobs listed */
        const struct ljob *j = L->jobs[i];
        if (job_ended(j)) {
            if (i < cut)
                continue;
        } else if (!strcmp(livecmd_queue_state(L, j), "active")) {
            if (!act)
                continue;
            act--;
        } else {
            if (!others)
                continue;
            others--;
        }
        struct wire_buf wb;
        wire_buf_init(&wb);
        livecmd_job_row(L, j, &wb);
        json_array_append_new(jobs, packed(&wb)); /* ascending ids */
    }
    for (uint32_t i = 0; i < L->nresv; i++) {
        struct wire_buf wb;
        wire_buf_init(&wb);
        live_resv_row(L, &L->resv[i], &wb);
        json_array_append_new(resv, packed(&wb));
    }
    uint64_t up = 0, busy = 0;
    json_object_set_new(root, "listen",
                        statspage_endpoint(L->cfg.live.state_dir, L->cfg.live.listen));
    json_object_set_new(root, "clusters", clusters(L, &up, &busy));
    json_object_set_new(
        root, "summary",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, "
                  "s:I}",
                  "running", (json_int_t)counts[0], "eligible", (json_int_t)counts[1], "blocked",
                  (json_int_t)counts[2], "jobs_in_memory", (json_int_t)L->njobs, "submitted",
                  (json_int_t)(L->next_id - L->first_id), "started", (json_int_t)L->starts, "ended",
                  (json_int_t)L->n_ended, "failed", (json_int_t)L->n_failed, "backfilled",
                  (json_int_t)L->n_backfilled, "cycles", (json_int_t)L->cycles, "cycle_s",
                  L->cycle_s, "cycle_s_total", L->cycle_s_total, "mean_wait_s",
                  nwait ? wait_sum / (double)nwait : 0.0, "utilisation",
                  up ? (double)busy / (double)up : 0.0, "cores_up", (json_int_t)up, "cores_busy",
                  (json_int_t)busy));
    json_object_set_new(root, "jobs", jobs);
    json_object_set_new(root, "reservations", resv);
}

/* ---- the page ---- */

/* A duration of s seconds for people: "45 s", "12 min", "3.5 h". */
static const char *span(char *buf, size_t len, long long s)
{
    if (s < 120)
        snprintf(buf, len, "%lld s", s);
    else if (s < 7200)
        snprintf(buf, len, "%lld min", s / 60);
    else
        snprintf(buf, len, "%.1f h", (double)s / 3600.0);
    return buf;
}

/* "in 5 min", "now", "-" for a wall time in ms relative to the page's time. */
static const char *when(char *buf, size_t len, long long t, long long now)
{
    char d[24];
    if (t <= 0)
        return "-";
    if (t <= now)
        return "now";
    snprintf(buf, len, "in %s", span(d, sizeof d, (t - now) / 1000));
    return buf;
}

/* "5 min ago", "-" */
static const char *ago(char *buf, size_t len, long long t, long long now)
{
    char d[24];
    if (t <= 0)
        return "-";
    snprintf(buf, len, "%s ago", span(d, sizeof d, t < now ? (now - t) / 1000 : 0));
    return buf;
}

static long long page_now; /* time_ms of the document being drawn (rows have no context) */

static void cell(FILE *f, json_t *v, const char *k)
{
    fprintf(f, "<td class=\"l\">");
    statspage_esc(f, statspage_str(v, k));
    fprintf(f, "</td>");
}

static void job_head(FILE *f, json_t *v)
{
    fprintf(f, "<tr><td>%lld</td>", statspage_num(v, "job"));
    cell(f, v, "name");
    cell(f, v, "user");
    cell(f, v, "class");
    fprintf(f, "<td>%lld</td><td>%lld</td>", statspage_num(v, "procs"), statspage_num(v, "ntasks"));
}

static void active_row(FILE *f, json_t *v)
{
    char b[32];
    job_head(f, v);
    fprintf(f, "<td>%lld</td><td>%lld</td><td class=\"l\">%s</td><td class=\"l\">",
            statspage_num(v, "running"), statspage_num(v, "ended"),
            ago(b, sizeof b, statspage_num(v, "started"), page_now));
    json_t *hosts = json_object_get(v, "hosts");
    statspage_list(f, hosts, 4);
    fprintf(f, "</td></tr>\n");
}

static void waiting_row(FILE *f, json_t *v)
{
    char b[32];
    job_head(f, v);
    fprintf(f, "<td>%.1f</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td class=\"l\">",
            statspage_real(v, "priority"),
            when(b, sizeof b, statspage_num(v, "estimate"), page_now),
            statspage_num(v, "reserved") > 0 ? "yes" : "");
    fprintf(f, "<span class=\"why\" title=\"");
    statspage_esc(f, statspage_str(v, "reason"));
    fprintf(f, "\">");
    statspage_esc(f, statspage_str(v, "reason"));
    fprintf(f, "</span></td></tr>\n");
}

static void ended_row(FILE *f, json_t *v)
{
    job_head(f, v);
    fprintf(f, "<td class=\"l\">%s</td><td>%lld</td></tr>\n", statspage_str(v, "state"),
            statspage_num(v, "ended"));
}

static bool is_ended(json_t *v)
{
    return !strcmp(statspage_str(v, "queue_state"), "ended");
}

static void resv_row(FILE *f, json_t *v)
{
    char b1[32], b2[32];
    fprintf(f, "<tr>");
    cell(f, v, "name");
    cell(f, v, "owner");
    fprintf(f, "<td class=\"l\">%s</td><td class=\"l\">%s</td><td class=\"l\">%s</td>",
            json_is_true(json_object_get(v, "site")) ? "site" : "admin",
            when(b1, sizeof b1, statspage_num(v, "start"), page_now),
            when(b2, sizeof b2, statspage_num(v, "end"), page_now));
    fprintf(f, "<td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td></tr>\n",
            statspage_num(v, "tasks"), statspage_num(v, "procs"), statspage_num(v, "job"),
            statspage_num(v, "jobs_running"));
}

static void cluster_row(FILE *f, json_t *v)
{
    const char *st = statspage_str(v, "state");
    fprintf(f, "<tr>");
    cell(f, v, "name");
    cell(f, v, "endpoint");
    fprintf(f,
            "<td class=\"l%s\">%s</td><td>%lld/%lld</td><td>%lld</td><td>%lld</td><td>%lld</td>"
            "<td>%lld</td></tr>\n",
            strcmp(st, "up") ? " down" : "", st, statspage_num(v, "hosts_up"),
            statspage_num(v, "hosts"), statspage_num(v, "cores"), statspage_num(v, "cores_up"),
            statspage_num(v, "cores_busy"), statspage_num(v, "cores_free"));
}

/* The rows of arr whose queue_state is qs (borrowed into a new array). */
static json_t *only(json_t *arr, const char *qs)
{
    json_t *out = json_array(), *v;
    size_t i;
    json_array_foreach(arr, i, v)
    {
        if (!strcmp(statspage_str(v, "queue_state"), qs))
            json_array_append(out, v);
    }
    return out;
}

#define JOB_COLS                                                                                   \
    "<th>job</th><th class=\"l\">name</th><th class=\"l\">user</th><th class=\"l\">class</th>"     \
    "<th>procs</th><th>tasks</th>"

static void html(FILE *f, json_t *st, void *arg)
{
    (void)arg;
    json_t *s = json_object_get(st, "summary"), *jobs = json_object_get(st, "jobs");
    page_now = statspage_num(st, "time_ms");
    fprintf(f, "<div class=\"cards\">");
    statspage_card(f, "running", "%lld", statspage_num(s, "running"));
    statspage_card(f, "eligible", "%lld", statspage_num(s, "eligible"));
    statspage_card(f, "blocked", "%lld", statspage_num(s, "blocked"));
    statspage_card(f, "utilisation", "%.0f%%", 100 * statspage_real(s, "utilisation"));
    statspage_card(f, "submitted since start", "%lld", statspage_num(s, "submitted"));
    statspage_card(f, "started since start", "%lld", statspage_num(s, "started"));
    statspage_card(f, "completed since start", "%lld", statspage_num(s, "ended"));
    statspage_card(f, "backfilled", "%lld", statspage_num(s, "backfilled"));
    statspage_card(f, "mean wait", "%.1f s", statspage_real(s, "mean_wait_s"));
    statspage_card(f, "last cycle", "%.1f ms", 1000 * statspage_real(s, "cycle_s"));
    fprintf(f, "</div>\n");
    json_t *a = only(jobs, "active"), *e = only(jobs, "eligible"), *b = only(jobs, "blocked");
    char title[64];
    snprintf(title, sizeof title, "Active jobs: %zu", json_array_size(a));
    statspage_table(f, a, title,
                    JOB_COLS "<th>running</th><th>ended</th><th class=\"l\">started</th>"
                             "<th class=\"l\">hosts</th>",
                    active_row, "none running");
    snprintf(title, sizeof title, "Eligible jobs: %zu", json_array_size(e));
    statspage_table(f, e, title,
                    JOB_COLS "<th>priority</th><th class=\"l\">estimated start</th>"
                             "<th class=\"l\">reserved</th><th class=\"l\">reason</th>",
                    waiting_row, "none eligible");
    snprintf(title, sizeof title, "Blocked jobs: %zu", json_array_size(b));
    statspage_table(f, b, title,
                    JOB_COLS "<th>priority</th><th class=\"l\">estimated start</th>"
                             "<th class=\"l\">reserved</th><th class=\"l\">reason</th>",
                    waiting_row, "none blocked");
    json_decref(a);
    json_decref(e);
    json_decref(b);
    statspage_finished_table(f, jobs, JOB_COLS "<th class=\"l\">state</th><th>ended</th>",
                             ended_row, is_ended);
    statspage_table(f, json_object_get(st, "reservations"), "Reservations",
                    "<th class=\"l\">name</th><th class=\"l\">owner</th><th class=\"l\">kind</th>"
                    "<th class=\"l\">start</th><th class=\"l\">end</th><th>tasks</th>"
                    "<th>procs</th><th>job</th><th>jobs running</th>",
                    resv_row, "none");
    statspage_table(f, json_object_get(st, "clusters"), "Clusters",
                    "<th class=\"l\">cluster</th><th class=\"l\">endpoint</th>"
                    "<th class=\"l\">state</th><th>hosts up</th><th>cores</th><th>cores up</th>"
                    "<th>busy</th><th>free</th>",
                    cluster_row, "none");
}

/* ---- /metrics ---- */

static void metrics(const struct prom *p, json_t *st, void *arg)
{
    struct live *L = arg;
    json_t *s = json_object_get(st, "summary"), *v;
    size_t i;
    static const char *const qs[] = {"running", "eligible", "blocked"};
    prom_family(p, "queue_jobs", "gauge",
                "Unfinished jobs by showq state (running: some element started).");
    for (int k = 0; k < 3; k++)
        prom_sample(p, "queue_jobs", "state", qs[k], (double)statspage_num(s, qs[k]));
    prom_metric(p, "jobs_submitted_total", "counter", "Jobs submitted since the role started.",
                (double)statspage_num(s, "submitted"));
    prom_metric(p, "jobs_started_total", "counter",
                "Job elements (a parallel job, or one task of an array) started since start.",
                (double)statspage_num(s, "started"));
    prom_metric(p, "jobs_completed_total", "counter",
                "Job elements that ended (done, failed, killed or cancelled) since start.",
                (double)statspage_num(s, "ended"));
    prom_metric(p, "jobs_failed_total", "counter",
                "Job elements that ended other than done since start.",
                (double)statspage_num(s, "failed"));
    prom_metric(p, "backfill_total", "counter", "Job elements started by backfill since start.",
                (double)statspage_num(s, "backfilled"));
    prom_metric(p, "cycles_total", "counter", "Scheduling cycles run since start.",
                (double)statspage_num(s, "cycles"));
    prom_metric(p, "cycle_duration_seconds", "gauge", "Duration of the last scheduling cycle.",
                statspage_real(s, "cycle_s"));
    prom_metric(p, "cycle_seconds_total", "counter", "Time spent in scheduling cycles since start.",
                statspage_real(s, "cycle_s_total"));
    prom_metric(p, "mean_wait_seconds", "gauge",
                "Mean wait (start - submission) of the elements started, over jobs in memory.",
                statspage_real(s, "mean_wait_s"));
    prom_metric(p, "utilisation_ratio", "gauge",
                "Cores of running elements over the cores of hosts that are up.",
                statspage_real(s, "utilisation"));
    prom_metric(p, "reservations", "gauge", "Administrative and site reservations held.",
                (double)json_array_size(json_object_get(st, "reservations")));
    prom_metric(p, "replies_dropped_total", "counter",
                "Replies dropped because a peer was over limits.peer_queue since start.",
                L->daemon ? (double)daemon_dropped(L->daemon) : 0);
    prom_metric(p, "held_requests", "gauge", "Requests held open (JOB_WAIT long polls) now.",
                L->daemon ? daemon_held_count(L->daemon) : 0);
    json_t *cls = json_object_get(st, "clusters");
    prom_family(p, "cluster_up", "gauge", "1 if the cluster manager answers and is in sync.");
    json_array_foreach(cls, i, v)
    {
        prom_sample(p, "cluster_up", "cluster", statspage_str(v, "name"),
                    !strcmp(statspage_str(v, "state"), "up"));
    }
    prom_family(p, "cluster_cores_total", "gauge", "Cores of the hosts of each cluster.");
    json_array_foreach(cls, i, v)
    {
        prom_sample(p, "cluster_cores_total", "cluster", statspage_str(v, "name"),
                    (double)statspage_num(v, "cores"));
    }
    prom_family(p, "cluster_cores_free", "gauge",
                "Cores of each cluster's hosts that are up and run nothing of this role.");
    json_array_foreach(cls, i, v)
    {
        prom_sample(p, "cluster_cores_free", "cluster", statspage_str(v, "name"),
                    (double)statspage_num(v, "cores_free"));
    }
}

int livestats_open(struct live *L, char *err, size_t errlen)
{
    static const struct statspage_role r0 = {
        "batch", "the batch role", "gridnode showq -e BATCH_EP, its log", build, html, metrics,
        NULL};
    struct statspage_role r = r0;
    r.arg = L;
    L->first_id = L->next_id;
    L->stats = statspage_new(&r, L->cfg.live.state_dir, (long)L->cfg.live.stats_interval_s,
                             L->cfg.live.stats_http, err, errlen);
    if (!L->stats) {
        fprintf(stderr, "gridnode batch: %s\n", err);
        log_warnx("%s", err);
        return -1;
    }
    return 0;
}

void livestats_close(struct live *L)
{
    statspage_free(&L->stats);
}

/*
 * metastats.c - the metascheduler's statistics (docs/meta.md "Statistics"): the
 * content of stats.json, of the page (the spool's jobs by state, each site with its
 * state, last answer, queue and free cores, placements per site) and of /metrics
 * (gridnode_meta_...). The files, the timer, the HTTP server and the page's frame are
 * shared by every role (daemon/statspage.h).
 *
 * Decisions:
 * - Placement latency is the time from a job's submission to the spool until a site
 *   accepted it (however many rounds that took), the figure a user waits before the job
 *   is "somewhere"; a job placed again (its site went down) or moved is counted in the
 *   placements but not timed again. It is a Prometheus histogram, so a monitoring
 *   system can take any quantile over any window.
 * - A site is "up" while it answers, "down" once a request went unanswered, "unknown"
 *   until its first answer (the page and gridnode_meta_site_up say 0 for both).
 * - The spool keeps its jobs for good, so stats.json lists the latest
 *   METASTATS_FINISHED finished jobs and at most METASTATS_UNFINISHED unfinished ones,
 *   those at a site (placing, placed, running) first (`gridnode jobs -e META_EP` has
 *   them all); the summary counts every job. Listing every unfinished job (issue 28)
 *   made a rebuild of 10^5 spooled jobs a jansson tree of about 2 KB a job: the
 *   spool's memory tripled (2.8 KB a spooled job instead of 0.95), as the batch role's
 *   did before the same bound.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/statspage.h"
#include "roles/meta/live/meta_int.h"

#define METASTATS_FINISHED 1000
#define METASTATS_UNFINISHED 5000

/* Upper bounds (seconds) of the latency buckets; the last one is +Inf. */
static const double lat_le[META_LAT_BUCKETS - 1] = META_LAT_LE;

static json_t *job_row(struct meta *M, const struct mjob *j)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
                     "job", (json_int_t)j->id, "name", j->name, "user", j->user, "state",
                     meta_state_name(j->state), "site",
                     j->site >= 0 && j->site < M->nsites ? M->site[j->site].name : "", "site_job",
                     (json_int_t)j->sjob, "procs", (json_int_t)j->rq.procs, "ntasks",
                     (json_int_t)(j->ntasks ? j->ntasks : 1), "attempt", (json_int_t)j->attempt,
                     "submitted", (json_int_t)j->submitted, "started", (json_int_t)j->started,
                     "finished", (json_int_t)j->finished, "est_start", (json_int_t)j->est_start,
                     "reason", meta_job_reason(j));
}

static void build(void *arg, json_t *root, int64_t now)
{
    struct meta *M = arg;
    json_t *jobs = json_array(), *sites = json_array(), *bystate = json_object();
    uint64_t n[MJ_CANCELLED + 1] = {0};
    uint32_t nfin = 0, cut = 0;
    for (uint32_t i = M->njobs; i > 0; i--) /* ended jobs before `cut` are left out */
        if (MJ_ENDED(M->jobs[i - 1]->state) && ++nfin == METASTATS_FINISHED) {
            cut = i - 1;
            break;
        }
    for (uint32_t i = 0; i < M->njobs; i++)
        if (M->jobs[i]->state <= MJ_CANCELLED)
            n[M->jobs[i]->state]++;
    uint64_t at_site = n[MJ_PLACING] + n[MJ_PLACED] + n[MJ_RUNNING];
    uint32_t act = at_site < METASTATS_UNFINISHED ? (uint32_t)at_site : METASTATS_UNFINISHED;
    uint32_t others = METASTATS_UNFINISHED - act;
    for (uint32_t i = 0; i < M->njobs; i++) {
        if (!act && !others && i < cut)
            i = cut; /* nothing more to list before the finished jobs listed */
        const struct mjob *j = M->jobs[i];
        if (MJ_ENDED(j->state)) {
            if (i < cut)
                continue;
        } else if (j->state == MJ_PLACING || j->state == MJ_PLACED || j->state == MJ_RUNNING) {
            if (!act)
                continue;
            act--;
        } else {
            if (!others)
                continue;
            others--;
        }
        json_array_append_new(jobs, job_row(M, j));
    }
    for (int k = 0; k <= MJ_CANCELLED; k++)
        json_object_set_new(bystate, meta_state_name(k), json_integer((json_int_t)n[k]));
    int64_t mono = loop_now_ms();
    for (int i = 0; i < M->nsites; i++) {
        const struct msite *s = &M->site[i];
        const char *st = !s->known ? "unknown" : s->info.up ? "up" : "down";
        json_array_append_new(
            sites,
            json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I}",
                      "name", s->name, "endpoint", s->ep, "state", st, "slurm", s->slurm != NULL,
                      "last_answer_ms", (json_int_t)s->last_answer, "down_for_s",
                      (json_int_t)(s->down_since ? (mono - s->down_since) / 1000 : 0), "queued",
                      (json_int_t)s->queued, "running", (json_int_t)s->running, "cores",
                      (json_int_t)s->info.total_procs, "cores_free", (json_int_t)s->cores_free,
                      "speed", s->info.speed, "placements", (json_int_t)s->placements, "moves",
                      (json_int_t)s->moves, "requests_pending", (json_int_t)s->nreq));
    }
    (void)now;
    json_object_set_new(root, "listen", statspage_endpoint(M->cfg.state_dir, M->cfg.listen));
    json_object_set_new(root, "policy", json_string(meta_policy_name(M->policy)));
    json_object_set_new(root, "summary",
                        json_pack("{s:o, s:I, s:I, s:I, s:I, s:f, s:f}", "jobs", bystate,
                                  "jobs_in_memory", (json_int_t)M->njobs, "placements",
                                  (json_int_t)M->placements, "moves", (json_int_t)M->moves,
                                  "placing", (json_int_t)M->inflight, "placement_latency_mean_s",
                                  M->lat_n ? M->lat_sum / (double)M->lat_n : 0.0,
                                  "placement_latency_sum_s", M->lat_sum));
    json_object_set_new(root, "sites", sites);
    json_object_set_new(root, "jobs", jobs);
}

/* ---- the page ---- */

static void cell(FILE *f, json_t *v, const char *k)
{
    fprintf(f, "<td class=\"l\">");
    statspage_esc(f, statspage_str(v, k));
    fprintf(f, "</td>");
}

static long long page_now; /* time_ms of the document being drawn */

static void site_row(FILE *f, json_t *v)
{
    const char *st = statspage_str(v, "state");
    long long last = statspage_num(v, "last_answer_ms");
    fprintf(f, "<tr>");
    cell(f, v, "name");
    cell(f, v, "endpoint");
    fprintf(f, "<td class=\"l%s\">%s", strcmp(st, "up") ? " down" : "", st);
    if (statspage_num(v, "down_for_s"))
        fprintf(f, " for %lld s", statspage_num(v, "down_for_s"));
    fprintf(f, "</td><td class=\"l\">");
    if (last > 0)
        fprintf(f, "%lld s ago", page_now > last ? (page_now - last) / 1000 : 0);
    else
        fprintf(f, "never");
    fprintf(f,
            "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%.2f</td><td>%lld</td>"
            "<td>%lld</td></tr>\n",
            statspage_num(v, "queued"), statspage_num(v, "running"), statspage_num(v, "cores"),
            statspage_num(v, "cores_free"), statspage_real(v, "speed"),
            statspage_num(v, "placements"), statspage_num(v, "moves"));
}

static void job_row_html(FILE *f, json_t *v)
{
    fprintf(f, "<tr><td>%lld</td>", statspage_num(v, "job"));
    cell(f, v, "name");
    cell(f, v, "user");
    fprintf(f, "<td class=\"l\">%s</td>", statspage_str(v, "state"));
    cell(f, v, "site");
    fprintf(f, "<td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td class=\"l\">",
            statspage_num(v, "site_job"), statspage_num(v, "procs"), statspage_num(v, "ntasks"),
            statspage_num(v, "attempt"));
    fprintf(f, "<span class=\"why\" title=\"");
    statspage_esc(f, statspage_str(v, "reason"));
    fprintf(f, "\">");
    statspage_esc(f, statspage_str(v, "reason"));
    fprintf(f, "</span></td></tr>\n");
}

static bool finished(json_t *v)
{
    const char *s = statspage_str(v, "state");
    return !strcmp(s, "done") || !strcmp(s, "failed") || !strcmp(s, "killed") ||
           !strcmp(s, "cancelled");
}

static void html(FILE *f, json_t *st, void *arg)
{
    (void)arg;
    json_t *s = json_object_get(st, "summary"), *by = json_object_get(s, "jobs");
    page_now = statspage_num(st, "time_ms");
    static const char *const shown[] = {"queued", "placing", "placed",   "running",
                                        "done",   "failed",  "cancelled"};
    fprintf(f, "<div class=\"cards\">");
    for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++)
        statspage_card(f, shown[k], "%lld", statspage_num(by, shown[k]));
    statspage_card(f, "placements since start", "%lld", statspage_num(s, "placements"));
    statspage_card(f, "moves since start", "%lld", statspage_num(s, "moves"));
    statspage_card(f, "mean placement latency", "%.2f s",
                   statspage_real(s, "placement_latency_mean_s"));
    fprintf(f, "</div>\n<p>Placement policy: <b>");
    statspage_esc(f, statspage_str(st, "policy"));
    fprintf(f, "</b></p>\n");
    statspage_table(f, json_object_get(st, "sites"), "Sites",
                    "<th class=\"l\">site</th><th class=\"l\">endpoint</th>"
                    "<th class=\"l\">state</th><th class=\"l\">last answer</th><th>queued</th>"
                    "<th>running</th><th>cores</th><th>free</th><th>speed</th>"
                    "<th>placements</th><th>moves</th>",
                    site_row, "no site configured");
    statspage_job_table(f, json_object_get(st, "jobs"), "Spool",
                        "<th>job</th><th class=\"l\">name</th><th class=\"l\">user</th>"
                        "<th class=\"l\">state</th><th class=\"l\">site</th><th>site job</th>"
                        "<th>procs</th><th>tasks</th><th>attempt</th><th class=\"l\">reason</th>",
                        job_row_html, finished);
}

/* ---- /metrics ---- */

static void metrics(const struct prom *p, json_t *st, void *arg)
{
    struct meta *M = arg;
    json_t *by = json_object_get(json_object_get(st, "summary"), "jobs");
    prom_family(p, "spool_jobs", "gauge", "Jobs in the spool by state.");
    for (int k = 0; k <= MJ_CANCELLED; k++)
        prom_sample(p, "spool_jobs", "state", meta_state_name(k),
                    (double)statspage_num(by, meta_state_name(k)));
    prom_metric(p, "placing", "gauge", "Placements under way now.", (double)M->inflight);
    prom_family(p, "placements_total", "counter", "Jobs placed at each site since start.");
    for (int i = 0; i < M->nsites; i++)
        prom_sample(p, "placements_total", "site", M->site[i].name, (double)M->site[i].placements);
    prom_family(p, "moves_total", "counter",
                "Waiting jobs moved to each site (re-evaluation) since start.");
    for (int i = 0; i < M->nsites; i++)
        prom_sample(p, "moves_total", "site", M->site[i].name, (double)M->site[i].moves);
    prom_family(p, "site_up", "gauge", "1 while the site answers (0: down or never answered).");
    for (int i = 0; i < M->nsites; i++)
        prom_sample(p, "site_up", "site", M->site[i].name, M->site[i].known && M->site[i].info.up);
    prom_family(p, "site_last_answer_seconds", "gauge",
                "Unix time of the site's last answer (0: never).");
    for (int i = 0; i < M->nsites; i++)
        prom_sample(p, "site_last_answer_seconds", "site", M->site[i].name,
                    (double)M->site[i].last_answer / 1000.0);
    prom_family(p, "site_queue_jobs", "gauge",
                "Jobs waiting (queued) or running at each site, as it last said.");
    for (int i = 0; i < M->nsites; i++) {
        prom_sample2(p, "site_queue_jobs", "site", M->site[i].name, "state", "queued",
                     (double)M->site[i].queued);
        prom_sample2(p, "site_queue_jobs", "site", M->site[i].name, "state", "running",
                     (double)M->site[i].running);
    }
    prom_family(p, "site_cores_free", "gauge", "Free cores of each site, as it last said.");
    for (int i = 0; i < M->nsites; i++)
        prom_sample(p, "site_cores_free", "site", M->site[i].name, (double)M->site[i].cores_free);
    prom_family(p, "placement_latency_seconds", "histogram",
                "Time from submission to the spool until a site accepted the job (first "
                "placements).");
    uint64_t cum = 0;
    for (int b = 0; b < META_LAT_BUCKETS; b++) {
        char le[24];
        cum += M->lat_bucket[b];
        if (b < META_LAT_BUCKETS - 1)
            snprintf(le, sizeof le, "%g", lat_le[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        prom_sample(p, "placement_latency_seconds_bucket", "le", le, (double)cum);
    }
    prom_sample(p, "placement_latency_seconds_sum", NULL, NULL, M->lat_sum);
    prom_sample(p, "placement_latency_seconds_count", NULL, NULL, (double)M->lat_n);
    prom_metric(p, "replies_dropped_total", "counter",
                "Replies dropped because a peer was over limits.peer_queue since start.",
                M->daemon ? (double)daemon_dropped(M->daemon) : 0);
    prom_metric(p, "held_requests", "gauge",
                "Requests held open (JOB_WAIT long polls, relayed --output) now.",
                M->daemon ? daemon_held_count(M->daemon) : 0);
}

int metastats_open(struct meta *M, char *err, size_t errlen)
{
    static const struct statspage_role r0 = {
        "meta", "the metascheduler", "gridnode jobs -e META_EP, its log", build, html, metrics,
        NULL};
    struct statspage_role r = r0;
    r.arg = M;
    M->stats = statspage_new(&r, M->cfg.state_dir, M->cfg.stats_interval_s, M->cfg.stats_http, err,
                             errlen);
    if (!M->stats) {
        fprintf(stderr, "gridnode meta: %s\n", err);
        log_warnx("%s", err);
        return -1;
    }
    return 0;
}

void metastats_close(struct meta *M)
{
    statspage_free(&M->stats);
}

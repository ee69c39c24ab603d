/*
 * stats.c - the statistics of X5, rebuilt every stats.interval_s in the role's loop:
 * the cluster's content of stats.json and its Prometheus metrics (the page's body is
 * stats_html.c). Files, timer, HTTP server and the page's frame are shared by every
 * role (daemon/statspage.h). See docs/stats.md.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "wire/mpjson.h"
#include "daemon/statspage.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"

/* The jobs the page lists (issue 28: a page of every job in memory cost 156 MB and
 * most of a core at 10^6 pending jobs): the unfinished ones up to STATS_UNFINISHED,
 * oldest first, and the latest STATS_FINISHED finished ones; the counts by state are
 * whole (the metrics, "jobs_in_memory"). As the grid spool's page does. */
#define STATS_UNFINISHED 5000
#define STATS_FINISHED 1000

/* Which of n jobs (ended(i): finished) are listed: calls fn for each, in order. */
static void listed(uint32_t n, bool (*ended)(const void *v, uint32_t i), const void *v,
                   void (*fn)(void *arg, uint32_t i), void *arg)
{
    uint32_t cut = 0, nfin = 0, open = STATS_UNFINISHED;
    for (uint32_t i = n; i > 0; i--) /* finished jobs before `cut` are left out */
        if (ended(v, i - 1) && ++nfin == STATS_FINISHED) {
            cut = i - 1;
            break;
        }
    for (uint32_t i = 0; i < n; i++) {
        if (ended(v, i) ? i < cut : !open || !open--)
            continue;
        fn(arg, i);
    }
}

static bool job_ended(const void *v, uint32_t i)
{
    const struct cluster *c = v;
    return c->jobs[i]->state == JS_DONE || c->jobs[i]->state == JS_CANCELLED;
}

static bool pjob_ended(const void *v, uint32_t i)
{
    const struct cluster *c = v;
    return PJ_TERMINAL(c->sd->jobs[i]->state);
}

struct pack_arg {
    struct cluster *c;
    struct wire_buf *wb;
    uint32_t n;
};

static void pack_pjob(void *arg, uint32_t i)
{
    struct pack_arg *a = arg;
    if (a->wb)
        scored_pack_job(a->c, a->c->sd->jobs[i], a->wb, false);
    a->n++;
}

/* key: the SCore-D side (clusters, queues, parallel jobs) packed, then as JSON. */
static void stats_scored(struct cluster *c, json_t *root)
{
    struct wire_buf wb;
    msgpack_unpacked up;
    size_t off = 0;
    if (!c->sd)
        return;
    wire_buf_init(&wb);
    wire_pack_array(&wb, 3);
    scored_pack_clusters(c, &wb);
    scored_pack_queues(c, &wb);
    struct pack_arg count = {c, NULL, 0}, put = {c, &wb, 0};
    listed(c->sd->njobs, pjob_ended, c, pack_pjob, &count);
    wire_pack_array(&wb, count.n);
    listed(c->sd->njobs, pjob_ended, c, pack_pjob, &put);
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, wb.sb.data, wb.sb.size, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_ARRAY && up.data.via.array.size == 3) {
        json_object_set_new(root, "clusters", mpjson(&up.data.via.array.ptr[0]));
        json_object_set_new(root, "queues", mpjson(&up.data.via.array.ptr[1]));
        json_object_set_new(root, "parallel_jobs", mpjson(&up.data.via.array.ptr[2]));
        json_object_set_new(root, "parallel_jobs_in_memory", json_integer(c->sd->njobs));
    }
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

static void task_counts(const struct cluster *c, double out[4]);

struct job_rows {
    struct cluster *c;
    json_t *jobs;
};

static void job_row(void *arg, uint32_t i)
{
    struct job_rows *a = arg;
    const struct job *j = a->c->jobs[i];
    json_array_append_new(a->jobs,
                          json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f}", "job",
                                    (json_int_t)j->id, "name", j->name, "state", job_state_shown(j),
                                    "ntasks", (json_int_t)j->ntasks, "issued",
                                    (json_int_t)j->next_new, "done", (json_int_t)j->ndone, "failed",
                                    (json_int_t)j->nfailed, "dups", (json_int_t)j->ndups,
                                    "progress", j->ntasks ? (double)j->ndone / j->ntasks : 1.0));
}

static void stats_build(void *arg, json_t *root, int64_t now)
{
    struct cluster *c = arg;
    json_t *nodes = json_array(), *jobs = json_array();
    uint32_t active = 0, exchange = 0;
    uint64_t mhz = 0, cores = 0;
    double wups = 0;
    uint32_t *procs = calloc(c->nnodes + 1, sizeof *procs); /* parallel processes per node */
    if (procs)
        cluster_procs_by_node(c, procs);
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const struct node *n = &c->nodes[i];
        uint32_t np = procs ? procs[i] : 0;
        if (n->gone)
            continue;
        bool in_exchange = n->active && now - n->last_ms <= c->cfg.hb_s * 1000;
        if (n->active) {
            active++;
            mhz += (uint64_t)n->mhz * n->cores;
            cores += n->slots ? n->slots : n->cores;
            if (n->spu > 0)
                wups += (n->slots ? n->slots : 1) / n->spu;
        }
        exchange += in_exchange;
        json_t *no = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:b, s:b, s:f, "
            "s:I, s:I, s:I, s:I, s:I}",
            "sid", n->sid, "node", n->name, "cluster", n->cluster, "client", n->client, "os", n->os,
            "ip", n->ip, "mhz", (json_int_t)n->mhz, "cores", (json_int_t)n->cores, "mem_mb",
            (json_int_t)n->mem_mb, "active", n->active, "in_exchange", in_exchange, "spu", n->spu,
            "results", (json_int_t)n->results, "running", (json_int_t)(n->inflight + np),
            "procs_running", (json_int_t)np, "last_ms", (json_int_t)n->last_ms, "portion_since_ms",
            (json_int_t)(n->inflight ? n->cur_since_ms : 0));
        json_t *tr =
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "consec_valid", (json_int_t)n->tr.consec,
                      "valid", (json_int_t)n->tr.nvalid, "invalid", (json_int_t)n->tr.ninvalid,
                      "spot_pass", (json_int_t)n->tr.spot_pass, "spot_fail",
                      (json_int_t)n->tr.spot_fail, "probation", (json_int_t)n->tr.probation);
        if (no && tr) /* result checking (validate.c) */
            json_object_update(no, tr);
        json_decref(tr);
        json_array_append_new(nodes, no);
    }
    free(procs);
    struct job_rows jr = {c, jobs};
    listed(c->njobs, job_ended, c, job_row, &jr);
    json_object_set_new(root, "jobs_in_memory", json_integer(c->njobs));
    json_object_set_new(root, "listen", statspage_endpoint(c->cfg.state_dir, c->cfg.listen));
    json_object_set_new(root, "active_nodes", json_integer(active));
    json_object_set_new(root, "nodes_in_exchange", json_integer(exchange));
    json_object_set_new(root, "power",
                        json_pack("{s:I, s:I, s:f}", "mhz_total", (json_int_t)mhz, "slots",
                                  (json_int_t)cores, "work_units_per_s", wups));
    double tn[4];
    task_counts(c, tn);
    json_object_set_new(root, "tasks_in_flight", json_integer((json_int_t)tn[1]));
    json_object_set_new(root, "tasks",
                        json_pack("{s:I, s:I, s:I, s:I}", "waiting", (json_int_t)tn[0], "running",
                                  (json_int_t)tn[1], "done", (json_int_t)tn[2], "failed",
                                  (json_int_t)tn[3]));
    json_object_set_new(root, "jobs", jobs);
    json_object_set_new(root, "nodes", nodes);
    stats_scored(c, root);
}

/* Task counts of the jobs in memory: waiting (never issued, or re-issuable), running
 * (issued, no result yet), done (valid result), failed (final failure). */
static void task_counts(const struct cluster *c, double out[4])
{
    memset(out, 0, 4 * sizeof out[0]);
    for (uint32_t i = 0; i < c->njobs; i++) {
        const struct job *j = c->jobs[i];
        out[2] += j->ndone - j->nfailed;
        out[3] += j->nfailed;
        if (j->state == JS_DONE || j->state == JS_CANCELLED)
            continue;
        uint32_t running = 0;
        for (uint32_t k = 0; k < j->next_new; k++)
            running += j->tasks[k].state == TS_ISSUED;
        out[1] += running;
        out[0] += j->ntasks - j->ndone - running;
    }
}

/* The Prometheus text exposition format (version 0.0.4), every family with HELP/TYPE. */
static void stats_metrics(const struct prom *p, json_t *st, void *arg)
{
    struct cluster *c = arg;
    static const char *js[] = {"queued", "running", "done", "failed", "cancelled"};
    static const char *ts[] = {"waiting", "running", "done", "failed"};
    double jn[5] = {0}, tn[4], pn[8] = {0};
    for (uint32_t i = 0; i < c->njobs; i++) {
        const char *s = job_state_shown(c->jobs[i]);
        for (int k = 0; k < 5; k++)
            jn[k] += !strcmp(s, js[k]);
    }
    for (uint32_t i = 0; c->sd && i < c->sd->njobs; i++)
        pn[c->sd->jobs[i]->state < 8 ? c->sd->jobs[i]->state : 0]++;
    task_counts(c, tn);
    prom_family(p, "jobs", "gauge",
                "Jobs (task bags) in memory by state (failed: done with failed tasks).");
    for (int k = 0; k < 5; k++)
        prom_sample(p, "jobs", "state", js[k], jn[k]);
    prom_family(p, "tasks", "gauge", "Tasks of the jobs in memory by state.");
    for (int k = 0; k < 4; k++)
        prom_sample(p, "tasks", "state", ts[k], tn[k]);
    prom_family(p, "parallel_jobs", "gauge", "Parallel jobs in memory by state.");
    for (int k = 0; k < 8; k++)
        prom_sample(p, "parallel_jobs", "state", pj_state_name((enum pj_state)k), pn[k]);
    json_t *q, *pw = json_object_get(st, "power");
    size_t i;
    prom_family(p, "queue_jobs", "gauge", "Unfinished parallel jobs in each priority queue.");
    json_array_foreach(json_object_get(st, "queues"), i, q)
    {
        char qn[24];
        snprintf(qn, sizeof qn, "%lld", json_integer_value(json_object_get(q, "queue")));
        prom_sample(p, "queue_jobs", "queue", qn,
                    (double)json_integer_value(json_object_get(q, "jobs")));
    }
    uint32_t total = 0;
    for (uint32_t k = 0; k < c->nnodes; k++)
        total += !c->nodes[k].gone;
    double active = (double)json_integer_value(json_object_get(st, "active_nodes"));
    prom_family(p, "nodes", "gauge",
                "Known node sessions by state (inactive: silent past k_wait_dead).");
    prom_sample(p, "nodes", "state", "active", active);
    prom_sample(p, "nodes", "state", "inactive", total - active);
    prom_metric(p, "nodes_in_exchange", "gauge",
                "Nodes that made a request within the last heartbeat period.",
                (double)json_integer_value(json_object_get(st, "nodes_in_exchange")));
    prom_metric(p, "power_mhz", "gauge", "Sum of MHz x cores of the active nodes.",
                (double)json_integer_value(json_object_get(pw, "mhz_total")));
    prom_metric(p, "slots", "gauge", "Task slots of the active nodes.",
                (double)json_integer_value(json_object_get(pw, "slots")));
    prom_metric(p, "work_units_per_second", "gauge", "Measured throughput of the active nodes.",
                json_number_value(json_object_get(pw, "work_units_per_s")));
    prom_metric(p, "reissue_heap", "gauge",
                "Entries of the re-issue heap (tasks in flight, with stale entries).", c->nheap);
    prom_metric(p, "held_requests", "gauge", "Requests held open (long polls) now.",
                c->daemon ? daemon_held_count(c->daemon) : 0);
    prom_metric(p, "tasks_issued_total", "counter",
                "Tasks handed out to nodes since the role started.", (double)c->n_issued);
    prom_metric(p, "tasks_reissued_total", "counter",
                "Hand-outs of a task that had been handed out before (re-issues) since start.",
                (double)c->n_reissued);
    prom_metric(p, "results_accepted_total", "counter",
                "Results that completed a task (first valid result) since start.",
                (double)c->n_results);
    prom_metric(
        p, "results_duplicate_total", "counter",
        "Later results of done tasks and node-side errors stored as duplicates since start.",
        (double)c->n_dups);
    prom_metric(p, "results_stale_total", "counter",
                "Results of another incarnation of the state dropped since start.",
                (double)c->stale_results);
    prom_metric(p, "replies_dropped_total", "counter",
                "Replies dropped because a peer was over limits.peer_queue since start.",
                c->daemon ? (double)daemon_dropped(c->daemon) : 0);
    prom_family(p, "node_results_total", "counter", "Valid results returned by each node session.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            prom_sample2(p, "node_results_total", "node", c->nodes[k].name, "sid", c->nodes[k].sid,
                         (unsigned long long)c->nodes[k].results);
        }
    prom_family(p, "node_tasks_running", "gauge", "Tasks each active node session holds now.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone && c->nodes[k].active) {
            prom_sample2(p, "node_tasks_running", "node", c->nodes[k].name, "sid", c->nodes[k].sid,
                         c->nodes[k].inflight);
        }
    uint32_t *procs = calloc(c->nnodes + 1, sizeof *procs);
    if (procs) { /* issue 27: a node running a parallel job is busy too */
        cluster_procs_by_node(c, procs);
        prom_family(p, "node_procs_running", "gauge",
                    "Parallel processes running on each active node session now.");
        for (uint32_t k = 0; k < c->nnodes; k++)
            if (!c->nodes[k].gone && c->nodes[k].active)
                prom_sample2(p, "node_procs_running", "node", c->nodes[k].name, "sid",
                             c->nodes[k].sid, procs[k]);
        free(procs);
    }
    /* result checking (validate.c): each node's record */
    prom_family(p, "node_consecutive_valid", "gauge",
                "Results of each node session found valid by a check in a row (node trust).");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            prom_sample2(p, "node_consecutive_valid", "node", c->nodes[k].name, "sid",
                         c->nodes[k].sid, c->nodes[k].tr.consec);
        }
    prom_family(p, "node_invalid_results_total", "counter",
                "Results of each node session found wrong by a check or a failed spot check.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            prom_sample2(p, "node_invalid_results_total", "node", c->nodes[k].name, "sid",
                         c->nodes[k].sid, c->nodes[k].tr.ninvalid + c->nodes[k].tr.spot_fail);
        }
}

/* The cluster's part of the statistics (daemon/statspage.h). */
int stats_open(struct cluster *c, char *err, size_t errlen)
{
    static const struct statspage_role r0 = {"cluster",
                                             "the cluster manager",
                                             "gridnode jobs, gridnode nodes, its log",
                                             stats_build,
                                             stats_html,
                                             stats_metrics,
                                             NULL};
    struct statspage_role r = r0;
    r.arg = c;
    c->stats = statspage_new(&r, c->cfg.state_dir, c->cfg.stats_interval_s, c->cfg.stats_http, err,
                             errlen);
    return c->stats ? 0 : -1;
}

int stats_write(struct cluster *c)
{
    return statspage_write(c->stats);
}

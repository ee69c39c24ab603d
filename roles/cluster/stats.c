/*
 * stats.c - the statistics of X5, rebuilt every stats.interval_s in the role's loop:
 * stats.json (for scripts) and stats.html (for people, stats_html.c) rewritten in the
 * state directory (each to a temporary file, then renamed, so a reader never sees half
 * a file), and, when stats.http is set, published with the Prometheus metrics to the
 * role's HTTP server (lib/httpstats.h). See docs/stats.md.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/daemon.h"
#include "lib/httpstats.h"
#include "lib/log.h"
#include "lib/loop.h"
#include "lib/mpjson.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/scored_int.h"

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
    wire_pack_array(&wb, c->sd->njobs);
    for (uint32_t i = 0; i < c->sd->njobs; i++)
        scored_pack_job(c, c->sd->jobs[i], &wb, false);
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, wb.sb.data, wb.sb.size, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_ARRAY && up.data.via.array.size == 3) {
        json_object_set_new(root, "clusters", mpjson(&up.data.via.array.ptr[0]));
        json_object_set_new(root, "queues", mpjson(&up.data.via.array.ptr[1]));
        json_object_set_new(root, "parallel_jobs", mpjson(&up.data.via.array.ptr[2]));
    }
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

static void task_counts(const struct cluster *c, double out[4]);

/* The endpoint actually bound (tcp://...:* resolved), from state_dir/endpoint. */
static json_t *bound_endpoint(const struct cluster *c)
{
    char path[CONFIG_STR_MAX + 16], ep[CONFIG_STR_MAX] = "";
    snprintf(path, sizeof path, "%s/endpoint", c->cfg.state_dir);
    FILE *f = strchr(c->cfg.listen, '*') ? fopen(path, "r") : NULL;
    if (f) {
        if (!fgets(ep, sizeof ep, f))
            ep[0] = '\0';
        fclose(f);
        ep[strcspn(ep, "\r\n")] = '\0';
    }
    return json_string(ep[0] ? ep : c->cfg.listen);
}

static json_t *stats_build(struct cluster *c, int64_t now)
{
    json_t *root = json_object(), *nodes = json_array(), *jobs = json_array();
    uint32_t active = 0, exchange = 0;
    uint64_t mhz = 0, cores = 0;
    double wups = 0;
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const struct node *n = &c->nodes[i];
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
        json_t *no = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:b, s:b, s:f, "
                             "s:I, s:I, s:I, s:I}",
                             "sid", n->sid, "node", n->name, "cluster", n->cluster, "client",
                             n->client, "os", n->os, "ip", n->ip, "mhz", (json_int_t)n->mhz,
                             "cores", (json_int_t)n->cores, "mem_mb", (json_int_t)n->mem_mb,
                             "active", n->active, "in_exchange", in_exchange, "spu", n->spu,
                             "results", (json_int_t)n->results, "running",
                             (json_int_t)n->inflight, "last_ms", (json_int_t)n->last_ms,
                             "portion_since_ms", (json_int_t)(n->inflight ? n->cur_since_ms : 0));
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
    for (uint32_t i = 0; i < c->njobs; i++) {
        const struct job *j = c->jobs[i];
        json_array_append_new(
            jobs,
            json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f}", "job", (json_int_t)j->id,
                      "name", j->name, "state", job_state_shown(j), "ntasks", (json_int_t)j->ntasks,
                      "issued", (json_int_t)j->next_new, "done", (json_int_t)j->ndone, "failed",
                      (json_int_t)j->nfailed, "dups", (json_int_t)j->ndups, "progress",
                      j->ntasks ? (double)j->ndone / j->ntasks : 1.0));
    }
    json_object_set_new(root, "time_ms", json_integer(now));
    json_object_set_new(root, "interval_s", json_integer(c->cfg.stats_interval_s));
    json_object_set_new(root, "listen", bound_endpoint(c));
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
    return root;
}

/* A label value of the exposition format: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++)
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP gridnode_cluster_%s %s\n# TYPE gridnode_cluster_%s %s\n", name, help, name,
            type);
}

static void sample(FILE *f, const char *name, const char *lname, const char *lval, double v)
{
    fprintf(f, "gridnode_cluster_%s", name);
    if (lname) {
        fprintf(f, "{%s=\"", lname);
        label(f, lval);
        fputs("\"}", f);
    }
    fprintf(f, " %.17g\n", v);
}

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    family(f, name, type, help);
    sample(f, name, NULL, NULL, v);
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
static void stats_metrics(FILE *f, struct cluster *c, json_t *st)
{
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
    metric(f, "stats_generated_seconds", "gauge", "Unix time these statistics were built.",
           (double)json_integer_value(json_object_get(st, "time_ms")) / 1000.0);
    family(f, "jobs", "gauge",
           "Jobs (task bags) in memory by state (failed: done with failed tasks).");
    for (int k = 0; k < 5; k++)
        sample(f, "jobs", "state", js[k], jn[k]);
    family(f, "tasks", "gauge", "Tasks of the jobs in memory by state.");
    for (int k = 0; k < 4; k++)
        sample(f, "tasks", "state", ts[k], tn[k]);
    family(f, "parallel_jobs", "gauge", "Parallel jobs in memory by state.");
    for (int k = 0; k < 8; k++)
        sample(f, "parallel_jobs", "state", pj_state_name((enum pj_state)k), pn[k]);
    json_t *q, *p = json_object_get(st, "power");
    size_t i;
    family(f, "queue_jobs", "gauge", "Unfinished parallel jobs in each priority queue.");
    json_array_foreach(json_object_get(st, "queues"), i, q)
    {
        char qn[24];
        snprintf(qn, sizeof qn, "%lld", json_integer_value(json_object_get(q, "queue")));
        sample(f, "queue_jobs", "queue", qn,
               (double)json_integer_value(json_object_get(q, "jobs")));
    }
    uint32_t total = 0;
    for (uint32_t k = 0; k < c->nnodes; k++)
        total += !c->nodes[k].gone;
    double active = (double)json_integer_value(json_object_get(st, "active_nodes"));
    family(f, "nodes", "gauge",
           "Known node sessions by state (inactive: silent past k_wait_dead).");
    sample(f, "nodes", "state", "active", active);
    sample(f, "nodes", "state", "inactive", total - active);
    metric(f, "nodes_in_exchange", "gauge",
           "Nodes that made a request within the last heartbeat period.",
           (double)json_integer_value(json_object_get(st, "nodes_in_exchange")));
    metric(f, "power_mhz", "gauge", "Sum of MHz x cores of the active nodes.",
           (double)json_integer_value(json_object_get(p, "mhz_total")));
    metric(f, "slots", "gauge", "Task slots of the active nodes.",
           (double)json_integer_value(json_object_get(p, "slots")));
    metric(f, "work_units_per_second", "gauge", "Measured throughput of the active nodes.",
           json_number_value(json_object_get(p, "work_units_per_s")));
    metric(f, "reissue_heap", "gauge",
           "Entries of the re-issue heap (tasks in flight, with stale entries).", c->nheap);
    metric(f, "held_requests", "gauge", "Requests held open (long polls) now.",
           c->daemon ? daemon_held_count(c->daemon) : 0);
    metric(f, "tasks_issued_total", "counter", "Tasks handed out to nodes since the role started.",
           (double)c->n_issued);
    metric(f, "tasks_reissued_total", "counter",
           "Hand-outs of a task that had been handed out before (re-issues) since start.",
           (double)c->n_reissued);
    metric(f, "results_accepted_total", "counter",
           "Results that completed a task (first valid result) since start.", (double)c->n_results);
    metric(f, "results_duplicate_total", "counter",
           "Later results of done tasks and node-side errors stored as duplicates since start.",
           (double)c->n_dups);
    metric(f, "results_stale_total", "counter",
           "Results of another incarnation of the state dropped since start.",
           (double)c->stale_results);
    metric(f, "replies_dropped_total", "counter",
           "Replies dropped because a peer was over limits.peer_queue since start.",
           c->daemon ? (double)daemon_dropped(c->daemon) : 0);
    family(f, "node_results_total", "counter", "Valid results returned by each node session.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            fprintf(f, "gridnode_cluster_node_results_total{node=\"");
            label(f, c->nodes[k].name);
            fprintf(f, "\",sid=\"%s\"} %llu\n", c->nodes[k].sid,
                    (unsigned long long)c->nodes[k].results);
        }
    family(f, "node_tasks_running", "gauge", "Tasks each active node session holds now.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone && c->nodes[k].active) {
            fprintf(f, "gridnode_cluster_node_tasks_running{node=\"");
            label(f, c->nodes[k].name);
            fprintf(f, "\",sid=\"%s\"} %u\n", c->nodes[k].sid, c->nodes[k].inflight);
        }
    /* result checking (validate.c): each node's record */
    family(f, "node_consecutive_valid", "gauge",
           "Results of each node session found valid by a check in a row (node trust).");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            fprintf(f, "gridnode_cluster_node_consecutive_valid{node=\"");
            label(f, c->nodes[k].name);
            fprintf(f, "\",sid=\"%s\"} %u\n", c->nodes[k].sid, c->nodes[k].tr.consec);
        }
    family(f, "node_invalid_results_total", "counter",
           "Results of each node session found wrong by a check or a failed spot check.");
    for (uint32_t k = 0; k < c->nnodes; k++)
        if (!c->nodes[k].gone) {
            fprintf(f, "gridnode_cluster_node_invalid_results_total{node=\"");
            label(f, c->nodes[k].name);
            fprintf(f, "\",sid=\"%s\"} %u\n", c->nodes[k].sid,
                    c->nodes[k].tr.ninvalid + c->nodes[k].tr.spot_fail);
        }
}

static void json_writer(FILE *f, json_t *st)
{
    json_dumpf(st, f, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    fputc('\n', f);
}

/* One document into a malloc'ed buffer (*buf, *len); 0 or -1. */
static int render(char **buf, size_t *len, void (*writer)(FILE *, json_t *), json_t *st,
                  struct cluster *c)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        return -1;
    if (writer)
        writer(f, st);
    else
        stats_metrics(f, c, st);
    return fclose(f) == 0 ? 0 : -1;
}

/* Writes buf to dir/name atomically (temporary file, then rename); 0 or -1. */
static int write_atomic(const char *dir, const char *name, const char *buf, size_t len)
{
    char tmp[CONFIG_STR_MAX + 64], path[CONFIG_STR_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    size_t n = fwrite(buf, 1, len, f);
    if (fclose(f) != 0 || n != len || rename(tmp, path) < 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

int stats_write(struct cluster *c)
{
    json_t *st = stats_build(c, wall_now_ms());
    char *doc[HTTPSTATS_NDOCS] = {NULL};
    size_t len[HTTPSTATS_NDOCS] = {0};
    int rc = -1;
    if (!st)
        return -1;
    if (render(&doc[HTTPSTATS_JSON], &len[HTTPSTATS_JSON], json_writer, st, c) < 0 ||
        render(&doc[HTTPSTATS_HTML], &len[HTTPSTATS_HTML], stats_html, st, c) < 0 ||
        (c->http && render(&doc[HTTPSTATS_METRICS], &len[HTTPSTATS_METRICS], NULL, st, c) < 0))
        goto out;
    for (int d = 0; c->http && d < HTTPSTATS_NDOCS; d++)
        if (httpstats_publish(c->http, (enum httpstats_doc)d, doc[d], len[d]) < 0)
            goto out;
    if (write_atomic(c->cfg.state_dir, "stats.json", doc[HTTPSTATS_JSON], len[HTTPSTATS_JSON]) <
            0 ||
        write_atomic(c->cfg.state_dir, "stats.html", doc[HTTPSTATS_HTML], len[HTTPSTATS_HTML]) < 0)
        goto out;
    rc = 0;
out:
    for (int d = 0; d < HTTPSTATS_NDOCS; d++)
        free(doc[d]);
    json_decref(st);
    return rc;
}

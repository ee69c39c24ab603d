/*
 * stats.c - the statistics files of X5, rewritten periodically in the state directory
 * for a web server: stats.json (for scripts) and stats.html (for people). Both are
 * written to a temporary file and renamed, so a reader never sees half a file.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

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
    json_object_set_new(root, "active_nodes", json_integer(active));
    json_object_set_new(root, "nodes_in_exchange", json_integer(exchange));
    json_object_set_new(root, "power",
                        json_pack("{s:I, s:I, s:f}", "mhz_total", (json_int_t)mhz, "slots",
                                  (json_int_t)cores, "work_units_per_s", wups));
    json_object_set_new(root, "tasks_in_flight", json_integer(c->nheap));
    json_object_set_new(root, "jobs", jobs);
    json_object_set_new(root, "nodes", nodes);
    stats_scored(c, root);
    return root;
}

static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

static void stats_html(FILE *f, json_t *st)
{
    json_t *p = json_object_get(st, "power");
    fprintf(f, "<!doctype html><html><head><meta charset=\"utf-8\">"
               "<meta http-equiv=\"refresh\" content=\"10\"><title>gridnode cluster</title>"
               "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}"
               "th{background:#ddd}</style></head><body><h1>gridnode cluster</h1>\n");
    fprintf(f, "<p>Active nodes: <b>%lld</b>, in exchange: <b>%lld</b>, total power: <b>%lld</b> "
               "MHz over <b>%lld</b> slots, <b>%.3f</b> work units/s measured</p>\n",
            json_integer_value(json_object_get(st, "active_nodes")),
            json_integer_value(json_object_get(st, "nodes_in_exchange")),
            json_integer_value(json_object_get(p, "mhz_total")),
            json_integer_value(json_object_get(p, "slots")),
            json_real_value(json_object_get(p, "work_units_per_s")));
    fprintf(f, "<h2>Jobs</h2><table><tr><th>job</th><th>name</th><th>state</th><th>tasks</th>"
               "<th>done</th><th>failed</th><th>progress</th></tr>\n");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(st, "jobs"), i, v)
    {
        fprintf(f, "<tr><td>%lld</td><td>", json_integer_value(json_object_get(v, "job")));
        html_escape(f, json_string_value(json_object_get(v, "name")));
        fprintf(f, "</td><td>%s</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%.1f%%</td></tr>\n",
                json_string_value(json_object_get(v, "state")),
                json_integer_value(json_object_get(v, "ntasks")),
                json_integer_value(json_object_get(v, "done")),
                json_integer_value(json_object_get(v, "failed")),
                100 * json_real_value(json_object_get(v, "progress")));
    }
    fprintf(f, "</table><h2>Nodes</h2><table><tr><th>node</th><th>cluster</th><th>client</th>"
               "<th>ip</th><th>os</th><th>MHz</th><th>cores</th><th>active</th><th>s/unit</th>"
               "<th>results</th><th>running</th><th>valid in a row</th><th>wrong %%</th>"
               "<th>spot checks passed/failed</th></tr>\n");
    json_array_foreach(json_object_get(st, "nodes"), i, v)
    {
        const char *keys[] = {"node", "cluster", "client", "ip", "os"};
        fprintf(f, "<tr>");
        for (int k = 0; k < 5; k++) {
            fprintf(f, "<td>");
            html_escape(f, json_string_value(json_object_get(v, keys[k])));
            fprintf(f, "</td>");
        }
        fprintf(f, "<td>%lld</td><td>%lld</td><td>%s</td><td>%.3f</td><td>%lld</td><td>%lld</td>",
                json_integer_value(json_object_get(v, "mhz")),
                json_integer_value(json_object_get(v, "cores")),
                json_is_true(json_object_get(v, "active")) ? "yes" : "no",
                json_real_value(json_object_get(v, "spu")),
                json_integer_value(json_object_get(v, "results")),
                json_integer_value(json_object_get(v, "running")));
        json_int_t nv = json_integer_value(json_object_get(v, "valid")),
                   ni = json_integer_value(json_object_get(v, "invalid"));
        fprintf(f, "<td>%lld</td><td>%.1f</td><td>%lld/%lld%s</td></tr>\n",
                json_integer_value(json_object_get(v, "consec_valid")),
                nv + ni ? 100.0 * (double)ni / (double)(nv + ni) : 0.0,
                json_integer_value(json_object_get(v, "spot_pass")),
                json_integer_value(json_object_get(v, "spot_fail")),
                json_integer_value(json_object_get(v, "probation")) ? " (probation)" : "");
    }
    fprintf(f, "</table><h2>Clusters (parallel jobs)</h2><table><tr><th>cluster</th>"
               "<th>speed</th><th>cores</th><th>load</th><th>jobs</th><th>mem MiB held/limit"
               "</th></tr>\n");
    json_array_foreach(json_object_get(st, "clusters"), i, v) {
        fprintf(f, "<tr><td>");
        html_escape(f, json_string_value(json_object_get(v, "name")));
        fprintf(f, "</td><td>%.2f</td><td>%lld</td><td>%.2f</td><td>%lld</td><td>%lld/%lld</td>"
                   "</tr>\n", json_number_value(json_object_get(v, "speed")),
                json_integer_value(json_object_get(v, "cores")),
                json_number_value(json_object_get(v, "load")),
                json_integer_value(json_object_get(v, "jobs")),
                json_integer_value(json_object_get(v, "held_mem")),
                json_integer_value(json_object_get(v, "mem_mb")));
    }
    fprintf(f, "</table><h2>Queues</h2><table><tr><th>queue</th><th>state</th><th>mode</th>"
               "<th>jobs</th></tr>\n");
    json_array_foreach(json_object_get(st, "queues"), i, v)
        fprintf(f, "<tr><td>%lld</td><td>%s</td><td>%s</td><td>%lld</td></tr>\n",
                json_integer_value(json_object_get(v, "queue")),
                json_string_value(json_object_get(v, "state")),
                json_string_value(json_object_get(v, "mode")),
                json_integer_value(json_object_get(v, "jobs")));
    fprintf(f, "</table></body></html>\n");
}

/* Writes path atomically with writer(f, st); 0 or -1. */
static int write_atomic(const char *dir, const char *name, json_t *st,
                        void (*writer)(FILE *, json_t *))
{
    char tmp[CONFIG_STR_MAX + 64], path[CONFIG_STR_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    writer(f, st);
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

static void json_writer(FILE *f, json_t *st)
{
    json_dumpf(st, f, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    fputc('\n', f);
}

int stats_write(struct cluster *c)
{
    json_t *st = stats_build(c, wall_now_ms());
    if (!st)
        return -1;
    int rc = write_atomic(c->cfg.state_dir, "stats.json", st, json_writer);
    if (rc == 0)
        rc = write_atomic(c->cfg.state_dir, "stats.html", st, stats_html);
    json_decref(st);
    return rc;
}

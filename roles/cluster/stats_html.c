/*
 * stats_html.c - the body of the cluster's statistics page (stats.html, and "/" of
 * stats.http) drawn from the stats.json document (stats.c); the frame (generation
 * time, STALE mark, refresh, footer) is shared by every role (daemon/statspage.c).
 *
 * Jobs and parallel jobs that are still queued or running are listed in full;
 * finished ones are collapsed into a <details> section showing the latest
 * STATSPAGE_FINISHED of them (stats.json has them all), so 10,000 finished jobs do not
 * make a 10,000-row page (docs/stats.md).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "daemon/statspage.h"
#include "roles/cluster/cluster.h"

static bool finished_state(const char *s)
{
    static const char *fin[] = {"done", "failed", "cancelled", "killed"};
    for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++)
        if (!strcmp(s, fin[i]))
            return true;
    return false;
}

static void card(FILE *f, long long v, const char *what)
{
    fprintf(f, "<div class=\"card\"><b>%lld</b><span>%s</span></div>", v, what);
}

static void cards(FILE *f, json_t *st)
{
    json_t *p = json_object_get(st, "power");
    fprintf(f, "<div class=\"cards\">");
    card(f, statspage_num(st, "active_nodes"), "active nodes");
    card(f, statspage_num(st, "nodes_in_exchange"), "nodes in exchange");
    card(f, statspage_num(st, "tasks_in_flight"), "tasks in flight");
    card(f, statspage_num(p, "slots"), "slots");
    card(f, statspage_num(p, "mhz_total"), "MHz total");
    fprintf(f, "<div class=\"card\"><b>%.3f</b><span>work units/s</span></div></div>\n",
            json_number_value(json_object_get(p, "work_units_per_s")));
}

static void job_row(FILE *f, json_t *v)
{
    double prog = json_number_value(json_object_get(v, "progress"));
    fprintf(f, "<tr><td>%lld</td><td class=\"l\">", statspage_num(v, "job"));
    statspage_esc(f, statspage_str(v, "name"));
    fprintf(f,
            "</td><td class=\"l\">%s</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td>"
            "<td class=\"l\"><span class=\"bar\"><i style=\"width:%.0f%%\"></i></span>%.1f%%"
            "</td></tr>\n",
            statspage_str(v, "state"), statspage_num(v, "ntasks"), statspage_num(v, "issued"),
            statspage_num(v, "done"), statspage_num(v, "failed"), 100 * prog, 100 * prog);
}

static void pjob_row(FILE *f, json_t *v)
{
    fprintf(f, "<tr><td>%lld</td><td class=\"l\">", statspage_num(v, "job"));
    statspage_esc(f, statspage_str(v, "name"));
    fprintf(f, "</td><td class=\"l\">");
    statspage_esc(f, statspage_str(v, "user"));
    fprintf(f, "</td><td>%lld</td><td class=\"l\">%s</td><td>%lld</td><td class=\"l\">",
            statspage_num(v, "queue"), statspage_str(v, "state"), statspage_num(v, "procs"));
    statspage_esc(f, statspage_str(v, "cluster"));
    fprintf(f, "</td><td>%.1f</td><td>%.1f</td><td class=\"l\">",
            json_number_value(json_object_get(v, "run_s")),
            json_number_value(json_object_get(v, "cpu_s")));
    json_t *hosts = json_object_get(v, "hosts");
    statspage_list(f, hosts, 8);
    if (!json_array_size(hosts)) {
        fprintf(f, "<span class=\"why\" title=\"");
        statspage_esc(f, statspage_str(v, "reason"));
        fprintf(f, "\">");
        statspage_esc(f, statspage_str(v, "reason"));
        fprintf(f, "</span>");
    }
    fprintf(f, "</td></tr>\n");
}

static bool finished_row(json_t *v)
{
    return finished_state(statspage_str(v, "state"));
}

static void nodes(FILE *f, json_t *st)
{
    json_t *arr = json_object_get(st, "nodes"), *v;
    size_t i;
    fprintf(f, "<h2>Nodes: %zu</h2>\n", json_array_size(arr));
    if (!json_array_size(arr)) {
        fprintf(f, "<p class=\"none\">no node has connected yet</p>\n");
        return;
    }
    fprintf(f, "<table><tr><th class=\"l\">node</th><th class=\"l\">cluster</th>"
               "<th class=\"l\">client</th><th class=\"l\">ip</th><th class=\"l\">os</th>"
               "<th>MHz</th><th>cores</th><th class=\"l\">active</th><th>s/unit</th>"
               "<th>results</th><th>running</th><th>valid in a row</th><th>wrong %%</th>"
               "<th>spot checks passed/failed</th></tr>\n");
    json_array_foreach(arr, i, v)
    {
        const char *keys[] = {"node", "cluster", "client", "ip", "os"};
        fprintf(f, "<tr>");
        for (int k = 0; k < 5; k++) {
            fprintf(f, "<td class=\"l\">");
            statspage_esc(f, statspage_str(v, keys[k]));
            fprintf(f, "</td>");
        }
        fprintf(f,
                "<td>%lld</td><td>%lld</td><td class=\"l\">%s</td><td>%.3f</td><td>%lld</td>"
                "<td>%lld</td>",
                statspage_num(v, "mhz"), statspage_num(v, "cores"),
                json_is_true(json_object_get(v, "in_exchange")) ? "yes, in exchange"
                : json_is_true(json_object_get(v, "active"))    ? "yes"
                                                                : "no",
                json_number_value(json_object_get(v, "spu")), statspage_num(v, "results"),
                statspage_num(v, "running"));
        /* result checking (validate.c, docs/validation.md "Node trust") */
        long long nv = statspage_num(v, "valid"), ni = statspage_num(v, "invalid");
        fprintf(f, "<td>%lld</td><td>%.1f</td><td>%lld/%lld%s</td></tr>\n",
                statspage_num(v, "consec_valid"),
                nv + ni ? 100.0 * (double)ni / (double)(nv + ni) : 0.0,
                statspage_num(v, "spot_pass"), statspage_num(v, "spot_fail"),
                statspage_num(v, "probation") ? " (probation)" : "");
    }
    fprintf(f, "</table>\n");
}

static void clusters_queues(FILE *f, json_t *st)
{
    json_t *v;
    size_t i;
    fprintf(f, "<h2>Clusters of hosts (parallel jobs)</h2>\n");
    if (!json_array_size(json_object_get(st, "clusters")))
        fprintf(f, "<p class=\"none\">none</p>\n");
    else
        fprintf(f, "<table><tr><th class=\"l\">cluster</th><th>hosts</th><th>speed</th>"
                   "<th>cores</th><th>load</th><th>jobs</th><th>mem MiB held/limit</th></tr>\n");
    json_array_foreach(json_object_get(st, "clusters"), i, v)
    {
        fprintf(f, "<tr><td class=\"l\">");
        statspage_esc(f, statspage_str(v, "name"));
        fprintf(f,
                "</td><td>%zu</td><td>%.2f</td><td>%lld</td><td>%.2f</td><td>%lld</td>"
                "<td>%lld/%lld</td></tr>\n",
                json_array_size(json_object_get(v, "hosts")),
                json_number_value(json_object_get(v, "speed")), statspage_num(v, "cores"),
                json_number_value(json_object_get(v, "load")), statspage_num(v, "jobs"),
                statspage_num(v, "held_mem"), statspage_num(v, "mem_mb"));
    }
    if (json_array_size(json_object_get(st, "clusters")))
        fprintf(f, "</table>\n");
    fprintf(f, "<h2>Queues</h2><table><tr><th>queue</th><th class=\"l\">state</th>"
               "<th class=\"l\">mode</th><th>jobs</th></tr>\n");
    json_array_foreach(json_object_get(st, "queues"), i, v)
        fprintf(f,
                "<tr><td>%lld</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%lld</td>"
                "</tr>\n",
                statspage_num(v, "queue"), statspage_str(v, "state"), statspage_str(v, "mode"),
                statspage_num(v, "jobs"));
    fprintf(f, "</table>\n");
}

void stats_html(FILE *f, json_t *st, void *arg)
{
    (void)arg;
    cards(f, st);
    statspage_job_table(
        f, json_object_get(st, "jobs"), "Jobs (task bags)",
        "<th>job</th><th class=\"l\">name</th><th class=\"l\">state</th><th>tasks</th>"
        "<th>issued</th><th>done</th><th>failed</th><th class=\"l\">progress</th>",
        job_row, finished_row);
    statspage_job_table(
        f, json_object_get(st, "parallel_jobs"), "Parallel jobs",
        "<th>job</th><th class=\"l\">name</th><th class=\"l\">user</th><th>queue</th>"
        "<th class=\"l\">state</th><th>procs</th><th class=\"l\">cluster</th>"
        "<th>run s</th><th>CPU s</th><th class=\"l\">hosts / reason</th>",
        pjob_row, finished_row);
    nodes(f, st);
    clusters_queues(f, st);
}

/*
 * stats_html.c - the statistics page (stats.html, and "/" of stats.http) drawn from
 * the stats.json document (stats.c).
 *
 * Decisions (docs/stats.md):
 * - The page says when it was generated and how often it is regenerated. A small
 *   script compares the generation time with the browser's clock and, once the page is
 *   older than 2 x stats.interval_s + 5 s (the role stopped, hung, or the file copy is
 *   old), shows a red STALE banner; served over HTTP, a failed refresh shows it at
 *   once ("cannot reach the cluster"). Without scripts, a meta refresh reloads it.
 * - It refreshes itself every stats.interval_s (the served copy only after checking
 *   that the server answers, so the last good numbers stay on screen when it does not).
 * - Jobs and parallel jobs that are still queued or running are listed in full;
 *   finished ones are collapsed into a <details> section showing the latest
 *   STATS_HTML_FINISHED of them (stats.json has them all), so 10,000 finished jobs do
 *   not make a 10,000-row page.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "roles/cluster/cluster.h"

#define STATS_HTML_FINISHED 100 /* finished jobs shown (the latest ones) */

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_number_value(json_object_get(o, k));
}

static bool finished_state(const char *s)
{
    static const char *fin[] = {"done", "failed", "cancelled", "killed"};
    for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++)
        if (!strcmp(s, fin[i]))
            return true;
    return false;
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2329;background:#f4f6f8}"
    "header{background:#24303c;color:#fff;padding:12px 24px;display:flex;align-items:baseline;"
    "gap:16px;flex-wrap:wrap}header h1{font-size:20px;margin:0}header .gen{color:#c9d3dc}"
    "main{padding:8px 24px 24px}h2{font-size:16px;margin:20px 0 6px}"
    ".stale{background:#b3261e;color:#fff;padding:10px 24px;font-weight:600}"
    ".live{background:#2e7d32;color:#fff;border-radius:10px;padding:1px 8px;font-size:12px}"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-top:12px}"
    ".card{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:8px 14px;"
    "min-width:120px}.card b{display:block;font-size:22px}.card span{color:#57606a}"
    "table{border-collapse:collapse;background:#fff;border:1px solid #d8dee4}"
    "td,th{padding:3px 10px;text-align:right;border-bottom:1px solid #eaeef2;"
    "white-space:nowrap}th{background:#e9edf1;position:sticky;top:0}"
    "td.l,th.l{text-align:left}tr:hover td{background:#f6f8fa}"
    ".why{display:inline-block;max-width:480px;overflow:hidden;text-overflow:ellipsis;"
    "vertical-align:bottom}.none{color:#57606a;font-style:italic}details{margin-top:8px}"
    "summary{cursor:pointer;color:#0b5cad}footer{color:#57606a;padding:0 24px 24px}"
    ".bar{display:inline-block;width:80px;height:8px;background:#e1e4e8;border-radius:4px;"
    "vertical-align:middle;margin-right:6px}.bar i{display:block;height:8px;"
    "background:#2e7d32;border-radius:4px}";

/* The staleness check and the refresh (see the file comment). */
static const char script[] =
    "(function(){var b=document.body,g=+b.dataset.generated,iv=+b.dataset.interval*1000,"
    "lim=2*iv+5000,st=document.getElementById('stale'),ago=document.getElementById('ago'),"
    "lost=0;"
    "function fmt(ms){var s=Math.round(ms/1000);return s<120?s+' s':s<7200?"
    "Math.round(s/60)+' min':Math.round(s/3600)+' h'}"
    "function check(){var age=Date.now()-g;ago.textContent='('+fmt(Math.max(age,0))+' ago)';"
    "if(lost||age>lim){st.hidden=false;document.getElementById('live').hidden=true;"
    "document.title='STALE - '+document.title.replace(/^STALE - /,'');"
    "st.textContent='STALE: these statistics are '+fmt(age)+' old (generated '+"
    "new Date(g).toLocaleString()+'; the cluster regenerates them every '+iv/1000+' s)'+"
    "(lost?' and the cluster does not answer at '+location.host:'')+"
    "'. The cluster manager is stopped or hung: check it (gridnode jobs, its log).'}}"
    "function refresh(){if(location.protocol.indexOf('http')!==0){location.reload();return}"
    "fetch(location.href,{cache:'no-store'}).then(function(r){if(r.ok)location.reload();"
    "else{lost=1;check()}}).catch(function(){lost=1;check()})}"
    "check();setInterval(check,1000);setInterval(refresh,iv)})();";

static void head(FILE *f, json_t *st)
{
    long long gen = num(st, "time_ms"), iv = num(st, "interval_s");
    char when[64] = "?";
    time_t t = (time_t)(gen / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fprintf(f,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\">"
            "<noscript><meta http-equiv=\"refresh\" content=\"%lld\"></noscript>"
            "<title>gridnode cluster</title><style>%s</style></head>\n"
            "<body data-generated=\"%lld\" data-interval=\"%lld\">\n"
            "<div id=\"stale\" class=\"stale\" hidden></div>\n"
            "<header><h1>gridnode cluster</h1><span class=\"live\" id=\"live\">live</span>"
            "<span class=\"gen\">generated <time id=\"gen\" datetime=\"%s\">%s</time> "
            "<span id=\"ago\"></span> &middot; regenerated every %lld s &middot; ",
            iv, css, gen, iv, when, when, iv);
    esc(f, str(st, "listen"));
    fprintf(f, "</span></header>\n<main>\n");
}

static void card(FILE *f, long long v, const char *what)
{
    fprintf(f, "<div class=\"card\"><b>%lld</b><span>%s</span></div>", v, what);
}

static void cards(FILE *f, json_t *st)
{
    json_t *p = json_object_get(st, "power");
    fprintf(f, "<div class=\"cards\">");
    card(f, num(st, "active_nodes"), "active nodes");
    card(f, num(st, "nodes_in_exchange"), "nodes in exchange");
    card(f, num(st, "tasks_in_flight"), "tasks in flight");
    card(f, num(p, "slots"), "slots");
    card(f, num(p, "mhz_total"), "MHz total");
    fprintf(f, "<div class=\"card\"><b>%.3f</b><span>work units/s</span></div></div>\n",
            json_number_value(json_object_get(p, "work_units_per_s")));
}

static void job_row(FILE *f, json_t *v)
{
    double prog = json_number_value(json_object_get(v, "progress"));
    fprintf(f, "<tr><td>%lld</td><td class=\"l\">", num(v, "job"));
    esc(f, str(v, "name"));
    fprintf(f,
            "</td><td class=\"l\">%s</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td>"
            "<td class=\"l\"><span class=\"bar\"><i style=\"width:%.0f%%\"></i></span>%.1f%%"
            "</td></tr>\n",
            str(v, "state"), num(v, "ntasks"), num(v, "issued"), num(v, "done"), num(v, "failed"),
            100 * prog, 100 * prog);
}

static void pjob_row(FILE *f, json_t *v)
{
    fprintf(f, "<tr><td>%lld</td><td class=\"l\">", num(v, "job"));
    esc(f, str(v, "name"));
    fprintf(f, "</td><td class=\"l\">");
    esc(f, str(v, "user"));
    fprintf(f, "</td><td>%lld</td><td class=\"l\">%s</td><td>%lld</td><td class=\"l\">",
            num(v, "queue"), str(v, "state"), num(v, "procs"));
    esc(f, str(v, "cluster"));
    fprintf(f, "</td><td>%.1f</td><td>%.1f</td><td class=\"l\">",
            json_number_value(json_object_get(v, "run_s")),
            json_number_value(json_object_get(v, "cpu_s")));
    size_t i;
    json_t *h, *hosts = json_object_get(v, "hosts");
    json_array_foreach(hosts, i, h)
    {
        if (i == 8) {
            fprintf(f, " +%zu more", json_array_size(hosts) - 8);
            break;
        }
        fputs(i ? " " : "", f);
        esc(f, json_string_value(h));
    }
    if (!json_array_size(hosts)) {
        fprintf(f, "<span class=\"why\" title=\"");
        esc(f, str(v, "reason"));
        fprintf(f, "\">");
        esc(f, str(v, "reason"));
        fprintf(f, "</span>");
    }
    fprintf(f, "</td></tr>\n");
}

/* Unfinished rows in full, finished ones (the latest STATS_HTML_FINISHED) collapsed. */
static void job_table(FILE *f, json_t *arr, const char *title, const char *cols,
                      void (*row)(FILE *, json_t *))
{
    size_t i, nfin = 0, nopen = 0, n = json_array_size(arr);
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (finished_state(str(v, "state")))
            nfin++;
    }
    nopen = n - nfin;
    fprintf(f, "<h2>%s: %zu queued or running, %zu finished</h2>\n", title, nopen, nfin);
    if (nopen) {
        fprintf(f, "<table><tr>%s</tr>\n", cols);
        json_array_foreach(arr, i, v)
        {
            if (!finished_state(str(v, "state")))
                row(f, v);
        }
        fprintf(f, "</table>\n");
    } else {
        fprintf(f, "<p class=\"none\">none queued or running</p>\n");
    }
    if (!nfin)
        return;
    size_t shown = nfin < STATS_HTML_FINISHED ? nfin : STATS_HTML_FINISHED, k = 0;
    fprintf(f,
            "<details><summary>%zu finished (%s%zu shown; all in <a href=\"stats.json\">"
            "stats.json</a>)</summary><table><tr>%s</tr>\n",
            nfin, shown < nfin ? "the latest " : "", shown, cols);
    for (i = n; i > 0 && k < shown; i--) { /* newest first (ids grow) */
        v = json_array_get(arr, i - 1);
        if (finished_state(str(v, "state"))) {
            row(f, v);
            k++;
        }
    }
    fprintf(f, "</table></details>\n");
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
            esc(f, str(v, keys[k]));
            fprintf(f, "</td>");
        }
        fprintf(f,
                "<td>%lld</td><td>%lld</td><td class=\"l\">%s</td><td>%.3f</td><td>%lld</td>"
                "<td>%lld</td>",
                num(v, "mhz"), num(v, "cores"),
                json_is_true(json_object_get(v, "in_exchange")) ? "yes, in exchange"
                : json_is_true(json_object_get(v, "active"))    ? "yes"
                                                                : "no",
                json_number_value(json_object_get(v, "spu")), num(v, "results"), num(v, "running"));
        /* result checking (validate.c, docs/validation.md "Node trust") */
        long long nv = num(v, "valid"), ni = num(v, "invalid");
        fprintf(f, "<td>%lld</td><td>%.1f</td><td>%lld/%lld%s</td></tr>\n", num(v, "consec_valid"),
                nv + ni ? 100.0 * (double)ni / (double)(nv + ni) : 0.0, num(v, "spot_pass"),
                num(v, "spot_fail"), num(v, "probation") ? " (probation)" : "");
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
        esc(f, str(v, "name"));
        fprintf(f,
                "</td><td>%zu</td><td>%.2f</td><td>%lld</td><td>%.2f</td><td>%lld</td>"
                "<td>%lld/%lld</td></tr>\n",
                json_array_size(json_object_get(v, "hosts")),
                json_number_value(json_object_get(v, "speed")), num(v, "cores"),
                json_number_value(json_object_get(v, "load")), num(v, "jobs"), num(v, "held_mem"),
                num(v, "mem_mb"));
    }
    if (json_array_size(json_object_get(st, "clusters")))
        fprintf(f, "</table>\n");
    fprintf(f, "<h2>Queues</h2><table><tr><th>queue</th><th class=\"l\">state</th>"
               "<th class=\"l\">mode</th><th>jobs</th></tr>\n");
    json_array_foreach(json_object_get(st, "queues"), i, v)
        fprintf(f,
                "<tr><td>%lld</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%lld</td>"
                "</tr>\n",
                num(v, "queue"), str(v, "state"), str(v, "mode"), num(v, "jobs"));
    fprintf(f, "</table>\n");
}

void stats_html(FILE *f, json_t *st)
{
    head(f, st);
    cards(f, st);
    job_table(f, json_object_get(st, "jobs"), "Jobs (task bags)",
              "<th>job</th><th class=\"l\">name</th><th class=\"l\">state</th><th>tasks</th>"
              "<th>issued</th><th>done</th><th>failed</th><th class=\"l\">progress</th>",
              job_row);
    job_table(f, json_object_get(st, "parallel_jobs"), "Parallel jobs",
              "<th>job</th><th class=\"l\">name</th><th class=\"l\">user</th><th>queue</th>"
              "<th class=\"l\">state</th><th>procs</th><th class=\"l\">cluster</th>"
              "<th>run s</th><th>CPU s</th><th class=\"l\">hosts / reason</th>",
              pjob_row);
    nodes(f, st);
    clusters_queues(f, st);
    fprintf(f,
            "</main><footer>Machine-readable: <a href=\"stats.json\">stats.json</a>"
            " &middot; <a href=\"metrics\">metrics</a> (Prometheus, served over "
            "stats.http only)</footer>\n<script>%s</script>\n</body></html>\n",
            script);
}

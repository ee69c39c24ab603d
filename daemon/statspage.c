/*
 * statspage.c - the statistics of a role, the shared part (see statspage.h): the
 * periodic rebuild, the atomic files, the HTTP server's documents, the page's frame
 * and the Prometheus helpers. The roles' content is in roles/<role>/ (cluster: stats.c
 * and stats_html.c; batch: livestats.c; meta: metastats.c).
 *
 * Decisions (docs/stats.md):
 * - The page says when it was generated and how often it is regenerated. A small
 *   script compares the generation time with the browser's clock and, once the page is
 *   older than 2 x stats.interval_s + 5 s (the role stopped, hung, or the file copy is
 *   old), shows a red STALE banner; served over HTTP, a failed refresh shows it at
 *   once ("... does not answer at HOST"). Without scripts, a meta refresh reloads it.
 *   Staleness is judged in the browser because a dead role cannot mark anything.
 * - It refreshes itself every stats.interval_s (the served copy only after checking
 *   that the server answers, so the last good numbers stay on screen when it does not).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/httpstats.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/statspage.h"

struct statspage {
    struct statspage_role r;
    char dir[CONFIG_STR_MAX];
    char prefix[64];
    long interval_s;
    struct httpstats *http;
    char url[300]; /* the server's URL, written to stats.url at the first publication */
    bool url_written;
};

/* ---- Prometheus ---- */

/* A label value of the exposition format: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s)
{
    for (; s && *s; s++)
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
}

void prom_family(const struct prom *p, const char *name, const char *type, const char *help)
{
    fprintf(p->f, "# HELP %s%s %s\n# TYPE %s%s %s\n", p->prefix, name, help, p->prefix, name, type);
}

static void value(FILE *f, double v)
{
    fprintf(f, " %.17g\n", v);
}

void prom_sample(const struct prom *p, const char *name, const char *lname, const char *lval,
                 double v)
{
    fprintf(p->f, "%s%s", p->prefix, name);
    if (lname) {
        fprintf(p->f, "{%s=\"", lname);
        label(p->f, lval);
        fputs("\"}", p->f);
    }
    value(p->f, v);
}

void prom_sample2(const struct prom *p, const char *name, const char *l1, const char *v1,
                  const char *l2, const char *v2, double v)
{
    fprintf(p->f, "%s%s{%s=\"", p->prefix, name, l1);
    label(p->f, v1);
    fprintf(p->f, "\",%s=\"", l2);
    label(p->f, v2);
    fputs("\"}", p->f);
    value(p->f, v);
}

void prom_metric(const struct prom *p, const char *name, const char *type, const char *help,
                 double v)
{
    prom_family(p, name, type, help);
    prom_sample(p, name, NULL, NULL, v);
}

json_t *statspage_endpoint(const char *state_dir, const char *listen)
{
    char path[CONFIG_STR_MAX + 16], ep[CONFIG_STR_MAX] = "";
    snprintf(path, sizeof path, "%s/endpoint", state_dir);
    FILE *f = strchr(listen, '*') ? fopen(path, "r") : NULL;
    if (f) {
        if (!fgets(ep, sizeof ep, f))
            ep[0] = '\0';
        fclose(f);
        ep[strcspn(ep, "\r\n")] = '\0';
    }
    return json_string(ep[0] ? ep : listen);
}

/* ---- the page ---- */

void statspage_list(FILE *f, json_t *a, size_t max)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
    {
        if (i == max) {
            fprintf(f, " +%zu more", json_array_size(a) - max);
            break;
        }
        fputs(i ? " " : "", f);
        statspage_esc(f, json_string_value(v));
    }
}

void statspage_esc(FILE *f, const char *s)
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

const char *statspage_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

long long statspage_num(json_t *o, const char *k)
{
    return (long long)json_number_value(json_object_get(o, k));
}

double statspage_real(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

void statspage_card(FILE *f, const char *what, const char *fmt, ...)
{
    va_list ap;
    fprintf(f, "<div class=\"card\"><b>");
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fprintf(f, "</b><span>%s</span></div>", what);
}

void statspage_job_table(FILE *f, json_t *arr, const char *title, const char *cols,
                         void (*row)(FILE *, json_t *), bool (*finished)(json_t *))
{
    size_t i, nfin = 0, nopen = 0, n = json_array_size(arr);
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (finished(v))
            nfin++;
    }
    nopen = n - nfin;
    fprintf(f, "<h2>%s: %zu queued or running, %zu finished</h2>\n", title, nopen, nfin);
    if (nopen) {
        fprintf(f, "<table><tr>%s</tr>\n", cols);
        json_array_foreach(arr, i, v)
        {
            if (!finished(v))
                row(f, v);
        }
        fprintf(f, "</table>\n");
    } else {
        fprintf(f, "<p class=\"none\">none queued or running</p>\n");
    }
    statspage_finished_table(f, arr, cols, row, finished);
}

void statspage_finished_table(FILE *f, json_t *arr, const char *cols, void (*row)(FILE *, json_t *),
                              bool (*finished)(json_t *))
{
    size_t i, nfin = 0, n = json_array_size(arr);
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (finished(v))
            nfin++;
    }
    if (!nfin)
        return;
    size_t shown = nfin < STATSPAGE_FINISHED ? nfin : STATSPAGE_FINISHED, k = 0;
    fprintf(f,
            "<details><summary>%zu finished (%s%zu shown; all in <a href=\"stats.json\">"
            "stats.json</a>)</summary><table><tr>%s</tr>\n",
            nfin, shown < nfin ? "the latest " : "", shown, cols);
    for (i = n; i > 0 && k < shown; i--) { /* newest first (ids grow) */
        v = json_array_get(arr, i - 1);
        if (finished(v)) {
            row(f, v);
            k++;
        }
    }
    fprintf(f, "</table></details>\n");
}

void statspage_table(FILE *f, json_t *arr, const char *title, const char *cols,
                     void (*row)(FILE *, json_t *), const char *none)
{
    size_t i;
    json_t *v;
    fprintf(f, "<h2>%s</h2>\n", title);
    if (!json_array_size(arr)) {
        fprintf(f, "<p class=\"none\">%s</p>\n", none);
        return;
    }
    fprintf(f, "<table><tr>%s</tr>\n", cols);
    json_array_foreach(arr, i, v) row(f, v);
    fprintf(f, "</table>\n");
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
    "background:#2e7d32;border-radius:4px}.down{color:#b3261e;font-weight:600}";

/* The staleness check and the refresh (see the file comment); the role's name and what
 * to check come from the body's data attributes. */
static const char script[] =
    "(function(){var b=document.body,g=+b.dataset.generated,iv=+b.dataset.interval*1000,"
    "who=b.dataset.who,lim=2*iv+5000,st=document.getElementById('stale'),"
    "ago=document.getElementById('ago'),lost=0;"
    "function fmt(ms){var s=Math.round(ms/1000);return s<120?s+' s':s<7200?"
    "Math.round(s/60)+' min':Math.round(s/3600)+' h'}"
    "function check(){var age=Date.now()-g;ago.textContent='('+fmt(Math.max(age,0))+' ago)';"
    "if(lost||age>lim){st.hidden=false;document.getElementById('live').hidden=true;"
    "document.title='STALE - '+document.title.replace(/^STALE - /,'');"
    "st.textContent='STALE: these statistics are '+fmt(age)+' old (generated '+"
    "new Date(g).toLocaleString()+'; '+who+' regenerates them every '+iv/1000+' s)'+"
    "(lost?' and '+who+' does not answer at '+location.host:'')+"
    "'. '+who.charAt(0).toUpperCase()+who.slice(1)+' is stopped or hung: check it ('+"
    "b.dataset.check+').'}}"
    "function refresh(){if(location.protocol.indexOf('http')!==0){location.reload();return}"
    "fetch(location.href,{cache:'no-store'}).then(function(r){if(r.ok)location.reload();"
    "else{lost=1;check()}}).catch(function(){lost=1;check()})}"
    "check();setInterval(check,1000);setInterval(refresh,iv)})();";

static void page_head(FILE *f, const struct statspage *sp, json_t *st)
{
    long long gen = statspage_num(st, "time_ms"), iv = statspage_num(st, "interval_s");
    char when[64] = "?";
    time_t t = (time_t)(gen / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fprintf(f,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\">"
            "<noscript><meta http-equiv=\"refresh\" content=\"%lld\"></noscript>"
            "<title>gridnode %s</title><style>%s</style></head>\n"
            "<body data-generated=\"%lld\" data-interval=\"%lld\" data-who=\"",
            iv, sp->r.role, css, gen, iv);
    statspage_esc(f, sp->r.who);
    fprintf(f, "\" data-check=\"");
    statspage_esc(f, sp->r.check);
    fprintf(f,
            "\">\n<div id=\"stale\" class=\"stale\" hidden></div>\n"
            "<header><h1>gridnode %s</h1><span class=\"live\" id=\"live\">live</span>"
            "<span class=\"gen\">generated <time id=\"gen\" datetime=\"%s\">%s</time> "
            "<span id=\"ago\"></span> &middot; regenerated every %lld s &middot; ",
            sp->r.role, when, when, iv);
    statspage_esc(f, statspage_str(st, "listen"));
    fprintf(f, "</span></header>\n<main>\n");
}

static void page(FILE *f, const struct statspage *sp, json_t *st)
{
    page_head(f, sp, st);
    sp->r.html(f, st, sp->r.arg);
    fprintf(f,
            "</main><footer>Machine-readable: <a href=\"stats.json\">stats.json</a>"
            " &middot; <a href=\"metrics\">metrics</a> (Prometheus, served over "
            "stats.http only)</footer>\n<script>%s</script>\n</body></html>\n",
            script);
}

static void metrics(FILE *f, const struct statspage *sp, json_t *st)
{
    struct prom p = {f, sp->prefix};
    prom_metric(&p, "stats_generated_seconds", "gauge", "Unix time these statistics were built.",
                (double)statspage_num(st, "time_ms") / 1000.0);
    sp->r.metrics(&p, st, sp->r.arg);
}

/* ---- the documents ---- */

enum { DOC_JSON, DOC_HTML, DOC_METRICS };

/* One document into a malloc'ed buffer (*buf, *len); 0 or -1. */
static int render(char **buf, size_t *len, int which, const struct statspage *sp, json_t *st)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        return -1;
    if (which == DOC_JSON) {
        json_dumpf(st, f, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
        fputc('\n', f);
    } else if (which == DOC_HTML) {
        page(f, sp, st);
    } else {
        metrics(f, sp, st);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* state_dir/stats.url, once the documents are served: a script that waits for the
 * file never gets the start-up 503. */
static void write_url(struct statspage *sp)
{
    /* atomically: a reader polling for the file never sees it empty */
    char line[sizeof sp->url + 1];
    int n = snprintf(line, sizeof line, "%s\n", sp->url);
    if (fs_write_atomic(sp->dir, "stats.url", line, (size_t)n) < 0)
        log_warn("cannot write %s/stats.url: %s", sp->dir, strerror(errno));
    log_info("statistics served at %s (also /stats.json and /metrics)", sp->url);
    sp->url_written = true;
}

int statspage_write(struct statspage *sp)
{
    int64_t now = wall_now_ms();
    json_t *st = json_object();
    char *doc[HTTPSTATS_NDOCS] = {NULL};
    size_t len[HTTPSTATS_NDOCS] = {0};
    int rc = -1;
    if (!sp || !st) {
        json_decref(st);
        return -1;
    }
    json_object_set_new(st, "role", json_string(sp->r.role));
    json_object_set_new(st, "time_ms", json_integer(now));
    json_object_set_new(st, "interval_s", json_integer(sp->interval_s));
    sp->r.build(sp->r.arg, st, now);
    if (render(&doc[HTTPSTATS_JSON], &len[HTTPSTATS_JSON], DOC_JSON, sp, st) < 0 ||
        render(&doc[HTTPSTATS_HTML], &len[HTTPSTATS_HTML], DOC_HTML, sp, st) < 0 ||
        (sp->http &&
         render(&doc[HTTPSTATS_METRICS], &len[HTTPSTATS_METRICS], DOC_METRICS, sp, st) < 0))
        goto out;
    for (int d = 0; sp->http && d < HTTPSTATS_NDOCS; d++)
        if (httpstats_publish(sp->http, (enum httpstats_doc)d, doc[d], len[d]) < 0)
            goto out;
    if (sp->http && !sp->url_written)
        write_url(sp);
    if (fs_write_atomic(sp->dir, "stats.json", doc[HTTPSTATS_JSON], len[HTTPSTATS_JSON]) < 0 ||
        fs_write_atomic(sp->dir, "stats.html", doc[HTTPSTATS_HTML], len[HTTPSTATS_HTML]) < 0)
        goto out;
    rc = 0;
out:
    for (int d = 0; d < HTTPSTATS_NDOCS; d++)
        free(doc[d]);
    json_decref(st);
    return rc;
}

static void on_timer(struct loop *l, void *arg)
{
    (void)l;
    struct statspage *sp = arg;
    if (statspage_write(sp) < 0)
        log_warn("cannot write the statistics files in %s", sp->dir);
}

int statspage_timer(struct statspage *sp, struct loop *l)
{
    return loop_timer(l, sp->interval_s * 1000, 1, on_timer, sp) < 0 ? -1 : 0;
}

struct statspage *statspage_new(const struct statspage_role *r, const char *state_dir,
                                long interval_s, const char *http, char *err, size_t errlen)
{
    struct statspage *sp = calloc(1, sizeof *sp);
    if (!sp) {
        snprintf(err, errlen, "statistics: out of memory");
        return NULL;
    }
    sp->r = *r;
    snprintf(sp->dir, sizeof sp->dir, "%s", state_dir);
    snprintf(sp->prefix, sizeof sp->prefix, "gridnode_%s_", r->role);
    sp->interval_s = interval_s > 0 ? interval_s : 10;
    if (!http || !http[0])
        return sp;
    /* a stale stats.url of an earlier run must not point anyone at a dead port */
    char path[CONFIG_STR_MAX + 16];
    snprintf(path, sizeof path, "%s/stats.url", state_dir);
    unlink(path);
    if (!(sp->http = httpstats_start(http, sp->url, sizeof sp->url, err, errlen))) {
        free(sp);
        return NULL;
    }
    return sp;
}

void statspage_free(struct statspage **spp)
{
    struct statspage *sp = *spp;
    if (!sp)
        return;
    httpstats_stop(&sp->http);
    free(sp);
    *spp = NULL;
}

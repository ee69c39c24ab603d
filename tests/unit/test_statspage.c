/*
 * test_statspage.c - daemon/statspage.c, the statistics part every role shares: the
 * Prometheus helpers (HELP/TYPE per family, label values escaped), HTML escaping, the
 * finished rows collapsed to the latest STATSPAGE_FINISHED newest first, and a whole
 * rebuild into a state directory (role, time_ms, interval_s added; the page's frame
 * naming the role; no stats.url without a server).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/statspage.h"

/* Runs fn(f) into a malloc'ed string. */
static char *capture(void (*fn)(FILE *, void *), void *arg)
{
    static char *buf; /* static: open_memstream keeps their addresses until fclose */
    static size_t len;
    buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(f, arg);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void prom_out(FILE *f, void *arg)
{
    (void)arg;
    struct prom p = {f, "gridnode_x_"};
    prom_family(&p, "jobs", "gauge", "Jobs.");
    prom_sample(&p, "jobs", "name", "a\"b\\c\nd", 2);
    prom_sample2(&p, "jobs", "site", "s1", "state", "queued", 0.5);
    prom_metric(&p, "done_total", "counter", "Done.", 7);
}

static void test_prom(void **state)
{
    (void)state;
    char *s = capture(prom_out, NULL);
    assert_string_equal(s, "# HELP gridnode_x_jobs Jobs.\n"
                           "# TYPE gridnode_x_jobs gauge\n"
                           "gridnode_x_jobs{name=\"a\\\"b\\\\c\\nd\"} 2\n"
                           "gridnode_x_jobs{site=\"s1\",state=\"queued\"} 0.5\n"
                           "# HELP gridnode_x_done_total Done.\n"
                           "# TYPE gridnode_x_done_total counter\n"
                           "gridnode_x_done_total 7\n");
    free(s);
}

static void esc_out(FILE *f, void *arg)
{
    statspage_esc(f, arg);
}

static void test_esc(void **state)
{
    (void)state;
    char *s = capture(esc_out, "<a href='x'>&\"</a>");
    assert_string_equal(s, "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
    free(s);
}

static void row(FILE *f, json_t *v)
{
    fprintf(f, "[%lld]", statspage_num(v, "job"));
}

static bool fin(json_t *v)
{
    return !strcmp(statspage_str(v, "state"), "done");
}

static void table_out(FILE *f, void *arg)
{
    statspage_job_table(f, arg, "Jobs", "<th>job</th>", row, fin);
}

static void test_finished_collapsed(void **state)
{
    (void)state;
    json_t *arr = json_array();
    for (int i = 1; i <= 250; i++) /* 248 done, 2 running (ids 5 and 250) */
        json_array_append_new(arr, json_pack("{s:i, s:s}", "job", i, "state",
                                             i == 5 || i == 250 ? "running" : "done"));
    char *s = capture(table_out, arr);
    assert_non_null(strstr(s, "Jobs: 2 queued or running, 248 finished"));
    assert_non_null(strstr(s, "248 finished (the latest 100 shown"));
    char *open = strstr(s, "<details>");
    assert_non_null(open);
    /* the unfinished ones before the details, then 249 first (newest) down to 150 */
    assert_true(strstr(s, "[5]") < open && strstr(s, "[250]") < open);
    assert_true(strstr(open, "[249]") < strstr(open, "[248]"));
    assert_non_null(strstr(open, "[150]"));
    assert_null(strstr(open, "[149]"));
    free(s);
    json_decref(arr);
}

static void build(void *arg, json_t *root, int64_t now)
{
    (void)now;
    json_object_set_new(root, "thing", json_string(arg));
}

static void body(FILE *f, json_t *st, void *arg)
{
    (void)arg;
    fprintf(f, "<p>");
    statspage_esc(f, statspage_str(st, "thing"));
    fprintf(f, "</p>");
}

static void metrics(const struct prom *p, json_t *st, void *arg)
{
    (void)st;
    (void)arg;
    prom_metric(p, "one", "gauge", "One.", 1);
}

static char *slurp(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_write_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_statspage.XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct statspage_role r = {"demo", "the demo role", "its log", build, body, metrics, "x<y"};
    char err[256];
    struct statspage *sp = statspage_new(&r, dir, 3, "", err, sizeof err);
    assert_non_null(sp);
    assert_int_equal(statspage_write(sp), 0);
    char *js = slurp(dir, "stats.json"), *html = slurp(dir, "stats.html");
    assert_non_null(js);
    assert_non_null(html);
    json_t *st = json_loads(js, 0, NULL);
    assert_non_null(st);
    assert_string_equal(statspage_str(st, "role"), "demo");
    assert_int_equal(statspage_num(st, "interval_s"), 3);
    assert_true(statspage_num(st, "time_ms") > 0);
    assert_string_equal(statspage_str(st, "thing"), "x<y");
    assert_non_null(strstr(html, "<title>gridnode demo</title>"));
    assert_non_null(strstr(html, "data-who=\"the demo role\""));
    assert_non_null(strstr(html, "<p>x&lt;y</p>"));
    assert_non_null(strstr(html, "<div id=\"stale\" class=\"stale\" hidden></div>"));
    assert_null(slurp(dir, "stats.url")); /* no server: no URL */
    json_decref(st);
    free(js);
    free(html);
    statspage_free(&sp);
    assert_null(sp);
    statspage_free(&sp); /* NULL-safe */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prom),
        cmocka_unit_test(test_esc),
        cmocka_unit_test(test_finished_collapsed),
        cmocka_unit_test(test_write_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

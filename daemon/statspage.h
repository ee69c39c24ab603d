/*
 * statspage.h - a role's statistics, the part every role shares (docs/stats.md): the
 * config keys `stats.interval_s` / `stats.http`, the periodic rebuild, stats.json and
 * stats.html rewritten atomically in the state directory, the HTTP server
 * (daemon/httpstats.h) with the page, /stats.json and /metrics, the page's frame (title,
 * generation time, the STALE mark judged in the browser, the refresh, the footer) and
 * helpers for the Prometheus text format and the page's tables.
 *
 * A role supplies only its content: what goes into stats.json (build), the page's body
 * drawn from that document (html), and its metric families (metrics). The shared part
 * adds `role`, `time_ms` and `interval_s` to the document and the
 * `gridnode_<role>_stats_generated_seconds` gauge to the metrics.
 */
#ifndef GRIDNODE_STATSPAGE_H
#define GRIDNODE_STATSPAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/config.h"

struct loop;
struct statspage;

/* The two keys of [stats] for a role whose config uses a key table (lib/config.h). */
#define STATSPAGE_CONFIG_KEYS(type, interval_field, http_field)                                    \
    {"stats",                                                                                      \
     "interval_s",                                                                                 \
     CONFIG_INT,                                                                                   \
     "10",                                                                                         \
     offsetof(type, interval_field),                                                               \
     1,                                                                                            \
     86400,                                                                                        \
     NULL,                                                                                         \
     "how often stats.json and stats.html are rewritten in state_dir (and the served page "        \
     "and metrics rebuilt)"},                                                                      \
    {                                                                                              \
        "stats", "http", CONFIG_STR, "", offsetof(type, http_field), 0, 0, NULL,                   \
            "serve the statistics page, /stats.json and /metrics (Prometheus) over HTTP on "       \
            "HOST:PORT (e.g. 127.0.0.1:7380; port 0 picks one, written to state_dir/stats.url); "  \
            "empty: off"                                                                           \
    }

/* The Prometheus text exposition format (0.0.4): every family with HELP then TYPE. */
struct prom {
    FILE *f;
    const char *prefix; /* "gridnode_batch_" */
};
void prom_family(const struct prom *p, const char *name, const char *type, const char *help);
/* One sample of the current family, with no label (lname NULL) or one. */
void prom_sample(const struct prom *p, const char *name, const char *lname, const char *lval,
                 double v);
/* One sample with two labels. */
void prom_sample2(const struct prom *p, const char *name, const char *l1, const char *v1,
                  const char *l2, const char *v2, double v);
/* A family of one unlabelled sample. */
void prom_metric(const struct prom *p, const char *name, const char *type, const char *help,
                 double v);

/* What a role gives the shared part. */
struct statspage_role {
    const char *role;  /* "batch": title "gridnode batch", metrics gridnode_batch_... */
    const char *who;   /* "the batch role": the STALE message names it */
    const char *check; /* what to look at when stale: "gridnode showq, its log" */
    /* Adds the role's keys to root (which already has role, time_ms, interval_s). */
    void (*build)(void *arg, json_t *root, int64_t now_ms);
    /* The page's body (cards, tables) drawn from the document. */
    void (*html)(FILE *f, json_t *st, void *arg);
    /* The role's metric families (after stats_generated_seconds). */
    void (*metrics)(const struct prom *p, json_t *st, void *arg);
    void *arg;
};

/*
 * Sets up a role's statistics: state_dir receives stats.json and stats.html (and
 * stats.url when http is not empty: the server is started here, so a port in use
 * stops start-up with the cause). NULL with err set.
 */
struct statspage *statspage_new(const struct statspage_role *r, const char *state_dir,
                                long interval_s, const char *http, char *err, size_t errlen);
/* Rebuilds now every document (files and served copies). 0, or -1 (logged by caller). */
int statspage_write(struct statspage *sp);
/* Rebuilds every interval_s from now on in loop l (failures are logged). 0 or -1. */
int statspage_timer(struct statspage *sp, struct loop *l);
/* Stops the server and frees. NULL-safe; sets *sp to NULL. */
void statspage_free(struct statspage **sp);

/* The endpoint a role actually bound (tcp://...:* resolved, from state_dir/endpoint),
 * else listen, as a JSON string (the page's header shows the document's "listen"). */
json_t *statspage_endpoint(const char *state_dir, const char *listen);

/* ---- helpers for the roles' pages ---- */
void statspage_esc(FILE *f, const char *s); /* HTML-escaped text */
/* The strings of array a, space-separated and escaped; past max of them, "+N more". */
void statspage_list(FILE *f, json_t *a, size_t max);
const char *statspage_str(json_t *o, const char *k);
long long statspage_num(json_t *o, const char *k);
double statspage_real(json_t *o, const char *k);
/* A summary card: the value (printf format) above its caption. */
__attribute__((format(printf, 3, 4))) void statspage_card(FILE *f, const char *what,
                                                          const char *fmt, ...);
/* A table of rows (a JSON array, oldest first): the unfinished ones in full, the
 * finished ones (finished(row) true) collapsed into a <details> section showing the
 * latest STATSPAGE_FINISHED, newest first. cols is the header row's <th> cells. */
#define STATSPAGE_FINISHED 100
void statspage_job_table(FILE *f, json_t *arr, const char *title, const char *cols,
                         void (*row)(FILE *, json_t *), bool (*finished)(json_t *));
/* Only the collapsed <details> section of the finished rows (nothing when none). */
void statspage_finished_table(FILE *f, json_t *arr, const char *cols, void (*row)(FILE *, json_t *),
                              bool (*finished)(json_t *));
/* "<h2>title</h2>" and a table, or a "none" line when arr is empty. */
void statspage_table(FILE *f, json_t *arr, const char *title, const char *cols,
                     void (*row)(FILE *, json_t *), const char *none);

#endif

/*
 * conffile.c - batch.ini parsing with inih (conffile.h, liveconf.h). inih keeps parsing
 * after an error and its Debian build cannot pass line numbers to the handler, so the
 * file is read through our own line reader (ini_parse_stream), which counts lines:
 * every problem is listed with its line (issue 27: --check-config shows all that is
 * wrong at once), the first BATCH_CONF_ERRORS of them. Keys and fixed section names
 * are case-insensitive, credential names are not.
 */
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/daemon.h"
#include "roles/batch/liveconf.h"

#define BATCH_CONF_ERRORS 20 /* errors listed; then "... and more errors" */

struct ctx {
    struct batch_config *c;
    struct batch_live_cfg *l; /* the live driver's part, or scratch (batch_conf_*) */
    struct batch_live_cfg scratch;
    char msg[256];
    char **seen; /* "section\nkey" of every key set, to refuse duplicates */
    size_t nseen;
    /* reading a file or a text (load): its name, the line the reader gave last, the
       source (f, else the text at s), and every error so far, "NAME:LINE: msg" a line */
    const char *name;
    int line;
    FILE *f;
    const char *s;
    char list[BATCH_CONF_ERRORS * 300];
    int nerr;
};

/* Adds "NAME:LINE: msg" to x's list (one a line; after BATCH_CONF_ERRORS, a note). */
static void list_add(struct ctx *x, int line, const char *msg)
{
    size_t used = strlen(x->list);
    if (++x->nerr > BATCH_CONF_ERRORS) {
        if (x->nerr == BATCH_CONF_ERRORS + 1)
            snprintf(x->list + used, sizeof x->list - used, "\n... and more errors");
        return;
    }
    snprintf(x->list + used, sizeof x->list - used, "%s%s:%d: %s", used ? "\n" : "", x->name, line,
             msg);
}

__attribute__((format(printf, 2, 3))) static int bad(struct ctx *x, const char *fmt, ...)
{
    char m[sizeof x->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (!x->msg[0])
        snprintf(x->msg, sizeof x->msg, "%s", m);
    if (x->name) /* reading a file: every error, with its line */
        list_add(x, x->line, m);
    return 1; /* go on: the rest of the file is checked too */
}

/*
 * inih's reader: the next line of x's file or text into buf (n bytes), counting lines.
 * A line that is neither blank, a comment, a [section] nor "key = value" (or "key:
 * value") is listed here as a syntax error: inih would only report the first one.
 */
static char *read_line(char *buf, int n, void *stream)
{
    struct ctx *x = stream;
    if (x->f) {
        if (!fgets(buf, n, x->f))
            return NULL;
    } else {
        if (!x->s || !*x->s)
            return NULL;
        size_t l = strcspn(x->s, "\n");
        size_t k = l + (x->s[l] == '\n');
        size_t c = k < (size_t)n - 1 ? k : (size_t)n - 1;
        memcpy(buf, x->s, c);
        buf[c] = '\0';
        x->s += c;
    }
    x->line++;
    const char *p = buf + strspn(buf, " \t\r\n");
    if (*p && *p != ';' && *p != '#' && *p != '[' && !strpbrk(p, "=:"))
        list_add(x, x->line, "syntax error (expected [section] or key = value)");
    return buf;
}

static int num(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

static int integer(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi)
        return -1;
    *out = n;
    return 0;
}

/* Seconds, or Maui's [[DD:]HH:]MM:SS. */
static int duration(const char *v, long long *out)
{
    long long parts[4], n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || n == 4)
            return -1;
        parts[n++] = x;
        if (*end == '\0')
            break;
        if (*end != ':')
            return -1;
        p = end + 1;
    }
    static const long long mult[4] = {1, 60, 3600, 86400};
    long long s = 0;
    for (long long i = 0; i < n; i++)
        s += parts[n - 1 - i] * mult[i];
    *out = s;
    return 0;
}

struct wkey {
    const char *name;
    size_t off;
};
#define W(n, f)                                                                                    \
    {                                                                                              \
        n, offsetof(struct batch_weights, f)                                                       \
    }
static const struct wkey weights[] = {
    W("servweight", serv),           W("queuetimeweight", queuetime),
    W("xfactorweight", xfactor),     W("fsweight", fs),
    W("fsuserweight", fsuser),       W("fsgroupweight", fsgroup),
    W("fsaccountweight", fsaccount), W("credweight", cred),
    W("userweight", user),           W("groupweight", group),
    W("accountweight", account),     W("qosweight", qos),
    W("classweight", class_),        W("resweight", res),
    W("procweight", proc),           W("memweight", mem),
    W("diskweight", disk),           W("swapweight", swap),
    W("nodeweight", node),           W("psweight", ps),
    W("uprioweight", uprio),
};
#undef W

static int set_scheduler(struct ctx *x, const char *k, const char *v)
{
    struct batch_config *c = x->c;
    long long n;
    if (strcasecmp(k, "reservationdepth") == 0) {
        if (strcasecmp(v, "unlimited") == 0)
            c->reservation_depth = BATCH_UNLIMITED;
        else if (integer(v, 0, 1000000, &n) == 0)
            c->reservation_depth = (int32_t)n;
        else
            return bad(x, "reservationdepth must be a count or 'unlimited', not '%s'", v);
    } else if (strcasecmp(k, "backfillpolicy") == 0) {
        if (strcasecmp(v, "none") == 0)
            c->backfill = BATCH_BF_NONE;
        else if (strcasecmp(v, "firstfit") == 0)
            c->backfill = BATCH_BF_FIRSTFIT;
        else if (strcasecmp(v, "bestfit") == 0)
            c->backfill = BATCH_BF_BESTFIT;
        else
            return bad(x, "backfillpolicy must be none, firstfit or bestfit, not '%s'", v);
    } else if (strcasecmp(k, "estimates") == 0) {
        if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1") ||
            !strcasecmp(v, "on"))
            c->estimates = true;
        else if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0") ||
                 !strcasecmp(v, "off"))
            c->estimates = false;
        else
            return bad(x, "estimates must be yes or no, not '%s'", v);
    } else {
        return bad(x, "unknown key '%s' in [scheduler]", k);
    }
    return 1;
}

/* [grid]: the site owner's rule for a metascheduler's jobs (issue 25). */
static int set_grid(struct ctx *x, const char *k, const char *v)
{
    struct batch_config *c = x->c;
    long long n;
    if (strcasecmp(k, "local_wait_bound") == 0) {
        if (duration(v, &n) < 0 || n > 10LL * 365 * 86400)
            return bad(x,
                       "local_wait_bound must be a duration (seconds or [[DD:]HH:]MM:SS; 0 = "
                       "off), not '%s'",
                       v);
        c->grid_wait_bound = n;
    } else if (strcasecmp(k, "class") == 0) {
        if (strlen(v) >= sizeof c->grid_class || strpbrk(v, " \t,"))
            return bad(x, "class must be one class name (under %zu characters), not '%s'",
                       sizeof c->grid_class, v);
        snprintf(c->grid_class, sizeof c->grid_class, "%s", v);
    } else {
        return bad(x, "unknown key '%s' in [grid] (local_wait_bound, class)", k);
    }
    return 1;
}

static int set_priority(struct ctx *x, const char *k, const char *v)
{
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        if (strcasecmp(k, weights[i].name))
            continue;
        double d;
        if (num(v, &d) < 0)
            return bad(x, "%s must be a number, not '%s'", k, v);
        *(double *)((char *)&x->c->w + weights[i].off) = d;
        return 1;
    }
    return bad(x, "unknown key '%s' in [priority]", k);
}

static int set_fairshare(struct ctx *x, const char *k, const char *v)
{
    struct batch_config *c = x->c;
    long long n;
    double d;
    if (strcasecmp(k, "fspolicy") == 0) {
        if (strcasecmp(v, "none") == 0)
            c->fspolicy = BATCH_FS_NONE;
        else if (strcasecmp(v, "dedicatedps") == 0)
            c->fspolicy = BATCH_FS_DEDICATEDPS;
        else
            return bad(x, "fspolicy must be none or dedicatedps, not '%s'", v);
    } else if (strcasecmp(k, "fsinterval") == 0) {
        if (duration(v, &n) < 0 || n < 1)
            return bad(x, "fsinterval must be a positive duration ([[DD:]HH:]MM:SS), not '%s'", v);
        c->fsinterval = n;
    } else if (strcasecmp(k, "fsdepth") == 0) {
        if (integer(v, 1, 1000, &n) < 0)
            return bad(x, "fsdepth must be 1..1000, not '%s'", v);
        c->fsdepth = (int32_t)n;
    } else if (strcasecmp(k, "fsdecay") == 0) {
        if (num(v, &d) < 0 || !(d > 0 && d <= 1))
            return bad(x, "fsdecay must be in (0, 1], not '%s'", v);
        c->fsdecay = d;
    } else {
        return bad(x, "unknown key '%s' in [fairshare]", k);
    }
    return 1;
}

static int set_cred(struct ctx *x, enum batch_cred_kind kind, const char *name, const char *k,
                    const char *v)
{
    struct batch_cred_cfg *cc = batch_config_cred(x->c, kind, name);
    long long n;
    double d;
    if (!cc)
        return bad(x, "bad %s name '%s'", batch_cred_kind_name(kind), name);
    if (strcasecmp(k, "priority") == 0) {
        if (num(v, &d) < 0)
            return bad(x, "priority must be a number, not '%s'", v);
        cc->priority = d;
    } else if (strcasecmp(k, "fstarget") == 0) {
        if (num(v, &d) < 0 || d < 0 || d > 100)
            return bad(x, "fstarget must be a percentage 0..100, not '%s'", v);
        cc->fstarget = d;
    } else if (strcasecmp(k, "maxjob") == 0) {
        if (integer(v, -1, INT32_MAX, &n) < 0)
            return bad(x, "maxjob must be a count (-1: no limit), not '%s'", v);
        cc->maxjob = (int32_t)n;
    } else if (strcasecmp(k, "maxproc") == 0) {
        if (integer(v, -1, INT64_MAX, &n) < 0)
            return bad(x, "maxproc must be a count (-1: no limit), not '%s'", v);
        cc->maxproc = n;
    } else if (strcasecmp(k, "defaultwalltime") == 0 || strcasecmp(k, "maxwalltime") == 0) {
        bool max = strcasecmp(k, "maxwalltime") == 0;
        if (kind != BATCH_CRED_CLASS)
            return bad(x, "%s is a class setting: put it in [class %s] or [class DEFAULT]", k,
                       name);
        if (duration(v, &n) < 0 || n < 1 || n > 366LL * 86400)
            return bad(x,
                       "%s must be a duration of 1 s to 366 days ([[DD:]HH:]MM:SS or "
                       "seconds), not '%s'",
                       k, v);
        *(max ? &cc->maxwalltime : &cc->defwalltime) = n;
    } else {
        return bad(x, "unknown key '%s' in [%s %s]", k, batch_cred_kind_name(kind), name);
    }
    return 1;
}

/* Copies a text value into a live setting of size cap; 1 or a recorded error. */
static int live_str(struct ctx *x, const char *k, const char *v, char *dst, size_t cap)
{
    if (strlen(v) >= cap)
        return bad(x, "%s is longer than %zu bytes", k, cap - 1);
    strcpy(dst, v);
    return 1;
}

/* The keys every daemon shares, as daemon/daemon.h and daemon/curve.h describe them
 * (names, types, defaults, ranges); shared_set applies them with batch.ini's messages. */
static const struct config_key shared_keys[] = {
    DAEMON_LISTEN_KEY(struct batch_live_cfg, "batch", "tcp://127.0.0.1:7400"),
    DAEMON_STATE_KEYS(struct batch_live_cfg, "batch", "run/batch", "the batch role's LMDB store"),
    DAEMON_STORE_KEYS(struct batch_live_cfg),
    DAEMON_LIMIT_KEYS(struct batch_live_cfg),
    CURVE_CONFIG_KEYS(struct batch_live_cfg, sec),
    {NULL, NULL, CONFIG_STR, NULL, 0, 0, 0, NULL, NULL},
};

/* The index of v among an enum key's "a|b|c" choices, or -1 (exact match). */
static int choice(const char *choices, const char *v)
{
    size_t vl = strlen(v);
    int i = 0;
    for (const char *p = choices;; i++) {
        size_t n = strcspn(p, "|");
        if (n == vl && !strncmp(p, v, n))
            return i;
        if (!p[n])
            return -1;
        p += n + 1;
    }
}

/* "a|b|c" as "a, b or c". */
static void choices_text(const char *choices, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = choices; *p && o < len;) {
        size_t n = strcspn(p, "|");
        const char *sep = !p[n] ? "" : strchr(p + n + 1, '|') ? ", " : " or ";
        o += (size_t)snprintf(out + o, len - o, "%.*s%s", (int)n, p, sep);
        p += n + (p[n] != '\0');
    }
}

/* Applies v to shared key k (name: as written) of l: 1, or a recorded error. A text is refused when
 * longer than its field, a number outside the key's range, a boolean unless
 * true/false/yes/no; state_dir must not be empty, log_level must be a level. */
static int shared_set(struct ctx *x, const struct config_key *k, const char *name, const char *v)
{
    char *base = (char *)x->l + k->offset;
    long long n;
    int i;
    switch (k->type) {
    case CONFIG_STR:
        if (!strcmp(k->name, "state_dir") && !v[0])
            return bad(x, "state_dir must not be empty");
        if (!strcmp(k->name, "log_level") && strcmp(v, "error") && strcmp(v, "warn") &&
            strcmp(v, "info") && strcmp(v, "debug"))
            return bad(x, "log_level must be error, warn, info or debug, not '%s'", v);
        return live_str(x, name, v, base, CONFIG_STR_MAX);
    case CONFIG_INT:
        if (integer(v, (long long)k->min, (long long)k->max, &n) < 0)
            return bad(x, "%s.%s must be %.0f to %.0f, not '%s'", k->section, k->name, k->min,
                       k->max, v);
        *(long *)base = (long)n;
        return 1;
    case CONFIG_ENUM:
        if ((i = choice(k->choices, v)) < 0) {
            char t[128];
            choices_text(k->choices, t, sizeof t);
            return bad(x, "%s.%s must be %s, not '%s'", k->section, k->name, t, v);
        }
        *(int *)base = i;
        return 1;
    case CONFIG_BOOL:
        if (strcmp(v, "true") && strcmp(v, "false") && strcmp(v, "yes") && strcmp(v, "no"))
            return bad(x, "%s.%s must be true or false, not '%s'", k->section, k->name, v);
        *(int *)base = !strcmp(v, "true") || !strcmp(v, "yes");
        return 1;
    case CONFIG_DOUBLE:
        break;
    }
    return bad(x, "internal: key %s.%s has no parser", k->section, k->name);
}

/* [batch], [store], [limits], [security], [stats]: the live driver's keys (struct
 * batch_live_cfg): the shared ones from the table, the batch role's own here. */
static int set_live(struct ctx *x, const char *sec, const char *k, const char *v)
{
    struct batch_live_cfg *l = x->l;
    long long n;
    for (const struct config_key *s = shared_keys; s->name; s++)
        if (!strcasecmp(sec, s->section) && !strcasecmp(k, s->name))
            return shared_set(x, s, k, v);
    if (!strcasecmp(sec, "batch")) {
        if (!strcasecmp(k, "clusters"))
            return live_str(x, k, v, l->clusters, sizeof l->clusters);
        if (!strcasecmp(k, "admins"))
            return live_str(x, k, v, l->admins, sizeof l->admins);
        if (!strcasecmp(k, "max_interval_s")) {
            if (integer(v, 1, 86400, &n) < 0)
                return bad(x, "max_interval_s must be 1 to 86400 seconds, not '%s'", v);
            l->max_interval_s = n;
            return 1;
        }
        if (!strcasecmp(k, "lost_requeues")) {
            if (integer(v, 0, 1000, &n) < 0)
                return bad(x, "lost_requeues must be 0 to 1000 reruns, not '%s'", v);
            l->lost_requeues = n;
            return 1;
        }
        if (!strcasecmp(k, "max_array")) {
            if (integer(v, 1, 10000000, &n) < 0)
                return bad(x, "max_array must be 1 to 10000000 elements, not '%s'", v);
            l->max_array = n;
            return 1;
        }
    } else if (!strcasecmp(sec, "files")) { /* issue 26 (docs/data.md "Limits") */
        if (!strcasecmp(k, "job_mb")) {
            if (integer(v, 1, 1L << 30, &n) < 0)
                return bad(x, "files.job_mb must be 1 to 1073741824 MB, not '%s'", v);
            l->files_job_mb = n;
            return 1;
        }
        if (!strcasecmp(k, "user_mb")) {
            if (integer(v, 0, 1L << 30, &n) < 0)
                return bad(x, "files.user_mb must be 0 (no limit) to 1073741824 MB, not '%s'", v);
            l->files_user_mb = n;
            return 1;
        }
        if (!strcasecmp(k, "keep_s")) {
            if (integer(v, 0, 1LL << 40, &n) < 0)
                return bad(x, "files.keep_s must be 0 to 1099511627776 seconds, not '%s'", v);
            l->files_keep_s = n;
            return 1;
        }
        if (!strcasecmp(k, "recheck_s")) {
            if (integer(v, 1, 1LL << 30, &n) < 0)
                return bad(x, "files.recheck_s must be 1 to 1073741824 seconds, not '%s'", v);
            l->files_recheck_s = n;
            return 1;
        }
    } else if (!strcasecmp(sec, "jobs")) { /* as the cluster's jobs.retention_s */
        if (!strcasecmp(k, "retention_s")) {
            if (integer(v, 0, 1LL << 40, &n) < 0)
                return bad(x,
                           "jobs.retention_s must be 0 (never) to 1099511627776 seconds, "
                           "not '%s'",
                           v);
            l->retention_s = n;
            return 1;
        }
    } else if (!strcasecmp(sec, "stats")) {
        if (!strcasecmp(k, "interval_s")) {
            if (integer(v, 1, 86400, &n) < 0)
                return bad(x, "stats.interval_s must be 1 to 86400 seconds, not '%s'", v);
            l->stats_interval_s = n;
            return 1;
        }
        if (!strcasecmp(k, "http"))
            return live_str(x, k, v, l->stats_http, sizeof l->stats_http);
    } else if (!strcasecmp(sec, "acct")) { /* daemon/acct.h, as the cluster's [acct] */
        if (!strcasecmp(k, "keep_days")) {
            if (integer(v, 0, 36600, &n) < 0)
                return bad(x, "acct.keep_days must be 0 to 36600 days, not '%s'", v);
            l->acct.keep_days = (long)n;
            return 1;
        }
        if (!strcasecmp(k, "max_records")) {
            if (integer(v, 0, 1000000000, &n) < 0)
                return bad(x, "acct.max_records must be 0 to 1000000000, not '%s'", v);
            l->acct.max_records = (long)n;
            return 1;
        }
    }
    return bad(x, "unknown key '%s' in [%s]", k, sec);
}

static bool first_time(struct ctx *x, const char *section, const char *key)
{
    size_t n = strlen(section) + strlen(key) + 2;
    char *s = malloc(n);
    if (!s)
        return true;
    snprintf(s, n, "%s\n%s", section, key);
    for (char *p = s; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    for (size_t i = 0; i < x->nseen; i++)
        if (strcmp(x->seen[i], s) == 0) {
            free(s);
            return false;
        }
    char **ns = realloc(x->seen, (x->nseen + 1) * sizeof *ns);
    if (!ns) {
        free(s);
        return true;
    }
    x->seen = ns;
    x->seen[x->nseen++] = s;
    return true;
}

static int handler(void *user, const char *section, const char *key, const char *value)
{
    struct ctx *x = user;
    if (!first_time(x, section, key))
        return bad(x, "duplicate key '%s' in [%s]", key, section);
    if (!strcasecmp(section, "scheduler"))
        return set_scheduler(x, key, value);
    if (!strcasecmp(section, "grid"))
        return set_grid(x, key, value);
    if (!strcasecmp(section, "priority"))
        return set_priority(x, key, value);
    if (!strcasecmp(section, "fairshare"))
        return set_fairshare(x, key, value);
    if (!strcasecmp(section, "batch") || !strcasecmp(section, "store") ||
        !strcasecmp(section, "limits") || !strcasecmp(section, "security") ||
        !strcasecmp(section, "stats") || !strcasecmp(section, "acct") ||
        !strcasecmp(section, "files") || !strcasecmp(section, "jobs"))
        return set_live(x, section, key, value);
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        const char *kn = batch_cred_kind_name(k);
        size_t l = strlen(kn);
        if (strncasecmp(section, kn, l) == 0 && (section[l] == ' ' || section[l] == ':') &&
            section[l + 1])
            return set_cred(x, k, section + l + 1, key, value);
    }
    return bad(x, "unknown section [%s]", section);
}

static void ctx_free(struct ctx *x)
{
    for (size_t i = 0; i < x->nseen; i++)
        free(x->seen[i]);
    free(x->seen);
}

/* Turns inih's result and the handler's messages into the error text (one a line). */
static int finish(struct ctx *x, int rc, const char *name, char *err, size_t errlen)
{
    ctx_free(x);
    if (rc == 0 && !x->msg[0] && !x->nerr)
        return 0;
    if (x->nerr > 0 && rc != -1 && rc != -2)
        snprintf(err, errlen, "%s", x->list);
    else if (rc == -1)
        snprintf(err, errlen, "%s: cannot open: %s", name, strerror(errno ? errno : ENOENT));
    else if (rc == -2)
        snprintf(err, errlen, "%s: out of memory", name);
    else if (x->msg[0])
        snprintf(err, errlen, "%s:%d: %s", name, rc, x->msg);
    else
        snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", name, rc);
    return -1;
}

/* Reads the file at path (or the text s, when path is NULL) into c and l. */
static int load(struct batch_config *c, struct batch_live_cfg *l, const char *path, const char *s,
                const char *name, char *err, size_t errlen)
{
    struct ctx *x = calloc(1, sizeof *x); /* the error list is large for a stack */
    if (!x) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    *x = (struct ctx){.c = c, .l = l, .name = name, .s = s};
    if (!x->l)
        x->l = &x->scratch;
    errno = 0;
    int rc;
    if (path && !(x->f = fopen(path, "r")))
        rc = -1;
    else
        rc = ini_parse_stream(read_line, x, handler, x);
    if (x->f)
        fclose(x->f);
    rc = finish(x, rc, name, err, errlen);
    free(x);
    return rc;
}

static int set(struct batch_config *c, struct batch_live_cfg *l, const char *a, char *err,
               size_t errlen)
{
    const char *eq = strchr(a, '=');
    const char *dot = eq ? memrchr(a, '.', (size_t)(eq - a)) : NULL;
    if (!eq || !dot || dot == a || dot + 1 == eq) {
        snprintf(err, errlen, "--set wants SECTION.KEY=VALUE, not '%s'", a);
        return -1;
    }
    char section[160], key[64];
    if ((size_t)(dot - a) >= sizeof section || (size_t)(eq - dot - 1) >= sizeof key) {
        snprintf(err, errlen, "--set '%s': name too long", a);
        return -1;
    }
    snprintf(section, sizeof section, "%.*s", (int)(dot - a), a);
    snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
    struct ctx x = {.c = c, .l = l};
    if (!x.l)
        x.l = &x.scratch;
    handler(&x, section, key, eq + 1);
    ctx_free(&x);
    if (x.msg[0]) {
        snprintf(err, errlen, "--set %s: %s", a, x.msg);
        return -1;
    }
    return 0;
}

int batch_conf_load(struct batch_config *c, const char *path, char *err, size_t errlen)
{
    return load(c, NULL, path, NULL, path, err, errlen);
}

int batch_conf_load_string(struct batch_config *c, const char *s, const char *name, char *err,
                           size_t errlen)
{
    return load(c, NULL, NULL, s, name, err, errlen);
}

int batch_conf_set(struct batch_config *c, const char *a, char *err, size_t errlen)
{
    return set(c, NULL, a, err, errlen);
}

int batch_ini_load(struct batch_ini *f, const char *path, char *err, size_t errlen)
{
    return load(&f->eng, &f->live, path, NULL, path, err, errlen);
}

int batch_ini_load_string(struct batch_ini *f, const char *s, const char *name, char *err,
                          size_t errlen)
{
    return load(&f->eng, &f->live, NULL, s, name, err, errlen);
}

int batch_ini_set(struct batch_ini *f, const char *a, char *err, size_t errlen)
{
    return set(&f->eng, &f->live, a, err, errlen);
}

void batch_ini_defaults(struct batch_ini *f)
{
    batch_config_defaults(&f->eng);
    memset(&f->live, 0, sizeof f->live);
    struct ctx x = {.c = &f->eng, .l = &f->live};
    for (const struct config_key *k = shared_keys; k->name; k++)
        shared_set(&x, k, k->name, k->dflt);
    f->live.max_interval_s = 30;
    f->live.max_array = 10000000; /* the wire's cap of ntasks */
    f->live.lost_requeues = 5;    /* Slurm's MaxBatchRequeue */
    f->live.files_job_mb = 10240; /* as the cluster's */
    f->live.files_user_mb = 0;
    f->live.files_keep_s = 86400; /* as the cluster's */
    f->live.files_recheck_s = 60;
    f->live.retention_s = 604800; /* 7 days, as the cluster's */
    f->live.stats_interval_s = 10;
    f->live.acct.keep_days = 365;
    f->live.acct.max_records = 1000000;
}

void batch_ini_clear(struct batch_ini *f)
{
    batch_config_clear(&f->eng);
}

int batch_ini_copy(struct batch_ini *dst, const struct batch_ini *src)
{
    if (batch_config_copy(&dst->eng, &src->eng) < 0)
        return -1;
    dst->live = src->live;
    return 0;
}

void batch_ini_print(const struct batch_ini *f, FILE *out)
{
    const struct batch_config *c = &f->eng;
    static const char *const bf[] = {"none", "firstfit", "bestfit"};
    fprintf(out, "[scheduler]\n");
    if (c->reservation_depth == BATCH_UNLIMITED)
        fprintf(out, "reservationdepth = unlimited\n");
    else
        fprintf(out, "reservationdepth = %d\n", c->reservation_depth);
    fprintf(out, "backfillpolicy = %s\nestimates = %s\n\n[priority]\n", bf[c->backfill],
            c->estimates ? "yes" : "no");
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        fprintf(out, "%s = %g\n", weights[i].name,
                *(const double *)((const char *)&c->w + weights[i].off));
    fprintf(out, "\n[fairshare]\nfspolicy = %s\nfsinterval = %lld\nfsdepth = %d\nfsdecay = %g\n",
            c->fspolicy == BATCH_FS_NONE ? "none" : "dedicatedps", (long long)c->fsinterval,
            c->fsdepth, c->fsdecay);
    static const char *const sy[] = {"full", "meta", "none"};
    const struct batch_live_cfg *l = &f->live;
    fprintf(out,
            "\n[batch]\nlisten = %s\nstate_dir = %s\nclusters = %s\nadmins = %s\n"
            "max_interval_s = %lld\nmax_array = %lld\nlost_requeues = %lld\nlog_level = "
            "%s\n\n[store]\nsync = %s\n"
            "map_mb = %lld\n\n"
            "[limits]\npeer_queue = %lld\n\n[security]\nsecret_key = %s\nserver_key = %s\n"
            "authorized_keys = %s\nplain = %s\n\n[stats]\ninterval_s = %lld\nhttp = %s\n\n"
            "[acct]\nkeep_days = %ld\nmax_records = %ld\n\n[files]\njob_mb = %lld\n"
            "user_mb = %lld\nkeep_s = %lld\nrecheck_s = %lld\n\n[jobs]\nretention_s = %lld\n",
            l->listen, l->state_dir, l->clusters, l->admins, (long long)l->max_interval_s,
            (long long)l->max_array, (long long)l->lost_requeues, l->log_level, sy[l->sync],
            (long long)l->map_mb, (long long)l->peer_queue, l->sec.secret_key, l->sec.server_key,
            l->sec.authorized_keys, l->sec.plain ? "true" : "false", (long long)l->stats_interval_s,
            l->stats_http, l->acct.keep_days, l->acct.max_records, (long long)l->files_job_mb,
            (long long)l->files_user_mb, (long long)l->files_keep_s, (long long)l->files_recheck_s,
            (long long)l->retention_s);
    for (size_t i = 0; i < c->ncreds; i++) {
        const struct batch_cred_cfg *cc = &c->creds[i];
        fprintf(out, "\n[%s %s]\npriority = %g\n", batch_cred_kind_name(cc->kind), cc->name,
                cc->priority);
        if (!isnan(cc->fstarget))
            fprintf(out, "fstarget = %g\n", cc->fstarget);
        fprintf(out, "maxjob = %d\nmaxproc = %lld\n", cc->maxjob, (long long)cc->maxproc);
        if (cc->defwalltime)
            fprintf(out, "defaultwalltime = %lld\n", (long long)cc->defwalltime);
        if (cc->maxwalltime)
            fprintf(out, "maxwalltime = %lld\n", (long long)cc->maxwalltime);
    }
}

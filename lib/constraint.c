/*
 * constraint.c - node features and job constraints (lib/constraint.h): one recursive
 * descent reader serves both the parser (which writes the canonical text) and the
 * match (which evaluates it against a host's feature list).
 */
#include "lib/constraint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '+' || ch == '-';
}

bool feature_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > FEATURE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

/* Whether the canonical list f holds name s[0..n). */
static bool list_has(const char *f, const char *s, size_t n)
{
    while (f && *f) {
        size_t l = strcspn(f, ",");
        if (l == n && !memcmp(f, s, n))
            return true;
        f += l + (f[l] == ',');
    }
    return false;
}

/*
 * The reader. Grammar: expr := and ('|' and)*; and := atom ('&' atom)*;
 * atom := NAME | '(' expr ')'. out NULL: evaluating against feat; else copying the
 * canonical text. err set on the first problem (why says it); later calls do nothing.
 */
struct rd {
    const char *s;
    size_t len, pos;
    unsigned depth, names;
    const char *feat;
    char *out;
    size_t cap, olen;
    bool err;
    char *why;
    size_t wl;
    /* counts (NAME*N): how many were read, how many '|'; cv (cmax): where to copy them */
    unsigned counts, ors;
    struct constraint_count *cv;
    size_t cmax, cn;
};

static void skip_sp(struct rd *r)
{
    while (r->pos < r->len && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t'))
        r->pos++;
}

static void emit(struct rd *r, const char *p, size_t n)
{
    if (!r->out)
        return;
    if (r->olen + n + 1 > r->cap) {
        r->err = true;
        snprintf(r->why, r->wl, "constraint too long");
        return;
    }
    memcpy(r->out + r->olen, p, n);
    r->olen += n;
    r->out[r->olen] = '\0';
}

/* Sets the error: what was found at the position and what may stand there. */
static void fail(struct rd *r, const char *expected)
{
    if (r->err)
        return;
    r->err = true;
    if (!r->why)
        return;
    char ch = r->pos < r->len ? r->s[r->pos] : 0;
    const char *hint = "";
    if (ch == '*')
        hint = " (a count follows a feature name: NAME*2)";
    else if (ch == '[' || ch == ']')
        hint = " (brackets are not supported: write a|b for OR, a*2&b*4 for counts)";
    else if (ch == ',')
        hint = " (write & for AND, | for OR)";
    else if (ch == '!')
        hint = " (negation is not supported)";
    if (ch > ' ' && ch < 127)
        snprintf(r->why, r->wl, "constraint: '%c' at position %zu where %s was expected%s", ch,
                 r->pos + 1, expected, hint);
    else if (r->pos >= r->len)
        snprintf(r->why, r->wl, "constraint: it ends where %s was expected", expected);
    else
        snprintf(r->why, r->wl,
                 "constraint: a character at position %zu that is not allowed (feature names "
                 "are letters, digits and _.+-)",
                 r->pos + 1);
}

static bool rd_expr(struct rd *r);

/*
 * The count of the name s[b..b+n) just read ("*N", 1..CONSTRAINT_COUNT_MAX, no leading
 * zero): canonical text "NAME*N", kept in r->cv. A counted name asks nothing of one host
 * (at least N of the job's hosts have it: constraint_counts_met), so it reads as true.
 */
static bool rd_count(struct rd *r, size_t b, size_t n)
{
    r->pos++; /* '*' */
    size_t d = r->pos;
    unsigned long v = 0;
    while (r->pos < r->len && r->s[r->pos] >= '0' && r->s[r->pos] <= '9' && r->pos - d < 6)
        v = v * 10 + (unsigned long)(r->s[r->pos++] - '0');
    if (r->pos == d || r->s[d] == '0' || v > CONSTRAINT_COUNT_MAX ||
        (r->pos < r->len && r->s[r->pos] >= '0' && r->s[r->pos] <= '9')) {
        r->err = true;
        if (r->why)
            snprintf(r->why, r->wl,
                     "constraint: the count at position %zu must be a number of hosts, 1 to %u "
                     "(NAME*2)",
                     d + 1, CONSTRAINT_COUNT_MAX);
        return false;
    }
    r->counts++;
    char t[16];
    int tl = snprintf(t, sizeof t, "*%lu", v);
    emit(r, t, (size_t)tl);
    if (r->cv && r->cn < r->cmax) {
        memcpy(r->cv[r->cn].name, r->s + b, n);
        r->cv[r->cn].name[n] = '\0';
        r->cv[r->cn].n = (uint32_t)v;
    }
    r->cn++;
    return true;
}

static bool rd_atom(struct rd *r)
{
    skip_sp(r);
    if (r->err)
        return false;
    if (r->pos < r->len && r->s[r->pos] == '(') {
        if (++r->depth > CONSTRAINT_DEPTH_MAX) {
            r->err = true;
            if (r->why)
                snprintf(r->why, r->wl, "constraint: more than %u nested parentheses",
                         CONSTRAINT_DEPTH_MAX);
            return false;
        }
        r->pos++;
        emit(r, "(", 1);
        bool v = rd_expr(r);
        skip_sp(r);
        if (r->pos >= r->len || r->s[r->pos] != ')') {
            fail(r, "')' or an operator");
            return false;
        }
        r->pos++;
        r->depth--;
        emit(r, ")", 1);
        return v;
    }
    size_t b = r->pos;
    while (r->pos < r->len && name_char(r->s[r->pos]))
        r->pos++;
    size_t n = r->pos - b;
    if (n == 0) {
        fail(r, "a feature name or '('");
        return false;
    }
    if (n > FEATURE_NAME_MAX || ++r->names > CONSTRAINT_NAMES_MAX) {
        r->err = true;
        if (r->why)
            snprintf(r->why, r->wl,
                     n > FEATURE_NAME_MAX
                         ? "constraint: a feature name longer than %u bytes at position %zu"
                         : "constraint: more than %u feature names (at position %zu)",
                     n > FEATURE_NAME_MAX ? FEATURE_NAME_MAX : CONSTRAINT_NAMES_MAX, b + 1);
        return false;
    }
    emit(r, r->s + b, n);
    if (r->pos < r->len && r->s[r->pos] == '*')
        return rd_count(r, b, n);
    return r->out ? true : list_has(r->feat, r->s + b, n);
}

static bool rd_and(struct rd *r)
{
    bool v = rd_atom(r);
    for (;;) {
        skip_sp(r);
        if (r->err || r->pos >= r->len || r->s[r->pos] != '&')
            return v;
        r->pos++;
        emit(r, "&", 1);
        bool w = rd_atom(r); /* always read: the whole text is checked */
        v = v && w;
    }
}

static bool rd_expr(struct rd *r)
{
    bool v = rd_and(r);
    for (;;) {
        skip_sp(r);
        if (r->err || r->pos >= r->len || r->s[r->pos] != '|')
            return v;
        r->pos++;
        r->ors++;
        emit(r, "|", 1);
        bool w = rd_and(r);
        v = v || w;
    }
}

/* Reads the whole text; false on any error (trailing text included). */
static bool rd_all(struct rd *r, bool *val)
{
    bool v = rd_expr(r);
    skip_sp(r);
    if (!r->err && r->pos < r->len)
        fail(r, "'&', '|' or the end");
    if (!r->err && r->counts && r->ors) { /* Slurm's rule too */
        r->err = true;
        if (r->why)
            snprintf(r->why, r->wl,
                     "constraint: counts (NAME*N) go only with & (AND), not with |: write "
                     "a*2&b, or drop the count");
    }
    *val = v;
    return !r->err;
}

int constraint_parse(const char *s, size_t len, char *out, size_t cap, char *why, size_t wl)
{
    struct rd r = {.s = s, .len = len, .out = out, .cap = cap, .why = why, .wl = wl};
    bool v;
    if (!cap) {
        snprintf(why, wl, "constraint: no room");
        return -1;
    }
    out[0] = '\0';
    if (len > CONSTRAINT_LEN_MAX) {
        snprintf(why, wl, "constraint longer than %u bytes", CONSTRAINT_LEN_MAX);
        return -1;
    }
    if (!rd_all(&r, &v)) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

bool constraint_match(const char *c, const char *features)
{
    if (!c || !*c)
        return true;
    struct rd r = {.s = c, .len = strlen(c), .feat = features ? features : ""};
    bool v = false;
    return rd_all(&r, &v) && v;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the n names, drops duplicates and joins them into out (cap). 0 / -1 (room). */
static int join_sorted(char **v, size_t n, char *out, size_t cap)
{
    qsort(v, n, sizeof *v, cmp_str);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && !strcmp(v[i], v[i - 1]))
            continue;
        size_t l = strlen(v[i]);
        if (o + (o ? 1 : 0) + l + 1 > cap)
            return -1;
        if (o)
            out[o++] = ',';
        memcpy(out + o, v[i], l);
        o += l;
    }
    out[o] = '\0';
    return 0;
}

/* Splits s[0..len) at ',' and spaces into copies in buf (2 * FEATURES_MAX names at
 * most); the count or -1 with why. */
static int split(const char *s, size_t len, char (*buf)[FEATURE_NAME_MAX + 1], size_t max,
                 char *why, size_t wl)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (s[i] == ',' || s[i] == ' ' || s[i] == '\t') {
            i++;
            continue;
        }
        size_t b = i;
        while (i < len && s[i] != ',' && s[i] != ' ' && s[i] != '\t')
            i++;
        if (!feature_name_ok(s + b, i - b)) {
            snprintf(why, wl,
                     "feature '%.*s': a name is 1 to %u letters, digits and _.+- (no other "
                     "characters)",
                     (int)(i - b > 64 ? 64 : i - b), s + b, FEATURE_NAME_MAX);
            return -1;
        }
        if (n == max) {
            snprintf(why, wl, "more than %u features", FEATURES_MAX);
            return -1;
        }
        memcpy(buf[n], s + b, i - b);
        buf[n][i - b] = '\0';
        n++;
    }
    return (int)n;
}

int features_norm(const char *s, size_t len, char *out, size_t cap, char *why, size_t wl)
{
    char(*buf)[FEATURE_NAME_MAX + 1] = malloc(FEATURES_MAX * sizeof *buf);
    char *v[FEATURES_MAX];
    int rc = -1;
    if (!buf) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    int n = split(s, len, buf, FEATURES_MAX, why, wl);
    if (n >= 0) {
        for (int i = 0; i < n; i++)
            v[i] = buf[i];
        rc = join_sorted(v, (size_t)n, out, cap);
        if (rc < 0)
            snprintf(why, wl, "feature list too long");
    }
    free(buf);
    return rc;
}

int features_union(char *acc, size_t cap, const char *add)
{
    size_t la = strlen(acc), lb = strlen(add);
    char *tmp = malloc(la + lb + 2), *out = malloc(cap ? cap : 1);
    char **v = malloc((la + lb + 2) * sizeof *v); /* a name takes a byte at least */
    int rc = -1;
    if (!tmp || !out || !v)
        goto done;
    memcpy(tmp, acc, la);
    tmp[la] = ',';
    memcpy(tmp + la + 1, add, lb + 1);
    size_t n = 0;
    char *save = NULL;
    for (char *p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save))
        v[n++] = p;
    if (join_sorted(v, n, out, cap) == 0) {
        memcpy(acc, out, strlen(out) + 1);
        rc = 0;
    }
done:
    free(v);
    free(tmp);
    free(out);
    return rc;
}

int constraint_counts(const char *c, struct constraint_count *v, size_t max)
{
    if (!c || !*c)
        return 0;
    struct rd r = {.s = c, .len = strlen(c), .feat = "", .cv = v, .cmax = max};
    bool val;
    if (!rd_all(&r, &val))
        return -1;
    return (int)r.cn;
}

uint32_t constraint_hosts_min(const char *c)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    int n = constraint_counts(c, v, CONSTRAINT_NAMES_MAX);
    uint32_t m = 0;
    for (int i = 0; i < n; i++)
        m = v[i].n > m ? v[i].n : m;
    return m;
}

bool constraint_counts_met(const char *c, const char *const *f, const uint32_t *w, size_t n)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    int k = constraint_counts(c, v, CONSTRAINT_NAMES_MAX);
    if (k < 0)
        return false;
    for (int i = 0; i < k; i++) {
        uint64_t have = 0;
        size_t l = strlen(v[i].name);
        for (size_t h = 0; h < n && have < v[i].n; h++)
            if (f[h] && list_has(f[h], v[i].name, l))
                have += w ? w[h] : 1;
        if (have < v[i].n)
            return false;
    }
    return true;
}

int constraint_plain(const char *c, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = c ? c : ""; *p; p++) {
        if (*p == '*') { /* drop "*N" */
            while (p[1] >= '0' && p[1] <= '9')
                p++;
            continue;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = *p;
    }
    if (!cap)
        return -1;
    out[o] = '\0';
    return 0;
}

int constraint_job_ok(const char *c, bool parallel, uint64_t hosts_max, char *why, size_t wl)
{
    uint32_t m = constraint_hosts_min(c);
    if (!m)
        return 0;
    if (!parallel)
        snprintf(why, wl,
                 "constraint %.200s: a count (NAME*N) asks for N hosts and a task runs on one: "
                 "submit a parallel job (submit -p) or drop the count",
                 c);
    else if (m > hosts_max)
        snprintf(why, wl,
                 "constraint %.200s: a count asks for %u hosts, the job spans at most %llu "
                 "(one process per host at least): ask for more processes or a smaller count",
                 c, m, (unsigned long long)hosts_max);
    else
        return 0;
    return -1;
}

bool features_has(const char *list, const char *name)
{
    return list_has(list, name, strlen(name));
}

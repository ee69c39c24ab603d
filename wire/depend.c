/*
 * depend.c - job dependencies (issue 27): the parser of Slurm's --dependency
 * vocabulary, its canonical text and the evaluation of the terms against what a role
 * knows of the jobs they name (wire/depend.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/depend.h"

static const char *const type_names[] = {"after", "afterany", "afterok", "afternotok", "singleton"};

static int type_parse(const char *s, size_t n)
{
    for (int i = 0; i < 5; i++)
        if (strlen(type_names[i]) == n && !memcmp(type_names[i], s, n))
            return i;
    return -1;
}

static int push(struct depend *d, uint8_t type, uint64_t id)
{
    if (d->n >= DEPEND_TERMS_MAX)
        return -1;
    struct dep_term *g = realloc(d->t, (d->n + 1) * sizeof *g);
    if (!g)
        return -1;
    d->t = g;
    d->t[d->n++] = (struct dep_term){type, 0, id};
    return 0;
}

/* A job id: decimal digits only, 1 .. 2^63-1. */
static int id_parse(const char *s, size_t n, uint64_t *id)
{
    uint64_t v = 0;
    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v == 0 || v > INT64_MAX)
        return -1;
    *id = v;
    return 0;
}

/* One term (s, n) into d: 0, or -1 with why. */
static int term_parse(const char *s, size_t n, struct depend *d, char *why, size_t wl)
{
    const char *colon = memchr(s, ':', n);
    size_t tl = colon ? (size_t)(colon - s) : n;
    int type = type_parse(s, tl);
    int shown = n > 64 ? 64 : (int)n;
    if (n == 0) {
        snprintf(why, wl, "dependency has an empty term (terms are joined by , or ?)");
        return -1;
    }
    if (type < 0) {
        snprintf(why, wl,
                 "dependency term '%.*s': unknown type '%.*s' (use after, afterany, afterok, "
                 "afternotok or singleton)",
                 shown, s, (int)(tl > 32 ? 32 : tl), s);
        return -1;
    }
    if (type == DEP_SINGLETON) {
        if (colon) {
            snprintf(why, wl, "dependency term '%.*s': singleton takes no job id", shown, s);
            return -1;
        }
        return push(d, DEP_SINGLETON, 0) < 0
                   ? (snprintf(why, wl, "dependency has too many terms"), -1)
                   : 0;
    }
    if (!colon) {
        snprintf(why, wl, "dependency term '%.*s': %s needs a job id (%s:ID[:ID...])", shown, s,
                 type_names[type], type_names[type]);
        return -1;
    }
    for (const char *p = colon + 1, *end = s + n; p <= end;) {
        const char *q = memchr(p, ':', (size_t)(end - p));
        if (!q)
            q = end;
        uint64_t id;
        if (id_parse(p, (size_t)(q - p), &id) < 0) {
            snprintf(why, wl,
                     "dependency term '%.*s': '%.*s' is not a job id (a positive whole number; "
                     "time offsets such as +5 are not supported)",
                     shown, s, (int)((size_t)(q - p) > 24 ? 24 : q - p), p);
            return -1;
        }
        if (push(d, (uint8_t)type, id) < 0) {
            snprintf(why, wl, "dependency has more than %u job ids", DEPEND_TERMS_MAX);
            return -1;
        }
        p = q + 1;
    }
    return 0;
}

int depend_parse(const char *s, size_t len, struct depend *d, char *why, size_t wl)
{
    memset(d, 0, sizeof *d);
    if (len == 0) {
        snprintf(why, wl, "dependency is empty (leave it out for none)");
        return -1;
    }
    if (len > DEPEND_LEN_MAX || memchr(s, 0, len)) {
        snprintf(why, wl, "dependency must be text of at most %u bytes", DEPEND_LEN_MAX);
        return -1;
    }
    bool comma = memchr(s, ',', len) != NULL, any = memchr(s, '?', len) != NULL;
    if (comma && any) {
        snprintf(why, wl, "dependency joins terms with both , (all) and ? (any): use one of them");
        return -1;
    }
    d->any = any;
    const char *end = s + len;
    for (const char *p = s; p <= end;) {
        const char *q = p;
        while (q < end && *q != ',' && *q != '?')
            q++;
        if (term_parse(p, (size_t)(q - p), d, why, wl) < 0) {
            depend_free(d);
            return -1;
        }
        p = q + 1;
    }
    return 0;
}

void depend_free(struct depend *d)
{
    free(d->t);
    d->t = NULL;
    d->n = 0;
}

void depend_term_text(const struct depend *d, uint32_t k, char *buf, size_t len)
{
    const struct dep_term *t = &d->t[k];
    if (t->type == DEP_SINGLETON)
        snprintf(buf, len, "singleton");
    else
        snprintf(buf, len, "%s:%llu", type_names[t->type], (unsigned long long)t->id);
}

void depend_format(const struct depend *d, char *buf, size_t len)
{
    size_t off = 0;
    int prev = -1; /* type of the last term written */
    if (len)
        buf[0] = 0;
    for (uint32_t k = 0; k < d->n && off < len; k++) {
        const struct dep_term *t = &d->t[k];
        int w;
        if (t->done)
            continue;
        /* TYPE:1:2 reads back as its terms joined by ',': under '?' each is written out */
        if (t->type != DEP_SINGLETON && t->type == prev && !d->any)
            w = snprintf(buf + off, len - off, ":%llu", (unsigned long long)t->id);
        else if (t->type == DEP_SINGLETON)
            w = snprintf(buf + off, len - off, "%ssingleton", off ? (d->any ? "?" : ",") : "");
        else
            w = snprintf(buf + off, len - off, "%s%s:%llu", off ? (d->any ? "?" : ",") : "",
                         type_names[t->type], (unsigned long long)t->id);
        prev = t->type;
        off += w > 0 ? (size_t)w : 0;
    }
}

bool depend_has_singleton(const struct depend *d)
{
    for (uint32_t k = 0; k < d->n; k++)
        if (d->t[k].type == DEP_SINGLETON && !d->t[k].done)
            return true;
    return false;
}

int depend_unknown(const struct depend *d, dep_lookup_fn fn, void *arg)
{
    for (uint32_t k = 0; k < d->n; k++) {
        const char *shown = NULL;
        if (d->t[k].type != DEP_SINGLETON && fn(arg, d->t[k].id, &shown) == DJ_UNKNOWN)
            return (int)k;
    }
    return -1;
}

/* One term: DEP_MET, DEP_WAIT or DEP_NEVER (cause then in why). */
static enum dep_verdict term_eval(const struct dep_term *t, dep_lookup_fn fn, void *arg,
                                  bool blocked, char *cause, size_t cl)
{
    const char *shown = NULL;
    if (t->type == DEP_SINGLETON)
        return blocked ? DEP_WAIT : DEP_MET;
    enum dep_job s = fn(arg, t->id, &shown);
    bool ended = s == DJ_OK || s == DJ_NOTOK || s == DJ_UNKNOWN;
    switch (t->type) {
    case DEP_AFTER:
        return s == DJ_PENDING ? DEP_WAIT : DEP_MET;
    case DEP_AFTERANY:
        return ended ? DEP_MET : DEP_WAIT;
    default: /* afterok, afternotok */
        if (!ended)
            return DEP_WAIT;
        if (s == (t->type == DEP_AFTEROK ? DJ_OK : DJ_NOTOK))
            return DEP_MET;
        if (s == DJ_UNKNOWN)
            snprintf(cause, cl, "job %llu was purged: its outcome is no longer known",
                     (unsigned long long)t->id);
        else
            snprintf(cause, cl, "job %llu %s", (unsigned long long)t->id,
                     shown ? shown : (s == DJ_OK ? "succeeded" : "failed"));
        return DEP_NEVER;
    }
}

enum dep_verdict depend_eval(struct depend *d, dep_lookup_fn fn, void *arg, bool singleton_blocked,
                             bool *changed, char *why, size_t wl)
{
    int first_wait = -1, first_never = -1;
    uint32_t open = 0;
    char cause[96] = "", c1[96] = "";
    if (wl)
        why[0] = 0;
    for (uint32_t k = 0; k < d->n; k++) {
        struct dep_term *t = &d->t[k];
        if (t->done)
            continue;
        enum dep_verdict v = term_eval(t, fn, arg, singleton_blocked, cause, sizeof cause);
        if (v == DEP_MET && d->any) {
            *changed = true;
            return DEP_MET;
        }
        if (v == DEP_MET && t->type != DEP_SINGLETON) { /* a singleton holds only now */
            t->done = 1;
            *changed = true;
        } else if (v == DEP_NEVER) {
            if (first_never < 0) {
                first_never = (int)k;
                memcpy(c1, cause, sizeof c1);
            }
            if (d->any) { /* it can no longer help */
                t->done = 1;
                *changed = true;
            }
        } else if (v == DEP_WAIT) {
            open++;
            if (first_wait < 0)
                first_wait = (int)k;
        }
    }
    char term[48];
    if (first_never >= 0 && (!d->any || open == 0)) {
        depend_term_text(d, (uint32_t)first_never, term, sizeof term);
        snprintf(why, wl, "%s (%s)", term, c1);
        return DEP_NEVER;
    }
    if (first_wait < 0 && d->any) { /* every term decided earlier as never holding */
        snprintf(why, wl, "no term can hold any more");
        return DEP_NEVER;
    }
    if (first_wait < 0)
        return DEP_MET;
    return DEP_WAIT; /* why stays "": a waiting job's reason is built when shown */
}

/* config.c - INI + --set configuration over a key table (see config.h). */
#include "lib/config.h"

#include <errno.h>
#include <stdbool.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At most this many errors are listed; then "... and more". */
#define CONFIG_MAX_ERRORS 20

struct load_ctx {
    const struct config_key *keys;
    void *cfg;
    unsigned char *seen;
    char why[400]; /* the last handler error, without its location */
    int failed;
    /* the file being read, line by line (reader): every error is listed, each with its
     * line, so that one --check-config shows all that is wrong with the file */
    FILE *f;
    const char *file;
    int line;      /* of the text the reader gave last */
    bool at_start; /* the next read starts a line (a line over inih's 200 bytes comes
                    * in pieces) */
    bool expect;   /* that line is "key = value" text: the handler must see it */
    bool handled;  /* the handler ran for it */
    char *err;     /* the list: one "FILE:LINE: message" a line */
    size_t el;
    int nerr;
};

static const struct config_key *find_key(const struct config_key *keys, const char *section,
                                         const char *name, int *index)
{
    for (int i = 0; keys[i].name; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].name, name)) {
            *index = i;
            return &keys[i];
        }
    return NULL;
}

static int enum_index(const char *choices, const char *value)
{
    size_t vl = strlen(value);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == vl && !strncmp(p, value, n))
            return i;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

/* Parses value for key k into cfg; 0, or -1 with why in err. */
static int set_value(const struct config_key *k, void *cfg, const char *value, char *err, size_t el)
{
    char *base = (char *)cfg + k->offset, *end;
    switch (k->type) {
    case CONFIG_STR:
        if (strlen(value) > CONFIG_VALUE_MAX) { /* so that printed files read back */
            snprintf(err, el, "value longer than %d bytes", CONFIG_VALUE_MAX);
            return -1;
        }
        strcpy(base, value);
        return 0;
    case CONFIG_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1"))
            *(int *)base = 1;
        else if (!strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "0"))
            *(int *)base = 0;
        else {
            snprintf(err, el, "'%s' is not a boolean (true/false)", value);
            return -1;
        }
        return 0;
    case CONFIG_ENUM: {
        int i = enum_index(k->choices, value);
        if (i < 0) {
            snprintf(err, el, "'%s' is not one of %s", value, k->choices);
            return -1;
        }
        *(int *)base = i;
        return 0;
    }
    case CONFIG_INT: {
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end) {
            snprintf(err, el, "'%s' is not an integer%s", value,
                     errno == ERANGE ? " in range" : "");
            return -1;
        }
        if (k->min != k->max && ((double)v < k->min || (double)v > k->max)) {
            snprintf(err, el, "%s is out of range [%.0f, %.0f]", value, k->min, k->max);
            return -1;
        }
        *(long *)base = v;
        return 0;
    }
    case CONFIG_DOUBLE: {
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(d)) {
            snprintf(err, el, "'%s' is not a number", value);
            return -1;
        }
        if (k->min != k->max && (d < k->min || d > k->max)) {
            snprintf(err, el, "%s is out of range [%g, %g]", value, k->min, k->max);
            return -1;
        }
        *(double *)base = d;
        return 0;
    }
    }
    return -1;
}

/*
 * A named section "[kind NAME]" (e.g. "[project seti]") is read by the role itself; the
 * table lists its keys under the section "kind *" so that a misspelt key is still an
 * error. True when section is such a section and name one of its keys.
 */
static bool named_key(const struct config_key *keys, const char *section, const char *name)
{
    const char *sp = strchr(section, ' ');
    if (!sp || sp == section || !sp[1])
        return false;
    for (int i = 0; keys[i].name; i++) {
        size_t kl = strlen(keys[i].section);
        if (kl == (size_t)(sp - section) + 2 && !strncmp(keys[i].section, section, kl - 1) &&
            keys[i].section[kl - 1] == '*' && !strcmp(keys[i].name, name))
            return true;
    }
    return false;
}

/* Adds "WHERE:LINE: MSG" (LINE 0: "WHERE: MSG") to the error list of c, one a line. */
static void add_error(struct load_ctx *c, const char *where, int line, const char *msg)
{
    size_t used = strlen(c->err);
    const char *sep = used ? "\n" : "";
    if (++c->nerr > CONFIG_MAX_ERRORS) {
        if (c->nerr == CONFIG_MAX_ERRORS + 1 && used < c->el)
            snprintf(c->err + used, c->el - used, "%s... and more errors", sep);
        return;
    }
    if (used >= c->el)
        return;
    if (line > 0)
        snprintf(c->err + used, c->el - used, "%s%s:%d: %s", sep, where, line, msg);
    else
        snprintf(c->err + used, c->el - used, "%s%s: %s", sep, where, msg);
}

/* The line the reader gave before: "key = value" text the handler never saw is one
 * inih could not parse. */
static void check_line(struct load_ctx *c)
{
    if (c->expect && !c->handled)
        add_error(c, c->file, c->line, "syntax error (expected 'key = value' or '[section]')");
    c->expect = c->handled = false;
}

/* inih's reader (fgets over c->f), counting lines and classifying each as inih will. */
static char *read_line(char *buf, int n, void *stream)
{
    struct load_ctx *c = stream;
    if (!c->at_start) { /* the rest of a long line: inih parses it as a line of its own */
        char *r = fgets(buf, n, c->f);
        c->at_start = !r || strchr(buf, '\n') != NULL;
        return r;
    }
    check_line(c);
    if (!fgets(buf, n, c->f))
        return NULL;
    c->line++;
    c->at_start = strchr(buf, '\n') != NULL || feof(c->f);
    if (!c->at_start)
        add_error(c, c->file, c->line, "line longer than 200 bytes");
    const char *p = buf;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (*p == '[' && !strchr(p, ']'))
        add_error(c, c->file, c->line, "syntax error (a '[section' without ']')");
    else if (*p && *p != ';' && *p != '#' && *p != '[')
        c->expect = true;
    return buf;
}

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *c = user;
    int idx;
    char why[300];
    c->handled = true;
    if (named_key(c->keys, section, name))
        return 1; /* the role parses named sections itself */
    const struct config_key *k = find_key(c->keys, section, name, &idx);
    if (!k)
        snprintf(c->why, sizeof c->why, "unknown key [%s] %s", section, name);
    else if (c->seen[idx])
        snprintf(c->why, sizeof c->why, "key [%s] %s given twice", section, name);
    else if (set_value(k, c->cfg, value, why, sizeof why) < 0)
        snprintf(c->why, sizeof c->why, "[%s] %s: %s", section, name, why);
    else
        return c->seen[idx] = 1;
    c->failed = 1;
    if (c->f)
        add_error(c, c->file, c->line, c->why);
    return 0;
}

int config_load(const struct config_key *keys, void *cfg, const char *file, char *const *sets,
                int nsets, char *err, size_t el)
{
    int n = 0;
    char why[200];
    while (keys[n].name)
        n++;
    for (int i = 0; i < n; i++)
        if (!strstr(keys[i].section, " *") && /* named sections: the role's */
            set_value(&keys[i], cfg, keys[i].dflt, why, sizeof why) < 0) {
            snprintf(err, el, "internal: bad default for %s.%s: %s", keys[i].section, keys[i].name,
                     why);
            return -1;
        }
    struct load_ctx c = {.keys = keys,
                         .cfg = cfg,
                         .seen = calloc((size_t)n + 1, 1),
                         .file = file,
                         .at_start = true,
                         .err = err,
                         .el = el};
    if (!c.seen) {
        snprintf(err, el, "out of memory");
        return -1;
    }
    err[0] = '\0';
    if (file && !(c.f = fopen(file, "r"))) {
        snprintf(err, el, "%s: cannot open: %s", file, strerror(errno));
        free(c.seen);
        return -1;
    }
    if (c.f) {
        /* every line is read, so that every error of the file is listed (inih goes on
         * after an error; its return value names only the first) */
        int line = ini_parse_stream(read_line, &c, on_ini, &c);
        check_line(&c);
        if (line != 0 && c.nerr == 0) /* inih saw one the reader could not tell */
            add_error(&c, file, line, "syntax error");
        fclose(c.f);
        c.f = NULL;
    }
    memset(c.seen, 0, (size_t)n); /* a --set may override a key from the file */
    for (int i = 0; i < nsets; i++) {
        char buf[512], *eq, *dot;
        snprintf(buf, sizeof buf, "%s", sets[i]);
        eq = strchr(buf, '=');
        dot = eq ? memchr(buf, '.', (size_t)(eq - buf)) : NULL;
        if (!eq || !dot) {
            snprintf(buf, sizeof buf, "--set %s", sets[i]);
            add_error(&c, buf, 0, "expected section.key=value");
            continue;
        }
        *eq = *dot = '\0';
        if (!on_ini(&c, buf, dot + 1, eq + 1)) {
            snprintf(buf, sizeof buf, "--set %s", sets[i]);
            add_error(&c, buf, 0, c.why);
        }
    }
    free(c.seen);
    return c.nerr ? -1 : 0;
}

void config_print(const struct config_key *keys, const void *cfg, FILE *out)
{
    const char *section = NULL;
    for (const struct config_key *k = keys; k->name; k++) {
        const char *base = (const char *)cfg + k->offset;
        size_t sl = strlen(k->section);
        if (sl > 2 && !strcmp(k->section + sl - 2, " *")) { /* a named section's key */
            if (!section || strcmp(section, k->section))
                fprintf(out, "%s; [%.*s NAME] (any number of them)\n", section ? "\n" : "",
                        (int)sl - 2, k->section);
            section = k->section;
            fprintf(out, "; %s = ... : %s (default: %s)\n", k->name, k->help, k->dflt);
            continue;
        }
        if (!section || strcmp(section, k->section)) {
            fprintf(out, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf(out, "; %s (default: %s)\n%s =%s", k->help, k->dflt, k->name,
                k->type == CONFIG_STR && !*base ? "" : " ");
        switch (k->type) {
        case CONFIG_STR:
            fprintf(out, "%s\n", base);
            break;
        case CONFIG_INT:
            fprintf(out, "%ld\n", *(const long *)base);
            break;
        case CONFIG_DOUBLE: {
            /* the shortest form that reads back as the same number */
            double d = *(const double *)base;
            char b[40];
            snprintf(b, sizeof b, "%.15g", d);
            if (strtod(b, NULL) != d)
                snprintf(b, sizeof b, "%.17g", d);
            fprintf(out, "%s\n", b);
            break;
        }
        case CONFIG_BOOL:
            fprintf(out, "%s\n", *(const int *)base ? "true" : "false");
            break;
        case CONFIG_ENUM: {
            int idx = *(const int *)base, i = 0;
            const char *p = k->choices;
            while (i < idx && (p = strchr(p, '|')))
                p++, i++;
            fprintf(out, "%.*s\n", (int)(p ? strcspn(p, "|") : 1), p ? p : "?");
            break;
        }
        }
    }
}

int role_args_parse(int argc, char **argv, struct role_args *ra)
{
    memset(ra, 0, sizeof *ra);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ra->help = 1;
        } else if (!strcmp(a, "--check-config")) {
            ra->check = 1;
        } else if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && i + 1 < argc) {
            ra->config = argv[++i];
        } else if (!strcmp(a, "--set") && i + 1 < argc) {
            if (ra->nsets == CONFIG_MAX_SETS) {
                fprintf(stderr, "too many --set options (at most %d)\n", CONFIG_MAX_SETS);
                return -1;
            }
            ra->sets[ra->nsets++] = argv[++i];
        } else if (!strncmp(a, "--set=", 6) && ra->nsets < CONFIG_MAX_SETS) {
            ra->sets[ra->nsets++] = (char *)a + 6;
        } else {
            ra->extra = a;
            return -1;
        }
    }
    return 0;
}

int config_check_endpoint(const char *key, const char *value, int bind, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!strncmp(value, "tcp://", 6)) {
        const char *hp = value + 6, *colon = strrchr(hp, ':');
        char *end;
        if (!colon || colon == hp)
            why = "a tcp endpoint is tcp://HOST:PORT";
        else if (!strcmp(colon + 1, "*")) {
            if (!bind)
                why = "a port '*' can only be bound, not connected to";
        } else {
            long port = strtol(colon + 1, &end, 10);
            if (*end || colon[1] == '\0' || port < 1 || port > 65535)
                why = "the port must be a number from 1 to 65535";
        }
    } else if (!strncmp(value, "ipc://", 6)) {
        if (!value[6])
            why = "an ipc endpoint is ipc://PATH";
    } else if (!strncmp(value, "inproc://", 9)) {
        if (!value[9])
            why = "an inproc endpoint is inproc://NAME";
    } else {
        why = "expected tcp://HOST:PORT or ipc://PATH";
    }
    if (!why)
        return 0;
    snprintf(err, errlen, "%s = '%s' is not an endpoint: %s", key, value, why);
    return -1;
}

int config_check_log_level(const char *key, const char *value, char *err, size_t errlen)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(value, names[i]))
            return 0;
    snprintf(err, errlen, "%s must be error, warn, info or debug, not '%s'", key, value);
    return -1;
}

int config_check_file(const char *key, const char *path, char *err, size_t errlen)
{
    FILE *f;
    if (!*path)
        return 0;
    if (!(f = fopen(path, "r"))) {
        snprintf(err, errlen, "%s: cannot read '%s': %s", key, path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

int role_configure(const char *role, const char *usage, const struct config_key *keys, void *cfg,
                   int argc, char **argv, config_check_fn check)
{
    struct role_args ra;
    char err[4096];
    if (role_args_parse(argc, argv, &ra) < 0) {
        fprintf(stderr, "gridnode %s: unexpected argument '%s'\n%s", role, ra.extra ? ra.extra : "",
                usage);
        return 2;
    }
    if (ra.help) {
        fputs(usage, stdout);
        printf("\nconfiguration keys (section.key = default):\n");
        for (const struct config_key *k = keys; k->name; k++)
            printf("  %s.%-20s %-24s %s\n", k->section, k->name, k->dflt, k->help);
        return 0;
    }
    if (config_load(keys, cfg, ra.config, ra.sets, ra.nsets, err, sizeof err) < 0 ||
        (check && check(cfg, err, sizeof err) < 0)) {
        /* one line per error (config_load lists every error of the file) */
        for (char *p = err, *nl; *p; p = nl ? nl + 1 : p + strlen(p)) {
            nl = strchr(p, '\n');
            fprintf(stderr, "gridnode %s: configuration error: %.*s\n", role,
                    (int)(nl ? nl - p : (ptrdiff_t)strlen(p)), p);
        }
        return 1;
    }
    if (ra.check) {
        config_print(keys, cfg, stdout);
        return 0;
    }
    return -1;
}

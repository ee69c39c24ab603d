/*
 * emulate_scenario.c - the emulator's scenario file: an INI file (inih) describing the
 * host, the projects and their applications, the client configuration and the run.
 * The keys are described by the table in emulate_keys.c; this file handles sections,
 * the file itself, `--set`, the cross-checks and printing. Errors name the file,
 * line, section and key; duplicate keys and sections, over-long lines and indented
 * lines (which inih would silently join to the previous key) are rejected.
 */
#include "roles/client/emulate/emulate_int.h"
#include "roles/client/emulate/emulate_keys.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define keys emulate_keys
#define NKEYS emulate_nkeys

static int parse_choice(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

/* ---- sections ---- */

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= EMU_NAME_MAX)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_-.", *s))
            return 0;
    return 1;
}

static struct emu_app *app_new(struct emu_scenario *sc, const char *name, const char *project,
                               int line)
{
    if (sc->napps == EMU_MAX_APPS)
        return NULL;
    struct emu_app *a = &sc->apps[sc->napps++];
    memset(a, 0, sizeof *a);
    emulate_keys_defaults(SK_APP, a);
    a->size_est = -1; /* "size_mean" until given */
    strcpy(a->name, name);
    if (project)
        strcpy(a->project_name, project);
    a->line = line;
    return a;
}

/* Finds or creates the struct a section refers to; NULL with a message. */
static void *section_target(struct emu_scenario *sc, int kind, const char *name, int line,
                            uint64_t **seen, char *msg, size_t n)
{
    switch (kind) {
    case SK_EMULATION:
        *seen = &sc->seen_emulation;
        return sc;
    case SK_CLIENT:
        *seen = &sc->seen_client;
        return &sc->cfg;
    case SK_HOST:
        *seen = &sc->seen_host;
        return sc;
    case SK_GPU:
        for (int i = 0; i < sc->ngpus; i++)
            if (!strcmp(sc->gpus[i].name, name))
                return *seen = &sc->gpus[i].seen, &sc->gpus[i];
        if (sc->ngpus == EMU_MAX_GPUS || !strcmp(name, "cpu")) {
            snprintf(msg, n,
                     sc->ngpus == EMU_MAX_GPUS ? "more than %d GPU types"
                                               : "a GPU type cannot be called cpu",
                     EMU_MAX_GPUS);
            return NULL;
        }
        {
            struct emu_gpu *g = &sc->gpus[sc->ngpus++];
            memset(g, 0, sizeof *g);
            emulate_keys_defaults(SK_GPU, g);
            strcpy(g->name, name);
            g->line = line;
            *seen = &g->seen;
            return g;
        }
    case SK_PROJECT:
        for (int i = 0; i < sc->nprojects; i++)
            if (!strcmp(sc->projects[i].name, name))
                return *seen = &sc->projects[i].seen, &sc->projects[i];
        if (sc->nprojects == EMU_MAX_PROJECTS) {
            snprintf(msg, n, "more than %d projects", EMU_MAX_PROJECTS);
            return NULL;
        }
        {
            struct emu_project *p = &sc->projects[sc->nprojects++];
            memset(p, 0, sizeof *p);
            emulate_keys_defaults(SK_PROJECT, p);
            strcpy(p->name, name);
            p->line = line;
            *seen = &p->seen;
            return p;
        }
    case SK_APP:
        for (int i = 0; i < sc->napps; i++)
            if (!strcmp(sc->apps[i].name, name))
                return *seen = &sc->apps[i].seen, &sc->apps[i];
        {
            struct emu_app *a = app_new(sc, name, NULL, line);
            if (!a)
                snprintf(msg, n, "more than %d apps", EMU_MAX_APPS);
            else
                *seen = &a->seen;
            return a;
        }
    }
    return NULL;
}

/* The app defined inside a [project] section (created on its first app key). */
static struct emu_app *project_app(struct emu_scenario *sc, struct emu_project *p, int line,
                                   char *msg, size_t n)
{
    for (int i = 0; i < sc->napps; i++)
        if (!strcmp(sc->apps[i].name, p->name) && !strcmp(sc->apps[i].project_name, p->name))
            return &sc->apps[i];
    struct emu_app *a = app_new(sc, p->name, p->name, line);
    if (!a)
        snprintf(msg, n, "more than %d apps", EMU_MAX_APPS);
    p->has_app = 1;
    return a;
}

/* Splits "project P1" into its kind and name; -1 with a message. */
static int section_parse(const char *section, int *kind, char *name, char *msg, size_t n)
{
    char k[32];
    size_t len = strcspn(section, " \t");
    if (len == 0 || len >= sizeof k) {
        snprintf(msg, n, "unknown section [%s]", section);
        return -1;
    }
    memcpy(k, section, len);
    k[len] = 0;
    const char *rest = section + len;
    while (isspace((unsigned char)*rest))
        rest++;
    if (parse_choice(k, emulate_sec_names, 6, kind)) {
        snprintf(msg, n,
                 "unknown section [%s] (emulation, client, host, gpu NAME, project NAME, "
                 "app NAME)",
                 section);
        return -1;
    }
    int named = *kind == SK_GPU || *kind == SK_PROJECT || *kind == SK_APP;
    if (named && !valid_name(rest)) {
        snprintf(msg, n, "[%s] needs a name of letters, digits, '_', '-' or '.'", section);
        return -1;
    }
    if (!named && *rest) {
        snprintf(msg, n, "[%s] takes no name", k);
        return -1;
    }
    strcpy(name, named ? rest : "");
    return 0;
}

/* Applies key=value in section (kind, name); dup: reject keys already given. */
static int set_key(struct emu_scenario *sc, const char *section, const char *key, const char *value,
                   int line, int dup, char *msg, size_t n)
{
    int kind;
    char name[EMU_NAME_MAX];
    uint64_t *seen = NULL;
    if (section_parse(section, &kind, name, msg, n))
        return -1;
    void *base = section_target(sc, kind, name, line, &seen, msg, n);
    if (!base)
        return -1;
    for (size_t i = 0; i < NKEYS; i++) {
        const struct emu_key *k = &keys[i];
        int app_key_in_project = kind == SK_PROJECT && k->sec == SK_APP;
        if (strcmp(k->name, key) || (k->sec != kind && !app_key_in_project))
            continue;
        if (app_key_in_project && !strcmp(key, "project"))
            break;
        void *target = base;
        if (app_key_in_project) {
            struct emu_app *a = project_app(sc, base, line, msg, n);
            if (!a)
                return -1;
            target = a;
            seen = &a->seen;
        }
        if (dup && (*seen >> i) & 1) {
            snprintf(msg, n, "[%s] %s: duplicate key", section, key);
            return -1;
        }
        char why[256];
        if (emulate_key_apply(k, target, value, why, sizeof why)) {
            snprintf(msg, n, "[%s] %s: %s", section, key, why);
            return -1;
        }
        *seen |= 1ULL << i;
        return 0;
    }
    snprintf(msg, n, "[%s]: unknown key '%s'", section, key);
    return -1;
}

/* ---- the file ---- */

struct reader {
    FILE *f;
    int line;
    int bad_line;
    char bad[160];
    char *buf;
    size_t cap;
};

/* inih's line source: counts lines (inih r55 does not pass them to the handler) and
 * blanks out lines inih would mis-parse, recording the first as an error. */
static char *read_line(char *str, int num, void *stream)
{
    struct reader *r = stream;
    ssize_t len = getline(&r->buf, &r->cap, r->f);
    if (len < 0)
        return NULL;
    r->line++;
    const char *why = NULL;
    char tmp[80];
    if (len > num - 3) {
        snprintf(tmp, sizeof tmp, "line longer than %d characters", num - 3);
        why = tmp;
    } else if (r->buf[0] == ' ' || r->buf[0] == '\t') {
        const char *p = r->buf + strspn(r->buf, " \t\r\n");
        if (*p && *p != ';' && *p != '#')
            why = "indented line: keys and sections must start in the first column";
    }
    if (why) {
        if (!r->bad_line) {
            r->bad_line = r->line;
            snprintf(r->bad, sizeof r->bad, "%s", why);
        }
        strcpy(str, "\n");
        return str;
    }
    memcpy(str, r->buf, (size_t)len + 1);
    return str;
}

struct parse_ctx {
    struct emu_scenario *sc;
    struct reader *rd;
    int err_line;
    char err[512];
    char cur[128];
    char opened[EMU_MAX_PROJECTS + EMU_MAX_APPS + 16][128];
    int nopened;
};

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *cx = user;
    int line = cx->rd->line;
    if (cx->err_line)
        return 1; /* keep the first error only */
    if (strcmp(section, cx->cur) != 0) {
        for (int i = 0; i < cx->nopened; i++)
            if (!strcmp(cx->opened[i], section)) {
                snprintf(cx->err, sizeof cx->err, "section [%s] appears twice", section);
                cx->err_line = line;
                return 0;
            }
        if (strlen(section) >= sizeof cx->cur ||
            cx->nopened == (int)(sizeof cx->opened / sizeof cx->opened[0])) {
            snprintf(cx->err, sizeof cx->err, "too many sections or section name too long");
            cx->err_line = line;
            return 0;
        }
        strcpy(cx->cur, section);
        strcpy(cx->opened[cx->nopened++], section);
    }
    if (!*section) {
        snprintf(cx->err, sizeof cx->err, "key '%s' outside any section", name);
        cx->err_line = line;
        return 0;
    }
    if (set_key(cx->sc, section, name, value, line, 1, cx->err, sizeof cx->err)) {
        cx->err_line = line;
        return 0;
    }
    return 1;
}

void emulate_scenario_init(struct emu_scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    engine_config_defaults(&sc->cfg);
    emulate_keys_defaults(SK_EMULATION, sc);
    emulate_keys_defaults(SK_CLIENT, &sc->cfg);
    emulate_keys_defaults(SK_HOST, sc);
}

int emulate_scenario_load(struct emu_scenario *sc, const char *path, char *err, size_t errlen)
{
    struct reader rd = {0};
    rd.f = fopen(path, "r");
    if (!rd.f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(sc->path, sizeof sc->path, "%s", path);
    struct parse_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) {
        fclose(rd.f);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    cx->sc = sc;
    cx->rd = &rd;
    int rc = ini_parse_stream(read_line, &rd, handler, cx);
    int ferr = ferror(rd.f);
    fclose(rd.f);
    free(rd.buf);
    /* report whichever problem comes first in the file */
    int line = 0;
    const char *msg = NULL;
    if (cx->err_line) {
        line = cx->err_line;
        msg = cx->err;
    }
    if (rd.bad_line && (!line || rd.bad_line < line)) {
        line = rd.bad_line;
        msg = rd.bad;
    }
    if (rc > 0 && (!line || rc < line)) {
        line = rc;
        msg = "syntax error: expected [section], key = value or a comment";
    }
    if (ferr)
        snprintf(err, errlen, "%s: read error", path);
    else if (rc < 0)
        snprintf(err, errlen, "%s: cannot parse (out of memory)", path);
    else if (msg)
        snprintf(err, errlen, "%s:%d: %s", path, line, msg);
    free(cx);
    return ferr || rc < 0 || msg ? -1 : 0;
}

int emulate_scenario_set(struct emu_scenario *sc, const char *assignment, char *err, size_t errlen)
{
    char buf[1024];
    if (strlen(assignment) >= sizeof buf) {
        snprintf(err, errlen, "--set %.40s...: too long", assignment);
        return -1;
    }
    strcpy(buf, assignment);
    char *eq = strchr(buf, '=');
    char *dot = NULL;
    for (char *p = buf; eq && p < eq; p++)
        if (*p == '.')
            dot = p;
    if (!eq || !dot) {
        snprintf(err, errlen, "--set %s: expected section.key=value", assignment);
        return -1;
    }
    *eq = 0;
    *dot = 0;
    char msg[512];
    if (set_key(sc, buf, dot + 1, eq + 1, 0, 0, msg, sizeof msg)) {
        snprintf(err, errlen, "--set %s: %s", assignment, msg);
        return -1;
    }
    return 0;
}

/* ---- checking ---- */

static int given(uint64_t seen, int sec, const char *name)
{
    int i = emulate_key_index(sec, name);
    return i >= 0 && ((seen >> i) & 1);
}

static int check_app(struct emu_scenario *sc, struct emu_app *a, char *err, size_t n)
{
    const char *f = sc->path;
    if (!a->project_name[0]) {
        snprintf(err, n, "%s:%d: [app %s]: project is required", f, a->line, a->name);
        return -1;
    }
    a->project = -1;
    for (int p = 0; p < sc->nprojects; p++)
        if (!strcmp(sc->projects[p].name, a->project_name))
            a->project = p;
    if (a->project < 0) {
        snprintf(err, n, "%s:%d: [app %s]: project '%s' is not defined", f, a->line, a->name,
                 a->project_name);
        return -1;
    }
    a->ptype = -1;
    int ninst = 0;
    if (!strcmp(a->type, "cpu")) {
        a->ptype = 0;
        ninst = sc->cpus;
    }
    for (int g = 0; g < sc->ngpus; g++)
        if (!strcmp(sc->gpus[g].name, a->type)) {
            a->ptype = g + 1;
            ninst = sc->gpus[g].count;
        }
    if (a->ptype < 0) {
        snprintf(err, n, "%s:%d: [app %s]: type '%s' is neither cpu nor a [gpu NAME]", f, a->line,
                 a->name, a->type);
        return -1;
    }
    if (!given(a->seen, SK_APP, "size_mean") || !given(a->seen, SK_APP, "deadline")) {
        snprintf(err, n, "%s:%d: [app %s]: size_mean and deadline are required", f, a->line,
                 a->name);
        return -1;
    }
    if (a->usage > ninst) {
        snprintf(err, n, "%s:%d: [app %s]: usage %g exceeds the %d %s instance(s)", f, a->line,
                 a->name, a->usage, ninst, a->type);
        return -1;
    }
    if (a->size_est < 0)
        a->size_est = a->size_mean;
    return 0;
}

int emulate_scenario_check(struct emu_scenario *sc, char *err, size_t n)
{
    const char *f = sc->path[0] ? sc->path : "scenario";
    if (!given(sc->seen_host, SK_HOST, "cpus")) {
        snprintf(err, n, "%s: [host] cpus is required", f);
        return -1;
    }
    const char *why = engine_config_check(&sc->cfg);
    if (why) {
        snprintf(err, n, "%s: [client]: %s", f, why);
        return -1;
    }
    for (int g = 0; g < sc->ngpus; g++)
        if (!given(sc->gpus[g].seen, SK_GPU, "count")) {
            snprintf(err, n, "%s:%d: [gpu %s]: count is required", f, sc->gpus[g].line,
                     sc->gpus[g].name);
            return -1;
        }
    if (sc->nprojects == 0) {
        snprintf(err, n, "%s: no [project NAME] section", f);
        return -1;
    }
    for (int a = 0; a < sc->napps; a++)
        if (check_app(sc, &sc->apps[a], err, n))
            return -1;
    for (int p = 0; p < sc->nprojects; p++) {
        int apps = 0;
        for (int a = 0; a < sc->napps; a++)
            apps += sc->apps[a].project == p;
        if (!apps) {
            snprintf(err, n,
                     "%s:%d: [project %s] has no application: give size_mean and "
                     "deadline, or add an [app NAME] with project = %s",
                     f, sc->projects[p].line, sc->projects[p].name, sc->projects[p].name);
            return -1;
        }
    }
    if (sc->cpus == 0 && sc->ngpus == 0) {
        snprintf(err, n, "%s: the host has no processors", f);
        return -1;
    }
    return 0;
}

void emulate_scenario_print(const struct emu_scenario *sc, FILE *out)
{
    fprintf(out, "; effective scenario (times in seconds)\n[emulation]\n");
    emulate_section_print(SK_EMULATION, sc, out);
    fprintf(out, "\n[client]\n");
    emulate_section_print(SK_CLIENT, &sc->cfg, out);
    fprintf(out, "\n[host]\n");
    emulate_section_print(SK_HOST, sc, out);
    for (int g = 0; g < sc->ngpus; g++) {
        fprintf(out, "\n[gpu %s]\n", sc->gpus[g].name);
        emulate_section_print(SK_GPU, &sc->gpus[g], out);
    }
    for (int p = 0; p < sc->nprojects; p++) {
        fprintf(out, "\n[project %s]\n", sc->projects[p].name);
        emulate_section_print(SK_PROJECT, &sc->projects[p], out);
    }
    for (int a = 0; a < sc->napps; a++) {
        fprintf(out, "\n[app %s]\n", sc->apps[a].name);
        emulate_section_print(SK_APP, &sc->apps[a], out);
    }
}

void emulate_scenario_help(FILE *out)
{
    static const char *const titles[] = {"[emulation]",
                                         "[client]  (the engine's configuration)",
                                         "[host]",
                                         "[gpu NAME]  (one per GPU type)",
                                         ("[project NAME]  (also takes the [app] keys below, "
                                          "defining one app named after the project)"),
                                         "[app NAME]  (more applications of a project)"};
    for (int s = SK_EMULATION; s <= SK_APP; s++) {
        fprintf(out, "\n%s\n", titles[s]);
        for (size_t i = 0; i < emulate_nkeys; i++)
            if (emulate_keys[i].sec == s)
                fprintf(out, "  %-21s %-10s %s\n", emulate_keys[i].name,
                        emulate_keys[i].dflt
                            ? (*emulate_keys[i].dflt ? emulate_keys[i].dflt : "(none)")
                            : "(required)",
                        emulate_keys[i].help);
    }
}

/*
 * submit_env.c - `gridnode submit --export=ALL|NONE|VAR[,VAR=value...]` and `--chdir DIR`
 * (issue 15, like sbatch's --export and -D): the environment and working directory the
 * job's tasks start with (docs/wire.md 6.1 "env", "chdir"; the node applies them in
 * roles/client/live/runner.c).
 *
 * Decisions (docs/wire.md 6.1):
 * - without --export the tasks get the node client's environment, as before (not Slurm's
 *   ALL): nodes are other machines, often other people's; the submitter's PATH, HOME or
 *   SSH_AUTH_SOCK mean nothing there, and its variables (tokens, key paths) should not
 *   go to them unasked;
 * - ALL: every variable of the submitter, over the node's environment; NONE: none of
 *   them (the node's environment, the same as no --export, but explicit, for job
 *   scripts); VAR: that variable's value here (skipped when unset, as Slurm does);
 *   VAR=value: that value. They combine: ALL,TMPDIR=/scratch. The last of a name wins.
 *   A value cannot contain ',' (it separates items).
 * - variables whose names are not NAME (letters, digits, _; e.g. bash's exported
 *   functions) are left out of ALL: they cannot be set portably;
 * - at most 64 KiB of "NAME=value" strings (JOBENV_MAX_BYTES), checked here before
 *   anything is sent, and again by every role.
 * - --chdir DIR: a relative DIR is taken relative to the current directory here (as
 *   sbatch -D does), since "relative" means nothing on a node.
 */
#include "cmd/submit_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/jobenv.h"

extern char **environ;

struct envv {
    char **v;
    size_t n, cap;
};

/* Adds (or replaces, by name) "NAME=value" of length l; -1 out of memory. */
static int envv_set(struct envv *e, const char *s, size_t l)
{
    size_t nl = (size_t)((const char *)memchr(s, '=', l) - s);
    char *d = strndup(s, l);
    if (!d)
        return -1;
    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], s, nl + 1)) {
            free(e->v[i]);
            e->v[i] = d;
            return 0;
        }
    if (e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 32;
        char **v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            free(d);
            return -1;
        }
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = d;
    e->v[e->n] = NULL;
    return 0;
}

void submit_env_free(char **env, char *cwd)
{
    for (char **p = env; p && *p; p++)
        free(*p);
    free(env);
    free(cwd);
}

static int build_env(const char *spec, struct envv *e, char *why, size_t n)
{
    bool all = false, none = false;
    for (const char *p = spec;;) {
        size_t l = strcspn(p, ",");
        const char *eq = memchr(p, '=', l);
        size_t nl = eq ? (size_t)(eq - p) : l;
        if (l == 3 && !strncmp(p, "ALL", 3)) {
            all = true;
            for (char **v = environ; v && *v; v++) {
                const char *ve = strchr(*v, '=');
                if (ve && jobenv_name_ok(*v, (size_t)(ve - *v)) && envv_set(e, *v, strlen(*v)) < 0)
                    goto oom;
            }
        } else if (l == 4 && !strncmp(p, "NONE", 4)) {
            none = true;
        } else if (!jobenv_name_ok(p, nl)) {
            snprintf(why, n,
                     "--export: '%.*s' is not ALL, NONE, VAR or VAR=value (a variable name "
                     "has letters, digits and _ and does not start with a digit)",
                     (int)(l > 60 ? 60 : l), p);
            return -1;
        } else if (eq) {
            if (envv_set(e, p, l) < 0)
                goto oom;
        } else {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(nl < 255 ? nl : 255), p);
            const char *v = getenv(name);
            if (v) { /* unset here: left out, as Slurm does */
                size_t vl = strlen(name) + 1 + strlen(v);
                char *s = malloc(vl + 1);
                if (!s)
                    goto oom;
                snprintf(s, vl + 1, "%s=%s", name, v);
                int rc = envv_set(e, s, vl);
                free(s);
                if (rc < 0)
                    goto oom;
            }
        }
        if (!p[l])
            break;
        p += l + 1;
    }
    if (all && none) {
        snprintf(why, n, "--export: ALL and NONE contradict each other");
        return -1;
    }
    return 0;
oom:
    snprintf(why, n, "out of memory");
    return -1;
}

int submit_env_build(const char *spec, const char *dir, char ***env, char **cwd, char *why,
                     size_t n)
{
    struct envv e = {NULL, 0, 0};
    *env = NULL;
    *cwd = NULL;
    if (spec && build_env(spec, &e, why, n) < 0)
        goto fail;
    size_t total = 0;
    for (size_t i = 0; i < e.n; i++)
        total += strlen(e.v[i]) + 1;
    if (total > JOBENV_MAX_BYTES || e.n > JOBENV_MAX_VARS) {
        snprintf(why, n,
                 "--export: the environment has %zu bytes in %zu variables, more than the "
                 "limit of %u bytes (64 KiB) or %u variables; name only the variables the "
                 "tasks need (--export=VAR1,VAR2,...)",
                 total, e.n, JOBENV_MAX_BYTES, JOBENV_MAX_VARS);
        goto fail;
    }
    if (dir) {
        char here[4096];
        if (!*dir) {
            snprintf(why, n, "--chdir needs a directory");
            goto fail;
        }
        if (dir[0] != '/' && !getcwd(here, sizeof here)) {
            snprintf(why, n, "--chdir %s: cannot tell the current directory", dir);
            goto fail;
        }
        size_t l = dir[0] == '/' ? strlen(dir) : strlen(here) + 1 + strlen(dir);
        if (l > JOBENV_CHDIR_MAX) {
            snprintf(why, n, "--chdir: the path has %zu bytes, more than %u", l, JOBENV_CHDIR_MAX);
            goto fail;
        }
        if (!(*cwd = malloc(l + 1)))
            goto fail;
        if (dir[0] == '/')
            snprintf(*cwd, l + 1, "%s", dir);
        else
            snprintf(*cwd, l + 1, "%s/%s", here, dir);
    }
    *env = e.v;
    return 0;
fail:
    submit_env_free(e.v, *cwd);
    *cwd = NULL;
    return -1;
}

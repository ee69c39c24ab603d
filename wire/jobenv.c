/*
 * jobenv.c - checking and copying a job's "env" and "chdir" (jobenv.h).
 */
#include "wire/jobenv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

bool jobenv_name_ok(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

int jobenv_check(const msgpack_object *m, char *why, size_t n)
{
    const msgpack_object *e = wire_get(m, "env");
    size_t total = 0, cl;
    if (e && e->type != MSGPACK_OBJECT_ARRAY) {
        snprintf(why, n, "env must be an array of NAME=value strings");
        return -1;
    }
    for (uint32_t i = 0; e && i < e->via.array.size; i++) {
        const msgpack_object *v = &e->via.array.ptr[i];
        if (v->type != MSGPACK_OBJECT_STR) {
            snprintf(why, n, "env entry %u is not a string", i);
            return -1;
        }
        const char *s = v->via.str.ptr, *eq = memchr(s, '=', v->via.str.size);
        if (!eq || !jobenv_name_ok(s, (size_t)(eq - s)) || memchr(s, '\0', v->via.str.size)) {
            snprintf(why, n,
                     "env entry %u is not NAME=value (a name of letters, digits and _, not "
                     "starting with a digit, and no NUL byte)",
                     i);
            return -1;
        }
        total += v->via.str.size + 1;
    }
    if (total > JOBENV_MAX_BYTES) {
        snprintf(why, n, "the environment has %zu bytes, more than the limit of %u (64 KiB)", total,
                 JOBENV_MAX_BYTES);
        return -1;
    }
    const msgpack_object *d = wire_get(m, "chdir");
    const char *dir = wire_get_str(m, "chdir", &cl);
    if (d && (!dir || cl == 0 || dir[0] != '/' || memchr(dir, '\0', cl) || cl > JOBENV_CHDIR_MAX)) {
        snprintf(why, n, "chdir must be an absolute path of at most %u bytes", JOBENV_CHDIR_MAX);
        return -1;
    }
    return 0;
}

void jobenv_free(char **env)
{
    for (char **p = env; p && *p; p++)
        free(*p);
    free(env);
}

char **jobenv_dup(const msgpack_object *m, uint32_t *count, int *oom)
{
    const msgpack_object *e = wire_get(m, "env");
    *count = 0;
    *oom = 0;
    if (!e || e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0)
        return NULL;
    char **v = calloc((size_t)e->via.array.size + 1, sizeof *v);
    for (uint32_t i = 0; v && i < e->via.array.size; i++) {
        const msgpack_object *s = &e->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR)
            continue;
        if (!(v[*count] = strndup(s->via.str.ptr, s->via.str.size))) {
            jobenv_free(v);
            v = NULL;
            break;
        }
        (*count)++;
    }
    if (!v) {
        *count = 0;
        *oom = 1;
    }
    return v;
}

uint32_t jobenv_put(struct wire_buf *wb, char *const *env, const char *cwd)
{
    uint32_t n = 0, k = 0;
    while (env && env[n])
        n++;
    if (n > 0) {
        if (wb)
            wire_put_strv(wb, "env", env, n);
        k++;
    }
    if (cwd && *cwd) {
        if (wb)
            wire_put_str(wb, "chdir", cwd);
        k++;
    }
    return k;
}

/*
 * subkey.c - idempotent submission (issue #8 item 9). A tool may send a request key
 * ("key") with SUBMIT or PSUBMIT; the cluster keeps it in the job's record, so the key
 * is as durable as the job and forgotten with it. A later SUBMIT or PSUBMIT with the
 * same key from the same user gets the first job's SUBMITTED reply again instead of a
 * new job, also across a restart. Keys are scoped per user ("user" field, "" if absent):
 * two users may pick the same key. The key alone identifies the request: a retry whose
 * other fields differ still gets the first job (as an idempotency token, not a content
 * hash). Lookup is a scan of the jobs in memory, newest first, which also sees jobs
 * submitted earlier in the same turn (not committed yet).
 */
#include <string.h>

#include "roles/cluster/scored_int.h"

static bool same(const char *a, const char *b, size_t bn)
{
    return a && strlen(a) == bn && !memcmp(a, b, bn);
}

const char *subkey_invalid(const msgpack_object *m)
{
    size_t kn;
    const char *k = wire_get_str(m, "key", &kn);
    if (!k)
        return NULL;
    if (kn == 0)
        return "key, when given, must not be empty";
    if (memchr(k, 0, kn))
        return "key must not contain NUL bytes";
    return NULL;
}

struct job *subkey_find_job(struct cluster *c, const msgpack_object *m)
{
    size_t kn, un = 0;
    const char *k = wire_get_str(m, "key", &kn), *u = wire_get_str(m, "user", &un);
    if (!k || !kn)
        return NULL;
    for (uint32_t i = c->njobs; i > 0; i--) {
        struct job *j = c->jobs[i - 1];
        if (same(j->key, k, kn) && same(j->user, u ? u : "", un))
            return j;
    }
    return NULL;
}

struct pjob *subkey_find_pjob(struct cluster *c, const msgpack_object *m)
{
    size_t kn, un = 0;
    const char *k = wire_get_str(m, "key", &kn), *u = wire_get_str(m, "user", &un);
    if (!k || !kn || !c->sd)
        return NULL;
    for (uint32_t i = c->sd->njobs; i > 0; i--) {
        struct pjob *j = c->sd->jobs[i - 1];
        if (same(j->key, k, kn) && same(j->user, u ? u : "", un))
            return j;
    }
    return NULL;
}

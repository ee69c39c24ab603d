/*
 * subkey.c - idempotent submission (issue #8 item 9). A tool may send a request key
 * ("key") with SUBMIT or PSUBMIT; the cluster keeps it in the job's record, so the key
 * is as durable as the job and forgotten with it. A later SUBMIT or PSUBMIT with the
 * same key from the same user gets the first job's SUBMITTED reply again instead of a
 * new job, also across a restart. Keys are scoped per user ("user" field, "" if absent):
 * two users may pick the same key. The key alone identifies the request: a retry whose
 * other fields differ still gets the first job (as an idempotency token, not a content
 * hash). Lookup is a scan of the jobs in memory, newest first, which also sees jobs
 * submitted earlier in the same turn (not committed yet); for parallel jobs (the batch
 * role sends a key with every start, thousands a second) it is a hash table of
 * (user, key) -> the newest such job instead, filled by scored_job_add.
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

static uint64_t key_hash(const char *u, size_t un, const char *k, size_t kn)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < un; i++)
        h = (h ^ (uint8_t)u[i]) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* separator: no UTF-8 byte is 0xff */
    for (size_t i = 0; i < kn; i++)
        h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
    return h;
}

/* The slot of (u, k) in the table: its job, or the empty slot where it would go. */
static uint32_t slot_of(const struct scored *sd, const char *u, size_t un, const char *k, size_t kn)
{
    uint32_t mask = sd->kcap - 1, i = (uint32_t)key_hash(u, un, k, kn) & mask;
    while (sd->khash[i] && !(same(sd->khash[i]->key, k, kn) && same(sd->khash[i]->user, u, un)))
        i = (i + 1) & mask;
    return i;
}

int subkey_index_pjob(struct cluster *c, struct pjob *j)
{
    struct scored *sd = c->sd;
    if (!j->key)
        return 0;
    if (2 * (sd->kn + 1) > sd->kcap) { /* grow: load at most one half */
        uint32_t cap = sd->kcap ? sd->kcap * 2 : 1024;
        struct pjob **old = sd->khash, **n = calloc(cap, sizeof *n);
        uint32_t oldcap = sd->kcap;
        if (!n)
            return -1;
        sd->khash = n;
        sd->kcap = cap;
        for (uint32_t i = 0; i < oldcap; i++)
            if (old[i])
                sd->khash[slot_of(sd, old[i]->user, strlen(old[i]->user), old[i]->key,
                                  strlen(old[i]->key))] = old[i];
        free(old);
    }
    uint32_t s = slot_of(sd, j->user, strlen(j->user), j->key, strlen(j->key));
    if (!sd->khash[s])
        sd->kn++;
    if (!sd->khash[s] || sd->khash[s]->id < j->id) /* the newest job of a key wins */
        sd->khash[s] = j;
    return 0;
}

void subkey_clear_pjobs(struct scored *sd)
{
    free(sd->khash);
    sd->khash = NULL;
    sd->kcap = sd->kn = 0;
}

struct pjob *subkey_find_pjob(struct cluster *c, const msgpack_object *m)
{
    size_t kn, un = 0;
    const char *k = wire_get_str(m, "key", &kn), *u = wire_get_str(m, "user", &un);
    if (!k || !kn || !c->sd || !c->sd->kcap)
        return NULL;
    return c->sd->khash[slot_of(c->sd, u ? u : "", u ? un : 0, k, kn)];
}

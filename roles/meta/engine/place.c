/* place.c - the metascheduler's placement policy (see place.h). */
#include "roles/meta/engine/place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"

static const char *const names[META_NPOLICIES] = {
    "estimate", "earliest_start", "least_queued", "round_robin", "random", "slurm_m",
};

int meta_policy_parse(const char *name)
{
    for (int i = 0; i < META_NPOLICIES; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

const char *meta_policy_name(enum meta_policy p)
{
    return p >= 0 && p < META_NPOLICIES ? names[p] : "?";
}

bool meta_policy_uses_estimates(enum meta_policy p)
{
    return p == META_EARLIEST_COMPLETION || p == META_EARLIEST_START || p == META_SLURM_M;
}

/* Whether one of site s's host feature lists satisfies constraint c per host, and (issue
 * 27) its hosts that do are enough for c's counts (NAME*N: the lists holding NAME stand
 * for N hosts or more, by SITE feature_hosts; one host each when the site did not say). */
static bool features_fit(const struct meta_site *s, const char *c)
{
    const char *ok[256];
    uint32_t w[256];
    size_t n = 0;
    for (int32_t i = 0; i < s->nfsets && n < 256; i++)
        if (s->fsets[i] && constraint_match(c, s->fsets[i])) {
            ok[n] = s->fsets[i];
            w[n++] = s->fhosts ? s->fhosts[i] : 1;
        }
    return n > 0 && constraint_counts_met(c, ok, w, n);
}

bool meta_site_can_hold(const struct meta_site *s, const struct meta_request *r, char *why,
                        size_t whylen)
{
    const char *w = NULL;
    char buf[160];
    if (!s->up) {
        w = "the site is down";
    } else if (r->procs > s->max_procs) {
        snprintf(buf, sizeof buf, "%d processors asked, the widest job it can run has %d", r->procs,
                 s->max_procs);
        w = buf;
    } else if (s->max_mem > 0 && r->mem > s->max_mem) {
        snprintf(buf, sizeof buf, "%lld MB of memory per process asked, at most %lld",
                 (long long)r->mem, (long long)s->max_mem);
        w = buf;
    } else if (s->max_disk > 0 && r->disk > s->max_disk) {
        snprintf(buf, sizeof buf, "%lld MB of disk per process asked, at most %lld",
                 (long long)r->disk, (long long)s->max_disk);
        w = buf;
    } else if (r->constraint && *r->constraint && !features_fit(s, r->constraint)) {
        char have[96] = "";
        for (int32_t i = 0; i < s->nfsets; i++)
            if (s->fsets[i] && features_union(have, sizeof have, s->fsets[i]) < 0) {
                size_t l = strlen(have); /* no room for more: say so */
                if (l + 4 < sizeof have)
                    memcpy(have + l, "...", 4);
                break;
            }
        bool some = false; /* some host satisfies it, but too few for its counts */
        for (int32_t i = 0; i < s->nfsets && !some; i++)
            some = s->fsets[i] && constraint_match(r->constraint, s->fsets[i]);
        snprintf(buf, sizeof buf,
                 some ? "constraint %.60s: too few hosts for its counts (its hosts have: %s)"
                      : "constraint %.60s: no host has such features (its hosts have: %s)",
                 r->constraint, have[0] ? have : "none");
        w = buf;
    }
    if (w && why && whylen)
        snprintf(why, whylen, "%s", w);
    return w == NULL;
}

int64_t meta_completion(const struct meta_site *s, const struct meta_request *r, int64_t start)
{
    if (start == META_NEVER)
        return META_NEVER;
    double speed = s->speed > 0 ? s->speed : 1;
    return start + (int64_t)((double)r->walltime / speed + 0.5);
}

int64_t meta_stage_ms(const struct meta_site *s, uint64_t bytes)
{
    if (!(s->bandwidth_mb_s > 0) || !bytes)
        return 0;
    double ms = (double)bytes / (s->bandwidth_mb_s * 1e6) * 1000.0;
    if (ms >= 1e15) /* a rate too small to mean anything: never within reach */
        return (int64_t)1e15;
    int64_t r = (int64_t)ms;
    return r + ((double)r < ms);
}

int64_t meta_start_staged(const struct meta_site *s, int64_t start, uint64_t bytes)
{
    if (start == META_NEVER)
        return META_NEVER;
    int64_t add = meta_stage_ms(s, bytes);
    return start > META_NEVER - add ? META_NEVER : start + add;
}

int64_t meta_first_start(const struct meta_window *w, size_t n, int64_t ready)
{
    for (size_t i = 0; i < n; i++) {
        if (w[i].from < 0)
            continue;
        if (w[i].to < 0 || w[i].to > ready) /* open, or still open at ready */
            return w[i].from > ready ? w[i].from : ready;
    }
    return META_NEVER;
}

/* xorshift64*: the random policy's generator, kept in *state. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

struct keyed {
    int site;
    double key;
    int64_t turn; /* among equal keys, lower first */
};

static int by_key(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->turn > y->turn) - (x->turn < y->turn);
}

/* Equally good sites take turns (docs/meta.md "Ties spread"): *state is the site that
 * came first last time + 1, and among equal keys the sites from it upwards come before
 * the ones below it, so a run of ties goes round the sites instead of all to the lowest
 * index. Slurm's -M keeps Slurm's rule: the first cluster listed wins a tie. */
static int64_t turn_of(enum meta_policy p, int site, uint64_t state)
{
    if (p == META_SLURM_M || (uint64_t)site >= state)
        return site;
    return (int64_t)site + ((int64_t)1 << 32);
}

size_t meta_rank(enum meta_policy p, const struct meta_site *sites, const int *cand,
                 const int64_t *start, size_t n, const struct meta_request *r, uint64_t *state,
                 int *out)
{
    if (n == 0)
        return 0;
    if (p == META_ROUND_ROBIN || p == META_RANDOM) {
        /* a rotation of the candidates (sorted by site index) starting at the chosen one */
        int *sorted = malloc(n * sizeof *sorted);
        struct keyed *k = malloc(n * sizeof *k);
        if (!sorted || !k) {
            free(sorted);
            free(k);
            for (size_t i = 0; i < n; i++)
                out[i] = cand[i];
            return n;
        }
        for (size_t i = 0; i < n; i++)
            k[i] = (struct keyed){cand[i], (double)cand[i], 0};
        qsort(k, n, sizeof *k, by_key);
        for (size_t i = 0; i < n; i++)
            sorted[i] = k[i].site;
        size_t first;
        if (p == META_RANDOM) {
            first = (size_t)(next_random(state) % n);
        } else {
            /* *state is the site chosen last time + 1 (0: none yet); this time the first
             * candidate after it, wrapping around */
            first = 0;
            for (size_t i = 0; i < n; i++)
                if ((uint64_t)sorted[i] >= *state) {
                    first = i;
                    break;
                }
            *state = (uint64_t)sorted[first] + 1;
        }
        for (size_t i = 0; i < n; i++)
            out[i] = sorted[(first + i) % n];
        free(sorted);
        free(k);
        return n;
    }
    struct keyed *k = malloc(n * sizeof *k);
    if (!k) {
        for (size_t i = 0; i < n; i++)
            out[i] = cand[i];
        return n;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct meta_site *s = &sites[cand[i]];
        double key;
        if (p == META_LEAST_QUEUED) {
            key = (double)s->queued_work / (double)(s->total_procs > 0 ? s->total_procs : 1);
        } else {
            if (start[i] == META_NEVER)
                continue; /* no estimate: not worth a reservation attempt */
            key = p == META_EARLIEST_COMPLETION ? (double)meta_completion(s, r, start[i])
                                                : (double)start[i];
        }
        k[m++] = (struct keyed){cand[i], key, turn_of(p, cand[i], *state)};
    }
    qsort(k, m, sizeof *k, by_key);
    for (size_t i = 0; i < m; i++)
        out[i] = k[i].site;
    if (m > 0 && p != META_SLURM_M)
        *state = (uint64_t)out[0] + 1;
    free(k);
    return m;
}

/*
 * scored_policy.c - the pure decisions of SCore-D resource management: limit arithmetic
 * (K8), admission and cluster choice (K2, K3), host choice, the gang / exclusive /
 * space-sharing slot decision (K6) and the CPU time checks (K7). No I/O, no globals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "roles/cluster/engine/scored.h"

uint64_t sd_job_limit(uint64_t cluster_lim, uint32_t pct, uint64_t user)
{
    /*
     * K8: the queue's share of the cluster limit applies only when both are set. An
     * explicit user limit applies on its own (issue #8 item 14): it is enforced even when
     * no queue percentage is configured, capped by the queue's share when there is one.
     */
    if (cluster_lim == 0 || pct == 0)
        return user;
    uint64_t l = cluster_lim * pct / 100;
    if (l == 0)
        l = 1;
    return user && user < l ? user : l;
}

uint32_t sd_hosts_needed(const struct sd_request *rq)
{
    uint32_t ppn = rq->ppn ? rq->ppn : 1;
    return (rq->nprocs + ppn - 1) / ppn;
}

/* Hosts of k with at least ppn cores. */
static uint32_t hosts_fit(const struct sd_cluster *k, uint32_t ppn, const uint32_t *host_cores)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nhosts; i++)
        n += host_cores[k->hosts[i]] >= ppn;
    return n;
}

/*
 * Can cluster k hold rq now? 0 yes (limits in a), 1 not now, 2 never; why explains.
 */
static int fits(const struct sd_cluster *k, const struct sd_queue *q, const struct sd_request *rq,
                const uint32_t *host_cores, struct sd_admission *a, char *why, size_t n)
{
    uint32_t need = sd_hosts_needed(rq), ppn = rq->ppn ? rq->ppn : 1;
    uint32_t have = hosts_fit(k, ppn, host_cores);
    if (have < need) {
        snprintf(why, n,
                 "hosts: cluster %s has %u host(s) with %u core(s) free for %u "
                 "process(es) per host, the job needs %u",
                 k->name, have, ppn, ppn, need);
        return 2;
    }
    uint64_t ml = sd_job_limit(k->mem_mb, q->mem_pct, rq->mem_mb);
    uint64_t dl = sd_job_limit(k->disk_mb, q->disk_pct, rq->disk_mb);
    if (ml && k->mem_mb && ml > k->mem_mb) {
        snprintf(why, n, "memory: the job's limit %llu MiB exceeds cluster %s's %llu MiB",
                 (unsigned long long)ml, k->name, (unsigned long long)k->mem_mb);
        return 2;
    }
    if (dl && k->disk_mb && dl > k->disk_mb) {
        snprintf(why, n, "disk: the job's limit %llu MiB exceeds cluster %s's %llu MiB",
                 (unsigned long long)dl, k->name, (unsigned long long)k->disk_mb);
        return 2;
    }
    if (k->max_jobs && k->njobs >= k->max_jobs) {
        snprintf(why, n, "jobs: cluster %s already has %llu job(s), its limit", k->name,
                 (unsigned long long)k->njobs);
        return 1;
    }
    if (ml && k->mem_mb && k->held_mem + ml > k->mem_mb) {
        snprintf(why, n,
                 "memory: cluster %s has %llu of %llu MiB held by admitted jobs, the "
                 "job's limit is %llu MiB",
                 k->name, (unsigned long long)k->held_mem, (unsigned long long)k->mem_mb,
                 (unsigned long long)ml);
        return 1;
    }
    if (dl && k->disk_mb && k->held_disk + dl > k->disk_mb) {
        snprintf(why, n,
                 "disk: cluster %s has %llu of %llu MiB held by admitted jobs, the "
                 "job's limit is %llu MiB",
                 k->name, (unsigned long long)k->held_disk, (unsigned long long)k->disk_mb,
                 (unsigned long long)dl);
        return 1;
    }
    a->mem_lim = ml;
    a->disk_lim = dl;
    return 0;
}

static double rel_load(const struct sd_cluster *k)
{
    double load = k->cores ? (double)k->procs / (double)k->cores : 0;
    return load / (k->speed > 0 ? k->speed : 1);
}

/* True if cluster a is a better choice than b (lower relative load, then faster). */
static bool better(const struct sd_cluster *a, const struct sd_cluster *b)
{
    double la = rel_load(a), lb = rel_load(b);
    if (la < lb - 1e-9)
        return true;
    if (la > lb + 1e-9)
        return false;
    return a->speed > b->speed + 1e-9;
}

int sd_admit(const struct sd_cluster *cl, uint32_t ncl, const struct sd_cluster *coc,
             const struct sd_queue *q, const struct sd_request *rq, const uint32_t *host_cores,
             struct sd_admission *a)
{
    int best = -1, verdict = 3;
    struct sd_admission tmp;
    char why[256] = "hosts: no cluster has hosts that run parallel processes yet";
    memset(a, 0, sizeof *a);
    for (uint32_t i = 0; i < ncl; i++) {
        char w[256];
        memset(&tmp, 0, sizeof tmp);
        int v = fits(&cl[i], q, rq, host_cores, &tmp, w, sizeof w);
        if (v == 0 && (best < 0 || better(&cl[i], &cl[best]))) {
            best = (int)i;
            a->mem_lim = tmp.mem_lim;
            a->disk_lim = tmp.disk_lim;
        } else if (v != 0 && v < verdict) { /* keep the most hopeful reason */
            verdict = v;
            snprintf(why, sizeof why, "%s", w);
        }
    }
    if (best >= 0) {
        a->cluster = best;
        return 0;
    }
    if (rq->coc && coc && ncl > 1) {
        char w[256];
        memset(&tmp, 0, sizeof tmp);
        int v = fits(coc, q, rq, host_cores, &tmp, w, sizeof w);
        if (v == 0) {
            a->cluster = (int)ncl;
            a->mem_lim = tmp.mem_lim;
            a->disk_lim = tmp.disk_lim;
            return 0;
        }
        if (v < verdict) {
            verdict = v;
            snprintf(why, sizeof why, "%.200s (also as a cluster of clusters)", w);
        }
    }
    a->cluster = -1;
    a->never = verdict >= 2;
    snprintf(a->why, sizeof a->why, "%s", why);
    return -1;
}

int sd_pick_hosts(const struct sd_cluster *k, uint32_t need, uint32_t ppn,
                  const uint32_t *host_cores, const uint32_t *host_procs, uint32_t *out)
{
    uint32_t got = 0;
    bool *used = calloc(k->nhosts + 1, 1);
    if (!used)
        return -1;
    while (got < need) {
        int best = -1;
        for (uint32_t i = 0; i < k->nhosts; i++) {
            uint32_t h = k->hosts[i];
            if (used[i] || host_cores[h] < ppn)
                continue;
            if (best < 0 || host_procs[h] < host_procs[k->hosts[best]] ||
                (host_procs[h] == host_procs[k->hosts[best]] && h < k->hosts[best]))
                best = (int)i;
        }
        if (best < 0)
            break;
        used[best] = true;
        out[got++] = k->hosts[best];
    }
    free(used);
    return got == need ? 0 : -1;
}

bool sd_counts_fit(const struct sd_cluster *k, uint32_t ppn, const uint32_t *host_cores,
                   const char *const *feat, const char *c, char *why, size_t n)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    int nv = constraint_counts(c, v, CONSTRAINT_NAMES_MAX);
    for (int t = 0; t < nv; t++) {
        uint32_t have = 0;
        for (uint32_t i = 0; i < k->nhosts; i++)
            have += host_cores[k->hosts[i]] >= (ppn ? ppn : 1) &&
                    features_has(feat[k->hosts[i]], v[t].name);
        if (have < v[t].n) {
            if (why)
                snprintf(why, n,
                         "constraint %.100s: cluster %s has %u active host(s) with %s "
                         "(and the job's other features), the count asks for %u",
                         c, k->name, have, v[t].name, v[t].n);
            return false;
        }
    }
    return nv >= 0;
}

bool sd_counts_filter(struct sd_cluster *cl, uint32_t *ncl, const struct sd_cluster *coc,
                      uint32_t ppn, const uint32_t *host_cores, const char *const *feat,
                      const char *c, char *why, size_t n, bool *coc_ok)
{
    uint32_t kept = 0;
    why[0] = '\0';
    for (uint32_t i = 0; i < *ncl; i++) {
        char w[256];
        if (sd_counts_fit(&cl[i], ppn, host_cores, feat, c, w, sizeof w))
            cl[kept++] = cl[i];
        else if (!why[0])
            snprintf(why, n, "%s", w);
    }
    *ncl = kept;
    *coc_ok = coc && sd_counts_fit(coc, ppn, host_cores, feat, c, NULL, 0);
    return kept > 0;
}

/* How many counts of v[0..nv) short by left[] host h (node index) would help. */
static int helps(const struct constraint_count *v, const uint32_t *left, int nv, const char *f)
{
    int n = 0;
    for (int t = 0; t < nv; t++)
        n += left[t] > 0 && features_has(f, v[t].name);
    return n;
}

int sd_pick_hosts_counted(const struct sd_cluster *k, uint32_t need, uint32_t ppn,
                          const uint32_t *host_cores, const uint32_t *host_procs,
                          const char *const *feat, const char *c, uint32_t *out)
{
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    uint32_t left[CONSTRAINT_NAMES_MAX];
    int nv = constraint_counts(c, v, CONSTRAINT_NAMES_MAX);
    bool *used = calloc(k->nhosts + 1, 1);
    uint32_t got = 0;
    if (nv < 0 || !used) {
        free(used);
        return -1;
    }
    nv = nv < (int)CONSTRAINT_NAMES_MAX ? nv : (int)CONSTRAINT_NAMES_MAX;
    for (int t = 0; t < nv; t++)
        left[t] = v[t].n;
    for (int t = 0; t < nv; t++)
        while (left[t] > 0 && got < need) {
            int best = -1, bh = 0;
            for (uint32_t i = 0; i < k->nhosts; i++) {
                uint32_t h = k->hosts[i];
                if (used[i] || host_cores[h] < ppn || !features_has(feat[h], v[t].name))
                    continue;
                int hp = helps(v, left, nv, feat[h]);
                uint32_t b = best < 0 ? 0 : k->hosts[best];
                if (best < 0 || hp > bh ||
                    (hp == bh && (host_procs[h] < host_procs[b] ||
                                  (host_procs[h] == host_procs[b] && h < b)))) {
                    best = (int)i;
                    bh = hp;
                }
            }
            if (best < 0)
                break;
            used[best] = true;
            out[got++] = k->hosts[best];
            for (int u = 0; u < nv; u++)
                if (left[u] > 0 && features_has(feat[k->hosts[best]], v[u].name))
                    left[u]--;
        }
    for (int t = 0; t < nv; t++)
        if (left[t] > 0) {
            free(used);
            return -1;
        }
    /* the rest: the least loaded of the hosts not taken */
    while (got < need) {
        int best = -1;
        for (uint32_t i = 0; i < k->nhosts; i++) {
            uint32_t h = k->hosts[i];
            if (used[i] || host_cores[h] < ppn)
                continue;
            if (best < 0 || host_procs[h] < host_procs[k->hosts[best]] ||
                (host_procs[h] == host_procs[k->hosts[best]] && h < k->hosts[best]))
                best = (int)i;
        }
        if (best < 0)
            break;
        used[best] = true;
        out[got++] = k->hosts[best];
    }
    free(used);
    return got == need ? 0 : -1;
}

/* Order of consideration within the slot decision (see sd_schedule). */
static bool rotate_g;
static int slot_cmp(const void *pa, const void *pb)
{
    const struct sd_slot_job *a = *(const struct sd_slot_job *const *)pa;
    const struct sd_slot_job *b = *(const struct sd_slot_job *const *)pb;
    if (a->queue != b->queue)
        return a->queue < b->queue ? -1 : 1;
    if (a->mode == SDQ_EXCLUSIVE) {
        if (a->started != b->started)
            return a->started ? -1 : 1;
    } else if (a->running != b->running) {
        /* rotating: those waiting for their turn first; otherwise keep the running */
        return (a->running != rotate_g) ? -1 : 1;
    } else if (a->last_ran_ms != b->last_ran_ms) {
        return a->last_ran_ms < b->last_ran_ms ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

void sd_schedule(struct sd_slot_job *jobs, uint32_t n, uint32_t nnodes, bool rotate)
{
    struct sd_slot_job **order = calloc(n + 1, sizeof *order);
    bool *claimed = calloc(nnodes + 1, 1);
    for (uint32_t i = 0; i < n; i++)
        jobs[i].run = false;
    if (!order || !claimed)
        goto out; /* out of memory: nothing runs this slot; the next one retries */
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (jobs[i].runnable)
            order[m++] = &jobs[i];
    rotate_g = rotate;
    qsort(order, m, sizeof *order, slot_cmp);
    for (uint32_t i = 0; i < m; i++) {
        struct sd_slot_job *j = order[i];
        bool free_ = true;
        for (uint32_t h = 0; h < j->nhosts && free_; h++)
            free_ = j->hosts[h] < nnodes && !claimed[j->hosts[h]];
        if (!free_)
            continue;
        for (uint32_t h = 0; h < j->nhosts; h++)
            claimed[j->hosts[h]] = true;
        j->run = true;
    }
out:
    free(order);
    free(claimed);
}

enum sd_cpu_verdict sd_cpu_check(double cpu_s, double res_base_s, uint64_t max_cpu_s,
                                 uint64_t residence_s, uint32_t queue, uint32_t nq)
{
    if (max_cpu_s && cpu_s > (double)max_cpu_s)
        return SD_CPU_KILL;
    if (residence_s && queue + 1 < nq && cpu_s - res_base_s > (double)residence_s)
        return SD_CPU_DEMOTE;
    return SD_CPU_OK;
}

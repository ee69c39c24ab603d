/*
 * priority.c - Maui-style job priority: a weighted sum of factors, each weight the
 * product of a component weight (SERV, FS, CRED, RES) and a subcomponent weight
 * (QUEUETIME, XFACTOR, FSUSER, ...). Only factors with a non-zero weight are
 * computed on the hot path; batch_priority_explain shows all of them.
 *
 *   SERV: QUEUETIME  minutes since submission
 *         XFACTOR    (queued + walltime) / walltime
 *   FS:   FSUSER, FSGROUP, FSACCOUNT  target% - decayed usage% (0 without target)
 *   CRED: USER, GROUP, ACCOUNT, QOS, CLASS  the credential's configured priority
 *   RES:  PROC, MEM, DISK, SWAP (total requested), NODE (nodes needed),
 *         PS (processor-seconds requested)
 *   UPRIO: the job's own requested priority
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

static const char *const factor_names[BATCH_NFACTORS] = {
    "queuetime", "xfactor", "fsuser", "fsgroup", "fsaccount", "user",  "group", "account", "qos",
    "class",     "procs",   "mem",    "disk",    "swap",      "nodes", "ps",    "uprio"};

const char *batch_factor_name(enum batch_factor f)
{
    return f >= 0 && f < BATCH_NFACTORS ? factor_names[f] : "?";
}

/* Computes the effective weight of every factor and the list of active ones. */
void bs_prio_weights(struct batch_engine *e)
{
    const struct batch_weights *w = &e->cfg.w;
    double *x = e->weff;
    x[BATCH_F_QUEUETIME] = w->serv * w->queuetime;
    x[BATCH_F_XFACTOR] = w->serv * w->xfactor;
    x[BATCH_F_FSUSER] = w->fs * w->fsuser;
    x[BATCH_F_FSGROUP] = w->fs * w->fsgroup;
    x[BATCH_F_FSACCOUNT] = w->fs * w->fsaccount;
    x[BATCH_F_USER] = w->cred * w->user;
    x[BATCH_F_GROUP] = w->cred * w->group;
    x[BATCH_F_ACCOUNT] = w->cred * w->account;
    x[BATCH_F_QOS] = w->cred * w->qos;
    x[BATCH_F_CLASS] = w->cred * w->class_;
    x[BATCH_F_PROCS] = w->res * w->proc;
    x[BATCH_F_MEM] = w->res * w->mem;
    x[BATCH_F_DISK] = w->res * w->disk;
    x[BATCH_F_SWAP] = w->res * w->swap;
    x[BATCH_F_NODES] = w->res * w->node;
    x[BATCH_F_PS] = w->res * w->ps;
    x[BATCH_F_UPRIO] = w->uprio;
    e->nactive = 0;
    for (int f = 0; f < BATCH_NFACTORS; f++)
        if (x[f] != 0)
            e->active[e->nactive++] = f;
    e->static_prio = x[BATCH_F_XFACTOR] == 0 && x[BATCH_F_FSUSER] == 0 && x[BATCH_F_FSGROUP] == 0 &&
                     x[BATCH_F_FSACCOUNT] == 0;
}

/* Fairshare factor: target - usage percent, or 0 without a target. */
static double fs_delta(struct batch_engine *e, const struct bjob *j, enum batch_cred_kind k,
                       int64_t now)
{
    struct cred *c = &e->creds[k].v[j->cred[k]];
    if (isnan(c->fstarget))
        return 0;
    return c->fstarget - bs_fs_percent(e, c, now);
}

/* The raw value of factor f for job j at now. */
static double factor(struct batch_engine *e, const struct bjob *j, int f, int64_t now)
{
    double queued = now > j->submit ? (double)(now - j->submit) : 0;
    double per_s = (double)e->cfg.unit_per_s;
    switch (f) {
    case BATCH_F_QUEUETIME:
        return queued / (60.0 * per_s);
    case BATCH_F_XFACTOR:
        return (queued + (double)j->walltime) / (double)j->walltime;
    case BATCH_F_FSUSER:
        return fs_delta(e, j, BATCH_CRED_USER, now);
    case BATCH_F_FSGROUP:
        return fs_delta(e, j, BATCH_CRED_GROUP, now);
    case BATCH_F_FSACCOUNT:
        return fs_delta(e, j, BATCH_CRED_ACCOUNT, now);
    case BATCH_F_USER:
    case BATCH_F_GROUP:
    case BATCH_F_ACCOUNT:
    case BATCH_F_QOS:
    case BATCH_F_CLASS: {
        static const enum batch_cred_kind kind[] = {BATCH_CRED_USER, BATCH_CRED_GROUP,
                                                    BATCH_CRED_ACCOUNT, BATCH_CRED_QOS,
                                                    BATCH_CRED_CLASS};
        enum batch_cred_kind k = kind[f - BATCH_F_USER];
        return e->creds[k].v[j->cred[k]].priority;
    }
    case BATCH_F_PROCS:
        return j->procs;
    case BATCH_F_MEM:
        return (double)j->tasks * (double)j->per_task.mem;
    case BATCH_F_DISK:
        return (double)j->tasks * (double)j->per_task.disk;
    case BATCH_F_SWAP:
        return (double)j->tasks * (double)j->per_task.swap;
    case BATCH_F_NODES:
        return j->nodes_min;
    case BATCH_F_PS:
        return (double)j->procs * (double)j->walltime / per_s;
    case BATCH_F_UPRIO:
        return j->upriority;
    default:
        return 0;
    }
}

/* The priority of j at now; with out, also every factor, weight and contribution. */
double bs_prio_compute(struct batch_engine *e, const struct bjob *j, int64_t now,
                       struct batch_prio *out)
{
    double total = 0;
    if (!out) {
        for (int32_t i = 0; i < e->nactive; i++)
            total += e->weff[e->active[i]] * factor(e, j, e->active[i], now);
        return total;
    }
    for (int f = 0; f < BATCH_NFACTORS; f++) {
        out->value[f] = factor(e, j, f, now);
        out->weight[f] = e->weff[f];
        out->contrib[f] = e->weff[f] != 0 ? e->weff[f] * out->value[f] : 0;
        total += out->contrib[f];
    }
    out->total = total;
    return total;
}

int batch_priority_explain(struct batch_engine *e, uint64_t id, int64_t now, struct batch_prio *out)
{
    struct bjob *j = bs_engine_job(e, id);
    if (!j) {
        errno = ENOENT;
        return -1;
    }
    if (e->groups_dirty)
        (void)bs_engine_regroup(e); /* nodes_min needs groups; harmless if it fails */
    bs_engine_fit_refresh(e, j);
    memset(out, 0, sizeof *out);
    bs_prio_compute(e, j, now, out);
    return 0;
}

/* Static mode: the time-invariant ordering key of j (its priority at time 0 if it
 * had been queued then); priority(now) = key + QUEUETIME weight x minutes(now). */
double bs_prio_key(struct batch_engine *e, const struct bjob *j)
{
    double total =
        -e->weff[BATCH_F_QUEUETIME] * (double)j->submit / (60.0 * (double)e->cfg.unit_per_s);
    for (int32_t i = 0; i < e->nactive; i++)
        if (e->active[i] != BATCH_F_QUEUETIME)
            total += e->weff[e->active[i]] * factor(e, j, e->active[i], j->submit);
    return total;
}

/* The priority of pending job j as of time now (after its last ordering). */
double bs_prio_at(const struct batch_engine *e, const struct bjob *j, int64_t now)
{
    if (!e->static_prio)
        return j->prio;
    return j->prio + e->weff[BATCH_F_QUEUETIME] * (double)(now > j->submit ? now : j->submit) /
                         (60.0 * (double)e->cfg.unit_per_s);
}

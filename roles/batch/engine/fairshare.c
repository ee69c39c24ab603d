/*
 * fairshare.c - fairshare history (MISSION B1, Maui FSPOLICY DEDICATEDPS): the
 * processor-seconds each user, group and account used, kept per FSINTERVAL window
 * for FSDEPTH windows (in the credentials' rings, cred.c); a window `age` windows
 * old counts FSDECAY^age. A job is charged as it runs (every cycle up to `now`,
 * the rest when it ends), so a long job weighs on its owner's priority while it
 * runs, not only afterwards.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

/* floor(t / d) for d > 0, also for negative t. */
static int64_t floordiv(int64_t t, int64_t d)
{
    int64_t q = t / d;
    return (t % d != 0 && t < 0) ? q - 1 : q;
}

/* Charges job j's dedicated processor-seconds over [t0, t1) to its user, group and
 * account and to the total, split at window boundaries. Windows older than FSDEPTH
 * are skipped without looping over them. */
void bs_fs_charge(struct batch_engine *e, const struct bjob *j, int64_t t0, int64_t t1)
{
    const struct batch_config *c = &e->cfg;
    if (c->fspolicy == BATCH_FS_NONE || t1 <= t0)
        return;
    int64_t iv = c->fsinterval * c->unit_per_s; /* the window in engine time units */
    int64_t first = floordiv(t1 - 1, iv) - c->fsdepth + 1;
    if (floordiv(t0, iv) < first)
        t0 = first * iv;
    while (t0 < t1) {
        int64_t w = floordiv(t0, iv);
        int64_t wend = (w + 1) * iv;
        double amount = (double)j->procs * (double)((t1 < wend ? t1 : wend) - t0);
        for (int k = BATCH_CRED_USER; k <= BATCH_CRED_ACCOUNT; k++)
            bs_fs_ring_add(&e->creds[k].v[j->cred[k]].fs, c->fsdepth, w, amount);
        bs_fs_ring_add(&e->fs_total, c->fsdepth, w, amount);
        t0 = wend;
    }
}

/* Charges running job j up to `upto` (from where it was last charged to). */
void bs_fs_charge_upto(struct batch_engine *e, struct bjob *j, int64_t upto)
{
    if (e->cfg.fspolicy == BATCH_FS_NONE || upto <= j->charged)
        return;
    bs_fs_charge(e, j, j->charged, upto);
    j->charged = upto;
}

/* Decayed usage percent of credential c as seen at `now` (cached per cycle). */
double bs_fs_percent(struct batch_engine *e, struct cred *c, int64_t now)
{
    const struct batch_config *cf = &e->cfg;
    if (cf->fspolicy == BATCH_FS_NONE)
        return 0;
    if (c->fs_stamp == now && e->fs_stamp == now)
        return c->fs_pct;
    int64_t w = floordiv(now, cf->fsinterval * cf->unit_per_s);
    double tot = bs_fs_ring_decayed(&e->fs_total, cf->fsdepth, w, cf->fsdecay);
    double use = bs_fs_ring_decayed(&c->fs, cf->fsdepth, w, cf->fsdecay);
    c->fs_pct = tot > 0 ? 100.0 * use / tot : 0;
    c->fs_stamp = now;
    return c->fs_pct;
}

int batch_fairshare_add(struct batch_engine *e, const char *user, const char *group,
                        const char *account, int64_t t, double amount)
{
    const struct batch_config *c = &e->cfg;
    if (c->fspolicy == BATCH_FS_NONE || amount <= 0)
        return 0;
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    int64_t w = floordiv(t, c->fsinterval * c->unit_per_s);
    const char *names[3] = {user, group, account};
    for (int k = BATCH_CRED_USER; k <= BATCH_CRED_ACCOUNT; k++) {
        int32_t id = bs_cred_intern(e, (enum batch_cred_kind)k, names[k] ? names[k] : "");
        if (id < 0)
            return -1;
        bs_fs_ring_add(&e->creds[k].v[id].fs, c->fsdepth, w, amount);
    }
    bs_fs_ring_add(&e->fs_total, c->fsdepth, w, amount);
    e->fs_stamp = -1;
    return 0;
}

double batch_fairshare_usage(struct batch_engine *e, enum batch_cred_kind kind, const char *name,
                             int64_t now)
{
    int32_t id = (kind >= 0 && kind < BATCH_CRED_KINDS) ? bs_cred_lookup(e, kind, name) : -1;
    if (id < 0) {
        errno = ENOENT;
        return -1;
    }
    for (int32_t i = 0; i < e->nrunning; i++)
        bs_fs_charge_upto(e, &e->jobs[e->running[i]], now);
    e->fs_stamp = -1; /* invalidate the per-cycle cache */
    double pct = bs_fs_percent(e, &e->creds[kind].v[id], now);
    e->creds[kind].v[id].fs_stamp = -1;
    return pct;
}

int batch_fairshare_charge(struct batch_engine *e, const char *user, const char *group,
                           const char *account, int32_t procs, int64_t t0, int64_t t1)
{
    e->jest_valid = false; /* the showstart cache (estimate.c) */
    struct bjob j;
    memset(&j, 0, sizeof j);
    const char *names[3] = {user, group, account};
    for (int k = BATCH_CRED_USER; k <= BATCH_CRED_ACCOUNT; k++)
        if ((j.cred[k] = bs_cred_intern(e, (enum batch_cred_kind)k, names[k] ? names[k] : "")) < 0)
            return -1;
    j.procs = procs;
    bs_fs_charge(e, &j, t0, t1);
    e->fs_stamp = -1;
    return 0;
}

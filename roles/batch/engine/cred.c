/*
 * cred.c - credentials (users, groups, accounts, classes, QOS): interned names
 * with their configured priority, fairshare target and throttles, the running
 * totals the throttles are checked against, and each one's fairshare usage ring
 * (processor-seconds per window, charged and read by fairshare.c).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "roles/batch/engine/internal.h"

int bs_fs_ring_init(struct fs_ring *r, int32_t depth)
{
    r->w = calloc((size_t)depth, sizeof *r->w);
    r->win = 0;
    if (!r->w) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void bs_fs_ring_free(struct fs_ring *r)
{
    free(r->w);
    r->w = NULL;
}

void bs_fs_ring_add(struct fs_ring *r, int32_t depth, int64_t window, double amount)
{
    if (!r->w)
        return;
    if (window > r->win) {
        int64_t s = window - r->win;
        if (s >= depth) {
            memset(r->w, 0, (size_t)depth * sizeof *r->w);
        } else {
            memmove(r->w + s, r->w, (size_t)(depth - s) * sizeof *r->w);
            memset(r->w, 0, (size_t)s * sizeof *r->w);
        }
        r->win = window;
    }
    int64_t age = r->win - window;
    if (age < depth)
        r->w[age] += amount;
}

double bs_fs_ring_decayed(const struct fs_ring *r, int32_t depth, int64_t now_win, double decay)
{
    if (!r->w)
        return 0;
    int64_t age0 = now_win - r->win; /* age of slot 0 */
    if (age0 < 0)
        age0 = 0;
    double f = pow(decay, (double)age0), sum = 0;
    for (int64_t i = 0; i + age0 < depth; i++) {
        sum += f * r->w[i];
        f *= decay;
    }
    return sum;
}

/* The config entry for (k, name), else its DEFAULT entry, else NULL. */
static const struct batch_cred_cfg *cred_cfg(const struct batch_config *c, enum batch_cred_kind k,
                                             const char *name)
{
    const struct batch_cred_cfg *def = NULL;
    for (size_t i = 0; i < c->ncreds; i++) {
        if (c->creds[i].kind != k)
            continue;
        if (strcmp(c->creds[i].name, name) == 0)
            return &c->creds[i];
        if (strcasecmp(c->creds[i].name, "DEFAULT") == 0)
            def = &c->creds[i];
    }
    return def;
}

int32_t bs_cred_lookup(const struct batch_engine *e, enum batch_cred_kind k, const char *name)
{
    return bs_strmap_get(&e->creds[k].map, name ? name : "");
}

/* Returns the id of credential (k, name), adding it on first use; -1 on ENOMEM or a
 * name that is too long (EINVAL). */
int32_t bs_cred_intern(struct batch_engine *e, enum batch_cred_kind k, const char *name)
{
    struct credtab *t = &e->creds[k];
    if (!name)
        name = "";
    if (strlen(name) >= BATCH_NAME_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (t->last < t->n && strcmp(t->v[t->last].name, name) == 0)
        return t->last; /* consecutive jobs mostly share credentials */
    int32_t id = bs_strmap_get(&t->map, name);
    if (id >= 0)
        return t->last = id;
    if (VEC_RESERVE(t->v, t->cap, t->n + 1) < 0)
        return -1;
    struct cred *c = &t->v[t->n];
    memset(c, 0, sizeof *c);
    c->fstarget = NAN;
    c->maxjob = -1;
    c->maxproc = -1;
    c->fs_stamp = -1;
    const struct batch_cred_cfg *cf = cred_cfg(&e->cfg, k, name);
    if (cf) {
        c->priority = cf->priority;
        c->fstarget = cf->fstarget;
        c->maxjob = cf->maxjob;
        c->maxproc = cf->maxproc;
    }
    bool fs = e->cfg.fspolicy != BATCH_FS_NONE && k <= BATCH_CRED_ACCOUNT;
    if (!(c->name = strdup(name)) || (fs && bs_fs_ring_init(&c->fs, e->cfg.fsdepth) < 0)) {
        free(c->name);
        errno = ENOMEM;
        return -1;
    }
    if (bs_strmap_put(&t->map, name, t->n) < 0) {
        free(c->name);
        bs_fs_ring_free(&c->fs);
        return -1;
    }
    return t->last = t->n++;
}

void bs_cred_free_all(struct batch_engine *e)
{
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        struct credtab *t = &e->creds[k];
        for (int32_t i = 0; i < t->n; i++) {
            free(t->v[i].name);
            bs_fs_ring_free(&t->v[i].fs);
        }
        free(t->v);
        bs_strmap_free(&t->map);
        memset(t, 0, sizeof *t);
    }
}

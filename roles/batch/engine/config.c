/*
 * config.c - the engine's configuration in memory: Maui's defaults, copying, and
 * the per-credential entries. Reading batch.ini is roles/batch/conffile.c; the live
 * driver's settings are roles/batch/liveconf.h.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/batch.h"

void batch_config_defaults(struct batch_config *c)
{
    memset(c, 0, sizeof *c);
    c->reservation_depth = 1;
    c->backfill = BATCH_BF_FIRSTFIT;
    c->w.serv = 1;
    c->w.queuetime = 1;
    c->w.fs = 1;
    c->w.cred = 1;
    c->w.res = 1;
    c->w.uprio = 0;
    c->fspolicy = BATCH_FS_NONE;
    c->fsinterval = 12 * 3600;
    c->fsdepth = 8;
    c->fsdecay = 1.0;
    c->estimates = false;
    c->unit_per_s = 1;
    c->overrun_grace = 60; /* a minute of a replay in seconds (batch.h) */
    /* the grid guard (batch.h): chosen from meta --simulate on five traces (docs/meta.md
     * "Local users and grid reservations"); it does nothing where no spool reserves */
    c->grid_wait_bound = 12 * 3600;
}

void batch_config_clear(struct batch_config *c)
{
    free(c->creds);
    c->creds = NULL;
    c->ncreds = c->capcreds = 0;
}

int batch_config_copy(struct batch_config *dst, const struct batch_config *src)
{
    struct batch_cred_cfg *cr = NULL;
    if (src->ncreds) {
        if (!(cr = malloc(src->ncreds * sizeof *cr))) {
            errno = ENOMEM;
            return -1;
        }
        memcpy(cr, src->creds, src->ncreds * sizeof *cr);
    }
    *dst = *src;
    dst->creds = cr;
    dst->capcreds = dst->ncreds;
    return 0;
}

struct batch_cred_cfg *batch_config_cred(struct batch_config *c, enum batch_cred_kind kind,
                                         const char *name)
{
    if (kind < 0 || kind >= BATCH_CRED_KINDS || !name || strlen(name) >= BATCH_NAME_MAX) {
        errno = EINVAL;
        return NULL;
    }
    for (size_t i = 0; i < c->ncreds; i++)
        if (c->creds[i].kind == kind && strcmp(c->creds[i].name, name) == 0)
            return &c->creds[i];
    if (c->ncreds == c->capcreds) {
        size_t nc = c->capcreds ? c->capcreds * 2 : 8;
        void *p = realloc(c->creds, nc * sizeof *c->creds);
        if (!p) {
            errno = ENOMEM;
            return NULL;
        }
        c->creds = p;
        c->capcreds = nc;
    }
    struct batch_cred_cfg *e = &c->creds[c->ncreds++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    strcpy(e->name, name);
    e->fstarget = NAN;
    e->maxjob = -1;
    e->maxproc = -1;
    return e;
}

int64_t batch_config_class_walltime(const struct batch_config *c, const char *cls, bool max)
{
    int64_t def = 0;
    for (size_t i = 0; i < c->ncreds; i++) {
        const struct batch_cred_cfg *cc = &c->creds[i];
        if (cc->kind != BATCH_CRED_CLASS)
            continue;
        int64_t v = max ? cc->maxwalltime : cc->defwalltime;
        if (cls && !strcmp(cc->name, cls) && v > 0)
            return v;
        if (!strcmp(cc->name, "DEFAULT"))
            def = v;
    }
    return def;
}

const char *batch_cred_kind_name(enum batch_cred_kind k)
{
    static const char *const n[BATCH_CRED_KINDS] = {"user", "group", "account", "class", "qos"};
    return k >= 0 && k < BATCH_CRED_KINDS ? n[k] : "?";
}

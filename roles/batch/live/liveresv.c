/*
 * liveresv.c - the live batch role's reservations (struct lresv) in memory and in the
 * store, and in the engine. They are stored in the role's LMDB (table "resv", one record
 * per name, written in the turn that made them) with the engine nodes they hold, and
 * re-created in the engine after a restart as soon as those nodes are known again (the
 * cluster managers report their hosts), taken as they are: a job already running on
 * them does not make the stored reservation fail.
 *
 * A site reservation (RESERVE, for a metascheduler) starts unbound; the first job
 * submitted into it (SUBMIT/PSUBMIT `resv`) binds it: from then on it is held for
 * that job alone, which waits for it unless the job says `early` (B5).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/record.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

/* ---- the stored record ---- */

void live_resv_clear(struct lresv *v)
{
    free(v->nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        free(v->acl[k]);
    memset(v, 0, sizeof *v);
}

void live_resv_free(struct live *L)
{
    for (uint32_t i = 0; i < L->nresv; i++)
        live_resv_clear(&L->resv[i]);
    free(L->resv);
    L->resv = NULL;
    L->nresv = L->capresv = 0;
}

static void resv_encode(const struct lresv *v, struct wire_buf *wb)
{
    wire_pack_map(wb, 13 + BATCH_CRED_KINDS);
    wire_put_str(wb, "name", v->name);
    wire_put_str(wb, "owner", v->owner);
    wire_put_i64(wb, "start", v->start);
    wire_put_i64(wb, "end", v->end);
    wire_put_i64(wb, "tasks", v->tasks);
    wire_put_i64(wb, "procs", v->procs);
    wire_put_i64(wb, "mem_mb", v->mem_mb);
    wire_put_i64(wb, "disk_mb", v->disk_mb);
    wire_put_str(wb, "nodes", v->nodes ? v->nodes : "");
    wire_put_u64(wb, "job", v->job);
    wire_put_bool(wb, "site", v->site);
    wire_put_u64(wb, "version", 1);
    wire_put_str(wb, "kind", "resv");
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        wire_put_str(wb, live_acl_keys[k], v->acl[k] ? v->acl[k] : "");
}

static char *dup_or_null(const msgpack_object *m, const char *k)
{
    size_t l;
    const char *s = wire_get_str(m, k, &l);
    return s && l ? strndup(s, l) : NULL;
}

static int resv_decode(const void *p, size_t n, struct lresv *v)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int rc = -1;
    memset(v, 0, sizeof *v);
    if (msgpack_unpack_next(&up, p, n, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object *m = &up.data;
        wire_get_strbuf(m, "name", v->name, sizeof v->name);
        wire_get_strbuf(m, "owner", v->owner, sizeof v->owner);
        v->start = wire_get_i64(m, "start", 0);
        v->end = wire_get_i64(m, "end", 0);
        v->tasks = (int32_t)wire_get_i64(m, "tasks", 0);
        v->procs = (int32_t)wire_get_i64(m, "procs", 0);
        v->mem_mb = wire_get_i64(m, "mem_mb", 0);
        v->disk_mb = wire_get_i64(m, "disk_mb", 0);
        v->nodes = dup_or_null(m, "nodes");
        v->job = wire_get_u64(m, "job", 0);
        v->site = wire_get_bool(m, "site", false);
        for (int k = 0; k < BATCH_CRED_KINDS; k++)
            v->acl[k] = dup_or_null(m, live_acl_keys[k]);
        rc = v->name[0] && v->nodes ? 0 : -1;
        if (rc < 0)
            live_resv_clear(v);
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

static int encode_resv(const void *rec, struct wire_buf *wb)
{
    resv_encode(rec, wb);
    return 0;
}

int live_resv_store(struct live *L, const struct lresv *v)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = record_save(L->store, L->t_resv, v->name, strlen(v->name), v, encode_resv, &wb);
    wire_buf_free(&wb);
    return rc;
}

/* record_load of "resv" (text keys: the names). */
static int load_one(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    (void)key;
    (void)klen;
    struct live *L = arg;
    struct lresv v;
    if (resv_decode(val, vlen, &v) < 0)
        return RECORD_UNREADABLE;
    if (L->nresv == L->capresv) {
        uint32_t nc = L->capresv ? 2 * L->capresv : 8;
        void *p = realloc(L->resv, nc * sizeof *L->resv);
        if (!p) {
            live_resv_clear(&v);
            return -1;
        }
        L->resv = p;
        L->capresv = nc;
    }
    L->resv[L->nresv++] = v;
    return RECORD_TAKEN;
}

int live_resv_load(struct live *L)
{
    live_resv_free(L);
    return record_load(L->store, L->t_resv, load_one, L) < 0 ? -1 : 0;
}

struct lresv *live_resv_find(struct live *L, const char *name)
{
    for (uint32_t i = 0; i < L->nresv; i++)
        if (!strcmp(L->resv[i].name, name))
            return &L->resv[i];
    return NULL;
}

void live_resv_drop(struct live *L, struct lresv *v)
{
    store_del(L->store, L->t_resv, v->name, strlen(v->name));
    if (v->in_engine)
        batch_resv_release(L->eng, v->name);
    live_resv_clear(v);
    uint32_t i = (uint32_t)(v - L->resv);
    memmove(v, v + 1, (L->nresv - i - 1) * sizeof *v);
    L->nresv--;
}

char *live_resv_nodes(struct live *L, const struct batch_resv_info *ri)
{
    size_t cap = 1;
    for (int32_t i = 0; i < ri->nnodes; i++)
        cap += strlen(batch_node_name(L->eng, ri->nodes[i])) + 1;
    char *s = malloc(cap);
    size_t len = 0;
    if (s)
        for (int32_t i = 0; i < ri->nnodes; i++)
            len += (size_t)sprintf(s + len, "%s%s", i ? "," : "",
                                   batch_node_name(L->eng, ri->nodes[i]));
    if (s && !len)
        s[0] = '\0';
    return s;
}

/* Creates v in the engine (named nodes). 0, or -1 with why. */
int live_resv_engine(struct live *L, struct lresv *v, bool restore, char *why, size_t wl)
{
    struct live_words nodes, acl[BATCH_CRED_KINDS];
    memset(acl, 0, sizeof acl);
    int rc = -1;
    if (live_words_split(v->nodes, &nodes) < 0) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    struct batch_resv_req q;
    memset(&q, 0, sizeof q);
    uint64_t eid = v->job ? live_eid(v->job, 0) : UINT64_MAX;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        if (live_words_split(v->acl[k], &acl[k]) < 0) {
            snprintf(why, wl, "out of memory");
            goto out;
        }
        q.acl.names[k] = acl[k].v;
        q.acl.n[k] = acl[k].n;
    }
    if (v->job || v->site) { /* bound: for this job alone (a site one: nobody yet) */
        memset(q.acl.n, 0, sizeof q.acl.n);
        q.acl.jobs = &eid;
        q.acl.njobs = 1;
    }
    q.name = v->name;
    q.nodes = nodes.v;
    q.nnodes = nodes.n;
    q.start = v->start;
    q.end = v->end;
    q.restore = restore;
    q.grid = v->site; /* a spool's: yields to [grid] local_wait_bound (issue 25) */
    rc = batch_resv_create(L->eng, &q, live_now(L), NULL, 0, why, wl);
    if (rc == 0)
        v->in_engine = true;
out:
    live_words_free(&nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        live_words_free(&acl[k]);
    return rc;
}

void live_resv_moved(struct live *L)
{
    const struct batch_moved *mv;
    size_t n = batch_cycle_moved(L->eng, &mv);
    for (size_t i = 0; i < n; i++) {
        struct lresv *v = live_resv_find(L, mv[i].name);
        struct batch_resv_info ri;
        char *nodes;
        if (!v || batch_resv_find(L->eng, v->name, &ri) < 0 || !(nodes = live_resv_nodes(L, &ri)))
            continue; /* a later entry moved it again, or out of memory: stored as it was */
        free(v->nodes);
        v->nodes = nodes;
        v->start = ri.start;
        v->end = ri.end;
        if (live_resv_store(L, v) < 0)
            log_warnx("reservation %s: cannot store its new start", v->name);
        else
            log_info("reservation %s of job %" PRIu64 " moved up to start %" PRId64
                     " (docs/batch.md \"Grid reservations move up\")",
                     v->name, v->job, v->start);
    }
}

void live_resv_apply(struct live *L)
{
    int64_t now = live_now(L);
    for (uint32_t i = 0; i < L->nresv;) {
        struct lresv *v = &L->resv[i];
        if (v->end <= now) {
            log_info("reservation %s ended", v->name);
            live_resv_drop(L, v);
            continue;
        }
        /* a site reservation is held for its one job: once that job runs (or ended) it
         * has served, and its remaining window would only keep other jobs off the nodes
         * (Maui drops a job reservation at the job's start alike) */
        const struct ljob *bj = v->site && v->job ? live_job_find(L, v->job) : NULL;
        if (bj && bj->ntasks && live_elem_peek(bj, 0)->state >= EL_RUNNING) {
            log_info("reservation %s served job %" PRIu64 ": released", v->name, v->job);
            live_resv_drop(L, v);
            continue;
        }
        i++;
        if (v->in_engine)
            continue;
        struct live_words w;
        bool known = live_words_split(v->nodes, &w) == 0 && w.n > 0;
        for (size_t k = 0; known && k < w.n; k++)
            known = batch_node_find(L->eng, w.v[k]) >= 0;
        live_words_free(&w);
        char why[256];
        if (known && live_resv_engine(L, v, true, why, sizeof why) < 0)
            log_warnx("reservation %s cannot be re-created: %s", v->name, why);
    }
}

/* ---- SUBMIT into a reservation ---- */

const char *live_resv_check(struct live *L, const struct ljob *j)
{
    struct lresv *v = live_resv_find(L, j->resv);
    if (!v)
        return "no such reservation (see gridnode showres)";
    if (v->end <= live_now(L))
        return "that reservation has ended";
    if (v->site) {
        if (v->job)
            return "that reservation is already held for another job";
        if (j->ntasks != 1)
            return "a site reservation holds exactly one job: submit one parallel job "
                   "(PSUBMIT) or a single task into it";
    }
    bool any = false, ok = false;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        any |= v->acl[k] != NULL;
        ok |= live_in_list(v->acl[k], live_job_cred(j, k));
    }
    if (!any && v->site) /* a site reservation without an ACL: its owner's */
        ok = !v->owner[0] || !strcmp(v->owner, live_job_cred(j, BATCH_CRED_USER));
    if (!ok)
        return "the reservation's access list does not admit this job (user, group, account, "
               "class or qos)";
    int64_t from = v->start > live_now(L) ? v->start : live_now(L);
    if (v->site && !j->early && from + j->limit_s * 1000 > v->end)
        return "the job's walltime does not fit in what is left of that reservation: "
               "reserve at least the walltime from now (or submit with early, B5)";
    return NULL;
}

int live_resv_bind(struct live *L, struct ljob *j)
{
    struct lresv *v = live_resv_find(L, j->resv);
    if (!v || !v->site || v->job)
        return 0;
    v->job = j->id;
    if (!j->grid) { /* it came through a spool's site reservation (issue 25) */
        j->grid = true;
        live_job_dirty(L, j);
    }
    if (v->in_engine) {
        char why[256];
        batch_resv_release(L->eng, v->name);
        v->in_engine = false;
        if (live_resv_engine(L, v, true, why, sizeof why) < 0)
            log_warnx("reservation %s: cannot bind job %" PRIu64 ": %s", v->name, j->id, why);
    }
    return live_resv_store(L, v);
}

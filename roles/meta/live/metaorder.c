/*
 * metaorder.c - the spool's outbox of orders to its sites (issue 24, docs/meta.md
 * "Exactly once, level by level"): CANCEL of a copy (a user's cancel, a copy submitted
 * after its job ended), RESV_RELEASE of a reservation, and the withdrawal (CANCEL
 * `unstarted`) of the copies a lost site holds. An order is stored in the `orders` table
 * in the turn that decides it, so before the user's OK goes out, and is sent whenever
 * its site is up until the site acknowledges it: OK, or an answer saying there is
 * nothing left to do (NOT_FOUND, STATE: the sites' handling of these is idempotent). A
 * request of the site's that failed for the moment (BUSY, STORAGE, ...) is sent again
 * after 1, 2, 4 ... 60 s; an unanswered one marks the site down, and every order of a
 * site goes again when it is back up. A restart of the spool loads the orders and sends
 * them again. Above the messages (metasend.c) and the jobs (metajob.c); called by the
 * placement rounds, the sites and the requests.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"

#define ORDER_BACKOFF_MAX_MS 60000
#define ORDER_INFLIGHT_MAX 256 /* orders sent to one site and not answered yet */

static const char *const kind_names[] = {"cancel", "release", "withdraw"};

const char *meta_order_kind_name(int kind)
{
    return kind >= 0 && kind <= OR_WITHDRAW ? kind_names[kind] : "?";
}

static int kind_parse(const char *s)
{
    for (int i = 0; i <= OR_WITHDRAW; i++)
        if (!strcmp(s, kind_names[i]))
            return i;
    return -1;
}

static struct morder *order_find(struct meta *M, uint64_t id)
{
    for (uint32_t i = 0; i < M->norders; i++)
        if (M->orders[i].id == id)
            return &M->orders[i];
    return NULL;
}

/* (meta_int.h) */
void meta_job_requeue_now(struct meta *M, struct mjob *j, const char *why)
{
    if (j->phase != PH_IDLE && M->inflight)
        M->inflight--;
    j->phase = PH_IDLE;
    j->requeueing = false;
    j->site = j->mv_site = -1;
    j->sjob = j->mv_sjob = 0;
    j->resv[0] = j->mv_resv[0] = '\0';
    j->withdrawing = false;
    j->tried = 0;
    j->started = j->finished = j->exit = 0;
    j->t_issued = j->t_running = j->t_done = j->t_failed = 0;
    free(j->tasks_raw);
    j->tasks_raw = NULL;
    j->tasks_len = 0;
    meta_job_set(M, j, MJ_QUEUED, why); /* placed again with a new attempt (a new key) */
}

/* Order o is done: out of the table (the deletion is buffered into this turn). */
static void order_drop(struct meta *M, struct morder *o)
{
    struct mjob *j = o->job ? meta_job_find(M, o->job) : NULL;
    if (j && j->orders)
        j->orders--;
    if (j && j->requeueing && o->kind == OR_CANCEL && o->site == j->site) {
        /* the copy a requeue waited for is cancelled (or was never made): placed again */
        char r[200];
        snprintf(r, sizeof r, "requeued: its copy at site %s is cancelled, placed again",
                 M->site[o->site].name);
        meta_job_requeue_now(M, j, r);
    }
    uint8_t k[8];
    store_key_u64(k, o->id);
    if (store_del(M->store, M->t_orders, k, sizeof k) < 0)
        M->turn_failed = true;
    uint32_t i = (uint32_t)(o - M->orders);
    memmove(&M->orders[i], &M->orders[i + 1], (M->norders - i - 1) * sizeof *M->orders);
    M->norders--;
}

static void order_send(struct meta *M, struct morder *o)
{
    struct msite *s = &M->site[o->site];
    if (o->kind == OR_CANCEL && !o->sjob) {
        /* the copy a submission may have made, its answer lost: the same submission again
         * with `hold` gives its id (the copy made then, or a held one that never starts;
         * none if its reservation is gone), and the cancel follows (meta_order_submitted) */
        struct mjob *j = meta_job_find(M, o->job);
        if (!j) {
            order_drop(M, o);
            return;
        }
        meta_send_submit(M, s, j, o->resv, o->attempt, true);
        o->inflight = true;
        o->tries++;
        o->dirty = true;
        return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    if (o->kind == OR_RELEASE) {
        meta_req_begin(M, s, RK_ORDER, o->id, WT_RESV_RELEASE, 2, M->cfg.request_timeout_ms, &wb);
        wire_put_str(&wb, "user", M->cfg.user);
        wire_put_str(&wb, "name", o->resv);
    } else {
        meta_req_begin(M, s, RK_ORDER, o->id, WT_CANCEL, o->kind == OR_WITHDRAW ? 2 : 1,
                       M->cfg.request_timeout_ms, &wb);
        wire_put_u64(&wb, "job", o->sjob);
        if (o->kind == OR_WITHDRAW)
            wire_put_bool(&wb, "unstarted", true);
    }
    meta_queue_out(M, o->site, &wb);
    wire_buf_free(&wb);
    o->inflight = true;
    o->tries++;
    o->dirty = true;
}

static uint32_t inflight_at(const struct meta *M, int site)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < M->norders; i++)
        n += M->orders[i].site == site && M->orders[i].inflight;
    return n;
}

/* A new order (not sent), NULL when out of memory (the turn then fails). */
static struct morder *order_new(struct meta *M, int site, int kind, uint64_t job, uint64_t sjob,
                                const char *resv)
{
    if (M->norders == M->caporders) {
        uint32_t nc = M->caporders ? M->caporders * 2 : 64;
        void *p = realloc(M->orders, nc * sizeof *M->orders);
        if (!p) {
            M->turn_failed = true; /* the user's request gets STORAGE, nothing is lost */
            return NULL;
        }
        M->orders = p;
        M->caporders = nc;
    }
    struct morder *o = &M->orders[M->norders++];
    memset(o, 0, sizeof *o);
    o->id = M->next_order++;
    M->meta_dirty = true;
    o->site = site;
    o->kind = (uint8_t)kind;
    o->job = job;
    o->sjob = sjob;
    snprintf(o->resv, sizeof o->resv, "%s", resv ? resv : "");
    o->since = wall_now_ms();
    o->dirty = true;
    struct mjob *j = job ? meta_job_find(M, job) : NULL;
    if (j)
        j->orders++;
    return o;
}

void meta_order_add(struct meta *M, int site, int kind, uint64_t job, uint64_t sjob,
                    const char *resv)
{
    if (site < 0 || site >= M->nsites || (kind == OR_RELEASE ? !resv || !resv[0] : !sjob))
        return;
    for (uint32_t i = 0; i < M->norders; i++) { /* the same order again: once is enough */
        const struct morder *o = &M->orders[i];
        if (o->site == site && o->kind == kind &&
            (kind == OR_RELEASE ? !strcmp(o->resv, resv) : o->sjob == sjob))
            return;
    }
    struct morder *o = order_new(M, site, kind, job, sjob, resv);
    if (o && M->site[site].info.up && inflight_at(M, site) < ORDER_INFLIGHT_MAX)
        order_send(M, o);
}

void meta_order_cancel_unanswered(struct meta *M, struct mjob *j)
{
    if (j->site < 0 || j->site >= M->nsites)
        return;
    struct morder *o = order_new(M, j->site, OR_CANCEL, j->id, 0, j->resv);
    if (o) {
        o->attempt = j->attempt;
        o->inflight = true; /* the submission itself is under way: its answer comes first */
    }
}

static struct morder *unanswered_of(struct meta *M, int site, uint64_t job)
{
    for (uint32_t i = 0; i < M->norders; i++) {
        struct morder *o = &M->orders[i];
        if (o->site == site && o->kind == OR_CANCEL && !o->sjob && o->job == job)
            return o;
    }
    return NULL;
}

void meta_order_submitted(struct meta *M, struct msite *s, struct mjob *j, uint64_t sjob)
{
    struct morder *o = unanswered_of(M, s->idx, j->id);
    if (!o) { /* an answer after the job ended, no order waiting for it: cancel that copy */
        meta_order_add(M, s->idx, OR_CANCEL, j->id, sjob, NULL);
        return;
    }
    o->inflight = false;
    if (!sjob) { /* refused: no copy was made by that key */
        order_drop(M, o);
        return;
    }
    o->sjob = sjob;
    o->dirty = true;
    log_info("job %" PRIu64 ": its submission at site %s made job %" PRIu64 ": cancelled there",
             j->id, s->name, sjob);
    if (s->info.up)
        order_send(M, o);
}

void meta_order_submit_lost(struct meta *M, int site, uint64_t job)
{
    struct morder *o = unanswered_of(M, site, job);
    if (o)
        o->inflight = false;
}

void meta_send_release(struct meta *M, struct msite *s, const char *resv)
{
    if (!resv[0])
        return;
    char prefix[64]; /* the job the reservation was for, by its name m<inc>-<job>-<n> */
    int pl = snprintf(prefix, sizeof prefix, "m%s-", M->inc);
    uint64_t job = strncmp(resv, prefix, (size_t)pl) ? 0 : strtoull(resv + pl, NULL, 10);
    meta_order_add(M, s->idx, OR_RELEASE, job, 0, resv);
}

/* A lost site's copy withdrawn (OK) or gone (NOT_FOUND): the job is placed again. */
static void lost_copy_withdrawn(struct meta *M, struct mjob *j, const struct morder *o)
{
    struct msite *s = &M->site[o->site];
    meta_send_release(M, s, j->resv);
    log_info("job %" PRIu64 ": its copy at site %s, which was lost, is withdrawn: placed again",
             j->id, s->name);
    j->withdrawing = false;
    j->site = -1;
    j->sjob = 0;
    j->resv[0] = '\0';
    j->tried = 0;
    char r[200];
    snprintf(r, sizeof r, "withdrawn from site %s (unreachable for a while): placed again",
             s->name);
    meta_job_set(M, j, MJ_QUEUED, r);
}

void meta_order_answer(struct meta *M, struct msite *s, uint64_t oid, bool err, uint64_t code,
                       const char *msg)
{
    struct morder *o = order_find(M, oid);
    if (!o || o->site != s->idx)
        return;
    o->inflight = false;
    bool settled = !err || code == WE_NOT_FOUND || code == WE_STATE;
    if (err && !settled &&
        (code == WE_INVALID || code == WE_FIELD || code == WE_TYPE || code == WE_MALFORMED ||
         code == WE_VERSION || code == WE_DENIED || code == WE_AUTH)) {
        /* refused for good: sending it again cannot help; the operator reads why */
        log_warnx("site %s refused the %s of job %" PRIu64 " (its job %" PRIu64 "%s%s): %s; "
                  "the order is dropped",
                  s->name, meta_order_kind_name(o->kind), o->job, o->sjob, o->resv[0] ? ", " : "",
                  o->resv, msg);
        settled = true;
        struct mjob *rj = o->kind == OR_CANCEL ? meta_job_find(M, o->job) : NULL;
        if (rj && rj->requeueing && rj->site == o->site) { /* its copy may run: it stays */
            rj->requeueing = false;
            char r[400];
            snprintf(r, sizeof r, "requeue failed: site %s refused to cancel its copy: %.150s",
                     s->name, msg);
            meta_job_set(M, rj, (enum mj_state)rj->state, r);
        }
    }
    if (!settled) { /* busy, no storage, ...: again later */
        int64_t wait = 1000;
        for (uint32_t i = 1; i < o->tries && wait < ORDER_BACKOFF_MAX_MS; i++)
            wait *= 2;
        o->next_at = loop_now_ms() + (wait < ORDER_BACKOFF_MAX_MS ? wait : ORDER_BACKOFF_MAX_MS);
        log_info("site %s: the %s of job %" PRIu64 " failed (%s): again in %llds", s->name,
                 meta_order_kind_name(o->kind), o->job, msg,
                 (long long)((o->next_at - loop_now_ms()) / 1000));
        return;
    }
    struct mjob *j = o->kind == OR_WITHDRAW ? meta_job_find(M, o->job) : NULL;
    if (j && j->site == o->site && j->sjob == o->sjob && j->withdrawing && j->state == MJ_PLACED &&
        j->phase == PH_IDLE) {
        if (!err || code == WE_NOT_FOUND) {
            lost_copy_withdrawn(M, j, o);
        } else { /* it started there meanwhile: it stays, the polls follow it */
            j->withdrawing = false;
            char r[200];
            snprintf(r, sizeof r, "site %s is back; the job started there: it stays", s->name);
            meta_job_set(M, j, j->state, r);
        }
    }
    if (o->tries > 1)
        log_info("site %s acknowledged the %s of job %" PRIu64 " after %u tries", s->name,
                 meta_order_kind_name(o->kind), o->job, o->tries);
    order_drop(M, o);
}

void meta_order_unsent(struct meta *M, uint64_t oid)
{
    struct morder *o = order_find(M, oid);
    if (o)
        o->inflight = false;
}

void meta_orders_site_up(struct meta *M, int site)
{
    for (uint32_t i = 0; i < M->norders; i++)
        if (M->orders[i].site == site)
            M->orders[i].next_at = 0;
}

void meta_orders_tick(struct meta *M)
{
    int64_t now = loop_now_ms();
    uint32_t busy[META_MAX_SITES] = {0};
    for (uint32_t i = 0; i < M->norders; i++)
        busy[M->orders[i].site] += M->orders[i].inflight;
    for (uint32_t i = 0; i < M->norders; i++) {
        struct morder *o = &M->orders[i];
        if (o->inflight || now < o->next_at || !M->site[o->site].info.up ||
            busy[o->site] >= ORDER_INFLIGHT_MAX)
            continue;
        order_send(M, o);
        busy[o->site]++;
    }
}

uint32_t meta_orders_at(const struct meta *M, int site)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < M->norders; i++)
        n += M->orders[i].site == site;
    return n;
}

/* ---- the record: a msgpack map under the order's id ---- */

static int encode_order(const void *rec, struct wire_buf *wb)
{
    const struct morder *o = rec;
    wire_buf_reset(wb);
    wire_pack_map(wb, 8);
    wire_put_i64(wb, "site", o->site);
    wire_put_str(wb, "kind", meta_order_kind_name(o->kind));
    wire_put_u64(wb, "job", o->job);
    wire_put_u64(wb, "sjob", o->sjob);
    wire_put_str(wb, "resv", o->resv);
    wire_put_i64(wb, "since", o->since);
    wire_put_u64(wb, "tries", o->tries);
    wire_put_u64(wb, "attempt", o->attempt);
    return 0;
}

int meta_orders_save(struct meta *M)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    for (uint32_t i = 0; i < M->norders && rc == 0; i++) {
        struct morder *o = &M->orders[i];
        if (!o->dirty)
            continue;
        rc = record_save_u64(M->store, M->t_orders, o->id, o, encode_order, &wb);
        o->dirty = false;
    }
    wire_buf_free(&wb);
    return rc;
}

int meta_order_load(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct meta *M = arg;
    (void)klen;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    int rc = RECORD_UNREADABLE;
    if (msgpack_unpack_next(&up, val, vlen, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP)
        goto out;
    struct morder o = {0};
    char kind[16];
    o.id = store_key_get_u64(key);
    o.site = (int)wire_get_i64(&up.data, "site", -1);
    wire_get_strbuf(&up.data, "kind", kind, sizeof kind);
    int k = kind_parse(kind);
    if (k < 0)
        goto out;
    o.kind = (uint8_t)k;
    o.job = wire_get_u64(&up.data, "job", 0);
    o.sjob = wire_get_u64(&up.data, "sjob", 0);
    wire_get_strbuf(&up.data, "resv", o.resv, sizeof o.resv);
    o.since = wire_get_i64(&up.data, "since", 0);
    o.tries = (uint32_t)wire_get_u64(&up.data, "tries", 0);
    o.attempt = (uint32_t)wire_get_u64(&up.data, "attempt", 0);
    if (o.id >= M->next_order)
        M->next_order = o.id + 1;
    if (o.site < 0 || o.site >= M->nsites) {
        log_warnx("order %" PRIu64 " (%s of job %" PRIu64 "): its site is no longer in "
                  "meta.sites: dropped",
                  o.id, kind, o.job);
        uint8_t kb[8];
        store_key_u64(kb, o.id);
        store_del(M->store, M->t_orders, kb, sizeof kb);
        rc = RECORD_IGNORED;
        goto out;
    }
    if (M->norders == M->caporders) {
        uint32_t nc = M->caporders ? M->caporders * 2 : 64;
        void *p = realloc(M->orders, nc * sizeof *M->orders);
        if (!p) {
            rc = -1;
            goto out;
        }
        M->orders = p;
        M->caporders = nc;
    }
    M->orders[M->norders++] = o;
    struct mjob *j = o.job ? meta_job_find(M, o.job) : NULL; /* the jobs are loaded first */
    if (j)
        j->orders++;
    rc = RECORD_TAKEN;
out:
    msgpack_unpacked_destroy(&up);
    return rc;
}

void meta_orders_free(struct meta *M)
{
    free(M->orders);
    M->orders = NULL;
    M->norders = M->caporders = 0;
}

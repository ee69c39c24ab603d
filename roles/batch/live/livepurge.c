/*
 * livepurge.c - purging finished jobs at the batch role, as the cluster manager does
 * (roles/cluster/purge.c, docs/wire.md 6.10 and 6.11): PURGE requests (gridnode purge
 * -e BATCH_EP) and the automatic purge of jobs that ended more than jobs.retention_s ago.
 *
 * Only finished jobs go: every element ended (a cancelled job whose running elements
 * are still stopping has not). Purging a job, in one turn, removes it from memory,
 * deletes its record ("jobs") and its files' list ("jobdata"), writes a marker
 * "purge/<id>" in meta, keeps its accounting record (liveacct.c) and adds what its
 * elements ran to the kept fairshare usage (table "fshist": live_load rebuilds the
 * fairshare history from the element records, which go); the reply goes after that
 * commit, and from then on the job is unknown (JOB_GET says NOT_FOUND, lists skip it).
 * Its element records ("elems", "elemfiles") are deleted after, at most
 * PURGE_TURN_KEYS per turn, so a huge array never stalls the loop; the marker goes with
 * its last records. A restart reads the markers back first, ignores the elements of
 * marked jobs and carries on, so kill -9 at any point leaves no record behind for good.
 * Job ids are never reused (meta next_job). Nothing here touches a queued or running
 * job, nor the engine's jobs, nor asks for a cycle: scheduling is unchanged.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/endwait.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

#define PURGE_TURN_KEYS 50000 /* element records deleted per turn at most */
#define PURGE_REQ_JOBS 10000  /* jobs one request (or one retention tick) purges at most */

/* Kept fairshare usage: amount (processors x ms) in the window starting at wstart. */
struct lfsh {
    uint64_t key;
    int64_t wstart;
    char *user, *group, *account;
    double amount;
    bool dirty;
};

/* ---- the kept fairshare usage ---- */

static int64_t fs_iv(const struct live *L)
{
    return L->cfg.eng.fsinterval * 1000; /* the engine runs in ms */
}

static int64_t floordiv(int64_t t, int64_t d)
{
    int64_t q = t / d;
    return (t % d != 0 && t < 0) ? q - 1 : q;
}

/* The start of the oldest window the engine still counts at now. */
static int64_t fs_oldest(const struct live *L, int64_t now)
{
    int64_t iv = fs_iv(L);
    return (floordiv(now, iv) - L->cfg.eng.fsdepth + 1) * iv;
}

static void fsh_clear(struct lfsh *f)
{
    free(f->user);
    free(f->group);
    free(f->account);
}

static int fsh_push(struct live *L, const struct lfsh *f)
{
    if (L->nfsh == L->capfsh) {
        uint32_t cap = L->capfsh ? L->capfsh * 2 : 16;
        struct lfsh *p = realloc(L->fsh, cap * sizeof *p);
        if (!p)
            return -1;
        L->fsh = p;
        L->capfsh = cap;
    }
    L->fsh[L->nfsh++] = *f;
    return 0;
}

static char *dup_str(const msgpack_object *m, const char *k)
{
    size_t l;
    const char *s = wire_get_str(m, k, &l);
    return strndup(s ? s : "", s ? l : 0);
}

/* One "fshist" record: charged to the engine and kept, or deleted once too old. */
static int load_fsh(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct live *L = arg;
    msgpack_unpacked up;
    if (klen != 8)
        return 0;
    uint64_t k = store_key_get_u64(key);
    if (k >= L->fsh_next)
        L->fsh_next = k + 1;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, val, vlen, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        log_warnx("fshist record %" PRIu64 " is unreadable: deleted", k);
        return store_del(L->store, L->t_fshist, key, klen) < 0 ? -1 : 0;
    }
    struct lfsh f = {k,
                     wire_get_i64(&up.data, "w", 0),
                     dup_str(&up.data, "user"),
                     dup_str(&up.data, "group"),
                     dup_str(&up.data, "account"),
                     0,
                     false};
    const msgpack_object *a = wire_get(&up.data, "amount");
    f.amount = a && a->type == MSGPACK_OBJECT_FLOAT64 ? a->via.f64 : 0;
    msgpack_unpacked_destroy(&up);
    int rc = 0;
    if (!f.user || !f.group || !f.account)
        rc = -1;
    else if (L->cfg.eng.fspolicy == BATCH_FS_NONE || f.wstart < fs_oldest(L, wall_now_ms()))
        rc = store_del(L->store, L->t_fshist, key, klen) < 0 ? -1 : 0; /* counts no more */
    else if (batch_fairshare_add(L->eng, f.user, f.group, f.account, f.wstart, f.amount) < 0 ||
             fsh_push(L, &f) < 0)
        rc = -1;
    else
        return 0;
    fsh_clear(&f);
    return rc;
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static bool fsh_is(const struct lfsh *f, const struct ljob *j, int64_t w)
{
    return f->wstart == w && !strcmp(f->user, nz(j->user)) && !strcmp(f->group, nz(j->group)) &&
           !strcmp(f->account, nz(j->account));
}

/* Adds amount in the window starting at w to j's owner's kept usage (memory); *hint:
 * the entry found last (the elements of one job mostly share a window). */
static int fsh_add(struct live *L, const struct ljob *j, int64_t w, double amount, uint32_t *hint)
{
    for (uint32_t k = 0; k <= L->nfsh; k++) {
        uint32_t i = k == 0 ? *hint : k - 1;
        if (i >= L->nfsh || !fsh_is(&L->fsh[i], j, w))
            continue;
        L->fsh[i].amount += amount;
        L->fsh[i].dirty = true;
        *hint = i;
        return 0;
    }
    struct lfsh f = {
        L->fsh_next, w,   strdup(nz(j->user)), strdup(nz(j->group)), strdup(nz(j->account)),
        amount,      true};
    if (!f.user || !f.group || !f.account || fsh_push(L, &f) < 0) {
        fsh_clear(&f);
        return -1;
    }
    L->fsh_next++;
    *hint = L->nfsh - 1;
    return 0;
}

/* What j's ended elements ran, per window the engine still counts (as live_load
 * charges them from the element records), into the kept usage. */
static int fsh_job(struct live *L, const struct ljob *j, int64_t now)
{
    if (L->cfg.eng.fspolicy == BATCH_FS_NONE)
        return 0;
    int64_t iv = fs_iv(L), oldest = fs_oldest(L, now);
    double procs = j->parallel ? j->procs : 1;
    uint32_t hint = 0;
    const struct lelem *el;
    for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
        if (el->state < EL_DONE || el->start <= 0 || el->end <= el->start)
            continue;
        for (int64_t t = el->start > oldest ? el->start : oldest; t < el->end;) {
            int64_t w = floordiv(t, iv) * iv, wend = w + iv;
            int64_t to = el->end < wend ? el->end : wend;
            if (fsh_add(L, j, w, procs * (double)(to - t), &hint) < 0)
                return -1;
            t = to;
        }
    }
    return 0;
}

/* The changed kept usage into the turn, the entries the engine counts no more
 * deleted; 0/-1. */
static int fsh_save(struct live *L, int64_t now)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    int64_t oldest = fs_oldest(L, now);
    uint32_t k = 0;
    for (uint32_t i = 0; i < L->nfsh; i++) { /* the old ones out */
        struct lfsh *f = &L->fsh[i];
        if (f->wstart < oldest) {
            uint8_t key[8];
            store_key_u64(key, f->key);
            if (store_del(L->store, L->t_fshist, key, 8) == 0) {
                fsh_clear(f);
                continue;
            }
            rc = -1; /* kept: the turn fails and is reloaded */
        }
        L->fsh[k++] = *f;
    }
    L->nfsh = k;
    for (uint32_t i = 0; i < L->nfsh && rc == 0; i++) {
        struct lfsh *f = &L->fsh[i];
        if (!f->dirty)
            continue;
        uint8_t key[8];
        wire_buf_reset(&wb);
        wire_pack_map(&wb, 5);
        wire_put_i64(&wb, "w", f->wstart);
        wire_put_str(&wb, "user", f->user);
        wire_put_str(&wb, "group", f->group);
        wire_put_str(&wb, "account", f->account);
        wire_put_f64(&wb, "amount", f->amount);
        store_key_u64(key, f->key);
        rc = store_put(L->store, L->t_fshist, key, 8, wb.sb.data, wb.sb.size);
        f->dirty = false;
    }
    wire_buf_free(&wb);
    return rc;
}

int live_purge_load(struct live *L)
{
    L->fsh_next = 1;
    if (purgeq_load(&L->purge, L->store, L->t_meta) < 0 ||
        store_iter(L->store, L->t_fshist, NULL, 0, load_fsh, L) < 0)
        return -1;
    if (L->purge.n)
        log_info("%u purged job(s) still have records to delete", L->purge.n);
    return 0;
}

void live_purge_free(struct live *L)
{
    purgeq_free(&L->purge);
    for (uint32_t i = 0; i < L->nfsh; i++)
        fsh_clear(&L->fsh[i]);
    free(L->fsh);
    L->fsh = NULL;
    L->nfsh = L->capfsh = 0;
}

/* ---- purging ---- */

static bool finished(const struct ljob *j)
{
    return j->nended == j->ntasks;
}

/* The state a purged job's row shows (JOBS' state of an ended job). */
static const char *end_state(const struct ljob *j)
{
    if (j->parallel)
        return live_elem_state_name(live_elem_peek(j, 0)->state);
    return j->cancelled ? "cancelled" : j->nfailed ? "failed" : "done";
}

/*
 * Deletes finished job j's records, keeps its accounting record and fairshare usage,
 * queues its element records, adds its row to rows (when given); j stays in memory
 * until drop_purged. 0, or -1 (store, memory).
 */
static int purge_one(struct live *L, struct ljob *j, struct wire_buf *rows, int64_t now)
{
    uint8_t key[8];
    store_key_u64(key, j->id);
    if (live_acct_purging(L, j) < 0 || fsh_job(L, j, now) < 0 ||
        purgeq_mark(&L->purge, L->store, L->t_meta, j->id) < 0 ||
        store_del(L->store, L->t_jobs, key, 8) < 0 ||
        (j->data && store_del(L->store, L->t_jobdata, key, 8) < 0))
        return -1;
    L->files_sweep_soon |= j->data != NULL; /* its files, once no job names them */
    if (rows) {
        wire_pack_map(rows, 4);
        wire_put_u64(rows, "job", j->id);
        wire_put_str(rows, "state", end_state(j));
        wire_put_i64(rows, "finished", j->finished);
        wire_put_str(rows, "name", nz(j->name));
    }
    return 0;
}

/* At load (live_load) the queue is the markers in key order, that is by id: sorted. */
bool live_purge_pending(const struct live *L, uint64_t id)
{
    return purgeq_has(&L->purge, id);
}

/* Frees the jobs whose ids are in ids (sorted) and closes the gaps: O(jobs x log n). */
static void drop_purged(struct live *L, const uint64_t *ids, uint32_t n)
{
    if (!n)
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        if (!ids_has(ids, n, j->id)) {
            L->jobs[k++] = j;
            continue;
        }
        live_dirty_forget(L, j);
        endwait_changed(L->endwait, j->id); /* a JOB_WAIT naming it hears it is gone */
        live_job_free(j);
    }
    L->njobs = k;
}

/* Ids of finished jobs that ended at or before cutoff, in id order, at most max. */
static uint32_t select_old(struct live *L, int64_t cutoff, uint64_t *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < L->njobs && n < max; i++)
        if (finished(L->jobs[i]) && L->jobs[i]->finished <= cutoff)
            out[n++] = L->jobs[i]->id;
    return n;
}

/* Purges the n jobs of ids (sorted, finished), rows into rows when given: the number
 * purged, or -1 (the turn is undone: the caller fails it). */
static int purge_ids(struct live *L, const uint64_t *ids, uint32_t n, struct wire_buf *rows)
{
    int64_t now = wall_now_ms();
    for (uint32_t i = 0; i < n; i++)
        if (purge_one(L, live_job_find(L, ids[i]), rows, now) < 0)
            return -1;
    if (fsh_save(L, now) < 0)
        return -1;
    drop_purged(L, ids, n);
    return (int)n;
}

void live_purge_tick(struct live *L)
{
    long every = L->cfg.live.retention_s < 10 ? (long)L->cfg.live.retention_s : 10; /* s */
    if (every <= 0 || ++L->retention_ticks < every)
        return;
    L->retention_ticks = 0;
    uint64_t *ids = malloc(PURGE_REQ_JOBS * sizeof *ids);
    if (!ids)
        return;
    int64_t cutoff = wall_now_ms() - L->cfg.live.retention_s * 1000;
    uint32_t n = select_old(L, cutoff, ids, PURGE_REQ_JOBS);
    int done = purge_ids(L, ids, n, NULL);
    if (done < 0)
        L->turn_failed = true; /* the turn is undone: the state is reloaded */
    else if (done)
        log_info("retention: %d finished job(s) older than %lld s purged", done,
                 (long long)L->cfg.live.retention_s);
    free(ids);
}

/* The named jobs checked (all exist, all ended) into ids (those ended at or before
 * cutoff): their count, or -1 with the error in reply. */
static int64_t named(struct live *L, const struct wire_msg *m, const msgpack_object *list,
                     int64_t cutoff, uint64_t *ids, struct wire_buf *reply)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        uint64_t id = list->via.array.ptr[i].via.u64;
        struct ljob *j = live_job_find(L, id);
        if (!j) {
            live_fail(reply, m->id, WE_NOT_FOUND,
                      "no job %" PRIu64 " in this batch role (already purged, or never "
                      "submitted); nothing was purged",
                      id);
            return -1;
        }
        if (!finished(j)) {
            live_fail(reply, m->id, WE_STATE,
                      "job %" PRIu64 " is %s: only finished jobs can be purged (%s); nothing "
                      "was purged",
                      id, j->cancelled ? "cancelled, its elements still stopping" : "not ended",
                      j->cancelled ? "wait until it ended" : "cancel it first");
            return -1;
        }
        if (j->finished <= cutoff)
            ids[n++] = id;
    }
    return n;
}

/*
 * PURGE (docs/wire.md 6.10): "jobs" (ids) and/or "older_than_s". Named jobs must all
 * exist and have ended (else NOT_FOUND / STATE naming the first that does not, and
 * nothing is purged); with older_than_s only those that ended that long ago go.
 * Without "jobs", every finished job that ended older_than_s (default 0) ago, up to
 * PURGE_REQ_JOBS ("more": ask again). Who may send it is access control's
 * (daemon/access.c: administrators, and peers whose grant names it), as at a cluster.
 */
void live_purge_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    const msgpack_object *list = wire_get(m->root, "jobs");
    int64_t cutoff = wall_now_ms() - (int64_t)wire_get_u64(m->root, "older_than_s", 0) * 1000;
    uint32_t cap = list ? list->via.array.size : PURGE_REQ_JOBS;
    uint64_t *ids = malloc(((size_t)cap + 1) * sizeof *ids);
    if (!ids) {
        live_fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    int64_t n = list ? named(L, m, list, cutoff, ids, reply) : select_old(L, cutoff, ids, cap);
    if (n < 0) {
        free(ids);
        return;
    }
    n = ids_sort_unique(ids, (uint32_t)n);
    struct wire_buf rows;
    wire_buf_init(&rows);
    int done = purge_ids(L, ids, (uint32_t)n, &rows);
    if (done < 0) {
        live_fail(reply, m->id, WE_STORAGE, "out of memory");
        L->turn_failed = true; /* the turn is undone: the state is reloaded */
    } else {
        wire_begin(reply, WT_PURGED, m->id, 2);
        wire_put_key(reply, "jobs");
        wire_pack_array(reply, (uint32_t)done);
        msgpack_sbuffer_write(&reply->sb, rows.sb.data, rows.sb.size);
        wire_put_bool(reply, "more", !list && n == cap);
        if (done)
            log_info("purge: %d finished job(s) purged", done);
    }
    free(ids);
    wire_buf_free(&rows);
}

/* ---- the element records, after ---- */

/* PURGE_TURN_KEYS; GRIDNODE_PURGE_TURN_KEYS (tests only) makes a small job's records
 * take several turns, so a kill -9 in between leaves markers to resume. */
static uint32_t turn_keys(void)
{
    const char *e = getenv("GRIDNODE_PURGE_TURN_KEYS");
    long n = e ? atol(e) : 0;
    return n > 0 && n < PURGE_TURN_KEYS ? (uint32_t)n : PURGE_TURN_KEYS;
}

void live_purge_step(struct live *L)
{
    int tables[] = {L->t_elems, L->t_elemfiles};
    if (purgeq_step(&L->purge, L->store, L->t_meta, tables, sizeof tables / sizeof tables[0],
                    turn_keys()) < 0)
        L->turn_failed = true;
}

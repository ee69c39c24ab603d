/*
 * metapurge.c - the grid spool forgets ended jobs, as the cluster manager does
 * (roles/cluster/purge.c, docs/wire.md 6.10): PURGE from an administrator, and by itself
 * the jobs that ended more than jobs.retention_s ago.
 *
 * A job goes once the spool is done with it: ended, its end committed (its accounting
 * record, written in that commit, stays), its outputs copied back, no order about it
 * waiting for its site, and no request about it waiting for an answer (a poll, a relayed
 * JOB_GET, a placement's). In one turn its record (table jobs) and its copied task rows
 * (taskfiles) are deleted and it leaves memory; the reply goes after that commit, so a
 * kill -9 finds all of it or none. Ids are never reused (meta next_job). The files only
 * it named are deleted by the next sweep, which a purge brings forward, once unchanged
 * for files.keep_s; a Slurm site's directories of its copies go then too. Calls
 * metajob.c and metafiles.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "daemon/purgeq.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"

#define PURGE_REQ_JOBS 10000 /* jobs one request (or one retention pass) purges at most */

/* The ids of the jobs something in flight is about (requests to the sites, relayed
 * JOB_GETs, estimate groups, output copies), sorted; *n their count. NULL and n 0 when
 * none; -1 out of memory. */
static int busy_ids(struct meta *M, uint64_t **out, uint32_t *n)
{
    size_t cap = M->nrelay + M->npulls;
    for (int s = 0; s < M->nsites; s++)
        cap += M->site[s].nreq;
    for (uint32_t g = 0; g < M->neg; g++)
        cap += M->eg[g].n;
    *out = NULL;
    *n = 0;
    if (!cap)
        return 0;
    uint64_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -1;
    size_t k = 0;
    for (int s = 0; s < M->nsites; s++)
        for (uint32_t i = 0; i < M->site[s].nreq; i++) {
            const struct mreq *q = &M->site[s].req[i];
            if (q->job && q->kind != RK_GEST && q->kind != RK_ORDER && q->kind != RK_OUTPUT &&
                q->kind != RK_FHAVE && q->kind != RK_FPUT)
                ids[k++] = q->job;
        }
    for (uint32_t i = 0; i < M->nrelay; i++)
        ids[k++] = M->relay[i].job;
    for (uint32_t i = 0; i < M->npulls; i++)
        ids[k++] = M->pulls[i].job;
    for (uint32_t g = 0; g < M->neg; g++)
        for (uint32_t i = 0; i < M->eg[g].n; i++)
            ids[k++] = M->eg[g].jobs[i];
    *out = ids;
    *n = ids_sort_unique(ids, (uint32_t)k);
    return 0;
}

/* Why ended job j cannot go yet, NULL when it can. */
static const char *busy(const struct mjob *j, const uint64_t *bids, uint32_t nb)
{
    if (j->dirty || j->listed)
        return "its end is being stored";
    if (j->pulling)
        return "its outputs are being copied from its site";
    if (j->orders || j->withdrawing || j->requeueing)
        return "an order about it is not acknowledged by its site yet";
    if (j->phase != PH_IDLE || j->staging || j->polling || ids_has(bids, nb, j->id))
        return "a request about it is waiting for an answer";
    return NULL;
}

struct rowdel {
    struct meta *M;
    uint64_t id;
};

static int del_row(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct rowdel *d = arg;
    (void)val;
    (void)vlen;
    if (klen < 8 || store_key_get_u64(key) != d->id)
        return 1; /* past its rows (keys in order) */
    return store_del(d->M->store, d->M->t_taskfiles, key, klen) < 0 ? -1 : 0;
}

/* Deletes j's records into the turn and describes it in rows (NULL: not wanted). */
static int purge_one(struct meta *M, const struct mjob *j, struct wire_buf *rows)
{
    uint8_t key[8];
    struct rowdel d = {M, j->id};
    store_key_u64(key, j->id);
    if (store_del(M->store, M->t_jobs, key, sizeof key) < 0 ||
        (M->t_taskfiles >= 0 &&
         store_iter(M->store, M->t_taskfiles, key, sizeof key, del_row, &d) < 0))
        return -1;
    if (rows) {
        wire_pack_map(rows, 4);
        wire_put_u64(rows, "job", j->id);
        wire_put_str(rows, "state", meta_state_name(j->state));
        wire_put_i64(rows, "finished", j->finished);
        wire_put_str(rows, "name", j->name);
    }
    return 0;
}

/* Purges the jobs of ids (sorted, each one that can go): 0, or -1 (the turn failed). */
static int purge_ids(struct meta *M, const uint64_t *ids, uint32_t n, struct wire_buf *rows)
{
    for (uint32_t i = 0; i < n; i++)
        if (purge_one(M, meta_job_find(M, ids[i]), rows) < 0) {
            M->turn_failed = true; /* undone: the state is reloaded */
            return -1;
        }
    meta_jobs_drop(M, ids, n);
    if (n)
        meta_files_sweep_soon(M);
    return 0;
}

/* Ended jobs that can go, ended at or before cutoff, in id order, at most max. */
static uint32_t select_old(struct meta *M, int64_t cutoff, uint64_t *out, uint32_t max,
                           const uint64_t *bids, uint32_t nb)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < M->njobs && n < max; i++) {
        const struct mjob *j = M->jobs[i];
        if (MJ_ENDED(j->state) && j->finished <= cutoff && !busy(j, bids, nb))
            out[n++] = j->id;
    }
    return n;
}

void meta_purge_tick(struct meta *M)
{
    long every = M->cfg.retention_s < 10 ? M->cfg.retention_s : 10; /* seconds */
    if (every <= 0 || ++M->retention_ticks < every || M->turn_failed)
        return;
    M->retention_ticks = 0;
    uint64_t *ids = malloc(PURGE_REQ_JOBS * sizeof *ids), *bids;
    uint32_t nb;
    if (!ids || busy_ids(M, &bids, &nb) < 0) {
        free(ids);
        return;
    }
    uint32_t n = select_old(M, wall_now_ms() - (int64_t)M->cfg.retention_s * 1000, ids,
                            PURGE_REQ_JOBS, bids, nb);
    if (purge_ids(M, ids, n, NULL) == 0 && n)
        log_info("retention: %u ended job(s) older than %ld s purged", n, M->cfg.retention_s);
    free(ids);
    free(bids);
}

/* Checks the named jobs (all must exist and be able to go): 0, or -1 with the ERROR in
 * reply. Those that ended at or before cutoff are put in ids, *n of them. */
static int named(struct meta *M, const struct wire_msg *m, const msgpack_object *list,
                 int64_t cutoff, uint64_t *ids, uint32_t *n, struct wire_buf *reply)
{
    uint64_t *bids;
    uint32_t nb;
    if (busy_ids(M, &bids, &nb) < 0) {
        wire_error_msg(reply, m->id, WE_STORAGE, "out of memory; nothing was purged");
        return -1;
    }
    int rc = 0;
    *n = 0;
    for (uint32_t i = 0; i < list->via.array.size && rc == 0; i++) {
        uint64_t id = list->via.array.ptr[i].via.u64;
        const struct mjob *j = meta_job_find(M, id);
        const char *why = j && MJ_ENDED(j->state) ? busy(j, bids, nb) : NULL;
        if (!j) {
            wire_error_msg(reply, m->id, WE_NOT_FOUND,
                           "no job %" PRIu64 " (already purged, or never submitted); nothing "
                           "was purged",
                           id);
            rc = -1;
        } else if (!MJ_ENDED(j->state)) {
            wire_error_msg(reply, m->id, WE_STATE,
                           "job %" PRIu64 " is %s: only ended jobs can be purged (cancel it "
                           "first); nothing was purged",
                           id, meta_state_name(j->state));
            rc = -1;
        } else if (why) {
            wire_error_msg(reply, m->id, WE_STATE,
                           "job %" PRIu64 " has ended but %s: try again in a moment; nothing "
                           "was purged",
                           id, why);
            rc = -1;
        } else if (j->finished <= cutoff) {
            ids[(*n)++] = id;
        }
    }
    free(bids);
    return rc;
}

void meta_purge_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    const msgpack_object *list = wire_get(m->root, "jobs");
    int64_t cutoff = wall_now_ms() - (int64_t)wire_get_u64(m->root, "older_than_s", 0) * 1000;
    uint32_t n = 0, cap = list ? list->via.array.size : PURGE_REQ_JOBS;
    uint64_t *ids = malloc(((size_t)cap + 1) * sizeof *ids);
    if (!ids) {
        wire_error_msg(reply, m->id, WE_STORAGE, "out of memory; nothing was purged");
        return;
    }
    if (list) {
        if (named(M, m, list, cutoff, ids, &n, reply) < 0) {
            free(ids);
            return;
        }
        n = ids_sort_unique(ids, n);
    } else {
        uint64_t *bids;
        uint32_t nb;
        if (busy_ids(M, &bids, &nb) < 0) {
            free(ids);
            wire_error_msg(reply, m->id, WE_STORAGE, "out of memory; nothing was purged");
            return;
        }
        n = select_old(M, cutoff, ids, cap, bids, nb);
        free(bids);
    }
    struct wire_buf rows;
    wire_buf_init(&rows);
    if (purge_ids(M, ids, n, &rows) < 0) {
        wire_error_msg(reply, m->id, WE_STORAGE, "the spool's store failed; nothing was purged");
    } else {
        wire_begin(reply, WT_PURGED, m->id, 2);
        wire_put_key(reply, "jobs");
        wire_pack_array(reply, n);
        msgpack_sbuffer_write(&reply->sb, rows.sb.data, rows.sb.size);
        wire_put_bool(reply, "more", !list && n == cap);
        if (n)
            log_info("purge: %u ended job(s) purged", n);
    }
    free(ids);
    wire_buf_free(&rows);
}

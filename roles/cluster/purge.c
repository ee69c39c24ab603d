/*
 * purge.c - purging finished jobs: PURGE requests (gridnode purge) and the automatic
 * purge of jobs finished more than jobs.retention_s ago.
 *
 * Only finished jobs go: task bags that are done (failed included) or cancelled, and
 * parallel jobs that ended (done, failed, killed, cancelled). Purging a job, in one
 * turn, removes it from memory, deletes its record (jobs or pjobs) and writes a marker
 * "purge/<id>" in meta; the reply goes after that commit, and from then on the job is
 * unknown everywhere (JOB_GET says NOT_FOUND, lists skip it). Its per-task records
 * (stdin, results, dups, poutput, tasks) are deleted after, at most PURGE_TURN_KEYS per
 * loop turn, so a huge job never stalls the loop; the marker is deleted with its last
 * records. A restart reads the markers back and carries on, so kill -9 at any point
 * leaves no record behind for good. Job ids are never reused (meta next_job), so a
 * record still waiting for deletion can never be mistaken for a newer job's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/purgeq.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

#define PURGE_TURN_KEYS 50000 /* per-task records deleted per loop turn at most */
#define PURGE_REQ_JOBS 10000  /* jobs one request (or one retention tick) purges at most */

int purge_load(struct cluster *c)
{
    return purgeq_load(&c->purge, c->store, c->t_meta);
}

void purge_free(struct cluster *c)
{
    purgeq_free(&c->purge);
}

static bool job_finished(const struct job *j)
{
    return j->state == JS_DONE || j->state == JS_CANCELLED;
}

/* The job with this id (task bag or parallel) is known; *fin: it has ended, *at: when. */
static bool job_lookup(struct cluster *c, uint64_t id, bool *fin, int64_t *at, const char **st)
{
    struct job *j = cluster_job_find(c, id);
    if (j) {
        *fin = job_finished(j);
        *at = j->finished_ms;
        *st = job_state_shown(j);
        return true;
    }
    struct pjob *p = scored_job_find(c, id);
    if (p) {
        *fin = PJ_TERMINAL(p->state);
        *at = p->finished_ms;
        *st = pj_state_name(p->state);
        return true;
    }
    return false;
}

/*
 * Deletes one finished job's record and queues its per-task records; the job stays in
 * memory until drop_purged() (one pass over the job arrays for the whole batch).
 */
static int purge_one(struct cluster *c, uint64_t id, struct wire_buf *rows)
{
    uint8_t key[8];
    bool fin;
    int64_t at;
    const char *st;
    if (!job_lookup(c, id, &fin, &at, &st) || !fin)
        return 0;
    store_key_u64(key, id);
    if (purgeq_mark(&c->purge, c->store, c->t_meta, id) < 0)
        return -1;
    struct job *j = cluster_job_find(c, id);
    struct pjob *p = j ? NULL : scored_job_find(c, id);
    if (cluster_acct_purging(c, j, p, p ? pj_state_name(p->state) : NULL) < 0)
        return -1; /* its accounting record is kept (acct.c) */
    if (rows) {
        wire_pack_map(rows, 4);
        wire_put_u64(rows, "job", id);
        wire_put_str(rows, "state", st);
        wire_put_i64(rows, "finished", at);
        wire_put_str(rows, "name", j ? (j->name ? j->name : "") : (p->name ? p->name : ""));
    }
    if (j)
        j->dirty = false;
    else
        p->dirty = false;
    if (j && j->data) { /* issue 26: its file list; its files swept once no job names them */
        if (store_del(c->store, c->t_jobdata, key, 8) < 0)
            return -1;
        files_sweep_note(c);
    }
    return store_del(c->store, j ? c->t_jobs : c->sd->t_pjobs, key, 8);
}

/* Frees the jobs whose ids are in ids (sorted) and closes the gaps: O(jobs x log n). */
static void drop_purged(struct cluster *c, const uint64_t *ids, uint32_t n)
{
    uint32_t k = 0, open = c->open_from;
    for (uint32_t i = 0; i < c->njobs; i++) {
        if (ids_has(ids, n, c->jobs[i]->id)) {
            cluster_job_free(c->jobs[i]);
            open -= i < c->open_from;
        } else {
            c->jobs[k++] = c->jobs[i];
        }
    }
    c->njobs = k;
    c->open_from = open;
    k = 0;
    for (uint32_t i = 0; i < c->sd->njobs; i++) {
        if (ids_has(ids, n, c->sd->jobs[i]->id))
            scored_job_free(c->sd->jobs[i]);
        else
            c->sd->jobs[k++] = c->sd->jobs[i];
    }
    c->sd->njobs = k;
}

void purge_step(struct cluster *c)
{
    int tables[] = {c->t_stdin, c->t_results, c->t_dups, c->sd->t_poutput,
                    c->t_vres,  c->t_known,   c->t_tasks};
    if (purgeq_step(&c->purge, c->store, c->t_meta, tables, sizeof tables / sizeof tables[0],
                    PURGE_TURN_KEYS) < 0)
        c->turn_failed = true;
}

/* Ids of finished jobs (both kinds) finished before cutoff, in id order, at most max. */
static uint32_t select_old(struct cluster *c, int64_t cutoff, uint64_t *out, uint32_t max)
{
    uint32_t n = 0, a = 0, b = 0;
    while (n < max && (a < c->njobs || b < c->sd->njobs)) {
        bool take_a = b >= c->sd->njobs || (a < c->njobs && c->jobs[a]->id < c->sd->jobs[b]->id);
        uint64_t id = take_a ? c->jobs[a++]->id : c->sd->jobs[b++]->id;
        bool fin;
        int64_t at;
        const char *st;
        if (job_lookup(c, id, &fin, &at, &st) && fin && at <= cutoff)
            out[n++] = id;
    }
    return n;
}

void purge_retention(struct cluster *c)
{
    if (c->cfg.retention_s <= 0 || !c->sd)
        return;
    uint64_t *ids = malloc(PURGE_REQ_JOBS * sizeof *ids);
    if (!ids)
        return;
    uint32_t n =
        select_old(c, wall_now_ms() - (int64_t)c->cfg.retention_s * 1000, ids, PURGE_REQ_JOBS);
    for (uint32_t i = 0; i < n; i++)
        if (purge_one(c, ids[i], NULL) < 0) {
            c->turn_failed = true; /* the turn is undone: the state is reloaded */
            free(ids);
            return;
        }
    drop_purged(c, ids, n);
    if (n)
        log_info("retention: %u finished job(s) older than %ld s purged", n, c->cfg.retention_s);
    free(ids);
}

/*
 * PURGE: "jobs" (ids) and/or "older_than_s". Named jobs must all exist and have ended
 * (else NOT_FOUND / STATE naming the first that does not, and nothing is purged); with
 * older_than_s only those that ended that long ago go. Without "jobs", every finished
 * job that ended older_than_s (default 0) ago, up to PURGE_REQ_JOBS ("more": ask again).
 */
int purge_request(struct cluster *c, const msgpack_object *m, struct wire_buf *reply,
                  uint64_t req_id, char *err, size_t errlen, int *code)
{
    const msgpack_object *list = wire_get(m, "jobs");
    int64_t cutoff = wall_now_ms() - (int64_t)wire_get_u64(m, "older_than_s", 0) * 1000;
    uint32_t n = 0, cap = list ? list->via.array.size : PURGE_REQ_JOBS;
    uint64_t *ids = malloc(((size_t)cap + 1) * sizeof *ids);
    if (!ids) {
        *code = WE_STORAGE;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (list) {
        for (uint32_t i = 0; i < cap; i++) {
            uint64_t id = list->via.array.ptr[i].via.u64;
            bool fin;
            int64_t at;
            const char *st;
            if (!job_lookup(c, id, &fin, &at, &st)) {
                *code = WE_NOT_FOUND;
                snprintf(err, errlen,
                         "no job %" PRIu64 " (already purged, or never "
                         "submitted); nothing was purged",
                         id);
                free(ids);
                return -1;
            }
            if (!fin) {
                *code = WE_STATE;
                snprintf(err, errlen,
                         "job %" PRIu64 " is %s: only finished jobs can be "
                         "purged (cancel it first); nothing was purged",
                         id, st);
                free(ids);
                return -1;
            }
            if (at <= cutoff)
                ids[n++] = id;
        }
    } else {
        n = select_old(c, cutoff, ids, cap);
    }
    n = ids_sort_unique(ids, n);
    struct wire_buf rows;
    wire_buf_init(&rows);
    uint32_t done = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t before = rows.sb.size;
        if (purge_one(c, ids[i], &rows) < 0) {
            *code = WE_STORAGE;
            snprintf(err, errlen, "out of memory");
            free(ids);
            wire_buf_free(&rows);
            c->turn_failed = true;
            return -1;
        }
        done += rows.sb.size != before;
    }
    drop_purged(c, ids, n);
    wire_begin(reply, WT_PURGED, req_id, 2);
    wire_put_key(reply, "jobs");
    wire_pack_array(reply, done);
    msgpack_sbuffer_write(&reply->sb, rows.sb.data, rows.sb.size);
    wire_put_bool(reply, "more", !list && n == cap);
    if (done)
        log_info("purge: %u finished job(s) purged", done);
    free(ids);
    wire_buf_free(&rows);
    return 0;
}

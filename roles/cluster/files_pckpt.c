/*
 * files_pckpt.c - checkpoints of parallel jobs (issue 26, files.h, docs/data.md
 * "Checkpoints of parallel jobs"). A rank of a job submitted with `-p N --checkpoint-s
 * S` writes its checkpoint into its own GRIDNODE_CHECKPOINT_DIR, then a generation
 * number into `.generation` there; its node uploads the files (FILE_HAVE, FILE_PUT) and
 * names them with CKPT carrying "gen". The cluster keeps them per (job, rank,
 * generation) in table "pckpt" and, per job, the newest generation EVERY rank delivered
 * in one run of the job (the consistent cut the program made; ranks' generations are
 * never mixed). When the job starts again (requeued after a lost node or by `gridnode
 * requeue`) each rank's start command carries its files of that generation.
 *
 * Kept per job: that complete generation, and for each rank at most PCK_PENDING newer
 * ones of the current run (a rank ahead of the others). Older generations and newer
 * ones of an earlier run go as soon as they cannot complete any more. The records of
 * jobs done or purged go at the sweep (a failed or killed job keeps its checkpoints:
 * `gridnode requeue` resumes it; a cancelled one too: a batch role running a lost job
 * again names it in its next PSUBMIT, "ckpt_from", and the new job starts from it). The records are
 * mirrored in the job (j->ck), loaded at start, so the decisions need no store read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "lib/datapath.h"
#include "lib/log.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

#define PCK_PENDING 3 /* generations newer than the complete one kept per rank */

const char *files_ckpt_check(struct cluster *c, const msgpack_object *fl, const char *unit,
                             char *why, size_t wl)
{
    uint64_t sum = 0, cap = (uint64_t)c->cfg.files_ckpt_mb << 20;
    for (uint32_t i = 0; i < fl->via.array.size; i++) {
        const msgpack_object *e = &fl->via.array.ptr[i];
        size_t nl, hl;
        const char *name = wire_get_str(e, "name", &nl), *h = wire_get_str(e, "hash", &hl);
        const char *bad = datapath_problem(name, nl);
        uint8_t d[SHA256_LEN];
        uint64_t size = wire_get_u64(e, "size", 0);
        struct fsfile *f = filestore_parse_hash(h, hl, d) < 0 ? NULL : filestore_find(c->files, d);
        if (!bad && (!f || !f->done || f->size != size))
            bad = "is not stored whole here (upload it first)";
        if (bad) {
            snprintf(why, wl, "checkpoint file '%.*s' %s", (int)(nl > 200 ? 200 : nl), name, bad);
            return why;
        }
        sum += size;
    }
    if (sum > cap) {
        snprintf(why, wl,
                 "the checkpoint holds %llu bytes, more than this cluster keeps for one %s "
                 "(files.ckpt_mb = %ld MB)",
                 (unsigned long long)sum, unit, c->cfg.files_ckpt_mb);
        return why;
    }
    return NULL;
}

/* The key of table "pckpt": job, rank, generation (big-endian, in that order). */
static void pck_key(uint8_t key[16], uint64_t job, uint32_t rank, uint32_t gen)
{
    store_key_u64_u32(key, job, rank);
    for (int i = 0; i < 4; i++)
        key[12 + i] = (uint8_t)(gen >> (24 - 8 * i));
}

/* Removes j->ck[i] from memory and the store. 0, or -1 (the turn fails). */
static int pck_del(struct cluster *c, struct pjob *j, uint32_t i)
{
    uint8_t key[16];
    pck_key(key, j->id, j->ck[i].rank, j->ck[i].gen);
    j->ck[i] = j->ck[--j->nck];
    return store_del(c->store, c->sd->t_pckpt, key, sizeof key);
}

/* Adds (or replaces) rank's entry of gen in memory: 0, or -1 (out of memory). */
static int pck_add(struct pjob *j, uint32_t rank, uint32_t gen, uint32_t run)
{
    for (uint32_t i = 0; i < j->nck; i++)
        if (j->ck[i].rank == rank && j->ck[i].gen == gen) {
            j->ck[i].run = run;
            return 0;
        }
    if (j->nck == j->capck) {
        uint32_t cap = j->capck ? j->capck * 2 : 8;
        struct pck *v = realloc(j->ck, cap * sizeof *v);
        if (!v)
            return -1;
        j->ck = v, j->capck = cap;
    }
    j->ck[j->nck++] = (struct pck){rank, gen, run};
    return 0;
}

/* Whether every rank of j holds gen, all from one run. */
static bool complete(const struct pjob *j, uint32_t gen)
{
    uint32_t n = 0, run = 0;
    for (uint32_t i = 0; i < j->nck; i++) {
        if (j->ck[i].gen != gen)
            continue;
        if (n++ == 0)
            run = j->ck[i].run;
        else if (j->ck[i].run != run)
            return false;
    }
    return n == j->rq.nprocs;
}

/* The newest complete generation of j, from its entries (at load). */
static void find_complete(struct pjob *j)
{
    j->ck_have = false;
    for (uint32_t i = 0; i < j->nck; i++)
        if ((!j->ck_have || j->ck[i].gen > j->ck_gen) && complete(j, j->ck[i].gen)) {
            j->ck_have = true;
            j->ck_gen = j->ck[i].gen;
        }
}

/*
 * After rank's entry of gen was added: the complete generation moves up when gen is
 * now complete; what can no longer complete goes (older than the complete one, newer
 * ones of an earlier run, a rank's pending ones past PCK_PENDING). 0, or -1.
 */
static int prune(struct cluster *c, struct pjob *j, uint32_t rank, uint32_t gen)
{
    int rc = 0;
    if (complete(j, gen) && (!j->ck_have || gen > j->ck_gen)) {
        j->ck_have = true;
        j->ck_gen = gen;
        log_info("parallel job %llu: checkpoint generation %u is complete (all %u ranks)",
                 (unsigned long long)j->id, gen, j->rq.nprocs);
    }
    for (uint32_t i = j->nck; i-- > 0;) {
        const struct pck *e = &j->ck[i];
        bool pending = !j->ck_have || e->gen > j->ck_gen;
        /* an earlier run's pending one can no longer complete: its CKPTs are refused */
        if ((j->ck_have && e->gen < j->ck_gen) || (pending && e->run != j->requeues))
            rc |= pck_del(c, j, i);
    }
    for (;;) { /* rank's pending generations: the oldest beyond PCK_PENDING goes */
        uint32_t n = 0, old = UINT32_MAX;
        for (uint32_t i = 0; i < j->nck; i++)
            if (j->ck[i].rank == rank && (!j->ck_have || j->ck[i].gen > j->ck_gen)) {
                n++;
                if (old == UINT32_MAX || j->ck[i].gen < j->ck[old].gen)
                    old = i;
            }
        if (n <= PCK_PENDING)
            break;
        rc |= pck_del(c, j, old);
    }
    return rc;
}

/* Why a CKPT of rank of j from node me, of the job's run `run`, is not taken; NULL. */
static const char *refused(const struct cluster *c, const struct pjob *j, uint64_t rank,
                           uint64_t run, uint32_t me, char *why, size_t wl)
{
    if (!j->ckpt_s)
        snprintf(why, wl, "parallel job %llu was not submitted with --checkpoint-s",
                 (unsigned long long)j->id);
    else if (rank >= j->rq.nprocs || !j->ranks || j->ranks[rank].host >= j->nhosts ||
             j->hosts[j->ranks[rank].host] != me || run != j->requeues ||
             (j->state != PJ_RUNNING && j->state != PJ_STOPPED))
        snprintf(why, wl, "process %llu of parallel job %llu does not run on this node (any more)",
                 (unsigned long long)rank, (unsigned long long)j->id);
    else
        return NULL;
    (void)c;
    return why;
}

void files_pckpt_h(struct cluster *c, struct request *r, uint32_t me)
{
    const msgpack_object *m = r->msg->root, *fl = wire_get(m, "files");
    uint64_t id = wire_get_u64(m, "job", 0), rank = wire_get_u64(m, "idx", 0);
    uint32_t gen = (uint32_t)wire_get_u64(m, "gen", 0);
    struct pjob *j = c->sd ? scored_job_find(c, id) : NULL;
    char why[600];
    const char *bad = NULL;
    if (!j) {
        cluster_reply_error(r, WE_REFUSED, "no parallel job %llu here (any more)",
                            (unsigned long long)id);
        return;
    }
    if (!(bad = refused(c, j, rank, wire_get_u64(m, "issue", 0), me, why, sizeof why)) &&
        j->ck_have && gen <= j->ck_gen) {
        snprintf(why, sizeof why,
                 "generation %u is not newer than the job's complete generation %u: not kept "
                 "(write a higher number into .generation)",
                 gen, j->ck_gen);
        bad = why;
    }
    if (bad || (bad = files_ckpt_check(c, fl, "rank", why, sizeof why))) {
        cluster_reply_error(r, WE_REFUSED, "%s", bad);
        return;
    }
    struct wire_buf wb;
    uint8_t key[16];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 3);
    wire_put_u64(&wb, "run", j->requeues);
    wire_put_i64(&wb, "t", wall_now_ms());
    wire_put_key(&wb, "files");
    wire_pack_object(&wb, fl);
    pck_key(key, id, (uint32_t)rank, gen);
    int rc = store_put(c->store, c->sd->t_pckpt, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    if (rc < 0 || pck_add(j, (uint32_t)rank, gen, j->requeues) < 0 ||
        prune(c, j, (uint32_t)rank, gen) < 0) {
        c->turn_failed = true; /* memory and store reloaded after the failed commit */
        cluster_reply_error(r, WE_STORAGE,
                            "the cluster could not record the checkpoint; retry later");
        return;
    }
    log_debug("parallel job %llu process %llu: checkpoint generation %u of %u file(s)",
              (unsigned long long)id, (unsigned long long)rank, gen, fl->via.array.size);
    wire_begin(r->reply, WT_OK, r->msg->id, 0); /* sent after the turn's commit */
}

int files_pckpt_from(struct cluster *c, struct pjob *j, const msgpack_object *m)
{
    struct pjob *o = wire_get(m, "ckpt_from") && j->ckpt_s
                         ? scored_job_find(c, wire_get_u64(m, "ckpt_from", 0))
                         : NULL;
    uint32_t r = 0;
    if (!o || o == j || !o->ckpt_s || !o->ck_have || o->rq.nprocs != j->rq.nprocs || !o->user ||
        !j->user || strcmp(o->user, j->user))
        return 0; /* nothing to start from: from the start */
    for (; r < j->rq.nprocs; r++) {
        uint8_t key[16];
        void *val;
        size_t vlen;
        msgpack_unpacked up;
        pck_key(key, o->id, r, o->ck_gen);
        if (store_get(c->store, c->sd->t_pckpt, key, sizeof key, &val, &vlen) != 0)
            break;
        int ok = cluster_unpack_map(&up, val, vlen) == 0;
        const msgpack_object *fl = ok ? wire_get(&up.data, "files") : NULL;
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_pack_map(&wb, 3);
        wire_put_u64(&wb, "run", j->requeues);
        wire_put_i64(&wb, "t", wall_now_ms());
        wire_put_key(&wb, "files");
        if (fl && fl->type == MSGPACK_OBJECT_ARRAY)
            wire_pack_object(&wb, fl);
        pck_key(key, j->id, r, o->ck_gen);
        int rc = fl && fl->type == MSGPACK_OBJECT_ARRAY
                     ? store_put(c->store, c->sd->t_pckpt, key, sizeof key, wb.sb.data, wb.sb.size)
                     : 1;
        wire_buf_free(&wb);
        if (ok)
            msgpack_unpacked_destroy(&up);
        free(val);
        if (rc < 0 || (rc == 0 && pck_add(j, r, o->ck_gen, j->requeues) < 0))
            return -1;
        if (rc > 0)
            break;
    }
    if (r < j->rq.nprocs) { /* a record unreadable: from the start (the copies stay pending) */
        log_warnx("parallel job %llu: the checkpoint of job %llu is incomplete; it starts "
                  "from the start",
                  (unsigned long long)j->id, (unsigned long long)o->id);
        return 0;
    }
    j->ck_have = true;
    j->ck_gen = o->ck_gen;
    j->ck_from = o->id; /* its records, until this turn's copies are committed */
    log_info("parallel job %llu starts from generation %u of job %llu's checkpoint",
             (unsigned long long)j->id, j->ck_gen, (unsigned long long)o->id);
    return 0;
}

/* ---- a rank's start command ---- */

void files_rec_clear(struct files_rec *r)
{
    if (r->have)
        msgpack_unpacked_destroy(&r->up);
    free(r->val);
    r->val = NULL;
    r->have = false;
}

bool files_rec_get(struct cluster *c, int table, const void *key, size_t klen, struct files_rec *r)
{
    files_rec_clear(r);
    if (store_get(c->store, table, key, klen, &r->val, &r->vlen) != 0)
        return false;
    r->have = cluster_unpack_map(&r->up, r->val, r->vlen) == 0;
    const msgpack_object *fl = r->have ? wire_get(&r->up.data, "files") : NULL;
    if (r->have && (!fl || fl->type != MSGPACK_OBJECT_ARRAY)) {
        msgpack_unpacked_destroy(&r->up);
        r->have = false;
    }
    return r->have;
}

/* The record files_pckpt_cmd_nfields read for files_pckpt_cmd_pack (one at a time). */
static struct {
    uint64_t job;
    uint32_t rank;
    struct files_rec rec;
} last;

uint32_t files_pckpt_cmd_nfields(struct cluster *c, const struct pjob *j, uint32_t rank)
{
    uint8_t key[16];
    files_rec_clear(&last.rec);
    if (!j->ckpt_s)
        return 0;
    last.job = j->id, last.rank = rank;
    pck_key(key, j->id, rank, j->ck_gen);
    bool got = j->ck_have && files_rec_get(c, c->sd->t_pckpt, key, sizeof key, &last.rec);
    if (!got && j->ck_have && j->ck_from) { /* copied in this turn: read the original */
        pck_key(key, j->ck_from, rank, j->ck_gen);
        got = files_rec_get(c, c->sd->t_pckpt, key, sizeof key, &last.rec);
    }
    if (!got && j->ck_have)
        log_warnx("parallel job %llu process %u: its checkpoint of generation %u cannot be read: "
                  "it starts from the start",
                  (unsigned long long)j->id, rank, j->ck_gen);
    return 3 + 2 * last.rec.have;
}

uint32_t files_pckpt_cmd_files(void)
{
    const msgpack_object *fl = last.rec.have ? wire_get(&last.rec.up.data, "files") : NULL;
    return fl ? fl->via.array.size : 0;
}

void files_pckpt_cmd_pack(struct cluster *c, const struct pjob *j, uint32_t rank,
                          struct wire_buf *wb)
{
    if (!j->ckpt_s)
        return;
    wire_put_u64(wb, "checkpoint_s", j->ckpt_s);
    wire_put_u64(wb, "ckpt_mb", (uint64_t)c->cfg.files_ckpt_mb);
    wire_put_u64(wb, "ckpt_run", j->requeues);
    if (last.rec.have && last.job == j->id && last.rank == rank) {
        wire_put_key(wb, "ckpt");
        wire_pack_object(wb, wire_get(&last.rec.up.data, "files"));
        wire_put_u64(wb, "ckpt_gen", j->ck_gen);
        log_info("parallel job %llu process %u starts from checkpoint generation %u",
                 (unsigned long long)j->id, rank, j->ck_gen);
    }
    files_rec_clear(&last.rec);
}

/* ---- loading, finding, sweeping ---- */

struct pck_walk {
    struct cluster *c;
    struct pjob *j; /* the job being walked (load: the last one found) */
    const char *hex;
    int (*fn)(void *arg, const msgpack_object *e);
    void *arg;
    int rc;
    bool found;
};

static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct pck_walk *w = arg;
    if (klen != 16)
        return 0;
    uint64_t id = store_key_get_u64(key);
    uint32_t rank = store_key_get_u32((const uint8_t *)key + 8);
    uint32_t gen = store_key_get_u32((const uint8_t *)key + 12);
    if (!w->j || w->j->id != id)
        w->j = scored_job_find(w->c, id);
    msgpack_unpacked up;
    if (!w->j || rank >= w->j->rq.nprocs || cluster_unpack_map(&up, val, vlen) < 0)
        return 0; /* a purged job's: the sweep deletes it */
    uint32_t run = (uint32_t)wire_get_u64(&up.data, "run", 0);
    msgpack_unpacked_destroy(&up);
    if (pck_add(w->j, rank, gen, run) < 0)
        w->rc = -1;
    return w->rc;
}

/* The "checkpoint_s" of a job record's files map. */
static uint32_t data_ckpt_s(const struct pjob *j)
{
    msgpack_unpacked up;
    uint32_t s = 0;
    if (!j->data || cluster_unpack_map(&up, j->data, j->data_len) < 0)
        return 0;
    s = (uint32_t)wire_get_u64(&up.data, "checkpoint_s", 0);
    msgpack_unpacked_destroy(&up);
    return s;
}

int files_pckpt_load(struct cluster *c)
{
    struct pck_walk w = {c, NULL, NULL, NULL, NULL, 0, false};
    if (!c->sd)
        return 0;
    for (uint32_t i = 0; i < c->sd->njobs; i++)
        c->sd->jobs[i]->ckpt_s = data_ckpt_s(c->sd->jobs[i]);
    if (store_iter(c->store, c->sd->t_pckpt, NULL, 0, load_one, &w) < 0 || w.rc < 0)
        return -1;
    for (uint32_t i = 0; i < c->sd->njobs; i++)
        if (c->sd->jobs[i]->nck)
            find_complete(c->sd->jobs[i]);
    return 0;
}

void files_pckpt_attach(struct pjob *j)
{
    j->ckpt_s = data_ckpt_s(j);
}

static int find_in(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct pck_walk *w = arg;
    if (klen != 16 || store_key_get_u64(key) != w->j->id)
        return 1;
    w->found = files_rec_each(val, vlen, w->fn, w->arg) > 0;
    return w->found;
}

bool files_pckpt_names(struct cluster *c, struct pjob *j, const char *hex)
{
    uint8_t key[8];
    struct pck_walk w = {c, j, hex, files_same_hash, (void *)hex, 0, false};
    if (!j->ckpt_s || !j->nck)
        return false;
    store_key_u64(key, j->id);
    store_iter(c->store, c->sd->t_pckpt, key, sizeof key, find_in, &w);
    return w.found;
}

static int sweep_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct pck_walk *w = arg;
    struct pjob *j = klen == 16 ? scored_job_find(w->c, store_key_get_u64(key)) : NULL;
    if (j && j->state != PJ_DONE) {               /* a cancelled one's: a batch role's next run */
        files_rec_each(val, vlen, w->fn, w->arg); /* kept: its files are named */
        return 0;
    }
    if (store_del(w->c->store, w->c->sd->t_pckpt, key, klen) < 0)
        w->rc = -1;
    if (j) /* done: nothing will start from it */
        j->nck = 0, j->ck_have = false;
    return 0;
}

int files_pckpt_sweep(struct cluster *c, int (*fn)(void *arg, const msgpack_object *e), void *arg)
{
    struct pck_walk w = {c, NULL, NULL, fn, arg, 0, false};
    if (!c->sd)
        return 0;
    if (store_iter(c->store, c->sd->t_pckpt, NULL, 0, sweep_one, &w) < 0)
        return -1;
    return w.rc;
}

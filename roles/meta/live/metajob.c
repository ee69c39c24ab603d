/*
 * metajob.c - the spool's jobs (the bottom of the live metascheduler): their states and
 * names, the table of jobs in memory (by id), a job's state change, and its LMDB record
 * (a msgpack map; daemon/record.h): the dirty jobs written at a turn's commit, a record
 * read at start-up. It calls nothing else of the role.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/endwait.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "lib/text.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"
#include "wire/depend.h"

static const char *const state_names[] = {"queued", "placing", "placed", "running",
                                          "done",   "failed",  "killed", "cancelled"};

const char *meta_state_name(int st)
{
    return st >= 0 && st <= MJ_CANCELLED ? state_names[st] : "?";
}

static int state_parse(const char *s)
{
    for (int i = 0; i <= MJ_CANCELLED; i++)
        if (!strcmp(s, state_names[i]))
            return i;
    return -1;
}

/* ---- jobs in memory ---- */

struct mjob *meta_job_find(struct meta *M, uint64_t id)
{
    uint32_t lo = 0, hi = M->njobs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (M->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < M->njobs && M->jobs[lo]->id == id ? M->jobs[lo] : NULL;
}

/* ---- the index of keyed jobs (user, key) -> job: a keyed SUBMIT looks its key up in
 * O(1), not by walking every job (issue 28). A purge (metapurge.c) builds it again
 * without the jobs it removed; a reload frees them all and meta_key_reset empties it. ---- */

static uint64_t key_hash(const char *user, const char *key)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over user, a NUL, key */
    for (const char *p = user;; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        if (!*p)
            break;
    }
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    return h;
}

/* The slot of (user, key) in the index: its job's, or the empty one it would take. */
static struct mjob **key_slot(struct meta *M, const char *user, const char *key)
{
    uint32_t mask = M->kcap - 1, i = (uint32_t)key_hash(user, key) & mask;
    while (M->kidx[i] && (strcmp(M->kidx[i]->key, key) || strcmp(M->kidx[i]->user, user)))
        i = (i + 1) & mask;
    return &M->kidx[i];
}

static int key_insert(struct meta *M, struct mjob *j)
{
    if ((M->kn + 1) * 2 > M->kcap) {
        uint32_t nc = M->kcap ? M->kcap * 2 : 1024, oc = M->kcap;
        struct mjob **old = M->kidx, **nt = calloc(nc, sizeof *nt);
        if (!nt)
            return -1;
        M->kidx = nt;
        M->kcap = nc;
        for (uint32_t i = 0; i < oc; i++)
            if (old[i])
                *key_slot(M, old[i]->user, old[i]->key) = old[i];
        free(old);
    }
    struct mjob **s = key_slot(M, j->user, j->key);
    if (!*s)
        M->kn++;
    if (!*s || (*s)->id < j->id) /* the newest job of a key answers for it */
        *s = j;
    return 0;
}

void meta_key_reset(struct meta *M)
{
    free(M->kidx);
    M->kidx = NULL;
    M->kcap = M->kn = 0;
}

int meta_job_add(struct meta *M, struct mjob *j)
{
    if (j->key && key_insert(M, j) < 0)
        return -1;
    if (M->njobs == M->capjobs) {
        uint32_t nc = M->capjobs ? M->capjobs * 2 : 256;
        void *p = realloc(M->jobs, nc * sizeof *M->jobs);
        if (!p)
            return -1;
        M->jobs = p;
        M->capjobs = nc;
    }
    uint32_t i = M->njobs;
    while (i > 0 && M->jobs[i - 1]->id > j->id) {
        M->jobs[i] = M->jobs[i - 1];
        i--;
    }
    M->jobs[i] = j;
    M->njobs++;
    M->dep_any |= j->dep != NULL; /* meta_dep_step looks again */
    if (j->dirty)
        meta_job_dirty(M, j);
    return 0;
}

void meta_jobs_drop(struct meta *M, const uint64_t *ids, uint32_t n)
{
    uint32_t k = 0, d = 0;
    bool keyed = false;
    if (!n)
        return;
    for (uint32_t i = 0; i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        while (d < n && ids[d] < j->id)
            d++;
        if (d < n && ids[d] == j->id) {
            keyed |= j->key != NULL;
            M->nest -= j->start_est != NULL;
            meta_job_free(j);
        } else {
            M->jobs[k++] = j;
        }
    }
    M->njobs = k;
    for (int s = 0; s < M->nsites; s++) /* a poll round goes on from the same place */
        if (M->site[s].poll_next > M->njobs)
            M->site[s].poll_next = M->njobs;
    if (!keyed)
        return;
    meta_key_reset(M);
    for (uint32_t i = 0; i < M->njobs; i++)
        if (M->jobs[i]->key && key_insert(M, M->jobs[i]) < 0)
            M->turn_failed = true; /* out of memory: the state is reloaded */
}

const char *meta_job_owner(void *role, uint64_t id, bool *found)
{
    struct mjob *j = meta_job_find(role, id);
    *found = j != NULL;
    return j ? j->user : NULL;
}

void meta_job_dirty(struct meta *M, struct mjob *j)
{
    j->dirty = true;
    endwait_changed(M->endwait, j->id); /* a JOB_WAIT naming it is looked at (issue 28) */
    if (j->listed || M->dirty_all)
        return;
    if (M->ndirty == M->capdirty) {
        uint32_t nc = M->capdirty ? M->capdirty * 2 : 256;
        void *p = realloc(M->dirty, nc * sizeof *M->dirty);
        if (!p) {
            M->dirty_all = true; /* the commit walks every job instead */
            return;
        }
        M->dirty = p;
        M->capdirty = nc;
    }
    M->dirty[M->ndirty++] = j;
    j->listed = true;
}

void meta_dirty_reset(struct meta *M)
{
    for (uint32_t i = 0; i < M->ndirty; i++)
        M->dirty[i]->listed = false;
    M->ndirty = 0;
    M->dirty_all = false;
}

char *meta_req_key(const msgpack_object *req)
{
    size_t n;
    const char *k = wire_get_str(req, "key", &n);
    return k && n ? strndup(k, n) : NULL;
}

struct mjob *meta_job_by_key(struct meta *M, const char *user, const char *key)
{
    return key && M->kcap ? *key_slot(M, user, key) : NULL;
}

void meta_job_free(struct mjob *j)
{
    if (j) {
        free(j->req);
        free(j->key);
        free(j->tasks_raw);
        free(j->start_est);
        free(j->reason);
        free(j->constraint);
        if (j->dep)
            depend_free(j->dep);
        free(j->dep);
        free(j);
    }
}

const char *meta_job_reason(const struct mjob *j)
{
    return j->reason ? j->reason : "";
}

void meta_job_reason_set(struct mjob *j, const char *r)
{
    char b[META_REASON_MAX];
    text_copy(b, sizeof b, r, strlen(r));
    if (!strcmp(b, meta_job_reason(j)))
        return;
    char *n = b[0] ? strdup(b) : NULL;
    if (b[0] && !n)
        return;
    free(j->reason);
    j->reason = n;
}

void meta_job_set(struct meta *M, struct mjob *j, enum mj_state st, const char *reason)
{
    if (reason)
        meta_job_reason_set(j, reason);
    if (j->state != st)
        log_info("job %llu: %s -> %s%s%s", (unsigned long long)j->id, meta_state_name(j->state),
                 meta_state_name(st), reason && *reason ? ": " : "", reason ? reason : "");
    j->state = (uint8_t)st;
    if (MJ_ENDED(st) && !j->finished)
        j->finished = wall_now_ms();
    meta_job_dirty(M, j);
}

/* ---- the job record: a msgpack map ---- */

static void job_encode(const struct mjob *j, struct wire_buf *wb)
{
    wire_buf_reset(wb);
    wire_pack_map(wb, 32 + !!j->dep);
    if (j->dep) { /* issue 27: the terms still waited for (met ones left out) */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    wire_put_str(wb, "state", meta_state_name(j->state));
    wire_put_u64(wb, "refused", j->refused);
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "t_issued", j->t_issued);
    wire_put_u64(wb, "t_running", j->t_running);
    wire_put_u64(wb, "t_done", j->t_done);
    wire_put_u64(wb, "t_failed", j->t_failed);
    wire_put_bool(wb, "parallel", j->parallel);
    wire_put_bool(wb, "early", j->early);
    wire_put_str(wb, "user", j->user);
    wire_put_str(wb, "name", j->name);
    wire_put_u64(wb, "procs", (uint64_t)j->rq.procs);
    wire_put_i64(wb, "mem", j->rq.mem);
    wire_put_i64(wb, "disk", j->rq.disk);
    wire_put_i64(wb, "wall", j->rq.walltime);
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "started", j->started);
    wire_put_i64(wb, "finished", j->finished);
    wire_put_i64(wb, "exit", j->exit);
    wire_put_u64(wb, "attempt", j->attempt);
    wire_put_i64(wb, "site", j->site);
    wire_put_u64(wb, "sjob", j->sjob);
    wire_put_str(wb, "resv", j->resv);
    wire_put_i64(wb, "mv_site", j->mv_site);
    wire_put_str(wb, "mv_resv", j->mv_resv);
    wire_put_u64(wb, "mv_sjob", j->mv_sjob);
    wire_put_bool(wb, "withdrawing", j->withdrawing);
    wire_put_bool(wb, "requeueing", j->requeueing); /* JOB_CTL requeue (issue 24) */
    wire_put_bool(wb, "held", j->held);
    wire_put_u64(wb, "requeues", j->requeues);
    wire_put_str(wb, "reason", meta_job_reason(j));
    wire_put_bin(wb, "req", j->req, j->reqlen);
}

static struct mjob *job_decode(uint64_t id, const void *v, size_t vl)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    struct mjob *j = NULL;
    if (msgpack_unpack_next(&up, v, vl, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP || !(j = calloc(1, sizeof *j)))
        goto out;
    const msgpack_object *o = &up.data;
    char st[16];
    wire_get_strbuf(o, "state", st, sizeof st);
    int s = state_parse(st);
    size_t rl;
    const void *r = wire_get_bin(o, "req", &rl);
    if (s < 0 || !r || !(j->req = malloc(rl ? rl : 1))) {
        free(j);
        j = NULL;
        goto out;
    }
    memcpy(j->req, r, rl);
    j->reqlen = rl;
    msgpack_unpacked rq;
    msgpack_unpacked_init(&rq);
    if (msgpack_unpack_next(&rq, r, rl, NULL) == MSGPACK_UNPACK_SUCCESS &&
        rq.data.type == MSGPACK_OBJECT_MAP) {
        j->key = meta_req_key(&rq.data);
        if (wire_get_bool(o, "parallel", false)) /* --ppn: as the request sent on says */
            j->ppn = (uint32_t)wire_get_capped(&rq.data, "ppn", 0, 4096);
        char cwhy[160]; /* issue 27: as the request says (checked at submission) */
        wire_get_constraint(&rq.data, &j->constraint, cwhy, sizeof cwhy);
    }
    msgpack_unpacked_destroy(&rq);
    j->id = id;
    j->state = (uint8_t)s;
    size_t dn;
    const char *ds = wire_get_str(o, "dependency", &dn); /* issue 27; absent before: none */
    char dwhy[160];
    if (ds && dn &&
        (!(j->dep = calloc(1, sizeof *j->dep)) ||
         depend_parse(ds, dn, j->dep, dwhy, sizeof dwhy) < 0)) {
        free(j->dep);
        j->dep = NULL;
        meta_job_free(j);
        j = NULL;
        goto out;
    }
    j->parallel = wire_get_bool(o, "parallel", false);
    j->early = wire_get_bool(o, "early", true);
    j->ntasks = (uint32_t)wire_get_u64(o, "ntasks", 1);
    if (j->ntasks < 1)
        j->ntasks = 1;
    j->t_issued = (uint32_t)wire_get_u64(o, "t_issued", 0);
    j->t_running = (uint32_t)wire_get_u64(o, "t_running", 0);
    j->t_done = (uint32_t)wire_get_u64(o, "t_done", 0);
    j->t_failed = (uint32_t)wire_get_u64(o, "t_failed", 0);
    wire_get_strbuf(o, "user", j->user, sizeof j->user);
    wire_get_strbuf(o, "name", j->name, sizeof j->name);
    j->rq.procs = (int32_t)wire_get_u64(o, "procs", 1);
    j->rq.mem = wire_get_i64(o, "mem", 0);
    j->rq.disk = wire_get_i64(o, "disk", 0);
    j->rq.walltime = wire_get_i64(o, "wall", 3600000);
    j->rq.constraint = j->constraint;
    j->submitted = wire_get_i64(o, "submitted", 0);
    j->started = wire_get_i64(o, "started", 0);
    j->finished = wire_get_i64(o, "finished", 0);
    j->exit = wire_get_i64(o, "exit", 0);
    j->attempt = (uint32_t)wire_get_u64(o, "attempt", 0);
    j->refused = wire_get_u64(o, "refused", 0); /* absent in records before issue 27 */
    j->site = (int)wire_get_i64(o, "site", -1);
    j->sjob = wire_get_u64(o, "sjob", 0);
    wire_get_strbuf(o, "resv", j->resv, sizeof j->resv);
    j->mv_site = (int)wire_get_i64(o, "mv_site", -1);
    wire_get_strbuf(o, "mv_resv", j->mv_resv, sizeof j->mv_resv);
    j->mv_sjob = wire_get_u64(o, "mv_sjob", 0);
    j->withdrawing = wire_get_bool(o, "withdrawing", false);
    j->requeueing = wire_get_bool(o, "requeueing", false); /* absent before: false, 0 */
    j->held = wire_get_bool(o, "held", false);
    j->requeues = (uint32_t)wire_get_u64(o, "requeues", 0);
    char rs[META_REASON_MAX];
    wire_get_strbuf(o, "reason", rs, sizeof rs);
    meta_job_reason_set(j, rs);
out:
    msgpack_unpacked_destroy(&up);
    return j;
}

static int encode_job(const void *rec, struct wire_buf *wb)
{
    job_encode(rec, wb);
    return 0;
}

int meta_jobs_save(struct meta *M)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    uint32_t n = M->dirty_all ? M->njobs : M->ndirty;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        struct mjob *j = M->dirty_all ? M->jobs[i] : M->dirty[i];
        if (!j->dirty)
            continue;
        rc = record_save_u64(M->store, M->t_jobs, j->id, j, encode_job, &wb);
        j->dirty = false;
    }
    wire_buf_free(&wb);
    meta_dirty_reset(M);
    return rc;
}

int meta_job_load(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct meta *M = arg;
    (void)klen;
    struct mjob *j = job_decode(store_key_get_u64(key), val, vlen);
    if (!j)
        return RECORD_UNREADABLE;
    if (j->site >= M->nsites || j->mv_site >= M->nsites) {
        log_warnx("job %llu: its site is no longer in meta.sites: spooled again",
                  (unsigned long long)j->id);
        if (!MJ_ENDED(j->state)) {
            j->site = j->mv_site = -1;
            j->state = MJ_QUEUED;
            j->dirty = true;
        }
    }
    if (meta_job_add(M, j) < 0) {
        meta_job_free(j);
        return -1;
    }
    return RECORD_TAKEN;
}

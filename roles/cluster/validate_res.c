/*
 * validate_res.c - results of checked jobs (docs/validation.md): candidates and their
 * answer classes (decided in validate_dec.c, or by a validator, validator.c), spot
 * checks and backtracking, loading the candidates, the once-a-second tick, and the
 * "results" list of a JOB task map. The top of the validation files.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"

static const char *const status_text[] = {"pending", "canonical", "agrees", "rejected"};

#define rnd01 valid_rand
#define class_of valid_class

static bool res_ok(const msgpack_object *res)
{
    return !wire_get(res, "error") && wire_get_i64(res, "exit", -1) == 0 &&
           wire_get_u64(res, "signal", 0) == 0 && !wire_get_bool(res, "timeout", false);
}

/* The record of one result as stored: the documented fields, node and time. */
static void rec_build(struct wire_buf *wb, const struct node *n, const msgpack_object *res,
                      uint32_t seq)
{
    uint32_t keep = 0;
    for (const struct wire_field *f = wire_result_fields; f->key; f++)
        keep += wire_get(res, f->key) != NULL;
    wire_pack_map(wb, keep + 3);
    for (const struct wire_field *f = wire_result_fields; f->key; f++) {
        const msgpack_object *v = wire_get(res, f->key);
        if (v) {
            wire_put_key(wb, f->key);
            wire_pack_object(wb, v);
        }
    }
    wire_put_str(wb, "node", n ? n->sid : "");
    wire_put_i64(wb, "received", wall_now_ms());
    wire_put_u64(wb, "seq", seq);
}

/* Enough candidates to decide (or to ask the validator)? */
static int decide(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt)
{
    if (vt->state != VT_OPEN)
        return cluster_task_save(c, j, idx); /* the running validator will decide */
    if (!j->v->validator)
        return valid_evaluate(c, j, idx);
    uint32_t npend = 0, last = 0;
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (vt->cand[k].status == VC_PENDING) {
            npend++;
            last = k;
        }
    uint32_t need = j->v->quorum;
    if (j->v->adaptive && npend == 1 && vt->cand[last].node < c->nnodes &&
        valid_trusted(c, &c->nodes[vt->cand[last].node]))
        need = 1;
    if (npend >= need || (npend > 0 && vt->ncopy == 0 && vt->want == 0))
        return validator_start(c, j, idx);
    return valid_evaluate(c, j, idx); /* asks for more copies */
}

/* A known-answer task's result: the node passes or fails a spot check. */
static int spot_result(struct cluster *c, struct node *n, struct job *j, uint32_t idx,
                       const msgpack_object *res)
{
    if (!valid_spot_take(c, (uint32_t)(n - c->nodes), j->id, idx))
        return 0; /* not handed to it (or answered already, or before a restart) */
    if (wire_get(res, "error"))
        return 0; /* could not run it: no verdict */
    bool pass = class_of(c->vs, res) == j->v->ka[idx];
    cluster_mark_node(c, n);
    if (pass) {
        n->tr.spot_pass++;
        n->tr.consec++;
        n->tr.nvalid++;
        n->tr.spot_ok_ms = wall_now_ms();
        if (n->tr.probation > 0 && --n->tr.probation == 0)
            log_info("node %s (%s) passed its probation spot checks", n->name, n->sid);
        j->v->spot_pass++;
        return 0;
    }
    n->tr.spot_fail++;
    n->tr.consec = 0;
    n->tr.ninvalid++;
    n->tr.probation = (uint32_t)c->cfg.v_redeem_spots;
    j->v->spot_fail++;
    uint32_t reopened = valid_backtrack(c, n);
    log_warnx("node %s (%s) failed a spot check (job %llu task %u): on probation; %u "
              "task(s) it answered since its last passed check are re-verified",
              n->name, n->sid, (unsigned long long)j->id, idx, reopened);
    return c->turn_failed ? -1 : 0;
}

/* Reopens a decided task whose quorum held a result of a node found unreliable. */
static void reopen(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt)
{
    struct task *t = &j->tasks[idx];
    uint8_t key[12];
    if (t->state == TS_DONE) {
        j->ndone--;
        if (!t->ok)
            j->nfailed--;
        if (j->state == JS_DONE) {
            j->state = JS_RUNNING;
            j->finished_ms = 0;
        }
        store_key_u64_u32(key, j->id, idx);
        if (store_del(c->store, c->t_results, key, sizeof key) < 0)
            c->turn_failed = true;
    }
    t->state = TS_ISSUED;
    t->node = UINT32_MAX;
    vt->state = VT_OPEN;
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (vt->cand[k].status == VC_CANONICAL || vt->cand[k].status == VC_AGREES)
            vt->cand[k].status = VC_PENDING;
    c->vs->reopened++;
    cluster_mark_job(c, j);
    if (decide(c, j, idx, vt) < 0)
        c->turn_failed = true;
}

uint32_t valid_backtrack(struct cluster *c, struct node *n)
{
    uint32_t ni = (uint32_t)(n - c->nodes), count = 0;
    int64_t since = n->tr.spot_ok_ms;
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (!j->v || !j->v->vt || j->v->known || j->state == JS_CANCELLED)
            continue;
        for (uint32_t x = 0; x < j->v->nvt; x++) {
            struct vtask *vt = j->v->vt[x];
            bool hit = false;
            for (uint32_t k = 0; vt && k < vt->ncand; k++) {
                struct vcand *cd = &vt->cand[k];
                if (cd->node == ni && cd->recv_ms >= since &&
                    (cd->status == VC_CANONICAL || cd->status == VC_AGREES ||
                     cd->status == VC_PENDING)) {
                    hit |= cd->status != VC_PENDING;
                    cd->status = VC_REJECTED;
                    cd->why = VW_SPOTFAIL;
                }
            }
            if (hit) {
                reopen(c, j, x, vt);
                count++;
            }
        }
    }
    return count;
}

int valid_result(struct cluster *c, struct node *n, struct job *j, uint32_t idx, uint32_t issue,
                 const msgpack_object *res)
{
    if (j->v->known)
        return spot_result(c, n, j, idx, res);
    struct task *t = &j->tasks[idx];
    struct vtask *vt = vt_get_ext(j, idx);
    uint32_t ni = (uint32_t)(n - c->nodes);
    if (!vt)
        return -1;
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (vt->cand[k].node == ni && vt->cand[k].issue == issue)
            return 0; /* a resend of a result already taken */
    if (issue == 0 || issue > vt->nholder || vt->holder[issue - 1] != ni) {
        log_warnx("node %s (%s): result for job %llu task %u issue %u dropped: that copy "
                  "was not handed to this session",
                  n->name, n->sid, (unsigned long long)j->id, idx, issue);
        return 0; /* acknowledged, never a vote: only nodes given a copy may answer */
    }
    for (uint32_t k = 0; k < vt->ncopy; k++)
        if (vt->copy[k].node == ni) {
            valid_copy_remove(c, vt, k);
            break;
        }
    struct vcand *cd = valid_cand_add(vt);
    if (!cd) { /* a flood of late results: counted, not kept */
        j->ndups++;
        cluster_mark_job(c, j);
        return cluster_task_save(c, j, idx);
    }
    bool error = wire_get(res, "error") != NULL, repeat = false;
    for (uint32_t k = 0; k + 1 < vt->ncand; k++)
        repeat |= !vt->cand[k].error && !error && valid_same_owner(c, j->v, vt->cand[k].node, ni);
    cd->node = ni;
    cd->issue = issue;
    cd->recv_ms = wall_now_ms();
    cd->error = error;
    cd->ok = res_ok(res);
    cd->cls = error ? 0 : class_of(c->vs, res);
    struct wire_buf wb;
    uint8_t key[16];
    wire_buf_init(&wb);
    rec_build(&wb, n, res, cd->seq);
    valid_vres_key(key, j->id, idx, cd->seq);
    int rc = store_put(c->store, c->t_vres, key, sizeof key, wb.sb.data, wb.sb.size);
    if (rc == 0 && t->state != TS_DONE && !error && !repeat && n->tr.probation == 0 &&
        (cd->rec = malloc(wb.sb.size ? wb.sb.size : 1))) {
        memcpy(cd->rec, wb.sb.data, wb.sb.size);
        cd->len = wb.sb.size;
    }
    wire_buf_free(&wb);
    if (rc < 0)
        return -1;
    cluster_mark_job(c, j);
    if (t->state == TS_DONE) { /* late: checked against the canonical result */
        uint64_t canon = 0;
        for (uint32_t k = 0; k < vt->ncand; k++)
            if (vt->cand[k].status == VC_CANONICAL)
                canon = vt->cand[k].cls;
        j->ndups++;
        cd->status = !error && canon && cd->cls == canon ? VC_AGREES : VC_REJECTED;
        cd->why = error ? VW_NODE_ERROR : cd->status == VC_AGREES ? VW_NONE : VW_DISAGREES;
        if (!error && canon && !j->v->validator)
            (cd->status == VC_AGREES ? valid_trust_valid : valid_trust_invalid)(c, ni);
        return cluster_task_save(c, j, idx);
    }
    if (error || repeat || n->tr.probation > 0) {
        cd->status = VC_REJECTED;
        cd->why = error ? VW_NODE_ERROR : repeat ? VW_REPEAT : VW_PROBATION;
        j->ndups++;
        if (error && ++t->errors >= c->cfg.max_attempts)
            return valid_fail_task(c, j, idx, VW_NODE_ERROR);
        if (vt->state == VT_OPEN)
            return valid_evaluate(c, j, idx);
        return cluster_task_save(c, j, idx);
    }
    return decide(c, j, idx, vt);
}

/* ---- the task record ---- */

/* One "vres" record at load: fills in its candidate (and its bytes if undecided). */
static int load_vres(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    (void)klen;
    struct job *j = cluster_job_find(c, store_key_get_u64(key));
    uint32_t idx = store_key_get_u32(key + 8);
    uint32_t seq = store_key_get_u32(key + 12);
    struct vtask *vt = j && j->v && idx < j->ntasks ? vt_get_ext(j, idx) : NULL;
    if (!vt)
        return RECORD_IGNORED;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    const msgpack_object *m = &up.data;
    struct vcand *cd = NULL;
    for (uint32_t k = 0; k < vt->ncand && !cd; k++)
        if (vt->cand[k].seq == seq)
            cd = &vt->cand[k];
    if (!cd && (cd = valid_cand_add(vt)))
        cd->seq = seq;
    if (cd) {
        size_t sl;
        const char *sid = wire_get_str(m, "node", &sl);
        struct node *n = cluster_node_find(c, sid, sl);
        cd->node = n ? (uint32_t)(n - c->nodes) : UINT32_MAX;
        cd->issue = (uint32_t)wire_get_u64(m, "issue", 0);
        cd->recv_ms = wire_get_i64(m, "received", 0);
        cd->error = wire_get(m, "error") != NULL;
        cd->ok = res_ok(m);
        cd->cls = cd->error ? 0 : class_of(c->vs, m);
        if (vt->state != VT_DONE && cd->status == VC_PENDING &&
            (cd->rec = malloc(vlen ? vlen : 1))) {
            memcpy(cd->rec, val, vlen);
            cd->len = vlen;
        }
        if (vt->nextseq <= seq)
            vt->nextseq = seq + 1;
    }
    msgpack_unpacked_destroy(&up);
    return RECORD_TAKEN;
}

static int load_known(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    (void)klen;
    struct job *j = cluster_job_find(c, store_key_get_u64(key));
    uint32_t idx = store_key_get_u32(key + 8);
    if (!j || !j->v || !j->v->ka || idx >= j->ntasks)
        return RECORD_IGNORED;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return RECORD_UNREADABLE;
    j->v->ka[idx] = class_of(c->vs, &up.data);
    msgpack_unpacked_destroy(&up);
    return RECORD_TAKEN;
}

int valid_load(struct cluster *c)
{
    if (!c->vs)
        return 0; /* a cluster opened without validation state (some unit tests) */
    if (cluster_record_load(c, c->t_vres, load_vres) < 0 ||
        cluster_record_load(c, c->t_known, load_known) < 0)
        return -1;
    for (uint32_t i = 0; i < c->njobs; i++) { /* undecided tasks: decide again, or wait */
        struct job *j = c->jobs[i];
        c->vs->nknown += j->v && j->v->known;
        if (!j->v || !j->v->vt || j->v->known || j->state != JS_RUNNING)
            continue;
        for (uint32_t x = 0; x < j->v->nvt; x++) {
            struct vtask *vt = j->v->vt[x];
            if (!vt || vt->state == VT_DONE)
                continue;
            if (vt->want > 0)
                valid_want_more(c, j, x, vt);
            for (uint32_t k = 0; k < vt->ncand; k++)
                if (vt->cand[k].status == VC_PENDING) {
                    valid_resume_add(c, j->id, x);
                    break;
                }
        }
    }
    return 0;
}

/* Called once a second: validators, and decisions postponed at load. */
void valid_tick(struct cluster *c)
{
    struct vstate *vs = c->vs;
    if (!vs)
        return;
    validator_tick(c);
    uint32_t n = vs->nresume;
    struct vent *list = vs->resume;
    vs->resume = NULL;
    vs->nresume = vs->capresume = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct job *j = cluster_job_find(c, list[i].job);
        struct vtask *vt = j && j->state == JS_RUNNING ? valid_vt(j, list[i].idx) : NULL;
        if (vt && vt->state == VT_OPEN && decide(c, j, list[i].idx, vt) < 0)
            c->turn_failed = true;
    }
    free(list);
}

/* ---- JOB: every result of a task ---- */

int valid_task_has_results(const struct job *j, uint32_t idx)
{
    const struct vtask *vt = valid_vt(j, idx);
    return vt && vt->ncand > 0;
}

struct pack_walk {
    struct cluster *c;
    const struct job *j;
    const struct vtask *vt;
    uint32_t idx;
    struct wire_buf *wb;
    bool output;
    uint32_t count;
};

static int pack_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct pack_walk *w = arg;
    msgpack_unpacked up;
    size_t off = 0;
    if (klen != 16 || store_key_get_u64(key) != w->j->id ||
        store_key_get_u32((const uint8_t *)key + 8) != w->idx)
        return 1;
    uint32_t seq = store_key_get_u32((const uint8_t *)key + 12);
    const struct vcand *cd = NULL;
    for (uint32_t k = 0; k < w->vt->ncand && !cd; k++)
        if (w->vt->cand[k].seq == seq)
            cd = &w->vt->cand[k];
    msgpack_unpacked_init(&up);
    if (!cd || wire_precheck(val, vlen) < 0 ||
        msgpack_unpack_next(&up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return 0;
    }
    const msgpack_object *m = &up.data;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        bool out = k->via.str.size == 6 &&
                   (!memcmp(k->via.str.ptr, "stdout", 6) || !memcmp(k->via.str.ptr, "stderr", 6));
        bool skip =
            (k->via.str.size == 3 && !memcmp(k->via.str.ptr, "job", 3)) || (out && !w->output);
        keep += !skip;
    }
    wire_pack_map(w->wb, keep + 2);
    wire_put_str(w->wb, "status", status_text[cd->status]);
    wire_put_str(w->wb, "why", valid_why_text[cd->why]);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        bool out = k->via.str.size == 6 &&
                   (!memcmp(k->via.str.ptr, "stdout", 6) || !memcmp(k->via.str.ptr, "stderr", 6));
        if ((k->via.str.size == 3 && !memcmp(k->via.str.ptr, "job", 3)) || (out && !w->output))
            continue;
        cluster_pack_result_pair(w->c, k, &m->via.map.ptr[i].val, w->wb);
    }
    w->count++;
    msgpack_unpacked_destroy(&up);
    return 0;
}

void valid_pack_results(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *wb,
                        bool output)
{
    const struct vtask *vt = valid_vt(j, idx);
    struct wire_buf rows;
    uint8_t from[16];
    wire_buf_init(&rows);
    struct pack_walk w = {c, j, vt, idx, &rows, output, 0};
    valid_vres_key(from, j->id, idx, 0);
    if (vt)
        store_iter(c->store, c->t_vres, from, sizeof from, pack_one, &w);
    uint32_t count = w.count;
    wire_put_key(wb, "results");
    wire_pack_array(wb, count);
    msgpack_sbuffer_write(&wb->sb, rows.sb.data, rows.sb.size);
    wire_buf_free(&rows);
}

void valid_free(struct cluster *c)
{
    if (!c->vs)
        return;
    validator_free_all(c);
    free(c->vs->heap);
    free(c->vs->q);
    free(c->vs->resume);
    free(c->vs->spots);
    free(c->vs);
    c->vs = NULL;
}

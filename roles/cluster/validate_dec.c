/*
 * validate_dec.c - the decision on a checked task (docs/validation.md): from its
 * candidates' answer classes, a quorum or an adaptive acceptance makes one canonical
 * result (or the task fails for good); below validator.c, whose verdicts end here.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"

#define rnd01 valid_rand

static void job_check_done(struct job *j)
{
    if (j->ndone == j->ntasks && j->state == JS_RUNNING) {
        j->state = JS_DONE;
        j->finished_ms = wall_now_ms();
        log_info("job %llu done: %u tasks, %u failed, %u extra results", (unsigned long long)j->id,
                 j->ntasks, j->nfailed, j->ndups);
    }
}

static void cancel_copies(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt)
{
    while (vt->ncopy > 0) {
        struct vcopy cp = vt->copy[--vt->ncopy];
        if (cp.node < c->nnodes) {
            cluster_cancel_note(c, &c->nodes[cp.node], j->id, idx, cp.issue);
            if (c->nodes[cp.node].inflight > 0)
                c->nodes[cp.node].inflight--;
        }
    }
    vt->want = 0;
}

static void free_recs(struct vtask *vt)
{
    for (uint32_t k = 0; k < vt->ncand; k++) {
        free(vt->cand[k].rec);
        vt->cand[k].rec = NULL;
    }
}

/* Marks the task final: t_results gets rec (len bytes); counters and the job move on. */
static int finish(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt, const void *rec,
                  size_t len, bool ok, uint32_t node, uint32_t issue)
{
    struct task *t = &j->tasks[idx];
    uint8_t key[12];
    cancel_copies(c, j, idx, vt);
    store_key_u64_u32(key, j->id, idx);
    if (store_put(c->store, c->t_results, key, sizeof key, rec, len) < 0)
        return -1;
    t->state = TS_DONE;
    t->ok = ok;
    t->node = node;
    t->won = issue;
    vt->state = VT_DONE;
    j->ndone++;
    if (!ok)
        j->nfailed++;
    if (node < c->nnodes) {
        c->nodes[node].results++;
        cluster_mark_node(c, &c->nodes[node]);
    }
    free_recs(vt);
    job_check_done(j);
    cluster_mark_job(c, j);
    return cluster_task_save(c, j, idx);
}

int valid_fail_task(struct cluster *c, struct job *j, uint32_t idx, uint8_t why)
{
    struct vtask *vt = valid_vt(j, idx);
    struct wire_buf wb;
    char text[600];
    if (!vt)
        return 0;
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (vt->cand[k].status == VC_PENDING) {
            vt->cand[k].status = VC_REJECTED;
            vt->cand[k].why = why;
        }
    snprintf(text, sizeof text, "result validation failed: %s%s%s", valid_why_text[why],
             vt->fail_why ? ": " : "", vt->fail_why ? vt->fail_why : "");
    log_warnx("job %llu task %u: %s", (unsigned long long)j->id, idx, text);
    wire_buf_init(&wb);
    wire_pack_map(&wb, 6);
    wire_put_u64(&wb, "idx", idx);
    wire_put_u64(&wb, "issue", 0);
    wire_put_i64(&wb, "exit", -1);
    wire_put_str(&wb, "error", text);
    wire_put_str(&wb, "node", "");
    wire_put_i64(&wb, "received", wall_now_ms());
    int rc = finish(c, j, idx, vt, wb.sb.data, wb.sb.size, false, UINT32_MAX, 0);
    wire_buf_free(&wb);
    return rc;
}

/* The bytes of candidate k: in memory while undecided, else read back from "vres". */
static void *cand_bytes(struct cluster *c, const struct job *j, uint32_t idx,
                        const struct vcand *cd, size_t *len, bool *owned)
{
    uint8_t key[16];
    void *val;
    *owned = false;
    if (cd->rec) {
        *len = cd->len;
        return cd->rec;
    }
    valid_vres_key(key, j->id, idx, cd->seq);
    if (store_get(c->store, c->t_vres, key, sizeof key, &val, len) != 0)
        return NULL;
    *owned = true;
    return val;
}

/* Class members become canonical (the first) and "agrees"; other pending: rejected. */
static int accept_class(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt,
                        uint32_t ci, bool alone)
{
    uint64_t cls = vt->cand[ci].cls;
    size_t len;
    bool owned;
    void *bytes = cand_bytes(c, j, idx, &vt->cand[ci], &len, &owned);
    if (!bytes) { /* same turn as a reopening: that copy is not readable; look again */
        vt->cand[ci].status = VC_REJECTED;
        vt->cand[ci].why = VW_LOST;
        return valid_evaluate(c, j, idx);
    }
    for (uint32_t k = 0; k < vt->ncand; k++) {
        struct vcand *cd = &vt->cand[k];
        if (cd->status != VC_PENDING)
            continue;
        if (k != ci)
            j->ndups++; /* results that did not become the final one */
        if (cd->cls == cls) {
            cd->status = k == ci ? VC_CANONICAL : VC_AGREES;
            valid_trust_valid(c, cd->node); /* accepted alone counts too, as in BOINC */
            (void)alone;
        } else {
            cd->status = VC_REJECTED;
            cd->why = cd->cls ? VW_DISAGREES : VW_INVALID;
            valid_trust_invalid(c, cd->node);
        }
    }
    int rc =
        finish(c, j, idx, vt, bytes, len, vt->cand[ci].ok, vt->cand[ci].node, vt->cand[ci].issue);
    if (owned)
        free(bytes);
    return rc;
}

int valid_evaluate(struct cluster *c, struct job *j, uint32_t idx)
{
    struct vtask *vt = valid_vt(j, idx);
    const struct jvalid *v = j->v;
    uint32_t best = UINT32_MAX, bestk = 0, npend = 0, nres = 0;
    /* adaptive, while trusted nodes are active: a winning class needs a trusted member */
    bool need_trusted = v->adaptive && valid_ntrusted(c) > 0;
    if (!vt || vt->state == VT_DONE)
        return 0;
    vt->state = VT_OPEN;
    for (uint32_t k = 0; k < vt->ncand; k++) {
        struct vcand *cd = &vt->cand[k];
        nres++;
        if (cd->status != VC_PENDING)
            continue;
        if (cd->cls == 0) { /* invalid on its own */
            cd->status = VC_REJECTED;
            cd->why = VW_INVALID;
            valid_trust_invalid(c, cd->node);
            continue;
        }
        npend++;
        uint32_t same = 0;
        bool trusted_member = !need_trusted;
        for (uint32_t m = 0; m < vt->ncand; m++)
            if (vt->cand[m].status == VC_PENDING && vt->cand[m].cls == cd->cls) {
                same++;
                trusted_member |=
                    vt->cand[m].node < c->nnodes && valid_trusted(c, &c->nodes[vt->cand[m].node]);
            }
        if (!trusted_member && same >= v->quorum)
            same = v->quorum - 1; /* not enough on its own */
        if (same > bestk) {
            bestk = same;
            best = k;
        }
    }
    if (bestk >= v->quorum)
        return accept_class(c, j, idx, vt, best, false);
    if (v->adaptive && npend == 1 && best != UINT32_MAX && vt->cand[best].node < c->nnodes) {
        const struct node *n = &c->nodes[vt->cand[best].node];
        if (valid_trusted(c, n) && rnd01(c->vs) >= valid_check_prob(c, n))
            return accept_class(c, j, idx, vt, best, true);
    }
    uint32_t need = bestk < v->quorum ? v->quorum - bestk : 1, out = vt->ncopy + vt->want;
    if (v->adaptive && v->quorum < 2 && need < 1)
        need = 1;
    if (need > out)
        vt->want = (uint8_t)(vt->want + need - out);
    if (nres + vt->ncopy + vt->want > v->max_results)
        vt->want =
            (uint8_t)(nres + vt->ncopy >= v->max_results ? 0 : v->max_results - nres - vt->ncopy);
    if (vt->want == 0 && vt->ncopy == 0)
        return valid_fail_task(c, j, idx, VW_NOQUORUM);
    valid_want_more(c, j, idx, vt);
    cluster_mark_job(c, j);
    return cluster_task_save(c, j, idx);
}

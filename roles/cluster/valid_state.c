/*
 * valid_state.c - the validation state of jobs, tasks and nodes in memory and its part of
 * their records (the "valid" map of a job record, the "v" map of a task record, a node's
 * trust counters), with the small operations on it that loading needs: below state_rec.c,
 * which calls it. The policy is in validate.c, validate_dec.c and validate_res.c.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"

static void vt_free(struct vtask *vt)
{
    if (!vt)
        return;
    for (uint32_t i = 0; i < vt->ncand; i++)
        free(vt->cand[i].rec);
    free(vt->cand);
    free(vt->copy);
    free(vt->holder);
    free(vt->fail_why);
    free(vt);
}

void valid_job_free(struct job *j)
{
    if (!j->v)
        return;
    for (uint32_t i = 0; j->v->vt && i < j->v->nvt; i++)
        vt_free(j->v->vt[i]);
    free(j->v->vt);
    free(j->v->ka);
    free(j->v->validator);
    free(j->v);
    j->v = NULL;
}

struct vtask *valid_vt(const struct job *j, uint32_t idx)
{
    return j->v && j->v->vt && idx < j->v->nvt ? j->v->vt[idx] : NULL;
}

struct vtask *vt_get_ext(struct job *j, uint32_t idx)
{
    struct jvalid *v = j->v;
    if (idx >= j->ntasks)
        return NULL;
    if (idx >= v->nvt) { /* grown like the task table: by doubling, up to ntasks */
        uint32_t n = v->nvt ? v->nvt : 64;
        while (n <= idx)
            n = n > j->ntasks / 2 ? j->ntasks : n * 2;
        n = n < j->ntasks ? n : j->ntasks;
        void *p = realloc(v->vt, (size_t)n * sizeof *v->vt);
        if (!p)
            return NULL;
        v->vt = p;
        memset(v->vt + v->nvt, 0, (size_t)(n - v->nvt) * sizeof *v->vt);
        v->nvt = n;
    }
    if (!j->v->vt[idx])
        j->v->vt[idx] = calloc(1, sizeof(struct vtask));
    return j->v->vt[idx];
}

/* Why a candidate was rejected or a task failed, by enum vc_why. */
const char *const valid_why_text[VW_VALIDATOR + 1] = {
    "",
    "disagrees with the quorum",
    "the validator found it invalid",
    "its node failed a spot check afterwards (re-verified)",
    "its node was on probation after a failed spot check",
    "node-side error: the task could not run there",
    "another result from the same node, host or address",
    "its stored record could not be read",
    "no quorum after max_results results",
    "the validator failed too often",
};

const char *const valid_distinct_names[3] = {"session", "host", "address"};

void valid_job_encode(const struct job *j, struct wire_buf *wb)
{
    const struct jvalid *v = j->v;
    wire_put_key(wb, "valid");
    wire_pack_map(wb, 6 + (v->validator != NULL));
    wire_put_u64(wb, "replicas", v->replicas);
    wire_put_u64(wb, "quorum", v->quorum);
    wire_put_u64(wb, "max_results", v->max_results);
    wire_put_bool(wb, "adaptive", v->adaptive);
    wire_put_str(wb, "distinct", valid_distinct_names[v->distinct % 3]);
    wire_put_bool(wb, "known", v->known);
    if (v->validator)
        wire_put_str(wb, "validator", v->validator);
}

int valid_job_load(struct job *j, const msgpack_object *m)
{
    const msgpack_object *vm = wire_get(m, "valid");
    if (!vm || vm->type != MSGPACK_OBJECT_MAP)
        return 0;
    struct jvalid *v = calloc(1, sizeof *v);
    if (!v)
        return -1;
    v->replicas = (uint32_t)wire_get_u64(vm, "replicas", 1);
    v->quorum = (uint32_t)wire_get_u64(vm, "quorum", 1);
    v->max_results = (uint32_t)wire_get_u64(vm, "max_results", v->quorum);
    v->adaptive = wire_get_bool(vm, "adaptive", false);
    v->known = wire_get_bool(vm, "known", false);
    v->validator = wire_get_strdup(vm, "validator");
    size_t dl = 0;
    const char *d = wire_get_str(vm, "distinct", &dl);
    for (int i = 0; d && i < 3; i++)
        if (dl == strlen(valid_distinct_names[i]) && !memcmp(d, valid_distinct_names[i], dl))
            v->distinct = (uint8_t)i;
    if (v->quorum < 1 || v->quorum > VALID_MAX_RESULTS)
        v->quorum = 1;
    if (v->max_results < v->quorum || v->max_results > VALID_MAX_RESULTS)
        v->max_results = v->quorum;
    if (v->known && !(v->ka = calloc(j->ntasks ? j->ntasks : 1, sizeof *v->ka))) {
        free(v->validator);
        free(v);
        return -1;
    }
    j->v = v;
    return 0;
}

void valid_trust_pack(const struct node *n, struct wire_buf *wb)
{
    wire_put_u64(wb, "consec_valid", n->tr.consec);
    wire_put_u64(wb, "valid", n->tr.nvalid);
    wire_put_u64(wb, "invalid", n->tr.ninvalid);
    wire_put_u64(wb, "spot_pass", n->tr.spot_pass);
    wire_put_u64(wb, "spot_fail", n->tr.spot_fail);
    wire_put_u64(wb, "probation", n->tr.probation);
    wire_put_i64(wb, "spot_ok", n->tr.spot_ok_ms);
}

void valid_trust_load(struct node *n, const msgpack_object *m)
{
    n->tr.consec = (uint32_t)wire_get_u64(m, "consec_valid", 0);
    n->tr.nvalid = (uint32_t)wire_get_u64(m, "valid", 0);
    n->tr.ninvalid = (uint32_t)wire_get_u64(m, "invalid", 0);
    n->tr.spot_pass = (uint32_t)wire_get_u64(m, "spot_pass", 0);
    n->tr.spot_fail = (uint32_t)wire_get_u64(m, "spot_fail", 0);
    n->tr.probation = (uint32_t)wire_get_u64(m, "probation", 0);
    n->tr.spot_ok_ms = wire_get_i64(m, "spot_ok", 0);
}

void valid_heap_push(struct vstate *vs, struct heap_ent e)
{
    /* out of memory: the copy then never expires; its task waits for the result */
    (void)xheap_push(&vs->heap, &vs->nheap, &vs->capheap, e);
}

void valid_heap_add(struct cluster *c, uint64_t job, uint32_t idx, const struct vcopy *cp)
{
    valid_heap_push(c->vs, (struct heap_ent){cp->expiry_ms, job, idx, cp->issue});
}

int valid_holder_set(struct vtask *vt, uint32_t issue, uint32_t node)
{
    if (issue == 0 || issue > 1000000)
        return 0;
    if (issue > vt->nholder) {
        uint32_t *h = realloc(vt->holder, issue * sizeof *h);
        if (!h)
            return -1;
        for (uint32_t i = vt->nholder; i < issue; i++)
            h[i] = UINT32_MAX;
        vt->holder = h;
        vt->nholder = issue;
    }
    vt->holder[issue - 1] = node;
    return 0;
}

struct vcand *valid_cand_add(struct vtask *vt)
{
    if (vt->ncand >= 250)
        return NULL;
    struct vcand *cd = realloc(vt->cand, (vt->ncand + 1u) * sizeof *cd);
    if (!cd)
        return NULL;
    vt->cand = cd;
    cd = &vt->cand[vt->ncand++];
    memset(cd, 0, sizeof *cd);
    cd->seq = vt->nextseq++;
    return cd;
}

static uint64_t arr_u64(const msgpack_object *a, uint32_t i)
{
    return a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size &&
                   a->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER
               ? a->via.array.ptr[i].via.u64
               : 0;
}

void valid_task_encode(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *wb)
{
    const struct vtask *vt = valid_vt(j, idx);
    wire_put_key(wb, "v");
    if (!vt) {
        wire_pack_map(wb, 0);
        return;
    }
    wire_pack_map(wb, 7);
    wire_put_u64(wb, "state", vt->state == VT_DONE ? VT_DONE : VT_OPEN);
    wire_put_key(wb, "holders"); /* the session each issue went to */
    wire_pack_array(wb, vt->nholder);
    for (uint32_t k = 0; k < vt->nholder; k++)
        wire_pack_str(wb, vt->holder[k] < c->nnodes ? c->nodes[vt->holder[k]].sid : "");
    wire_put_u64(wb, "vruns", vt->vruns);
    wire_put_u64(wb, "want", vt->want);
    wire_put_u64(wb, "nextseq", vt->nextseq);
    wire_put_key(wb, "cands"); /* [seq, status, why] each */
    wire_pack_array(wb, vt->ncand);
    for (uint32_t k = 0; k < vt->ncand; k++) {
        wire_pack_array(wb, 3);
        wire_pack_u64(wb, vt->cand[k].seq);
        wire_pack_u64(wb, vt->cand[k].status);
        wire_pack_u64(wb, vt->cand[k].why);
    }
    wire_put_key(wb, "copies"); /* [session, issue, expiry] each */
    wire_pack_array(wb, vt->ncopy);
    for (uint32_t k = 0; k < vt->ncopy; k++) {
        uint32_t ni = vt->copy[k].node;
        wire_pack_array(wb, 3);
        wire_pack_str(wb, ni < c->nnodes ? c->nodes[ni].sid : "");
        wire_pack_u64(wb, vt->copy[k].issue);
        wire_pack_u64(wb, (uint64_t)vt->copy[k].expiry_ms);
    }
}

void valid_task_load(struct cluster *c, struct job *j, uint32_t idx, const msgpack_object *m)
{
    const msgpack_object *v = wire_get(m, "v"), *cands, *copies;
    struct vtask *vt;
    if (!v || v->type != MSGPACK_OBJECT_MAP || v->via.map.size == 0 || !(vt = vt_get_ext(j, idx)))
        return;
    vt->state = (uint8_t)(wire_get_u64(v, "state", 0) == VT_DONE ? VT_DONE : VT_OPEN);
    vt->vruns = (uint8_t)wire_get_u64(v, "vruns", 0);
    vt->want = (uint8_t)wire_get_u64(v, "want", 0);
    vt->nextseq = (uint32_t)wire_get_u64(v, "nextseq", 0);
    cands = wire_get(v, "cands");
    for (uint32_t k = 0; cands && cands->type == MSGPACK_OBJECT_ARRAY && k < cands->via.array.size;
         k++) {
        const msgpack_object *a = &cands->via.array.ptr[k];
        struct vcand *cd = valid_cand_add(vt);
        if (!cd)
            break;
        cd->seq = (uint32_t)arr_u64(a, 0);
        cd->status = (uint8_t)(arr_u64(a, 1) <= VC_REJECTED ? arr_u64(a, 1) : VC_REJECTED);
        cd->why = (uint8_t)(arr_u64(a, 2) <= VW_VALIDATOR ? arr_u64(a, 2) : VW_NONE);
        cd->node = UINT32_MAX;
    }
    vt->nextseq = vt->nextseq > vt->ncand ? vt->nextseq : vt->ncand;
    const msgpack_object *hs = wire_get(v, "holders");
    for (uint32_t k = 0; hs && hs->type == MSGPACK_OBJECT_ARRAY && k < hs->via.array.size; k++) {
        const msgpack_object *h = &hs->via.array.ptr[k];
        struct node *hn = h->type == MSGPACK_OBJECT_STR
                              ? cluster_node_find(c, h->via.str.ptr, h->via.str.size)
                              : NULL;
        if (valid_holder_set(vt, k + 1, hn ? (uint32_t)(hn - c->nodes) : UINT32_MAX) < 0)
            break;
    }
    copies = wire_get(v, "copies");
    int64_t grace = wall_now_ms() + c->cfg.hb_s * 1000 * 2;
    for (uint32_t k = 0; copies && copies->type == MSGPACK_OBJECT_ARRAY &&
                         k < copies->via.array.size && vt->state != VT_DONE;
         k++) {
        const msgpack_object *a = &copies->via.array.ptr[k];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 3 ||
            a->via.array.ptr[0].type != MSGPACK_OBJECT_STR)
            continue;
        struct node *n =
            cluster_node_find(c, a->via.array.ptr[0].via.str.ptr, a->via.array.ptr[0].via.str.size);
        struct vcopy *cp = realloc(vt->copy, (vt->ncopy + 1u) * sizeof *cp);
        if (!cp)
            break;
        vt->copy = cp;
        int64_t exp = (int64_t)arr_u64(a, 2);
        vt->copy[vt->ncopy++] = (struct vcopy){n ? (uint32_t)(n - c->nodes) : UINT32_MAX,
                                               (uint32_t)arr_u64(a, 1), exp < grace ? grace : exp};
        valid_heap_add(c, j->id, idx, &vt->copy[vt->ncopy - 1]);
        if (n)
            n->inflight++;
    }
}

void valid_vres_key(uint8_t key[16], uint64_t job, uint32_t idx, uint32_t seq)
{
    store_key_u64_u32(key, job, idx);
    for (int i = 15, s = (int)seq; i >= 12; i--, s >>= 8)
        key[i] = (uint8_t)s;
}

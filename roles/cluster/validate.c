/*
 * validate.c - result validation (MISSION X6, issue #13; docs/validation.md).
 *
 * A job submitted with replicas/quorum/max_results/validator/adaptive ("checked job")
 * has its tasks handed out as several copies to different nodes. Every result is kept
 * as a candidate (table "vres", key job/idx/seq); candidates fall into answer classes
 * (exact exit status and stdout by default, or the labels of an application validator,
 * validator.c); a class of `quorum` members wins and its first member becomes the
 * canonical result (table "results", as for plain jobs). Adaptive replication accepts
 * one result of a trusted node alone with a probability that grows with its record.
 * A job submitted with known answers ("known") is a pool of spot checks mixed into any
 * node's work; a node failing one goes on probation and every result it had accepted
 * since its last passed check is re-verified (backtracking).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"

/* ---- hashing and randomness ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                  \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                  \
    } while (0)

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* SipHash-2-4 of p[0..n) keyed with k (from the published description). */
uint64_t valid_siphash(const uint8_t k[16], const uint8_t *p, size_t n)
{
    uint64_t k0 = le64(k), k1 = le64(k + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t full = n & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = le64(p + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < (n & 7); i++)
        b |= (uint64_t)p[full + i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t valid_hash(const struct vstate *vs, const void *p, size_t n, uint64_t salt)
{
    uint8_t b[16];
    uint64_t h = valid_siphash(vs->key, p, n);
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(h >> (8 * i));
        b[8 + i] = (uint8_t)(salt >> (8 * i));
    }
    h = valid_siphash(vs->key, b, sizeof b);
    return h ? h : 1; /* 0 means "invalid" */
}

double valid_rand(struct vstate *vs)
{
    uint64_t x = vs->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    vs->rng = x;
    return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* ---- set-up ---- */

int valid_init(struct cluster *c)
{
    struct vstate *vs = calloc(1, sizeof *vs);
    if (!vs || getrandom(vs->key, sizeof vs->key, 0) != (ssize_t)sizeof vs->key ||
        getrandom(&vs->rng, sizeof vs->rng, 0) != (ssize_t)sizeof vs->rng) {
        free(vs);
        return -1;
    }
    vs->rng |= 1;
    c->vs = vs;
    return 0;
}

void valid_reset(struct cluster *c)
{
    if (!c->vs)
        return;
    c->vs->nheap = c->vs->qlen = c->vs->qhead = c->vs->nresume = 0;
}

/* ---- submit, job record ---- */

const char *valid_submit(struct cluster *c, struct job *j, const msgpack_object *m)
{
    const msgpack_object *known = wire_get(m, "known");
    bool any = wire_get(m, "replicas") || wire_get(m, "quorum") || wire_get(m, "max_results") ||
               wire_get(m, "validator") || wire_get_bool(m, "adaptive", false) ||
               wire_get(m, "distinct") || known;
    if (!any)
        return NULL;
    bool adaptive = wire_get_bool(m, "adaptive", false);
    uint64_t q = wire_get_u64(m, "quorum", adaptive ? 2 : 1);
    uint64_t r = wire_get_u64(m, "replicas", q);
    uint64_t mx = wire_get_u64(m, "max_results", r > q ? r + 2 : q + 2);
    size_t dl = 0;
    const char *d = wire_get_str(m, "distinct", &dl);
    int dist = -1;
    for (int i = 0; d && i < 3; i++)
        if (dl == strlen(valid_distinct_names[i]) && !memcmp(d, valid_distinct_names[i], dl))
            dist = i;
    if (j->gpus > 0)
        return "result checking (replicas, quorum, validator, known answers) is for CPU tasks, "
               "not with gpus";
    if (q < 1 || r < 1)
        return "quorum and replicas must be at least 1";
    if (q > VALID_MAX_RESULTS || r > VALID_MAX_RESULTS || mx > VALID_MAX_RESULTS)
        return "quorum, replicas and max_results are at most 32";
    if (mx < q || mx < r)
        return "max_results must be at least quorum and replicas";
    if (adaptive && q < 2)
        return "adaptive replication needs a quorum of 2 or more";
    if (d && dist < 0)
        return "distinct must be session, host or address";
    if (known && known->via.array.size != j->ntasks)
        return "known, when given, must have exactly one answer per task";
    size_t vl = 0;
    const char *val = wire_get_str(m, "validator", &vl);
    if (val && (vl == 0 || memchr(val, 0, vl)))
        return "validator must be a non-empty command without NUL bytes";
    struct jvalid *v = calloc(1, sizeof *v);
    if (!v || (val && !(v->validator = strndup(val, vl))) ||
        (known && !(v->ka = calloc(j->ntasks, sizeof *v->ka)))) {
        if (v)
            free(v->validator);
        free(v);
        return "out of memory";
    }
    v->quorum = (uint32_t)q;
    v->replicas = (uint32_t)r;
    v->max_results = (uint32_t)mx;
    v->adaptive = adaptive;
    v->distinct = (uint8_t)(dist < 0 ? VD_SESSION : dist);
    v->known = known != NULL;
    j->v = v;
    for (uint32_t i = 0; known && i < known->via.array.size; i++) {
        const msgpack_object *a = &known->via.array.ptr[i];
        uint8_t key[12];
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_pack_object(&wb, a);
        store_key_u64_u32(key, j->id, i);
        int rc = store_put(c->store, c->t_known, key, sizeof key, wb.sb.data, wb.sb.size);
        wire_buf_free(&wb);
        if (rc < 0)
            return "out of memory";
        v->ka[i] = valid_class(c->vs, a);
    }
    if (v->known) { /* a pool: never handed out in index order, never "done" */
        c->vs->nknown++;
        if (job_grow_tasks(j, j->ntasks) < 0)
            return "out of memory";
        j->next_new = j->ntasks;
    }
    return NULL;
}

/* ---- trust ---- */

bool valid_trusted(const struct cluster *c, const struct node *n)
{
    return n->tr.probation == 0 && n->tr.consec >= (uint32_t)c->cfg.v_trust_after;
}

/*
 * Probability that a trusted node's result is replicated anyway: (trust_after /
 * consec)^2, so 1 at the threshold, falling as its record grows, never below check_min.
 */
double valid_check_prob(const struct cluster *c, const struct node *n)
{
    double p = n->tr.consec ? (double)c->cfg.v_trust_after / n->tr.consec : 1.0;
    p *= p;
    return p < c->cfg.v_check_min ? c->cfg.v_check_min : p > 1 ? 1 : p;
}

uint32_t valid_ntrusted(struct cluster *c)
{
    struct vstate *vs = c->vs;
    int64_t now = loop_now_ms();
    if (now - vs->ntrusted_ms >= 100 || now < vs->ntrusted_ms) {
        vs->ntrusted = 0;
        for (uint32_t i = 0; i < c->nnodes; i++)
            vs->ntrusted +=
                c->nodes[i].active && !c->nodes[i].gone && valid_trusted(c, &c->nodes[i]);
        vs->ntrusted_ms = now;
    }
    return vs->ntrusted;
}

void valid_trust_valid(struct cluster *c, uint32_t ni)
{
    if (ni >= c->nnodes)
        return;
    c->nodes[ni].tr.consec++;
    c->nodes[ni].tr.nvalid++;
    cluster_mark_node(c, &c->nodes[ni]);
}

void valid_trust_invalid(struct cluster *c, uint32_t ni)
{
    if (ni >= c->nnodes)
        return;
    c->nodes[ni].tr.consec = 0;
    c->nodes[ni].tr.ninvalid++;
    cluster_mark_node(c, &c->nodes[ni]);
}

/* ---- the copy heap and the want queue ---- */

static struct heap_ent vheap_pop(struct vstate *vs)
{
    return xheap_pop(vs->heap, &vs->nheap);
}

static int ring_push(struct vstate *vs, struct vent e)
{
    if (vs->qlen == vs->qcap) {
        uint32_t cap = vs->qcap ? vs->qcap * 2 : 1024;
        struct vent *q = malloc(cap * sizeof *q);
        if (!q)
            return -1;
        for (uint32_t i = 0; i < vs->qlen; i++)
            q[i] = vs->q[(vs->qhead + i) % vs->qcap];
        free(vs->q);
        vs->q = q;
        vs->qcap = cap;
        vs->qhead = 0;
    }
    vs->q[(vs->qhead + vs->qlen++) % vs->qcap] = e;
    return 0;
}

void valid_want_more(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt)
{
    if (vt->want > 0 && !vt->inq && ring_push(c->vs, (struct vent){j->id, idx}) == 0)
        vt->inq = true;
}

void valid_resume_add(struct cluster *c, uint64_t job, uint32_t idx)
{
    struct vstate *vs = c->vs;
    if (vs->nresume == vs->capresume) {
        uint32_t cap = vs->capresume ? vs->capresume * 2 : 64;
        struct vent *r = realloc(vs->resume, cap * sizeof *r);
        if (!r)
            return;
        vs->resume = r;
        vs->capresume = cap;
    }
    vs->resume[vs->nresume++] = (struct vent){job, idx};
}

void valid_copy_remove(struct cluster *c, struct vtask *vt, uint32_t k)
{
    uint32_t ni = vt->copy[k].node;
    if (ni < c->nnodes && c->nodes[ni].inflight > 0)
        c->nodes[ni].inflight--;
    vt->copy[k] = vt->copy[--vt->ncopy];
}

/* Copies whose wait ran out are lost: their tasks want another copy. */
static void expire_copies(struct cluster *c, int64_t now)
{
    struct vstate *vs = c->vs;
    while (vs->nheap > 0 && vs->heap[0].expiry_ms <= now) {
        struct heap_ent e = vheap_pop(vs);
        struct job *j = cluster_job_find(c, e.job);
        struct vtask *vt = j && j->state == JS_RUNNING ? valid_vt(j, e.idx) : NULL;
        if (!vt || vt->state == VT_DONE)
            continue;
        for (uint32_t k = 0; k < vt->ncopy; k++)
            if (vt->copy[k].issue == e.issue && vt->copy[k].expiry_ms == e.expiry_ms) {
                valid_copy_remove(c, vt, k);
                vt->want++;
                valid_want_more(c, j, e.idx, vt);
                cluster_task_save(c, j, e.idx);
                break;
            }
    }
}

/* The answer class of a result map: exit status, signal, timeout and stdout. */
uint64_t valid_class(const struct vstate *vs, const msgpack_object *res)
{
    size_t n = 0;
    const void *out = wire_get_bin(res, "stdout", &n);
    uint64_t salt = (uint64_t)wire_get_i64(res, "exit", -1) * 1000003u +
                    wire_get_u64(res, "signal", 0) * 7u + wire_get_bool(res, "timeout", false);
    return valid_hash(vs, out ? out : "", out ? n : 0, salt);
}

/* ---- issuing ---- */

bool valid_same_owner(const struct cluster *c, const struct jvalid *v, uint32_t a, uint32_t b)
{
    if (a == b)
        return true;
    if (a >= c->nnodes || b >= c->nnodes || v->distinct == VD_SESSION)
        return false;
    const struct node *x = &c->nodes[a], *y = &c->nodes[b];
    return v->distinct == VD_HOST ? !strcmp(x->name, y->name) : !strcmp(x->ip, y->ip);
}

/*
 * May node ni get a copy of this task? One result per node, host or address; and for
 * adaptive jobs, while trusted nodes are active, a task whose copies and results all
 * come from untrusted nodes is checked by a trusted one (so that new or suspect nodes
 * cannot form a quorum among themselves).
 */
static bool eligible(const struct cluster *c, const struct job *j, const struct vtask *vt,
                     uint32_t ni)
{
    if (j->v->adaptive && valid_ntrusted((struct cluster *)c) > 0 &&
        !valid_trusted(c, &c->nodes[ni])) {
        bool checked = false;
        for (uint32_t k = 0; k < vt->ncand; k++) /* answers disagree: a trusted node decides */
            for (uint32_t m = k + 1; m < vt->ncand; m++)
                if (vt->cand[k].status == VC_PENDING && vt->cand[m].status == VC_PENDING &&
                    vt->cand[k].cls != vt->cand[m].cls)
                    return false;
        for (uint32_t k = 0; k < vt->ncopy && !checked; k++)
            checked = vt->copy[k].node < c->nnodes && valid_trusted(c, &c->nodes[vt->copy[k].node]);
        for (uint32_t k = 0; k < vt->ncand && !checked; k++)
            checked = vt->cand[k].node < c->nnodes && vt->cand[k].status != VC_REJECTED &&
                      valid_trusted(c, &c->nodes[vt->cand[k].node]);
        if (!checked)
            return false;
    }
    for (uint32_t k = 0; k < vt->ncopy; k++)
        if (valid_same_owner(c, j->v, vt->copy[k].node, ni))
            return false;
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (!vt->cand[k].error && valid_same_owner(c, j->v, vt->cand[k].node, ni))
            return false;
    return true;
}

static int take_spot(struct cluster *c, struct job **jp, uint32_t *idx)
{
    uint32_t nk = 0, pick;
    if (c->vs->nknown == 0)
        return -1; /* the usual case: no scan */
    for (uint32_t i = 0; i < c->njobs; i++)
        nk += c->jobs[i]->v && c->jobs[i]->v->known && c->jobs[i]->state <= JS_RUNNING;
    c->vs->nknown = nk;
    if (nk == 0)
        return -1;
    pick = (uint32_t)(valid_rand(c->vs) * nk);
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (!(j->v && j->v->known && j->state <= JS_RUNNING) || pick-- > 0 || j->held || j->dep)
            continue;
        *jp = j;
        *idx = (uint32_t)(valid_rand(c->vs) * j->ntasks) % j->ntasks;
        return 0;
    }
    return -1;
}

int valid_take(struct cluster *c, struct node *n, int64_t now, struct job **jp, uint32_t *idx)
{
    struct vstate *vs = c->vs;
    uint32_t ni = (uint32_t)(n - c->nodes);
    if (!vs)
        return -1;
    expire_copies(c, now);
    bool probation = n->tr.probation > 0;
    if (probation && take_spot(c, jp, idx) < 0) {
        n->tr.probation = 0; /* no spot checks left to redeem itself: replicated as new */
        cluster_mark_node(c, n);
        probation = false;
    }
    if (probation)
        return 0;
    if (c->cfg.v_spot_fraction > 0 && valid_rand(vs) < c->cfg.v_spot_fraction &&
        take_spot(c, jp, idx) == 0)
        return 0;
    uint32_t lim = vs->qlen < 256 ? vs->qlen : 256;
    for (uint32_t k = 0; k < lim; k++) {
        struct vent e = vs->q[vs->qhead];
        vs->qhead = (vs->qhead + 1) % vs->qcap;
        vs->qlen--;
        struct job *j = cluster_job_find(c, e.job);
        struct vtask *vt = j ? valid_vt(j, e.idx) : NULL;
        if (!vt)
            continue;
        if (j->state != JS_RUNNING || vt->state != VT_OPEN || vt->want == 0) {
            vt->inq = false;
            continue;
        }
        if (j->held || !eligible(c, j, vt, ni)) { /* held (gridnode hold): kept queued */
            ring_push(vs, e);
            continue;
        }
        vt->want--;
        if (vt->want > 0)
            ring_push(vs, e);
        else
            vt->inq = false;
        *jp = j;
        *idx = e.idx;
        return 0;
    }
    return -1;
}

uint32_t valid_issue_no(const struct job *j, const struct task *t)
{
    /* a spot check looks like the first copy of an ordinary task */
    return j->v && j->v->known ? 1 : t->issues + 1;
}

int valid_issued(struct cluster *c, struct node *n, struct job *j, uint32_t idx, int64_t expiry_ms)
{
    struct task *t = &j->tasks[idx];
    uint32_t ni = (uint32_t)(n - c->nodes);
    if (j->state == JS_QUEUED) {
        j->state = JS_RUNNING;
        cluster_mark_job(c, j);
    }
    if (j->v->known) { /* remembered, so that only answers to it get a verdict */
        struct vstate *vs = c->vs;
        if (!vs->spots && !(vs->spots = malloc(VSPOT_MAX * sizeof *vs->spots)))
            return 0;
        if (vs->nspots == VSPOT_MAX) { /* the oldest one is forgotten */
            vs->spot_head = (vs->spot_head + 1) % VSPOT_MAX;
            vs->nspots--;
        }
        vs->spots[(vs->spot_head + vs->nspots++) % VSPOT_MAX] = (struct vspot){ni, idx, j->id};
        vs->spot_issued++;
        return 0;
    }
    struct vtask *vt = vt_get_ext(j, idx);
    struct vcopy *cp = vt ? realloc(vt->copy, (vt->ncopy + 1u) * sizeof *cp) : NULL;
    if (!cp)
        return -1;
    vt->copy = cp;
    bool first = t->state == TS_NEW;
    t->issues++;
    t->state = TS_ISSUED;
    t->node = UINT32_MAX; /* copies are tracked here, not in the task */
    t->expiry_ms = expiry_ms;
    vt->copy[vt->ncopy++] = (struct vcopy){ni, t->issues, expiry_ms};
    if (valid_holder_set(vt, t->issues, ni) < 0)
        return -1;
    valid_heap_push(c->vs, (struct heap_ent){expiry_ms, j->id, idx, t->issues});
    n->inflight++;
    n->cur_job = j->id;
    n->cur_idx = idx;
    n->cur_since_ms = wall_now_ms();
    if (first) {
        uint32_t init = j->v->replicas > j->v->quorum ? j->v->replicas : j->v->quorum;
        if (j->v->adaptive && valid_trusted(c, n))
            init = 1; /* trusted: one copy first; its result may be accepted alone */
        vt->want = (uint8_t)(init - 1);
        valid_want_more(c, j, idx, vt);
    }
    cluster_mark_job(c, j);
    cluster_mark_node(c, n);
    return cluster_task_save(c, j, idx);
}

void valid_extend(struct cluster *c, struct node *n, struct job *j, uint32_t idx, uint32_t issue,
                  int64_t until)
{
    struct vtask *vt = valid_vt(j, idx);
    uint32_t ni = (uint32_t)(n - c->nodes);
    for (uint32_t k = 0; vt && k < vt->ncopy; k++)
        if (vt->copy[k].node == ni && vt->copy[k].issue == issue && vt->copy[k].expiry_ms < until) {
            vt->copy[k].expiry_ms = until;
            valid_heap_push(c->vs, (struct heap_ent){until, j->id, idx, issue});
        }
}

/* The node left: its copies expire now (handed out again at the next request). */
void valid_release_node(struct cluster *c, struct node *n)
{
    uint32_t ni = (uint32_t)(n - c->nodes);
    int64_t now = wall_now_ms();
    for (uint32_t i = 0; c->vs && i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (!j->v || !j->v->vt || j->state != JS_RUNNING)
            continue;
        for (uint32_t x = 0; x < j->v->nvt; x++) {
            struct vtask *vt = j->v->vt[x];
            for (uint32_t k = 0; vt && k < vt->ncopy; k++)
                if (vt->copy[k].node == ni) {
                    vt->copy[k].expiry_ms = now;
                    valid_heap_push(c->vs, (struct heap_ent){now, j->id, x, vt->copy[k].issue});
                }
        }
    }
}

bool valid_spot_take(struct cluster *c, uint32_t ni, uint64_t job, uint32_t idx)
{
    struct vstate *vs = c->vs;
    for (uint32_t k = 0; k < vs->nspots; k++) {
        struct vspot *s = &vs->spots[(vs->spot_head + k) % VSPOT_MAX];
        if (s->node == ni && s->job == job && s->idx == idx) {
            *s = vs->spots[vs->spot_head]; /* order does not matter: fill from the head */
            vs->spot_head = (vs->spot_head + 1) % VSPOT_MAX;
            vs->nspots--;
            return true;
        }
    }
    return false;
}

void valid_remap(struct cluster *c, const uint32_t *map)
{
    for (uint32_t k = 0; c->vs && k < c->vs->nspots; k++) {
        struct vspot *s = &c->vs->spots[(c->vs->spot_head + k) % VSPOT_MAX];
        if (s->node < c->nnodes)
            s->node = map[s->node];
    }
    for (uint32_t i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        for (uint32_t x = 0; j->v && j->v->vt && x < j->v->nvt; x++) {
            struct vtask *vt = j->v->vt[x];
            for (uint32_t k = 0; vt && k < vt->ncopy; k++)
                if (vt->copy[k].node < c->nnodes)
                    vt->copy[k].node = map[vt->copy[k].node];
            for (uint32_t k = 0; vt && k < vt->ncand; k++)
                if (vt->cand[k].node < c->nnodes)
                    vt->cand[k].node = map[vt->cand[k].node];
            for (uint32_t k = 0; vt && k < vt->nholder; k++)
                if (vt->holder[k] < c->nnodes)
                    vt->holder[k] = map[vt->holder[k]];
        }
    }
}

void valid_cancel(struct cluster *c, struct job *j)
{
    for (uint32_t x = 0; j->v && j->v->vt && x < j->v->nvt; x++) {
        struct vtask *vt = j->v->vt[x];
        while (vt && vt->ncopy > 0) {
            struct vcopy cp = vt->copy[0];
            if (cp.node < c->nnodes)
                cluster_cancel_note(c, &c->nodes[cp.node], j->id, x, cp.issue);
            valid_copy_remove(c, vt, 0);
        }
        if (vt)
            vt->want = 0;
    }
}

/*
 * state.c - the cluster's state in memory, the bottom of the role: jobs (sorted by id)
 * and their tasks, nodes (by session id), the re-issue heap, the cancels a node is to
 * hear of, the events of the turn, and the names and maps users see of them. The
 * records of all this are in state_rec.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/cluster.h"
#include "store/store.h"
#include "wire/depend.h"
#include "lib/constraint.h"
#include "wire/jobenv.h"

const char *job_state_name(enum job_state s)
{
    static const char *names[] = {"queued", "running", "done", "cancelled"};
    return (unsigned)s < 4 ? names[s] : "?";
}

/*
 * The state users see: a job whose every task has its final result is "done" only when
 * every task succeeded, else "failed" (like Slurm, a job with failed tasks is not
 * COMPLETED). Stored records keep job_state_name(), so "failed" is never parsed back.
 */
const char *job_state_shown(const struct job *j)
{
    if (j->state == JS_DONE && j->nfailed > 0)
        return "failed";
    if (j->held && (j->state == JS_QUEUED || j->state == JS_RUNNING))
        return "held";
    return job_state_name(j->state);
}

bool cluster_argv_cut(char *const *v, uint32_t n, size_t max)
{
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((total += strlen(v[i])) > max)
            return true;
    return false;
}

void cluster_put_argv(struct wire_buf *wb, const char *key, char *const *v, uint32_t n, size_t max)
{
    uint32_t k = 0;
    for (size_t used = 0; k < n && used < max; k++) /* elements that start within max */
        used += strlen(v[k]);
    wire_put_key(wb, key);
    wire_pack_array(wb, k);
    size_t left = max;
    for (uint32_t i = 0; i < k; i++) {
        size_t len = strlen(v[i]);
        if (len > left) {
            len = left;
            while (len > 0 && ((unsigned char)v[i][len] & 0xc0) == 0x80)
                len--; /* do not split a UTF-8 sequence */
        }
        wire_pack_strn(wb, v[i], len);
        left = len < left ? left - len : 0;
    }
}

const char *task_state_name(const struct task *t)
{
    if (t->state == TS_DONE)
        return t->ok ? "ok" : "failed";
    return t->state == TS_ISSUED ? "issued" : "pending";
}

void cluster_mark_job(struct cluster *c, struct job *j)
{
    if (!j->dirty && !c->dirty_all) {
        if (c->ndirty == c->capdirty) {
            uint32_t n = c->capdirty ? c->capdirty * 2 : 256;
            uint64_t *v = realloc(c->dirty_ids, n * sizeof *v);
            if (v)
                c->dirty_ids = v, c->capdirty = n;
        }
        if (c->ndirty < c->capdirty)
            c->dirty_ids[c->ndirty++] = j->id;
        else
            c->dirty_all = true; /* out of memory: the commit looks at every job */
    }
    j->dirty = true;
}

void cluster_mark_node(struct cluster *c, struct node *n)
{
    (void)c;
    n->dirty = true;
}

struct job *cluster_job_find(struct cluster *c, uint64_t id)
{
    uint32_t lo = 0, hi = c->njobs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (c->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->njobs && c->jobs[lo]->id == id ? c->jobs[lo] : NULL;
}

/* Adds a job (ids only grow, so appending keeps the array sorted). */
int cluster_job_add(struct cluster *c, struct job *j)
{
    if (c->njobs == c->capjobs) {
        uint32_t cap = c->capjobs ? c->capjobs * 2 : 16;
        struct job **n = realloc(c->jobs, cap * sizeof *n);
        if (!n)
            return -1;
        c->jobs = n;
        c->capjobs = cap;
    }
    c->jobs[c->njobs++] = j;
    return 0;
}

static uint32_t sid_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int hash_insert(struct cluster *c, uint32_t ix)
{
    if ((c->nnodes + 1) * 2 > c->hash_cap) {
        uint32_t cap = c->hash_cap ? c->hash_cap * 2 : 256;
        uint32_t *h = calloc(cap, sizeof *h);
        if (!h)
            return -1;
        free(c->node_hash);
        c->node_hash = h;
        c->hash_cap = cap;
        for (uint32_t i = 0; i < c->nnodes; i++)
            if (i != ix)
                hash_insert(c, i);
    }
    const char *sid = c->nodes[ix].sid;
    uint32_t p = sid_hash(sid, strlen(sid)) & (c->hash_cap - 1);
    while (c->node_hash[p])
        p = (p + 1) & (c->hash_cap - 1);
    c->node_hash[p] = ix + 1;
    return 0;
}

/* A table sized for nnodes (so it shrinks after a compaction) with every live node. */
int cluster_node_rehash(struct cluster *c)
{
    uint32_t cap = 256;
    while (cap < (c->nnodes + 1) * 2)
        cap *= 2;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return -1;
    free(c->node_hash);
    c->node_hash = h;
    c->hash_cap = cap;
    for (uint32_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].gone)
            continue;
        uint32_t p = sid_hash(c->nodes[i].sid, strlen(c->nodes[i].sid)) & (cap - 1);
        while (h[p])
            p = (p + 1) & (cap - 1);
        h[p] = i + 1;
    }
    return 0;
}

struct node *cluster_node_find(struct cluster *c, const char *sid, size_t len)
{
    if (!c->hash_cap || !sid)
        return NULL;
    uint32_t p = sid_hash(sid, len) & (c->hash_cap - 1);
    while (c->node_hash[p]) {
        struct node *n = &c->nodes[c->node_hash[p] - 1];
        if (!n->gone && strlen(n->sid) == len && !memcmp(n->sid, sid, len))
            return n;
        p = (p + 1) & (c->hash_cap - 1);
    }
    return NULL;
}

/* Appends a zeroed node; the caller sets its sid and then calls hash insert via find. */
struct node *cluster_node_new(struct cluster *c)
{
    if (c->nnodes == c->capnodes) {
        uint32_t cap = c->capnodes ? c->capnodes * 2 : 64;
        struct node *n = realloc(c->nodes, cap * sizeof *n);
        if (!n)
            return NULL;
        c->nodes = n;
        c->capnodes = cap;
    }
    struct node *n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof *n);
    return n;
}

/* Registers the node most recently returned by cluster_node_new (its sid set). */
static int node_commit_new(struct cluster *c)
{
    c->nnodes++;
    if (hash_insert(c, c->nnodes - 1) < 0) {
        c->nnodes--;
        return -1;
    }
    return 0;
}

int cluster_node_register(struct cluster *c)
{
    return node_commit_new(c);
}

static int grow_tasks(struct job *j, uint32_t need)
{
    if (need <= j->cap)
        return 0;
    uint32_t cap = j->cap ? j->cap : 64;
    while (cap < need)
        cap = cap > UINT32_MAX / 2 ? need : cap * 2;
    struct task *t = realloc(j->tasks, (size_t)cap * sizeof *t);
    if (!t)
        return -1;
    memset(t + j->cap, 0, (size_t)(cap - j->cap) * sizeof *t);
    j->tasks = t;
    j->cap = cap;
    return 0;
}

int job_grow_tasks(struct job *j, uint32_t need)
{
    return grow_tasks(j, need);
}

static void heap_swap(struct heap_ent *a, struct heap_ent *b)
{
    struct heap_ent t = *a;
    *a = *b;
    *b = t;
}

static void sift_down(struct heap_ent *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].expiry_ms < h[m].expiry_ms)
            m = l;
        if (r < n && h[r].expiry_ms < h[m].expiry_ms)
            m = r;
        if (m == i)
            return;
        heap_swap(&h[i], &h[m]);
        i = m;
    }
}

int xheap_push(struct heap_ent **v, uint32_t *n, uint32_t *cap, struct heap_ent e)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 1024;
        struct heap_ent *h = realloc(*v, nc * sizeof *h);
        if (!h)
            return -1;
        *v = h;
        *cap = nc;
    }
    struct heap_ent *h = *v;
    uint32_t i = (*n)++;
    h[i] = e;
    while (i > 0 && h[(i - 1) / 2].expiry_ms > h[i].expiry_ms) {
        heap_swap(&h[i], &h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    return 0;
}

struct heap_ent xheap_pop(struct heap_ent *v, uint32_t *n)
{
    struct heap_ent top = v[0];
    v[0] = v[--*n];
    sift_down(v, *n, 0);
    return top;
}

void heap_push(struct cluster *c, struct heap_ent e)
{
    if (xheap_push(&c->heap, &c->nheap, &c->capheap, e) < 0)
        log_warnx("out of memory for the re-issue heap; task %llu.%u waits for restart",
                  (unsigned long long)e.job, e.idx);
}

void cluster_cancel_note(struct cluster *c, struct node *n, uint64_t job, uint32_t idx,
                         uint32_t issue)
{
    (void)c;
    if (n->ncancels == n->capcancels) {
        uint32_t cap = n->capcancels ? n->capcancels * 2 : 16;
        struct cancel_ent *e = cap <= 65536 ? realloc(n->cancels, cap * sizeof *e) : NULL;
        if (!e)
            return; /* the node still learns from its next STATUS */
        n->cancels = e;
        n->capcancels = cap;
    }
    n->cancels[n->ncancels++] = (struct cancel_ent){job, idx, issue};
}

void cluster_node_seen(struct cluster *c, struct node *n, const char *peer)
{
    n->last_ms = wall_now_ms();
    if (!n->active)
        log_info("node %s (%s) active again", n->name, n->sid);
    n->active = true;
    if (peer && peer[0])
        snprintf(n->ip, sizeof n->ip, "%s", peer);
    cluster_mark_node(c, n);
}

/* One job summary map; as a list row (JOBS), argv is cut to CLUSTER_ROW_ARGV_MAX bytes. */
void cluster_job_pack(const struct job *j, struct wire_buf *wb, bool row)
{
    bool cut = row && cluster_argv_cut(j->argv, j->argc, CLUSTER_ROW_ARGV_MAX);
    bool why = j->dep || j->reason;
    wire_pack_map(wb, (cut ? 16 : 15) + 3 + 2 * (j->gpus > 0) + (j->requeues > 0) + !!j->dep + why +
                          !!j->constraint + (j->ckpt_s > 0));
    if (j->ckpt_s) /* submit --checkpoint-s (issue 26) */
        wire_put_u64(wb, "checkpoint_s", j->ckpt_s);
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "name", j->name);
    wire_put_str(wb, "user", j->user);
    wire_put_str(wb, "state", job_state_shown(j));
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "issued", j->next_new);
    wire_put_u64(wb, "running", j->state == JS_RUNNING ? j->next_new - j->ndone : 0);
    wire_put_u64(wb, "done", j->ndone);
    wire_put_u64(wb, "failed", j->nfailed);
    wire_put_u64(wb, "dups", j->ndups);
    wire_put_i64(wb, "submitted", j->submitted_ms);
    wire_put_i64(wb, "finished", j->finished_ms);
    if (cut) {
        cluster_put_argv(wb, "argv", j->argv, j->argc, CLUSTER_ROW_ARGV_MAX);
        wire_put_bool(wb, "argv_trunc", true);
    } else {
        wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    }
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "network", j->network); /* submit --network (issue 23) */
    wire_put_u64(wb, "limit_s", j->limit_s);
    wire_put_u64(wb, "deadline_s", j->deadline_s);
    wire_put_u64(wb, "late", j->nlate);
    if (j->gpus > 0) {
        wire_put_u64(wb, "gpus", j->gpus);
        wire_put_str(wb, "gpu_type", j->gpu_type);
    }
    if (j->requeues > 0) /* gridnode requeue (issue 15): Slurm's Restarts */
        wire_put_u64(wb, "requeues", j->requeues);
    if (j->constraint) /* submit --constraint (issue 27) */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->dep) { /* issue 27: what it still waits for, as squeue's (Dependency) */
        char t[DEPEND_LEN_MAX + 1], r[DEPEND_LEN_MAX + 16];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
        cluster_dep_reason(j->dep, r, sizeof r);
        wire_put_str(wb, "reason", r);
    } else if (j->reason) {
        wire_put_str(wb, "reason", j->reason);
    }
}

const char *cluster_node_load_features(struct node *n, const msgpack_object *m, char *why,
                                       size_t wl)
{
    size_t len;
    const char *s = wire_get_str(m, "features", &len);
    n->features[0] = '\0';
    if (s && features_norm(s, len, n->features, sizeof n->features, why, wl) < 0) {
        n->features[0] = '\0';
        return why;
    }
    return NULL;
}

void cluster_dep_reason(const struct depend *d, char *buf, size_t len)
{
    char t[DEPEND_LEN_MAX + 1];
    depend_format(d, t, sizeof t);
    char *cut = strpbrk(t, ",?"); /* the first term still waited for */
    if (cut)
        *cut = 0;
    snprintf(buf, len, "Dependency: %s", t);
}

/* Appends id to a changed-this-turn list of c->evt (v, n of cap); out of memory, the
   event is lost (the state is not). */
void cluster_evt_push(uint64_t **v, uint32_t *n, uint32_t *cap, uint64_t id)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 256;
        uint64_t *g = realloc(*v, c * sizeof *g);
        if (!g)
            return;
        *v = g;
        *cap = c;
    }
    (*v)[(*n)++] = id;
}

int cluster_unpack_map(msgpack_unpacked *up, const void *val, size_t vlen)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    if (wire_precheck(val, vlen) < 0 ||
        msgpack_unpack_next(up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        up->data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(up);
        return -1;
    }
    return 0;
}

void cluster_reply_error(struct request *r, int code, const char *fmt, ...)
{
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    wire_buf_reset(r->reply);
    wire_error_msg(r->reply, r->msg->id, code, "%s", text);
}

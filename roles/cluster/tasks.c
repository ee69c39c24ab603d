/*
 * tasks.c - handing out tasks (X3, X4), accepting results, node estimates (X5).
 *
 * Issued tasks sit in a min-heap by expiry time. Before asking the application for a
 * new portion, an expired issued task is re-issued (X4). Heap entries are never removed
 * in place: a popped entry is used only if it still matches its task (same issue
 * number and expiry), so extending or finishing a task costs nothing here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/app.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"
#include "wire/jobenv.h"

#define EWMA_ALPHA 0.3
/* Stop adding tasks to one TASKS reply beyond this many bytes (frames: 64 MiB). */
#define TASKS_REPLY_MAX (32u << 20)
/* Most tasks in one TASKS reply to a request in seconds (the descriptor's MAX_BATCH). */
#define TASKS_REQ_MAX 1024u

/* ---- heap ---- */

static struct heap_ent heap_pop(struct cluster *c)
{
    return xheap_pop(c->heap, &c->nheap);
}

/* The task a heap entry stands for, if the entry is still current; else NULL. */
static struct task *heap_task(struct cluster *c, const struct heap_ent *e, struct job **jp)
{
    struct job *j = cluster_job_find(c, e->job);
    if (!j || j->state != JS_RUNNING || e->idx >= j->next_new)
        return NULL;
    struct task *t = &j->tasks[e->idx];
    if (j->v)
        return NULL; /* a checked job's copies expire in validate.c */
    if (t->state != TS_ISSUED || t->issues != e->issue || t->expiry_ms != e->expiry_ms)
        return NULL;
    *jp = j;
    return t;
}

/* ---- estimates ---- */

double tasks_work(const struct job *j, size_t input_bytes, long input_unit_kb)
{
    double unit = (double)(input_unit_kb > 0 ? input_unit_kb : 1024) * 1024.0;
    return (j->complexity > 0 ? j->complexity : 1.0) * (1.0 + (double)input_bytes / unit);
}

/*
 * ms as an int64, from a product of outside numbers (a job's complexity, a speed learned
 * from nodes' wall_s): at most WIRE_TIME_MS_MAX, 0 for NaN or below (converting a
 * double beyond int64 is undefined).
 */
static int64_t ms_of(double ms)
{
    return !(ms > 0) ? 0 : ms < (double)WIRE_TIME_MS_MAX ? (int64_t)ms : (int64_t)WIRE_TIME_MS_MAX;
}

/* How long to wait for a result of `work` units from node n before re-issuing (X4). */
int64_t tasks_wait_ms(const struct cluster *c, const struct node *n, double work)
{
    double spu = n && n->spu > 0     ? n->spu
                 : c->global_spu > 0 ? c->global_spu
                                     : c->cfg.default_estimate_s;
    double wait = work * spu * c->cfg.k_wait;
    if (wait < c->cfg.min_wait_s)
        wait = c->cfg.min_wait_s;
    return ms_of(wait * 1000.0);
}

/* ---- issuing ---- */

static void unhold(struct cluster *c, struct task *t)
{
    if (t->state == TS_ISSUED && t->node < c->nnodes && c->nodes[t->node].inflight > 0)
        c->nodes[t->node].inflight--;
}

/* True if an active node other than n could take tasks (it asked recently). */
static bool other_node_active(const struct cluster *c, const struct node *n)
{
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (&c->nodes[i] != n && c->nodes[i].active)
            return true;
    return false;
}

/*
 * Pops the first expired task that is still current; stale entries are dropped. An
 * expired task goes to whoever asks first, its holder included: a node still running
 * a task names it in its heartbeats, which keeps it from expiring. A task that node n
 * itself failed with a node-side error is left for another node while another node is
 * active (the skipped entries go back on the heap); with no other node, n gets it.
 */
struct pick {
    struct node *n;
    struct task_req *rq; /* NULL: any processor type the node has */
    int slot;            /* out: 0 CPU, 1 + g for the node's GPU type g */
    int ri;              /* out: the request's type index, or -1 */
};

static bool slot_type_is(const struct node *n, int slot, const char *type)
{
    return !strcmp(slot == 0 ? "cpu" : n->gpu[slot - 1].type, type);
}

/* The request's index of processor slot s with seconds still wanted, or -1. */
static int req_index(const struct node *n, const struct task_req *rq, int slot)
{
    for (uint32_t i = 0; i < rq->ntypes; i++)
        if (rq->left[i] > 0 && slot_type_is(n, slot, rq->type[i]))
            return (int)i;
    return -1;
}

/*
 * Whether a task of j may go to p->n for this request: a CPU task on "cpu"; a GPU task
 * on a GPU type the node declared with at least j->gpus instances (of j->gpu_type when
 * the job names one). Sets p->slot and p->ri.
 */
static bool pick_fits(const struct job *j, struct pick *p)
{
    const struct node *n = p->n;
    if (j->held) /* gridnode hold (issue 15): nothing new or re-issued until released */
        return false;
    if (j->dep) /* submit --dependency (issue 27): nothing until it holds (jobdep.c) */
        return false;
    if (j->constraint && !constraint_match(j->constraint, n->features)) /* issue 27 */
        return false;
    if (j->host && strcmp(j->host, n->name)) /* issue 26: placed by a batch role */
        return false;
    int first = j->gpus ? 1 : 0, last = j->gpus ? n->ngpu : 0;
    for (int s = first; s <= last; s++) {
        if (s > 0 && (n->gpu[s - 1].count < j->gpus ||
                      (j->gpu_type[0] && strcmp(j->gpu_type, n->gpu[s - 1].type))))
            continue;
        int ri = p->rq ? req_index(n, p->rq, s) : -1;
        if (p->rq && ri < 0)
            continue;
        p->slot = s;
        p->ri = ri;
        return true;
    }
    return false;
}

static int take_expired(struct cluster *c, struct pick *p, int64_t now, struct job **jp,
                        uint32_t *idx)
{
    struct heap_ent skipped[64];
    struct node *n = p->n;
    uint32_t nskip = 0, me = (uint32_t)(n - c->nodes) + 1;
    int rc = -1, others = -1;
    while (c->nheap > 0 && c->heap[0].expiry_ms <= now) {
        struct heap_ent e = heap_pop(c);
        struct task *t = heap_task(c, &e, jp);
        if (!t)
            continue;
        if (!pick_fits(*jp, p)) { /* not for this node's processors (or not asked for) */
            if (nskip == 64) {
                heap_push(c, e);
                break;
            }
            skipped[nskip++] = e;
            continue;
        }
        if (t->avoid == me && nskip < 64) {
            if (others < 0)
                others = other_node_active(c, n);
            if (others) {
                skipped[nskip++] = e;
                continue;
            }
        }
        *idx = e.idx;
        rc = 0;
        break;
    }
    for (uint32_t i = 0; i < nskip; i++)
        heap_push(c, skipped[i]);
    return rc;
}

/* ---- daily quota (BOINC's host daily quota, our own rules) ---- */

#define QUOTA_DAY_MS (86400 * 1000LL)

static uint32_t quota_full(const struct cluster *c)
{
    return (uint32_t)c->cfg.node_daily_quota;
}

/* n->quota 0: not limited. Starts a new day of counting when the current one is over. */
static void quota_roll(struct cluster *c, struct node *n, int64_t now)
{
    if (n->quota >= quota_full(c))
        n->quota = 0; /* the configured quota was lowered */
    if (n->quota && now - n->qday_ms >= QUOTA_DAY_MS) {
        n->qday_ms = now;
        n->qused = 0;
        cluster_mark_node(c, n);
    }
}

int64_t tasks_quota_wait_s(struct cluster *c, struct node *n)
{
    int64_t now = wall_now_ms();
    quota_roll(c, n, now);
    if (!n->quota || n->qused < n->quota)
        return 0;
    int64_t left = (n->qday_ms + QUOTA_DAY_MS - now + 999) / 1000;
    return left > 0 ? left : 1;
}

/* A node-side error from n: halve its quota; the first one starts the day's count. */
static void quota_error(struct cluster *c, struct node *n)
{
    quota_roll(c, n, wall_now_ms());
    if (!n->quota) {
        n->quota = quota_full(c);
        n->qday_ms = wall_now_ms();
        n->qused = 0;
    }
    n->quota = n->quota > 1 ? n->quota / 2 : 1;
    cluster_mark_node(c, n);
    if (n->qused >= n->quota)
        log_warnx("node %s (%s) used its daily quota of %u task(s) after node-side errors: "
                  "it gets no tasks until the day is over or its results are valid again",
                  n->name, n->sid, n->quota);
}

/* A valid result (ok, or the task's own failure) from n: double its quota back. */
static void quota_valid(struct cluster *c, struct node *n)
{
    quota_roll(c, n, wall_now_ms());
    if (!n->quota)
        return;
    n->quota = n->quota >= quota_full(c) / 2 ? 0 : n->quota * 2;
    cluster_mark_node(c, n);
}

/* ---- cancels ---- */

void tasks_cancel_put(struct node *n, struct wire_buf *wb)
{
    uint32_t k = n->ncancels < 1024 ? n->ncancels : 1024; /* MAX_BATCH of the descriptor */
    wire_put_key(wb, "cancel");
    wire_pack_array(wb, k);
    for (uint32_t i = 0; i < k; i++) {
        wire_pack_map(wb, 3);
        wire_put_u64(wb, "job", n->cancels[i].job);
        wire_put_u64(wb, "idx", n->cancels[i].idx);
        wire_put_u64(wb, "issue", n->cancels[i].issue);
    }
    memmove(n->cancels, n->cancels + k, (n->ncancels - k) * sizeof *n->cancels);
    n->ncancels -= k;
}

/* The next never-issued portion that fits p, in job order (X3). */
static int take_new(struct cluster *c, struct pick *p, struct job **jp, uint32_t *idx)
{
    for (uint32_t i = c->open_from; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        bool closed = j->state == JS_DONE || j->state == JS_CANCELLED || j->next_new >= j->ntasks;
        if (closed && i == c->open_from) {
            c->open_from++;
            continue;
        }
        if (closed || !j->issuable || (j->v && j->v->known) || !pick_fits(j, p))
            continue;
        if (app_template.next(c, j, idx) == 0) {
            if (job_grow_tasks(j, *idx + 1) < 0)
                return -1;
            if (j->tasks[*idx].issues < j->rq_issue) /* requeued: numbers go on (requeue.c) */
                j->tasks[*idx].issues = j->rq_issue;
            j->next_new = *idx + 1;
            *jp = j;
            return 0;
        }
    }
    return -1;
}

/* Seconds one work unit takes on one CPU core of n (declared, measured or default). */
static double cpu_spu(const struct cluster *c, const struct node *n)
{
    if (n->cpu_gflops > 0)
        return c->cfg.unit_gflop / n->cpu_gflops;
    return n->spu > 0 ? n->spu : c->global_spu > 0 ? c->global_spu : c->cfg.default_estimate_s;
}

double tasks_est_s(const struct cluster *c, const struct node *n, const struct job *j, double work,
                   int slot)
{
    if (slot > 0 && slot <= n->ngpu && n->gpu[slot - 1].gflops > 0)
        return work * c->cfg.unit_gflop /
               ((double)n->gpu[slot - 1].gflops * (j->gpus ? j->gpus : 1));
    return work * cpu_spu(c, n);
}

/*
 * Marks task idx of j issued to n (on processor slot, see struct pick) and writes it,
 * as one task map, into tb; *est_s gets its estimated run time there. A task handed to
 * a client that asked in seconds (rq) is re-issued only after its report deadline: such
 * a client queues work and runs it when its scheduler chooses (BOINC's model).
 */
static int issue_one(struct cluster *c, struct node *n, struct job *j, uint32_t idx, int slot,
                     bool queued, int64_t now, struct wire_buf *tb, double *est_s)
{
    struct task *t = &j->tasks[idx];
    size_t inbytes = 0;
    uint32_t dl =
        (uint32_t)(now / 1000) + (j->deadline_s ? j->deadline_s : (uint32_t)c->cfg.deadline_s);
    wire_pack_map(tb, 11 + (j->gpus > 0) + j->network + jobenv_put(NULL, j->env, j->cwd) +
                          files_task_nfields(c, j, idx));
    wire_put_u64(tb, "job", j->id);
    wire_put_u64(tb, "idx", idx);
    wire_put_u64(tb, "issue", valid_issue_no(j, t));
    wire_put_u64(tb, "limit_s", j->limit_s);
    wire_put_f64(tb, "complexity", j->complexity);
    wire_put_str(tb, "ptype", slot > 0 ? n->gpu[slot - 1].type : "cpu");
    if (j->gpus > 0)
        wire_put_u64(tb, "gpus", j->gpus);
    wire_put_u64(tb, "deadline", dl);
    jobenv_put(tb, j->env, j->cwd); /* submit --export / --chdir (issue 15) */
    if (j->network) /* submit --network (issue 23): absent, the node cuts the task off */
        wire_put_bool(tb, "network", true);
    files_task_pack(c, j, idx, tb); /* issue 26: its inputs, the outputs kept */
    if (app_template.encode(c, j, idx, tb, &inbytes) < 0)
        return -1;
    unhold(c, t);
    double work = tasks_work(j, inbytes, c->cfg.input_unit_kb);
    *est_s = tasks_est_s(c, n, j, work, slot);
    wire_put_f64(tb, "est_s", *est_s);
    int64_t wait = tasks_wait_ms(c, n, work);
    int64_t cap = ((int64_t)j->limit_s + c->cfg.hb_s) * 1000 * 2;
    if (wait > cap)
        wait = cap;
    if (queued && (int64_t)dl * 1000 - now > wait)
        wait = (int64_t)dl * 1000 - now;
    t->dl_prev = t->dl;
    t->dl = dl;
    if (j->v) /* replicated or checked: copies are tracked by validate.c */
        return valid_issued(c, n, j, idx, now + wait);
    t->state = TS_ISSUED;
    c->n_issued++;
    c->n_reissued += t->issues > 0;
    t->issues++;
    t->node = (uint32_t)(n - c->nodes);
    t->input_kb = (uint32_t)(inbytes / 1024);
    t->expiry_ms = now + wait;
    heap_push(c, (struct heap_ent){t->expiry_ms, j->id, idx, t->issues});
    n->inflight++;
    n->cur_job = j->id;
    n->cur_idx = idx;
    n->cur_since_ms = now;
    n->cur_est_ms = ms_of(work * (n->spu > 0 ? n->spu : c->cfg.default_estimate_s) * 1000);
    if (j->state == JS_QUEUED)
        j->state = JS_RUNNING;
    cluster_mark_job(c, j);
    cluster_mark_node(c, n);
    return cluster_task_save(c, j, idx);
}

/* True while some type of the request still wants seconds. */
static bool req_open(const struct task_req *rq)
{
    for (uint32_t i = 0; i < rq->ntypes; i++)
        if (rq->left[i] > 0)
            return true;
    return false;
}

/*
 * Hands tasks to node n: expired ones first, then new portions. Without rq, up to `want`
 * tasks of any processor type n has; with rq, per requested type until its seconds are
 * reached (struct task_req). Writes the key "tasks" and an array of task maps into wb;
 * *nissued gets the count. Returns 0, or -1 if the store failed (tasks already written
 * stay issued).
 */
static int issue(struct cluster *c, struct node *n, uint32_t want, struct task_req *rq,
                 struct wire_buf *wb, uint32_t *nissued)
{
    struct wire_buf tb;
    uint32_t count = 0;
    int64_t now = wall_now_ms();
    int rc = 0;
    struct pick p = {n, rq, 0, -1};
    wire_buf_init(&tb);
    if (tasks_quota_wait_s(c, n) > 0 || n->drain) /* drained: no new tasks (drain.c) */
        want = 0;
    while (count < want && (!rq || req_open(rq))) {
        struct job *j = NULL;
        uint32_t idx;
        double est = 0;
        if (tb.sb.size > TASKS_REPLY_MAX) /* leave room in the frame for the rest */
            break;
        if (n->quota && n->qused >= n->quota)
            break;
        /* Checked jobs (copies, spot checks: validate.c) are CPU tasks: offered when the
         * request leaves room for CPU work. */
        int ri0 = rq ? req_index(n, rq, 0) : -1, vr = -1;
        if (!rq || ri0 >= 0)
            vr = valid_take(c, n, now, &j, &idx);
        if (vr == 0) {
            p.slot = 0;
            p.ri = ri0;
        }
        if (vr < 0 && take_expired(c, &p, now, &j, &idx) < 0 && take_new(c, &p, &j, &idx) < 0) {
            if (rq)
                rq->dry = true; /* no work left for the types still open */
            break;
        }
        size_t mark = tb.sb.size;
        if (issue_one(c, n, j, idx, p.slot, rq != NULL, now, &tb, &est) < 0) {
            tb.sb.size = mark;
            rc = -1;
            break;
        }
        count++;
        if (rq && p.ri >= 0) {
            rq->left[p.ri] -= est > 0 ? est : 1e-9; /* a task of no size still counts */
            rq->got[p.ri] = true;
        }
        if (n->quota)
            n->qused++;
    }
    wire_put_key(wb, "tasks");
    wire_pack_array(wb, count);
    msgpack_sbuffer_write(&wb->sb, tb.sb.data, tb.sb.size);
    wire_buf_free(&tb);
    *nissued = count;
    return rc;
}

int tasks_issue(struct cluster *c, struct node *n, uint32_t want, struct wire_buf *wb,
                uint32_t *nissued)
{
    return issue(c, n, want, NULL, wb, nissued);
}

int tasks_issue_req(struct cluster *c, struct node *n, struct task_req *rq, struct wire_buf *wb,
                    uint32_t *nissued)
{
    for (uint32_t i = 0; i < rq->ntypes; i++) {
        rq->asked[i] = rq->left[i] > 0;
        rq->got[i] = false;
    }
    rq->dry = false;
    return issue(c, n, rq->count ? rq->count : TASKS_REQ_MAX, rq, wb, nissued);
}

/* ---- results ---- */

/*
 * Writes the result record (winner, or duplicate when dup_seq > 0); a late one (after
 * its issue's report deadline) carries "late": true.
 */
static int save_result(struct cluster *c, struct node *n, const msgpack_object *res, uint64_t job,
                       uint32_t idx, uint32_t dup_seq, bool late)
{
    struct wire_buf wb;
    uint8_t key[16];
    wire_buf_init(&wb);
    uint32_t keep = 0;
    char why[400];
    /* issue 26: output files not whole at the cluster are not recorded; the note says so */
    const struct job *j = cluster_job_find(c, job);
    const char *fbad = files_result_check(c, j ? j->user : NULL, res, why, sizeof why);
    for (const struct wire_field *f = wire_result_fields; f->key; f++)
        keep += wire_get(res, f->key) != NULL && !(fbad && !strncmp(f->key, "files", 5));
    wire_pack_map(&wb, keep + 2 + late + (fbad != NULL));
    if (fbad) {
        log_warnx("job %llu task %u: %s", (unsigned long long)job, idx, fbad);
        wire_put_str(&wb, "files_note", fbad);
    }
    for (const struct wire_field *f = wire_result_fields; f->key; f++) {
        const msgpack_object *v = wire_get(res, f->key);
        if (v && !(fbad && !strncmp(f->key, "files", 5))) { /* only the documented fields */
            wire_put_key(&wb, f->key);
            wire_pack_object(&wb, v);
        }
    }
    wire_put_str(&wb, "node", n->sid);
    wire_put_i64(&wb, "received", wall_now_ms());
    if (late)
        wire_put_bool(&wb, "late", true);
    store_key_u64_u32(key, job, idx);
    int rc;
    if (dup_seq) {
        for (int i = 15, s = (int)dup_seq; i >= 12; i--, s >>= 8)
            key[i] = (uint8_t)s;
        rc = store_put(c->store, c->t_dups, key, 16, wb.sb.data, wb.sb.size);
    } else {
        rc = store_put(c->store, c->t_results, key, 12, wb.sb.data, wb.sb.size);
    }
    wire_buf_free(&wb);
    return rc;
}

static void learn_speed(struct cluster *c, struct node *n, const struct job *j,
                        const struct task *t, double wall_s)
{
    double work = tasks_work(j, (size_t)t->input_kb * 1024, c->cfg.input_unit_kb);
    if (!(wall_s > 0) || !isfinite(wall_s) || work <= 0)
        return;
    double spu = wall_s / work;
    n->spu = n->spu > 0 ? (1 - EWMA_ALPHA) * n->spu + EWMA_ALPHA * spu : spu;
    c->global_spu = c->global_spu > 0 ? (1 - EWMA_ALPHA) * c->global_spu + EWMA_ALPHA * spu : spu;
}

/*
 * Whether a result of issue `issue` of t arrives after that issue's report deadline. The
 * latest two issues' deadlines are kept; an older issue's deadline is taken as the one
 * before the latest (a bound: such a result may be late without being counted). Tasks
 * issued before deadlines existed (dl 0) are never late.
 */
static bool result_late(const struct task *t, uint32_t issue)
{
    uint32_t dl = issue >= t->issues ? t->dl : t->dl_prev;
    return dl != 0 && wall_now_ms() / 1000 > (int64_t)dl;
}

/*
 * Accepts one result map (validated by the descriptor) from node n. The first valid
 * result of a task wins; later ones are stored as duplicates; a repeat of the winning
 * delivery (same node, same issue) is ignored. A result saying the task could not run
 * on the node ("error") makes the task re-issuable at once, until max_attempts such
 * results, when it becomes final. Returns 0, or -1 if the store refused the write.
 */
int tasks_result(struct cluster *c, struct node *n, const msgpack_object *res)
{
    uint64_t jid = wire_get_u64(res, "job", 0);
    uint32_t idx = (uint32_t)wire_get_u64(res, "idx", 0);
    uint32_t issue = (uint32_t)wire_get_u64(res, "issue", 0);
    struct job *j = cluster_job_find(c, jid);
    if (!j || idx >= j->next_new)
        return 0; /* not ours (or forgotten): acknowledge so the node drops it */
    struct task *t = &j->tasks[idx];
    uint32_t me = (uint32_t)(n - c->nodes);
    size_t elen;
    bool node_error = wire_get_str(res, "error", &elen) != NULL;
    if (node_error)
        quota_error(c, n); /* whatever the task: this node could not run it */
    else
        quota_valid(c, n);
    if (j->state == JS_CANCELLED && t->state != TS_DONE)
        return 0; /* cancelled before it finished: acknowledged and dropped, never "ok" */
    if (j->requeues > 0 && issue <= j->rq_issue)
        return 0; /* handed out before the job was requeued: stale (requeue.c) */
    if (j->v)     /* replicated or checked: validate.c judges (late results included) */
        return valid_result(c, n, j, idx, issue, res);
    if (t->state == TS_DONE && t->node == me && t->won == issue)
        return 0; /* a resend of the winning delivery */
    bool late = result_late(t, issue);
    if (late) { /* taken as any other result (X4), and counted */
        j->nlate++;
        cluster_mark_job(c, j);
    }
    if (t->state == TS_DONE) {
        j->ndups++;
        c->n_dups++;
        cluster_mark_job(c, j);
        return save_result(c, n, res, jid, idx, j->ndups, late);
    }
    if (node_error && (long)t->errors + 1 < c->cfg.max_attempts) {
        t->errors++;
        j->ndups++;
        c->n_dups++;
        t->avoid = me + 1; /* preferably another node next (take_expired) */
        if (t->state == TS_ISSUED && t->node == me && t->issues == issue) {
            unhold(c, t);
            t->node = UINT32_MAX; /* anyone may take it now, this node last */
            t->expiry_ms = wall_now_ms();
            heap_push(c, (struct heap_ent){t->expiry_ms, jid, idx, t->issues});
        }
        cluster_mark_job(c, j);
        if (cluster_task_save(c, j, idx) < 0)
            return -1;
        return save_result(c, n, res, jid, idx, j->ndups, late);
    }
    bool ok = !node_error && wire_get_i64(res, "exit", -1) == 0 &&
              wire_get_u64(res, "signal", 0) == 0 && !wire_get_bool(res, "timeout", false);
    unhold(c, t);
    t->state = TS_DONE;
    t->ok = ok;
    t->node = me;
    t->won = issue;
    j->ndone++;
    c->n_results++;
    if (!ok)
        j->nfailed++;
    n->results++;
    cluster_acct_note(c, j, res); /* its CPU and wall time for the job's record (acct.c) */
    if (ok)
        learn_speed(c, n, j, t, wire_get_f64(res, "wall_s", 0));
    if (j->ndone == j->ntasks && j->state == JS_RUNNING) {
        j->state = JS_DONE;
        j->finished_ms = wall_now_ms();
        log_info("job %llu done: %u tasks, %u failed, %u duplicates", (unsigned long long)j->id,
                 j->ntasks, j->nfailed, j->ndups);
    }
    cluster_mark_job(c, j);
    cluster_mark_node(c, n);
    if (cluster_task_save(c, j, idx) < 0)
        return -1;
    return save_result(c, n, res, jid, idx, 0, late);
}

/* A heartbeat says n still runs (job, idx, issue): push its re-issue time out. */
void tasks_extend(struct cluster *c, struct node *n, uint64_t jid, uint32_t idx, uint32_t issue)
{
    struct job *j = cluster_job_find(c, jid);
    if (!c->cfg.heartbeat_extends || !j || j->state != JS_RUNNING || idx >= j->next_new)
        return;
    struct task *t = &j->tasks[idx];
    int64_t until = wall_now_ms() + (int64_t)((double)c->cfg.hb_s * 1000.0 * c->cfg.k_wait);
    if (j->v) {
        valid_extend(c, n, j, idx, issue, until);
        return;
    }
    if (t->state != TS_ISSUED || t->issues != issue || t->node != (uint32_t)(n - c->nodes))
        return;
    if (until > t->expiry_ms) {
        t->expiry_ms = until;
        heap_push(c, (struct heap_ent){until, jid, idx, issue});
    }
}

/* The node left: every task it holds may be re-issued now. */
void tasks_release_node(struct cluster *c, struct node *n)
{
    int64_t now = wall_now_ms();
    uint32_t count = 0, me = (uint32_t)(n - c->nodes);
    struct heap_ent *held = malloc((c->nheap + 1) * sizeof *held);
    if (!held)
        return; /* the tasks still expire on their own */
    for (uint32_t i = 0; i < c->nheap; i++) {
        struct job *j;
        struct task *t = heap_task(c, &c->heap[i], &j);
        if (t && t->node == me)
            held[count++] = c->heap[i];
    }
    for (uint32_t i = 0; i < count; i++) {
        struct job *j;
        struct task *t = heap_task(c, &held[i], &j);
        if (!t)
            continue;
        t->expiry_ms = now;
        t->node = UINT32_MAX;
        heap_push(c, (struct heap_ent){now, j->id, held[i].idx, t->issues});
    }
    free(held);
    valid_release_node(c, n);
    n->inflight = 0;
}

/* X5: a node silent for K_wait_dead times its expected time is marked inactive. */
void nodes_check_active(struct cluster *c)
{
    int64_t now = wall_now_ms();
    for (uint32_t i = 0; i < c->nnodes; i++) {
        struct node *n = &c->nodes[i];
        /* the longest a live node stays silent: one heartbeat or idle-poll period */
        int64_t expect =
            (c->cfg.hb_s > c->cfg.idle_wait_s ? c->cfg.hb_s : c->cfg.idle_wait_s) * 1000;
        if (n->active && now - n->last_ms > (int64_t)((double)expect * c->cfg.k_wait_dead)) {
            n->active = false;
            cluster_mark_node(c, n);
            log_info("node %s (%s) inactive: silent for %.1f s", n->name, n->sid,
                     (double)(now - n->last_ms) / 1000.0);
        }
    }
}

/* TASK_PIN (issue 26, pin.c): j is pinned to j->host now; a task issued to another node
 * may be issued again at once (there, with its latest checkpoint). */
uint32_t tasks_repin(struct cluster *c, struct job *j)
{
    int64_t now = wall_now_ms();
    uint32_t n = 0;
    if (j->v || j->state != JS_RUNNING || !j->host)
        return 0; /* not running yet: its tasks are new, and go to the new host */
    for (uint32_t i = 0; i < j->next_new; i++) {
        struct task *t = &j->tasks[i];
        if (t->state != TS_ISSUED ||
            (t->node < c->nnodes && !strcmp(c->nodes[t->node].name, j->host)))
            continue;
        t->expiry_ms = now;
        t->node = UINT32_MAX;
        heap_push(c, (struct heap_ent){now, j->id, i, t->issues});
        n++;
    }
    return n;
}

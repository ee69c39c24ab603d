/*
 * livejob.c - the live batch role's jobs: in memory and in the store. A job is ONE
 * record in "jobs" (its spec, argv included: argv is never kept in memory) plus one
 * small record per element in "elems", written only once the element leaves
 * "pending". In memory, as Slurm's single pending array record, a task array is its
 * job plus the records of the elements that were given to the engine, started or
 * otherwise touched (struct lelem, in pages of LIVE_PAGE allocated on first use);
 * every other element is implicit: pending, or cancelled once its job is. So a task
 * array of N elements costs a constant plus what its started elements hold, and the
 * engine sees at most LIVE_FEED_WINDOW of its pending elements at a time (the feed).
 *
 * Also the turn's clock (live_now) and the request for a cycle (live_want_cycle),
 * which every file of the driver uses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/endwait.h"
#include "daemon/loop.h"
#include "daemon/record.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "wire/depend.h"
#include "wire/jobenv.h"
#include "store/store.h"

/*
 * The role's clock, as the simulator's (one policy, two drivers): everything a turn
 * tells the engine (submissions, ends, starts, commands) and the cycle that follows
 * happen at ONE instant, the turn's, and that instant is later than the last cycle's.
 * The simulator processes all events of one time and then runs one cycle; the live
 * role must do the same, or a replay of its own records decides differently: two
 * ends read from one EVENTS reply were stamped a millisecond apart when the turn
 * crossed a millisecond boundary (the replay then ran a cycle between them and
 * backfilled a small job where the live cycle had started the wide one), and two
 * turns in one millisecond each ran a cycle where the replay runs one. So the instant
 * is taken once per turn (reset by the commit) as max(wall clock, last cycle + 1 ms),
 * and a cycle waits until the wall clock reaches it (at most 1 ms, see maybe_cycle in live.c);
 * the turns in between keep that instant, so the cycle runs at the time its changes
 * were given.
 */
int64_t live_now(struct live *L)
{
    if (!L->turn_now) {
        int64_t t = wall_now_ms();
        L->turn_now = t > L->engine_now ? t : L->engine_now + 1;
    }
    return L->turn_now;
}

void live_want_cycle(struct live *L)
{
    L->want_cycle = true;
}

uint64_t live_eid(uint64_t job, uint32_t e)
{
    return (job << LIVE_ELEM_BITS) | e;
}

uint32_t live_job_lower(const struct live *L, uint64_t id)
{
    uint32_t lo = 0, hi = L->njobs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (L->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct ljob *live_job_find(struct live *L, uint64_t id)
{
    uint32_t lo = live_job_lower(L, id);
    return lo < L->njobs && L->jobs[lo]->id == id ? L->jobs[lo] : NULL;
}

const char *live_job_owner(void *role, uint64_t id, bool *found)
{
    struct ljob *j = live_job_find(role, id);
    *found = j != NULL;
    return j ? j->user : NULL;
}

/* Index of the first page of j whose base is >= base. */
static uint32_t page_lower(const struct ljob *j, uint32_t base)
{
    uint32_t lo = 0, hi = j->npages;
    if (hi && j->pages[hi - 1]->base == base) /* the feed works on the last page */
        return hi - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (j->pages[mid]->base < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The page holding element e's slot, or NULL. */
static struct lpage *page_of(const struct ljob *j, uint32_t e)
{
    uint32_t base = e - e % LIVE_PAGE, p = page_lower(j, base);
    return p < j->npages && j->pages[p]->base == base ? j->pages[p] : NULL;
}

static const struct lelem implicit_pending = {.cl = -1, .state = EL_PENDING};
static const struct lelem implicit_cancelled = {.cl = -1, .state = EL_CANCELLED};

struct lelem *live_elem_rec(const struct ljob *j, uint32_t e)
{
    struct lpage *pg = e < j->ntasks ? page_of(j, e) : NULL;
    return pg && pg->el[e - pg->base].used ? &pg->el[e - pg->base] : NULL;
}

const struct lelem *live_elem_peek(const struct ljob *j, uint32_t e)
{
    const struct lelem *el = live_elem_rec(j, e);
    return el ? el : j->cancelled ? &implicit_cancelled : &implicit_pending;
}

struct lelem *live_elem_make(struct ljob *j, uint32_t e)
{
    if (e >= j->ntasks)
        return NULL;
    uint32_t base = e - e % LIVE_PAGE, p = page_lower(j, base);
    if (p == j->npages || j->pages[p]->base != base) {
        if (j->npages == j->cappages) {
            uint32_t nc = j->cappages ? j->cappages * 2 : j->ntasks <= LIVE_PAGE ? 1 : 4;
            void *np = realloc(j->pages, nc * sizeof *j->pages);
            if (!np)
                return NULL;
            j->pages = np;
            j->cappages = nc;
        }
        /* the last page holds only the job's remaining elements */
        uint32_t n = j->ntasks - base < LIVE_PAGE ? j->ntasks - base : LIVE_PAGE;
        struct lpage *pg = calloc(1, sizeof *pg + n * sizeof pg->el[0]);
        if (!pg)
            return NULL;
        pg->base = base;
        pg->n = n;
        memmove(j->pages + p + 1, j->pages + p, (j->npages - p) * sizeof *j->pages);
        j->pages[p] = pg;
        j->npages++;
    }
    struct lelem *el = &j->pages[p]->el[e - base];
    if (!el->used) { /* what the implicit element was: counted as such already */
        *el = j->cancelled ? implicit_cancelled : implicit_pending;
        el->used = true;
        j->nrec++;
    }
    return el;
}

struct lelem *live_elem_next(const struct ljob *j, uint32_t *e)
{
    uint32_t x = *e;
    for (uint32_t p = page_lower(j, x - x % LIVE_PAGE); p < j->npages; p++) {
        struct lpage *pg = j->pages[p];
        for (uint32_t k = x > pg->base ? x - pg->base : 0; k < pg->n; k++)
            if (pg->el[k].used) {
                *e = pg->base + k;
                return &pg->el[k];
            }
    }
    return NULL;
}

/* Lists j among the jobs changed this turn (once). */
static void list_dirty(struct live *L, struct ljob *j)
{
    endwait_changed(L->endwait, j->id); /* a JOB_WAIT naming it is looked at (issue 28) */
    if (j->listed || L->dirty_all)
        return;
    if (L->ndirty == L->capdirty) {
        uint32_t nc = L->capdirty ? L->capdirty * 2 : 64;
        void *p = realloc(L->dirty, nc * sizeof *L->dirty);
        if (!p) {
            L->dirty_all = true; /* the commit walks every job instead */
            return;
        }
        L->dirty = p;
        L->capdirty = nc;
    }
    L->dirty[L->ndirty++] = j;
    j->listed = true;
}

void live_job_dirty(struct live *L, struct ljob *j)
{
    j->dirty = true;
    list_dirty(L, j);
}

struct ljob **live_dirty_jobs(struct live *L, uint32_t *n)
{
    *n = L->dirty_all ? L->njobs : L->ndirty;
    return L->dirty_all ? L->jobs : L->dirty;
}

void live_dirty_forget(struct live *L, const struct ljob *j)
{
    for (uint32_t i = 0; j->listed && i < L->ndirty; i++)
        if (L->dirty[i] == j) {
            memmove(L->dirty + i, L->dirty + i + 1, (L->ndirty - i - 1) * sizeof *L->dirty);
            L->ndirty--;
            return;
        }
}

void live_elem_mark(struct live *L, struct ljob *j, uint32_t e)
{
    struct lpage *pg = e < j->ntasks ? page_of(j, e) : NULL;
    if (!pg || !pg->el[e - pg->base].used)
        return;
    pg->el[e - pg->base].dirty = true;
    pg->dirty = true;
    j->edirty = true;
    list_dirty(L, j);
}

struct lelem *live_elem_next_queued(const struct ljob *j, uint32_t *e)
{
    uint32_t x = *e;
    for (uint32_t p = j->nqueued ? page_lower(j, x - x % LIVE_PAGE) : j->npages; p < j->npages;
         p++) {
        struct lpage *pg = j->pages[p];
        for (uint32_t k = x > pg->base ? x - pg->base : 0; pg->nqueued && k < pg->n; k++)
            if (pg->el[k].used && pg->el[k].in_engine && pg->el[k].state == EL_PENDING) {
                *e = pg->base + k;
                return &pg->el[k];
            }
    }
    return NULL;
}

/* Record e (in_engine) enters (+1) or leaves (-1) the pending ones inside the engine. */
static void queued_add(struct ljob *j, uint32_t e, int d)
{
    struct lpage *pg = page_of(j, e);
    j->nqueued += (uint32_t)d;
    if (pg)
        pg->nqueued += (uint32_t)d;
}

void live_elem_engine(struct ljob *j, uint32_t e, bool in)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || el->in_engine == in)
        return;
    if (el->state == EL_PENDING)
        queued_add(j, e, in ? 1 : -1);
    el->in_engine = in;
}

struct lelem *live_elem_find(struct live *L, uint64_t eid, struct ljob **jp)
{
    struct ljob *j = live_job_find(L, eid >> LIVE_ELEM_BITS);
    uint32_t e = (uint32_t)(eid & ((1u << LIVE_ELEM_BITS) - 1));
    struct lelem *el = j ? live_elem_rec(j, e) : NULL;
    if (el && jp)
        *jp = j;
    return el;
}

int live_job_add(struct live *L, struct ljob *j)
{
    if (L->njobs == L->capjobs) {
        uint32_t nc = L->capjobs ? L->capjobs * 2 : 64;
        void *p = realloc(L->jobs, nc * sizeof *L->jobs);
        if (!p)
            return -1;
        L->jobs = p;
        L->capjobs = nc;
    }
    uint32_t i = L->njobs;
    while (i > 0 && L->jobs[i - 1]->id > j->id) /* loading is in id order: rarely moves */
        i--;
    memmove(L->jobs + i + 1, L->jobs + i, (L->njobs - i) * sizeof *L->jobs);
    L->jobs[i] = j;
    L->njobs++;
    return 0;
}

void live_job_free(struct ljob *j)
{
    if (!j)
        return;
    for (uint32_t p = 0; p < j->npages; p++) {
        for (uint32_t k = 0; k < j->pages[p]->n; k++) {
            free(j->pages[p]->el[k].reason);
            free(j->pages[p]->el[k].hosts);
        }
        free(j->pages[p]);
    }
    free(j->pages);
    free(j->name);
    free(j->user);
    free(j->group);
    free(j->account);
    free(j->class_);
    free(j->qos);
    free(j->key);
    free(j->resv);
    free(j->constraint);
    free(j->data); /* issue 26 */
    jobenv_free(j->env);
    free(j->cwd);
    if (j->dep)
        depend_free(j->dep);
    free(j->dep);
    free(j->dep_end);
    free(j);
}

void live_jobs_free(struct live *L)
{
    for (uint32_t i = 0; i < L->njobs; i++)
        live_job_free(L->jobs[i]);
    free(L->jobs);
    L->jobs = NULL;
    L->njobs = L->capjobs = 0;
    free(L->dirty);
    L->dirty = NULL;
    L->ndirty = L->capdirty = 0;
}

const char *live_elem_state_name(int st)
{
    static const char *const n[] = {"pending", "starting", "running",  "done",
                                    "failed",  "killed",   "cancelled"};
    return st >= 0 && st <= EL_CANCELLED ? n[st] : "?";
}

static bool ended(int st)
{
    return st >= EL_DONE;
}

void live_elem_set(struct live *L, struct ljob *j, uint32_t e, int st)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || el->state == st)
        return;
    int old = el->state;
    if (el->in_engine && (old == EL_PENDING) != (st == EL_PENDING))
        queued_add(j, e, st == EL_PENDING ? 1 : -1);
    if ((old == EL_STARTING || old == EL_RUNNING) && !(st == EL_STARTING || st == EL_RUNNING))
        j->nrun--;
    if (!(old == EL_STARTING || old == EL_RUNNING) && (st == EL_STARTING || st == EL_RUNNING)) {
        j->nrun++;
        if (old == EL_PENDING)
            j->nstarted++;
    }
    /* back in the queue (a refused start, a requeue): not issued any more */
    if (st == EL_PENDING && old != EL_PENDING && j->nstarted)
        j->nstarted--;
    if (ended(old) && !ended(st)) { /* JOB_CTL requeue of an ended element */
        j->nended--;
        j->nfailed -= old != EL_DONE;
        if (j->finished) {
            j->finished = 0;
            live_job_dirty(L, j);
        }
    }
    if (!ended(old) && ended(st)) {
        j->nended++;
        j->nfailed += st != EL_DONE;
        L->n_ended++; /* statistics (livestats.c) */
        L->n_failed += st != EL_DONE;
        if (!el->end)
            el->end = live_now(L);
        if (j->nended == j->ntasks) {
            j->finished = live_now(L);
            live_job_dirty(L, j);
        }
    }
    el->state = (uint8_t)st;
    live_elem_mark(L, j, e);
    if (j->resv && j->resv[0] && old < EL_RUNNING && st >= EL_RUNNING)
        live_want_cycle(L); /* a site reservation that served it goes (livecmd_apply) */
}

void live_elem_reason(struct live *L, struct ljob *j, uint32_t e, const char *why)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el)
        return;
    free(el->reason);
    el->reason = why && *why ? strdup(why) : NULL;
    live_elem_mark(L, j, e);
}

void live_job_cancel_implicit(struct live *L, struct ljob *j)
{
    uint32_t n = j->ntasks - j->nrec;
    j->cancelled = true;
    live_job_dirty(L, j);
    j->nended += n;
    j->nfailed += n;
    L->n_ended += n; /* statistics (livestats.c), as if each had ended */
    L->n_failed += n;
    if (n && j->nended == j->ntasks)
        j->finished = live_now(L);
}

void live_elem_spec(const struct live *L, const struct ljob *j, uint32_t e,
                    struct batch_job_spec *s)
{
    memset(s, 0, sizeof *s);
    s->id = live_eid(j->id, e);
    snprintf(s->user, sizeof s->user, "%s", j->user ? j->user : "");
    snprintf(s->group, sizeof s->group, "%s", j->group ? j->group : "");
    snprintf(s->account, sizeof s->account, "%s", j->account ? j->account : "");
    snprintf(s->qos, sizeof s->qos, "%s", j->qos ? j->qos : "");
    /* the partition: the job's class, else the default cluster's (Slurm's default
     * partition) */
    const char *cls = j->class_ && *j->class_               ? j->class_
                      : j->grid && L->cfg.eng.grid_class[0] ? L->cfg.eng.grid_class
                      : L->default_cl >= 0                  ? L->cl[L->default_cl].name
                                                            : "";
    snprintf(s->class_, sizeof s->class_, "%s", cls);
    s->tasks = (int32_t)(j->parallel ? j->procs : 1);
    s->ppn = j->parallel ? (int32_t)j->ppn : 0; /* --ppn: at most ppn per host */
    s->per_task.procs = 1;
    s->per_task.mem = j->mem_mb;
    s->per_task.disk = j->disk_mb;
    s->walltime = j->limit_s * 1000;
    s->submit = j->submitted;
    s->hold = j->hold;
    s->early_start = j->early;
    s->grid = j->grid;             /* batch.ini [grid] local_wait_bound (issue 25) */
    s->constraint = j->constraint; /* issue 27: copied by the engine */
}

/*
 * The feed: the engine holds at most LIVE_FEED_WINDOW pending elements of an array
 * (Maui and Slurm consider a few elements of an array per cycle, not all of them); the
 * cursor nfed walks the indexes once, giving the engine the pending ones without an
 * engine job (implicit ones get their record here). At most LIVE_FEED_WINDOW records
 * are made per call, so one turn never makes a record per element of a large array.
 */
void live_job_feed(struct live *L, struct ljob *j)
{
    uint32_t made = 0;
    if (j->dep) /* submit --dependency (issue 27): nothing until it holds (livedep.c) */
        return;
    while (!j->cancelled && j->nfed < j->ntasks && j->nqueued < LIVE_FEED_WINDOW &&
           made < LIVE_FEED_WINDOW) {
        uint32_t e = j->nfed;
        const struct lelem *pe = live_elem_peek(j, e);
        if (pe->state == EL_PENDING && !pe->in_engine) {
            struct lelem *el = live_elem_make(j, e);
            if (!el)
                break; /* out of memory: the next cycle tries again */
            made++;
            struct batch_job_spec s;
            live_elem_spec(L, j, e, &s);
            if (batch_job_submit(L->eng, &s) < 0) {
                live_elem_reason(L, j, e,
                                 errno == EINVAL ? "invalid request for the scheduler"
                                                 : "scheduler out of memory");
                if (errno != EINVAL)
                    break;
                live_elem_set(L, j, e, EL_FAILED);
            } else {
                live_elem_engine(j, e, true);
            }
        }
        j->nfed++;
    }
}

/* ---- records ---- */

static void put_opt(struct wire_buf *wb, const char *k, const char *v)
{
    wire_put_str(wb, k, v ? v : "");
}

void live_job_encode(const struct ljob *j, const char *const *argv, uint32_t argc,
                     struct wire_buf *wb)
{
    wire_pack_map(wb, 28 + j->network + j->grid + jobenv_put(NULL, j->env, j->cwd) + !!j->dep +
                          !!j->dep_end + !!j->constraint);
    if (j->constraint) /* issue 27; absent in older records: none */
        wire_put_str(wb, "constraint", j->constraint);
    if (j->dep) { /* issue 27: the terms still waited for (met ones left out) */
        char t[DEPEND_LEN_MAX + 1];
        depend_format(j->dep, t, sizeof t);
        wire_put_str(wb, "dependency", t);
    }
    if (j->dep_end)
        wire_put_str(wb, "dep_end", j->dep_end);
    jobenv_put(wb, j->env, j->cwd);
    if (j->network) /* only when set: a record without it (older ones too) reads false */
        wire_put_bool(wb, "network", true);
    if (j->grid) /* issue 25; likewise */
        wire_put_bool(wb, "grid", true);
    wire_put_u64(wb, "id", j->id);
    wire_put_bool(wb, "parallel", j->parallel);
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "procs", j->procs);
    wire_put_u64(wb, "ppn", j->ppn);
    /* issue 27: ppn is the per-host limit (0 none); older records held a 1 the role
     * ignored, so they load as 0 */
    wire_put_bool(wb, "ppn_lim", true);
    wire_put_i64(wb, "mem_mb", j->mem_mb);
    wire_put_i64(wb, "disk_mb", j->disk_mb);
    wire_put_i64(wb, "limit_s", j->limit_s);
    wire_put_i64(wb, "cpu_s", j->cpu_s); /* issue 27; absent in older records: none */
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "finished", j->finished);
    put_opt(wb, "name", j->name);
    put_opt(wb, "user", j->user);
    put_opt(wb, "group", j->group);
    put_opt(wb, "account", j->account);
    put_opt(wb, "class", j->class_);
    put_opt(wb, "qos", j->qos);
    put_opt(wb, "key", j->key);
    put_opt(wb, "resv", j->resv);
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "hold", j->hold);
    wire_put_bool(wb, "early", j->early);
    wire_put_u64(wb, "queue", j->queue);
    wire_put_bool(wb, "cancelled", j->cancelled);
    wire_put_u64(wb, "requeues", j->requeues);
    wire_put_key(wb, "argv");
    wire_pack_array(wb, argv ? argc : 0);
    for (uint32_t i = 0; argv && i < argc; i++)
        wire_pack_str(wb, argv[i]);
    wire_put_u64(wb, "v", 1);
}

/* Unpacks one stored map; 0 with up holding it, or -1. */
static int unpack(const void *p, size_t n, msgpack_unpacked *up)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    if (wire_precheck(p, n) < 0 || msgpack_unpack_next(up, p, n, &off) != MSGPACK_UNPACK_SUCCESS ||
        up->data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(up);
        return -1;
    }
    return 0;
}

static char *dup_opt(const msgpack_object *m, const char *k)
{
    size_t l;
    const msgpack_object *o = wire_get(m, k);
    if (!o || o->type != MSGPACK_OBJECT_STR)
        return NULL;
    wire_get_str(m, k, &l);
    return l ? wire_get_strdup(m, k) : NULL;
}

static uint64_t u64_of(const msgpack_object *m, const char *k)
{
    const msgpack_object *o = wire_get(m, k);
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

static int64_t i64_of(const msgpack_object *m, const char *k)
{
    const msgpack_object *o = wire_get(m, k);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return o->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)o->via.u64;
    return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? o->via.i64 : 0;
}

static bool bool_of(const msgpack_object *m, const char *k)
{
    const msgpack_object *o = wire_get(m, k);
    return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

struct ljob *live_job_decode(const void *p, size_t n)
{
    msgpack_unpacked up;
    if (unpack(p, n, &up) < 0)
        return NULL;
    const msgpack_object *m = &up.data;
    struct ljob *j = calloc(1, sizeof *j);
    if (!j)
        goto bad;
    j->id = u64_of(m, "id");
    j->parallel = bool_of(m, "parallel");
    j->ntasks = (uint32_t)u64_of(m, "ntasks");
    j->procs = (uint32_t)u64_of(m, "procs");
    j->ppn = bool_of(m, "ppn_lim") ? (uint32_t)u64_of(m, "ppn") : 0;
    j->mem_mb = i64_of(m, "mem_mb");
    j->disk_mb = i64_of(m, "disk_mb");
    j->limit_s = i64_of(m, "limit_s");
    j->cpu_s = i64_of(m, "cpu_s");
    j->submitted = i64_of(m, "submitted");
    j->finished = i64_of(m, "finished");
    j->name = dup_opt(m, "name");
    j->user = dup_opt(m, "user");
    j->group = dup_opt(m, "group");
    j->account = dup_opt(m, "account");
    j->class_ = dup_opt(m, "class");
    j->qos = dup_opt(m, "qos");
    j->key = dup_opt(m, "key");
    j->resv = dup_opt(m, "resv");
    j->shell = bool_of(m, "shell");
    j->hold = bool_of(m, "hold");
    j->network = bool_of(m, "network"); /* issue 23; false in records older than it */
    j->grid = bool_of(m, "grid");       /* issue 25; likewise */
    j->early = bool_of(m, "early");
    j->queue = (uint8_t)u64_of(m, "queue");
    j->cancelled = bool_of(m, "cancelled");
    j->requeues = (uint32_t)u64_of(m, "requeues"); /* 0 in records older than the field */
    uint32_t nenv;
    int eoom;
    j->env = jobenv_dup(m, &nenv, &eoom);
    j->cwd = wire_get_strdup(m, "chdir");
    j->dep_end = dup_opt(m, "dep_end");
    char cwhy[160]; /* issue 27; absent in older records: none */
    if (wire_get_constraint(m, &j->constraint, cwhy, sizeof cwhy) < 0)
        eoom = 1; /* unreadable: the record is skipped, as any other */
    size_t dn;
    const char *ds = wire_get_str(m, "dependency", &dn); /* issue 27; absent before: none */
    char dwhy[160];
    if (ds && dn &&
        (!(j->dep = calloc(1, sizeof *j->dep)) ||
         depend_parse(ds, dn, j->dep, dwhy, sizeof dwhy) < 0)) {
        free(j->dep);
        j->dep = NULL;
        eoom = 1; /* unreadable: the record is skipped, with its key, as any other */
    }
    if (eoom || (wire_get(m, "chdir") && !j->cwd) || !j->id || !j->ntasks ||
        j->ntasks > LIVE_MAX_TASKS || !j->procs || j->limit_s < 1 ||
        (j->parallel && j->ntasks != 1)) {
        live_job_free(j);
        j = NULL;
    }
bad:
    msgpack_unpacked_destroy(&up);
    return j;
}

void live_elem_encode(const struct lelem *el, struct wire_buf *wb)
{
    wire_pack_map(wb, 15 + 3 * !!el->mig_cjob + 2 * !!el->ck_cjob);
    wire_put_str(wb, "state", live_elem_state_name(el->state));
    wire_put_u64(wb, "lost", el->lost);
    wire_put_i64(wb, "cl", el->cl);
    wire_put_u64(wb, "cjob", el->cjob);
    wire_put_i64(wb, "start", el->start);
    wire_put_i64(wb, "decided", el->decided);
    wire_put_i64(wb, "heard", el->heard);
    wire_put_i64(wb, "end", el->end);
    wire_put_i64(wb, "exit", el->exit);
    wire_put_u64(wb, "signal", el->signal);
    wire_put_str(wb, "reason", el->reason ? el->reason : "");
    wire_put_str(wb, "hosts", el->hosts ? el->hosts : "");
    wire_put_bool(wb, "want_cancel", el->want_cancel);
    wire_put_bool(wb, "want_requeue", el->want_requeue);
    wire_put_u64(wb, "run", el->run);
    if (el->mig_cjob) { /* issue 26: a move kept its cluster job (livemigrate.c) */
        wire_put_u64(wb, "mig_cjob", el->mig_cjob);
        wire_put_i64(wb, "mig_cl", el->mig_cl);
        wire_put_u64(wb, "mig_run", el->mig_run);
    }
    if (el->ck_cjob) { /* issue 26: the run before's checkpoints (liveclu.c) */
        wire_put_u64(wb, "ck_cjob", el->ck_cjob);
        wire_put_i64(wb, "ck_cl", el->ck_cl);
    }
}

int live_elem_decode(const void *p, size_t n, struct lelem *el)
{
    msgpack_unpacked up;
    if (unpack(p, n, &up) < 0)
        return -1;
    const msgpack_object *m = &up.data;
    char st[16];
    wire_get_strbuf(m, "state", st, sizeof st);
    int s = -1;
    for (int i = EL_PENDING; i <= EL_CANCELLED; i++)
        if (!strcmp(st, live_elem_state_name(i)))
            s = i;
    int64_t cl = i64_of(m, "cl");
    if (s < 0 || cl < -1 || cl >= LIVE_MAX_CLUSTERS) {
        msgpack_unpacked_destroy(&up);
        return -1;
    }
    memset(el, 0, sizeof *el);
    el->state = (uint8_t)s;
    el->cl = (int8_t)cl;
    el->cjob = u64_of(m, "cjob");
    el->start = i64_of(m, "start");
    el->decided = i64_of(m, "decided"); /* 0 in records older than the field */
    el->heard = i64_of(m, "heard");
    el->end = i64_of(m, "end");
    el->exit = (int32_t)i64_of(m, "exit");
    el->signal = (uint8_t)u64_of(m, "signal");
    el->reason = dup_opt(m, "reason");
    el->hosts = dup_opt(m, "hosts");
    el->want_cancel = bool_of(m, "want_cancel");
    el->want_requeue = bool_of(m, "want_requeue"); /* both absent in older records */
    el->run = (uint32_t)u64_of(m, "run");
    el->lost = (uint32_t)u64_of(m, "lost"); /* absent in older records */
    el->mig_cjob = u64_of(m, "mig_cjob");   /* issue 26; absent in older records: none */
    int64_t mcl = i64_of(m, "mig_cl");
    el->mig_cl = (int8_t)(el->mig_cjob && mcl >= 0 && mcl < LIVE_MAX_CLUSTERS ? mcl : -1);
    if (el->mig_cl < 0)
        el->mig_cjob = 0;
    el->mig_run = wire_get(m, "mig_run") ? (uint32_t)u64_of(m, "mig_run") : el->run;
    el->ck_cjob = u64_of(m, "ck_cjob"); /* issue 26; absent in older records: none */
    int64_t ccl = i64_of(m, "ck_cl");
    el->ck_cl = (int8_t)(el->ck_cjob && ccl >= 0 && ccl < LIVE_MAX_CLUSTERS ? ccl : -1);
    msgpack_unpacked_destroy(&up);
    return 0;
}

char **live_job_argv(struct live *L, uint64_t id, uint32_t *argc)
{
    uint8_t k[8];
    void *v;
    size_t vl;
    store_key_u64(k, id);
    if (store_get(L->store, L->t_jobs, k, 8, &v, &vl) != 0)
        return NULL;
    msgpack_unpacked up;
    char **out = NULL;
    if (unpack(v, vl, &up) == 0) {
        const msgpack_object *a = wire_get(&up.data, "argv");
        if (a && a->type == MSGPACK_OBJECT_ARRAY &&
            (out = calloc(a->via.array.size + 1, sizeof *out))) {
            uint32_t i = 0;
            for (; i < a->via.array.size; i++) {
                const msgpack_object *s = &a->via.array.ptr[i];
                if (s->type != MSGPACK_OBJECT_STR ||
                    !(out[i] = strndup(s->via.str.ptr, s->via.str.size)))
                    break;
            }
            if (i < a->via.array.size) {
                live_argv_free(out, i);
                out = NULL;
            } else {
                *argc = i;
            }
        }
        msgpack_unpacked_destroy(&up);
    }
    free(v);
    return out;
}

void live_argv_free(char **v, uint32_t n)
{
    for (uint32_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- saving and loading ---- */

/* A job record's parts, for record_save (daemon/record.h). */
struct job_rec {
    const struct ljob *j;
    const char *const *argv;
    uint32_t argc;
};

static int encode_job(const void *rec, struct wire_buf *wb)
{
    const struct job_rec *r = rec;
    live_job_encode(r->j, r->argv, r->argc, wb);
    return 0;
}

static int encode_elem(const void *rec, struct wire_buf *wb)
{
    live_elem_encode(rec, wb);
    return 0;
}

int live_job_save(struct live *L, const struct ljob *j, char **argv, uint32_t argc)
{
    struct job_rec r = {j, (const char *const *)argv, argc};
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = record_save_u64(L->store, L->t_jobs, j->id, &r, encode_job, &wb);
    wire_buf_free(&wb);
    return rc;
}

/* Rewrites a job record keeping its stored argv. */
static int save_job(struct live *L, struct ljob *j)
{
    uint32_t argc = 0;
    char **argv = live_job_argv(L, j->id, &argc);
    if (!argv) /* a new job: its record (with argv) was buffered at submission */
        return 0;
    int rc = live_job_save(L, j, argv, argc);
    live_argv_free(argv, argc);
    return rc;
}

int live_save_dirty(struct live *L)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    uint32_t n, i = 0;
    struct ljob **d = live_dirty_jobs(L, &n);
    for (; i < n && rc == 0; i++) {
        struct ljob *j = d[i];
        j->listed = false;
        if (j->dirty) {
            if (save_job(L, j) < 0)
                rc = -1;
            j->dirty = false;
        }
        if (!j->edirty)
            continue;
        j->edirty = false;
        for (uint32_t p = 0; p < j->npages && rc == 0; p++) { /* the pages marked only */
            struct lpage *pg = j->pages[p];
            for (uint32_t k = 0; pg->dirty && k < pg->n && rc == 0; k++) {
                struct lelem *el = &pg->el[k];
                if (!el->dirty || !el->used)
                    continue;
                rc = record_save_u64_u32(L->store, L->t_elems, j->id, pg->base + k, el, encode_elem,
                                         &wb);
                el->dirty = false;
            }
            pg->dirty = false;
        }
    }
    if (L->dirty_all) { /* every job was walked (or is, here): none stays listed */
        for (; i < n; i++)
            d[i]->listed = false;
        L->dirty_all = false;
        L->ndirty = 0;
        for (uint32_t k = 0; k < L->njobs; k++) /* what a failure left: the next turn */
            if (L->jobs[k]->dirty || L->jobs[k]->edirty)
                list_dirty(L, L->jobs[k]);
    } else { /* a failure leaves the rest listed for the next turn */
        if (i < n)
            memmove(L->dirty, L->dirty + i, (n - i) * sizeof *L->dirty);
        L->ndirty = n - i;
    }
    wire_buf_free(&wb);
    return rc;
}

/* record_load of "jobs": a job whose record does not hold its own id is unreadable. */
static int load_job(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    (void)klen;
    struct live *L = arg;
    struct ljob *j = live_job_decode(val, vlen);
    if (!j || j->id != store_key_get_u64(key)) {
        live_job_free(j);
        return RECORD_UNREADABLE;
    }
    L->dep_seen |= j->dep != NULL; /* live_dep_step looks at waiting jobs */
    if (live_job_add(L, j) < 0) {
        live_job_free(j);
        return -1;
    }
    if (j->id >= L->next_id)
        L->next_id = j->id + 1;
    return RECORD_TAKEN;
}

/* record_load of "elems": an element of no loaded job, or past its job's, is unreadable. */
static int load_elem(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    (void)klen;
    struct live *L = arg;
    struct lelem el;
    if (loop_stopping()) /* SIGTERM while loading millions of records: stop now */
        return -1;
    struct ljob *j = live_job_find(L, store_key_get_u64(key));
    uint32_t e = store_key_get_u32(key + 8);
    if (!j && live_purge_pending(L, store_key_get_u64(key)))
        return RECORD_IGNORED; /* purged: deleted in the next turns (livepurge.c) */
    if (!j || e >= j->ntasks || live_elem_decode(val, vlen, &el) < 0)
        return RECORD_UNREADABLE;
    struct lelem *d = live_elem_make(j, e);
    if (!d) {
        free(el.reason);
        free(el.hosts);
        return -1;
    }
    free(d->reason);
    free(d->hosts);
    *d = el;
    d->used = true;
    if (el.state == EL_STARTING || el.state == EL_RUNNING) {
        j->nrun++;
        j->nstarted++;
    } else if (el.state != EL_PENDING) {
        j->nstarted++;
        j->nended++;
        j->nfailed += el.state != EL_DONE;
    }
    return RECORD_TAKEN;
}

int live_load(struct live *L)
{
    if (record_load(L->store, L->t_jobs, load_job, L) < 0 ||
        record_load(L->store, L->t_elems, load_elem, L) < 0)
        return -1;
    /* a cancelled job's pending elements, ended elements: nothing for the engine (its
     * implicit ones are counted, its records changed) */
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        struct lelem *el;
        if (!j->cancelled)
            continue;
        j->nended += j->ntasks - j->nrec;
        j->nfailed += j->ntasks - j->nrec;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++)
            if (el->state == EL_PENDING) {
                el->state = EL_CANCELLED;
                j->nended++;
                j->nfailed++;
            }
    }
    /* Fairshare history is the stored history: every ended element that ran charges
     * its processor-time again, so usage (and the order it gives) survives restarts
     * and kill -9 without a record of its own. */
    for (uint32_t i = 0; L->eng && i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        const struct lelem *el;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
            if (el->state >= EL_DONE && el->start > 0 && el->end > el->start &&
                batch_fairshare_charge(L->eng, j->user, j->group, j->account,
                                       (int32_t)(j->parallel ? j->procs : 1), el->start,
                                       el->end) < 0)
                return -1;
        }
    }
    return 0;
}

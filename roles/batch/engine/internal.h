/*
 * internal.h - the engine's private structures, shared by the files of roles/batch/
 * that implement batch.h. Nothing outside roles/batch/ includes this.
 *
 * Terms. A *group* is a set of up nodes with the same class, capacity and set of
 * admin reservations: its nodes are interchangeable, so "how many are free" is all
 * the planner needs. A *pool* is where a job may run: the general pool (all groups,
 * minus reserved capacity) or one admin reservation (its groups, during its time).
 * Each pool keeps one profile per group twice: `base` (running jobs and admin
 * reservations) and `plan` (base plus the job reservations of pending jobs).
 *
 * The files call each other only downwards; from the bottom up (the function
 * declarations below follow this order):
 *   maps.c, profile.c (profile.h), config.c   containers, profiles, configuration
 *   cred.c       credentials and their fairshare usage rings
 *   bound.c      dominance bounds for the planner
 *   fairshare.c  charging jobs to the rings, usage percents
 *   state.c      scratch, tasks per node, job lookup, running jobs' nodes, fit data
 *   part.c       the partition of the up nodes into classes (group keys), kept
 *                across regroupings
 *   plan.c       the planner: searching profiles, reserving, starting
 *   group.c      grouping nodes into groups and pools, base profiles
 *   moveup.c     grid reservations moved up when their job can start sooner
 *   priority.c   job priority
 *   cycle.c      one scheduling cycle
 *   estimate.c, engine_live.c   start estimates, the live role's updates (batch.h)
 *   engine.c     the public top: creation, nodes, jobs submitted to finished
 *   resv.c       admin reservations (finds nodes by name through engine.c)
 */
#ifndef GRIDNODE_BATCH_INTERNAL_H
#define GRIDNODE_BATCH_INTERNAL_H

#include "roles/batch/engine/batch.h"
#include "roles/batch/engine/profile.h"
#include "lib/constraint.h"

/* ---- maps (maps.c) ---- */
struct strmap { /* string -> int32, open addressing; keys are copied */
    char **keys;
    int32_t *vals;
    uint32_t cap, n;
};
int32_t bs_strmap_get(const struct strmap *m, const char *k);  /* -1 if missing */
int bs_strmap_put(struct strmap *m, const char *k, int32_t v); /* 0 / -1 ENOMEM */
/* Sets key k's value if k is in m (never allocates); whether it was. */
bool bs_strmap_set(struct strmap *m, const char *k, int32_t v);
void bs_strmap_free(struct strmap *m);

struct idmap { /* uint64 -> int32, open addressing, backward-shift deletion */
    uint64_t *keys;
    int32_t *vals; /* -1 = empty slot */
    uint32_t cap, n;
};
int32_t bs_idmap_get(const struct idmap *m, uint64_t k);
int bs_idmap_put(struct idmap *m, uint64_t k, int32_t v);
void bs_idmap_del(struct idmap *m, uint64_t k);
void bs_idmap_free(struct idmap *m);

/* Grows *arr (of *cap elements of size sz) to hold at least n; 0 / -1 ENOMEM. */
int bs_vec_reserve(void **arr, int32_t *cap, int32_t n, size_t sz);
/* The capacity test inline (no call when there is room); evaluates cap and n twice. */
#define VEC_RESERVE(a, cap, n)                                                                     \
    ((n) <= (cap) ? 0 : bs_vec_reserve((void **)&(a), &(cap), (n), sizeof *(a)))

/* ---- credentials and their fairshare usage rings (cred.c) ---- */
struct fs_ring { /* w[i] = usage of window (win - i) */
    double *w;
    int64_t win;
};
int bs_fs_ring_init(struct fs_ring *r, int32_t depth);
void bs_fs_ring_free(struct fs_ring *r);
/* Adds amount to absolute window `window` (>= r->win - depth + 1). */
void bs_fs_ring_add(struct fs_ring *r, int32_t depth, int64_t window, double amount);
/* Sum of decay^age x usage over the kept windows, seen from window `now_win`. */
double bs_fs_ring_decayed(const struct fs_ring *r, int32_t depth, int64_t now_win, double decay);

struct cred {
    char *name;
    double priority, fstarget; /* fstarget NAN: none */
    int32_t maxjob;            /* -1: no limit */
    int64_t maxproc;
    int32_t run_jobs;
    int64_t run_procs;
    struct fs_ring fs;
    double fs_pct; /* usage percent, valid when fs_stamp == engine's */
    int64_t fs_stamp;
};
struct credtab {
    struct cred *v;
    int32_t n, cap;
    int32_t last; /* the id last interned or found (valid if < n) */
    struct strmap map;
};
int32_t bs_cred_intern(struct batch_engine *e, enum batch_cred_kind k, const char *name);
int32_t bs_cred_lookup(const struct batch_engine *e, enum batch_cred_kind k, const char *name);
void bs_cred_free_all(struct batch_engine *e);

/* ---- nodes, groups, pools, reservations, jobs ---- */
struct bnode {
    char *name;
    struct batch_res cap;
    int32_t cls;  /* class cred id, -1: any */
    int32_t host; /* machine id (batch_node_spec.host), -1: a machine of its own */
    int32_t fset; /* its feature list (engine fsets), -1: none (issue 27) */
    bool up;
};

/*
 * Node positions are node indexes: a group's nodes are the set bits of its class's
 * membership bitmap (bit i of word i / 64: node i), ascending index is position
 * order, and whether a node runs a job is one bitmap for the whole engine
 * (batch_engine.busy). Regrouping changes which group a word's bits belong to, not
 * where a node is, so the busy bits and the running jobs' bitmap words (struct
 * bjob_run) outlive it.
 */
struct bgroup {
    int32_t cls;
    int32_t fset; /* the feature list of its nodes, -1: none */
    struct batch_res cap;
    int32_t *resv; /* reservation slots covering these nodes, ascending */
    int32_t nresv;
    int32_t nnodes;
    int32_t part;        /* its class (batch_engine.part) */
    const uint64_t *mem; /* the class's membership words [wlo, whi) (borrowed: valid
                          * until the next regrouping) */
    int32_t wlo, whi;
};

/* Group g's membership word w (nodes 64w .. 64w + 63), 0 outside its window. */
static inline uint64_t bs_group_word(const struct bgroup *g, int32_t w)
{
    return w >= g->wlo && w < g->whi ? g->mem[w - g->wlo] : 0;
}

/* A class of the partition (part.c): a group's key and its nodes. */
struct bclass {
    int32_t base;  /* base class (batch_engine.nbase), -1: a free id (part.c) */
    int32_t *resv; /* live reservation slots holding its nodes, ascending */
    int32_t nresv;
    uint64_t *mem; /* membership bits of words [wlo, wlo + nw); NULL when empty */
    int32_t wlo, nw;
    int32_t nnodes;
    uint64_t hash;
    int32_t group; /* its group at the last regrouping, -1: none */
};

struct bpart {
    bool ok; /* else started again from the base classes at the next update */
    struct bclass *c;
    int32_t nc, capc, nlive; /* nlive: classes with nodes after the last update */
    int32_t *slot;           /* hash table of class ids by key, -1 empty */
    int32_t cap;
    int32_t *ncls; /* per node: its class, -1 when down */
    int32_t capncls;
    int32_t *acc; /* reservation slots counted in the classes */
    int32_t nacc, capacc;
    int32_t *fresh; /* reservation slots created since the last update */
    int32_t nfresh, capfresh;
    /* running job slots whose bitmap words must be made again (class of a node
     * changed, or adopted): bjob.rerun set while listed */
    int32_t *rerun;
    int32_t nrerun, caprerun;
    bool rerun_all; /* every running job's (the classes were renumbered) */
    int32_t *freec; /* class ids free for reuse (base -1) */
    int32_t nfreec, capfreec;
    int32_t recycle_slack; /* empty classes freed past classes with nodes + this (64;
                            * tests: 0) */
};

struct bpool {
    int32_t resv; /* reservation slot; -1: the general pool */
    int64_t start, end;
    int32_t ng;
    int32_t *gid;                      /* groups */
    struct profile *base, *plan, *est; /* ng each */
};

/* Nodes of a reservation in one bitmap word (nodes 64 word .. 64 word + 63). */
struct bword {
    int32_t word;
    uint64_t mask;
};

struct bresv {
    bool live;
    bool grid;       /* batch_resv_req.grid */
    int64_t created; /* engine time it was made (the grid guard, cycle.c) */
    char name[BATCH_NAME_MAX];
    int64_t start, end;
    int32_t *acl[BATCH_CRED_KINDS]; /* cred ids */
    int32_t nacl[BATCH_CRED_KINDS];
    uint64_t *jobs;
    int32_t njobs;
    int32_t *nodes;
    int32_t nnodes;
    /* the nodes again as bitmap words (the partition moves them in and out a word at a
     * time), NULL: read the node list (bs_resv_words) */
    struct bword *words;
    int32_t nwords;
    int32_t tasks;
    struct batch_res per_task;
    int32_t pool;    /* pool index while it lasts, -1 otherwise */
    int32_t running; /* jobs running inside it */
};

enum batch_reason {
    R_NONE,
    R_HOLD,
    R_NEVER,
    R_THROTTLE,
    R_RESOURCES,
    R_RESERVED,
    R_BLOCKED,
    R_NOFIT,
    R_WAITRESV
};

/* Nodes a running job holds in one bitmap word (nodes 64 word .. 64 word + 63), all
 * of class `part`: releasing them is a mask per word instead of a visit per node. */
struct bjob_run {
    int32_t part, word;
    uint64_t mask;
};

struct bjob {
    /* The fields every cycle's queue scans read (candidate(), backfill's quick
     * checks, queue_compact) come first, so that a scan touches one cache line
     * per job. */
    bool live;
    bool hold, early_start;
    bool grid; /* batch_job_spec.grid */
    /* cycle.c, the grid guard: the cycle number of the last cycle that ended with a job
     * reservation for it, and since when it has held one without a break */
    int64_t plan_cycle, resv_since;
    bool never; /* larger than all compatible nodes */
    enum batch_job_state state;
    int32_t fit_epoch;        /* groups epoch of the cached fit data */
    int32_t gen_gi, gen_need; /* general pool: the only compatible group, or -1 */
    int32_t procs, nodes_min;
    int64_t estimate, reserved;
    int64_t walltime, submit;
    double prio;
    uint64_t id;
    int64_t seq; /* submission order (batch_engine.submit_seq) */
    /* the rest */
    int32_t cred[BATCH_CRED_KINDS];
    int32_t tasks;
    struct batch_res per_task;
    int32_t ppn;      /* tasks per machine at most, 0: no limit */
    char *constraint; /* node features wanted (issue 27), NULL: any; owned (a request's
                       * temporary job borrows the request's) */
    bool counted;     /* the constraint has counts (NAME*N: at least N of its machines have
                       * NAME): placed as a job limited per machine (bs_engine_host_limited) */
    double upriority;
    int64_t start, end_est, charged;
    int32_t *nodes;
    int32_t nnodes;
    struct bjob_run *runs; /* running: its busy bits (made again by regrouping when
                            * one of its nodes changed class) */
    int32_t nruns;
    bool rerun;               /* on the partition's rerun list */
    bool nodes_lazy;          /* nodes[] not written yet: runs[] says which (see
                               * bs_engine_fill_nodes) */
    int32_t resv;             /* running inside this reservation slot, -1 */
    int32_t run_idx;          /* position in the running list */
    enum batch_reason reason; /* valid in cycle reason_cycle */
    int64_t reason_cycle;
    uint8_t throttle_kind; /* which credential throttled it */
};

/* bound.c: dominance bounds (see there) */
struct bfront_ent {
    int64_t len, start;
};
struct bfront {
    struct bfront_ent *e;
    int32_t n, cap;
    int64_t epoch;
};
struct bbounds {
    struct bfront *exact; /* by node count */
    int32_t nexact;
    struct bfront band[32]; /* by power-of-two band of node counts */
    int32_t group, gepoch;
    int64_t epoch;
    bool on; /* only worth it for long queues */
};

struct plan_ent {
    int32_t job, pool;
    int64_t start, end;
    int32_t off; /* node counts per pool group at pcnt[off .. off + ng) */
};

struct batch_engine {
    struct batch_config cfg;
    double weff[BATCH_NFACTORS];
    int32_t active[BATCH_NFACTORS]; /* factors with a non-zero weight */
    int32_t nactive;
    /* No XFACTOR or fairshare weight: priorities all grow at the same rate, so the
     * queue order never changes and j->prio holds the time-invariant key
     * priority - QUEUETIME weight x submit / 60 (see priority.c). */
    bool static_prio;
    int32_t nsorted;     /* queue[0, nsorted) is in order; later entries are new */
    int32_t order_epoch; /* groups epoch of the last full ordering pass */
    int64_t cycle_no;
    struct credtab creds[BATCH_CRED_KINDS];
    struct fs_ring fs_total;
    int64_t fs_stamp;

    struct bnode *nodes;
    int32_t nnodes, capnodes;
    /* per node: the slot of the job that last started on it, -1; stale once that
     * job ends (an end does not visit its nodes): read it only through
     * bs_engine_node_job(). Apart from struct bnode so that a start's writes
     * stay within a few cache lines. */
    int32_t *node_job;
    int32_t capnodejob;
    /* bit per node: running a job (set by a start or by bs_engine_job_runs, cleared
     * by the job's end) */
    uint64_t *busy;
    int32_t capbusy; /* words */
    /* scratch for batch_resv_create: nodes held (bit per node) and the nodes chosen */
    uint64_t *scr_held;
    int32_t capheld;
    int32_t *scr_pick;
    int32_t cappick;
    int32_t *scr_basek; /* tasks per node of each base class */
    /* the chosen nodes as bitmap words when the choice made them (pick_by_base), else
     * nscr_words -1 */
    struct bword *scr_words;
    int32_t nscr_words, capscr_words;
    int32_t capbasek;
    int32_t nlazy; /* running jobs with nodes_lazy */
    struct strmap nodemap;
    /* distinct node feature lists (issue 27): fsetmap list -> index into fsets */
    struct strmap fsetmap;
    char **fsets;
    int32_t nfsets, capfsets;
    /* machines named by nodes (batch_node_spec.host): ids 0..nhosts; hostcnt is
     * scratch, one count per machine (tasks of the job being placed) */
    struct strmap hostmap;
    int32_t nhosts;
    int32_t *hostcnt;
    int32_t caphostcnt;

    /* group.c: per node its base class (class, features, capacity: a group's key
     * without the reservations; -1 when down), valid while nbase_ok (a node added,
     * going up or down or its features changed clear it); base_rep: per base class
     * its first node */
    int32_t *nbase, *base_rep;
    int32_t nbases, capnbase, capbase_rep;
    bool nbase_ok;
    struct bpart part;

    struct bgroup *groups;
    int32_t ngroups;
    int32_t gepoch;
    bool groups_dirty;

    struct bpool *pools;
    int32_t npools;
    /* group.c: the profiles of the last pools, kept for the next ones (a regrouping
     * per reservation made or released: their blocks not freed and allocated again) */
    struct profile *pspare;
    int32_t npspare, cappspare;

    /* Every reservation ever made, at a slot that never changes (released ones stay:
     * jobs, classes and groups name slots, and slot order is the groups' key order).
     * The hot passes read only the live ones: rlive holds their slots ascending (the
     * order of a pass over all slots), resvmap a live one's slot by name (-1 once
     * released). Kept by bs_resv_live_add / bs_resv_live_drop (state.c) alone. */
    struct bresv *resv;
    int32_t nresv, capresv;
    int32_t *rlive;
    int32_t nrlive, caprlive;
    struct strmap resvmap;
    int64_t resv_seq;

    struct bjob *jobs;
    int32_t njobs, capjobs;
    /* slot -> gen_need of its job if its gen_gi is 0, else 0: written only by
     * bs_engine_fit_refresh, cleared by job_drop, so it mirrors what backfill_skip
     * (cycle.c) reads and the FIRSTFIT walk can pass over jobs wider than the free
     * nodes without touching them. Slots from capneed on read as 0 (unknown). */
    int32_t *slot_need;
    int32_t capneed;
    int32_t *freeslots;
    int32_t nfree, capfree;
    struct idmap jobmap;
    int32_t live_jobs;

    int32_t *queue; /* pending job slots, in last cycle's priority order */
    int32_t nqueue, capqueue;
    int32_t *running;
    int32_t nrunning, caprunning;
    int64_t min_end; /* no running job's walltime ends before this (overrun check) */

    struct plan_ent *plan; /* job reservations, in priority order */
    int32_t nplan, capplan;
    int32_t *pcnt;
    int32_t npcnt, cappcnt;
    bool plan_valid;
    bool plan_skipped; /* cycle.c: the last cycle was idle and planned no job reservation */
    bool est_valid;
    /* j->estimate of every pending job was set by the estimate pass and nothing changed
     * since (batch_job_estimate's cache; cleared by every change and every cycle) */
    bool jest_valid;
    bool any_throttle; /* some credential has MAXJOB or MAXPROC */

    int64_t now;
    /* Backfill memo (cycle.c, backfill_first). When bf_memo is set, every pending
     * job without a reservation and with seq <= bf_seq could not start at the
     * last full backfill, and since then the general pool's plan has only lost
     * capacity and had no breakpoint before bf_next: such a job cannot start
     * before bf_next either. Anything that may give capacity back, change who is
     * a candidate or change the pools clears it (bs_engine_memo_clear). */
    bool bf_memo;
    int64_t bf_seq, bf_next;
    int32_t *fresh; /* with bf_memo: the slots of the jobs queued since (a slot may
                     * repeat or have ended); nfresh -1: too many, walk the queue */
    int32_t nfresh, capfresh;
    int64_t submit_seq;
    uint64_t *started;
    int32_t nstarted, capstarted;
    struct batch_released *released; /* cycle.c: the grid guard's releases this cycle */
    int32_t nreleased, capreleased;
    struct batch_moved *moved; /* moveup.c: the grid reservations moved up this cycle */
    int32_t nmoved, capmoved;
    bool moveup_due;      /* moveup.c: capacity came free since the last look */
    int32_t moves_left;   /* cycle.c: moves this batch_cycle may still make */
    bool moved_now;       /* cycle.c: phase_order moved one up and stopped */
    int32_t compact_from; /* cycle.c: no job this cycle started sits in queue[0, it) */

    /* scratch */
    int32_t *scr_cnt; /* node counts per group of a pool */
    int32_t *scr_cnt2;
    int32_t *scr_free; /* backfill: free nodes now per group */
    int32_t *scr_cnt3; /* node counts of a search for a job limited per machine */
    int32_t *scr_k;    /* compatible group positions */
    int32_t *scr_kpn;
    int32_t capscr;
    struct bbounds bnd;
    int32_t bound_min_jobs; /* use bounds when placing at least this many (tests: 0) */
    int64_t *drops;         /* bestfit: profile drop times */
    int32_t ndrops, capdrops;
};

/* ---- bound.c ---- */
void bs_bound_reset(struct batch_engine *e, int32_t jobs);
int64_t bs_bound_get(struct batch_engine *e, const struct bjob *j);
void bs_bound_put(struct batch_engine *e, const struct bjob *j, int64_t start);
void bs_bound_free(struct batch_engine *e);

/* ---- fairshare.c ---- */
void bs_fs_charge(struct batch_engine *e, const struct bjob *j, int64_t t0, int64_t t1);
void bs_fs_charge_upto(struct batch_engine *e, struct bjob *j, int64_t upto);
double bs_fs_percent(struct batch_engine *e, struct cred *c, int64_t now);

/* ---- state.c ---- */
int bs_engine_scratch(struct batch_engine *e, int32_t n);
int32_t bs_engine_kpn(const struct batch_res *cap, const struct batch_res *task);
int32_t bs_engine_job_kpn(const struct batch_res *cap, const struct bjob *j);
/* Whether job j's ppn limit or constraint counts span several nodes (nodes share
 * machines): its nodes are then chosen machine by machine (plan.c hosts_pick). */
static inline bool bs_engine_host_limited(const struct batch_engine *e, const struct bjob *j)
{
    return (j->ppn > 0 || j->counted) && e->nhosts > 0;
}
/* Zeroed per-machine counts (e->hostcnt); 0 or -1 (ENOMEM). */
int bs_engine_hostcnt_zero(struct batch_engine *e);
bool bs_engine_group_ok(const struct batch_engine *e, const struct bgroup *g, const struct bjob *j);
/* Constraint counts (issue 27): j's counted names into v (CONSTRAINT_NAMES_MAX) and their
 * counts into left; how many (0 when j has none). */
int bs_engine_counts(const struct bjob *j, struct constraint_count *v, uint32_t *left);
/* Bit t set when group g's features hold counted name v[t] (t < 64). */
uint64_t bs_engine_group_names(const struct batch_engine *e, const struct bgroup *g,
                               const struct constraint_count *v, int nv);
struct bjob *bs_engine_job(const struct batch_engine *e, uint64_t id);
int32_t bs_engine_node_job(struct batch_engine *e, int32_t node);
void bs_engine_fill_nodes(struct batch_engine *e, int32_t slot);
void bs_engine_fill_all(struct batch_engine *e);
int bs_engine_job_runs(struct batch_engine *e, struct bjob *j);
void bs_engine_fit_refresh(struct batch_engine *e, struct bjob *j);
bool bs_engine_admits(const struct batch_engine *e, const struct bresv *r, const struct bjob *j);
/* Makes reservation slot r (filled, its name set, above every live slot) live: listed
 * in rlive and by name. 0, or -1 (ENOMEM: nothing changed). */
int bs_resv_live_add(struct batch_engine *e, int32_t r);
/* Slot r is no longer live: out of rlive, and its name freed unless another slot
 * holds it now. Never fails. */
void bs_resv_live_drop(struct batch_engine *e, int32_t r);
/* Makes reservation slot r's bitmap words from its node list (a run of listed nodes
 * in one word is one entry). 0, or -1 (ENOMEM: words left NULL, which is valid). */
int bs_resv_words(struct batch_engine *e, int32_t r);
/* The live slot named `name`, -1. */
static inline int32_t bs_resv_by_name(const struct batch_engine *e, const char *name)
{
    return bs_strmap_get(&e->resvmap, name);
}
/* Set bits of x, inline (without -mpopcnt, __builtin_popcountll is a libgcc call). */
static inline int32_t bs_pop64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int32_t)((x * 0x0101010101010101ULL) >> 56);
}

/* The lowest run of consecutive set bits of x (not 0): its first bit in *lo, its
 * bits as the return value (reservations and starts take runs of neighbouring nodes,
 * so a loop over the nodes of a word goes run by run). */
static inline uint64_t bs_run64(uint64_t x, int32_t *lo)
{
    int32_t l = __builtin_ctzll(x);
    uint64_t up = ~(x >> l); /* the run's end: the first clear bit above l */
    int32_t len = up ? __builtin_ctzll(up) : 64 - l;
    *lo = l;
    return len == 64 ? ~0ULL : ((1ULL << len) - 1) << l;
}

/* Runs of nodes written at once (a node's class, a job's node list and node hints, a
 * reservation's node choice): four entries a step, which the compiler makes one
 * vector store or compare. p[0..n) = v: */
static inline void bs_fill32(int32_t *p, int32_t n, int32_t v)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        p[i] = v;
        p[i + 1] = v;
        p[i + 2] = v;
        p[i + 3] = v;
    }
    for (; i < n; i++)
        p[i] = v;
}

/* p[x] = first + x for x in [0, n): */
static inline void bs_iota32(int32_t *p, int32_t n, int32_t first)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        p[i] = first + i;
        p[i + 1] = first + i + 1;
        p[i + 2] = first + i + 2;
        p[i + 3] = first + i + 3;
    }
    for (; i < n; i++)
        p[i] = first + i;
}

/* Whether p[0..n) all equal v: */
static inline bool bs_all32(const int32_t *p, int32_t n, int32_t v)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4)
        if ((p[i] ^ v) | (p[i + 1] ^ v) | (p[i + 2] ^ v) | (p[i + 3] ^ v))
            return false;
    for (; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static inline void bs_engine_memo_clear(struct batch_engine *e)
{
    e->bf_memo = false;
    e->nfresh = 0;
}

/* Position of group g in pool p, or -1. */
static inline int32_t bs_pool_pos(const struct bpool *p, int32_t g)
{
    if (p->resv < 0)
        return g;
    for (int32_t k = 0; k < p->ng; k++)
        if (p->gid[k] == g)
            return k;
    return -1;
}

/* ---- part.c ---- */
/* Orders base classes (represented by nodes x and y) by (class, features, capacity). */
int bs_part_base_cmp(const struct bnode *x, const struct bnode *y);
/* Brings the partition up to date with the nodes and live reservations. 0 or -1. */
int bs_part_update(struct batch_engine *e);
/* Notes reservation slot r, just created. */
void bs_part_note_resv(struct batch_engine *e, int32_t r);
/* Notes running job slot s, whose bitmap words are made at the next update (adopted). */
void bs_part_note_job(struct batch_engine *e, int32_t s);
/* The group of node i at the last regrouping, -1 when down or not grouped yet. */
int32_t bs_part_node_group(const struct batch_engine *e, int32_t i);
void bs_part_free(struct bpart *p);

/* ---- plan.c ---- */
int64_t bs_plan_pool_find(struct batch_engine *e, int32_t pool, const struct bjob *j, int64_t t0,
                          int64_t tmax, bool est, int32_t *cnt);
/* What repeated searches of one job in one pool keep (bs_plan_pool_find_memo): the
 * job's groups of the pool (their count nk, -1 before the first search) and, with
 * several, when each one's profile first holds a free node (zfree, NULL at first: made
 * by the first search that needs it; free() it after the last search). */
struct bs_search_memo {
    int32_t nk;
    int64_t *zfree;
};
/* bs_plan_pool_find for repeated searches of one job in one pool, nothing else
 * searching, regrouping or planning between them (memo {-1, NULL} at first). */
int64_t bs_plan_pool_find_memo(struct batch_engine *e, int32_t pool, const struct bjob *j,
                               int64_t t0, int64_t tmax, bool est, int32_t *cnt,
                               struct bs_search_memo *memo);
/* Whether pool pi's reservation has not begun and its nodes are all free in the plan
 * from now until it does (an early start of its bound job could pull it forward). */
bool bs_plan_pull_free(struct batch_engine *e, int32_t pi);
int64_t bs_plan_earliest(struct batch_engine *e, const struct bjob *j, int64_t t0, int64_t tmax,
                         bool est, int32_t *pool_out, int32_t *cnt_out);
int bs_plan_reserve(struct batch_engine *e, int32_t slot, int32_t pool, int64_t start,
                    const int32_t *cnt);
int bs_plan_est_reserve(struct batch_engine *e, int32_t slot, int32_t pool, int64_t start,
                        const int32_t *cnt);
void bs_plan_unreserve(struct batch_engine *e, int32_t idx);
int bs_plan_start(struct batch_engine *e, int32_t slot, int32_t pool, const int32_t *cnt,
                  bool from_plan);
int bs_plan_copy_base(struct batch_engine *e);
void bs_plan_clear(struct batch_engine *e);
int bs_plan_copy_est(struct batch_engine *e);
void bs_plan_trim(struct batch_engine *e, int64_t now, bool plan);
/* Backfill's question "does job j start now?" for the common case (one pool, j's
 * only compatible group known): 1 (cnt filled, pool 0), 0 (no), or -1 (another
 * case: ask bs_plan_earliest). */
int bs_plan_fits_now(struct batch_engine *e, const struct bjob *j, int32_t *cnt);
int32_t bs_plan_free_now(const struct batch_engine *e);
/* cycle.c: plans the job reservations an idle cycle skipped, starting nothing (a job
 * that could start now gets a reservation at now), so that estimates see the queue's
 * top jobs on a full site. 0 or -1 (ENOMEM). */
int bs_cycle_plan_skipped(struct batch_engine *e);

/* ---- group.c ---- */
/* Frees the groups and pools; their profiles are kept for the next pools. */
void bs_engine_groups_free(struct batch_engine *e);
/* Frees the profiles bs_engine_groups_free kept. */
void bs_engine_pspare_free(struct batch_engine *e);
int bs_engine_regroup(struct batch_engine *e);
int bs_engine_rebuild_base(struct batch_engine *e);

/* ---- moveup.c ---- */
/* Moves pool pi's grid reservation up to now where its job fits now and the reservation
 * begins MOVE_MIN_S later or more (the groups are then dirty: plan again); called at
 * the job's turn in the priority order. 1 moved, 0 not, -1 ENOMEM. */
int bs_moveup_pool(struct batch_engine *e, int32_t pi);
/* The same for the reservation bound to job slot `slot`, if any. */
int bs_moveup_job(struct batch_engine *e, int32_t slot);

/* ---- priority.c ---- */
void bs_prio_weights(struct batch_engine *e);
double bs_prio_compute(struct batch_engine *e, const struct bjob *j, int64_t now,
                       struct batch_prio *out);
double bs_prio_key(struct batch_engine *e, const struct bjob *j);
double bs_prio_at(const struct batch_engine *e, const struct bjob *j, int64_t now);

/* ---- cycle.c ---- */
const char *bs_cycle_reason(enum batch_reason r, uint8_t kind);
enum batch_reason bs_cycle_job_reason(const struct batch_engine *e, const struct bjob *j);
/* The estimate pass (step 7): every pending job planned in priority order on a copy of
 * the plan (the est profiles; j->estimate set); est_valid set. 0 or -1 (ENOMEM). */
int bs_cycle_estimate_all(struct batch_engine *e);

#endif

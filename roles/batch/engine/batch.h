/*
 * batch.h - the batch scheduler's policy engine (Maui-like), pure C without I/O.
 *
 * The engine holds nodes, jobs, administrative reservations, fairshare history and
 * the plan (job reservations). The caller reports what happened (jobs submitted,
 * finished, nodes up or down) and calls batch_cycle() once per scheduling cycle:
 * the live role on every state change or timer, the simulator on every event. A
 * cycle decides which jobs start now (on which nodes), keeps job reservations for
 * the top blocked jobs and backfills the rest (seed 003, section 3.2; MISSION B3).
 *
 * Node model: a node runs the tasks of one job at a time (Maui's NODEACCESSPOLICY
 * SINGLEJOB); a job may put several of its tasks on one node when they fit. Nodes
 * with the same class, capacity and reservations are interchangeable, so the plan is
 * one availability profile of free nodes per such group (profile.h), which is exact.
 *
 * Times are in config.unit_per_s units (seconds by default; int64); memory, disk
 * and swap are MB. Every function that can fail returns 0 / -1 with errno (or a count / pointer)
 * and changes nothing then. Strings passed in are copied; pointers handed out stay valid until the
 * next call that changes the engine, unless said otherwise.
 */
#ifndef GRIDNODE_BATCH_H
#define GRIDNODE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BATCH_NAME_MAX 64
#define BATCH_NEVER INT64_MAX
#define BATCH_UNLIMITED (-1)

/* Resources of one node, or of one task of a job. */
struct batch_res {
    int32_t procs;
    int64_t mem, disk, swap; /* MB; 0 = none needed / none present */
};

enum batch_backfill { BATCH_BF_NONE, BATCH_BF_FIRSTFIT, BATCH_BF_BESTFIT };
enum batch_fspolicy { BATCH_FS_NONE, BATCH_FS_DEDICATEDPS };

/* Credentials: who a job belongs to. Class is also the node partition. */
enum batch_cred_kind {
    BATCH_CRED_USER,
    BATCH_CRED_GROUP,
    BATCH_CRED_ACCOUNT,
    BATCH_CRED_CLASS,
    BATCH_CRED_QOS,
    BATCH_CRED_KINDS
};

/* Maui priority weights: component weight x subcomponent weight (see priority.c). */
struct batch_weights {
    double serv, queuetime, xfactor;
    double fs, fsuser, fsgroup, fsaccount;
    double cred, user, group, account, qos, class_;
    double res, proc, mem, disk, swap, node, ps;
    double uprio;
};

/* Per-credential settings: [user NAME] etc. in batch.ini; name "DEFAULT" applies to
 * every credential of that kind not listed. NAN fstarget = no target; -1 = no limit. */
struct batch_cred_cfg {
    enum batch_cred_kind kind;
    char name[BATCH_NAME_MAX];
    double priority;
    double fstarget; /* percent of the decayed usage */
    int32_t maxjob;  /* running jobs */
    int64_t maxproc; /* running processors */
    /* [class NAME] only (Maui's CLASSCFG DEFAULT.WCLIMIT / MAX.WCLIMIT), seconds, 0 =
     * not set: the walltime of a job that gives none, and the most a job may ask for.
     * The drivers apply them (batch_config_class_walltime); the engine ignores them. */
    int64_t defwalltime, maxwalltime;
};

struct batch_config {
    int32_t reservation_depth; /* BATCH_UNLIMITED = conservative backfill */
    enum batch_backfill backfill;
    struct batch_weights w;
    enum batch_fspolicy fspolicy;
    int64_t fsinterval; /* seconds per fairshare window */
    int32_t fsdepth;    /* windows kept */
    double fsdecay;     /* weight of a window = fsdecay^age */
    bool estimates;     /* estimated start of every pending job, every cycle */
    /* Engine time units per second: 1 = seconds (SWF replay), 1000 = milliseconds (the
     * live role, time-scaled replays). Every time passed in or out (submit, now,
     * walltime, estimates) is in these units; only the conversions to minutes
     * (QUEUETIME), seconds (PS) and the fairshare window (fsinterval, which stays in
     * seconds) use it, so priorities mean the same in both drivers. */
    int64_t unit_per_s;
    /* A running job that outlives its walltime is assumed to end this long (engine units)
     * after the cycle that notices it; every later cycle that still sees it running
     * extends it again. Default 60 (a minute of an SWF replay, where jobs never
     * overrun); the live role uses 1 s: its cluster managers kill a job at its walltime
     * and report the end within milliseconds, so the grace only keeps the plan off the
     * busy hosts until then, without opening a window backfill could fill. */
    int64_t overrun_grace;
    /* The site owner's rule for grid jobs (issue 25; docs/batch.md "Grid jobs and local
     * users"). grid_wait_bound: seconds, 0 = off: a local job that has waited this long
     * and holds a job reservation is no longer held back by grid reservations: every
     * grid reservation with no job running in it that begins before that job's reserved
     * start is released (the grid job stays queued; batch_cycle_released lists them).
     * grid_class: the class (partition) of grid jobs that name none, so that Maui's class
     * limits (MAXPROC, MAXJOB, node partitions) give grid jobs a share or dedicated nodes;
     * applied by the drivers, the engine ignores it. */
    int64_t grid_wait_bound;
    char grid_class[BATCH_NAME_MAX];
    struct batch_cred_cfg *creds; /* owned; batch_config_clear frees */
    size_t ncreds, capcreds;
};

/* Maui's defaults: RESERVATIONDEPTH 1, FIRSTFIT, QUEUETIMEWEIGHT 1, no fairshare. */
void batch_config_defaults(struct batch_config *c);
void batch_config_clear(struct batch_config *c);
/* Deep copy; 0 or -1 (ENOMEM). */
int batch_config_copy(struct batch_config *dst, const struct batch_config *src);
/* The entry for (kind, name), created with "no setting" values if missing; NULL on
 * ENOMEM or a name too long (EINVAL). */
struct batch_cred_cfg *batch_config_cred(struct batch_config *c, enum batch_cred_kind kind,
                                         const char *name);
const char *batch_cred_kind_name(enum batch_cred_kind k);
/* Class cls's default (max false) or maximum (max true) walltime in seconds: its own
 * [class cls] setting, else [class DEFAULT]'s, else 0 (none). */
int64_t batch_config_class_walltime(const struct batch_config *c, const char *cls, bool max);

struct batch_engine;

/* A new engine with a copy of cfg; NULL on ENOMEM or a bad config (EINVAL). */
struct batch_engine *batch_engine_new(const struct batch_config *cfg);
/* NULL-safe; sets *e to NULL. */
void batch_engine_destroy(struct batch_engine **e);

/* ---- nodes ---- */
struct batch_node_spec {
    char name[BATCH_NAME_MAX];
    struct batch_res cap;
    char class_[BATCH_NAME_MAX]; /* "" = any class may run here */
    /* The machine the node is part of, for a job's processes-per-host limit (ppn):
     * "" = the node is a machine of its own (the simulator's nodes); the live role
     * makes one node per core and names the host here. */
    char host[BATCH_NAME_MAX];
    /* Its features (issue 27, lib/constraint.h): a canonical list ("gpu,linux"), NULL
     * or "" none. Nodes with the same list group together; copied. */
    const char *features;
};
/* Adds an up node; returns its index, or -1 (EEXIST name taken, EINVAL). */
int32_t batch_node_add(struct batch_engine *e, const struct batch_node_spec *n);
/* Marks a node up or down; a down node takes no new work. 0 or -1 (ENOENT). */
int batch_node_set_up(struct batch_engine *e, int32_t node, bool up);
/* Changes a node's capacity (the resource manager reports new figures). Safe while a
 * job runs there: the job keeps the node; the new capacity counts for new work. 0 or -1
 * (ENOENT, EINVAL bad capacity). */
int batch_node_set_cap(struct batch_engine *e, int32_t node, const struct batch_res *cap);
/* Changes a node's features (canonical list, NULL or "" none): new work matches the new
 * list; a job running there keeps the node. 0 or -1 (ENOENT, ENOMEM). */
int batch_node_set_features(struct batch_engine *e, int32_t node, const char *features);
/* The node's features ("" none; NULL for a bad index). */
const char *batch_node_features(const struct batch_engine *e, int32_t node);
int32_t batch_node_count(const struct batch_engine *e);
int32_t batch_node_find(const struct batch_engine *e, const char *name);
const char *batch_node_name(const struct batch_engine *e, int32_t node);
/* A running job holds the node (the live role adopting its jobs after a restart looks
 * for the cores still free). False for a bad index. */
bool batch_node_busy(struct batch_engine *e, int32_t node);

/* ---- jobs ---- */
struct batch_job_spec {
    uint64_t id;
    char user[BATCH_NAME_MAX], group[BATCH_NAME_MAX], account[BATCH_NAME_MAX];
    char class_[BATCH_NAME_MAX], qos[BATCH_NAME_MAX];
    int32_t tasks;
    struct batch_res per_task;
    int64_t walltime; /* limit, seconds (>= 1) */
    int64_t submit;
    bool hold;
    bool early_start; /* may start before / away from a reservation made for it (B5) */
    bool grid;        /* it came from a metascheduler, not from a local user (issue 25) */
    double upriority; /* user-requested priority */
    /* At most this many tasks on one machine (batch_node_spec.host; Slurm's
     * --ntasks-per-node, Maui's ppn): the job needs ceil(tasks / ppn) machines at
     * least. 0 = no limit (tasks packed as they fit). */
    int32_t ppn;
    /* Only nodes whose features satisfy this (Slurm's --constraint, lib/constraint.h;
     * issue 27); NULL or "" = any node. Copied. A job no up node satisfies stays
     * pending (never fits) until one comes. */
    const char *constraint;
};

enum batch_job_state { BATCH_JOB_PENDING, BATCH_JOB_RUNNING };

struct batch_job_info {
    uint64_t id;
    enum batch_job_state state;
    int64_t submit, start, end_est; /* start/end_est: running jobs */
    int64_t estimate;               /* pending: estimated start (BATCH_NEVER unknown/never) */
    int64_t reserved;               /* pending: start of its job reservation, or BATCH_NEVER */
    double priority;                /* at the last cycle */
    int32_t procs;                  /* tasks x procs per task */
    int32_t nnodes;                 /* running: nodes held */
    const int32_t *nodes;
    const char *resv;   /* running inside this admin reservation, or NULL */
    const char *reason; /* pending: why it did not start at the last cycle */
};

/* Queues a job. 0, or -1: EEXIST (id in use), EINVAL (bad size or walltime),
 * ENOMEM. A job larger than every compatible node set stays pending with a reason. */
int batch_job_submit(struct batch_engine *e, const struct batch_job_spec *s);
/* Takes in a job that already runs on nodes[0..n) since `start` (the live role after a
 * restart: what its cluster managers report running). Its nodes are busy from now on;
 * one task per listed node entry. 0, or -1: EEXIST, EINVAL (bad spec, a node unknown,
 * down, listed twice or busy), ENOMEM. */
int batch_job_adopt(struct batch_engine *e, const struct batch_job_spec *s, const int32_t *nodes,
                    int32_t n, int64_t start);
/* A running job ended at `when` (<= the time of the next cycle), or a pending job is
 * withdrawn. Its nodes are freed and fairshare charged. 0 or -1 (ENOENT). */
int batch_job_finish(struct batch_engine *e, uint64_t id, int64_t when);
/* Running job `id` actually started at `when` (the resource manager's report; the
 * cycle that started it assumed its own time): its start, expected end and every plan
 * made after it follow. 0 or -1 (ENOENT, EINVAL if not running). */
int batch_job_started_at(struct batch_engine *e, uint64_t id, int64_t when);
/* Sets or clears a hold on a pending job. 0 or -1 (ENOENT, EINVAL if running). */
int batch_job_hold(struct batch_engine *e, uint64_t id, bool hold);
int batch_job_info(const struct batch_engine *e, uint64_t id, struct batch_job_info *out);
/* Jobs known to the engine (pending + running). */
size_t batch_job_count(const struct batch_engine *e);
/* Ids of the pending jobs in the last cycle's priority order (jobs queued since
 * come last), then, unless pending_only, the running ones. Writes up to max,
 * returns how many there are. */
size_t batch_job_ids(const struct batch_engine *e, bool pending_only, uint64_t *ids, size_t max);

/* ---- the scheduling cycle ---- */
struct batch_cycle_stats {
    int32_t started;    /* in priority order, incl. reservations whose time came */
    int32_t backfilled; /* started by backfill */
    int32_t reserved;   /* job reservations held after the cycle */
    int32_t pending;
    bool replanned; /* job reservations were rebuilt from scratch */
    bool idle;      /* nothing could start now: planning was skipped */
};

/* Runs one cycle at time `now` (non-decreasing across calls): refresh, drop stale
 * reservations, start jobs whose reservation time has come, select eligible jobs,
 * order by priority, start in order, reserve for blocked top jobs up to the depth,
 * backfill the rest, then (config.estimates) estimate every pending job's start.
 * 0, or -1 (ENOMEM: the cycle stopped part way; state stays consistent). */
int batch_cycle(struct batch_engine *e, int64_t now, struct batch_cycle_stats *st);
/* The ids of the jobs the last cycle started (valid until the next cycle). */
size_t batch_cycle_started(const struct batch_engine *e, const uint64_t **ids);
/* The next time a cycle is due without any new event: the earliest future job
 * reservation start or admin reservation boundary; BATCH_NEVER if none. */
int64_t batch_next_wakeup(const struct batch_engine *e);
/* The grid reservations the last batch_cycle released under config.grid_wait_bound
 * (their names and bound jobs, 0 if none): the caller forgets them. */
struct batch_released {
    char name[BATCH_NAME_MAX];
    uint64_t job;
};
size_t batch_cycle_released(const struct batch_engine *e, const struct batch_released **out);
/* The grid reservations the last batch_cycle moved up (docs/batch.md "Grid reservations
 * move up"): same name and bound job, new window and nodes (batch_resv_find); the caller
 * stores them. A name may appear more than once: the last entry holds. */
struct batch_moved {
    char name[BATCH_NAME_MAX];
    uint64_t job;
    int64_t start, end;
};
size_t batch_cycle_moved(const struct batch_engine *e, const struct batch_moved **out);

/* ---- priority (diagnose -p) ---- */
enum batch_factor {
    BATCH_F_QUEUETIME, /* minutes queued */
    BATCH_F_XFACTOR,   /* (queued + walltime) / walltime */
    BATCH_F_FSUSER,    /* fairshare target - usage, percent */
    BATCH_F_FSGROUP,
    BATCH_F_FSACCOUNT,
    BATCH_F_USER, /* credential priorities */
    BATCH_F_GROUP,
    BATCH_F_ACCOUNT,
    BATCH_F_QOS,
    BATCH_F_CLASS,
    BATCH_F_PROCS, /* requested resources */
    BATCH_F_MEM,
    BATCH_F_DISK,
    BATCH_F_SWAP,
    BATCH_F_NODES,
    BATCH_F_PS, /* processor-seconds requested */
    BATCH_F_UPRIO,
    BATCH_NFACTORS
};
struct batch_prio {
    double value[BATCH_NFACTORS];  /* raw factor */
    double weight[BATCH_NFACTORS]; /* component x subcomponent weight */
    double contrib[BATCH_NFACTORS];
    double total;
};
const char *batch_factor_name(enum batch_factor f);
/* The priority of job `id` at `now`, factor by factor. 0 or -1 (ENOENT). */
int batch_priority_explain(struct batch_engine *e, uint64_t id, int64_t now,
                           struct batch_prio *out);
/* Decayed fairshare usage of a credential as a percent of all usage at `now`
 * (0 when nothing was used); -1 (ENOENT) if the credential is unknown. */
/* Charges past usage (procs x [t0, t1)) to a user, group and account, as a job that
 * ran then would have been: the live role replays its stored history at start-up so
 * fairshare survives restarts. 0 or -1 (ENOMEM). */
int batch_fairshare_charge(struct batch_engine *e, const char *user, const char *group,
                           const char *account, int32_t procs, int64_t t0, int64_t t1);
/* Adds amount (processors x engine time units) to the fairshare window holding instant t
 * of a user, group and account: the live role's kept usage of purged jobs. 0 or -1
 * (ENOMEM). */
int batch_fairshare_add(struct batch_engine *e, const char *user, const char *group,
                        const char *account, int64_t t, double amount);
double batch_fairshare_usage(struct batch_engine *e, enum batch_cred_kind kind, const char *name,
                             int64_t now);

/* ---- administrative reservations (setres / showres / releaseres) ---- */
/* Who may use a reservation: a job matching any listed value (seed 3.1). An ACL
 * with nothing listed admits no job (a blocking reservation). */
struct batch_acl {
    const char *const *names[BATCH_CRED_KINDS];
    size_t n[BATCH_CRED_KINDS];
    const uint64_t *jobs; /* job ids; a reservation for exactly one job is "bound" */
    size_t njobs;
};
struct batch_resv_req {
    const char *name; /* NULL or "": generated ("res.N") */
    struct batch_acl acl;
    int32_t tasks;             /* tasks x per_task, on any suitable nodes, or */
    struct batch_res per_task; /* ... */
    const char *partition;     /* node class to take them from; NULL = any */
    int32_t ppn;               /* tasks: at most this many per machine (0: no limit) */
    const char *constraint;    /* tasks: only nodes with these features (issue 27), NULL */
    const char *const *nodes;  /* ... these named nodes (tasks == 0) */
    size_t nnodes;
    int64_t start, end, duration; /* end or duration (the other 0) */
    bool restore;                 /* re-creating a stored reservation (live role restart): the named
                                   * nodes are taken as they are (down or busy) and start is kept */
    bool grid; /* made for a metascheduler's job: yields to config.grid_wait_bound */
};
/* Creates a reservation; it never shares nodes with another one at the same time,
 * so two reservations bound to different jobs cannot collide (B5). Returns 0 and
 * its name in name_out, or -1 with errno and a one-line reason in why: EEXIST,
 * EINVAL (bad request), EBUSY (resources taken), ENOSPC (not enough nodes). */
int batch_resv_create(struct batch_engine *e, const struct batch_resv_req *r, int64_t now,
                      char *name_out, size_t name_len, char *why, size_t why_len);
/* Releases a reservation; jobs running in it keep their nodes. 0 or -1 (ENOENT). */
int batch_resv_release(struct batch_engine *e, const char *name);

struct batch_resv_info {
    const char *name;
    int64_t start, end;
    int32_t nnodes;
    const int32_t *nodes;
    int32_t tasks;
    struct batch_res per_task;
    int32_t jobs_running; /* jobs running inside it now */
    uint64_t bound_job;   /* the one job listed in its ACL, or 0 */
    bool grid;            /* batch_resv_req.grid */
};
size_t batch_resv_count(const struct batch_engine *e);
/* The i-th reservation in start order (showres). 0 or -1 (ENOENT). */
int batch_resv_get(const struct batch_engine *e, size_t i, struct batch_resv_info *out);
int batch_resv_find(const struct batch_engine *e, const char *name, struct batch_resv_info *out);
/* Reservations holding node `node` (showres -n): up to max names, returns the count. */
size_t batch_resv_on_node(const struct batch_engine *e, int32_t node, const char **names,
                          size_t max);
/* Whether job `id` may use reservation `name` (its ACL admits it). */
bool batch_resv_admits(const struct batch_engine *e, const char *name, uint64_t id);

/* ---- start-time estimates (B6) ---- */
struct batch_request {
    int32_t tasks;
    struct batch_res per_task;
    const char *cred[BATCH_CRED_KINDS]; /* NULL = unset; class picks the partition */
    uint64_t job;                       /* 0, or the job id reservations may name */
    int32_t ppn;                        /* tasks per machine at most, 0 = no limit */
    const char *constraint;             /* node features wanted (issue 27), NULL any */
};
/* A range of feasible start times: any start in [from, to] fits (to may be
 * BATCH_NEVER, meaning "from then on"). */
struct batch_window {
    int64_t from, to;
};
/* Possible starts at or after `now` for a request running `walltime`, from the
 * current plan (running jobs, admin reservations the request may use or must avoid,
 * and job reservations of the queue, i.e. as if it were queued last). Writes up to
 * max windows in time order, returns how many exist (0: it can never fit). */
size_t batch_estimate(struct batch_engine *e, const struct batch_request *r, int64_t walltime,
                      int64_t now, struct batch_window *out, size_t max);
/* Maui's showstart of pending job id: its job reservation's start, else the start it
 * gets when every pending job is planned in priority order (the estimate pass, run
 * now unless config.estimates keeps it fresh), so a job never gets a start a job
 * ahead of it holds. *start: the time, BATCH_NEVER when it never fits or is not
 * eligible (held, throttled). 0, or -1: ENOENT (no such job), EINVAL (running),
 * ENOMEM. */
int batch_job_estimate(struct batch_engine *e, uint64_t id, int64_t now, int64_t *start);

/* ---- backfill windows (Maui's showbf, issue 27) ---- */
struct batch_bf_window {
    int32_t procs;    /* processors free from now on ... */
    int64_t duration; /* ... for this long (engine units); BATCH_NEVER: no limit */
};
/* The windows a job could backfill into now, from the plan (running jobs, admin
 * reservations, the queue's job reservations): procs free now for how long, then the
 * fewer procs free for longer, and so on (each window's procs are free for its whole
 * duration). partition NULL or "": every node; else the nodes of that class (and the
 * unclassed ones). Writes up to max, returns how many there are (0: nothing free, or
 * out of memory with errno ENOMEM, or no such class: ENOENT). */
size_t batch_backfill_windows(struct batch_engine *e, int64_t now, const char *partition,
                              struct batch_bf_window *out, size_t max);

#endif

/*
 * engine.h - the volunteer client's scheduling policy core (BOINC-like), pure C with no
 * I/O, no clock and no globals: every function takes the current time `now` (seconds,
 * any epoch) and works on the plain structs below. The live client and the emulator
 * (emulate.h) drive the same code:
 *
 *   every poll    engine_tick(e, now, on)          account the time since the last call
 *                 engine_schedule(e, now)          "what to run now": tasks to start/preempt
 *                 engine_poll(e, now, &act)        "whom to ask for how much work": at most
 *                                                  one scheduler RPC or master fetch
 *                 engine_rpc_done / engine_master_done   the outcome of that action
 *   on events     engine_task_add (via rpc_done), engine_task_done, engine_host_avail
 *
 * Sources: seed 000 (BOINC 2004: resource debt, min_rpc_time, backoff, master fetch,
 * sessions, water marks) and seed 002 (current BOINC: round-robin simulation, shortfall,
 * WRR + EDF, REC priority, work fetch, per-resource backoff). docs/client-scheduling.md
 * describes the design and both priority policies.
 *
 * Units: time in seconds; work in "instance-seconds" (seconds a task keeps `usage`
 * instances of its processor type busy); credit (REC, exp_avg_cpu) in peak FLOPs
 * (instance-seconds x the type's peak FLOPS), so CPUs and GPUs are comparable.
 */
#ifndef GRIDNODE_ENGINE_H
#define GRIDNODE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#define ENGINE_MAX_PTYPES 8    /* CPU + up to 7 GPU types */
#define ENGINE_MAX_ENDPOINTS 8 /* scheduler endpoints per project */
#define ENGINE_NAME_MAX 64
#define ENGINE_URL_MAX 256

/* ---- small deterministic RNG (xoshiro256**), shared with the emulator ---- */
struct engine_rng {
    uint64_t s[4];
};
void engine_rng_seed(struct engine_rng *r, uint64_t seed);
uint64_t engine_rng_next(struct engine_rng *r);
double engine_rng_uniform(struct engine_rng *r); /* [0, 1) */

/* ---- configuration ---- */
enum engine_policy {
    ENGINE_POLICY_REC = 0,      /* SP(P) = -REC(P)/share(P), REC half-life 10 days */
    ENGINE_POLICY_DEBT2004 = 1, /* resource_debt = share / exp_avg_cpu, water marks */
};
enum engine_fetch {
    ENGINE_FETCH_DEADLINE = 0, /* default: fetch only what can meet its deadline */
    ENGINE_FETCH_BOINC = 1,    /* BOINC-faithful: fill the buffer to max_buf */
};

struct engine_config {
    enum engine_policy policy;   /* rec */
    enum engine_fetch fetch;     /* deadline */
    double min_buf;              /* 8640 (0.1 day): fetch when saturated time < min_buf */
    double additional_buf;       /* 43200 (0.5 day): max_buf = min_buf + additional_buf */
    double time_slice;           /* 3600: WRR time slice */
    double poll_period;          /* 60: work fetch is considered at most this often */
    double rec_half_life;        /* 864000 (10 days) */
    double debt_decay;           /* 604800: exp_avg_cpu decays by e per week (2004) */
    double rpc_backoff_min;      /* 60: failed RPC n: min(min*2^n, max) x U[0.5, 1] */
    double rpc_backoff_max;      /* 14400 (4 h) */
    double rsc_backoff_min;      /* 600: first per-(project, type) work-fetch backoff */
    double rsc_backoff_max;      /* 86400: its cap */
    int master_fetch_period;     /* 10: re-read the master list every N consecutive failures */
    double report_cushion;       /* 86400: report a result once its deadline is this close */
    double report_max_delay;     /* 86400: ... or once it has waited this long */
    double report_batch;         /* 0.25: deadline mode may spend this fraction of a
                                    result's reporting reserve waiting for another RPC
                                    to its project, so that reports share RPCs */
    double deadline_slack;       /* 0.84: deadline mode keeps this fraction of a task's
                                    latency for reporting (server outages, host off) ... */
    double deadline_reserve_max; /* 43200: ... but never more than this */
    double avail_half_life;      /* 864000: averaging of the host's on-fraction */
    double fetch_min_jobs;       /* 2: deadline mode asks a project for work only when
                                    room for this many of its jobs is free, unless an
                                    instance of the type is idle now */
    int burst;                   /* 1: deadline mode fetches in batches from a project
                                    whose deadlines leave less than min_buf of queue
                                    (engine_fetch.c); 0: never */
    double burst_slack;          /* deadline_slack for such projects */
    double burst_min_jobs;       /* fetch_min_jobs for such projects */
};

/* Fills c with BOINC's defaults (above). */
void engine_config_defaults(struct engine_config *c);
/* Checks ranges; returns NULL or a static message naming the bad field. */
const char *engine_config_check(const struct engine_config *c);
/* "rec" / "debt2004"; -1 if unknown. */
int engine_policy_parse(const char *s);
const char *engine_policy_name(enum engine_policy p);
/* "deadline" / "boinc"; -1 if unknown. */
int engine_fetch_parse(const char *s);
const char *engine_fetch_name(enum engine_fetch f);

/* ---- state ---- */
struct engine_ptype {
    char name[ENGINE_NAME_MAX]; /* "cpu" is index 0; GPU types follow */
    int ninstances;             /* instances the engine may use (the host's, less `reserved`) */
    double flops;               /* peak FLOPS of one instance (any unit, used for credit) */
    /* instances taken by work the engine does not schedule, such as a cluster's
       parallel ranks (engine_ptype_reserve) */
    int reserved;
};

/* Per (project, processor type) work-fetch state (seed 002). */
struct engine_rsc {
    double backoff_interval; /* 0 = not backed off; doubles up to rsc_backoff_max */
    double backoff_until;
    double latency;  /* deadline - received of the last task of this type; 0 = unknown */
    double job_work; /* moving average of one task's usage x estimated duration */
};

struct engine_project {
    char name[ENGINE_NAME_MAX];
    double share;
    char endpoints[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    int nendpoints;
    char master[ENGINE_URL_MAX]; /* "" = none */
    double rec;                  /* recent estimated credit (FLOPs, decayed) */
    double exp_avg_cpu;          /* 2004: exponentially decayed processing (FLOPs) */
    double min_rpc_time;         /* earliest next RPC; 0 = now */
    double backoff_until;        /* end of the exponential backoff (min_rpc_time may be
                                    earlier for deadline probes, see engine_fetch.c) */
    int nrpc_failures;
    double last_fail;   /* when the last contact failed (deadline probes) */
    int master_pending; /* re-read the master list before the next RPC */
    double master_time; /* earliest time for that re-read */
    int rpc_requested;  /* the server asked to be contacted */
    int suspended, no_new_work;
    double oldest_live; /* receipt of its oldest live task (reports_due scratch) */
    struct engine_rsc rsc[ENGINE_MAX_PTYPES];
    /* counters, for reports */
    unsigned long rpcs_ok, rpcs_failed, master_fetches;
};

enum engine_task_state {
    ENGINE_TASK_QUEUED = 0, /* never started, or preempted (restarts from its checkpoint) */
    ENGINE_TASK_RUNNING,
    ENGINE_TASK_DONE,    /* finished, waiting to be reported */
    ENGINE_TASK_ABORTED, /* deadline passed before it started (deadline mode) */
};

struct engine_task {
    uint64_t id;   /* caller's id (unique) */
    uint64_t user; /* caller's cookie, never read by the engine */
    int project, ptype;
    double usage;        /* instances of ptype it keeps busy (1 = one CPU or GPU) */
    double est_duration; /* estimated run time on `usage` instances */
    double received, deadline;
    int state;
    double elapsed;            /* run time so far (reverted to the checkpoint on restart) */
    double fraction_done;      /* 0..1 as reported by the application; 0 = unknown */
    double checkpoint_elapsed; /* elapsed at the last checkpoint */
    double episode_start;      /* when it was last started */
    double episode_elapsed;    /* elapsed when it was last started */
    double completed;          /* when it finished (DONE) */
    double lost;               /* run time lost to restarts from checkpoints */
    uint64_t seq;              /* arrival order (FIFO per project) */
    int preempt_wanted;        /* running on only until its next checkpoint */
    unsigned wait_rank;        /* > 0: waits for a preempt_wanted task to give way */
    long run_pos;              /* index in e->running, -1 if not running */
    /* round-robin simulation results */
    int deadline_miss;
    double rr_finish; /* projected completion time */
};

/* What the last round-robin simulation found for one processor type (seed 002). */
struct engine_rr_type {
    double shortfall; /* instance-seconds needed to keep all instances busy to max_buf */
    double idle_now;  /* instances idle now */
    double saturated; /* seconds from now during which all instances are busy */
    double busy;      /* EDF simulation of deadline-miss tasks: all instances busy until */
    double queued;    /* remaining instance-seconds of work of this type */
    int nmiss;        /* tasks flagged deadline_miss */
};

/* One scheduling decision: indices into e->tasks, valid until the next engine call. */
struct engine_sched {
    int changed; /* 0: nothing to do */
    size_t *start, nstart;
    size_t *preempt, npreempt;
};

enum engine_act_kind { ENGINE_ACT_NONE = 0, ENGINE_ACT_RPC, ENGINE_ACT_MASTER };
enum engine_act_reason {
    ENGINE_WHY_NONE = 0,
    ENGINE_WHY_REQUESTED, /* the server asked for a contact */
    ENGINE_WHY_REPORT,    /* results near their deadline or waiting too long */
    ENGINE_WHY_FETCH,     /* work fetch */
    ENGINE_WHY_RETRY,     /* next endpoint of a session whose previous endpoint failed */
    ENGINE_WHY_MASTER,    /* master list re-read */
};

struct engine_request {
    double secs;      /* instance-seconds wanted */
    double instances; /* idle instances to fill */
    double delay;     /* estimated delay before a new task could start (for the server) */
};

struct engine_action {
    int kind;   /* enum engine_act_kind */
    int reason; /* enum engine_act_reason */
    int project;
    int endpoint;    /* RPC: index into the project's endpoints */
    const char *url; /* endpoint or master URL */
    struct engine_request req[ENGINE_MAX_PTYPES];
    int fetch;            /* 1 if any req[] asks for work */
    const size_t *report; /* indices into e->tasks of results to report */
    size_t nreport;
};

/* A task handed out by a server. */
struct engine_new_task {
    uint64_t id, user;
    int ptype;
    double usage, est_duration, deadline;
};

struct engine_reply {
    int ok; /* 0: the RPC did not reach the server (the others are ignored) */
    const struct engine_new_task *tasks;
    size_t ntasks;
    double request_delay; /* the server's "do not contact me before now + this" */
};

struct engine {
    struct engine_config cfg;
    struct engine_rng rng;
    struct engine_ptype ptypes[ENGINE_MAX_PTYPES];
    int nptypes;
    struct engine_project *projects;
    int nprojects, projects_cap;
    struct engine_task *tasks;
    size_t ntasks, tasks_cap;
    uint64_t next_seq;
    size_t *running; /* indices of the RUNNING tasks (any order), capacity tasks_cap */
    size_t nrunning;
    size_t nfinished;           /* DONE or ABORTED tasks waiting to be reported */
    unsigned long finished_gen; /* changes whenever the finished set does */
    unsigned long report_gen;   /* finished_gen when report_at was computed */
    double report_at;           /* no finished task is due for reporting before */

    double last_tick; /* < 0 before the first tick */
    int host_on;
    double on_frac; /* averaged fraction of time the host is on */

    struct engine_rr_type rr[ENGINE_MAX_PTYPES];
    int rr_dirty;
    double rr_time;

    int sched_dirty;
    int preempt_ready;   /* a preempt_wanted task checkpointed */
    double next_resched; /* engine_schedule has something to do by then at the latest */
    struct engine_sched sched;

    /* RPC session in progress (seed 000: each endpoint tried once per session) */
    int session_project; /* -1 = none */
    int session_endpoint;
    int session_reason;
    double last_fetch_check;
    int get_work[ENGINE_MAX_PTYPES];   /* debt2004: get-work session open for this type */
    double starved[ENGINE_MAX_PTYPES]; /* deadline mode: instances the top project lacks */
    struct engine_action act;          /* the action last returned by engine_poll */

    /* scratch memory for the simulations and the scheduler, grown as needed */
    void *work;
    size_t work_cap;
    size_t *report; /* engine_action.report */
    size_t report_cap;
    unsigned long rr_runs, sched_runs;
};

/* ---- lifetime and set-up (engine.c) ---- */

/* Returns a new engine with one processor type "cpu" of ncpus instances of cpu_flops
 * each, or NULL (ENOMEM, or EINVAL if cfg fails engine_config_check or ncpus < 0). The
 * RNG (RPC backoff randomisation) is seeded with seed. */
struct engine *engine_new(const struct engine_config *cfg, int ncpus, double cpu_flops,
                          uint64_t seed);
/* NULL-safe; sets *ep to NULL. */
void engine_destroy(struct engine **ep);
/* Adds a GPU type; returns its index or -1 (EINVAL, ENOSPC). */
int engine_ptype_add(struct engine *e, const char *name, int ninstances, double flops);
/* n instances of type t are taken by work the engine does not schedule (a cluster's
 * parallel ranks, as BOINC treats non-BOINC CPU load): from now on the engine
 * schedules, simulates and fetches for the other instances only (running tasks over
 * the new count are preempted at the next engine_schedule). n is clamped to 0..the
 * host's count; tasks of any usage up to the host's count are still accepted. */
void engine_ptype_reserve(struct engine *e, int t, int n);
/* Returns the index of the named type, or -1. */
int engine_ptype_find(const struct engine *e, const char *name);
/* Adds a project; endpoints are copied. Returns its index or -1 (EINVAL: bad share,
 * no endpoint and no master, a name or URL too long; ENOMEM). */
int engine_project_add(struct engine *e, const char *name, double share,
                       const char *const *endpoints, int nendpoints, const char *master);
/* Adds a task for project p; returns its index or -1 (EINVAL, ENOMEM). Clears the
 * (project, type) work-fetch backoff, as any task of that type arriving does. */
long engine_task_add(struct engine *e, double now, int project, const struct engine_new_task *t);
/* Index of the task with this id, or -1. Linear. */
long engine_task_find(const struct engine *e, uint64_t id);
/* Removes the task at index i (the last task takes its index). */
void engine_task_remove(struct engine *e, size_t i);

/* ---- time and events (engine.c) ---- */

/* Accounts the time since the previous tick: running tasks accrue elapsed time if the
 * host was on, REC and exp_avg_cpu decay and are charged, the on-fraction is updated.
 * `on` is the host state from now on. Time never goes backwards (earlier now: ignored). */
void engine_tick(struct engine *e, double now, int on);
/* The host went off (tasks stop and will restart from their checkpoints) or on. */
void engine_host_avail(struct engine *e, double now, int on);
/* Task i finished: it becomes DONE and waits to be reported. */
void engine_task_done(struct engine *e, double now, size_t i);
/* Task i checkpointed: its run time at the checkpoint is checkpoint_elapsed. The
 * caller must report checkpoints: a task the scheduler wants to preempt
 * (preempt_wanted) is preempted at the engine_schedule that follows its checkpoint. */
void engine_task_checkpoint(struct engine *e, size_t i, double checkpoint_elapsed);
/* The estimated remaining run time of task t. */
double engine_task_remaining(const struct engine_task *t);

/* ---- priorities (engine.c) ---- */

/* Scheduling priority of every project for the configured policy, higher first:
 * rec: -REC_norm/share_norm; debt2004: share_norm/exp_avg_norm. extra[p] (may be NULL)
 * is added to the project's REC or exp_avg_cpu first (queued work, picks so far). */
void engine_priorities(const struct engine *e, const double *extra, double *prio);
/* The RPC backoff for n consecutive failures: min(min*2^n, max) x U[0.5, 1]. */
double engine_rpc_backoff(struct engine *e, int n);
/* Per-(project, type) backoff after a request for type t got nothing: the interval
 * doubles from rsc_backoff_min up to rsc_backoff_max. */
void engine_rsc_backoff(struct engine *e, double now, int project, int ptype);

/* ---- round-robin and EDF simulation (engine_rrsim.c) ---- */

/* Runs the round-robin simulation of all unfinished tasks from now, filling e->rr[]
 * and each task's deadline_miss and rr_finish, then the EDF simulation of the
 * deadline-miss tasks (e->rr[].busy). Returns 0, or -1 on ENOMEM (e->rr unchanged). */
int engine_rr_simulate(struct engine *e, double now);
/* The time after its issue by which the engine plans to have finished a task of this
 * latency (deadline - issue) and estimated run time: all of it in boinc mode; in
 * deadline mode the latency less a reserve for reporting through server outages and
 * off periods, min(deadline_slack * latency, deadline_reserve_max), but at least 1.5
 * times the run time when the latency allows. */
double engine_plan_window(const struct engine *e, int project, int ptype, double latency,
                          double est);
/* 1 if project p fetches type t in batches (burst, engine_fetch.c). */
int engine_burst(const struct engine *e, int p, int t);
/* The deadline used for planning: issue + engine_plan_window. */
double engine_task_plan_deadline(const struct engine *e, const struct engine_task *t);
/* The most instance-seconds of new work of type t, with this latency and run time, that
 * a fluid EDF schedule of the queued work could still finish within its plan window.
 * If delay is not NULL it receives when such work would start under that schedule:
 * the queued work due before it, spread over the instances. */
double engine_room(struct engine *e, double now, int ptype, int project, double latency, double est,
                   double *delay);

/* ---- task scheduling (engine_sched.c) ---- */

/* Decides what runs now (seed 002: per GPU type then CPU, deadline-miss tasks by
 * earliest deadline, then the others by project priority charging a copy of REC per
 * pick; running tasks keep their time slice and are preempted only right after a
 * checkpoint, so that no work is lost; until then they run on with preempt_wanted set). Applies it
 * to the task states and returns the changes, valid until the next engine call; changed == 0 when
 * nothing had to be recomputed. NULL on ENOMEM. */
const struct engine_sched *engine_schedule(struct engine *e, double now);

/* ---- RPC policy and work fetch (engine_fetch.c) ---- */

/* Returns in *act the next scheduler action, if any (ENGINE_ACT_NONE otherwise). The
 * caller performs it and reports with engine_rpc_done / engine_master_done before the
 * next engine_poll. Order: a session's next endpoint, a master list re-read, a contact
 * the server asked for, results to report (with a piggy-backed request if the project is
 * the top one for a type), work fetch (at most once per poll_period). */
void engine_poll(struct engine *e, double now, struct engine_action *act);
/* The outcome of an ENGINE_ACT_RPC: on success the reported results are removed, the
 * new tasks added, failures and backoff cleared, per-type backoffs updated; on failure
 * the next endpoint is tried in the same session, or after the last one the project
 * backs off (and every master_fetch_period failures re-reads the master list).
 * Returns 0, or -1 (ENOMEM: some new tasks were not added; EINVAL: no such action). */
int engine_rpc_done(struct engine *e, double now, const struct engine_action *act,
                    const struct engine_reply *reply);
/* The outcome of an ENGINE_ACT_MASTER: ok with the endpoints listed there. The list
 * replaces the project's; any endpoint not known before resets nrpc_failures and the
 * backoff. A failure counts as an RPC failure. */
void engine_master_done(struct engine *e, double now, int project, int ok,
                        const char *const *endpoints, int n);

/*
 * The task count a host of one cluster may still ask for (issue 28 3b): what it is to
 * hold when the reply arrives, less what it holds now, plus what it is expected to finish
 * while the request travels (at most what it holds). It is to hold what its slots
 * measurably finish over cover_s (two round trips and their variation,
 * netopts_rtt_cover_s) plus one task a slot, at most cap (slots x (1 + prefetch_max));
 * before any finish rate is known (0), cap. finish_rate: tasks the slots finish per
 * second, from the run times observed (slots / their moving average), not the server's
 * estimates: a host running long tasks holds few beyond its slots (they would wait here
 * while other hosts idle at the job's end), one running short tasks across a long or
 * varying round trip holds enough of them. rtt_s: the smoothed round trip. Never
 * negative; pure.
 */
double engine_prefetch_room(double cap, int slots, double held, double finish_rate, double rtt_s,
                            double cover_s);

#endif

/*
 * live_int.h - inside the live batch role (`gridnode batch -c FILE`; its entry point is
 * live.h): the engine (batch.h) driven by real requests and by the cluster managers it
 * schedules onto. The declarations of its files, for those files and their unit tests.
 *
 * Its files, each calling only the ones listed below it:
 *
 *   live.c         start-up, the daemon callbacks, the cycle and the group commit
 *   livestats.c    the statistics page, stats.json and /metrics
 *   livereq.c      the user vocabulary: SUBMIT, PSUBMIT, JOB_LIST, JOB_GET, CANCEL,
 *                  JOB_CTL, NODE_LIST; hands Maui's commands to livecmd.c
 *   livecmd.c      Maui's queries (SHOWQ, CHECKJOB, ESTIMATE, DIAGNOSE, SITE_INFO) and
 *                  the table of Maui's commands
 *   liveresvcmd.c  the reservation commands (RESV_LIST/SET/RELEASE, RESERVE)
 *   livemaui.c     Maui's node and site commands (SHOWBF, CHECKNODE, SHOWSTATS,
 *                  DIAGNOSE nodes; issue 27)
 *   liveclu.c      one DEALER per cluster manager: resynchronisation, the EVENTS feed,
 *                  starts (PSUBMIT with hosts; SUBMIT with host for a task with files),
 *                  cancels, reconciliation after restarts
 *   livemigrate.c  a checkpointing task whose host left moves to the host chosen next
 *                  (TASK_PIN), keeping its cluster job and checkpoint (issue 26)
 *   livestart.c    the start message of an element: PSUBMIT with hosts (and the ranks'
 *                  files), or SUBMIT with host for a one-task element with files
 *   livestage.c    files to and from the clusters (issue 26): a start's inputs offered
 *                  (FILE_HAVE, FILE_PUT) before its SUBMIT, an ended task's outputs
 *                  copied back (JOB_GET, FILE_GET) before it counts as ended
 *   livecarry.c    a moving task's checkpoint copied from its old cluster (JOB_GET,
 *                  FILE_GET) to go with its SUBMIT to another cluster (issue 26)
 *   livefiles.c    the role's file store (daemon/filestore.h): FILE_HAVE, FILE_PUT,
 *                  FILE_GET, a job's files at SUBMIT (table "jobdata"), a task's copied
 *                  outputs (table "elemfiles")
 *   liveorder.c    cancels owed to clusters (table "orders"), sent again at each resync
 *                  until a cluster took them
 *   liveout.c      requests to the clusters: their records (deadlines) and the queue
 *                  sent after the turn's commit
 *   liveresv.c     reservations in memory, in the store and in the engine
 *   livereply.c    what the commands share: error replies, paging, name lists, admins
 *   livehost.c     the clusters' hosts as engine nodes (one per core), their classes
 *   livepurge.c    PURGE and jobs.retention_s: finished jobs removed, their records
 *                  deleted (markers resumed at restart), their fairshare usage kept
 *   liveacct.c     accounting records of finished jobs, ACCT, their retention (issue 27)
 *   livedep.c      job dependencies (issue 27): the check at submission, the re-check
 *                  of the waiting jobs each turn
 *   livejob.c      jobs and their elements in memory and in the store (records); the
 *                  turn's clock
 *
 * Time: the engine runs in milliseconds of the wall clock (config unit_per_s = 1000),
 * kept non-decreasing. Job ids are the role's own; a job is either a task array
 * (SUBMIT, ntasks elements of one process each) or a parallel job (PSUBMIT, one
 * element of procs processes). Element e of job J is engine job (J << 24) | e and is
 * started on a cluster with the key "batch:<incarnation>:<J>.<e>", or
 * "batch:<incarnation>:<J>.<e>.<run>" once a JOB_CTL requeue gave it a run number > 0.
 */
#ifndef GRIDNODE_BATCH_LIVE_INT_H
#define GRIDNODE_BATCH_LIVE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/acct.h"
#include "daemon/purgeq.h"
#include "roles/batch/engine/batch.h"
#include "roles/batch/live/live.h"
#include "roles/batch/liveconf.h"
#include "wire/wire.h"

struct loop;
struct daemon;
struct store;
struct statspage;
struct fileoffer;

#define LIVE_ELEM_BITS 24
#define LIVE_MAX_TASKS 10000000u /* SUBMIT ntasks cap (wire) fits 24 bits */
#define LIVE_FEED_WINDOW 256     /* pending elements of one array inside the engine */
#define LIVE_PAGE 256            /* element records are allocated this many at a time */
#define LIVE_DEFAULT_WALLTIME_S 3600
#define LIVE_MAX_CLUSTERS 64
#define LIVE_REQ_TIMEOUT_MS 5000   /* a cluster silent this long past a deadline is down */
#define LIVE_EVENTS_WAIT_MS 1000   /* long-poll of EVENTS */
#define LIVE_REFUSED_BLOCK_MS 1000 /* a host that refused a start takes no work this long */
#define LIVE_LIST_MAX (1u << 20)   /* JOBS page bytes, as the cluster */

enum el_state {
    EL_PENDING = 0,
    EL_STARTING, /* the start is decided and stored; PSUBMIT sent or to be (re)sent */
    EL_RUNNING,  /* the cluster accepted it */
    EL_DONE,
    EL_FAILED,
    EL_KILLED,
    EL_CANCELLED,
};

/*
 * One element: a task of an array, or the whole parallel job. Only elements that were
 * given to the engine, started or otherwise touched have one (a record, in memory and,
 * once it left "pending", in the store); every other element of an array is implicit:
 * pending (cancelled once its job is), with nothing set (live_elem_peek).
 */
struct lelem {
    int64_t start, end; /* wall ms; 0 unknown (start: the cluster's once it reports it) */
    int64_t decided;    /* wall ms of the cycle that started it; 0 unknown */
    int64_t heard;      /* the instant (live_now) the engine was told the cluster's start;
                           0 none (--start-delays replays it) */
    uint64_t cjob;      /* the cluster's job id, 0 unknown */
    int32_t exit;
    uint8_t state, signal;
    int8_t cl;            /* cluster index, -1 */
    bool in_engine : 1;   /* known to the engine (pending or running there) */
    bool want_cancel : 1; /* cancel once the cluster's job id is known */
    bool dirty : 1;       /* record to write at the commit */
    bool used : 1;        /* this slot of its page holds a record */
    char *reason;         /* why pending / how it ended, or NULL */
    /* issue 26 (livestage.c; memory only, redone after a restart): its start waits for
       its inputs to reach its cluster; its outputs are being copied back (the state
       it ends in once they are: pull_state) */
    bool staging : 1;
    bool pulling : 1;
    uint8_t pull_state;
    char *hosts; /* comma-separated host per rank while starting/running/ended */
    /* run number (JOB_CTL requeues of it), part of its cluster key */
    uint32_t run;
    uint32_t lost; /* runs lost to a host or process (issue 24), each rerun or move */
    /* issue 26 (livemigrate.c): pending after its host left, its cluster job kept (it
       holds the task's checkpoint) to be moved to the host chosen next (TASK_PIN);
       0: none. Stored; absent in older records */
    uint64_t mig_cjob;
    int8_t mig_cl;    /* the cluster of mig_cjob */
    uint32_t mig_run; /* the run of mig_cjob's key: run moves on when the move goes to
                         another cluster (a new key there), and back for a TASK_PIN.
                         Stored; absent in older records: run */
    /* issue 26: a parallel job with --checkpoint-s run again: the cluster job of the
       run before, whose ranks' complete checkpoint generation the next run starts from
       when it runs on the same cluster (PSUBMIT "ckpt_from"); 0: none. Stored */
    uint64_t ck_cjob;
    int8_t ck_cl;
    /* JOB_CTL requeue (issue 15): this run is being cancelled at its cluster; once the
       cluster reports it ended it goes back to pending with run + 1 (stored) */
    bool want_requeue : 1;
};

struct ljob {
    uint64_t id;
    bool parallel, shell, hold, early, dirty, edirty;
    bool listed;  /* in L->dirty (live_job_dirty, live_elem_mark) */
    bool network; /* submit --network (issue 23): passed on in each PSUBMIT to a cluster */
    bool grid;    /* from a metascheduler: a peer key submitted it, or it took a site
                   * reservation (issue 25: batch.ini [grid]) */
    uint8_t queue;
    uint32_t ntasks, procs, ppn;
    int64_t mem_mb, disk_mb, limit_s;
    int64_t cpu_s; /* a parallel job's maximum CPU seconds (--cpu), sent on; 0 = none */
    int64_t submitted, finished; /* wall ms */
    char *name, *user, *group, *account, *class_, *qos, *key, *resv;
    uint32_t nfed; /* elements 0..nfed-1 were given to the engine */
    uint32_t nended, nfailed, nrun, nstarted;
    bool cancelled;
    uint32_t requeues; /* JOB_CTL requeues (issue 15; Slurm's Restarts) */
    /* the element records (livejob.c): pages of LIVE_PAGE slots by increasing base,
     * allocated once one of their elements gets a record */
    struct lpage **pages;
    uint32_t npages, cappages;
    uint32_t nrec;    /* elements with a record */
    uint32_t nqueued; /* records pending inside the engine (the feed's window) */
    /* submit --export / --chdir (issue 15, wire/jobenv.h): passed on in each PSUBMIT to
       a cluster; NULL: none */
    char **env;
    char *cwd;
    /* submit --dependency (issue 27, livedep.c): the terms still waited for (NULL: none;
       while set no element goes to the engine); why the role cancelled it
       (DependencyNeverSatisfied), NULL: none */
    struct depend *dep;
    char *dep_end;
    /* submit --constraint (issue 27, lib/constraint.h): canonical text, NULL: none;
       given to the engine with each element (its hosts' features: livehost.c) */
    char *constraint;
    /* issue 26 (livefiles.c): "inputs", "outputs" and "checkpoint_s" as one stored
       msgpack map (table "jobdata"), NULL: none; such a job's elements start with a
       SUBMIT naming the host (liveclu.c) and their files travel (livestage.c) */
    void *data;
    size_t data_len;
};

/* n element slots from element `base` on (n = LIVE_PAGE, fewer for the last page of a
 * job: a one-element job's page holds one slot, not LIVE_PAGE); dirty: a slot has
 * el.dirty. */
struct lpage {
    uint32_t base, n;
    uint32_t nqueued; /* its records pending inside the engine */
    bool dirty;
    struct lelem el[];
};

struct lhost {
    char name[BATCH_NAME_MAX];
    char sid[80];
    /* engine nodes, one per core: slot0 .. slot0+nbase-1, then xslot[0 .. nslots-nbase)
     * for cores the host gained later (live_host_slot); those from ncores on are kept
     * down (the host offers fewer cores now) */
    int32_t slot0, nslots, nbase, ncores;
    int32_t *xslot;
    uint64_t mem_mb, disk_mb; /* as last reported */
    char features[1024 + 1];  /* as last reported (issue 27, the cluster's cap), canonical */
    int64_t blocked_until;    /* monotonic ms: no new work after a refused start, or 0 */
    int64_t changed;          /* wall ms it last went up or down (DIAGNOSE nodes), 0 never */
    bool up, seen, seen_up;
};

struct lreq {
    uint64_t rid;
    int kind; /* enum in liveclu.c */
    uint64_t arg;
    int64_t deadline; /* monotonic ms */
};

struct lclu {
    int idx;
    char name[BATCH_NAME_MAX];
    char ep[256];
    void *sock;
    struct curve_watch *watch; /* logs a failed CURVE handshake (daemon/curve.h) */
    int st;                    /* enum in liveclu.c */
    bool events_ok;            /* the cluster has EVENTS (else: polling fallback) */
    bool synced;               /* its hosts are in the engine and its jobs reconciled */
    char epoch[80];
    uint64_t next;    /* next event seq */
    int64_t retry_at; /* monotonic ms of the next resync attempt when down */
    int64_t poll_at;  /* polling fallback: next poll */
    struct lhost *hosts;
    uint32_t nhosts, caphosts;
    struct lreq *req;
    uint32_t nreq, capreq;
    uint32_t reconciling; /* outstanding JOB_GET / PSUBMIT of a resync */
    /* livestage.c (issue 26): files being offered to it, or known whole there */
    struct fileoffer *offer; /* daemon/fileoffer.h; NULL: none yet */
};

/* An administrative or site reservation as stored (liveresv.c). */
struct lresv {
    char name[BATCH_NAME_MAX], owner[BATCH_NAME_MAX];
    int64_t start, end; /* wall ms */
    int32_t tasks, procs;
    int64_t mem_mb, disk_mb;
    char *nodes;                 /* comma-separated engine node names it holds */
    char *acl[BATCH_CRED_KINDS]; /* comma-separated names, or NULL */
    uint64_t job;                /* the batch job bound to it, 0 */
    bool site;                   /* RESERVE: held for exactly one job */
    bool in_engine;
};

/* An ended task's outputs being copied from its cluster (livestage.c). */
struct lpull {
    uint64_t eid, cjob;
    int cl;
    int st;     /* enum in livestage.c */
    void *list; /* the task's "files" (and "files_note") as a msgpack map, NULL */
    size_t list_len;
    uint32_t cur, nfiles; /* the file being copied */
};

/* A moving task's checkpoint being copied from its old cluster (livecarry.c). */
struct lcarry {
    uint64_t eid, cjob; /* the element; the kept cluster job */
    int cl;             /* its cluster */
    int st;             /* enum in livecarry.c */
    void *list;         /* {"inputs": the checkpoint's files} as msgpack, NULL */
    size_t list_len;
    uint32_t cur, nfiles; /* the file being copied */
    uint64_t issue;       /* the old cluster's issue that made it */
    char *why;            /* why there is none (failed), NULL */
};

/* A message to a cluster, sent after the turn's commit. */
struct lout {
    int cl;
    void *data; /* NULL: a start of element eid to build after the commit */
    size_t len;
    uint64_t eid;
};

struct live {
    struct batch_ini cfg; /* .eng the engine's settings, .live the driver's */
    struct batch_engine *eng;
    struct loop *loop;
    struct daemon *daemon;
    struct endwait *endwait; /* held JOB_WAITs (daemon/endwait.h, issue 28) */
    struct store *store;
    int lockfd;
    int t_meta, t_jobs, t_elems;
    int t_acct;                /* liveacct.c */
    struct acct_sweep acct_sw; /* liveacct.c */
    char inc[40];
    uint64_t next_id;
    bool meta_dirty, turn_failed;
    /* jobs by increasing id */
    struct ljob **jobs;
    uint32_t njobs, capjobs;
    /* the jobs changed this turn (dirty or edirty), for the commit: a turn walks them,
     * not every job (issue 28: three walks of every job a turn cost 8 ms a request at
     * 10^5 pending jobs); dirty_all: a push failed (no memory), walk every job */
    struct ljob **dirty;
    uint32_t ndirty, capdirty;
    bool dirty_all;
    bool dep_seen; /* a job waited for a dependency since the start (livedep.c) */
    /* engine node index -> (cluster, host) */
    int16_t *slot_cl;
    int32_t *slot_host;
    int32_t nslots, capslots;
    struct lclu cl[LIVE_MAX_CLUSTERS];
    int ncl;
    int default_cl;
    /* the cycle */
    bool want_cycle;
    int64_t last_cycle; /* monotonic ms */
    int64_t engine_now; /* the last cycle's instant (wall ms) */
    int64_t turn_now;   /* this turn's instant (live_now), 0 until asked */
    /* the last `flex` RESERVE of this turn settled by an estimate (liveresvcmd.c, issue
     * 28): its request, the start asked and the start it got; forgotten at the commit */
    struct live_flex_hint {
        bool valid;
        int32_t tasks;
        struct batch_res per_task;
        char cls[64];
        int64_t want, dur, start;
    } flex_hint;
    int wake_timer;      /* one-shot timer of a cycle put off to the next ms, 0 */
    int64_t next_wakeup; /* wall ms of the engine's next boundary */
    uint64_t req_seq;
    struct lout *out;
    uint32_t nout, capout;
    uint64_t cycles, starts, refusals;
    /* issue 26: the file store (livefiles.c), its tables; the elements whose inputs
       reached their cluster or failed to (livestage.c; liveclu.c starts them); the
       copies of outputs under way */
    struct filestore *files;
    int t_files, t_jobdata, t_elemfiles;
    bool files_sweep_soon; /* a purge removed a job with files: sweep at the next tick */
    uint64_t *stage_ready;
    uint32_t nready, capready;
    struct lpull *pulls;
    uint32_t npulls, cappulls;
    struct lcarry *carries; /* livecarry.c */
    uint32_t ncarries, capcarries;
    /* cancels owed to clusters (liveorder.c, table "orders") */
    struct lorder *orders;
    uint32_t norders, caporders;
    uint64_t order_seq;
    int t_orders;
    /* purged jobs (livepurge.c): ids whose element records are still being deleted
       (markers "purge/<id>" in meta); the kept fairshare usage of purged jobs (table
       "fshist"), one entry per window and user/group/account */
    struct purgeq purge;
    struct lfsh *fsh;
    uint32_t nfsh, capfsh;
    uint64_t fsh_next; /* key of the next new entry */
    int t_fshist;
    long retention_ticks;
    /* reservations (liveresv.c) */
    int t_resv;
    struct lresv *resv;
    uint32_t nresv, capresv;
    /* statistics (livestats.c): counters since the role started */
    struct statspage *stats;
    uint64_t first_id;             /* next_id at start: submitted = next_id - first_id */
    uint64_t n_ended, n_failed;    /* elements that ended (failed: not done) */
    uint64_t n_backfilled;         /* elements started by backfill */
    uint64_t grid_released;        /* site reservations [grid] local_wait_bound released */
    double cycle_s, cycle_s_total; /* the last cycle's duration, and all of them */
};

/* live.c (live_main: live.h) */

/* livepurge.c: the markers and kept usage read back (after the engine is made, before
 * live_load), freed; a bounded batch of purged jobs' element records deleted (each
 * turn, before the commit); the retention sweep (once a second); PURGE; whether job id
 * was purged and its element records are still being deleted (while loading only). */
int live_purge_load(struct live *L);
void live_purge_free(struct live *L);
void live_purge_step(struct live *L);
void live_purge_tick(struct live *L);
void live_purge_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
bool live_purge_pending(const struct live *L, uint64_t id);

/* liveacct.c (issue 27): the records of the finished jobs whose records are written
 * this turn (call before live_save_dirty): 0, or -1 (store). ACCT; the retention sweep
 * (once a second). */
int live_acct_save_dirty(struct live *L);
void live_acct_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void live_acct_tick(struct live *L);
/* Finished job j is purged: its record is written unless it has one; 0, or -1 (store). */
int live_acct_purging(struct live *L, const struct ljob *j);
/* livedep.c (issue 27): "dependency" of m checked (ids known, owners) into *out (NULL:
 * none): 0, or -1 with why; the waiting jobs re-checked at a commit of a turn that
 * changed a job; the reason a job shows ("Dependency: TERM" or its end): false: none. */
struct depend;
int live_dep_submit(struct live *L, const msgpack_object *m, struct depend **out, char *why,
                    size_t wl);
void live_dep_step(struct live *L);
/* The first check of new job j (its id set, its record not yet written): a dependency
 * that holds already is dropped, one that never can cancels it. */
void live_dep_first(struct live *L, struct ljob *j);
bool live_dep_reason(const struct ljob *j, char *buf, size_t len);

/* livejob.c */
int64_t live_now(struct live *L); /* this turn's instant, wall ms (see livejob.c) */
void live_want_cycle(struct live *L);
uint64_t live_eid(uint64_t job, uint32_t e);
struct ljob *live_job_find(struct live *L, uint64_t id);
/* Job id's owner (role: the struct live; *found false: no such job), for the file and
 * wait requests (daemon/fileoffer.h fileget_level, daemon/endwait.h). */
const char *live_job_owner(void *role, uint64_t id, bool *found);
/* Index of the first job (by id) whose id is >= id (njobs: none). */
uint32_t live_job_lower(const struct live *L, uint64_t id);
/* The record of engine element eid, or NULL (no such job or element, or no record). */
struct lelem *live_elem_find(struct live *L, uint64_t eid, struct ljob **jp);
/* The record of element e of j, or NULL if it has none. */
struct lelem *live_elem_rec(const struct ljob *j, uint32_t e);
/* Element e as seen from outside: its record, else the implicit one (pending, or
 * cancelled once j is). Read only; valid until j's records change. */
const struct lelem *live_elem_peek(const struct ljob *j, uint32_t e);
/* The record of element e of j, made (pending, implicit values) if it has none; NULL
 * when out of memory. Pointers to j's records stay valid until j is freed. */
struct lelem *live_elem_make(struct ljob *j, uint32_t e);
/* The first record of j at an index >= *e (its index in *e), or NULL. Iterates:
 * for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) */
struct lelem *live_elem_next(const struct ljob *j, uint32_t *e);
/* The first record of j at an index >= *e that is pending inside the engine (its
 * index in *e), or NULL; skips the pages without one. */
struct lelem *live_elem_next_queued(const struct ljob *j, uint32_t *e);
/* Record e must be written at the commit. */
void live_elem_mark(struct live *L, struct ljob *j, uint32_t e);
/* j's record must be written at the commit (sets j->dirty). */
void live_job_dirty(struct live *L, struct ljob *j);
/* The jobs changed this turn: *n of them (every job when a push failed). */
struct ljob **live_dirty_jobs(struct live *L, uint32_t *n);
/* Takes j off that list: before freeing a job that was never added (a refused SUBMIT). */
void live_dirty_forget(struct live *L, const struct ljob *j);
/* The record of e enters or leaves the engine (keeps j->nqueued). */
void live_elem_engine(struct ljob *j, uint32_t e, bool in);
int live_job_add(struct live *L, struct ljob *j); /* takes ownership; 0/-1 */
void live_job_free(struct ljob *j);
void live_jobs_free(struct live *L);
const char *live_elem_state_name(int st);
/* Elem state change bookkeeping (counters, finished time, dirty marks). */
void live_elem_set(struct live *L, struct ljob *j, uint32_t e, int st);
void live_elem_reason(struct live *L, struct ljob *j, uint32_t e, const char *why);
/* Marks j cancelled (CANCEL of the job) and counts its implicit elements as ended
 * (cancelled) without a record each; the caller cancels the records. */
void live_job_cancel_implicit(struct live *L, struct ljob *j);
/* Engine spec of element e of j. */
void live_elem_spec(const struct live *L, const struct ljob *j, uint32_t e,
                    struct batch_job_spec *s);
/* Gives more pending elements of j to the engine (up to the window). */
void live_job_feed(struct live *L, struct ljob *j);
/* Buffers j's record with its argv (at submission, and rewriting it); 0/-1. */
int live_job_save(struct live *L, const struct ljob *j, char **argv, uint32_t argc);
/* Writes the dirty job and element records into the store buffer; 0/-1. */
int live_save_dirty(struct live *L);
/* Loads jobs and elements from the store; 0/-1. */
int live_load(struct live *L);
/* Record codecs (also for unit tests): encode into wb, decode from bytes. */
void live_job_encode(const struct ljob *j, const char *const *argv, uint32_t argc,
                     struct wire_buf *wb);
struct ljob *live_job_decode(const void *p, size_t n);
void live_elem_encode(const struct lelem *el, struct wire_buf *wb);
int live_elem_decode(const void *p, size_t n, struct lelem *el);
/* The stored argv of job id (malloc'd vector of malloc'd strings); NULL if none. */
char **live_job_argv(struct live *L, uint64_t id, uint32_t *argc);
void live_argv_free(char **v, uint32_t n);

/* livereq.c */
void live_dispatch(struct live *L, const struct wire_msg *m, const char *peer,
                   struct wire_buf *reply);
void live_job_summary(struct live *L, const struct ljob *j, struct wire_buf *wb);
/* JOB_WAIT's view of the batch role's jobs (daemon/endwait.h; role: the struct live) */
extern const struct endwait_ops live_endwait_ops;

/* livecmd.c: Maui's commands and the site interface (types 80-95) */
bool livecmd_handles(uint32_t type);
void livecmd_dispatch(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
/* livemaui.c (issue 27): SHOWBF, CHECKNODE, SHOWSTATS (docs/wire.md 6.12) */
void livecmd_showbf(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void livecmd_checknode(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void livecmd_showstats(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
/* DIAGNOSE what=nodes (Maui's diagnose -n): a page of host rows with their problem. */
void livecmd_diag_nodes(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
/* The CHECKJOB row of j (a msgpack map; docs/wire.md 6.12), for livestats.c too. */
void livecmd_job_row(struct live *L, const struct ljob *j, struct wire_buf *wb);
/* Its queue_state ("active", "eligible", "blocked" or "ended"), without the row. */
const char *livecmd_queue_state(struct live *L, const struct ljob *j);

/* liveresvcmd.c: the reservation commands, for livecmd.c's table */
void livecmd_resv_list(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void livecmd_resv_set(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void livecmd_reserve(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
void livecmd_resv_release(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
/* The RESVS row of v (a msgpack map), for livestats.c too. */
void live_resv_row(struct live *L, const struct lresv *v, struct wire_buf *wb);

/* livereply.c: what the commands share */
extern const char *const live_acl_keys[BATCH_CRED_KINDS]; /* "users", ... */
/* Replaces reply with an error reply (the text cleaned for the wire). */
__attribute__((format(printf, 4, 5))) void live_fail(struct wire_buf *reply, uint64_t id, int code,
                                                     const char *fmt, ...);
/* A comma list split into a malloc'd vector pointing into a malloc'd copy. */
struct live_words {
    char *buf;
    const char **v;
    size_t n;
};
int live_words_split(const char *s, struct live_words *w); /* 0, or -1 (ENOMEM) */
void live_words_free(struct live_words *w);
/* name is one of the comma list's names. */
bool live_in_list(const char *list, const char *name);
/* The requester is an administrator (batch.admins, else root or the role's user;
 * with CURVE, an identity of kind admin). */
bool live_is_admin(struct live *L, const msgpack_object *m);
/* Host name of an engine node ("" unknown). */
const char *live_node_host(struct live *L, int32_t n);
/* Distinct hosts of a comma list of engine node names, as an array under key. */
void live_put_hosts_of_nodes(struct live *L, struct wire_buf *wb, const char *key,
                             const char *nodes);
/* A comma list as an array of str under key. */
void live_put_list(struct wire_buf *wb, const char *key, const char *list);
/* A comma list from an array of str field; NULL when absent/empty; *bad on a name
 * with a comma or a control character. */
char *live_list_field(const msgpack_object *m, const char *key, bool *bad);
/* A job's credential of kind k ("" unset). */
const char *live_job_cred(const struct ljob *j, int k);
/*
 * Paging of the list replies (QUEUE, DIAG, RESVS; docs/wire.md 6.2 and 6.12): the
 * request's "from" (a cursor) and "count" (rows, default 100,000); a page also ends
 * once its rows pass LIVE_LIST_MAX bytes, and always holds a row when one is left.
 * The rows are built into rows: live_page_add before each says whether it still
 * belongs to this page (and counts it), live_page_reply writes the reply (TYPE with
 * "now", the rows under key, and "next" when the page was cut) and frees the rows.
 */
struct live_page {
    uint64_t from, count;
    uint32_t n; /* rows in this page */
    bool more;  /* cut: rows are left for the next page */
    struct wire_buf rows;
};
void live_page_init(struct live_page *pg, const struct wire_msg *m);
bool live_page_add(struct live_page *pg);
void live_page_reply(struct live_page *pg, struct wire_buf *reply, const struct wire_msg *m,
                     uint32_t type, int64_t now, const char *key, uint64_t next);

/* liveresv.c: reservations */
/* SUBMIT/PSUBMIT `resv`: NULL if job j (not yet numbered) may run in it, else why. */
const char *live_resv_check(struct live *L, const struct ljob *j);
/* After j got its id: binds a site reservation to it (stored); 0/-1. */
int live_resv_bind(struct live *L, struct ljob *j);
/* Reads the stored reservations (at start and after a failed commit); 0/-1. */
int live_resv_load(struct live *L);
void live_resv_free(struct live *L);
/* Before each cycle: re-creates stored reservations once their nodes are known,
 * forgets the ended ones. */
void live_resv_apply(struct live *L);
/* Stores the windows and nodes of the grid reservations the last cycle moved up. */
void live_resv_moved(struct live *L);
/* The engine nodes of a reservation as the stored list ("a,b,c"); NULL out of memory. */
char *live_resv_nodes(struct live *L, const struct batch_resv_info *ri);
struct lresv *live_resv_find(struct live *L, const char *name);
/* Frees what v holds and zeroes it. */
void live_resv_clear(struct lresv *v);
/* Buffers v's record; 0/-1. */
int live_resv_store(struct live *L, const struct lresv *v);
/* Forgets v: its record, its engine reservation, its entry. */
void live_resv_drop(struct live *L, struct lresv *v);
/* Creates v in the engine (named nodes). 0, or -1 with why. */
int live_resv_engine(struct live *L, struct lresv *v, bool restore, char *why, size_t wl);

/* livestats.c: the statistics page, stats.json and /metrics (daemon/statspage.h) */
int livestats_open(struct live *L, char *err, size_t errlen);
void livestats_close(struct live *L);

/* livehost.c: hosts and engine nodes */
/* Engine node of core k (< nslots) of host h. */
static inline int32_t live_host_slot(const struct lhost *h, int32_t k)
{
    return k < h->nbase ? h->slot0 + k : h->xslot[k - h->nbase];
}
/* Host name and cluster of an engine node. */
const char *live_slot_host(const struct live *L, int32_t slot, int *cl);
/* Engine node of a host, free, for adoption; -1 if none. */
int32_t live_host_free_slot(struct live *L, int cl, const char *host, const int32_t *taken,
                            int32_t ntaken);
/* A host's up/down as its cluster reports it (the engine's nodes follow). */
void live_host_set_up(struct live *L, struct lclu *c, struct lhost *h, bool up);
/* The hosts (comma list) of a refused start take no work for LIVE_REFUSED_BLOCK_MS. */
void live_hosts_block(struct live *L, struct lclu *c, const char *hosts);
/* Ends the blocks that expired at now (monotonic ms). */
void live_hosts_unblock(struct live *L, struct lclu *c, int64_t now);
/* Applies one NODES row or "host" event (sync: during a resync). */
void live_host_update(struct live *L, struct lclu *c, const msgpack_object *m, bool sync);
/* False if cls names one of the clusters (classes); else true with the reason (naming
 * the known classes) in why. */
bool live_class_unknown(const struct live *L, const char *cls, char *why, size_t len);
/* Why a parallel job of procs processes at most ppn per host can never run in class
 * cls (NULL or "": the default cluster) on the hosts known there (text into why),
 * or false when it can or no host is known yet. */
bool live_ppn_impossible(const struct live *L, const char *cls, uint32_t procs, uint32_t ppn,
                         char *why, size_t len);
/* Whether no host known of class cls (NULL or "": the default cluster) has features
 * satisfying constraint c (issue 27; text into why), false when one has or no host is
 * known yet (Slurm refuses a constraint no configured node satisfies). */
bool live_constraint_impossible(const struct live *L, const char *cls, const char *c, char *why,
                                size_t len);

/* livemigrate.c (issue 26). Element e of j, running on host that left cluster c: when
 * its job checkpoints (--checkpoint-s), its cluster job is kept for a move (the caller
 * then requeues it with the reason written in why) and true is returned; false: a new
 * run, as for any lost run. */
bool live_mig_begin(struct live *L, struct ljob *j, uint32_t e, const struct lclu *c,
                    const char *host, char *why, size_t wl);
/* At the start of element e on its chosen host: true when it is a move sent as TASK_PIN
 * (the start is that); false: start it as a new run (a kept job on another cluster is
 * cancelled first). */
bool live_mig_start(struct live *L, struct ljob *j, uint32_t e);
/* The cluster's answer to TASK_PIN: 1 when moved (the element runs); 0 when refused
 * (the old job cancelled: the caller starts it as a new run); -1 a late answer, or the
 * kept job had ended there (STATE, or NOT_FOUND `purged`): then how it ended is asked
 * (RK_PINEND, live_mig_ended decides). */
int live_mig_reply(struct live *L, struct lclu *c, struct ljob *j, uint32_t e,
                   const struct wire_msg *m);
/* The answer to RK_PINEND (JOB_GET of the kept job, which had ended): 1 when it ran to
 * its end (done, or failed or killed not for a lost host): the element takes that end,
 * adopted as its job (the caller passes the reply's "job" map on as the cluster's
 * word); 0 when it did not (cancelled, lost, unknown there): the old job is dropped and
 * the caller starts a new run; 2 when it was purged there (its end unknown: the caller
 * fails the element, it may have run whole); -1 a late answer. */
int live_mig_ended(struct live *L, struct lclu *c, struct ljob *j, uint32_t e,
                   const struct wire_msg *m);
/* Element e will not start (cancelled): a kept cluster job is cancelled. */
void live_mig_drop(struct live *L, struct ljob *j, uint32_t e);
/* Element e's SUBMIT was taken by its cluster: a job kept on another cluster for the
 * move is cancelled now (it held the checkpoint the SUBMIT carried). */
void live_mig_submitted(struct live *L, struct ljob *j, uint32_t e);

/* livestart.c: the start of element e of j (its hosts set) built into wb, its request
 * recorded (liveout.c): 0, or -1 when the job's record is not committed yet (its argv
 * is read from the store). */
int live_start_build(struct live *L, struct ljob *j, uint32_t e, struct wire_buf *wb);

/* liveout.c: requests to clusters, of these kinds (liveclu.c's; livestage.c's from
 * RK_FHAVE on) */
enum {
    RK_EVINIT,
    RK_NODES,
    RK_EVENTS,
    RK_PSUBMIT,
    RK_JOBGET,
    RK_PIN,    /* livemigrate.c */
    RK_PINEND, /* livemigrate.c: JOB_GET of a kept job the TASK_PIN found ended */
    RK_ORDER,  /* liveorder.c: a CANCEL kept until the cluster took it */
    RK_FHAVE,
    RK_FPUT,
    RK_OUTLIST,
    RK_FGET,
    RK_CKLIST, /* livecarry.c */
    RK_CKGET
};
/* Records a request to cluster c (kind: enum in liveclu.c, arg: its subject; answered
 * within wait_ms + LIVE_REQ_TIMEOUT_MS or the cluster is down) and begins its message
 * (type, nfields) in wb: the request id. */
uint64_t live_req_begin(struct live *L, struct lclu *c, int kind, uint64_t arg, uint32_t type,
                        uint32_t nfields, int64_t wait_ms, struct wire_buf *wb);
/* liveorder.c: the CANCEL of cluster job cjob at cluster cl, stored (table "orders")
 * and sent after the commit, then again at each resync of that cluster until it answers
 * OK, NOT_FOUND or STATE (one order per cluster job). */
void live_order_cancel(struct live *L, int cl, uint64_t cjob);
/* Sends every order of cluster cl again (its resynchronisation). */
void live_order_resend(struct live *L, int cl);
/* The answer to order id from cluster c. */
void live_order_reply(struct live *L, struct lclu *c, uint64_t id, const struct wire_msg *m);
/* The stored orders into memory (at load), and freed (at exit): 0, or -1. */
int live_order_load(struct live *L);
void live_order_free(struct live *L);

/* Queues wb (copied) to cluster cl, sent after the commit (live_out_flush). */
void live_queue_out(struct live *L, int cl, const struct wire_buf *wb);
/* Queues the start of element eid to be built after the commit. */
void live_queue_start_later(struct live *L, int cl, uint64_t eid);

/* livefiles.c (issue 26) */
/* Opens the store (STATE_DIR/files; at load) and frees it: 0, or -1. */
int live_files_open(struct live *L);
void live_files_close(struct live *L);
/* FILE_HAVE, FILE_PUT, FILE_GET (docs/wire.md 6.19) */
void live_files_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
/* SUBMIT "inputs"/"outputs"/"checkpoint_s" checked (as the cluster does) for a task
 * array of ntasks (parallel: a PSUBMIT naming them is refused): NULL, or why. */
const char *live_files_check(struct live *L, const msgpack_object *m, bool parallel,
                             uint32_t ntasks, char *why, size_t wl);
/* Keeps them with new job j (j->data) and buffers its record: 0, or -1. */
int live_files_attach(struct live *L, struct ljob *j, const msgpack_object *m);
/* The stored "jobdata" records onto their jobs (live_load). */
int live_files_load(struct live *L);
/* Calls fn for each input of element e of j (map name, hash, size[, task]); stops at
 * nonzero and returns it. */
int live_files_each_input(const struct ljob *j, uint32_t e,
                          int (*fn)(void *arg, const msgpack_object *in), void *arg);
/* j's output globs (an array), its checkpoint period: from j->data. */
bool live_files_has_outputs(const struct ljob *j);
uint32_t live_files_ckpt_s(const struct ljob *j);
/* Writes into wb the fields a file job's SUBMIT to a cluster carries for element e
 * ("inputs" without "task", "outputs", "checkpoint_s"), and how many they are. */
uint32_t live_files_submit_nfields(const struct ljob *j);
void live_files_submit_put(const struct ljob *j, uint32_t e, struct wire_buf *wb);
/* Element e's copied outputs: buffers its record (list: a msgpack map with "files" and
 * maybe "files_note"): 0, or -1. Its fields in a JOB_GET task row: how many, writing. */
int live_files_elem_save(struct live *L, const struct ljob *j, uint32_t e, const void *list,
                         size_t len);
uint32_t live_files_row_nfields(struct live *L, const struct ljob *j, uint32_t e, void **rec,
                                size_t *len);
void live_files_row_put(void *rec, size_t len, struct wire_buf *wb);

/* At start and hourly (once a second from the accounting tick): deletes the stored
 * files no job names (an input, or a copied output) unchanged for files.keep_s. */
void live_files_sweep(struct live *L);

/* livestage.c (issue 26) */
/* Offers element e's inputs to cluster c: 0 when all are whole there; 1 while some are
 * on their way (its id goes to L->stage_ready once they are, or one failed); -1 when
 * one was refused, the reason in why. */
int live_stage_inputs(struct live *L, struct lclu *c, struct ljob *j, uint32_t e, char *why,
                      size_t wl);
/* Element e ended on its cluster in state st: its outputs are copied back, then it
 * takes st (livejob.c). */
void live_stage_pull(struct live *L, struct lclu *c, struct ljob *j, uint32_t e, int st);
/* A reply to a request of livestage.c (kind >= RK_FHAVE): handled. */
void live_stage_reply(struct live *L, struct lclu *c, int kind, uint64_t arg,
                      const struct wire_msg *m);
/* Cluster c is down: its transfers are forgotten (a resync offers again). */
void live_stage_reset(struct live *L, struct lclu *c);
void live_stage_free(struct live *L);

/* livecarry.c (issue 26). Element e of j, a move placed on another cluster than its
 * kept job's: its checkpoint is copied from that cluster. 1 while under way (its id goes
 * to L->stage_ready when it ends); 0 when copied (the start names it: live_carry_nfields,
 * live_carry_put; its files are offered: live_carry_offer); -1 when there is none (the
 * task starts from the start; its reason says why). */
int live_carry_step(struct live *L, struct ljob *j, uint32_t e);
/* The SUBMIT's "ckpt" of element eid: 1 field when copied, 0; writing it. */
uint32_t live_carry_nfields(struct live *L, uint64_t eid);
void live_carry_put(struct live *L, uint64_t eid, struct wire_buf *wb);
/* Offers a copied checkpoint's files to cluster c (its c->offer, after the inputs): 1
 * when all are whole there (or none to offer; one refused there: the carry ends without
 * a checkpoint), 0 while on their way. */
int live_carry_offer(struct live *L, struct lclu *c, uint64_t eid, char *why, size_t wl);
/* The new cluster answered INVALID to element eid's SUBMIT (msg): true when that SUBMIT
 * carried a checkpoint, which is then dropped (the reason says why): the element is
 * started again without it, from the start (a file swept between its offer and the
 * SUBMIT, a checkpoint over that cluster's files.ckpt_mb). */
bool live_carry_refused(struct live *L, uint64_t eid, const char *msg);
/* Forgets element eid's carry: whether it had a copied checkpoint. */
bool live_carry_forget(struct live *L, uint64_t eid);
/* A reply to RK_CKLIST or RK_CKGET. */
void live_carry_reply(struct live *L, struct lclu *c, int kind, uint64_t arg,
                      const struct wire_msg *m);
/* Cluster c is down: the copies from it end without a checkpoint. */
void live_carry_reset(struct live *L, struct lclu *c);
void live_carry_free(struct live *L);

/* liveclu.c */
int live_clusters_open(struct live *L, char *err, size_t errlen);
void live_clusters_close(struct live *L);
/* Queues the start of element e of j on its cluster (PSUBMIT with hosts). */
void live_clu_start(struct live *L, struct ljob *j, uint32_t e);
/* JOB_CTL requeue of j (issue 15, docs/batch.md): running elements are cancelled at
 * their cluster and go back to pending once it confirms they ended; ended ones go back
 * at once. Returns how many elements it changed (0: nothing to requeue). */
uint32_t live_job_requeue(struct live *L, struct ljob *j);
/* Queues a CANCEL of the element's cluster job. */
void live_clu_cancel(struct live *L, struct ljob *j, uint32_t e);
/* Sends the queued messages (after the commit); drops them after a failed one. */
void live_out_flush(struct live *L, bool send);
/* Periodic: deadlines, resync of down clusters, polling fallback. */
void live_clu_tick(struct live *L);

#endif

/*
 * meta_int.h - the live metascheduler's state, shared by its files. They call each
 * other downwards only, bottom up:
 *   metajob.c    the jobs: states, the table in memory, state changes, LMDB records
 *   metaacct.c   accounting records of ended jobs, ACCT, their retention (issue 27)
 *   metadep.c    job dependencies (issue 27): checked at submission, re-checked each turn
 *   metafiles.c  the spool's files (issue 26): its store, FILE_* requests, the outputs
 *                copied back (table `taskfiles`), the sweep
 *   metasend.c   the messages to the sites, queued until the turn's commit
 *   metastage.c  files and sites (issue 26): inputs offered before a SUBMIT, outputs
 *                copied back when the site's job ended
 *   metapurge.c  ended jobs forgotten: PURGE, and jobs.retention_s
 *   metaorder.c  the outbox: orders to a site (cancel, release, withdrawal), stored and
 *                sent until the site acknowledges them (issue 24); a requeue completed
 *   metaplace.c  placement rounds: estimates, the decision, RESERVE/SUBMIT, moves begun
 *   metaout.c    job --output: a user's JOB_GET relayed to the job's site (held reply)
 *   metasitelist.c  the site list: meta.sites and meta.sites_file parsed
 *   metasite.c   the sites' connections, their replies (placements, tracking, moves,
 *                stray reservations), ticks (information, polls, re-evaluation), list
 *   metareq.c    the user requests          metastats.c  the statistics page
 *   meta.c       configuration, start-up, the daemon callbacks, the loop
 */
#ifndef GRIDNODE_META_INT_H
#define GRIDNODE_META_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/config.h"
#include "daemon/acct.h"
#include "daemon/curve.h"
#include "roles/meta/engine/place.h"
#include "wire/wire.h"

#define META_MAX_SITES 64
#define META_HELD_REASON "held by its owner: gridnode release places it"
#define META_NAME_MAX 64
#define META_REASON_MAX 256 /* a job's reason, its NUL included */
#define META_INFO_MS 2000   /* SITE_INFO refresh */
#define META_POLL_MS 1000   /* JOB_GET of the jobs placed at a site */
/* JOB_GETs in flight to one site at most: a round over thousands of placed jobs is sent
   in windows (the rest at the next ticks), so the requests to a site stay under its
   queue bounds (the DEALER's and the site's 1,000 per peer: a request past them was
   lost, and the site taken as down 5 s later) */
#define META_POLL_WINDOW 256
#define META_SWEEP_MS 15000   /* RESV_LIST at each site: stray reservations */
#define META_INFLIGHT_MAX 256 /* placements under way at once */
/* a site that let this many ESTIMATEs in a row time out is not waited for (issue 28) */
#define META_EST_LATE 3
#define META_RESV_SLACK_S 5 /* a site reservation lasts the walltime plus this */
#define META_TASKS_PAGE 200 /* task rows of an array fetched by the poll (JOB shows them) */

struct meta_cfg {
    char listen[CONFIG_STR_MAX], state_dir[CONFIG_STR_MAX], sites[CONFIG_STR_MAX];
    char sites_file[CONFIG_STR_MAX]; /* more sites, one a line (issue 28: meta.sites holds 160
                                        bytes) */
    char speeds[CONFIG_STR_MAX], policy[CONFIG_STR_MAX], user[CONFIG_STR_MAX];
    char log_level[CONFIG_STR_MAX];
    long estimate_timeout_ms, request_timeout_ms, move_margin_s, reeval_s, site_down_s,
        max_attempts;
    int sync;
    long map_mb, peer_queue;
    struct curve_conf sec; /* [security] (daemon/curve.h) */
    long stats_interval_s; /* [stats] (daemon/statspage.h, metastats.c) */
    char stats_http[CONFIG_STR_MAX];
    struct acct_conf acct;                          /* [acct] (daemon/acct.h, metaacct.c) */
    long files_job_mb, files_user_mb, files_keep_s; /* [files] (issue 26, metafiles.c) */
    long files_recheck_s; /* [files]: a site's holding asked again after this (fileoffer) */
    long retention_s;     /* [jobs]: ended jobs purged this long after (metapurge.c) */
};

/* Job states at the spool. */
enum mj_state {
    MJ_QUEUED,  /* spooled, waiting for a placement */
    MJ_PLACING, /* a reservation is taken (or asked for) at `site`; submitting into it */
    MJ_PLACED,  /* submitted at the site, not started there yet */
    MJ_RUNNING,
    MJ_DONE,
    MJ_FAILED,
    MJ_KILLED,
    MJ_CANCELLED,
};
#define MJ_ENDED(s) ((s) >= MJ_DONE)

/* What a request to a site was for (struct mreq kind). */
enum {
    RK_INFO,
    RK_EST,
    RK_RESERVE,
    RK_SUBMIT,
    RK_JOBGET,
    RK_CANCEL,
    RK_RELEASE,
    RK_RESVLIST,
    RK_GEST,     /* ESTIMATE shared by a group of jobs (job = the group id) */
    RK_WITHDRAW, /* CANCEL `unstarted` of a copy the spool moves (job = the job) */
    RK_ORDER,    /* an order of the outbox (job = the order's id; metaorder.c) */
    RK_OUTPUT,   /* a user's JOB_GET `output` relayed (job = the held request; metaout.c) */
    RK_FHAVE,    /* FILE_HAVE of an input offered (job = the hash's first 8 bytes) */
    RK_FPUT,     /* FILE_PUT of an input's chunk (job = the hash's first 8 bytes) */
    RK_PLIST,    /* JOB_GET of an ended job's task rows, to copy outputs (job = the job) */
    RK_FGET,     /* FILE_GET of an output's chunk (job = the job) */
    RK_PROBE,    /* ESTIMATE to a site not waited for (est_late): only its timeliness counts */
};
/* What an order of the outbox is (struct morder kind; stored by name). */
enum { OR_CANCEL, OR_RELEASE, OR_WITHDRAW };
/* Where a job's placement is (struct mjob phase; memory only). */
/* A move (re-evaluation): estimates, a reservation at the new site, the old copy
 * withdrawn (a conditional cancel the old site decides: refused once it started), and
 * only then the submission at the new site, as a placement (PH_SUBMIT, `moving`). */
enum { PH_IDLE, PH_EST, PH_RESERVE, PH_SUBMIT, PH_MV_EST, PH_MV_RESERVE, PH_MV_WITHDRAW };

/* A request to a site waiting for its reply. */
struct mreq {
    uint64_t rid;
    int kind;     /* RK_* */
    uint64_t job; /* the job it is about, 0 */
    int64_t deadline;
};

/* An order to a site, kept (table `orders`) until the site acknowledges it. */
struct morder {
    uint64_t id;
    int site;
    uint8_t kind;       /* OR_* */
    uint64_t job, sjob; /* the spool's job (0: none), the site's job (cancel, withdrawal); a
                           cancel of sjob 0: of the copy submission `attempt` of job may have
                           made (its answer not known) */
    uint32_t attempt;
    char resv[META_NAME_MAX]; /* the reservation (release) */
    int64_t since;            /* wall ms it was decided */
    uint32_t tries;           /* times sent */
    int64_t next_at;          /* loop ms it may be sent again (memory only) */
    bool inflight, dirty;     /* memory only */
};

struct slurm_site;
struct statspage;
struct fileoffer;
#define META_LAT_BUCKETS 10 /* placement latency histogram (metastats.c) */
/* Upper bounds (seconds) of its buckets but the last (+Inf). */
#define META_LAT_LE                                                                                \
    {                                                                                              \
        0.1, 0.5, 1, 2, 5, 10, 30, 60, 300                                                         \
    }

struct msite {
    int idx;
    char name[META_NAME_MAX], ep[CONFIG_STR_MAX];
    void *sock;
    /* a Slurm cluster (ep slurm://...) instead of a DEALER: roles/meta/slurm/ */
    struct slurm_site *slurm;
    struct curve_watch *watch; /* logs a failed CURVE handshake (daemon/curve.h) */
    struct meta_site info;     /* the policy's view (up, speed, sizes, queued work) */
    bool known;                /* SITE_INFO answered at least once */
    int64_t down_since;        /* loop ms the site stopped answering, 0 while up */
    int64_t info_at, poll_at, sweep_at;
    /* the poll round (JOB_GET of every placed job): the next index of M->jobs to poll,
       and the JOB_GETs in flight, at most META_POLL_WINDOW */
    uint32_t poll_next, npoll;
    /* ESTIMATEs in a row it let time out (0 once one is answered in time); from
       META_EST_LATE on, placements do not wait for its estimates (still asked, as
       RK_PROBE, so an answer in time makes it waited for again) */
    uint32_t est_late;
    int64_t cores_free;
    int64_t burst_sec, burst_n; /* placements given this site in second burst_sec */
    struct mreq *req;
    uint32_t nreq, capreq;
    /* statistics (metastats.c) */
    int64_t last_answer;        /* wall ms of its last SITE_INFO answer, 0 never */
    uint64_t queued, running;   /* its queue as it last said */
    uint64_t placements, moves; /* jobs placed / moved there since the role started */
    /* the distinct feature lists of its hosts as its SITE said (issue 27); info.fsets
       points here */
    char **fsets;
    int32_t nfsets;
    uint32_t *fhosts; /* hosts per list (SITE feature_hosts), NULL unknown; info.fhosts */
    /* inputs offered to it (issue 26, metastage.c; memory only, kept while it is up) */
    struct fileoffer *offer; /* daemon/fileoffer.h; NULL: none yet */
};

#define META_XFER_ACTIVE 4 /* files offered to one site at once */

/* The outputs of an ended job being copied from its site (metastage.c; memory only). */
struct mpull {
    uint64_t job;
    int site;
    uint8_t st;        /* waiting its turn, listing its task rows, getting a file */
    uint8_t end_state; /* the state the job takes once they are here */
    char why[256];     /* its reason then */
    void *page;        /* the site's task rows of the current page (msgpack array) */
    size_t page_len;
    uint32_t row, file; /* the row and file being copied */
    uint64_t next;      /* the next page's first task, 0: none */
};

struct mjob {
    uint64_t id;
    uint8_t state;
    bool parallel, early, dirty, want_cancel;
    bool listed; /* on M->dirty */
    char user[META_NAME_MAX], name[META_NAME_MAX];
    struct meta_request rq;
    uint32_t ppn; /* a parallel job's processes per host at most (--ppn), 0 = none */
    int64_t submitted, started, finished, exit;
    uint32_t attempt; /* placements tried so far */
    uint64_t refused; /* sites that refused the job for good (bits; INVALID and the like) */
    int site;         /* where it is (PLACING/PLACED/RUNNING), -1 */
    uint64_t sjob;    /* the site's job id, 0 */
    char resv[META_NAME_MAX];
    /* a move under way (re-evaluation): reserved at mv_site first, then the old copy goes */
    int mv_site;
    char mv_resv[META_NAME_MAX];
    uint64_t mv_sjob;
    /* why it waits or how it ended, shown in its row (NULL: ""; meta_job_reason): on the
       heap, since most jobs have none or a short one (issue 28: memory per job) */
    char *reason;
    uint8_t *req; /* the user's request as received (msgpack), resent to the site */
    char *key;    /* the request's `key` (idempotent SUBMIT), NULL; read from req */
    /* submit --constraint (issue 27): canonical, read from req (sent on whole to the
       site); rq.constraint points here. NULL: none */
    char *constraint;
    size_t reqlen;
    /* a task array (SUBMIT ntasks > 1): placed whole at one site, without a
     * reservation; its elements' progress as the site last reported it */
    uint32_t ntasks;
    uint32_t t_issued, t_running, t_done, t_failed;
    uint8_t *tasks_raw; /* the site's last page of task rows (msgpack array), memory only */
    size_t tasks_len;
    /* placement under way (memory only) */
    int phase;      /* 0 idle, 1 estimating, 2 reserving, 3 submitting */
    uint64_t tried; /* sites tried in this round (bits) */
    /* each site's estimated start in the placement (or move) under way: nsites entries,
       allocated when the round begins (meta_est_fill) and freed once the job is idle
       again (metasite.c's tick), so a waiting job does not carry 64 of them (issue 28:
       memory per pending job); NULL reads as 0 (meta_est) */
    int64_t *start_est;
    uint64_t asked; /* sites asked for an estimate, answers pending (bits) */
    int64_t phase_deadline;
    int64_t est_start; /* the chosen site's estimated start */
    int64_t retry_at;  /* loop ms of the next placement round */
    bool polling, reeval;
    bool moving;      /* its PH_SUBMIT is the second half of a move (memory only) */
    bool withdrawing; /* a withdrawal of its copy at `site` was sent, not answered (stored):
                         a copy seen cancelled there was withdrawn, and is placed again */
    bool timed;       /* its placement latency is counted (metastats.c; memory only) */
    uint32_t orders;  /* orders of the outbox about it (metaorder.c; memory only) */
    /* JOB_CTL requeue (stored): its copy's cancel awaited before it is placed again */
    bool requeueing;
    bool held;         /* submit --hold or JOB_CTL hold at the spool: not placed until released */
    uint32_t requeues; /* requeues asked (JOB_CTL), shown in its row */
    /* submit --dependency (issue 27, metadep.c): the terms still waited for, NULL: none;
       while set the job is not placed (its reason says which term) */
    struct depend *dep;
    /* issue 26 (metastage.c; memory only): its inputs being offered to `site` before its
       SUBMIT; its outputs being copied from its site */
    bool staging, pulling;
};

/* Jobs of one placement pass sharing their ESTIMATEs (metaplace.c). */
struct megroup {
    uint64_t id;
    uint64_t *jobs; /* member job ids, the first one's request was sent */
    uint32_t n, cap;
    uint32_t pending; /* ESTIMATEs not answered (or timed out) yet */
    uint64_t asked;   /* sites asked */
};

/* A user's JOB_GET `output` waiting for the site's JOB (metaout.c). */
struct mrelay {
    uint64_t handle, req_id; /* the held request (daemon_hold) and its id */
    uint64_t job;            /* the spool's job */
    void *row;               /* the spool's JOB `job` map then `tasks` array, as they were
                                when asked (msgpack) */
    size_t rowlen;
};

struct meta {
    struct meta_cfg cfg;
    enum meta_policy policy;
    struct store *store;
    int t_meta, t_jobs, t_orders;
    int t_acct;                /* metaacct.c */
    struct acct_sweep acct_sw; /* metaacct.c */
    struct loop *loop;
    struct daemon *daemon;
    struct endwait *endwait; /* held JOB_WAITs (daemon/endwait.h, issue 28) */
    int lockfd;
    char inc[40];
    uint64_t next_id, req_seq, rr_state;
    bool meta_dirty, turn_failed;
    struct msite site[META_MAX_SITES];
    int nsites;
    struct mjob **jobs; /* by id, ascending */
    uint32_t njobs, capjobs;
    /* the jobs changed this turn (meta_job_dirty), so the commit walks them and not
       every job (issue 28: three walks of 10^6 jobs a turn); dirty_all: the list could
       not grow, walk every job */
    struct mjob **dirty;
    uint32_t ndirty, capdirty;
    bool dirty_all;
    uint32_t nest;      /* jobs holding a start_est array (the tick walks the jobs only then) */
    struct mjob **kidx; /* keyed jobs by (user, key), open addressing (metajob.c) */
    uint32_t kcap, kn;
    bool dep_any; /* a job may wait for a dependency (metadep.c; false: none does) */
    uint32_t inflight;
    struct megroup *eg;
    uint32_t neg, capeg;
    uint64_t next_gid;
    uint64_t placements, moves;
    struct mrelay *relay; /* metaout.c */
    uint32_t nrelay, caprelay;
    /* the outbox (metaorder.c), in id order */
    struct morder *orders;
    uint32_t norders, caporders;
    uint64_t next_order;
    /* messages to sites, sent after the turn's commit */
    struct mout {
        int site;
        void *data;
        size_t len;
    } * out;
    uint32_t nout, capout;
    /* files (issue 26, metafiles.c, metastage.c) */
    struct filestore *files;
    int t_files, t_taskfiles;
    int64_t sweep_ms;         /* the last file sweep (wall ms; 0: at the next commit) */
    uint32_t retention_ticks; /* metapurge.c */
    struct mpull *pulls;
    uint32_t npulls, cappulls;
    /* statistics (metastats.c): placement latency (submission to placed) since start */
    struct statspage *stats;
    uint64_t lat_bucket[META_LAT_BUCKETS];
    double lat_sum;
    uint64_t lat_n;
};

/* ---- metajob.c: the jobs (calls nothing above it) ---- */

const char *meta_state_name(int st);
/* The job of id, NULL. */
struct mjob *meta_job_find(struct meta *M, uint64_t id);
/* Job id's owner (role: the struct meta; *found false: no such job), for the file and
 * wait requests (daemon/fileoffer.h fileget_level, daemon/endwait.h). */
const char *meta_job_owner(void *role, uint64_t id, bool *found);
/* Adds j to the table (kept in id order); -1 when out of memory (j not taken). */
/* Marks j changed this turn: stored by the turn's commit (meta_jobs_save). */
void meta_job_dirty(struct meta *M, struct mjob *j);
/* Forgets the list of changed jobs (after the commit saved them, or a reload). */
void meta_dirty_reset(struct meta *M);
int meta_job_add(struct meta *M, struct mjob *j);
/* NULL-safe. */
void meta_job_free(struct mjob *j);
/* Frees the jobs of ids (sorted) and closes their gaps in the table and the key index
 * (metapurge.c, after their records' deletion went into the turn). */
void meta_jobs_drop(struct meta *M, const uint64_t *ids, uint32_t n);
/* The newest job of user with request key key (a resent keyed SUBMIT), NULL. */
struct mjob *meta_job_by_key(struct meta *M, const char *user, const char *key);
/* Empties the key index (every job is freed: a reload, the end). */
void meta_key_reset(struct meta *M);
/* The request's key (malloc'd), NULL when absent. */
char *meta_req_key(const msgpack_object *req);
/* j's state is st (reason: kept when not NULL); logged on a change, marked dirty. */
void meta_job_set(struct meta *M, struct mjob *j, enum mj_state st, const char *reason);
/* The job's reason ("" when none), and setting it (at most META_REASON_MAX - 1 bytes of r,
 * cut at a character boundary; "" frees it; without memory the old one stays). */
const char *meta_job_reason(const struct mjob *j);
void meta_job_reason_set(struct mjob *j, const char *r);
/* Writes the dirty jobs' records (not committed). 0, or -1. */
int meta_jobs_save(struct meta *M);
/* record_load's callback for the jobs table (daemon/record.h): arg is the role. */
int meta_job_load(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen);

/* ---- metaacct.c (issue 27): the records of the ended jobs saved this turn (call
 * before meta_jobs_save): 0, or -1 (store); ACCT; the retention sweep (once a second) */
int meta_acct_save_dirty(struct meta *M);
void meta_acct_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply);
void meta_acct_tick(struct meta *M);
/* ---- metadep.c: job dependencies (issue 27) ---- */

struct depend;
/* "dependency" of request o checked (ids known here, owners) into *out (NULL: none): 0,
 * or -1 with why. */
int meta_dep_submit(struct meta *M, const msgpack_object *o, struct depend **out, char *why,
                    size_t wl);
/* "Dependency: TERM" of waiting job j (j->dep set). */
void meta_dep_reason(const struct mjob *j, char *buf, size_t len);
/* Before the commit of a turn that changed a job: waiting jobs released or cancelled. */
void meta_dep_step(struct meta *M);

/* ---- metafiles.c: the spool's files (issue 26) ---- */

/* The store opened (again) from its records: 0, or -1 (logged). */
int meta_files_open(struct meta *M);
void meta_files_close(struct meta *M);
/* A SUBMIT's inputs/outputs/checkpoint_s checked (o the request): NULL or the reason. */
const char *meta_files_check(struct meta *M, const msgpack_object *o, bool parallel,
                             uint64_t ntasks, char *why, size_t wl);
/* Whether j's request names inputs / output globs. */
bool meta_files_has_inputs(const struct mjob *j);
bool meta_files_has_outputs(const struct mjob *j);
/* Calls fn for each input entry of j's request (every task's); stops at nonzero. */
int meta_files_each_input(const struct mjob *j, int (*fn)(void *arg, const msgpack_object *in),
                          void *arg);
/* Stores task row t (a map with idx, state, files...) of j copied back: 0, or -1. */
int meta_files_row_save(struct meta *M, const struct mjob *j, const msgpack_object *t);
/* JOB's `tasks` of an ended job whose outputs were copied here: the stored rows from
 * `from` (at most count) into wb, *next the next one's index (0: none); of a job with
 * outputs not copied yet: the site's rows of the last poll without their files. false
 * otherwise (nothing written). */
bool meta_files_tasks(struct meta *M, const struct mjob *j, uint64_t from, uint64_t count,
                      struct wire_buf *wb, uint64_t *next);
/* FILE_HAVE, FILE_PUT, FILE_GET from a user. */
void meta_files_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply);
/* Files no job names, unchanged for files.keep_s, deleted (at start and hourly). */
void meta_files_sweep(struct meta *M);
/* The next sweep at the next commit, not an hour after the last (a purge freed names). */
void meta_files_sweep_soon(struct meta *M);
/* For a Slurm site's job directories (slurm_done_fn, issue 26 "Retention"; arg the
 * meta): the wall ms since which the spool is done with the job whose SUBMIT key is
 * name (ended here, committed, its outputs copied, no order about it outstanding), or -1
 * (still needed, or not a key of this spool's). */
int64_t meta_files_dir_done(void *arg, const char *name);

/* ---- metapurge.c: ended jobs forgotten (docs/wire.md 6.10) ---- */

/* PURGE from an administrator (access.c lets no one else send it). */
void meta_purge_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply);
/* Once a second (a timer's turn): every min(10, jobs.retention_s) s, the ended jobs past
 * jobs.retention_s purged. */
void meta_purge_tick(struct meta *M);

/* ---- metasend.c: the messages to the sites ---- */

/* Queues a message for site (sent by meta_out_flush). */
void meta_queue_out(struct meta *M, int site, const struct wire_buf *wb);
/* After the turn's commit: sends the queued messages (send), or drops them. */
void meta_out_flush(struct meta *M, bool send);
/* Records a request of kind about job at s, due in timeout ms, and begins its message
 * (type, nfields) in wb. */
void meta_req_begin(struct meta *M, struct msite *s, int kind, uint64_t job, uint32_t type,
                    uint32_t nfields, int64_t timeout, struct wire_buf *wb);
/* A request of no field or one u64 field k = v. */
void meta_send_simple(struct meta *M, struct msite *s, int kind, uint64_t job, uint32_t type,
                      const char *k, uint64_t v);
/* CANCEL `unstarted` of j's copy at its site (a move's withdrawal, RK_WITHDRAW). */
void meta_send_withdraw(struct meta *M, struct mjob *j);
/* The user the site sees: the job's, or the spool's when the job named none. */
const char *meta_job_user(const struct meta *M, const struct mjob *j);
void meta_resv_name(struct meta *M, const struct mjob *j, uint32_t attempt, char *out, size_t n);
/* The user's request again, with resv, key and user set for the site; hold: with `hold`
 * true (the spool cancelling the copy this key may have made: a new one never starts). */
void meta_send_submit(struct meta *M, struct msite *s, struct mjob *j, const char *resv,
                      uint32_t attempt, bool hold);
void meta_send_estimate(struct meta *M, struct msite *s, struct mjob *j, int kind, uint64_t id);
void meta_send_reserve(struct meta *M, struct msite *s, struct mjob *j, const char *name,
                       int64_t start);

/* ---- metastage.c: files and sites (issue 26) ---- */

/* Submits j at its site s (meta_send_submit with j->resv and j->attempt) once its
 * inputs are whole there: offers them first (j->staging meanwhile; a Slurm site gets the
 * SUBMIT at once, and refuses files itself). */
void meta_submit(struct meta *M, struct msite *s, struct mjob *j);
/* The site's answer to a request of kind RK_FHAVE/RK_FPUT/RK_PLIST/RK_FGET: a job whose
 * inputs are all whole there now is submitted. */
void meta_stage_reply(struct meta *M, struct msite *s, int kind, uint64_t arg,
                      const struct wire_msg *m);
/* A job staging at s one of whose inputs s refused (its staging over), why the text;
 * NULL when none. The caller places it elsewhere. */
struct mjob *meta_stage_refused(struct meta *M, struct msite *s, char *why, size_t wl);
/* Job j ended at its site as state st (why): its outputs are copied here first (true),
 * or it has none (false: the caller sets the state). */
bool meta_pull_begin(struct meta *M, struct mjob *j, int st, const char *why);
/* Site s went down (or the role reloads): its transfers and copies forgotten (they start
 * again when it answers). */
void meta_stage_reset(struct meta *M, struct msite *s);
void meta_stage_free(struct meta *M);

/* ---- metaorder.c: the outbox ---- */

const char *meta_order_kind_name(int kind);
/* Stores an order (kind OR_*) to site about the spool's job (0: none) and the site's job
 * sjob (cancel, withdrawal) or reservation resv (release), and sends it when the site is
 * up; the same order already waiting is not added twice. */
void meta_order_add(struct meta *M, int site, int kind, uint64_t job, uint64_t sjob,
                    const char *resv);
/* RESV_RELEASE of resv at s as an order (nothing when resv is empty). */
void meta_send_release(struct meta *M, struct msite *s, const char *resv);
/* The site's answer to order oid (err: an ERROR of code with msg). */
void meta_order_answer(struct meta *M, struct msite *s, uint64_t oid, bool err, uint64_t code,
                       const char *msg);
/* Order oid's request is gone unanswered (its site went down): sent again later. */
void meta_order_unsent(struct meta *M, uint64_t oid);
/* Job j was cancelled while its submission at its site was unanswered: a cancel of the
 * copy it may have made, sent once the answer gives its id (meta_order_submitted) or,
 * when the answer is lost (a restart, the site down), by submitting again with the same
 * key and `hold` (the site gives back the copy it made, or makes a held one) first. */
void meta_order_cancel_unanswered(struct meta *M, struct mjob *j);
/* The answer to a submission of ended job j at s: its copy sjob (0: refused, none made). */
void meta_order_submitted(struct meta *M, struct msite *s, struct mjob *j, uint64_t sjob);
/* A submission of job j at site went unanswered (the site down). */
void meta_order_submit_lost(struct meta *M, int site, uint64_t job);
/* Site came back up: its orders go at once. */
void meta_orders_site_up(struct meta *M, int site);
/* Sends the orders due to the sites that are up (a bounded number in flight per site). */
void meta_orders_tick(struct meta *M);
/* Orders not acknowledged yet to site (a job's: struct mjob orders). */
uint32_t meta_orders_at(const struct meta *M, int site);
int meta_orders_save(struct meta *M);
/* record_load's callback for the orders table: arg is the role. */
int meta_order_load(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen);
void meta_orders_free(struct meta *M);
/* j starts again from scratch (JOB_CTL requeue): spooled, to be placed anew with a new
 * attempt (a new key); its copy is gone, or its site is unreachable (why: the reason). */
void meta_job_requeue_now(struct meta *M, struct mjob *j, const char *why);

/* ---- metaplace.c: placement rounds ---- */

/* Why no known site can ever hold r (text into why), or false when one can or some
 * site is not known yet. */
bool meta_nowhere(struct meta *M, const struct meta_request *r, char *why, size_t whylen);
/* Picks the best site not tried yet and reserves there (or submits, for slurm_m). */
void meta_decide(struct meta *M, struct mjob *j);
/* ESTIMATE at every eligible site not tried yet (move: the others than its own). */
void meta_ask_estimates(struct meta *M, struct mjob *j, bool move);
/* A site's answer (e, or META_NEVER; answered false: none will come) to group gid. */
/* Possible starts the spool asks a site for (ESTIMATE `max`): enough to find the first
 * one after a job's inputs can be there (issue 25 item 4). */
#define META_EST_WINDOWS 8
/* A site's ESTIMATE answer: its earliest start (META_NEVER: none) and possible starts. */
struct meta_est_answer {
    int64_t earliest;
    struct meta_window w[META_EST_WINDOWS];
    size_t n;
};
void meta_group_answer(struct meta *M, uint64_t gid, int site, const struct meta_est_answer *a,
                       bool answered);
/* The start job j is ranked by and reserved at on site i from its answer a: the first
 * possible start once the inputs the site lacks can be there (earliest when it lacks
 * none; staging after the earliest when the answer lists no such start). */
int64_t meta_staged_start(struct meta *M, const struct mjob *j, int i,
                          const struct meta_est_answer *a);
/* Starts placements of queued jobs (up to META_INFLIGHT_MAX under way). */
void meta_place_some(struct meta *M);
/* Placement at j's site failed (refused, timed out): back to the spool, next site. */
void meta_place_failed(struct meta *M, struct mjob *j, const char *why);
/* Site j->site refused j for good (its request, not the moment: wire error INVALID,
 * FIELD, DENIED...): that site is not tried again, and once every site has refused it
 * the job ends `failed` at once with the sites' reasons. */
void meta_place_refused(struct meta *M, struct mjob *j, const char *why);
/* j's move failed: it stays where it is. */
void meta_move_failed(struct meta *M, struct mjob *j, const char *why);
void meta_job_cancel_at_site(struct meta *M, struct mjob *j);
/* A job loaded in PLACING state after a restart: resend its submission. */
void meta_resume(struct meta *M, struct mjob *j);
/* JOB_CTL requeue (metareq.c): j starts again from scratch, placed anew once its copy
 * at a site is known cancelled (why: the reason); see docs/meta.md "Requeue". */
void meta_job_requeue(struct meta *M, struct mjob *j);

/* ---- metaout.c: job --output through the spool ---- */

/* Relays user request m (JOB_GET with `output`, held as handle by daemon_hold) for job j
 * to j's site: JOB_GET (the site's job, `tasks`, `output`, the user's `from`/`count`);
 * row (rowlen bytes, copied) is the spool's JOB `job` map and `tasks` array (msgpack,
 * one after the other) as they are now. false (nothing sent: out of memory) when the
 * caller must answer at once. */
bool meta_out_ask(struct meta *M, const struct mjob *j, const struct wire_msg *m, uint64_t handle,
                  const void *row, size_t rowlen);
/* The site's reply m (JOB or ERROR) to relay request `handle`: the user's JOB, held
 * reply answered (`at_site` or `site_error`). */
void meta_out_answer(struct meta *M, uint64_t handle, const struct wire_msg *m);
/* The relay of handle cannot be answered by its site (down, silent): the user's JOB with
 * `site_error` why; into reply when not NULL (the daemon's expire), else held reply.
 * false when handle is not (or no longer) relayed: nothing written. */
bool meta_out_fail(struct meta *M, uint64_t handle, const char *why, struct wire_buf *reply);
void meta_out_free(struct meta *M);

/* ---- metasite.c: the sites ---- */

int meta_sites_parse(struct meta *M, char *err, size_t errlen);
int meta_sites_open(struct meta *M);
void meta_sites_close(struct meta *M);
/* Forgets the requests in flight and the estimate groups (after a failed commit the
 * jobs are reloaded; late replies then match nothing and are ignored) but keeps the
 * connections and the sites' view: a full disk does not make a healthy site down. */
void meta_sites_forget(struct meta *M);
void meta_sites_tick(struct meta *M);
/* j's estimated start at site i in the round under way (0 when none is held). */
int64_t meta_est(const struct mjob *j, int i);
/* Sets it (the array allocated on first use, every other site 0); -1 without memory. */
int meta_est_set(struct meta *M, struct mjob *j, int i, int64_t v);
/* Every site's to v, at the start of a round; -1 without memory (nothing changed). */
int meta_est_fill(struct meta *M, struct mjob *j, int64_t v);

/* ---- metareq.c: the user requests ---- */

void meta_dispatch(struct meta *M, const struct wire_msg *m, struct wire_buf *reply);
/* JOB_WAIT's view of the spool's jobs (daemon/endwait.h; role: the struct meta) */
extern const struct endwait_ops meta_endwait_ops;

/* ---- metastats.c: the statistics page, stats.json and /metrics (daemon/statspage.h) ---- */

int metastats_open(struct meta *M, char *err, size_t errlen);
void metastats_close(struct meta *M);

#endif

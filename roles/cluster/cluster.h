/*
 * cluster.h - the cluster manager / task server role (X-Com task server).
 *
 * State lives in memory and is written through to the role's store in the same loop
 * turn; a reply is sent only after the turn's commit (see cluster.c). Jobs are bags of
 * numbered tasks produced by an application (app.h); nodes pull tasks, return results,
 * and send heartbeats (handlers.c). Re-issue and node estimates are in tasks.c.
 *
 * The files call each other downwards only (a file calls those on its line or below):
 *   top      cluster.c (start-up, loop, cluster_load), handlers.c, scored_psync.c,
 *            scored_admin.c, stats.c, stats_html.c, master.c, pin.c
 *   middle   feed.c > scored_ack.c > scored.c > requeue.c, jobdep.c; purge.c; sessions.c;
 *            tasks.c > validate_res.c > validator.c > validate_dec.c > validate.c
 *   bottom   scored_output.c > scored_store.c; state_rec.c > valid_state.c, drain.c >
 *            state.c; subkey.c, app.c; acct.c (below state_rec.c and scored_store.c,
 *            above state.c); files.c > files_ckpt.c > files_pckpt.c, files_par.c >
 *            scored_output.c, scored_store.c, state.c (issue 26, files.h; the store
 *            itself is daemon/filestore.h);
 *            workwait.c (idle nodes told of new work: the daemon only)
 *   engine/  the pure SCore-D policy (engine/scored.h): lib/ only
 * An upper file learns of a lower one's change through state (c->evt, dirty flags),
 * never by a call upwards.
 */
#ifndef GRIDNODE_CLUSTER_H
#define GRIDNODE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/config.h"
#include "daemon/acct.h"
#include "daemon/curve.h"
#include "daemon/purgeq.h"
#include "daemon/record.h"
#include "wire/wire.h"

struct store;
struct store_table;
struct loop;
struct daemon;
struct statspage;
struct json_t;
struct depend;

/* A JOB reply stops adding outputs once it passes this size (the frame cap is 64 MiB). */
#define CLUSTER_REPLY_MAX (32u << 20)
/*
 * A list reply (JOBS, NODES) stops adding rows once it passes this size, or at the
 * request's count, whichever comes first; it then says where to go on ("next"). One row
 * is always added, and a row is bounded (argv cut to CLUSTER_ROW_ARGV_MAX bytes).
 */
#define CLUSTER_LIST_MAX (1u << 20)
#define CLUSTER_LIST_COUNT 1000u /* default rows per page */
#define CLUSTER_ROW_ARGV_MAX 4096u
/* bytes of a node's feature list (HELLO "features", the wire field's cap) */
#define CLUSTER_FEATURES_MAX 1024u

struct cluster_cfg {
    char listen[CONFIG_STR_MAX];
    char state_dir[CONFIG_STR_MAX];
    char log_level[CONFIG_STR_MAX];
    double k_wait, k_wait_dead;
    long hb_s;
    long idle_wait_s;
    double default_estimate_s;
    double min_wait_s;
    long input_unit_kb;
    long default_limit_s;
    long max_attempts;
    long node_daily_quota; /* tasks per day of a node after node-side errors (BOINC-like) */
    long node_poll_s;      /* a computing node checks in this often (cancels arrive) */
    int heartbeat_extends;
    long stats_interval_s;
    char stats_http[CONFIG_STR_MAX]; /* "HOST:PORT" of the statistics server, "" = none */
    int sync;
    long map_mb;
    long peer_queue;     /* limits.peer_queue (daemon/daemon.h) */
    long peer_timeout_s; /* limits.peer_timeout_s (daemon/netopts.h) */
    long ev_keep;        /* events.keep (feed.c) */
    /* SCore-D resource management (scored*.c) */
    long sd_queues, sd_default_queue, sd_quantum_ms, sd_sync_ms, sd_lost_requeues;
    char sd_hosts[CONFIG_STR_MAX];
    char sd_rc[CONFIG_STR_MAX];
    /* sessions.c */
    long forget_after_s, max_sessions_per_address;
    long retention_s; /* purge.c */
    /* issue 11: report deadlines and work requests in seconds per processor type */
    long deadline_s;   /* tasks.deadline_s: a job's report deadline when it gives none */
    double unit_gflop; /* tasks.unit_gflop: GFLOP in one work unit (est_s from gflops) */
    /* [project]: the master endpoint list (MASTER_GET, master.c) */
    char project_name[CONFIG_STR_MAX];
    char project_endpoints[CONFIG_STR_MAX];
    char project_endpoints_file[CONFIG_STR_MAX];
    /* validate.c: result validation and node trust (docs/validation.md) */
    double v_spot_fraction, v_check_min;
    long v_trust_after, v_redeem_spots, v_validator_timeout_s, v_validator_attempts;
    long v_validator_max;
    struct curve_conf sec;    /* [security] (daemon/curve.h) */
    struct acct_conf acct;    /* [acct] (daemon/acct.h) */
    long files_job_mb;        /* files.job_mb (files.c, issue 26): a job's inputs at most */
    long files_user_mb;       /* files.user_mb: a user's stored files at most, 0 no limit */
    long files_upload_wait_s; /* files.upload_wait_s: a stalled cut-through upload fails */
    long files_keep_s;        /* files.keep_s: a file no job names is kept this long */
    long files_ckpt_mb;       /* files.ckpt_mb: one task's checkpoint at most (files_ckpt.c) */
};

enum task_state { TS_NEW = 0, TS_ISSUED = 1, TS_DONE = 2 };
enum job_state { JS_QUEUED = 0, JS_RUNNING, JS_DONE, JS_CANCELLED };

/* One task in memory: 48 bytes; its result lives only in the store. */
struct task {
    uint8_t state;     /* enum task_state */
    uint8_t ok;        /* done and succeeded */
    uint16_t errors;   /* results that could not run the task (node-side errors) */
    uint32_t issues;   /* how many times it was handed out */
    uint32_t node;     /* index of the node holding the latest issue */
    uint32_t input_kb; /* size of its input, for the estimate */
    uint32_t won;      /* issue number of the final result (done tasks) */
    uint32_t avoid;    /* 1 + node whose node-side error made it re-issuable; 0: none */
    int64_t expiry_ms; /* wall clock: re-issue after this (while issued) */
    /* report deadlines (unix seconds, 0: none) of the latest issue and the one before */
    uint32_t dl, dl_prev;
};

struct job {
    uint64_t id;
    char *name, *user;
    char **argv;
    uint32_t argc;
    bool shell, has_stdin, issuable, dirty;
    bool held;    /* gridnode hold: none of its tasks is handed out until released */
    bool network; /* submit --network (issue 23): its tasks keep the host's network */
    /* gridnode requeue (issue 15): times requeued, and the highest issue number handed
       out before the last requeue: results of issues up to it are dropped as stale */
    uint32_t requeues, rq_issue;
    /* submit --export / --chdir (issue 15, wire/jobenv.h): "NAME=value" strings added to
       the node's environment (NULL: none), the directory tasks start in (NULL: their
       own fresh one) */
    char **env;
    char *cwd;
    double complexity;
    uint32_t limit_s;
    uint32_t deadline_s;       /* report deadline after issue (issue 11) */
    uint32_t nlate;            /* results received after their deadline */
    uint16_t gpus;             /* GPU instances per task; 0: a CPU task */
    char gpu_type[32];         /* "" : any GPU type */
    uint32_t ntasks, next_new; /* next_new: first index never issued */
    uint32_t ndone, nfailed, ndups;
    enum job_state state;
    int64_t submitted_ms, finished_ms;
    /* the submission's request key (subkey.c), or NULL */
    char *key;
    struct task *tasks; /* [0, next_new) allocated */
    uint32_t cap;
    struct jvalid *v; /* replication, validator, known answers (validate.c); NULL: plain */
    /* submit --dependency (issue 27, jobdep.c): the terms still waited for, NULL: none
       (its tasks are not handed out while set); why it ended when the cluster ended it
       (DependencyNeverSatisfied), NULL: none */
    struct depend *dep;
    char *reason;
    /* submit --constraint (issue 27, lib/constraint.h): canonical text, NULL: none; its
       tasks go only to nodes whose features satisfy it (tasks.c pick_fits) */
    char *constraint;
    uint8_t dep_seen; /* jobdep.c: 1 + its status at the last pass, 0: not seen yet */
    /* job_state_shown() last published as an event (feed.c); NULL: none yet */
    const char *ev_shown;
    /* issue 26 (files.c): its "inputs" and "outputs" as one stored msgpack map, NULL: none */
    void *data;
    size_t data_len;
    uint32_t ckpt_s; /* submit --checkpoint-s (files_ckpt.c; kept in "jobdata"), 0: none */
    /* SUBMIT "host" (issue 26: a batch role's task with files, placed by its scheduler):
       only the node of this name takes its tasks (tasks.c pick_fits); NULL: any */
    char *host;
};

/* A node's record of checked results (validate.c, docs/validation.md "Node trust"). */
struct ntrust {
    uint32_t consec;               /* consecutive results found valid by a check */
    uint32_t nvalid, ninvalid;     /* results found valid / invalid by a check */
    uint32_t spot_pass, spot_fail; /* known-answer tasks passed / failed */
    uint32_t probation;            /* spot checks still to pass after a failed one */
    int64_t spot_ok_ms;            /* last passed spot check (backtracking starts here) */
};

/* One GPU type a node declared in HELLO (issue 11). */
#define NODE_GPU_TYPES 4
struct node_gpu {
    char type[32];
    uint32_t count;
    float gflops; /* peak per instance; 0: unknown */
};

struct node {
    char sid[33];
    char name[64], cluster[64], client[64], os[64], ip[64];
    /* the identity (authorized-keys name) that opened the session; only it (or an
       admin) may act for it (issue 23, sessions_authorize); "" plain or stored before */
    char owner[CURVE_NAME_MAX];
    uint32_t mhz, cores, slots;
    uint64_t mem_mb;
    bool active, dirty;
    /* its name's drain (drain.c), NULL: not drained; drained: no new tasks, no host
       for new parallel jobs */
    const struct drain_ent *drain;
    /* host information for parallel jobs (HELLO, PSYNC) */
    char arch[32], model[64];
    uint64_t disk_mb; /* free disk of its state directory plus watchfs directories */
    bool procs;       /* it runs parallel processes (PSYNC) */
    struct node_gpu gpu[NODE_GPU_TYPES]; /* declared GPU types (HELLO "gpus") */
    uint8_t ngpu;
    float cpu_gflops; /* per core (HELLO "cpu_gflops"); 0: use the measured speed */
    /* HELLO "features" (issue 27): canonical list (lib/constraint.h), "" none */
    char features[CLUSTER_FEATURES_MAX + 1];
    int64_t first_ms, last_ms;
    double spu;        /* measured seconds per work unit (EWMA), 0 = none yet */
    uint64_t results;  /* valid results returned */
    uint32_t inflight; /* tasks currently issued to it */
    uint64_t cur_job;  /* current portion and when it started */
    uint32_t cur_idx;
    int64_t cur_since_ms, cur_est_ms;
    /* daily quota (tasks.node_daily_quota): 0 = not limited; after a node-side error
       half the configured one, halved on each more, doubled on each valid result (back
       to 0 at the full value); qused counts tasks issued in the day from qday_ms */
    uint32_t quota, qused;
    int64_t qday_ms;
    /* tasks of cancelled jobs this node holds, sent in its next TASKS or STATUS_ACK */
    struct cancel_ent *cancels;
    uint32_t ncancels, capcancels;
    /* sessions.c: forgotten (until the next compaction), its address, its place there */
    bool gone;
    uint32_t addr, aprev, anext;
    struct ntrust tr; /* validate.c */
};

/* The sessions created from one peer address, oldest first (sessions.c). */
struct addr_ent {
    char ip[64];
    uint32_t count, head, tail;
};

struct cancel_ent {
    uint64_t job;
    uint32_t idx, issue;
};

/* A re-issue candidate: (expiry, task); stale entries are skipped when popped. */
struct heap_ent {
    int64_t expiry_ms;
    uint64_t job;
    uint32_t idx, issue;
};

/*
 * The jobs saved in the turn being committed whose state (as users see it) changed: the
 * feed (feed.c) publishes them after the commit. on: the feed is open.
 */
struct ev_turn {
    bool on;
    uint64_t *bag, *par; /* bag jobs (SUBMIT), parallel jobs (PSUBMIT): ids */
    uint32_t nbag, capbag, npar, cappar;
};

struct cluster {
    struct cluster_cfg cfg;
    struct store *store;
    int t_jobs, t_tasks, t_results, t_dups, t_stdin, t_nodes, t_meta;
    int t_vres, t_known;      /* validate.c: every result of a checked task; known answers */
    int t_drain;              /* drain.c: drained nodes by name */
    struct drain_ent *drains; /* drain.c */
    uint32_t ndrains;
    struct vstate *vs; /* validate.c */
    struct scored *sd; /* parallel jobs, queues, limits (scored_int.h) */
    struct loop *loop;
    /* ROUTER, reading, group commit, replies (daemon/daemon.h); the state_dir lock */
    struct daemon *daemon;
    struct endwait *endwait; /* held JOB_WAITs of users (daemon/endwait.h, issue 28) */
    int lockfd;

    struct job **jobs;                  /* sorted by id */
    uint32_t njobs, capjobs, open_from; /* open_from: first job that may still yield */
    uint64_t next_job;
    /* random id of this state, made with it (meta "incarnation"); results of another
     * incarnation dropped since start */
    char incarnation[33];
    uint64_t stale_results;
    struct node *nodes;
    uint32_t nnodes, capnodes;
    uint32_t *node_hash; /* open addressing: node index + 1, 0 = empty */
    uint32_t hash_cap;
    struct addr_ent *addrs; /* dense; addr_hash: index + 1, 0 = empty */
    uint32_t naddrs, capaddrs, *addr_hash, addr_hash_cap;
    uint32_t ngone;      /* forgotten sessions still in nodes[] (until compaction) */
    int64_t compact_ms;  /* last compaction */
    struct purgeq purge; /* purged jobs whose per-task records are still being deleted */
    uint32_t retention_ticks;
    struct heap_ent *heap;
    uint32_t nheap, capheap;
    double global_spu; /* across all nodes, for nodes without measurements */
    bool meta_dirty;
    /* the bag jobs marked dirty this turn (cluster_mark_job), so the commit writes them
     * without a pass over every job (issue 28: 10^6 pending jobs); dirty_all: the list
     * could not grow, every job is looked at */
    uint64_t *dirty_ids;
    uint32_t ndirty, capdirty;
    bool dirty_all;
    /* a job with a dependency may exist (set when one is submitted or loaded): without
     * one, jobdep_step makes no pass over the jobs (jobdep.c) */
    bool dep_maybe;
    bool turn_failed; /* a handler could not buffer its writes: undo the turn */
    uint64_t turn_changes;
    uint32_t load_skipped;   /* records cluster_load could not load (each logged with its key) */
    struct statspage *stats; /* stats files and stats.http server (stats.c) */
    struct ev_turn evt;      /* events of the turn (state_rec.c, scored_store.c; feed.c) */
    /* since start, for /metrics: hand-outs, re-issues, results completing a task, others */
    uint64_t n_issued, n_reissued, n_results, n_dups;
    /* acct.c (issue 27): the accounting table, its sweep, this turn's winning results */
    int t_acct;
    struct acct_sweep acct_sw;
    struct acct_note *acct_notes;
    uint32_t nacct_notes, capacct_notes;
    /* files.c (issue 26): the file store's index and tables */
    struct filestore *files;
    int t_files, t_jobdata;
    int t_ckpt; /* files_ckpt.c: each task's latest checkpoint */
    /* jobdep.c: ids whose status changed in the last pass (sorted) */
    uint64_t *dep_chg;
    uint32_t ndep_chg, capdep_chg;
};

/* cluster.c */
int cluster_main(int argc, char **argv);
extern const struct config_key cluster_keys[];
/* The store's tables, terminated by {NULL} (for tests that open a cluster's state). */
extern const struct store_table *const cluster_store_tables;
/* Finds every table of an open store (c->store) and keeps their indexes (c->t_*). */
void cluster_store_find_tables(struct cluster *c);

/* cluster.c: the whole state from the store (records of every file), and its release */
int cluster_load(struct cluster *c);
void cluster_free_state(struct cluster *c);

/* state_rec.c: the records of jobs, tasks, nodes and meta */
int cluster_load_records(struct cluster *c); /* meta, nodes, jobs, tasks */
/* record_load of table with fn (its arg: c), the records skipped as unreadable added to
 * c->load_skipped: 0, or -1 (store failed, or fn stopped). */
int cluster_record_load(struct cluster *c, int table, record_load_fn fn);
void cluster_free_records(struct cluster *c);
void cluster_job_free(struct job *j); /* its validation part included (valid_state.c) */
int cluster_save_dirty(struct cluster *c);
int cluster_task_save(struct cluster *c, struct job *j, uint32_t idx);
/* HELLO or stored "gpus"/"cpu_gflops" into n; NULL, or why they were refused. */
const char *cluster_node_load_gpus(struct node *n, const msgpack_object *m);
/*
 * One node as a map: the stored record (with "owner"), or when live the NODES row
 * (running/cur_job/cur_since; "sid" blank for a user requester, curve_may_see_sessions).
 */
/* Packs node n (a NODES row; live false: its stored record). procs: the parallel
 * processes running on it now (cluster_procs_by_node), counted in the live row's
 * `running` with its bag tasks. */
void cluster_node_pack(const struct node *n, struct wire_buf *wb, bool live, uint32_t procs);
/* counts[i] = the parallel processes running now on node i, for every node (counts
 * has c->nnodes entries): one pass over the running parallel jobs (feed.c). */
void cluster_procs_by_node(const struct cluster *c, uint32_t *counts);
/*
 * One key/value pair of a stored result into a reply (JOB task maps): as stored, but
 * for a user requester "node" (the session id of the node that sent it) becomes that
 * node's name ("" once the session is forgotten): users never see session ids.
 */
void cluster_pack_result_pair(struct cluster *c, const msgpack_object *k, const msgpack_object *v,
                              struct wire_buf *wb);

/* state.c: jobs, nodes, tasks in memory */
void cluster_mark_job(struct cluster *c, struct job *j);
void cluster_mark_node(struct cluster *c, struct node *n);
struct job *cluster_job_find(struct cluster *c, uint64_t id);
int cluster_job_add(struct cluster *c, struct job *j);
struct node *cluster_node_find(struct cluster *c, const char *sid, size_t len);
/*
 * A request of node n's session arrived from Peer-Address peer: the one place that
 * records activity (last contact, "active again" log, address, node record), used by
 * every request path (handlers.c, scored_psync.c).
 */
void cluster_node_seen(struct cluster *c, struct node *n, const char *peer);
/* cluster_node_new returns a zeroed slot; set its sid, then cluster_node_register(). */
struct node *cluster_node_new(struct cluster *c);
int cluster_node_register(struct cluster *c);
int job_grow_tasks(struct job *j, uint32_t need);
const char *job_state_name(enum job_state s);
/* As users see it: "failed" for a done job with failed tasks. */
const char *job_state_shown(const struct job *j);
/* One job summary map (JOB); as a list row (row: JOBS, docs/wire.md 6.2, and the feed's
 * bag events) argv is cut to CLUSTER_ROW_ARGV_MAX bytes. */
void cluster_job_pack(const struct job *j, struct wire_buf *wb, bool row);
/*
 * key + argv for a list row: at most max bytes of text in all, the element that crosses
 * the limit cut at a UTF-8 character boundary, later ones left out. cluster_argv_cut()
 * says beforehand whether it will cut (the row then also carries "argv_trunc": true).
 */
bool cluster_argv_cut(char *const *v, uint32_t n, size_t max);
void cluster_put_argv(struct wire_buf *wb, const char *key, char *const *v, uint32_t n, size_t max);
const char *task_state_name(const struct task *t);
/* A stored record decoded (wire_precheck first): 0 when it is a map, else -1 (up freed). */
int cluster_unpack_map(msgpack_unpacked *up, const void *val, size_t vlen);
/* Appends id to one of c->evt's lists (v, n of cap); out of memory, the event is lost. */
void cluster_evt_push(uint64_t **v, uint32_t *n, uint32_t *cap, uint64_t id);
void heap_push(struct cluster *c, struct heap_ent e);
/* A min-heap of heap_ent by expiry_ms in (*v)[0..*n) of capacity *cap: the re-issue
 * heap above and the copy heap of validate.c. Push: 0, or -1 when out of memory (the
 * heap unchanged); pop: the earliest entry (the heap must not be empty). */
int xheap_push(struct heap_ent **v, uint32_t *n, uint32_t *cap, struct heap_ent e);
struct heap_ent xheap_pop(struct heap_ent *v, uint32_t *n);
/* Remembers that n holds (job, idx, issue) of a cancelled job (sent in its next reply). */
void cluster_cancel_note(struct cluster *c, struct node *n, uint64_t job, uint32_t idx,
                         uint32_t issue);

/* requeue.c (issue 15): why j cannot be requeued, or NULL; start j again from scratch
 * (running tasks cancelled on their nodes, results dropped): 0, or -1 (store). */
const char *cluster_requeue_refused(const struct job *j);
int cluster_job_requeue(struct cluster *c, struct job *j);

/* jobdep.c (issue 27): SUBMIT/PSUBMIT "dependency" checked (ids known, owners) into
 * *out (NULL: none): 0, or -1 with the reason in why; the waiting jobs re-checked after
 * a turn that changed a job (on_commit), released or ended as never satisfiable. */
int jobdep_submit(struct cluster *c, const msgpack_object *m, struct depend **out, char *why,
                  size_t wl);
void jobdep_free(struct depend *d);
void jobdep_step(struct cluster *c);
/* state.c: "Dependency: TERM", the first term d still waits for, into buf */
void cluster_dep_reason(const struct depend *d, char *buf, size_t len);
/* state.c (issue 27): SUBMIT/PSUBMIT "constraint" into *out (canonical text, malloc'd;
   NULL when absent). 0, or -1 with the reason in why (*out NULL). */
/* HELLO "features" into n->features (canonical). NULL, or why it is refused. */
const char *cluster_node_load_features(struct node *n, const msgpack_object *m, char *why,
                                       size_t wl);

/* tasks.c: issue, re-issue, estimates, results */
int tasks_issue(struct cluster *c, struct node *n, uint32_t want, struct wire_buf *wb,
                uint32_t *nissued);
/*
 * A work request in seconds per processor type (TASK_GET/RESULT "req", issue 11): per
 * type the tasks whose est_s add up to the seconds asked for, stopping at the first that
 * reaches them; count caps the total (0: only the reply's cap). After tasks_issue_req,
 * got[i] says whether type i received at least one task, and dry whether the cluster
 * ran out of work for the open types (not a cap: count, reply size or quota).
 */
#define TASK_REQ_TYPES 16
struct task_req {
    uint32_t ntypes, count;
    char type[TASK_REQ_TYPES][32];
    double left[TASK_REQ_TYPES];
    bool asked[TASK_REQ_TYPES], got[TASK_REQ_TYPES];
    bool dry; /* the request ended because no task fitted the types still open */
};
int tasks_issue_req(struct cluster *c, struct node *n, struct task_req *rq, struct wire_buf *wb,
                    uint32_t *nissued);
/* Estimated run time of one task of j on n (seconds), for processor slot (0 CPU, 1+g). */
double tasks_est_s(const struct cluster *c, const struct node *n, const struct job *j, double work,
                   int slot);
int tasks_result(struct cluster *c, struct node *n, const msgpack_object *res);
/* Seconds until node n may get tasks again under its daily quota (0: now). */
int64_t tasks_quota_wait_s(struct cluster *c, struct node *n);
/* Writes n's pending cancels as the key "cancel" and an array, then forgets them. */
void tasks_cancel_put(struct node *n, struct wire_buf *wb);
void tasks_extend(struct cluster *c, struct node *n, uint64_t job, uint32_t idx, uint32_t issue);
void tasks_release_node(struct cluster *c, struct node *n);
/* TASK_PIN (issue 26): the tasks of j issued to a node other than j->host may be issued
 * again now; returns how many. */
uint32_t tasks_repin(struct cluster *c, struct job *j);
double tasks_work(const struct job *j, size_t input_bytes, long input_unit_kb);
int64_t tasks_wait_ms(const struct cluster *c, const struct node *n, double work);
void nodes_check_active(struct cluster *c);

/* subkey.c: idempotent submission by request key */
const char *subkey_invalid(const msgpack_object *m); /* why m's "key" is unacceptable */
struct job *subkey_find_job(struct cluster *c, const msgpack_object *m); /* same key+user */

/* state.c: rebuilds the session-id hash from nodes[] (skipping forgotten ones) */
int cluster_node_rehash(struct cluster *c);

/* sessions.c: forgetting idle sessions, the per-address cap (see the file comment) */
int sessions_index(struct cluster *c);
void sessions_free(struct cluster *c);
int sessions_admit(struct cluster *c, const char *peer, char *why, size_t whylen);
int sessions_attach(struct cluster *c, uint32_t idx);
void sessions_sweep(struct cluster *c);
/*
 * May the current requester (curve_current) act for session n with request req (its
 * name, for the log)? 0, or -1 with the reason in why (logged with the identity): n was
 * opened by another key. A session without a recorded owner is claimed by its first
 * requester (its record is saved in the turn).
 */
int sessions_authorize(struct cluster *c, struct node *n, const char *req, char *why,
                       size_t whylen);

/* purge.c: purging finished jobs (see the file comment) */
int purge_load(struct cluster *c);

/* drain.c: nodes drained by name (gridnode nodes --drain/--resume, NODE_CTL) */
struct drain_ent {
    struct drain_ent *next;
    char name[64];
    char reason[256];
    int64_t since_ms;
};
int drain_load(struct cluster *c);
void drain_free(struct cluster *c);
const struct drain_ent *drain_find(const struct cluster *c, const char *name);
void drain_pack(const struct node *n, struct wire_buf *wb);
/* Drains (reason != NULL) or resumes node name: stored in this turn. -1: store failed. */
int drain_set(struct cluster *c, const char *name, const char *reason);
void purge_free(struct cluster *c);
void purge_step(struct cluster *c);
void purge_retention(struct cluster *c);
int purge_request(struct cluster *c, const msgpack_object *m, struct wire_buf *reply,
                  uint64_t req_id, char *err, size_t errlen, int *code);

/* acct.c (issue 27): the accounting record of an ended job into the turn (nothing for
 * one still running): 0, or -1 (store); wb is scratch, left empty. ACCT; retention. */
struct pjob;
/* A bag job's record sums the CPU and wall time of its tasks' winning results: those of
 * earlier turns from the store, those of this turn (not committed yet) from the notes
 * tasks_result takes; cluster_acct_turn_end forgets the notes once the turn's records
 * are written (end of cluster_save_dirty). */
struct acct_note {
    uint64_t job;
    double cpu_s, wall_s;
    int64_t start_ms; /* when the task started: received - wall time */
};
void cluster_acct_note(struct cluster *c, const struct job *j, const msgpack_object *res);
void cluster_acct_turn_end(struct cluster *c);
int cluster_acct_bag(struct cluster *c, const struct job *j, struct wire_buf *wb);
int cluster_acct_par(struct cluster *c, const struct pjob *j, const char *state,
                     struct wire_buf *wb); /* state: pj_state_name's */
void cluster_acct_request(struct cluster *c, const struct wire_msg *m, struct wire_buf *reply);
void cluster_acct_tick(struct cluster *c);
/* purge.c: finished job j (bag) or p (parallel, pstate its state name) is purged this
 * turn: its record is written now if it has none (it ended before accounting was kept,
 * or the retention cap deleted it). 0, or -1 (store). */
int cluster_acct_purging(struct cluster *c, const struct job *j, const struct pjob *p,
                         const char *pstate);

/* master.c: MASTER_GET (issue 11): writes MASTER or an ERROR into reply */
void master_reply(struct cluster *c, const struct wire_msg *msg, struct wire_buf *reply);
/* valid_state.c: the validation part of the job, task and node records */
void valid_job_encode(const struct job *j, struct wire_buf *wb); /* key "valid" + map */
int valid_job_load(struct job *j, const msgpack_object *m);
void valid_job_free(struct job *j);
void valid_task_encode(struct cluster *c, const struct job *j, uint32_t idx,
                       struct wire_buf *wb); /* key "v" + its value */
void valid_task_load(struct cluster *c, struct job *j, uint32_t idx, const msgpack_object *m);
#define VALID_TRUST_KEYS 7
void valid_trust_pack(const struct node *n, struct wire_buf *wb);
void valid_trust_load(struct node *n, const msgpack_object *m);

/* validate*.c, validator.c: replication with quorum, validators, spot checks, node trust */
int valid_init(struct cluster *c);
void valid_free(struct cluster *c);  /* validate_res.c: validators killed first */
void valid_reset(struct cluster *c); /* forgets queues and heaps (state reloaded) */
/* SUBMIT fields of validation into j (before the job is added); NULL or the reason. */
const char *valid_submit(struct cluster *c, struct job *j, const msgpack_object *m);
int valid_load(struct cluster *c); /* after jobs, nodes, tasks: candidates, answers */
/* A spot-check task or a checked job's task for n: 0 and (*jp, *idx), else -1. */
int valid_take(struct cluster *c, struct node *n, int64_t now, struct job **jp, uint32_t *idx);
uint32_t valid_issue_no(const struct job *j, const struct task *t);
int valid_issued(struct cluster *c, struct node *n, struct job *j, uint32_t idx, int64_t expiry_ms);
int valid_result(struct cluster *c, struct node *n, struct job *j, uint32_t idx, uint32_t issue,
                 const msgpack_object *res);
void valid_extend(struct cluster *c, struct node *n, struct job *j, uint32_t idx, uint32_t issue,
                  int64_t until);
void valid_release_node(struct cluster *c, struct node *n);
void valid_cancel(struct cluster *c, struct job *j);
void valid_tick(struct cluster *c); /* once a second: validators, resumed decisions */
/* Session compaction: node index i becomes map[i] (UINT32_MAX: forgotten). */
void valid_remap(struct cluster *c, const uint32_t *map);
/* JOB task maps of a checked job: 1 if a "results" key will be added for idx. */
int valid_task_has_results(const struct job *j, uint32_t idx);
void valid_pack_results(struct cluster *c, const struct job *j, uint32_t idx, struct wire_buf *wb,
                        bool output);

/* stats.c */
/* Sets up the statistics (and starts the stats.http server); 0, or -1 with err. */
int stats_open(struct cluster *c, char *err, size_t errlen);
int stats_write(struct cluster *c);
/* stats_html.c: the page's body, drawn from the stats.json document (a json_t *) */
void stats_html(FILE *f, struct json_t *st, void *arg);

/* handlers.c */
struct request {
    const struct wire_msg *msg;
    const char *peer; /* Peer-Address of the connection, or "" */
    struct wire_buf *reply;
};
void handlers_dispatch(struct cluster *c, struct request *r);
/* pin.c: TASK_PIN (issue 26, docs/wire.md 6.19 "Moving a pinned task"). */
void pin_h_task_pin(struct cluster *c, struct request *r);
/* JOB_WAIT's view of the cluster's jobs (daemon/endwait.h; role: the struct cluster) */
extern const struct endwait_ops handlers_endwait_ops;
/* NODE_CTL (drain / resume by name; admin only): every request, done or refused, is
 * logged with who asked (issue 23). */
void drain_h_node_ctl(struct cluster *c, struct request *r);
/* Replaces r's reply with an ERROR of code and the formatted text (state.c). */
void cluster_reply_error(struct request *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

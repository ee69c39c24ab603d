/*
 * cluster.h - the cluster manager / task server role (X-Com task server).
 *
 * State lives in memory and is written through to the role's store in the same loop
 * turn; a reply is sent only after the turn's commit (see cluster.c). Jobs are bags of
 * numbered tasks produced by an application (app.h); nodes pull tasks, return results,
 * and send heartbeats (handlers.c). Re-issue and node estimates are in tasks.c.
 */
#ifndef GRIDNODE_CLUSTER_H
#define GRIDNODE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/config.h"
#include "lib/curve.h"
#include "wire/wire.h"

struct store;
struct store_table;
struct loop;
struct daemon;

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
    int sync;
    long map_mb;
    long peer_queue; /* limits.peer_queue (lib/daemon.h) */
    long ev_keep;    /* events.keep (feed.c) */
    /* SCore-D resource management (scored*.c) */
    long sd_queues, sd_default_queue, sd_quantum_ms, sd_sync_ms;
    char sd_hosts[CONFIG_STR_MAX];
    char sd_rc[CONFIG_STR_MAX];
    /* sessions.c */
    long forget_after_s, max_sessions_per_address;
    long retention_s; /* purge.c */
    struct curve_conf sec; /* [security] (lib/curve.h) */
};

enum task_state { TS_NEW = 0, TS_ISSUED = 1, TS_DONE = 2 };
enum job_state { JS_QUEUED = 0, JS_RUNNING, JS_DONE, JS_CANCELLED };

/* One task in memory: 40 bytes; its result lives only in the store. */
struct task {
    uint8_t state;  /* enum task_state */
    uint8_t ok;     /* done and succeeded */
    uint16_t errors; /* results that could not run the task (node-side errors) */
    uint32_t issues; /* how many times it was handed out */
    uint32_t node;   /* index of the node holding the latest issue */
    uint32_t input_kb; /* size of its input, for the estimate */
    uint32_t won;      /* issue number of the final result (done tasks) */
    uint32_t avoid;    /* 1 + node whose node-side error made it re-issuable; 0: none */
    int64_t expiry_ms; /* wall clock: re-issue after this (while issued) */
};

struct job {
    uint64_t id;
    char *name, *user;
    char **argv;
    uint32_t argc;
    bool shell, has_stdin, issuable, dirty;
    double complexity;
    uint32_t limit_s;
    uint32_t ntasks, next_new; /* next_new: first index never issued */
    uint32_t ndone, nfailed, ndups;
    enum job_state state;
    int64_t submitted_ms, finished_ms;
    /* the submission's request key (subkey.c), or NULL */
    char *key;
    struct task *tasks; /* [0, next_new) allocated */
    uint32_t cap;
};

struct node {
    char sid[33];
    char name[64], cluster[64], client[64], os[64], ip[64];
    uint32_t mhz, cores, slots;
    uint64_t mem_mb;
    bool active, dirty;
    /* host information for parallel jobs (HELLO, PSYNC) */
    char arch[32], model[64];
    uint64_t disk_mb; /* free disk of its state directory plus watchfs directories */
    bool procs;       /* it runs parallel processes (PSYNC) */
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

struct cluster {
    struct cluster_cfg cfg;
    struct store *store;
    int t_jobs, t_tasks, t_results, t_dups, t_stdin, t_nodes, t_meta;
    struct scored *sd; /* parallel jobs, queues, limits (scored_int.h) */
    struct loop *loop;
    /* ROUTER, reading, group commit, replies (lib/daemon.h); the state_dir lock */
    struct daemon *daemon;
    int lockfd;

    struct job **jobs; /* sorted by id */
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
    uint32_t ngone;     /* forgotten sessions still in nodes[] (until compaction) */
    int64_t compact_ms; /* last compaction */
    uint64_t *purgeq;   /* purged jobs whose per-task records are still being deleted */
    uint32_t npurgeq, cappurgeq, retention_ticks;
    struct heap_ent *heap;
    uint32_t nheap, capheap;
    double global_spu; /* across all nodes, for nodes without measurements */
    bool meta_dirty;
    bool turn_failed; /* a handler could not buffer its writes: undo the turn */
    uint64_t turn_changes;
    uint32_t load_skipped; /* records cluster_load could not load (each logged with its key) */
};

/* cluster.c */
int cluster_main(int argc, char **argv);
extern const struct config_key cluster_keys[];
/* The store's tables, terminated by {NULL} (for tests that open a cluster's state). */
extern const struct store_table *const cluster_store_tables;

/* state.c: loading and saving records */
int cluster_load(struct cluster *c);
void cluster_free_state(struct cluster *c);
int cluster_save_dirty(struct cluster *c);
void cluster_mark_job(struct cluster *c, struct job *j);
void cluster_mark_node(struct cluster *c, struct node *n);
struct job *cluster_job_find(struct cluster *c, uint64_t id);
int cluster_job_add(struct cluster *c, struct job *j);
void cluster_job_free(struct job *j);
struct node *cluster_node_find(struct cluster *c, const char *sid, size_t len);
/* cluster_node_new returns a zeroed slot; set its sid, then cluster_node_register(). */
struct node *cluster_node_new(struct cluster *c);
int cluster_node_register(struct cluster *c);
int job_grow_tasks(struct job *j, uint32_t need);
int cluster_task_save(struct cluster *c, struct job *j, uint32_t idx);
/* One node as a map: the stored record, plus running/cur_job/cur_since when live. */
void cluster_node_pack(const struct node *n, struct wire_buf *wb, bool live);
const char *job_state_name(enum job_state s);
/* As users see it: "failed" for a done job with failed tasks. */
const char *job_state_shown(const struct job *j);
/*
 * key + argv for a list row: at most max bytes of text in all, the element that crosses
 * the limit cut at a UTF-8 character boundary, later ones left out. cluster_argv_cut()
 * says beforehand whether it will cut (the row then also carries "argv_trunc": true).
 */
bool cluster_argv_cut(char *const *v, uint32_t n, size_t max);
void cluster_put_argv(struct wire_buf *wb, const char *key, char *const *v, uint32_t n, size_t max);
const char *task_state_name(const struct task *t);

/* tasks.c: issue, re-issue, estimates, results */
int tasks_issue(struct cluster *c, struct node *n, uint32_t want, struct wire_buf *wb,
                uint32_t *nissued);
int tasks_result(struct cluster *c, struct node *n, const msgpack_object *res);
/* Seconds until node n may get tasks again under its daily quota (0: now). */
int64_t tasks_quota_wait_s(struct cluster *c, struct node *n);
/* Remembers that n holds (job, idx, issue) of a cancelled job (sent in its next reply). */
void tasks_cancel_note(struct cluster *c, struct node *n, uint64_t job, uint32_t idx,
                       uint32_t issue);
/* Writes n's pending cancels as the key "cancel" and an array, then forgets them. */
void tasks_cancel_put(struct node *n, struct wire_buf *wb);
void tasks_extend(struct cluster *c, struct node *n, uint64_t job, uint32_t idx, uint32_t issue);
void tasks_release_node(struct cluster *c, struct node *n);
void heap_push(struct cluster *c, struct heap_ent e);
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

/* purge.c: purging finished jobs (see the file comment) */
int purge_load(struct cluster *c);
void purge_free(struct cluster *c);
void purge_step(struct cluster *c);
void purge_retention(struct cluster *c);
int purge_request(struct cluster *c, const msgpack_object *m, struct wire_buf *reply,
                  uint64_t req_id, char *err, size_t errlen, int *code);

/* stats.c */
int stats_write(struct cluster *c);

/* handlers.c */
struct request {
    const struct wire_msg *msg;
    const char *peer; /* Peer-Address of the connection, or "" */
    struct wire_buf *reply;
};
void handlers_dispatch(struct cluster *c, struct request *r);

#endif

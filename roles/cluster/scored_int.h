/*
 * scored_int.h - the I/O side of SCore-D resource management inside the cluster role:
 * parallel jobs in memory (scored_store.c, scored_output.c: the bottom, with state.c),
 * scheduling (scored.c, requeue.c, scored_ack.c, feed.c), and the requests (scored_psync.c,
 * scored_admin.c). The pure policy is in engine/scored.h.
 */
#ifndef GRIDNODE_SCORED_INT_H
#define GRIDNODE_SCORED_INT_H

#include "roles/cluster/cluster.h"
#include "roles/cluster/engine/scored.h"

enum pj_state {
    PJ_WAITING = 0, /* not admitted yet: waits for resources (asked to wait) */
    PJ_QUEUED,      /* admitted to a cluster, in its queue, never scheduled */
    PJ_RUNNING,     /* scheduled now: its processes run */
    PJ_STOPPED,     /* descheduled (gang slice, preempted, queue deactivated) */
    PJ_DONE,        /* every process exited 0 */
    PJ_FAILED,      /* a process failed, could not start or was lost */
    PJ_KILLED,      /* killed by a limit (CPU time, memory, disk, wall clock) */
    PJ_CANCELLED,
    PJ_REQUEUEING, /* requeued (issue 15): its processes are being killed; once every
                      node has confirmed them gone it is waiting again (requeue.c) */
};
/* ended: requeueing is not (the job comes back), but its processes are killed too */
#define PJ_TERMINAL(s) ((s) >= PJ_DONE && (s) != PJ_REQUEUEING)
#define PJ_KILLS(s) ((s) >= PJ_DONE)

enum pr_state { PR_NEW = 0, PR_STARTED, PR_EXITED };

/* One process (rank) of a parallel job. */
struct prank {
    uint32_t host; /* index into the job's hosts */
    uint8_t st;    /* enum pr_state */
    bool held;     /* the node named it in the PSYNC being handled */
    uint8_t rep;   /* what it reported then: 'r'un, 's'top, 'e'xit */
    uint8_t sig;
    int32_t exit;
    double cpu_s;
    uint64_t rss_kb, disk_kb;
    char *error; /* could not start (node-side), or NULL */
};

struct pjob {
    uint64_t id;
    char *name, *user, *group;
    char *key; /* the submission's request key (subkey.c), or NULL */
    char **argv;
    uint32_t argc;
    bool shell, wait, dirty;
    bool placed;      /* PSUBMIT named its hosts: never waits, never time-sliced */
    bool network;     /* submit --network (issue 23); scored_ack.c: what it means */
    bool lost;        /* failed because a host or a process was lost, not by itself
                         (issue 24): the batch role runs such an element again */
    uint8_t ev_state; /* 1 + the state last published as an event (events.c); 0: none */
    struct sd_request rq;
    uint64_t req_cpu_s, limit_s;
    uint32_t queue, queue0, demotions;
    uint32_t requeues; /* gridnode requeue (issue 15): how many times; Slurm's Restarts */
    enum pj_state state;
    char reason[256];
    char cluster[SD_NAME];
    uint32_t nhosts;
    uint32_t *hosts; /* node indices (UINT32_MAX: a session no longer known) */
    uint64_t mem_lim, disk_lim, max_cpu_s;
    double cpu_s, res_base;
    int64_t run_ms, slice_ms, last_ran_ms;
    int64_t submitted_ms, started_ms, finished_ms;
    struct prank *ranks; /* rq.nprocs */
    /* PSUBMIT env / chdir (issue 15, wire/jobenv.h): added to each process's
       environment, its starting directory; NULL: none */
    char **env;
    char *cwd;
    /* submit -p --dependency (issue 27, jobdep.c): the terms still waited for, NULL:
       none; while set the job is waiting and admission is not tried */
    struct depend *dep;
    uint8_t dep_seen; /* jobdep.c: 1 + its status at the last pass, 0: not seen yet */
    /* submit -p --constraint (issue 27, lib/constraint.h): canonical text, NULL: none;
       admission places it only on hosts whose features satisfy it (scored.c) */
    char *constraint;
    /* PSUBMIT inputs / outputs (issue 26, files_par.c): the map filestore_jobdata_pack
       makes, kept in the job's record as "files"; NULL: none */
    void *data;
    size_t data_len;
    /* submit -p --checkpoint-s (issue 26, files_pckpt.c; in "data"): the period, 0: none.
       ck: the checkpoints its ranks delivered (mirrors table "pckpt"), nck of them;
       ck_have, ck_gen: the newest generation every rank delivered in one run */
    uint32_t ckpt_s;
    struct pck *ck;
    uint32_t nck, capck;
    bool ck_have;
    uint32_t ck_gen;
    uint64_t ck_from; /* PSUBMIT ckpt_from: the job ck_gen was copied from (memory only) */
};

/* One rank's stored checkpoint of a generation (files_pckpt.c, table "pckpt"). */
struct pck {
    uint32_t rank, gen, run; /* run: the job's requeues when it was delivered */
};

/* One host of the hosts file (the role of scorehosts.db). */
struct sd_hostent {
    char name[SD_NAME], cluster[SD_NAME];
    double speed;
    char watchfs[CONFIG_VALUE_MAX + 1];
};

struct scored {
    struct sd_settings set;
    bool set_dirty, resched, rc_applied;
    struct pjob **jobs; /* by id */
    uint32_t njobs, cap;
    /* jobs[0..live_from) are settled: ended, no process left on any node, saved; the
     * per-turn and per-PSYNC loops start here (scored_settle) */
    uint32_t live_from;
    struct feed *feed;   /* events and held requests (feed.c) */
    struct pjob **khash; /* (user, key) -> newest job with it (subkey.c) */
    uint32_t kcap, kn;
    struct sd_hostent *hf;
    uint32_t nhf;
    int t_pjobs, t_scored, t_poutput, t_pckpt;
};

/* scored_admin.c: start-up, CONSOLE, SD_INFO */
/* The configuration checks of the SCore-D side (queues.default, the hosts file):
 * 0, or -1 with err. Run by --check-config and at start-up alike. */
int scored_check_config(const struct cluster_cfg *cfg, char *err, size_t errlen);
int scored_open(struct cluster *c); /* hosts file, settings, jobs, startup file */
void scored_close(struct cluster *c);
int scored_startup(struct cluster *c); /* the startup file, once per state directory */
void h_console(struct cluster *c, struct request *r);
void h_sd_info(struct cluster *c, struct request *r);
void scored_pack_queues(const struct cluster *c, struct wire_buf *wb);

/* scored.c */
/* One line of the hosts file (an inih handler; user is the struct scored). */
int scored_hostline(void *user, const char *section, const char *name, const char *value);
void scored_schedule(struct cluster *c, bool rotate);
void scored_cancel(struct cluster *c, struct pjob *j);
void scored_node_left(struct cluster *c, struct node *n, const char *why);
/* A host or process of j was lost (not j's own doing, issue 24): requeued while it may
 * be (queues.lost_requeues, not a batch role's placed job), else failed with `lost`. */
void scored_job_lost(struct cluster *c, struct pjob *j, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void h_psubmit(struct cluster *c, struct request *r);
/* After each commit: skips the settled jobs at the front (sd->live_from). */
void scored_settle(struct cluster *c);
/* Ends j in state st (no-op once ended), with the reason; the decision runs again. */
void scored_job_end(struct cluster *c, struct pjob *j, enum pj_state st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Wall clock, CPU time and residence of an admitted job: kill or demote (K7). */
void scored_check_limits(struct cluster *c, struct pjob *j, int64_t now);
/* Replaces r's reply with an ERROR of code and the formatted text. */
void scored_reply_err(struct request *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const struct sd_hostent *scored_hostent(const struct cluster *c, const char *name);
/* The cluster name and speed of a node (hosts file, HELLO, or arch/model). */
void scored_node_class(const struct cluster *c, const struct node *n, char *name, size_t len,
                       double *speed);
void scored_pack_clusters(struct cluster *c, struct wire_buf *wb);
/* One page of the clusters array: from position `from`, at most `count` clusters, ending
 * once the page passes max_bytes (at least one cluster); *next = the position of the
 * first cluster left out, 0 when none is. */
void scored_pack_clusters_page(struct cluster *c, struct wire_buf *wb, uint64_t from,
                               uint64_t count, size_t max_bytes, uint64_t *next);

/* scored_psync.c */
void h_psync(struct cluster *c, struct request *r);

/* scored_ack.c: writes the whole PSYNC_ACK (request id id) for node index me into wb */
void scored_psync_ack(struct cluster *c, struct wire_buf *wb, uint64_t id, uint32_t me);
/* How many of the commands of node me's PSYNC_ACK it would act on (0: nothing changes). */
uint32_t scored_psync_actions(struct cluster *c, uint32_t me);

/* feed.c: the change feed (EVENTS) and held requests (long-polls) */
int feed_open(struct cluster *c);
void feed_close(struct cluster *c);
/* After a successful commit: publish the turn's events, answer held requests. */
void feed_after_commit(struct cluster *c);
void feed_discard(struct cluster *c); /* after a failed commit */
/* A node whose PSYNC is held is in contact (not silent) while it is held. */
void feed_keepalive(struct cluster *c);
void h_events(struct cluster *c, struct request *r);
/* Remembers PSYNC request req_id of node n held as handle; -1 when full. */
int feed_psync_hold(struct cluster *c, uint64_t handle, uint64_t req_id, const struct node *n);
/* daemon_ops.expire: the answer to a held EVENTS or PSYNC. */
void feed_expire(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id,
                 struct wire_buf *reply);

/* subkey.c: the parallel job submitted with m's key by m's user, or NULL */
struct pjob *subkey_find_pjob(struct cluster *c, const msgpack_object *m);
/* Adds j (if it has a key) to the key index: 0, or -1 out of memory. */
int subkey_index_pjob(struct cluster *c, struct pjob *j);
void subkey_clear_pjobs(struct scored *sd);

/* requeue.c (issue 15): requeue parallel job j, or NULL; else why not (a sentence). */
const char *scored_requeue(struct cluster *c, struct pjob *j);
/* A requeueing j whose processes are all gone goes back to waiting (from scratch). */
void scored_requeue_progress(struct cluster *c, struct pjob *j);

/* scored_store.c */
struct pjob *scored_job_find(struct cluster *c, uint64_t id);
int scored_job_add(struct cluster *c, struct pjob *j);
void scored_job_free(struct pjob *j);
/* j (settled) concerns a node again (it reported one of its processes): back in view. */
void scored_unsettle(struct cluster *c, const struct pjob *j);
int scored_load(struct cluster *c);
void scored_free_state(struct cluster *c);
int scored_save_dirty(struct cluster *c);
const char *pj_state_name(enum pj_state s);
/* A job summary map (JOBS, JOB); with ranks, the per-process table too. */
void scored_pack_job(const struct cluster *c, const struct pjob *j, struct wire_buf *wb,
                     bool ranks);

/* Which ranks' stdout and stderr a JOB reply carries (JOB_GET output, from, count). */
struct pj_output {
    uint32_t from, to; /* the window: ranks [from, to) */
    uint32_t next;     /* out: the first rank of the window left out because the reply
                        * passed CLUSTER_REPLY_MAX (ask again from there), or to */
};
/* scored_pack_job with ranks, but only the "ranks" array's header (its nprocs elements
 * are the caller's: scored_pack_job_output). */
void scored_pack_job_head(const struct cluster *c, const struct pjob *j, struct wire_buf *wb);
/* One element of JOB "ranks": a map of 9 keys plus extra keys the caller packs next. */
void scored_pack_rank(const struct cluster *c, const struct pjob *j, uint32_t r,
                      struct wire_buf *wb, uint32_t extra);

/* scored_output.c: the "poutput" table, (job, rank) -> the process's stdout and stderr */
/*
 * Stores the output carried by PSYNC entry e (its exit report) for rank of j, in the
 * turn's commit, with the output files it names ("files", "files_note"; issue 26):
 * files_bad NULL when they were checked whole here (files_result_check), else why none
 * is kept (it becomes the "files_note"); nothing when it carries none of these. Returns 0, or -1
 * (out of memory: the turn must fail).
 */
int scored_output_put(struct cluster *c, const struct pjob *j, uint32_t rank,
                      const msgpack_object *e, const char *files_bad);
/* scored_pack_job with ranks, each rank of out's window carrying its stored output. */
void scored_pack_job_output(const struct cluster *c, const struct pjob *j, struct wire_buf *wb,
                            struct pj_output *out);

#endif

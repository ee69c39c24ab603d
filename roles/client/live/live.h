/*
 * live.h - the multi-project volunteer client (issue #11), internal to live*.c.
 *
 * One process, several projects (each: share, scheduler endpoints, optional master
 * endpoint), one BOINC-style engine (engine.h) deciding what runs and whom to ask for
 * how much work: the same engine code the emulator drives. The files, each calling
 * only the ones above it in this list (and the loop calling back each file's own
 * handlers):
 *
 *   live_state.c    the store and its records; vcl_kick, vcl_sick, the clock
 *   live_task.c     the tasks and their processes (start, suspend, resume, end)
 *   live_link.c     the sockets to the projects' servers
 *   live_par.c      parallel jobs (PSYNC) and node health
 *   live_status.c   heartbeats (STATUS) and the servers' cancel lists
 *   live_rpc.c      HELLO, RESULT/TASK_GET, MASTER_GET; every socket's replies
 *   live_stage.c    files: inputs fetched into the cache, outputs uploaded (issue 26)
 *   live_sched.c    the engine pass and the driver's loop turn (vcl_pump)
 *   live_load.c     the state at start-up (config sections, store, migration)
 *   live_control.c  the control socket (CLIENT_STATUS, ATTACH, DETACH)
 *   live.c          start-up (vcl_main), the loop's handlers, the way out
 */
#ifndef GRIDNODE_LIVE_H
#define GRIDNODE_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/netopts.h"
#include "roles/client/live/client.h"
#include "roles/client/engine/engine.h"
#include "roles/client/live/health.h"
#include "roles/client/live/pprocs.h"
#include "roles/client/live/runner.h"
#include "wire/wire.h"

#define LIVE_MAX_PROJECTS 64
#define LIVE_MAX_GPU 64 /* instances per GPU type */

enum ltask_state { LT_QUEUED = 0, LT_RUNNING, LT_STOPPED, LT_DONE };

struct live;
struct lstage;
struct stage_cache;
struct stage_files;

/* One DEALER to one endpoint (a scheduler of a project, or its master). */
struct lsock {
    struct live *l;
    int project;
    char url[ENGINE_URL_MAX];
    void *sock;
    int64_t created_ms;
    struct netopts_link link; /* connection state, monitor, measured round trips */
    int64_t said_ms;          /* a failed handshake was last logged then (0: never) */
};

/* A project's parallel processes and its PSYNC long-poll (live_par.c). */
struct lpar {
    struct pprocs pp;
    bool waiting, now, urgent; /* a PSYNC in flight; one due at once; that one was */
    uint64_t id;               /* the PSYNC in flight (replies with another id: stale) */
    int64_t sent_ms, wait_ms, next_ms;
    int64_t retry_ms; /* an urgent PSYNC that could not be sent goes again from then */
    uint32_t sync_ms;
};

struct lproj {
    struct lsock *socks[ENGINE_MAX_ENDPOINTS]; /* one per scheduler endpoint */
    struct lpar *par; /* parallel processes (NULL: none yet, or client.parallel off) */
    int nsocks;
    char sid[65], inc[65];
    char session_url[ENGINE_URL_MAX]; /* the endpoint sid belongs to */
    bool welcomed;
    uint32_t hb_s, poll_s;
    int64_t last_status_ms, status_sent_ms;
    uint64_t status_id;
    struct lsock *status_sock;
    double est_avg; /* observed run time of its tasks (moving average); 0 = none yet */
    double last_s;  /* the last task's observed run time (not saved); 0 = none yet */
    /* duration correction factor per processor type (BOINC's DCF): observed run time /
       the server's est_s; 0 = no sample yet. Server estimates are multiplied by it, and
       work requests (`req`) divided by it, so both speak the server's scale. */
    double dcf[ENGINE_MAX_PTYPES];
    unsigned long tasks_got, results_sent;
    double run_s; /* run time of its tasks finished since this client started */
    bool held;    /* its server said why it gives this node no tasks (TASKS reason) */
};

struct ltask {
    uint64_t id; /* local, unique, the engine task's id */
    int project;
    uint64_t job;
    uint32_t idx, issue, limit_s;
    bool shell, abandon;
    bool bad_host;    /* bad names what this host lacks (node-side), not a malformed task */
    bool log_pending; /* its "finished" line waits for the commit (log_finished) */
    char bad[200];
    char **argv;
    uint32_t argc;
    void *in;
    size_t inlen;
    struct runner_env renv; /* submit --export / --chdir (issue 15) */
    char ptype[ENGINE_NAME_MAX];
    uint32_t gpus;
    double est_s, deadline, received;
    int state; /* enum ltask_state */
    struct run run;
    int limit_timer, kill_timer;
    int64_t run_ms, episode_ms; /* run time before this episode; its start (0: not running) */
    int64_t limit_left_ms;
    int gpu[LIVE_MAX_GPU]; /* GPU instances held (-1 = none) */
    int ngpu;
    void *result;
    size_t rlen;
    struct live *l;
    /* issue 26 (stage.h, live_stage.c): its files, NULL: none; inputs all in the cache;
       kept outputs still to upload (the result waits), the next of them */
    struct stage_files *files;
    bool staged, uploading;
    uint32_t up_next;
};

/* The RPC or master fetch in flight (the engine allows one at a time). */
struct lrpc {
    bool active;
    int stage; /* 0: HELLO first, 1: RESULT/TASK_GET, 2: MASTER_GET */
    bool rehello;
    struct engine_action act;
    char url[ENGINE_URL_MAX];
    uint64_t *report_ids;
    size_t nreport, report_cap;
    size_t *report_idx;
    uint64_t id;
    int64_t sent_ms, send_until_ms;
    struct lsock *sock;
    struct lsock *master; /* temporary socket of a master fetch */
    bool unsent;          /* waiting for the connection to be up */
    void *msg;            /* the request as sent (or to be sent when the link is up) */
    size_t msglen, msgcap;
};

struct live {
    struct client_cfg *cfg;
    const char *file;
    struct store *store;
    int t_tasks, t_projects, t_meta;
    struct loop *loop;
    struct daemon *d;
    void *zctx;
    int sigfd;
    struct engine *e;
    struct engine_config ecfg;
    int slots;
    struct lproj proj[LIVE_MAX_PROJECTS]; /* parallel to e->projects */
    struct ltask **tasks;
    size_t ntasks, captasks;
    uint64_t next_id, next_req;
    uint8_t gpu_busy[ENGINE_MAX_PTYPES][LIVE_MAX_GPU];
    struct lrpc rpc;
    struct engine_new_task *nt;
    size_t ntcap;
    struct wire_buf wb;
    int64_t last_save_ms;
    double sched_cpu_s; /* CPU time spent in the engine (tick, schedule, poll) */
    unsigned long engine_calls;
    char host[256];
    bool unsaved;        /* finished results written, not committed yet (task_finish) */
    size_t nlog_pending; /* tasks whose "finished" line waits for the commit */
    bool single;         /* only client.server: one project, named after it (vcl_single) */
    char cpu_model[128];
    long cpu_mhz;
    struct health health; /* node health (health.h): sick = no new work, see live_par.c */
    int ranks;            /* CPU instances reserved for running parallel ranks */
    bool kicked;          /* an engine pass is due at this loop turn (vcl_kick) */
    /* issue 26 (live_stage.c): transfers, the input cache, inputs fetched since start */
    struct lstage *stage;
    struct stage_cache *cache;
    uint64_t files_fetched, bytes_fetched;
};

/* ---- live_state.c: the store, the records, the flags ---- */
int vcl_store_open(struct live *l);
/* Commits the turn's writes; a failure makes the node sick (vcl_sick). */
void vcl_commit(struct live *l);
/* Asks for an engine pass (schedule, RPC) at the next loop turn. */
void vcl_kick(struct live *l);
/* The host cannot run tasks: see health.h. */
void vcl_sick(struct live *l, const char *why);
double vcl_now(void);
struct ltask *vcl_task_of(const struct live *l, size_t engine_index);
long vcl_engine_index(const struct live *l, const struct ltask *t);
int vcl_engine_new(struct live *l);
void vcl_task_free(struct ltask *t);
struct ltask *vcl_task_from_map(struct live *l, int project, const msgpack_object *m);
void vcl_task_save(struct live *l, const struct ltask *t);
void vcl_task_forget(struct live *l, const struct ltask *t);
void vcl_project_save(struct live *l, int p);
void vcl_project_delete(struct live *l, const char *name);
void vcl_project_restore(struct live *l, int p, const msgpack_object *m);
/* A text record of the meta table ("" when absent or unreadable). */
void vcl_meta_str(struct live *l, const char *key, char *buf, size_t cap);

/* ---- live_task.c: tasks and their processes ---- */
/* The engine's estimate of t's run time (its est_s corrected by the DCF, else the
   project's average, else client.default_est_s). */
double vcl_task_estimate(const struct live *l, const struct ltask *t);
int vcl_task_adopt(struct live *l, struct ltask *t);
/* Removes t from the list (not from the engine or the store): its process killed, its
 * pipes, timers and GPU instances released; frees it. */
void vcl_task_drop(struct live *l, struct ltask *t);
size_t vcl_project_drop_tasks(struct live *l, int p, bool in_engine);
void vcl_task_start(struct live *l, struct ltask *t);
void vcl_task_suspend(struct live *l, struct ltask *t);
void vcl_task_resume(struct live *l, struct ltask *t);
void vcl_task_cancel(struct live *l, struct ltask *t);
bool vcl_task_reaped(struct live *l, pid_t pid, int status, const struct rusage *ru);
/* Logs the tasks whose results the last commit made durable. */
void vcl_log_finished(struct live *l);
/* Hands every task not started yet back as a node-side error (the node is sick). */
void vcl_hand_back_queued(struct live *l);

/* ---- live_link.c: sockets ---- */
struct lsock *vcl_link_open(struct live *l, int p, const char *url);
void vcl_sock_close(struct live *l, struct lsock **sp);
struct lsock *vcl_project_sock(struct live *l, int p, const char *url);
struct lsock *vcl_project_session_sock(struct live *l, int p);
int64_t vcl_rpc_timeout(const struct live *l, const struct lsock *s);

/* ---- live_par.c: parallel jobs (PSYNC) and node health ---- */
/* Before every engine pass: health re-probe, the CPU instances parallel ranks take
 * (engine_ptype_reserve), and "no new work" on every project while sick. */
void vcl_capacity(struct live *l);
/* Sends the PSYNC long-polls that are due; fails overdue ones. */
void vcl_par_pump(struct live *l);
/* A reply on one of project p's sockets: true if it answered a PSYNC (consumed). */
bool vcl_par_reply(struct live *l, int p, const struct wire_msg *msg);
/* A child exited: true if it was a parallel process. */
bool vcl_par_reaped(struct live *l, pid_t pid, int status, const struct rusage *ru);
/* Free disk for HELLO (pprocs_free_disk_mb of the state directory). */
uint64_t vcl_par_disk_mb(const struct live *l, int p);
/* Kills and forgets project p's parallel processes (detach, exit). */
void vcl_par_drop(struct live *l, int p);

/* ---- live_status.c: heartbeats ---- */
void vcl_heartbeats(struct live *l);
void vcl_status_reply(struct live *l, int p, const struct wire_msg *msg);
void vcl_apply_cancel(struct live *l, int p, const msgpack_object *cancel);

/* ---- live_rpc.c: RPCs and every socket's replies ---- */
struct lsock *vcl_sock_open(struct live *l, int p, const char *url);
/* (Re)creates one DEALER per scheduler endpoint of project p, keeping unchanged ones. */
int vcl_project_sockets(struct live *l, int p);
/* Adds a project to the engine and the driver; its index, or -1 (errno). */
int vcl_project_add(struct live *l, const char *name, double share, const char *const *eps,
                    int neps, const char *master);
void vcl_rpc_start(struct live *l, const struct engine_action *a);
void vcl_rpc_pump(struct live *l);

/* ---- live_stage.c: files (issue 26) ---- */
/* The cache and the transfer timer: 0, or -1 (logged). */
int vcl_stage_open(struct live *l);
/* Fetches the inputs queued tasks need (starting those the engine chose meanwhile) and
 * uploads the outputs finished tasks kept (then their results may be reported). */
void vcl_stage_pump(struct live *l);
/* Closes the transfer sockets and frees the cache's index (NULL-safe). */
void vcl_stage_close(struct live *l);
/* Once the tasks are loaded: old kept checkpoints and orphaned working directories go
 * (ckpt_sweep). */
void vcl_ckpt_sweep(struct live *l);

/* ---- live_sched.c: the engine pass ---- */
/* The engine's parameters from cfg ([sched] keys at -1 take the automatic value for a
 * client with projects or, single, one with only client.server). */
void vcl_engine_config(const struct client_cfg *cfg, bool single, struct engine_config *c);
void vcl_pump(struct live *l);

/* ---- live_load.c: start-up state ---- */
/* Loads projects (store, then config sections not in the store) and tasks. */
int vcl_load(struct live *l, double now);
/* True when cfg names client.server, the file has no [project] section and the state
 * directory was not a volunteer's of projects (its file "projects"). */
bool vcl_single(const struct client_cfg *cfg, const char *file);

/* ---- live_control.c: the control socket ---- */
int vcl_project_detach(struct live *l, int p);
void vcl_control(void *arg, const struct wire_msg *m, const char *peer, struct wire_buf *reply);

#endif

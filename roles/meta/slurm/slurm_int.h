/*
 * slurm_int.h - the Slurm adapter's insides, shared by its files (bottom up):
 *   slurmparse.c  the pure parsers (slurm.h)
 *   slurmrun.c    running Slurm's commands: child processes, pipes, deadlines, the
 *                 requests' list
 *   slurmfiles.c  files (issue 26): inputs received into the site's workdir and linked
 *                 into a job's directory, outputs listed and read back
 *   slurmkeep.c   job directories removed once the spool is done with them (issue 26)
 *   slurmdone.c   what each request does with its command's output: replies and
 *                 next steps
 *   slurm.c       the site's requests (decoded into commands), the tick, new/destroy
 */
#ifndef GRIDNODE_META_SLURM_INT_H
#define GRIDNODE_META_SLURM_INT_H

#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "roles/meta/slurm/slurm.h"
#include "wire/wire.h"

/* C_LIST, C_RM: not Slurm commands but functions run in the child (sreq `child`) */
enum { C_SBATCH, C_SQUEUE, C_SINFO, C_SCONTROL, C_SCANCEL, C_SACCT, C_N, C_LIST = C_N, C_RM };
extern const char *const slurm_cmd_name[C_N + 2];

#define OUT_MAX (16u << 20) /* a command's output kept (squeue of many jobs) */
#define ARGS_MAX 40
#define POLL_MAX 256             /* jobs per squeue -j */
#define T_CONFIG 1               /* internal: scontrol show config (bf_window) */
#define T_POLL 2                 /* internal: squeue -j of the JOB_GETs waiting */
#define T_LIST 3                 /* internal: an ended job's outputs hashed (slurmfiles.c) */
#define T_RM 4                   /* internal: a job directory removed (slurmkeep.c) */
#define SLURM_KEEP_FAILED_MAX 64 /* directories whose removal failed, noted for a retry */

struct obuf {
    char *p;
    size_t n, cap;
};

struct sreq;
struct fdref {
    struct sreq *r;
    int which;
};

struct sreq {
    struct slurm_site *S;
    struct sreq *next;
    uint64_t rid;
    uint32_t type;
    int step;
    /* the command: to start (want), running (pid > 0), or done */
    bool want, admin;
    int cmd;
    char *argv[ARGS_MAX + 1];
    int argc;
    pid_t pid;
    int fd[2];
    struct fdref ref[2];
    bool reaped, timed_out;
    int status;
    int64_t deadline, started;
    struct obuf out, err;
    /* a reply ready to deliver at the next tick */
    void *rep;
    size_t replen;
    /* the request */
    char key[160], name[64], resv[64], user[64], jname[300];
    uint64_t job, procs, walltime_s, mem_mb, duration_s;
    int64_t start;
    bool parallel, hold; /* hold: sbatch --hold (the spool cancelling a copy it may have made) */
    char *wrap;
    char *con; /* submit --constraint (issue 27), canonical; NULL none; owned */
    /* T_POLL: the JOB_GETs it answers (pout: with `output`, issue 27) */
    uint64_t *prid, *pjob;
    bool *pout;
    uint32_t np;
    /* a first step's result kept for the second */
    int64_t i1, i2, i3, i4;
    char s1[64];
    /* issue 26: the SUBMIT's files (a map of inputs, outputs, checkpoint_s; owned),
     * the job's directory once known; T_LIST's directory and globs (owned), the
     * function its child runs instead of a command, its deadline (0: timeout_ms) */
    char *files;
    size_t files_len;
    bool ckpt;
    char chdir[SLURM_STR + 330];
    char *fdir, *fglobs;
    int (*child)(struct slurm_site *S, struct sreq *r);
    long tmo;
};

struct slurm_site {
    struct slurm_conf c;
    char site[64], owner[64];
    struct loop *loop;
    slurm_reply_fn fn;
    void *arg;
    char path[C_N][PATH_MAX];
    char **envp;
    bool runas;
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int ngroups;
    long bf_window_min;
    bool sacct;               /* accounting exists (AccountingStorageType) and sacct was found */
    bool config_known;        /* scontrol show config has answered (sacct is meaningful) */
    struct sreq *reqs, *tail; /* every request, oldest first */
    int running;
    /* JOB_GETs waiting for the next squeue */
    uint64_t *wrid, *wjob;
    bool *wout; /* JOB_GET `output`: the job's slurm-ID.out/.err read (issue 27) */
    uint32_t nw, capw;
    bool polling;
    pid_t *reap;
    uint32_t nreap, capreap;
    int kick; /* a 0 ms timer that starts new requests' commands in the next turn */
    /* a finished command's step (slurm_step_done): set by slurm_site_new, so the runner
     * (slurmrun.c) does not call up into the steps (slurmdone.c) */
    void (*done)(struct slurm_site *S, struct sreq *r);
    struct slurm_files *files; /* slurmfiles.c's state; NULL until used */
    /* slurmkeep.c: whom to ask whether a job directory may go, the pass over the
     * workdir under way (NULL: none), when the next may start, a removal running, the
     * directories whose removal failed and when to try them again */
    slurm_done_fn keep_fn;
    void *keep_arg;
    DIR *keep_scan;
    int64_t keep_next;
    bool keep_busy;
    struct {
        char name[NAME_MAX + 1];
        int64_t retry_at;
    } keep_failed[SLURM_KEEP_FAILED_MAX];
    uint32_t nkeep_failed;
};

/* ---- slurmrun.c: the commands ---- */

/* A new request of type (a site-interface type, T_CONFIG, T_POLL; 0: a reply made
 * without a command, r->rep) with the spool's request id, appended to S->reqs. NULL when
 * out of memory. */
struct sreq *slurm_req_new(struct slurm_site *S, uint32_t type, uint64_t rid);
/* Unlinks r and frees it (its pipes closed; a running command is not killed). */
void slurm_req_free(struct slurm_site *S, struct sreq *r);
/* Prepares command c (run with the jobs' identity unless admin); its arguments follow
 * with slurm_arg(); it starts from the next slurm_pump. */
void slurm_cmd(struct slurm_site *S, struct sreq *r, int c, bool admin);
void slurm_arg(struct sreq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts the commands that want to run, up to max_cmds at once. */
void slurm_pump(struct slurm_site *S);
/* Replies made without a command, deadlines (the process group killed), reaping. */
void slurm_run_tick(struct slurm_site *S);
/* A command's output as text ("" when none). */
const char *slurm_otext(const struct obuf *b);
/* Whether the command ran and exited 0. */
bool slurm_cmd_ok(const struct sreq *r);
/* Slurm could not be reached (rather than refusing). */
bool slurm_unreachable(const struct sreq *r);
/* Why a command failed, in one line. */
void slurm_why(const struct slurm_site *S, const struct sreq *r, char *b, size_t n);
/* A reply (wb, copied) for request rid, delivered at the next tick (never from inside
 * slurm_site_request). */
void slurm_ready(struct slurm_site *S, uint64_t rid, const struct wire_buf *wb);
/* An ERROR reply (code; the message printf-style, at most 700 bytes) for request rid:
 * sent at once when now (a command's step), else delivered at the next tick
 * (slurm_ready: from inside slurm_site_request). The one error helper of the adapter. */
void slurm_reply_errv(struct slurm_site *S, uint64_t rid, bool now, int code, const char *fmt,
                      va_list ap);
void slurm_reply_err(struct slurm_site *S, uint64_t rid, bool now, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- slurmfiles.c: files (issue 26) ---- */

/* FILE_HAVE (put false) / FILE_PUT (true) o: FILE_STATE or an ERROR, ready. */
void slurm_files_have(struct slurm_site *S, uint64_t rid, const msgpack_object *o, bool put);
/* FILE_GET o (an output of an ended, listed job): FILE_DATA or an ERROR, ready. */
void slurm_files_get(struct slurm_site *S, uint64_t rid, const msgpack_object *o);
/* JOB_GET o with `tasks` and `from` (the spool copying outputs): the task row, ready. */
void slurm_files_tasks(struct slurm_site *S, uint64_t rid, const msgpack_object *o);
/* Before sbatch of r (r->files): the job's directory made, its inputs linked in, r->chdir
 * set. 0, or -1 with the error reply for r->rid ready (slurm_ready): the caller frees r. */
int slurm_files_stage(struct slurm_site *S, struct sreq *r);
/* r->chdir of a keyed request made before (a resent submission that found its job). */
void slurm_files_dir(struct slurm_site *S, struct sreq *r);
/* Slurm job `job` was made for r: its directory and output globs noted (WORKDIR/
 * .gridnode-jobs/JOB) for when it ends. */
void slurm_files_submitted(struct slurm_site *S, struct sreq *r, uint64_t job);
/* Slurm says job ended (state, exit): 0 nothing to list, 1 its outputs are listed, -1
 * being listed (report it running meanwhile). */
int slurm_files_ended(struct slurm_site *S, uint64_t job, const char *state, int64_t ex);
/* T_LIST's child finished: the job's list kept; r freed. */
void slurm_files_listed(struct slurm_site *S, struct sreq *r);
/* Frees the files' state (slurm_site_destroy). */
void slurm_files_free(struct slurm_site *S);
/* The output list kept for the job whose directory dir was removed, dropped. */
void slurm_files_forget(struct slurm_site *S, const char *dir);

/* ---- slurmkeep.c: job directories' retention (issue 26) ---- */

/* A step of the pass over the workdir: a directory the spool is done with (keep_s ago)
 * has its removal started (one at a time). Call from the tick. */
void slurm_keep_tick(struct slurm_site *S);
/* T_RM's child finished: the emptied directory removed (or the failure noted); r freed. */
void slurm_keep_removed(struct slurm_site *S, struct sreq *r);
/* Frees the pass's state (slurm_site_destroy). */
void slurm_keep_free(struct slurm_site *S);

/* ---- slurmdone.c: the steps ---- */

/* r's command finished (S->done): its reply, or its next command. */
void slurm_step_done(struct slurm_site *S, struct sreq *r);
/* The arguments of sbatch shared by ESTIMATE and SUBMIT (partition, account, qos,
 * tasks, time, memory, directory, constraint). */
void slurm_job_args(struct slurm_site *S, struct sreq *r);
/* r's sbatch --parsable (SUBMIT/PSUBMIT's second step, or its only one without a key). */
void slurm_submit_cmd(struct slurm_site *S, struct sreq *r);

#endif

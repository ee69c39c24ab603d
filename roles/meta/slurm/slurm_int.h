/*
 * slurm_int.h - the Slurm adapter's insides, shared by its files (bottom up):
 *   slurmparse.c  the pure parsers (slurm.h)
 *   slurmrun.c    running Slurm's commands: child processes, pipes, deadlines, the
 *                 requests' list
 *   slurmdone.c   what each request does with its command's output: replies and
 *                 next steps
 *   slurm.c       the site's requests (decoded into commands), the tick, new/destroy
 */
#ifndef GRIDNODE_META_SLURM_INT_H
#define GRIDNODE_META_SLURM_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "roles/meta/slurm/slurm.h"

enum { C_SBATCH, C_SQUEUE, C_SINFO, C_SCONTROL, C_SCANCEL, C_SACCT, C_N };
extern const char *const slurm_cmd_name[C_N];

#define OUT_MAX (16u << 20) /* a command's output kept (squeue of many jobs) */
#define ARGS_MAX 40
#define POLL_MAX 256 /* jobs per squeue -j */
#define T_CONFIG 1   /* internal: scontrol show config (bf_window) */
#define T_POLL 2     /* internal: squeue -j of the JOB_GETs waiting */

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

/* ---- slurmdone.c: the steps ---- */

/* r's command finished (S->done): its reply, or its next command. */
void slurm_step_done(struct slurm_site *S, struct sreq *r);
/* The arguments of sbatch shared by ESTIMATE and SUBMIT (partition, account, qos,
 * tasks, time, memory, directory, constraint). */
void slurm_job_args(struct slurm_site *S, struct sreq *r);
/* r's sbatch --parsable (SUBMIT/PSUBMIT's second step, or its only one without a key). */
void slurm_submit_cmd(struct slurm_site *S, struct sreq *r);

#endif

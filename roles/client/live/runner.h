/*
 * runner.h - running one task as a real child process: its own process group and
 * working directory, standard input from a file, standard output and error captured
 * up to a bound (the rest is read and dropped, and the truncation is marked), a
 * wall-clock limit, exit status and CPU time from wait4().
 */
#ifndef GRIDNODE_RUNNER_H
#define GRIDNODE_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct capture {
    char *buf;
    size_t len, cap; /* cap: the bound */
    bool trunc;
    int fd; /* -1 once closed */
};

struct run {
    pid_t pid;
    struct capture out, err;
    int64_t start_ms, end_ms;
    bool reaped, timed_out;
    int status;
    struct rusage ru;
    char error[256]; /* set when the task could not be started */
    bool host_fault; /* with error: this host is at fault (working directory, pipes,
                        fork), not the task (a program that cannot be executed) */
    char workdir[512];
    bool pooled;    /* runner_start's directory: pooled again when left empty */
    bool has_stdin; /* runner_start wrote workdir/.stdin */
    /* runner_spawn: the child's error pipe, read once it exited (runner_spawned) */
    bool spawn_wait;
    int spawn_fd;
    char prog[128];
    /* sandbox.h: the process is the init of a sandbox, spawn_fd its report (read when
       it is reaped: the task's own status, or why it could not start) */
    bool sandboxed, spawn_failed, uid_taken;
    uid_t uid;     /* the task's uid (sandbox_uid_take), given back by runner_cleanup */
    void *sbx_mem; /* the init's memory, freed once it was reaped */
    /* cgroup.h: the task's cgroup (NULL: none in use), its OOM kills at the start; the
       memory limit killed the task (r->error says so) */
    struct cgroup *cg;
    uint64_t oom0;
    bool mem_killed, cg_job; /* cg_job: a parallel job's cgroup, shared by its ranks */
};

/*
 * Starts argv (or, with shell, argv[0] as a /bin/sh -c script with the rest as $0..)
 * in an empty directory workdir (made, or an empty one of an earlier task renamed to
 * it; runner_cleanup removes it, or pools it again when the task left it empty),
 * standard input from in[0..inlen) (/dev/null when empty). Returns 0 when the process
 * runs; -1 with r->error set when it could not be started (no such program, no
 * process could be made, ...): that is a node-side error. No child is left to reap
 * after -1. Not thread-safe (one pool of directories per process).
 */
int runner_start(struct run *r, char *const *argv, bool shell, const void *in, size_t inlen,
                 const char *workdir, size_t max_output);

/*
 * What a task asks of its process beyond argv (issue 15: submit --export / --chdir,
 * docs/wire.md 5.2 "env", "chdir"): "NAME=value" strings added to (or replacing) the
 * client's own environment, and a directory to start in instead of workdir (workdir is
 * still made: it holds the standard input file).
 */
struct runner_env {
    char **env;      /* NULL-terminated, or NULL */
    char *cwd;       /* or NULL */
    bool network;    /* the job asked for the network (docs/wire.md 5.2 "network") */
    uint64_t mem_mb; /* the job's memory request (5.2 "mem_mb"; 0: none): caps the cgroup's */
    /* issue 26: called with the fresh working directory before the process starts (its
       input files placed there); -1 with why in err fails the start (NULL: none) */
    int (*prepare)(void *arg, const char *workdir, char *err, size_t n);
    void *prepare_arg;
};

struct msgpack_object;
/*
 * Takes "env" and "chdir" of the task map m into e (checked as every role checks them,
 * wire/jobenv.h). An unacceptable value leaves e empty and writes why into bad (the
 * task then fails with that text). Returns 0, or -1 when memory ran out.
 */
int runner_env_take(struct runner_env *e, const struct msgpack_object *m, char *bad, size_t n);
void runner_env_free(struct runner_env *e);

/* runner_start with the task's environment and working directory (e may be NULL).
 * A cwd that is not a directory this client may enter fails the start with r->error
 * naming it (a node-side error; not a fault of the host: host_fault stays false). */
int runner_start_env(struct run *r, char *const *argv, bool shell, const void *in, size_t inlen,
                     const char *workdir, size_t max_output, const struct runner_env *e);

/* Reads what is available on fd (one of r's pipes); closes it at end of file. */
void runner_read(struct run *r, int fd);
/* Records a reaped child's status; a task that did not exit 0 after the kernel's OOM
 * killer acted in its cgroup gets r->error "memory limit: ..." (r->mem_killed). */
void runner_reaped(struct run *r, int status, const struct rusage *ru);
/* True once the process was reaped and both pipes reached end of file. */
bool runner_finished(const struct run *r);
/* Signals the whole process group. */
void runner_signal(struct run *r, int sig);
/* Frees buffers, closes pipes, removes the working directory. */
void runner_cleanup(struct run *r);

/* Blocks SIGCHLD and returns a signalfd for it (call before creating threads). */
int runner_sigchld_fd(void);

/*
 * Starts a parallel process: like runner_start, but with env ("K=V" strings, NULL-
 * terminated) added to its environment, standard input from /dev/null and standard
 * output and error written to the files "stdout" and "stderr" of workdir (kept until
 * runner_cleanup). Returns 0, or -1 with r->error set (a node-side error: no process).
 * It does not wait for the child to execute its program (that wait cost a node about
 * 3 ms per process): a program that cannot be executed exits with status 127 and
 * runner_spawned, called once the child was reaped, sets r->error then. prepared:
 * workdir exists and holds nothing but (possibly) the stdout and stderr files, which
 * the process truncates (a reused directory); else it is made afresh.
 */
int runner_spawn(struct run *r, char *const *argv, bool shell, char *const *env,
                 const char *workdir, bool prepared);
/* runner_spawn starting the process in cwd (submit --chdir, issue 15; NULL: workdir);
 * a cwd it cannot enter fails at once with r->error naming it (host_fault false). */
int runner_spawn_in(struct run *r, char *const *argv, bool shell, char *const *env,
                    const char *workdir, bool prepared, const char *cwd);
/* runner_spawn_in for a rank of parallel job `job` of owner (pprocs.h): the job's ranks
 * on this host share one cgroup (cgroup.h), its memory capped by mem_mb (the job's
 * per-host limit, 0: none); network false starts it without the network (PSYNC_ACK
 * `network`: a one-process job that did not ask for it). */
int runner_spawn_job(struct run *r, char *const *argv, bool shell, char *const *env,
                     const char *workdir, bool prepared, const char *cwd, const void *owner,
                     uint64_t job, uint64_t mem_mb, bool network);
/* After a runner_spawn child was reaped: sets r->error (and host_fault) if it could
 * not set itself up or execute its program. Returns true if so. */
bool runner_spawned(struct run *r);

/*
 * After a runner_spawn process exited: reads the first max bytes of the files "stdout"
 * and "stderr" of its working directory into r->out and r->err (replacing what they
 * held), setting trunc when a file is longer; a missing or unreadable file reads as
 * empty. The buffers are freed by runner_cleanup. Returns 0, or -1 when memory ran out
 * (what was read so far is kept, marked truncated).
 */
int runner_collect(struct run *r, size_t max);

struct wire_buf;
/*
 * The result map (docs/wire.md 5.3) of the finished run r of task (job, idx, issue)
 * that ran wall_s seconds, into wb: exit, signal, timeout, CPU time from wait4,
 * captured output. node_error (or else r->error) makes it a node-side error;
 * task_fault (the task's own fault, e.g. a malformed task) makes it a final failed
 * result that says why in stderr. Either may be NULL. One encoding for every client.
 */
void runner_pack_result(const struct run *r, uint64_t job, uint32_t idx, uint32_t issue,
                        double wall_s, const char *node_error, const char *task_fault,
                        struct wire_buf *wb);

#endif

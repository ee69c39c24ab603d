/*
 * sandbox.h - the execution boundary of a task (issue 23, docs/security.md "Execution
 * boundary"): every bag task and every parallel rank starts here when the sandbox is
 * on. The task runs in its own mount, PID and IPC namespaces and, unless its job asks
 * for the network, in one empty network namespace shared by the client's tasks. It sees
 * a private /tmp, /var/tmp and /dev/shm, its own working directory, its --chdir
 * directory, and the system; the client's state directory and the directories of its
 * key and configuration files are covered by empty tmpfs. A tiny init (PID 1 of the
 * task's PID namespace, the process the client reaps and signals) starts the task,
 * reaps orphans and reports the task's wait status; when the task ends (or the init is
 * killed) every process of the namespace goes with it. A client running as root runs
 * each task under a uid of its slot-uid pool (client.slot_uids), never as root; a
 * client that is not root enters a user namespace at start (its uid mapped to itself)
 * that makes the namespaces possible.
 */
#ifndef GRIDNODE_SANDBOX_H
#define GRIDNODE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SANDBOX_HIDE_MAX 8

struct sandbox_conf {
    bool on;                             /* client.sandbox */
    const char *state_dir;               /* covered, the task's own directory bound back */
    const char *files[SANDBOX_HIDE_MAX]; /* key and config files: their directories covered */
    const char *slot_uids;               /* "FIRST-LAST": the pool of a root client */
    const char *cgroups;                 /* the start log's "cgroup limits: " text */
};

/*
 * Sets the boundary up once, before the client makes any thread (a client that is not
 * root enters a user namespace here): checks that namespaces work by starting one
 * sandboxed process, makes the empty network namespace, parses the slot-uid pool.
 * With c->on false only logs the warning that tasks run unconfined. Returns 0, or -1
 * with err saying what is missing and how to opt out (the client must then not start).
 */
int sandbox_init(const struct sandbox_conf *c, char *err, size_t n);
/* True once sandbox_init set up a working boundary (false: client.sandbox = off). */
bool sandbox_enabled(void);

/* True if path is (beneath) a directory or file the sandbox covers: no task may start
 * there (submit --chdir into the client's state or key directories). */
bool sandbox_hides(const char *path);

/*
 * The uid a new task runs as: a free one of the pool (root client), or the client's own
 * uid. Returns 0, or -1 with errno EAGAIN when every pool uid is in use.
 */
int sandbox_uid_take(uid_t *uid);
/* Gives a uid of sandbox_uid_take back (no effect for the client's own uid). */
void sandbox_uid_put(uid_t uid);
/* True when tasks run under pool uids (the client is root and the sandbox is on). */
bool sandbox_slot_uids(void);

/* One task to start (everything prepared by the caller: the child may not allocate). */
struct sandbox_task {
    const char *path;    /* the program: searched in PATH when it has no '/' */
    char *const *argv;   /* its arguments, argv[0] included */
    char *const *envp;   /* its whole environment */
    const char *workdir; /* its own directory (absolute or relative to the client's) */
    const char *cwd;     /* where it starts (submit --chdir), or NULL: workdir */
    int in, out, err;    /* descriptors that become 0, 1 and 2 */
    uid_t uid;           /* from sandbox_uid_take */
    bool network;        /* the job asked for the network: the host's network namespace */
    int cgfd[2];         /* cgroup.procs files the task joins before its exec (cgroup.h),
                            -1: none; the caller closes them once sandbox_spawn returned */
};

/*
 * Starts t (copied: the caller may free its copies at once): returns the pid of its
 * init (the leader of the process group to signal, the child to reap), with *report the
 * read end of the pipe sandbox_report reads once it was reaped and *mem the init's
 * memory, to free() once it was reaped (not before: the init runs on it). -1 with
 * errno when no process could be made (nothing to reap; *stage SANDBOX_SETUP). Whether
 * the boundary could be set up and the program executed is known after the reap.
 */
pid_t sandbox_spawn(const struct sandbox_task *t, int *report, void **mem, int *stage);
/* Frees an init's memory (from sandbox_spawn) once it was reaped, and frees its donor
 * thread (sandbox.c) for another init. NULL is ignored. */
void sandbox_free(void *mem);
/* The thread pointer the init of mem runs on (for tests: no two inits alive at once
 * share one, so none reads the errno another's failing call wrote). */
void *sandbox_tp(const void *mem);

enum { SANDBOX_SETUP = 0, SANDBOX_EXEC = 1, SANDBOX_DONE = 2 };
/*
 * After the init was reaped (and before its memory mem is freed): reads its report from
 * fd (and closes it). Returns SANDBOX_DONE with *status the task's own wait status
 * (exit code or signal), or SANDBOX_SETUP (the boundary could not be set up: the host's
 * fault; *step names the step that failed) or SANDBOX_EXEC (the program could not be
 * executed) with *err its errno. A missing report (the init was killed before the task
 * ended) is SANDBOX_DONE with *status left as it was.
 */
int sandbox_report(int fd, const void *mem, int *status, int *err, const char **step);

#endif

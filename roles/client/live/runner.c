/*
 * runner.c - child processes for tasks (see runner.h).
 *
 * Speed (issue 11 item 11): a client running trivial tasks at 1,000 a second spent a
 * third of its time in ext4 allocating and freeing inodes (a fresh directory and a
 * ".stdin" file per task: ext4 scans past recently freed inodes on every allocation)
 * and much of the rest copying its own page tables in fork() and waiting for each child
 * to execute its program. Now runner_start (1) reuses working directories: an empty
 * directory of a finished task is renamed to a pooled name beside it and renamed to the
 * next task's directory, never freed; a directory a task left files in is removed as
 * before; (2) gives a task with no input /dev/null as standard input, not a file; (3)
 * starts the child with posix_spawn (vfork-like: no copy of the client's memory map).
 */
#include "roles/client/live/runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/loop.h"
#include "lib/text.h"
#include "roles/client/live/cgroup.h"
#include "roles/client/live/sandbox.h"
#include "wire/jobenv.h"
#include "wire/wire.h"

int runner_sigchld_fd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static int write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return close(fd);
}

/*
 * In a forked child: never returns. Resets the signal state, makes its own process
 * group, joins the cgroup whose cgroup.procs files are cgfd (cgroup.h; -1: none), moves
 * to dir, takes in/out/err as descriptors 0/1/2 (-1: the open failed) and executes argv
 * with envp (NULL: out of memory), argv[0] searched in PATH when search. A failure is
 * reported on errpipe (close-on-exec, so a successful exec closes it silently) as two
 * ints: the stage (CHILD_SETUP: this host could not set the process up; CHILD_EXEC: the
 * program could not be executed) and errno. Everything is prepared by the parent: the
 * child of a threaded process may not allocate.
 */
enum { CHILD_SETUP = 0, CHILD_EXEC = 1 };
static void child_exec(char *const *argv, bool search, char *const *envp, const char *dir, int in,
                       int out, int err, const int cgfd[2], int errpipe)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int stage = CHILD_SETUP;
    setpgid(0, 0);
    errno = ENOMEM;
    if (!envp || !argv || cgroup_join(cgfd) < 0 || chdir(dir) < 0 || in < 0 || out < 0 || err < 0 ||
        dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        goto fail;
    stage = CHILD_EXEC;
    if (search)
        execvpe(argv[0], argv, envp);
    else
        execve(argv[0], argv, envp);
fail:;
    int e[2] = {stage, errno};
    if (write(errpipe, e, sizeof e) < 0)
        _exit(127);
    _exit(127);
}

/*
 * Reads the child's report from the error pipe (and closes it): 0 when it executed
 * its program, else 1 with r->error (and r->host_fault for a set-up failure) set.
 */
static ssize_t child_status(struct run *r, int fd, const char *prog)
{
    int e[2] = {0, 0};
    ssize_t n;
    while ((n = read(fd, e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(fd);
    if (n != (ssize_t)sizeof e)
        return 0;
    if (e[0] == CHILD_EXEC) {
        snprintf(r->error, sizeof r->error, "cannot run '%s': %s", prog, strerror(e[1]));
    } else {
        snprintf(r->error, sizeof r->error, "cannot set up the task's process in %.180s: %s",
                 r->workdir, strerror(e[1]));
        r->host_fault = true;
    }
    return 1;
}

static int nftw_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void cap_init(struct capture *c, size_t max)
{
    memset(c, 0, sizeof *c);
    c->cap = max;
    c->fd = -1;
}

/* ---- the pool of empty working directories ---- */

#define POOL_MAX 256
#define POOL_PREFIX ".pool-"

static struct {
    char parent[512]; /* the directory the pooled ones are in ("" before first use) */
    uint32_t ids[POOL_MAX], n, next;
} pool;

/* True if dir is an empty directory owned by us with mode 0700 (fit for another task). */
static bool dir_clean(const char *dir)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    DIR *d = fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700
                 ? fdopendir(fd)
                 : NULL;
    if (!d) {
        close(fd);
        return false;
    }
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

/* Pools under another parent (or a first use): forget them, remove stale ones there. */
static void pool_use(const char *parent)
{
    if (!strcmp(pool.parent, parent))
        return;
    pool.n = 0;
    snprintf(pool.parent, sizeof pool.parent, "%s", parent);
    DIR *d = opendir(parent);
    struct dirent *e;
    while (d && (e = readdir(d))) /* left by an earlier run of this client */
        if (!strncmp(e->d_name, POOL_PREFIX, strlen(POOL_PREFIX))) {
            char p[1100];
            snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
            nftw(p, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
        }
    if (d)
        closedir(d);
}

static void pool_path(char *buf, size_t n, uint32_t id)
{
    snprintf(buf, n, "%s/" POOL_PREFIX "%u", pool.parent, id);
}

/* Makes workdir an empty directory: a pooled one renamed, else a new one. 0 or -1. */
static int workdir_take(const char *workdir)
{
    char parent[600], from[1100];
    snprintf(parent, sizeof parent, "%s", workdir);
    pool_use(dirname(parent));
    nftw(workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS); /* left by a crash */
    while (pool.n > 0) {
        pool_path(from, sizeof from, pool.ids[--pool.n]);
        if (rename(from, workdir) == 0) {
            if (dir_clean(workdir)) /* nothing wrote into it while pooled */
                return 0;
            nftw(workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
            break;
        }
        nftw(from, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
    }
    return mkdir(workdir, 0700);
}

/* A finished task's directory: pooled when it is empty, else removed with its files. */
static void workdir_release(const char *workdir)
{
    char parent[600], to[1100];
    snprintf(parent, sizeof parent, "%s", workdir);
    if (pool.n < POOL_MAX && !strcmp(dirname(parent), pool.parent) && dir_clean(workdir)) {
        uint32_t id = pool.next++;
        pool_path(to, sizeof to, id);
        if (rename(workdir, to) == 0) {
            pool.ids[pool.n++] = id;
            return;
        }
    }
    nftw(workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- starting a task ---- */

/*
 * posix_spawn reports a failure of the child's set-up or of its exec as one errno: the
 * program's fault for what execve says of a program (missing, not executable, bad
 * format, too long an argument list), the host's for the rest (no memory, no
 * processes or descriptors left, an unusable working directory).
 */
static bool spawn_errno_is_programs(int e)
{
    return e == ENOENT || e == EACCES || e == ENOEXEC || e == ENOTDIR || e == ELOOP ||
           e == ENAMETOOLONG || e == E2BIG || e == ETXTBSY || e == EISDIR || e == EPERM;
}

/* ---- the task's environment (submit --export / --chdir, issue 15) ---- */

int runner_env_take(struct runner_env *e, const struct msgpack_object *m, char *bad, size_t n)
{
    uint32_t count;
    int oom;
    memset(e, 0, sizeof *e);
    if (jobenv_check(m, bad, n) < 0)
        return 0; /* bad says why: the task fails with it */
    e->env = jobenv_dup(m, &count, &oom);
    e->cwd = wire_get_strdup(m, "chdir");
    e->network = wire_get_bool(m, "network", false);
    e->mem_mb = wire_get_u64(m, "mem_mb", 0);
    if (oom || (wire_get(m, "chdir") && !e->cwd)) {
        runner_env_free(e);
        return -1;
    }
    return 0;
}

void runner_env_free(struct runner_env *e)
{
    jobenv_free(e->env);
    free(e->cwd);
    e->env = NULL;
    e->cwd = NULL;
}

/* The length of the name part of "NAME=value" (the whole string without '='). */
static size_t env_name_len(const char *s)
{
    const char *eq = strchr(s, '=');
    return eq ? (size_t)(eq - s) : strlen(s);
}

/*
 * environ with the task's variables added, a task's variable replacing the client's of
 * the same name, and without the client's GRIDNODE_* variables (its key paths and
 * settings are not the task's business, issue 23) but for the GPU ones it sets for the
 * task: a malloc'd array of borrowed
 * pointers, or NULL (out of memory).
 */
static char **env_merge(char *const *add)
{
    size_t n = 0, k = 0, m = 0;
    while (environ && environ[n])
        n++;
    while (add && add[k])
        k++;
    char **v = calloc(n + k + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t l = env_name_len(environ[i]);
        /* GRIDNODE_GPU and GRIDNODE_GPU_TYPE are the task's own (live_task.c sets
           them around the start of a GPU task) */
        bool replaced = !strncmp(environ[i], "GRIDNODE_", 9) &&
                        strncmp(environ[i], "GRIDNODE_GPU=", 13) &&
                        strncmp(environ[i], "GRIDNODE_CHECKPOINT_DIR=", 24) &&
                        strncmp(environ[i], "GRIDNODE_GPU_TYPE=", 18);
        for (size_t j = 0; j < k && !replaced; j++)
            replaced = env_name_len(add[j]) == l && !strncmp(add[j], environ[i], l);
        if (!replaced)
            v[m++] = environ[i];
    }
    for (size_t j = 0; j < k; j++)
        v[m++] = add[j];
    return v;
}

static uid_t own_uid;

static int own_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    return lchown(path, own_uid, own_uid) < 0 ? -1 : 0;
}

/* Issue 26 (ckpt.h): the task's checkpoint directory, restored by the client, is the
 * task's own (every entry, no link followed; none there: nothing to do). 0, or -1. */
static int ckpt_own(const char *workdir, uid_t uid)
{
    char dir[700];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/.gridnode-checkpoint", workdir);
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    own_uid = uid;
    return nftw(dir, own_one, 16, FTW_PHYS) < 0 ? -1 : 0;
}

/* argv as a /bin/sh -c script: a malloc'd vector of borrowed strings, or NULL. */
static char **shell_argv(char *const *argv)
{
    int n = 0;
    while (argv[n])
        n++;
    char **sh = calloc((size_t)n + 3, sizeof *sh);
    if (!sh)
        return NULL;
    sh[0] = "/bin/sh";
    sh[1] = "-c";
    for (int i = 0; i < n; i++)
        sh[i + 2] = argv[i];
    return sh;
}

static int spawn_task(struct run *r, char *const *argv, bool shell, int in, int out, int err,
                      const struct runner_env *e)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    char **sh = NULL;
    int rc;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGCHLD);
    char **envp = env_merge(e ? e->env : NULL);
    if (!envp)
        return ENOMEM;
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
        goto out;
    if ((rc = posix_spawnattr_init(&at)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        goto out;
    }
    if (!(rc = posix_spawn_file_actions_addchdir_np(&fa, e && e->cwd ? e->cwd : r->workdir)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, in, 0)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, out, 1)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, err, 2)) &&
        !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                 POSIX_SPAWN_SETSIGDEF)) &&
        !(rc = posix_spawnattr_setpgroup(&at, 0)) &&
        !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
        !(rc = posix_spawnattr_setsigdefault(&at, &dfl))) {
        if (shell) {
            rc = (sh = shell_argv(argv)) ? posix_spawn(&r->pid, "/bin/sh", &fa, &at, sh, envp)
                                         : ENOMEM;
        } else {
            rc = posix_spawnp(&r->pid, argv[0], &fa, &at, argv, envp);
        }
    }
    free(sh);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
out:
    free(envp);
    return rc;
}

/*
 * Starts argv in a sandbox (sandbox.h) under a uid of the pool, descriptors in/out/err
 * as 0/1/2, with the environment made of the client's (scrubbed) and add, the task
 * joining the cgroup whose cgroup.procs files are cgfd (-1: none). Returns 0
 * with r->pid the sandbox's init, or an errno (nothing started; *exec: the program could
 * not be executed, else the host could not start it).
 */
static int start_boxed(struct run *r, char *const *argv, bool shell, int in, int out, int err,
                       char *const *add, const char *cwd, bool network, const int cgfd[2],
                       bool *exec)
{
    char **envp = env_merge(add), **sh = NULL;
    int rc = 0, rep = -1, stage = SANDBOX_SETUP;
    *exec = false;
    if (!envp || (shell && !(sh = shell_argv(argv)))) {
        rc = ENOMEM;
        goto out;
    }
    if (sandbox_uid_take(&r->uid) < 0) {
        rc = errno;
        goto out;
    }
    r->uid_taken = true;
    if (sandbox_slot_uids() &&
        (chown(r->workdir, r->uid, r->uid) < 0 || ckpt_own(r->workdir, r->uid) < 0)) {
        rc = errno;
        goto out;
    }
    struct sandbox_task t = {shell ? "/bin/sh" : argv[0],
                             sh ? sh : argv,
                             envp,
                             r->workdir,
                             cwd,
                             in,
                             out,
                             err,
                             r->uid,
                             network,
                             {cgfd[0], cgfd[1]}};
    if ((r->pid = sandbox_spawn(&t, &rep, &r->sbx_mem, &stage)) < 0) {
        rc = errno;
        *exec = stage == SANDBOX_EXEC;
        r->pid = -1;
        goto out;
    }
    r->spawn_fd = rep;
    r->spawn_wait = r->sandboxed = true;
    snprintf(r->prog, sizeof r->prog, "%s", argv[0]);
out:
    free(sh);
    free(envp);
    return rc;
}

/*
 * Starts argv as spawn_task does, but through fork(), for a task that joins the cgroup
 * of cgfd (posix_spawn has no way to join one before the exec): waits, as posix_spawn
 * does, until the child executed its program or failed. Returns 0 with r->pid, or an
 * errno (nothing left to reap; *exec: the program could not be executed).
 */
static int fork_task(struct run *r, char *const *argv, bool shell, int in, int out, int err,
                     const struct runner_env *e, const int cgfd[2], bool *exec)
{
    char **envp = env_merge(e ? e->env : NULL), **sh = shell ? shell_argv(argv) : NULL;
    int ep[2], rep[2], rc = 0;
    *exec = false;
    if (!envp || (shell && !sh))
        rc = ENOMEM;
    else if (pipe2(ep, O_CLOEXEC) < 0)
        rc = errno;
    else if ((r->pid = fork()) < 0) {
        rc = errno;
        close(ep[0]);
        close(ep[1]);
    }
    if (rc)
        goto out;
    if (r->pid == 0)
        child_exec(sh ? sh : argv, !sh, envp, e && e->cwd ? e->cwd : r->workdir, in, out, err, cgfd,
                   ep[1]);
    close(ep[1]);
    setpgid(r->pid, r->pid);
    ssize_t n;
    while ((n = read(ep[0], rep, sizeof rep)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (n == (ssize_t)sizeof rep) { /* it failed before its exec: reaped here */
        while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        r->pid = -1;
        rc = rep[1];
        *exec = rep[0] == CHILD_EXEC;
    }
out:
    free(sh);
    free(envp);
    return rc;
}

/*
 * The cgroup of a new task or rank (cgroup.h; owner and job 0: a task's own) and its
 * cgroup.procs files in cgfd (-1 when cgroups are not in use). 0, or -1 with r->error
 * set (a fault of this host): nothing is left to put.
 */
static int cg_take(struct run *r, const void *owner, uint64_t job, uint64_t mem_mb, int cgfd[2])
{
    cgfd[0] = cgfd[1] = -1;
    if (!cgroup_version())
        return 0;
    r->cg_job = job != 0;
    if ((r->cg = cgroup_take(owner, job, mem_mb)) && cgroup_open_procs(r->cg, cgfd) == 0) {
        r->oom0 = cgroup_oom_kills(r->cg);
        return 0;
    }
    snprintf(r->error, sizeof r->error, "cannot make the %s's cgroup: %s", job ? "process" : "task",
             strerror(errno));
    r->host_fault = true;
    cgroup_put(&r->cg);
    return -1;
}

static void cg_close(int cgfd[2])
{
    for (int i = 0; i < 2; i++)
        if (cgfd[i] >= 0)
            close(cgfd[i]);
}

/* True (r->error set) when cwd (submit --chdir) is not a directory we may enter: the
 * user's choice, not a fault of this host (host_fault stays false). */
static bool cwd_refused(struct run *r, const char *cwd)
{
    struct stat st;
    const char *bad = stat(cwd, &st) < 0      ? strerror(errno)
                      : !S_ISDIR(st.st_mode)  ? "not a directory"
                      : access(cwd, X_OK) < 0 ? strerror(errno)
                                              : NULL;
    if (!bad && sandbox_hides(cwd))
        bad = "the node keeps it private";
    if (!bad)
        return false;
    snprintf(r->error, sizeof r->error,
             "working directory '%.120s' (submit --chdir) cannot be used on this node: %.40s", cwd,
             bad);
    text_fix(r->error);
    return true;
}

int runner_start(struct run *r, char *const *argv, bool shell, const void *in, size_t inlen,
                 const char *workdir, size_t max_output)
{
    return runner_start_env(r, argv, shell, in, inlen, workdir, max_output, NULL);
}

int runner_start_env(struct run *r, char *const *argv, bool shell, const void *in, size_t inlen,
                     const char *workdir, size_t max_output, const struct runner_env *e)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1}, infd = -1;
    char stdin_path[600];
    memset(r, 0, sizeof *r);
    r->pid = -1;
    cap_init(&r->out, max_output);
    cap_init(&r->err, max_output);
    snprintf(r->workdir, sizeof r->workdir, "%s", workdir);
    snprintf(stdin_path, sizeof stdin_path, "%s/.stdin", workdir);
    r->start_ms = loop_now_ms();
    if (workdir_take(workdir) < 0 || (inlen > 0 && write_file(stdin_path, in, inlen) < 0)) {
        snprintf(r->error, sizeof r->error, "cannot prepare working directory %s: %s", workdir,
                 strerror(errno));
        r->host_fault = true;
        return -1;
    }
    r->pooled = true;
    r->has_stdin = inlen > 0;
    if (e && e->prepare && e->prepare(e->prepare_arg, workdir, r->error, sizeof r->error) < 0)
        return -1; /* issue 26: its inputs could not be placed */
    if (e && e->cwd && cwd_refused(r, e->cwd))
        return -1;
    int cgfd[2];
    if (cg_take(r, NULL, 0, e ? e->mem_mb : 0, cgfd) < 0)
        return -1;
    infd = open(inlen > 0 ? stdin_path : "/dev/null", O_RDONLY | O_CLOEXEC);
    if (infd < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
        goto syserr;
    bool boxed = sandbox_enabled(), forked = !boxed && r->cg, exec = false;
    int rc = boxed    ? start_boxed(r, argv, shell, infd, out[1], err[1], e ? e->env : NULL,
                                 e ? e->cwd : NULL, e && e->network, cgfd, &exec)
             : forked ? fork_task(r, argv, shell, infd, out[1], err[1], e, cgfd, &exec)
                      : spawn_task(r, argv, shell, infd, out[1], err[1], e);
    cg_close(cgfd);
    close(infd);
    close(out[1]);
    close(err[1]);
    infd = out[1] = err[1] = -1;
    if (rc != 0) {
        r->pid = -1;
        close(out[0]);
        close(err[0]);
        if (rc == EAGAIN && boxed) {
            snprintf(r->error, sizeof r->error,
                     "no free slot uid for the task (client.slot_uids is smaller than the tasks "
                     "and parallel processes run at once)");
            r->host_fault = true;
        } else if (boxed || forked ? exec : spawn_errno_is_programs(rc)) {
            snprintf(r->error, sizeof r->error, "cannot run '%s': %s", argv[0], strerror(rc));
        } else {
            snprintf(r->error, sizeof r->error, "cannot start the task's process in %.180s: %s",
                     r->workdir, strerror(rc));
            r->host_fault = true;
        }
        cgroup_put(&r->cg);
        return -1;
    }
    r->out.fd = out[0];
    r->err.fd = err[0];
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    return 0;
syserr:
    snprintf(r->error, sizeof r->error, "cannot start a process: %s", strerror(errno));
    r->host_fault = true;
    cg_close(cgfd);
    cgroup_put(&r->cg);
    if (infd >= 0)
        close(infd);
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
    }
    r->pid = -1;
    return -1;
}

static void cap_read(struct capture *c)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(c->fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close(c->fd);
            c->fd = -1;
            return;
        }
        size_t keep = c->len < c->cap ? c->cap - c->len : 0;
        if (keep > (size_t)n)
            keep = (size_t)n;
        if (keep) {
            char *b = realloc(c->buf, c->len + keep);
            if (!b)
                keep = 0;
            else
                c->buf = b;
            memcpy(c->buf + c->len, tmp, keep);
            c->len += keep;
        }
        if (keep < (size_t)n)
            c->trunc = true;
    }
}

void runner_read(struct run *r, int fd)
{
    if (fd >= 0 && fd == r->out.fd)
        cap_read(&r->out);
    else if (fd >= 0 && fd == r->err.fd)
        cap_read(&r->err);
}

/* runner_reaped of a sandbox's init: the task's own status, or why it did not start. */
static void sandbox_reaped(struct run *r)
{
    const char *step = "";
    int err = 0, stage = sandbox_report(r->spawn_fd, r->sbx_mem, &r->status, &err, &step);
    r->spawn_wait = false;
    if (stage == SANDBOX_EXEC) {
        snprintf(r->error, sizeof r->error, "cannot run '%s': %s", r->prog, strerror(err));
        r->spawn_failed = true;
    } else if (stage == SANDBOX_SETUP) {
        snprintf(r->error, sizeof r->error, "cannot set up the task's sandbox in %.180s (%s): %s",
                 r->workdir, step, strerror(err));
        r->spawn_failed = r->host_fault = true;
    }
}

/* After the reap: a task that did not exit 0 once the kernel's OOM killer acted in its
 * cgroup was killed by its memory limit (the killer picks the largest process: a shell
 * task may see its child die and exit non-zero itself). */
static void cg_verdict(struct run *r)
{
    if (!r->cg || r->error[0] || (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) ||
        cgroup_oom_kills(r->cg) <= r->oom0)
        return;
    r->mem_killed = true;
    snprintf(r->error, sizeof r->error, "memory limit: %s used more than %llu MiB (cgroup)",
             r->cg_job ? "the job's processes on this host" : "task",
             (unsigned long long)cgroup_memory_mb(r->cg));
}

void runner_reaped(struct run *r, int status, const struct rusage *ru)
{
    r->reaped = true;
    r->status = status;
    r->ru = *ru; /* the init's: it reaped the task, so the task's CPU time is in it */
    r->end_ms = loop_now_ms();
    if (r->sandboxed && r->spawn_wait)
        sandbox_reaped(r);
    sandbox_free(r->sbx_mem); /* the init is gone (its report read above) */
    r->sbx_mem = NULL;
    cg_verdict(r);
}

bool runner_finished(const struct run *r)
{
    return (r->reaped || r->pid < 0) && r->out.fd < 0 && r->err.fd < 0;
}

void runner_signal(struct run *r, int sig)
{
    if (r->pid > 0 && !r->reaped)
        kill(-r->pid, sig);
}

void runner_cleanup(struct run *r)
{
    if (r->spawn_wait)
        close(r->spawn_fd);
    r->spawn_wait = false;
    if (r->sbx_mem) { /* not reaped (the client is leaving, a parallel job dropped) */
        if (r->pid > 0 && !r->reaped) {
            kill(-r->pid, SIGKILL); /* its namespace goes with it: a bounded wait */
            while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        sandbox_free(r->sbx_mem); /* the init ran on it: freed once it is gone */
        r->sbx_mem = NULL;
    }
    cgroup_put(&r->cg); /* what the task left running there is killed */
    if (r->uid_taken) {
        /* every process of the task is gone with its init: the directory is ours again */
        if (r->workdir[0] && r->uid != geteuid() && chown(r->workdir, geteuid(), getegid()) < 0)
            r->pooled = false; /* removed, not pooled */
        sandbox_uid_put(r->uid);
        r->uid_taken = false;
    }
    if (r->out.fd >= 0)
        close(r->out.fd);
    if (r->err.fd >= 0)
        close(r->err.fd);
    free(r->out.buf);
    free(r->err.buf);
    r->out.fd = r->err.fd = -1;
    r->out.buf = r->err.buf = NULL;
    if (r->workdir[0] && r->pooled) {
        if (r->has_stdin) {
            char p[600];
            snprintf(p, sizeof p, "%s/.stdin", r->workdir);
            unlink(p);
        }
        workdir_release(r->workdir);
    } else if (r->workdir[0]) {
        nftw(r->workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
    }
    r->workdir[0] = '\0';
}

/* Opens /dev/null and the files "stdout" and "stderr" of workdir (truncated) for a
 * runner_spawn process. 0, or -1 (none left open). */
static int pfiles(const char *workdir, int fd[3])
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/stdout", workdir);
    snprintf(err, sizeof err, "%s/stderr", workdir);
    fd[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fd[1] = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    fd[2] = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd[0] >= 0 && fd[1] >= 0 && fd[2] >= 0)
        return 0;
    for (int i = 0; i < 3; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    return -1;
}

int runner_spawn(struct run *r, char *const *argv, bool shell, char *const *env,
                 const char *workdir, bool prepared)
{
    return runner_spawn_in(r, argv, shell, env, workdir, prepared, NULL);
}

int runner_spawn_in(struct run *r, char *const *argv, bool shell, char *const *env,
                    const char *workdir, bool prepared, const char *cwd)
{
    return runner_spawn_job(r, argv, shell, env, workdir, prepared, cwd, NULL, 0, 0, true);
}

/* The process of runner_spawn_job once its files are open (fd: closed here). 0 or -1. */
static int spawn_fd(struct run *r, char *const *argv, bool shell, char *const *env, const char *cwd,
                    int fd[3], const int cgfd[2], bool network)
{
    int ep[2] = {-1, -1};
    if (sandbox_enabled()) { /* PSYNC_ACK `network`: off only for a one-process job */
        bool exec;
        int rc = start_boxed(r, argv, shell, fd[0], fd[1], fd[2], env, cwd, network, cgfd, &exec);
        for (int i = 0; i < 3; i++)
            close(fd[i]);
        if (rc == 0)
            return 0;
        if (exec)
            snprintf(r->error, sizeof r->error, "cannot run '%s': %s", argv[0], strerror(rc));
        else
            snprintf(r->error, sizeof r->error, "cannot start the process in its sandbox: %s",
                     rc == EAGAIN ? "no free slot uid (client.slot_uids)" : strerror(rc));
        r->host_fault = !exec;
        return -1;
    }
    char **envp = env_merge(env), **sh = shell ? shell_argv(argv) : NULL;
    if (pipe2(ep, O_CLOEXEC) < 0 || (r->pid = fork()) < 0) {
        free(envp);
        free(sh);
        for (int i = 0; i < 3; i++)
            close(fd[i]);
        snprintf(r->error, sizeof r->error, "cannot start a process: %s", strerror(errno));
        r->host_fault = true;
        if (ep[0] >= 0) {
            close(ep[0]);
            close(ep[1]);
        }
        r->pid = -1;
        return -1;
    }
    if (r->pid == 0) /* a NULL sh (out of memory) is reported by the child */
        child_exec(shell ? sh : argv, !shell, envp, cwd ? cwd : r->workdir, fd[0], fd[1], fd[2],
                   cgfd, ep[1]);
    free(envp);
    free(sh);
    for (int i = 0; i < 3; i++)
        close(fd[i]);
    setpgid(r->pid, r->pid);
    close(ep[1]);
    r->spawn_fd = ep[0]; /* read once the child is reaped: no wait for its exec here */
    r->spawn_wait = true;
    snprintf(r->prog, sizeof r->prog, "%s", argv[0]);
    return 0;
}

int runner_spawn_job(struct run *r, char *const *argv, bool shell, char *const *env,
                     const char *workdir, bool prepared, const char *cwd, const void *owner,
                     uint64_t job, uint64_t mem_mb, bool network)
{
    memset(r, 0, sizeof *r);
    r->pid = -1;
    cap_init(&r->out, 0);
    cap_init(&r->err, 0);
    snprintf(r->workdir, sizeof r->workdir, "%s", workdir);
    r->start_ms = loop_now_ms();
    if (!prepared)
        nftw(workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
    if (!prepared && mkdir(workdir, 0700) < 0) {
        snprintf(r->error, sizeof r->error, "cannot prepare working directory %s: %s", workdir,
                 strerror(errno));
        r->host_fault = true;
        return -1;
    }
    if (cwd && cwd_refused(r, cwd))
        return -1;
    int fd[3], cgfd[2];
    if (pfiles(workdir, fd) < 0) {
        snprintf(r->error, sizeof r->error, "cannot open the output files in %s: %s", workdir,
                 strerror(errno));
        r->host_fault = true;
        return -1;
    }
    if (cg_take(r, owner ? owner : (const void *)r, owner ? job : 1, mem_mb, cgfd) < 0) {
        for (int i = 0; i < 3; i++)
            close(fd[i]);
        return -1;
    }
    int rc = spawn_fd(r, argv, shell, env, cwd, fd, cgfd, network);
    cg_close(cgfd);
    if (rc < 0)
        cgroup_put(&r->cg);
    return rc;
}

bool runner_spawned(struct run *r)
{
    if (r->sandboxed) /* runner_reaped read the sandbox's report */
        return r->spawn_failed;
    if (!r->spawn_wait)
        return false;
    r->spawn_wait = false;
    /* the child is gone: its end of the pipe is closed, so this read does not block */
    return child_status(r, r->spawn_fd, r->prog) > 0;
}

/* Reads the first c->cap bytes of workdir/name into c; trunc when the file is longer. */
static int cap_file(struct capture *c, const char *workdir, const char *name)
{
    char path[600], tmp[16384];
    int rc = 0;
    snprintf(path, sizeof path, "%s/%s", workdir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t keep = c->len < c->cap ? c->cap - c->len : 0;
        if (keep > (size_t)n)
            keep = (size_t)n;
        if (keep) {
            char *b = realloc(c->buf, c->len + keep);
            if (!b) {
                c->trunc = true;
                rc = -1;
                break;
            }
            c->buf = b;
            memcpy(c->buf + c->len, tmp, keep);
            c->len += keep;
        }
        if (keep < (size_t)n) {
            c->trunc = true; /* the rest is not needed: stop reading */
            break;
        }
    }
    close(fd);
    return rc;
}

int runner_collect(struct run *r, size_t max)
{
    struct capture *c[2] = {&r->out, &r->err};
    const char *name[2] = {"stdout", "stderr"};
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        if (c[i]->fd >= 0)
            close(c[i]->fd);
        free(c[i]->buf);
        cap_init(c[i], max);
        if (r->workdir[0])
            rc |= cap_file(c[i], r->workdir, name[i]);
    }
    return rc;
}

void runner_pack_result(const struct run *r, uint64_t job, uint32_t idx, uint32_t issue,
                        double wall_s, const char *node_error, const char *task_fault,
                        struct wire_buf *wb)
{
    const char *err = node_error && *node_error ? node_error : r->error[0] ? r->error : NULL;
    bool fault = task_fault && *task_fault;
    double cpu = (double)r->ru.ru_utime.tv_sec + r->ru.ru_utime.tv_usec / 1e6 +
                 (double)r->ru.ru_stime.tv_sec + r->ru.ru_stime.tv_usec / 1e6;
    wire_pack_map(wb, err ? 13 : 12);
    wire_put_u64(wb, "job", job);
    wire_put_u64(wb, "idx", idx);
    wire_put_u64(wb, "issue", issue);
    wire_put_i64(wb, "exit",
                 !err && !fault && r->reaped && WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
    wire_put_u64(wb, "signal",
                 !err && r->reaped && WIFSIGNALED(r->status) ? (uint64_t)WTERMSIG(r->status) : 0);
    wire_put_bool(wb, "timeout", r->timed_out);
    wire_put_f64(wb, "cpu_s", cpu);
    wire_put_f64(wb, "wall_s", wall_s);
    wire_put_bin(wb, "stdout", r->out.buf ? r->out.buf : "", r->out.len);
    if (fault) /* the task's own fault: a final failed result that says why */
        wire_put_bin(wb, "stderr", task_fault, strlen(task_fault));
    else
        wire_put_bin(wb, "stderr", r->err.buf ? r->err.buf : "", r->err.len);
    wire_put_bool(wb, "out_trunc", r->out.trunc);
    wire_put_bool(wb, "err_trunc", r->err.trunc);
    if (err)
        wire_put_str(wb, "error", err);
}

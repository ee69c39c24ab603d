/* runner.c - child processes for tasks (see runner.h). */
#include "roles/client/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/loop.h"

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
 * group, moves to workdir, takes in/out/err as descriptors 0/1/2 (-1: the open failed),
 * adds env ("NAME=value", may be NULL) and executes argv (or, with shell, argv[0] as a
 * /bin/sh -c script with the rest as $0, $1, ...). A failure is reported on errpipe
 * (close-on-exec, so a successful exec closes it silently) as two ints: the stage
 * (CHILD_SETUP: this host could not set the process up; CHILD_EXEC: the program could
 * not be executed) and errno.
 */
enum { CHILD_SETUP = 0, CHILD_EXEC = 1 };
static void child_exec(char *const *argv, bool shell, char *const *env, const char *workdir, int in,
                       int out, int err, int errpipe)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int stage = CHILD_SETUP;
    setpgid(0, 0);
    if (chdir(workdir) < 0 || in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
        dup2(err, 2) < 0)
        goto fail;
    for (int i = 0; env && env[i]; i++)
        putenv(env[i]);
    if (shell) {
        int n = 0;
        while (argv[n])
            n++;
        char **sh = calloc((size_t)n + 3, sizeof *sh);
        if (!sh)
            goto fail;
        sh[0] = "/bin/sh";
        sh[1] = "-c";
        for (int i = 0; i < n; i++)
            sh[i + 2] = argv[i];
        stage = CHILD_EXEC;
        execv("/bin/sh", sh);
    } else {
        stage = CHILD_EXEC;
        execvp(argv[0], argv);
    }
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

int runner_start(struct run *r, char *const *argv, bool shell, const void *in, size_t inlen,
                 const char *workdir, size_t max_output)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1}, ep[2] = {-1, -1};
    char stdin_path[600];
    memset(r, 0, sizeof *r);
    r->pid = -1;
    cap_init(&r->out, max_output);
    cap_init(&r->err, max_output);
    snprintf(r->workdir, sizeof r->workdir, "%s", workdir);
    snprintf(stdin_path, sizeof stdin_path, "%s/.stdin", workdir);
    r->start_ms = loop_now_ms();
    nftw(workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
    if (mkdir(workdir, 0700) < 0 || write_file(stdin_path, in, inlen) < 0) {
        snprintf(r->error, sizeof r->error, "cannot prepare working directory %s: %s", workdir,
                 strerror(errno));
        r->host_fault = true;
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
        goto syserr;
    r->pid = fork();
    if (r->pid < 0)
        goto syserr;
    if (r->pid == 0)
        child_exec(argv, shell, NULL, workdir, open(stdin_path, O_RDONLY), out[1], err[1], ep[1]);
    setpgid(r->pid, r->pid); /* also here, so signals work before the child ran */
    close(out[1]);
    close(err[1]);
    close(ep[1]);
    ssize_t n = child_status(r, ep[0], argv[0]);
    r->out.fd = out[0];
    r->err.fd = err[0];
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    return n > 0 ? -1 : 0; /* on -1 the child exits 127; the caller still reaps it */
syserr:
    snprintf(r->error, sizeof r->error, "cannot start a process: %s", strerror(errno));
    r->host_fault = true;
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
        if (ep[i] >= 0)
            close(ep[i]);
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

void runner_reaped(struct run *r, int status, const struct rusage *ru)
{
    r->reaped = true;
    r->status = status;
    r->ru = *ru;
    r->end_ms = loop_now_ms();
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
    if (r->out.fd >= 0)
        close(r->out.fd);
    if (r->err.fd >= 0)
        close(r->err.fd);
    free(r->out.buf);
    free(r->err.buf);
    r->out.fd = r->err.fd = -1;
    r->out.buf = r->err.buf = NULL;
    if (r->workdir[0])
        nftw(r->workdir, nftw_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* In the child of runner_spawn: no stdin, stdout and stderr into files of workdir. */
static void pchild(char *const *argv, bool shell, char *const *env, const char *workdir,
                   int errpipe)
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/stdout", workdir);
    snprintf(err, sizeof err, "%s/stderr", workdir);
    child_exec(argv, shell, env, workdir, open("/dev/null", O_RDONLY),
               open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600),
               open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), errpipe);
}

int runner_spawn(struct run *r, char *const *argv, bool shell, char *const *env,
                 const char *workdir, bool prepared)
{
    int ep[2] = {-1, -1};
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
    if (pipe2(ep, O_CLOEXEC) < 0 || (r->pid = fork()) < 0) {
        snprintf(r->error, sizeof r->error, "cannot start a process: %s", strerror(errno));
        r->host_fault = true;
        if (ep[0] >= 0) {
            close(ep[0]);
            close(ep[1]);
        }
        r->pid = -1;
        return -1;
    }
    if (r->pid == 0)
        pchild(argv, shell, env, workdir, ep[1]);
    setpgid(r->pid, r->pid);
    close(ep[1]);
    r->spawn_fd = ep[0]; /* read once the child is reaped: no wait for its exec here */
    r->spawn_wait = true;
    snprintf(r->prog, sizeof r->prog, "%s", argv[0]);
    return 0;
}

bool runner_spawned(struct run *r)
{
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

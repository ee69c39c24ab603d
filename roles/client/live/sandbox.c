/*
 * sandbox.c - the execution boundary of a task (see sandbox.h, docs/security.md
 * "Execution boundary").
 *
 * Why direct system calls and not bubblewrap: measured on this 2-core host, a task
 * started through `bwrap` cost about 2 ms of CPU (an extra program executed per task,
 * 316 tasks/s for 16 at a time against 2,600 plain), while clone() with the namespace
 * flags, a few mounts and setns() into one empty network namespace made once cost
 * about 0.3 ms more than a plain start (a fresh network namespace per task halved the
 * rate again: its creation and teardown are the expensive part, hence the shared one).
 *
 * The child of clone() is the init of the task's PID namespace. It is a copy of the
 * client (its memory holds the client's keys), so it makes itself non-dumpable (no
 * ptrace, no /proc/1/mem or environ for the task), wipes its copy of the command line
 * and closes every descriptor but the task's. It may not allocate (other threads of the
 * client may hold malloc's locks): only system calls and stack buffers here.
 */
#include "roles/client/live/sandbox.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "roles/client/live/cgroup.h"

#define PRIVATE_N 3
static const char *const private_dirs[PRIVATE_N] = {"/tmp", "/var/tmp", "/dev/shm"};

/* Directories a key or config file may lie in that are not covered (the system would
 * go with them): the file itself is then covered by /dev/null. */
static const char *const system_dirs[] = {"/",      "/etc", "/usr",   "/bin",  "/sbin", "/lib",
                                          "/lib64", "/opt", "/var",   "/home", "/srv",  "/run",
                                          "/dev",   "/mnt", "/media", NULL};

static struct {
    bool on, root;
    int netfd;
    char cwd[PATH_MAX];
    char dirs[SANDBOX_HIDE_MAX + 1][PATH_MAX]; /* covered by tmpfs */
    char files[SANDBOX_HIDE_MAX][PATH_MAX];    /* covered by /dev/null */
    size_t ndirs, nfiles;
    uid_t first;
    uint32_t count;
    uint8_t *used;
} sb = {.netfd = -1};

bool sandbox_enabled(void)
{
    return sb.on;
}

bool sandbox_slot_uids(void)
{
    return sb.on && sb.root;
}

/* ---- in the init (no allocation) ---- */

/* The steps of setting up a task, named in the report of one that failed. */
enum {
    ST_NONE,
    ST_NET,
    ST_PRIVATE,
    ST_OPEN,
    ST_TMPFS,
    ST_DIRS,
    ST_PRIVDIRS,
    ST_COVER,
    ST_WORKDIR,
    ST_PROC,
    ST_FDS,
    ST_CLONE,
    ST_CHDIR,
    ST_CGROUP,
    ST_UID,
    ST_NNP,
    ST_N
};
static const char *const step_names[ST_N] = {
    "",
    "joining the empty network namespace",
    "making the mounts private",
    "opening the task's directories",
    "mounting its tmpfs",
    "making its private directories",
    "binding its /tmp, /var/tmp and /dev/shm",
    "covering the client's files",
    "binding its working directory",
    "mounting its /proc",
    "setting its descriptors",
    "starting the task",
    "entering its start directory",
    "joining its cgroups",
    "taking its slot uid",
    "setting no_new_privs",
};

/* dst = dir + "/" + rel when rel is relative, else rel. */
static void abs_path(char *dst, size_t n, const char *dir, const char *rel)
{
    size_t a = 0, b = strlen(rel);
    if (rel[0] != '/') {
        a = strlen(dir);
        if (a + 1 >= n)
            a = n - 2;
        memcpy(dst, dir, a);
        dst[a++] = '/';
    }
    if (a + b >= n)
        b = n - a - 1;
    memcpy(dst + a, rel, b);
    dst[a + b] = '\0';
}

/* True if path is dir or lies beneath it. */
static bool beneath(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return true;
    return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

/* mkdir -p of an absolute path (mode 0755: the task's uid traverses it). */
static int mkdir_p(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            int rc = mkdir(path, 0755);
            *p = c;
            if (rc < 0 && errno != EEXIST)
                return -1;
            if (c == '\0')
                return 0;
        }
    }
}

/* Binds the directory open as fd onto path (made when missing). 0 or -1. */
static int bind_fd(int fd, const char *path)
{
    char src[64], dst[PATH_MAX];
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    abs_path(dst, sizeof dst, "/", path);
    if (mkdir_p(dst) < 0)
        return -1;
    return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

/* Binds directory name of the directory open as fd onto path (which must exist). */
static int bind_at(int fd, const char *name, const char *path)
{
    char src[96];
    snprintf(src, sizeof src, "/proc/self/fd/%d/%s", fd, name);
    return mount(src, path, NULL, MS_BIND, NULL);
}

/*
 * The task's view of the file system: nothing propagates back to the host; private
 * /tmp, /var/tmp, /dev/shm; cwd bound back when it lay beneath one of them; the
 * client's directories covered; its own directory bound back; /proc of its PID
 * namespace. One tmpfs holds all that is the task's own (a superblock per mount was a
 * tenth of the sandbox's cost): mounted over the state directory, which is covered
 * anyway, with the directories the others bind from. 0 or -1 with errno.
 */
static int init_mounts(const char *wd, const char *cwd, volatile int *step)
{
    static const char *const own[PRIVATE_N] = {".tmp", ".vartmp", ".shm"};
    char name[32];
    *step = ST_PRIVATE;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    /* opened here: a bind takes its source from this namespace's mounts */
    *step = ST_OPEN;
    int wdfd = open(wd, O_PATH | O_DIRECTORY | O_CLOEXEC), cwdfd = -1, tfd;
    if (wdfd < 0 || (cwd && (cwdfd = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0))
        return -1;
    *step = ST_TMPFS;
    if (mount("tmpfs", sb.dirs[0], "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0 ||
        (tfd = open(sb.dirs[0], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    *step = ST_DIRS;
    mode_t um = umask(0);
    for (int i = 0; i < PRIVATE_N; i++)
        if (mkdirat(tfd, own[i], 01777) < 0)
            return -1;
    for (size_t i = 0; i < sb.ndirs; i++) { /* one empty directory per cover */
        snprintf(name, sizeof name, ".c%zu", i);
        if (mkdirat(tfd, name, 0755) < 0)
            return -1;
    }
    umask(um);
    *step = ST_PRIVDIRS;
    for (int i = 0; i < PRIVATE_N; i++)
        if (bind_at(tfd, own[i], private_dirs[i]) < 0 && errno != ENOENT)
            return -1;
    for (int i = 0; cwd && i < PRIVATE_N; i++)
        if (beneath(cwd, private_dirs[i]) && bind_fd(cwdfd, cwd) < 0)
            return -1;
    *step = ST_COVER;
    for (size_t i = 0; i < sb.ndirs; i++) {
        snprintf(name, sizeof name, ".c%zu", i);
        if (bind_at(tfd, name, sb.dirs[i]) < 0 && errno != ENOENT)
            return -1;
    }
    for (size_t i = 0; i < sb.nfiles; i++)
        if (mount("/dev/null", sb.files[i], NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
            return -1;
    *step = ST_WORKDIR;
    if (bind_fd(wdfd, wd) < 0)
        return -1;
    *step = ST_PROC;
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/*
 * What the init works on. It shares the client's memory (CLONE_VM: a copy of the
 * client's page tables per task, then copy-on-write faults and the teardown, cost half
 * the rate of short tasks) and runs on a stack of its own at the end of this block,
 * which also holds copies of everything it reads: the client does not wait for it and
 * may free or change its own copies (setenv moves environ) meanwhile. Its thread
 * pointer is a donor thread's (see "donors" below), not the client's main thread's, so
 * the errno its failing calls write is not one the client reads; and no other init
 * runs on the same donor's at the same time, so none reads another's errno either (an
 * init tolerates some failures by their errno: a missing file to cover is ENOENT; two
 * inits on one thread pointer once read each other's EINVAL of sigaction(SIGKILL)).
 */
#define INIT_STACK (64 * 1024)
#define TASK_STACK (32 * 1024)
#define REPORT_FD 3 /* the init's end of the report pipe once the descriptors are set */
#define CGROUP_FD 4 /* and the task's cgroup.procs files (4 and 5) */
struct init_ctx {
    struct sandbox_task t; /* pointing into this block */
    const char *dir;       /* where the task starts (in the init's stack) */
    char *task_stack;      /* top of the task's stack until its exec, in this block */
    const char *pathenv;   /* the client's PATH when the task was started */
    int wfd;
    volatile int stage, err; /* written by the task when it failed before its exec */
    volatile int step;       /* the step under way (ST_*), read once the init is reaped */
    uint32_t donor;          /* the donor whose thread pointer it runs on (donor_take) */
    void *tp;                /* that thread pointer */
};

/* execvpe without reading environ (the client may be changing it): PATH searched as
 * the shell does; returns only on failure, with errno from the most telling attempt. */
static void exec_path(const char *prog, const char *pathenv, char *const *argv, char *const *envp)
{
    char buf[PATH_MAX];
    int seen = ENOENT;
    if (strchr(prog, '/') || !pathenv) {
        execve(prog, argv, envp);
        return;
    }
    for (const char *d = pathenv;; d++) {
        const char *e = strchrnul(d, ':');
        size_t dl = (size_t)(e - d), pl = strlen(prog);
        if (dl + pl + 2 <= sizeof buf) {
            memcpy(buf, dl ? d : ".", dl ? dl : 1);
            dl = dl ? dl : 1;
            buf[dl] = '/';
            memcpy(buf + dl + 1, prog, pl + 1);
            execve(buf, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR)
                seen = errno;
        }
        if (!*e)
            break;
        d = e;
    }
    errno = seen;
}

/* The task until its exec (clone's function; it shares the init's memory and the init
 * waits, as after vfork, which sanitizers intercept in ways a process on a borrowed
 * thread pointer cannot survive): its directory, its uid, no new privileges, its
 * program. Never returns. */
static int task_exec(void *arg)
{
    struct init_ctx *c = arg;
    const struct sandbox_task *t = &c->t;
    c->stage = SANDBOX_SETUP;
    c->step = ST_CHDIR;
    if (chdir(c->dir) < 0) /* as root: the path above the directory may be closed to the uid */
        goto fail;
    /* the task, not the init, joins its cgroup: the init shares the client's memory, and
       the kernel's OOM killer kills every process sharing its victim's memory */
    int cgfd[2] = {t->cgfd[0] >= 0 ? CGROUP_FD : -1, t->cgfd[1] >= 0 ? CGROUP_FD + 1 : -1};
    c->step = ST_CGROUP;
    if (cgroup_join(cgfd) < 0)
        goto fail;
    c->step = ST_UID;
    /* raw calls: glibc's wrappers would signal threads that exist only in the client */
    if (sb.root && t->uid != geteuid() &&
        (syscall(SYS_setgroups, 0, NULL) < 0 ||
         syscall(SYS_setresgid, t->uid, t->uid, t->uid) < 0 ||
         syscall(SYS_setresuid, t->uid, t->uid, t->uid) < 0))
        goto fail;
    c->step = ST_NNP;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        goto fail;
    c->stage = SANDBOX_EXEC;
    exec_path(t->path, c->pathenv, t->argv, t->envp);
fail:
    c->err = errno;
    _exit(127);
}

static void init_report(int fd, int stage, int value)
{
    int e[2] = {stage, value};
    if (write(fd, e, sizeof e) < 0)
        _exit(126);
}

/* The init (clone's function): never returns. */
static int init_run(void *arg)
{
    struct init_ctx *c = arg;
    const struct sandbox_task *t = &c->t;
    char wd[PATH_MAX], cwd[PATH_MAX];
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < 32; s++) /* the client's handlers (and SIG_IGN) are not the task's */
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* the client gone: the task goes too */
    abs_path(wd, sizeof wd, sb.cwd, t->workdir);
    if (t->cwd)
        abs_path(cwd, sizeof cwd, sb.cwd, t->cwd);
    c->step = ST_NET;
    if ((!t->network && sb.netfd >= 0 && setns(sb.netfd, CLONE_NEWNET) < 0) ||
        init_mounts(wd, t->cwd ? cwd : NULL, &c->step) < 0)
        goto fail;
    c->step = ST_FDS;
    int in = fcntl(t->in, F_DUPFD, 10), out = fcntl(t->out, F_DUPFD, 10),
        err = fcntl(t->err, F_DUPFD, 10), w = fcntl(c->wfd, F_DUPFD, 10), cg[2];
    for (int i = 0; i < 2; i++)
        cg[i] = t->cgfd[i] >= 0 ? fcntl(t->cgfd[i], F_DUPFD, 10) : -2;
    if (in < 0 || out < 0 || err < 0 || w < 0 || cg[0] == -1 || cg[1] == -1 || dup2(in, 0) < 0 ||
        dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup3(w, REPORT_FD, O_CLOEXEC) < 0 ||
        (cg[0] >= 0 && dup3(cg[0], CGROUP_FD, O_CLOEXEC) < 0) ||
        (cg[1] >= 0 && dup3(cg[1], CGROUP_FD + 1, O_CLOEXEC) < 0))
        goto fail;
    for (int i = 0; i < 2; i++)
        if (cg[i] < 0)
            close(CGROUP_FD + i);
    syscall(SYS_close_range, CGROUP_FD + 2U, ~0U, 0U); /* the client's sockets, store, log */
    c->err = 0;
    c->dir = t->cwd ? cwd : wd;
    c->step = ST_CLONE;
    pid_t task = clone(task_exec, c->task_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, c);
    if (task < 0 || c->err) {
        init_report(REPORT_FD, task < 0 ? SANDBOX_SETUP : c->stage, task < 0 ? errno : c->err);
        _exit(127);
    }
    close(0);
    close(1);
    close(2);
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p == task) {
            init_report(REPORT_FD, SANDBOX_DONE, st);
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
        if (p < 0 && errno != EINTR)
            _exit(125);
    }
fail:
    init_report(c->wfd, SANDBOX_SETUP, errno); /* not yet moved to REPORT_FD */
    _exit(127);
}

/* ---- in the client ---- */

/*
 * Donors: threads that only sleep, whose thread pointers (their TLS, errno among it)
 * the inits run with, one init per donor at a time; a donor never reads what an init
 * writes there. Started as more tasks start at once than there are donors (a client
 * with S slots has about S), kept for the client's life, at most DONOR_MAX.
 */
#define DONOR_MAX 4096
#define DONOR_STACK (256 * 1024)
static struct donor {
    void *tp;
    bool busy;
} * donors;
static uint32_t ndonors, cap_donors;

static void *donor_main(void *arg)
{
    int fd = *(int *)arg;
    void *tp = __builtin_thread_pointer();
    if (write(fd, &tp, sizeof tp) < 0)
        return NULL;
    for (;;)
        pause();
    return NULL;
}

/* A new donor's thread pointer, or NULL with errno. */
static void *start_donor(void)
{
    pthread_t th;
    pthread_attr_t at;
    sigset_t all, old;
    int p[2], rc;
    void *tp = NULL;
    if (pipe2(p, O_CLOEXEC) < 0)
        return NULL;
    sigfillset(&all);
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, DONOR_STACK);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal is ever handled there */
    rc = pthread_create(&th, &at, donor_main, &p[1]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc == 0)
        while (read(p[0], &tp, sizeof tp) < 0 && errno == EINTR)
            ;
    close(p[0]);
    close(p[1]);
    if (!tp)
        errno = rc ? rc : EIO;
    return tp;
}

/* A free donor's thread pointer (*i its number, busy until sandbox_free), or NULL. */
static void *donor_take(uint32_t *i)
{
    for (*i = 0; *i < ndonors; (*i)++)
        if (!donors[*i].busy) {
            donors[*i].busy = true;
            return donors[*i].tp;
        }
    if (ndonors == DONOR_MAX) {
        errno = EAGAIN;
        return NULL;
    }
    if (ndonors == cap_donors) {
        uint32_t cap = cap_donors ? 2 * cap_donors : 8;
        struct donor *d = realloc(donors, cap * sizeof *d);
        if (!d)
            return NULL;
        donors = d;
        cap_donors = cap;
    }
    void *tp = start_donor();
    if (!tp)
        return NULL;
    donors[ndonors] = (struct donor){tp, true};
    *i = ndonors++;
    return tp;
}

/* The first donor, at start: a client that cannot start a thread says so then. */
static int first_donor(char *err, size_t n)
{
    uint32_t i;
    if (!donor_take(&i)) {
        snprintf(err, n, "cannot start a thread: %s", strerror(errno));
        return -1;
    }
    donors[i].busy = false;
    return 0;
}

void *sandbox_tp(const void *mem)
{
    return mem ? ((const struct init_ctx *)mem)->tp : NULL;
}

void sandbox_free(void *mem)
{
    struct init_ctx *c = mem;
    if (c && c->donor < ndonors)
        donors[c->donor].busy = false;
    free(c);
}

/* Bytes of a NULL-terminated vector and its strings; *n its length. */
static size_t strv_bytes(char *const *v, size_t *n)
{
    size_t b = 0;
    for (*n = 0; v[*n]; (*n)++)
        b += strlen(v[*n]) + 1;
    return b + (*n + 1) * sizeof(char *);
}

/* Copies string s to *p (advanced past it). */
static char *put_str(char **p, const char *s)
{
    char *d = *p;
    size_t n = strlen(s) + 1;
    memcpy(d, s, n);
    *p += n;
    return d;
}

/* Copies vector v (of n strings) to vec, its strings to *p. */
static char **put_strv(char **vec, char **p, char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        vec[i] = put_str(p, v[i]);
    vec[n] = NULL;
    return vec;
}

/* t, copied into one block with room for the init's stack (*top: its top, aligned):
 * NULL when out of memory. */
static struct init_ctx *ctx_new(const struct sandbox_task *t, void **top)
{
    size_t na, ne, strs;
    const char *pathenv = getenv("PATH");
    size_t need = sizeof(struct init_ctx) + strv_bytes(t->argv, &na) + strv_bytes(t->envp, &ne) +
                  strlen(t->path) + strlen(t->workdir) + (t->cwd ? strlen(t->cwd) : 0) +
                  (pathenv ? strlen(pathenv) : 0) + 4;
    strs = (need + 15) & ~(size_t)15;
    struct init_ctx *c = malloc(strs + TASK_STACK + INIT_STACK);
    if (!c)
        return NULL;
    char **av = (char **)(c + 1), **ev = av + na + 1, *p = (char *)(ev + ne + 1);
    c->t = *t;
    c->t.argv = put_strv(av, &p, t->argv, na);
    c->t.envp = put_strv(ev, &p, t->envp, ne);
    c->t.path = put_str(&p, t->path);
    c->t.workdir = put_str(&p, t->workdir);
    c->t.cwd = t->cwd ? put_str(&p, t->cwd) : NULL;
    c->pathenv = pathenv ? put_str(&p, pathenv) : NULL;
    c->stage = SANDBOX_SETUP;
    c->err = 0;
    c->step = ST_NONE;
    c->donor = UINT32_MAX;
    c->tp = NULL;
    c->task_stack = (char *)(((uintptr_t)c + strs + TASK_STACK) & ~(uintptr_t)15);
    *top = (void *)(((uintptr_t)c + strs + TASK_STACK + INIT_STACK) & ~(uintptr_t)15);
    return c;
}

pid_t sandbox_spawn(const struct sandbox_task *t, int *report, void **mem, int *stage)
{
    int p[2];
    void *top;
    struct init_ctx *c = ctx_new(t, &top);
    *stage = SANDBOX_SETUP;
    if (!c || pipe2(p, O_CLOEXEC) < 0) {
        free(c);
        return -1;
    }
    c->wfd = p[1];
    int fl = SIGCHLD | CLONE_VM | CLONE_SETTLS | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;
    if (!t->network && sb.netfd < 0)
        fl |= CLONE_NEWNET;
    void *tp = c->tp = donor_take(&c->donor);
    pid_t pid = tp ? clone(init_run, top, fl, c, NULL, tp, NULL) : -1;
    int saved = errno;
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        sandbox_free(c);
        errno = saved;
        return -1;
    }
    setpgid(pid, pid);
    *report = p[0];
    *mem = c;
    return pid;
}

int sandbox_report(int fd, const void *mem, int *status, int *err, const char **step)
{
    const struct init_ctx *c = mem;
    int st = c ? c->step : ST_NONE;
    *step = step_names[st >= 0 && st < ST_N ? st : ST_NONE];
    int e[2] = {SANDBOX_DONE, 0};
    ssize_t n;
    while ((n = read(fd, e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(fd);
    if (n != (ssize_t)sizeof e)
        return SANDBOX_DONE;
    if (e[0] == SANDBOX_DONE) {
        *status = e[1];
        return SANDBOX_DONE;
    }
    *err = e[1];
    return e[0] == SANDBOX_EXEC ? SANDBOX_EXEC : SANDBOX_SETUP;
}

bool sandbox_hides(const char *path)
{
    char real[PATH_MAX];
    if (!sb.on || !realpath(path, real))
        return false;
    for (size_t i = 0; i < sb.ndirs; i++)
        if (beneath(real, sb.dirs[i]))
            return true;
    for (size_t i = 0; i < sb.nfiles; i++)
        if (!strcmp(real, sb.files[i]))
            return true;
    return false;
}

int sandbox_uid_take(uid_t *uid)
{
    if (!sandbox_slot_uids()) {
        *uid = geteuid();
        return 0;
    }
    for (uint32_t i = 0; i < sb.count; i++)
        if (!sb.used[i]) {
            sb.used[i] = 1;
            *uid = sb.first + i;
            return 0;
        }
    errno = EAGAIN;
    return -1;
}

void sandbox_uid_put(uid_t uid)
{
    if (sandbox_slot_uids() && uid >= sb.first && uid - sb.first < sb.count)
        sb.used[uid - sb.first] = 0;
}

/* ---- set-up ---- */

/* Writes text into /proc/self/<name>. 0 or -1. */
static int proc_write(const char *name, const char *text)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/%s", name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A client that is not root: a user namespace of its own, its uid and gid mapped to
 * themselves, in which it may make the task's namespaces. */
static int enter_userns(char *err, size_t n)
{
    char map[64];
    uid_t u = geteuid();
    gid_t g = getegid();
    if (unshare(CLONE_NEWUSER) < 0) {
        snprintf(err, n,
                 "cannot make a user namespace (%s; see /proc/sys/user/max_user_namespaces)",
                 strerror(errno));
        return -1;
    }
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)u, (unsigned)u);
    if (proc_write("setgroups", "deny") < 0 || proc_write("uid_map", map) < 0)
        goto fail;
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)g, (unsigned)g);
    if (proc_write("gid_map", map) < 0)
        goto fail;
    return 0;
fail:
    snprintf(err, n, "cannot map this user into its user namespace: %s", strerror(errno));
    return -1;
}

/*
 * One empty network namespace for every task without the network (made once: making
 * one per task halves the rate of short tasks). A child makes it (returning to the
 * host's namespace would need a capability over it that a client in a user namespace
 * lacks) and waits while we take a descriptor of it.
 */
static int make_netns(char *err, size_t n)
{
    int ready[2], hold[2], e = 0;
    char one = 0;
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0) {
        snprintf(err, n, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]); /* its end of file is the signal to leave */
        int ok = unshare(CLONE_NEWNET) == 0 ? 0 : errno;
        if (write(ready[1], &ok, sizeof ok) < 0 || read(hold[0], &one, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    if (pid < 0 || read(ready[0], &e, sizeof e) != (ssize_t)sizeof e)
        e = pid < 0 ? errno : EIO;
    if (!e) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        if ((sb.netfd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            e = errno;
    }
    close(hold[1]); /* the child leaves */
    close(ready[0]);
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    if (e) {
        snprintf(err, n, "cannot make a network namespace: %s", strerror(e));
        return -1;
    }
    return 0;
}

/* The directory to cover for file f (or f itself when its directory is the system's). */
static void hide_file(const char *f)
{
    char real[PATH_MAX], dir[PATH_MAX];
    if (!f || !f[0] || !realpath(f, real))
        return; /* no such file (a literal key, an unset path): nothing to hide */
    snprintf(dir, sizeof dir, "%s", real);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    bool sys = false;
    for (int i = 0; system_dirs[i]; i++)
        sys |= !strcmp(dir, system_dirs[i]);
    if (sys && sb.nfiles < SANDBOX_HIDE_MAX) {
        snprintf(sb.files[sb.nfiles++], PATH_MAX, "%s", real);
        return;
    }
    for (size_t i = 0; i < sb.ndirs; i++)
        if (!strcmp(sb.dirs[i], dir))
            return;
    if (!sys && sb.ndirs <= SANDBOX_HIDE_MAX)
        snprintf(sb.dirs[sb.ndirs++], PATH_MAX, "%s", dir);
}

static int parse_pool(const char *s, char *err, size_t n)
{
    unsigned long a, b;
    char tail;
    if (!s || sscanf(s, "%lu-%lu%c", &a, &b, &tail) != 2 || a == 0 || b < a || b > 4000000000UL ||
        b - a >= 65536) {
        snprintf(err, n,
                 "client.slot_uids '%s' is not a range FIRST-LAST of at most 65536 uids above 0",
                 s ? s : "");
        return -1;
    }
    sb.first = (uid_t)a;
    sb.count = (uint32_t)(b - a + 1);
    if (!(sb.used = calloc(sb.count, 1))) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    return 0;
}

/* Starts `true` in a sandbox, as a task would be: the proof that the boundary works. */
static int probe(const char *state_dir, uid_t uid, char *err, size_t n)
{
    char wd[PATH_MAX + 32];
    snprintf(wd, sizeof wd, "%.4000s/.sandbox-probe", state_dir);
    rmdir(wd);
    if (mkdir(wd, 0700) < 0) {
        snprintf(err, n, "cannot make %.200s: %s", wd, strerror(errno));
        return -1;
    }
    char *av[] = {"true", NULL}, *ev[] = {"PATH=/usr/bin:/bin", NULL};
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC), rep = -1, st = -1, e = 0, rc = -1;
    struct sandbox_task t = {"/bin/true", av, ev, wd, NULL, nul, nul, nul, uid, false, {-1, -1}};
    if (uid != geteuid() && chown(wd, uid, uid) < 0)
        e = errno;
    void *mem = NULL;
    int stage = SANDBOX_SETUP;
    pid_t pid = nul >= 0 && !e ? sandbox_spawn(&t, &rep, &mem, &stage) : -1;
    if (pid < 0) {
        snprintf(err, n, "a sandboxed test process failed (%s: %s)",
                 stage == SANDBOX_SETUP ? "making its namespaces, mounts or network"
                                        : "running true",
                 strerror(e ? e : errno));
    } else {
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        const char *step = "";
        stage = sandbox_report(rep, mem, &st, &e, &step);
        sandbox_free(mem);
        if (stage != SANDBOX_DONE)
            snprintf(err, n, "a sandboxed test process failed (%s: %s)",
                     stage == SANDBOX_SETUP ? step : "running true", strerror(e));
        else if (st != 0)
            snprintf(err, n, "a sandboxed test process failed (exit status 0x%x)", st);
        else
            rc = 0;
    }
    if (nul >= 0)
        close(nul);
    rmdir(wd);
    return rc;
}

int sandbox_init(const struct sandbox_conf *c, char *err, size_t n)
{
    char why[400];
    if (!c->on) {
        log_warnx("client.sandbox = off: tasks run without the execution boundary, as this "
                  "client's user (uid %u), and can read everything it can read, its keys "
                  "included; cgroup limits: %s",
                  (unsigned)geteuid(), c->cgroups);
        return 0;
    }
    sb.root = geteuid() == 0;
    if (!getcwd(sb.cwd, sizeof sb.cwd) || !realpath(c->state_dir, sb.dirs[0])) {
        snprintf(err, n, "cannot resolve the state directory %s: %s", c->state_dir,
                 strerror(errno));
        return -1;
    }
    for (int i = 0; system_dirs[i]; i++)
        if (!strcmp(sb.dirs[0], system_dirs[i])) {
            snprintf(err, n,
                     "client.state_dir %s is a system directory; give the client one "
                     "of its own",
                     sb.dirs[0]);
            return -1;
        }
    sb.ndirs = 1;
    for (int i = 0; i < SANDBOX_HIDE_MAX; i++)
        hide_file(c->files[i]);
    if ((sb.root && parse_pool(c->slot_uids, err, n) < 0))
        return -1;
    /* not dumpable once the user namespace's maps are written and the network namespace
       was taken (a process that is not dumpable can neither write its own maps nor open
       its child's /proc entries): no ptrace, core dump, /proc/PID/mem or environ of the
       client (or of a task's init, which shares its memory) by a process of its uid, as
       a task of a client that is not root is */
    if ((!sb.root && enter_userns(why, sizeof why) < 0) || make_netns(why, sizeof why) < 0 ||
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || first_donor(why, sizeof why) < 0 ||
        (sb.on = true, probe(sb.dirs[0], geteuid(), why, sizeof why) < 0)) {
        sb.on = false;
        snprintf(err, n,
                 "cannot sandbox tasks: %s. Run the client where Linux namespaces are "
                 "available, or set client.sandbox = off to run tasks without the boundary "
                 "(they can then read everything this client's user can, its keys included)",
                 why);
        return -1;
    }
    if (sb.root && probe(sb.dirs[0], sb.first, why, sizeof why) < 0) {
        sb.on = false;
        snprintf(err, n,
                 "cannot run tasks under the slot uids %s: %s (a uid must be one this host can "
                 "switch to; in a user namespace only its mapped uids are); give another "
                 "client.slot_uids, or set client.sandbox = off to run tasks without the "
                 "boundary",
                 c->slot_uids, why);
        return -1;
    }
    char hidden[1200] = "";
    for (size_t i = 0; i < sb.ndirs; i++)
        snprintf(hidden + strlen(hidden), sizeof hidden - strlen(hidden), "%s%s", i ? ", " : "",
                 sb.dirs[i]);
    for (size_t i = 0; i < sb.nfiles; i++)
        snprintf(hidden + strlen(hidden), sizeof hidden - strlen(hidden), ", %s", sb.files[i]);
    if (sb.root)
        log_info("sandbox: namespaces mount, PID, IPC, network (off unless a job asks); tasks "
                 "run as uids %u-%u; hidden: %s; cgroup limits: %s",
                 (unsigned)sb.first, (unsigned)(sb.first + sb.count - 1), hidden, c->cgroups);
    else
        log_info("sandbox: user namespace (uid %u mapped to itself), namespaces mount, PID, "
                 "IPC, network (off unless a job asks); hidden: %s; cgroup limits: %s",
                 (unsigned)geteuid(), hidden, c->cgroups);
    return 0;
}

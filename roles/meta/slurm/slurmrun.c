/*
 * slurmrun.c - running the Slurm adapter's commands: each request's command is a child
 * process in its own process group (dropped to the jobs' identity unless it is an
 * administrative one), its output read from non-blocking pipes watched by the loop,
 * killed past its deadline (slurm_run_tick); at most max_cmds run at once (slurm_pump).
 * A finished command goes to the request's step handler (S->done, slurmdone.c).
 * Also the requests' list, and what a finished command's status means.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/meta/slurm/slurm_int.h"
#include "wire/wire.h"

const char *const slurm_cmd_name[C_N + 2] = {"sbatch",         "squeue",           "sinfo",
                                             "scontrol",       "scancel",          "sacct",
                                             "output listing", "directory removal"};

static void obuf_add(struct obuf *b, const char *p, size_t n)
{
    if (b->n + n + 1 > OUT_MAX)
        n = b->n + 1 < OUT_MAX ? OUT_MAX - b->n - 1 : 0;
    if (!n)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np)
            return;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

const char *slurm_otext(const struct obuf *b)
{
    return b->p ? b->p : "";
}

static void args_clear(struct sreq *r)
{
    for (int i = 0; i < r->argc; i++)
        free(r->argv[i]);
    r->argc = 0;
    r->argv[0] = NULL;
    free(r->out.p);
    free(r->err.p);
    r->out = (struct obuf){0};
    r->err = (struct obuf){0};
}

void slurm_arg(struct sreq *r, const char *fmt, ...)
{
    if (r->argc >= ARGS_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (s) {
        r->argv[r->argc++] = s;
        r->argv[r->argc] = NULL;
    }
}

/* Prepares command cmd (arguments follow with slurm_arg()); it starts from the next pump. */
void slurm_cmd(struct slurm_site *S, struct sreq *r, int c, bool admin)
{
    args_clear(r);
    r->cmd = c;
    r->admin = admin;
    r->want = true;
    r->pid = 0;
    r->reaped = r->timed_out = false;
    r->status = 0;
    slurm_arg(r, "%s", slurm_cmd_name[c]);
    if (S->c.cluster[0])
        slurm_arg(r, "-M%s", S->c.cluster);
}

static void fd_close(struct slurm_site *S, struct sreq *r, int w)
{
    if (r->fd[w] >= 0) {
        loop_remove_fd(S->loop, r->fd[w]);
        close(r->fd[w]);
        r->fd[w] = -1;
    }
}

static void finish(struct slurm_site *S, struct sreq *r);

/* A command's output is readable (or closed). */
static void on_fd(struct loop *l, void *a)
{
    (void)l;
    struct fdref *ref = a;
    struct sreq *r = ref->r;
    struct slurm_site *S = r->S;
    char buf[8192];
    for (int n = 0; n < 64; n++) {
        ssize_t k = read(r->fd[ref->which], buf, sizeof buf);
        if (k > 0) {
            obuf_add(ref->which ? &r->err : &r->out, buf, (size_t)k);
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        fd_close(S, r, ref->which); /* EOF or error */
        break;
    }
    if (r->fd[0] < 0 && r->fd[1] < 0 && r->pid > 0 && !r->reaped) {
        if (waitpid(r->pid, &r->status, WNOHANG) == r->pid)
            r->reaped = true;
        if (r->reaped) {
            finish(S, r);
            slurm_pump(S); /* a next step, or a command waiting for a slot */
        }
        /* else: the tick reaps it */
    }
}

static void start(struct slurm_site *S, struct sreq *r)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    r->want = false;
    if (pipe2(po, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(pe, O_CLOEXEC | O_NONBLOCK) < 0) {
        if (po[0] >= 0) {
            close(po[0]);
            close(po[1]);
        }
        r->reaped = true;
        r->status = 127 << 8;
        obuf_add(&r->err, "cannot make a pipe", 18);
        finish(S, r);
        return;
    }
    bool drop = S->runas && !r->admin;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: only async-signal-safe calls from here on */
        setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL); /* the spool ignores it; exec keeps an ignored signal */
        int dn = open("/dev/null", O_RDONLY);
        if (dn < 0 || dup2(dn, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
            _exit(127);
        syscall(SYS_close_range, 3u, ~0u, 0u);
        if (drop && (setgroups((size_t)S->ngroups, S->groups) < 0 || setgid(S->gid) < 0 ||
                     setuid(S->uid) < 0))
            _exit(126);
        /* dies with the spool (after setuid, which clears it): a command left running by
         * a kill -9 must not make a job after the restarted spool looked for it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(126);
        if (chdir(S->c.dir) < 0 && chdir("/") < 0)
            _exit(127);
        if (r->child) /* issue 26: glibc's fork leaves malloc and stdio usable here */
            _exit(r->child(S, r));
        execve(S->path[r->cmd], r->argv, S->envp);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        r->reaped = true;
        r->status = 127 << 8;
        obuf_add(&r->err, "cannot fork", 11);
        finish(S, r);
        return;
    }
    setpgid(pid, pid); /* also from here: no race with the kill of a timeout */
    r->pid = pid;
    r->fd[0] = po[0];
    r->fd[1] = pe[0];
    r->started = loop_now_ms();
    r->deadline = r->started + (r->tmo > 0 ? r->tmo : S->c.timeout_ms);
    S->running++;
    for (int w = 0; w < 2; w++) {
        r->ref[w] = (struct fdref){r, w};
        if (loop_add_fd(S->loop, r->fd[w], on_fd, &r->ref[w]) < 0)
            log_warnx("slurm site %s: cannot watch a command's output", S->site);
    }
    log_debug("slurm site %s: %s %s%s", S->site, r->argv[0], r->argc > 1 ? r->argv[1] : "",
              r->argc > 2 ? " ..." : "");
}

struct sreq *slurm_req_new(struct slurm_site *S, uint32_t type, uint64_t rid)
{
    struct sreq *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->S = S;
    r->type = type;
    r->rid = rid;
    r->fd[0] = r->fd[1] = -1;
    if (S->tail)
        S->tail->next = r;
    else
        S->reqs = r;
    S->tail = r;
    return r;
}

void slurm_req_free(struct slurm_site *S, struct sreq *r)
{
    struct sreq **pp = &S->reqs, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp)
        *pp = r->next;
    if (S->tail == r)
        S->tail = prev;
    fd_close(S, r, 0);
    fd_close(S, r, 1);
    args_clear(r);
    free(r->rep);
    free(r->wrap);
    free(r->con);
    free(r->prid);
    free(r->pjob);
    free(r->pout);
    free(r->files);
    free(r->fdir);
    free(r->fglobs);
    free(r);
}

void slurm_ready(struct slurm_site *S, uint64_t rid, const struct wire_buf *wb)
{
    struct sreq *r = slurm_req_new(S, 0, rid);
    if (r && (r->rep = malloc(wb->sb.size))) {
        memcpy(r->rep, wb->sb.data, wb->sb.size);
        r->replen = wb->sb.size;
    } else if (r) {
        slurm_req_free(S, r);
    }
}

void slurm_reply_errv(struct slurm_site *S, uint64_t rid, bool now, int code, const char *fmt,
                      va_list ap)
{
    char msg[700];
    vsnprintf(msg, sizeof msg, fmt, ap);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_error_msg(&wb, rid, code, "%s", msg);
    if (now)
        S->fn(S->arg, wb.sb.data, wb.sb.size);
    else
        slurm_ready(S, rid, &wb);
    wire_buf_free(&wb);
}

void slurm_reply_err(struct slurm_site *S, uint64_t rid, bool now, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    slurm_reply_errv(S, rid, now, code, fmt, ap);
    va_end(ap);
}

/* Whether the command ran and exited 0. */
bool slurm_cmd_ok(const struct sreq *r)
{
    return r->reaped && !r->timed_out && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
}

/* Slurm could not be reached (rather than refusing): a timeout, a controller that does
 * not answer, a command that cannot run. */
bool slurm_unreachable(const struct sreq *r)
{
    const char *e = slurm_otext(&r->err);
    return r->timed_out || strstr(e, "Unable to contact slurm controller") ||
           strstr(e, "Socket timed out") || strstr(e, "Connection refused") ||
           (WIFEXITED(r->status) && WEXITSTATUS(r->status) >= 126);
}

/* Why a command failed, in one line. */
void slurm_why(const struct slurm_site *S, const struct sreq *r, char *b, size_t n)
{
    if (r->timed_out) {
        snprintf(b, n, "slurm site %s: %s did not finish within %ld ms (Slurm not answering?)",
                 S->site, slurm_cmd_name[r->cmd], S->c.timeout_ms);
        return;
    }
    const char *e = r->err.n ? slurm_otext(&r->err) : slurm_otext(&r->out);
    int st = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
    size_t k = (size_t)snprintf(b, n, "slurm site %s: %s: ", S->site, slurm_cmd_name[r->cmd]);
    for (; *e && k + 1 < n && k < 400; e++)
        b[k++] = *e == '\n' || *e == '\r' || *e == '\t' ? ' ' : *e;
    while (k && b[k - 1] == ' ')
        k--;
    if (k < n)
        b[k] = '\0';
    if (!r->err.n && !r->out.n)
        snprintf(b + strlen(b), n - strlen(b), "exit status %d", st);
}

static void finish(struct slurm_site *S, struct sreq *r)
{
    if (r->pid > 0 && S->running)
        S->running--;
    r->pid = -1;
    fd_close(S, r, 0);
    fd_close(S, r, 1);
    S->done(S, r);
}

static bool earlier_same_key(struct slurm_site *S, struct sreq *r)
{
    for (struct sreq *q = S->reqs; q && q != r; q = q->next)
        if ((q->type == WT_SUBMIT || q->type == WT_PSUBMIT) && !strcmp(q->key, r->key))
            return true;
    return false;
}

void slurm_pump(struct slurm_site *S)
{
    struct sreq *nx;
    for (struct sreq *r = S->reqs; r && S->running < S->c.max_cmds; r = nx) {
        nx = r->next;
        if (!r->want)
            continue;
        if ((r->type == WT_SUBMIT || r->type == WT_PSUBMIT) && r->step == 0 && r->key[0] &&
            earlier_same_key(S, r))
            continue; /* one submission per key at a time: a resent one finds the first's job */
        start(S, r);
    }
}

void slurm_run_tick(struct slurm_site *S)
{
    int64_t now = loop_now_ms();
    struct sreq *nx;
    for (struct sreq *r = S->reqs; r; r = nx) {
        nx = r->next;
        if (r->rep) { /* an answer made without a command */
            S->fn(S->arg, r->rep, r->replen);
            slurm_req_free(S, r);
            continue;
        }
        if (r->pid <= 0)
            continue;
        if (now > r->deadline) {
            kill(-r->pid, SIGKILL);
            if (waitpid(r->pid, &r->status, WNOHANG) != r->pid) {
                if (S->nreap == S->capreap) {
                    uint32_t nc = S->capreap ? S->capreap * 2 : 16;
                    pid_t *p = realloc(S->reap, nc * sizeof *p);
                    if (p) {
                        S->reap = p;
                        S->capreap = nc;
                    }
                }
                if (S->nreap < S->capreap)
                    S->reap[S->nreap++] = r->pid;
            }
            r->reaped = true;
            r->timed_out = true;
            log_warnx("slurm site %s: %s killed after %ld ms", S->site, slurm_cmd_name[r->cmd],
                      S->c.timeout_ms);
            finish(S, r);
        } else if (r->fd[0] < 0 && r->fd[1] < 0 && waitpid(r->pid, &r->status, WNOHANG) == r->pid) {
            r->reaped = true;
            finish(S, r);
        }
    }
    for (uint32_t i = 0; i < S->nreap;)
        if (waitpid(S->reap[i], NULL, WNOHANG) != 0)
            S->reap[i] = S->reap[--S->nreap];
        else
            i++;
}

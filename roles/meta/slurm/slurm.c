/*
 * slurm.c - a real Slurm cluster as a metascheduler site (slurm.h; docs/meta.md "Slurm
 * sites").
 *
 * Requests (docs/wire.md 6.12) map onto Slurm's client commands:
 *   SITE_INFO     sinfo -h -o %P|%a|%C|%F, then squeue -t PD,R,CG of the partition
 *   ESTIMATE      sbatch --test-only (the start Slurm's will-run test gives)
 *   RESERVE       scontrol create reservation (CoreCnt, Users = the job identity,
 *                 Flags=FLEX so the job may start before it, PURGE_COMP so Slurm drops it
 *                 by itself once its job has ended)
 *   SUBMIT        squeue -n KEY (the spool's key is the job name: a resent submission
 *   PSUBMIT       gets the job made before), then sbatch --parsable --reservation
 *   JOB_GET       one squeue -j for every job asked about since the last one
 *   CANCEL        scancel
 *   RESV_RELEASE  scontrol delete reservation
 *   RESV_LIST     scontrol -o show reservation, then squeue for the jobs bound to them
 * Each command is a child process in its own process group with its output on
 * non-blocking pipes watched by the loop; past its deadline the group is killed. A
 * command that cannot reach Slurm makes SITE_INFO and JOB_GET go unanswered (the spool
 * marks the site down) and every other request an error (the spool tries another site).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/meta/slurm/slurm.h"
#include "wire/wire.h"

extern char **environ;

enum { C_SBATCH, C_SQUEUE, C_SINFO, C_SCONTROL, C_SCANCEL, C_SACCT, C_N };
static const char *const cmd_name[C_N] = {"sbatch",   "squeue",  "sinfo",
                                          "scontrol", "scancel", "sacct"};

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
    bool parallel;
    char *wrap;
    /* T_POLL: the JOB_GETs it answers */
    uint64_t *prid, *pjob;
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
    struct sreq *reqs, *tail; /* every request, oldest first */
    int running;
    /* JOB_GETs waiting for the next squeue */
    uint64_t *wrid, *wjob;
    uint32_t nw, capw;
    bool polling;
    pid_t *reap;
    uint32_t nreap, capreap;
    int kick; /* a 0 ms timer that starts new requests' commands in the next turn */
};

/* ---- parsing ---- */

int64_t slurm_time_ms(const char *s)
{
    struct tm tm = {0};
    char tail = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &tail) < 6)
        return -1;
    if (tail && tail != '|' && tail != ' ' && tail != '\n')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? -1 : (int64_t)t * 1000;
}

int64_t slurm_test_only_start(const char *text)
{
    const char *p = text ? strstr(text, " to start at ") : NULL;
    return p ? slurm_time_ms(p + 13) : -1;
}

const char *slurm_state_word(const char *st)
{
    static const struct {
        const char *slurm, *word;
    } map[] = {
        {"PENDING", "queued"},      {"REQUEUED", "queued"},      {"REQUEUE_FED", "queued"},
        {"REQUEUE_HOLD", "queued"}, {"RESV_DEL_HOLD", "queued"}, {"CONFIGURING", "queued"},
        {"SUSPENDED", "running"},   {"RUNNING", "running"},      {"COMPLETING", "running"},
        {"STAGE_OUT", "running"},   {"SIGNALING", "running"},    {"RESIZING", "running"},
        {"COMPLETED", "done"},      {"CANCELLED", "cancelled"},  {"TIMEOUT", "killed"},
        {"PREEMPTED", "killed"},    {"DEADLINE", "killed"},      {"OUT_OF_MEMORY", "killed"},
        {"FAILED", "failed"},       {"NODE_FAIL", "failed"},     {"BOOT_FAIL", "failed"},
        {"SPECIAL_EXIT", "failed"}, {"REVOKED", "cancelled"},
    };
    for (size_t i = 0; st && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(st, map[i].slurm))
            return map[i].word;
    return "queued";
}

bool slurm_field(const char *line, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = line; p && *p;) {
        if ((p == line || p[-1] == ' ') && !strncmp(p, key, kl) && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t l = strcspn(v, " \n");
            if (n) {
                size_t c = l < n - 1 ? l : n - 1;
                memcpy(out, v, c);
                out[c] = '\0';
            }
            return true;
        }
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (n)
        out[0] = '\0';
    return false;
}

bool slurm_shquote(char *buf, size_t cap, const char *s, size_t len)
{
    size_t n = strlen(buf);
    if (n + 3 > cap)
        return false;
    buf[n++] = '\'';
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\'') {
            if (n + 5 > cap)
                return false;
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else {
            if (n + 2 > cap)
                return false;
            buf[n++] = s[i];
        }
    }
    if (n + 2 > cap)
        return false;
    buf[n++] = '\'';
    buf[n] = '\0';
    return true;
}

long slurm_bf_window_min(const char *sp)
{
    const char *p = sp ? strstr(sp, "bf_window=") : NULL;
    if (!p || (p != sp && p[-1] != ','))
        return 1440;
    long v = strtol(p + 10, NULL, 10);
    return v > 0 ? v : 1440;
}

bool slurm_meta_resv_name(const char *name)
{
    const char *p = name;
    if (*p++ != 'm' || !strchr("0123456789abcdef", *p) || !*p)
        return false;
    while (*p && strchr("0123456789abcdef", *p))
        p++;
    for (int part = 0; part < 2; part++) {
        if (*p++ != '-' || !(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return !*p;
}

int slurm_url_parse(const char *url, struct slurm_conf *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->timeout_ms = 4000;
    c->max_cmds = 8;
    snprintf(c->dir, sizeof c->dir, "/tmp");
    if (strncmp(url, "slurm://", 8)) {
        snprintf(err, errlen, "'%s' is not slurm://SLURM_CONF[?param=value&...]", url);
        return -1;
    }
    const char *p = url + 8, *q = strchr(p, '?');
    size_t pl = q ? (size_t)(q - p) : strlen(p);
    if (pl >= sizeof c->conf || (pl && p[0] != '/')) {
        snprintf(err, errlen,
                 "%s: the slurm.conf path must be absolute (slurm:///etc/slurm/slurm.conf)", url);
        return -1;
    }
    memcpy(c->conf, p, pl);
    c->conf[pl] = '\0';
    char params[1024];
    snprintf(params, sizeof params, "%s", q ? q + 1 : "");
    for (char *save = NULL, *t = strtok_r(params, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: '%s' is not param=value", url, t);
            return -1;
        }
        *eq = '\0';
        const char *v = eq + 1;
        struct {
            const char *k;
            char *dst;
            size_t n;
        } s[] = {{"partition", c->partition, sizeof c->partition},
                 {"account", c->account, sizeof c->account},
                 {"qos", c->qos, sizeof c->qos},
                 {"cluster", c->cluster, sizeof c->cluster},
                 {"user", c->user, sizeof c->user},
                 {"dir", c->dir, sizeof c->dir},
                 {"bin", c->bin, sizeof c->bin}};
        bool done = false;
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
            if (!strcmp(t, s[i].k)) {
                if (strlen(v) >= s[i].n || strpbrk(v, " '\"\\;")) {
                    snprintf(err, errlen, "%s: bad value for %s", url, t);
                    return -1;
                }
                snprintf(s[i].dst, s[i].n, "%s", v);
                done = true;
            }
        if (!done && (!strcmp(t, "timeout_ms") || !strcmp(t, "max_cmds"))) {
            char *end = NULL;
            long n = strtol(v, &end, 10);
            bool to = t[0] == 't';
            if (!*v || *end || n < (to ? 100 : 1) || n > (to ? 600000 : 256)) {
                snprintf(err, errlen, "%s: %s must be %s", url, t,
                         to ? "100..600000 (ms)" : "1..256");
                return -1;
            }
            *(to ? &c->timeout_ms : &c->max_cmds) = n;
            done = true;
        }
        if (!done) {
            snprintf(err, errlen,
                     "%s: unknown parameter '%s' (partition, account, qos, cluster, user, dir, "
                     "bin, timeout_ms, max_cmds)",
                     url, t);
            return -1;
        }
    }
    if (c->dir[0] != '/') {
        snprintf(err, errlen, "%s: dir must be an absolute path", url);
        return -1;
    }
    return 0;
}

/* ---- commands ---- */

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

static const char *otext(const struct obuf *b)
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

static void arg(struct sreq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct sreq *r, const char *fmt, ...)
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

/* Prepares command cmd (arguments follow with arg()); it starts from the next pump. */
static void cmd(struct slurm_site *S, struct sreq *r, int c, bool admin)
{
    args_clear(r);
    r->cmd = c;
    r->admin = admin;
    r->want = true;
    r->pid = 0;
    r->reaped = r->timed_out = false;
    r->status = 0;
    arg(r, "%s", cmd_name[c]);
    if (S->c.cluster[0])
        arg(r, "-M%s", S->c.cluster);
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
static void pump(struct slurm_site *S);

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
            pump(S); /* a next step, or a command waiting for a slot */
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
    r->deadline = r->started + S->c.timeout_ms;
    S->running++;
    for (int w = 0; w < 2; w++) {
        r->ref[w] = (struct fdref){r, w};
        if (loop_add_fd(S->loop, r->fd[w], on_fd, &r->ref[w]) < 0)
            log_warnx("slurm site %s: cannot watch a command's output", S->site);
    }
    log_debug("slurm site %s: %s %s%s", S->site, r->argv[0], r->argc > 1 ? r->argv[1] : "",
              r->argc > 2 ? " ..." : "");
}

/* ---- requests ---- */

static struct sreq *req_new(struct slurm_site *S, uint32_t type, uint64_t rid)
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

static void req_free(struct slurm_site *S, struct sreq *r)
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
    free(r->prid);
    free(r->pjob);
    free(r);
}

static void send_wb(struct slurm_site *S, const struct wire_buf *wb)
{
    S->fn(S->arg, wb->sb.data, wb->sb.size);
}

static void reply_err(struct slurm_site *S, struct sreq *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_err(struct slurm_site *S, struct sreq *r, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_error_msg(&wb, r->rid, code, "%s", msg);
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

/* Whether the command ran and exited 0. */
static bool cmd_ok(const struct sreq *r)
{
    return r->reaped && !r->timed_out && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
}

/* Slurm could not be reached (rather than refusing): a timeout, a controller that does
 * not answer, a command that cannot run. */
static bool unreachable(const struct sreq *r)
{
    const char *e = otext(&r->err);
    return r->timed_out || strstr(e, "Unable to contact slurm controller") ||
           strstr(e, "Socket timed out") || strstr(e, "Connection refused") ||
           (WIFEXITED(r->status) && WEXITSTATUS(r->status) >= 126);
}

/* Why a command failed, in one line. */
static void why(const struct slurm_site *S, const struct sreq *r, char *b, size_t n)
{
    if (r->timed_out) {
        snprintf(b, n, "slurm site %s: %s did not finish within %ld ms (Slurm not answering?)",
                 S->site, cmd_name[r->cmd], S->c.timeout_ms);
        return;
    }
    const char *e = r->err.n ? otext(&r->err) : otext(&r->out);
    int st = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
    size_t k = (size_t)snprintf(b, n, "slurm site %s: %s: ", S->site, cmd_name[r->cmd]);
    for (; *e && k + 1 < n && k < 400; e++)
        b[k++] = *e == '\n' || *e == '\r' || *e == '\t' ? ' ' : *e;
    while (k && b[k - 1] == ' ')
        k--;
    if (k < n)
        b[k] = '\0';
    if (!r->err.n && !r->out.n)
        snprintf(b + strlen(b), n - strlen(b), "exit status %d", st);
}

static void fmt_time(int64_t ms, char *b, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(b, n, "%Y-%m-%dT%H:%M:%S", &tm);
}

static void common_job_args(struct slurm_site *S, struct sreq *r)
{
    if (S->c.partition[0])
        arg(r, "--partition=%s", S->c.partition);
    if (S->c.account[0])
        arg(r, "--account=%s", S->c.account);
    if (S->c.qos[0])
        arg(r, "--qos=%s", S->c.qos);
    arg(r, "--ntasks=%" PRIu64, r->procs ? r->procs : 1);
    /* Slurm's limits are whole minutes: a job's walltime rounds up */
    uint64_t min = (r->walltime_s + 59) / 60;
    arg(r, "--time=%" PRIu64, min ? min : 1);
    if (r->mem_mb)
        arg(r, r->parallel ? "--mem=%" PRIu64 : "--mem-per-cpu=%" PRIu64, r->mem_mb);
    arg(r, "--chdir=%s", S->c.dir);
}

static void step_done(struct slurm_site *S, struct sreq *r);

static void finish(struct slurm_site *S, struct sreq *r)
{
    if (r->pid > 0 && S->running)
        S->running--;
    r->pid = -1;
    fd_close(S, r, 0);
    fd_close(S, r, 1);
    step_done(S, r);
}

/* Splits s at sep in place: up to n fields, returns how many. */
static int split(char *s, char sep, char **f, int n)
{
    int k = 0;
    while (k < n) {
        f[k++] = s;
        char *p = strchr(s, sep);
        if (!p)
            break;
        *p = '\0';
        s = p + 1;
    }
    return k;
}

static void done_site_info(struct slurm_site *S, struct sreq *r)
{
    if (!cmd_ok(r)) {
        char b[512];
        why(S, r, b, sizeof b);
        log_debug("%s", b); /* unanswered: the spool marks the site down */
        req_free(S, r);
        return;
    }
    if (r->step == 0) {
        /* %P|%a|%C|%F: partition (default marked *), up/down, CPUs and nodes A/I/O/T */
        bool found = false;
        char *save = NULL;
        for (char *ln = strtok_r(r->out.p ? r->out.p : (char *)"", "\n", &save); ln;
             ln = strtok_r(NULL, "\n", &save)) {
            char *f[4];
            if (split(ln, '|', f, 4) < 4)
                continue;
            size_t pl = strlen(f[0]);
            bool dflt = pl && f[0][pl - 1] == '*';
            if (dflt)
                f[0][pl - 1] = '\0';
            if (S->c.partition[0] ? strcmp(f[0], S->c.partition) : !dflt)
                continue;
            long a = 0, i = 0, o = 0, t = 0, na = 0, ni = 0, no = 0, nt = 0;
            sscanf(f[2], "%ld/%ld/%ld/%ld", &a, &i, &o, &t);
            sscanf(f[3], "%ld/%ld/%ld/%ld", &na, &ni, &no, &nt);
            bool up = !strcmp(f[1], "up");
            r->i1 = t;
            r->i2 = up ? i : 0;
            r->i3 = nt;
            r->i4 = up ? a + i : 0;
            snprintf(r->s1, sizeof r->s1, "%s", f[0]);
            found = true;
            break;
        }
        if (!found) {
            log_warnx("slurm site %s: partition %s not found by sinfo", S->site,
                      S->c.partition[0] ? S->c.partition : "(default)");
            reply_err(S, r, WE_INVALID, "slurm site %s: no partition %s", S->site,
                      S->c.partition[0] ? S->c.partition : "(default)");
            req_free(S, r);
            return;
        }
        r->step = 1;
        cmd(S, r, C_SQUEUE, false);
        arg(r, "--noheader");
        arg(r, "--partition=%s", r->s1);
        arg(r, "--states=PD,R,CG,S");
        arg(r, "--format=%%t");
        return;
    }
    uint64_t pend = 0, run = 0;
    for (const char *p = otext(&r->out); *p;) {
        if (!strncmp(p, "PD", 2))
            pend++;
        else if (*p != '\n')
            run++;
        p = strchr(p, '\n');
        p = p ? p + 1 : "";
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SITE, r->rid, 1);
    wire_put_key(&wb, "site");
    wire_pack_map(&wb, 14);
    wire_put_u64(&wb, "clusters", 1);
    wire_put_u64(&wb, "hosts", (uint64_t)r->i3);
    wire_put_u64(&wb, "hosts_up", (uint64_t)r->i4);
    wire_put_u64(&wb, "cores", (uint64_t)r->i1);
    wire_put_u64(&wb, "cores_up", (uint64_t)(r->i4 ? r->i1 : 0));
    wire_put_u64(&wb, "cores_free", (uint64_t)r->i2);
    /* a job may span the partition's nodes; a partition down now may come back, so its
     * size stays (jobs are not refused at the spool for a Slurm outage) */
    wire_put_u64(&wb, "largest_procs", (uint64_t)r->i1);
    wire_put_u64(&wb, "queued", pend);
    wire_put_u64(&wb, "running", run);
    wire_put_u64(&wb, "reservations", 0);
    wire_put_u64(&wb, "cycles", 0);
    wire_put_i64(&wb, "now", wall_now_ms());
    wire_put_str(&wb, "kind", "slurm");
    wire_put_str(&wb, "partition", r->s1);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    req_free(S, r);
}

static void done_estimate(struct slurm_site *S, struct sreq *r)
{
    char b[600];
    int64_t e = -1;
    if (r->reaped && !r->timed_out) {
        e = slurm_test_only_start(otext(&r->err));
        if (e < 0)
            e = slurm_test_only_start(otext(&r->out));
    }
    if (e < 0 && (!cmd_ok(r) || unreachable(r))) {
        why(S, r, b, sizeof b);
        reply_err(S, r, WE_REFUSED, "%s", b);
        req_free(S, r);
        return;
    }
    int64_t now = wall_now_ms();
    if (e >= 0 && e < now)
        e = now;
    b[0] = '\0';
    if (e < 0)
        snprintf(b, sizeof b, "Slurm gave no start for this request");
    else if (e > now + S->bf_window_min * 60000)
        snprintf(b, sizeof b,
                 "beyond Slurm's backfill window (%ld min): a lower bound, held once reserved",
                 S->bf_window_min);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_STARTS, r->rid, 4);
    wire_put_i64(&wb, "earliest", e);
    wire_put_key(&wb, "starts");
    if (e >= 0) {
        wire_pack_array(&wb, 1);
        wire_pack_map(&wb, 2);
        wire_put_i64(&wb, "from", e);
        wire_put_i64(&wb, "to", -1);
    } else {
        wire_pack_array(&wb, 0);
    }
    wire_put_i64(&wb, "now", now);
    wire_put_str(&wb, "reason", b);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    req_free(S, r);
}

static void done_reserve(struct slurm_site *S, struct sreq *r)
{
    if (!cmd_ok(r)) {
        char b[600];
        why(S, r, b, sizeof b);
        reply_err(S, r, WE_REFUSED, "%s", b);
        req_free(S, r);
        return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESV, r->rid, 1);
    wire_put_key(&wb, "resv");
    wire_pack_map(&wb, 9);
    wire_put_str(&wb, "name", r->name);
    wire_put_str(&wb, "owner", S->owner);
    wire_put_i64(&wb, "start", r->i1);
    wire_put_i64(&wb, "end", r->i2);
    wire_put_u64(&wb, "tasks", 1);
    wire_put_u64(&wb, "procs", r->procs);
    wire_put_u64(&wb, "job", 0);
    wire_put_bool(&wb, "site", true);
    wire_put_bool(&wb, "active", true);
    send_wb(S, &wb);
    wire_buf_free(&wb);
    req_free(S, r);
}

static void submit_cmd(struct slurm_site *S, struct sreq *r)
{
    r->step = 1;
    cmd(S, r, C_SBATCH, false);
    arg(r, "--parsable");
    common_job_args(S, r);
    arg(r, "--job-name=%s", r->jname);
    arg(r, "--comment=gridnode meta%s%s%s%s", r->user[0] ? " user " : "", r->user,
        r->name[0] ? " name " : "", r->name);
    if (r->resv[0])
        arg(r, "--reservation=%s", r->resv);
    arg(r, "--output=%s/slurm-%%j.out", S->c.dir);
    arg(r, "--error=%s/slurm-%%j.err", S->c.dir);
    arg(r, "--wrap=%s", r->wrap);
}

static void submitted(struct slurm_site *S, struct sreq *r, uint64_t job, const char *state,
                      bool repeat)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SUBMITTED, r->rid, repeat ? 4 : 3);
    wire_put_u64(&wb, "job", job);
    wire_put_str(&wb, "state", state);
    wire_put_str(&wb, "cluster", "");
    if (repeat)
        wire_put_bool(&wb, "repeat", true);
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

static void done_submit(struct slurm_site *S, struct sreq *r)
{
    char b[600];
    if (!cmd_ok(r)) {
        why(S, r, b, sizeof b);
        if (unreachable(r) && r->key[0]) {
            /* sbatch may have made the job before it was killed or lost its answer: no
             * reply, so the spool sends the submission again with the same key once the
             * site answers (and this lookup finds the job) instead of placing it twice */
            log_warnx("%s (no answer: the spool resends with key %s)", b, r->key);
        } else {
            reply_err(S, r, WE_INVALID, "%s", b);
        }
        req_free(S, r);
        return;
    }
    if (r->step == 0) { /* squeue -n KEY: the job made by an earlier copy of this request */
        char *ln = r->out.p;
        uint64_t job = ln ? strtoull(ln, NULL, 10) : 0;
        if (job) {
            char *f[2];
            char *nl = strchr(ln, '\n');
            if (nl)
                *nl = '\0';
            int k = split(ln, '|', f, 2);
            log_info("slurm site %s: %s is job %" PRIu64 " already", S->site, r->jname, job);
            submitted(S, r, job, k > 1 ? slurm_state_word(f[1]) : "queued", true);
            req_free(S, r);
            return;
        }
        submit_cmd(S, r);
        return;
    }
    uint64_t job = strtoull(otext(&r->out), NULL, 10);
    if (!job) {
        reply_err(S, r, WE_INVALID, "slurm site %s: sbatch printed no job id: %.200s", S->site,
                  otext(&r->out));
        req_free(S, r);
        return;
    }
    submitted(S, r, job, "queued", false);
    req_free(S, r);
}

static void done_simple(struct slurm_site *S, struct sreq *r)
{
    if (cmd_ok(r)) {
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_OK, r->rid, 0);
        send_wb(S, &wb);
        wire_buf_free(&wb);
    } else {
        char b[600];
        why(S, r, b, sizeof b);
        const char *e = otext(&r->err);
        int code = strstr(e, "Invalid job id") || strstr(e, "Invalid reservation") ? WE_NOT_FOUND
                   : strstr(e, "in use") || strstr(e, "already completing")        ? WE_STATE
                                                                                   : WE_REFUSED;
        reply_err(S, r, code, "%s", b);
    }
    req_free(S, r);
}

static void done_resv_list(struct slurm_site *S, struct sreq *r)
{
    if (!cmd_ok(r)) {
        char b[600];
        why(S, r, b, sizeof b);
        reply_err(S, r, WE_REFUSED, "%s", b);
        req_free(S, r);
        return;
    }
    if (r->step == 0) {
        free(r->wrap);
        r->wrap = strdup(otext(&r->out));
        r->step = 1;
        cmd(S, r, C_SQUEUE, true);
        arg(r, "--noheader");
        arg(r, "--states=PD,R,CG,CF,S");
        arg(r, "--Format=JobID:|,Reservation:|");
        return;
    }
    char *lines[4096];
    int n = 0;
    char *save = NULL;
    for (char *ln = strtok_r(r->wrap ? r->wrap : (char *)"", "\n", &save); ln && n < 4096;
         ln = strtok_r(NULL, "\n", &save)) {
        char nm[64];
        if (slurm_field(ln, "ReservationName", nm, sizeof nm) &&
            (!r->name[0] || !strcmp(nm, r->name)))
            lines[n++] = ln;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESVS, r->rid, 2);
    wire_put_i64(&wb, "now", wall_now_ms());
    wire_put_key(&wb, "resvs");
    wire_pack_array(&wb, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        char nm[64], v[64];
        slurm_field(lines[i], "ReservationName", nm, sizeof nm);
        /* the job bound to it: squeue rows JOBID|RESV| */
        uint64_t job = 0;
        size_t nl = strlen(nm);
        for (const char *p = otext(&r->out); *p && !job;) {
            const char *bar = strchr(p, '|'), *eol = strchr(p, '\n');
            if (!eol)
                eol = p + strlen(p);
            if (bar && bar < eol && (size_t)(eol - bar - 1) >= nl && !strncmp(bar + 1, nm, nl) &&
                (bar[1 + nl] == '|' || bar + 1 + nl == eol))
                job = strtoull(p, NULL, 10);
            p = *eol ? eol + 1 : eol;
        }
        bool ours = slurm_meta_resv_name(nm);
        wire_pack_map(&wb, 9);
        wire_put_str(&wb, "name", nm);
        wire_put_str(&wb, "owner", ours ? S->owner : "");
        slurm_field(lines[i], "StartTime", v, sizeof v);
        wire_put_i64(&wb, "start", slurm_time_ms(v));
        slurm_field(lines[i], "EndTime", v, sizeof v);
        wire_put_i64(&wb, "end", slurm_time_ms(v));
        slurm_field(lines[i], "CoreCnt", v, sizeof v);
        wire_put_u64(&wb, "procs", strtoull(v, NULL, 10));
        wire_put_u64(&wb, "job", job);
        wire_put_bool(&wb, "site", ours);
        slurm_field(lines[i], "State", v, sizeof v);
        wire_put_bool(&wb, "active", !strcmp(v, "ACTIVE"));
        wire_put_str(&wb, "hosts", "");
    }
    send_wb(S, &wb);
    wire_buf_free(&wb);
    req_free(S, r);
}

static void job_reply(struct slurm_site *S, uint64_t rid, uint64_t job, char **f, int nf)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB, rid, 1);
    wire_put_key(&wb, "job");
    wire_pack_map(&wb, 10);
    wire_put_u64(&wb, "job", job);
    wire_put_str(&wb, "kind", "parallel");
    if (nf >= 7) {
        const char *st = slurm_state_word(f[1]);
        bool pending = !strcmp(st, "queued");
        int64_t s = slurm_time_ms(f[2]), e = slurm_time_ms(f[3]);
        int raw = atoi(f[4]);
        int ex = WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : WEXITSTATUS(raw);
        bool ended = strcmp(st, "queued") && strcmp(st, "running");
        wire_put_str(&wb, "state", st);
        wire_put_i64(&wb, "started", pending ? 0 : (s > 0 ? s : 0));
        wire_put_i64(&wb, "finished", ended && e > 0 ? e : 0);
        wire_put_i64(&wb, "exit", ended ? ex : 0);
        wire_put_i64(&wb, "estimate", pending && s > 0 ? s : 0);
        wire_put_str(&wb, "reason", strcmp(f[5], "None") ? f[5] : "");
        wire_put_str(&wb, "hosts", strcmp(f[6], "(null)") ? f[6] : "");
        wire_put_str(&wb, "slurm_state", f[1]);
    } else {
        /* Slurm forgot it (MinJobAge passed, or its state was lost) and the adapter has no
         * accounting to ask: reported failed rather than unknown, so it is not run twice */
        wire_put_str(&wb, "state", "failed");
        wire_put_i64(&wb, "started", 0);
        wire_put_i64(&wb, "finished", wall_now_ms());
        wire_put_i64(&wb, "exit", -1);
        wire_put_i64(&wb, "estimate", 0);
        wire_put_str(&wb, "reason", "Slurm no longer knows the job: its end was not seen");
        wire_put_str(&wb, "hosts", "");
        wire_put_str(&wb, "slurm_state", "");
    }
    send_wb(S, &wb);
    wire_buf_free(&wb);
}

/* The row of job in rows (JobID|...), split into f (up to 8 fields) using row; count. */
static int find_row(const char *rows, uint64_t job, char *row, size_t cap, char **f)
{
    for (const char *p = rows; *p;) {
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        if (strtoull(p, NULL, 10) == job && p[strspn(p, "0123456789")] == '|' && l < cap) {
            memcpy(row, p, l);
            row[l] = '\0';
            return split(row, '|', f, 8);
        }
        p += l;
        if (*p)
            p++;
    }
    return 0;
}

static void done_poll(struct slurm_site *S, struct sreq *r)
{
    S->polling = false;
    if (r->step == 1) { /* sacct of the jobs squeue no longer knew */
        /* rows: JobID|State|Start|End|ExitCode (code:signal) */
        for (uint32_t i = 0; i < r->np; i++) {
            char row[1024], ex[24], *f[8] = {0};
            int nf = cmd_ok(r) ? find_row(otext(&r->out), r->pjob[i], row, sizeof row, f) : 0;
            if (nf >= 5) {
                f[1][strcspn(f[1], " ")] = '\0'; /* "CANCELLED by 0" */
                int code = atoi(f[4]), sig = strchr(f[4], ':') ? atoi(strchr(f[4], ':') + 1) : 0;
                snprintf(ex, sizeof ex, "%d", sig ? sig & 0x7f : (code & 0xff) << 8);
                char *g[7] = {f[0], f[1], f[2], f[3], ex, "None", ""};
                job_reply(S, r->prid[i], r->pjob[i], g, 7);
            } else {
                job_reply(S, r->prid[i], r->pjob[i], f, 0);
            }
        }
        req_free(S, r);
        return;
    }
    bool gone = !cmd_ok(r) && strstr(otext(&r->err), "Invalid job id");
    if (!cmd_ok(r) && !gone) {
        char b[600];
        why(S, r, b, sizeof b);
        log_debug("%s", b); /* unanswered: the spool's deadline */
        req_free(S, r);
        return;
    }
    /* rows: JobID|State|StartTime|EndTime|exit_code|Reason|NodeList| */
    uint32_t nmiss = 0;
    for (uint32_t i = 0; i < r->np; i++) {
        char row[1024], *f[8] = {0};
        int nf = gone ? 0 : find_row(otext(&r->out), r->pjob[i], row, sizeof row, f);
        if (nf < 7 && S->sacct) { /* kept for sacct */
            r->prid[nmiss] = r->prid[i];
            r->pjob[nmiss++] = r->pjob[i];
            continue;
        }
        job_reply(S, r->prid[i], r->pjob[i], f, nf);
    }
    r->np = nmiss;
    if (!nmiss) {
        req_free(S, r);
        return;
    }
    /* squeue forgets ended jobs after MinJobAge: accounting still knows them */
    r->step = 1;
    cmd(S, r, C_SACCT, false);
    arg(r, "--noheader");
    arg(r, "--parsable2");
    arg(r, "--allocations");
    arg(r, "--format=JobID,State,Start,End,ExitCode");
    char ids[POLL_MAX * 21 + 1];
    size_t k = 0;
    for (uint32_t i = 0; i < nmiss; i++)
        k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%" PRIu64, i ? "," : "", r->pjob[i]);
    arg(r, "--jobs=%s", ids);
}

static void done_config(struct slurm_site *S, struct sreq *r)
{
    const char *p = cmd_ok(r) ? strstr(otext(&r->out), "SchedulerParameters") : NULL;
    if (p) {
        char v[1024];
        const char *eq = strchr(p, '=');
        size_t l = eq ? strcspn(eq + 1, "\n") : 0;
        snprintf(v, sizeof v, "%.*s", (int)(l < sizeof v ? l : sizeof v - 1), eq ? eq + 1 : "");
        S->bf_window_min = slurm_bf_window_min(v + strspn(v, " "));
    }
    const char *a = cmd_ok(r) ? strstr(otext(&r->out), "AccountingStorageType") : NULL;
    if (a) {
        const char *eq = strchr(a, '=');
        a = eq ? eq + 1 + strspn(eq + 1, " ") : "";
        S->sacct = S->path[C_SACCT][0] && strncmp(a, "accounting_storage/none", 23) &&
                   strncmp(a, "(null)", 6) && *a != '\n';
    }
    log_info("slurm site %s: backfill window %ld min, accounting %s", S->site, S->bf_window_min,
             S->sacct ? "yes (sacct for jobs squeue has forgotten)" : "no");
    req_free(S, r);
}

static void step_done(struct slurm_site *S, struct sreq *r)
{
    switch (r->type) {
    case T_CONFIG:
        done_config(S, r);
        break;
    case T_POLL:
        done_poll(S, r);
        break;
    case WT_SITE_INFO:
        done_site_info(S, r);
        break;
    case WT_ESTIMATE:
        done_estimate(S, r);
        break;
    case WT_RESERVE:
        done_reserve(S, r);
        break;
    case WT_SUBMIT:
    case WT_PSUBMIT:
        done_submit(S, r);
        break;
    case WT_RESV_LIST:
        done_resv_list(S, r);
        break;
    default:
        done_simple(S, r);
        break;
    }
}

/* ---- the loop's side ---- */

static bool earlier_same_key(struct slurm_site *S, struct sreq *r)
{
    for (struct sreq *q = S->reqs; q && q != r; q = q->next)
        if ((q->type == WT_SUBMIT || q->type == WT_PSUBMIT) && !strcmp(q->key, r->key))
            return true;
    return false;
}

static void pump(struct slurm_site *S)
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

void slurm_site_tick(struct slurm_site *S)
{
    if (!S)
        return;
    int64_t now = loop_now_ms();
    struct sreq *nx;
    for (struct sreq *r = S->reqs; r; r = nx) {
        nx = r->next;
        if (r->rep) { /* an answer made without a command */
            S->fn(S->arg, r->rep, r->replen);
            req_free(S, r);
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
            log_warnx("slurm site %s: %s killed after %ld ms", S->site, cmd_name[r->cmd],
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
    if (!S->polling && S->nw) {
        struct sreq *r = req_new(S, T_POLL, 0);
        uint32_t n = S->nw < POLL_MAX ? S->nw : POLL_MAX;
        if (r && (r->prid = malloc(n * sizeof *r->prid)) &&
            (r->pjob = malloc(n * sizeof *r->pjob))) {
            memcpy(r->prid, S->wrid, n * sizeof *r->prid);
            memcpy(r->pjob, S->wjob, n * sizeof *r->pjob);
            r->np = n;
            memmove(S->wrid, S->wrid + n, (S->nw - n) * sizeof *S->wrid);
            memmove(S->wjob, S->wjob + n, (S->nw - n) * sizeof *S->wjob);
            S->nw -= n;
            S->polling = true;
            cmd(S, r, C_SQUEUE, false);
            arg(r, "--noheader");
            arg(r, "--states=all");
            char ids[POLL_MAX * 21 + 1];
            size_t k = 0;
            for (uint32_t i = 0; i < n; i++)
                k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%" PRIu64, i ? "," : "",
                                      r->pjob[i]);
            arg(r, "--jobs=%s", ids);
            arg(r, "--Format=JobID:|,State:|,StartTime:|,EndTime:|,exit_code:|,Reason:|,"
                   "NodeList:|");
        } else if (r) {
            req_free(S, r);
        }
    }
    pump(S);
}

static void ready(struct slurm_site *S, uint64_t rid, struct wire_buf *wb)
{
    struct sreq *r = req_new(S, 0, rid);
    if (r && (r->rep = malloc(wb->sb.size))) {
        memcpy(r->rep, wb->sb.data, wb->sb.size);
        r->replen = wb->sb.size;
    } else if (r) {
        req_free(S, r);
    }
}

static void ready_err(struct slurm_site *S, uint64_t rid, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ready_err(struct slurm_site *S, uint64_t rid, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_error_msg(&wb, rid, code, "%s", msg);
    ready(S, rid, &wb);
    wire_buf_free(&wb);
}

/* The job's command as one sh command line for --wrap: exec 'argv0' 'argv1' ..., or
 * with shell: exec /bin/sh -c 'argv0' sh 'argv1' ... (as 5.2 runs it). NULL when an
 * element is not text, holds a NUL byte, or the line would pass 64 KiB. */
static char *make_wrap(const msgpack_object *argv, bool shell)
{
    size_t cap = 70000;
    char *w = calloc(1, cap);
    if (!w)
        return NULL;
    snprintf(w, cap, "%s", shell ? "exec /bin/sh -c" : "exec");
    for (uint32_t i = 0; i < argv->via.array.size; i++) {
        const msgpack_object *o = &argv->via.array.ptr[i];
        size_t n = strlen(w);
        if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size) ||
            n + 5 > cap) {
            free(w);
            return NULL;
        }
        w[n] = ' ';
        w[n + 1] = '\0';
        if (!slurm_shquote(w, cap, o->via.str.ptr, o->via.str.size)) {
            free(w);
            return NULL;
        }
        if (shell && i == 0 && argv->via.array.size > 1)
            strcat(w, " sh"); /* $0 of sh -c, then the arguments */
    }
    return w;
}

static void on_kick(struct loop *l, void *arg)
{
    (void)l;
    struct slurm_site *S = arg;
    S->kick = 0;
    slurm_site_tick(S);
}

void slurm_site_request(struct slurm_site *S, const void *data, size_t len)
{
    /* not started here: this runs while the spool sends its turn's messages, and a reply
     * (even an error) must not come back into the spool before that is over */
    if (!S->kick)
        S->kick = loop_timer(S->loop, 0, 0, on_kick, S);
    if (S->kick < 0)
        S->kick = 0;
    struct wire_msg m;
    struct wire_error we;
    if (wire_decode(data, len, true, &m, &we) < 0) {
        ready_err(S, we.id, we.code, "%s", we.text);
        return;
    }
    const msgpack_object *o = m.root;
    uint64_t rid = m.id;
    if (m.type == WT_JOB_GET) {
        if (S->nw == S->capw) {
            uint32_t nc = S->capw ? S->capw * 2 : 64;
            uint64_t *a = realloc(S->wrid, nc * sizeof *a),
                     *b = a ? realloc(S->wjob, nc * sizeof *b) : NULL;
            if (a)
                S->wrid = a;
            if (b) {
                S->wjob = b;
                S->capw = nc;
            }
        }
        if (S->nw < S->capw) {
            S->wrid[S->nw] = rid;
            S->wjob[S->nw++] = wire_get_u64(o, "job", 0);
        }
        wire_msg_free(&m);
        return;
    }
    struct sreq *r = NULL;
    switch (m.type) {
    case WT_SITE_INFO:
        if ((r = req_new(S, m.type, rid))) {
            cmd(S, r, C_SINFO, false);
            arg(r, "--noheader");
            arg(r, "--format=%%P|%%a|%%C|%%F");
        }
        break;
    case WT_ESTIMATE:
        if (wire_get(o, "job")) {
            ready_err(S, rid, WE_INVALID,
                      "slurm site %s estimates requests (procs, walltime_s), not jobs", S->site);
            break;
        }
        if ((r = req_new(S, m.type, rid))) {
            r->procs = wire_get_u64(o, "procs", 1);
            r->walltime_s = wire_get_u64(o, "walltime_s", 3600);
            r->mem_mb = wire_get_u64(o, "mem_mb", 0);
            cmd(S, r, C_SBATCH, false);
            arg(r, "--test-only");
            common_job_args(S, r);
            arg(r, "--job-name=gridnode-estimate");
            arg(r, "--output=/dev/null");
            arg(r, "--wrap=true");
        }
        break;
    case WT_RESERVE: {
        char name[64];
        wire_get_strbuf(o, "name", name, sizeof name);
        if (!name[0] || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789-_.") != strlen(name)) {
            ready_err(S, rid, WE_INVALID,
                      "slurm site %s: a reservation needs a name of letters, digits, - _ .",
                      S->site);
            break;
        }
        if (!(r = req_new(S, m.type, rid)))
            break;
        snprintf(r->name, sizeof r->name, "%s", name);
        r->procs = wire_get_u64(o, "procs", 1);
        int64_t now = wall_now_ms(), st = wire_get_i64(o, "start", 0);
        uint64_t dur = wire_get_u64(o, "duration_s", 3600);
        cmd(S, r, C_SCONTROL, true);
        arg(r, "create");
        arg(r, "reservation");
        arg(r, "ReservationName=%s", name);
        if (st <= now + 1000) {
            arg(r, "StartTime=now");
            st = now;
        } else {
            /* Slurm's times are seconds and a job ending at T holds its cores during T */
            st = (st + 999) / 1000 * 1000 + 1000;
            char t[32];
            fmt_time(st, t, sizeof t);
            arg(r, "StartTime=%s", t);
        }
        /* whole minutes: the job's limit (rounded up to minutes) fits in it */
        uint64_t min = (dur + 59) / 60;
        arg(r, "Duration=%" PRIu64, min ? min : 1);
        r->i1 = st;
        r->i2 = st + (int64_t)(min ? min : 1) * 60000;
        arg(r, "Users=%s", S->c.user);
        if (S->c.partition[0])
            arg(r, "PartitionName=%s", S->c.partition);
        arg(r, "CoreCnt=%" PRIu64, r->procs ? r->procs : 1);
        /* FLEX: the job may start before the reservation when cores are free sooner;
         * PURGE_COMP: Slurm drops it once its job is done, should the spool not */
        arg(r, "Flags=FLEX,PURGE_COMP");
        break;
    }
    case WT_SUBMIT:
    case WT_PSUBMIT: {
        const msgpack_object *av = wire_get(o, "argv");
        if (m.type == WT_SUBMIT && wire_get_u64(o, "ntasks", 1) != 1) {
            ready_err(S, rid, WE_INVALID, "slurm site %s runs one task per job (ntasks = 1)",
                      S->site);
            break;
        }
        if (wire_get(o, "stdin") || wire_get(o, "hosts")) {
            ready_err(S, rid, WE_INVALID, "slurm site %s takes no stdin or hosts", S->site);
            break;
        }
        char *w = av && av->type == MSGPACK_OBJECT_ARRAY && av->via.array.size
                      ? make_wrap(av, wire_get_bool(o, "shell", false))
                      : NULL;
        if (!w) {
            ready_err(S, rid, WE_INVALID,
                      "slurm site %s: argv is empty, has NUL bytes or is too long", S->site);
            break;
        }
        if (!(r = req_new(S, m.type, rid))) {
            free(w);
            break;
        }
        r->wrap = w;
        r->parallel = m.type == WT_PSUBMIT;
        r->procs = r->parallel ? wire_get_u64(o, "procs", 1) : 1;
        r->walltime_s = wire_get_u64(o, "limit_s", 3600);
        r->mem_mb = wire_get_u64(o, "mem_mb", 0);
        wire_get_strbuf(o, "key", r->key, sizeof r->key);
        wire_get_strbuf(o, "resv", r->resv, sizeof r->resv);
        wire_get_strbuf(o, "user", r->user, sizeof r->user);
        wire_get_strbuf(o, "name", r->name, sizeof r->name);
        for (char *c = r->user; *c; c++)
            if (*c < ' ')
                *c = ' ';
        for (char *c = r->name; *c; c++)
            if (*c < ' ')
                *c = ' ';
        if (r->key[0]) {
            /* the key names the job at Slurm: a resent submission finds it */
            snprintf(r->jname, sizeof r->jname, "%s", r->key);
            for (char *c = r->jname; *c; c++)
                if (*c == ',' || *c <= ' ')
                    *c = '_';
            cmd(S, r, C_SQUEUE, false);
            arg(r, "--noheader");
            arg(r, "--states=all");
            arg(r, "--name=%s", r->jname);
            arg(r, "--format=%%i|%%T");
        } else {
            snprintf(r->jname, sizeof r->jname, "%s", r->name[0] ? r->name : "gridnode");
            for (char *c = r->jname; *c; c++)
                if (*c == ',' || *c <= ' ')
                    *c = '_';
            submit_cmd(S, r);
        }
        break;
    }
    case WT_CANCEL:
        if ((r = req_new(S, m.type, rid))) {
            cmd(S, r, C_SCANCEL, false);
            arg(r, "%" PRIu64, wire_get_u64(o, "job", 0));
        }
        break;
    case WT_RESV_RELEASE:
        if ((r = req_new(S, m.type, rid))) {
            char name[64];
            wire_get_strbuf(o, "name", name, sizeof name);
            cmd(S, r, C_SCONTROL, true);
            arg(r, "delete");
            arg(r, "ReservationName=%s", name);
        }
        break;
    case WT_RESV_LIST:
        if ((r = req_new(S, m.type, rid))) {
            wire_get_strbuf(o, "name", r->name, sizeof r->name);
            cmd(S, r, C_SCONTROL, true);
            arg(r, "--oneliner");
            arg(r, "show");
            arg(r, "reservation");
        }
        break;
    default:
        ready_err(S, rid, WE_TYPE, "slurm site %s does not answer %s", S->site,
                  m.desc ? m.desc->name : "this type");
        break;
    }
    wire_msg_free(&m);
}

/* ---- life ---- */

static bool find_cmd(const char *dirs, const char *name, char *out, size_t n)
{
    char list[4096];
    snprintf(list, sizeof list, "%s", dirs);
    for (char *save = NULL, *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, n, "%s/%s", d, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    out[0] = '\0';
    return false;
}

struct slurm_site *slurm_site_new(const struct slurm_conf *c, const char *site, const char *owner,
                                  struct loop *l, slurm_reply_fn fn, void *cbarg, char *err,
                                  size_t errlen)
{
    struct slurm_site *S = calloc(1, sizeof *S);
    if (!S) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    S->c = *c;
    snprintf(S->site, sizeof S->site, "%s", site);
    snprintf(S->owner, sizeof S->owner, "%s", owner);
    S->loop = l;
    S->fn = fn;
    S->arg = cbarg;
    S->bf_window_min = 1440;
    const char *path = getenv("PATH"), *dirs = c->bin[0] ? c->bin : path ? path : "/usr/bin:/bin";
    for (int i = 0; i < C_N; i++)
        if (!find_cmd(dirs, cmd_name[i], S->path[i], sizeof S->path[i]) && i != C_SACCT) {
            snprintf(err, errlen,
                     "slurm site %s: %s not found in %s (install slurm-client, or set bin=DIR)",
                     site, cmd_name[i], c->bin[0] ? c->bin : "PATH");
            free(S);
            return NULL;
        }
    /* the identity jobs run as */
    if (c->user[0]) {
        struct passwd *pw = getpwnam(c->user);
        if (!pw) {
            snprintf(err, errlen, "slurm site %s: no such user '%s'", site, c->user);
            free(S);
            return NULL;
        }
        if (pw->pw_uid != geteuid()) {
            if (geteuid() != 0) {
                snprintf(
                    err, errlen,
                    "slurm site %s: user=%s needs the spool to run as root (it runs as uid %u)",
                    site, c->user, (unsigned)geteuid());
                free(S);
                return NULL;
            }
            S->runas = true;
            S->uid = pw->pw_uid;
            S->gid = pw->pw_gid;
            S->ngroups = 64;
            if (getgrouplist(c->user, pw->pw_gid, S->groups, &S->ngroups) < 0)
                S->ngroups = 0;
        }
    } else {
        struct passwd *pw = getpwuid(geteuid());
        snprintf(S->c.user, sizeof S->c.user, "%s", pw ? pw->pw_name : "root");
    }
    /* the environment of every command: ours, with SLURM_CONF set */
    size_t ne = 0;
    while (environ && environ[ne])
        ne++;
    S->envp = calloc(ne + 2, sizeof *S->envp);
    size_t k = 0;
    for (size_t i = 0; S->envp && i < ne; i++)
        if (strncmp(environ[i], "SLURM_CONF=", 11) && strncmp(environ[i], "SLURM_CONFIG_DIR=", 17))
            S->envp[k++] = strdup(environ[i]);
    if (S->envp && c->conf[0] && asprintf(&S->envp[k], "SLURM_CONF=%s", c->conf) < 0)
        S->envp[k] = NULL;
    if (!S->envp) {
        snprintf(err, errlen, "out of memory");
        free(S);
        return NULL;
    }
    struct sreq *r = req_new(S, T_CONFIG, 0);
    if (r) {
        cmd(S, r, C_SCONTROL, true);
        arg(r, "show");
        arg(r, "config");
    }
    log_info("slurm site %s: SLURM_CONF=%s partition=%s jobs run as %s in %s", site,
             c->conf[0] ? c->conf : "(default)", c->partition[0] ? c->partition : "(default)",
             S->c.user, S->c.dir);
    return S;
}

void slurm_site_destroy(struct slurm_site **sp)
{
    struct slurm_site *S = sp ? *sp : NULL;
    if (!S)
        return;
    if (S->kick > 0)
        loop_timer_cancel(S->loop, S->kick);
    while (S->reqs) {
        struct sreq *r = S->reqs;
        if (r->pid > 0) {
            kill(-r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0); /* killed: returns at once */
        }
        req_free(S, r);
    }
    for (uint32_t i = 0; i < S->nreap; i++)
        waitpid(S->reap[i], NULL, 0);
    for (size_t i = 0; S->envp && S->envp[i]; i++)
        free(S->envp[i]);
    free(S->envp);
    free(S->reap);
    free(S->wrid);
    free(S->wjob);
    free(S);
    *sp = NULL;
}

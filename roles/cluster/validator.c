/*
 * validator.c - application validators (docs/validation.md "Validators"), run as child
 * processes outside the event loop.
 *
 * For a task to check, the cluster writes its pending candidates into a fresh
 * directory <state_dir>/validate/JOB.IDX (N.stdout, N.stderr, N.meta, and the list
 * "candidates"), and runs `/bin/sh -c VALIDATOR` there, with stdin from /dev/null,
 * stdout to a non-blocking pipe watched by the loop and stderr to the file "stderr".
 * The validator prints one line "N LABEL" per candidate: equal labels agree, the label
 * "invalid" rejects a candidate on its own. Exit status 0 means the verdict stands.
 * A crash, a non-zero exit, bad output or more than validation.validator_timeout_s
 * (the process group is killed) count as a failed run: the task is validated again a
 * second later, and failed with the reason after validation.validator_attempts runs.
 * At most validation.validator_max run at once; others wait their turn.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/fsutil.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/validate_int.h"

#define OUT_MAX 65536
#define RUNS_MAX 64

struct vrun {
    struct cluster *c;
    bool used, eof, exited;
    pid_t pid;
    int fd, status;
    uint64_t job;
    uint32_t idx;
    int64_t deadline_ms;
    char out[OUT_MAX + 1];
    size_t nout;
    char dir[512];
};

bool validator_busy(const struct cluster *c)
{
    return c->vs && c->vs->nruns > 0;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    if (!d)
        return;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return close(fd);
}

/* Writes the pending candidates of the task into r->dir. */
static int write_inputs(struct cluster *c, struct job *j, struct vtask *vt, struct vrun *r)
{
    char list[VALID_MAX_RESULTS * 256 * 12 + 16], name[64], meta[512];
    size_t ll = 0;
    list[0] = '\0';
    for (uint32_t k = 0; k < vt->ncand; k++) {
        struct vcand *cd = &vt->cand[k];
        msgpack_unpacked up;
        size_t off = 0, n = 0;
        if (cd->status != VC_PENDING || !cd->rec)
            continue;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, cd->rec, cd->len, &off) != MSGPACK_UNPACK_SUCCESS) {
            msgpack_unpacked_destroy(&up);
            continue;
        }
        const msgpack_object *m = &up.data;
        const void *out = wire_get_bin(m, "stdout", &n);
        snprintf(name, sizeof name, "%u.stdout", cd->seq);
        int rc = write_file(r->dir, name, out ? out : "", out ? n : 0);
        out = wire_get_bin(m, "stderr", &n);
        snprintf(name, sizeof name, "%u.stderr", cd->seq);
        rc |= write_file(r->dir, name, out ? out : "", out ? n : 0);
        const struct node *nd = cd->node < c->nnodes ? &c->nodes[cd->node] : NULL;
        int ml =
            snprintf(meta, sizeof meta, "exit=%lld\nsignal=%llu\ntimeout=%d\nnode=%s\nhost=%s\n",
                     (long long)wire_get_i64(m, "exit", -1),
                     (unsigned long long)wire_get_u64(m, "signal", 0),
                     wire_get_bool(m, "timeout", false), nd ? nd->sid : "", nd ? nd->name : "");
        snprintf(name, sizeof name, "%u.meta", cd->seq);
        rc |= write_file(r->dir, name, meta, (size_t)ml < sizeof meta ? (size_t)ml : 0);
        msgpack_unpacked_destroy(&up);
        if (rc < 0)
            return -1;
        ll += (size_t)snprintf(list + ll, sizeof list - ll, "%u\n", cd->seq);
        if (ll >= sizeof list)
            return -1;
    }
    (void)j;
    return write_file(r->dir, "candidates", list, ll);
}

static void run_done(struct vrun *r, const char *killed);

static void on_output(struct loop *l, void *arg)
{
    struct vrun *r = arg;
    (void)l;
    for (;;) {
        char buf[4096];
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            r->eof = true;
            loop_remove_fd(r->c->loop, r->fd);
            close(r->fd);
            r->fd = -1;
            int st;
            if (waitpid(r->pid, &st, WNOHANG) == r->pid) { /* usual: done at once */
                r->status = st;
                run_done(r, NULL);
            }
            return;
        }
        size_t room = OUT_MAX - r->nout, take = (size_t)n < room ? (size_t)n : room;
        memcpy(r->out + r->nout, buf, take);
        r->nout += take;
    }
}

/* Parses "N LABEL" lines into the candidates' classes; NULL, or what was wrong. */
static const char *apply_labels(struct cluster *c, struct vtask *vt, struct vrun *r, char *why,
                                size_t wl)
{
    r->out[r->nout] = '\0';
    bool seen[256] = {0};
    for (char *save = NULL, *line = strtok_r(r->out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char label[256];
        unsigned seq;
        if (sscanf(line, "%u %255s", &seq, label) != 2)
            continue;
        for (uint32_t k = 0; k < vt->ncand; k++)
            if (vt->cand[k].seq == seq && vt->cand[k].status == VC_PENDING) {
                vt->cand[k].cls =
                    strcmp(label, "invalid") ? valid_hash(c->vs, label, strlen(label), 0x5a) : 0;
                seen[k] = true;
            }
    }
    for (uint32_t k = 0; k < vt->ncand; k++)
        if (vt->cand[k].status == VC_PENDING && vt->cand[k].rec && !seen[k]) {
            snprintf(why, wl, "its output named no verdict for result %u", vt->cand[k].seq);
            return why;
        }
    return NULL;
}

/* The run ended (exited, or killed at its timeout): apply its verdict or count a failure. */
static void run_done(struct vrun *r, const char *killed)
{
    struct cluster *c = r->c;
    struct job *j = cluster_job_find(c, r->job);
    struct vtask *vt = j && j->state == JS_RUNNING ? valid_vt(j, r->idx) : NULL;
    char why[300];
    const char *fail = killed;
    c->vs->validator_runs++;
    if (!fail && WIFSIGNALED(r->status)) {
        snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(r->status));
        fail = why;
    } else if (!fail && WEXITSTATUS(r->status) != 0) {
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(r->status));
        fail = why;
    } else if (!fail && r->nout >= OUT_MAX) {
        fail = "more than 64 KiB of output";
    }
    if (vt && vt->state == VT_VALIDATING) {
        vt->state = VT_OPEN;
        if (!fail)
            fail = apply_labels(c, vt, r, why, sizeof why);
        if (fail) {
            c->vs->validator_failures++;
            vt->vruns++;
            free(vt->fail_why);
            vt->fail_why = strdup(fail);
            log_warnx("job %llu task %u: validator failed (%s), run %u of %ld",
                      (unsigned long long)r->job, r->idx, fail, vt->vruns,
                      c->cfg.v_validator_attempts);
            if (vt->vruns >= c->cfg.v_validator_attempts) {
                if (valid_fail_task(c, j, r->idx, VW_VALIDATOR) < 0)
                    c->turn_failed = true;
            } else {
                valid_resume_add(c, r->job, r->idx);
                cluster_task_save(c, j, r->idx);
            }
        } else if (valid_evaluate(c, j, r->idx) < 0) {
            c->turn_failed = true;
        }
    }
    rm_dir(r->dir);
    r->used = false;
    c->vs->nruns--;
}

int validator_start(struct cluster *c, struct job *j, uint32_t idx)
{
    struct vstate *vs = c->vs;
    struct vtask *vt = valid_vt(j, idx);
    struct vrun *r = NULL;
    int p[2] = {-1, -1};
    if (!vs->runs && !(vs->runs = calloc(RUNS_MAX, sizeof *vs->runs)))
        return -1;
    long max = c->cfg.v_validator_max < RUNS_MAX ? c->cfg.v_validator_max : RUNS_MAX;
    for (long i = 0; i < max && !r; i++)
        if (!vs->runs[i].used)
            r = &vs->runs[i];
    if (!r || !c->loop) { /* every slot busy (or not serving yet): a second later */
        valid_resume_add(c, j->id, idx);
        return cluster_task_save(c, j, idx);
    }
    memset(r, 0, sizeof *r);
    r->c = c;
    r->fd = -1;
    r->job = j->id;
    r->idx = idx;
    snprintf(r->dir, sizeof r->dir, "%s/validate", c->cfg.state_dir);
    mkdir(r->dir, 0700);
    snprintf(r->dir, sizeof r->dir, "%s/validate/%llu.%u", c->cfg.state_dir,
             (unsigned long long)j->id, idx);
    rm_dir(r->dir);
    if (mkdir(r->dir, 0700) < 0 || write_inputs(c, j, vt, r) < 0 || pipe2(p, O_CLOEXEC) < 0)
        goto fail;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    /* everything the child needs is made before fork: the cluster has threads (libzmq),
       so the child may only make async-signal-safe calls until exec */
    char errp[600], jb[48], ib[48], db[600];
    snprintf(errp, sizeof errp, "%s/stderr", r->dir);
    snprintf(jb, sizeof jb, "GRIDNODE_JOB=%llu", (unsigned long long)j->id);
    snprintf(ib, sizeof ib, "GRIDNODE_TASK=%u", idx);
    snprintf(db, sizeof db, "GRIDNODE_VALIDATE_DIR=%s", r->dir);
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = calloc(ne + 4, sizeof *envp);
    if (!envp)
        goto fail;
    memcpy(envp, environ, ne * sizeof *envp);
    envp[ne] = jb;
    envp[ne + 1] = ib;
    envp[ne + 2] = db;
    char *const args[] = {"sh", "-c", j->v->validator, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDONLY), er = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || er < 0 || dup2(in, 0) < 0 || dup2(p[1], 1) < 0 || dup2(er, 2) < 0 ||
            chdir(r->dir) < 0)
            _exit(126);
        execve("/bin/sh", args, envp);
        _exit(127);
    }
    free(envp);
    if (pid < 0)
        goto fail;
    close(p[1]);
    r->pid = pid;
    r->fd = p[0];
    r->used = true;
    r->deadline_ms = loop_now_ms() + c->cfg.v_validator_timeout_s * 1000;
    if (loop_add_fd(c->loop, r->fd, on_output, r) < 0) {
        kill(-pid, SIGKILL);
        close(r->fd);
        r->fd = -1;
        r->eof = true; /* reaped by the tick, then counted as failed */
    }
    vs->nruns++;
    vt->state = VT_VALIDATING;
    return cluster_task_save(c, j, idx);
fail:
    log_warn("job %llu task %u: cannot start the validator in %s", (unsigned long long)j->id, idx,
             r->dir);
    if (p[0] >= 0) {
        close(p[0]);
        close(p[1]);
    }
    rm_dir(r->dir);
    vt->vruns++;
    if (vt->vruns >= c->cfg.v_validator_attempts) {
        free(vt->fail_why);
        vt->fail_why = strdup("it could not be started");
        return valid_fail_task(c, j, idx, VW_VALIDATOR);
    }
    valid_resume_add(c, j->id, idx);
    return cluster_task_save(c, j, idx);
}

void validator_tick(struct cluster *c)
{
    struct vstate *vs = c->vs;
    int64_t now = loop_now_ms();
    for (uint32_t i = 0; vs->runs && i < RUNS_MAX; i++) {
        struct vrun *r = &vs->runs[i];
        if (!r->used)
            continue;
        if (r->fd >= 0)
            on_output(c->loop, r); /* drain what is there */
        if (!r->used)
            continue; /* it ended while draining */
        int st;
        pid_t w = waitpid(r->pid, &st, WNOHANG);
        if (w == r->pid) {
            r->status = st;
            if (r->fd >= 0) { /* exited with the pipe held open by a grandchild */
                loop_remove_fd(c->loop, r->fd);
                close(r->fd);
                r->fd = -1;
                kill(-r->pid, SIGKILL);
            }
            run_done(r, NULL);
        } else if (now > r->deadline_ms) {
            char why[100];
            snprintf(why, sizeof why, "no verdict within %ld s: killed",
                     c->cfg.v_validator_timeout_s);
            kill(-r->pid, SIGKILL);
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &st, 0); /* SIGKILL: immediate */
            if (r->fd >= 0) {
                loop_remove_fd(c->loop, r->fd);
                close(r->fd);
                r->fd = -1;
            }
            run_done(r, why);
        }
    }
}

void validator_free_all(struct cluster *c)
{
    struct vstate *vs = c->vs;
    for (uint32_t i = 0; vs->runs && i < RUNS_MAX; i++) {
        struct vrun *r = &vs->runs[i];
        if (!r->used)
            continue;
        kill(-r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        if (r->fd >= 0) {
            if (c->loop)
                loop_remove_fd(c->loop, r->fd);
            close(r->fd);
        }
        rm_dir(r->dir);
    }
    free(vs->runs);
    vs->runs = NULL;
    vs->nruns = 0;
}

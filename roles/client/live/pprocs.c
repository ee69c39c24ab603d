/* pprocs.c - parallel processes of a node (see pprocs.h). */
#include "roles/client/live/pprocs.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "roles/client/live/ckpt.h"
#include "roles/client/live/sandbox.h"

static void strv_free(char **v);

/* ---- measuring ---- */

/*
 * For every live process of pp (its own process group): the sum over the group's
 * processes of user + system CPU time, including that of reaped children (cutime,
 * cstime), and of resident memory, read from /proc/PID/stat in ONE pass over /proc
 * for all of them (a pass per process made each PSYNC cost processes x /proc entries).
 */
static void measure_groups(struct pprocs *pp)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    double *ticks = calloc(pp->n + 1, sizeof *ticks);
    uint64_t *pages = calloc(pp->n + 1, sizeof *pages);
    while (d && ticks && pages && (e = readdir(d))) {
        char path[300], buf[1024];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        int pgrp;
        unsigned long ut, st;
        long cut, cst, rss;
        /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime cutime cstime priority nice threads itreal start vsize rss */
        if (!p || sscanf(p + 2,
                         "%*c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld "
                         "%*d %*d %*d %*d %*u %*u %ld",
                         &pgrp, &ut, &st, &cut, &cst, &rss) != 6)
            continue;
        for (uint32_t i = 0; i < pp->n; i++)
            if (!pp->p[i]->exited && pp->p[i]->run.pid == pgrp) {
                ticks[i] += (double)ut + (double)st + (double)cut + (double)cst;
                pages[i] += rss > 0 ? (uint64_t)rss : 0;
                break;
            }
    }
    if (d)
        closedir(d);
    for (uint32_t i = 0; ticks && pages && i < pp->n; i++) {
        struct pproc *q = pp->p[i];
        if (q->exited || q->run.pid <= 0)
            continue;
        q->cpu_s = tck > 0 ? ticks[i] / (double)tck : 0;
        q->rss_kb = pages[i] * (uint64_t)page / 1024;
    }
    free(ticks);
    free(pages);
}

static uint64_t du_kb;
static int du_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path, (void)flag, (void)ftw;
    du_kb += (uint64_t)st->st_blocks * 512 / 1024;
    return 0;
}

/* Disk used by a directory tree, in KiB (allocated blocks). */
static uint64_t dir_usage_kb(const char *dir)
{
    du_kb = 0;
    nftw(dir, du_one, 16, FTW_PHYS);
    return du_kb;
}

uint64_t pprocs_free_disk_mb(const struct pprocs *pp)
{
    dev_t seen[9];
    uint32_t nseen = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i <= pp->nwatch; i++) {
        const char *dir = i == 0 ? pp->state_dir : pp->watchfs[i - 1];
        struct stat st;
        struct statvfs vfs;
        if (stat(dir, &st) < 0 || statvfs(dir, &vfs) < 0)
            continue;
        bool dup = false;
        for (uint32_t k = 0; k < nseen; k++)
            dup |= seen[k] == st.st_dev;
        if (dup)
            continue;
        seen[nseen++] = st.st_dev;
        total += (uint64_t)vfs.f_bavail * vfs.f_frsize >> 20;
    }
    return total;
}

/* ---- the table ---- */

static struct pproc *find(struct pprocs *pp, uint64_t job, uint32_t rank)
{
    for (uint32_t i = 0; i < pp->n; i++)
        if (pp->p[i]->job == job && pp->p[i]->rank == rank)
            return pp->p[i];
    return NULL;
}

static void kill_proc(struct pproc *p)
{
    if (p->exited || p->run.pid <= 0)
        return;
    kill(-p->run.pid, SIGCONT); /* a stopped group must run to die cleanly */
    kill(-p->run.pid, SIGKILL);
    p->stopped = false;
}

/* ---- spare working directories ----
 *
 * Each process gets a fresh working directory with its stdout and stderr files. On a
 * busy node, creating and deleting those three inodes per process was the largest
 * cost of a short job (ext4 inode allocation scanning recently deleted inodes: about
 * half of the node's CPU at 500 jobs/s). So the directory of an exited process is
 * emptied (but for its two output files, truncated when the next process opens them)
 * and kept as a spare, renamed into place for the next process. This opens no new
 * path between jobs: every job of a node runs as the node's user, so one left running
 * in the background could already read or write the next one's files; the output
 * files are kept only when they are plain files with a single link (a job cannot make
 * the next start truncate another file through them). */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void spare_path(const struct pprocs *pp, uint32_t seq, char *buf, size_t len)
{
    snprintf(buf, len, "%s/spare/s%u", pp->workroot, seq);
}

/* True if dir/name is a regular file with no other link (truncating it can only
 * truncate it: not a symlink or hard link a job made to a file of ours). */
static bool own_file(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
           chmod(path, 0600) == 0;
}

/* Empties dir but for stdout and stderr when they are own_file. 0 or -1. */
static int spare_clean(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = d && chmod(dir, 0700) == 0 ? 0 : -1;
    while (d && rc == 0 && (e = readdir(d))) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") ||
            ((!strcmp(n, "stdout") || !strcmp(n, "stderr")) && own_file(dir, n)))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
            rc = -1;
    }
    if (d)
        closedir(d);
    return rc;
}

/* Keeps the working directory of exited process p as a spare. true if it did. */
static bool spare_put(struct pprocs *pp, struct pproc *p)
{
    char sp[700];
    if (!p->exited || !p->run.workdir[0] || pp->nspare == PPROCS_SPARE_MAX)
        return false;
    if (!pp->spare_ready) { /* spares of an earlier run of this node are gone */
        spare_path(pp, 0, sp, sizeof sp);
        *strrchr(sp, '/') = '\0';
        nftw(sp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        mkdir(pp->workroot, 0700);
        if (mkdir(sp, 0700) < 0)
            return false;
        pp->spare_ready = true;
    }
    spare_path(pp, pp->spare_seq, sp, sizeof sp);
    if (spare_clean(p->run.workdir) < 0 || rename(p->run.workdir, sp) < 0)
        return false;
    pp->spare[pp->nspare++] = pp->spare_seq++;
    p->run.workdir[0] = '\0'; /* runner_cleanup: nothing to remove */
    return true;
}

/* Moves a spare directory to wd. true if wd is now a prepared working directory. */
static bool spare_take(struct pprocs *pp, const char *wd)
{
    char sp[700];
    while (pp->nspare > 0) {
        spare_path(pp, pp->spare[--pp->nspare], sp, sizeof sp);
        if (rename(sp, wd) == 0)
            return true;
        if (errno == ENOTEMPTY || errno == EEXIST) { /* a stale wd: as runner_spawn would */
            nftw(wd, rm_one, 16, FTW_DEPTH | FTW_PHYS);
            if (rename(sp, wd) == 0)
                return true;
        }
        nftw(sp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    return false;
}

static void forget(struct pprocs *pp, uint32_t i)
{
    struct pproc *p = pp->p[i];
    kill_proc(p);
    spare_put(pp, p);
    runner_cleanup(&p->run);
    stage_files_free(&p->files);
    strv_free(p->av);
    strv_free(p->env);
    free(p->cwd);
    free(p);
    pp->p[i] = pp->p[--pp->n];
}

static int add(struct pprocs *pp, struct pproc *p)
{
    if (pp->n == pp->cap) {
        uint32_t cap = pp->cap ? pp->cap * 2 : 8;
        struct pproc **n = realloc(pp->p, cap * sizeof *n);
        if (!n)
            return -1;
        pp->p = n;
        pp->cap = cap;
    }
    pp->p[pp->n++] = p;
    return 0;
}

/* Copies a msgpack array of str into a NULL-terminated malloc'd vector. */
static char **strv(const msgpack_object *a)
{
    uint32_t n = a && a->type == MSGPACK_OBJECT_ARRAY ? a->via.array.size : 0;
    char **v = calloc(n + 1, sizeof *v);
    for (uint32_t i = 0; v && i < n; i++)
        if (a->via.array.ptr[i].type != MSGPACK_OBJECT_STR ||
            !(v[i] = strndup(a->via.array.ptr[i].via.str.ptr, a->via.array.ptr[i].via.str.size)))
            return v; /* truncated vector: still NULL-terminated */
    return v;
}

static void strv_free(char **v)
{
    for (uint32_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Spawns p from its kept spec in wd (prepared: made and holding its inputs, or a
 * spare), then drops the spec. */
static void spawn(struct pprocs *pp, struct pproc *p, const char *wd, bool prepared)
{
    if (runner_spawn_job(&p->run, p->av, p->shell, p->env, wd, prepared, p->cwd, pp, p->job,
                         p->mem_mb, p->network) < 0) {
        log_warnx("parallel job %llu process %u: %s", (unsigned long long)p->job, p->rank,
                  p->run.error);
        if (p->run.pid < 0)
            p->exited = true; /* nothing to reap */
    } else {
        log_info("parallel job %llu process %u started: pid %d", (unsigned long long)p->job,
                 p->rank, (int)p->run.pid);
    }
    strv_free(p->av);
    strv_free(p->env);
    free(p->cwd);
    p->av = p->env = NULL;
    p->cwd = NULL;
}

static void wd_path(const struct pprocs *pp, const struct pproc *p, char *wd, size_t n)
{
    snprintf(wd, n, "%s/p%llu.%u", pp->workroot, (unsigned long long)p->job, p->rank);
}

void pprocs_fail(struct pprocs *pp, struct pproc *p, const char *why)
{
    snprintf(p->run.error, sizeof p->run.error, "%.250s", why);
    log_warnx("parallel job %llu process %u: %s", (unsigned long long)p->job, p->rank, why);
    p->waiting = false;
    p->exited = true;
    p->stopped = false;
    pp->changes++;
}

/*
 * Issue 26 (docs/data.md "Checkpoints of parallel jobs"): a rank of a job with
 * --checkpoint-s gets its own checkpoint directory in wd, holding its files of the job's
 * complete generation when the cluster sent them (copies from the cache), named by
 * GRIDNODE_CHECKPOINT_DIR in its environment. 0, or -1 with why in err.
 */
static int ckpt_rank(struct pprocs *pp, struct pproc *p, const char *wd, char *err, size_t n)
{
    char abs[PATH_MAX], var[PATH_MAX + 64];
    uint32_t k = 0;
    if (!p->files || !p->files->ck_par)
        return 0;
    if (ckpt_place(pp->state_dir, pp->cache, p->files, wd, p->job, p->rank, false, err, n) < 0)
        return -1;
    snprintf(var, sizeof var, "GRIDNODE_CHECKPOINT_DIR=%s/" CKPT_DIRNAME,
             realpath(wd, abs) ? abs : wd);
    while (p->env && p->env[k])
        k++;
    char **v = realloc(p->env, (k + 2) * sizeof *v);
    if (!v || !(v[k] = strdup(var))) {
        if (v)
            p->env = v, v[k] = NULL;
        snprintf(err, n, "out of memory on the node");
        return -1;
    }
    v[k + 1] = NULL;
    p->env = v;
    if (p->files->nck)
        log_info("parallel job %llu process %u: starts from checkpoint generation %lld (%u "
                 "file(s))",
                 (unsigned long long)p->job, p->rank, (long long)p->files->ck_gen, p->files->nck);
    return 0;
}

void pprocs_launch(struct pprocs *pp, struct pproc *p)
{
    char wd[700], err[300];
    wd_path(pp, p, wd, sizeof wd);
    p->waiting = false;
    pp->changes++;
    if (!spare_take(pp, wd)) {
        nftw(wd, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if (mkdir(wd, 0700) < 0) {
            snprintf(err, sizeof err, "cannot prepare working directory %.200s: %.60s", wd,
                     strerror(errno));
            pprocs_fail(pp, p, err);
            return;
        }
    }
    if (!pp->cache ||
        stage_place(pp->cache, p->files, wd, sandbox_slot_uids(), err, sizeof err) < 0 ||
        ckpt_rank(pp, p, wd, err, sizeof err) < 0) {
        snprintf(p->run.workdir, sizeof p->run.workdir, "%.500s", wd); /* removed when forgotten */
        pprocs_fail(pp, p, pp->cache ? err : "this node keeps no file cache");
        return;
    }
    spawn(pp, p, wd, true);
}

static void start(struct pprocs *pp, const msgpack_object *cmd, uint64_t job, uint32_t rank)
{
    const msgpack_object *argv = wire_get(cmd, "argv");
    if (!argv || argv->via.array.size == 0)
        return; /* no spec: the cluster sends one when we do not hold the process */
    struct pproc *p = calloc(1, sizeof *p);
    char bad[300] = "", wd[700];
    if (!p || add(pp, p) < 0) {
        free(p);
        return;
    }
    p->job = job;
    p->rank = rank;
    p->run.pid = -1;
    p->run.out.fd = p->run.err.fd = -1;
    p->av = strv(argv);
    p->env = strv(wire_get(cmd, "env"));
    p->cwd = wire_get_strdup(cmd, "chdir"); /* --chdir (issue 15) */
    p->shell = wire_get_bool(cmd, "shell", false);
    p->network = wire_get_bool(cmd, "network", true);
    p->mem_mb = wire_get_u64(cmd, "mem_mb", 0);
    if (!p->av || !p->env || (wire_get(cmd, "chdir") && !p->cwd) ||
        stage_files_take(&p->files, cmd, bad, sizeof bad) < 0) {
        pprocs_fail(pp, p, "out of memory on the node");
        return;
    }
    if (bad[0]) { /* a name that escapes, a hash that is not one */
        pprocs_fail(pp, p, bad);
        return;
    }
    /* issue 26: started once its inputs (and checkpoint) are here, its directory made */
    if (p->files && (p->files->nin || p->files->nck || p->files->ck_par)) {
        p->waiting = true;
        log_info("parallel job %llu process %u: waiting for %u input file(s)",
                 (unsigned long long)job, rank, p->files->nin + p->files->nck);
        return;
    }
    wd_path(pp, p, wd, sizeof wd);
    spawn(pp, p, wd, spare_take(pp, wd));
}

/* The state letter of /proc/PID/stat ('R', 'S', 'T', ...), or 0 if it is gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/*
 * SIGSTOP takes effect only when the target next runs, which on a busy host can be
 * milliseconds later. Waits (at most STOP_WAIT_MS in all) until every group leader
 * stopped in this reply is really stopped, so that a job continued next never runs
 * beside the one it replaces.
 */
#define STOP_WAIT_MS 200
static void wait_stopped(struct pprocs *pp)
{
    struct timespec ts = {0, 1000000};
    for (int waited = 0; waited < STOP_WAIT_MS; waited++) {
        bool all = true;
        for (uint32_t i = 0; i < pp->n && all; i++) {
            struct pproc *p = pp->p[i];
            char st = p->stopped && !p->exited ? proc_state(p->run.pid) : 'T';
            all = st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == 0;
        }
        if (all)
            return;
        nanosleep(&ts, NULL);
    }
}

void pprocs_apply(struct pprocs *pp, const msgpack_object *ack)
{
    const msgpack_object *cmds = wire_get(ack, "procs"), *wf = wire_get(ack, "watchfs");
    bool *listed = calloc(pp->n + 1, 1);
    uint32_t before = pp->n;
    pp->nwatch = 0;
    for (uint32_t i = 0; wf && i < wf->via.array.size && i < 8; i++)
        snprintf(pp->watchfs[pp->nwatch++], sizeof pp->watchfs[0], "%.*s",
                 (int)wf->via.array.ptr[i].via.str.size, wf->via.array.ptr[i].via.str.ptr);
    /* two passes: every stop and kill before any run, so that at a gang switch the
     * outgoing job is stopped on this host before the incoming one continues */
    bool stopped_some = false;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && stopped_some)
            wait_stopped(pp);
        for (uint32_t i = 0; cmds && i < cmds->via.array.size; i++) {
            const msgpack_object *m = &cmds->via.array.ptr[i];
            uint64_t job = wire_get_u64(m, "job", 0);
            uint32_t rank = (uint32_t)wire_get_u64(m, "rank", 0);
            size_t wl;
            const char *w = wire_get_str(m, "want", &wl);
            struct pproc *p = find(pp, job, rank);
            for (uint32_t k = 0; pass == 0 && p && listed && k < before; k++)
                if (pp->p[k] == p)
                    listed[k] = true;
            bool run = w && wl == 3 && !memcmp(w, "run", 3);
            if (!w || run != (pass == 1))
                continue;
            if (run) {
                if (!p) {
                    start(pp, m, job, rank);
                    pp->changes++;
                } else if (p->stopped && !p->exited) {
                    if (p->run.pid > 0) /* a waiting one has no process yet */
                        kill(-p->run.pid, SIGCONT);
                    p->stopped = false;
                    pp->changes++;
                }
            } else if (wl == 4 && !memcmp(w, "stop", 4)) {
                if (p && !p->stopped && !p->exited) {
                    if (p->run.pid > 0)
                        kill(-p->run.pid, SIGSTOP);
                    p->stopped = true;
                    stopped_some = true;
                    pp->changes++;
                }
            } else if (p && p->waiting) { /* never started: reported as such */
                pprocs_fail(pp, p, "killed before it started (its inputs were being fetched)");
            } else if (p) {
                pp->changes += !p->exited;
                kill_proc(p);
            }
        }
    }
    /* not listed: the cluster has recorded its exit, or no longer wants it */
    for (uint32_t k = before; k > 0; k--)
        if (listed && !listed[k - 1])
            forget(pp, k - 1);
    free(listed);
}

void pprocs_pack(struct pprocs *pp, struct wire_buf *wb)
{
    size_t sent = 0;     /* output bytes in this message so far */
    uint32_t nfiles = 0; /* and kept files named (issue 26) */
    /* PSYNCs go at every exit (long-poll): measure at most every PPROCS_MEASURE_MS and
     * report the last figures in between */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    bool measure = now - pp->measured_ms >= PPROCS_MEASURE_MS;
    if (measure) {
        pp->measured_ms = now;
        measure_groups(pp);
    }
    wire_put_key(wb, "procs");
    wire_pack_array(wb, pp->n);
    for (uint32_t i = 0; i < pp->n; i++) {
        struct pproc *p = pp->p[i];
        if (!p->exited && measure)
            p->disk_kb = dir_usage_kb(p->run.workdir);
        bool err = p->run.error[0] != '\0';
        size_t out = p->run.out.len + p->run.err.len;
        /* issue 26: the exit of one whose outputs are being uploaded waits for them */
        uint32_t nf = p->files && p->files->collected ? p->files->nout : 0;
        bool ex = p->exited && !p->uploading &&
                  ((sent == 0 && nfiles == 0) ||
                   (sent + out <= PPROCS_OUTPUT_MAX && nfiles + nf <= PPROCS_FILES_MAX));
        bool kept = ex && nf > 0;
        sent += ex ? out : 0;
        nfiles += ex ? nf : 0;
        wire_pack_map(wb, ex ? (err ? 13 : 12) + kept + (p->note[0] != '\0') : 6);
        wire_put_u64(wb, "job", p->job);
        wire_put_u64(wb, "rank", p->rank);
        wire_put_str(wb, "state", ex ? "exit" : p->stopped ? "stop" : "run");
        wire_put_f64(wb, "cpu_s", p->cpu_s);
        wire_put_u64(wb, "rss_kb", p->exited ? 0 : p->rss_kb);
        wire_put_u64(wb, "disk_kb", p->disk_kb);
        if (ex) {
            int st = p->run.status;
            wire_put_i64(wb, "exit", !err && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            wire_put_u64(wb, "signal", !err && WIFSIGNALED(st) ? (uint64_t)WTERMSIG(st) : 0);
            wire_put_bin(wb, "stdout", p->run.out.buf ? p->run.out.buf : "", p->run.out.len);
            wire_put_bin(wb, "stderr", p->run.err.buf ? p->run.err.buf : "", p->run.err.len);
            wire_put_bool(wb, "out_trunc", p->run.out.trunc);
            wire_put_bool(wb, "err_trunc", p->run.err.trunc);
            if (err)
                wire_put_str(wb, "error", p->run.error);
            if (kept) /* the outputs its process kept, as a result's (uploaded by now) */
                stage_pack_files(wb, "files", p->files->out, p->files->nout);
            if (p->note[0])
                wire_put_str(wb, "files_note", p->note);
        }
    }
    wire_put_u64(wb, "disk_mb", pprocs_free_disk_mb(pp));
}

/*
 * Issue 26: the files an ended process left that match its output globs go to the
 * outbox (stage_collect, as a task's), to be uploaded before its exit is reported
 * (live_stage.c), whatever its exit status: a failed rank's files help find why.
 */
static void collect(struct pprocs *pp, struct pproc *p)
{
    char outbox[300], err[300];
    if (!p->files || !p->files->nglobs || !p->run.workdir[0])
        return;
    snprintf(outbox, sizeof outbox, "%.250s/outbox", pp->state_dir);
    if (stage_collect(p->files, p->run.workdir, outbox, p->note, sizeof p->note, err, sizeof err) <
        0) {
        snprintf(p->note, sizeof p->note, "outputs not collected: %.250s", err);
        return;
    }
    p->files->collected = true;
    p->uploading = p->files->nout > 0;
    p->up_next = 0;
}

bool pprocs_reaped(struct pprocs *pp, pid_t pid, int status, const struct rusage *ru)
{
    for (uint32_t i = 0; i < pp->n; i++) {
        struct pproc *p = pp->p[i];
        if (p->run.pid != pid || p->exited)
            continue;
        runner_reaped(&p->run, status, ru);
        if (runner_spawned(&p->run))
            log_warnx("parallel job %llu process %u: %s", (unsigned long long)p->job, p->rank,
                      p->run.error);
        double cpu = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
                     (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
        if (cpu > p->cpu_s)
            p->cpu_s = cpu;
        p->exited = true;
        p->stopped = false;
        /* its output travels with the exit report; the files go when it is forgotten */
        if (runner_collect(&p->run, pp->max_output) < 0)
            log_warnx("parallel job %llu process %u: out of memory reading its output",
                      (unsigned long long)p->job, p->rank);
        log_info("parallel job %llu process %u ended (status 0x%x)", (unsigned long long)p->job,
                 p->rank, status);
        collect(pp, p);
        if (p->files && p->files->ck_par && p->files->ckpt_s && !p->files->ck_note[0] &&
            ckpt_unmarked(p->run.workdir)) /* issue 26: the marker forgotten */
            snprintf(p->files->ck_note, sizeof p->files->ck_note,
                     "the checkpoint directory holds files but no " CKPT_GEN_FILE
                     ": nothing of it was sent (write the generation's number there last)");
        if (p->files && p->files->ck_note[0]) { /* issue 26: why a checkpoint was not sent */
            size_t nl = strlen(p->note);
            snprintf(p->note + nl, sizeof p->note - nl, "%s%s", nl ? "; " : "", p->files->ck_note);
        }
        return true;
    }
    return false;
}

void pprocs_shutdown(struct pprocs *pp)
{
    while (pp->n > 0)
        forget(pp, pp->n - 1);
    free(pp->p);
    pp->p = NULL;
    pp->cap = 0;
}

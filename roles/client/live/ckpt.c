/*
 * ckpt.c - a node's task checkpoints on disk (ckpt.h, issue 26).
 */
#include "roles/client/live/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/datapath.h"
#include "lib/fsutil.h"

#define CKPT_FILES_MAX (WIRE_FILE_OUTPUTS_MAX * 16)

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (type == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void task_dir(const char *state_dir, uint64_t job, uint32_t idx, char *buf, size_t n)
{
    snprintf(buf, n, "%s/ckpt/%llu.%u", state_dir, (unsigned long long)job, idx);
}

int ckpt_local(const char *state_dir, uint64_t job, uint32_t idx, uint32_t *issue)
{
    char dir[800];
    task_dir(state_dir, job, idx, dir, sizeof dir);
    DIR *d = opendir(dir);
    int rc = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        unsigned long v = strtoul(e->d_name, &end, 10);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && !*end && v <= UINT32_MAX) {
            *issue = (uint32_t)v;
            rc = 0;
            break;
        }
    }
    if (d)
        closedir(d);
    return rc;
}

int ckpt_keep(const char *state_dir, const char *workdir, uint64_t job, uint32_t idx,
              uint32_t issue)
{
    char from[800], dir[800], to[900];
    struct stat st;
    snprintf(from, sizeof from, "%s/" CKPT_DIRNAME, workdir);
    if (lstat(from, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) { /* the task put something else there: not kept */
        unlink(from);
        errno = ENOTDIR;
        return -1;
    }
    task_dir(state_dir, job, idx, dir, sizeof dir);
    rm_tree(dir);
    snprintf(to, sizeof to, "%s/%u", dir, issue);
    if (fs_mkdir_p(dir) < 0 || rename(from, to) < 0)
        return -1;
    utimensat(AT_FDCWD, dir, NULL, AT_SYMLINK_NOFOLLOW); /* ckpt_sweep's age */
    return 0;
}

void ckpt_drop(const char *state_dir, const char *workdir, uint64_t job, uint32_t idx)
{
    char dir[800];
    task_dir(state_dir, job, idx, dir, sizeof dir);
    rm_tree(dir);
    if (workdir && workdir[0]) {
        snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, workdir);
        rm_tree(dir);
    }
}

void ckpt_sweep(const char *state_dir, bool (*keep)(void *arg, uint64_t id), void *arg)
{
    char dir[800], p[1200];
    snprintf(dir, sizeof dir, "%s/work", state_dir);
    DIR *w = opendir(dir);
    for (struct dirent *e; w && (e = readdir(w));) {
        char *end;
        unsigned long long id = strtoull(e->d_name, &end, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || keep(arg, id))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        rm_tree(p);
    }
    if (w)
        closedir(w);
    snprintf(dir, sizeof dir, "%s/ckpt", state_dir);
    DIR *d = opendir(dir);
    time_t old = time(NULL) - 7 * 86400;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            st.st_mtime >= old)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        rm_tree(p);
    }
    if (d)
        closedir(d);
}

int ckpt_place(const char *state_dir, const struct stage_cache *c, const struct stage_files *f,
               const char *workdir, uint64_t job, uint32_t idx, bool use_local, char *err, size_t n)
{
    char dir[800], kept[900], from[800], to[2200];
    uint32_t issue;
    snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, workdir);
    if (use_local && ckpt_local(state_dir, job, idx, &issue) == 0) {
        task_dir(state_dir, job, idx, kept, sizeof kept);
        snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "/%u", issue);
        if (rename(kept, dir) == 0)
            return 0;
    }
    if (mkdir(dir, 0700) < 0) {
        snprintf(err, n, "cannot make the checkpoint directory: %s", strerror(errno));
        return -1;
    }
    for (uint32_t i = 0; f && !use_local && i < f->nck; i++) {
        const struct stage_in *x = &f->ck[i];
        stage_cache_path(c, x->hex, from, sizeof from);
        snprintf(to, sizeof to, "%s/%s", dir, x->name);
        if (stage_make_parents(dir, x->name) < 0 || stage_copy_file(from, to) < 0) {
            snprintf(err, n, "cannot place checkpoint file '%.200s': %s", x->name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* nftw has no argument: the snapshot in progress (one at a time, one thread). */
static struct {
    struct stage_out *out;
    uint32_t n;
    size_t base;
    uint64_t cap, total;
    const char *outbox;
    char *note;
    size_t nn;
    const char *unit; /* in the note of a checkpoint too large: "task", or "rank" */
} snap = {.unit = "task"};

static void note(const char *fmt, const char *a)
{
    size_t l = strlen(snap.note);
    if (l + 1 < snap.nn) {
        snprintf(snap.note + l, snap.nn - l, "%s", l ? "; " : "");
        l = strlen(snap.note);
        snprintf(snap.note + l, snap.nn - l, fmt, a);
    }
}

static int snap_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    const char *rel = path + snap.base;
    char tmp[800], to[800];
    if (strlen(path) <= snap.base)
        return 0;
    if (type == FTW_SL || type == FTW_SLN) {
        note("checkpoint file '%.200s' is a symbolic link: not followed, not kept", rel);
        return 0;
    }
    if (type != FTW_F || datapath_problem(rel, strlen(rel)))
        return 0;
    if (snap.n == CKPT_FILES_MAX) {
        note("more than %s files in the checkpoint: not uploaded", "1024");
        return -1;
    }
    if ((snap.total += (uint64_t)st->st_size) > snap.cap) {
        char c[60];
        snprintf(c, sizeof c, "%s (files.ckpt_mb = %llu", snap.unit,
                 (unsigned long long)(snap.cap >> 20));
        note("the checkpoint is larger than the cluster keeps for a %s MB): not uploaded", c);
        return -1;
    }
    struct stage_out *o = &snap.out[snap.n];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-%d", snap.outbox, (int)getpid());
    unlink(tmp);
    if (stage_copy_file(path, tmp) < 0 || stage_hash_file(tmp, o->hex, &o->size) < 0)
        goto fail;
    snprintf(to, sizeof to, "%s/%s", snap.outbox, o->hex);
    if (rename(tmp, to) < 0 || !(o->name = strdup(rel)))
        goto fail;
    snap.n++;
    return 0;
fail:
    note("cannot copy checkpoint file '%.200s'", rel);
    unlink(tmp);
    return -1;
}

int ckpt_snapshot(const char *workdir, const char *outbox, uint64_t cap, struct stage_out **out,
                  uint32_t *n, char *nt, size_t nn)
{
    char dir[800];
    struct stat st;
    *out = NULL, *n = 0, *nt = '\0';
    snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, workdir);
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(nt, nn, "the checkpoint directory is gone or not a directory");
        return -1;
    }
    if (fs_mkdir_p(outbox) < 0 || !(snap.out = calloc(CKPT_FILES_MAX, sizeof *snap.out))) {
        snprintf(nt, nn, "cannot prepare %s: %s", outbox, strerror(errno));
        return -1;
    }
    snap.n = 0, snap.base = strlen(dir) + 1, snap.cap = cap, snap.total = 0;
    snap.outbox = outbox, snap.note = nt, snap.nn = nn;
    int rc = nftw(dir, snap_one, 16, FTW_PHYS);
    *out = snap.out, *n = snap.n;
    snap.out = NULL;
    if (rc != 0) {
        ckpt_snapshot_free(out, n);
        return -1;
    }
    return 0;
}

void ckpt_snapshot_free(struct stage_out **out, uint32_t *n)
{
    for (uint32_t i = 0; *out && i < *n; i++)
        free((*out)[i].name);
    free(*out);
    *out = NULL;
    *n = 0;
}

/* ---- generations (parallel jobs' ranks) ---- */

int ckpt_generation(const char *workdir, uint32_t *gen, char *note, size_t nn)
{
    char path[800], buf[32];
    snprintf(path, sizeof path, "%s/" CKPT_DIRNAME "/" CKPT_GEN_FILE, workdir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat st;
    ssize_t r =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (r < 0) {
        snprintf(note, nn,
                 "checkpoint marker " CKPT_GEN_FILE " cannot be read (a regular file "
                 "holding the generation's number is expected): not sent");
        return -1;
    }
    if (r == 0)
        return 0; /* being written (truncated, not yet written): the next look */
    while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' ' || buf[r - 1] == '\r'))
        r--;
    buf[r] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (buf[0] < '0' || buf[0] > '9' || *end || errno || v > UINT32_MAX) {
        for (char *c = buf; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        snprintf(note, nn,
                 "checkpoint marker " CKPT_GEN_FILE " holds '%.20s', not a generation number "
                 "0..4294967295: not sent",
                 buf);
        return -1;
    }
    *gen = (uint32_t)v;
    return 1;
}

bool ckpt_unmarked(const char *workdir)
{
    char dir[800];
    uint32_t g;
    char note[8];
    snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, workdir);
    if (ckpt_generation(workdir, &g, note, sizeof note) != 0)
        return false;
    DIR *d = opendir(dir);
    bool files = false;
    for (struct dirent *e; d && !files && (e = readdir(d));)
        files = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return files;
}

/* The newest modification of a regular file of the directory but the marker. */
static struct timespec newest;
static int newest_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    if (type == FTW_F && strcmp(path + ftw->base, CKPT_GEN_FILE) &&
        (st->st_mtim.tv_sec > newest.tv_sec ||
         (st->st_mtim.tv_sec == newest.tv_sec && st->st_mtim.tv_nsec > newest.tv_nsec)))
        newest = st->st_mtim;
    return 0;
}

/* Whether workdir's checkpoint is at rest at its marker (*m: the marker's stat). */
static bool at_rest(const char *dir, struct stat *m)
{
    char path[900];
    snprintf(path, sizeof path, "%s/" CKPT_GEN_FILE, dir);
    if (lstat(path, m) < 0 || !S_ISREG(m->st_mode))
        return false;
    newest = (struct timespec){0, 0};
    if (nftw(dir, newest_one, 16, FTW_PHYS) != 0)
        return false;
    return newest.tv_sec < m->st_mtim.tv_sec ||
           (newest.tv_sec == m->st_mtim.tv_sec && newest.tv_nsec <= m->st_mtim.tv_nsec);
}

int ckpt_snapshot_gen(const char *workdir, const char *outbox, uint64_t cap, uint32_t *gen,
                      struct stage_out **out, uint32_t *n, char *note, size_t nn)
{
    char dir[800];
    struct stat a, b;
    uint32_t g2;
    *out = NULL, *n = 0, *note = '\0';
    int rc = ckpt_generation(workdir, gen, note, nn);
    snprintf(dir, sizeof dir, "%s/" CKPT_DIRNAME, workdir);
    if (rc <= 0)
        return rc;
    if (!at_rest(dir, &a))
        return 0;
    snap.unit = "rank";
    rc = ckpt_snapshot(workdir, outbox, cap, out, n, note, nn);
    snap.unit = "task";
    if (rc < 0)
        return -1;
    if (!at_rest(dir, &b) || a.st_ino != b.st_ino || a.st_size != b.st_size ||
        a.st_mtim.tv_sec != b.st_mtim.tv_sec || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec ||
        ckpt_generation(workdir, &g2, note, nn) != 1 || g2 != *gen) {
        ckpt_snapshot_free(out, n); /* it moved on meanwhile: the next try */
        *note = '\0';
        return 0;
    }
    return 1;
}

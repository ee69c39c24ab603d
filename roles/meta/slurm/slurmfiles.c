/*
 * slurmfiles.c - files at a Slurm site (issue 26, docs/data.md "Slurm sites"): the
 * adapter answers the spool's FILE_HAVE / FILE_PUT (inputs, written into a
 * content-addressed store in the site's shared `workdir`), links a job's inputs into
 * its own working directory before sbatch, lists the files a job left matching its
 * output globs once it ended (hashed by a child process, so the loop never waits), and
 * answers FILE_GET for them from that directory.
 *
 *   WORKDIR/.gridnode-files/HASH       whole inputs, checked, read-only
 *   WORKDIR/.gridnode-files/part/HASH  an input being received (in order, 1 MiB a turn)
 *   WORKDIR/.gridnode-jobs/ID          Slurm job ID's directory name (a tab and
 *                                      "parallel" after it for a parallel job) and
 *                                      output globs, one a line
 *   WORKDIR/<the job's key>/           the job's working directory (sbatch --chdir),
 *                                      shared by a parallel job's ranks
 *
 * The spool and the adapter are one process: an input copy cut by kill -9 was never
 * acknowledged to anyone but the dead spool, so it starts again from byte 0 (the part
 * file is truncated at the next FILE_HAVE); the job's own files are plain files in its
 * directory, so a job that ran keeps its outputs across a restart.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/datapath.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/sha256.h"
#include "roles/meta/slurm/slurm_int.h"
#include "wire/wire.h"

#define SF_STORE ".gridnode-files"
#define SF_JOBS ".gridnode-jobs"
#define SF_CKPT ".gridnode-checkpoint"
#define SF_PARTS_MAX 64     /* inputs being received at once */
#define SF_LISTS_MAX 1024   /* ended jobs' output lists kept */
#define SF_LIST_MS 600000   /* a listing (hashing a job's outputs) may take this long */
#define SF_FILES_MAX 100000 /* outputs listed per job */

struct sfpart {
    uint8_t d[SHA256_LEN];
    uint64_t size, have;
    struct sha256 sha;
    int fd;
};

struct sffile {
    char hex[SHA256_HEX];
    uint64_t size;
    char *name;
};

struct sflist {
    uint64_t job;
    bool ready;     /* the listing finished (else a child is hashing) */
    char state[16]; /* the end the job was reported with, for its task row */
    int64_t ex;
    char dir[SLURM_STR + 300];
    bool ranked; /* a parallel job's: its files are named 0/NAME (the batch script's rank) */
    struct sffile *f;
    uint32_t n;
    char note[512];
};

struct slurm_files {
    struct sfpart parts[SF_PARTS_MAX];
    uint32_t nparts;
    struct sflist *lists;
    uint32_t nlists;
};

static struct slurm_files *files(struct slurm_site *S)
{
    if (!S->files)
        S->files = calloc(1, sizeof *S->files);
    return S->files;
}

void slurm_files_free(struct slurm_site *S)
{
    struct slurm_files *F = S->files;
    if (!F)
        return;
    for (uint32_t i = 0; i < F->nparts; i++)
        close(F->parts[i].fd);
    for (uint32_t i = 0; i < F->nlists; i++) {
        for (uint32_t k = 0; k < F->lists[i].n; k++)
            free(F->lists[i].f[k].name);
        free(F->lists[i].f);
    }
    free(F->lists);
    free(F);
    S->files = NULL;
}

/* ---- inputs: FILE_HAVE / FILE_PUT into WORKDIR/.gridnode-files ---- */

/* "files need workdir" or a store directory that cannot be made: false, error sent. */
static bool store_ready(struct slurm_site *S, uint64_t rid)
{
    char p[SLURM_STR + 64];
    if (!S->c.workdir[0]) {
        slurm_reply_err(S, rid, false, WE_INVALID,
                        "slurm site %s takes no files: it has no workdir (set workdir=DIR in its "
                        "slurm:// URL, a directory its nodes share)",
                        S->site);
        return false;
    }
    /* the workdir itself is never made here: a missing one is a mount or a setting
     * gone wrong, and one made on the spool's host would not be shared */
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/part", S->c.workdir, SF_STORE);
    int e = stat(S->c.workdir, &st) < 0 ? errno
            : !S_ISDIR(st.st_mode)      ? ENOTDIR
            : fs_mkdir_p(p) < 0         ? errno
                                        : 0;
    if (e) {
        slurm_reply_err(
            S, rid, false, e == ENOSPC || e == EDQUOT ? WE_STORAGE : WE_INVALID,
            "slurm site %s: its workdir %s cannot be used: %s (it must exist, be shared "
            "with the site's nodes and be writable by the grid spool)",
            S->site, S->c.workdir, strerror(e));
        return false;
    }
    return true;
}

static void state_reply(struct slurm_site *S, uint64_t rid, const char *hex, uint64_t size,
                        uint64_t have, bool done)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_FILE_STATE, rid, 5);
    wire_put_strn(&wb, "hash", hex, 64);
    wire_put_u64(&wb, "size", size);
    wire_put_u64(&wb, "have", have);
    wire_put_bool(&wb, "done", done);
    wire_put_u64(&wb, "chunk", WIRE_FILE_CHUNK);
    slurm_ready(S, rid, &wb);
    wire_buf_free(&wb);
}

static struct sfpart *part_find(struct slurm_files *F, const uint8_t d[SHA256_LEN])
{
    for (uint32_t i = 0; i < F->nparts; i++)
        if (!memcmp(F->parts[i].d, d, SHA256_LEN))
            return &F->parts[i];
    return NULL;
}

static void part_drop(struct slurm_files *F, struct sfpart *p)
{
    close(p->fd);
    *p = F->parts[--F->nparts];
}

/* The whole path of a stored input (part: being received). */
static void store_path(const struct slurm_site *S, const char *hex, bool part, char *out, size_t n)
{
    snprintf(out, n, "%s/%s/%s%.64s", S->c.workdir, SF_STORE, part ? "part/" : "", hex);
}

void slurm_files_have(struct slurm_site *S, uint64_t rid, const msgpack_object *o, bool put)
{
    struct slurm_files *F = files(S);
    size_t hl, dl = 0;
    const char *h = wire_get_str(o, "hash", &hl);
    uint8_t d[SHA256_LEN];
    uint64_t size = wire_get_u64(o, "size", 0), off = wire_get_u64(o, "off", 0);
    const void *data = put ? wire_get_bin(o, "data", &dl) : NULL;
    char hex[SHA256_HEX], path[SLURM_STR + 160], part[SLURM_STR + 160];
    if (!F || !h || hl != 64 || !sha256_is_hex(h, hl)) {
        slurm_reply_err(S, rid, false, WE_INVALID,
                        "slurm site %s: a file needs a hash of 64 hex digits", S->site);
        return;
    }
    if (!store_ready(S, rid))
        return;
    memcpy(hex, h, 64);
    hex[64] = '\0';
    for (int i = 0; i < 32; i++)
        sscanf(hex + 2 * i, "%2hhx", &d[i]);
    store_path(S, hex, false, path, sizeof path);
    store_path(S, hex, true, part, sizeof part);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
        /* touched: the sweep keeps a file the spool was just told is here (its ctime) */
        (void)utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
        state_reply(S, rid, hex, size, size, true);
        return;
    }
    struct sfpart *p = part_find(F, d);
    if (p && p->size != size) {
        part_drop(F, p);
        p = NULL;
    }
    if (!p && put) { /* a chunk of a copy this adapter does not hold: start from 0 */
        state_reply(S, rid, hex, size, 0, false);
        return;
    }
    if (!p) {
        if (F->nparts == SF_PARTS_MAX) /* one goes: most likely an abandoned offer */
            part_drop(F, &F->parts[0]);
        int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            slurm_reply_err(S, rid, false, errno == ENOSPC ? WE_STORAGE : WE_INVALID,
                            "slurm site %s: cannot write %s: %s", S->site, part, strerror(errno));
            return;
        }
        p = &F->parts[F->nparts++];
        memset(p, 0, sizeof *p);
        memcpy(p->d, d, SHA256_LEN);
        p->size = size;
        p->fd = fd;
        sha256_init(&p->sha);
    }
    if (put && off == p->have && dl <= size - p->have) {
        const char *b = data;
        for (size_t w = 0; w < dl;) {
            ssize_t k = pwrite(p->fd, b + w, dl - w, (off_t)(off + w));
            if (k <= 0) {
                int e = k < 0 ? errno : EIO;
                slurm_reply_err(S, rid, false, e == ENOSPC || e == EDQUOT ? WE_STORAGE : WE_REFUSED,
                                "slurm site %s: %s writing %s", S->site,
                                e == ENOSPC ? "disk full" : strerror(e), part);
                return; /* have unchanged: the chunk is sent again */
            }
            w += (size_t)k;
        }
        sha256_update(&p->sha, data, dl);
        p->have += dl;
    }
    if (p->have == p->size) {
        uint8_t got[SHA256_LEN];
        sha256_final(&p->sha, got);
        bool ok = !memcmp(got, d, SHA256_LEN);
        int fd = p->fd;
        p->fd = -1;
        part_drop(F, p);
        bool moved = ok && fchmod(fd, 0444) == 0;
        moved = close(fd) == 0 && moved && rename(part, path) == 0;
        if (!moved) {
            unlink(part);
            slurm_reply_err(
                S, rid, false, ok ? WE_STORAGE : WE_INVALID, "slurm site %s: %s", S->site,
                ok ? "the input could not be moved into its store"
                   : "the file changed while it was sent (its bytes hash to another value)");
            return;
        }
        state_reply(S, rid, hex, size, size, true);
        return;
    }
    state_reply(S, rid, hex, size, p->have, false);
}

/* ---- the sweep ---- */

/* Entries of directory path (opened beneath nothing: the store is the site's own) that
 * are regular files named by 64 hex digits, unchanged (ctime) before cut, and with one
 * link when links1: deleted, but not those parts F still writes. The count, or -1. */
static long sweep_dir(struct slurm_files *F, const char *path, time_t cut, bool links1)
{
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        struct stat st;
        if (strlen(e->d_name) != 64 || !sha256_is_hex(e->d_name, 64) ||
            fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_ctime >= cut || (links1 && st.st_nlink != 1))
            continue;
        uint8_t d[SHA256_LEN];
        for (int i = 0; i < 32; i++)
            sscanf(e->d_name + 2 * i, "%2hhx", &d[i]);
        if (!links1 && F && part_find(F, d))
            continue; /* an offer is writing it */
        n += unlinkat(dirfd(dir), e->d_name, 0) == 0;
    }
    closedir(dir);
    return n;
}

/* The records in WORKDIR/.gridnode-jobs whose job directory is gone (removed once the
 * spool was done with it, slurmkeep.c, or by an operator): deleted. A record is written
 * after its directory was made (slurm_files_submitted), so none is a fresh one. */
static void sweep_records(struct slurm_site *S)
{
    char path[SLURM_STR + 64];
    snprintf(path, sizeof path, "%s/" SF_JOBS, S->c.workdir);
    DIR *dir = opendir(path);
    if (!dir)
        return;
    long n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (!e->d_name[0] || strspn(e->d_name, "0123456789") != strlen(e->d_name))
            continue;
        char line[SLURM_STR + 400] = "";
        int fd = openat(dirfd(dir), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, line, sizeof line - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (k <= 0)
            continue;
        line[k] = '\0';
        line[strcspn(line, "\t\n")] = '\0';
        struct stat st;
        if (line[0] == '/' && lstat(line, &st) < 0 && errno == ENOENT)
            n += unlinkat(dirfd(dir), e->d_name, 0) == 0;
    }
    closedir(dir);
    if (n)
        log_info("slurm site %s: %ld record(s) of removed job directories deleted", S->site, n);
}

long slurm_site_sweep(struct slurm_site *S, int64_t keep_s)
{
    if (!S->c.workdir[0])
        return -1;
    char path[SLURM_STR + 64];
    time_t cut = time(NULL) - (time_t)(keep_s < 0 ? 0 : keep_s);
    sweep_records(S);
    snprintf(path, sizeof path, "%s/" SF_STORE, S->c.workdir);
    long n = sweep_dir(S->files, path, cut, true);
    snprintf(path, sizeof path, "%s/" SF_STORE "/part", S->c.workdir);
    long p = sweep_dir(S->files, path, cut, false);
    if (n > 0 || p > 0)
        log_info("slurm site %s: %ld stored input(s) no job directory links and %ld abandoned "
                 "part(s) deleted (unchanged for %lld s)",
                 S->site, n > 0 ? n : 0, p > 0 ? p : 0, (long long)keep_s);
    return n < 0 ? -1 : n + (p > 0 ? p : 0);
}

/* ---- a job's directory ---- */

static int stage_fail(struct slurm_site *S, struct sreq *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int stage_fail(struct slurm_site *S, struct sreq *r, int code, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_warnx("%s (site %s)", msg, S->site);
    slurm_reply_err(S, r->rid, false, code, "%s", msg); /* the caller frees r */
    return -1;
}

/* The error code for errno e while writing the job's directory. */
static int io_code(int e)
{
    return e == ENOSPC || e == EDQUOT || e == EIO ? WE_STORAGE : WE_INVALID;
}

/* Opens (making it) directory name inside dfd, never through a symbolic link, owned by
 * the jobs' identity: its fd, or -1 (errno). */
static int sub_dir(struct slurm_site *S, int dfd, const char *name, mode_t mode)
{
    if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
        return -1;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && S->runas && fchown(fd, S->uid, S->gid) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Input entry e linked into the directory dfd under its name: 0, or -1 (reply made). */
static int link_input(struct slurm_site *S, struct sreq *r, int dfd, const msgpack_object *e)
{
    size_t nl, hl;
    const char *name = wire_get_str(e, "name", &nl), *h = wire_get_str(e, "hash", &hl);
    const char *bad = name ? datapath_problem(name, nl) : "is missing";
    if (!bad && !(h && hl == 64 && sha256_is_hex(h, hl)))
        bad = "has no valid hash";
    if (bad)
        return stage_fail(S, r, WE_INVALID, "slurm site %s: input '%.*s' %s", S->site,
                          (int)(nl > 200 ? 200 : nl), name ? name : "", bad);
    char rel[DATAPATH_MAX + 1], src[SLURM_STR + 160], hex[SHA256_HEX];
    memcpy(rel, name, nl);
    rel[nl] = '\0';
    memcpy(hex, h, 64);
    hex[64] = '\0';
    store_path(S, hex, false, src, sizeof src);
    int cur = dup(dfd);
    char *c = rel, *slash;
    while (cur >= 0 && (slash = strchr(c, '/'))) { /* its directories, never a link */
        *slash = '\0';
        int nx = sub_dir(S, cur, c, 0755);
        close(cur);
        cur = nx;
        c = slash + 1;
    }
    int e1 = errno;
    if (cur < 0)
        return stage_fail(S, r, io_code(e1),
                          "slurm site %s: input '%.*s': cannot make its directory: %s", S->site,
                          (int)nl, name, strerror(e1));
    unlinkat(cur, c, 0); /* a resent submission: the link made before */
    int rc = linkat(AT_FDCWD, src, cur, c, 0);
    e1 = errno;
    close(cur);
    if (rc == 0)
        return 0;
    if (e1 == ENOENT)
        return stage_fail(S, r, WE_REFUSED,
                          "slurm site %s: input '%.*s' is not held at the site "
                          "(%s): send it again",
                          S->site, (int)nl, name, src);
    if (e1 == EXDEV)
        return stage_fail(S, r, WE_INVALID,
                          "slurm site %s: workdir %s and its %s must be one "
                          "file system",
                          S->site, S->c.workdir, SF_STORE);
    return stage_fail(S, r, io_code(e1), "slurm site %s: input '%.*s' cannot be placed in %s: %s",
                      S->site, (int)nl, name, r->chdir, strerror(e1));
}

int slurm_files_stage(struct slurm_site *S, struct sreq *r)
{
    if (!S->c.workdir[0])
        return stage_fail(S, r, WE_INVALID,
                          "slurm site %s takes no files (submit --input/--output/"
                          "--checkpoint-s): it has no workdir (set workdir=DIR in its slurm:// "
                          "URL, a directory its nodes share)",
                          S->site);
    char dn[320] = "";
    if (r->key[0]) {
        slurm_files_dir(S, r);
        snprintf(dn, sizeof dn, "%s", strrchr(r->chdir, '/') + 1);
    }
    int top = open(S->c.workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return stage_fail(S, r, io_code(errno),
                          "slurm site %s: its workdir %s cannot be used: %s (it must exist, be "
                          "shared with the site's nodes and writable by the grid spool)",
                          S->site, S->c.workdir, strerror(errno));
    if (!dn[0]) { /* no key: a fresh name */
        snprintf(r->chdir, sizeof r->chdir, "%s/gridnode-XXXXXX", S->c.workdir);
        if (!mkdtemp(r->chdir)) {
            close(top);
            return stage_fail(S, r, io_code(errno),
                              "slurm site %s: cannot make a directory in %s: %s", S->site,
                              S->c.workdir, strerror(errno));
        }
        snprintf(dn, sizeof dn, "%s", strrchr(r->chdir, '/') + 1);
    }
    snprintf(r->chdir, sizeof r->chdir, "%s/%s", S->c.workdir, dn);
    int dfd = sub_dir(S, top, dn, 0700);
    int e1 = errno;
    close(top);
    if (dfd < 0)
        return stage_fail(S, r, io_code(e1),
                          "slurm site %s: cannot make the job's directory %s: %s", S->site,
                          r->chdir, strerror(e1));
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    int rc = 0;
    if (msgpack_unpack_next(&up, r->files, r->files_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *in = wire_get(&up.data, "inputs");
        for (uint32_t i = 0;
             !rc && in && in->type == MSGPACK_OBJECT_ARRAY && i < in->via.array.size; i++) {
            const msgpack_object *e = &in->via.array.ptr[i];
            if (!wire_get(e, "task") || wire_get_u64(e, "task", 0) == 0) /* one task: task 0 */
                rc = link_input(S, r, dfd, e);
        }
        if (!rc && r->ckpt) {
            int ck = sub_dir(S, dfd, SF_CKPT, 0700);
            if (ck < 0)
                rc = stage_fail(S, r, io_code(errno), "slurm site %s: cannot make %s/%s: %s",
                                S->site, r->chdir, SF_CKPT, strerror(errno));
            else
                close(ck);
        }
    }
    msgpack_unpacked_destroy(&up);
    close(dfd);
    return rc;
}

/* The request's output globs, one a line (malloc'd; "" none). */
static char *globs(const struct sreq *r)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t cap = 1, n = 0;
    char *g = calloc(1, 1);
    if (g && msgpack_unpack_next(&up, r->files, r->files_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *out = wire_get(&up.data, "outputs");
        for (uint32_t i = 0; out && out->type == MSGPACK_OBJECT_ARRAY && i < out->via.array.size;
             i++) {
            const msgpack_object *o = &out->via.array.ptr[i];
            if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\n', o->via.str.size))
                continue;
            char *ng = realloc(g, cap + o->via.str.size + 1);
            if (!ng)
                break;
            g = ng;
            memcpy(g + n, o->via.str.ptr, o->via.str.size);
            n += o->via.str.size;
            g[n++] = '\n';
            g[n] = '\0';
            cap += o->via.str.size + 1;
        }
    }
    msgpack_unpacked_destroy(&up);
    return g;
}

void slurm_files_submitted(struct slurm_site *S, struct sreq *r, uint64_t job)
{
    if (!r->files || !r->chdir[0])
        return;
    char *g = globs(r);
    if (!g || !g[0]) { /* no outputs: nothing to list when it ends */
        free(g);
        return;
    }
    char dir[SLURM_STR + 32], name[32], *text = NULL;
    snprintf(dir, sizeof dir, "%s/%s", S->c.workdir, SF_JOBS);
    snprintf(name, sizeof name, "%" PRIu64, job);
    if (asprintf(&text, "%s%s\n%s", r->chdir, r->parallel ? "\tparallel" : "", g) < 0)
        text = NULL;
    if (!text || fs_mkdir_p(dir) < 0 || chmod(dir, 0700) < 0 ||
        fs_write_atomic(dir, name, text, strlen(text)) < 0)
        log_warn("slurm site %s: job %" PRIu64 ": cannot note its outputs in %s", S->site, job,
                 dir);
    free(text);
    free(g);
}

void slurm_files_dir(struct slurm_site *S, struct sreq *r)
{
    char dn[320];
    snprintf(dn, sizeof dn, "%s", r->jname);
    for (char *c = dn; *c; c++)
        if (*c == '/' || (c == dn && *c == '.'))
            *c = '_';
    snprintf(r->chdir, sizeof r->chdir, "%s/%s", S->c.workdir, dn);
}

/* ---- outputs: listed once the job ended ---- */

static struct sflist *list_find(struct slurm_files *F, uint64_t job)
{
    for (uint32_t i = 0; F && i < F->nlists; i++)
        if (F->lists[i].job == job)
            return &F->lists[i];
    return NULL;
}

static void list_drop(struct slurm_files *F, uint32_t i)
{
    for (uint32_t k = 0; k < F->lists[i].n; k++)
        free(F->lists[i].f[k].name);
    free(F->lists[i].f);
    memmove(&F->lists[i], &F->lists[i + 1], (F->nlists - i - 1) * sizeof *F->lists);
    F->nlists--;
}

void slurm_files_forget(struct slurm_site *S, const char *dir)
{
    struct slurm_files *F = S->files;
    for (uint32_t i = 0; F && i < F->nlists;)
        if (F->lists[i].ready && !strcmp(F->lists[i].dir, dir))
            list_drop(F, i);
        else
            i++;
}

/* In the listing child (its own process, the jobs' identity, cwd the job's directory):
 * the globs to match, one a line. */
static const char *child_globs;
static uint32_t child_n;

static bool child_match(const char *rel)
{
    for (const char *g = child_globs; g && *g;) {
        const char *nl = strchr(g, '\n');
        char one[DATAPATH_MAX + 1];
        size_t l = nl ? (size_t)(nl - g) : strlen(g);
        if (l <= DATAPATH_MAX) {
            memcpy(one, g, l);
            one[l] = '\0';
            if (fnmatch(one, rel, FNM_PATHNAME) == 0)
                return true;
        }
        g += l + (nl != NULL);
    }
    return false;
}

static int child_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    const char *rel = path[0] == '.' && path[1] == '/' ? path + 2 : path;
    if (!strcmp(path, "."))
        return FTW_CONTINUE;
    if (type == FTW_D)
        return strcmp(rel, SF_CKPT) ? FTW_CONTINUE : FTW_SKIP_SUBTREE;
    if (!child_match(rel))
        return FTW_CONTINUE;
    if (datapath_problem(rel, strlen(rel)) || strchr(rel, '\t')) {
        printf("!\t%s\tis not a name the grid takes\n", "(a file)");
        return FTW_CONTINUE;
    }
    if (type == FTW_SL || type == FTW_SLN || !S_ISREG(st->st_mode)) {
        printf("!\t%s\t%s\n", rel,
               type == FTW_SL || type == FTW_SLN ? "is a symbolic link: not followed"
                                                 : "is not a regular file");
        return FTW_CONTINUE;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct sha256 sh;
    sha256_init(&sh);
    static char buf[1 << 20];
    uint64_t size = 0;
    ssize_t k = 0;
    while (fd >= 0 && (k = read(fd, buf, sizeof buf)) > 0) {
        sha256_update(&sh, buf, (size_t)k);
        size += (uint64_t)k;
    }
    if (fd < 0 || k < 0) {
        printf("!\t%s\tcannot be read: %s\n", rel, strerror(errno));
        if (fd >= 0)
            close(fd);
        return FTW_CONTINUE;
    }
    close(fd);
    uint8_t d[SHA256_LEN];
    char hex[SHA256_HEX];
    sha256_final(&sh, d);
    sha256_hex(d, hex);
    printf("%s\t%" PRIu64 "\t%s\n", hex, size, rel);
    return ++child_n >= SF_FILES_MAX ? FTW_STOP : FTW_CONTINUE;
}

static int list_child(struct slurm_site *S, struct sreq *r)
{
    (void)S;
    if (chdir(r->fdir) < 0) {
        fprintf(stderr, "cannot enter %s: %s", r->fdir, strerror(errno));
        return 2;
    }
    child_globs = r->fglobs;
    int rc = nftw(".", child_visit, 16, FTW_PHYS | FTW_ACTIONRETVAL);
    if (rc < 0)
        fprintf(stderr, "cannot list %s: %s", r->fdir, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    return rc < 0 ? 2 : 0;
}

int slurm_files_ended(struct slurm_site *S, uint64_t job, const char *state, int64_t ex)
{
    struct slurm_files *F = S->c.workdir[0] ? files(S) : NULL;
    if (!F)
        return 0;
    struct sflist *l = list_find(F, job);
    if (l) {
        if (l->ready) { /* kept for the task row */
            snprintf(l->state, sizeof l->state, "%s", state);
            l->ex = ex;
        }
        return l->ready ? 1 : -1;
    }
    char path[SLURM_STR + 64], *text = NULL;
    snprintf(path, sizeof path, "%s/%s/%" PRIu64, S->c.workdir, SF_JOBS, job);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0; /* not a job with outputs */
    size_t cap = 0;
    ssize_t n = getdelim(&text, &cap, '\0', f);
    fclose(f);
    char *nl = n > 0 ? strchr(text, '\n') : NULL;
    if (!nl) {
        free(text);
        return 0;
    }
    *nl = '\0';
    char *tab = strchr(text, '\t'); /* a record from before issue 26's parallel jobs: none */
    bool ranked = tab && !strcmp(tab + 1, "parallel");
    if (tab)
        *tab = '\0';
    if (F->nlists == SF_LISTS_MAX)
        for (uint32_t i = 0; i < F->nlists; i++)
            if (F->lists[i].ready) { /* the oldest listed */
                list_drop(F, i);
                break;
            }
    struct sflist *nv =
        F->nlists < SF_LISTS_MAX ? realloc(F->lists, (F->nlists + 1) * sizeof *F->lists) : NULL;
    struct sreq *r = nv ? slurm_req_new(S, T_LIST, 0) : NULL;
    if (nv)
        F->lists = nv;
    if (!r || !(r->fdir = strdup(text)) || !(r->fglobs = strdup(nl + 1))) {
        if (r)
            slurm_req_free(S, r);
        free(text);
        return 0; /* reported ended; its listing will say it could not be made */
    }
    l = &F->lists[F->nlists++];
    memset(l, 0, sizeof *l);
    l->job = job;
    l->ranked = ranked;
    snprintf(l->dir, sizeof l->dir, "%s", text);
    free(text);
    r->job = job;
    r->child = list_child;
    r->tmo = SF_LIST_MS;
    slurm_cmd(S, r, C_LIST, false);
    log_info("slurm site %s: job %" PRIu64 " ended: hashing its outputs in %s", S->site, job,
             l->dir);
    return -1;
}

void slurm_files_listed(struct slurm_site *S, struct sreq *r)
{
    struct sflist *l = list_find(S->files, r->job);
    if (!l) {
        slurm_req_free(S, r);
        return;
    }
    l->ready = true;
    size_t nn = 0;
    if (!slurm_cmd_ok(r)) {
        char b[400];
        slurm_why(S, r, b, sizeof b);
        snprintf(l->note, sizeof l->note, "its outputs could not be listed at the site: %s", b);
    }
    char *save = NULL;
    for (char *ln = slurm_cmd_ok(r) && r->out.p ? strtok_r(r->out.p, "\n", &save) : NULL; ln;
         ln = strtok_r(NULL, "\n", &save)) {
        char *t1 = strchr(ln, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2)
            continue;
        *t1 = *t2 = '\0';
        if (!strcmp(ln, "!")) { /* refused: named in files_note */
            nn += (size_t)snprintf(l->note + nn, nn < sizeof l->note ? sizeof l->note - nn : 0,
                                   "%s%s %s", nn ? "; " : "", t1 + 1, t2 + 1);
            if (nn >= sizeof l->note)
                nn = sizeof l->note - 1;
            continue;
        }
        struct sffile *nf = realloc(l->f, (l->n + 1) * sizeof *l->f);
        if (!nf || strlen(ln) != 64)
            continue;
        l->f = nf;
        memcpy(l->f[l->n].hex, ln, 65);
        l->f[l->n].size = strtoull(t1 + 1, NULL, 10);
        if ((l->f[l->n].name = strdup(t2 + 1)))
            l->n++;
    }
    log_info("slurm site %s: job %" PRIu64 ": %u outputs listed%s%s", S->site, r->job, l->n,
             l->note[0] ? ": " : "", l->note);
    slurm_req_free(S, r);
}

/* JOB_GET `tasks` with `from` (the spool copying a job's outputs): the job's one task
 * row with its files. */
void slurm_files_tasks(struct slurm_site *S, uint64_t rid, const msgpack_object *o)
{
    uint64_t job = wire_get_u64(o, "job", 0);
    struct sflist *l = list_find(S->files, job);
    if (!l || !l->ready) {
        slurm_reply_err(S, rid, false, WE_NOT_FOUND,
                        "slurm site %s: the outputs of job %" PRIu64 " are not listed here (the "
                        "job has no --output, or has not ended)",
                        S->site, job);
        return;
    }
    const char *st = l->state[0] ? l->state : "done";
    int64_t ex = l->ex;
    bool note = l->note[0] != '\0';
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB, rid, 3);
    wire_put_key(&wb, "job");
    wire_pack_map(&wb, 4);
    wire_put_u64(&wb, "job", job);
    wire_put_str(&wb, "kind", "parallel");
    wire_put_str(&wb, "state", st);
    wire_put_i64(&wb, "exit", ex);
    wire_put_key(&wb, "tasks");
    bool first = wire_get_u64(o, "from", 0) == 0;
    wire_pack_array(&wb, first);
    if (first) {
        wire_pack_map(&wb, 4 + note);
        wire_put_u64(&wb, "idx", 0);
        wire_put_str(&wb, "state", st);
        wire_put_i64(&wb, "exit", ex);
        wire_put_key(&wb, "files");
        wire_pack_array(&wb, l->n);
        for (uint32_t i = 0; i < l->n; i++) {
            char ranked[DATAPATH_MAX + 3];
            snprintf(ranked, sizeof ranked, "0/%s", l->f[i].name);
            wire_pack_map(&wb, 3);
            wire_put_str(&wb, "name", l->ranked ? ranked : l->f[i].name);
            wire_put_u64(&wb, "size", l->f[i].size);
            wire_put_strn(&wb, "hash", l->f[i].hex, 64);
        }
        if (note)
            wire_put_str(&wb, "files_note", l->note);
    }
    wire_put_u64(&wb, "next", 0);
    slurm_ready(S, rid, &wb);
    wire_buf_free(&wb);
}

/* Opens rel inside dir, never through a symbolic link: fd, or -1. */
static int open_beneath(const char *dir, const char *rel)
{
    char p[DATAPATH_MAX + 1];
    snprintf(p, sizeof p, "%s", rel);
    int cur = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char *c = p, *slash;
    while (cur >= 0 && (slash = strchr(c, '/'))) {
        *slash = '\0';
        int nx = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(cur);
        cur = nx;
        c = slash + 1;
    }
    if (cur < 0)
        return -1;
    int fd = openat(cur, c, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(cur);
    return fd;
}

void slurm_files_get(struct slurm_site *S, uint64_t rid, const msgpack_object *o)
{
    uint64_t job = wire_get_u64(o, "job", 0), off = wire_get_u64(o, "off", 0);
    uint64_t len = wire_get_u64(o, "len", WIRE_FILE_CHUNK);
    size_t hl;
    const char *h = wire_get_str(o, "hash", &hl);
    struct sflist *l = list_find(S->files, job);
    const struct sffile *f = NULL;
    for (uint32_t i = 0; l && l->ready && h && hl == 64 && i < l->n && !f; i++)
        if (!memcmp(l->f[i].hex, h, 64))
            f = &l->f[i];
    int fd = f ? open_beneath(l->dir, f->name) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || off > (uint64_t)st.st_size) {
        if (fd >= 0)
            close(fd);
        slurm_reply_err(S, rid, false, WE_NOT_FOUND,
                        "slurm site %s: job %" PRIu64 " names no such output here", S->site, job);
        return;
    }
    if (len > WIRE_FILE_CHUNK_MAX)
        len = WIRE_FILE_CHUNK_MAX;
    if (len > (uint64_t)st.st_size - off)
        len = (uint64_t)st.st_size - off;
    char *b = malloc(len ? len : 1);
    ssize_t k = b ? pread(fd, b, len, (off_t)off) : -1;
    close(fd);
    if (k < 0) {
        free(b);
        slurm_reply_err(S, rid, false, WE_STORAGE,
                        "slurm site %s: cannot read an output of job %" PRIu64, S->site, job);
        return;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_FILE_DATA, rid, 4);
    wire_put_strn(&wb, "hash", f->hex, 64);
    wire_put_u64(&wb, "size", (uint64_t)st.st_size);
    wire_put_u64(&wb, "off", off);
    wire_put_bin(&wb, "data", b, (size_t)k);
    slurm_ready(S, rid, &wb);
    wire_buf_free(&wb);
    free(b);
}

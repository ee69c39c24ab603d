/*
 * files_store.c - the cluster's file store (files.h, docs/data.md "Where copies live"):
 * one copy per content under STATE_DIR/files/XX/HASH, a file being received under
 * STATE_DIR/files/part/HASH, and one record per file in table "files" (its size, the
 * bytes received in order, their running SHA-256 state), so an upload cut by kill -9
 * goes on from the last acknowledged chunk. The files written in a loop turn are made
 * durable (fdatasync, files_sync) before the turn's commit, and the records are
 * committed before the replies: what was acknowledged is on disk. Several chunks of one
 * turn cost one fdatasync.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/loop.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"
#include "store/store.h"

struct cfiles {
    struct cfile **tab;
    uint32_t cap, n;
    /* files written to in this turn, made durable before its commit (files_sync) */
    uint8_t (*unsynced)[SHA256_LEN];
    uint32_t nun, capun;
};

int files_each(struct cluster *c, int (*fn)(struct cluster *c, struct cfile *f, void *arg),
               void *arg)
{
    for (uint32_t i = 0; c->files && i < c->files->cap; i++)
        for (struct cfile *f = c->files->tab[i], *nx; f; f = nx) {
            nx = f->next; /* fn may drop f */
            int rc = fn(c, f, arg);
            if (rc)
                return rc;
        }
    return 0;
}

static uint32_t slot(const struct cfiles *fs, const uint8_t d[SHA256_LEN])
{
    uint32_t h;
    memcpy(&h, d, sizeof h);
    return h & (fs->cap - 1);
}

struct cfile *files_find(struct cluster *c, const uint8_t d[SHA256_LEN])
{
    if (!c->files || !c->files->cap)
        return NULL;
    for (struct cfile *f = c->files->tab[slot(c->files, d)]; f; f = f->next)
        if (!memcmp(f->d, d, SHA256_LEN))
            return f;
    return NULL;
}

/* Adds f to the index (growing it): 0, or -1 (out of memory, f not added). */
static int index_add(struct cluster *c, struct cfile *f)
{
    struct cfiles *fs = c->files;
    if (fs->n + 1 > fs->cap) {
        uint32_t ncap = fs->cap ? fs->cap * 2 : 256;
        struct cfile **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return -1;
        for (uint32_t i = 0; i < fs->cap; i++)
            for (struct cfile *e = fs->tab[i], *nx; e; e = nx) {
                nx = e->next;
                uint32_t h;
                memcpy(&h, e->d, sizeof h);
                e->next = nt[h & (ncap - 1)];
                nt[h & (ncap - 1)] = e;
            }
        free(fs->tab);
        fs->tab = nt;
        fs->cap = ncap;
    }
    uint32_t s = slot(fs, f->d);
    f->next = fs->tab[s];
    fs->tab[s] = f;
    fs->n++;
    return 0;
}

static void index_del(struct cluster *c, struct cfile *f)
{
    for (struct cfile **p = &c->files->tab[slot(c->files, f->d)]; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            c->files->n--;
            free(f);
            return;
        }
}

int files_parse_hash(const char *s, size_t len, uint8_t d[SHA256_LEN])
{
    if (!s || !sha256_is_hex(s, len))
        return -1;
    for (int i = 0; i < SHA256_LEN; i++) {
        int hi = s[2 * i] <= '9' ? s[2 * i] - '0' : s[2 * i] - 'a' + 10;
        int lo = s[2 * i + 1] <= '9' ? s[2 * i + 1] - '0' : s[2 * i + 1] - 'a' + 10;
        d[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* STATE_DIR/files/XX/HASH (done) or STATE_DIR/files/part/HASH (being received). */
static void file_path(const struct cluster *c, const uint8_t d[SHA256_LEN], bool done, char *out,
                      size_t n)
{
    char hex[SHA256_HEX];
    sha256_hex(d, hex);
    if (done)
        snprintf(out, n, "%s/files/%.2s/%s", c->cfg.state_dir, hex, hex);
    else
        snprintf(out, n, "%s/files/part/%s", c->cfg.state_dir, hex);
}

/* The size of the file at path, or -1. */
static int64_t path_size(const char *path);

/* Buffers f's record (or its deletion): 0, or -1 (out of memory). */
static int save(struct cluster *c, const struct cfile *f, bool del)
{
    char hex[SHA256_HEX];
    sha256_hex(f->d, hex);
    if (del)
        return store_del(c->store, c->t_files, hex, 64);
    struct wire_buf wb;
    uint8_t st[SHA256_SAVED];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 4 + !f->done);
    wire_put_u64(&wb, "size", f->size);
    wire_put_u64(&wb, "have", f->have);
    wire_put_bool(&wb, "done", f->done);
    wire_put_i64(&wb, "t", f->t_ms);
    if (!f->done) {
        sha256_save(&f->sha, st);
        wire_put_bin(&wb, "sha", st, sizeof st);
    }
    int rc = store_put(c->store, c->t_files, hex, 64, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

static int64_t path_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/*
 * One stored record into the index. A record left "being received" whose whole file is
 * already in place (the move happened, its commit did not) is done; one whose partial
 * file is shorter than the bytes it counts starts again from 0.
 */
static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct cluster *c = arg;
    msgpack_unpacked up;
    struct cfile *f = calloc(1, sizeof *f);
    char path[2048];
    size_t sl;
    if (!f)
        return -1;
    if (files_parse_hash(key, klen, f->d) < 0 || cluster_unpack_map(&up, val, vlen) < 0) {
        log_warnx("files: record %.*s is not readable; skipped", (int)(klen > 64 ? 64 : klen),
                  (const char *)key);
        c->load_skipped++;
        free(f);
        return 0;
    }
    const msgpack_object *m = &up.data;
    f->size = wire_get_u64(m, "size", 0);
    f->have = wire_get_u64(m, "have", 0);
    f->done = wire_get_bool(m, "done", false);
    f->t_ms = wire_get_i64(m, "t", 0);
    const void *st = wire_get_bin(m, "sha", &sl);
    if (f->done) { /* a sweep removed its bytes, its commit did not happen */
        file_path(c, f->d, true, path, sizeof path);
        if (path_size(path) != (int64_t)f->size) {
            log_warnx("files: %.*s is gone from %s; its record is dropped",
                      (int)(klen > 64 ? 64 : klen), (const char *)key, path);
            msgpack_unpacked_destroy(&up);
            free(f);
            return store_del(c->store, c->t_files, key, klen) < 0 ? -1 : 0;
        }
    } else {
        file_path(c, f->d, true, path, sizeof path);
        if (path_size(path) == (int64_t)f->size) {
            f->done = true, f->have = f->size;
        } else {
            file_path(c, f->d, false, path, sizeof path);
            if (!st || sha256_load(&f->sha, st, sl) < 0 || f->sha.n != f->have ||
                path_size(path) < (int64_t)f->have) {
                sha256_init(&f->sha);
                f->have = 0;
            }
        }
    }
    msgpack_unpacked_destroy(&up);
    bool bad = f->have > f->size;
    if (bad || index_add(c, f) < 0) {
        free(f);
        return bad ? 0 : -1;
    }
    return 0;
}

int files_store_load(struct cluster *c)
{
    char dir[2048];
    files_free(c);
    if (!(c->files = calloc(1, sizeof *c->files)))
        return -1;
    snprintf(dir, sizeof dir, "%s/files/part", c->cfg.state_dir);
    if (fs_mkdir_p(dir) < 0) {
        log_warn("files: cannot make %s", dir);
        return -1;
    }
    return store_iter(c->store, c->t_files, NULL, 0, load_one, c);
}

void files_free(struct cluster *c)
{
    if (!c->files)
        return;
    for (uint32_t i = 0; i < c->files->cap; i++)
        for (struct cfile *f = c->files->tab[i], *nx; f; f = nx) {
            nx = f->next;
            free(f);
        }
    free(c->files->tab);
    free(c->files->unsynced);
    free(c->files);
    c->files = NULL;
}

/* Writes all of buf at off of path (made durable by files_sync or at the end): 0, or -1
 * (errno). */
static int write_chunk(const char *path, uint64_t off, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const uint8_t *p = buf;
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(fd, p + done, len - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    return close(fd);
}

/* fdatasync of the file at path: 0, or -1 (errno). */
static int sync_path(const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1; /* moved into place: synced then */
    int rc = fdatasync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Remembers that f's partial file must be synced before this turn's commit. */
static int note_unsynced(struct cluster *c, const struct cfile *f)
{
    struct cfiles *fs = c->files;
    for (uint32_t i = 0; i < fs->nun; i++)
        if (!memcmp(fs->unsynced[i], f->d, SHA256_LEN))
            return 0;
    if (fs->nun == fs->capun) {
        uint32_t nc = fs->capun ? fs->capun * 2 : 16;
        void *v = realloc(fs->unsynced, nc * sizeof *fs->unsynced);
        if (!v)
            return -1;
        fs->unsynced = v, fs->capun = nc;
    }
    memcpy(fs->unsynced[fs->nun++], f->d, SHA256_LEN);
    return 0;
}

int files_sync(struct cluster *c)
{
    char path[2048];
    struct cfiles *fs = c->files;
    for (uint32_t i = 0; fs && i < fs->nun; i++) {
        file_path(c, fs->unsynced[i], false, path, sizeof path);
        if (sync_path(path) < 0) {
            int e = errno;
            log_warnx("files: cannot sync %s: %s", path, store_error_text(e));
            fs->nun = 0;
            errno = e;
            return -1;
        }
    }
    if (fs)
        fs->nun = 0;
    return 0;
}

/* The whole file moves from part/ to its place; the directory made durable. */
static int move_done(struct cluster *c, const struct cfile *f)
{
    char from[2048], to[2048], dir[2048];
    file_path(c, f->d, false, from, sizeof from);
    file_path(c, f->d, true, to, sizeof to);
    snprintf(dir, sizeof dir, "%s", to);
    *strrchr(dir, '/') = '\0';
    if (fs_mkdir_p(dir) < 0)
        return -1;
    if (f->size == 0) { /* nothing was written: an empty file */
        int fd = open(from, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || close(fd) < 0)
            return -1;
    }
    if (rename(from, to) < 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    close(dfd);
    return rc;
}

struct cfile *files_append(struct cluster *c, struct cfile *f, const uint8_t d[SHA256_LEN],
                           uint64_t size, const void *data, size_t len, int *code, char *why,
                           size_t wl)
{
    char path[2048], hex[SHA256_HEX];
    bool added = false;
    sha256_hex(d, hex);
    if (!f) {
        if (!(f = calloc(1, sizeof *f)))
            goto oom;
        memcpy(f->d, d, SHA256_LEN);
        f->size = size;
        sha256_init(&f->sha);
        if (index_add(c, f) < 0) {
            free(f);
            goto oom;
        }
        added = true;
    }
    file_path(c, d, false, path, sizeof path);
    if (len && (write_chunk(path, f->have, data, len) < 0 || note_unsynced(c, f) < 0)) {
        int e = errno;
        log_warnx("files: cannot write %s: %s", path, store_error_text(e));
        *code = WE_STORAGE;
        snprintf(why, wl,
                 "the cluster could not store the chunk at %llu of file %.12s: %s; the %llu "
                 "bytes before it are kept, send again later",
                 (unsigned long long)f->have, hex, store_error_text(e),
                 (unsigned long long)f->have);
        if (added)
            index_del(c, f);
        return NULL;
    }
    sha256_update(&f->sha, data, len);
    f->have += len;
    f->t_ms = wall_now_ms();
    if (f->have == f->size) {
        uint8_t got[SHA256_LEN];
        sha256_final(&f->sha, got);
        if (memcmp(got, d, SHA256_LEN)) {
            char ghex[SHA256_HEX];
            sha256_hex(got, ghex);
            unlink(path);
            *code = WE_INVALID;
            snprintf(why, wl,
                     "the %llu bytes received hash to %s, not %s: the file changed while it "
                     "was sent; send it again",
                     (unsigned long long)f->size, ghex, hex);
            if (save(c, f, true) < 0)
                c->turn_failed = true;
            index_del(c, f);
            return NULL;
        }
        if ((f->size && sync_path(path) < 0) || move_done(c, f) < 0) {
            int e = errno;
            *code = WE_STORAGE;
            snprintf(why, wl, "the cluster could not keep file %.12s: %s; send it again later", hex,
                     store_error_text(e));
            c->turn_failed = true; /* the index is rebuilt from the store */
            return NULL;
        }
        f->done = true;
    }
    if (save(c, f, false) < 0)
        goto oom;
    return f;
oom:
    *code = WE_STORAGE;
    snprintf(why, wl, "the cluster is out of memory; nothing was changed, retry later");
    c->turn_failed = true;
    return NULL;
}

int files_drop(struct cluster *c, struct cfile *f)
{
    char path[2048];
    if (save(c, f, true) < 0)
        return -1;
    file_path(c, f->d, f->done, path, sizeof path);
    unlink(path);
    index_del(c, f);
    return 0;
}

ssize_t files_read(struct cluster *c, const struct cfile *f, uint64_t off, void *buf, size_t len)
{
    char path[2048];
    file_path(c, f->d, true, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    return (ssize_t)got;
}

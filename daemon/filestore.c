/*
 * filestore.c - a level's file store (filestore.h, docs/data.md "Where copies live"):
 * one copy per content under DIR/XX/HASH, a file being received under DIR/part/HASH,
 * and one record per file in the role's table (its size, the bytes received in order,
 * their running SHA-256 state, the user it is charged to), so an upload cut by kill -9
 * goes on from the last acknowledged chunk. The files written in a loop turn are made
 * durable (fdatasync, filestore_sync) before the turn's commit, and the records are
 * committed before the replies: what was acknowledged is on disk. Several chunks of one
 * turn cost one fdatasync. Used by the cluster manager and the batch role alike.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "store/store.h"

/* The bytes charged to one user (files.user_mb). */
struct fsuser {
    char name[FILESTORE_USER_MAX];
    uint64_t bytes;
};

struct filestore {
    struct filestore_cfg cfg;
    char dir[1024], level[64];
    struct fsfile **tab;
    uint32_t cap, n;
    /* files written to in this turn, made durable before its commit (filestore_sync) */
    uint8_t (*unsynced)[SHA256_LEN];
    uint32_t nun, capun;
    struct fsuser *users;
    uint32_t nusers, capusers;
};

int filestore_each(struct filestore *fs,
                   int (*fn)(struct filestore *fs, struct fsfile *f, void *arg), void *arg)
{
    for (uint32_t i = 0; fs && i < fs->cap; i++)
        for (struct fsfile *f = fs->tab[i], *nx; f; f = nx) {
            nx = f->next; /* fn may drop f */
            int rc = fn(fs, f, arg);
            if (rc)
                return rc;
        }
    return 0;
}

static uint32_t slot(const struct filestore *fs, const uint8_t d[SHA256_LEN])
{
    uint32_t h;
    memcpy(&h, d, sizeof h);
    return h & (fs->cap - 1);
}

struct fsfile *filestore_find(struct filestore *fs, const uint8_t d[SHA256_LEN])
{
    if (!fs || !fs->cap)
        return NULL;
    for (struct fsfile *f = fs->tab[slot(fs, d)]; f; f = f->next)
        if (!memcmp(f->d, d, SHA256_LEN))
            return f;
    return NULL;
}

/* Adds f to the index (growing it): 0, or -1 (out of memory, f not added). */
static int index_add(struct filestore *fs, struct fsfile *f)
{
    if (fs->n + 1 > fs->cap) {
        uint32_t ncap = fs->cap ? fs->cap * 2 : 256;
        struct fsfile **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return -1;
        for (uint32_t i = 0; i < fs->cap; i++)
            for (struct fsfile *e = fs->tab[i], *nx; e; e = nx) {
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

static void charge(struct filestore *fs, const char *user, int64_t delta);

/* Takes f out of the index (its charge too) and frees it. */
static void index_del(struct filestore *fs, struct fsfile *f)
{
    charge(fs, f->user, -(int64_t)f->size);
    for (struct fsfile **p = &fs->tab[slot(fs, f->d)]; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            fs->n--;
            free(f);
            return;
        }
}

int filestore_parse_hash(const char *s, size_t len, uint8_t d[SHA256_LEN])
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

/* DIR/XX/HASH (done) or DIR/part/HASH (being received). */
static void file_path(const struct filestore *fs, const uint8_t d[SHA256_LEN], bool done, char *out,
                      size_t n)
{
    char hex[SHA256_HEX];
    sha256_hex(d, hex);
    if (done)
        snprintf(out, n, "%s/%.2s/%s", fs->dir, hex, hex);
    else
        snprintf(out, n, "%s/part/%s", fs->dir, hex);
}

/* The size of the file at path, or -1. */
static int64_t path_size(const char *path);

/* Buffers f's record (or its deletion): 0, or -1 (out of memory). */
static int save(struct filestore *fs, const struct fsfile *f, bool del)
{
    char hex[SHA256_HEX];
    sha256_hex(f->d, hex);
    if (del)
        return store_del(fs->cfg.store, fs->cfg.table, hex, 64);
    struct wire_buf wb;
    uint8_t st[SHA256_SAVED];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 4 + !f->done + !!f->user[0]);
    if (f->user[0]) /* files.user_mb; absent in older records: charged to nobody */
        wire_put_str(&wb, "user", f->user);
    wire_put_u64(&wb, "size", f->size);
    wire_put_u64(&wb, "have", f->have);
    wire_put_bool(&wb, "done", f->done);
    wire_put_i64(&wb, "t", f->t_ms);
    if (!f->done) {
        sha256_save(&f->sha, st);
        wire_put_bin(&wb, "sha", st, sizeof st);
    }
    int rc = store_put(fs->cfg.store, fs->cfg.table, hex, 64, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

static int64_t path_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* A stored record as a msgpack map: 0, or -1 (freed). */
static int unpack_map(msgpack_unpacked *up, const void *val, size_t vlen)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    if (wire_precheck(val, vlen) < 0 ||
        msgpack_unpack_next(up, val, vlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        up->data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(up);
        return -1;
    }
    return 0;
}

static struct fsuser *user_find(struct filestore *fs, const char *name)
{
    for (uint32_t i = 0; i < fs->nusers; i++)
        if (!strcmp(fs->users[i].name, name))
            return &fs->users[i];
    return NULL;
}

/* Adds delta bytes to user's sum (files.user_mb); "" charges nobody. A user that cannot
 * be added (out of memory) is not charged: the limit is then not enforced for it. */
static void charge(struct filestore *fs, const char *user, int64_t delta)
{
    if (!user || !*user)
        return;
    struct fsuser *u = user_find(fs, user);
    if (!u) {
        if (fs->nusers == fs->capusers) {
            uint32_t nc = fs->capusers ? fs->capusers * 2 : 16;
            void *v = realloc(fs->users, nc * sizeof *fs->users);
            if (!v)
                return;
            fs->users = v, fs->capusers = nc;
        }
        u = &fs->users[fs->nusers++];
        memset(u, 0, sizeof *u);
        snprintf(u->name, sizeof u->name, "%s", user);
    }
    u->bytes = delta < 0 && (uint64_t)-delta > u->bytes ? 0 : u->bytes + (uint64_t)delta;
}

const char *filestore_level(const struct filestore *fs)
{
    return fs->level;
}

uint64_t filestore_user_bytes(struct filestore *fs, const char *user)
{
    const struct fsuser *u = fs && user && *user ? user_find(fs, user) : NULL;
    return u ? u->bytes : 0;
}

/*
 * One stored record into the index. A record left "being received" whose whole file is
 * already in place (the move happened, its commit did not) is done; one whose partial
 * file is shorter than the bytes it counts starts again from 0.
 */
static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct filestore *fs = arg;
    msgpack_unpacked up;
    struct fsfile *f = calloc(1, sizeof *f);
    char path[2048];
    size_t sl;
    if (!f)
        return -1;
    if (filestore_parse_hash(key, klen, f->d) < 0 || unpack_map(&up, val, vlen) < 0) {
        log_warnx("files: record %.*s is not readable; skipped", (int)(klen > 64 ? 64 : klen),
                  (const char *)key);
        if (fs->cfg.skipped)
            ++*fs->cfg.skipped;
        free(f);
        return 0;
    }
    const msgpack_object *m = &up.data;
    f->size = wire_get_u64(m, "size", 0);
    f->have = wire_get_u64(m, "have", 0);
    f->done = wire_get_bool(m, "done", false);
    f->t_ms = wire_get_i64(m, "t", 0);
    wire_get_strbuf(m, "user", f->user, sizeof f->user);
    const void *st = wire_get_bin(m, "sha", &sl);
    if (f->done) { /* a sweep removed its bytes, its commit did not happen */
        file_path(fs, f->d, true, path, sizeof path);
        if (path_size(path) != (int64_t)f->size) {
            log_warnx("files: %.*s is gone from %s; its record is dropped",
                      (int)(klen > 64 ? 64 : klen), (const char *)key, path);
            msgpack_unpacked_destroy(&up);
            free(f);
            return store_del(fs->cfg.store, fs->cfg.table, key, klen) < 0 ? -1 : 0;
        }
    } else {
        file_path(fs, f->d, true, path, sizeof path);
        if (path_size(path) == (int64_t)f->size) {
            f->done = true, f->have = f->size;
        } else {
            file_path(fs, f->d, false, path, sizeof path);
            if (!st || sha256_load(&f->sha, st, sl) < 0 || f->sha.n != f->have ||
                path_size(path) < (int64_t)f->have) {
                sha256_init(&f->sha);
                f->have = 0;
            }
        }
    }
    msgpack_unpacked_destroy(&up);
    bool bad = f->have > f->size;
    if (bad || index_add(fs, f) < 0) {
        free(f);
        return bad ? 0 : -1;
    }
    charge(fs, f->user, (int64_t)f->size);
    return 0;
}

struct filestore *filestore_open(const struct filestore_cfg *cfg)
{
    char dir[2048];
    struct filestore *fs = calloc(1, sizeof *fs);
    if (!fs)
        return NULL;
    fs->cfg = *cfg;
    snprintf(fs->dir, sizeof fs->dir, "%s", cfg->dir);
    snprintf(fs->level, sizeof fs->level, "%s", cfg->level);
    fs->cfg.dir = fs->dir;
    fs->cfg.level = fs->level;
    snprintf(dir, sizeof dir, "%s/part", fs->dir);
    if (fs_mkdir_p(dir) < 0) {
        log_warn("files: cannot make %s", dir);
        filestore_destroy(&fs);
        return NULL;
    }
    if (store_iter(fs->cfg.store, fs->cfg.table, NULL, 0, load_one, fs) < 0)
        filestore_destroy(&fs);
    return fs;
}

void filestore_destroy(struct filestore **p)
{
    struct filestore *fs = p ? *p : NULL;
    if (!fs)
        return;
    for (uint32_t i = 0; i < fs->cap; i++)
        for (struct fsfile *f = fs->tab[i], *nx; f; f = nx) {
            nx = f->next;
            free(f);
        }
    free(fs->tab);
    free(fs->unsynced);
    free(fs->users);
    free(fs);
    *p = NULL;
}

/*
 * Writes all of buf at off of path (made durable by filestore_sync or at the end): 0, or
 * -1 (errno). The chunk's write-back to the disk starts at once (sync_file_range, which
 * does not wait), so the fdatasync before the turn's commit, and the one when the file
 * is whole, find most of the bytes already written: the upload does not stall on a
 * flush of everything at the end (docs/data.md "Speed").
 */
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
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE); /* a hint */
    return close(fd);
}

/* fdatasync of the file at path: 0, or -1 (errno). None with store.sync = none, as the
 * store's commits: the page cache outlives kill -9 of the role, not a system crash. */
static int sync_path(const struct filestore *fs, const char *path)
{
    if (store_sync_mode(fs->cfg.store) == STORE_SYNC_NONE)
        return 0;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1; /* moved into place: synced then */
    int rc = fdatasync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Remembers that f's partial file must be synced before this turn's commit. */
static int note_unsynced(struct filestore *fs, const struct fsfile *f)
{
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

int filestore_sync(struct filestore *fs)
{
    char path[2048];
    for (uint32_t i = 0; fs && i < fs->nun; i++) {
        file_path(fs, fs->unsynced[i], false, path, sizeof path);
        if (sync_path(fs, path) < 0) {
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
static int move_done(struct filestore *fs, const struct fsfile *f)
{
    char from[2048], to[2048], dir[2048];
    file_path(fs, f->d, false, from, sizeof from);
    file_path(fs, f->d, true, to, sizeof to);
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
    if (store_sync_mode(fs->cfg.store) == STORE_SYNC_NONE)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    close(dfd);
    return rc;
}

struct fsfile *filestore_append(struct filestore *fs, struct fsfile *f, const uint8_t d[SHA256_LEN],
                                uint64_t size, const char *user, const void *data, size_t len,
                                int *code, char *why, size_t wl)
{
    char path[2048], hex[SHA256_HEX];
    bool added = false;
    sha256_hex(d, hex);
    if (!f) {
        if (!(f = calloc(1, sizeof *f)))
            goto oom;
        memcpy(f->d, d, SHA256_LEN);
        f->size = size;
        snprintf(f->user, sizeof f->user, "%s", user ? user : "");
        sha256_init(&f->sha);
        if (index_add(fs, f) < 0) {
            free(f);
            goto oom;
        }
        charge(fs, f->user, (int64_t)f->size);
        added = true;
    }
    file_path(fs, d, false, path, sizeof path);
    if (len && (write_chunk(path, f->have, data, len) < 0 || note_unsynced(fs, f) < 0)) {
        int e = errno;
        log_warnx("files: cannot write %s: %s", path, store_error_text(e));
        *code = WE_STORAGE;
        snprintf(why, wl,
                 "%s could not store the chunk at %llu of file %.12s: %s; the %llu "
                 "bytes before it are kept, send again later",
                 fs->level, (unsigned long long)f->have, hex, store_error_text(e),
                 (unsigned long long)f->have);
        if (added)
            index_del(fs, f);
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
            if (save(fs, f, true) < 0)
                *fs->cfg.turn_failed = true;
            index_del(fs, f);
            return NULL;
        }
        if ((f->size && sync_path(fs, path) < 0) || move_done(fs, f) < 0) {
            int e = errno;
            *code = WE_STORAGE;
            snprintf(why, wl, "%s could not keep file %.12s: %s; send it again later", fs->level,
                     hex, store_error_text(e));
            *fs->cfg.turn_failed = true; /* the index is rebuilt from the store */
            return NULL;
        }
        f->done = true;
        log_info("file %.12s stored (%llu bytes)", hex, (unsigned long long)size);
    }
    if (save(fs, f, false) < 0)
        goto oom;
    return f;
oom:
    *code = WE_STORAGE;
    snprintf(why, wl, "%s is out of memory; nothing was changed, retry later", fs->level);
    *fs->cfg.turn_failed = true;
    return NULL;
}

int filestore_charge(struct filestore *fs, struct fsfile *f, const char *user)
{
    if (!f || !user || !*user || f->user[0])
        return 0;
    snprintf(f->user, sizeof f->user, "%s", user);
    charge(fs, "", -(int64_t)f->size);
    charge(fs, f->user, (int64_t)f->size);
    return save(fs, f, false);
}

int filestore_drop(struct filestore *fs, struct fsfile *f)
{
    char path[2048];
    if (save(fs, f, true) < 0)
        return -1;
    file_path(fs, f->d, f->done, path, sizeof path);
    unlink(path);
    index_del(fs, f);
    return 0;
}

ssize_t filestore_read(struct filestore *fs, const struct fsfile *f, uint64_t off, void *buf,
                       size_t len)
{
    char path[2048];
    file_path(fs, f->d, f->done, path, sizeof path);
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

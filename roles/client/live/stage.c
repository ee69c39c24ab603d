/*
 * stage.c - a node's file lists, cache, placement and collection (stage.h, issue 26).
 */
#include "roles/client/live/stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/datapath.h"
#include "lib/fsutil.h"
#include "lib/sha256.h"

struct stage_centry {
    char hex[65];
    uint64_t size, tick;
};

/* ---- file lists ---- */

/* The entries of in into *v (*nv of them): inputs, or a checkpoint's files. */
static int take_list(struct stage_in **v, uint32_t *nv, const msgpack_object *in, char *bad,
                     size_t n)
{
    if (!in || in->type != MSGPACK_OBJECT_ARRAY || !in->via.array.size)
        return 0;
    if (!(*v = calloc(in->via.array.size, sizeof **v)))
        return -1;
    for (uint32_t i = 0; i < in->via.array.size; i++) {
        const msgpack_object *e = &in->via.array.ptr[i];
        size_t nl, hl;
        const char *name = wire_get_str(e, "name", &nl), *h = wire_get_str(e, "hash", &hl);
        const char *why = name ? datapath_problem(name, nl) : "is missing";
        if (!why && !(h && sha256_is_hex(h, hl)))
            why = "has no valid hash";
        if (why) {
            if (bad && !*bad)
                snprintf(bad, n, "invalid task: input '%.*s' %s", (int)(nl > 100 ? 100 : nl),
                         name ? name : "", why);
            return 0;
        }
        struct stage_in *x = &(*v)[*nv];
        if (!(x->name = strndup(name, nl)))
            return -1;
        memcpy(x->hex, h, 64);
        x->hex[64] = '\0';
        x->size = wire_get_u64(e, "size", 0);
        ++*nv;
    }
    return 0;
}

static uint32_t u32(const msgpack_object *m, const char *key)
{
    uint64_t v = wire_get_u64(m, key, 0);
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int take_kept(struct stage_files *f, const msgpack_object *k)
{
    if (!k || k->type != MSGPACK_OBJECT_ARRAY)
        return 0;
    f->collected = true;
    if (!k->via.array.size)
        return 0;
    if (!(f->out = calloc(k->via.array.size, sizeof *f->out)))
        return -1;
    for (uint32_t i = 0; i < k->via.array.size; i++) {
        const msgpack_object *e = &k->via.array.ptr[i];
        size_t hl;
        const char *h = wire_get_str(e, "hash", &hl);
        struct stage_out *o = &f->out[f->nout];
        if (!h || !sha256_is_hex(h, hl) || !(o->name = wire_get_strdup(e, "name")))
            continue;
        memcpy(o->hex, h, 64);
        o->size = wire_get_u64(e, "size", 0);
        f->nout++;
    }
    return 0;
}

int stage_files_take(struct stage_files **out, const msgpack_object *m, char *bad, size_t n)
{
    const msgpack_object *in = wire_get(m, "inputs"), *g = wire_get(m, "outputs");
    *out = NULL;
    if (!in && !g)
        return 0;
    struct stage_files *f = calloc(1, sizeof *f);
    if (!f || take_list(&f->in, &f->nin, in, bad, n) < 0 || take_kept(f, wire_get(m, "kept")) < 0 ||
        take_list(&f->ck, &f->nck, wire_get(m, "ckpt"), bad, n) < 0)
        goto oom;
    f->ckpt_s = u32(m, "checkpoint_s");
    f->ckpt_mb = u32(m, "ckpt_mb");
    f->ck_issue = u32(m, "ckpt_issue");
    f->ck_par = wire_get(m, "ckpt_run") != NULL; /* a parallel job's rank */
    f->ck_run = u32(m, "ckpt_run");
    f->ck_gen = wire_get(m, "ckpt_gen") ? (int64_t)u32(m, "ckpt_gen") : -1;
    uint32_t ng = g && g->type == MSGPACK_OBJECT_ARRAY ? g->via.array.size : 0;
    if (ng && !(f->globs = calloc(ng, sizeof *f->globs)))
        goto oom;
    for (uint32_t i = 0; i < ng; i++) {
        const msgpack_object *s = &g->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR)
            continue;
        if (!(f->globs[f->nglobs] = strndup(s->via.str.ptr, s->via.str.size)))
            goto oom;
        f->nglobs++;
    }
    *out = f;
    return 0;
oom:
    stage_files_free(&f);
    return -1;
}

uint32_t stage_files_nfields(const struct stage_files *f)
{
    return f ? 2 + f->collected + (f->ckpt_s ? 4 : 0) : 0;
}

/* One file of a list: {name, hash, size} (inputs and kept outputs alike). */
static void pack_file(struct wire_buf *wb, const char *name, const char *hex, uint64_t size)
{
    wire_pack_map(wb, 3);
    wire_put_str(wb, "name", name);
    wire_put_str(wb, "hash", hex);
    wire_put_u64(wb, "size", size);
}

static void pack_list(struct wire_buf *wb, const char *key, const struct stage_in *v, uint32_t n)
{
    wire_put_key(wb, key);
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++)
        pack_file(wb, v[i].name, v[i].hex, v[i].size);
}

void stage_pack_files(struct wire_buf *wb, const char *key, const struct stage_out *v, uint32_t n)
{
    wire_put_key(wb, key);
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++)
        pack_file(wb, v[i].name, v[i].hex, v[i].size);
}

void stage_files_pack(const struct stage_files *f, struct wire_buf *wb)
{
    if (!f)
        return;
    pack_list(wb, "inputs", f->in, f->nin);
    if (f->ckpt_s) {
        wire_put_u64(wb, "checkpoint_s", f->ckpt_s);
        wire_put_u64(wb, "ckpt_mb", f->ckpt_mb);
        wire_put_u64(wb, "ckpt_issue", f->ck_issue);
        pack_list(wb, "ckpt", f->ck, f->nck);
    }
    wire_put_strv(wb, "outputs", f->globs, f->nglobs);
    if (!f->collected)
        return;
    stage_pack_files(wb, "kept", f->out, f->nout);
}

void stage_files_free(struct stage_files **fp)
{
    struct stage_files *f = *fp;
    if (!f)
        return;
    for (uint32_t i = 0; i < f->nin; i++)
        free(f->in[i].name);
    for (uint32_t i = 0; i < f->nglobs; i++)
        free(f->globs[i]);
    for (uint32_t i = 0; i < f->nout; i++)
        free(f->out[i].name);
    for (uint32_t i = 0; i < f->nck; i++)
        free(f->ck[i].name);
    for (uint32_t i = 0; f->snap && i < f->nsnap; i++)
        free(f->snap[i].name);
    free(f->snap);
    free(f->ck);
    free(f->in);
    free(f->globs);
    free(f->out);
    free(f);
    *fp = NULL;
}

/* ---- the cache ---- */

void stage_cache_path(const struct stage_cache *c, const char *hex, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", c->dir, hex);
}

void stage_cache_part(const struct stage_cache *c, const char *hex, char *buf, size_t n)
{
    snprintf(buf, n, "%s/part/%s", c->dir, hex);
}

static int centry_add(struct stage_cache *c, const char *hex, uint64_t size, uint64_t tick)
{
    if (c->n == c->capn) {
        uint32_t nc = c->capn ? c->capn * 2 : 64;
        struct stage_centry *v = realloc(c->e, nc * sizeof *v);
        if (!v)
            return -1;
        c->e = v, c->capn = nc;
    }
    snprintf(c->e[c->n].hex, sizeof c->e[c->n].hex, "%s", hex);
    c->e[c->n].size = size;
    c->e[c->n].tick = tick;
    c->n++;
    c->used += size;
    return 0;
}

int stage_cache_open(struct stage_cache *c, const char *state_dir, uint64_t cap_bytes)
{
    char part[700];
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s/cache", state_dir);
    c->cap = cap_bytes;
    snprintf(part, sizeof part, "%s/part", c->dir);
    if (fs_mkdir_p(part) < 0)
        return -1;
    DIR *d = opendir(part); /* a download cut by a restart goes on; one a week old goes */
    time_t old = time(NULL) - 7 * 86400;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_mtime < old)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
    if (!(d = opendir(c->dir)))
        return -1;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (!sha256_is_hex(e->d_name, strlen(e->d_name)) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        uint64_t t = (uint64_t)st.st_mtime;
        if (t > c->tick)
            c->tick = t;
        if (centry_add(c, e->d_name, (uint64_t)st.st_size, t) < 0)
            break;
    }
    closedir(d);
    return 0;
}

void stage_cache_close(struct stage_cache *c)
{
    free(c->e);
    c->e = NULL;
    c->n = c->capn = 0;
}

bool stage_cache_has(struct stage_cache *c, const char *hex, uint64_t size)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].hex, hex)) {
            c->e[i].tick = ++c->tick;
            return c->e[i].size == size;
        }
    return false;
}

static bool kept(const char *hex, char *const *keep, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (keep[i] && !strcmp(keep[i], hex))
            return true;
    return false;
}

int stage_cache_add(struct stage_cache *c, const char *hex, uint64_t size, char *const *keep,
                    uint32_t nkeep)
{
    char from[800], to[800];
    stage_cache_part(c, hex, from, sizeof from);
    stage_cache_path(c, hex, to, sizeof to);
    if (chmod(from, 0444) < 0 || rename(from, to) < 0 || centry_add(c, hex, size, ++c->tick) < 0)
        return -1;
    while (c->used > c->cap) { /* least recently used first, never one a task waits for */
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < c->n; i++)
            if (!kept(c->e[i].hex, keep, nkeep) && strcmp(c->e[i].hex, hex) &&
                (best == UINT32_MAX || c->e[i].tick < c->e[best].tick))
                best = i;
        if (best == UINT32_MAX)
            break;
        stage_cache_path(c, c->e[best].hex, to, sizeof to);
        unlink(to);
        c->used -= c->e[best].size;
        c->e[best] = c->e[--c->n];
    }
    return 0;
}

/* ---- placing and collecting ---- */

/* Copies from to a new file to (mode 0644): 0, or -1 (errno). */
int stage_copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0 ||
        (out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        goto done;
    for (off_t left = st.st_size; left > 0;) {
        ssize_t k = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
        if (k <= 0) {
            char buf[1 << 16]; /* a file system without copy_file_range */
            k = read(in, buf, sizeof buf);
            if (k <= 0 || write(out, buf, (size_t)k) != k)
                goto done;
        }
        left -= k;
    }
    rc = 0;
done:;
    int e = errno;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    errno = e;
    return rc;
}

/* The directories of workdir/name above its last component, made (0755). */
int stage_make_parents(const char *workdir, const char *name)
{
    char p[2200];
    size_t wl = (size_t)snprintf(p, sizeof p, "%s/%s", workdir, name);
    for (size_t i = strlen(workdir) + 1; i < wl; i++)
        if (p[i] == '/') {
            p[i] = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -1;
            p[i] = '/';
        }
    return 0;
}

int stage_place(const struct stage_cache *c, const struct stage_files *f, const char *workdir,
                bool link_ok, char *err, size_t n)
{
    char from[800], to[2200];
    for (uint32_t i = 0; f && i < f->nin; i++) {
        const struct stage_in *x = &f->in[i];
        stage_cache_path(c, x->hex, from, sizeof from);
        snprintf(to, sizeof to, "%s/%s", workdir, x->name);
        if (stage_make_parents(workdir, x->name) < 0 ||
            ((!link_ok || link(from, to) < 0) && stage_copy_file(from, to) < 0)) {
            snprintf(err, n, "cannot place input '%.200s' in the working directory: %s", x->name,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

int stage_hash_file(const char *path, char hex[65], uint64_t *size)
{
    return sha256_file(path, O_NOFOLLOW, hex, size);
}

/* nftw has no argument: the collection in progress (one at a time, one thread). */
static struct {
    struct stage_files *f;
    size_t base;
    const char *outbox;
    char *note, *err;
    size_t nn, n;
} col;

static bool matches(const struct stage_files *f, const char *rel)
{
    for (uint32_t i = 0; i < f->nglobs; i++)
        if (fnmatch(f->globs[i], rel, FNM_PATHNAME) == 0)
            return true;
    return false;
}

static int collect_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    const char *rel = path + col.base;
    if (strlen(path) <= col.base || !strcmp(rel, ".stdin") || !matches(col.f, rel) ||
        !strncmp(rel, CKPT_DIRNAME "/", sizeof CKPT_DIRNAME) || /* never an output */
        (type != FTW_F && type != FTW_SL))
        return 0;
    if (type == FTW_SL || datapath_problem(rel, strlen(rel))) {
        size_t l = strlen(col.note);
        snprintf(col.note + l, col.nn - l, "%soutput '%.200s' is a symbolic link: not kept",
                 l ? "; " : "", rel);
        return 0;
    }
    struct stage_out *o = &col.f->out[col.f->nout];
    char to[800];
    if (stage_hash_file(path, o->hex, &o->size) < 0)
        goto fail;
    snprintf(to, sizeof to, "%s/%s", col.outbox, o->hex);
    if (link(path, to) < 0 && errno != EEXIST && stage_copy_file(path, to) < 0 && errno != EEXIST)
        goto fail;
    if (!(o->name = strdup(rel)))
        goto fail;
    col.f->nout++;
    return col.f->nout == WIRE_FILE_OUTPUTS_MAX * 16 ? 1 : 0;
fail:
    snprintf(col.err, col.n, "cannot keep output '%.200s': %s", rel, strerror(errno));
    return -1;
}

int stage_collect(struct stage_files *f, const char *workdir, const char *outbox, char *note,
                  size_t nn, char *err, size_t n)
{
    *note = '\0';
    f->collected = true;
    if (!f->nglobs)
        return 0;
    if (fs_mkdir_p(outbox) < 0) {
        snprintf(err, n, "cannot make %s: %s", outbox, strerror(errno));
        return -1;
    }
    if (!f->out && !(f->out = calloc(WIRE_FILE_OUTPUTS_MAX * 16, sizeof *f->out))) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    col.f = f, col.base = strlen(workdir) + 1, col.outbox = outbox;
    col.note = note, col.nn = nn, col.err = err, col.n = n;
    return nftw(workdir, collect_one, 16, FTW_PHYS) < 0 ? -1 : 0;
}

int stage_result_files(void **res, size_t *len, const struct stage_files *f, const char *note)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (!*res || msgpack_unpack_next(&up, *res, *len, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return -1;
    }
    const msgpack_object_map *m = &up.data.via.map;
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, m->size + 1 + (note && *note));
    for (uint32_t i = 0; i < m->size; i++) {
        wire_pack_object(&wb, &m->ptr[i].key);
        wire_pack_object(&wb, &m->ptr[i].val);
    }
    stage_pack_files(&wb, "files", f->out, f->nout);
    if (note && *note)
        wire_put_str(&wb, "files_note", note);
    msgpack_unpacked_destroy(&up);
    void *n = malloc(wb.sb.size);
    if (!n) {
        wire_buf_free(&wb);
        return -1;
    }
    memcpy(n, wb.sb.data, wb.sb.size);
    free(*res);
    *res = n;
    *len = wb.sb.size;
    wire_buf_free(&wb);
    return 0;
}

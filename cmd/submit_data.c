/*
 * submit_data.c - the input files of gridnode submit (submit_data.h): expansion of the
 * --input arguments, hashing, chunked and resumable upload (FILE_HAVE, FILE_PUT), and
 * the SUBMIT fields that name them. Cut-through (docs/data.md "Speed"): where the
 * endpoint allows it (FILE_STATE "early", a cluster manager) only a file's first chunk
 * goes before the SUBMIT, and the rest after it while the nodes already read it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/submit_data.h"
#include "lib/datapath.h"
#include "lib/sha256.h"
#include "roles/cluster/app.h"

#define MAX_DEPTH 32

struct sd_in {
    char *path, *name; /* local file, name in the task's directory */
    char hex[SHA256_HEX];
    uint64_t size;
    int64_t task; /* -1: every task */
    bool pending; /* cut-through: its first chunk is there, the rest follows the SUBMIT */
};

struct submit_data {
    struct sd_in *in;
    uint32_t n, cap;
    char *const *outputs;
    int nout;
    const char *user;
};

static int add(struct submit_data *sd, const char *path, const char *name, int64_t task)
{
    if (sd->n == sd->cap) {
        uint32_t nc = sd->cap ? sd->cap * 2 : 16;
        struct sd_in *v = realloc(sd->in, nc * sizeof *v);
        if (!v)
            return -1;
        sd->in = v, sd->cap = nc;
    }
    struct sd_in *x = &sd->in[sd->n];
    memset(x, 0, sizeof *x);
    x->path = strdup(path), x->name = strdup(name), x->task = task;
    if (!x->path || !x->name) {
        free(x->path), free(x->name);
        return -1;
    }
    sd->n++;
    return 0;
}

static const char *base(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *b = path + n;
    while (b > path && b[-1] != '/')
        b--;
    return b;
}

/* A directory taken whole: each regular file under it as name/relative path. */
static int add_dir(struct cli *c, struct submit_data *sd, const char *path, const char *name,
                   int depth)
{
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d || depth > MAX_DEPTH) {
        fprintf(stderr, "%s: --input %s: %s\n", c->prog, path,
                d ? "directories nested too deep" : strerror(errno));
        if (d)
            closedir(d);
        return -1;
    }
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p, *nm;
        struct stat st;
        if (asprintf(&p, "%s/%s", path, e->d_name) < 0)
            return closedir(d), -1;
        if (asprintf(&nm, "%s/%s", name, e->d_name) < 0) {
            free(p);
            return closedir(d), -1;
        }
        if (stat(p, &st) < 0) {
            fprintf(stderr, "%s: --input %s: %s\n", c->prog, p, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = add_dir(c, sd, p, nm, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            rc = add(sd, p, nm, -1);
        }
        free(p), free(nm);
    }
    closedir(d);
    return rc;
}

/* One --input argument into entries. */
static int expand(struct cli *c, struct submit_data *sd, const char *arg, uint64_t ntasks)
{
    struct stat st;
    if (strstr(arg, "{i}")) {
        for (uint64_t i = 0; i < ntasks; i++) {
            char *p = app_expand(arg, 0, (uint32_t)i, (uint32_t)ntasks);
            int bad = !p || stat(p, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : -1;
            if (bad) {
                fprintf(stderr, "%s: --input %s: the file of task %llu, %s: %s\n", c->prog, arg,
                        (unsigned long long)i, p ? p : "?",
                        bad < 0 ? "not a regular file" : strerror(bad));
                free(p);
                return -1;
            }
            int rc = add(sd, p, base(p), (int64_t)i);
            free(p);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    if (stat(arg, &st) < 0) {
        fprintf(stderr, "%s: --input %s: %s\n", c->prog, arg, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return add_dir(c, sd, arg, base(arg), 0);
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: --input %s: not a regular file or a directory\n", c->prog, arg);
        return -1;
    }
    return add(sd, arg, base(arg), -1);
}

int submit_data_hash(const char *path, char hex[65], uint64_t *size)
{
    return sha256_file(path, 0, hex, size);
}

/* One FILE_HAVE exchange; its reply's "have", "done", "early" (the endpoint takes a
 * SUBMIT naming the file before it is whole) and "wait_ms" (another user's upload of
 * the same bytes is under way there: ask again after it; 0 none). 0; 1 (an ERROR,
 * printed); -1 (no reply, printed). */
static int exchange(struct cli *c, struct wire_buf *wb, uint64_t *have, bool *done, bool *early,
                    uint64_t *wait)
{
    struct cli_reply r;
    int rc = cli_call(c, wb, 1, &r);
    if (rc != 0)
        return rc;
    *have = wire_get_u64(r.msg.root, "have", 0);
    *done = wire_get_bool(r.msg.root, "done", false);
    *early = wire_get_bool(r.msg.root, "early", false);
    *wait = wire_get_u64(r.msg.root, "wait_ms", 0);
    cli_reply_free(&r);
    return 0;
}

/* The user the upload under way is charged to (files.user_mb), NULL: none named. */
static const char *upload_user;

/* Sends the FILE_PUT of [off, off+len) of fd as request id: 0, or -1 (printed). */
static int put_chunk(struct cli *c, int fd, const char *path, const char *hex, uint64_t size,
                     uint64_t off, size_t len, uint64_t id, uint8_t *buf)
{
    ssize_t got = pread(fd, buf, len, (off_t)off);
    if (got != (ssize_t)len) {
        fprintf(stderr, "%s: --input %s: %s\n", c->prog, path,
                got < 0 ? strerror(errno) : "the file became shorter while it was sent");
        return -1;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_FILE_PUT, id, 4 + (upload_user != NULL));
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", size);
    wire_put_u64(&wb, "off", off);
    if (upload_user)
        wire_put_str(&wb, "user", upload_user);
    wire_put_bin(&wb, "data", buf, len);
    int rc = cli_send(c, &wb);
    wire_buf_free(&wb);
    if (rc < 0)
        cli_report(c);
    return rc;
}

/*
 * The chunks from *have on up to byte stop (the file's size: all of it),
 * UPLOAD_INFLIGHT in flight (the cluster takes them in order, and one connection keeps
 * the order). A reply that says the cluster holds less than its chunk's end (another
 * uploader, a lost chunk) restarts from what it holds. 0; 1 (an ERROR reply or a file
 * that cannot be read, printed); -1 (a reply did not come: the connection was lost,
 * printed; the caller may ask FILE_HAVE and go on); 2 (the endpoint says wait: another
 * user took over this upload after it stalled, the caller asks FILE_HAVE later).
 */
#define UPLOAD_INFLIGHT 8
static int put_all(struct cli *c, int fd, const char *path, const char *hex, uint64_t size,
                   uint64_t stop, uint64_t *have, bool *done, uint8_t *buf)
{
    static uint64_t seq = 100;
    uint64_t ids[UPLOAD_INFLIGHT], ends[UPLOAD_INFLIGHT], next = *have;
    int nfl = 0, rc = 0;
    bool tty = isatty(2) && size >= (8u << 20) && stop == size;
    while (rc == 0 && !*done && *have < stop) {
        while (nfl < UPLOAD_INFLIGHT && next < stop) {
            size_t len = size - next < WIRE_FILE_CHUNK ? (size_t)(size - next) : WIRE_FILE_CHUNK;
            if (put_chunk(c, fd, path, hex, size, next, len, ids[nfl] = ++seq, buf) < 0)
                return cli_lost(c) ? -1 : 1;
            ends[nfl++] = next += len;
        }
        if (nfl == 0) {
            fprintf(stderr, "%s: --input %s: the cluster took every byte but not the file\n",
                    c->prog, path);
            return 1;
        }
        struct cli_reply r;
        uint64_t end = ends[0];
        int a = cli_await(c, ids[0], &r);
        memmove(ids, ids + 1, sizeof ids[0] * (UPLOAD_INFLIGHT - 1));
        memmove(ends, ends + 1, sizeof ends[0] * (UPLOAD_INFLIGHT - 1));
        nfl--;
        if (a != 0) {
            rc = a;
            break;
        }
        *have = wire_get_u64(r.msg.root, "have", 0);
        *done = wire_get_bool(r.msg.root, "done", false);
        bool wait = wire_get_u64(r.msg.root, "wait_ms", 0) > 0;
        cli_reply_free(&r);
        if (wait) /* the rest in flight are told the same */
            rc = 2;
        if (!*done && (wait || *have < end)) { /* out of step: the rest go again from *have */
            for (; nfl > 0; nfl--) {
                if (cli_await(c, ids[0], &r) == 0)
                    cli_reply_free(&r);
                memmove(ids, ids + 1, sizeof ids[0] * (UPLOAD_INFLIGHT - 1));
            }
            next = *have;
        }
        if (tty)
            fprintf(stderr, "\r%s: uploading %s: %llu of %llu MB", c->prog, base(path),
                    (unsigned long long)(*have >> 20), (unsigned long long)(size >> 20));
    }
    if (tty)
        fprintf(stderr, "\n");
    return rc;
}

/* FILE_HAVE of file x: 0 with *have, *done, *early, *wait set; 1 (ERROR) or -1 (no reply). */
static int have_of(struct cli *c, const char *user, const char *hex, uint64_t size, uint64_t *have,
                   bool *done, bool *early, uint64_t *wait)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_FILE_HAVE, 1, 2 + (user != NULL));
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", size);
    if (user) /* whom the file is charged to (files.user_mb) */
        wire_put_str(&wb, "user", user);
    int rc = exchange(c, &wb, have, done, early, wait);
    wire_buf_free(&wb);
    return rc;
}

/* How long a user waits for another user's upload of the same bytes (each wait the
 * endpoint's wait_ms, about 1 s): past it, the submission fails naming why. The
 * endpoint gives a stalled upload over after 60 s (files.upload_wait_s at a cluster). */
#define UPLOAD_WAIT_MAX_MS (30 * 60 * 1000)

/*
 * Uploads the file at path from what the endpoint holds, up to byte stop (size: all of
 * it; with early set, only the first chunk when the endpoint takes a SUBMIT naming a
 * file before it is whole, *pending then set). A reply that does not come (the endpoint
 * restarted, the connection was lost) is retried from what the endpoint holds, `tries`
 * times. 0, or -1 (printed).
 */
static int upload(struct cli *c, const char *user, const char *path, const char *hex, uint64_t size,
                  bool early_ok, bool *pending, int tries)
{
    uint64_t have, wait, waited = 0;
    bool done, early;
    int rc = -1;
    uint8_t *buf = NULL;
    int fd = -1;
    if (pending)
        *pending = false;
    for (int a = 0; (rc < 0 || rc == 2) && a <= tries; a += rc != 2) {
        if (a && rc != 2)
            fprintf(stderr, "%s: --input %s: going on with the upload (try %d of %d)\n", c->prog,
                    path, a, tries);
        if ((rc = have_of(c, user, hex, size, &have, &done, &early, &wait)) != 0 || done)
            continue;
        if (wait) { /* another user is sending the same bytes there: theirs will serve */
            if (waited == 0)
                fprintf(stderr,
                        "%s: --input %s: another user's upload of the same file is under way "
                        "at the endpoint; waiting for it\n",
                        c->prog, path);
            if ((waited += wait) > UPLOAD_WAIT_MAX_MS) {
                fprintf(stderr,
                        "%s: --input %s: another user's upload of the same file has been under "
                        "way for %llu minutes; try again later\n",
                        c->prog, path, (unsigned long long)(waited / 60000));
                rc = 1;
                break;
            }
            usleep((useconds_t)(wait > 10000 ? 10000 : wait) * 1000);
            rc = 2;
            continue;
        }
        if (!buf && !(buf = malloc(WIRE_FILE_CHUNK))) {
            rc = 1;
            break;
        }
        if (fd < 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            fprintf(stderr, "%s: --input %s: %s\n", c->prog, path, strerror(errno));
            rc = 1;
            break;
        }
        /* cut-through: the first chunk makes the file known; the rest after the SUBMIT */
        uint64_t stop = early_ok && early && size > WIRE_FILE_CHUNK ? WIRE_FILE_CHUNK : size;
        rc = put_all(c, fd, path, hex, size, stop > have ? stop : have, &have, &done, buf);
        if (rc == 0 && pending)
            *pending = !done;
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc == 0 ? 0 : -1;
}

int submit_data_upload(struct cli *c, const char *user, const char *path, const char *hex,
                       uint64_t size)
{
    upload_user = user;
    return upload(c, user, path, hex, size, false, NULL, 0);
}

int submit_data_prepare(struct cli *c, const char *user, char *const *inputs, int nin,
                        char *const *outputs, int nout, uint64_t ntasks, struct submit_data **out)
{
    *out = NULL;
    if (nin == 0 && nout == 0)
        return 0;
    struct submit_data *sd = calloc(1, sizeof *sd);
    if (!sd)
        return -1;
    sd->outputs = outputs, sd->nout = nout, sd->user = user;
    upload_user = user;
    for (int i = 0; i < nout; i++) {
        const char *bad = datapath_problem(outputs[i], strlen(outputs[i]));
        if (bad) {
            fprintf(stderr, "%s: --output '%s' %s\n", c->prog, outputs[i], bad);
            goto fail;
        }
    }
    for (int i = 0; i < nin; i++)
        if (expand(c, sd, inputs[i], ntasks) < 0)
            goto fail;
    if (sd->n > WIRE_FILE_INPUTS_MAX) {
        fprintf(stderr, "%s: --input names %u files; a job takes at most %u\n", c->prog, sd->n,
                WIRE_FILE_INPUTS_MAX);
        goto fail;
    }
    if (sd->n && cli_keep(c) < 0)
        goto fail;
    for (uint32_t i = 0; i < sd->n; i++) {
        struct sd_in *x = &sd->in[i];
        const char *bad = datapath_problem(x->name, strlen(x->name));
        if (bad) {
            fprintf(stderr, "%s: --input %s: the name '%s' %s\n", c->prog, x->path, x->name, bad);
            goto fail;
        }
        if (submit_data_hash(x->path, x->hex, &x->size) < 0) {
            fprintf(stderr, "%s: --input %s: %s\n", c->prog, x->path, strerror(errno));
            goto fail;
        }
        bool seen = false; /* one upload per content */
        for (uint32_t k = 0; k < i && !seen; k++)
            seen = !strcmp(sd->in[k].hex, x->hex);
        if (!seen && upload(c, user, x->path, x->hex, x->size, true, &x->pending, 0) < 0)
            goto fail;
    }
    *out = sd;
    return 0;
fail:
    submit_data_free(&sd);
    cli_unkeep(c);
    return -1;
}

int submit_data_finish(struct cli *c, struct submit_data *sd, uint64_t job, uint64_t tries)
{
    int rc = 0;
    upload_user = sd ? sd->user : NULL;
    for (uint32_t i = 0; sd && i < sd->n; i++) {
        struct sd_in *x = &sd->in[i];
        if (!x->pending)
            continue;
        x->pending = false;
        if (upload(c, sd->user, x->path, x->hex, x->size, false, NULL, (int)tries) == 0)
            continue;
        fprintf(stderr,
                "%s: job %llu was submitted while its input %s was uploaded, and that upload "
                "did not finish: the job's tasks fail naming the file once the cluster gets "
                "no chunk of it for files.upload_wait_s; cancel it (gridnode cancel %llu) "
                "and submit again\n",
                c->prog, (unsigned long long)job, x->path, (unsigned long long)job);
        rc = -1;
    }
    return rc;
}

uint32_t submit_data_nfields(const struct submit_data *sd)
{
    return sd ? (sd->n > 0) + (sd->nout > 0) : 0;
}

void submit_data_put(struct wire_buf *wb, const struct submit_data *sd)
{
    if (!sd)
        return;
    if (sd->n) {
        wire_put_key(wb, "inputs");
        wire_pack_array(wb, sd->n);
        for (uint32_t i = 0; i < sd->n; i++) {
            const struct sd_in *x = &sd->in[i];
            wire_pack_map(wb, 3 + (x->task >= 0));
            wire_put_str(wb, "name", x->name);
            wire_put_str(wb, "hash", x->hex);
            wire_put_u64(wb, "size", x->size);
            if (x->task >= 0)
                wire_put_u64(wb, "task", (uint64_t)x->task);
        }
    }
    if (sd->nout)
        wire_put_strv(wb, "outputs", sd->outputs, (uint32_t)sd->nout);
}

void submit_data_free(struct submit_data **sdp)
{
    struct submit_data *sd = sdp ? *sdp : NULL;
    if (!sd)
        return;
    for (uint32_t i = 0; i < sd->n; i++)
        free(sd->in[i].path), free(sd->in[i].name);
    free(sd->in);
    free(sd);
    *sdp = NULL;
}

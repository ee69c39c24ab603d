/*
 * fetch.c - `gridnode fetch JOB [DIR]` (issue 26, docs/data.md): every finished task's
 * kept output files downloaded into DIR/TASK/FILE in chunks (FILE_GET, a few in flight),
 * each checked against its SHA-256 before it takes its name; a file already there with
 * the right hash is skipped and a partial download (DIR/TASK/.FILE.part) goes on where
 * it stopped, so running it again finishes what an interrupted run left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "cmd/fetch.h"
#include "lib/datapath.h"
#include "lib/sha256.h"

#define INFLIGHT 4

static const char usage[] =
    "usage: gridnode fetch [options] JOB [DIR]\n"
    "\n"
    "Downloads the output files the tasks of job JOB kept (submit --output GLOB) into\n"
    "DIR/TASK/FILE (DIR: the current directory). Each file is checked against its\n"
    "SHA-256 before it takes its name. A file already there with the right content is\n"
    "skipped, and a download cut short goes on where it stopped: run it again after an\n"
    "interruption, or once more tasks have finished. Only the job's owner (and the\n"
    "administrators) may fetch it. Progress is shown on a terminal for large files.\n"
    "`gridnode job JOB --output` lists the files with their sizes.\n"
    "Exit status: 0 every kept file is here, 1 an error (the others are still fetched).\n";

struct stats {
    uint64_t files, bytes, skipped, failed;
};

static int mkdirs(const char *path)
{
    char p[4200];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return 0;
}

/* Hashes the first bytes of fd (all of it) into s: its size, or -1. */
static int64_t hash_fd(int fd, struct sha256 *s)
{
    static uint8_t buf[1 << 16];
    ssize_t r;
    sha256_init(s);
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            sha256_update(s, buf, (size_t)r);
    return r < 0 ? -1 : (int64_t)s->n;
}

static bool same_file(const char *path, const char *hex)
{
    struct sha256 s;
    uint8_t d[SHA256_LEN];
    char h[SHA256_HEX];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    int64_t n = hash_fd(fd, &s);
    close(fd);
    if (n < 0)
        return false;
    sha256_final(&s, d);
    sha256_hex(d, h);
    return !strcmp(h, hex);
}

/* Sends the FILE_GET for [off, off+len) of the file as request id. */
static int ask(struct cli *c, uint64_t id, uint64_t job, uint64_t idx, const char *hex,
               uint64_t off, uint64_t len)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_FILE_GET, id, 5);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "job", job);
    wire_put_u64(&wb, "idx", idx);
    wire_put_u64(&wb, "off", off);
    wire_put_u64(&wb, "len", len);
    int rc = cli_send(c, &wb);
    wire_buf_free(&wb);
    if (rc < 0)
        cli_report(c);
    return rc;
}

/*
 * Downloads one file into part (appending to what it holds), a few chunks in flight,
 * hashing as it goes. 0 when whole and right, -1 (printed).
 */
static int download(struct cli *c, uint64_t job, uint64_t idx, const char *hex, uint64_t size,
                    const char *part, const char *shown)
{
    static uint64_t next_id = 1;
    struct sha256 s;
    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    int64_t have = fd < 0 ? -1 : hash_fd(fd, &s);
    if (have < 0 || (uint64_t)have > size) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, part, have < 0 ? strerror(errno) : "too long");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint64_t got = (uint64_t)have, asked = got, ids[INFLIGHT];
    int nfl = 0, rc = 0;
    bool tty = isatty(2) && size >= (8u << 20);
    while (rc == 0 && got < size) {
        while (nfl < INFLIGHT && asked < size) {
            uint64_t len = size - asked < WIRE_FILE_CHUNK ? size - asked : WIRE_FILE_CHUNK;
            if (ask(c, ids[nfl] = next_id++, job, idx, hex, asked, len) < 0)
                return close(fd), -1;
            nfl++;
            asked += len;
        }
        struct cli_reply r;
        int a = cli_await(c, ids[0], &r);
        memmove(ids, ids + 1, sizeof ids[0] * (INFLIGHT - 1));
        nfl--;
        if (a != 0) {
            rc = -1;
            break;
        }
        size_t len;
        const void *data = wire_get_bin(r.msg.root, "data", &len);
        if (wire_get_u64(r.msg.root, "off", 0) != got || !len ||
            pwrite(fd, data, len, (off_t)got) != (ssize_t)len) {
            fprintf(stderr, "%s: %s: %s\n", c->prog, shown,
                    len ? strerror(errno) : "the cluster sent no bytes");
            rc = -1;
        } else {
            sha256_update(&s, data, len);
            got += len;
        }
        cli_reply_free(&r);
        if (tty)
            fprintf(stderr, "\r%s: %s: %llu of %llu MB", c->prog, shown,
                    (unsigned long long)(got >> 20), (unsigned long long)(size >> 20));
    }
    if (tty)
        fprintf(stderr, "\n");
    for (; nfl > 0; nfl--) { /* answers to requests of a failed download */
        struct cli_reply r;
        if (cli_await(c, ids[0], &r) == 0)
            cli_reply_free(&r);
        memmove(ids, ids + 1, sizeof ids[0] * (INFLIGHT - 1));
    }
    if (fsync(fd) < 0 && rc == 0)
        rc = -1;
    close(fd);
    if (rc == 0) {
        uint8_t d[SHA256_LEN];
        char h[SHA256_HEX];
        sha256_final(&s, d);
        sha256_hex(d, h);
        if (strcmp(h, hex)) {
            fprintf(stderr,
                    "%s: %s: the bytes received hash to %.12s, not %.12s; removed, "
                    "run gridnode fetch again\n",
                    c->prog, shown, h, hex);
            unlink(part);
            rc = -1;
        }
    }
    return rc;
}

/* One kept file of task idx into dir/idx/name; flat: into dir/name (a batch role's
 * parallel job: its one element's files are named RANK/NAME, issue 26). */
static void fetch_file(struct cli *c, uint64_t job, uint64_t idx, const msgpack_object *f,
                       const char *dir, struct stats *st, bool flat)
{
    size_t nl, hl;
    const char *name = wire_get_str(f, "name", &nl), *h = wire_get_str(f, "hash", &hl);
    uint64_t size = wire_get_u64(f, "size", 0);
    char shown[1200], path[4200], part[4300], hex[SHA256_HEX];
    const char *bad = name ? datapath_problem(name, nl) : "is missing";
    if (flat)
        snprintf(shown, sizeof shown, "%.*s", (int)(nl > 1100 ? 1100 : nl), name ? name : "");
    else
        snprintf(shown, sizeof shown, "%llu/%.*s", (unsigned long long)idx,
                 (int)(nl > 1100 ? 1100 : nl), name ? name : "");
    if (!bad && !(h && sha256_is_hex(h, hl)))
        bad = "has no valid hash";
    if (bad) {
        fprintf(stderr, "%s: task %llu: refusing output '%s': the name %s\n", c->prog,
                (unsigned long long)idx, shown, bad);
        st->failed++;
        return;
    }
    memcpy(hex, h, 64);
    hex[64] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, shown);
    char *slash = strrchr(path, '/');
    snprintf(part, sizeof part, "%.*s/.%s.part", (int)(slash - path), path, slash + 1);
    if (same_file(path, hex)) {
        st->skipped++;
        return;
    }
    if (mkdirs(path) < 0) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, path, strerror(errno));
        st->failed++;
        return;
    }
    if (download(c, job, idx, hex, size, part, shown) < 0 || rename(part, path) < 0) {
        st->failed++;
        return;
    }
    st->files++;
    st->bytes += size;
}

/* The tasks of one JOB page: each kept file fetched. */
static void fetch_page(struct cli *c, uint64_t job, const msgpack_object *tasks, const char *dir,
                       struct stats *st, uint64_t *unfinished, bool flat)
{
    for (uint32_t i = 0; tasks && i < tasks->via.array.size; i++) {
        const msgpack_object *t = &tasks->via.array.ptr[i], *fl = wire_get(t, "files");
        char state[16];
        wire_get_strbuf(t, "state", state, sizeof state);
        if (strcmp(state, "ok") && strcmp(state, "failed"))
            (*unfinished)++;
        for (uint32_t k = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && k < fl->via.array.size; k++)
            fetch_file(c, job, wire_get_u64(t, "idx", 0), &fl->via.array.ptr[k], dir, st, flat);
    }
}

#define PAGE 1000 /* rows a JOB_GET asks for */

/* JOB_GET of job with what (a bool field: "tasks" or "output") from row from on: 0 with
 * *r (the caller frees it), or -1 (cli_call told the user). */
static int get_page(struct cli *c, uint64_t job, const char *what, uint64_t from,
                    struct cli_reply *r)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_GET, 1, 4);
    wire_put_u64(&wb, "job", job);
    wire_put_bool(&wb, what, true);
    wire_put_u64(&wb, "from", from);
    wire_put_u64(&wb, "count", PAGE);
    int rc = cli_call(c, &wb, 1, r);
    wire_buf_free(&wb);
    return rc != 0 ? -1 : 0;
}

/* Whether the reply names a next page past *from (then *from is it). */
static bool next_page(const struct cli_reply *r, uint64_t *from)
{
    const msgpack_object *next = wire_get(r->msg.root, "next");
    if (!next || next->type != MSGPACK_OBJECT_POSITIVE_INTEGER || next->via.u64 <= *from)
        return false;
    *from = next->via.u64;
    return true;
}

/*
 * A parallel job's ranks (issue 26): their kept files come with their stdout and stderr
 * (JOB_GET output), page after page; the rank plays the task (DIR/RANK/FILE).
 */
static int fetch_ranks(struct cli *c, uint64_t job, const char *dir, struct stats *st,
                       uint64_t *unfinished)
{
    uint64_t from = 0;
    for (;;) {
        struct cli_reply r;
        if (get_page(c, job, "output", from, &r) < 0)
            return -1;
        const msgpack_object *rk = wire_get(wire_get(r.msg.root, "job"), "ranks");
        uint64_t end = from + PAGE;
        for (uint32_t i = 0; rk && rk->type == MSGPACK_OBJECT_ARRAY && i < rk->via.array.size;
             i++) {
            const msgpack_object *p = &rk->via.array.ptr[i], *fl = wire_get(p, "files");
            uint64_t rank = wire_get_u64(p, "rank", 0);
            char state[16];
            wire_get_strbuf(p, "state", state, sizeof state);
            if (rank < from || rank >= end)
                continue;
            if (strcmp(state, "exited"))
                (*unfinished)++;
            for (uint32_t k = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && k < fl->via.array.size;
                 k++)
                fetch_file(c, job, rank, &fl->via.array.ptr[k], dir, st, false);
        }
        uint64_t n = rk && rk->type == MSGPACK_OBJECT_ARRAY ? rk->via.array.size : 0;
        bool more = next_page(&r, &from);
        cli_reply_free(&r);
        if (!more && n > end) /* every rank listed, not paged: the next PAGE of them */
            from = end, more = true;
        if (!more)
            return 0;
    }
}

int cmd_fetch(int argc, char **argv)
{
    struct cli c;
    uint64_t job, from = 0, unfinished = 0;
    struct stats st = {0};
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode fetch", &argc, argv) < 0)
        return 2;
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    if (cli_u64(&c, "JOB", argv[1], &job) < 0)
        return 2;
    const char *dir = argc == 3 ? argv[2] : ".";
    if (cli_keep(&c) < 0)
        return 1;
    for (;;) {
        struct cli_reply r;
        if (get_page(&c, job, "tasks", from, &r) < 0) {
            cli_unkeep(&c);
            return 1;
        }
        const msgpack_object *pj = wire_get(r.msg.root, "job");
        char kind[16];
        wire_get_strbuf(pj, "kind", kind, sizeof kind);
        if (!wire_get(r.msg.root, "tasks") && !strcmp(kind, "parallel") &&
            wire_get(pj, "ranks")) { /* a parallel job's ranks (issue 26) */
            cli_reply_free(&r);
            if (fetch_ranks(&c, job, dir, &st, &unfinished) < 0) {
                cli_unkeep(&c);
                return 1;
            }
            break;
        }
        /* a batch role's parallel job: one element, its files named RANK/NAME */
        fetch_page(&c, job, wire_get(r.msg.root, "tasks"), dir, &st, &unfinished,
                   !strcmp(kind, "parallel"));
        bool more = next_page(&r, &from);
        cli_reply_free(&r);
        if (!more)
            break;
    }
    cli_unkeep(&c);
    printf("job %llu: %llu file(s) fetched (%llu bytes), %llu already here%s",
           (unsigned long long)job, (unsigned long long)st.files, (unsigned long long)st.bytes,
           (unsigned long long)st.skipped, st.failed ? "" : "\n");
    if (st.failed)
        printf(", %llu failed (run gridnode fetch again)\n", (unsigned long long)st.failed);
    if (unfinished)
        printf("%llu task(s) have not finished: fetch again once they have\n",
               (unsigned long long)unfinished);
    return st.failed ? 1 : 0;
}

void fetch_print_files(const msgpack_object *t)
{
    const msgpack_object *fl = wire_get(t, "files");
    char name[200], note[300];
    for (uint32_t k = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && k < fl->via.array.size; k++) {
        const msgpack_object *f = &fl->via.array.ptr[k];
        cli_text(f, "name", name, sizeof name);
        char hash[16];
        cli_text(f, "hash", hash, sizeof hash);
        printf("%s  file %-40s %12llu  %s\n", k ? "      " : "kept: ", name,
               (unsigned long long)wire_get_u64(f, "size", 0), hash);
    }
    cli_text(t, "files_note", note, sizeof note);
    if (note[0])
        printf("        not kept: %s\n", note);
}

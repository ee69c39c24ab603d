/*
 * swf.c - Standard Workload Format reader (see swf.h). The file is read through
 * zlib in large chunks and parsed with a small number scanner: a whole trace of
 * 250,000 jobs takes well under 0.1 s, which matters when the simulator replays it.
 * swf_stream_* do the same in a thread of their own and hand the records over in
 * blocks, so that reading overlaps the simulation.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

#include "roles/batch/sim/swf.h"

#define SWF_FIELDS 18
#define SWF_MAX_LINE 4096
#define SWF_CHUNK (1 << 18) /* bytes inflated and parsed at a time (a block of ~3,000 jobs) */

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void swf_free(struct swf_trace *t)
{
    free(t->jobs);
    for (int i = 0; i < SWF_MAX_QUEUES; i++)
        free(t->queue_name[i]);
    memset(t, 0, sizeof *t);
}

/* Scans one number at *p: [-+]digits[.digits][e[-+]digits]. The value is truncated
 * to an integer (the fields used are integers; averages may carry fractions).
 * Returns 0, or -1 if *p does not start a number or it overflows. */
static int scan_num(const char **p, const char *end, int64_t *out)
{
    const char *s = *p;
    int neg = 0;
    int64_t v = 0;
    if (s < end && (*s == '-' || *s == '+'))
        neg = *s++ == '-';
    const char *d = s;
    while (s < end && *s >= '0' && *s <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*s++ - '0');
    }
    int digits = s > d;
    if (s < end && *s == '.')
        for (s++; s < end && *s >= '0' && *s <= '9'; s++)
            digits = 1;
    if (!digits)
        return -1;
    if (s < end && (*s == 'e' || *s == 'E')) { /* rare: evaluate exactly via strtod */
        char buf[64];
        size_t n = 0;
        const char *q = *p;
        while (q < end && n < sizeof buf - 1 && *q != ' ' && *q != '\t' && *q != '\r')
            buf[n++] = *q++;
        buf[n] = '\0';
        char *ep;
        double x = strtod(buf, &ep);
        if (*ep || !(x > -9e18 && x < 9e18))
            return -1;
        *out = (int64_t)x;
        *p = q;
        return 0;
    }
    *out = neg ? -v : v;
    *p = s;
    return 0;
}

/* "; Key: value" header lines that matter. */
static void parse_header(struct swf_trace *t, const char *s, const char *end)
{
    while (s < end && (*s == ';' || *s == ' ' || *s == '\t'))
        s++;
    size_t n = (size_t)(end - s);
    int64_t v;
    const char *p;
    if (n > 9 && strncasecmp(s, "MaxProcs:", 9) == 0) {
        for (p = s + 9; p < end && *p == ' '; p++)
            ;
        if (scan_num(&p, end, &v) == 0)
            t->max_procs = v;
    } else if (n > 9 && strncasecmp(s, "MaxNodes:", 9) == 0) {
        for (p = s + 9; p < end && *p == ' '; p++)
            ;
        if (scan_num(&p, end, &v) == 0)
            t->max_nodes = v;
    } else if (n > 6 && strncasecmp(s, "Queue:", 6) == 0) {
        for (p = s + 6; p < end && *p == ' '; p++)
            ;
        if (scan_num(&p, end, &v) < 0 || v < 0 || v >= SWF_MAX_QUEUES)
            return;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\t' && *q != '\r')
            q++;
        if (q > p && q - p < 60 && !t->queue_name[v])
            t->queue_name[v] = strndup(p, (size_t)(q - p));
    }
}

/* Parses one data line into a job. 0, or -1 with the problem in err. */
static int parse_job(struct swf_trace *t, const char *s, const char *end, char *err, size_t len)
{
    int64_t f[SWF_FIELDS];
    int n = 0;
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
            s++;
        if (s == end)
            break;
        if (n == SWF_FIELDS)
            return fail(err, len, "more than %d fields", SWF_FIELDS);
        if (scan_num(&s, end, &f[n]) < 0 || (s < end && *s != ' ' && *s != '\t' && *s != '\r'))
            return fail(err, len, "field %d is not a number", n + 1);
        n++;
    }
    if (n != SWF_FIELDS)
        return fail(err, len, "expected %d fields, found %d", SWF_FIELDS, n);
    for (int i = 0; i < SWF_FIELDS; i++)
        if (f[i] < -1 && i != 16 && i != 17) /* only "unknown" may be negative */
            return fail(err, len, "field %d is %lld (negative)", i + 1, (long long)f[i]);
    if (t->njobs == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 4096;
        void *p = realloc(t->jobs, nc * sizeof *t->jobs);
        if (!p)
            return fail(err, len, "out of memory");
        t->jobs = p;
        t->cap = nc;
    }
    struct swf_job *j = &t->jobs[t->njobs++];
    j->id = f[0];
    j->submit = f[1];
    j->wait = f[2];
    j->run = f[3];
    j->procs = f[4] > INT32_MAX ? INT32_MAX : (int32_t)f[4];
    j->req_procs = f[7] > INT32_MAX ? INT32_MAX : (int32_t)f[7];
    j->req_time = f[8];
    j->req_mem = f[9];
    j->status = (int32_t)f[10];
    j->user = f[11] > INT32_MAX ? -1 : (int32_t)f[11];
    j->group = f[12] > INT32_MAX ? -1 : (int32_t)f[12];
    j->queue = f[14] > INT32_MAX ? -1 : (int32_t)f[14];
    j->partition = f[15] > INT32_MAX ? -1 : (int32_t)f[15];
    j->line = (int64_t)t->lines;
    return 0;
}

/* Parses one line (without its newline). */
static int parse_line(struct swf_trace *t, const char *s, size_t n, const char *name, char *err,
                      size_t len)
{
    const char *end = s + n, *p = s;
    t->lines++;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p == end)
        return 0;
    if (*p == ';') {
        parse_header(t, p, end);
        return 0;
    }
    char why[160];
    if (parse_job(t, p, end, why, sizeof why) < 0)
        return fail(err, len, "%s:%zu: %s", name, t->lines, why);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void trace_init(struct swf_trace *t)
{
    memset(t, 0, sizeof *t);
    t->max_procs = t->max_nodes = -1;
}

int swf_parse(const char *text, size_t len, const char *name, struct swf_trace *t, char *err,
              size_t errlen)
{
    trace_init(t);
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        if (memchr(text + i, '\0', n)) {
            swf_free(t);
            return fail(err, errlen, "%s:%zu: NUL byte in the line (not a text file?)", name,
                        t->lines + 1);
        }
        if (parse_line(t, text + i, n, name, err, errlen) < 0) {
            swf_free(t);
            return -1;
        }
        i += n + 1;
    }
    return 0;
}

/* Called after each chunk of the file is parsed (t holds what was parsed since
 * the last call); nonzero stops the reading. */
typedef int (*chunk_fn)(void *arg, struct swf_trace *t);

/* Reads the open file gz into t in chunks of SWF_CHUNK bytes, parsing every
 * complete line, and calls chunk (if not NULL) after each. 0, or -1 with a message
 * in err (also when chunk asked to stop). t keeps what was parsed either way. */
static int read_chunks(gzFile gz, const char *path, struct swf_trace *t, chunk_fn chunk, void *arg,
                       char *err, size_t errlen)
{
    size_t cap = SWF_CHUNK + SWF_MAX_LINE + 1, have = 0;
    char *buf = malloc(cap);
    int rc = -1;
    if (!buf)
        return fail(err, errlen, "out of memory");
    for (;;) {
        int n = gzread(gz, buf + have, SWF_CHUNK);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(gz, &zerr);
            fail(err, errlen, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
            goto out;
        }
        have += (size_t)n;
        size_t start = 0;
        for (char *nl; (nl = memchr(buf + start, '\n', have - start));
             start = (size_t)(nl - buf) + 1) {
            size_t len = (size_t)(nl - (buf + start));
            if (memchr(buf + start, '\0', len)) {
                fail(err, errlen, "%s:%zu: NUL byte in the line (not a text file?)", path,
                     t->lines + 1);
                goto out;
            }
            if (parse_line(t, buf + start, len, path, err, errlen) < 0)
                goto out;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (n == 0) { /* end of file: a last line without newline */
            if (have && parse_line(t, buf, have, path, err, errlen) < 0)
                goto out;
            break;
        }
        if (have > SWF_MAX_LINE) {
            fail(err, errlen, "%s:%zu: line longer than %d bytes", path, t->lines + 1,
                 SWF_MAX_LINE);
            goto out;
        }
        if (chunk && chunk(arg, t) != 0) {
            fail(err, errlen, "%s: reading stopped", path);
            goto out;
        }
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static gzFile open_trace(const char *path, char *err, size_t errlen)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        fail(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
    else
        gzbuffer(gz, 1 << 17);
    return gz;
}

int swf_read(const char *path, struct swf_trace *t, char *err, size_t errlen)
{
    double t0 = now_s();
    trace_init(t);
    gzFile gz = open_trace(path, err, errlen);
    if (!gz)
        return -1;
    int rc = read_chunks(gz, path, t, NULL, NULL, err, errlen);
    gzclose(gz);
    if (rc < 0)
        swf_free(t);
    else
        t->read_s = now_s() - t0;
    return rc;
}

/* ---- the stream: a reader thread handing parsed records over in blocks ---- */

struct swf_block {
    struct swf_job *jobs;
    size_t n;
};

struct swf_stream {
    char *path;
    gzFile gz;
    pthread_t thread;
    bool started, finished;
    double t0;
    struct swf_trace cur; /* the reader's: header so far, records since the last block */
    size_t lines_done;    /* cur.lines when the reader ended */
    pthread_mutex_t mu;   /* guards everything below */
    pthread_cond_t cv;    /* a block, the header, or the end */
    struct swf_block *blocks;
    size_t nblocks, cap, njobs;
    bool have_head, done, stop, oom;
    int rc;
    double read_s;
    char err[512];
    struct swf_trace head; /* the header as of the first block (no jobs) */
    size_t next;           /* the consumer's next block */
};

bool swf_same_header(const struct swf_trace *a, const struct swf_trace *b)
{
    if (a->max_procs != b->max_procs || a->max_nodes != b->max_nodes)
        return false;
    for (int i = 0; i < SWF_MAX_QUEUES; i++) {
        const char *x = a->queue_name[i], *y = b->queue_name[i];
        if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0))
            return false;
    }
    return true;
}

/* Copies the header fields of from into to; the queue names are shared, not copied
 * (the reader never changes a name once set). */
static void head_copy(struct swf_trace *to, const struct swf_trace *from)
{
    to->max_procs = from->max_procs;
    to->max_nodes = from->max_nodes;
    memcpy(to->queue_name, from->queue_name, sizeof to->queue_name);
}

/* chunk_fn of the reader thread: moves the records parsed since the last call into
 * a new block; the first block (or the end) also publishes the header. */
static int publish(void *arg, struct swf_trace *t)
{
    struct swf_stream *s = arg;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (t->njobs > 0 && s->nblocks == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        void *p = realloc(s->blocks, nc * sizeof *s->blocks);
        if (!p) {
            s->oom = true;
            rc = -1;
            goto out;
        }
        s->blocks = p;
        s->cap = nc;
    }
    if (t->njobs > 0) {
        s->blocks[s->nblocks++] = (struct swf_block){t->jobs, t->njobs};
        s->njobs += t->njobs;
        t->jobs = NULL;
        t->njobs = t->cap = 0;
        if (!s->have_head)
            head_copy(&s->head, t);
        s->have_head = true;
        pthread_cond_broadcast(&s->cv);
    }
    rc = s->stop ? -1 : 0;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The reader thread: the whole file through read_chunks, then the end. */
static void *reader_main(void *arg)
{
    struct swf_stream *s = arg;
    char err[512] = "";
    int rc = read_chunks(s->gz, s->path, &s->cur, publish, s, err, sizeof err);
    if (rc == 0 && publish(s, &s->cur) < 0)
        rc = fail(err, sizeof err, "%s: reading stopped", s->path);
    pthread_mutex_lock(&s->mu);
    if (s->oom)
        fail(err, sizeof err, "out of memory");
    if (!s->have_head)
        head_copy(&s->head, &s->cur);
    s->have_head = s->done = true;
    s->rc = rc;
    s->read_s = now_s() - s->t0;
    if (rc < 0)
        memcpy(s->err, err, sizeof err);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int swf_stream_open(const char *path, struct swf_stream **out, char *err, size_t errlen)
{
    struct swf_stream *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return fail(err, errlen, "out of memory");
    }
    s->t0 = now_s();
    trace_init(&s->cur);
    trace_init(&s->head);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    if (!(s->gz = open_trace(path, err, errlen))) {
        swf_stream_close(out);
        return -1;
    }
    int e = pthread_create(&s->thread, NULL, reader_main, s);
    if (e) {
        swf_stream_close(out);
        return fail(err, errlen, "%s: cannot start the reader thread: %s", path, strerror(e));
    }
    s->started = true;
    return 0;
}

const struct swf_trace *swf_stream_header(struct swf_stream *s, char *err, size_t errlen)
{
    pthread_mutex_lock(&s->mu);
    while (!s->have_head)
        pthread_cond_wait(&s->cv, &s->mu);
    int rc = s->nblocks == 0 && s->done && s->rc < 0 ? fail(err, errlen, "%s", s->err) : 0;
    pthread_mutex_unlock(&s->mu);
    return rc < 0 ? NULL : &s->head;
}

int swf_stream_next(struct swf_stream *s, const struct swf_job **jobs, size_t *n, char *err,
                    size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (s->next == s->nblocks && !s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    *jobs = NULL;
    *n = 0;
    if (s->next < s->nblocks) {
        *jobs = s->blocks[s->next].jobs;
        *n = s->blocks[s->next++].n;
    } else if (s->rc < 0) {
        rc = fail(err, errlen, "%s", s->err);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Waits for the reader thread to end; returns its status (s->err says why). */
static int stream_join(struct swf_stream *s)
{
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = false;
    }
    return s->rc;
}

int swf_stream_finish(struct swf_stream *s, struct swf_trace *t, char *err, size_t errlen)
{
    trace_init(t);
    if (stream_join(s) < 0)
        return fail(err, errlen, "%s", s->err);
    t->max_procs = s->cur.max_procs;
    t->max_nodes = s->cur.max_nodes;
    for (int i = 0; i < SWF_MAX_QUEUES; i++)
        if (s->cur.queue_name[i] && !(t->queue_name[i] = strdup(s->cur.queue_name[i]))) {
            swf_free(t);
            return fail(err, errlen, "out of memory");
        }
    t->njobs = s->njobs;
    t->lines = s->cur.lines;
    t->read_s = s->read_s;
    s->finished = true;
    return 0;
}

int swf_stream_records(struct swf_stream *s, struct swf_trace *t, char *err, size_t errlen)
{
    if (!s->finished || t->jobs)
        return fail(err, errlen, "swf_stream_records: call swf_stream_finish first, once");
    if (!(t->jobs = malloc((s->njobs + 1) * sizeof *t->jobs)))
        return fail(err, errlen, "out of memory");
    size_t k = 0;
    for (size_t b = 0; b < s->nblocks; k += s->blocks[b++].n)
        memcpy(t->jobs + k, s->blocks[b].jobs, s->blocks[b].n * sizeof *t->jobs);
    t->cap = s->njobs + 1;
    return 0;
}

void swf_stream_close(struct swf_stream **sp)
{
    struct swf_stream *s = *sp;
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_mutex_unlock(&s->mu);
    stream_join(s);
    if (s->gz)
        gzclose(s->gz);
    for (size_t b = 0; b < s->nblocks; b++)
        free(s->blocks[b].jobs);
    free(s->blocks);
    swf_free(&s->cur);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
    *sp = NULL;
}

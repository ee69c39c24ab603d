/*
 * swf.c - Standard Workload Format reader (see swf.h). The file is read through
 * zlib in large chunks and parsed with a small number scanner: a whole trace of
 * 250,000 jobs takes well under 0.1 s, which matters when the simulator replays it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "roles/batch/swf.h"

#define SWF_FIELDS 18
#define SWF_MAX_LINE 4096

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

int swf_read(const char *path, struct swf_trace *t, char *err, size_t errlen)
{
    trace_init(t);
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
    gzbuffer(gz, 1 << 17);
    size_t cap = 1 << 20, have = 0;
    char *buf = malloc(cap);
    int rc = -1;
    if (!buf) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    for (;;) {
        int n = gzread(gz, buf + have, (unsigned)(cap - have));
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
    }
    rc = 0;
out:
    free(buf);
    gzclose(gz);
    if (rc < 0)
        swf_free(t);
    return rc;
}

/* cli.c - shared parts of the user tools (see cli.h). */
#include "cmd/cli.h"
#include "lib/text.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <zmq.h>

#include "cmd/zmtp.h"
#include "daemon/curve.h"
#include "wire/mpjson.h"

/* s is a whole number in decimal and nothing else (strtoull alone would take " 7", "+7",
 * "-1" as 2^64 - 1, and ""): 0 with *v set, else -1. */
static int whole_number(const char *s, uint64_t *v)
{
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    *v = strtoull(s, NULL, 10);
    return errno ? -1 : 0;
}

int cli_common(struct cli *c, const char *prog, int *argc, char **argv)
{
    int out = 1;
    c->prog = prog;
    c->timeout_ms = 10000;
    c->connect_ms = 1000;
    c->json = false;
    c->words = NULL;
    c->conn = NULL;
    c->endpoint = getenv("GRIDNODE_CLUSTER");
    if (!c->endpoint || !*c->endpoint)
        c->endpoint = "tcp://127.0.0.1:7300";
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        /* --opt=value (gridnode submit does not have it split by main.c) */
        if (!strncmp(a, "--endpoint=", 11) || !strncmp(a, "--timeout=", 10) ||
            !strncmp(a, "--connect-timeout=", 18)) {
            static char name[24];
            size_t n = (size_t)(strchr(a, '=') - a);
            memcpy(name, a, n);
            name[n] = '\0';
            const char *v = a + n + 1;
            if (!strcmp(name, "--endpoint")) {
                c->endpoint = v;
                continue;
            }
            uint64_t t;
            if (whole_number(v, &t) < 0 || t < (name[2] == 't' ? 1u : 0u) || t > 86400000) {
                fprintf(stderr, "%s: %s wants milliseconds (%s..86400000), not '%s'\n", prog, name,
                        name[2] == 't' ? "1" : "0", v);
                return -1;
            }
            if (name[2] == 't')
                c->timeout_ms = (int)t;
            else
                c->connect_ms = (int)t;
            continue;
        }
        if ((!strcmp(a, "-e") || !strcmp(a, "--endpoint")) && i + 1 < *argc) {
            c->endpoint = argv[++i];
        } else if (!strcmp(a, "--timeout") && i + 1 < *argc) {
            uint64_t v;
            if (whole_number(argv[++i], &v) < 0 || v < 1 || v > 86400000) {
                fprintf(stderr, "%s: --timeout wants milliseconds (1..86400000), not '%s'\n", prog,
                        argv[i]);
                return -1;
            }
            c->timeout_ms = (int)v;
        } else if (!strcmp(a, "--connect-timeout") && i + 1 < *argc) {
            uint64_t v;
            if (whole_number(argv[++i], &v) < 0 || v > 86400000) {
                fprintf(stderr,
                        "%s: --connect-timeout wants milliseconds (0..86400000), not '%s'\n", prog,
                        argv[i]);
                return -1;
            }
            c->connect_ms = (int)v;
        } else if (!strcmp(a, "--json")) {
            c->json = true;
        } else if (!strcmp(a, "--")) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

const char *cli_common_help(void)
{
    return "  -e, --endpoint EP   cluster manager endpoint (default $GRIDNODE_CLUSTER, else\n"
           "                      tcp://127.0.0.1:7300)\n"
           "  --timeout MS        give up waiting for the reply after MS ms (default 10000)\n"
           "  --connect-timeout MS  retry a refused connection for MS ms (default 1000;\n"
           "                      raise it to wait for a role that is still starting)\n"
           "  --json              machine-readable output\n"
           "  security: GRIDNODE_KEY (own secret key file, gridnode keygen) and\n"
           "  GRIDNODE_SERVER_KEY (the server's public key: a .pub file, or z85:KEY); "
           "GRIDNODE_PLAIN=1\n"
           "  talks without CURVE to a plain role on loopback (tests)\n";
}

/* The arguments of a tool that takes only the common options: -1 to go on, else the exit
 * status (0 after --help, 2 after a usage error). */
static int simple_args(struct cli *c, const char *prog, const char *usage, int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(c, prog, &argc, argv) < 0)
        return 2;
    if (argc > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", prog, argv[1], usage);
        return 2;
    }
    return -1;
}

int cli_simple(struct cli *c, const char *prog, const char *usage, uint32_t type, int argc,
               char **argv, struct cli_reply *r)
{
    int rc = simple_args(c, prog, usage, argc, argv);
    if (rc >= 0)
        return rc;
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, type, 1, 0);
    rc = cli_call(c, &wb, 1, r);
    wire_buf_free(&wb);
    return rc == 0 ? -1 : 1;
}

int cli_list(const struct cli *c, uint32_t type, struct cli_pages *p)
{
    return cli_list_fields(c, type, 0, NULL, NULL, p);
}

int cli_pages_merge(const struct cli *c, const struct cli_pages *p, const char *key,
                    msgpack_object *out)
{
    uint32_t total = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const msgpack_object *a = wire_get(p->r[i]->msg.root, key);
        total += a && a->type == MSGPACK_OBJECT_ARRAY ? a->via.array.size : 0;
    }
    memset(out, 0, sizeof *out);
    out->type = MSGPACK_OBJECT_ARRAY;
    out->via.array.ptr = malloc((total ? total : 1) * sizeof *out->via.array.ptr);
    if (!out->via.array.ptr) {
        fprintf(stderr, "%s: out of memory\n", c->prog);
        return -1;
    }
    for (uint32_t i = 0; i < p->n; i++) {
        const msgpack_object *a = wire_get(p->r[i]->msg.root, key);
        for (uint32_t k = 0; a && a->type == MSGPACK_OBJECT_ARRAY && k < a->via.array.size; k++)
            out->via.array.ptr[out->via.array.size++] = a->via.array.ptr[k];
    }
    return 0;
}

int cli_list_fields(const struct cli *c, uint32_t type, uint32_t nfields, cli_fill_fn *fill,
                    const void *arg, struct cli_pages *p)
{
    uint64_t from = 0;
    p->r = NULL;
    p->n = 0;
    for (;;) {
        struct cli_reply **grown = realloc(p->r, (p->n + 1) * sizeof *p->r);
        if (grown)
            p->r = grown;
        if (!grown || !(p->r[p->n] = malloc(sizeof **p->r))) {
            fprintf(stderr, "%s: out of memory\n", c->prog);
            cli_pages_free(p);
            return 1;
        }
        struct wire_buf wb;
        wire_buf_init(&wb);
        wire_begin(&wb, type, p->n + 1, (fill ? nfields : 0) + (from ? 1 : 0));
        if (fill)
            fill(&wb, arg);
        if (from)
            wire_put_u64(&wb, "from", from);
        int rc = cli_call(c, &wb, p->n + 1, p->r[p->n]);
        wire_buf_free(&wb);
        if (rc != 0) {
            free(p->r[p->n]); /* cli_call freed its contents */
            cli_pages_free(p);
            return 1;
        }
        const msgpack_object *next = wire_get(p->r[p->n++]->msg.root, "next");
        if (!next)
            return 0;
        if (next->via.u64 <= from) {
            fprintf(stderr, "%s: the list from %s did not advance (next %llu)\n", c->prog,
                    c->endpoint, (unsigned long long)next->via.u64);
            cli_pages_free(p);
            return 1;
        }
        from = next->via.u64;
    }
}

void cli_pages_free(struct cli_pages *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        cli_reply_free(p->r[i]);
        free(p->r[i]);
    }
    free(p->r);
    p->r = NULL;
    p->n = 0;
}

int cli_simple_list(struct cli *c, const char *prog, const char *usage, uint32_t type, int argc,
                    char **argv, struct cli_pages *p)
{
    int rc = simple_args(c, prog, usage, argc, argv);
    if (rc >= 0)
        return rc;
    return cli_list(c, type, p) == 0 ? -1 : 1;
}

void cli_print_json_pages(const struct cli_pages *p, const char *key)
{
    json_t *all = json_array();
    for (uint32_t i = 0; all && i < p->n; i++) {
        json_t *part = mpjson(wire_get(p->r[i]->msg.root, key));
        if (part)
            json_array_extend(all, part);
        json_decref(part);
    }
    if (all)
        json_dumpf(all, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(all);
    putchar('\n');
}

void cli_print_json(const msgpack_object *o)
{
    json_t *j = mpjson(o);
    if (j) {
        json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
        json_decref(j);
    }
    putchar('\n');
}

const char *cli_time(int64_t ms, char *buf, size_t n)
{
    if (ms <= 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

int cli_uint(const char *prog, const char *opt, const char *s, uint64_t lo, uint64_t hi,
             uint64_t *out)
{
    uint64_t v;
    if (whole_number(s, &v) == 0 && v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    if (lo == 0 && hi == UINT64_MAX)
        fprintf(stderr, "%s: %s wants a whole number, not '%s'\n", prog, opt, s);
    else if (hi == UINT64_MAX)
        fprintf(stderr, "%s: %s wants a whole number >= %llu, not '%s'\n", prog, opt,
                (unsigned long long)lo, s);
    else
        fprintf(stderr, "%s: %s wants a whole number %llu..%llu, not '%s'\n", prog, opt,
                (unsigned long long)lo, (unsigned long long)hi, s);
    return -1;
}

int cli_u64(const struct cli *c, const char *what, const char *s, uint64_t *out)
{
    return cli_uint(c->prog, what, s, 0, UINT64_MAX, out);
}

void cli_text(const msgpack_object *map, const char *key, char *buf, size_t cap)
{
    size_t n;
    const char *s = wire_get_str(map, key, &n);
    text_escape(buf, cap, s ? s : "", n);
}

/* The code point of the UTF-8 sequence at s (text_escape made it valid), and its length. */
static uint32_t utf8_next(const unsigned char *s, size_t *len)
{
    if (s[0] < 0x80 || (s[0] & 0xe0) == 0xc0 || (s[0] & 0xf0) == 0xe0 || (s[0] & 0xf8) == 0xf0) {
        size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : 4;
        uint32_t c = n == 1 ? s[0] : s[0] & (0x7f >> n);
        for (size_t i = 1; i < n; i++) {
            if ((s[i] & 0xc0) != 0x80) {
                *len = 1;
                return 0xfffd;
            }
            c = c << 6 | (s[i] & 0x3f);
        }
        *len = n;
        return c;
    }
    *len = 1;
    return 0xfffd;
}

/* Terminal columns of code point c: 0 for combining marks, 2 for East Asian wide and
 * full-width forms and most emoji, else 1 (the common cases of wcwidth, without
 * depending on the locale the tool runs in). */
static int cp_columns(uint32_t c)
{
    if ((c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) || (c >= 0xfe00 && c <= 0xfe0f))
        return 0;
    if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf && c != 0x303f) ||
        (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
        (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
        (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
        (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd))
        return 2;
    return 1;
}

int cli_columns(const char *s)
{
    int cols = 0;
    for (size_t n; *s; s += n)
        cols += cp_columns(utf8_next((const unsigned char *)s, &n));
    return cols;
}

const char *cli_cell(const msgpack_object *map, const char *key, int width, char *buf, size_t cap)
{
    size_t n;
    const char *s = wire_get_str(map, key, &n);
    char text[1024];
    text_escape(text, sizeof text, s ? s : "", n);
    return cli_pad(text[0] ? text : "-", width, buf, cap);
}

const char *cli_pad(const char *s, int width, char *buf, size_t cap)
{
    size_t o = 0, len;
    int cols = 0;
    for (const char *p = s; *p; p += len) {
        int w = cp_columns(utf8_next((const unsigned char *)p, &len));
        if (cols + w > width || o + len + 1 > cap)
            break; /* cut on a character: a column, not a byte, is the unit */
        memcpy(buf + o, p, len);
        o += len;
        cols += w;
    }
    while (cols < width && o + 1 < cap) {
        buf[o++] = ' ';
        cols++;
    }
    buf[o] = '\0';
    return buf;
}

char **cli_split_eq(int *argc, char **argv, int i)
{
    static char **owned; /* the last array made here; reachable for the process' life */
    char *eq = strchr(argv[i], '=');
    char **out = malloc(((size_t)*argc + 2) * sizeof *out);
    if (!out || !eq)
        return free(out), argv;
    *eq = '\0';
    memcpy(out, argv, (size_t)(i + 1) * sizeof *out);
    out[i + 1] = eq + 1;
    memcpy(out + i + 2, argv + i + 1, (size_t)(*argc - i - 1) * sizeof *out);
    (*argc)++;
    out[*argc] = NULL;
    if (owned == argv)
        free(owned);
    owned = out;
    return out;
}

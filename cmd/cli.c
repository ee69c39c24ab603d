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
#include "lib/curve.h"
#include "lib/mpjson.h"

int cli_common(struct cli *c, const char *prog, int *argc, char **argv)
{
    int out = 1;
    c->prog = prog;
    c->timeout_ms = 10000;
    c->connect_ms = 1000;
    c->json = false;
    c->words = NULL;
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
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || !*v || t < (name[2] == 't' ? 1 : 0) || t > 86400000) {
                fprintf(stderr, "%s: %s wants milliseconds, not '%s'\n", prog, name, v);
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
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v <= 0) {
                fprintf(stderr, "%s: --timeout wants milliseconds, not '%s'\n", prog, argv[i]);
                return -1;
            }
            c->timeout_ms = (int)v;
        } else if (!strcmp(a, "--connect-timeout") && i + 1 < *argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > 86400000) {
                fprintf(stderr, "%s: --connect-timeout wants milliseconds, not '%s'\n", prog,
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
           "  GRIDNODE_SERVER_KEY (the server's public key, z85 or a file); GRIDNODE_PLAIN=1\n"
           "  talks without CURVE to a plain role on loopback (tests)\n";
}

/* A reply frame (data, len) received for request id: copies it into r and decodes
 * it. 0 with r set; 1 when it is an ERROR (printed); 2 when it answers another
 * request (skip it); -1 when it is unreadable (printed). */
static int take_reply(const struct cli *c, const void *data, size_t len, uint64_t id,
                      struct cli_reply *r)
{
    struct wire_error err;
    int rc = 0;
    if (!(r->frame = malloc(len ? len : 1))) {
        fprintf(stderr, "%s: out of memory\n", c->prog);
        return -1;
    }
    memcpy(r->frame, data, len);
    r->len = len;
    if (wire_decode(r->frame, len, false, &r->msg, &err) < 0) {
        fprintf(stderr, "%s: unreadable reply from %s: %s\n", c->prog, c->endpoint, err.text);
        rc = -1;
    } else if (r->msg.id != id) {
        rc = 2;
    } else if (r->msg.type == WT_ERROR) {
        size_t n;
        const char *t = wire_get_str(r->msg.root, "msg", &n);
        char text[1024];
        text_escape(text, sizeof text, t ? t : "", n);
        if (c->words && wire_get_u64(r->msg.root, "code", 0) == WE_INVALID)
            cli_user_words(c->words, text, sizeof text);
        fprintf(stderr, "%s: %s: %s\n", c->prog,
                wire_err_name((int)wire_get_u64(r->msg.root, "code", 0)), text);
        rc = 1;
    }
    if (rc != 0) {
        if (rc != -1)
            wire_msg_free(&r->msg);
        free(r->frame);
        r->frame = NULL;
    }
    return rc;
}

static void print_unreachable(const struct cli *c, const char *why)
{
    if (why)
        fprintf(stderr, "%s: cannot reach %s: %s\n", c->prog, c->endpoint, why);
    else
        fprintf(stderr, "%s: no answer from %s within %d ms\n", c->prog, c->endpoint,
                c->timeout_ms);
    if (why && strstr(why, "resolve"))
        fprintf(stderr, "  check the host name in the endpoint (-e ENDPOINT or GRIDNODE_CLUSTER)\n");
    else
        fprintf(stderr, "  is the role running and listening there? (scripts/grid status; or pass "
                        "-e ENDPOINT / set GRIDNODE_CLUSTER)\n");
}

/* cli_call over the tool's own ZMTP client (cmd/zmtp.c): no libzmq to load. */
static int call_zmtp(const struct cli *c, struct wire_buf *wb, uint64_t id, struct cli_reply *r)
{
    struct zmtp z;
    int rc = 2;
    if (zmtp_open_send(&z, c->endpoint, c->timeout_ms, c->connect_ms, WIRE_MAX_FRAME,
                       wb->sb.data, wb->sb.size) == 0) {
        const unsigned char *d;
        size_t n;
        while (rc == 2 && zmtp_recv(&z, &d, &n) == 0)
            rc = take_reply(c, d, n, id, r);
    }
    if (rc == 2) {
        bool timeout = strstr(z.err, "timed out") || strstr(z.err, "Connection timed out");
        print_unreachable(c, timeout ? NULL : z.err);
        rc = -1;
    }
    zmtp_close(&z);
    return rc;
}

/* True (err set) when endpoint is tcp://HOST:PORT with a HOST that does not resolve:
 * libzmq would retry it silently until the timeout. */
static bool tcp_host_unresolvable(const char *endpoint, char *err, size_t errlen)
{
    char host[256];
    const char *h = endpoint + 6, *colon = strrchr(endpoint, ':');
    if (strncmp(endpoint, "tcp://", 6) || !colon || colon < h)
        return false;
    size_t n = (size_t)(colon - h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
        h++, n -= 2;
    if (n == 0 || n >= sizeof host || (n == 1 && h[0] == '*'))
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, NULL, &hints, &ai);
    if (ai)
        freeaddrinfo(ai);
    if (g == 0)
        return false;
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
    return true;
}

/*
 * cli_call through libzmq (loaded on this first use), for endpoints other than
 * tcp://HOST:PORT (ipc://, a source address, ...) and whenever CURVE is on (the tools'
 * own ZMTP client, cmd/zmtp.c, speaks only NULL). A failed CURVE handshake ends the
 * call at once with a message saying which key is wrong.
 */
static int call_zmq(const struct cli *c, struct wire_buf *wb, uint64_t id, struct cli_reply *r)
{
    void *ctx = zmq_ctx_new(), *s = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL, *mon = NULL;
    int zero = 0, rc = 2;
    int64_t maxmsg = WIRE_MAX_FRAME;
    const char *why = NULL;
    char err[800];
    bool connected = false, retried = false; /* monitor events of the connection */
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (!s)
        goto out;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    /* An ipc:// endpoint whose socket file is missing can never answer: say so at once
     * instead of waiting out the timeout. */
    struct stat st;
    if (!strncmp(c->endpoint, "ipc://", 6) && stat(c->endpoint + 6, &st) != 0) {
        snprintf(err, sizeof err, "%s: %s", c->endpoint + 6, strerror(errno));
        print_unreachable(c, err);
        rc = -1;
        goto out;
    }
    /* libzmq 4.3.4: a server that cannot open our HELLO (we hold the wrong server key,
     * or it runs plain) ends the handshake without a reason (NO_DETAIL or PROTOCOL); a
     * server whose ZAP handler refused our key says so (AUTH) */
    if (curve_client_apply(s, NULL, c->endpoint, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", c->prog, err);
        rc = -1;
        goto out;
    }
    zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &c->timeout_ms, sizeof c->timeout_ms);
    if (tcp_host_unresolvable(c->endpoint, err, sizeof err)) {
        print_unreachable(c, err);
        rc = -1;
        goto out;
    }
    if (zmq_socket_monitor(s, "inproc://cli-monitor",
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_CONNECTED |
                               ZMQ_EVENT_CONNECT_RETRIED) == 0 &&
        (mon = zmq_socket(ctx, ZMQ_PAIR))) {
        zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(mon, "inproc://cli-monitor");
    }
    if (zmq_connect(s, c->endpoint) < 0) {
        fprintf(stderr, "%s: bad endpoint '%s': %s\n", c->prog, c->endpoint, zmq_strerror(errno));
        rc = -1;
        goto out;
    }
    if (zmq_send(s, wb->sb.data, wb->sb.size, 0) < 0)
        goto out;
    zmq_pollitem_t it[2] = {{s, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* connection events: a refused connection (nothing listens) is retried by libzmq
     * for ever; like the plain path, give up after --connect-timeout */
    for (long left = c->timeout_ms; rc == 2 && !why && left > 0;) {
        if (zmq_poll(it, mon ? 2 : 1, left < 100 ? left : 100) < 0 && errno != EINTR)
            break;
        if (mon && (it[1].revents & ZMQ_POLLIN)) {
            unsigned ev = curve_monitor_event(mon);
            if (ev == ZMQ_EVENT_CONNECTED)
                connected = true;
            else if (ev == ZMQ_EVENT_CONNECT_RETRIED)
                retried = true;
            else
                why = curve_handshake_failure(ev);
        }
        if ((it[0].revents & ZMQ_POLLIN) && zmq_msg_recv(&frame, s, ZMQ_DONTWAIT) >= 0)
            rc = take_reply(c, zmq_msg_data(&frame), zmq_msg_size(&frame), id, r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long spent = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (rc == 2 && !connected && retried && spent >= c->connect_ms) {
            print_unreachable(c, "cannot connect: Connection refused");
            rc = -1;
            break;
        }
        left = c->timeout_ms - spent;
    }
out:
    if (rc == 2 && why) {
        fprintf(stderr, "%s: cannot talk to %s: %s\n", c->prog, c->endpoint, why);
        rc = -1;
    } else if (rc == 2 && retried && !connected) {
        print_unreachable(c, "cannot connect: Connection refused");
        rc = -1;
    } else if (rc == 2) {
        print_unreachable(c, NULL);
        rc = -1;
    }
    zmq_msg_close(&frame);
    if (mon)
        zmq_close(mon);
    if (s)
        zmq_close(s);
    if (ctx)
        zmq_ctx_term(ctx);
    return rc;
}

int cli_call(const struct cli *c, struct wire_buf *wb, uint64_t id, struct cli_reply *r)
{
    r->frame = NULL;
    r->len = 0;
    memset(&r->msg, 0, sizeof r->msg);
    /* plain (explicitly configured) over tcp: the fast path without libzmq */
    if (zmtp_supported(c->endpoint) && !curve_client_secure(NULL)) {
        if (!curve_endpoint_local(c->endpoint)) {
            fprintf(stderr,
                    "%s: plain (GRIDNODE_PLAIN) is allowed only to loopback or ipc:// "
                    "endpoints, not %s: set GRIDNODE_KEY and GRIDNODE_SERVER_KEY\n",
                    c->prog, c->endpoint);
            return -1;
        }
        return call_zmtp(c, wb, id, r);
    }
    return call_zmq(c, wb, id, r);
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

void cli_reply_free(struct cli_reply *r)
{
    wire_msg_free(&r->msg);
    free(r->frame);
    r->frame = NULL;
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

int cli_u64(const struct cli *c, const char *what, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "%s: %s must be a non-negative integer, not '%s'\n", c->prog, what, s);
        return -1;
    }
    *out = v;
    return 0;
}

void cli_text(const msgpack_object *map, const char *key, char *buf, size_t cap)
{
    size_t n;
    const char *s = wire_get_str(map, key, &n);
    text_escape(buf, cap, s ? s : "", n);
}

void cli_user_words(const char *const (*words)[2], char *text, size_t cap)
{
    /* "SUBMIT refused: x" -> "x": the user did not send a SUBMIT, they typed options */
    const char *ref = strstr(text, " refused: ");
    if (ref && ref - text < 16) {
        bool upper = true;
        for (const char *p = text; p < ref; p++)
            upper = upper && ((*p >= 'A' && *p <= 'Z') || *p == '_');
        if (upper)
            memmove(text, ref + 10, strlen(ref + 10) + 1);
    }
    char out[1024];
    size_t o = 0;
    for (const char *p = text; *p && o + 1 < sizeof out;) {
        bool hit = false;
        bool start = p == text || !((p[-1] >= 'a' && p[-1] <= 'z') || p[-1] == '_' || p[-1] == '-');
        for (size_t k = 0; start && words[k][0]; k++) {
            size_t n = strlen(words[k][0]);
            char after = p[n];
            if (!strncmp(p, words[k][0], n) && !((after >= 'a' && after <= 'z') || after == '_')) {
                size_t m = strlen(words[k][1]);
                if (o + m + 1 >= sizeof out)
                    break;
                memcpy(out + o, words[k][1], m);
                o += m;
                p += n;
                hit = true;
                break;
            }
        }
        if (!hit)
            out[o++] = *p++;
    }
    out[o] = '\0';
    snprintf(text, cap, "%s", out);
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

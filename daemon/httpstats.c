/*
 * httpstats.c - the statistics HTTP server of a role (see httpstats.h): address
 * parsing, the listening socket (bound here, so errors are ours and port 0 works),
 * libmicrohttpd loaded on demand, and the published documents under a mutex.
 */
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/httpstats.h"

#define HTTP_CONN_MAX 64    /* connections at once, all clients */
#define HTTP_PER_IP_MAX 16  /* connections at once from one address */
#define HTTP_TIMEOUT_S 10   /* an idle connection is closed after this */
#define HTTP_CONN_MEM 32768 /* per-connection memory (request headers) */

/* The libmicrohttpd functions used, resolved by dlsym (none is linked). */
static struct {
    struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                       MHD_AccessHandlerCallback, void *, ...);
    void (*stop_daemon)(struct MHD_Daemon *);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
                                                        enum MHD_ResponseMemoryMode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
} mhd;

static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[256];

static void mhd_load(void)
{
    void *lib = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(mhd_error, sizeof mhd_error,
                 "cannot load libmicrohttpd (install the libmicrohttpd12 package, or leave "
                 "stats.http empty): %s",
                 dlerror());
        return;
    }
    struct {
        void **p;
        const char *name;
    } syms[] = {
        {(void **)&mhd.start_daemon, "MHD_start_daemon"},
        {(void **)&mhd.stop_daemon, "MHD_stop_daemon"},
        {(void **)&mhd.create_response_from_buffer, "MHD_create_response_from_buffer"},
        {(void **)&mhd.add_response_header, "MHD_add_response_header"},
        {(void **)&mhd.queue_response, "MHD_queue_response"},
        {(void **)&mhd.destroy_response, "MHD_destroy_response"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].p = dlsym(lib, syms[i].name))) {
            snprintf(mhd_error, sizeof mhd_error, "libmicrohttpd.so.12 lacks %s", syms[i].name);
            mhd.start_daemon = NULL;
            return;
        }
}

struct httpstats {
    struct MHD_Daemon *d;
    int fd;
    pthread_mutex_t mu;
    char *doc[HTTPSTATS_NDOCS];
    size_t len[HTTPSTATS_NDOCS];
};

static const char *const doc_type[HTTPSTATS_NDOCS] = {
    "text/html; charset=utf-8",
    "application/json",
    "text/plain; version=0.0.4; charset=utf-8",
};

/* Splits addr into host and port; 0 or -1 with err set. */
static int parse_addr(const char *key, const char *addr, char *host, size_t hostlen, long *port,
                      char *err, size_t errlen)
{
    const char *p = addr, *colon = strrchr(addr, ':');
    size_t hl;
    if (addr[0] == '[') { /* [v6]:port */
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            goto bad;
        p = addr + 1;
        hl = (size_t)(close - p);
        colon = close + 1;
    } else if (!colon) { /* a port alone: loopback */
        p = "127.0.0.1";
        hl = strlen(p);
        colon = addr - 1;
    } else {
        hl = (size_t)(colon - addr);
    }
    if (hl == 0 || hl >= hostlen)
        goto bad;
    memcpy(host, p, hl);
    host[hl] = '\0';
    char *end;
    errno = 0;
    *port = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || *port < 0 || *port > 65535)
        goto bad;
    return 0;
bad:
    snprintf(err, errlen,
             "%s: '%s' is not an HTTP address: use HOST:PORT (e.g. 127.0.0.1:7380; port 0 "
             "picks a free one; 0.0.0.0:PORT for every interface), or leave it empty for none",
             key, addr);
    return -1;
}

int httpstats_check(const char *key, const char *addr, char *err, size_t errlen)
{
    char host[256];
    long port;
    if (!addr[0])
        return 0;
    return parse_addr(key, addr, host, sizeof host, &port, err, errlen);
}

/* A listening TCP socket on addr; its URL in url. -1 with err set. */
static int listen_on(const char *addr, char *url, size_t urllen, char *err, size_t errlen)
{
    char host[256], portstr[16], nhost[NI_MAXHOST], nport[NI_MAXSERV];
    long port;
    if (parse_addr("stats.http", addr, host, sizeof host, &port, err, errlen) < 0)
        return -1;
    snprintf(portstr, sizeof portstr, "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res, *ai;
    int rc = getaddrinfo(host, portstr, &hints, &res), fd = -1, one = 1;
    if (rc != 0) {
        snprintf(err, errlen, "stats.http: cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
            break;
        rc = errno;
        close(fd);
        fd = -1;
        errno = rc;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen,
                 "stats.http: cannot listen on %s: %s (another process on that "
                 "port? pick another one, or 0 for a free one)",
                 addr, strerror(errno));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, nhost, sizeof nhost, nport, sizeof nport,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(url, urllen, ss.ss_family == AF_INET6 ? "http://[%s]:%s/" : "http://%s:%s/", nhost,
                 nport);
    else
        snprintf(url, urllen, "http://%s/", addr);
    return fd;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *r =
        mhd.create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    mhd.add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (status == 405)
        mhd.add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ok = mhd.queue_response(conn, status, r);
    mhd.destroy_response(r);
    return ok;
}

/* libmicrohttpd's thread: one request -> a copy of the published document. */
static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    struct httpstats *h = cls;
    (void)version;
    (void)upload;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return answer_text(conn, 405, "only GET and HEAD are served here\n");
    if (*upload_size) /* a body with GET: ignore it */
        *upload_size = 0;
    (void)con_cls;
    int doc = !strcmp(url, "/") || !strcmp(url, "/index.html") ? HTTPSTATS_HTML
              : !strcmp(url, "/stats.json")                    ? HTTPSTATS_JSON
              : !strcmp(url, "/metrics")                       ? HTTPSTATS_METRICS
                                                               : -1;
    if (doc < 0)
        return answer_text(conn, 404,
                           "not found: this server has / (the page), /stats.json and /metrics\n");
    pthread_mutex_lock(&h->mu);
    struct MHD_Response *r = h->doc[doc] ? mhd.create_response_from_buffer(h->len[doc], h->doc[doc],
                                                                           MHD_RESPMEM_MUST_COPY)
                                         : NULL;
    bool have = h->doc[doc] != NULL;
    pthread_mutex_unlock(&h->mu);
    if (!have)
        return answer_text(conn, 503,
                           "not ready: the role has not published its statistics "
                           "yet; try again in a moment\n");
    if (!r)
        return MHD_NO;
    mhd.add_response_header(r, "Content-Type", doc_type[doc]);
    mhd.add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ok = mhd.queue_response(conn, MHD_HTTP_OK, r);
    mhd.destroy_response(r);
    return ok;
}

struct httpstats *httpstats_start(const char *addr, char *url, size_t urllen, char *err,
                                  size_t errlen)
{
    pthread_once(&mhd_once, mhd_load);
    if (!mhd.start_daemon) {
        snprintf(err, errlen, "stats.http: %s", mhd_error);
        return NULL;
    }
    struct httpstats *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "stats.http: out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    if ((h->fd = listen_on(addr, url, urllen, err, errlen)) < 0)
        goto fail;
    /* The server's thread must not take the role's stop signals (it inherits the mask). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    h->d = mhd.start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, on_http, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)HTTP_CONN_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned int)HTTP_PER_IP_MAX, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEM, MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!h->d) {
        snprintf(err, errlen, "stats.http: libmicrohttpd could not start serving on %s", addr);
        goto fail;
    }
    return h;
fail:
    if (h->fd >= 0)
        close(h->fd);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return NULL;
}

int httpstats_publish(struct httpstats *h, enum httpstats_doc doc, const char *buf, size_t len)
{
    if (!h || doc < 0 || doc >= HTTPSTATS_NDOCS)
        return 0;
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    memcpy(copy, buf, len);
    pthread_mutex_lock(&h->mu);
    char *old = h->doc[doc];
    h->doc[doc] = copy;
    h->len[doc] = len;
    pthread_mutex_unlock(&h->mu);
    free(old);
    return 0;
}

void httpstats_stop(struct httpstats **hp)
{
    struct httpstats *h = *hp;
    if (!h)
        return;
    mhd.stop_daemon(h->d); /* joins its thread; the listening socket is ours */
    close(h->fd);
    for (int i = 0; i < HTTPSTATS_NDOCS; i++)
        free(h->doc[i]);
    pthread_mutex_destroy(&h->mu);
    free(h);
    *hp = NULL;
}

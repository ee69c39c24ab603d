/*
 * httpstats.h - a role's statistics over HTTP (config `stats.http`): a small server
 * on libmicrohttpd serving documents the role publishes from its own loop.
 *
 * The role builds each document (the HTML page, stats.json, the Prometheus metrics)
 * in its loop and hands it over with httpstats_publish(); the server, on
 * libmicrohttpd's own thread, only copies the latest version under a mutex. A slow,
 * stuck or hostile HTTP client therefore never touches the role's state nor blocks
 * its loop for longer than one memcpy; connections are bounded in number (in all
 * and per address), in memory and in time (idle ones are closed).
 *
 * libmicrohttpd is loaded with dlopen() when a server is started (as libzmq is, see
 * daemon/zmqdl.c): it pulls GnuTLS and a dozen more libraries, and the user tools must
 * not pay for those at every start.
 */
#ifndef GRIDNODE_HTTPSTATS_H
#define GRIDNODE_HTTPSTATS_H

#include <stddef.h>

struct httpstats;

/* The documents served; each path is served with its content type. */
enum httpstats_doc {
    HTTPSTATS_HTML = 0, /* "/" and "/index.html" */
    HTTPSTATS_JSON,     /* "/stats.json" */
    HTTPSTATS_METRICS,  /* "/metrics" (Prometheus text exposition format 0.0.4) */
    HTTPSTATS_NDOCS
};

/*
 * Checks the syntax of a `stats.http` value ("" = off, "HOST:PORT", "[V6]:PORT" or
 * "PORT" meaning 127.0.0.1:PORT; port 0 picks a free one). 0 or -1 with err set.
 */
int httpstats_check(const char *key, const char *addr, char *err, size_t errlen);

/*
 * Binds addr and starts serving on libmicrohttpd's thread. Until a document is
 * published its path answers 503. The URL actually bound (port 0 resolved) is put
 * in url. NULL with err set (the cause: bad address, port in use, library missing).
 */
struct httpstats *httpstats_start(const char *addr, char *url, size_t urllen, char *err,
                                  size_t errlen);

/* Replaces document doc with a copy of buf[0..len). 0, or -1 (out of memory: the
 * previous version stays). NULL-safe on h (does nothing). */
int httpstats_publish(struct httpstats *h, enum httpstats_doc doc, const char *buf, size_t len);

/* Stops the server (waits for its thread) and frees everything. NULL-safe. */
void httpstats_stop(struct httpstats **hp);

#endif

/*
 * fileoffer.c - inputs offered to one peer role, and output chunks copied back from it
 * (issue 26; the batch role to its clusters, the grid spool to its sites; see
 * fileoffer.h). A file is offered with the messages a user's tool uses: FILE_HAVE, then
 * FILE_PUT of what is missing in chunks of WIRE_FILE_CHUNK, FILEOFFER_INFLIGHT of them
 * in flight (the peer takes them in order; one connection keeps the order), cfg.active
 * files at once. A reply out of step (a chunk lost) goes on from what the peer holds
 * once nothing is left in flight, as the tool does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fileoffer.h"
#include "daemon/loop.h"
#include "lib/log.h"

enum { XF_WAIT, XF_HAVE, XF_PUT, XF_DONE, XF_FAILED };

/* One file offered to the peer. */
struct xfer {
    uint8_t d[SHA256_LEN];
    uint64_t size, have;
    uint64_t next;                     /* the next chunk's offset */
    uint64_t ends[FILEOFFER_INFLIGHT]; /* the ends of the chunks in flight, in order */
    uint32_t nfl;                      /* chunks in flight */
    int st;
    bool resync;                   /* out of step: go on from have once none is left */
    int64_t done_ms;               /* when the peer last said it holds the file whole */
    int64_t wait_until;            /* the peer said wait (another user's upload): not before */
    char user[FILESTORE_USER_MAX]; /* charged to at the peer (files.user_mb) */
    char *err;                     /* why the peer refused it, NULL */
};

struct fileoffer {
    struct fileoffer_cfg cfg;
    char name[128];
    struct xfer *xf;
    uint32_t nxf, capxf;
};

struct fileoffer *fileoffer_new(const struct fileoffer_cfg *cfg)
{
    struct fileoffer *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->cfg = *cfg;
    snprintf(o->name, sizeof o->name, "%s", cfg->peer_name ? cfg->peer_name : "");
    o->cfg.peer_name = o->name;
    if (!o->cfg.active)
        o->cfg.active = 1;
    return o;
}

void fileoffer_destroy(struct fileoffer **p)
{
    if (!p || !*p)
        return;
    for (uint32_t i = 0; i < (*p)->nxf; i++)
        free((*p)->xf[i].err);
    free((*p)->xf);
    free(*p);
    *p = NULL;
}

static uint64_t prefix(const uint8_t d[SHA256_LEN])
{
    uint64_t k;
    memcpy(&k, d, sizeof k);
    return k;
}

static struct xfer *xf_find(struct fileoffer *o, const uint8_t d[SHA256_LEN])
{
    for (uint32_t i = 0; i < o->nxf; i++)
        if (!memcmp(o->xf[i].d, d, SHA256_LEN))
            return &o->xf[i];
    return NULL;
}

uint64_t fileoffer_held(const struct fileoffer *o, const uint8_t d[SHA256_LEN])
{
    for (uint32_t i = 0; o && i < o->nxf; i++)
        if (!memcmp(o->xf[i].d, d, SHA256_LEN))
            return o->xf[i].have;
    return 0;
}

static struct xfer *xf_by_prefix(struct fileoffer *o, uint64_t k)
{
    for (uint32_t i = 0; i < o->nxf; i++)
        if (prefix(o->xf[i].d) == k)
            return &o->xf[i];
    return NULL;
}

static void xf_fail(struct xfer *x, const char *why)
{
    free(x->err);
    x->err = strdup(why);
    x->st = XF_FAILED;
}

static void send_have(struct fileoffer *o, void *role, void *peer, struct xfer *x)
{
    struct wire_buf wb;
    char hex[SHA256_HEX];
    sha256_hex(x->d, hex);
    log_debug("offering file %.12s (%llu bytes) to %s %s", hex, (unsigned long long)x->size,
              o->cfg.peer_kind, o->name);
    wire_buf_init(&wb);
    o->cfg.begin(role, peer, prefix(x->d), WT_FILE_HAVE, 2 + !!x->user[0], &wb);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", x->size);
    if (x->user[0]) /* the job's owner: the peer charges it (files.user_mb) */
        wire_put_str(&wb, "user", x->user);
    o->cfg.send(role, peer, &wb);
    wire_buf_free(&wb);
    x->st = XF_HAVE;
}

/* The chunk at x->next, read from the role's store: 0, or -1 (x failed). */
static int send_put(struct fileoffer *o, void *role, void *peer, struct xfer *x)
{
    struct fsfile *f = filestore_find(o->cfg.files, x->d);
    uint64_t len = x->size - x->next < WIRE_FILE_CHUNK ? x->size - x->next : WIRE_FILE_CHUNK;
    void *buf = malloc(len ? len : 1);
    char hex[SHA256_HEX];
    sha256_hex(x->d, hex);
    if (!buf || !f || !f->done ||
        filestore_read(o->cfg.files, f, x->next, buf, len) != (ssize_t)len) {
        char why[200];
        free(buf);
        snprintf(why, sizeof why, "%s could not read its copy of the file", o->cfg.self);
        xf_fail(x, why);
        return -1;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    o->cfg.begin(role, peer, prefix(x->d), WT_FILE_PUT, 4 + !!x->user[0], &wb);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", x->size);
    wire_put_u64(&wb, "off", x->next);
    wire_put_bin(&wb, "data", buf, len);
    if (x->user[0])
        wire_put_str(&wb, "user", x->user);
    o->cfg.send(role, peer, &wb);
    wire_buf_free(&wb);
    free(buf);
    x->next += len;
    x->ends[x->nfl++] = x->next;
    x->st = XF_PUT;
    return 0;
}

/* Chunks from x->next on until FILEOFFER_INFLIGHT are in flight: 0, or -1 (x failed). */
static int send_more(struct fileoffer *o, void *role, void *peer, struct xfer *x)
{
    while (x->nfl < FILEOFFER_INFLIGHT && x->next < x->size)
        if (send_put(o, role, peer, x) < 0)
            return -1;
    return 0;
}

/* Starts waiting files while fewer than cfg.active are under way. */
static void kick(struct fileoffer *o, void *role, void *peer)
{
    uint32_t active = 0;
    for (uint32_t i = 0; i < o->nxf; i++)
        active += o->xf[i].st == XF_HAVE || o->xf[i].st == XF_PUT;
    int64_t now = loop_now_ms();
    for (uint32_t i = 0; i < o->nxf && active < o->cfg.active; i++)
        if (o->xf[i].st == XF_WAIT && o->xf[i].wait_until <= now) {
            send_have(o, role, peer, &o->xf[i]);
            active++;
        }
}

struct walk {
    struct fileoffer *o;
    const char *user;
    bool retry;
    uint32_t pending;
    char *why;
    size_t wl;
};

/* A new entry for file d of size (at the end of o->xf), or NULL (out of memory). */
static struct xfer *xf_add(struct fileoffer *o, const uint8_t d[SHA256_LEN], uint64_t size,
                           const char *user)
{
    if (o->nxf == o->capxf) {
        uint32_t nc = o->capxf ? o->capxf * 2 : 16;
        void *p = realloc(o->xf, nc * sizeof *o->xf);
        if (!p)
            return NULL;
        o->xf = p, o->capxf = nc;
    }
    struct xfer *x = &o->xf[o->nxf++];
    memset(x, 0, sizeof *x);
    memcpy(x->d, d, SHA256_LEN);
    x->size = size;
    snprintf(x->user, sizeof x->user, "%s", user ? user : "");
    x->st = XF_WAIT;
    return x;
}

/* One input: known whole at the peer, under way, or refused. */
static int walk_input(void *arg, const msgpack_object *in)
{
    struct walk *w = arg;
    uint8_t d[SHA256_LEN];
    size_t hl, nl;
    const char *h = wire_get_str(in, "hash", &hl), *name = wire_get_str(in, "name", &nl);
    if (filestore_parse_hash(h, hl, d) < 0)
        return 0; /* checked at SUBMIT */
    struct xfer *x = xf_find(w->o, d);
    if (!x && !(x = xf_add(w->o, d, wire_get_u64(in, "size", 0), w->user))) {
        snprintf(w->why, w->wl, "out of memory at %s", w->o->cfg.self);
        return -1;
    }
    if (x->st == XF_FAILED && w->retry) { /* a new submission: the peer may take it now */
        free(x->err);
        x->err = NULL;
        x->st = XF_WAIT;
    }
    if (x->st == XF_FAILED) {
        snprintf(w->why, w->wl, "input '%.*s' could not be sent to %s %s: %s",
                 (int)(nl > 200 ? 200 : nl), name ? name : "", w->o->cfg.peer_kind, w->o->name,
                 x->err ? x->err : "refused");
        return -1;
    }
    /* The peer's store sweeps files no job names (files.keep_s; a Slurm site's store
     * too): one it held a while ago is asked about again (FILE_HAVE, one round trip,
     * then offered afresh if it went), so a start never names a file gone meanwhile. */
    int64_t re = w->o->cfg.recheck_ms ? w->o->cfg.recheck_ms : FILEOFFER_RECHECK_MS;
    if (x->st == XF_DONE && loop_now_ms() - x->done_ms > re)
        x->st = XF_WAIT;
    w->pending += x->st != XF_DONE;
    return 0;
}

int fileoffer_inputs(struct fileoffer *o, void *role, void *peer, const void *data, size_t len,
                     uint32_t idx, const char *user, bool retry, char *why, size_t wl)
{
    struct walk w = {o, user, retry, 0, why, wl};
    int rc = filestore_each_input(data, len, idx, walk_input, &w);
    kick(o, role, peer);
    return rc < 0 ? -1 : w.pending ? 0 : 1;
}

/* FILE_STATE about x: the next chunks, or x whole or failed. */
static void state_reply(struct fileoffer *o, void *role, void *peer, struct xfer *x,
                        const struct wire_msg *m)
{
    bool done = wire_get_bool(m->root, "done", false), first = x->st == XF_HAVE;
    uint64_t end = 0;
    x->have = wire_get_u64(m->root, "have", 0);
    if (first && x->have && !done)
        log_debug("%s %s holds %llu bytes of the file: going on from there", o->cfg.peer_kind,
                  o->name, (unsigned long long)x->have);
    if (!first && x->nfl) { /* the reply to the oldest chunk in flight */
        end = x->ends[0];
        memmove(x->ends, x->ends + 1, --x->nfl * sizeof x->ends[0]);
    }
    uint64_t wait = wire_get_u64(m->root, "wait_ms", 0);
    if (wait && !done) { /* another user's upload of it is under way at the peer */
        x->wait_until = loop_now_ms() + (int64_t)(wait < 60000 ? wait : 60000);
        x->resync = true;
        if (x->nfl == 0) { /* offered again (FILE_HAVE) by a later kick */
            x->st = XF_WAIT;
            x->resync = false;
        }
        return;
    }
    if (!done && (first || x->have < end))
        x->resync = true;           /* FILE_HAVE's answer, or out of step (a chunk lost) */
    if (x->resync && x->nfl == 0) { /* nothing left in flight: go on from have */
        x->next = x->have;
        x->resync = false;
    }
    if (done) {
        x->st = XF_DONE;
        x->done_ms = loop_now_ms();
    } else if (x->have > x->size) {
        char why[200];
        snprintf(why, sizeof why, "the %s holds more bytes than the file has", o->cfg.peer_kind);
        xf_fail(x, why);
    } else if (!x->resync) {
        (void)send_more(o, role, peer, x); /* x failed on a read error */
    }
}

bool fileoffer_reply(struct fileoffer *o, void *role, void *peer, uint64_t key,
                     const struct wire_msg *m)
{
    struct xfer *x = o ? xf_by_prefix(o, key) : NULL;
    if (!x || (x->st != XF_HAVE && x->st != XF_PUT))
        return false;
    if (m->type == WT_ERROR) {
        char msg[512];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        log_info("%s %s refused a file %s offered: %s", o->cfg.peer_kind, o->name, o->cfg.self,
                 msg);
        xf_fail(x, msg);
    } else if (m->type == WT_FILE_STATE) {
        state_reply(o, role, peer, x, m);
    }
    if (x->st != XF_DONE && x->st != XF_FAILED)
        return false;
    kick(o, role, peer);
    return true;
}

/* ---- outputs copied back ---- */

int fileoffer_take_chunk(struct filestore *fs, const struct wire_msg *m, uint64_t max,
                         const char *from, const char *peer, const char *user, char *why, size_t wl)
{
    uint8_t d[SHA256_LEN];
    size_t hl, len;
    const char *h = wire_get_str(m->root, "hash", &hl);
    const void *data = wire_get_bin(m->root, "data", &len);
    uint64_t size = wire_get_u64(m->root, "size", 0), off = wire_get_u64(m->root, "off", 0);
    if (filestore_parse_hash(h, hl, d) < 0) {
        snprintf(why, wl, "%s sent a chunk without a proper hash", from);
        return -1;
    }
    struct fsfile *f = filestore_find(fs, d);
    if (off > size || len > size - off) {
        snprintf(why, wl, "%s sent a chunk beyond the end of an output", from);
        return -1;
    }
    if ((f && f->size != size) || size > max) {
        snprintf(why, wl, "%s sent an output of another size than it named", from);
        return -1;
    }
    if (off == (f ? f->have : 0) && !(f && f->done) && (len || size == 0)) {
        int code;
        char err[400];
        if (!filestore_append(fs, f, d, size, user, data, len, &code, err, sizeof err)) {
            snprintf(why, wl, "its outputs could not be copied from %s: %s", peer, err);
            return -1;
        }
    }
    return 0;
}

void fileoffer_put_get(struct wire_buf *wb, const char *h, uint64_t job, uint64_t idx,
                       const struct fsfile *have)
{
    wire_put_strn(wb, "hash", h, 64);
    wire_put_u64(wb, "job", job);
    wire_put_u64(wb, "idx", idx);
    wire_put_u64(wb, "off", have ? have->have : 0);
    wire_put_u64(wb, "len", WIRE_FILE_CHUNK);
}

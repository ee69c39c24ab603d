/*
 * live_stage.c - a node's file transfers (issue 26, docs/data.md): the inputs of its
 * tasks downloaded from their project's cluster (FILE_GET, at most STAGE_INFLIGHT chunk
 * requests in flight per file) into the cache, their hash checked, before the task may
 * start (an input still being uploaded to the cluster is read as its chunks arrive there:
 * the cluster holds a read it cannot answer yet, and says "not yet" after a while); the
 * outputs a finished task kept uploaded (FILE_HAVE, FILE_PUT) before its
 * result is reported. Transfers use their own DEALER per project, so a large file never
 * delays a RESULT or a heartbeat. Counted for `gridnode client status`. An idle node
 * also keeps a WORK_WAIT held there (docs/wire.md 5.7): told of a new job at once.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/loop.h"
#include "lib/log.h"
#include "lib/sha256.h"
#include "roles/client/live/ckpt.h"
#include "roles/client/live/stage.h"

#define STAGE_INFLIGHT 8      /* chunk requests in flight for one file */
#define STAGE_INFLIGHT_ALL 16 /* and for all files together */
#define STAGE_TICK_MS 500
#define STAGE_RETRY_MS 250 /* after a "not yet" (the cluster already held the read a while) */

enum { X_GET, X_PUT };

struct xfer {
    int kind, project;
    char hex[65];
    uint64_t size, job;
    uint64_t got;      /* GET: bytes received and hashed; PUT: bytes the cluster holds */
    uint64_t next_off; /* GET: next chunk to ask for */
    uint64_t resumed;  /* GET: bytes found in the part file a restart left */
    struct sha256 sha;
    uint64_t ids[STAGE_INFLIGHT], offs[STAGE_INFLIGHT];
    int nfl;
    bool asked, done, failed, host_fault;
    int64_t sent_ms;
    int64_t retry_ms; /* GET: the cluster said "not yet" (cut-through): not before this */
    char path[800];   /* PUT: the outbox file */
    char err[240];
};

struct lstage {
    struct stage_cache cache;
    struct lsock *sock[LIVE_MAX_PROJECTS];
    struct xfer **x;
    uint32_t nx, capx;
    uint64_t next_id;
    int timer;
    char outbox[700];
    /* WORK_WAIT (docs/wire.md 5.7): the one in flight, when it went, the next allowed */
    uint64_t ww_id;
    int64_t ww_sent_ms, ww_next_ms;
    bool ww_off; /* the cluster does not know it (an older one): not sent again */
};

#define WW_WAIT_MS 20000 /* how long the cluster holds one (its default) */
#define WW_GAP_MS 1000   /* one at most per second, whatever the answers */

static struct xfer *xfer_find(struct lstage *s, int kind, const char *hex)
{
    for (uint32_t i = 0; i < s->nx; i++)
        if (s->x[i]->kind == kind && !strcmp(s->x[i]->hex, hex))
            return s->x[i];
    return NULL;
}

/*
 * A download cut short by a restart goes on: the bytes of its part file are hashed (a
 * read of at most the file's size) and asked for from there. A part file longer than the
 * file is emptied.
 */
static void resume(struct lstage *s, struct xfer *x)
{
    static uint8_t buf[1 << 16];
    char part[800];
    stage_cache_part(&s->cache, x->hex, part, sizeof part);
    int fd = open(part, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    ssize_t r;
    uint64_t n = 0;
    while ((r = read(fd, buf, sizeof buf)) > 0 && n + (uint64_t)r <= x->size) {
        sha256_update(&x->sha, buf, (size_t)r);
        n += (uint64_t)r;
    }
    if (r != 0) { /* longer than the file, or unreadable: start again */
        n = 0;
        sha256_init(&x->sha);
        if (ftruncate(fd, 0) < 0)
            log_warn("cannot empty %s", part);
    }
    close(fd);
    x->got = x->next_off = x->resumed = n;
}

static struct xfer *xfer_new(struct lstage *s, int kind, int project, const char *hex,
                             uint64_t size, uint64_t job)
{
    if (s->nx == s->capx) {
        uint32_t nc = s->capx ? s->capx * 2 : 16;
        struct xfer **v = realloc(s->x, nc * sizeof *v);
        if (!v)
            return NULL;
        s->x = v, s->capx = nc;
    }
    struct xfer *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->kind = kind, x->project = project, x->size = size, x->job = job;
    snprintf(x->hex, sizeof x->hex, "%s", hex);
    sha256_init(&x->sha);
    if (kind == X_GET)
        resume(s, x);
    s->x[s->nx++] = x;
    return x;
}

/* The transfer socket of project p (opened on first use), or NULL. */
static struct lsock *stage_sock(struct live *l, int p);

static void on_stage_mon(struct loop *lp, void *arg)
{
    struct lsock *k = arg;
    (void)lp;
    while (netopts_link_event(&k->link, loop_now_ms()) >= 0)
        ;
}

/* Sends the request in l->wb on project p's transfer socket: its id, or 0 (not sent). */
static uint64_t send_req(struct live *l, int p, uint64_t id)
{
    struct lsock *k = stage_sock(l, p);
    WIRE_CHECK_OUT(l->wb.sb.data, l->wb.sb.size, "a file request");
    if (!k || zmq_send(k->sock, l->wb.sb.data, l->wb.sb.size, ZMQ_DONTWAIT) < 0)
        return 0;
    return id;
}

static void fail(struct xfer *x, bool host, const char *fmt, const char *a)
{
    x->failed = true;
    x->host_fault = host;
    snprintf(x->err, sizeof x->err, fmt, a);
}

/* The hashes of every input a task still waits for (kept when the cache shrinks). */
static uint32_t waiting_inputs(struct live *l, char ***out)
{
    uint32_t n = 0;
    for (size_t i = 0; i < l->ntasks; i++)
        if (l->tasks[i]->files && l->tasks[i]->state != LT_DONE)
            n += l->tasks[i]->files->nin + l->tasks[i]->files->nck;
    *out = n ? calloc(n, sizeof **out) : NULL;
    if (!*out)
        return 0;
    n = 0;
    for (size_t i = 0; i < l->ntasks; i++) {
        const struct stage_files *f = l->tasks[i]->files;
        for (uint32_t k = 0; f && l->tasks[i]->state != LT_DONE && k < f->nin + f->nck; k++)
            (*out)[n++] = k < f->nin ? f->in[k].hex : f->ck[k - f->nin].hex;
    }
    return n;
}

/* A download is whole: its hash checked, moved into the cache. */
static void get_done(struct live *l, struct xfer *x)
{
    uint8_t d[SHA256_LEN];
    char hex[SHA256_HEX], part[800];
    sha256_final(&x->sha, d);
    sha256_hex(d, hex);
    stage_cache_part(&l->stage->cache, x->hex, part, sizeof part);
    if (strcmp(hex, x->hex)) {
        unlink(part);
        log_warnx("input %.12s: the bytes received hash to %.12s; fetching it again", x->hex, hex);
        sha256_init(&x->sha);
        x->got = x->next_off = x->resumed = 0;
        x->nfl = 0;
        return;
    }
    char **keep;
    uint32_t nkeep = waiting_inputs(l, &keep);
    int fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || fsync(fd) < 0 || close(fd) < 0 ||
        stage_cache_add(&l->stage->cache, x->hex, x->size, keep, nkeep) < 0)
        fail(x, true, "cannot keep it in the cache: %s", strerror(errno));
    else
        x->done = true;
    free(keep);
    l->files_fetched++;
    l->bytes_fetched += x->size - x->resumed;
    if (x->resumed)
        log_info("input %.12s fetched (%llu bytes; the first %llu were here from before a "
                 "restart)",
                 x->hex, (unsigned long long)x->size, (unsigned long long)x->resumed);
    else
        log_info("input %.12s fetched (%llu bytes)", x->hex, (unsigned long long)x->size);
}

/* One FILE_DATA (or ERROR) for x's oldest request. */
static void get_reply(struct live *l, struct xfer *x, const struct wire_msg *m)
{
    char part[800];
    memmove(x->ids, x->ids + 1, sizeof x->ids[0] * (STAGE_INFLIGHT - 1));
    memmove(x->offs, x->offs + 1, sizeof x->offs[0] * (STAGE_INFLIGHT - 1));
    x->nfl--;
    if (m->type == WT_ERROR) {
        char msg[200];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        fail(x, false, "the cluster says: %s", msg);
        x->nfl = 0; /* the other replies are not waited for (the failure drops x) */
        return;
    }
    size_t len;
    const void *data = wire_get_bin(m->root, "data", &len);
    uint64_t off = wire_get_u64(m->root, "off", 0);
    if (m->type == WT_FILE_DATA && len == 0 && off < x->size && wire_get(m->root, "have")) {
        x->nfl = 0; /* not uploaded that far yet (cut-through): ask again in a moment */
        x->next_off = x->got;
        x->retry_ms = loop_now_ms() + STAGE_RETRY_MS;
        return;
    }
    if (m->type != WT_FILE_DATA || off != x->got || x->got + len > x->size ||
        (len == 0 && x->got < x->size)) {
        x->nfl = 0; /* out of step: ask again from what is whole */
        x->next_off = x->got;
        return;
    }
    stage_cache_part(&l->stage->cache, x->hex, part, sizeof part);
    int fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ssize_t w = fd < 0 ? -1 : pwrite(fd, data, len, (off_t)off);
    if (w == (ssize_t)len) /* write-back starts now: the fsync when whole waits less */
        (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
    if (fd >= 0)
        close(fd);
    if (w != (ssize_t)len) {
        fail(x, true, "cannot write the cache: %s", strerror(errno));
        return;
    }
    sha256_update(&x->sha, data, len);
    x->got += len;
    if (x->got == x->size)
        get_done(l, x);
}

static void put_reply(struct live *l, struct xfer *x, const struct wire_msg *m)
{
    (void)l;
    x->nfl = 0;
    if (m->type == WT_ERROR) {
        char msg[200];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        fail(x, false, "the cluster says: %s", msg);
        return;
    }
    x->asked = true;
    x->got = wire_get_u64(m->root, "have", 0);
    if (wire_get_bool(m->root, "done", false)) {
        x->done = true;
        unlink(x->path); /* the cluster holds it (durably) now */
    }
}

static bool ckpt_reply(struct live *l, const struct wire_msg *m);

/*
 * An idle node (one cluster, a session, no task at all) keeps one WORK_WAIT held at the
 * cluster on its transfer connection: the cluster answers it when a job is submitted,
 * and the node then asks for tasks at once instead of at its next poll (the RPCs and
 * their round-trip estimates are not touched). A node with tasks polls as before.
 */
static void ww_pump(struct live *l, int64_t now)
{
    struct lstage *s = l->stage;
    if (s->ww_id && now - s->ww_sent_ms > WW_WAIT_MS + 2 * vcl_rpc_timeout(l, s->sock[0]))
        s->ww_id = 0; /* lost (a reconnection): sent again */
    if (s->ww_off || s->ww_id || now < s->ww_next_ms || !l->single || l->ntasks ||
        !l->proj[0].sid[0])
        return;
    uint64_t id = ++s->next_id;
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, WT_WORK_WAIT, id, 1);
    wire_put_u64(&l->wb, "wait_ms", WW_WAIT_MS);
    if (send_req(l, 0, id)) {
        s->ww_id = id;
        s->ww_sent_ms = now;
    }
    s->ww_next_ms = now + WW_GAP_MS;
}

/* The answer to the WORK_WAIT in flight: on news of a job, the wait for the next poll
 * ends now. True if m was it. */
static bool ww_reply(struct live *l, const struct wire_msg *m)
{
    struct lstage *s = l->stage;
    if (!s->ww_id || m->id != s->ww_id)
        return false;
    s->ww_id = 0;
    if (m->type == WT_ERROR) {
        s->ww_off = wire_get_u64(m->root, "code", 0) == WE_TYPE;
        return true;
    }
    if (m->type != WT_WORK_WAKE || !wire_get_bool(m->root, "work", false) || l->e->nprojects < 1)
        return true;
    for (int t = 0; t < l->e->nptypes; t++)
        l->e->projects[0].rsc[t].backoff_until = 0;
    log_debug("project %s: a job was submitted; asking for work now", l->e->projects[0].name);
    vcl_kick(l);
    return true;
}

static void on_stage_sock(struct loop *lp, void *arg)
{
    struct lsock *k = arg;
    struct live *l = k->l;
    (void)lp;
    for (;;) {
        zmq_msg_t zm;
        zmq_msg_init(&zm);
        if (zmq_msg_recv(&zm, k->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&zm);
            break;
        }
        struct wire_msg m;
        struct wire_error err;
        if (wire_decode(zmq_msg_data(&zm), zmq_msg_size(&zm), false, &m, &err) == 0) {
            bool ck = ww_reply(l, &m) || ckpt_reply(l, &m); /* WORK_WAIT's, a CKPT's */
            for (uint32_t i = 0; !ck && i < l->stage->nx; i++) {
                struct xfer *x = l->stage->x[i];
                if (x->nfl && x->ids[0] == m.id && x->project == k->project) {
                    if (x->kind == X_GET)
                        get_reply(l, x, &m);
                    else
                        put_reply(l, x, &m);
                    break;
                }
            }
            wire_msg_free(&m);
        }
        zmq_msg_close(&zm);
    }
    vcl_kick(l);
}

static struct lsock *stage_sock(struct live *l, int p)
{
    struct lstage *s = l->stage;
    const char *url = l->proj[p].session_url;
    if (!url[0] && l->e->projects[p].nendpoints > 0)
        url = l->e->projects[p].endpoints[0];
    if (s->sock[p] && strcmp(s->sock[p]->url, url)) { /* the project moved: reconnect */
        vcl_sock_close(l, &s->sock[p]);
        if (p == 0)
            s->ww_id = 0, s->ww_off = false;
        for (uint32_t i = 0; i < s->nx; i++)
            if (s->x[i]->project == p)
                s->x[i]->nfl = 0, s->x[i]->next_off = s->x[i]->got, s->x[i]->asked = false;
    }
    if (!s->sock[p] && url[0] && (s->sock[p] = vcl_link_open(l, p, url))) {
        loop_add_socket(l->loop, s->sock[p]->sock, on_stage_sock, s->sock[p]);
        if (s->sock[p]->link.mon)
            loop_add_socket(l->loop, s->sock[p]->link.mon, on_stage_mon, s->sock[p]);
    }
    return s->sock[p];
}

/* Sends what x may send now (within STAGE_INFLIGHT, and *budget requests in all);
 * restarts requests timed out. */
static void drive(struct live *l, struct xfer *x, int64_t now, int *budget)
{
    struct lstage *s = l->stage;
    if (x->done || x->failed)
        return;
    int64_t tmo = 2 * vcl_rpc_timeout(l, s->sock[x->project]) + 2000;
    if (x->nfl && now - x->sent_ms > tmo) { /* lost: ask again from what is whole */
        x->nfl = 0;
        x->next_off = x->got;
        x->asked = false;
    }
    if (x->kind == X_GET && x->size == 0) {
        get_done(l, x);
        return;
    }
    if (x->kind == X_GET && now < x->retry_ms)
        return;
    while (*budget > 0 && x->nfl < (x->kind == X_GET ? STAGE_INFLIGHT : 1) &&
           (x->kind == X_PUT || x->next_off < x->size)) {
        uint64_t id = ++s->next_id, off = x->kind == X_GET ? x->next_off : x->got;
        size_t len = x->size - off < WIRE_FILE_CHUNK ? (size_t)(x->size - off) : WIRE_FILE_CHUNK;
        wire_buf_reset(&l->wb);
        if (x->kind == X_GET) {
            wire_begin(&l->wb, WT_FILE_GET, id, 4);
            wire_put_str(&l->wb, "hash", x->hex);
            wire_put_u64(&l->wb, "job", x->job);
            wire_put_u64(&l->wb, "off", off);
            wire_put_u64(&l->wb, "len", len);
        } else if (!x->asked) {
            wire_begin(&l->wb, WT_FILE_HAVE, id, 2);
            wire_put_str(&l->wb, "hash", x->hex);
            wire_put_u64(&l->wb, "size", x->size);
        } else {
            uint8_t *buf = malloc(len ? len : 1);
            int fd = open(x->path, O_RDONLY | O_CLOEXEC);
            ssize_t r = buf && fd >= 0 ? pread(fd, buf, len, (off_t)off) : -1;
            if (fd >= 0)
                close(fd);
            if (r != (ssize_t)len) {
                free(buf);
                fail(x, true, "cannot read the kept output: %s", strerror(errno));
                return;
            }
            wire_begin(&l->wb, WT_FILE_PUT, id, 4);
            wire_put_str(&l->wb, "hash", x->hex);
            wire_put_u64(&l->wb, "size", x->size);
            wire_put_u64(&l->wb, "off", off);
            wire_put_bin(&l->wb, "data", buf, len);
            free(buf);
        }
        if (!send_req(l, x->project, id))
            return; /* not connected yet: the next tick tries again */
        x->ids[x->nfl] = id;
        x->offs[x->nfl++] = off;
        --*budget;
        x->sent_ms = now;
        if (x->kind == X_GET)
            x->next_off += len;
    }
}

/* t's inputs (and the cluster's checkpoint of it, unless this node keeps one as new):
 * cached, being fetched, or failed (t->bad). True when all are cached. */
static bool stage_inputs(struct live *l, struct ltask *t)
{
    bool all = true;
    struct stage_files *f = t->files;
    uint32_t li;
    f->ck_local = ckpt_local(l->cfg->state_dir, t->job, t->idx, &li) == 0 && li >= f->ck_issue;
    for (uint32_t k = 0; k < f->nin + (f->ck_local ? 0 : f->nck) && !t->bad[0]; k++) {
        const struct stage_in *in = k < f->nin ? &f->in[k] : &f->ck[k - f->nin];
        if (stage_cache_has(&l->stage->cache, in->hex, in->size))
            continue;
        all = false;
        struct xfer *x = xfer_find(l->stage, X_GET, in->hex);
        if (!x)
            x = xfer_new(l->stage, X_GET, t->project, in->hex, in->size, t->job);
        if (x && x->failed) {
            t->bad_host = x->host_fault;
            snprintf(t->bad, sizeof t->bad, "input '%.80s': %.100s", in->name, x->err);
        }
    }
    return all && !t->bad[0];
}

/* ---- parallel ranks (issue 26, docs/data.md "Parallel jobs") ---- */

/* The inputs of waiting rank q of project p: cached, being fetched, or failed (why in
 * bad). True when all are cached. */
static bool rank_inputs(struct live *l, int p, const struct pproc *q, char *bad, size_t n)
{
    bool all = true;
    const struct stage_files *f = q->files;
    for (uint32_t k = 0; k < f->nin + f->nck && !bad[0]; k++) { /* and its checkpoint */
        const struct stage_in *in = k < f->nin ? &f->in[k] : &f->ck[k - f->nin];
        if (stage_cache_has(&l->stage->cache, in->hex, in->size))
            continue;
        all = false;
        struct xfer *x = xfer_find(l->stage, X_GET, in->hex);
        if (!x)
            x = xfer_new(l->stage, X_GET, p, in->hex, in->size, q->job);
        if (x && x->failed)
            snprintf(bad, n, "input '%.80s': %.100s", in->name, x->err);
    }
    return all && !bad[0];
}

/* The kept outputs of ended rank q: uploaded one after the other; true when all are (a
 * failed upload is named in its files_note and the file left out of its list). */
static bool rank_outputs(struct live *l, int p, struct pproc *q)
{
    struct stage_files *f = q->files;
    while (q->up_next < f->nout) {
        struct stage_out *o = &f->out[q->up_next];
        struct xfer *x = xfer_find(l->stage, X_PUT, o->hex);
        if (!x && (x = xfer_new(l->stage, X_PUT, p, o->hex, o->size, q->job)))
            snprintf(x->path, sizeof x->path, "%s/%s", l->stage->outbox, o->hex);
        if (!x || (!x->done && !x->failed))
            return false;
        if (x->failed) {
            size_t nl = strlen(q->note);
            log_warnx("parallel job %llu process %u: output '%s' not uploaded: %s",
                      (unsigned long long)q->job, q->rank, o->name, x->err);
            snprintf(q->note + nl, sizeof q->note - nl, "%s'%.60s' not uploaded: %.100s",
                     nl ? "; " : "", o->name, x->err);
            free(o->name);
            f->out[q->up_next] = f->out[--f->nout]; /* the rest is checked in its place */
            continue;
        }
        q->up_next++;
    }
    return true;
}

/* Every project's parallel ranks: the waiting ones started once their inputs are here
 * (and they are not stopped), the ended ones' outputs uploaded, then their exits sent. */
static void pump_ranks(struct live *l)
{
    for (int p = 0; l->e && p < l->e->nprojects; p++) {
        struct lpar *a = l->proj[p].par;
        for (uint32_t i = 0; a && i < a->pp.n; i++) {
            struct pproc *q = a->pp.p[i];
            char bad[300] = "";
            if (q->waiting && rank_inputs(l, p, q, bad, sizeof bad) && !q->stopped)
                pprocs_launch(&a->pp, q);
            else if (q->waiting && bad[0])
                pprocs_fail(&a->pp, q, bad);
            else if (q->uploading && rank_outputs(l, p, q))
                q->uploading = false;
            else
                continue;
            a->now = true; /* started, failed or ended: the cluster learns at once */
            vcl_kick(l);
        }
    }
}

/* t's kept outputs: uploaded one after the other; true when all are. */
static bool stage_outputs(struct live *l, struct ltask *t)
{
    struct stage_files *f = t->files;
    while (t->up_next < f->nout) {
        const struct stage_out *o = &f->out[t->up_next];
        struct xfer *x = xfer_find(l->stage, X_PUT, o->hex);
        if (!x && (x = xfer_new(l->stage, X_PUT, t->project, o->hex, o->size, t->job)))
            snprintf(x->path, sizeof x->path, "%s/%s", l->stage->outbox, o->hex);
        if (!x)
            return false;
        if (x->failed)
            log_warnx("task %llu.%u: output '%s' not uploaded: %s", (unsigned long long)t->job,
                      t->idx, o->name, x->err);
        if (!x->done && !x->failed)
            return false;
        t->up_next++;
    }
    return true;
}

/* ---- checkpoints (ckpt.h, docs/data.md "Checkpoints") ---- */

/* What checkpoints: a task, or a parallel job's rank (its index idx, the job's run as
 * issue). */
struct ckunit {
    struct stage_files *f;
    const char *workdir;
    int project;
    uint64_t job;
    uint32_t idx, issue;
    bool rank;
};

static struct ckunit task_unit(struct ltask *t)
{
    return (struct ckunit){t->files, t->run.workdir, t->project, t->job, t->idx, t->issue, false};
}

static struct ckunit rank_unit(struct pproc *q, int p)
{
    return (struct ckunit){q->files, q->run.workdir, p, q->job, q->rank, q->files->ck_run, true};
}

/* A digest of a snapshot's list (names and contents): an unchanged one is not sent. */
static void snap_sum(const struct stage_files *f, uint8_t d[SHA256_LEN])
{
    struct sha256 s;
    sha256_init(&s);
    for (uint32_t i = 0; i < f->nsnap; i++) {
        sha256_update(&s, f->snap[i].name, strlen(f->snap[i].name) + 1);
        sha256_update(&s, f->snap[i].hex, 64);
    }
    sha256_final(&s, d);
}

static void ck_note(const struct ckunit *u, const char *why)
{
    struct stage_files *f = u->f;
    if (strcmp(f->ck_note, why))
        log_warnx("%s %llu%s%u: %s", u->rank ? "parallel job" : "task", (unsigned long long)u->job,
                  u->rank ? " process " : ".", u->idx, why);
    snprintf(f->ck_note, sizeof f->ck_note, "%s", why);
}

/* A rank's snapshot: of a generation newer than the cluster's, taken at rest (ckpt.h);
 * tried again at the next tick when the rank is writing one. True when one is to go. */
static bool rank_take(struct live *l, const struct ckunit *u, int64_t now, char *note, size_t nn)
{
    struct stage_files *f = u->f;
    uint32_t gen;
    int rc = ckpt_generation(u->workdir, &gen, note, nn);
    if (rc == 1 && (int64_t)gen <= f->ck_gen)
        return false; /* the cluster has it (or the rank started from it) */
    if (rc == 1)
        rc = ckpt_snapshot_gen(u->workdir, l->stage->outbox, (uint64_t)f->ckpt_mb << 20, &gen,
                               &f->snap, &f->nsnap, note, nn);
    if (rc < 0)
        ck_note(u, note);
    if (rc == 0 && ckpt_generation(u->workdir, &gen, note, nn) == 1)
        f->ck_next_ms = now + STAGE_TICK_MS; /* mid-write: soon again */
    f->ck_snap_gen = gen;
    return rc == 1;
}

/* A new snapshot of u's checkpoint directory, when it is due: true when one is to go. */
static bool ckpt_take(struct live *l, const struct ckunit *u, int64_t now)
{
    struct stage_files *f = u->f;
    char note[300] = "";
    uint8_t d[SHA256_LEN];
    if (!f->ck_next_ms)
        f->ck_next_ms = now + (int64_t)f->ckpt_s * 1000;
    if (now < f->ck_next_ms)
        return false;
    f->ck_next_ms = now + (int64_t)f->ckpt_s * 1000;
    ckpt_snapshot_free(&f->snap, &f->nsnap);
    if (u->rank ? !rank_take(l, u, now, note, sizeof note)
                : ckpt_snapshot(u->workdir, l->stage->outbox, (uint64_t)f->ckpt_mb << 20, &f->snap,
                                &f->nsnap, note, sizeof note) < 0) {
        if (!u->rank)
            ck_note(u, note);
        return false;
    }
    if (note[0])
        ck_note(u, note);
    snap_sum(f, d);
    if (f->ck_sent_ok && !memcmp(d, f->ck_sum, sizeof d))
        return false; /* as the cluster has it already */
    memcpy(f->ck_sum, d, sizeof d);
    f->ck_sent_ok = false;
    f->snap_next = 0;
    f->ck_id = 0;
    return true;
}

/* Sends CKPT naming u's snapshot: 0, or -1 (not connected yet). */
static int ckpt_send(struct live *l, const struct ckunit *u, int64_t now)
{
    struct stage_files *f = u->f;
    uint64_t id = ++l->stage->next_id;
    wire_buf_reset(&l->wb);
    wire_begin(&l->wb, WT_CKPT, id, 5 + u->rank);
    wire_put_str(&l->wb, "sid", l->proj[u->project].sid);
    wire_put_u64(&l->wb, "job", u->job);
    wire_put_u64(&l->wb, "idx", u->idx);
    wire_put_u64(&l->wb, "issue", u->issue);
    if (u->rank) /* docs/data.md "Checkpoints of parallel jobs" */
        wire_put_u64(&l->wb, "gen", f->ck_snap_gen);
    stage_pack_files(&l->wb, "files", f->snap, f->nsnap);
    if (!send_req(l, u->project, id))
        return -1;
    f->ck_id = id;
    f->ck_sent_ms = now;
    return 0;
}

/* A running task (or rank) of a job with --checkpoint-s: every ckpt_s seconds its
 * checkpoint directory is copied, its files uploaded (as outputs are), then named by
 * CKPT. */
static void ckpt_pump(struct live *l, const struct ckunit *u, int64_t now)
{
    struct stage_files *f = u->f;
    if (!f->ck_busy && !(f->ck_busy = ckpt_take(l, u, now)))
        return;
    while (f->snap_next < f->nsnap) {
        const struct stage_out *o = &f->snap[f->snap_next];
        struct xfer *x = xfer_find(l->stage, X_PUT, o->hex);
        if (!x && (x = xfer_new(l->stage, X_PUT, u->project, o->hex, o->size, u->job)))
            snprintf(x->path, sizeof x->path, "%s/%s", l->stage->outbox, o->hex);
        if (!x)
            return;
        if (x->failed) {
            char why[300];
            snprintf(why, sizeof why, "checkpoint not uploaded: %.200s", x->err);
            ck_note(u, why);
            f->ck_busy = false;
            return;
        }
        if (!x->done)
            return;
        f->snap_next++;
    }
    if (f->ck_id && now - f->ck_sent_ms > 2 * vcl_rpc_timeout(l, l->stage->sock[u->project]))
        f->ck_id = 0; /* lost: sent again */
    if (!f->ck_id)
        ckpt_send(l, u, now);
}

static void task_ckpt_pump(struct live *l, struct ltask *t, int64_t now)
{
    struct ckunit u = task_unit(t);
    if (t->files->ckpt_s && (t->state == LT_RUNNING || t->state == LT_STOPPED) && t->run.workdir[0])
        ckpt_pump(l, &u, now);
}

/* Every project's running (or stopped) ranks of jobs with --checkpoint-s. */
static void rank_ckpt_pump(struct live *l, int64_t now)
{
    for (int p = 0; l->e && p < l->e->nprojects; p++) {
        struct lpar *a = l->proj[p].par;
        for (uint32_t i = 0; a && i < a->pp.n; i++) {
            struct pproc *q = a->pp.p[i];
            if (!q->files || !q->files->ck_par || !q->files->ckpt_s || q->waiting || q->exited ||
                !q->run.workdir[0])
                continue;
            struct ckunit u = rank_unit(q, p);
            ckpt_pump(l, &u, now);
        }
    }
}

/* The reply m to u's CKPT in flight: true if it was (consumed). */
static bool ckpt_answer(const struct ckunit *u, const struct wire_msg *m)
{
    struct stage_files *f = u->f;
    if (!f || !f->ck_busy || !f->ck_id || f->ck_id != m->id)
        return false;
    f->ck_busy = false;
    f->ck_id = 0;
    if (m->type == WT_ERROR) {
        char msg[200], why[300];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        snprintf(why, sizeof why, "checkpoint refused by the cluster: %s", msg);
        ck_note(u, why);
        return true;
    }
    f->ck_sent_ok = true;
    if (u->rank) { /* what a rank's files_note says is its latest state */
        f->ck_gen = f->ck_snap_gen;
        f->ck_note[0] = '\0';
    }
    log_debug("%s %llu%s%u: checkpoint of %u file(s) at the cluster",
              u->rank ? "parallel job" : "task", (unsigned long long)u->job,
              u->rank ? " process " : ".", u->idx, f->nsnap);
    return true;
}

/* A reply to a CKPT: true if it was one (consumed). */
static bool ckpt_reply(struct live *l, const struct wire_msg *m)
{
    for (size_t i = 0; i < l->ntasks; i++) {
        struct ckunit u = task_unit(l->tasks[i]);
        if (ckpt_answer(&u, m))
            return true;
    }
    for (int p = 0; l->e && p < l->e->nprojects; p++) {
        struct lpar *a = l->proj[p].par;
        for (uint32_t i = 0; a && i < a->pp.n; i++) {
            if (!a->pp.p[i]->files)
                continue;
            struct ckunit u = rank_unit(a->pp.p[i], p);
            if (ckpt_answer(&u, m))
                return true;
        }
    }
    return false;
}

static void drop_finished(struct lstage *s)
{
    for (uint32_t i = 0; i < s->nx;) {
        struct xfer *x = s->x[i];
        if ((x->done || x->failed) && !x->nfl) {
            /* a failed one stays a while for the tasks to read; a done one goes now */
            if (x->failed && !x->asked) {
                x->asked = true;
                i++;
                continue;
            }
            free(x);
            s->x[i] = s->x[--s->nx];
            continue;
        }
        i++;
    }
}

void vcl_stage_pump(struct live *l)
{
    if (!l->stage)
        return;
    int64_t now = loop_now_ms();
    for (size_t i = 0; i < l->ntasks; i++) {
        struct ltask *t = l->tasks[i];
        if (!t->files)
            continue;
        if (t->uploading && stage_outputs(l, t)) {
            t->uploading = false;
            long e = vcl_engine_index(l, t);
            if (e >= 0)
                engine_task_done(l->e, vcl_now(), (size_t)e);
            vcl_kick(l);
        }
        task_ckpt_pump(l, t, now);
        if (t->staged || t->state != LT_QUEUED || t->result || (!t->files->nin && !t->files->nck))
            continue;
        t->staged = stage_inputs(l, t);
        long e = vcl_engine_index(l, t);
        if ((t->staged || t->bad[0]) && e >= 0 && l->e->tasks[e].state == ENGINE_TASK_RUNNING)
            vcl_task_start(l, t); /* the engine chose it while its inputs came */
    }
    pump_ranks(l); /* issue 26: parallel ranks' files */
    rank_ckpt_pump(l, now);
    ww_pump(l, now);
    int budget = STAGE_INFLIGHT_ALL;
    for (uint32_t i = 0; i < l->stage->nx; i++)
        budget -= l->stage->x[i]->nfl;
    for (uint32_t i = 0; i < l->stage->nx; i++)
        drive(l, l->stage->x[i], now, &budget);
    drop_finished(l->stage);
}

static void on_tick(struct loop *lp, void *arg)
{
    (void)lp;
    vcl_stage_pump(arg);
}

int vcl_stage_open(struct live *l)
{
    if (!(l->stage = calloc(1, sizeof *l->stage)))
        return -1;
    snprintf(l->stage->outbox, sizeof l->stage->outbox, "%s/outbox", l->cfg->state_dir);
    if (stage_cache_open(&l->stage->cache, l->cfg->state_dir, (uint64_t)l->cfg->cache_mb << 20) <
        0) {
        log_warn("cannot open the file cache in %s/cache", l->cfg->state_dir);
        return -1;
    }
    l->cache = &l->stage->cache;
    l->stage->timer = loop_timer(l->loop, STAGE_TICK_MS, 1, on_tick, l);
    return 0;
}

static bool held(void *arg, uint64_t id)
{
    const struct live *l = arg;
    for (size_t i = 0; i < l->ntasks; i++)
        if (l->tasks[i]->id == id)
            return true;
    return false;
}

void vcl_ckpt_sweep(struct live *l)
{
    ckpt_sweep(l->cfg->state_dir, held, l);
}

void vcl_stage_close(struct live *l)
{
    struct lstage *s = l->stage;
    if (!s)
        return;
    for (int p = 0; p < LIVE_MAX_PROJECTS; p++)
        vcl_sock_close(l, &s->sock[p]);
    for (uint32_t i = 0; i < s->nx; i++)
        free(s->x[i]);
    free(s->x);
    if (s->timer)
        loop_timer_cancel(l->loop, s->timer);
    stage_cache_close(&s->cache);
    free(s);
    l->stage = NULL;
    l->cache = NULL;
}

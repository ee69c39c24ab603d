/*
 * feed.c - the cluster's change feed for drivers such as the batch role (issue 9):
 * EVENTS -> EVENT_LIST over a bounded in-memory ring of job and host events, and the
 * long-polls built on lib/daemon's held replies (held EVENTS, held PSYNC).
 *
 * Events are made after a turn's commit, from what the commit made durable: a parallel
 * job whose state differs from the one last published (scored_save_dirty notes it
 * in c->evt), and a session whose active / procs / cores / memory / disk differ from the
 * snapshot taken at the last event. They are numbered from 1 (seq) and kept in a ring
 * of at most events.keep events and FEED_MAX_BYTES bytes, oldest dropped first. They
 * are not durable: a new cluster process has a new random epoch, so a driver that
 * sees another epoch (or asks for a seq already dropped) gets reset = true and
 * resynchronises from the lists. docs/wire.md (EVENTS) is the normative description.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/endwait.h"
#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/cluster/scored_int.h"
#include "roles/cluster/files.h"
#include "roles/cluster/workwait.h"

#define FEED_MAX_BYTES (64u << 20) /* packed events kept at most */
#define FEED_WAITERS_MAX 4096      /* held EVENTS and PSYNC requests (DAEMON_HELD_MAX) */

struct ev {
    uint64_t seq;
    uint32_t len;
    uint8_t *data; /* one packed event map */
};

/* The last published view of one session (host events are sent on a difference). */
struct hsnap {
    char sid[33];
    bool active, procs;
    uint32_t cores;
    uint64_t mem_mb, disk_mb;
    uint64_t features; /* hash of its feature list (issue 27) */
};

/* FNV-1a of s: a changed feature list gives a host event. */
static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A held request: EVENTS (from, max) or PSYNC (the node's session id). */
struct waiter {
    uint64_t handle, req_id;
    uint32_t kind; /* WT_EVENTS or WT_PSYNC */
    uint64_t from;
    uint32_t max;
    char sid[33];
    bool wake; /* PSYNC: something of its node changed this turn */
};

struct feed {
    char epoch[33];
    struct ev *ring;
    uint32_t cap, head, n; /* ring[head] is the oldest of n */
    uint64_t next_seq;
    size_t bytes;
    struct hsnap *hs;
    uint32_t nhs;
    struct waiter *w;
    uint32_t nw, capw;
    struct wire_buf wb;
};

static void random_hex(char *out, size_t n)
{
    uint8_t b[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)loop_now_ms();
        memcpy(b, &x, sizeof x);
    }
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int feed_open(struct cluster *c)
{
    struct feed *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->cap = (uint32_t)c->cfg.ev_keep;
    f->next_seq = 1;
    random_hex(f->epoch, sizeof f->epoch);
    wire_buf_init(&f->wb);
    c->sd->feed = f;
    c->evt.on = true;
    log_info("event feed: epoch %s, keeping %u events", f->epoch, f->cap);
    return 0;
}

void feed_close(struct cluster *c)
{
    struct feed *f = c->sd ? c->sd->feed : NULL;
    if (!f)
        return;
    for (uint32_t i = 0; i < f->n; i++)
        free(f->ring[(f->head + i) % f->cap].data);
    free(f->ring);
    free(f->hs);
    free(f->w);
    free(c->evt.par);
    free(c->evt.bag);
    c->evt = (struct ev_turn){0};
    wire_buf_free(&f->wb);
    free(f);
    c->sd->feed = NULL;
}

/* ---- the ring ---- */

static uint64_t first_seq(const struct feed *f)
{
    return f->n ? f->ring[f->head].seq : f->next_seq;
}

static void drop_oldest(struct feed *f)
{
    struct ev *e = &f->ring[f->head];
    f->bytes -= e->len;
    free(e->data);
    e->data = NULL;
    f->head = (f->head + 1) % f->cap;
    f->n--;
}

/* Appends the event packed in f->wb (its seq is f->next_seq). */
static void ring_push(struct feed *f)
{
    if (!f->ring && !(f->ring = calloc(f->cap, sizeof *f->ring)))
        return;
    uint8_t *d = malloc(f->wb.sb.size);
    if (!d) {
        log_warnx("out of memory: event %llu not kept (drivers will resynchronise)",
                  (unsigned long long)f->next_seq);
        f->next_seq++;
        return;
    }
    memcpy(d, f->wb.sb.data, f->wb.sb.size);
    while (f->n && (f->n == f->cap || f->bytes + f->wb.sb.size > FEED_MAX_BYTES))
        drop_oldest(f);
    f->ring[(f->head + f->n) % f->cap] = (struct ev){f->next_seq++, (uint32_t)f->wb.sb.size, d};
    f->n++;
    f->bytes += f->wb.sb.size;
}

/* ---- job events ---- */

static void pack_bag_event(struct feed *f, const struct job *j)
{
    bool ended = j->state == JS_DONE || j->state == JS_CANCELLED;
    wire_buf_reset(&f->wb);
    wire_pack_map(&f->wb, 7 + (j->key != NULL) + (ended && j->finished_ms) + ended);
    wire_put_u64(&f->wb, "seq", f->next_seq);
    wire_put_str(&f->wb, "kind", "bag");
    wire_put_u64(&f->wb, "job", j->id);
    if (j->key)
        wire_put_str(&f->wb, "key", j->key);
    wire_put_str(&f->wb, "state", job_state_shown(j));
    wire_put_u64(&f->wb, "ntasks", j->ntasks);
    wire_put_u64(&f->wb, "done", j->ndone);
    wire_put_u64(&f->wb, "failed", j->nfailed);
    if (ended && j->finished_ms)
        wire_put_i64(&f->wb, "finished", j->finished_ms);
    if (ended) { /* the final row: a waiting tool prints it without asking again */
        wire_put_key(&f->wb, "row");
        cluster_job_pack(j, &f->wb, true);
    }
}

/* The exit code and signal that ended j: the first failing rank's, else 0. */
static void job_exit(const struct pjob *j, int64_t *code, uint64_t *sig)
{
    *code = 0;
    *sig = 0;
    for (uint32_t r = 0; j->ranks && r < j->rq.nprocs; r++)
        if (j->ranks[r].st == PR_EXITED && (j->ranks[r].exit || j->ranks[r].sig)) {
            *code = j->ranks[r].exit;
            *sig = j->ranks[r].sig;
            return;
        }
    if (j->state != PJ_DONE)
        *code = -1;
}

static void pack_job_event(struct cluster *c, struct feed *f, const struct pjob *j)
{
    bool ended = PJ_TERMINAL(j->state);
    uint32_t nf = 4 + (j->key != NULL) + (j->nhosts > 0) + (ended ? 3 + j->lost : 0) +
                  (j->started_ms != 0) + (j->finished_ms != 0);
    wire_buf_reset(&f->wb);
    wire_pack_map(&f->wb, nf);
    wire_put_u64(&f->wb, "seq", f->next_seq);
    wire_put_str(&f->wb, "kind", "job");
    wire_put_u64(&f->wb, "job", j->id);
    if (j->key)
        wire_put_str(&f->wb, "key", j->key);
    wire_put_str(&f->wb, "state", pj_state_name(j->state));
    if (j->nhosts) {
        wire_put_key(&f->wb, "hosts");
        wire_pack_array(&f->wb, j->nhosts);
        for (uint32_t h = 0; h < j->nhosts; h++)
            wire_pack_str(&f->wb, j->hosts[h] < c->nnodes ? c->nodes[j->hosts[h]].name : "?");
    }
    if (ended) {
        int64_t code;
        uint64_t sig;
        job_exit(j, &code, &sig);
        wire_put_i64(&f->wb, "exit", code);
        wire_put_u64(&f->wb, "signal", sig);
        wire_put_str(&f->wb, "reason", j->reason);
        if (j->lost) /* a host or process was lost (issue 24): the batch role reruns it */
            wire_put_bool(&f->wb, "lost", true);
    }
    if (j->started_ms)
        wire_put_i64(&f->wb, "started", j->started_ms);
    if (j->finished_ms)
        wire_put_i64(&f->wb, "finished", j->finished_ms);
}

/* Marks the held PSYNCs of j's hosts to be answered. */
static void wake_hosts(struct cluster *c, struct feed *f, const struct pjob *j)
{
    for (uint32_t i = 0; i < f->nw; i++) {
        struct waiter *w = &f->w[i];
        if (w->kind != WT_PSYNC || w->wake)
            continue;
        for (uint32_t h = 0; h < j->nhosts; h++)
            if (j->hosts[h] < c->nnodes && !strcmp(c->nodes[j->hosts[h]].sid, w->sid)) {
                w->wake = true;
                break;
            }
    }
}

/* ---- host events ---- */

void cluster_procs_by_node(const struct cluster *c, uint32_t *counts)
{
    memset(counts, 0, (size_t)c->nnodes * sizeof *counts);
    for (uint32_t i = c->sd ? c->sd->live_from : 0; c->sd && i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        if (j->state != PJ_RUNNING || !j->ranks)
            continue;
        for (uint32_t r = 0; r < j->rq.nprocs; r++) {
            uint32_t h = j->ranks[r].host;
            if (h < j->nhosts && j->hosts[h] < c->nnodes && j->ranks[r].st != PR_EXITED)
                counts[j->hosts[h]]++;
        }
    }
}

static uint32_t node_running(const struct cluster *c, uint32_t me)
{
    uint32_t n = 0;
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        if (j->state != PJ_RUNNING || !j->ranks)
            continue;
        for (uint32_t r = 0; r < j->rq.nprocs; r++)
            n += j->ranks[r].host < j->nhosts && j->hosts[j->ranks[r].host] == me &&
                 j->ranks[r].st != PR_EXITED;
    }
    return n;
}

/*
 * Free disk moves all the time (files written and removed): a host event for it only
 * when it moved by more than FEED_DISK_MB or FEED_DISK_PCT percent since the last
 * event, so a busy node does not flood the feed.
 */
#define FEED_DISK_MB 256
#define FEED_DISK_PCT 5
static bool disk_moved(uint64_t was, uint64_t now)
{
    uint64_t d = was > now ? was - now : now - was;
    return d > FEED_DISK_MB || d * 100 > was * FEED_DISK_PCT;
}

static void host_events(struct cluster *c, struct feed *f)
{
    if (f->nhs < c->nnodes) {
        struct hsnap *n = realloc(f->hs, c->nnodes * sizeof *n);
        if (!n)
            return;
        memset(n + f->nhs, 0, (c->nnodes - f->nhs) * sizeof *n);
        f->hs = n;
        f->nhs = c->nnodes;
    }
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const struct node *nd = &c->nodes[i];
        struct hsnap *s = &f->hs[i];
        uint32_t cores = nd->slots ? nd->slots : nd->cores;
        uint64_t fh = nd->features[0] ? str_hash(nd->features) : 0;
        if (s->active == nd->active && s->procs == nd->procs && s->cores == cores &&
            s->mem_mb == nd->mem_mb && !disk_moved(s->disk_mb, nd->disk_mb) && s->features == fh &&
            !strcmp(s->sid, nd->sid))
            continue; /* the common case, cheap: this runs after every commit */
        struct hsnap now = {"", nd->active, nd->procs, cores, nd->mem_mb, nd->disk_mb, fh};
        snprintf(now.sid, sizeof now.sid, "%s", nd->sid);
        *s = now;
        char cname[SD_NAME];
        double sp;
        scored_node_class(c, nd, cname, sizeof cname, &sp);
        wire_buf_reset(&f->wb);
        wire_pack_map(&f->wb, 11 + !!nd->features[0]);
        if (nd->features[0]) /* issue 27: the batch role's hosts' features */
            wire_put_str(&f->wb, "features", nd->features);
        wire_put_u64(&f->wb, "seq", f->next_seq);
        wire_put_str(&f->wb, "kind", "host");
        wire_put_str(&f->wb, "node", nd->name);
        wire_put_str(&f->wb, "sid", nd->sid);
        wire_put_bool(&f->wb, "active", nd->active);
        wire_put_bool(&f->wb, "procs", nd->procs);
        wire_put_u64(&f->wb, "cores", now.cores);
        wire_put_u64(&f->wb, "mem_mb", nd->mem_mb);
        wire_put_u64(&f->wb, "disk_mb", nd->disk_mb);
        wire_put_str(&f->wb, "cluster", cname);
        wire_put_u64(&f->wb, "running", node_running(c, i));
        ring_push(f);
    }
}

/* ---- EVENT_LIST ---- */

/* Writes the EVENT_LIST answering (epoch, from, max) into wb. */
static void pack_list(struct cluster *c, struct feed *f, struct wire_buf *wb, uint64_t id,
                      bool epoch_differs, uint64_t from, uint32_t max)
{
    uint64_t first = first_seq(f);
    bool reset = epoch_differs || (from && from < first) || from > f->next_seq;
    uint64_t start = reset ? f->next_seq : from < first ? first : from;
    uint32_t n = 0;
    size_t bytes = 0;
    while (n < max && start + n < f->next_seq && (n == 0 || bytes <= CLUSTER_LIST_MAX)) {
        bytes += f->ring[(f->head + (start + n - first)) % f->cap].len;
        n++;
    }
    wire_begin(wb, WT_EVENT_LIST, id, 6);
    wire_put_str(wb, "epoch", f->epoch);
    wire_put_str(wb, "inc", c->incarnation);
    wire_put_u64(wb, "first", first);
    wire_put_u64(wb, "next", start + n);
    wire_put_bool(wb, "reset", reset);
    wire_put_key(wb, "events");
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++) {
        const struct ev *e = &f->ring[(f->head + (start + i - first)) % f->cap];
        msgpack_sbuffer_write(&wb->sb, (const char *)e->data, e->len);
    }
}

static struct waiter *waiter_add(struct feed *f)
{
    if (f->nw == f->capw) {
        uint32_t cap = f->capw ? f->capw * 2 : 64;
        struct waiter *n = realloc(f->w, cap * sizeof *n);
        if (!n)
            return NULL;
        f->w = n;
        f->capw = cap;
    }
    struct waiter *w = &f->w[f->nw++];
    memset(w, 0, sizeof *w);
    return w;
}

void h_events(struct cluster *c, struct request *r)
{
    struct feed *f = c->sd->feed;
    const msgpack_object *m = r->msg->root;
    size_t elen;
    const char *ep = wire_get_str(m, "epoch", &elen);
    bool differs = ep && (elen != strlen(f->epoch) || memcmp(ep, f->epoch, elen));
    uint64_t from = wire_get_u64(m, "from", 0), wait = wire_get_u64(m, "wait_ms", 0);
    uint32_t max = (uint32_t)wire_get_u64(m, "max", 1000);
    if (max == 0)
        max = 1000;
    bool nothing = !differs && !(from && from < first_seq(f)) && from <= f->next_seq &&
                   (from ? from : first_seq(f)) >= f->next_seq;
    if (nothing && wait > 0 && f->nw < FEED_WAITERS_MAX) {
        uint64_t h = daemon_hold(c->daemon, WT_EVENTS, (int64_t)wait);
        struct waiter *w = h ? waiter_add(f) : NULL;
        if (w) {
            w->handle = h;
            w->req_id = r->msg->id;
            w->kind = WT_EVENTS;
            w->from = from ? from : f->next_seq;
            w->max = max;
            return;
        }
        if (h) { /* could not remember it: answer at once */
            pack_list(c, f, &f->wb, r->msg->id, false, from, max);
            daemon_reply_held(c->daemon, h, &f->wb);
            return;
        }
    }
    pack_list(c, f, r->reply, r->msg->id, differs, from, max);
}

/* ---- held PSYNC ---- */

int feed_psync_hold(struct cluster *c, uint64_t handle, uint64_t req_id, const struct node *n)
{
    struct feed *f = c->sd->feed;
    struct waiter *w = f->nw < FEED_WAITERS_MAX ? waiter_add(f) : NULL;
    if (!w)
        return -1;
    w->handle = handle;
    w->req_id = req_id;
    w->kind = WT_PSYNC;
    snprintf(w->sid, sizeof w->sid, "%s", n->sid);
    return 0;
}

/* Writes the answer to held request w now. */
static void answer(struct cluster *c, struct feed *f, const struct waiter *w, struct wire_buf *wb)
{
    if (w->kind == WT_EVENTS) {
        pack_list(c, f, wb, w->req_id, false, w->from, w->max);
        return;
    }
    struct node *n = cluster_node_find(c, w->sid, strlen(w->sid));
    if (!n)
        wire_error_msg(wb, w->req_id, WE_SESSION,
                       "unknown session id: send HELLO to get a new one");
    else
        scored_psync_ack(c, wb, w->req_id, (uint32_t)(n - c->nodes));
}

void feed_expire(void *arg, uint64_t handle, uint32_t kind, uint64_t req_id, struct wire_buf *reply)
{
    struct cluster *c = arg;
    struct feed *f = c->sd->feed;
    if (kind == WT_WORK_WAIT) {
        workwait_expire(c, handle, req_id, reply);
        return;
    }
    if (files_cut_kind(kind)) { /* a read of a file still being uploaded (issue 26) */
        files_cut_expire(c, handle, req_id, reply);
        return;
    }
    if (kind == WT_JOB_WAIT && c->endwait && endwait_expire(c->endwait, handle, req_id, reply))
        return; /* issue 28 */
    for (uint32_t i = 0; i < f->nw; i++)
        if (f->w[i].handle == handle) {
            struct waiter w = f->w[i];
            f->w[i] = f->w[--f->nw];
            answer(c, f, &w, reply);
            return;
        }
    wire_error_msg(reply, req_id, WE_STATE, "the held request was lost; send it again");
}

/* ---- after each commit ---- */

void feed_after_commit(struct cluster *c)
{
    struct feed *f = c->sd->feed;
    if (!f)
        return;
    uint64_t before = f->next_seq;
    for (uint32_t i = 0; i < c->evt.npar; i++) {
        struct pjob *j = scored_job_find(c, c->evt.par[i]);
        if (!j || j->ev_state == (uint8_t)(j->state + 1))
            continue;
        j->ev_state = (uint8_t)(j->state + 1);
        pack_job_event(c, f, j);
        ring_push(f);
        wake_hosts(c, f, j);
    }
    c->evt.npar = 0;
    for (uint32_t i = 0; i < c->evt.nbag; i++) {
        struct job *j = cluster_job_find(c, c->evt.bag[i]);
        if (!j || j->ev_shown == job_state_shown(j))
            continue;
        j->ev_shown = job_state_shown(j);
        pack_bag_event(f, j);
        ring_push(f);
    }
    c->evt.nbag = 0;
    host_events(c, f);
    bool news = f->next_seq != before;
    for (uint32_t i = 0; i < f->nw;) {
        struct waiter *w = &f->w[i];
        if (!(w->kind == WT_PSYNC ? w->wake : news && w->from < f->next_seq)) {
            i++;
            continue;
        }
        struct waiter copy = *w;
        f->w[i] = f->w[--f->nw];
        wire_buf_reset(&f->wb);
        answer(c, f, &copy, &f->wb);
        daemon_reply_held(c->daemon, copy.handle, &f->wb);
    }
}

void feed_keepalive(struct cluster *c)
{
    struct feed *f = c->sd ? c->sd->feed : NULL;
    int64_t now = wall_now_ms();
    for (uint32_t i = 0; f && i < f->nw; i++) {
        struct node *n = f->w[i].kind == WT_PSYNC
                             ? cluster_node_find(c, f->w[i].sid, strlen(f->w[i].sid))
                             : NULL;
        if (n)
            n->last_ms = now;
    }
}

void feed_discard(struct cluster *c)
{
    c->evt.npar = c->evt.nbag = 0;
}

/*
 * livestage.c - files between the batch role and its cluster managers (issue 26,
 * docs/data.md "Through the batch role").
 *
 * Inputs: before a task of a job with files starts on a cluster, each of its inputs is
 * offered there with the messages a user's tool uses (FILE_HAVE, then FILE_PUT of what
 * is missing, chunks of 1 MiB, LIVE_XFER_INFLIGHT of them in flight per file (a reply
 * out of step restarts from what the cluster holds, as the tool does), LIVE_XFER_ACTIVE
 * files at once per cluster), read from the role's own store. A file is offered once per cluster
 * however many tasks name it (struct lxfer, per cluster, kept while the cluster stays
 * up). Only when every input is whole there does liveclu.c send the SUBMIT, which the
 * cluster refuses anyway if one is not. Nothing here is stored: after kill -9 of either
 * side the task is still "starting", the resync starts it again, and FILE_HAVE says how
 * much the cluster kept (its acknowledged chunks are durable), so the upload resumes.
 *
 * Outputs: when a task of a job with --output ends on its cluster, its kept files are
 * listed there (JOB_GET with tasks) and copied into the role's store (FILE_GET, one chunk
 * in flight, appended as an upload is, so a copy cut by kill -9 resumes from its last
 * durable chunk); then the list is stored (table "elemfiles") and only then does the task
 * count as ended, as HTCondor's job stays in "transferring output" until its files are
 * home. A copy that cannot be made (the cluster purged the job) ends the task with a
 * note saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/filestore.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"

#define LIVE_XFER_ACTIVE 4 /* files being offered to one cluster at once */

enum { XF_WAIT, XF_HAVE, XF_PUT, XF_DONE, XF_FAILED };
enum { PL_LIST, PL_GET };

static uint64_t prefix(const uint8_t d[SHA256_LEN])
{
    uint64_t k;
    memcpy(&k, d, sizeof k);
    return k;
}

static struct lxfer *xf_find(struct lclu *c, const uint8_t d[SHA256_LEN])
{
    for (uint32_t i = 0; i < c->nxf; i++)
        if (!memcmp(c->xf[i].d, d, SHA256_LEN))
            return &c->xf[i];
    return NULL;
}

static struct lxfer *xf_by_prefix(struct lclu *c, uint64_t k)
{
    for (uint32_t i = 0; i < c->nxf; i++)
        if (prefix(c->xf[i].d) == k)
            return &c->xf[i];
    return NULL;
}

/* ---- inputs ---- */

static void send_have(struct live *L, struct lclu *c, struct lxfer *x)
{
    struct wire_buf wb;
    char hex[SHA256_HEX];
    sha256_hex(x->d, hex);
    log_debug("offering file %.12s (%llu bytes) to cluster %s", hex, (unsigned long long)x->size,
              c->name);
    wire_buf_init(&wb);
    live_req_begin(L, c, RK_FHAVE, prefix(x->d), WT_FILE_HAVE, 2 + !!x->user[0], 0, &wb);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", x->size);
    if (x->user[0]) /* the job's owner: the cluster charges it (files.user_mb) */
        wire_put_str(&wb, "user", x->user);
    live_queue_out(L, c->idx, &wb);
    wire_buf_free(&wb);
    x->st = XF_HAVE;
}

/* The chunk at x->next, read from the role's store: 0, or -1 (x failed). */
static int send_put(struct live *L, struct lclu *c, struct lxfer *x)
{
    struct fsfile *f = filestore_find(L->files, x->d);
    uint64_t len = x->size - x->next < WIRE_FILE_CHUNK ? x->size - x->next : WIRE_FILE_CHUNK;
    void *buf = malloc(len ? len : 1);
    char hex[SHA256_HEX];
    sha256_hex(x->d, hex);
    if (!buf || !f || !f->done || filestore_read(L->files, f, x->next, buf, len) != (ssize_t)len) {
        free(buf);
        free(x->err);
        x->err = strdup("the batch role could not read its copy of the file");
        x->st = XF_FAILED;
        return -1;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, c, RK_FPUT, prefix(x->d), WT_FILE_PUT, 4 + !!x->user[0], 0, &wb);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", x->size);
    wire_put_u64(&wb, "off", x->next);
    wire_put_bin(&wb, "data", buf, len);
    if (x->user[0])
        wire_put_str(&wb, "user", x->user);
    live_queue_out(L, c->idx, &wb);
    wire_buf_free(&wb);
    free(buf);
    x->next += len;
    x->ends[x->nfl++] = x->next;
    x->st = XF_PUT;
    return 0;
}

/* Chunks from x->next on until LIVE_XFER_INFLIGHT are in flight (the cluster takes them
 * in order; one connection keeps the order): 0, or -1 (x failed). */
static int send_more(struct live *L, struct lclu *c, struct lxfer *x)
{
    while (x->nfl < LIVE_XFER_INFLIGHT && x->next < x->size)
        if (send_put(L, c, x) < 0)
            return -1;
    return 0;
}

/* Starts waiting transfers while fewer than LIVE_XFER_ACTIVE are under way. */
static void kick(struct live *L, struct lclu *c)
{
    uint32_t active = 0;
    for (uint32_t i = 0; i < c->nxf; i++)
        active += c->xf[i].st == XF_HAVE || c->xf[i].st == XF_PUT;
    for (uint32_t i = 0; i < c->nxf && active < LIVE_XFER_ACTIVE; i++)
        if (c->xf[i].st == XF_WAIT) {
            send_have(L, c, &c->xf[i]);
            active++;
        }
}

/* The elements of cluster c waiting for their inputs go to L->stage_ready (liveclu.c
 * starts them, or fails them with the refusal). */
static void wake(struct live *L, struct lclu *c)
{
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        struct lelem *el;
        if (!j->data || !j->nrun)
            continue;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
            if (!el->staging || el->cl != c->idx)
                continue;
            if (L->nready == L->capready) {
                uint32_t nc = L->capready ? L->capready * 2 : 64;
                void *p = realloc(L->stage_ready, nc * sizeof *L->stage_ready);
                if (!p)
                    return; /* they stay staging: the next transfer's end tries again */
                L->stage_ready = p, L->capready = nc;
            }
            el->staging = false;
            L->stage_ready[L->nready++] = live_eid(j->id, e);
        }
    }
}

struct stage_walk {
    struct live *L;
    struct lclu *c;
    const struct ljob *j;
    uint32_t pending;
    char *why;
    size_t wl;
};

/* One input of the element: known whole at the cluster, under way, or refused. */
static int walk_input(void *arg, const msgpack_object *in)
{
    struct stage_walk *w = arg;
    uint8_t d[SHA256_LEN];
    size_t hl, nl;
    const char *h = wire_get_str(in, "hash", &hl), *name = wire_get_str(in, "name", &nl);
    if (filestore_parse_hash(h, hl, d) < 0)
        return 0; /* checked at SUBMIT */
    struct lxfer *x = xf_find(w->c, d);
    if (!x) {
        if (w->c->nxf == w->c->capxf) {
            uint32_t nc = w->c->capxf ? w->c->capxf * 2 : 16;
            void *p = realloc(w->c->xf, nc * sizeof *w->c->xf);
            if (!p) {
                snprintf(w->why, w->wl, "out of memory");
                return -1;
            }
            w->c->xf = p, w->c->capxf = nc;
        }
        x = &w->c->xf[w->c->nxf++];
        memset(x, 0, sizeof *x);
        memcpy(x->d, d, SHA256_LEN);
        x->size = wire_get_u64(in, "size", 0);
        snprintf(x->user, sizeof x->user, "%s", w->j->user ? w->j->user : "");
        x->st = XF_WAIT;
    }
    if (x->st == XF_FAILED) {
        snprintf(w->why, w->wl, "input '%.*s' could not be sent to cluster %s: %s",
                 (int)(nl > 200 ? 200 : nl), name, w->c->name, x->err ? x->err : "refused");
        return -1;
    }
    w->pending += x->st != XF_DONE;
    return 0;
}

int live_stage_inputs(struct live *L, struct lclu *c, struct ljob *j, uint32_t e, char *why,
                      size_t wl)
{
    struct stage_walk w = {L, c, j, 0, why, wl};
    /* a parallel job's one element takes every rank's inputs (issue 26) */
    int rc = live_files_each_input(j, j->parallel ? UINT32_MAX : e, walk_input, &w);
    kick(L, c);
    return rc < 0 ? -1 : w.pending ? 1 : 0;
}

/* FILE_STATE or ERROR about an offered file. */
static void xfer_reply(struct live *L, struct lclu *c, uint64_t k, const struct wire_msg *m)
{
    struct lxfer *x = xf_by_prefix(c, k);
    if (!x || (x->st != XF_HAVE && x->st != XF_PUT))
        return;
    if (m->type == WT_ERROR) {
        char msg[512];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        log_info("cluster %s refused a file the batch role offered: %s", c->name, msg);
        free(x->err);
        x->err = strdup(msg);
        x->st = XF_FAILED;
    } else if (m->type == WT_FILE_STATE) {
        bool done = wire_get_bool(m->root, "done", false), first = x->st == XF_HAVE;
        uint64_t end = 0;
        x->have = wire_get_u64(m->root, "have", 0);
        if (first && x->have && !done)
            log_debug("cluster %s holds %llu bytes of the file: going on from there", c->name,
                      (unsigned long long)x->have);
        if (!first && x->nfl) { /* the reply to the oldest chunk in flight */
            end = x->ends[0];
            memmove(x->ends, x->ends + 1, --x->nfl * sizeof x->ends[0]);
        }
        if (!done && (first || x->have < end))
            x->resync = true;           /* FILE_HAVE's answer, or out of step (a chunk lost) */
        if (x->resync && x->nfl == 0) { /* nothing left in flight: go on from have */
            x->next = x->have;
            x->resync = false;
        }
        if (done)
            x->st = XF_DONE;
        else if (x->have > x->size || (!x->resync && send_more(L, c, x) < 0)) {
            if (x->st != XF_FAILED) {
                x->err = strdup("the cluster holds more bytes than the file has");
                x->st = XF_FAILED;
            }
        }
    }
    if (x->st == XF_DONE || x->st == XF_FAILED) {
        kick(L, c);
        wake(L, c);
    }
}

/* ---- outputs ---- */

static struct lpull *pull_find(struct live *L, uint64_t eid)
{
    for (uint32_t i = 0; i < L->npulls; i++)
        if (L->pulls[i].eid == eid)
            return &L->pulls[i];
    return NULL;
}

/* The copy ends (whole, or not with note): the list stored, the element takes its state. */
static void pull_end(struct live *L, struct lpull *p, const char *note)
{
    struct ljob *j;
    struct lelem *el = live_elem_find(L, p->eid, &j);
    uint32_t e = (uint32_t)(p->eid & ((1u << LIVE_ELEM_BITS) - 1));
    if (el && el->pulling) {
        struct wire_buf wb;
        wire_buf_init(&wb);
        if (note) { /* what was copied is not named: the task's outputs are not all here */
            wire_pack_map(&wb, 2);
            wire_put_key(&wb, "files");
            wire_pack_array(&wb, 0);
            wire_put_str(&wb, "files_note", note);
            log_info("job %llu task %u: %s", (unsigned long long)j->id, e, note);
        }
        if (live_files_elem_save(L, j, e, note ? wb.sb.data : p->list,
                                 note ? wb.sb.size : p->list_len) < 0)
            L->turn_failed = true;
        wire_buf_free(&wb);
        el->pulling = false;
        if (el->state == EL_RUNNING) {       /* not cancelled meanwhile */
            live_elem_reason(L, j, e, note); /* no longer "copying its outputs" */
            live_elem_set(L, j, e, el->pull_state);
        }
        live_want_cycle(L);
    }
    free(p->list);
    *p = L->pulls[--L->npulls];
}

/* Whether pull p copies a parallel job's ranks (issue 26): their files come with their
 * output (JOB_GET output), each named RANK/NAME here, read with FILE_GET idx = RANK. */
static bool pull_par(struct live *L, const struct lpull *p)
{
    struct ljob *j;
    return live_elem_find(L, p->eid, &j) && j->parallel;
}

static void send_list(struct live *L, struct lclu *c, struct lpull *p)
{
    struct wire_buf wb;
    bool par = pull_par(L, p);
    wire_buf_init(&wb);
    live_req_begin(L, c, RK_OUTLIST, p->eid, WT_JOB_GET, 4, 0, &wb);
    wire_put_u64(&wb, "job", p->cjob);
    wire_put_bool(&wb, par ? "output" : "tasks", true);
    wire_put_u64(&wb, "from", 0);
    wire_put_u64(&wb, "count", par ? 4096 : 1); /* 4096: PSUBMIT procs at most */
    live_queue_out(L, c->idx, &wb);
    wire_buf_free(&wb);
}

/* The pull's current file entry (of its list), or NULL; up destroyed by the caller. */
static const msgpack_object *pull_entry(const struct lpull *p, msgpack_unpacked *up)
{
    msgpack_unpacked_init(up);
    if (!p->list || msgpack_unpack_next(up, p->list, p->list_len, NULL) != MSGPACK_UNPACK_SUCCESS)
        return NULL;
    const msgpack_object *fl = wire_get(&up->data, "files");
    return fl && fl->type == MSGPACK_OBJECT_ARRAY && p->cur < fl->via.array.size
               ? &fl->via.array.ptr[p->cur]
               : NULL;
}

/* Asks for the next chunk the store lacks, or ends the pull when every file is whole. */
static void pull_next(struct live *L, struct lclu *c, struct lpull *p)
{
    for (; p->cur < p->nfiles; p->cur++) {
        msgpack_unpacked up;
        const msgpack_object *f = pull_entry(p, &up);
        uint8_t d[SHA256_LEN];
        size_t hl;
        const char *h = f ? wire_get_str(f, "hash", &hl) : NULL;
        if (!h || filestore_parse_hash(h, hl, d) < 0) {
            msgpack_unpacked_destroy(&up);
            pull_end(L, p, "the cluster named an output without a proper hash");
            return;
        }
        struct fsfile *have = filestore_find(L->files, d);
        if (have && have->done) {
            msgpack_unpacked_destroy(&up);
            continue;
        }
        struct wire_buf wb;
        wire_buf_init(&wb);
        size_t nl;
        const char *name = wire_get_str(f, "name", &nl);
        live_req_begin(L, c, RK_FGET, p->eid, WT_FILE_GET, 5, 0, &wb);
        wire_put_strn(&wb, "hash", h, 64);
        wire_put_u64(&wb, "job", p->cjob);
        wire_put_u64(&wb, "idx", pull_par(L, p) && name ? strtoull(name, NULL, 10) : 0);
        wire_put_u64(&wb, "off", have ? have->have : 0);
        wire_put_u64(&wb, "len", WIRE_FILE_CHUNK);
        live_queue_out(L, c->idx, &wb);
        wire_buf_free(&wb);
        msgpack_unpacked_destroy(&up);
        p->st = PL_GET;
        return;
    }
    pull_end(L, p, NULL);
}

/*
 * Issue 26: the rank maps of a parallel job's JOB (m): every rank's kept files as one
 * list, each named RANK/NAME (so `gridnode fetch` at the batch role lays them out by
 * rank, as at the cluster), into wb; their count.
 */
static uint32_t par_list(const struct wire_msg *m, struct wire_buf *wb)
{
    const msgpack_object *rk = wire_get(wire_get(m->root, "job"), "ranks");
    uint32_t n = 0;
    char name[1100], note[1024] = "";
    if (wire_get(m->root, "next")) /* the outputs passed the reply's size: rare */
        snprintf(note, sizeof note,
                 "the files of ranks %llu and above stay at the cluster (its reply was cut short)",
                 (unsigned long long)wire_get_u64(m->root, "next", 0));
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            wire_pack_map(wb, 1 + (note[0] != '\0'));
            if (note[0])
                wire_put_str(wb, "files_note", note);
            wire_put_key(wb, "files");
            wire_pack_array(wb, n);
        }
        for (uint32_t i = 0; rk && rk->type == MSGPACK_OBJECT_ARRAY && i < rk->via.array.size;
             i++) {
            const msgpack_object *r = &rk->via.array.ptr[i], *fl = wire_get(r, "files");
            for (uint32_t k = 0; fl && fl->type == MSGPACK_OBJECT_ARRAY && k < fl->via.array.size;
                 k++) {
                const msgpack_object *f = &fl->via.array.ptr[k];
                size_t nl, hl;
                const char *fn = wire_get_str(f, "name", &nl), *h = wire_get_str(f, "hash", &hl);
                int len = snprintf(name, sizeof name, "%llu/%.*s",
                                   (unsigned long long)wire_get_u64(r, "rank", 0),
                                   (int)(nl > 1050 ? 1050 : nl), fn ? fn : "");
                if (!fn || !h || len > 1024) /* a name the wire would refuse: left out */
                    continue;
                if (!pass) {
                    n++;
                    continue;
                }
                wire_pack_map(wb, 3);
                wire_put_str(wb, "name", name);
                wire_put_strn(wb, "hash", h, hl);
                wire_put_u64(wb, "size", wire_get_u64(f, "size", 0));
            }
        }
    }
    return n;
}

/* The task row of the cluster's JOB: its "files" (and "files_note") become the list. */
static void list_reply(struct live *L, struct lclu *c, struct lpull *p, const struct wire_msg *m)
{
    if (pull_par(L, p)) { /* issue 26: a parallel job's ranks */
        struct wire_buf pb;
        wire_buf_init(&pb);
        uint32_t n = par_list(m, &pb);
        free(p->list);
        if ((p->list = malloc(pb.sb.size)))
            memcpy(p->list, pb.sb.data, pb.sb.size);
        p->list_len = pb.sb.size;
        wire_buf_free(&pb);
        p->nfiles = n;
        p->cur = 0;
        if (!p->list)
            pull_end(L, p, "the batch role ran out of memory listing its outputs");
        else
            pull_next(L, c, p);
        return;
    }
    const msgpack_object *t = wire_get(m->root, "tasks");
    t = t && t->type == MSGPACK_OBJECT_ARRAY && t->via.array.size ? &t->via.array.ptr[0] : NULL;
    const msgpack_object *fl = t ? wire_get(t, "files") : NULL,
                         *note = t ? wire_get(t, "files_note") : NULL;
    uint32_t n = fl && fl->type == MSGPACK_OBJECT_ARRAY ? fl->via.array.size : 0;
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 1 + (note && note->type == MSGPACK_OBJECT_STR));
    wire_put_key(&wb, "files");
    if (n)
        wire_pack_object(&wb, fl);
    else
        wire_pack_array(&wb, 0);
    if (note && note->type == MSGPACK_OBJECT_STR)
        wire_put_strn(&wb, "files_note", note->via.str.ptr, note->via.str.size);
    free(p->list);
    p->list = malloc(wb.sb.size);
    if (p->list)
        memcpy(p->list, wb.sb.data, wb.sb.size);
    p->list_len = wb.sb.size;
    wire_buf_free(&wb);
    p->nfiles = n;
    p->cur = 0;
    if (!p->list)
        pull_end(L, p, "the batch role ran out of memory listing its outputs");
    else
        pull_next(L, c, p);
}

/* One chunk of the current output file: appended to the role's store. */
static void data_reply(struct live *L, struct lclu *c, struct lpull *p, const struct wire_msg *m)
{
    uint8_t d[SHA256_LEN];
    size_t hl, len;
    const char *h = wire_get_str(m->root, "hash", &hl);
    const void *data = wire_get_bin(m->root, "data", &len);
    uint64_t size = wire_get_u64(m->root, "size", 0), off = wire_get_u64(m->root, "off", 0);
    if (filestore_parse_hash(h, hl, d) < 0) {
        pull_end(L, p, "the cluster sent a chunk without a proper hash");
        return;
    }
    struct fsfile *f = filestore_find(L->files, d);
    if (off > size || len > size - off) {
        pull_end(L, p, "the cluster sent a chunk beyond the end of an output");
        return;
    }
    if (f && f->size != size) {
        pull_end(L, p, "the cluster sent an output of another size than the one stored here");
        return;
    }
    if (off == (f ? f->have : 0) && !(f && f->done) && (len || size == 0)) {
        int code;
        char why[400];
        if (!filestore_append(L->files, f, d, size, NULL, data, len, &code, why, sizeof why)) {
            char note[700];
            snprintf(note, sizeof note, "its outputs could not be copied from cluster %s: %s",
                     c->name, why);
            pull_end(L, p, note);
            return;
        }
    }
    pull_next(L, c, p); /* the rest of this file, or the next one */
}

void live_stage_pull(struct live *L, struct lclu *c, struct ljob *j, uint32_t e, int st)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || el->pulling)
        return;
    if (L->npulls == L->cappulls) {
        uint32_t nc = L->cappulls ? L->cappulls * 2 : 16;
        void *p = realloc(L->pulls, nc * sizeof *L->pulls);
        if (!p) { /* ends now; its outputs are not listed here */
            live_elem_set(L, j, e, st);
            return;
        }
        L->pulls = p, L->cappulls = nc;
    }
    el->pulling = true;
    el->pull_state = (uint8_t)st;
    struct lpull *p = &L->pulls[L->npulls++];
    *p = (struct lpull){live_eid(j->id, e), el->cjob, c->idx, PL_LIST, NULL, 0, 0, 0};
    live_elem_reason(L, j, e, "copying its outputs from its cluster");
    send_list(L, c, p);
}

void live_stage_reply(struct live *L, struct lclu *c, int kind, uint64_t arg,
                      const struct wire_msg *m)
{
    if (kind == RK_FHAVE || kind == RK_FPUT) {
        xfer_reply(L, c, arg, m);
        return;
    }
    struct lpull *p = pull_find(L, arg);
    if (!p || p->cl != c->idx)
        return;
    if (m->type == WT_ERROR) {
        char msg[400], note[600];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        snprintf(note, sizeof note, "its outputs could not be copied from cluster %s: %s", c->name,
                 msg);
        pull_end(L, p, note);
    } else if (kind == RK_OUTLIST && p->st == PL_LIST && m->type == WT_JOB) {
        list_reply(L, c, p, m);
    } else if (kind == RK_FGET && p->st == PL_GET && m->type == WT_FILE_DATA) {
        data_reply(L, c, p, m);
    }
}

void live_stage_reset(struct live *L, struct lclu *c)
{
    for (uint32_t i = 0; i < c->nxf; i++)
        free(c->xf[i].err);
    free(c->xf);
    c->xf = NULL;
    c->nxf = c->capxf = 0;
    for (uint32_t i = 0; i < L->npulls;) {
        struct lpull *p = &L->pulls[i];
        struct ljob *j;
        struct lelem *el = p->cl == c->idx ? live_elem_find(L, p->eid, &j) : NULL;
        if (p->cl != c->idx) {
            i++;
            continue;
        }
        if (el) /* the resync asks its cluster again (JOB_GET) and the copy resumes */
            el->pulling = false;
        free(p->list);
        *p = L->pulls[--L->npulls];
    }
    for (uint32_t i = 0; i < L->njobs; i++) { /* their start is sent again after the resync */
        struct lelem *el;
        for (uint32_t e = 0; L->jobs[i]->data && (el = live_elem_next(L->jobs[i], &e)); e++)
            if (el->cl == c->idx)
                el->staging = false;
    }
}

void live_stage_free(struct live *L)
{
    for (uint32_t i = 0; i < L->npulls; i++)
        free(L->pulls[i].list);
    free(L->pulls);
    L->pulls = NULL;
    L->npulls = L->cappulls = 0;
    free(L->stage_ready);
    L->stage_ready = NULL;
    L->nready = L->capready = 0;
}

/*
 * livestage.c - files between the batch role and its cluster managers (issue 26,
 * docs/data.md "Through the batch role").
 *
 * Inputs: before a task of a job with files starts on a cluster, each of its inputs is
 * offered there with the messages a user's tool uses (FILE_HAVE, then FILE_PUT of what
 * is missing, chunks of 1 MiB, FILEOFFER_INFLIGHT of them in flight per file (a reply
 * out of step restarts from what the cluster holds, as the tool does), LIVE_XFER_ACTIVE
 * files at once per cluster), read from the role's own store (daemon/fileoffer.c, the
 * grid spool's code too). A file is offered once per cluster however many tasks name it
 * (c->offer, kept while the cluster stays up). Only when every input is whole there does liveclu.c
 * send the SUBMIT, which the cluster refuses anyway if one is not. Nothing here is stored: after
 * kill -9 of either side the task is still "starting", the resync starts it again, and FILE_HAVE
 * says how much the cluster kept (its acknowledged chunks are durable), so the upload resumes.
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

#include "daemon/fileoffer.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"

#define LIVE_XFER_ACTIVE 4 /* files being offered to one cluster at once */

enum { PL_LIST, PL_GET };

/* ---- inputs (daemon/fileoffer.c) ---- */

static void offer_begin(void *role, void *peer, uint64_t key, uint32_t type, uint32_t nfields,
                        struct wire_buf *wb)
{
    live_req_begin(role, peer, type == WT_FILE_HAVE ? RK_FHAVE : RK_FPUT, key, type, nfields, 0,
                   wb);
}

static void offer_send(void *role, void *peer, struct wire_buf *wb)
{
    live_queue_out(role, ((struct lclu *)peer)->idx, wb);
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

int live_stage_inputs(struct live *L, struct lclu *c, struct ljob *j, uint32_t e, char *why,
                      size_t wl)
{
    if (!c->offer) {
        struct fileoffer_cfg cfg = {L->files,         "the batch role", "cluster", c->name,
                                    LIVE_XFER_ACTIVE, offer_begin,      offer_send};
        cfg.recheck_ms = L->cfg.live.files_recheck_s * 1000;
        if (!(c->offer = fileoffer_new(&cfg))) {
            snprintf(why, wl, "out of memory");
            return -1;
        }
    }
    /* a parallel job's one element takes every rank's inputs (issue 26) */
    int rc = fileoffer_inputs(c->offer, L, c, j->data, j->data_len, j->parallel ? UINT32_MAX : e,
                              j->user, false, why, wl);
    if (rc == 1) /* a moving task's checkpoint copied from its old cluster (livecarry.c) */
        rc = live_carry_offer(L, c, live_eid(j->id, e), why, wl);
    return rc < 0 ? -1 : rc == 0 ? 1 : 0;
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
        fileoffer_put_get(&wb, h, p->cjob, pull_par(L, p) && name ? strtoull(name, NULL, 10) : 0,
                          have);
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

/* The list of n files in wb (freed here) becomes p's; the first is asked for. */
static void list_take(struct live *L, struct lclu *c, struct lpull *p, struct wire_buf *wb,
                      uint32_t n)
{
    free(p->list);
    if ((p->list = malloc(wb->sb.size)))
        memcpy(p->list, wb->sb.data, wb->sb.size);
    p->list_len = wb->sb.size;
    wire_buf_free(wb);
    p->nfiles = n;
    p->cur = 0;
    if (!p->list)
        pull_end(L, p, "the batch role ran out of memory listing its outputs");
    else
        pull_next(L, c, p);
}

/* The task row of the cluster's JOB: its "files" (and "files_note") become the list. */
static void list_reply(struct live *L, struct lclu *c, struct lpull *p, const struct wire_msg *m)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    if (pull_par(L, p)) { /* issue 26: a parallel job's ranks */
        uint32_t n = par_list(m, &wb);
        list_take(L, c, p, &wb, n);
        return;
    }
    const msgpack_object *t = wire_get(m->root, "tasks");
    t = t && t->type == MSGPACK_OBJECT_ARRAY && t->via.array.size ? &t->via.array.ptr[0] : NULL;
    const msgpack_object *fl = t ? wire_get(t, "files") : NULL,
                         *note = t ? wire_get(t, "files_note") : NULL;
    uint32_t n = fl && fl->type == MSGPACK_OBJECT_ARRAY ? fl->via.array.size : 0;
    wire_pack_map(&wb, 1 + (note && note->type == MSGPACK_OBJECT_STR));
    wire_put_key(&wb, "files");
    if (n)
        wire_pack_object(&wb, fl);
    else
        wire_pack_array(&wb, 0);
    if (note && note->type == MSGPACK_OBJECT_STR)
        wire_put_strn(&wb, "files_note", note->via.str.ptr, note->via.str.size);
    list_take(L, c, p, &wb, n);
}

/* One chunk of the current output file: appended to the role's store. */
static void data_reply(struct live *L, struct lclu *c, struct lpull *p, const struct wire_msg *m)
{
    char peer[BATCH_NAME_MAX + 16], note[700];
    snprintf(peer, sizeof peer, "cluster %s", c->name);
    struct ljob *j = NULL;
    live_elem_find(L, p->eid, &j);
    if (fileoffer_take_chunk(L->files, m, UINT64_MAX, "the cluster", peer, j ? j->user : NULL, note,
                             sizeof note) < 0)
        pull_end(L, p, note);
    else
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
    if (kind == RK_FHAVE || kind == RK_FPUT) { /* a file whole or refused: its tasks go on */
        if (fileoffer_reply(c->offer, L, c, arg, m))
            wake(L, c);
        return;
    }
    if (kind == RK_CKLIST || kind == RK_CKGET) {
        live_carry_reply(L, c, kind, arg, m);
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
    fileoffer_destroy(&c->offer);
    live_carry_reset(L, c);
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
    live_carry_free(L);
    for (uint32_t i = 0; i < L->npulls; i++)
        free(L->pulls[i].list);
    free(L->pulls);
    L->pulls = NULL;
    L->npulls = L->cappulls = 0;
    free(L->stage_ready);
    L->stage_ready = NULL;
    L->nready = L->capready = 0;
}

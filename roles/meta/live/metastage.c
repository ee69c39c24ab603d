/*
 * metastage.c - files between the grid spool and its sites (issue 26, docs/data.md
 * "Through the grid spool").
 *
 * Inputs: before a job with inputs is submitted at a site (a placement, a move, a
 * submission sent again), each of its inputs is offered there with the messages a
 * user's tool uses (FILE_HAVE, then FILE_PUT of what is missing, chunks of 1 MiB,
 * FILEOFFER_INFLIGHT in flight per file, META_XFER_ACTIVE files at once per site), read
 * from the spool's own store (daemon/fileoffer.c, the batch role's code too). A file is
 * offered once per site however many jobs name it (s->offer, kept while the site stays
 * up). Only when every input is whole
 * there is the SUBMIT sent, which the site refuses anyway if one is not. Nothing here is
 * stored: after kill -9 of either side the job is still "placing", its submission is
 * sent again through meta_submit, and FILE_HAVE says how much the site kept (its
 * acknowledged chunks are durable), so the upload resumes.
 *
 * Outputs: when a job with --output has ended at its site, its task rows are listed
 * there (JOB_GET with tasks, in pages) and each kept file copied into the spool's store
 * (FILE_GET, one chunk in flight, appended as an upload is, so a copy cut by kill -9
 * resumes from its last durable chunk); each page's rows are stored (table "taskfiles")
 * once its files are here, and only when all are does the job take its end state (it
 * shows "running", copying its outputs, meanwhile), as HTCondor's job stays in
 * "transferring output". A copy that cannot be made ends the job with a reason saying so.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fileoffer.h"
#include "lib/datapath.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"

enum { PL_LIST, PL_GET, PL_WAIT };
#define META_PULL_ACTIVE 8 /* jobs whose outputs are copied from one site at once */

/* ---- inputs (daemon/fileoffer.c) ---- */

static void offer_begin(void *role, void *peer, uint64_t key, uint32_t type, uint32_t nfields,
                        struct wire_buf *wb)
{
    struct meta *M = role;
    meta_req_begin(M, peer, type == WT_FILE_HAVE ? RK_FHAVE : RK_FPUT, key, type, nfields,
                   M->cfg.request_timeout_ms, wb);
}

static void offer_send(void *role, void *peer, struct wire_buf *wb)
{
    meta_queue_out(role, ((struct msite *)peer)->idx, wb);
}

/* Whether j's inputs are all whole at s (1), under way (0), or one was refused (-1). */
static int inputs_at(struct meta *M, struct msite *s, const struct mjob *j, bool retry, char *why,
                     size_t wl)
{
    if (!s->offer) {
        struct fileoffer_cfg cfg = {M->files,         "the grid spool", "site",    s->name,
                                    META_XFER_ACTIVE, offer_begin,      offer_send};
        cfg.recheck_ms = M->cfg.files_recheck_s * 1000;
        if (!(s->offer = fileoffer_new(&cfg))) {
            snprintf(why, wl, "out of memory at the grid spool");
            return -1;
        }
    }
    return fileoffer_inputs(s->offer, M, s, j->req, j->reqlen, UINT32_MAX, meta_job_user(M, j),
                            retry, why, wl);
}

void meta_submit(struct meta *M, struct msite *s, struct mjob *j)
{
    char why[400];
    j->staging = false;
    /* a Slurm site takes them too, into its workdir (issue 26, roles/meta/slurm) */
    if (!meta_files_has_inputs(j) || inputs_at(M, s, j, true, why, sizeof why) == 1) {
        meta_send_submit(M, s, j, j->resv, j->attempt, false);
        return;
    }
    j->staging = true; /* wake() submits it once its inputs are whole there */
    char r[200];
    snprintf(r, sizeof r, "sending its inputs to site %s", s->name);
    meta_job_set(M, j, (enum mj_state)j->state, r);
}

/* The jobs staging at s whose inputs are all whole there: submitted. */
static void wake(struct meta *M, struct msite *s)
{
    char why[400];
    for (uint32_t i = 0; i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        if (!j->staging || j->site != s->idx || j->state != MJ_PLACING || j->phase != PH_SUBMIT)
            continue;
        if (inputs_at(M, s, j, false, why, sizeof why) == 1) {
            j->staging = false;
            meta_send_submit(M, s, j, j->resv, j->attempt, false);
        }
    }
}

struct mjob *meta_stage_refused(struct meta *M, struct msite *s, char *why, size_t wl)
{
    for (uint32_t i = 0; i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        if (!j->staging || j->site != s->idx)
            continue;
        if (j->state != MJ_PLACING || j->phase != PH_SUBMIT) {
            j->staging = false; /* cancelled or moved meanwhile */
            continue;
        }
        if (inputs_at(M, s, j, false, why, wl) < 0) {
            j->staging = false;
            return j;
        }
    }
    return NULL;
}

/* ---- outputs ---- */

static struct mpull *pull_find(struct meta *M, uint64_t job)
{
    for (uint32_t i = 0; i < M->npulls; i++)
        if (M->pulls[i].job == job)
            return &M->pulls[i];
    return NULL;
}

static void start_waiting(struct meta *M, int site);

/* The copy ends (whole, or not with note): the job takes its end state. */
static void pull_end(struct meta *M, struct mpull *p, const char *note)
{
    struct mjob *j = meta_job_find(M, p->job);
    if (j && j->pulling) {
        j->pulling = false;
        char r[600];
        if (note)
            log_info("job %" PRIu64 ": %s", j->id, note);
        snprintf(r, sizeof r, "%s%s%s", p->why, p->why[0] && note ? "; " : "", note ? note : "");
        if (!MJ_ENDED(j->state)) /* "" clears "copying its outputs" */
            meta_job_set(M, j, (enum mj_state)p->end_state, r);
    }
    int site = p->site;
    free(p->page);
    *p = M->pulls[--M->npulls];
    start_waiting(M, site);
}

static void send_list(struct meta *M, struct msite *s, struct mpull *p, uint64_t sjob,
                      uint64_t from)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, RK_PLIST, p->job, WT_JOB_GET, 4, M->cfg.request_timeout_ms, &wb);
    wire_put_u64(&wb, "job", sjob);
    wire_put_bool(&wb, "tasks", true);
    wire_put_u64(&wb, "from", from);
    wire_put_u64(&wb, "count", META_TASKS_PAGE);
    meta_queue_out(M, s->idx, &wb);
    wire_buf_free(&wb);
    p->st = PL_LIST;
}

/* Pulls of site under way: while fewer than META_PULL_ACTIVE, a waiting one starts
 * (each has one chunk in flight: the replies queued at once stay bounded). */
static void start_waiting(struct meta *M, int site)
{
    uint32_t active = 0;
    for (uint32_t i = 0; i < M->npulls; i++)
        active += M->pulls[i].site == site && M->pulls[i].st != PL_WAIT;
    for (uint32_t i = 0; i < M->npulls && active < META_PULL_ACTIVE; i++) {
        struct mpull *p = &M->pulls[i];
        struct mjob *j = p->site == site && p->st == PL_WAIT ? meta_job_find(M, p->job) : NULL;
        if (j) {
            send_list(M, &M->site[site], p, j->sjob, 0);
            active++;
        }
    }
}

/* Stores the page's rows (their files all here): 0, or -1. */
static int page_save(struct meta *M, const struct mjob *j, const msgpack_object *rows)
{
    for (uint32_t i = 0; i < rows->via.array.size; i++)
        if (meta_files_row_save(M, j, &rows->via.array.ptr[i]) < 0)
            return -1;
    return 0;
}

/* Asks for the next chunk the store lacks; at the page's end stores it and lists the
 * next page, or ends the copy. */
static void pull_next(struct meta *M, struct msite *s, struct mpull *p)
{
    struct mjob *j = meta_job_find(M, p->job);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (!j || msgpack_unpack_next(&up, p->page, p->page_len, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_ARRAY) {
        msgpack_unpacked_destroy(&up);
        pull_end(M, p, "its outputs could not be listed");
        return;
    }
    const msgpack_object *rows = &up.data;
    for (; p->row < rows->via.array.size; p->row++, p->file = 0) {
        const msgpack_object *t = &rows->via.array.ptr[p->row], *fl = wire_get(t, "files");
        for (; fl && fl->type == MSGPACK_OBJECT_ARRAY && p->file < fl->via.array.size; p->file++) {
            const msgpack_object *f = &fl->via.array.ptr[p->file];
            uint8_t d[SHA256_LEN];
            size_t hl, nl;
            const char *h = wire_get_str(f, "hash", &hl), *name = wire_get_str(f, "name", &nl);
            const char *bad = !h || filestore_parse_hash(h, hl, d) < 0
                                  ? "its site named an output without a proper hash"
                              : !name || datapath_problem(name, nl)
                                  ? "its site named an output with a name that is not a "
                                    "relative path inside the task's directory"
                              : wire_get_u64(f, "size", 0) > (uint64_t)M->cfg.files_job_mb << 20
                                  ? "its site named an output larger than the spool keeps "
                                    "(files.job_mb)"
                                  : NULL;
            if (bad) { /* a site is checked as a user is: nothing of it is stored */
                msgpack_unpacked_destroy(&up);
                pull_end(M, p, bad);
                return;
            }
            struct fsfile *have = filestore_find(M->files, d);
            if (have && have->done)
                continue;
            struct wire_buf wb;
            wire_buf_init(&wb);
            meta_req_begin(M, s, RK_FGET, p->job, WT_FILE_GET, 5, M->cfg.request_timeout_ms, &wb);
            fileoffer_put_get(&wb, h, j->sjob, wire_get_u64(t, "idx", p->row), have);
            meta_queue_out(M, s->idx, &wb);
            wire_buf_free(&wb);
            msgpack_unpacked_destroy(&up);
            p->st = PL_GET;
            return;
        }
    }
    if (page_save(M, j, rows) < 0)
        M->turn_failed = true;
    msgpack_unpacked_destroy(&up);
    if (p->next) {
        send_list(M, s, p, j->sjob, p->next);
        return;
    }
    pull_end(M, p, NULL);
}

/* A page of the site's task rows: kept, its files copied. */
static void list_reply(struct meta *M, struct msite *s, struct mpull *p, const struct wire_msg *m)
{
    const msgpack_object *t = wire_get(m->root, "tasks");
    struct wire_buf wb;
    wire_buf_init(&wb);
    if (t && t->type == MSGPACK_OBJECT_ARRAY)
        wire_pack_object(&wb, t);
    else
        wire_pack_array(&wb, 0);
    free(p->page);
    p->page = malloc(wb.sb.size);
    if (p->page)
        memcpy(p->page, wb.sb.data, wb.sb.size);
    p->page_len = wb.sb.size;
    wire_buf_free(&wb);
    uint64_t nx = wire_get_u64(m->root, "next", 0);
    p->next = nx > p->next ? nx : 0; /* pages go forward only */
    p->row = p->file = 0;
    if (!p->page)
        pull_end(M, p, "the grid spool ran out of memory listing its outputs");
    else
        pull_next(M, s, p);
}

/* One chunk of the current output file: appended to the spool's store. */
static void data_reply(struct meta *M, struct msite *s, struct mpull *p, const struct wire_msg *m)
{
    char peer[META_NAME_MAX + 16], note[700];
    snprintf(peer, sizeof peer, "site %s", s->name);
    const struct mjob *j = meta_job_find(M, p->job);
    if (fileoffer_take_chunk(M->files, m, (uint64_t)M->cfg.files_job_mb << 20, "its site", peer,
                             j ? j->user : NULL, note, sizeof note) < 0)
        pull_end(M, p, note);
    else
        pull_next(M, s, p); /* the rest of this file, or the next one */
}

bool meta_pull_begin(struct meta *M, struct mjob *j, int st, const char *why)
{
    if (j->pulling)
        return true;
    if (!meta_files_has_outputs(j) || j->site < 0)
        return false;
    if (M->npulls == M->cappulls) {
        uint32_t nc = M->cappulls ? M->cappulls * 2 : 16;
        void *p = realloc(M->pulls, nc * sizeof *M->pulls);
        if (!p)
            return false; /* ends now; its outputs are not listed here */
        M->pulls = p, M->cappulls = nc;
    }
    j->pulling = true;
    struct mpull *p = &M->pulls[M->npulls++];
    memset(p, 0, sizeof *p);
    p->job = j->id;
    p->site = j->site;
    p->end_state = (uint8_t)st;
    snprintf(p->why, sizeof p->why, "%s", why ? why : "");
    struct msite *s = &M->site[j->site];
    char r[200];
    snprintf(r, sizeof r, "copying its outputs from site %s", s->name);
    meta_job_set(M, j, MJ_RUNNING, r);
    p->st = PL_WAIT;
    start_waiting(M, s->idx);
    return true;
}

void meta_stage_reply(struct meta *M, struct msite *s, int kind, uint64_t arg,
                      const struct wire_msg *m)
{
    if (kind == RK_FHAVE || kind == RK_FPUT) { /* a file whole or refused: its jobs go on */
        if (fileoffer_reply(s->offer, M, s, arg, m))
            wake(M, s);
        return;
    }
    struct mpull *p = pull_find(M, arg);
    if (!p || p->site != s->idx)
        return;
    if (m->type == WT_ERROR) {
        char msg[400], note[600];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        snprintf(note, sizeof note, "its outputs could not be copied from site %s: %s", s->name,
                 msg);
        pull_end(M, p, note);
    } else if (kind == RK_PLIST && p->st == PL_LIST && m->type == WT_JOB) {
        list_reply(M, s, p, m);
    } else if (kind == RK_FGET && p->st == PL_GET && m->type == WT_FILE_DATA) {
        data_reply(M, s, p, m);
    }
}

void meta_stage_reset(struct meta *M, struct msite *s)
{
    fileoffer_destroy(&s->offer);
    for (uint32_t i = 0; i < M->npulls;) {
        struct mpull *p = &M->pulls[i];
        if (p->site != s->idx) {
            i++;
            continue;
        }
        struct mjob *j = meta_job_find(M, p->job);
        if (j) /* the poll finds it ended again once the site answers: the copy resumes */
            j->pulling = false;
        free(p->page);
        *p = M->pulls[--M->npulls];
    }
    for (uint32_t i = 0; i < M->njobs; i++) /* submitted through meta_submit when it is up */
        if (M->jobs[i]->site == s->idx)
            M->jobs[i]->staging = false;
}

void meta_stage_free(struct meta *M)
{
    for (uint32_t i = 0; i < M->npulls; i++)
        free(M->pulls[i].page);
    free(M->pulls);
    M->pulls = NULL;
    M->npulls = M->cappulls = 0;
}

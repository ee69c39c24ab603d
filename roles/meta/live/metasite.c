/*
 * metasite.c - the spool's side of the site interface (docs/wire.md 6.12, 6.13): one
 * DEALER per batch site in meta.sites (or its Slurm adapter, roles/meta/slurm/), the
 * replies (placements done, jobs followed, moves finished, strays swept), the sites'
 * ticks and the site list. Everything is asynchronous (the loop never waits for a
 * site). The placement rounds are metaplace.c, the messages metasend.c.
 *
 *   information (M2): SITE_INFO every META_INFO_MS; a site whose request passes its
 *     deadline is down until it answers again.
 *   placement (M3): ESTIMATE to every eligible site at once, decided when all answered
 *     or meta.estimate_timeout_ms passed; meta_rank orders them; RESERVE at the best
 *     under a name that carries the job (m<incarnation>-<job>-<attempt>), stored before
 *     it is sent; SUBMIT/PSUBMIT into it with key meta:<inc>:<job>.<attempt> (a resent
 *     one gets the same site job back); a refusal releases the reservation and tries
 *     the next site.
 *   tracking (M4): JOB_GET of every placed job every META_POLL_MS.
 *   re-evaluation (item 4): a placed job that has not started asks the other sites
 *     every meta.reeval_s; one earlier by more than meta.move_margin_s gets a new
 *     reservation and submission first, then the old copy is cancelled.
 *   strays: RESV_LIST every META_SWEEP_MS: a reservation of this spool that no job
 *     holds (a crash between RESERVE and its record, a reply after its timeout, a copy
 *     left at a site that was down when its job moved on) is released, and a job bound
 *     to it cancelled.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/daemon.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/loop.h"
#include "daemon/netopts.h"
#include "lib/text.h"
#include "roles/meta/live/meta_int.h"
#include "roles/meta/slurm/slurm.h"

static struct meta *G;

/* Statistics (metastats.c): job j was placed (move: moved) at site s: the counters, and
 * the placement latency histogram for a job's first placement. */
static const double lat_le[META_LAT_BUCKETS - 1] = META_LAT_LE;

/* An unanswered ESTIMATE (meta_group_answer with answered false reads nothing of it). */
static const struct meta_est_answer no_answer = {.earliest = META_NEVER};

static void count_placed(struct meta *M, struct msite *s, struct mjob *j, bool move)
{
    if (move) {
        s->moves++;
        return;
    }
    s->placements++;
    if (j->timed || j->submitted <= 0) /* placed again (its site went down): not timed */
        return;
    j->timed = true;
    double lat = (double)(wall_now_ms() - j->submitted) / 1000.0;
    if (lat < 0)
        lat = 0;
    int b = 0;
    while (b < META_LAT_BUCKETS - 1 && lat > lat_le[b])
        b++;
    M->lat_bucket[b]++;
    M->lat_sum += lat;
    M->lat_n++;
}

/* ---- replies ---- */

static int site_state(const char *s)
{
    if (!strcmp(s, "running"))
        return MJ_RUNNING;
    if (!strcmp(s, "done"))
        return MJ_DONE;
    if (!strcmp(s, "failed"))
        return MJ_FAILED;
    if (!strcmp(s, "killed"))
        return MJ_KILLED;
    if (!strcmp(s, "cancelled"))
        return MJ_CANCELLED;
    return MJ_PLACED; /* queued, starting */
}

/* An array's row: its counts, the earliest element start of the page, and the page of
 * task rows kept for JOB at the spool. */
static void array_progress(struct meta *M, struct mjob *j, const msgpack_object *row,
                           const msgpack_object *tasks, int64_t *started)
{
    uint32_t c[4] = {
        (uint32_t)wire_get_u64(row, "issued", 0), (uint32_t)wire_get_u64(row, "running", 0),
        (uint32_t)wire_get_u64(row, "done", 0), (uint32_t)wire_get_u64(row, "failed", 0)};
    if (c[0] != j->t_issued || c[1] != j->t_running || c[2] != j->t_done || c[3] != j->t_failed)
        meta_job_dirty(M, j);
    j->t_issued = c[0];
    j->t_running = c[1];
    j->t_done = c[2];
    j->t_failed = c[3];
    if (!tasks || tasks->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        int64_t st = wire_get_time(&tasks->via.array.ptr[i], "started", 0);
        if (st > 0 && (*started <= 0 || st < *started))
            *started = st;
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_object(&wb, tasks);
    uint8_t *p = malloc(wb.sb.size ? wb.sb.size : 1);
    if (p) {
        memcpy(p, wb.sb.data, wb.sb.size);
        free(j->tasks_raw);
        j->tasks_raw = p;
        j->tasks_len = wb.sb.size;
    }
    wire_buf_free(&wb);
}

/* An array that ended with failed elements: the worst of them (killed before failed,
 * then the highest exit, as Slurm's DerivedExitCode) gives the array's state (*ns),
 * exit (*ex) and reason (why: how many failed and why the worst did), from the site's
 * task rows of this poll (the first META_TASKS_PAGE elements). */
static void array_worst(const struct mjob *j, const msgpack_object *tasks, int *ns, int64_t *ex,
                        char *why, size_t wl)
{
    int wst = -1;
    int64_t wex = 0;
    uint64_t widx = 0;
    char wr[200] = "";
    for (uint32_t i = 0; tasks && tasks->type == MSGPACK_OBJECT_ARRAY && i < tasks->via.array.size;
         i++) {
        const msgpack_object *t = &tasks->via.array.ptr[i];
        char st[16];
        wire_get_strbuf(t, "state", st, sizeof st);
        int s = !strcmp(st, "killed") ? MJ_KILLED : !strcmp(st, "failed") ? MJ_FAILED : -1;
        int64_t e = wire_get_i64(t, "exit", 0);
        if (s < 0 || s < wst || (s == wst && e <= wex))
            continue;
        wst = s;
        wex = e;
        widx = wire_get_u64(t, "idx", i);
        wire_get_strbuf(t, "reason", wr, sizeof wr);
    }
    if (wst < 0) { /* none in the page */
        snprintf(why, wl, "%u of %u elements failed (the site's job shows which)", j->t_failed,
                 j->ntasks);
        *ns = MJ_FAILED;
        *ex = *ex ? *ex : 1;
        return;
    }
    *ns = wst;
    *ex = wex;
    snprintf(why, wl, "%u of %u elements failed; element %" PRIu64 ": %s%sexit %" PRId64 "%s",
             j->t_failed, j->ntasks, widx, wr, wr[0] ? " (" : "", wex, wr[0] ? ")" : "");
}

/* The old site's answer to a move's withdrawal (code 0: OK). */
static void withdrawn(struct meta *M, struct mjob *j, uint64_t code, const char *msg)
{
    struct msite *old = &M->site[j->site], *to = &M->site[j->mv_site];
    j->withdrawing = false;
    meta_job_dirty(M, j);
    if (code && code != WE_NOT_FOUND) { /* started there (STATE), or refused: it stays */
        meta_send_release(M, to, j->mv_resv);
        meta_move_failed(M, j, msg);
        return;
    }
    /* the old copy is cancelled and can never start: the job is the new site's to take,
     * as a placement (a lost answer is resent with the same key, never placed twice) */
    meta_send_release(M, old, j->resv);
    log_info("job %" PRIu64 ": withdrawn from site %s, moving to %s", j->id, old->name, to->name);
    j->site = j->mv_site;
    j->sjob = 0;
    snprintf(j->resv, sizeof j->resv, "%s", j->mv_resv);
    j->est_start = meta_est(j, to->idx);
    j->mv_site = -1;
    j->mv_resv[0] = '\0';
    j->mv_sjob = 0;
    j->moving = true;
    j->phase = PH_SUBMIT;
    char r[200];
    snprintf(r, sizeof r, "moving to site %s (withdrawn from %s)", to->name, old->name);
    meta_job_set(M, j, MJ_PLACING, r);
    meta_submit(M, to, j); /* its inputs offered there first (issue 26) */
}

static void on_job(struct meta *M, struct mjob *j, const msgpack_object *row,
                   const msgpack_object *tasks)
{
    char st[16];
    wire_get_strbuf(row, "state", st, sizeof st);
    int ns = site_state(st);
    const msgpack_object *t0 = tasks && tasks->type == MSGPACK_OBJECT_ARRAY && tasks->via.array.size
                                   ? &tasks->via.array.ptr[0]
                                   : NULL;
    int64_t started = wire_get_time(row, "started", 0), ex = wire_get_i64(row, "exit", 0);
    int64_t fin = wire_get_time(row, "finished", 0);
    char why[256]; /* how the site says it ended (a limit's kill, a failure) */
    wire_get_strbuf(row, "reason", why, sizeof why);
    if (j->pulling) /* its outputs are being copied (issue 26): it ended already */
        return;
    if (j->ntasks > 1) {
        array_progress(M, j, row, tasks, &started);
        t0 = NULL; /* the first element says nothing of the array's state */
    }
    if (t0 && t0->type == MSGPACK_OBJECT_MAP) {
        started = wire_get_time(t0, "started", started);
        ex = wire_get_i64(t0, "exit", ex);
        fin = wire_get_time(t0, "finished", fin);
        char ts[16];
        wire_get_strbuf(t0, "state", ts, sizeof ts);
        if (wire_get(t0, "reason"))
            wire_get_strbuf(t0, "reason", why, sizeof why);
        if (!strcmp(ts, "ok"))
            ns = MJ_DONE;
        else if (!strcmp(ts, "starting") && ns == MJ_RUNNING)
            ns = MJ_PLACED;
    }
    if (j->requeueing && MJ_ENDED(ns)) { /* JOB_CTL requeue: its copy is gone */
        char r[200];
        snprintf(r, sizeof r, "requeued: its copy at site %s ended, placed again",
                 M->site[j->site].name);
        meta_job_requeue_now(M, j, r);
        return;
    }
    if (j->withdrawing && ns == MJ_CANCELLED && j->phase == PH_MV_WITHDRAW && j->mv_site >= 0) {
        withdrawn(M, j, 0, ""); /* the poll saw it before the answer came */
        return;
    }
    if (j->withdrawing && ns == MJ_CANCELLED && j->phase != PH_MV_WITHDRAW) {
        /* a withdrawal whose answer was lost took the copy: placed again */
        struct msite *s = &M->site[j->site];
        meta_send_release(M, s, j->resv);
        log_info("job %" PRIu64 ": its copy at site %s was withdrawn: placed again", j->id,
                 s->name);
        j->withdrawing = false;
        j->site = -1;
        j->sjob = 0;
        j->resv[0] = '\0';
        j->tried = 0; /* a new round over every site */
        meta_job_set(M, j, MJ_QUEUED, "withdrawn from its site for a move: placed again");
        return;
    }
    if (j->withdrawing && ns != MJ_PLACED && j->phase != PH_MV_WITHDRAW) {
        j->withdrawing = false; /* started or ended there: the withdrawal was refused */
        meta_job_dirty(M, j);
    }
    if (ns == MJ_PLACED && started > 0 && j->state == MJ_PLACED && !strcmp(st, "running"))
        ns = MJ_RUNNING;
    if (started > 0 && started != j->started) {
        j->started = started;
        meta_job_dirty(M, j);
    }
    if (ns == MJ_PLACED) {
        int64_t e = wire_get_time(row, "estimate", 0);
        if (e > 0)
            j->est_start = e;
        return;
    }
    if (j->ntasks > 1 && MJ_ENDED(ns) && ns != MJ_CANCELLED && j->t_failed)
        array_worst(j, tasks, &ns, &ex, why, sizeof why); /* the site's row has no exit */
    if (MJ_ENDED(ns)) {
        j->exit = ex;
        if (fin > 0)
            j->finished = fin;
        if (j->resv[0]) /* the reservation served its job */
            meta_send_release(M, &M->site[j->site], j->resv);
    }
    const char *r = ns == MJ_CANCELLED                               ? "cancelled at the site"
                    : (ns == MJ_FAILED || ns == MJ_KILLED) && why[0] ? why
                                                                     : NULL;
    /* issue 26: the outputs of a job that ran are copied here before it ends */
    if (ns != j->state && (ns == MJ_DONE || ns == MJ_FAILED || ns == MJ_KILLED) &&
        meta_pull_begin(M, j, ns, r))
        return;
    if (ns != j->state)
        meta_job_set(M, j, (enum mj_state)ns, r);
}

/* Site s purged j's job before the spool saw it end (ERROR `purged`): it ended there and
 * may have run whole, so it is never placed again; how it ended is not known here. */
static void site_purged(struct meta *M, struct msite *s, struct mjob *j)
{
    char why[META_REASON_MAX];
    snprintf(why, sizeof why,
             "site %s purged its job %" PRIu64 " before the spool saw it end: the outcome is "
             "unknown here (the site's accounting record has it)",
             s->name, j->sjob);
    j->exit = -1;
    j->finished = wall_now_ms();
    j->withdrawing = false;
    /* its reservations released, a move under way ended (the cancel order to s is
       answered NOT_FOUND, which acknowledges it) */
    meta_job_cancel_at_site(M, j);
    meta_job_set(M, j, MJ_FAILED, why);
}

static void on_sweep(struct meta *M, struct msite *s, const msgpack_object *resvs)
{
    char prefix[64];
    int pl = snprintf(prefix, sizeof prefix, "m%s-", M->inc);
    for (uint32_t i = 0; resvs && resvs->type == MSGPACK_OBJECT_ARRAY && i < resvs->via.array.size;
         i++) {
        const msgpack_object *v = &resvs->via.array.ptr[i];
        char name[META_NAME_MAX], owner[META_NAME_MAX];
        wire_get_strbuf(v, "name", name, sizeof name);
        wire_get_strbuf(v, "owner", owner, sizeof owner);
        if (strcmp(owner, M->cfg.user) || strncmp(name, prefix, (size_t)pl))
            continue;
        uint64_t id = strtoull(name + pl, NULL, 10);
        struct mjob *j = meta_job_find(M, id);
        bool held = j && !MJ_ENDED(j->state) &&
                    ((j->site == s->idx && !strcmp(j->resv, name)) ||
                     (j->mv_site == s->idx && !strcmp(j->mv_resv, name)));
        if (held)
            continue;
        uint64_t bound = wire_get_u64(v, "job", 0);
        log_info("site %s: stray reservation %s of job %" PRIu64 " released%s", s->name, name, id,
                 bound ? ", its copy there cancelled" : "");
        /* a copy the spool knows ended is left alone; a cancelled job's copy gets its
         * cancel again (a CANCEL lost to a restart of the site: STATE if it arrived) */
        if (bound && !(j && j->site == s->idx && j->sjob == bound && MJ_ENDED(j->state) &&
                       j->state != MJ_CANCELLED))
            meta_order_add(M, s->idx, OR_CANCEL, id, bound, NULL);
        meta_send_release(M, s, name);
    }
}

/* The site's host feature lists (SITE "features", issue 27) into s->fsets, and how
 * many hosts have each ("feature_hosts", when the site sends it) into s->fhosts, pointed
 * to by s->info; a list that does not read is left out; out of memory keeps the old
 * ones. */
static void site_features(struct msite *s, const msgpack_object *info)
{
    const msgpack_object *a = wire_get(info, "features"), *hc = wire_get(info, "feature_hosts");
    uint32_t n = a && a->type == MSGPACK_OBJECT_ARRAY ? a->via.array.size : 0;
    n = n < 256 ? n : 256;
    bool counted = hc && hc->type == MSGPACK_OBJECT_ARRAY && hc->via.array.size == n;
    char **v = calloc(n + 1, sizeof *v), f[FEATURES_LEN_MAX + 1], why[160];
    uint32_t *w = counted ? calloc(n + 1, sizeof *w) : NULL;
    if (!v || (counted && !w)) {
        free(v);
        free(w);
        return;
    }
    int32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *e = &a->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_STR ||
            features_norm(e->via.str.ptr, e->via.str.size, f, sizeof f, why, sizeof why) < 0 ||
            !f[0])
            continue;
        if (!(v[k] = strdup(f)))
            break;
        if (w) { /* a count that does not read: one host (never more than it said) */
            const msgpack_object *c = &hc->via.array.ptr[i];
            w[k] = c->type == MSGPACK_OBJECT_POSITIVE_INTEGER && c->via.u64 <= UINT32_MAX
                       ? (uint32_t)c->via.u64
                       : 1;
        }
        k++;
    }
    for (int32_t i = 0; i < s->nfsets; i++)
        free(s->fsets[i]);
    free(s->fsets);
    free(s->fhosts);
    s->fsets = v;
    s->fhosts = w;
    s->nfsets = k;
    s->info.fsets = (const char *const *)v;
    s->info.fhosts = w;
    s->info.nfsets = k;
}

static void site_up(struct meta *M, struct msite *s, const msgpack_object *info)
{
    bool was = s->info.up && s->known;
    s->known = true;
    s->info.up = true;
    s->down_since = 0;
    /* a site's counts are capped before any sum or product (docs/wire.md 2, Ranges) */
    s->info.total_procs = (int32_t)wire_get_capped(info, "cores", 0, INT32_MAX);
    s->info.max_procs = (int32_t)wire_get_capped(info, "largest_procs", 0, INT32_MAX);
    s->cores_free = (int64_t)wire_get_capped(info, "cores_free", 0, INT32_MAX);
    s->queued = wire_get_capped(info, "queued", 0, UINT32_MAX); /* statistics (metastats.c) */
    s->running = wire_get_capped(info, "running", 0, UINT32_MAX);
    s->last_answer = wall_now_ms();
    s->info.queued_work = (int64_t)(s->queued + s->running) * 3600000;
    site_features(s, info);
    if (!was) {
        log_info("site %s up: %d cores, largest job %d", s->name, s->info.total_procs,
                 s->info.max_procs);
        s->sweep_at = 0;
        meta_orders_site_up(M, s->idx); /* its orders go at once (metaorder.c) */
        /* submissions that never got their answer: again (the key makes it harmless) */
        for (uint32_t i = 0; i < M->njobs; i++) {
            struct mjob *j = M->jobs[i];
            if (j->state == MJ_PLACING && j->site == s->idx && j->phase == PH_SUBMIT && !j->staging)
                meta_submit(M, s, j);
        }
    }
}

static void site_down(struct meta *M, struct msite *s, const char *why)
{
    if (s->info.up || !s->down_since)
        log_warnx("site %s down: %s", s->name, why);
    s->info.up = false;
    if (!s->down_since)
        s->down_since = loop_now_ms();
    struct mreq *q = s->req;
    uint32_t n = s->nreq;
    s->req = NULL;
    s->nreq = s->capreq = 0;
    meta_stage_reset(M, s); /* its transfers start again when it answers (issue 26) */
    for (uint32_t i = 0; i < n; i++) {
        if (q[i].kind == RK_FHAVE || q[i].kind == RK_FPUT || q[i].kind == RK_PLIST ||
            q[i].kind == RK_FGET)
            continue;
        if (q[i].kind == RK_ORDER) { /* job is the order's id: sent again when up */
            meta_order_unsent(M, q[i].job);
            continue;
        }
        if (q[i].kind == RK_OUTPUT) { /* job is the held user request */
            meta_out_fail(M, q[i].job, "its site went down before answering", NULL);
            continue;
        }
        struct mjob *j = q[i].job && q[i].kind != RK_GEST ? meta_job_find(M, q[i].job) : NULL;
        if (!j && q[i].kind != RK_GEST)
            continue;
        if (q[i].kind == RK_GEST) {
            meta_group_answer(M, q[i].job, s->idx, &no_answer, false);
            continue;
        }
        if (q[i].kind == RK_EST)
            j->asked &= ~(1ull << s->idx);
        else if (q[i].kind == RK_RESERVE && j->phase == PH_RESERVE && j->site == s->idx)
            meta_place_failed(M, j, "no answer to RESERVE");
        else if (q[i].kind == RK_RESERVE && j->phase == PH_MV_RESERVE)
            meta_move_failed(M, j, "no answer to RESERVE");
        else if (q[i].kind == RK_WITHDRAW && j->phase == PH_MV_WITHDRAW && j->site == s->idx) {
            /* the copy may or may not be withdrawn: `withdrawing` stays, and the poll
             * decides once the site answers (a cancelled copy is placed again) */
            meta_send_release(M, &M->site[j->mv_site], j->mv_resv);
            meta_move_failed(M, j, "no answer to the withdrawal of its copy");
        } else if (q[i].kind == RK_JOBGET)
            j->polling = false;
        else if (q[i].kind == RK_SUBMIT && (MJ_ENDED(j->state) || j->requeueing))
            meta_order_submit_lost(M, s->idx, j->id); /* a cancelled job's: asked again */
    }
    s->npoll = 0; /* every JOB_GET in flight was forgotten above */
    free(q);
}

/* The start a RESV reply gives (a `flex` reservation may start later than asked). */
/* A STARTS reply (or NULL: an error) into a: `earliest` (-1: never) and up to
 * META_EST_WINDOWS of its `starts` windows that are well formed. */
static void est_answer(const msgpack_object *root, struct meta_est_answer *a)
{
    memset(a, 0, sizeof *a);
    int64_t e = root ? wire_get_i64(root, "earliest", -1) : -1;
    a->earliest = e < 0 ? META_NEVER : e;
    const msgpack_object *w = root ? wire_get(root, "starts") : NULL;
    if (a->earliest == META_NEVER || !w || w->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < w->via.array.size && a->n < META_EST_WINDOWS; i++) {
        const msgpack_object *o = &w->via.array.ptr[i];
        if (o->type != MSGPACK_OBJECT_MAP)
            continue;
        int64_t from = wire_get_i64(o, "from", -1), to = wire_get_i64(o, "to", -1);
        if (from >= 0 && (to < 0 || to > from))
            a->w[a->n++] = (struct meta_window){from, to};
    }
}

static int64_t resv_start(const struct wire_msg *m, int64_t dflt)
{
    const msgpack_object *r = wire_get(m->root, "resv");
    int64_t st = r && r->type == MSGPACK_OBJECT_MAP ? wire_get_time(r, "start", 0) : 0;
    return st > 0 ? st : dflt;
}

static void on_reply(struct meta *M, struct msite *s, const struct mreq *q,
                     const struct wire_msg *m)
{
    bool err = m->type == WT_ERROR;
    uint64_t code = err ? wire_get_u64(m->root, "code", 0) : 0;
    char msg[256] = "";
    if (err)
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
    if (q->kind == RK_FHAVE || q->kind == RK_FPUT || q->kind == RK_PLIST || q->kind == RK_FGET) {
        meta_stage_reply(M, s, q->kind, q->job, m); /* files (issue 26, metastage.c) */
        char why[400];
        struct mjob *r;
        while ((r = meta_stage_refused(M, s, why, sizeof why))) {
            meta_send_release(M, s, r->resv);
            r->moving = false;
            meta_place_refused(M, r, why);
        }
        return;
    }
    struct mjob *j = q->job && q->kind != RK_GEST && q->kind != RK_ORDER && q->kind != RK_OUTPUT
                         ? meta_job_find(M, q->job)
                         : NULL;
    if (q->kind == RK_EST || q->kind == RK_GEST || q->kind == RK_PROBE) {
        if (s->est_late >= META_EST_LATE)
            log_info("site %s answers estimates in time again: placements wait for it", s->name);
        s->est_late = 0;
    }
    switch (q->kind) {
    case RK_GEST: {
        struct meta_est_answer a;
        est_answer(err ? NULL : m->root, &a);
        meta_group_answer(M, q->job, s->idx, &a, true);
        break;
    }
    case RK_INFO:
        if (!err)
            site_up(M, s, wire_get(m->root, "site"));
        break;
    case RK_EST:
        if (!j || !(j->phase == PH_EST || j->phase == PH_MV_EST))
            break;
        if (!err) {
            struct meta_est_answer a;
            est_answer(m->root, &a);
            meta_est_set(M, j, s->idx, meta_staged_start(M, j, s->idx, &a));
        }
        j->asked &= ~(1ull << s->idx);
        if (!j->asked)
            meta_decide(M, j);
        break;
    case RK_RESERVE:
        if (j && j->phase == PH_SUBMIT && j->site == s->idx) {
            /* its SUBMIT follows: refused too when this was (the next site then) */
            if (err)
                meta_place_failed(M, j, msg);
            else
                j->est_start = resv_start(m, j->est_start);
        } else if (j && j->phase == PH_MV_RESERVE && j->mv_site == s->idx) {
            if (!err) /* the start it got (flex: maybe later than asked) */
                meta_est_set(M, j, s->idx, resv_start(m, meta_est(j, s->idx)));
            if (err) {
                meta_move_failed(M, j, msg);
            } else if (meta_est(j, s->idx) + M->cfg.move_margin_s * 1000 >= meta_est(j, j->site)) {
                /* the site could only reserve later (flex): no longer worth a move */
                meta_send_release(M, s, j->mv_resv);
                meta_move_failed(M, j, "its reservation there starts too late");
            } else if (!j->sjob) {
                meta_send_release(M, s, j->mv_resv);
                meta_move_failed(M, j, "its site's job id is not known yet");
            } else { /* the old copy goes first, if it has not started: never two */
                j->phase = PH_MV_WITHDRAW;
                j->withdrawing = true;
                meta_job_dirty(M, j);
                meta_send_withdraw(M, j);
            }
        }
        break;
    case RK_SUBMIT:
        if (!j)
            break;
        if (j->phase == PH_SUBMIT && j->site == s->idx) {
            if (err) {
                meta_send_release(M, s, j->resv);
                j->moving = false; /* its old copy is gone: placed anew */
                /* a refusal of the request itself is final at this site; busy, no
                 * storage, or about the spool's own reservation (`field` resv: refused,
                 * gone, too short by now): try again */
                char field[16] = "";
                wire_get_strbuf(m->root, "field", field, sizeof field);
                if ((code == WE_INVALID || code == WE_FIELD || code == WE_TYPE ||
                     code == WE_MALFORMED || code == WE_VERSION || code == WE_DENIED) &&
                    strcmp(field, "resv"))
                    meta_place_refused(M, j, msg);
                else
                    meta_place_failed(M, j, msg);
                break;
            }
            j->sjob = wire_get_u64(m->root, "job", 0);
            j->phase = PH_IDLE;
            if (M->inflight)
                M->inflight--;
            char r[200];
            if (j->moving) {
                M->moves++;
                snprintf(r, sizeof r, "moved to site %s as job %" PRIu64 " (earlier start)",
                         s->name, j->sjob);
            } else {
                M->placements++;
                snprintf(r, sizeof r, "at site %s as job %" PRIu64 "%s%s", s->name, j->sjob,
                         j->resv[0] ? " in reservation " : "", j->resv);
            }
            count_placed(M, s, j, j->moving);
            j->moving = false;
            meta_job_set(M, j, MJ_PLACED, r);
            s->info_at = 0; /* refresh what the site holds now */
        } else if ((MJ_ENDED(j->state) || j->requeueing) &&
                   !(err && (code == WE_STORAGE || code == WE_REFUSED))) {
            /* cancelled while its submission was under way: the copy it made (none when
             * it was refused) is cancelled through the outbox */
            meta_order_submitted(M, s, j, err ? 0 : wire_get_u64(m->root, "job", 0));
        } else if (MJ_ENDED(j->state) || j->requeueing) { /* a passing refusal: again */
            meta_order_submit_lost(M, s->idx, j->id);
        }
        break;
    case RK_WITHDRAW:
        if (!j || j->phase != PH_MV_WITHDRAW || j->site != s->idx || j->mv_site < 0)
            break;
        if (err && code == WE_NOT_FOUND && wire_get_bool(m->root, "purged", false))
            site_purged(M, s, j); /* the old copy ended there: not moved, not run again */
        else
            withdrawn(M, j, err ? code : 0, msg);
        break;
    case RK_JOBGET:
        if (s->npoll)
            s->npoll--;
        if (!j)
            break;
        j->polling = false;
        if (j->site != s->idx || !(j->state == MJ_PLACED || j->state == MJ_RUNNING))
            break;
        if (err && code == WE_NOT_FOUND && j->requeueing) {
            meta_job_requeue_now(M, j, "requeued: its site no longer knows it, placed again");
        } else if (err && code == WE_NOT_FOUND && wire_get_bool(m->root, "purged", false)) {
            site_purged(M, s, j);
        } else if (err && code == WE_NOT_FOUND) {
            j->site = -1;
            meta_job_set(M, j, MJ_QUEUED, "the site no longer knows the job: placed again");
        } else if (!err) {
            on_job(M, j, wire_get(m->root, "job"), wire_get(m->root, "tasks"));
        }
        break;
    case RK_ORDER:
        meta_order_answer(M, s, q->job, err, code, msg);
        break;
    case RK_OUTPUT: /* job --output relayed (metaout.c) */
        meta_out_answer(M, q->job, m);
        break;
    case RK_RESVLIST:
        if (!err)
            on_sweep(M, s, wire_get(m->root, "resvs"));
        if (!err && wire_get(m->root, "next")) /* a long list comes in pages (6.12) */
            meta_send_simple(M, s, RK_RESVLIST, 0, WT_RESV_LIST, "from",
                             wire_get_u64(m->root, "next", 0));
        break;
    default:
        break;
    }
}

/* One reply frame from site s (its DEALER, or its Slurm adapter). */
static void site_frame(struct meta *M, struct msite *s, const void *data, size_t len)
{
    struct wire_msg m;
    struct wire_error we;
    if (wire_decode(data, len, false, &m, &we) < 0) {
        log_warnx("site %s: bad reply ignored: %s", s->name, we.text);
        return;
    }
    struct mreq q = {0};
    bool found = false;
    for (uint32_t i = 0; i < s->nreq; i++)
        if (s->req[i].rid == m.id) {
            q = s->req[i];
            s->req[i] = s->req[--s->nreq];
            found = true;
            break;
        }
    if (found)
        on_reply(M, s, &q, &m);
    wire_msg_free(&m);
}

static void slurm_frame(void *arg, const void *data, size_t len)
{
    site_frame(G, arg, data, len);
}

static void on_readable(struct loop *l, void *arg)
{
    (void)l;
    struct msite *s = arg;
    struct meta *M = G;
    for (int n = 0; n < 4096 && s->sock; n++) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, s->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            break;
        }
        site_frame(M, s, zmq_msg_data(&f), zmq_msg_size(&f));
        zmq_msg_close(&f);
    }
}

/* ---- ticks ---- */

/* A site silent for meta.site_down_s (docs/meta.md "A lost site"). Nothing of it is
 * placed elsewhere while the site could still run it: a placed copy that has not started
 * as far as the spool knows is withdrawn (an order of the outbox, CANCEL `unstarted`, sent
 * once the site answers again; OK places the job again, STATE leaves it there); a
 * submission not answered is sent again with its key when the site is back; a running
 * job waits for the site. A user's cancel ends any of them, at the site once it is back. */
static void site_lost(struct meta *M, struct msite *s)
{
    for (uint32_t i = 0; i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        if (j->site != s->idx || MJ_ENDED(j->state) || j->state == MJ_QUEUED || j->requeueing)
            continue; /* a requeue's cancel waits in the outbox */
        if (j->mv_site >= 0 && j->phase != PH_MV_WITHDRAW) { /* a move under way: given up */
            meta_send_release(M, &M->site[j->mv_site], j->mv_resv);
            if (j->phase != PH_IDLE && M->inflight)
                M->inflight--;
            j->phase = PH_IDLE;
            j->mv_site = -1;
            j->mv_resv[0] = '\0';
            meta_job_dirty(M, j);
        }
        char r[240];
        if (j->state == MJ_PLACED && j->sjob && j->phase == PH_IDLE) {
            j->withdrawing = true;
            meta_job_dirty(M, j);
            meta_order_add(M, s->idx, OR_WITHDRAW, j->id, j->sjob, NULL);
            snprintf(r, sizeof r,
                     "site %s unreachable for %lds: its copy there is withdrawn once the site "
                     "answers, then the job is placed again (if it started there, it stays)",
                     s->name, M->cfg.site_down_s);
        } else if (j->state == MJ_RUNNING) {
            snprintf(r, sizeof r,
                     "site %s unreachable for %lds: the job may still run there; it is followed "
                     "again when the site answers (never run twice)",
                     s->name, M->cfg.site_down_s);
        } else {
            snprintf(r, sizeof r,
                     "site %s unreachable for %lds: its submission there is sent again when the "
                     "site answers (never placed twice)",
                     s->name, M->cfg.site_down_s);
        }
        meta_job_set(M, j, (enum mj_state)j->state, r);
    }
}

static void reeval(struct meta *M, int64_t now)
{
    static int64_t next;
    if (M->cfg.reeval_s <= 0 || now < next || M->policy == META_SLURM_M ||
        !meta_policy_uses_estimates(M->policy))
        return;
    next = now + M->cfg.reeval_s * 1000;
    for (uint32_t i = 0; i < M->njobs && M->inflight < META_INFLIGHT_MAX; i++) {
        struct mjob *j = M->jobs[i];
        if (j->state != MJ_PLACED || j->phase != PH_IDLE || j->site < 0 || j->withdrawing ||
            j->requeueing || !M->site[j->site].info.up || j->ntasks > 1) /* an array is not moved */
            continue;
        /* its own site's current estimate for the job */
        j->tried = 0;
        meta_ask_estimates(M, j, true);
    }
}

void meta_sites_tick(struct meta *M)
{
    int64_t now = loop_now_ms();
    for (int i = 0; i < M->nsites; i++) {
        struct msite *s = &M->site[i];
        slurm_site_tick(s->slurm);
        for (uint32_t k = 0; k < s->nreq;) /* a relayed --output: the user is told */
            if (s->req[k].kind == RK_OUTPUT && now > s->req[k].deadline) {
                uint64_t h = s->req[k].job;
                s->req[k] = s->req[--s->nreq];
                meta_out_fail(M, h, "its site did not answer in time (try again)", NULL);
            } else {
                k++;
            }
        for (uint32_t k = 0; k < s->nreq; k++)
            if (now > s->req[k].deadline && s->req[k].kind != RK_EST && s->req[k].kind != RK_GEST &&
                s->req[k].kind != RK_PROBE) {
                site_down(M, s, "does not answer");
                break;
            }
        /* estimates past their deadline: decided without them */
        for (uint32_t k = 0; k < s->nreq;)
            if ((s->req[k].kind == RK_EST || s->req[k].kind == RK_GEST ||
                 s->req[k].kind == RK_PROBE) &&
                now > s->req[k].deadline) {
                struct mreq q = s->req[k];
                s->req[k] = s->req[--s->nreq];
                if (++s->est_late == META_EST_LATE)
                    log_warnx("site %s let %d estimates in a row go unanswered within "
                              "meta.estimate_timeout_ms: placements no longer wait for it "
                              "(it is still asked; an answer in time ends this)",
                              s->name, META_EST_LATE);
                if (q.kind == RK_GEST)
                    meta_group_answer(M, q.job, i, &no_answer, false);
            } else {
                k++;
            }
        if (s->down_since && now - s->down_since > M->cfg.site_down_s * 1000) {
            site_lost(M, s);
            s->down_since = now; /* again after another period, if new jobs landed */
        }
        if (now >= s->info_at) {
            s->info_at = now + META_INFO_MS;
            bool pending = false;
            for (uint32_t k = 0; k < s->nreq; k++)
                pending |= s->req[k].kind == RK_INFO;
            if (!pending)
                meta_send_simple(M, s, RK_INFO, 0, WT_SITE_INFO, NULL, 0);
        }
        if (!s->info.up)
            continue;
        if (now >= s->sweep_at) {
            s->sweep_at = now + META_SWEEP_MS;
            meta_send_simple(M, s, RK_RESVLIST, 0, WT_RESV_LIST, NULL, 0);
        }
        if (now >= s->poll_at && s->poll_next >= M->njobs) { /* a new round */
            s->poll_at = now + META_POLL_MS;
            s->poll_next = 0;
        }
        for (; s->poll_next < M->njobs && s->npoll < META_POLL_WINDOW; s->poll_next++) {
            struct mjob *j = M->jobs[s->poll_next];
            if (j->site != i || j->polling || !j->sjob ||
                !(j->state == MJ_PLACED || j->state == MJ_RUNNING))
                continue;
            struct wire_buf wb;
            wire_buf_init(&wb);
            meta_req_begin(M, s, RK_JOBGET, j->id, WT_JOB_GET, 3, M->cfg.request_timeout_ms, &wb);
            wire_put_u64(&wb, "job", j->sjob);
            wire_put_bool(&wb, "tasks", true);
            wire_put_u64(&wb, "count", j->ntasks > 1 ? META_TASKS_PAGE : 1);
            meta_queue_out(M, i, &wb);
            wire_buf_free(&wb);
            j->polling = true;
            s->npoll++;
        }
    }
    /* placements under way (or their estimates still held): their deadlines; walking
       10^6 spooled jobs 20 times a second otherwise cost the spool most of a core */
    for (uint32_t i = 0; (M->inflight || M->nest) && i < M->njobs; i++) {
        struct mjob *j = M->jobs[i];
        if (j->phase == PH_IDLE && j->start_est) { /* its round is over */
            free(j->start_est);
            j->start_est = NULL;
            M->nest--;
        }
        if ((j->phase == PH_EST || j->phase == PH_MV_EST) && now > j->phase_deadline) {
            j->asked = 0;
            meta_decide(M, j);
        }
    }
    meta_orders_tick(M);
    reeval(M, now);
}

/* ---- the list ---- */

int meta_sites_open(struct meta *M)
{
    G = M;
    for (int i = 0; i < M->nsites; i++) {
        struct msite *s = &M->site[i];
        if (!strncmp(s->ep, "slurm://", 8)) { /* a Slurm cluster: the adapter answers */
            struct slurm_conf sc;
            char err[400];
            if (slurm_url_parse(s->ep, &sc, err, sizeof err) < 0 ||
                !(s->slurm = slurm_site_new(&sc, s->name, M->cfg.user, M->loop, slurm_frame, s, err,
                                            sizeof err))) {
                log_warnx("%s", err);
                return -1;
            }
            /* issue 26: its job directories go once this spool is done with their jobs */
            slurm_site_retain(s->slurm, meta_files_dir_done, M);
            s->info_at = s->poll_at = s->sweep_at = 0;
            continue;
        }
        int zero = 0, one = 1;
        int64_t maxmsg = WIRE_MAX_FRAME;
        s->sock = zmq_socket(daemon_zctx(M->daemon), ZMQ_DEALER);
        if (!s->sock)
            return -1;
        zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
        /* nothing queued for a site that is not connected: a stale RESERVE must not
         * arrive minutes later */
        zmq_setsockopt(s->sock, ZMQ_IMMEDIATE, &one, sizeof one);
        netopts_liveness(s->sock, NETOPTS_PEER_TIMEOUT_MS); /* sites across WAN links */
        netopts_connecting(s->sock);
        char err[800] = "";
        if (curve_client_apply(s->sock, &M->cfg.sec, s->ep, err, sizeof err) < 0)
            log_warnx("site %s: %s", s->ep, err);
        if (*err || zmq_connect(s->sock, s->ep) < 0 ||
            loop_add_socket(M->loop, s->sock, on_readable, s) < 0) {
            zmq_close(s->sock);
            s->sock = NULL;
            return -1;
        }
        if (curve_client_secure(&M->cfg.sec))
            s->watch = curve_watch_new(daemon_zctx(M->daemon), M->loop, s->sock, s->ep);
        s->info_at = s->poll_at = s->sweep_at = 0;
    }
    return 0;
}

static void forget_requests(struct meta *M)
{
    for (int i = 0; i < M->nsites; i++) {
        struct msite *s = &M->site[i];
        free(s->req);
        s->req = NULL;
        s->nreq = s->capreq = s->npoll = s->poll_next = 0;
        s->info_at = s->poll_at = s->sweep_at = 0; /* ask again at once */
    }
    for (uint32_t i = 0; i < M->neg; i++)
        free(M->eg[i].jobs);
    free(M->eg);
    M->eg = NULL;
    M->neg = M->capeg = 0;
}

void meta_sites_forget(struct meta *M)
{
    forget_requests(M);
    for (int i = 0; i < M->nsites; i++) /* transfers and copies start again (issue 26) */
        meta_stage_reset(M, &M->site[i]);
    meta_stage_free(M);
}

void meta_sites_close(struct meta *M)
{
    for (int i = 0; i < M->nsites; i++) {
        struct msite *s = &M->site[i];
        meta_stage_reset(M, s);
        curve_watch_destroy(&s->watch);
        if (s->sock) {
            if (M->loop)
                loop_remove_socket(M->loop, s->sock);
            zmq_close(s->sock);
            s->sock = NULL;
        }
        slurm_site_destroy(&s->slurm);
        for (int32_t k = 0; k < s->nfsets; k++)
            free(s->fsets[k]);
        free(s->fsets);
        free(s->fhosts);
        s->fsets = NULL;
        s->fhosts = NULL;
        s->nfsets = s->info.nfsets = 0;
        s->info.fsets = NULL;
        s->info.fhosts = NULL;
    }
    forget_requests(M);
}

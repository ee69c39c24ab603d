/*
 * livecmd.c - Maui's queries and the site interface of the live batch role
 * (docs/wire.md 6.12): SHOWQ, CHECKJOB, ESTIMATE (showstart), DIAGNOSE and SITE_INFO,
 * and the table of every Maui command (types 80-95), the reservation commands
 * (liveresvcmd.c) included.
 *
 * What a user sees (issue 23, docs/security.md "Access control"): CHECKJOB, ESTIMATE
 * and DIAGNOSE name only its own jobs; another user's job is answered NOT_FOUND with
 * the text of a job that does not exist (Slurm's PrivateData=jobs: whether a job id
 * exists is not told), DIAGNOSE's rows hold its own jobs and its own credentials (its
 * user, its groups, the groups and accounts of its jobs). Admins and peers see all.
 * SHOWQ is already a user's own queue: access.c sets its "user" filter.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "daemon/curve.h"
#include "roles/batch/live/live_int.h"

#define EST_MAX_DEFAULT 5

/* ---- SHOWQ ---- */

static const char *job_class(struct live *L, const struct ljob *j)
{
    if (j->class_ && *j->class_)
        return j->class_;
    return L->default_cl >= 0 ? L->cl[L->default_cl].name : "";
}

/* The engine's view of the first pending element of j fed to it; false if none. */
static bool pending_info(struct live *L, const struct ljob *j, struct batch_job_info *bi,
                         uint32_t *elem)
{
    for (uint32_t e = 0; live_elem_next_queued(j, &e); e++)
        if (batch_job_info(L->eng, live_eid(j->id, e), bi) == 0) {
            if (elem)
                *elem = e;
            return true;
        }
    return false;
}

static bool blocked_reason(const char *r)
{
    return r && (!strncmp(r, "held", 4) || !strncmp(r, "throttled", 9) ||
                 !strncmp(r, "larger than", 11));
}

static const char *queue_state(struct live *L, const struct ljob *j, struct batch_job_info *bi,
                               bool *have)
{
    *have = pending_info(L, j, bi, NULL);
    if (j->nended == j->ntasks || j->cancelled)
        return "ended";
    if (j->nrun || j->nstarted > j->nended)
        return "active";
    if (j->hold || j->dep || (*have && blocked_reason(bi->reason)))
        return "blocked"; /* j->dep: waits for its dependency (issue 27) */
    return "eligible";
}

static void put_time(struct wire_buf *wb, const char *k, int64_t t)
{
    wire_put_i64(wb, k, t == BATCH_NEVER ? -1 : t);
}

static void job_row(struct live *L, const struct ljob *j, struct wire_buf *wb, bool check)
{
    struct batch_job_info bi;
    bool have;
    const char *qs = queue_state(L, j, &bi, &have);
    int64_t started = 0;
    const struct lelem *el;
    for (uint32_t e = 0; !started && (el = live_elem_next(j, &e)); e++) /* records only */
        started = el->start;
    el = live_elem_peek(j, 0);
    const char *reason = have ? bi.reason : el->reason ? el->reason : "";
    if (j->hold && !have)
        reason = "held";
    char dr[320];
    if (j->dep && live_dep_reason(j, dr, sizeof dr)) /* Dependency: TERM (issue 27) */
        reason = dr;
    wire_pack_map(wb, 21 + (check ? 11 : 0));
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "queue_state", qs);
    wire_put_str(wb, "name", j->name ? j->name : "");
    wire_put_str(wb, "user", j->user ? j->user : "");
    wire_put_str(wb, "group", j->group ? j->group : "");
    wire_put_str(wb, "account", j->account ? j->account : "");
    wire_put_str(wb, "class", job_class(L, j));
    wire_put_str(wb, "qos", j->qos ? j->qos : "");
    wire_put_str(wb, "kind", j->parallel ? "parallel" : "array");
    wire_put_u64(wb, "procs", j->parallel ? j->procs : 1);
    wire_put_u64(wb, "ntasks", j->ntasks);
    wire_put_u64(wb, "running", j->nstarted > j->nended ? j->nstarted - j->nended : 0);
    wire_put_u64(wb, "ended", j->nended);
    wire_put_u64(wb, "walltime_s", (uint64_t)j->limit_s);
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "started", started);
    wire_put_f64(wb, "priority", have ? bi.priority : 0);
    put_time(wb, "reserved", have ? bi.reserved : BATCH_NEVER);
    wire_put_str(wb, "reason", !strcmp(qs, "active") || !strcmp(qs, "ended") ? "" : reason);
    wire_put_str(wb, "resv", j->resv ? j->resv : "");
    wire_put_bool(wb, "early", j->early);
    if (!check)
        return;
    const char *st = el->state == EL_PENDING ? "queued" : live_elem_state_name(el->state);
    wire_put_str(wb, "state", j->parallel ? st : (j->nended == j->ntasks ? "ended" : qs));
    wire_put_bool(wb, "hold", j->hold);
    wire_put_bool(wb, "network", j->network); /* submit --network (issue 23) */
    wire_put_str(wb, "constraint", j->constraint ? j->constraint : ""); /* issue 27 */
    wire_put_u64(wb, "requeues", j->requeues); /* JOB_CTL requeue (issue 15) */
    wire_put_u64(wb, "mem_mb", (uint64_t)j->mem_mb);
    wire_put_u64(wb, "disk_mb", (uint64_t)j->disk_mb);
    wire_put_str(wb, "cluster", el->cl >= 0 && el->cl < L->ncl ? L->cl[el->cl].name : "");
    wire_put_i64(wb, "finished", j->finished);
    /* hosts of the elements running or ended (first 64 elements) */
    wire_put_key(wb, "hosts");
    uint32_t nh = 0, lim = j->ntasks < 64 ? j->ntasks : 64;
    const struct lelem *x;
    for (uint32_t e = 0; (x = live_elem_next(j, &e)) && e < lim; e++)
        nh += x->hosts && *x->hosts;
    wire_pack_array(wb, nh);
    for (uint32_t e = 0; (x = live_elem_next(j, &e)) && e < lim; e++)
        if (x->hosts && *x->hosts)
            wire_pack_str(wb, x->hosts);
    /* the estimated start of a pending job */
    int64_t est = BATCH_NEVER;
    if (have)
        est = bi.reserved != BATCH_NEVER ? bi.reserved : bi.estimate;
    put_time(wb, "estimate", est);
}

void livecmd_job_row(struct live *L, const struct ljob *j, struct wire_buf *wb)
{
    job_row(L, j, wb, true);
}

const char *livecmd_queue_state(struct live *L, const struct ljob *j)
{
    struct batch_job_info bi;
    bool have;
    return queue_state(L, j, &bi, &have);
}

static void h_showq(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char user[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "user", user, sizeof user);
    bool all = wire_get_bool(m->root, "all", false);
    struct live_page pg;
    live_page_init(&pg, m);
    /* the cursor is a job id, as in JOB_LIST: the first job with an id >= from */
    uint32_t lo = 0, hi = L->njobs, i;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (L->jobs[mid]->id < pg.from)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        if (user[0] && strcmp(user, j->user ? j->user : ""))
            continue;
        if (!all && (j->nended == j->ntasks || (j->cancelled && j->nstarted == j->nended)))
            continue;
        if (!live_page_add(&pg))
            break;
        job_row(L, j, &pg.rows, false);
    }
    live_page_reply(&pg, reply, m, WT_QUEUE, live_now(L), "jobs", pg.more ? L->jobs[i]->id : 0);
}

/*
 * Job id, when the requester may see it (curve_may_touch: its owner, admins, peers);
 * otherwise NULL with NOT_FOUND in reply, the same answer as for a job that does not
 * exist (see the top of this file).
 */
static struct ljob *visible_job(struct live *L, const struct wire_msg *m, struct wire_buf *reply,
                                uint64_t id)
{
    struct ljob *j = live_job_find(L, id);
    if (j && curve_may_touch(j->user))
        return j;
    live_fail(reply, m->id, WE_NOT_FOUND, "no job %" PRIu64 " in this batch role", id);
    return NULL;
}

static void h_checkjob(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t id = wire_get_u64(m->root, "job", 0);
    struct ljob *j = visible_job(L, m, reply, id);
    if (!j)
        return;
    wire_begin(reply, WT_JOBCHECK, m->id, 1);
    wire_put_key(reply, "job");
    job_row(L, j, reply, true);
}

/* ---- ESTIMATE (showstart) ---- */

static void put_starts(struct live *L, const struct wire_msg *m, struct wire_buf *reply,
                       int64_t earliest, const struct batch_window *w, size_t n, uint64_t job,
                       const char *state, const char *reason)
{
    wire_begin(reply, WT_STARTS, m->id, 3 + (job ? 3 : 0));
    put_time(reply, "earliest", earliest);
    wire_put_i64(reply, "now", live_now(L));
    wire_put_key(reply, "starts");
    wire_pack_array(reply, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        wire_pack_map(reply, 2);
        put_time(reply, "from", w[i].from);
        put_time(reply, "to", w[i].to);
    }
    if (job) {
        wire_put_u64(reply, "job", job);
        wire_put_str(reply, "state", state);
        wire_put_str(reply, "reason", reason ? reason : "");
    }
}

static void h_estimate(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    const msgpack_object *o = m->root;
    size_t max = (size_t)wire_get_u64(o, "max", EST_MAX_DEFAULT);
    if (max < 1)
        max = 1;
    struct batch_window w[100];
    int64_t now = live_now(L);
    uint64_t id = wire_get_u64(o, "job", 0);
    struct batch_request q;
    memset(&q, 0, sizeof q);
    int64_t walltime;
    char cred[BATCH_CRED_KINDS][BATCH_NAME_MAX];
    if (id) {
        struct ljob *j = visible_job(L, m, reply, id);
        if (!j)
            return;
        struct batch_job_info bi;
        bool have;
        const char *qs = queue_state(L, j, &bi, &have);
        if (!strcmp(qs, "ended") || !strcmp(qs, "active")) {
            int64_t started = 0;
            const struct lelem *el;
            for (uint32_t e = 0; !started && (el = live_elem_next(j, &e)); e++)
                started = el->start;
            if (!strcmp(qs, "ended") && !started) {
                live_fail(reply, m->id, WE_STATE, "job %" PRIu64 " ended without starting", id);
                return;
            }
            struct batch_window one = {started, started};
            put_starts(L, m, reply, started, &one, 1, id, qs, "");
            return;
        }
        if (!have) {
            put_starts(L, m, reply, BATCH_NEVER, w, 0, id, qs,
                       j->hold ? "held" : "not yet considered by the scheduler");
            return;
        }
        if (bi.reserved != BATCH_NEVER) { /* its job reservation: the plan's own start */
            struct batch_window one = {bi.reserved, bi.reserved};
            put_starts(L, m, reply, bi.reserved, &one, 1, id, qs, bi.reason);
            return;
        }
        struct batch_job_spec s;
        uint32_t e = 0;
        pending_info(L, j, &bi, &e);
        /* Maui's showstart: the jobs ahead planned first, in priority order (issue 27:
         * two jobs needing the whole partition got the same start) */
        int64_t t;
        if (batch_job_estimate(L->eng, live_eid(j->id, e), now, &t) == 0) {
            struct batch_window one = {t, t};
            put_starts(L, m, reply, t, &one, t == BATCH_NEVER ? 0 : 1, id, qs, bi.reason);
            return;
        }
        live_elem_spec(L, j, e, &s);
        q.tasks = s.tasks;
        q.per_task = s.per_task;
        q.ppn = s.ppn;
        q.constraint = s.constraint; /* issue 27 */
        snprintf(cred[0], sizeof cred[0], "%s", s.user);
        snprintf(cred[1], sizeof cred[1], "%s", s.group);
        snprintf(cred[2], sizeof cred[2], "%s", s.account);
        snprintf(cred[3], sizeof cred[3], "%s", s.class_);
        snprintf(cred[4], sizeof cred[4], "%s", s.qos);
        for (int k = 0; k < BATCH_CRED_KINDS; k++)
            q.cred[k] = cred[k][0] ? cred[k] : NULL;
        q.job = s.id;
        walltime = s.walltime;
        size_t n = batch_estimate(L->eng, &q, walltime, now, w, max);
        n = n < max ? n : max;
        put_starts(L, m, reply, n ? w[0].from : BATCH_NEVER, w, n, id, qs, bi.reason);
        return;
    }
    uint64_t procs = wire_get_u64(o, "procs", 0), wall = wire_get_u64(o, "walltime_s", 0);
    if (!procs || !wall) {
        live_fail(reply, m->id, WE_INVALID,
                  "give a job id, or procs and walltime_s (both at least 1) of a request");
        return;
    }
    q.tasks = (int32_t)procs;
    q.per_task.procs = 1;
    q.per_task.mem = (int64_t)wire_get_u64(o, "mem_mb", 0);
    q.per_task.disk = (int64_t)wire_get_u64(o, "disk_mb", 0);
    q.ppn = (int32_t)wire_get_u64(o, "ppn", 0); /* at most per host (0: none) */
    size_t cn;
    const char *cs = wire_get_str(o, "constraint", &cn); /* issue 27 */
    char con[CONSTRAINT_LEN_MAX + 1], ewhy[200];
    if (cs && constraint_parse(cs, cn, con, sizeof con, ewhy, sizeof ewhy) < 0) {
        live_fail(reply, m->id, WE_INVALID, "%s", ewhy);
        return;
    }
    q.constraint = cs ? con : NULL;
    static const char *const keys[BATCH_CRED_KINDS] = {"user", "group", "account", "class", "qos"};
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        wire_get_strbuf(o, keys[k], cred[k], sizeof cred[k]);
        q.cred[k] = cred[k][0] ? cred[k] : NULL;
    }
    if (!q.cred[BATCH_CRED_CLASS] && L->default_cl >= 0)
        q.cred[BATCH_CRED_CLASS] = L->cl[L->default_cl].name;
    char cwhy[BATCH_NAME_MAX + 300];
    if (live_class_unknown(L, q.cred[BATCH_CRED_CLASS] ? q.cred[BATCH_CRED_CLASS] : "", cwhy,
                           sizeof cwhy)) {
        live_fail(reply, m->id, WE_INVALID, "%s", cwhy);
        return;
    }
    size_t n = batch_estimate(L->eng, &q, (int64_t)wall * 1000, now, w, max);
    n = n < max ? n : max;
    put_starts(L, m, reply, n ? w[0].from : BATCH_NEVER, w, n, 0, NULL, NULL);
}

/* ---- DIAGNOSE ---- */

static void diag_priority(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t only = wire_get_u64(m->root, "job", 0);
    if (only && !visible_job(L, m, reply, only))
        return;
    size_t n = batch_job_ids(L->eng, true, NULL, 0);
    uint64_t *ids = n ? malloc(n * sizeof *ids) : NULL;
    if (n && !ids) {
        live_fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    n = batch_job_ids(L->eng, true, ids, n);
    int64_t now = live_now(L);
    struct live_page pg;
    live_page_init(&pg, m);
    uint64_t last = 0, row = 0; /* the cursor: a row's position in priority order */
    for (size_t i = 0; i < n; i++) {
        uint64_t job = ids[i] >> LIVE_ELEM_BITS;
        struct batch_prio p;
        /* one row per job: its first pending element stands for the rest */
        if ((only && job != only) || job == last ||
            batch_priority_explain(L->eng, ids[i], now, &p) < 0)
            continue;
        const struct ljob *lj = live_job_find(L, job);
        if (!lj || !curve_may_touch(lj->user)) /* a user: its own jobs only */
            continue;
        last = job;
        if (row++ < pg.from)
            continue;
        if (!live_page_add(&pg)) {
            row--;
            break;
        }
        wire_pack_map(&pg.rows, 4);
        wire_put_u64(&pg.rows, "job", job);
        wire_put_u64(&pg.rows, "elem", ids[i] & ((1u << LIVE_ELEM_BITS) - 1));
        wire_put_f64(&pg.rows, "priority", p.total);
        wire_put_key(&pg.rows, "factors");
        uint32_t nf = 0;
        for (int f = 0; f < BATCH_NFACTORS; f++)
            nf += p.weight[f] != 0;
        wire_pack_map(&pg.rows, nf);
        for (int f = 0; f < BATCH_NFACTORS; f++) {
            if (p.weight[f] == 0)
                continue;
            wire_put_key(&pg.rows, batch_factor_name((enum batch_factor)f));
            wire_pack_map(&pg.rows, 3);
            wire_put_f64(&pg.rows, "value", p.value[f]);
            wire_put_f64(&pg.rows, "weight", p.weight[f]);
            wire_put_f64(&pg.rows, "contrib", p.contrib[f]);
        }
    }
    free(ids);
    live_page_reply(&pg, reply, m, WT_DIAG, now, "jobs", row);
}

/* Distinct names in first-seen order, at most 100,000 (DIAGNOSE fairshare). */
struct names {
    const char **v;
    size_t n, cap;
};

/* Adds nm unless it is listed or the list is full: 0, or -1 out of memory. */
static int names_add(struct names *s, const char *nm)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], nm))
            return 0;
    if (s->n >= 100000)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        const char **p = realloc(s->v, cap * sizeof *p);
        if (!p)
            return -1;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = nm;
    return 0;
}

/*
 * May the current requester see the fairshare row of a configured credential (k, nm)?
 * Admins, peers and plain: every row. A user: its own user row and the groups of its
 * key (the credentials of its own jobs are added from the jobs).
 */
static bool conf_cred_visible(int k, const char *nm)
{
    const struct curve_ident *id = curve_current();
    bool known;
    if (!id || id->kind != CURVE_USER)
        return true;
    if (k == BATCH_CRED_USER)
        return !strcmp(nm, id->name);
    return k == BATCH_CRED_GROUP && curve_user_in_group(id->name, nm, &known) && known;
}

static void diag_fairshare(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    int64_t now = live_now(L);
    struct live_page pg;
    live_page_init(&pg, m);
    uint64_t row = 0; /* the cursor: a row's position (users, then groups, accounts) */
    static const int kinds[] = {BATCH_CRED_USER, BATCH_CRED_GROUP, BATCH_CRED_ACCOUNT};
    for (size_t ki = 0; ki < 3 && !pg.more; ki++) {
        int k = kinds[ki];
        /* credentials seen in jobs (distinct, in first-seen order) and configured ones */
        struct names seen = {NULL, 0, 0};
        bool oom = false;
        for (uint32_t i = 0; i < L->njobs && !oom; i++) {
            const char *nm = live_job_cred(L->jobs[i], k);
            /* a user: the credentials of its own jobs (issue 23) */
            oom = *nm && curve_may_touch(L->jobs[i]->user) && names_add(&seen, nm) < 0;
        }
        for (size_t c = 0; c < L->cfg.eng.ncreds && !oom; c++)
            if ((int)L->cfg.eng.creds[c].kind == k && strcmp(L->cfg.eng.creds[c].name, "DEFAULT") &&
                conf_cred_visible(k, L->cfg.eng.creds[c].name))
                oom = names_add(&seen, L->cfg.eng.creds[c].name) < 0;
        const char **names = seen.v;
        size_t ns = seen.n;
        for (size_t s = 0; s < ns; s++) {
            if (row < pg.from) {
                row++;
                continue;
            }
            if (!live_page_add(&pg))
                break;
            row++;
            double u = batch_fairshare_usage(L->eng, (enum batch_cred_kind)k, names[s], now);
            double target = -1;
            for (size_t c = 0; c < L->cfg.eng.ncreds; c++)
                if ((int)L->cfg.eng.creds[c].kind == k &&
                    !strcmp(L->cfg.eng.creds[c].name, names[s]) &&
                    L->cfg.eng.creds[c].fstarget == L->cfg.eng.creds[c].fstarget)
                    target = L->cfg.eng.creds[c].fstarget;
            wire_pack_map(&pg.rows, 4);
            wire_put_str(&pg.rows, "kind", batch_cred_kind_name((enum batch_cred_kind)k));
            wire_put_str(&pg.rows, "name", names[s]);
            wire_put_f64(&pg.rows, "usage_pct", u < 0 ? 0 : u);
            wire_put_f64(&pg.rows, "target_pct", target);
        }
        free(seen.v);
    }
    live_page_reply(&pg, reply, m, WT_DIAG, now, "creds", row);
}

/*
 * What is wrong with job j (DIAGNOSE jobs, Maui's diagnose -j), into why ("" none): an
 * element running past its walltime, a start its cluster has not confirmed, a running
 * element whose cluster job id is unknown, a cluster not answering; a pending job held,
 * waiting on a dependency, throttled, or larger than any set of hosts it may use.
 */
static void job_problem(struct live *L, const struct ljob *j, const char *qs, const char *reason,
                        char *why, size_t len)
{
    int64_t now = live_now(L), lim = j->limit_s * 1000;
    const struct lelem *el;
    why[0] = 0;
    for (uint32_t e = 0; !why[0] && (el = live_elem_next(j, &e)); e++) {
        const char *cn = el->cl >= 0 && el->cl < L->ncl ? L->cl[el->cl].name : "?";
        if (el->state != EL_STARTING && el->state != EL_RUNNING)
            continue;
        if (el->cl >= 0 && el->cl < L->ncl && !L->cl[el->cl].synced)
            snprintf(why, len, "element %u: its cluster %s is not answering", e, cn);
        else if (el->state == EL_RUNNING && el->start > 0 && lim > 0 && now > el->start + lim)
            snprintf(why, len, "element %u: running %" PRId64 " s past its walltime", e,
                     (now - el->start - lim) / 1000);
        else if (el->state == EL_STARTING && el->decided && now - el->decided > LIVE_REQ_TIMEOUT_MS)
            snprintf(why, len,
                     "element %u: start sent to cluster %s %" PRId64 " s ago, not confirmed", e, cn,
                     (now - el->decided) / 1000);
        else if (el->state == EL_RUNNING && !el->cjob)
            snprintf(why, len, "element %u: running, but its job at cluster %s is unknown", e, cn);
    }
    if (why[0] || !strcmp(qs, "active"))
        return;
    if (j->hold)
        snprintf(why, len, "held (gridnode release %" PRIu64 " lets it run)", j->id);
    else if (!strncmp(reason, "larger than", 11))
        snprintf(why, len, "can never run: %s (procs, --ppn, --mem or --constraint)", reason);
    else if (j->dep || !strncmp(reason, "throttled", 9) || !strncmp(reason, "held", 4))
        snprintf(why, len, "%s", reason);
}

/* DIAGNOSE jobs (Maui's diagnose -j): every job not finished, by id (the cursor). */
static void diag_jobs(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    struct live_page pg;
    live_page_init(&pg, m);
    uint32_t i;
    for (i = live_job_lower(L, pg.from); i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        if (j->nended == j->ntasks || (j->cancelled && j->nstarted == j->nended) ||
            !curve_may_touch(j->user)) /* a user: its own jobs only */
            continue;
        if (!live_page_add(&pg))
            break;
        struct batch_job_info bi;
        bool have;
        const char *qs = queue_state(L, j, &bi, &have);
        const struct lelem *el = live_elem_peek(j, 0);
        const char *reason = have ? bi.reason : el->reason ? el->reason : "";
        if (j->hold && !have)
            reason = "held";
        char dr[320], why[400];
        if (j->dep && live_dep_reason(j, dr, sizeof dr))
            reason = dr;
        job_problem(L, j, qs, reason, why, sizeof why);
        int64_t started = 0;
        uint32_t nh = 0;
        int cl = -1;
        for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
            cl = cl < 0 && el->cl >= 0 && el->cl < L->ncl ? el->cl : cl;
            started = !started || (el->start && el->start < started) ? el->start : started;
            nh += (el->state == EL_STARTING || el->state == EL_RUNNING) && el->hosts &&
                  *el->hosts && nh < 64;
        }
        struct wire_buf *wb = &pg.rows;
        wire_pack_map(wb, 12);
        wire_put_u64(wb, "job", j->id);
        wire_put_str(wb, "user", j->user ? j->user : "");
        wire_put_str(wb, "state", qs);
        wire_put_u64(wb, "procs", j->parallel ? j->procs : 1);
        wire_put_u64(wb, "ntasks", j->ntasks);
        wire_put_u64(wb, "running", j->nstarted > j->nended ? j->nstarted - j->nended : 0);
        wire_put_u64(wb, "walltime_s", (uint64_t)j->limit_s);
        wire_put_i64(wb, "started", started);
        /* the hosts of its elements starting or running (first 64), one string each */
        wire_put_key(wb, "hosts");
        wire_pack_array(wb, nh);
        uint32_t k = 0;
        for (uint32_t e = 0; k < nh && (el = live_elem_next(j, &e)); e++)
            if ((el->state == EL_STARTING || el->state == EL_RUNNING) && el->hosts && *el->hosts) {
                wire_pack_str(wb, el->hosts);
                k++;
            }
        wire_put_str(wb, "reason", !strcmp(qs, "active") ? "" : reason);
        wire_put_str(wb, "cluster", cl >= 0 ? L->cl[cl].name : "");
        wire_put_str(wb, "problem", why);
    }
    live_page_reply(&pg, reply, m, WT_DIAG, live_now(L), "jobs", pg.more ? L->jobs[i]->id : 0);
}

static void h_diagnose(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char what[16];
    wire_get_strbuf(m->root, "what", what, sizeof what);
    if (!strcmp(what, "priority"))
        diag_priority(L, m, reply);
    else if (!strcmp(what, "fairshare"))
        diag_fairshare(L, m, reply);
    else if (!strcmp(what, "nodes"))
        livecmd_diag_nodes(L, m, reply); /* livemaui.c (issue 27) */
    else if (!strcmp(what, "jobs"))
        diag_jobs(L, m, reply);
    else
        live_fail(reply, m->id, WE_INVALID,
                  "what must be \"priority\", \"fairshare\", \"nodes\" or \"jobs\"");
}

/* ---- SITE_INFO ---- */

/* SITE "features" (issue 27): the distinct feature lists of the hosts (those with
 * any), at most 64, for the spool's eligibility (a job's constraint must be satisfied
 * by one host's list, not by the union of several hosts'), and "feature_hosts": how
 * many hosts have each list (for counts such as gpu*4). */
static void site_features(const struct live *L, struct wire_buf *reply)
{
    const char *v[64];
    uint64_t cnt[64];
    uint32_t n = 0;
    for (int c = 0; c < L->ncl; c++)
        for (uint32_t h = 0; h < L->cl[c].nhosts; h++) {
            const char *f = L->cl[c].hosts[h].features;
            uint32_t k = 0;
            while (k < n && strcmp(v[k], f))
                k++;
            if (!f[0])
                continue;
            if (k < n)
                cnt[k]++;
            else if (n < 64) {
                cnt[n] = 1;
                v[n++] = f;
            }
        }
    wire_put_key(reply, "features");
    wire_pack_array(reply, n);
    for (uint32_t k = 0; k < n; k++)
        wire_pack_str(reply, v[k]);
    wire_put_key(reply, "feature_hosts");
    wire_pack_array(reply, n);
    for (uint32_t k = 0; k < n; k++)
        wire_pack_u64(reply, cnt[k]);
}

static void h_site_info(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t hosts = 0, up = 0, cores = 0, cores_up = 0, largest = 0;
    for (int c = 0; c < L->ncl; c++) {
        uint64_t cc = 0;
        for (uint32_t h = 0; h < L->cl[c].nhosts; h++) {
            const struct lhost *lh = &L->cl[c].hosts[h];
            hosts++;
            cores += (uint64_t)lh->ncores;
            cc += (uint64_t)lh->ncores;
            if (lh->up) {
                up++;
                cores_up += (uint64_t)lh->ncores;
            }
        }
        if (cc > largest)
            largest = cc;
    }
    uint64_t busy = 0, queued = 0, running = 0;
    for (uint32_t i = 0; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        if (j->cancelled || j->nended == j->ntasks)
            continue;
        uint32_t act = j->nstarted > j->nended ? j->nstarted - j->nended : 0;
        running += act;
        busy += (uint64_t)act * (j->parallel ? j->procs : 1);
        queued += j->ntasks - j->nstarted;
    }
    wire_begin(reply, WT_SITE, m->id, 1);
    wire_put_key(reply, "site");
    wire_pack_map(reply, 14); /* site_features writes two */
    wire_put_u64(reply, "clusters", (uint64_t)L->ncl);
    wire_put_u64(reply, "hosts", hosts);
    wire_put_u64(reply, "hosts_up", up);
    wire_put_u64(reply, "cores", cores);
    wire_put_u64(reply, "cores_up", cores_up);
    wire_put_u64(reply, "cores_free", cores_up > busy ? cores_up - busy : 0);
    wire_put_u64(reply, "largest_procs", largest);
    wire_put_u64(reply, "queued", queued);
    wire_put_u64(reply, "running", running);
    wire_put_u64(reply, "reservations", L->nresv);
    wire_put_u64(reply, "cycles", L->cycles); /* scheduling cycles run since start */
    wire_put_i64(reply, "now", live_now(L));
    site_features(L, reply);
}

static const struct {
    uint32_t type;
    void (*fn)(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
} handlers[] = {
    {WT_SHOWQ, h_showq},
    {WT_CHECKJOB, h_checkjob},
    {WT_ESTIMATE, h_estimate},
    {WT_DIAGNOSE, h_diagnose},
    {WT_RESV_SET, livecmd_resv_set},
    {WT_RESV_LIST, livecmd_resv_list},
    {WT_RESV_RELEASE, livecmd_resv_release},
    {WT_RESERVE, livecmd_reserve},
    {WT_SITE_INFO, h_site_info},
    {WT_SHOWBF, livecmd_showbf},       /* livemaui.c (issue 27) */
    {WT_CHECKNODE, livecmd_checknode}, /* livemaui.c */
    {WT_SHOWSTATS, livecmd_showstats}, /* livemaui.c */
};

bool livecmd_handles(uint32_t type)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].type == type)
            return true;
    return false;
}

void livecmd_dispatch(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].type == m->type) {
            handlers[i].fn(L, m, reply);
            return;
        }
}

/*
 * livecmd.c - Maui's commands and the site interface of the live batch role
 * (docs/wire.md 6.12): SHOWQ, CHECKJOB, ESTIMATE (showstart), DIAGNOSE, RESV_SET /
 * RESV_LIST / RESV_RELEASE (setres, showres, releaseres), RESERVE and SITE_INFO.
 *
 * Reservations are stored in the role's LMDB (table "resv", one record per name,
 * written in the turn that made them) with the engine nodes they hold, and re-created
 * in the engine after a restart as soon as those nodes are known again (the cluster
 * managers report their hosts), taken as they are: a job already running on them
 * does not make the stored reservation fail.
 *
 * Admin commands (RESV_SET, RESV_RELEASE): with CURVE on (docs/security.md), only
 * identities of kind admin (daemon/access.c lets peers through only within their grant;
 * a peer releases only the site reservations it owns). Plain, they are allowed to the
 * user names listed in batch.admins (the name the request carries; an empty
 * batch.admins means root and the user the role runs as).
 *
 * A site reservation (RESERVE, for a metascheduler) starts unbound; the first job
 * submitted into it (SUBMIT/PSUBMIT `resv`) binds it: from then on it is held for
 * that job alone, which waits for it unless the job says `early` (B5).
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/text.h"
#include "roles/batch/live/live.h"
#include "store/store.h"

#define EST_MAX_DEFAULT 5
#define ACL_KEYS                                                                                   \
    {                                                                                              \
        "users", "groups", "accounts", "classes", "qoss"                                           \
    }

static const char *const acl_keys[BATCH_CRED_KINDS] = ACL_KEYS;

__attribute__((format(printf, 4, 5))) static void fail(struct wire_buf *reply, uint64_t id,
                                                       int code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    text_fix(buf);
    wire_buf_reset(reply);
    wire_error_msg(reply, id, code, "%s", buf);
}

/* ---- the stored record ---- */

static void resv_clear(struct lresv *v)
{
    free(v->nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        free(v->acl[k]);
    memset(v, 0, sizeof *v);
}

void livecmd_free(struct live *L)
{
    for (uint32_t i = 0; i < L->nresv; i++)
        resv_clear(&L->resv[i]);
    free(L->resv);
    L->resv = NULL;
    L->nresv = L->capresv = 0;
}

static void resv_encode(const struct lresv *v, struct wire_buf *wb)
{
    wire_pack_map(wb, 13 + BATCH_CRED_KINDS);
    wire_put_str(wb, "name", v->name);
    wire_put_str(wb, "owner", v->owner);
    wire_put_i64(wb, "start", v->start);
    wire_put_i64(wb, "end", v->end);
    wire_put_i64(wb, "tasks", v->tasks);
    wire_put_i64(wb, "procs", v->procs);
    wire_put_i64(wb, "mem_mb", v->mem_mb);
    wire_put_i64(wb, "disk_mb", v->disk_mb);
    wire_put_str(wb, "nodes", v->nodes ? v->nodes : "");
    wire_put_u64(wb, "job", v->job);
    wire_put_bool(wb, "site", v->site);
    wire_put_u64(wb, "version", 1);
    wire_put_str(wb, "kind", "resv");
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        wire_put_str(wb, acl_keys[k], v->acl[k] ? v->acl[k] : "");
}

static char *dup_or_null(const msgpack_object *m, const char *k)
{
    size_t l;
    const char *s = wire_get_str(m, k, &l);
    return s && l ? strndup(s, l) : NULL;
}

static int resv_decode(const void *p, size_t n, struct lresv *v)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int rc = -1;
    memset(v, 0, sizeof *v);
    if (msgpack_unpack_next(&up, p, n, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object *m = &up.data;
        wire_get_strbuf(m, "name", v->name, sizeof v->name);
        wire_get_strbuf(m, "owner", v->owner, sizeof v->owner);
        v->start = wire_get_i64(m, "start", 0);
        v->end = wire_get_i64(m, "end", 0);
        v->tasks = (int32_t)wire_get_i64(m, "tasks", 0);
        v->procs = (int32_t)wire_get_i64(m, "procs", 0);
        v->mem_mb = wire_get_i64(m, "mem_mb", 0);
        v->disk_mb = wire_get_i64(m, "disk_mb", 0);
        v->nodes = dup_or_null(m, "nodes");
        v->job = wire_get_u64(m, "job", 0);
        v->site = wire_get_bool(m, "site", false);
        for (int k = 0; k < BATCH_CRED_KINDS; k++)
            v->acl[k] = dup_or_null(m, acl_keys[k]);
        rc = v->name[0] && v->nodes ? 0 : -1;
        if (rc < 0)
            resv_clear(v);
    }
    msgpack_unpacked_destroy(&up);
    return rc;
}

static int resv_store(struct live *L, const struct lresv *v)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    resv_encode(v, &wb);
    int rc = store_put(L->store, L->t_resv, v->name, strlen(v->name), wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct live *L = arg;
    struct lresv v;
    if (resv_decode(val, vlen, &v) < 0) {
        log_warnx("reservation record '%.*s' is unreadable; skipped", (int)klen, (const char *)key);
        return 0;
    }
    if (L->nresv == L->capresv) {
        uint32_t nc = L->capresv ? 2 * L->capresv : 8;
        void *p = realloc(L->resv, nc * sizeof *L->resv);
        if (!p) {
            resv_clear(&v);
            return -1;
        }
        L->resv = p;
        L->capresv = nc;
    }
    L->resv[L->nresv++] = v;
    return 0;
}

int livecmd_load(struct live *L)
{
    livecmd_free(L);
    return store_iter(L->store, L->t_resv, NULL, 0, load_one, L);
}

static struct lresv *resv_find(struct live *L, const char *name)
{
    for (uint32_t i = 0; i < L->nresv; i++)
        if (!strcmp(L->resv[i].name, name))
            return &L->resv[i];
    return NULL;
}

static void resv_drop(struct live *L, struct lresv *v)
{
    store_del(L->store, L->t_resv, v->name, strlen(v->name));
    if (v->in_engine)
        batch_resv_release(L->eng, v->name);
    resv_clear(v);
    uint32_t i = (uint32_t)(v - L->resv);
    memmove(v, v + 1, (L->nresv - i - 1) * sizeof *v);
    L->nresv--;
}

/* Splits a comma list into a malloc'd vector pointing into a malloc'd copy. */
struct words {
    char *buf;
    const char **v;
    size_t n;
};

static int words_split(const char *s, struct words *w)
{
    memset(w, 0, sizeof *w);
    if (!s || !*s)
        return 0;
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    if (!(w->buf = strdup(s)) || !(w->v = calloc(n, sizeof *w->v))) {
        free(w->buf);
        return -1;
    }
    for (char *save = NULL, *t = strtok_r(w->buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        w->v[w->n++] = t;
    return 0;
}

static void words_free(struct words *w)
{
    free(w->buf);
    free(w->v);
}

static bool in_list(const char *list, const char *name)
{
    if (!list || !name || !*name)
        return false;
    size_t l = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == l && !memcmp(p, name, l))
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

/* Creates v in the engine (named nodes). 0, or -1 with why. */
static int resv_engine(struct live *L, struct lresv *v, bool restore, char *why, size_t wl)
{
    struct words nodes, acl[BATCH_CRED_KINDS];
    memset(acl, 0, sizeof acl);
    int rc = -1;
    if (words_split(v->nodes, &nodes) < 0) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    struct batch_resv_req q;
    memset(&q, 0, sizeof q);
    uint64_t eid = v->job ? live_eid(v->job, 0) : UINT64_MAX;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        if (words_split(v->acl[k], &acl[k]) < 0) {
            snprintf(why, wl, "out of memory");
            goto out;
        }
        q.acl.names[k] = acl[k].v;
        q.acl.n[k] = acl[k].n;
    }
    if (v->job || v->site) { /* bound: for this job alone (a site one: nobody yet) */
        memset(q.acl.n, 0, sizeof q.acl.n);
        q.acl.jobs = &eid;
        q.acl.njobs = 1;
    }
    q.name = v->name;
    q.nodes = nodes.v;
    q.nnodes = nodes.n;
    q.start = v->start;
    q.end = v->end;
    q.restore = restore;
    rc = batch_resv_create(L->eng, &q, live_now(L), NULL, 0, why, wl);
    if (rc == 0)
        v->in_engine = true;
out:
    words_free(&nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        words_free(&acl[k]);
    return rc;
}

void livecmd_apply(struct live *L)
{
    int64_t now = live_now(L);
    for (uint32_t i = 0; i < L->nresv;) {
        struct lresv *v = &L->resv[i];
        if (v->end <= now) {
            log_info("reservation %s ended", v->name);
            resv_drop(L, v);
            continue;
        }
        /* a site reservation is held for its one job: once that job runs (or ended) it
         * has served, and its remaining window would only keep other jobs off the nodes
         * (Maui drops a job reservation at the job's start alike) */
        const struct ljob *bj = v->site && v->job ? live_job_find(L, v->job) : NULL;
        if (bj && bj->ntasks && bj->el[0].state >= EL_RUNNING) {
            log_info("reservation %s served job %" PRIu64 ": released", v->name, v->job);
            resv_drop(L, v);
            continue;
        }
        i++;
        if (v->in_engine)
            continue;
        struct words w;
        bool known = words_split(v->nodes, &w) == 0 && w.n > 0;
        for (size_t k = 0; known && k < w.n; k++)
            known = batch_node_find(L->eng, w.v[k]) >= 0;
        words_free(&w);
        char why[256];
        if (known && resv_engine(L, v, true, why, sizeof why) < 0)
            log_warnx("reservation %s cannot be re-created: %s", v->name, why);
    }
}

/* ---- helpers ---- */

/*
 * The requester is an administrator: listed in batch.admins or, when that is empty, root
 * or the user the batch role runs as (Maui's default primary administrator).
 */
static bool is_admin(struct live *L, const msgpack_object *m)
{
    const struct curve_ident *id = curve_current();
    if (id) /* CURVE on: the key's kind decides, not a name in the request */
        return id->kind == CURVE_ADMIN;
    char user[BATCH_NAME_MAX];
    wire_get_strbuf(m, "user", user, sizeof user);
    if (L->cfg.live.admins[0])
        return in_list(L->cfg.live.admins, user);
    if (!user[0])
        return false;
    struct passwd *pw = getpwuid(geteuid());
    return !strcmp(user, "root") || (pw && !strcmp(user, pw->pw_name));
}

/* Host name of an engine node ("" unknown). */
static const char *node_host(struct live *L, int32_t n)
{
    int cl;
    const char *h = n >= 0 && n < L->nslots ? live_slot_host(L, n, &cl) : NULL;
    return h ? h : "";
}

/* Distinct hosts of a comma list of engine node names, packed as an array. */
static void put_hosts_of_nodes(struct live *L, struct wire_buf *wb, const char *key,
                               const char *nodes)
{
    struct words w;
    const char **hosts = NULL;
    size_t nh = 0;
    if (words_split(nodes, &w) == 0 && w.n && (hosts = calloc(w.n, sizeof *hosts)))
        for (size_t i = 0; i < w.n; i++) {
            const char *h = node_host(L, batch_node_find(L->eng, w.v[i]));
            bool dup = !*h;
            for (size_t k = 0; k < nh && !dup; k++)
                dup = !strcmp(hosts[k], h);
            if (!dup)
                hosts[nh++] = h;
        }
    wire_put_key(wb, key);
    wire_pack_array(wb, (uint32_t)nh);
    for (size_t k = 0; k < nh; k++)
        wire_pack_str(wb, hosts[k]);
    free(hosts);
    words_free(&w);
}

static void put_list(struct wire_buf *wb, const char *key, const char *list)
{
    struct words w;
    if (words_split(list, &w) < 0)
        w.n = 0;
    wire_put_key(wb, key);
    wire_pack_array(wb, (uint32_t)w.n);
    for (size_t i = 0; i < w.n; i++)
        wire_pack_str(wb, w.v[i]);
    words_free(&w);
}

/* A comma list from an array of str field; NULL when absent/empty; *bad on a name
 * with a comma or a control character. */
static char *list_field(const msgpack_object *m, const char *key, bool *bad)
{
    const msgpack_object *a = wire_get(m, key);
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size)
        return NULL;
    size_t cap = 1;
    for (uint32_t i = 0; i < a->via.array.size; i++)
        cap += a->via.array.ptr[i].via.str.size + 1;
    char *s = malloc(cap), *p = s;
    if (!s) {
        *bad = true;
        return NULL;
    }
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        if (!o->via.str.size || o->via.str.size >= BATCH_NAME_MAX)
            *bad = true;
        for (uint32_t k = 0; k < o->via.str.size; k++)
            if ((unsigned char)o->via.str.ptr[k] < 0x20 || o->via.str.ptr[k] == ',')
                *bad = true;
        memcpy(p, o->via.str.ptr, o->via.str.size);
        p += o->via.str.size;
        *p++ = ',';
    }
    p[-1] = '\0';
    return s;
}

static const char *job_cred(const struct ljob *j, int k)
{
    const char *s = k == BATCH_CRED_USER      ? j->user
                    : k == BATCH_CRED_GROUP   ? j->group
                    : k == BATCH_CRED_ACCOUNT ? j->account
                    : k == BATCH_CRED_CLASS   ? j->class_
                                              : j->qos;
    return s ? s : "";
}

/* ---- SUBMIT into a reservation ---- */

const char *livecmd_resv_check(struct live *L, const struct ljob *j)
{
    struct lresv *v = resv_find(L, j->resv);
    if (!v)
        return "no such reservation (see gridnode showres)";
    if (v->end <= live_now(L))
        return "that reservation has ended";
    if (v->site) {
        if (v->job)
            return "that reservation is already held for another job";
        if (j->ntasks != 1)
            return "a site reservation holds exactly one job: submit one parallel job "
                   "(PSUBMIT) or a single task into it";
    }
    bool any = false, ok = false;
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        any |= v->acl[k] != NULL;
        ok |= in_list(v->acl[k], job_cred(j, k));
    }
    if (!any && v->site) /* a site reservation without an ACL: its owner's */
        ok = !v->owner[0] || !strcmp(v->owner, job_cred(j, BATCH_CRED_USER));
    if (!ok)
        return "the reservation's access list does not admit this job (user, group, account, "
               "class or qos)";
    int64_t from = v->start > live_now(L) ? v->start : live_now(L);
    if (v->site && !j->early && from + j->limit_s * 1000 > v->end)
        return "the job's walltime does not fit in what is left of that reservation: "
               "reserve at least the walltime from now (or submit with early, B5)";
    return NULL;
}

int livecmd_resv_bind(struct live *L, struct ljob *j)
{
    struct lresv *v = resv_find(L, j->resv);
    if (!v || !v->site || v->job)
        return 0;
    v->job = j->id;
    if (v->in_engine) {
        char why[256];
        batch_resv_release(L->eng, v->name);
        v->in_engine = false;
        if (resv_engine(L, v, true, why, sizeof why) < 0)
            log_warnx("reservation %s: cannot bind job %" PRIu64 ": %s", v->name, j->id, why);
    }
    return resv_store(L, v);
}

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
    for (uint32_t e = 0; e < j->nfed; e++)
        if (j->el[e].state == EL_PENDING && j->el[e].in_engine &&
            batch_job_info(L->eng, live_eid(j->id, e), bi) == 0) {
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
    if (j->hold || (*have && blocked_reason(bi->reason)))
        return "blocked";
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
    for (uint32_t e = 0; e < j->ntasks && !started; e++)
        started = j->el[e].start;
    const char *reason = have ? bi.reason : j->el[0].reason ? j->el[0].reason : "";
    if (j->hold && !have)
        reason = "held";
    wire_pack_map(wb, 21 + (check ? 9 : 0));
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
    const struct lelem *el = &j->el[0];
    const char *st = el->state == EL_PENDING ? "queued" : live_elem_state_name(el->state);
    wire_put_str(wb, "state", j->parallel ? st : (j->nended == j->ntasks ? "ended" : qs));
    wire_put_bool(wb, "hold", j->hold);
    wire_put_u64(wb, "requeues", j->requeues); /* JOB_CTL requeue (issue 15) */
    wire_put_u64(wb, "mem_mb", (uint64_t)j->mem_mb);
    wire_put_u64(wb, "disk_mb", (uint64_t)j->disk_mb);
    wire_put_str(wb, "cluster", el->cl >= 0 && el->cl < L->ncl ? L->cl[el->cl].name : "");
    wire_put_i64(wb, "finished", j->finished);
    /* hosts of the elements running or ended (first 64 elements) */
    wire_put_key(wb, "hosts");
    uint32_t nh = 0, lim = j->ntasks < 64 ? j->ntasks : 64;
    for (uint32_t e = 0; e < lim; e++)
        nh += j->el[e].hosts && *j->el[e].hosts;
    wire_pack_array(wb, nh);
    for (uint32_t e = 0; e < lim; e++)
        if (j->el[e].hosts && *j->el[e].hosts)
            wire_pack_str(wb, j->el[e].hosts);
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

/*
 * Paging of the list replies (QUEUE, DIAG, RESVS; docs/wire.md 6.2 and 6.12): the
 * request's "from" (a cursor) and "count" (rows, default 100,000); a page also ends
 * once its rows pass LIVE_LIST_MAX bytes, and always holds a row when one is left.
 * page_full says whether the row about to be added starts the next page.
 */
struct page {
    uint64_t from, count;
    uint32_t n; /* rows in this page */
};

static void page_init(struct page *pg, const struct wire_msg *m)
{
    pg->from = wire_get_u64(m->root, "from", 0);
    pg->count = wire_get_u64(m->root, "count", 100000);
    if (pg->count == 0)
        pg->count = 1;
    pg->n = 0;
}

static bool page_full(const struct page *pg, const struct wire_buf *rows)
{
    return pg->n >= pg->count || (pg->n > 0 && rows->sb.size >= LIVE_LIST_MAX);
}

/* The rows array under key, then "next" when the page was cut (cut: the cursor). */
static void page_finish(struct wire_buf *reply, const char *key, const struct page *pg,
                        const struct wire_buf *rows, bool more, uint64_t next)
{
    wire_put_key(reply, key);
    wire_pack_array(reply, pg->n);
    msgpack_sbuffer_write(&reply->sb, rows->sb.data, rows->sb.size);
    if (more)
        wire_put_u64(reply, "next", next);
}

static void h_showq(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char user[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "user", user, sizeof user);
    bool all = wire_get_bool(m->root, "all", false);
    struct wire_buf rows;
    wire_buf_init(&rows);
    struct page pg;
    page_init(&pg, m);
    /* the cursor is a job id, as in JOB_LIST: the first job with an id >= from */
    uint32_t lo = 0, hi = L->njobs, i;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (L->jobs[mid]->id < pg.from)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool more = false;
    for (i = lo; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        if (user[0] && strcmp(user, j->user ? j->user : ""))
            continue;
        if (!all && (j->nended == j->ntasks || (j->cancelled && j->nstarted == j->nended)))
            continue;
        if ((more = page_full(&pg, &rows)))
            break;
        job_row(L, j, &rows, false);
        pg.n++;
    }
    wire_begin(reply, WT_QUEUE, m->id, 2 + more);
    wire_put_i64(reply, "now", live_now(L));
    page_finish(reply, "jobs", &pg, &rows, more, more ? L->jobs[i]->id : 0);
    wire_buf_free(&rows);
}

static void h_checkjob(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t id = wire_get_u64(m->root, "job", 0);
    struct ljob *j = live_job_find(L, id);
    if (!j) {
        fail(reply, m->id, WE_NOT_FOUND, "no job %" PRIu64 " in this batch role", id);
        return;
    }
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
        struct ljob *j = live_job_find(L, id);
        if (!j) {
            fail(reply, m->id, WE_NOT_FOUND, "no job %" PRIu64 " in this batch role", id);
            return;
        }
        struct batch_job_info bi;
        bool have;
        const char *qs = queue_state(L, j, &bi, &have);
        if (!strcmp(qs, "ended") || !strcmp(qs, "active")) {
            int64_t started = 0;
            for (uint32_t e = 0; e < j->ntasks && !started; e++)
                started = j->el[e].start;
            if (!strcmp(qs, "ended") && !started) {
                fail(reply, m->id, WE_STATE, "job %" PRIu64 " ended without starting", id);
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
        live_elem_spec(L, j, e, &s);
        q.tasks = s.tasks;
        q.per_task = s.per_task;
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
        fail(reply, m->id, WE_INVALID,
             "give a job id, or procs and walltime_s (both at least 1) of a request");
        return;
    }
    q.tasks = (int32_t)procs;
    q.per_task.procs = 1;
    q.per_task.mem = (int64_t)wire_get_u64(o, "mem_mb", 0);
    q.per_task.disk = (int64_t)wire_get_u64(o, "disk_mb", 0);
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
        fail(reply, m->id, WE_INVALID, "%s", cwhy);
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
    if (only && !live_job_find(L, only)) {
        fail(reply, m->id, WE_NOT_FOUND, "no job %" PRIu64 " in this batch role", only);
        return;
    }
    size_t n = batch_job_ids(L->eng, true, NULL, 0);
    uint64_t *ids = n ? malloc(n * sizeof *ids) : NULL;
    if (n && !ids) {
        fail(reply, m->id, WE_STORAGE, "out of memory");
        return;
    }
    n = batch_job_ids(L->eng, true, ids, n);
    int64_t now = live_now(L);
    struct wire_buf rows;
    wire_buf_init(&rows);
    struct page pg;
    page_init(&pg, m);
    uint64_t last = 0, row = 0; /* the cursor: a row's position in priority order */
    bool more = false;
    for (size_t i = 0; i < n; i++) {
        uint64_t job = ids[i] >> LIVE_ELEM_BITS;
        struct batch_prio p;
        /* one row per job: its first pending element stands for the rest */
        if ((only && job != only) || job == last ||
            batch_priority_explain(L->eng, ids[i], now, &p) < 0)
            continue;
        last = job;
        if (row++ < pg.from)
            continue;
        if ((more = page_full(&pg, &rows))) {
            row--;
            break;
        }
        wire_pack_map(&rows, 4);
        wire_put_u64(&rows, "job", job);
        wire_put_u64(&rows, "elem", ids[i] & ((1u << LIVE_ELEM_BITS) - 1));
        wire_put_f64(&rows, "priority", p.total);
        wire_put_key(&rows, "factors");
        uint32_t nf = 0;
        for (int f = 0; f < BATCH_NFACTORS; f++)
            nf += p.weight[f] != 0;
        wire_pack_map(&rows, nf);
        for (int f = 0; f < BATCH_NFACTORS; f++) {
            if (p.weight[f] == 0)
                continue;
            wire_put_key(&rows, batch_factor_name((enum batch_factor)f));
            wire_pack_map(&rows, 3);
            wire_put_f64(&rows, "value", p.value[f]);
            wire_put_f64(&rows, "weight", p.weight[f]);
            wire_put_f64(&rows, "contrib", p.contrib[f]);
        }
        pg.n++;
    }
    free(ids);
    wire_begin(reply, WT_DIAG, m->id, 2 + more);
    wire_put_i64(reply, "now", now);
    page_finish(reply, "jobs", &pg, &rows, more, row);
    wire_buf_free(&rows);
}

static void diag_fairshare(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    int64_t now = live_now(L);
    struct wire_buf rows;
    wire_buf_init(&rows);
    struct page pg;
    page_init(&pg, m);
    uint64_t row = 0; /* the cursor: a row's position (users, then groups, accounts) */
    bool more = false;
    static const int kinds[] = {BATCH_CRED_USER, BATCH_CRED_GROUP, BATCH_CRED_ACCOUNT};
    for (size_t ki = 0; ki < 3 && !more; ki++) {
        int k = kinds[ki];
        /* credentials seen in jobs (distinct, in first-seen order) and configured ones */
        char **seen = NULL;
        size_t ns = 0, cap = 0;
        for (uint32_t i = 0; i <= L->njobs; i++) {
            const char *nm = NULL;
            if (i < L->njobs)
                nm = job_cred(L->jobs[i], k);
            for (size_t c = 0; i == L->njobs && c < L->cfg.eng.ncreds; c++)
                if ((int)L->cfg.eng.creds[c].kind == k &&
                    strcmp(L->cfg.eng.creds[c].name, "DEFAULT")) {
                    nm = L->cfg.eng.creds[c].name;
                    bool dup = false;
                    for (size_t s = 0; s < ns && !dup; s++)
                        dup = !strcmp(seen[s], nm);
                    if (!dup && ns < 100000) {
                        if (ns == cap) {
                            cap = cap ? 2 * cap : 16;
                            char **p = realloc(seen, cap * sizeof *seen);
                            if (!p)
                                break;
                            seen = p;
                        }
                        seen[ns++] = (char *)nm;
                    }
                    nm = NULL;
                }
            if (!nm || !*nm)
                continue;
            bool dup = false;
            for (size_t s = 0; s < ns && !dup; s++)
                dup = !strcmp(seen[s], nm);
            if (dup || ns >= 100000)
                continue;
            if (ns == cap) {
                cap = cap ? 2 * cap : 16;
                char **p = realloc(seen, cap * sizeof *seen);
                if (!p)
                    break;
                seen = p;
            }
            seen[ns++] = (char *)nm;
        }
        for (size_t s = 0; s < ns; s++) {
            if (row < pg.from) {
                row++;
                continue;
            }
            if ((more = page_full(&pg, &rows)))
                break;
            row++;
            double u = batch_fairshare_usage(L->eng, (enum batch_cred_kind)k, seen[s], now);
            double target = -1;
            for (size_t c = 0; c < L->cfg.eng.ncreds; c++)
                if ((int)L->cfg.eng.creds[c].kind == k &&
                    !strcmp(L->cfg.eng.creds[c].name, seen[s]) &&
                    L->cfg.eng.creds[c].fstarget == L->cfg.eng.creds[c].fstarget)
                    target = L->cfg.eng.creds[c].fstarget;
            wire_pack_map(&rows, 4);
            wire_put_str(&rows, "kind", batch_cred_kind_name((enum batch_cred_kind)k));
            wire_put_str(&rows, "name", seen[s]);
            wire_put_f64(&rows, "usage_pct", u < 0 ? 0 : u);
            wire_put_f64(&rows, "target_pct", target);
            pg.n++;
        }
        free(seen);
    }
    wire_begin(reply, WT_DIAG, m->id, 2 + more);
    wire_put_i64(reply, "now", now);
    page_finish(reply, "creds", &pg, &rows, more, row);
    wire_buf_free(&rows);
}

static void h_diagnose(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char what[16];
    wire_get_strbuf(m->root, "what", what, sizeof what);
    if (!strcmp(what, "priority"))
        diag_priority(L, m, reply);
    else if (!strcmp(what, "fairshare"))
        diag_fairshare(L, m, reply);
    else
        fail(reply, m->id, WE_INVALID, "what must be \"priority\" or \"fairshare\"");
}

/* ---- reservations ---- */

static void resv_row(struct live *L, const struct lresv *v, struct wire_buf *wb)
{
    struct batch_resv_info ri;
    bool eng = v->in_engine && batch_resv_find(L->eng, v->name, &ri) == 0;
    wire_pack_map(wb, 13 + BATCH_CRED_KINDS);
    wire_put_str(wb, "name", v->name);
    wire_put_str(wb, "owner", v->owner);
    wire_put_i64(wb, "start", v->start);
    wire_put_i64(wb, "end", v->end);
    wire_put_i64(wb, "tasks", v->tasks);
    wire_put_i64(wb, "procs", v->procs);
    wire_put_i64(wb, "mem_mb", v->mem_mb);
    wire_put_i64(wb, "disk_mb", v->disk_mb);
    wire_put_u64(wb, "job", v->job);
    wire_put_bool(wb, "site", v->site);
    wire_put_bool(wb, "active", eng);
    wire_put_u64(wb, "jobs_running", eng ? (uint64_t)ri.jobs_running : 0);
    put_hosts_of_nodes(L, wb, "hosts", v->nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        put_list(wb, acl_keys[k], v->acl[k]);
}

void livecmd_resv_row(struct live *L, const struct lresv *v, struct wire_buf *wb)
{
    resv_row(L, v, wb);
}

static bool resv_on_host(struct live *L, const struct lresv *v, const char *host)
{
    struct words w;
    bool on = false;
    if (words_split(v->nodes, &w) == 0)
        for (size_t i = 0; i < w.n && !on; i++)
            on = !strcmp(node_host(L, batch_node_find(L->eng, w.v[i])), host);
    words_free(&w);
    return on;
}

static void h_resv_list(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char name[BATCH_NAME_MAX], host[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "name", name, sizeof name);
    wire_get_strbuf(m->root, "host", host, sizeof host);
    if (name[0] && !resv_find(L, name)) {
        fail(reply, m->id, WE_NOT_FOUND, "no reservation %s", name);
        return;
    }
    struct wire_buf rows;
    wire_buf_init(&rows);
    struct page pg;
    page_init(&pg, m);
    int64_t now = live_now(L);
    bool more = false;
    uint32_t i; /* the cursor: a position in the reservation table, as NODE_LIST's */
    for (i = pg.from < L->nresv ? (uint32_t)pg.from : L->nresv; i < L->nresv; i++) {
        const struct lresv *v = &L->resv[i];
        if (v->end <= now || (name[0] && strcmp(name, v->name)) ||
            (host[0] && !resv_on_host(L, v, host)))
            continue;
        if ((more = page_full(&pg, &rows)))
            break;
        resv_row(L, v, &rows);
        pg.n++;
    }
    wire_begin(reply, WT_RESVS, m->id, 2 + more);
    wire_put_i64(reply, "now", now);
    page_finish(reply, "resvs", &pg, &rows, more, i);
    wire_buf_free(&rows);
}

/* Engine node names of the hosts listed in `hosts` (all their cores) as a comma list. */
static char *nodes_of_hosts(struct live *L, const msgpack_object *a, char *why, size_t wl)
{
    size_t cap = 1, len = 0;
    char *s = NULL;
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        bool found = false;
        for (uint32_t k = 0; k < i && !found; k++)
            found = a->via.array.ptr[k].via.str.size == o->via.str.size &&
                    !memcmp(a->via.array.ptr[k].via.str.ptr, o->via.str.ptr, o->via.str.size);
        if (found) {
            snprintf(why, wl, "host %.*s is listed twice", (int)o->via.str.size, o->via.str.ptr);
            free(s);
            return NULL;
        }
        for (int c = 0; c < L->ncl; c++)
            for (uint32_t h = 0; h < L->cl[c].nhosts; h++) {
                const struct lhost *lh = &L->cl[c].hosts[h];
                if (strlen(lh->name) != o->via.str.size ||
                    memcmp(lh->name, o->via.str.ptr, o->via.str.size))
                    continue;
                found = true;
                for (int32_t k = 0; k < lh->ncores; k++) {
                    const char *nn = batch_node_name(L->eng, live_host_slot(lh, k));
                    size_t need = len + strlen(nn) + 2;
                    if (need > cap) {
                        cap = need * 2;
                        char *p = realloc(s, cap);
                        if (!p) {
                            free(s);
                            snprintf(why, wl, "out of memory");
                            return NULL;
                        }
                        s = p;
                    }
                    len += (size_t)sprintf(s + len, "%s%s", len ? "," : "", nn);
                }
            }
        if (!found) {
            snprintf(why, wl, "no host %.*s in any cluster (see gridnode nodes -e BATCH_EP)",
                     (int)o->via.str.size, o->via.str.ptr);
            free(s);
            return NULL;
        }
    }
    return s;
}

static char *nodes_of_info(struct live *L, const struct batch_resv_info *ri)
{
    size_t cap = 1;
    for (int32_t i = 0; i < ri->nnodes; i++)
        cap += strlen(batch_node_name(L->eng, ri->nodes[i])) + 1;
    char *s = malloc(cap);
    size_t len = 0;
    if (s)
        for (int32_t i = 0; i < ri->nnodes; i++)
            len += (size_t)sprintf(s + len, "%s%s", i ? "," : "",
                                   batch_node_name(L->eng, ri->nodes[i]));
    if (s && !len)
        s[0] = '\0';
    return s;
}

/* RESV_SET and RESERVE. */
/* RESERVE `flex` (docs/wire.md 6.12): the resources are taken at q->start, so the
 * reservation goes to the earliest start after it that the plan offers for the same
 * request (ESTIMATE's answer), keeping its duration. A metascheduler placing many jobs
 * at once asks with estimates that the others' reservations have made stale; the site,
 * which alone knows its plan, settles each one instead of refusing it. A few windows
 * are tried (the plan counts cores, a reservation takes whole free nodes). */
static int resv_flex(struct live *L, struct batch_resv_req *q, int64_t now, char *name,
                     size_t namelen, char *why, size_t whylen, int *err)
{
    struct batch_request r;
    memset(&r, 0, sizeof r);
    r.tasks = q->tasks;
    r.per_task = q->per_task;
    r.cred[BATCH_CRED_CLASS] = q->partition; /* as ESTIMATE: the default cluster */
    if (!r.cred[BATCH_CRED_CLASS] && L->default_cl >= 0)
        r.cred[BATCH_CRED_CLASS] = L->cl[L->default_cl].name;
    int64_t dur = q->end - q->start, want = q->start;
    struct batch_window w[8];
    size_t n = batch_estimate(L->eng, &r, dur, now, w, 8);
    n = n < 8 ? n : 8;
    for (size_t i = 0; i < n; i++) {
        if (w[i].to != BATCH_NEVER && w[i].to < want)
            continue;
        q->start = w[i].from > want ? w[i].from : want;
        q->end = q->start + dur;
        if (batch_resv_create(L->eng, q, now, name, namelen, why, whylen) == 0)
            return 0;
        *err = errno;
        if (*err != EBUSY && *err != ENOSPC)
            return -1;
    }
    return -1;
}

static void resv_new(struct live *L, const struct wire_msg *m, struct wire_buf *reply, bool site)
{
    const msgpack_object *o = m->root;
    struct lresv v;
    memset(&v, 0, sizeof v);
    char why[512] = "";
    bool bad = false;
    if (!site && !is_admin(L, o)) {
        char user[BATCH_NAME_MAX];
        wire_get_strbuf(o, "user", user, sizeof user);
        fail(reply, m->id, WE_DENIED,
             "only the batch administrators (batch.admins) may set reservations; '%s' is "
             "not one",
             user[0] ? user : "(no user given)");
        return;
    }
    wire_get_strbuf(o, "name", v.name, sizeof v.name);
    wire_get_strbuf(o, "user", v.owner, sizeof v.owner);
    v.site = site;
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        v.acl[k] = list_field(o, acl_keys[k], &bad);
    int64_t now = live_now(L);
    v.start = wire_get_i64(o, "start", 0);
    if (v.start < now)
        v.start = now;
    int64_t end = wire_get_i64(o, "end", 0), dur = (int64_t)wire_get_u64(o, "duration_s", 0);
    v.procs = (int32_t)wire_get_u64(o, "procs", site ? 0 : 1);
    v.tasks = site ? 1 : (int32_t)wire_get_u64(o, "tasks", 0);
    v.mem_mb = (int64_t)wire_get_u64(o, "mem_mb", 0);
    v.disk_mb = (int64_t)wire_get_u64(o, "disk_mb", 0);
    const msgpack_object *hosts = wire_get(o, "hosts");
    char cls[BATCH_NAME_MAX];
    wire_get_strbuf(o, "class", cls, sizeof cls);
    if (bad)
        snprintf(why, sizeof why,
                 "ACL names must be 1 to 63 bytes, without commas or control "
                 "characters");
    else if (v.name[0] && (strpbrk(v.name, " ,\t\r\n") || v.name[0] == '-'))
        snprintf(why, sizeof why,
                 "a reservation name has no spaces or commas and does not "
                 "start with '-'");
    else if (v.name[0] && resv_find(L, v.name))
        snprintf(why, sizeof why, "reservation %s exists: release it first or pick another name",
                 v.name);
    else if (end && dur)
        snprintf(why, sizeof why, "give an end or a duration, not both");
    else if (!end && !dur)
        snprintf(why, sizeof why, "give an end time or a duration");
    else if ((end ? end : v.start + dur * 1000) <= v.start)
        snprintf(why, sizeof why, "the reservation would end before it starts");
    else if (hosts && hosts->via.array.size && v.tasks)
        snprintf(why, sizeof why,
                 "give either tasks (with procs, mem_mb, disk_mb per task) or "
                 "host names, not both");
    else if (!(hosts && hosts->via.array.size) && (v.tasks < 1 || v.procs < 1))
        snprintf(why, sizeof why, "give host names, or tasks and procs per task (at least 1)");
    else if (cls[0])
        live_class_unknown(L, cls, why, sizeof why);
    if (why[0]) {
        fail(reply, m->id, WE_INVALID, "%s", why);
        resv_clear(&v);
        return;
    }
    v.end = end ? end : v.start + dur * 1000;
    /* let the engine choose (or check) the nodes, then store what it took by name */
    struct batch_resv_req q;
    memset(&q, 0, sizeof q);
    struct words hw;
    memset(&hw, 0, sizeof hw);
    char *hn = NULL;
    if (hosts && hosts->via.array.size) {
        if (!(hn = nodes_of_hosts(L, hosts, why, sizeof why))) {
            fail(reply, m->id, WE_INVALID, "%s", why);
            resv_clear(&v);
            return;
        }
        words_split(hn, &hw);
        q.nodes = hw.v;
        q.nnodes = hw.n;
    } else {
        /* one engine node is one core: tasks x procs one-core tasks */
        q.tasks = v.tasks * v.procs;
        q.per_task.procs = 1;
        q.per_task.mem = v.mem_mb;
        q.per_task.disk = v.disk_mb;
        q.partition = cls[0] ? cls : NULL;
    }
    struct words acl[BATCH_CRED_KINDS];
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        words_split(v.acl[k], &acl[k]);
        q.acl.names[k] = acl[k].v;
        q.acl.n[k] = acl[k].n;
    }
    uint64_t nojob = UINT64_MAX; /* a site reservation admits nobody until bound */
    if (site) {
        memset(q.acl.n, 0, sizeof q.acl.n);
        q.acl.jobs = &nojob;
        q.acl.njobs = 1;
    }
    q.name = v.name[0] ? v.name : NULL;
    q.start = v.start;
    q.end = v.end;
    char name[BATCH_NAME_MAX];
    int rc = batch_resv_create(L->eng, &q, now, name, sizeof name, why, sizeof why);
    int err = errno;
    if (rc < 0 && (err == ENOSPC || err == EBUSY) && site && wire_get_bool(o, "flex", false))
        rc = resv_flex(L, &q, now, name, sizeof name, why, sizeof why, &err);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        words_free(&acl[k]);
    words_free(&hw);
    free(hn);
    if (rc < 0) {
        fail(reply, m->id, err == EINVAL || err == EEXIST ? WE_INVALID : WE_REFUSED,
             "reservation refused: %s", why);
        resv_clear(&v);
        return;
    }
    snprintf(v.name, sizeof v.name, "%s", name);
    struct batch_resv_info ri;
    if (batch_resv_find(L->eng, name, &ri) < 0 || !(v.nodes = nodes_of_info(L, &ri))) {
        batch_resv_release(L->eng, name);
        fail(reply, m->id, WE_STORAGE, "out of memory");
        resv_clear(&v);
        return;
    }
    v.start = ri.start;
    v.end = ri.end; /* a flex one moved */
    v.in_engine = true;
    if (L->nresv == L->capresv) {
        uint32_t nc = L->capresv ? 2 * L->capresv : 8;
        void *p = realloc(L->resv, nc * sizeof *L->resv);
        if (!p) {
            batch_resv_release(L->eng, name);
            fail(reply, m->id, WE_STORAGE, "out of memory");
            resv_clear(&v);
            return;
        }
        L->resv = p;
        L->capresv = nc;
    }
    if (resv_store(L, &v) < 0) {
        batch_resv_release(L->eng, name);
        fail(reply, m->id, WE_STORAGE, "the reservation could not be stored; retry");
        resv_clear(&v);
        return;
    }
    L->resv[L->nresv++] = v;
    log_info("reservation %s set by %s: %" PRId64 "..%" PRId64 " on %s", v.name,
             v.owner[0] ? v.owner : "-", v.start, v.end, v.nodes);
    live_want_cycle(L);
    wire_begin(reply, WT_RESV, m->id, 1);
    wire_put_key(reply, "resv");
    resv_row(L, &L->resv[L->nresv - 1], reply);
}

static void h_resv_set(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    resv_new(L, m, reply, false);
}

static void h_reserve(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    resv_new(L, m, reply, true);
}

static void h_resv_release(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char name[BATCH_NAME_MAX], user[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "name", name, sizeof name);
    wire_get_strbuf(m->root, "user", user, sizeof user);
    struct lresv *v = resv_find(L, name);
    if (!v) {
        fail(reply, m->id, WE_NOT_FOUND, "no reservation %s (see gridnode showres)", name);
        return;
    }
    /* admins release any; the owner of a site reservation releases it */
    if (!is_admin(L, m->root) && !(v->site && v->owner[0] && !strcmp(v->owner, user))) {
        fail(reply, m->id, WE_DENIED,
             "only the batch administrators (batch.admins) may release reservation %s; '%s' "
             "is not one",
             name, user[0] ? user : "(no user given)");
        return;
    }
    log_info("reservation %s released by %s", name, user[0] ? user : "-");
    resv_drop(L, v);
    live_want_cycle(L);
    wire_begin(reply, WT_OK, m->id, 0);
}

/* ---- SITE_INFO ---- */

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
    wire_pack_map(reply, 12);
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
}

static const struct {
    uint32_t type;
    void (*fn)(struct live *L, const struct wire_msg *m, struct wire_buf *reply);
} handlers[] = {
    {WT_SHOWQ, h_showq},
    {WT_CHECKJOB, h_checkjob},
    {WT_ESTIMATE, h_estimate},
    {WT_DIAGNOSE, h_diagnose},
    {WT_RESV_SET, h_resv_set},
    {WT_RESV_LIST, h_resv_list},
    {WT_RESV_RELEASE, h_resv_release},
    {WT_RESERVE, h_reserve},
    {WT_SITE_INFO, h_site_info},
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

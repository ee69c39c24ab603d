/*
 * liveresvcmd.c - the reservation commands of the live batch role (docs/wire.md 6.12):
 * RESV_LIST (showres), RESV_SET (setres), RESERVE (a metascheduler's site
 * reservation) and RESV_RELEASE (releaseres), and a reservation's reply row.
 *
 * Admin commands (RESV_SET, RESV_RELEASE): with CURVE on (docs/security.md), only
 * identities of kind admin (daemon/access.c lets peers through only within their grant;
 * a peer releases only the site reservations it owns). Plain, they are allowed to the
 * user names listed in batch.admins (the name the request carries; an empty
 * batch.admins means root and the user the role runs as).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"

void live_resv_row(struct live *L, const struct lresv *v, struct wire_buf *wb)
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
    live_put_hosts_of_nodes(L, wb, "hosts", v->nodes);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        live_put_list(wb, live_acl_keys[k], v->acl[k]);
}

static bool resv_on_host(struct live *L, const struct lresv *v, const char *host)
{
    struct live_words w;
    bool on = false;
    if (live_words_split(v->nodes, &w) == 0)
        for (size_t i = 0; i < w.n && !on; i++)
            on = !strcmp(live_node_host(L, batch_node_find(L->eng, w.v[i])), host);
    live_words_free(&w);
    return on;
}

void livecmd_resv_list(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char name[BATCH_NAME_MAX], host[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "name", name, sizeof name);
    wire_get_strbuf(m->root, "host", host, sizeof host);
    if (name[0] && !live_resv_find(L, name)) {
        live_fail(reply, m->id, WE_NOT_FOUND, "no reservation %s", name);
        return;
    }
    struct live_page pg;
    live_page_init(&pg, m);
    int64_t now = live_now(L);
    uint32_t i; /* the cursor: a position in the reservation table, as NODE_LIST's */
    for (i = pg.from < L->nresv ? (uint32_t)pg.from : L->nresv; i < L->nresv; i++) {
        const struct lresv *v = &L->resv[i];
        if (v->end <= now || (name[0] && strcmp(name, v->name)) ||
            (host[0] && !resv_on_host(L, v, host)))
            continue;
        if (!live_page_add(&pg))
            break;
        live_resv_row(L, v, &pg.rows);
    }
    live_page_reply(&pg, reply, m, WT_RESVS, now, "resvs", i);
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

/* Processors one reservation holds at most (docs/wire.md 6.12): keeps tasks x procs in
 * the engine's int32 counts. */
#define RESV_PROCS_MAX (1 << 20)

/*
 * A refusal of the engine in the users' units (issue 27): the engine names elements by
 * their engine id ("job 50331648") and times in ms since the epoch ("until
 * 1795715676201"); users know job 3 (element 2 of an array: "job 3[2]") and local
 * times. Rewrites those two forms of why in place.
 */
static void why_words(struct live *L, char *why, size_t len)
{
    char out[512];
    size_t o = 0;
    for (const char *p = why; *p && o + 40 < sizeof out;) {
        bool job = !strncmp(p, "job ", 4), until = !strncmp(p, "until ", 6);
        const char *d = p + (job ? 4 : until ? 6 : 0);
        if ((job || until) && *d >= '0' && *d <= '9' &&
            (p == why || p[-1] == ' ' || p[-1] == '(')) {
            char *end;
            unsigned long long v = strtoull(d, &end, 10);
            if (job) {
                uint64_t id = v >> LIVE_ELEM_BITS, e = v & ((1u << LIVE_ELEM_BITS) - 1);
                const struct ljob *j = live_job_find(L, id);
                if (j && j->ntasks > 1)
                    o += (size_t)snprintf(out + o, sizeof out - o, "job %llu[%llu]",
                                          (unsigned long long)id, (unsigned long long)e);
                else
                    o += (size_t)snprintf(out + o, sizeof out - o, "job %llu",
                                          (unsigned long long)(j ? id : v));
            } else {
                time_t t = (time_t)(v / 1000);
                struct tm tm;
                char b[32];
                localtime_r(&t, &tm);
                strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
                o += (size_t)snprintf(out + o, sizeof out - o, "until %s", b);
            }
            p = end;
            continue;
        }
        out[o++] = *p++;
    }
    out[o < sizeof out ? o : sizeof out - 1] = '\0';
    snprintf(why, len, "%s", out);
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
    r.ppn = q->ppn;
    r.constraint = q->constraint;
    r.cred[BATCH_CRED_CLASS] = q->partition; /* as ESTIMATE: the default cluster */
    if (!r.cred[BATCH_CRED_CLASS] && L->default_cl >= 0)
        r.cred[BATCH_CRED_CLASS] = L->cl[L->default_cl].name;
    int64_t dur = q->end - q->start, want = q->start;
    /* The estimate regroups the engine with every reservation alive (O(reservations)),
     * and a burst of placements makes each RESERVE flex: quadratic (issue 28: 5,000
     * placements cost the site 48 s of CPU). Within one turn the plan changes little
     * but by the reservations added (the cycle runs at the commit, which forgets the
     * hint), so the earliest start of the same request (same size, duration, class,
     * asked no earlier) is no earlier than the last flex one's: try there first, the
     * estimate only when it is full. A job end read in the same turn may have opened
     * an earlier start: the reservation is then later than it could be, never wrong
     * (and a job placed with early start, the spool's default, starts sooner anyway). */
    const char *cls = r.cred[BATCH_CRED_CLASS] ? r.cred[BATCH_CRED_CLASS] : "";
    struct live_flex_hint *h = &L->flex_hint;
    bool same = h->valid && !q->constraint && !q->ppn && h->tasks == q->tasks &&
                !memcmp(&h->per_task, &q->per_task, sizeof h->per_task) && h->dur == dur &&
                !strcmp(h->cls, cls) && h->want <= want && want <= h->start;
    if (same) {
        q->start = h->start;
        q->end = q->start + dur;
        if (batch_resv_create(L->eng, q, now, name, namelen, why, whylen) == 0)
            return 0;
        *err = errno;
        if (*err != EBUSY && *err != ENOSPC)
            return -1;
    }
    struct batch_window w[8];
    size_t n = batch_estimate(L->eng, &r, dur, now, w, 8);
    n = n < 8 ? n : 8;
    for (size_t i = 0; i < n; i++) {
        if (w[i].to != BATCH_NEVER && w[i].to < want)
            continue;
        q->start = w[i].from > want ? w[i].from : want;
        q->end = q->start + dur;
        if (batch_resv_create(L->eng, q, now, name, namelen, why, whylen) == 0) {
            h->valid = !q->constraint && !q->ppn && strlen(cls) < sizeof h->cls;
            h->tasks = q->tasks;
            h->per_task = q->per_task;
            snprintf(h->cls, sizeof h->cls, "%s", cls);
            h->want = want;
            h->dur = dur;
            h->start = q->start;
            return 0;
        }
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
    if (!site && !live_is_admin(L, o)) {
        char user[BATCH_NAME_MAX];
        wire_get_strbuf(o, "user", user, sizeof user);
        live_fail(reply, m->id, WE_DENIED,
                  "only the batch administrators (batch.admins) may set reservations; '%s' is "
                  "not one",
                  user[0] ? user : "(no user given)");
        return;
    }
    wire_get_strbuf(o, "name", v.name, sizeof v.name);
    wire_get_strbuf(o, "user", v.owner, sizeof v.owner);
    v.site = site;
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        v.acl[k] = live_list_field(o, live_acl_keys[k], &bad);
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
    else if (v.name[0] && live_resv_find(L, v.name))
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
    else if ((int64_t)v.tasks * v.procs > RESV_PROCS_MAX) /* both capped: no overflow */
        snprintf(why, sizeof why,
                 "tasks x procs is %" PRId64 " processors, more than the %d one reservation may "
                 "hold",
                 (int64_t)v.tasks * v.procs, RESV_PROCS_MAX);
    else if (cls[0])
        live_class_unknown(L, cls, why, sizeof why);
    if (why[0]) {
        live_fail(reply, m->id, WE_INVALID, "%s", why);
        live_resv_clear(&v);
        return;
    }
    v.end = end ? end : v.start + dur * 1000;
    size_t cn;
    const char *cs = wire_get_str(o, "constraint", &cn); /* issue 27 */
    char con[CONSTRAINT_LEN_MAX + 1] = "";
    if (cs && constraint_parse(cs, cn, con, sizeof con, why, sizeof why) < 0) {
        live_fail(reply, m->id, WE_INVALID, "%s", why);
        live_resv_clear(&v);
        return;
    }
    /* counts (NAME*N): a reservation cannot promise "N of its hosts": every reserved
     * host has each counted name (in place: the text only gets shorter) */
    (void)constraint_plain(con, con, sizeof con);
    /* let the engine choose (or check) the nodes, then store what it took by name */
    struct batch_resv_req q;
    memset(&q, 0, sizeof q);
    struct live_words hw;
    memset(&hw, 0, sizeof hw);
    char *hn = NULL;
    if (hosts && hosts->via.array.size) {
        if (!(hn = nodes_of_hosts(L, hosts, why, sizeof why))) {
            live_fail(reply, m->id, WE_INVALID, "%s", why);
            live_resv_clear(&v);
            return;
        }
        live_words_split(hn, &hw);
        q.nodes = hw.v;
        q.nnodes = hw.n;
    } else {
        /* one engine node is one core: tasks x procs one-core tasks */
        q.tasks = v.tasks * v.procs;
        q.per_task.procs = 1;
        q.per_task.mem = v.mem_mb;
        q.per_task.disk = v.disk_mb;
        q.partition = cls[0]                             ? cls
                      : site && L->cfg.eng.grid_class[0] ? L->cfg.eng.grid_class
                                                         : NULL; /* [grid] class (issue 25) */
        q.ppn = (int32_t)wire_get_u64(o, "ppn", 0);              /* RESERVE: a spool job's --ppn */
        q.constraint = con[0] ? con : NULL; /* RESERVE: a spool job's --constraint */
    }
    struct live_words acl[BATCH_CRED_KINDS];
    for (int k = 0; k < BATCH_CRED_KINDS; k++) {
        live_words_split(v.acl[k], &acl[k]);
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
    q.grid = site; /* a spool's: yields to [grid] local_wait_bound (issue 25) */
    q.start = v.start;
    q.end = v.end;
    char name[BATCH_NAME_MAX];
    int rc = batch_resv_create(L->eng, &q, now, name, sizeof name, why, sizeof why);
    int err = errno;
    if (rc < 0 && (err == ENOSPC || err == EBUSY) && site && wire_get_bool(o, "flex", false))
        rc = resv_flex(L, &q, now, name, sizeof name, why, sizeof why, &err);
    for (int k = 0; k < BATCH_CRED_KINDS; k++)
        live_words_free(&acl[k]);
    live_words_free(&hw);
    free(hn);
    if (rc < 0) {
        why_words(L, why, sizeof why);
        live_fail(reply, m->id, err == EINVAL || err == EEXIST ? WE_INVALID : WE_REFUSED,
                  "reservation refused: %s", why);
        live_resv_clear(&v);
        return;
    }
    snprintf(v.name, sizeof v.name, "%s", name);
    struct batch_resv_info ri;
    if (batch_resv_find(L->eng, name, &ri) < 0 || !(v.nodes = live_resv_nodes(L, &ri))) {
        batch_resv_release(L->eng, name);
        live_fail(reply, m->id, WE_STORAGE, "out of memory");
        live_resv_clear(&v);
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
            live_fail(reply, m->id, WE_STORAGE, "out of memory");
            live_resv_clear(&v);
            return;
        }
        L->resv = p;
        L->capresv = nc;
    }
    if (live_resv_store(L, &v) < 0) {
        batch_resv_release(L->eng, name);
        live_fail(reply, m->id, WE_STORAGE, "the reservation could not be stored; retry");
        live_resv_clear(&v);
        return;
    }
    L->resv[L->nresv++] = v;
    log_info("reservation %s set by %s: %" PRId64 "..%" PRId64 " on %s", v.name,
             v.owner[0] ? v.owner : "-", v.start, v.end, v.nodes);
    live_want_cycle(L);
    wire_begin(reply, WT_RESV, m->id, 1);
    wire_put_key(reply, "resv");
    live_resv_row(L, &L->resv[L->nresv - 1], reply);
}

void livecmd_resv_set(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    resv_new(L, m, reply, false);
}

void livecmd_reserve(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    resv_new(L, m, reply, true);
}

void livecmd_resv_release(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char name[BATCH_NAME_MAX], user[BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "name", name, sizeof name);
    wire_get_strbuf(m->root, "user", user, sizeof user);
    struct lresv *v = live_resv_find(L, name);
    if (!v) {
        live_fail(reply, m->id, WE_NOT_FOUND, "no reservation %s (see gridnode showres)", name);
        return;
    }
    /* admins release any; the owner of a site reservation releases it */
    if (!live_is_admin(L, m->root) && !(v->site && v->owner[0] && !strcmp(v->owner, user))) {
        live_fail(reply, m->id, WE_DENIED,
                  "only the batch administrators (batch.admins) may release reservation %s; '%s' "
                  "is not one",
                  name, user[0] ? user : "(no user given)");
        return;
    }
    log_info("reservation %s released by %s", name, user[0] ? user : "-");
    live_resv_drop(L, v);
    live_want_cycle(L);
    wire_begin(reply, WT_OK, m->id, 0);
}

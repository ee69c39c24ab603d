/*
 * livemaui.c - Maui's node and site commands at the live batch role (issue 27,
 * docs/wire.md 6.12): SHOWBF (the backfill windows, from the engine's plan), CHECKNODE
 * (one host: state, cores, the jobs on it, its features and reservations) and SHOWSTATS
 * (the site's statistics from the accounting records, so they survive restarts, with
 * the load now), and DIAGNOSE nodes (Maui's diagnose -n: every host with what is wrong
 * with it). Below livecmd.c, which dispatches them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/acct.h"
#include "daemon/curve.h"
#include "store/store.h"
#include "roles/batch/live/live_int.h"

/* ---- SHOWBF ---- */

#define BF_MAX 64 /* windows in one reply */

void livecmd_showbf(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char cls[BATCH_NAME_MAX], why[BATCH_NAME_MAX + 300];
    wire_get_strbuf(m->root, "class", cls, sizeof cls);
    if (cls[0] && live_class_unknown(L, cls, why, sizeof why)) {
        live_fail(reply, m->id, WE_INVALID, "%s", why);
        return;
    }
    struct batch_bf_window w[BF_MAX];
    int64_t now = live_now(L);
    size_t n = batch_backfill_windows(L->eng, now, cls, w, BF_MAX);
    n = n < BF_MAX ? n : BF_MAX;
    wire_begin(reply, WT_BACKFILL, m->id, 3);
    wire_put_key(reply, "windows");
    wire_pack_array(reply, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        wire_pack_map(reply, 2);
        wire_put_u64(reply, "procs", (uint64_t)w[i].procs);
        /* seconds (rounded down: the window holds that long at least); -1 no limit */
        wire_put_i64(reply, "duration_s",
                     w[i].duration == BATCH_NEVER ? -1 : (int64_t)(w[i].duration / 1000));
    }
    wire_put_str(reply, "class", cls);
    wire_put_i64(reply, "now", now);
}

/* ---- CHECKNODE ---- */

/* The host named name (any cluster; "CLUSTER:HOST" picks one), its cluster in *cl. */
static struct lhost *find_host(struct live *L, const char *name, int *cl)
{
    const char *colon = strchr(name, ':');
    for (int c = 0; c < L->ncl; c++) {
        const char *h = name;
        if (colon) {
            size_t k = (size_t)(colon - name);
            if (strlen(L->cl[c].name) != k || memcmp(L->cl[c].name, name, k))
                continue;
            h = colon + 1;
        }
        for (uint32_t i = 0; i < L->cl[c].nhosts; i++)
            if (!strcmp(L->cl[c].hosts[i].name, h)) {
                *cl = c;
                return &L->cl[c].hosts[i];
            }
    }
    return NULL;
}

static bool is_slot_of(const struct lhost *h, int32_t s)
{
    for (int32_t k = 0; k < h->nslots; k++)
        if (live_host_slot(h, k) == s)
            return true;
    return false;
}

/* The batch jobs running on host h (ids, ascending, distinct) into ids; the count. */
static uint32_t host_jobs(struct live *L, const struct lhost *h, uint64_t *ids, uint32_t max,
                          int32_t *busy)
{
    size_t n = batch_job_ids(L->eng, false, NULL, 0);
    uint64_t *all = malloc((n + 1) * sizeof *all);
    uint32_t k = 0;
    *busy = 0;
    if (!all)
        return 0;
    n = batch_job_ids(L->eng, false, all, n);
    for (size_t i = 0; i < n; i++) {
        struct batch_job_info bi;
        if (batch_job_info(L->eng, all[i], &bi) < 0 || bi.state != BATCH_JOB_RUNNING)
            continue;
        int32_t on = 0;
        for (int32_t x = 0; x < bi.nnodes; x++)
            on += is_slot_of(h, bi.nodes[x]);
        if (!on)
            continue;
        *busy += on;
        uint64_t id = all[i] >> 24; /* engine job (J << 24) | element */
        const struct ljob *lj = live_job_find(L, id);
        if (!lj || !curve_may_touch(lj->user)) /* a user identity: its own jobs only */
            continue;
        bool seen = false;
        for (uint32_t q = 0; q < k && !seen; q++)
            seen = ids[q] == id;
        if (!seen && k < max)
            ids[k++] = id;
    }
    free(all);
    return k;
}

/* Its reservations (distinct names over its cores) as an array. */
static void put_host_resv(struct live *L, const struct lhost *h, struct wire_buf *wb)
{
    const char *names[64], *one[16];
    uint32_t n = 0;
    for (int32_t k = 0; k < h->nslots; k++) {
        size_t m = batch_resv_on_node(L->eng, live_host_slot(h, k), one, 16);
        for (size_t i = 0; i < m && i < 16; i++) {
            bool seen = false;
            for (uint32_t q = 0; q < n && !seen; q++)
                seen = !strcmp(names[q], one[i]);
            if (!seen && n < 64)
                names[n++] = one[i];
        }
    }
    wire_put_key(wb, "reservations");
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++)
        wire_pack_str(wb, names[i]);
}

/*
 * What is wrong with host h (DIAGNOSE nodes, Maui's diagnose -n), into why ("" none):
 * its cluster not answering, down with batch jobs on it, more ranks than cores,
 * refusing work after a refused start (cores taken behind the role's back), up
 * offering no core, down for long.
 */
static void host_problem(struct live *L, int cl, const struct lhost *h, int32_t busy, char *why,
                         size_t len)
{
    int64_t now = live_now(L), since = h->changed ? (now - h->changed) / 1000 : -1;
    why[0] = 0;
    if (!L->cl[cl].synced)
        snprintf(why, len, "its cluster %s is not answering (state as last known)", L->cl[cl].name);
    else if (!h->up && busy > 0)
        snprintf(why, len, "down with %d batch rank%s still on it (lost once its cluster says so)",
                 (int)busy, busy == 1 ? "" : "s");
    else if (busy > h->ncores)
        snprintf(why, len, "%d ranks on %d cores (it offers fewer cores than before)", (int)busy,
                 (int)h->ncores);
    else if (h->up && h->blocked_until)
        snprintf(why, len,
                 "refused a start: its cores are busy with work the batch role "
                 "did not place (jobs submitted to the cluster directly?)");
    else if (h->up && h->ncores <= 0)
        snprintf(why, len, "up but offers no core");
    else if (!h->up && since >= 600)
        snprintf(why, len, "down for %" PRId64 " min", since / 60);
}

/* The row of host h of cluster cl (CHECKNODE's "node"; DIAGNOSE nodes adds "problem"). */
static void host_row(struct live *L, int cl, const struct lhost *h, struct wire_buf *wb, bool diag)
{
    uint64_t ids[256];
    int32_t busy;
    uint32_t nj = host_jobs(L, h, ids, 256, &busy);
    const char *state = !h->up              ? "down"
                        : h->blocked_until  ? "blocked"
                        : busy >= h->ncores ? "busy"
                        : busy > 0          ? "running"
                                            : "idle";
    wire_pack_map(wb, 10 + (diag ? 1 : 0));
    wire_put_str(wb, "node", h->name);
    wire_put_str(wb, "cluster", L->cl[cl].name);
    wire_put_str(wb, "state", state);
    wire_put_u64(wb, "cores", (uint64_t)(h->ncores > 0 ? h->ncores : 0));
    wire_put_u64(wb, "cores_busy", (uint64_t)busy);
    wire_put_u64(wb, "mem_mb", h->mem_mb);
    wire_put_u64(wb, "disk_mb", h->disk_mb);
    wire_put_str(wb, "features", h->features);
    wire_put_key(wb, "jobs");
    wire_pack_array(wb, nj);
    for (uint32_t i = 0; i < nj; i++)
        wire_pack_u64(wb, ids[i]);
    put_host_resv(L, h, wb);
    if (diag) {
        char why[300];
        host_problem(L, cl, h, busy, why, sizeof why);
        wire_put_str(wb, "problem", why);
    }
}

void livecmd_checknode(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    char name[2 * BATCH_NAME_MAX];
    wire_get_strbuf(m->root, "node", name, sizeof name);
    int cl = -1;
    struct lhost *h = find_host(L, name, &cl);
    if (!h) {
        live_fail(reply, m->id, WE_NOT_FOUND,
                  "no host '%s' here (gridnode nodes -e lists the hosts of the batch role)", name);
        return;
    }
    wire_begin(reply, WT_NODECHECK, m->id, 1);
    wire_put_key(reply, "node");
    host_row(L, cl, h, reply, false);
}

/* DIAGNOSE nodes (Maui's diagnose -n): every host, cluster by cluster, paged by its
 * position in that order. */
void livecmd_diag_nodes(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    struct live_page pg;
    live_page_init(&pg, m);
    uint64_t row = 0;
    for (int c = 0; c < L->ncl && !pg.more; c++)
        for (uint32_t i = 0; i < L->cl[c].nhosts; i++) {
            if (row < pg.from) {
                row++;
                continue;
            }
            if (!live_page_add(&pg))
                break;
            row++;
            host_row(L, c, &L->cl[c].hosts[i], &pg.rows, true);
        }
    live_page_reply(&pg, reply, m, WT_DIAG, live_now(L), "nodes", row);
}

/* ---- SHOWSTATS ---- */

struct sums {
    int64_t since;
    uint64_t n, done, failed, cancelled, other, started;
    double wait_s, wait_max, xf, xf_max, core_s;
    int64_t first, last; /* finish times seen, ms */
};

/* One accounting record into the sums (records finished before since are skipped). */
static int add_record(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key;
    (void)klen;
    struct sums *s = arg;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, val, vlen, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP)
        goto out;
    const msgpack_object *o = &up.data;
    int64_t fin = wire_get_i64(o, "finished", 0), sub = wire_get_i64(o, "submitted", 0),
            st = wire_get_i64(o, "started", 0);
    if (fin < s->since)
        goto out;
    char state[16];
    wire_get_strbuf(o, "state", state, sizeof state);
    s->n++;
    if (!strcmp(state, "done"))
        s->done++;
    else if (!strcmp(state, "failed") || !strcmp(state, "killed"))
        s->failed++;
    else if (!strcmp(state, "cancelled"))
        s->cancelled++;
    else
        s->other++;
    s->first = !s->first || fin < s->first ? fin : s->first;
    s->last = fin > s->last ? fin : s->last;
    double run = wire_get_f64(o, "run_s", 0);
    s->core_s += run * (double)wire_get_u64(o, "cores", 1);
    if (st > 0 && sub > 0 && st >= sub) {
        double wait = (double)(st - sub) / 1000.0, r = run > 1 ? run : 1;
        double xf = (wait + r) / r; /* Maui's expansion factor, on the time it ran */
        s->started++;
        s->wait_s += wait;
        s->wait_max = wait > s->wait_max ? wait : s->wait_max;
        s->xf += xf;
        s->xf_max = xf > s->xf_max ? xf : s->xf_max;
    }
out:
    msgpack_unpacked_destroy(&up);
    return 0;
}

/* Cores up and busy now, jobs queued and running now. */
static void load_now(const struct live *L, uint64_t *up, uint64_t *busy, uint64_t *queued,
                     uint64_t *running)
{
    *up = *busy = *queued = *running = 0;
    for (int c = 0; c < L->ncl; c++)
        for (uint32_t h = 0; h < L->cl[c].nhosts; h++)
            if (L->cl[c].hosts[h].up)
                *up += (uint64_t)L->cl[c].hosts[h].ncores;
    for (uint32_t i = 0; i < L->njobs; i++) {
        const struct ljob *j = L->jobs[i];
        if (j->cancelled || j->nended == j->ntasks)
            continue;
        uint32_t act = j->nstarted > j->nended ? j->nstarted - j->nended : 0;
        *running += act > 0;
        *queued += act == 0;
        *busy += (uint64_t)act * (j->parallel ? j->procs : 1);
    }
}

void livecmd_showstats(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    struct sums s;
    memset(&s, 0, sizeof s);
    s.since = wire_get_i64(m->root, "since", 0);
    /* bounded by the retention (acct.max_records): an administrator's command */
    if (L->t_acct >= 0 && store_iter(L->store, L->t_acct, NULL, 0, add_record, &s) < 0) {
        live_fail(reply, m->id, WE_STORAGE, "cannot read the accounting records");
        return;
    }
    uint64_t up, busy, queued, running;
    load_now(L, &up, &busy, &queued, &running);
    double span_s = s.last > s.first ? (double)(s.last - s.first) / 1000.0 : 0;
    wire_begin(reply, WT_SITESTATS, m->id, 1);
    wire_put_key(reply, "stats");
    wire_pack_map(reply, 21);
    wire_put_i64(reply, "since", s.since);
    wire_put_i64(reply, "first_finished", s.first);
    wire_put_i64(reply, "last_finished", s.last);
    wire_put_u64(reply, "jobs", s.n);
    wire_put_u64(reply, "done", s.done);
    wire_put_u64(reply, "failed", s.failed);
    wire_put_u64(reply, "cancelled", s.cancelled);
    wire_put_u64(reply, "other", s.other);
    wire_put_u64(reply, "started", s.started);
    wire_put_f64(reply, "avg_wait_s", s.started ? s.wait_s / (double)s.started : 0);
    wire_put_f64(reply, "max_wait_s", s.wait_max);
    wire_put_f64(reply, "avg_xfactor", s.started ? s.xf / (double)s.started : 0);
    wire_put_f64(reply, "max_xfactor", s.xf_max);
    wire_put_f64(reply, "proc_hours", s.core_s / 3600.0);
    wire_put_f64(reply, "span_s", span_s);
    wire_put_u64(reply, "cores_up", up);
    wire_put_u64(reply, "cores_busy", busy);
    wire_put_f64(reply, "utilization", up ? (double)busy / (double)up : 0);
    wire_put_u64(reply, "running", running);
    wire_put_u64(reply, "queued", queued);
    wire_put_i64(reply, "now", live_now(L));
}

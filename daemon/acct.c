/*
 * acct.c - job accounting records: saving, retention and the ACCT request (acct.h).
 */
#include <errno.h>
#include <string.h>

#include "daemon/acct.h"
#include "daemon/record.h"

/* Records one ACCT request looks at, at most: a filter that matches little never holds
 * the loop for long; the reply then says where to go on ("next"). */
#define ACCT_SCAN_MAX 100000u

static void put_opt_str(struct wire_buf *wb, const char *key, const char *v)
{
    if (v)
        wire_put_str(wb, key, v);
}

static int encode(const void *rec, struct wire_buf *wb)
{
    const struct acct_rec *r = rec;
    uint32_t nh = r->nhosts < ACCT_HOSTS_MAX ? r->nhosts : ACCT_HOSTS_MAX;
    uint32_t n = 13 + (r->user != NULL) + (r->group != NULL) + (r->name != NULL) +
                 (r->reason != NULL) + (r->site != NULL) + (r->cpu_s >= 0);
    wire_pack_map(wb, n);
    wire_put_u64(wb, "job", r->job);
    put_opt_str(wb, "user", r->user);
    put_opt_str(wb, "group", r->group);
    put_opt_str(wb, "name", r->name);
    wire_put_str(wb, "kind", r->kind ? r->kind : "bag");
    wire_put_str(wb, "state", r->state ? r->state : "");
    put_opt_str(wb, "reason", r->reason);
    put_opt_str(wb, "site", r->site);
    wire_put_i64(wb, "exit", r->exit);
    wire_put_u64(wb, "signal", r->signal);
    wire_put_i64(wb, "submitted", r->submitted_ms);
    wire_put_i64(wb, "started", r->started_ms);
    wire_put_i64(wb, "finished", r->finished_ms);
    wire_put_f64(wb, "run_s", r->run_s > 0 ? r->run_s : 0);
    if (r->cpu_s >= 0)
        wire_put_f64(wb, "cpu_s", r->cpu_s);
    wire_put_u64(wb, "procs", r->procs);
    wire_put_u64(wb, "cores", r->cores ? r->cores : r->procs);
    wire_put_u64(wb, "nhosts", r->nhosts);
    wire_put_key(wb, "hosts");
    wire_pack_array(wb, nh);
    for (uint32_t i = 0; i < nh; i++)
        wire_pack_str(wb, r->hosts[i] ? r->hosts[i] : "");
    return 0;
}

int acct_save(struct store *s, int table, const struct acct_rec *r, struct wire_buf *wb)
{
    if (table < 0) {
        errno = EINVAL;
        return -1;
    }
    return record_save_u64(s, table, r->job, r, encode, wb);
}

/* The record at val as a map in up (wire_precheck first): 0, or -1 (up freed). */
static int unpack(msgpack_unpacked *up, const void *val, size_t vlen)
{
    size_t off = 0;
    msgpack_unpacked_init(up);
    if (wire_precheck(val, vlen) == 0 &&
        msgpack_unpack_next(up, val, vlen, &off) == MSGPACK_UNPACK_SUCCESS &&
        up->data.type == MSGPACK_OBJECT_MAP)
        return 0;
    msgpack_unpacked_destroy(up);
    return -1;
}

struct sweep {
    struct store *s;
    int table;
    int64_t cutoff;  /* delete finished before this (INT64_MIN: none) */
    uint64_t excess; /* oldest ids still to delete for max_records */
    uint32_t seen;
    long deleted;
    uint64_t last;
    bool failed;
};

static int sweep_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct sweep *w = arg;
    msgpack_unpacked up;
    if (klen != 8)
        return 0;
    w->last = store_key_get_u64(key);
    bool old = false;
    if (w->cutoff != INT64_MIN && unpack(&up, val, vlen) == 0) {
        int64_t fin = wire_get_time(&up.data, "finished", 0);
        old = fin > 0 && fin < w->cutoff;
        msgpack_unpacked_destroy(&up);
    }
    if (old || w->excess) {
        if (store_del(w->s, w->table, key, klen) < 0) {
            w->failed = true;
            return 1;
        }
        w->deleted++;
        if (w->excess)
            w->excess--;
    }
    return ++w->seen >= ACCT_SWEEP_SCAN;
}

long acct_sweep(struct store *s, int table, const struct acct_conf *cf, int64_t now_ms,
                struct acct_sweep *st)
{
    if (table < 0 || (cf->keep_days <= 0 && cf->max_records <= 0))
        return 0;
    struct sweep w = {s, table, INT64_MIN, 0, 0, 0, 0, false};
    if (cf->keep_days > 0)
        w.cutoff = now_ms - (int64_t)cf->keep_days * 86400000;
    size_t n = cf->max_records > 0 ? store_count(s, table) : 0;
    uint8_t key[8];
    if (cf->max_records > 0 && n > (size_t)cf->max_records) {
        w.excess = n - (size_t)cf->max_records; /* the oldest ids: start at the front */
        st->cursor = 0;
    }
    store_key_u64(key, st->cursor);
    if (store_iter(s, table, key, sizeof key, sweep_one, &w) < 0 || w.failed)
        return -1;
    /* a pass that stopped early goes on after the last record seen; else from the top */
    st->cursor = w.seen >= ACCT_SWEEP_SCAN ? w.last + 1 : 0;
    return w.deleted;
}

/* Does the comma-separated list in m's key hold v (absent: yes)? */
static bool list_allows(const msgpack_object *m, const char *key, const msgpack_object *rec,
                        const char *rkey)
{
    size_t n, vl = 0;
    const char *f = wire_get_str(m, key, &n);
    if (!f)
        return true;
    const char *v = wire_get_str(rec, rkey, &vl);
    if (!v)
        v = "", vl = 0;
    for (const char *p = f, *end = f + n; p <= end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t l = (size_t)((comma ? comma : end) - p);
        if (l == vl && !memcmp(p, v, l))
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

/* Does record r pass the filters of request m? The window keeps a job that was in the
 * system at some moment of [start, end]: submitted by end, finished from start on. */
static bool passes(const msgpack_object *m, const msgpack_object *r)
{
    const msgpack_object *s = wire_get(m, "start"), *e = wire_get(m, "end");
    if (s && wire_get_time(r, "finished", 0) < (int64_t)s->via.u64)
        return false;
    if (e && wire_get_time(r, "submitted", 0) > (int64_t)e->via.u64)
        return false;
    return list_allows(m, "user", r, "user") && list_allows(m, "group", r, "group") &&
           list_allows(m, "state", r, "state") && list_allows(m, "name", r, "name") &&
           list_allows(m, "kind", r, "kind");
}

struct query {
    const msgpack_object *m;
    struct wire_buf rows;
    uint32_t n, want, scanned;
    uint64_t next; /* 0: the table was read to its end */
    uint64_t job;  /* only this job (0: any) */
};

static int query_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct query *q = arg;
    msgpack_unpacked up;
    if (klen != 8)
        return 0;
    uint64_t id = store_key_get_u64(key);
    if (q->job && id != q->job)
        return 1;
    if (q->n >= q->want || q->rows.sb.size >= ACCT_REPLY_MAX || q->scanned >= ACCT_SCAN_MAX) {
        q->next = id;
        return 1;
    }
    q->scanned++;
    if (unpack(&up, val, vlen) < 0)
        return 0; /* not readable: `gridnode dump` shows it */
    if (passes(q->m, &up.data)) {
        msgpack_sbuffer_write(&q->rows.sb, val, vlen);
        q->n++;
    }
    msgpack_unpacked_destroy(&up);
    return 0;
}

void acct_reply(struct store *s, int table, const struct wire_msg *m, struct wire_buf *reply)
{
    uint64_t job = wire_get_u64(m->root, "job", 0);
    struct query q = {.m = m->root, .job = job};
    uint8_t key[8];
    q.want = (uint32_t)wire_get_u64(m->root, "count", ACCT_PAGE_COUNT);
    if (!q.want)
        q.want = ACCT_PAGE_COUNT;
    wire_buf_init(&q.rows);
    store_key_u64(key, job ? job : wire_get_u64(m->root, "from", 0));
    int rc = table < 0 ? -1 : store_iter(s, table, key, sizeof key, query_one, &q);
    wire_buf_reset(reply);
    if (rc < 0) {
        wire_error_msg(reply, m->id, WE_STORAGE, "the accounting records cannot be read");
    } else if (job && !q.n) {
        wire_error_msg(reply, m->id, WE_NOT_FOUND, "no accounting record of job %llu",
                       (unsigned long long)job);
    } else {
        wire_begin(reply, WT_ACCTS, m->id, 1 + (q.next != 0));
        wire_put_key(reply, "rows");
        wire_pack_array(reply, q.n);
        msgpack_sbuffer_write(&reply->sb, q.rows.sb.data, q.rows.sb.size);
        if (q.next)
            wire_put_u64(reply, "next", q.next);
    }
    wire_buf_free(&q.rows);
}

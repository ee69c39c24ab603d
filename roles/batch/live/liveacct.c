/*
 * liveacct.c - the batch role's accounting records (daemon/acct.h, docs/accounting.md):
 * one per finished job, written in the turn that stores its end (before live_save_dirty
 * writes the job's records, in the same commit); the ACCT request; the retention sweep.
 * Calls only livejob.c.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/acct.h"
#include "daemon/loop.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

/* Adds host (n bytes) to hosts[0..*nh) unless there or full; the names point into the
 * elements' host lists, so they are copied into buf (ACCT_HOSTS_MAX x BATCH_NAME_MAX). */
static void add_host(const char *h, size_t n, char (*buf)[BATCH_NAME_MAX], const char **hosts,
                     uint32_t *nh, uint32_t *all)
{
    if (!n || n >= BATCH_NAME_MAX)
        return;
    for (uint32_t i = 0; i < *nh; i++)
        if (strlen(hosts[i]) == n && !memcmp(hosts[i], h, n))
            return;
    (*all)++;
    if (*nh == ACCT_HOSTS_MAX)
        return;
    memcpy(buf[*nh], h, n);
    buf[*nh][n] = '\0';
    hosts[*nh] = buf[*nh];
    (*nh)++;
}

/* Every element record: first start, summed run time (each element holds one core of
 * an array, or procs cores of a parallel job), hosts, the first failure's exit. */
static void sum_elems(const struct live *L, const struct ljob *j, struct acct_rec *r,
                      char (*buf)[BATCH_NAME_MAX], const char **hosts)
{
    const struct lelem *el;
    uint32_t nh = 0, all = 0;
    bool exit_set = false;
    for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
        if (el->start && (!r->started_ms || el->start < r->started_ms))
            r->started_ms = el->start;
        if (el->start && el->end > el->start)
            r->run_s += (double)(el->end - el->start) / 1000.0;
        for (const char *p = el->hosts; p && *p;) {
            size_t l = strcspn(p, ",");
            add_host(p, l, buf, hosts, &nh, &all);
            p += l + (p[l] == ',');
        }
        if (!exit_set && el->state != EL_DONE && (el->exit || el->signal)) {
            r->exit = el->exit;
            r->signal = el->signal;
            r->reason = el->reason;
            exit_set = true;
        }
        if (!r->site && el->cl >= 0 && el->cl < L->ncl)
            r->site = L->cl[el->cl].name;
    }
    r->nhosts = all;
    r->hosts = hosts;
}

/* The record of finished job j into the turn: 0, or -1 (store). */
static int save_one(struct live *L, const struct ljob *j)
{
    char buf[ACCT_HOSTS_MAX][BATCH_NAME_MAX];
    const char *hosts[ACCT_HOSTS_MAX];
    const struct lelem *e0 = live_elem_peek(j, 0);
    struct acct_rec r = {.job = j->id,
                         .user = j->user,
                         .group = j->account && *j->account ? j->account : j->group,
                         .name = j->name,
                         .kind = j->parallel     ? "parallel"
                                 : j->ntasks > 1 ? "array"
                                                 : "bag",
                         .submitted_ms = j->submitted,
                         .finished_ms = j->finished,
                         .cpu_s = -1, /* the cluster's feed does not carry it */
                         .procs = j->parallel ? j->procs : j->ntasks,
                         .cores = j->parallel ? j->procs : 1};
    sum_elems(L, j, &r, buf, hosts);
    if (j->parallel) {
        r.state =
            j->cancelled && e0->state < EL_DONE ? "cancelled" : live_elem_state_name(e0->state);
        r.exit = e0->exit;
        r.signal = e0->signal;
        r.reason = e0->reason;
        /* elapsed of a parallel job: its wall time (core-seconds are elapsed x procs) */
        r.run_s = e0->start && e0->end > e0->start ? (double)(e0->end - e0->start) / 1000.0 : 0;
    } else {
        r.state = j->cancelled ? "cancelled" : j->nfailed ? "failed" : "done";
        if (!j->nfailed)
            r.exit = 0, r.signal = 0, r.reason = NULL;
        else if (!r.exit && !r.signal)
            r.exit = 1;
    }
    if (!r.reason && j->cancelled)
        r.reason = "cancelled";
    if (r.group && !*r.group)
        r.group = NULL;
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = acct_save(L->store, L->t_acct, &r, &wb);
    wire_buf_free(&wb);
    return rc;
}

int live_acct_save_dirty(struct live *L)
{
    uint32_t n;
    struct ljob **d = live_dirty_jobs(L, &n); /* the jobs changed this turn */
    for (uint32_t i = 0; i < n && L->t_acct >= 0; i++) {
        const struct ljob *j = d[i];
        if (j->finished && (j->dirty || j->edirty) && save_one(L, j) < 0)
            return -1;
    }
    return 0;
}

void live_acct_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    acct_reply(L->store, L->t_acct, m, reply);
}

void live_acct_tick(struct live *L)
{
    if (acct_sweep(L->store, L->t_acct, &L->cfg.live.acct, wall_now_ms(), &L->acct_sw) < 0)
        L->turn_failed = true; /* the turn is undone: the state is reloaded */
}

int live_acct_purging(struct live *L, const struct ljob *j)
{
    uint8_t key[8];
    void *v;
    size_t vl;
    store_key_u64(key, j->id);
    int rc = L->t_acct < 0 ? 0 : store_get(L->store, L->t_acct, key, 8, &v, &vl);
    if (rc <= 0) { /* it has its record (or the store failed: rc -1) */
        if (rc == 0)
            free(v);
        return rc;
    }
    return save_one(L, j);
}

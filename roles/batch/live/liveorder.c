/*
 * liveorder.c - cancels the batch role owes its clusters, kept until a cluster took them
 * (docs/batch.md "Orders to clusters").
 *
 * A CANCEL of a cluster job (a user's cancel or requeue of a running element, the old
 * job of a task that moved to another host or cluster) is an order: stored in table
 * "orders" in the turn that decides it, sent after the commit, and sent again each time
 * its cluster is resynchronised (after the cluster, the link or this role restarted)
 * until the cluster answers it: OK, or NOT_FOUND / STATE (the job is gone or already
 * ended: nothing left to stop). Before, a CANCEL sent while the cluster was down was
 * lost with the socket, and the old job of a moved task could run again at its old
 * cluster when its host came back: the task twice. Orders name their cluster by name,
 * so a changed `batch.clusters` order does not misdirect them; an order for a cluster
 * no longer configured waits (logged at start) until it is configured again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/record.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"

/* One order in memory (its record: key its id, value {cl, job}). */
struct lorder {
    uint64_t id;
    char cl[BATCH_NAME_MAX];
    uint64_t cjob;
};

static int cl_by_name(const struct live *L, const char *name)
{
    for (int i = 0; i < L->ncl; i++)
        if (!strcmp(L->cl[i].name, name))
            return i;
    return -1;
}

static void send_order(struct live *L, int cl, const struct lorder *o)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, &L->cl[cl], RK_ORDER, o->id, WT_CANCEL, 1, 0, &wb);
    wire_put_u64(&wb, "job", o->cjob);
    live_queue_out(L, cl, &wb);
    wire_buf_free(&wb);
}

static int save_order(struct live *L, const struct lorder *o)
{
    struct wire_buf wb;
    uint8_t key[8];
    wire_buf_init(&wb);
    wire_pack_map(&wb, 2);
    wire_put_str(&wb, "cl", o->cl);
    wire_put_u64(&wb, "job", o->cjob);
    store_key_u64(key, o->id);
    int rc = store_put(L->store, L->t_orders, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

void live_order_cancel(struct live *L, int cl, uint64_t cjob)
{
    if (cl < 0 || cl >= L->ncl || !cjob)
        return;
    struct lorder *o = NULL;
    for (uint32_t i = 0; i < L->norders; i++)
        if (L->orders[i].cjob == cjob && !strcmp(L->orders[i].cl, L->cl[cl].name))
            o = &L->orders[i];
    if (!o) {
        if (L->norders == L->caporders) {
            uint32_t nc = L->caporders ? 2 * L->caporders : 16;
            void *p = realloc(L->orders, nc * sizeof *L->orders);
            if (!p) { /* not kept: sent once, as before orders were kept */
                struct lorder once = {0, "", cjob};
                send_order(L, cl, &once);
                return;
            }
            L->orders = p;
            L->caporders = nc;
        }
        o = &L->orders[L->norders++];
        o->id = ++L->order_seq;
        snprintf(o->cl, sizeof o->cl, "%s", L->cl[cl].name);
        o->cjob = cjob;
        if (save_order(L, o) < 0)
            L->turn_failed = true;
    }
    send_order(L, cl, o);
}

void live_order_resend(struct live *L, int cl)
{
    for (uint32_t i = 0; i < L->norders; i++)
        if (!strcmp(L->orders[i].cl, L->cl[cl].name))
            send_order(L, cl, &L->orders[i]);
}

void live_order_reply(struct live *L, struct lclu *c, uint64_t id, const struct wire_msg *m)
{
    uint32_t i = 0;
    while (i < L->norders && L->orders[i].id != id)
        i++;
    if (!id || i == L->norders)
        return; /* an order sent once (out of memory), or answered already */
    uint64_t code = m->type == WT_ERROR ? wire_get_u64(m->root, "code", 0) : 0;
    if (code == WE_STORAGE)
        return; /* the cluster could not take it now: again at its next resync */
    if (code && code != WE_NOT_FOUND && code != WE_STATE) {
        char msg[300] = "";
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        log_warnx("cluster %s refused the cancel of its job %llu: %s (not sent again)", c->name,
                  (unsigned long long)L->orders[i].cjob, msg);
    }
    uint8_t key[8];
    store_key_u64(key, id);
    if (store_del(L->store, L->t_orders, key, sizeof key) < 0)
        L->turn_failed = true;
    L->orders[i] = L->orders[--L->norders];
}

static int load_one(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
    struct live *L = arg;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, val, vlen, NULL) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return RECORD_UNREADABLE;
    }
    struct lorder o = {store_key_get_u64(key), "", wire_get_u64(&up.data, "job", 0)};
    wire_get_strbuf(&up.data, "cl", o.cl, sizeof o.cl);
    msgpack_unpacked_destroy(&up);
    (void)klen;
    if (!o.cjob || !o.cl[0])
        return RECORD_UNREADABLE;
    if (L->norders == L->caporders) {
        uint32_t nc = L->caporders ? 2 * L->caporders : 16;
        void *p = realloc(L->orders, nc * sizeof *L->orders);
        if (!p)
            return -1;
        L->orders = p;
        L->caporders = nc;
    }
    L->orders[L->norders++] = o;
    if (o.id > L->order_seq)
        L->order_seq = o.id;
    if (cl_by_name(L, o.cl) < 0)
        log_warnx("a cancel of job %llu at cluster %s waits: no cluster of that name in "
                  "batch.clusters",
                  (unsigned long long)o.cjob, o.cl);
    return RECORD_TAKEN;
}

int live_order_load(struct live *L)
{
    L->norders = 0;
    return record_load(L->store, L->t_orders, load_one, L) < 0 ? -1 : 0;
}

void live_order_free(struct live *L)
{
    free(L->orders);
    L->orders = NULL;
    L->norders = L->caporders = 0;
}

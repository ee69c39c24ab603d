/*
 * liveout.c - requests from the batch role to its cluster managers (live_int.h): each is
 * recorded with its deadline (a cluster silent past it is down, liveclu.c), and its
 * message is queued to be sent after the turn's commit, so a cluster never hears of a
 * start or a transfer the role could still undo.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "roles/batch/live/live_int.h"

/* Room for one more queued message: 0, or -1 (out of memory). */
static int out_room(struct live *L)
{
    if (L->nout < L->capout)
        return 0;
    uint32_t nc = L->capout ? L->capout * 2 : 64;
    void *p = realloc(L->out, nc * sizeof *L->out);
    if (!p)
        return -1;
    L->out = p;
    L->capout = nc;
    return 0;
}

void live_queue_out(struct live *L, int cl, const struct wire_buf *wb)
{
    if (out_room(L) < 0)
        return; /* the request's deadline will resynchronise */
    void *d = malloc(wb->sb.size);
    if (!d)
        return;
    memcpy(d, wb->sb.data, wb->sb.size);
    L->out[L->nout++] = (struct lout){cl, d, wb->sb.size, 0};
}

void live_queue_start_later(struct live *L, int cl, uint64_t eid)
{
    if (out_room(L) < 0)
        return; /* the element stays "starting": the next resync sends it */
    L->out[L->nout++] = (struct lout){cl, NULL, 0, eid};
}

uint64_t live_req_begin(struct live *L, struct lclu *c, int kind, uint64_t arg, uint32_t type,
                        uint32_t nfields, int64_t wait_ms, struct wire_buf *wb)
{
    uint64_t rid = ++L->req_seq;
    if (c->nreq == c->capreq) {
        uint32_t nc = c->capreq ? c->capreq * 2 : 16;
        void *p = realloc(c->req, nc * sizeof *c->req);
        if (p) {
            c->req = p;
            c->capreq = nc;
        }
    }
    if (c->nreq < c->capreq)
        c->req[c->nreq++] =
            (struct lreq){rid, kind, arg, loop_now_ms() + wait_ms + LIVE_REQ_TIMEOUT_MS};
    wire_buf_reset(wb);
    wire_begin(wb, type, rid, nfields);
    return rid;
}

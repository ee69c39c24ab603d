/*
 * workwait.c - idle nodes told of new work at once (workwait.h, docs/wire.md 5.7). Without
 * it an idle node learns of a job at its next poll, up to tasks.idle_wait_s later: a
 * staged input's whole trip waited for it (docs/data.md "Speed"). The held requests are
 * the daemon's (daemon_hold); this file keeps their handles and request ids.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/workwait.h"

struct held {
    uint64_t handle, req_id;
};

static struct held *held;
static uint32_t nheld, capheld;
static uint64_t seen_job; /* c->next_job when the waiters were last answered */

static void pack_wake(struct wire_buf *wb, uint64_t req_id, bool work)
{
    wire_begin(wb, WT_WORK_WAKE, req_id, 1);
    wire_put_bool(wb, "work", work);
}

void workwait_h_wait(struct cluster *c, struct request *r)
{
    uint64_t wait = wire_get_u64(r->msg->root, "wait_ms", WIRE_WORK_WAIT_MS);
    if (!seen_job)
        seen_job = c->next_job;
    if (nheld == capheld && capheld < DAEMON_HELD_MAX) { /* the daemon's bound is ours */
        uint32_t nc = capheld ? capheld * 2 : 64;
        struct held *v = realloc(held, nc * sizeof *v);
        if (v)
            held = v, capheld = nc;
    }
    uint64_t h = nheld < capheld ? daemon_hold(c->daemon, WT_WORK_WAIT, (int64_t)wait) : 0;
    if (!h) { /* not held: the node waits out its poll as before */
        pack_wake(r->reply, r->msg->id, false);
        return;
    }
    for (uint32_t i = 0; i < nheld; i++)
        if (held[i].handle == h) { /* cannot happen (handles are new), but never twice */
            held[i].req_id = r->msg->id;
            return;
        }
    held[nheld++] = (struct held){h, r->msg->id};
}

void workwait_after_commit(struct cluster *c)
{
    if (c->next_job == seen_job)
        return;
    seen_job = c->next_job;
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (uint32_t i = 0; i < nheld; i++) {
        wire_buf_reset(&wb);
        pack_wake(&wb, held[i].req_id, true);
        daemon_reply_held(c->daemon, held[i].handle, &wb); /* -1: expired meanwhile */
    }
    nheld = 0;
    wire_buf_free(&wb);
}

void workwait_expire(struct cluster *c, uint64_t handle, uint64_t req_id, struct wire_buf *reply)
{
    (void)c;
    for (uint32_t i = 0; i < nheld; i++)
        if (held[i].handle == handle) {
            held[i] = held[--nheld];
            break;
        }
    pack_wake(reply, req_id, false);
}

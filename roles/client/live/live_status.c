/*
 * live_status.c - the multi-project client's heartbeats (live.h): STATUS naming the
 * unfinished tasks of each project, sent on its session socket, and the answer to it
 * (STATUS_ACK and the TASKS reply of live_rpc.c may carry a "cancel" list: those tasks
 * are stopped and forgotten without a result).
 */
#include "roles/client/live/live.h"

#include <zmq.h>

#include "daemon/loop.h"
#include "lib/log.h"

/* The server's "cancel" list: stop those tasks and forget them without a result. */
void vcl_apply_cancel(struct live *l, int p, const msgpack_object *cancel)
{
    if (!cancel || cancel->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t k = 0; k < cancel->via.array.size; k++) {
        const msgpack_object *c = &cancel->via.array.ptr[k];
        uint64_t job = wire_get_u64(c, "job", 0), idx = wire_get_u64(c, "idx", UINT64_MAX);
        for (size_t i = 0; i < l->ntasks; i++) {
            struct ltask *t = l->tasks[i];
            if (t->project != p || t->job != job || t->idx != idx || t->abandon)
                continue;
            log_info("task %llu.%u of %s abandoned at the server's request",
                     (unsigned long long)job, t->idx, l->e->projects[p].name);
            vcl_task_cancel(l, t);
            break;
        }
    }
}

/* The answer to project p's STATUS (live_rpc.c matched its id). */
void vcl_status_reply(struct live *l, int p, const struct wire_msg *msg)
{
    struct lproj *lp = &l->proj[p];
    lp->status_id = 0;
    lp->status_sock = NULL;
    if (msg->type == WT_ERROR) {
        if (wire_get_u64(msg->root, "code", 0) == WE_SESSION)
            lp->welcomed = false; /* the next RPC says HELLO first */
        return;
    }
    if (msg->type == WT_STATUS_ACK) {
        vcl_apply_cancel(l, p, wire_get(msg->root, "cancel"));
        vcl_commit(l);
    }
}

/*
 * Heartbeats: a project's cluster re-issues a task it hears nothing about (X4), so
 * every poll_s (at most hb_s) each project with unfinished tasks gets STATUS naming
 * them, queued and suspended ones included; its answer may cancel some.
 */
void vcl_heartbeats(struct live *l)
{
    int64_t now = loop_now_ms();
    for (int p = 0; p < l->e->nprojects; p++) {
        struct lproj *lp = &l->proj[p];
        if (!lp->welcomed)
            continue;
        if (lp->status_id && now - lp->status_sent_ms > vcl_rpc_timeout(l, lp->status_sock)) {
            lp->status_id = 0; /* unanswered: the next one goes */
            lp->status_sock = NULL;
        }
        uint32_t every = lp->poll_s && lp->poll_s < lp->hb_s ? lp->poll_s : lp->hb_s;
        if (lp->status_id || now - lp->last_status_ms < (int64_t)every * 1000)
            continue;
        uint32_t n = 0;
        for (size_t i = 0; i < l->ntasks; i++)
            n += l->tasks[i]->project == p && l->tasks[i]->state != LT_DONE;
        if (n == 0)
            continue;
        struct lsock *s = vcl_project_sock(l, p, lp->session_url);
        if (!s)
            continue;
        wire_buf_reset(&l->wb);
        wire_begin(&l->wb, WT_STATUS, lp->status_id = ++l->next_req, 2);
        wire_put_str(&l->wb, "sid", lp->sid);
        wire_put_key(&l->wb, "running");
        wire_pack_array(&l->wb, n);
        for (size_t i = 0; i < l->ntasks; i++) {
            const struct ltask *t = l->tasks[i];
            if (t->project != p || t->state == LT_DONE)
                continue;
            wire_pack_map(&l->wb, 3);
            wire_put_u64(&l->wb, "job", t->job);
            wire_put_u64(&l->wb, "idx", t->idx);
            wire_put_u64(&l->wb, "issue", t->issue);
        }
        lp->last_status_ms = lp->status_sent_ms = now;
        WIRE_CHECK_OUT(l->wb.sb.data, l->wb.sb.size, "a status");
        if (zmq_send(s->sock, l->wb.sb.data, l->wb.sb.size, ZMQ_DONTWAIT) < 0) {
            lp->status_id = 0;
            continue;
        }
        lp->status_sock = s;
    }
}

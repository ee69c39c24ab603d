/*
 * livemigrate.c - a checkpointing task moves to another host (issue 26, docs/data.md
 * "Checkpoints", docs/wire.md 6.19 "Moving a pinned task").
 *
 * A task with files runs at its cluster as a one-task job pinned to the host the batch
 * scheduler chose. When that host leaves the cluster and the job was submitted with
 * --checkpoint-s, the cluster holds the task's latest checkpoint; a new run would lose
 * it. So the element goes back to pending keeping its cluster job (mig_cjob, mig_cl,
 * stored with it), the scheduler places it again, and when it chooses a host of the
 * same cluster the batch role sends TASK_PIN (job, host) instead of a new SUBMIT: the
 * cluster keeps the job, its inputs and its checkpoint, and issues the task to the new
 * host, which starts it from the checkpoint. When the job ended there meanwhile (its
 * host came back: TASK_PIN refused STATE, or NOT_FOUND purged), JOB_GET says how: a run
 * that reached its end is the element's end (never a second run), a cancelled or lost
 * one starts a new run (live_mig_ended). Where the cluster cannot otherwise (an older
 * cluster without TASK_PIN), the old job is cancelled and the element starts as a new
 * run, as the lost-host requeue does.
 * When the scheduler chose another cluster, the checkpoint is carried there
 * (livecarry.c: copied from the old cluster, offered to the new one, named in the
 * SUBMIT), under a new cluster key (run + 1; mig_run keeps the old job's, so a later
 * TASK_PIN to the old cluster goes back to it), and the old job is cancelled once the
 * new cluster took the SUBMIT. Each move counts as a lost run (batch.lost_requeues
 * bounds them).
 */
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "roles/batch/live/live_int.h"

bool live_mig_begin(struct live *L, struct ljob *j, uint32_t e, const struct lclu *c,
                    const char *host, char *why, size_t wl)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || !el->cjob || live_files_ckpt_s(j) == 0 || j->cancelled)
        return false; /* no checkpoint at the cluster: a new run loses nothing */
    el->lost++;
    el->mig_cjob = el->cjob;
    el->mig_cl = el->cl;
    el->mig_run = el->run;
    live_elem_mark(L, j, e);
    snprintf(why, wl,
             "moving: its host %s left cluster %s; it restarts from its checkpoint on the host "
             "the scheduler chooses (%u of %lld)",
             host, c->name, el->lost, (long long)L->cfg.live.lost_requeues);
    log_info("job %llu element %u: %s", (unsigned long long)j->id, e, why);
    return true;
}

/* Cancels the element's old cluster job and forgets it; the element's next start is a
 * new run (a new cluster key: the old job's late events are not taken as its own). */
static void drop_old(struct live *L, struct ljob *j, uint32_t e, struct lelem *el)
{
    /* an order, kept until the old cluster took it: a CANCEL lost while it was down
       would let the old job run again there when its host came back (liveorder.c) */
    live_order_cancel(L, el->mig_cl, el->mig_cjob);
    el->mig_cjob = 0;
    el->mig_cl = -1;
    if (el->run == el->mig_run) /* not moved on already for a carry */
        el->run++;
    live_carry_forget(L, live_eid(j->id, e));
    live_elem_mark(L, j, e);
}

bool live_mig_start(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || !el->mig_cjob)
        return false;
    if (!el->hosts || strchr(el->hosts, ',')) {
        drop_old(L, j, e, el);
        return false;
    }
    if (el->mig_cl != el->cl) {       /* another cluster: its checkpoint is carried there */
        if (el->run == el->mig_run) { /* a new key there, stored before the SUBMIT */
            el->run++;
            live_elem_mark(L, j, e);
        }
        return live_carry_step(L, j, e) > 0; /* copied, or none: the SUBMIT goes now */
    }
    struct wire_buf wb;
    wire_buf_init(&wb);
    live_req_begin(L, &L->cl[el->cl], RK_PIN, live_eid(j->id, e), WT_TASK_PIN, 2, 0, &wb);
    wire_put_u64(&wb, "job", el->mig_cjob);
    wire_put_str(&wb, "host", el->hosts);
    live_queue_out(L, el->cl, &wb);
    wire_buf_free(&wb);
    return true;
}

/* The kept cluster job is the element's again (moved, or ended there). */
static void adopt(struct live *L, struct ljob *j, uint32_t e, struct lelem *el)
{
    el->cjob = el->mig_cjob;
    el->mig_cjob = 0;
    el->mig_cl = -1;
    el->run = el->mig_run; /* its events carry the kept job's key */
    live_carry_forget(L, live_eid(j->id, e));
    live_elem_reason(L, j, e, NULL);
    live_elem_set(L, j, e, EL_RUNNING);
}

int live_mig_reply(struct live *L, struct lclu *c, struct ljob *j, uint32_t e,
                   const struct wire_msg *m)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || !el->mig_cjob || el->state != EL_STARTING || el->cl != c->idx)
        return -1; /* a late answer */
    if (m->type == WT_OK) {
        log_info("job %llu element %u: moved to host %s at cluster %s (its job %llu)",
                 (unsigned long long)j->id, e, el->hosts, c->name,
                 (unsigned long long)el->mig_cjob);
        adopt(L, j, e, el);
        return 1;
    }
    char msg[400];
    wire_get_strbuf(m->root, "msg", msg, sizeof msg);
    uint64_t code = wire_get_u64(m->root, "code", 0);
    if (code == WE_STATE || (code == WE_NOT_FOUND && wire_get_bool(m->root, "purged", false))) {
        /* it ended there (its host came back and ran it, or it was cancelled): a run
           that reached its end is not run again, so how it ended is asked first */
        struct wire_buf wb;
        wire_buf_init(&wb);
        live_req_begin(L, c, RK_PINEND, live_eid(j->id, e), WT_JOB_GET, 1, 0, &wb);
        wire_put_u64(&wb, "job", el->mig_cjob);
        live_queue_out(L, c->idx, &wb);
        wire_buf_free(&wb);
        return -1;
    }
    log_info("job %llu element %u: cluster %s cannot move its job %llu (%s): it runs again "
             "from the start",
             (unsigned long long)j->id, e, c->name, (unsigned long long)el->mig_cjob, msg);
    drop_old(L, j, e, el);
    return 0;
}

int live_mig_ended(struct live *L, struct lclu *c, struct ljob *j, uint32_t e,
                   const struct wire_msg *m)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || !el->mig_cjob || el->state != EL_STARTING || el->cl != c->idx)
        return -1; /* a late answer */
    char st[16] = "", msg[300] = "";
    bool lost = false;
    if (m->type == WT_ERROR) {
        if (wire_get_u64(m->root, "code", 0) == WE_NOT_FOUND &&
            wire_get_bool(m->root, "purged", false))
            return 2;
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
    } else {
        const msgpack_object *cj = wire_get(m->root, "job");
        wire_get_strbuf(cj, "state", st, sizeof st);
        lost = wire_get_bool(cj, "lost", false);
    }
    bool ran = !strcmp(st, "done") || ((!strcmp(st, "failed") || !strcmp(st, "killed")) && !lost);
    if (ran) {
        log_info("job %llu element %u: its kept job %llu at cluster %s had ended (%s): that is "
                 "its end, it does not run again",
                 (unsigned long long)j->id, e, (unsigned long long)el->mig_cjob, c->name, st);
        adopt(L, j, e, el);
        return 1;
    }
    log_info("job %llu element %u: cluster %s cannot move its job %llu (%s): it runs again "
             "from the start",
             (unsigned long long)j->id, e, c->name, (unsigned long long)el->mig_cjob,
             msg[0]  ? msg
             : st[0] ? st
                     : "no state");
    drop_old(L, j, e, el);
    return 0;
}

void live_mig_drop(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    if (el && el->mig_cjob)
        drop_old(L, j, e, el);
}

void live_mig_submitted(struct live *L, struct ljob *j, uint32_t e)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el || !el->mig_cjob || el->mig_cl == el->cl)
        return;
    uint64_t old = el->mig_cjob;
    int from = el->mig_cl;
    bool carried = live_carry_forget(L, live_eid(j->id, e));
    log_info("job %llu element %u: moved to host %s at cluster %s (its job %llu) %s; its job %llu "
             "at cluster %s is cancelled",
             (unsigned long long)j->id, e, el->hosts ? el->hosts : "", L->cl[el->cl].name,
             (unsigned long long)el->cjob,
             carried ? "with its checkpoint" : "without a checkpoint (it starts from the start)",
             (unsigned long long)old, from >= 0 && from < L->ncl ? L->cl[from].name : "?");
    if (carried)
        live_elem_reason(L, j, e, NULL);
    drop_old(L, j, e, el);
}

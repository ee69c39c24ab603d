/*
 * metaacct.c - the grid spool's accounting records (daemon/acct.h, docs/accounting.md):
 * one per job that ended at the spool, written in the turn that stores its end (before
 * meta_jobs_save writes the job, in the same commit); the ACCT request; the retention
 * sweep. Calls only metajob.c.
 */
#include <string.h>

#include "daemon/acct.h"
#include "daemon/loop.h"
#include "roles/meta/live/meta_int.h"
#include "store/store.h"

/* The account the user's request named (`account`, else `group`) into buf; "" none. */
static void req_account(const struct mjob *j, char *buf, size_t n)
{
    msgpack_unpacked up;
    size_t off = 0;
    *buf = '\0';
    if (!j->req || wire_precheck(j->req, j->reqlen) < 0)
        return;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)j->req, j->reqlen, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        wire_get_strbuf(&up.data, "account", buf, n);
        if (!*buf)
            wire_get_strbuf(&up.data, "group", buf, n);
    }
    msgpack_unpacked_destroy(&up);
}

/* The record of ended job j into the turn: 0, or -1 (store). */
static int save_one(struct meta *M, const struct mjob *j)
{
    char account[META_NAME_MAX];
    req_account(j, account, sizeof account);
    struct acct_rec r = {
        .job = j->id,
        .user = j->user[0] ? j->user : NULL,
        .group = account[0] ? account : NULL,
        .name = j->name[0] ? j->name : NULL,
        .kind = j->parallel     ? "parallel"
                : j->ntasks > 1 ? "array"
                                : "bag",
        .state = meta_state_name(j->state),
        .reason = j->reason, /* NULL or not empty */
        .site = j->site >= 0 && j->site < M->nsites ? M->site[j->site].name : NULL,
        .exit = j->exit,
        .submitted_ms = j->submitted,
        .started_ms = j->started,
        .finished_ms = j->finished,
        /* the spool sees a job's span at its site, not its elements': the site's own
         * record has their sum and the hosts */
        .run_s = j->started && j->finished > j->started
                     ? (double)(j->finished - j->started) / 1000.0
                     : 0,
        .cpu_s = -1,
        .procs = j->parallel ? (uint32_t)j->rq.procs : j->ntasks,
        .cores = j->parallel ? (uint64_t)j->rq.procs : 1,
    };
    if (j->state == MJ_DONE)
        r.exit = 0;
    else if (j->state != MJ_CANCELLED && !r.exit)
        r.exit = -1;
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = acct_save(M->store, M->t_acct, &r, &wb);
    wire_buf_free(&wb);
    return rc;
}

int meta_acct_save_dirty(struct meta *M)
{
    uint32_t n = M->dirty_all ? M->njobs : M->ndirty; /* the jobs this turn changed */
    for (uint32_t i = 0; i < n && M->t_acct >= 0; i++) {
        const struct mjob *j = M->dirty_all ? M->jobs[i] : M->dirty[i];
        if (j->dirty && MJ_ENDED(j->state) && save_one(M, j) < 0)
            return -1;
    }
    return 0;
}

void meta_acct_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    acct_reply(M->store, M->t_acct, m, reply);
}

void meta_acct_tick(struct meta *M)
{
    if (acct_sweep(M->store, M->t_acct, &M->cfg.acct, wall_now_ms(), &M->acct_sw) < 0)
        M->turn_failed = true; /* the turn is undone: the state is reloaded */
}

/*
 * metaout.c - `gridnode job -e SPOOL ID --output` in one hop (issue 27): the spool keeps
 * no task output, its sites do (a batch role names the cluster job holding it, a Slurm
 * site reads its job's slurm-ID.out/.err), so a user's JOB_GET with `output` for a
 * placed job is held (daemon_hold), relayed to the job's site as JOB_GET of the site's
 * job with `output`, and answered when the site's reply comes: the spool's JOB with the
 * site's reply under `at_site` (its `job`, `tasks`, `output_at`, `next`), or
 * `site_error` when the site refused, went down or stayed silent (docs/wire.md 6.13).
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"

static struct mrelay *find(struct meta *M, uint64_t handle, uint32_t *at)
{
    for (uint32_t i = 0; i < M->nrelay; i++)
        if (M->relay[i].handle == handle) {
            *at = i;
            return &M->relay[i];
        }
    return NULL;
}

static void drop(struct meta *M, uint32_t i)
{
    free(M->relay[i].row);
    M->relay[i] = M->relay[--M->nrelay];
}

bool meta_out_ask(struct meta *M, const struct mjob *j, const struct wire_msg *m, uint64_t handle,
                  const void *row, size_t rowlen)
{
    if (M->nrelay == M->caprelay) {
        uint32_t nc = M->caprelay ? M->caprelay * 2 : 8;
        struct mrelay *p = realloc(M->relay, nc * sizeof *p);
        if (!p)
            return false;
        M->relay = p;
        M->caprelay = nc;
    }
    void *copy = malloc(rowlen ? rowlen : 1);
    if (!copy)
        return false;
    memcpy(copy, row, rowlen);
    M->relay[M->nrelay++] = (struct mrelay){handle, m->id, j->id, copy, rowlen};
    struct msite *s = &M->site[j->site];
    const msgpack_object *o = m->root;
    struct wire_buf wb;
    wire_buf_init(&wb);
    meta_req_begin(M, s, RK_OUTPUT, handle, WT_JOB_GET, 5, M->cfg.request_timeout_ms, &wb);
    wire_put_u64(&wb, "job", j->sjob);
    wire_put_bool(&wb, "tasks", true);
    wire_put_bool(&wb, "output", true);
    wire_put_u64(&wb, "from", wire_get_u64(o, "from", 0));
    wire_put_u64(&wb, "count", wire_get_u64(o, "count", 1000));
    meta_queue_out(M, j->site, &wb);
    wire_buf_free(&wb);
    return true;
}

/* The user's JOB for relay r: the spool's row and tasks, then at_site (the site's
 * reply root) or site_error. */
static void compose(const struct mrelay *r, const msgpack_object *site, const char *why,
                    struct wire_buf *wb)
{
    static const char *const keys[] = {"job", "tasks", "output_at", "next"};
    /* row: the `job` map, then the `tasks` array (one value each: the split is found) */
    size_t off = 0;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)r->row, r->rowlen, &off) != MSGPACK_UNPACK_SUCCESS)
        off = r->rowlen;
    msgpack_unpacked_destroy(&up);
    wire_begin(wb, WT_JOB, r->req_id, 3);
    wire_put_key(wb, "job");
    msgpack_sbuffer_write(&wb->sb, (const char *)r->row, off);
    wire_put_key(wb, "tasks");
    if (off < r->rowlen)
        msgpack_sbuffer_write(&wb->sb, (const char *)r->row + off, r->rowlen - off);
    else
        wire_pack_array(wb, 0);
    if (!site) {
        wire_put_str(wb, "site_error", why);
        return;
    }
    uint32_t n = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        n += wire_get(site, keys[k]) != NULL;
    wire_put_key(wb, "at_site");
    wire_pack_map(wb, n);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const msgpack_object *v = wire_get(site, keys[k]);
        if (!v)
            continue;
        wire_put_key(wb, keys[k]);
        wire_pack_object(wb, v);
    }
}

void meta_out_answer(struct meta *M, uint64_t handle, const struct wire_msg *m)
{
    uint32_t i;
    struct mrelay *r = find(M, handle, &i);
    if (!r)
        return; /* the user's request expired meanwhile */
    struct wire_buf wb;
    wire_buf_init(&wb);
    if (m->type == WT_JOB && wire_get(m->root, "job")) {
        compose(r, m->root, NULL, &wb);
    } else {
        char msg[300] = "", why[400];
        wire_get_strbuf(m->root, "msg", msg, sizeof msg);
        snprintf(why, sizeof why, "the site answered: %s", msg[0] ? msg : "no job");
        compose(r, NULL, why, &wb);
    }
    if (daemon_reply_held(M->daemon, handle, &wb) < 0)
        log_debug("job %llu: the --output request was answered already",
                  (unsigned long long)r->job);
    wire_buf_free(&wb);
    drop(M, i);
}

bool meta_out_fail(struct meta *M, uint64_t handle, const char *why, struct wire_buf *reply)
{
    uint32_t i;
    struct mrelay *r = find(M, handle, &i);
    if (!r)
        return false;
    if (reply) {
        compose(r, NULL, why, reply);
    } else {
        struct wire_buf wb;
        wire_buf_init(&wb);
        compose(r, NULL, why, &wb);
        (void)daemon_reply_held(M->daemon, handle, &wb);
        wire_buf_free(&wb);
    }
    drop(M, i);
    return true;
}

void meta_out_free(struct meta *M)
{
    while (M->nrelay)
        drop(M, M->nrelay - 1);
    free(M->relay);
    M->relay = NULL;
    M->caprelay = 0;
}

/*
 * livefiles.c - the batch role's files (issue 26, docs/data.md "Through the batch role"):
 * its content-addressed store (daemon/filestore.h, the cluster's code: STATE_DIR/files,
 * table "files"), FILE_HAVE and FILE_PUT from the user's tool exactly as at a cluster,
 * FILE_GET of a job's inputs and of its tasks' outputs once copied back here, a job's
 * "inputs"/"outputs"/"checkpoint_s" checked and kept at SUBMIT (table "jobdata", the
 * cluster's record shape), and each task's copied outputs (table "elemfiles", key job
 * and task: the cluster's "files" list and "files_note").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fileoffer.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/batch/live/live_int.h"
#include "store/store.h"

static struct filestore_limits limits(const struct live *L)
{
    return (struct filestore_limits){(uint64_t)L->cfg.live.files_job_mb << 20,
                                     (uint64_t)L->cfg.live.files_user_mb << 20};
}

int live_files_open(struct live *L)
{
    char dir[CONFIG_STR_MAX + 16];
    snprintf(dir, sizeof dir, "%s/files", L->cfg.live.state_dir);
    struct filestore_cfg fc = {L->store, L->t_files, dir, "the batch role", &L->turn_failed, NULL};
    filestore_destroy(&L->files);
    return (L->files = filestore_open(&fc)) ? 0 : -1;
}

void live_files_close(struct live *L)
{
    filestore_destroy(&L->files);
}

/* ---- a job's files ---- */

const char *live_files_check(struct live *L, const msgpack_object *m, bool parallel,
                             uint32_t ntasks, char *why, size_t wl)
{
    if (wire_get(m, "ckpt")) { /* issue 26: a cluster's, from a batch role moving a task */
        snprintf(why, wl,
                 "ckpt (a task's checkpoint carried between clusters) is taken by a "
                 "cluster manager only");
        return why;
    }
    if (!wire_get(m, "inputs") && !wire_get(m, "outputs") && !wire_get(m, "checkpoint_s"))
        return NULL;
    struct filestore_limits lim = limits(L);
    if (parallel) /* "task" names a rank (docs/data.md "Parallel jobs") */
        ntasks = (uint32_t)wire_get_u64(m, "procs", 1);
    return filestore_submit_check(L->files, &lim, m, ntasks, why, wl);
}

int live_files_attach(struct live *L, struct ljob *j, const msgpack_object *m)
{
    struct wire_buf wb;
    uint8_t key[8];
    wire_buf_init(&wb);
    if (!filestore_jobdata_pack(m, &wb)) {
        wire_buf_free(&wb);
        return 0;
    }
    store_key_u64(key, j->id);
    int rc = -1;
    if ((j->data = malloc(wb.sb.size))) {
        memcpy(j->data, wb.sb.data, wb.sb.size);
        j->data_len = wb.sb.size;
        rc = store_put(L->store, L->t_jobdata, key, sizeof key, wb.sb.data, wb.sb.size);
    }
    wire_buf_free(&wb);
    return rc;
}

/* One stored "jobdata" record onto its job (a record of no job is dropped). */
static int load_jobdata(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct live *L = arg;
    if (klen != 8)
        return 0;
    struct ljob *j = live_job_find(L, store_key_get_u64(key));
    if (!j)
        return store_del(L->store, L->t_jobdata, key, klen) < 0 ? -1 : 0;
    free(j->data);
    if (!(j->data = malloc(vlen ? vlen : 1)))
        return -1;
    memcpy(j->data, val, vlen);
    j->data_len = vlen;
    return 0;
}

int live_files_load(struct live *L)
{
    if (live_files_open(L) < 0)
        return -1;
    return store_iter(L->store, L->t_jobdata, NULL, 0, load_jobdata, L);
}

int live_files_each_input(const struct ljob *j, uint32_t e,
                          int (*fn)(void *arg, const msgpack_object *in), void *arg)
{
    return filestore_each_input(j->data, j->data_len, e, fn, arg);
}

/* The kept map's field k (an object of up, which the caller destroys), or NULL. */
static const msgpack_object *data_field(const struct ljob *j, msgpack_unpacked *up, const char *k)
{
    msgpack_unpacked_init(up);
    if (!j->data || msgpack_unpack_next(up, j->data, j->data_len, NULL) != MSGPACK_UNPACK_SUCCESS)
        return NULL;
    return wire_get(&up->data, k);
}

bool live_files_has_outputs(const struct ljob *j)
{
    msgpack_unpacked up;
    const msgpack_object *o = data_field(j, &up, "outputs");
    bool has = o && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0;
    msgpack_unpacked_destroy(&up);
    return has;
}

uint32_t live_files_ckpt_s(const struct ljob *j)
{
    msgpack_unpacked up;
    const msgpack_object *o = data_field(j, &up, "checkpoint_s");
    uint64_t s = o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
    msgpack_unpacked_destroy(&up);
    return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

uint32_t live_files_submit_nfields(const struct ljob *j)
{
    return 1 + live_files_has_outputs(j) + (live_files_ckpt_s(j) > 0);
}

void live_files_submit_put(const struct ljob *j, uint32_t e, struct wire_buf *wb)
{
    uint32_t n = 0, ck = live_files_ckpt_s(j);
    live_files_each_input(j, e, filestore_count_input, &n);
    wire_put_key(wb, "inputs");
    wire_pack_array(wb, n);
    live_files_each_input(j, e, filestore_pack_input, wb);
    if (live_files_has_outputs(j)) {
        msgpack_unpacked up;
        const msgpack_object *o = data_field(j, &up, "outputs");
        wire_put_key(wb, "outputs");
        wire_pack_object(wb, o);
        msgpack_unpacked_destroy(&up);
    }
    if (ck) /* the cluster keeps the latest checkpoint of its task (docs/data.md) */
        wire_put_u64(wb, "checkpoint_s", ck);
}

/* ---- a task's outputs, copied back ---- */

int live_files_elem_save(struct live *L, const struct ljob *j, uint32_t e, const void *list,
                         size_t len)
{
    uint8_t key[12];
    store_key_u64_u32(key, j->id, e);
    return store_put(L->store, L->t_elemfiles, key, sizeof key, list, len);
}

uint32_t live_files_row_nfields(struct live *L, const struct ljob *j, uint32_t e, void **rec,
                                size_t *len)
{
    uint8_t key[12];
    msgpack_unpacked up;
    uint32_t n = 0;
    *rec = NULL;
    if (!j->data)
        return 0;
    store_key_u64_u32(key, j->id, e);
    if (store_get(L->store, L->t_elemfiles, key, sizeof key, rec, len) != 0)
        return 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, *rec, *len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP)
        n = up.data.via.map.size;
    msgpack_unpacked_destroy(&up);
    if (!n) {
        free(*rec);
        *rec = NULL;
    }
    return n;
}

void live_files_row_put(void *rec, size_t len, struct wire_buf *wb)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (rec && msgpack_unpack_next(&up, rec, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < up.data.via.map.size; i++) {
            wire_pack_object(wb, &up.data.via.map.ptr[i].key);
            wire_pack_object(wb, &up.data.via.map.ptr[i].val);
        }
    msgpack_unpacked_destroy(&up);
    free(rec);
}

/* ---- the sweep (docs/data.md "Retention", daemon/filesweep.c) ---- */

void live_files_sweep(struct live *L)
{
    static int64_t last_ms;
    int64_t now = wall_now_ms();
    if (!L->files || !(L->files_sweep_soon || filesweep_due(&last_ms, now)))
        return;
    L->files_sweep_soon = false; /* set by a purge (livepurge.c), as the cluster's */
    filesweep_begin(L->files);
    for (uint32_t i = 0; i < L->njobs; i++)
        live_files_each_input(L->jobs[i], UINT32_MAX, filesweep_mark, L->files);
    for (uint32_t i = 0; i < L->npulls; i++) /* outputs being copied: not listed yet */
        if (L->pulls[i].list)
            filesweep_mark_record(L->files, NULL, 0, L->pulls[i].list, L->pulls[i].list_len);
    for (uint32_t i = 0; i < L->ncarries; i++) /* moving checkpoints (livecarry.c) */
        if (L->carries[i].list)
            filestore_each_input(L->carries[i].list, L->carries[i].list_len, UINT32_MAX,
                                 filesweep_mark, L->files);
    if (store_iter(L->store, L->t_elemfiles, NULL, 0, filesweep_mark_record, L->files) < 0 ||
        filesweep_end(L->files, now - L->cfg.live.files_keep_s * 1000) < 0)
        L->turn_failed = true;
}

/* ---- the requests ---- */

/* Whom a new upload is charged to: the request's "user" (set by access control to the
 * key's name under CURVE). */
static const char *uploader(const struct wire_msg *m, char *buf, size_t n)
{
    wire_get_strbuf(m->root, "user", buf, n);
    return *buf ? buf : NULL;
}

/* For fileget_answer: the job's owner. */
/* For fileget_answer: hex is an input of job id, or an output of its element idx copied
 * back here. */
static bool job_names(void *role, uint64_t id, bool out, uint64_t idx, const char *hex)
{
    struct live *L = role;
    struct ljob *j = live_job_find(L, id);
    void *rec;
    size_t len;
    if (!out)
        return live_files_each_input(j, UINT32_MAX, fileget_is_hash, (void *)hex) > 0;
    if (idx >= j->ntasks || !live_files_row_nfields(L, j, (uint32_t)idx, &rec, &len))
        return false;
    bool found = fileget_row_names(rec, len, hex);
    free(rec);
    return found;
}

void live_files_request(struct live *L, const struct wire_msg *m, struct wire_buf *reply)
{
    struct filestore_limits lim = limits(L);
    char user[FILESTORE_USER_MAX];
    if (m->type == WT_FILE_HAVE)
        filestore_h_have(L->files, &lim, m, uploader(m, user, sizeof user), reply);
    else if (m->type == WT_FILE_PUT)
        filestore_h_put(L->files, &lim, m, uploader(m, user, sizeof user), reply);
    else
        fileget_answer(&(struct fileget_level){L->files, "", live_job_owner, job_names}, L, m,
                       reply);
}

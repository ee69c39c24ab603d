/*
 * metafiles.c - the grid spool's files (issue 26, docs/data.md "Through the grid
 * spool"): its content-addressed store (daemon/filestore.h, the cluster's and the batch
 * role's code: STATE_DIR/files, table "files"), FILE_HAVE and FILE_PUT from the user's
 * tool exactly as at a cluster, FILE_GET of a job's inputs and of its tasks' outputs
 * once copied back here, a SUBMIT's "inputs"/"outputs"/"checkpoint_s" checked (they are
 * kept with the job's request, which the spool sends on to its site), each task's row as
 * its site gave it once its outputs are here (table "taskfiles", key job and task), and
 * the sweep of files no job names.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fileoffer.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/meta/live/meta_int.h"
#include "roles/meta/slurm/slurm.h"
#include "store/store.h"

static struct filestore_limits limits(const struct meta *M)
{
    return (struct filestore_limits){(uint64_t)M->cfg.files_job_mb << 20,
                                     (uint64_t)M->cfg.files_user_mb << 20};
}

int meta_files_open(struct meta *M)
{
    char dir[CONFIG_STR_MAX + 16];
    snprintf(dir, sizeof dir, "%s/files", M->cfg.state_dir);
    struct filestore_cfg fc = {M->store, M->t_files, dir, "the grid spool", &M->turn_failed, NULL};
    filestore_destroy(&M->files);
    return (M->files = filestore_open(&fc)) ? 0 : -1;
}

void meta_files_close(struct meta *M)
{
    filestore_destroy(&M->files);
}

const char *meta_files_check(struct meta *M, const msgpack_object *o, bool parallel,
                             uint64_t ntasks, char *why, size_t wl)
{
    if (wire_get(o, "ckpt")) /* issue 26: between a batch role and its clusters only */
        return "ckpt (a task's checkpoint carried between clusters) is taken by a cluster "
               "manager only";
    if (!wire_get(o, "inputs") && !wire_get(o, "outputs") && !wire_get(o, "checkpoint_s"))
        return NULL;
    struct filestore_limits lim = limits(M);
    if (parallel) /* issue 26: "task" names a rank, as at a batch site and a cluster */
        ntasks = wire_get_u64(o, "procs", 1);
    return filestore_submit_check(M->files, &lim, o, ntasks, why, wl);
}

static int count_in(void *arg, const msgpack_object *in)
{
    (void)in;
    ++*(uint32_t *)arg;
    return 0;
}

int meta_files_each_input(const struct mjob *j, int (*fn)(void *arg, const msgpack_object *in),
                          void *arg)
{
    return filestore_each_input(j->req, j->reqlen, UINT32_MAX, fn, arg);
}

bool meta_files_has_inputs(const struct mjob *j)
{
    uint32_t n = 0;
    meta_files_each_input(j, count_in, &n);
    return n > 0;
}

bool meta_files_has_outputs(const struct mjob *j)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    bool has = false;
    if (j->req &&
        msgpack_unpack_next(&up, (const char *)j->req, j->reqlen, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *o = wire_get(&up.data, "outputs");
        has = o && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0;
    }
    msgpack_unpacked_destroy(&up);
    return has;
}

/* ---- the task rows of the outputs copied back ---- */

int meta_files_row_save(struct meta *M, const struct mjob *j, const msgpack_object *t)
{
    uint8_t key[12];
    uint64_t idx = wire_get_u64(t, "idx", 0);
    if (idx >= j->ntasks && !(idx == 0 && j->ntasks <= 1))
        return 0; /* not one of its tasks: ignored */
    store_key_u64_u32(key, j->id, (uint32_t)idx);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_object(&wb, t);
    int rc = store_put(M->store, M->t_taskfiles, key, sizeof key, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
    return rc;
}

/* Task idx's stored row (malloc'd into *rec), or false. */
static bool row_get(struct meta *M, uint64_t job, uint32_t idx, void **rec, size_t *len)
{
    uint8_t key[12];
    store_key_u64_u32(key, job, idx);
    return store_get(M->store, M->t_taskfiles, key, sizeof key, rec, len) == 0;
}

/* The site's task rows of the last poll without their "files" and "files_note": those
 * are the site's copies, not the spool's yet (its FILE_GET would not find them). */
static bool rows_without_files(const struct mjob *j, struct wire_buf *wb)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (!j->tasks_raw ||
        msgpack_unpack_next(&up, (const char *)j->tasks_raw, j->tasks_len, NULL) !=
            MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_ARRAY) {
        msgpack_unpacked_destroy(&up);
        return false;
    }
    wire_pack_array(wb, up.data.via.array.size);
    for (uint32_t i = 0; i < up.data.via.array.size; i++) {
        const msgpack_object *t = &up.data.via.array.ptr[i];
        uint32_t n = 0, keep = t->type == MSGPACK_OBJECT_MAP ? t->via.map.size : 0;
        for (uint32_t k = 0; k < keep; k++) {
            const msgpack_object *key = &t->via.map.ptr[k].key;
            n += !(key->type == MSGPACK_OBJECT_STR &&
                   ((key->via.str.size == 5 && !memcmp(key->via.str.ptr, "files", 5)) ||
                    (key->via.str.size == 10 && !memcmp(key->via.str.ptr, "files_note", 10))));
        }
        wire_pack_map(wb, n);
        for (uint32_t k = 0; k < keep; k++) {
            const msgpack_object *key = &t->via.map.ptr[k].key;
            if (key->type == MSGPACK_OBJECT_STR &&
                ((key->via.str.size == 5 && !memcmp(key->via.str.ptr, "files", 5)) ||
                 (key->via.str.size == 10 && !memcmp(key->via.str.ptr, "files_note", 10))))
                continue;
            wire_pack_object(wb, key);
            wire_pack_object(wb, &t->via.map.ptr[k].val);
        }
    }
    msgpack_unpacked_destroy(&up);
    return true;
}

bool meta_files_tasks(struct meta *M, const struct mjob *j, uint64_t from, uint64_t count,
                      struct wire_buf *wb, uint64_t *next)
{
    uint32_t nt = j->ntasks ? j->ntasks : 1;
    void *rec;
    size_t len;
    *next = 0;
    if (!MJ_ENDED(j->state) || !row_get(M, j->id, 0, &rec, &len))
        return meta_files_has_outputs(j) && rows_without_files(j, wb);
    free(rec);
    if (count == 0 || count > 1000)
        count = 1000;
    uint64_t end = from + count < nt ? from + count : nt;
    uint32_t n = 0;
    for (uint64_t i = from; i < end; i++)
        if (row_get(M, j->id, (uint32_t)i, &rec, &len)) {
            n++;
            free(rec);
        }
    wire_pack_array(wb, n);
    for (uint64_t i = from; i < end; i++)
        if (row_get(M, j->id, (uint32_t)i, &rec, &len)) {
            msgpack_sbuffer_write(&wb->sb, rec, len);
            free(rec);
        }
    *next = end < nt ? end : 0;
    return true;
}

/* ---- the sweep (docs/data.md "Retention", daemon/filesweep.c) ---- */

void meta_files_sweep_soon(struct meta *M)
{
    M->sweep_ms = 0;
}

void meta_files_sweep(struct meta *M)
{
    int64_t now = wall_now_ms();
    if (!M->files || !filesweep_due(&M->sweep_ms, now))
        return;
    filesweep_begin(M->files);
    for (uint32_t i = 0; i < M->njobs; i++)
        meta_files_each_input(M->jobs[i], filesweep_mark, M->files);
    for (uint32_t i = 0; i < M->npulls; i++) { /* outputs being copied: not stored yet */
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        if (M->pulls[i].page &&
            msgpack_unpack_next(&up, M->pulls[i].page, M->pulls[i].page_len, NULL) ==
                MSGPACK_UNPACK_SUCCESS &&
            up.data.type == MSGPACK_OBJECT_ARRAY)
            for (uint32_t r = 0; r < up.data.via.array.size; r++)
                filesweep_mark_row(M->files, &up.data.via.array.ptr[r]);
        msgpack_unpacked_destroy(&up);
    }
    if (store_iter(M->store, M->t_taskfiles, NULL, 0, filesweep_mark_record, M->files) < 0 ||
        filesweep_end(M->files, now - M->cfg.files_keep_s * 1000) < 0)
        M->turn_failed = true;
    for (int i = 0; i < M->nsites; i++) /* a Slurm site's store, in its workdir */
        if (M->site[i].slurm)
            (void)slurm_site_sweep(M->site[i].slurm, M->cfg.files_keep_s);
}

int64_t meta_files_dir_done(void *arg, const char *name)
{
    struct meta *M = arg;
    size_t il = strlen(M->inc);
    uint64_t id;
    unsigned attempt;
    int n = -1;
    /* meta:<inc>:<job>.<attempt> (metasend.c); another incarnation's is left alone */
    if (strncmp(name, "meta:", 5) || strncmp(name + 5, M->inc, il) || name[5 + il] != ':' ||
        sscanf(name + 6 + il, "%" SCNu64 ".%u%n", &id, &attempt, &n) != 2 || n < 0 ||
        name[6 + il + (size_t)n])
        return -1;
    const struct mjob *j = meta_job_find(M, id);
    if (!j) /* purged (metapurge.c: the spool was done with it), or a future id */
        return id < M->next_id ? 0 : -1;
    /* every copy of the job (an older attempt's too) stays while the job goes on */
    if (!MJ_ENDED(j->state) || j->pulling || j->dirty || j->orders)
        return -1;
    return j->finished > 0 ? j->finished : 0;
}

/* ---- the requests ---- */

/* For fileget_answer: hex is an input of job id, or an output of its task idx copied
 * back here (once the job has ended). */
static bool job_names(void *role, uint64_t id, bool out, uint64_t idx, const char *hex)
{
    struct meta *M = role;
    struct mjob *j = meta_job_find(M, id);
    uint32_t nt = j->ntasks ? j->ntasks : 1;
    void *rec;
    size_t len;
    if (!out)
        return meta_files_each_input(j, fileget_is_hash, (void *)hex) > 0;
    if (idx >= nt || !MJ_ENDED(j->state) || !row_get(M, j->id, (uint32_t)idx, &rec, &len))
        return false;
    bool found = fileget_row_names(rec, len, hex);
    free(rec);
    return found;
}

void meta_files_request(struct meta *M, const struct wire_msg *m, struct wire_buf *reply)
{
    struct filestore_limits lim = limits(M);
    char user[FILESTORE_USER_MAX];
    /* whom a new upload is charged to: the request's "user" (the key's name under CURVE) */
    wire_get_strbuf(m->root, "user", user, sizeof user);
    if (m->type == WT_FILE_HAVE)
        filestore_h_have(M->files, &lim, m, user[0] ? user : NULL, reply);
    else if (m->type == WT_FILE_PUT)
        filestore_h_put(M->files, &lim, m, user[0] ? user : NULL, reply);
    else
        fileget_answer(
            &(struct fileget_level){M->files, " at the grid spool", meta_job_owner, job_names}, M,
            m, reply);
}

/*
 * files_par.c - a parallel job's files (issue 26, files.h, docs/data.md "Parallel
 * jobs"): the PSUBMIT's "inputs" and "outputs" kept with the job (its record's "files"),
 * the part of each rank's PSYNC_ACK command that names them, and the files a job's
 * ranks name (for FILE_GET and the sweep). A rank's kept outputs are stored with its
 * stdout and stderr (scored_output.c, table "poutput").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

/* Counts an input entry for rank *arg[0] (shared ones and its own). */
static int count_rank(void *arg, const msgpack_object *in)
{
    uint32_t *a = arg;
    if (!wire_get(in, "task") || wire_get_u64(in, "task", 0) == a[0])
        a[1]++;
    return 0;
}

const char *files_par_check(struct cluster *c, const msgpack_object *m, char *why, size_t wl)
{
    uint64_t procs = wire_get_u64(m, "procs", 1);
    const char *bad = files_submit_check(c, m, procs, why, wl);
    const msgpack_object *in = wire_get(m, "inputs");
    if (bad || !in || in->type != MSGPACK_OBJECT_ARRAY)
        return bad;
    uint32_t shared = 0, *own = calloc(procs + 1, sizeof *own);
    if (!own)
        return "out of memory; retry later";
    for (uint32_t i = 0; i < in->via.array.size; i++) {
        const msgpack_object *e = &in->via.array.ptr[i];
        if (!wire_get(e, "task"))
            shared++;
        else if (wire_get_u64(e, "task", 0) < procs)
            own[wire_get_u64(e, "task", 0)]++;
    }
    for (uint64_t r = 0; r < procs && !bad; r++)
        if (shared + own[r] > FILES_PAR_INPUTS_MAX) {
            snprintf(why, wl,
                     "rank %llu would get %u input entries, more than the %u a rank takes "
                     "(each is named in its start command): pack them into fewer files "
                     "(an archive or a directory of archives)",
                     (unsigned long long)r, shared + own[r], FILES_PAR_INPUTS_MAX);
            bad = why;
        }
    free(own);
    return bad;
}

uint32_t files_par_rank_inputs(const struct pjob *j, uint32_t rank)
{
    uint32_t a[2] = {rank, 0};
    if (j->data)
        filestore_each_input(j->data, j->data_len, UINT32_MAX, count_rank, a);
    return a[1];
}

int files_par_attach(struct pjob *j, const msgpack_object *m)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    int rc = 0;
    if (filestore_jobdata_pack(m, &wb)) {
        if ((j->data = malloc(wb.sb.size))) {
            memcpy(j->data, wb.sb.data, wb.sb.size);
            j->data_len = wb.sb.size;
            files_pckpt_attach(j); /* submit -p --checkpoint-s */
        } else {
            rc = -1;
        }
    }
    wire_buf_free(&wb);
    return rc;
}

uint32_t files_par_cmd_nfields(const struct pjob *j)
{
    return j->data ? 2 : 0;
}

void files_par_cmd_pack(const struct pjob *j, uint32_t rank, struct wire_buf *wb)
{
    uint32_t n = 0;
    if (!j->data)
        return;
    filestore_each_input(j->data, j->data_len, rank, filestore_count_input, &n);
    wire_put_key(wb, "inputs");
    wire_pack_array(wb, n);
    filestore_each_input(j->data, j->data_len, rank, filestore_pack_input, wb);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    const msgpack_object *out = NULL;
    if (msgpack_unpack_next(&up, j->data, j->data_len, NULL) == MSGPACK_UNPACK_SUCCESS)
        out = wire_get(&up.data, "outputs");
    wire_put_key(wb, "outputs");
    if (out && out->type == MSGPACK_OBJECT_ARRAY)
        wire_pack_object(wb, out);
    else
        wire_pack_array(wb, 0);
    msgpack_unpacked_destroy(&up);
}

int files_rec_each(const void *val, size_t vlen, int (*fn)(void *arg, const msgpack_object *e),
                   void *arg)
{
    msgpack_unpacked up;
    int rc = 0;
    if (cluster_unpack_map(&up, val, vlen) < 0)
        return 0;
    const msgpack_object *fl = wire_get(&up.data, "files");
    for (uint32_t i = 0; !rc && fl && fl->type == MSGPACK_OBJECT_ARRAY && i < fl->via.array.size;
         i++)
        rc = fn(arg, &fl->via.array.ptr[i]);
    msgpack_unpacked_destroy(&up);
    return rc;
}

int files_same_hash(void *arg, const msgpack_object *e)
{
    size_t hl;
    const char *h = wire_get_str(e, "hash", &hl);
    return h && hl == 64 && !memcmp(h, arg, 64);
}

bool files_par_names(struct cluster *c, const struct pjob *j, bool out, uint32_t rank,
                     const char *hex)
{
    if (!j->data)
        return false;
    if (!out)
        return filestore_each_input(j->data, j->data_len, UINT32_MAX, files_same_hash,
                                    (void *)hex) > 0;
    if (rank >= j->rq.nprocs)
        return false;
    uint8_t key[12];
    void *val;
    size_t vlen;
    store_key_u64_u32(key, j->id, rank);
    if (store_get(c->store, c->sd->t_poutput, key, sizeof key, &val, &vlen) != 0)
        return false;
    bool found = files_rec_each(val, vlen, files_same_hash, (void *)hex) > 0;
    free(val);
    return found;
}

struct mark_walk {
    uint64_t job;
    int (*fn)(void *arg, const msgpack_object *e);
    void *arg;
};

static int mark_rank(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct mark_walk *w = arg;
    if (klen != 12 || store_key_get_u64(key) != w->job)
        return 1;
    files_rec_each(val, vlen, w->fn, w->arg);
    return 0;
}

void files_par_each(struct cluster *c, int (*fn)(void *arg, const msgpack_object *e), void *arg)
{
    for (uint32_t i = 0; c->sd && i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        uint8_t key[12];
        struct mark_walk w = {j->id, fn, arg};
        if (!j->data)
            continue;
        filestore_each_input(j->data, j->data_len, UINT32_MAX, fn, arg);
        store_key_u64_u32(key, j->id, 0);
        store_iter(c->store, c->sd->t_poutput, key, sizeof key, mark_rank, &w);
    }
}

/*
 * livestart.c - the message that starts an element on its cluster (live_int.h): a
 * PSUBMIT naming its hosts (with a parallel job's inputs and outputs, issue 26), or,
 * for a task of a task array with files (issue 26), a SUBMIT of
 * one task pinned to its host that names its inputs, outputs and checkpoint period.
 * Both carry the element's key ("batch:<inc>:<J>.<e>[.<run>]"), which makes a start sent
 * again after a restart harmless.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/live/live_int.h"
#include "wire/jobenv.h"

/* argv[i] with {i}, {n}, {job} replaced (task arrays); malloc'd. */
static char *expand(const char *s, const struct ljob *j, uint32_t e)
{
    size_t cap = strlen(s) * 4 + 64, n = 0;
    char *o = malloc(cap);
    if (!o)
        return NULL;
    for (const char *p = s; *p && n + 24 < cap; p++) {
        if (!j->parallel && !strncmp(p, "{i}", 3)) {
            n += (size_t)snprintf(o + n, cap - n, "%u", e);
            p += 2;
        } else if (!j->parallel && !strncmp(p, "{n}", 3)) {
            n += (size_t)snprintf(o + n, cap - n, "%u", j->ntasks);
            p += 2;
        } else if (!j->parallel && !strncmp(p, "{job}", 5)) {
            n += (size_t)snprintf(o + n, cap - n, "%llu", (unsigned long long)j->id);
            p += 4;
        } else {
            o[n++] = *p;
        }
    }
    o[n] = '\0';
    return o;
}

/* The cluster's key of element e of j (its run in it once requeued). */
static void elem_key(const struct live *L, const struct ljob *j, uint32_t e, const struct lelem *el,
                     char *key, size_t n)
{
    if (el->run) /* a requeued run (issue 15): a new key, not the old run's */
        snprintf(key, n, "batch:%s:%llu.%u.%u", L->inc, (unsigned long long)j->id, e, el->run);
    else
        snprintf(key, n, "batch:%s:%llu.%u", L->inc, (unsigned long long)j->id, e);
}

/*
 * The start of element e of a job with files (issue 26): a SUBMIT of one task pinned to
 * the element's host ("host"), naming its inputs (all whole at the cluster by now,
 * livestage.c), the job's output globs and checkpoint period. The cluster's task
 * machinery stages them to the node, collects the outputs, keeps the checkpoints.
 * Takes argv (freed). 0.
 */
static int build_submit(struct live *L, struct ljob *j, uint32_t e, char **argv, uint32_t argc,
                        struct wire_buf *wb)
{
    struct lelem *el = live_elem_rec(j, e);
    struct lclu *c = &L->cl[el->cl];
    char name[300], key[128], host[BATCH_NAME_MAX];
    size_t hl = strcspn(el->hosts, ",");
    snprintf(host, sizeof host, "%.*s", (int)(hl < sizeof host ? hl : sizeof host - 1), el->hosts);
    uint32_t nf = 8 + j->network + jobenv_put(NULL, j->env, j->cwd) + live_files_submit_nfields(j) +
                  live_carry_nfields(L, live_eid(j->id, e)); /* a moved task's checkpoint */
    live_req_begin(L, c, RK_PSUBMIT, live_eid(j->id, e), WT_SUBMIT, nf, 0, wb);
    jobenv_put(wb, j->env, j->cwd);
    if (j->network)
        wire_put_bool(wb, "network", true);
    wire_put_key(wb, "argv");
    wire_pack_array(wb, argc);
    for (uint32_t i = 0; i < argc; i++) {
        char *x = expand(argv[i], j, e);
        wire_pack_str(wb, x ? x : argv[i]);
        free(x);
    }
    wire_put_u64(wb, "ntasks", 1);
    snprintf(name, sizeof name, "%s[%u]", j->name ? j->name : "", e);
    wire_put_str(wb, "name", name);
    wire_put_str(wb, "user", j->user ? j->user : "");
    wire_put_bool(wb, "shell", j->shell);
    wire_put_u64(wb, "limit_s", (uint64_t)j->limit_s);
    elem_key(L, j, e, el, key, sizeof key);
    wire_put_str(wb, "key", key);
    wire_put_str(wb, "host", host);
    live_files_submit_put(j, e, wb);
    live_carry_put(L, live_eid(j->id, e), wb);
    live_argv_free(argv, argc);
    return 0;
}

/*
 * Issue 26: a parallel job's "inputs" (each with its "task": the rank), "outputs" and
 * "checkpoint_s" (the cluster keeps its ranks' checkpoints, docs/data.md; with
 * "ckpt_from", the run before's on this cluster, when it runs again) as
 * the user gave them, from the job's kept map, into wb (NULL: only counted). Returns the
 * fields written (0 for a job without files).
 */
static uint32_t par_files(const struct ljob *j, const struct lelem *el, struct wire_buf *wb)
{
    msgpack_unpacked up;
    uint32_t n = 0;
    if (!j->data)
        return 0;
    if (el->ck_cjob && el->ck_cl == el->cl && live_files_ckpt_s(j)) {
        n++; /* a run again on the same cluster: from the run before's checkpoint */
        if (wb)
            wire_put_u64(wb, "ckpt_from", el->ck_cjob);
    }
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, j->data, j->data_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const char *keys[] = {"inputs", "outputs", "checkpoint_s"}; /* as the user gave them */
        for (int k = 0; k < 3; k++) {
            const msgpack_object *o = wire_get(&up.data, keys[k]);
            if (!o || o->type != (k < 2 ? MSGPACK_OBJECT_ARRAY : MSGPACK_OBJECT_POSITIVE_INTEGER))
                continue;
            n++;
            if (wb) {
                wire_put_key(wb, keys[k]);
                wire_pack_object(wb, o);
            }
        }
    }
    msgpack_unpacked_destroy(&up);
    return n;
}

/* Builds the PSUBMIT starting element e of j into wb (and records the request); -1
 * when the job's record is not committed yet. */
int live_start_build(struct live *L, struct ljob *j, uint32_t e, struct wire_buf *wb)
{
    struct lelem *el = live_elem_rec(j, e);
    if (!el)
        return -1;
    struct lclu *c = &L->cl[el->cl];
    uint32_t argc = 0;
    char **argv = live_job_argv(L, j->id, &argc);
    if (!argv)
        return -1;
    if (j->data && !j->parallel) /* issue 26: a task with files is a one-task job on its host */
        return build_submit(L, j, e, argv, argc, wb);
    char *hosts = strdup(el->hosts);
    const char *hv[4096];
    uint32_t nh = 0;
    for (char *save = NULL, *t = hosts ? strtok_r(hosts, ",", &save) : NULL; t && nh < 4096;
         t = strtok_r(NULL, ",", &save))
        hv[nh++] = t;
    uint32_t per_host = 1; /* most ranks on one host, for the per-host limits */
    for (uint32_t a = 0; a < nh; a++) {
        uint32_t k = 0;
        for (uint32_t b = 0; b < nh; b++)
            k += !strcmp(hv[a], hv[b]);
        if (k > per_host)
            per_host = k;
    }
    uint32_t nf = 9 + (j->mem_mb > 0) + (j->disk_mb > 0) + (j->cpu_s > 0) + j->network +
                  jobenv_put(NULL, j->env, j->cwd) + par_files(j, el, NULL);
    live_req_begin(L, c, RK_PSUBMIT, live_eid(j->id, e), WT_PSUBMIT, nf, 0, wb);
    par_files(j, el, wb);           /* issue 26: whole at the cluster by now (livestage.c) */
    jobenv_put(wb, j->env, j->cwd); /* --export / --chdir (issue 15) */
    if (j->network) /* submit --network (issue 23): the cluster hands it to the nodes */
        wire_put_bool(wb, "network", true);
    wire_put_key(wb, "argv");
    wire_pack_array(wb, argc);
    for (uint32_t i = 0; i < argc; i++) {
        char *x = expand(argv[i], j, e);
        wire_pack_str(wb, x ? x : argv[i]);
        free(x);
    }
    wire_put_u64(wb, "procs", nh);
    wire_put_key(wb, "hosts");
    wire_pack_array(wb, nh);
    for (uint32_t i = 0; i < nh; i++)
        wire_pack_str(wb, hv[i]);
    char name[300], key[128];
    if (j->parallel)
        snprintf(name, sizeof name, "%s", j->name ? j->name : "");
    else
        snprintf(name, sizeof name, "%s[%u]", j->name ? j->name : "", e);
    wire_put_str(wb, "name", name);
    wire_put_str(wb, "user", j->user ? j->user : "");
    wire_put_str(wb, "group", j->group ? j->group : "");
    wire_put_bool(wb, "shell", j->shell);
    wire_put_u64(wb, "limit_s", (uint64_t)j->limit_s);
    elem_key(L, j, e, el, key, sizeof key);
    wire_put_str(wb, "key", key);
    if (j->mem_mb > 0)
        wire_put_u64(wb, "mem_mb", (uint64_t)j->mem_mb * per_host);
    if (j->disk_mb > 0)
        wire_put_u64(wb, "disk_mb", (uint64_t)j->disk_mb * per_host);
    if (j->cpu_s > 0) /* --cpu: all the job's processes together, as at the cluster */
        wire_put_u64(wb, "cpu_s", (uint64_t)j->cpu_s);
    free(hosts);
    live_argv_free(argv, argc);
    return 0;
}

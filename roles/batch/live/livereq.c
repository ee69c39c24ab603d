/*
 * livereq.c - the batch role's requests: the user vocabulary of the cluster manager
 * (SUBMIT, PSUBMIT, JOB_LIST, JOB_GET, CANCEL; docs/wire.md 6.11) answered in the
 * shapes the tools (gridnode submit/jobs/job/cancel -e BATCH_EP) already read. Adding
 * a command is a handler and a line in the table at the end.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/endwait.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "lib/text.h"
#include "roles/batch/live/live_int.h"
#include "wire/depend.h"
#include "wire/jobargv.h"
#include "wire/jobenv.h"
#include "store/store.h"
#include "wire/joblist.h"

struct req {
    struct live *L;
    const struct wire_msg *m;
    const char *peer;
    struct wire_buf *reply;
};

__attribute__((format(printf, 3, 4))) static void fail(struct req *r, int code, const char *fmt,
                                                       ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    text_fix(buf);
    wire_buf_reset(r->reply);
    wire_error_msg(r->reply, r->m->id, code, "%s", buf);
}

static char *dup_field(const msgpack_object *m, const char *k)
{
    size_t l;
    const char *s = wire_get_str(m, k, &l);
    return s && l ? strndup(s, l) : NULL;
}

/*
 * The class walltimes ([class NAME] defaultwalltime / maxwalltime, Maui's
 * DEFAULT.WCLIMIT / MAX.WCLIMIT): a job without limit_s gets its class's default
 * (else LIVE_DEFAULT_WALLTIME_S, already set); a job asking for more than its class's
 * maximum is refused naming both. The class is the job's, else the default cluster's.
 * NULL, or why (in buf).
 */
static const char *class_walltime(const struct live *L, struct ljob *j, bool unset, char *buf,
                                  size_t len)
{
    const char *cls = j->class_ && *j->class_ ? j->class_ : L->cl[L->default_cl].name;
    int64_t def = batch_config_class_walltime(&L->cfg.eng, cls, false);
    int64_t max = batch_config_class_walltime(&L->cfg.eng, cls, true);
    if (unset && def > 0)
        j->limit_s = def;
    if (unset && max > 0 && j->limit_s > max)
        j->limit_s = max; /* no default set: the class's maximum, not more */
    if (max > 0 && j->limit_s > max) {
        snprintf(buf, len,
                 "limit_s %lld s is over the maximum walltime of class %s (%lld s): ask for "
                 "less or use another class",
                 (long long)j->limit_s, cls, (long long)max);
        return buf;
    }
    return NULL;
}

/* Why a task array is over the site's batch.max_array (Slurm's MaxArraySize), in buf. */
static const char *array_too_large(const struct live *L, const struct ljob *j, char *buf,
                                   size_t len)
{
    snprintf(buf, len,
             "ntasks %u is over this site's largest array (batch.max_array = %lld): split "
             "the array into several jobs",
             j->ntasks, (long long)L->cfg.live.max_array);
    return buf;
}

/* A credential name: shorter than the engine's limit, printable. */
static bool name_ok(const char *s)
{
    if (!s)
        return true;
    if (strlen(s) >= BATCH_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20)
            return false;
    return true;
}

/* The job a key named before (same user), or NULL. */
static struct ljob *by_key(struct live *L, const char *key, const char *user)
{
    if (!key)
        return NULL;
    for (uint32_t i = 0; i < L->njobs; i++) {
        struct ljob *j = L->jobs[i];
        if (j->key && !strcmp(j->key, key) && !strcmp(j->user ? j->user : "", user ? user : ""))
            return j;
    }
    return NULL;
}

/* Whether an element of j waits for its cancelled run to end (JOB_CTL requeue). */
static bool requeueing(const struct ljob *j)
{
    const struct lelem *el;
    for (uint32_t e = 0; j->requeues && !j->cancelled && (el = live_elem_next(j, &e)); e++)
        if (el->want_requeue)
            return true;
    return false;
}

static const char *job_state(const struct ljob *j)
{
    if (j->nended == j->ntasks)
        return j->cancelled ? "cancelled" : j->nfailed ? "failed" : "done";
    if (j->cancelled)
        return "cancelled";
    if (requeueing(j))
        return "requeueing";
    /* a held job stays "queued" here as before (the meta role and the stats pages read
       this state); `checkjob` shows the hold */
    if (j->nrun || j->nstarted)
        return "running";
    return "queued";
}

static void submitted(struct req *r, struct ljob *j, bool repeat)
{
    wire_begin(r->reply, WT_SUBMITTED, r->m->id, 3 + repeat);
    wire_put_u64(r->reply, "job", j->id);
    wire_put_str(r->reply, "state", job_state(j));
    wire_put_str(r->reply, "cluster", "");
    if (repeat)
        wire_put_bool(r->reply, "repeat", true);
}

/*
 * SUBMIT/PSUBMIT "constraint" (issue 27) into j->constraint (canonical): 0; -1 bad
 * syntax, counts a job of its shape cannot meet, or out of memory (INVALID), -2 no host of the
 * job's cluster satisfies it (REFUSED), the reason in why.
 */
static int constraint_get(struct live *L, struct ljob *j, const msgpack_object *m, char *why,
                          size_t wl)
{
    if (wire_get_constraint(m, &j->constraint, why, wl) < 0 ||
        constraint_job_ok(j->constraint, j->parallel, j->procs, why, wl) < 0)
        return -1;
    if (!j->constraint)
        return 0;
    return live_constraint_impossible(L, j->class_, j->constraint, why, wl) ? -2 : 0;
}

/* Common part of SUBMIT and PSUBMIT: a new job from the message; stores its record. */
static void new_job(struct req *r, bool parallel)
{
    struct live *L = r->L;
    const msgpack_object *m = r->m->root;
    const char *why = jobargv_problem(wire_get(m, "argv")); /* as the cluster checks it */
    char fwhy[600];
    if (!why) /* issue 26: inputs are whole files the batch role holds (livefiles.c) */
        why = live_files_check(L, m, parallel, (uint32_t)wire_get_u64(m, "ntasks", 0), fwhy,
                               sizeof fwhy);
    if (why) {
        fail(r, WE_INVALID, "%s", why);
        return;
    }
    char *key = dup_field(m, "key"), *user = dup_field(m, "user");
    struct ljob *old = by_key(L, key, user);
    if (old) {
        free(key);
        free(user);
        submitted(r, old, true);
        return;
    }
    struct ljob *j = calloc(1, sizeof *j);
    if (!j) {
        free(key);
        free(user);
        fail(r, WE_STORAGE, "out of memory");
        return;
    }
    j->key = key;
    j->user = user;
    j->parallel = parallel;
    j->name = dup_field(m, "name");
    j->group = dup_field(m, "group");
    j->account = dup_field(m, "account");
    j->qos = dup_field(m, "qos");
    j->class_ = dup_field(m, "class");
    j->resv = dup_field(m, "resv");
    j->shell = wire_get_bool(m, "shell", false);
    j->network = wire_get_bool(m, "network", false); /* submit --network (issue 23) */
    j->hold = wire_get_bool(m, "hold", false);
    j->early = wire_get_bool(m, "early", false);
    const struct curve_ident *who = curve_current();
    j->grid = who && who->kind == CURVE_PEER; /* a spool's (issue 25); also a site resv */
    j->queue = (uint8_t)wire_get_u64(m, "queue", 1);
    j->limit_s = (int64_t)wire_get_u64(m, "limit_s", LIVE_DEFAULT_WALLTIME_S);
    j->mem_mb = (int64_t)wire_get_u64(m, "mem_mb", 0);
    j->disk_mb = (int64_t)wire_get_u64(m, "disk_mb", 0);
    uint32_t nenv;
    int eoom;
    j->env = jobenv_dup(m, &nenv, &eoom); /* --export / --chdir (issue 15) */
    j->cwd = wire_get_strdup(m, "chdir");
    if (parallel) {
        j->ntasks = 1;
        j->procs = (uint32_t)wire_get_u64(m, "procs", 0);
        /* --ppn: at most ppn per host; not given = packed core by core (Slurm) */
        j->ppn = wire_get(m, "ppn") ? (uint32_t)wire_get_u64(m, "ppn", 0) : 0;
        /* --cpu: the cluster enforces it (sent on with the start, liveclu.c) */
        j->cpu_s = (int64_t)wire_get_capped(m, "cpu_s", 0, INT64_MAX);
    } else {
        j->ntasks = (uint32_t)wire_get_u64(m, "ntasks", 0);
        j->procs = 1;
        j->ppn = 0;
    }
    why = NULL;
    char cwhy[BATCH_NAME_MAX + 300];
    if (!parallel && wire_get(m, "stdin"))
        why = "stdin is not supported by the batch role (a task array element gets no standard "
              "input): read a file named with {i} instead";
    else if (!parallel && j->ntasks == 0)
        why = "ntasks must be at least 1";
    else if (!parallel && j->ntasks > L->cfg.live.max_array)
        why = array_too_large(L, j, cwhy, sizeof cwhy);
    else if (parallel && (j->procs == 0 || (wire_get(m, "ppn") && j->ppn == 0)))
        why = "procs and ppn must be at least 1";
    else if (parallel && live_ppn_impossible(L, j->class_, j->procs, j->ppn, cwhy, sizeof cwhy))
        why = cwhy;
    else if (j->limit_s < 1)
        why = "limit_s (the walltime) must be at least 1 second";
    else if (!name_ok(j->user) || !name_ok(j->group) || !name_ok(j->account) || !name_ok(j->qos) ||
             !name_ok(j->class_))
        why = "user, group, account, qos and class must be shorter than 64 bytes, without "
              "control characters";
    else if ((wire_get(m, "key") && !key) || (key && memchr(key, '\0', 1) == key))
        why = "key must not be empty";
    if (!why && jobenv_check(m, cwhy, sizeof cwhy) < 0)
        why = cwhy;
    if (!why && (eoom || (wire_get(m, "chdir") && !j->cwd)))
        why = "out of memory";
    if (!why && j->class_ && live_class_unknown(L, j->class_, cwhy, sizeof cwhy))
        why = cwhy;
    if (!why)
        why = class_walltime(L, j, !wire_get(m, "limit_s"), cwhy, sizeof cwhy);
    if (!why && live_dep_submit(L, m, &j->dep, cwhy, sizeof cwhy) < 0) /* issue 27 */
        why = cwhy;
    int crc = why ? 0 : constraint_get(L, j, m, cwhy, sizeof cwhy);
    if (crc == -2) { /* no host satisfies it: Slurm refuses such a job too */
        fail(r, WE_REFUSED, "%s", cwhy);
        live_job_free(j);
        return;
    }
    if (crc < 0)
        why = cwhy;
    if (!why && j->resv && (why = live_resv_check(L, j))) {
        /* about the reservation named, not the job itself: `field` says so, and a
         * spool that sent it into its own reservation tries again (issue 27) */
        wire_buf_reset(r->reply);
        wire_begin(r->reply, WT_ERROR, r->m->id, 3);
        wire_put_u64(r->reply, "code", WE_INVALID);
        wire_put_str(r->reply, "msg", why);
        wire_put_str(r->reply, "field", "resv");
        live_job_free(j);
        return;
    }
    if (why) { /* the elements are implicit until fed or started (livejob.c) */
        fail(r, WE_INVALID, "%s", why);
        live_job_free(j);
        return;
    }
    j->id = L->next_id;
    j->submitted = live_now(L);
    live_dep_first(L, j); /* issue 27: decided now, before its record is written */
    /* the record, argv included */
    const msgpack_object *a = wire_get(m, "argv");
    char **argv = calloc(a->via.array.size + 1, sizeof *argv);
    uint32_t n = 0;
    for (; argv && n < a->via.array.size; n++)
        if (!(argv[n] = strndup(a->via.array.ptr[n].via.str.ptr, a->via.array.ptr[n].via.str.size)))
            break;
    int rc = argv && n == a->via.array.size ? live_job_save(L, j, argv, n) : -1;
    if (rc == 0 && live_files_attach(L, j, m) < 0) /* issue 26: table "jobdata" */
        rc = -1, L->turn_failed = true;
    live_argv_free(argv, n);
    if (rc < 0 || live_job_add(L, j) < 0) {
        L->turn_failed = rc == 0; /* buffered but not kept: fail the turn */
        fail(r, WE_STORAGE, "out of memory");
        live_dirty_forget(L, j); /* live_dep_first may have cancelled it */
        live_job_free(j);
        return;
    }
    L->next_id++;
    L->meta_dirty = true;
    if (j->resv && live_resv_bind(L, j) < 0)
        L->turn_failed = true; /* the binding could not be stored: undo the turn */
    live_job_feed(L, j);
    live_want_cycle(L);
    submitted(r, j, false);
}

static void h_submit(struct req *r)
{
    new_job(r, false);
}

static void h_psubmit(struct req *r)
{
    new_job(r, true);
}

/* ---- listing ---- */

static void put_argv(struct live *L, const struct ljob *j, struct wire_buf *wb, size_t cut)
{
    uint32_t argc = 0;
    char **argv = live_job_argv(L, j->id, &argc);
    size_t total = 0;
    uint32_t n = 0;
    for (; n < argc && total < cut; n++)
        total += strlen(argv[n]);
    wire_put_key(wb, "argv");
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++)
        wire_pack_str(wb, argv[i]);
    live_argv_free(argv, argc);
}

/* "dependency": the terms a waiting job still waits for (issue 27). */
static void put_dep(const struct ljob *j, struct wire_buf *wb)
{
    char t[DEPEND_LEN_MAX + 1];
    if (!j->dep)
        return;
    depend_format(j->dep, t, sizeof t);
    wire_put_str(wb, "dependency", t);
}

void live_job_summary(struct live *L, const struct ljob *j, struct wire_buf *wb)
{
    const struct lelem *el = live_elem_peek(j, 0);
    char dr[DEPEND_LEN_MAX + 64];
    bool dep = live_dep_reason(j, dr, sizeof dr); /* Dependency: TERM (issue 27) */
    if (j->parallel) {
        const char *st = el->state == EL_PENDING ? "queued" : live_elem_state_name(el->state);
        if (j->cancelled && el->state < EL_DONE)
            st = "cancelled";
        else if (el->want_requeue)
            st = "requeueing";
        /* pending: the engine's estimated start (scheduler.estimates, or its job
         * reservation), ms since the epoch; 0 unknown */
        struct batch_job_info bi;
        int64_t est = 0;
        if (el->state == EL_PENDING && el->in_engine &&
            batch_job_info(L->eng, live_eid(j->id, 0), &bi) == 0) {
            est = bi.reserved != BATCH_NEVER ? bi.reserved : bi.estimate;
            if (est == BATCH_NEVER || est < 0)
                est = 0;
        }
        wire_pack_map(wb, 26 + (j->requeues > 0) + !!j->dep + !!j->constraint);
        put_dep(j, wb);
        if (j->constraint) /* submit --constraint (issue 27) */
            wire_put_str(wb, "constraint", j->constraint);
        wire_put_i64(wb, "estimate", est);
        wire_put_str(wb, "kind", "parallel");
        wire_put_u64(wb, "procs", j->procs);
        wire_put_u64(wb, "ppn", j->ppn);
        wire_put_u64(wb, "queue", j->queue);
        wire_put_str(wb, "group", j->group ? j->group : "");
        wire_put_str(wb, "cluster", el->cl >= 0 && el->cl < L->ncl ? L->cl[el->cl].name : "");
        wire_put_key(wb, "hosts");
        uint32_t nh = 0;
        for (const char *p = el->hosts; p && *p; p++)
            nh += *p == ',';
        nh += el->hosts && *el->hosts;
        wire_pack_array(wb, nh);
        for (const char *p = el->hosts; p && *p;) {
            size_t l = strcspn(p, ",");
            wire_pack_strn(wb, p, l);
            p += l + (p[l] == ',');
        }
        wire_put_i64(wb, "started", el->start);
        wire_put_i64(wb, "decided", el->decided);
        wire_put_i64(wb, "start_heard", el->heard);
        wire_put_str(wb, "reason", dep ? dr : el->reason ? el->reason : "");
        wire_put_i64(wb, "exit", el->exit);
        wire_put_str(wb, "state", st);
    } else {
        wire_pack_map(wb, 23 + (j->requeues > 0) + !!j->dep + !!j->constraint);
        put_dep(j, wb);
        if (j->constraint) /* submit --constraint (issue 27) */
            wire_put_str(wb, "constraint", j->constraint);
        wire_put_u64(wb, "ntasks", j->ntasks);
        wire_put_u64(wb, "issued", j->nstarted);
        wire_put_u64(wb, "running", j->nrun);
        wire_put_u64(wb, "done", j->nended);
        wire_put_u64(wb, "failed", j->nfailed);
        wire_put_u64(wb, "dups", 0);
        wire_put_u64(wb, "pending", j->ntasks - j->nstarted - (j->cancelled ? 0 : 0));
        wire_put_str(wb, "state", job_state(j));
        wire_put_str(wb, "reason",
                     dep                                     ? dr
                     : j->nstarted < j->ntasks && el->reason ? el->reason
                                                             : "");
        wire_put_u64(wb, "cjob", 0);
        wire_put_str(wb, "cluster", "");
    }
    if (j->requeues) /* JOB_CTL requeue: Slurm's Restarts (docs/wire.md 6.16) */
        wire_put_u64(wb, "requeues", j->requeues);
    wire_put_u64(wb, "job", j->id);
    wire_put_str(wb, "name", j->name ? j->name : "");
    wire_put_str(wb, "user", j->user ? j->user : "");
    wire_put_str(wb, "account", j->account ? j->account : "");
    wire_put_str(wb, "qos", j->qos ? j->qos : "");
    wire_put_str(wb, "class", j->class_ ? j->class_ : "");
    wire_put_i64(wb, "submitted", j->submitted);
    wire_put_i64(wb, "finished", j->finished);
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "network", j->network); /* submit --network (issue 23) */
    wire_put_u64(wb, "limit_s", (uint64_t)j->limit_s);
    put_argv(L, j, wb, 4096);
}

static void h_job_list(struct req *r)
{
    struct live *L = r->L;
    uint64_t from = wire_get_u64(r->m->root, "from", 0);
    uint64_t count = wire_get_u64(r->m->root, "count", 1000);
    if (count == 0)
        count = 1;
    struct wire_buf rows;
    wire_buf_init(&rows);
    uint32_t n = 0, i = live_job_lower(L, from);
    for (; i < L->njobs && n < count && (n == 0 || rows.sb.size < LIVE_LIST_MAX); i++) {
        if (!curve_may_touch(L->jobs[i]->user)) /* CURVE on: a user lists its own jobs */
            continue;
        size_t at = rows.sb.size;
        live_job_summary(L, L->jobs[i], &rows);
        /* JOB_LIST's filters (issue 15), as the cluster applies them (wire/joblist.c) */
        if (joblist_row_allows(r->m->root, rows.sb.data + at, rows.sb.size - at))
            n++;
        else
            rows.sb.size = at;
    }
    bool more = i < L->njobs;
    wire_begin(r->reply, WT_JOBS, r->m->id, 1 + more);
    wire_put_key(r->reply, "jobs");
    wire_pack_array(r->reply, n);
    msgpack_sbuffer_write(&r->reply->sb, rows.sb.data, rows.sb.size);
    if (more)
        wire_put_u64(r->reply, "next", L->jobs[i]->id);
    wire_buf_free(&rows);
}

/*
 * The job a request names ("job"), when the requester may touch it (its owner or an
 * administrator: curve_may_touch); otherwise NULL with NOT_FOUND or DENIED (naming
 * what it may not `verb`) already in the reply.
 */
static struct ljob *owned_job(struct req *r, const char *verb)
{
    uint64_t id = wire_get_u64(r->m->root, "job", 0);
    struct ljob *j = live_job_find(r->L, id);
    if (!j && id && id < r->L->next_id) { /* purged (ids are never given again) */
        wire_buf_reset(r->reply);
        wire_error_purged(r->reply, r->m->id, id, "in this batch role");
    } else if (!j)
        fail(r, WE_NOT_FOUND, "no job %llu in this batch role", (unsigned long long)id);
    else if (!curve_may_touch(j->user))
        fail(r, WE_DENIED,
             "job %llu belongs to another user; only its owner and the administrators "
             "may %s it",
             (unsigned long long)id, verb);
    else
        return j;
    return NULL;
}

static void h_job_get(struct req *r)
{
    struct live *L = r->L;
    const msgpack_object *m = r->m->root;
    struct ljob *j = owned_job(r, "see or cancel");
    if (!j)
        return;
    bool tasks = wire_get_bool(m, "tasks", false);
    /* a started parallel job: where its output is (the cluster keeps it, 6.11) */
    const struct lelem *e0 = live_elem_peek(j, 0);
    bool at = j->parallel && e0->cjob && e0->cl >= 0 && e0->cl < L->ncl;
    wire_begin(r->reply, WT_JOB, r->m->id, 1 + tasks + at);
    wire_put_key(r->reply, "job");
    live_job_summary(L, j, r->reply);
    if (at) {
        wire_put_key(r->reply, "output_at");
        wire_pack_map(r->reply, 3);
        wire_put_str(r->reply, "cluster", L->cl[e0->cl].name);
        wire_put_str(r->reply, "endpoint", L->cl[e0->cl].ep);
        wire_put_u64(r->reply, "cjob", e0->cjob);
    }
    if (!tasks)
        return;
    uint64_t from = wire_get_u64(m, "from", 0), count = wire_get_u64(m, "count", 1000);
    uint64_t end = from + count < j->ntasks ? from + count : j->ntasks;
    wire_put_key(r->reply, "tasks");
    wire_pack_array(r->reply, end > from ? (uint32_t)(end - from) : 0);
    for (uint64_t e = from; e < end; e++) {
        const struct lelem *el = live_elem_peek(j, (uint32_t)e); /* implicit: pending */
        int st = el->state;
        if (j->cancelled && st == EL_PENDING)
            st = EL_CANCELLED;
        bool ended = st >= EL_DONE;
        bool known = el->cl >= 0 && el->cl < L->ncl;
        void *frec; /* issue 26: its outputs copied back ("files", "files_note") */
        size_t flen;
        uint32_t nff = ended ? live_files_row_nfields(L, j, (uint32_t)e, &frec, &flen) : 0;
        wire_pack_map(r->reply, 12 + 2 * ended + nff);
        if (nff)
            live_files_row_put(frec, flen, r->reply);
        wire_put_u64(r->reply, "idx", e);
        wire_put_str(r->reply, "state", st == EL_DONE ? "ok" : live_elem_state_name(st));
        wire_put_u64(r->reply, "issues", st != EL_PENDING);
        wire_put_str(r->reply, "node", el->hosts ? el->hosts : "");
        wire_put_str(r->reply, "cluster", known ? L->cl[el->cl].name : "");
        wire_put_str(r->reply, "endpoint", known ? L->cl[el->cl].ep : "");
        wire_put_u64(r->reply, "cjob", el->cjob);
        wire_put_str(r->reply, "reason", el->reason ? el->reason : "");
        wire_put_i64(r->reply, "started", el->start);
        wire_put_i64(r->reply, "decided", el->decided);
        wire_put_i64(r->reply, "start_heard", el->heard);
        wire_put_i64(r->reply, "finished", ended ? el->end : 0);
        if (ended) {
            wire_put_i64(r->reply, "exit", el->exit);
            wire_put_u64(r->reply, "signal", el->signal);
        }
    }
}

/* Whether any element of j was ever given to a cluster (a cancelled one included). */
static bool ever_started(const struct ljob *j)
{
    const struct lelem *el;
    for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
        /* a requeued (run > 0) or refused start (decided) counts: the conservative answer */
        if ((el->state != EL_PENDING && el->state != EL_CANCELLED) || el->run || el->decided ||
            el->cjob || el->start || el->hosts)
            return true;
    }
    return false;
}

/* CANCEL; with `unstarted` (a spool withdrawing its copy to move it, docs/wire.md 6.12)
 * only a job none of whose elements ever started is cancelled, decided in this turn, so
 * a started copy is never lost to a move and a moved job never runs twice. */
static void h_cancel(struct req *r)
{
    struct live *L = r->L;
    struct ljob *j = owned_job(r, "see or cancel");
    if (!j)
        return;
    uint64_t id = j->id;
    if (wire_get_bool(r->m->root, "unstarted", false)) { /* the spool's withdrawal */
        if (ever_started(j)) {
            fail(r, WE_STATE, "job %llu has started: it stays here", (unsigned long long)id);
            return;
        }
        if (j->cancelled) { /* withdrawn before: the same answer */
            wire_begin(r->reply, WT_OK, r->m->id, 0);
            return;
        }
    }
    if (j->cancelled || j->nended == j->ntasks) {
        fail(r, WE_STATE, "job %llu is already %s", (unsigned long long)id, job_state(j));
        return;
    }
    live_job_cancel_implicit(L, j); /* the implicit elements: counted, no record each */
    struct lelem *el;
    for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) {
        if (el->state >= EL_DONE)
            continue;
        if (el->in_engine)
            batch_job_finish(L->eng, live_eid(j->id, e), live_now(L));
        live_elem_engine(j, e, false);
        if (el->state == EL_PENDING) {
            live_mig_drop(L, j, e); /* a kept cluster job (issue 26) is cancelled */
            live_elem_set(L, j, e, EL_CANCELLED);
            continue;
        }
        if (el->cjob) {
            live_clu_cancel(L, j, e);
            live_elem_set(L, j, e, EL_CANCELLED);
        } else { /* its start is in flight: cancel once the cluster names the job */
            el->want_cancel = true;
            live_elem_mark(L, j, e);
        }
    }
    live_want_cycle(L);
    wire_begin(r->reply, WT_OK, r->m->id, 0);
}

/* JOB_CTL (docs/wire.md 6.16, docs/batch.md "Hold, release and requeue"): hold and
 * release set the job's hold (the one `submit --hold` sets: Maui's user hold) on its
 * pending elements; requeue is Slurm's scontrol requeue (live_job_requeue). Owner or
 * administrator only, as CANCEL. Each change is committed before OK. */
static void h_job_ctl(struct req *r)
{
    struct live *L = r->L;
    uint64_t id = wire_get_u64(r->m->root, "job", 0);
    char op[17];
    wire_get_strbuf(r->m->root, "op", op, sizeof op);
    bool hold = !strcmp(op, "hold"), release = !strcmp(op, "release");
    if (!hold && !release && strcmp(op, "requeue")) {
        fail(r, WE_INVALID, "op must be \"hold\", \"release\" or \"requeue\"");
        return;
    }
    struct ljob *j = owned_job(r, op);
    if (!j)
        return;
    if (j->cancelled) {
        fail(r, WE_STATE, "job %llu is cancelled: a cancel is final; submit it again",
             (unsigned long long)id);
        return;
    }
    if (hold || release) {
        if (j->nended == j->ntasks) {
            fail(r, WE_STATE, "job %llu is already %s: nothing left to %s (requeue runs it again)",
                 (unsigned long long)id, job_state(j), op);
            return;
        }
        if (j->hold != hold) { /* holding a held job, releasing a free one: OK, no change */
            j->hold = hold;
            live_job_dirty(L, j);
            const struct lelem *el;
            for (uint32_t e = 0; (el = live_elem_next(j, &e)); e++) /* records only */
                if (el->in_engine && el->state == EL_PENDING)
                    batch_job_hold(L->eng, live_eid(j->id, e), hold);
            live_want_cycle(L);
        }
    } else {
        uint32_t n = live_job_requeue(L, j);
        if (n)
            log_info("job %llu requeued (%u elements, requeue %u)", (unsigned long long)id, n,
                     j->requeues);
    }
    wire_begin(r->reply, WT_OK, r->m->id, 0);
}

/* NODE_LIST: the hosts of every cluster as the batch role sees them (one page). */
static void h_node_list(struct req *r)
{
    struct live *L = r->L;
    uint32_t n = 0;
    for (int i = 0; i < L->ncl; i++)
        n += L->cl[i].nhosts;
    wire_begin(r->reply, WT_NODES, r->m->id, 1);
    wire_put_key(r->reply, "nodes");
    wire_pack_array(r->reply, n);
    for (int i = 0; i < L->ncl; i++)
        for (uint32_t k = 0; k < L->cl[i].nhosts; k++) {
            const struct lhost *h = &L->cl[i].hosts[k];
            uint32_t busy = 0; /* its cores running a job's process (issue 27) */
            for (int32_t s = 0; s < h->nslots; s++)
                busy += batch_node_busy(L->eng, live_host_slot(h, s));
            wire_pack_map(r->reply, 7);
            wire_put_u64(r->reply, "running", busy);
            /* a session id is a node's to know: users see it blank (issue 23) */
            wire_put_str(r->reply, "sid", curve_may_see_sessions() ? h->sid : "");
            wire_put_str(r->reply, "node", h->name);
            wire_put_str(r->reply, "cluster", L->cl[i].name);
            wire_put_u64(r->reply, "cores", (uint64_t)h->ncores);
            wire_put_bool(r->reply, "active", h->up);
            wire_put_bool(r->reply, "procs", true);
        }
}

/* JOB_WAIT (issue 28): held until one of the jobs ended (daemon/endwait.c) */
static void wait_pack(void *role, uint64_t id, struct wire_buf *row)
{
    live_job_summary(role, live_job_find(role, id), row);
}

const struct endwait_ops live_endwait_ops = {" in this batch role", live_job_owner, wait_pack};

static void h_job_wait(struct req *r)
{
    endwait_request(r->L->endwait, r->L->daemon, r->m, r->reply);
}

/* PURGE (livepurge.c; docs/wire.md 6.10, 6.11) */
static void h_purge(struct req *r)
{
    live_purge_request(r->L, r->m, r->reply);
}

static void h_acct(struct req *r)
{
    live_acct_request(r->L, r->m, r->reply);
}

/* FILE_HAVE, FILE_PUT, FILE_GET (issue 26, livefiles.c) */
static void h_file(struct req *r)
{
    live_files_request(r->L, r->m, r->reply);
}

static const struct {
    uint32_t type;
    void (*fn)(struct req *r);
} handlers[] = {
    {WT_SUBMIT, h_submit},     {WT_PSUBMIT, h_psubmit}, {WT_JOB_LIST, h_job_list},
    {WT_JOB_GET, h_job_get},   {WT_CANCEL, h_cancel},   {WT_NODE_LIST, h_node_list},
    {WT_JOB_CTL, h_job_ctl},   {WT_ACCT, h_acct},                              /* issue 27 */
    {WT_JOB_WAIT, h_job_wait},                                                 /* issue 28 */
    {WT_FILE_HAVE, h_file},    {WT_FILE_PUT, h_file},   {WT_FILE_GET, h_file}, /* issue 26 */
    {WT_PURGE, h_purge},                                                       /* livepurge.c */
};

void live_dispatch(struct live *L, const struct wire_msg *m, const char *peer,
                   struct wire_buf *reply)
{
    struct req r = {L, m, peer, reply};
    if (livecmd_handles(m->type)) {
        livecmd_dispatch(L, m, reply);
        return;
    }
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].type == m->type) {
            handlers[i].fn(&r);
            return;
        }
    fail(&r, WE_TYPE,
         "%s is not handled by the batch role (it takes SUBMIT, PSUBMIT, JOB_LIST, "
         "JOB_GET, JOB_WAIT, CANCEL, JOB_CTL, PURGE, ACCT, NODE_LIST and the FILE_* messages)",
         m->desc->name);
}

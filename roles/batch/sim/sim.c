/*
 * sim.c - trace-driven simulator (see sim.h): an event loop over a simulated clock
 * that drives the batch engine with the trace's submissions and the completions it
 * computes itself, calling one scheduling cycle per distinct event time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/evheap.h"
#include "roles/batch/sim/sim.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void sim_input_free(struct sim_input *in)
{
    free(in->jobs);
    memset(in, 0, sizeof *in);
}

void sim_result_free(struct sim_result *r)
{
    free(r->run_off);
    free(r->run_cnt);
    free(r->run_node);
    free(r->run_len);
    memset(r, 0, sizeof *r);
}

/* A trace time in engine units: seconds, or ms of the time-scaled trace (sim.h). */
static int64_t scale_time(const struct sim_opts *o, int64_t t)
{
    if (o->time_scale <= 0)
        return t;
    return (int64_t)((long double)t * 1000 / (long double)o->time_scale + 0.5L);
}

static void cred_name(char *out, char prefix, int64_t n);

/* The walltime (engine units) of a record without a requested time: its class's
 * defaultwalltime (batch.ini [class NAME] / [class DEFAULT], seconds; ms when the trace
 * is time-scaled, as in the live role) when set, else its run time `run`. */
static int64_t default_walltime(const struct swf_job *s, const struct sim_opts *o, int64_t run)
{
    char cls[BATCH_NAME_MAX];
    if (s->queue >= 0 && s->queue < SWF_MAX_QUEUES && o->queue_names && o->queue_names[s->queue])
        snprintf(cls, sizeof cls, "%s", o->queue_names[s->queue]);
    else
        cred_name(cls, 'q', s->queue);
    int64_t d = o->cfg ? batch_config_class_walltime(o->cfg, cls, false) : 0;
    if (d <= 0)
        return run;
    return o->time_scale > 0 ? d * 1000 : d;
}

/* Converts record s into job j; returns 0 when kept, else the counter to bump. */
static size_t *convert(const struct swf_job *s, const struct sim_opts *o, struct sim_input *in,
                       struct sim_job *j)
{
    int32_t procs = s->procs > 0 ? s->procs : s->req_procs;
    if (procs <= 0)
        return &in->skip_no_procs;
    if (s->run < 0)
        return &in->skip_no_run;
    if (s->submit < 0)
        return &in->skip_bad_submit;
    if (procs > o->procs)
        return &in->skip_too_wide;
    memset(j, 0, sizeof *j);
    j->id = s->id;
    j->submit = scale_time(o, s->submit);
    j->procs = procs;
    j->user = s->user;
    j->group = s->group;
    j->queue = s->queue;
    int64_t run = scale_time(o, s->run);
    int64_t req = s->req_time > 0 ? scale_time(o, s->req_time) : default_walltime(s, o, run);
    j->walltime = o->estimate == SIM_EST_ACTUAL ? run : req;
    if (j->walltime < 1)
        j->walltime = 1;
    j->run = run > j->walltime ? j->walltime : run;
    j->start = j->end = -1;
    j->first_estimate = -1;
    return NULL;
}

static int job_cmp(const void *a, const void *b)
{
    const struct sim_job *x = a, *y = b;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end; /* end holds the file order here */
}

/* Checks that the machine can be built. 0, or -1 with a message in err. */
static int check_machine(const struct sim_opts *o, char *err, size_t errlen)
{
    if (o->procs < 1 || o->node_procs < 1 || o->procs % o->node_procs)
        return fail(err, errlen, "machine of %lld processors cannot be split into nodes of %d",
                    (long long)o->procs, o->node_procs);
    if (o->procs / o->node_procs > SIM_MAX_NODES)
        return fail(err, errlen, "%lld nodes of %d processors: at most %d nodes are simulated",
                    (long long)(o->procs / o->node_procs), o->node_procs, SIM_MAX_NODES);
    return 0;
}

static int no_jobs(size_t records, const struct sim_opts *o, char *err, size_t errlen)
{
    return fail(err, errlen, "no job to simulate (the trace has %zu records; --start %zu)", records,
                o->start);
}

/* Takes record rec, the next in file order: converts it into in->jobs[in->njobs]
 * (room for which the caller made) if it is usable and inside the job window, else
 * counts why it was left out. *kept counts the usable records so far. */
static void admit(const struct swf_job *rec, const struct sim_opts *o, struct sim_input *in,
                  size_t *kept)
{
    struct sim_job *j = &in->jobs[in->njobs];
    size_t *why = convert(rec, o, in, j);
    if (*kept < o->start) { /* before the window: not counted either way */
        *kept += why == NULL;
        in->before_window += why == NULL;
        return;
    }
    if (why) {
        (*why)++;
        return;
    }
    ++*kept;
    in->no_request += rec->req_time <= 0;
    in->truncated += rec->run > j->walltime;
    in->njobs++;
}

/* Whether the window is full: no more jobs are taken from the trace. */
static bool window_full(const struct sim_input *in, const struct sim_opts *o)
{
    return o->count && in->njobs >= o->count;
}

/* Sorts in->jobs by submit time (file order among equal ones) unless they already
 * are. The jobs must not have run yet. */
static void sort_jobs(struct sim_input *in)
{
    bool sorted = true; /* traces usually are: skip the sort then */
    for (size_t i = 1; i < in->njobs && sorted; i++)
        sorted = in->jobs[i - 1].submit <= in->jobs[i].submit;
    if (sorted)
        return;
    for (size_t i = 0; i < in->njobs; i++)
        in->jobs[i].end = (int64_t)i; /* file order, for a stable sort */
    qsort(in->jobs, in->njobs, sizeof *in->jobs, job_cmp);
    for (size_t i = 0; i < in->njobs; i++)
        in->jobs[i].end = -1;
}

int sim_prepare(const struct swf_trace *t, const struct sim_opts *o, struct sim_input *in,
                char *err, size_t errlen)
{
    if (check_machine(o, err, errlen) < 0)
        return -1;
    if (!(in->jobs = malloc((t->njobs + 1) * sizeof *in->jobs)))
        return fail(err, errlen, "out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < t->njobs && !window_full(in, o); i++)
        admit(&t->jobs[i], o, in, &kept);
    if (in->njobs == 0) {
        sim_input_free(in);
        return no_jobs(t->njobs, o, err, errlen);
    }
    sort_jobs(in);
    return 0;
}

/* ---- the feed: the jobs of a run, taken from the source as the clock needs them ---- */

struct feed {
    struct sim_input *in;
    const struct sim_opts *o;
    const struct sim_source *src; /* NULL: in->jobs holds every job */
    struct sim_result *r;         /* with record_nodes, run_off / run_cnt grow with the jobs */
    size_t cap;                   /* of in->jobs (and r->run_off, r->run_cnt) */
    size_t kept, records;         /* usable records seen, records seen */
    const struct swf_job *recs;   /* the source's current block */
    size_t nrecs, next;
    bool ended;    /* the source has no more jobs for us */
    bool unsorted; /* a job was submitted before the one ahead of it in the file */
};

/* Makes room for cap jobs in in->jobs and, with record_nodes, in the node runs. */
static int feed_reserve(struct feed *f, size_t cap)
{
    struct sim_result *r = f->r;
    void *p = realloc(f->in->jobs, cap * sizeof *f->in->jobs);
    if (!p)
        return -1;
    f->in->jobs = p;
    if (f->o->record_nodes) {
        if (!(p = realloc(r->run_off, cap * sizeof *r->run_off)))
            return -1;
        r->run_off = p;
        if (!(p = realloc(r->run_cnt, cap * sizeof *r->run_cnt)))
            return -1;
        r->run_cnt = p;
        memset(r->run_off + f->cap, 0, (cap - f->cap) * sizeof *r->run_off);
        memset(r->run_cnt + f->cap, 0, (cap - f->cap) * sizeof *r->run_cnt);
    }
    f->cap = cap;
    return 0;
}

/* Takes the source's next record. 1, 0 at its end, -1 with a message in err. */
static int feed_record(struct feed *f, char *err, size_t errlen)
{
    if (f->next == f->nrecs) {
        if (f->src->next(f->src->arg, &f->recs, &f->nrecs, err, errlen) < 0)
            return -1;
        f->next = 0;
        if (f->nrecs == 0)
            return 0;
    }
    if (f->in->njobs == f->cap && feed_reserve(f, f->cap ? 2 * f->cap : 4096) < 0)
        return fail(err, errlen, "out of memory");
    f->records++;
    admit(&f->recs[f->next++], f->o, f->in, &f->kept);
    return 1;
}

/* Makes job i available if the trace has it: 1 if in->jobs[i] exists, 0 if there
 * are no more jobs, -1 with a message in err (f->unsorted set, and no message, when
 * the trace turned out not to be in submit order). */
static inline int feed_has(struct feed *f, size_t i, char *err, size_t errlen)
{
    struct sim_input *in = f->in;
    while (i >= in->njobs) {
        if (!f->src || f->ended)
            return 0;
        size_t n = in->njobs;
        int rc = window_full(in, f->o) ? 0 : feed_record(f, err, errlen);
        if (rc <= 0) {
            f->ended = rc == 0;
            return rc;
        }
        if (in->njobs > n && n > 0 && in->jobs[n].submit < in->jobs[n - 1].submit) {
            f->unsorted = true;
            return -1;
        }
    }
    return 1;
}

/* Writes prefix + decimal n into out (no snprintf: this runs per job). */
static void cred_name(char *out, char prefix, int64_t n)
{
    char tmp[24];
    int k = 0;
    if (n < 0) {
        strcpy(out, "unknown");
        return;
    }
    do
        tmp[k++] = (char)('0' + n % 10);
    while ((n /= 10) > 0);
    *out++ = prefix;
    while (k)
        *out++ = tmp[--k];
    *out = '\0';
}

/* The spec of the last job submitted, whose names the next job mostly shares. */
struct last_spec {
    struct batch_job_spec s;
    int64_t user, group, queue; /* the numbers its names were written from */
    bool valid;
};

static int submit(struct batch_engine *e, const struct sim_job *j, size_t idx,
                  const struct sim_opts *o, struct last_spec *ls)
{
    struct batch_job_spec *s = &ls->s; /* names: only those that change are written */
    s->id = idx + 1;
    if (!ls->valid || j->user != ls->user)
        cred_name(s->user, 'u', j->user);
    if (!ls->valid || j->group != ls->group)
        cred_name(s->group, 'g', j->group);
    s->account[0] = s->qos[0] = '\0';
    if (!ls->valid || j->queue != ls->queue) {
        if (j->queue >= 0 && j->queue < SWF_MAX_QUEUES && o->queue_names &&
            o->queue_names[j->queue])
            strcpy(s->class_, o->queue_names[j->queue]); /* swf.c keeps names under 60 bytes */
        else
            cred_name(s->class_, 'q', j->queue);
    }
    ls->user = j->user;
    ls->group = j->group;
    ls->queue = j->queue;
    ls->valid = true;
    s->tasks = j->procs;
    s->per_task = (struct batch_res){1, 0, 0, 0};
    s->walltime = j->walltime;
    s->submit = j->submit;
    s->hold = false;
    s->early_start = true;
    s->upriority = 0;
    return batch_job_submit(e, s);
}

/* Appends job idx's node list as runs of consecutive nodes. */
static int record_nodes(struct batch_engine *e, size_t idx, struct sim_result *r, size_t *cap)
{
    struct batch_job_info info;
    if (batch_job_info(e, idx + 1, &info) < 0)
        return -1;
    size_t k = r->nruns;
    r->run_off[idx] = k;
    if (k + (size_t)info.nnodes > *cap) {
        size_t nc = (*cap ? *cap : 1024);
        while (nc < k + (size_t)info.nnodes)
            nc *= 2;
        int32_t *a = realloc(r->run_node, nc * sizeof *a), *b;
        if (a)
            r->run_node = a;
        if (!a || !(b = realloc(r->run_len, nc * sizeof *b)))
            return -1;
        r->run_len = b;
        *cap = nc;
    }
    for (int32_t i = 0; i < info.nnodes; i++) {
        if (k > r->run_off[idx] && r->run_node[k - 1] + r->run_len[k - 1] == info.nodes[i]) {
            r->run_len[k - 1]++;
            continue;
        }
        r->run_node[k] = info.nodes[i];
        r->run_len[k++] = 1;
    }
    r->run_cnt[idx] = (int32_t)(k - r->run_off[idx]);
    r->nruns = k;
    return 0;
}

/* The k-th smallest of w[0, n) (quickselect; reorders w). */
static double kth(double *w, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = w[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (w[i] < pivot)
                i++;
            while (w[j] > pivot)
                j--;
            if (i <= j) {
                double t = w[i];
                w[i++] = w[j];
                w[j] = t;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return w[k];
    }
    return w[k];
}

/* Wait, slowdown and utilization figures over the finished jobs. */
static int summarize(const struct sim_input *in, const struct sim_opts *o, struct sim_result *r)
{
    double *w = malloc(in->njobs * sizeof *w), work = 0, bsld = 0, err = 0;
    double unit = o->time_scale > 0 ? 1000 : 1; /* engine units per second */
    if (!w)
        return -1;
    r->first_submit = in->jobs[0].submit;
    r->last_end = r->first_submit;
    for (size_t i = 0; i < in->njobs; i++) {
        const struct sim_job *j = &in->jobs[i];
        double wait = (double)(j->start - j->submit) / unit, run = (double)j->run / unit;
        double sd = (wait + run) / (run > 10 ? run : 10);
        w[i] = wait;
        bsld += sd > 1 ? sd : 1;
        work += run * j->procs;
        if (j->end > r->last_end)
            r->last_end = j->end;
        if (j->first_estimate >= 0)
            err += (double)llabs(j->first_estimate - j->start) / unit;
        r->mean_wait += wait;
        if (wait > r->max_wait)
            r->max_wait = wait;
    }
    size_t n = in->njobs;
    r->median_wait = kth(w, n, n / 2);
    if (n % 2 == 0)
        r->median_wait = (r->median_wait + kth(w, n, n / 2 - 1)) / 2;
    r->mean_wait /= (double)n;
    r->mean_bsld = bsld / (double)n;
    double span = (double)(r->last_end - r->first_submit) / unit;
    r->utilization = span > 0 ? work / ((double)o->procs * span) : 0;
    r->est_mae = o->cfg->estimates ? err / (double)n : -1;
    r->jobs = n;
    free(w);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Creates the engine and the machine: procs / node_procs identical nodes. */
static struct batch_engine *machine(const struct sim_opts *o, char *err, size_t errlen)
{
    struct batch_engine *e = batch_engine_new(o->cfg);
    if (!e) {
        fail(err, errlen, "bad engine configuration: %s", strerror(errno));
        return NULL;
    }
    struct batch_node_spec n;
    memset(&n, 0, sizeof n);
    n.cap.procs = o->node_procs;
    for (int64_t i = 0; i < o->procs / o->node_procs; i++) {
        snprintf(n.name, sizeof n.name, "n%05lld", (long long)i);
        if (batch_node_add(e, &n) < 0) {
            fail(err, errlen, "adding node %s: %s", n.name, strerror(errno));
            batch_engine_destroy(&e);
            return NULL;
        }
    }
    return e;
}

struct delay_pair {
    int64_t id, d, heard;
};

static int delay_cmp(const void *a, const void *b)
{
    const struct delay_pair *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

int sim_load_delays(const char *path, int64_t **ids, int64_t **delays, int64_t **heard, size_t *n,
                    char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    struct delay_pair *v = NULL;
    size_t nv = 0, cap = 0, line = 0;
    char buf[256];
    *ids = *delays = *heard = NULL;
    *n = 0;
    if (!f)
        return fail(err, errlen, "--start-delays %s: %s", path, strerror(errno));
    while (fgets(buf, sizeof buf, f)) {
        line++;
        char *p = buf + strspn(buf, " \t");
        if (!*p || *p == '\n' || *p == '#' || *p == ';')
            continue;
        long long id, d, hd = -1;
        char tail[2];
        for (char *q = p; *q; q++)
            if (*q == ',')
                *q = ' ';
        int got = sscanf(p, "%lld %lld %lld %1s", &id, &d, &hd, tail);
        if ((got != 2 && got != 3) || id < 0 || (got == 3 && (hd < 0 || hd < d))) {
            fclose(f);
            free(v);
            return fail(err, errlen,
                        "--start-delays %s line %zu: want JOB DELAY [HEARD] (integers, "
                        "HEARD >= DELAY and >= 0)",
                        path, line);
        }
        if (nv == cap) {
            size_t nc = cap ? cap * 2 : 256;
            void *q = realloc(v, nc * sizeof *v);
            if (!q) {
                fclose(f);
                free(v);
                return fail(err, errlen, "out of memory");
            }
            v = q;
            cap = nc;
        }
        v[nv++] = (struct delay_pair){id, d, hd};
    }
    fclose(f);
    if (nv)
        qsort(v, nv, sizeof *v, delay_cmp);
    *ids = malloc((nv ? nv : 1) * sizeof **ids);
    *delays = malloc((nv ? nv : 1) * sizeof **delays);
    *heard = malloc((nv ? nv : 1) * sizeof **heard);
    if (!*ids || !*delays || !*heard) {
        free(*ids);
        free(*delays);
        free(*heard);
        free(v);
        *ids = *delays = *heard = NULL;
        return fail(err, errlen, "out of memory");
    }
    for (size_t i = 0; i < nv; i++) {
        (*ids)[i] = v[i].id;
        (*delays)[i] = v[i].d;
        (*heard)[i] = v[i].heard;
    }
    free(v);
    *n = nv;
    return 0;
}

static int64_t scaled_signed(const struct sim_opts *o, int64_t v)
{
    return v < 0 ? -scale_time(o, -v) : scale_time(o, v);
}

/* The start delay of SWF job id (--start-delays) and when the role heard of it (-1:
 * not recorded), in engine units; false if none. */
static bool start_delay(const struct sim_opts *o, int64_t id, int64_t *d, int64_t *heard)
{
    size_t lo = 0, hi = o->nd;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->d_id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == o->nd || o->d_id[lo] != id)
        return false;
    *d = scaled_signed(o, o->d_delay[lo]);
    *heard = o->d_heard && o->d_heard[lo] >= 0 ? scaled_signed(o, o->d_heard[lo]) : -1;
    return true;
}

/* Handles the jobs started by the last cycle at time t. reports: their start delays
 * without a heard time, applied after the cycle of time = the resource manager's
 * start; heard: those with one, applied before the cycle of that instant (time = when
 * the role heard, the start itself = j->start + the delay). */
static int collect_started(struct batch_engine *e, struct sim_input *in, const struct sim_opts *o,
                           struct sim_result *r, struct heap *h, struct heap *reports,
                           struct heap *heard, int64_t t, size_t *cap)
{
    const uint64_t *ids;
    size_t n = batch_cycle_started(e, &ids);
    for (size_t k = 0; k < n; k++) {
        size_t idx = (size_t)ids[k] - 1;
        struct sim_job *j = &in->jobs[idx];
        int64_t d, hd;
        j->start = t;
        j->end = t + j->run;
        if (heap_push(h, (struct ev){j->end, idx}) < 0)
            return -1;
        if (o->nd && start_delay(o, j->id, &d, &hd) && d &&
            heap_push(hd >= 0 ? heard : reports, (struct ev){t + (hd >= 0 ? hd : d), idx}) < 0)
            return -1;
        if (o->record_nodes && record_nodes(e, idx, r, cap) < 0)
            return -1;
    }
    return 0;
}

/* The first estimate of the jobs submitted at this event, [from, to). */
static void first_estimates(struct batch_engine *e, struct sim_input *in, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        struct batch_job_info info;
        struct sim_job *j = &in->jobs[i];
        if (j->start >= 0)
            j->first_estimate = j->start;
        else if (batch_job_info(e, i + 1, &info) == 0 && info.estimate != BATCH_NEVER)
            j->first_estimate = info.estimate;
    }
}

/* Runs the simulation over the jobs of f, from an empty machine: fills their
 * start and end and the figures in r. 0, or -1 with a message in err (f->unsorted
 * set, and no message, when the source turned out not to be in submit order). */
static int run_loop(struct feed *f, struct sim_result *r, char *err, size_t errlen)
{
    const struct sim_opts *o = f->o;
    struct sim_input *in = f->in;
    struct heap h = {NULL, 0, 0}, reports = {NULL, 0, 0}, heard = {NULL, 0, 0};
    struct last_spec ls = {.valid = false};
    size_t cap = 0, i = 0, done = 0, pending = 0, loops = 0;
    int rc = -1, more;
    bool diag_done = o->diag == NULL;
    struct batch_engine *e = machine(o, err, errlen);
    if (!e || (more = feed_has(f, 0, err, errlen)) < 0)
        goto out;
    if (more == 0) {
        no_jobs(f->src ? f->records : 0, o, err, errlen);
        goto out;
    }
    while (more > 0 || h.n) {
        int64_t t = more > 0 ? in->jobs[i].submit : INT64_MAX;
        if (h.n && h.v[0].t < t)
            t = h.v[0].t;
        if (heard.n && heard.v[0].t < t && pending > 0)
            t = heard.v[0].t; /* the live role's turn that heard a start cycles */
        /* start delays learnt before t: after the cycle of their own instant, as the
         * live role hears of the cluster's start after the turn that decided it */
        while (reports.n && reports.v[0].t < t) {
            struct ev x = heap_pop(&reports);
            if (in->jobs[x.job].end > x.t && batch_job_started_at(e, x.job + 1, x.t) < 0)
                goto engine_err;
        }
        /* recorded heard times: in the turn of that instant, before its cycle */
        while (heard.n && heard.v[0].t <= t) {
            struct ev x = heap_pop(&heard);
            struct sim_job *hj = &in->jobs[x.job];
            int64_t d, hd;
            if (hj->end > x.t && start_delay(o, hj->id, &d, &hd) &&
                batch_job_started_at(e, x.job + 1, hj->start + d) < 0)
                goto engine_err;
        }
        for (; h.n && h.v[0].t == t; done++)
            if (batch_job_finish(e, heap_pop(&h).job + 1, t) < 0)
                goto engine_err;
        size_t from = i;
        for (; more > 0 && in->jobs[i].submit == t; pending++) {
            if (submit(e, &in->jobs[i], i, o, &ls) < 0)
                goto engine_err;
            if ((more = feed_has(f, ++i, err, errlen)) < 0)
                goto out;
        }
        if (pending > 0) {
            struct batch_cycle_stats st;
            if (batch_cycle(e, t, &st) < 0)
                goto engine_err;
            r->cycles++;
            r->idle_cycles += st.idle;
            r->replans += st.replanned;
            pending -= (size_t)(st.started + st.backfilled);
            if (collect_started(e, in, o, r, &h, &reports, &heard, t, &cap) < 0)
                goto nomem;
            if (o->cfg->estimates)
                first_estimates(e, in, from, i);
            if (!diag_done && t >= o->diag_at) {
                o->diag(o->arg, e, t);
                diag_done = true;
            }
        }
        if (pending > 0 && h.n == 0 && more == 0) {
            fail(err, errlen, "%zu jobs can never start on this machine", pending);
            goto out;
        }
        if (o->progress && ++loops % 16384 == 0)
            o->progress(o->arg, done, in->njobs, t);
    }
    if (summarize(in, o, r) < 0)
        goto nomem;
    rc = 0;
    goto out;
engine_err:
    fail(err, errlen, "engine: %s", strerror(errno));
    goto out;
nomem:
    fail(err, errlen, "out of memory");
out:
    batch_engine_destroy(&e);
    free(h.v);
    free(reports.v);
    free(heard.v);
    return rc;
}

int sim_run(struct sim_input *in, const struct sim_opts *o, struct sim_result *r, char *err,
            size_t errlen)
{
    double t0 = now_s();
    struct feed f = {.in = in, .o = o, .r = r};
    if (feed_reserve(&f, in->njobs + 1) < 0)
        return fail(err, errlen, "out of memory");
    if (run_loop(&f, r, err, errlen) < 0)
        return -1;
    r->sim_wall_s = now_s() - t0;
    r->jobs_per_s = r->sim_wall_s > 0 ? (double)in->njobs / r->sim_wall_s : 0;
    return 0;
}

/* After a streamed run found the trace out of submit order: takes the rest of the
 * source, sorts the jobs and forgets the run's results. 0 or -1 (err). */
static int feed_rewind(struct feed *f, struct sim_result *r, char *err, size_t errlen)
{
    int rc;
    while (!window_full(f->in, f->o) && (rc = feed_record(f, err, errlen)) != 0)
        if (rc < 0)
            return -1;
    f->src = NULL;
    for (size_t i = 0; i < f->in->njobs; i++) {
        struct sim_job *j = &f->in->jobs[i];
        j->start = j->end = j->first_estimate = -1;
    }
    sort_jobs(f->in);
    size_t *off = r->run_off;
    int32_t *cnt = r->run_cnt;
    r->run_off = NULL;
    r->run_cnt = NULL;
    sim_result_free(r); /* the figures and node runs; the per-job arrays are kept */
    r->run_off = off;
    r->run_cnt = cnt;
    return 0;
}

int sim_stream(struct sim_input *in, const struct sim_opts *o, const struct sim_source *src,
               struct sim_result *r, char *err, size_t errlen)
{
    double t0 = now_s();
    struct feed f = {.in = in, .o = o, .src = src, .r = r};
    if (check_machine(o, err, errlen) < 0)
        return -1;
    int rc = run_loop(&f, r, err, errlen);
    if (rc < 0 && f.unsorted) {
        if (feed_rewind(&f, r, err, errlen) < 0)
            return -1;
        rc = run_loop(&f, r, err, errlen);
    }
    if (rc < 0)
        return -1;
    r->sim_wall_s = now_s() - t0;
    r->jobs_per_s = r->sim_wall_s > 0 ? (double)in->njobs / r->sim_wall_s : 0;
    return 0;
}

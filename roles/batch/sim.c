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

#include "roles/batch/sim.h"

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
    j->submit = s->submit;
    j->procs = procs;
    j->user = s->user;
    j->group = s->group;
    j->queue = s->queue;
    int64_t req = s->req_time > 0 ? s->req_time : s->run;
    j->walltime = o->estimate == SIM_EST_ACTUAL ? s->run : req;
    if (j->walltime < 1)
        j->walltime = 1;
    j->run = s->run > j->walltime ? j->walltime : s->run;
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

int sim_prepare(const struct swf_trace *t, const struct sim_opts *o, struct sim_input *in,
                char *err, size_t errlen)
{
    if (o->procs < 1 || o->node_procs < 1 || o->procs % o->node_procs)
        return fail(err, errlen, "machine of %lld processors cannot be split into nodes of %d",
                    (long long)o->procs, o->node_procs);
    if (o->procs / o->node_procs > SIM_MAX_NODES)
        return fail(err, errlen, "%lld nodes of %d processors: at most %d nodes are simulated",
                    (long long)(o->procs / o->node_procs), o->node_procs, SIM_MAX_NODES);
    if (!(in->jobs = malloc((t->njobs + 1) * sizeof *in->jobs)))
        return fail(err, errlen, "out of memory");
    size_t kept = 0, limit = o->count ? o->count : SIZE_MAX;
    for (size_t i = 0; i < t->njobs && in->njobs < limit; i++) {
        struct sim_job *j = &in->jobs[in->njobs];
        size_t *why = convert(&t->jobs[i], o, in, j);
        if (kept < o->start) { /* before the window: not counted either way */
            kept += why == NULL;
            in->before_window += why == NULL;
            continue;
        }
        if (why) {
            (*why)++;
            continue;
        }
        kept++;
        in->no_request += t->jobs[i].req_time <= 0;
        in->truncated += t->jobs[i].run > j->walltime;
        j->end = (int64_t)in->njobs; /* file order, for a stable sort */
        in->njobs++;
    }
    if (in->njobs == 0) {
        sim_input_free(in);
        return fail(err, errlen, "no job to simulate (the trace has %zu records; --start %zu)",
                    t->njobs, o->start);
    }
    bool sorted = true; /* traces usually are: skip the sort then */
    for (size_t i = 1; i < in->njobs && sorted; i++)
        sorted = in->jobs[i - 1].submit <= in->jobs[i].submit;
    if (!sorted)
        qsort(in->jobs, in->njobs, sizeof *in->jobs, job_cmp);
    for (size_t i = 0; i < in->njobs; i++)
        in->jobs[i].end = -1;
    return 0;
}

/* ---- a binary min-heap of (end time, job index) ---- */
struct ev {
    int64_t t;
    size_t job;
};
struct heap {
    struct ev *v;
    size_t n;
};

static void heap_push(struct heap *h, struct ev x)
{
    size_t i = h->n++;
    for (; i > 0 && h->v[(i - 1) / 2].t > x.t; i = (i - 1) / 2)
        h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = x;
}

static struct ev heap_pop(struct heap *h)
{
    struct ev top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1].t < h->v[c].t)
            c++;
        if (h->v[c].t >= x.t)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = x;
    return top;
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

static int submit(struct batch_engine *e, const struct sim_job *j, size_t idx,
                  const struct sim_opts *o)
{
    struct batch_job_spec s;
    s.id = idx + 1;
    cred_name(s.user, 'u', j->user);
    cred_name(s.group, 'g', j->group);
    s.account[0] = s.qos[0] = '\0';
    if (j->queue >= 0 && j->queue < SWF_MAX_QUEUES && o->queue_names && o->queue_names[j->queue])
        strcpy(s.class_, o->queue_names[j->queue]); /* swf.c keeps names under 60 bytes */
    else
        cred_name(s.class_, 'q', j->queue);
    s.tasks = j->procs;
    s.per_task = (struct batch_res){1, 0, 0, 0};
    s.walltime = j->walltime;
    s.submit = j->submit;
    s.hold = false;
    s.early_start = true;
    s.upriority = 0;
    return batch_job_submit(e, &s);
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
    if (!w)
        return -1;
    r->first_submit = in->jobs[0].submit;
    r->last_end = r->first_submit;
    for (size_t i = 0; i < in->njobs; i++) {
        const struct sim_job *j = &in->jobs[i];
        double wait = (double)(j->start - j->submit), run = (double)j->run;
        double sd = (wait + run) / (run > 10 ? run : 10);
        w[i] = wait;
        bsld += sd > 1 ? sd : 1;
        work += run * j->procs;
        if (j->end > r->last_end)
            r->last_end = j->end;
        if (j->first_estimate >= 0)
            err += (double)llabs(j->first_estimate - j->start);
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
    double span = (double)(r->last_end - r->first_submit);
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

/* Handles the jobs started by the last cycle at time t. */
static int collect_started(struct batch_engine *e, struct sim_input *in, const struct sim_opts *o,
                           struct sim_result *r, struct heap *h, int64_t t, size_t *cap)
{
    const uint64_t *ids;
    size_t n = batch_cycle_started(e, &ids);
    for (size_t k = 0; k < n; k++) {
        size_t idx = (size_t)ids[k] - 1;
        struct sim_job *j = &in->jobs[idx];
        j->start = t;
        j->end = t + j->run;
        heap_push(h, (struct ev){j->end, idx});
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

int sim_run(struct sim_input *in, const struct sim_opts *o, struct sim_result *r, char *err,
            size_t errlen)
{
    double t0 = now_s();
    struct heap h = {malloc((in->njobs + 1) * sizeof *h.v), 0};
    size_t cap = 0, i = 0, done = 0, pending = 0, loops = 0;
    int rc = -1;
    bool diag_done = o->diag == NULL;
    struct batch_engine *e = machine(o, err, errlen);
    if (o->record_nodes && (!(r->run_off = calloc(in->njobs + 1, sizeof *r->run_off)) ||
                            !(r->run_cnt = calloc(in->njobs + 1, sizeof *r->run_cnt)))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    if (!e)
        goto out;
    if (!h.v) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    while (i < in->njobs || h.n) {
        int64_t t = i < in->njobs ? in->jobs[i].submit : INT64_MAX;
        if (h.n && h.v[0].t < t)
            t = h.v[0].t;
        for (; h.n && h.v[0].t == t; done++)
            if (batch_job_finish(e, heap_pop(&h).job + 1, t) < 0)
                goto engine_err;
        size_t from = i;
        for (; i < in->njobs && in->jobs[i].submit == t; i++, pending++)
            if (submit(e, &in->jobs[i], i, o) < 0)
                goto engine_err;
        if (pending > 0) {
            struct batch_cycle_stats st;
            if (batch_cycle(e, t, &st) < 0)
                goto engine_err;
            r->cycles++;
            r->idle_cycles += st.idle;
            r->replans += st.replanned;
            pending -= (size_t)(st.started + st.backfilled);
            if (collect_started(e, in, o, r, &h, t, &cap) < 0)
                goto nomem;
            if (o->cfg->estimates)
                first_estimates(e, in, from, i);
            if (!diag_done && t >= o->diag_at) {
                o->diag(o->arg, e, t);
                diag_done = true;
            }
        }
        if (pending > 0 && h.n == 0 && i == in->njobs) {
            fail(err, errlen, "%zu jobs can never start on this machine", pending);
            goto out;
        }
        if (o->progress && ++loops % 16384 == 0)
            o->progress(o->arg, done, in->njobs, t);
    }
    if (summarize(in, o, r) < 0)
        goto nomem;
    r->sim_wall_s = now_s() - t0;
    r->jobs_per_s = r->sim_wall_s > 0 ? (double)in->njobs / r->sim_wall_s : 0;
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
    return rc;
}

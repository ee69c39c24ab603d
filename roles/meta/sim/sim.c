/*
 * sim.c - the meta simulator's event loop (see sim.h): one batch engine per site on a
 * shared simulated clock, local jobs submitted to their site, grid jobs placed by the
 * placement policy (place.h) with a bound reservation, re-evaluation of placed jobs that
 * have not started when a site's plan changes.
 *
 * Engine job ids are the workload index + 1 in every engine: a job is in one engine at a
 * time (a move withdraws it from the old site after it is queued at the new one).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/evheap.h"
#include "roles/meta/sim/sim.h"

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

const char *msim_kind_name(int kind)
{
    return kind == MSIM_POOLED ? "pooled" : meta_policy_name((enum meta_policy)kind);
}

double msim_bsld(int64_t wait, int64_t run)
{
    double sd = (double)(wait + run) / (double)(run > 10 ? run : 10);
    return sd > 1 ? sd : 1;
}

void msim_result_free(struct msim_result *r)
{
    free(r->jobs);
    r->jobs = NULL;
}

/* One run's state. */
struct run {
    const struct msim_scenario *s;
    const struct msim_workload *w;
    int kind;
    size_t nengines;
    struct batch_engine *e[MSIM_MAX_SITES];
    struct meta_site info[MSIM_MAX_SITES]; /* the information service's view */
    double speed[MSIM_MAX_SITES];
    bool dirty[MSIM_MAX_SITES];   /* a cycle is due at this time */
    bool changed[MSIM_MAX_SITES]; /* a job ended before its walltime: re-evaluate */
    int64_t wake[MSIM_MAX_SITES]; /* batch_next_wakeup after the last cycle */
    int64_t pend_work[MSIM_MAX_SITES], run_end[MSIM_MAX_SITES], run_procs[MSIM_MAX_SITES];
    struct heap h;
    struct msim_result *r;
    char (*resv)[BATCH_NAME_MAX];          /* per job: its reservation at its site, "" none */
    int64_t *resv_start;                   /* per job: that reservation's start */
    size_t *placed, nplaced, capplaced;    /* grid jobs placed and not started, oldest first */
    bool *listed;                          /* per job: in placed[] */
    size_t *revoked, nrevoked, caprevoked; /* grid jobs whose reservation a site released */
    uint64_t rank_state;
    int64_t now;
    size_t pending; /* queued at some site, not started */
};

static int64_t at_speed(int64_t t, double speed)
{
    int64_t v = (int64_t)((double)t / speed + 0.999999);
    return v < 1 ? 1 : v;
}

static int submit(struct run *x, size_t idx, int32_t site)
{
    const struct sim_job *j = &x->w->in.jobs[idx];
    struct batch_job_spec s;
    memset(&s, 0, sizeof s);
    s.id = idx + 1;
    snprintf(s.user, sizeof s.user, "u%d", j->user);
    snprintf(s.group, sizeof s.group, "g%d", j->group);
    s.tasks = j->procs;
    s.per_task.procs = 1;
    s.walltime = at_speed(j->walltime, x->speed[site]);
    s.submit = x->now;
    s.early_start = true; /* B5: it may start before its reservation where the site can */
    if (x->kind != MSIM_POOLED && x->w->grid[idx]) {
        s.grid = true; /* the site's grid rule (batch.h grid_wait_bound, grid_class) */
        if (x->s->sites[site].cfg.grid_class[0])
            snprintf(s.class_, sizeof s.class_, "%s", x->s->sites[site].cfg.grid_class);
    }
    if (batch_job_submit(x->e[site], &s) < 0)
        return -1;
    x->r->jobs[idx].site = site;
    x->pending++;
    x->pend_work[site] += (int64_t)j->procs * s.walltime;
    x->dirty[site] = true;
    return 0;
}

/* The earliest start of job idx at site (BATCH_NEVER if none). */
static int64_t estimate(struct run *x, size_t idx, int32_t site)
{
    const struct sim_job *j = &x->w->in.jobs[idx];
    struct batch_request q;
    memset(&q, 0, sizeof q);
    q.tasks = j->procs;
    q.per_task.procs = 1;
    q.job = idx + 1;
    struct batch_window win;
    if (batch_estimate(x->e[site], &q, at_speed(j->walltime, x->speed[site]), x->now, &win, 1) == 0)
        return BATCH_NEVER;
    return win.from;
}

/* Reserves site's nodes for job idx from `start` (bound to it alone). 0 or -1. */
static int reserve(struct run *x, size_t idx, int32_t site, int64_t start)
{
    const struct sim_job *j = &x->w->in.jobs[idx];
    uint64_t id = idx + 1;
    struct batch_resv_req q;
    memset(&q, 0, sizeof q);
    q.acl.jobs = &id;
    q.acl.njobs = 1;
    q.tasks = j->procs;
    q.per_task.procs = 1;
    q.start = start;
    q.duration = at_speed(j->walltime, x->speed[site]);
    q.grid = true;
    const char *gcls = x->s->sites[site].cfg.grid_class;
    q.partition = gcls[0] ? gcls : NULL;
    char why[160];
    if (batch_resv_create(x->e[site], &q, x->now, x->resv[idx], BATCH_NAME_MAX, why, sizeof why) <
        0) {
        x->resv[idx][0] = '\0';
        return -1;
    }
    x->resv_start[idx] = start;
    x->dirty[site] = true;
    return 0;
}

static void release(struct run *x, size_t idx, int32_t site)
{
    if (x->resv[idx][0]) {
        batch_resv_release(x->e[site], x->resv[idx]);
        x->resv[idx][0] = '\0';
        x->dirty[site] = true;
    }
}

static void refresh_info(struct run *x)
{
    for (size_t s = 0; s < x->nengines; s++) {
        int64_t rem = x->run_end[s] - x->now * x->run_procs[s];
        x->info[s].queued_work = x->pend_work[s] + (rem > 0 ? rem : 0);
    }
}

static struct meta_request request(const struct run *x, size_t idx)
{
    const struct sim_job *j = &x->w->in.jobs[idx];
    return (struct meta_request){.procs = j->procs, .walltime = j->walltime};
}

/* Appends idx to the growing list *v (n used, cap allocated). 0 or -1. */
static int push_idx(size_t **v, size_t *n, size_t *cap, size_t idx)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        void *q = realloc(*v, nc * sizeof **v);
        if (!q)
            return -1;
        *v = q;
        *cap = nc;
    }
    (*v)[(*n)++] = idx;
    return 0;
}

/* Places grid job idx (M3): eligible sites, estimates, ranking, reservation, submit. */
static int place(struct run *x, size_t idx)
{
    int cand[MSIM_MAX_SITES] = {0}, order[MSIM_MAX_SITES];
    int64_t start[MSIM_MAX_SITES] = {0};
    size_t n = 0;
    struct meta_request rq = request(x, idx);
    enum meta_policy p = (enum meta_policy)x->kind;
    refresh_info(x);
    for (size_t s = 0; s < x->nengines; s++)
        if (meta_site_can_hold(&x->info[s], &rq, NULL, 0)) {
            start[n] = meta_policy_uses_estimates(p) ? estimate(x, idx, (int32_t)s) : 0;
            cand[n++] = (int)s;
        }
    size_t m = meta_rank(p, x->info, cand, start, n, &rq, &x->rank_state, order);
    if (m == 0) { /* no site gave an estimate: queue at the first eligible one */
        x->r->resv_failed++;
        return n ? submit(x, idx, cand[0]) : (errno = ENOSPC, -1);
    }
    if (p == META_SLURM_M) /* sbatch -M: queued at the earliest start, nothing reserved */
        return submit(x, idx, order[0]);
    for (size_t k = 0; k < m; k++) {
        int32_t s = order[k];
        int64_t t = estimate(x, idx, s);
        if (t == BATCH_NEVER || reserve(x, idx, s, t) < 0)
            continue;
        if (submit(x, idx, s) < 0) {
            release(x, idx, s);
            continue;
        }
        goto placed;
    }
    x->r->resv_failed++; /* every reservation failed: queue at the best site as it is */
    if (submit(x, idx, order[0]) < 0)
        return -1;
placed:
    if (x->listed[idx])
        return 0;
    x->listed[idx] = true;
    return push_idx(&x->placed, &x->nplaced, &x->capplaced, idx);
}

/* Re-examines placed jobs not started (oldest first, up to reeval_max) against the sites
 * whose plan changed; moves one when a changed site offers a start (or, for estimate, a
 * completion) earlier by more than the margin: reserve and queue there first, then
 * withdraw at the old site (never two live copies, never none). */
static int reevaluate(struct run *x)
{
    size_t seen = 0, k = 0, out = 0;
    for (; k < x->nplaced; k++) {
        size_t idx = x->placed[k];
        struct msim_job *mj = &x->r->jobs[idx];
        if (mj->start >= 0) {
            x->listed[idx] = false;
            continue; /* started: drop from the list */
        }
        x->placed[out++] = idx;
        if (seen++ >= x->s->reeval_max)
            continue;
        int32_t old = mj->site;
        struct batch_job_info bi;
        if (batch_job_info(x->e[old], idx + 1, &bi) < 0)
            continue;
        int64_t cur = x->resv[idx][0] ? x->resv_start[idx] : BATCH_NEVER;
        if (bi.estimate < cur)
            cur = bi.estimate;
        if (cur == BATCH_NEVER || cur <= x->now)
            continue;
        struct meta_request rq = request(x, idx);
        bool by_completion = x->kind == META_EARLIEST_COMPLETION;
        int64_t cur_key = by_completion ? meta_completion(&x->info[old], &rq, cur) : cur;
        for (size_t s = 0; s < x->nengines; s++) {
            if ((int32_t)s == old || !x->changed[s] ||
                !meta_site_can_hold(&x->info[s], &rq, NULL, 0))
                continue;
            int64_t t = estimate(x, idx, (int32_t)s);
            if (t == BATCH_NEVER)
                continue;
            int64_t key = by_completion ? meta_completion(&x->info[s], &rq, t) : t;
            if (key + x->s->margin >= cur_key)
                continue;
            char oldresv[BATCH_NAME_MAX];
            memcpy(oldresv, x->resv[idx], sizeof oldresv);
            int64_t oldstart = x->resv_start[idx];
            if (reserve(x, idx, (int32_t)s, t) < 0) {
                memcpy(x->resv[idx], oldresv, sizeof oldresv);
                x->resv_start[idx] = oldstart;
                continue;
            }
            if (submit(x, idx, (int32_t)s) < 0) {
                batch_resv_release(x->e[s], x->resv[idx]);
                memcpy(x->resv[idx], oldresv, sizeof oldresv);
                x->resv_start[idx] = oldstart;
                mj->site = old;
                continue;
            }
            /* now queued at s: withdraw at the old site */
            const struct sim_job *j = &x->w->in.jobs[idx];
            batch_job_finish(x->e[old], idx + 1, x->now);
            x->pending--;
            x->pend_work[old] -= (int64_t)j->procs * at_speed(j->walltime, x->speed[old]);
            if (oldresv[0])
                batch_resv_release(x->e[old], oldresv);
            x->dirty[old] = true;
            mj->moves++;
            x->r->moved++;
            break;
        }
    }
    x->nplaced = out;
    return 0;
}

/* Places again the grid jobs whose reservation a site's grid rule released (batch.h
 * grid_wait_bound) and that have not started: withdrawn there, then placed as new
 * (estimates, ranking, a reservation), as the live spool does when a site reports
 * the reservation gone. */
static int replace_revoked(struct run *x)
{
    size_t n = x->nrevoked;
    x->nrevoked = 0;
    for (size_t k = 0; k < n; k++) {
        size_t idx = x->revoked[k];
        struct msim_job *mj = &x->r->jobs[idx];
        if (mj->start >= 0 || x->resv[idx][0])
            continue; /* started meanwhile, or already placed again */
        const struct sim_job *j = &x->w->in.jobs[idx];
        int32_t old = mj->site;
        if (batch_job_finish(x->e[old], idx + 1, x->now) < 0)
            continue;
        x->pending--;
        x->pend_work[old] -= (int64_t)j->procs * at_speed(j->walltime, x->speed[old]);
        x->dirty[old] = true;
        if (place(x, idx) < 0) /* counted in guard_released, not as a move */
            return -1;
    }
    return 0;
}

/* Runs a cycle at every dirty site and takes in the jobs it started. */
static int cycles(struct run *x)
{
    for (size_t s = 0; s < x->nengines; s++) {
        if (!x->dirty[s] && x->wake[s] != x->now)
            continue;
        struct batch_cycle_stats st;
        if (batch_cycle(x->e[s], x->now, &st) < 0)
            return -1;
        x->r->cycles++;
        x->dirty[s] = false;
        const uint64_t *ids;
        size_t n = batch_cycle_started(x->e[s], &ids);
        for (size_t k = 0; k < n; k++) {
            size_t idx = (size_t)ids[k] - 1;
            const struct sim_job *j = &x->w->in.jobs[idx];
            struct msim_job *mj = &x->r->jobs[idx];
            int64_t wall = at_speed(j->walltime, x->speed[s]);
            mj->start = x->now;
            x->pending--;
            mj->run = at_speed(j->run, x->speed[s]);
            if (mj->run > wall)
                mj->run = wall;
            mj->end = x->now + mj->run;
            x->pend_work[s] -= (int64_t)j->procs * wall;
            x->run_end[s] += (int64_t)j->procs * (x->now + wall);
            x->run_procs[s] += j->procs;
            if (heap_push(&x->h, (struct ev){mj->end, idx}) < 0)
                return -1;
            /* started (in its reservation or earlier elsewhere): the reservation is done */
            if (x->resv[idx][0]) {
                batch_resv_release(x->e[s], x->resv[idx]);
                x->resv[idx][0] = '\0';
            }
        }
        /* reservations the site's grid rule released: those jobs queue on */
        const struct batch_released *rel;
        size_t nrel = batch_cycle_released(x->e[s], &rel);
        for (size_t k = 0; k < nrel; k++) {
            x->r->guard_released++;
            size_t idx = (size_t)rel[k].job - 1;
            if (rel[k].job < 1 || idx >= x->w->in.njobs || strcmp(x->resv[idx], rel[k].name))
                continue;
            x->resv[idx][0] = '\0';
            /* the spool hears of it and places the job again (loop, after the cycles) */
            if (push_idx(&x->revoked, &x->nrevoked, &x->caprevoked, idx) < 0)
                return -1;
        }
        /* reservations the site moved up (docs/batch.md): the spool's view follows */
        const struct batch_moved *mv;
        size_t nmv = batch_cycle_moved(x->e[s], &mv);
        for (size_t k = 0; k < nmv; k++) {
            x->r->moved_up++;
            size_t idx = (size_t)mv[k].job - 1;
            if (mv[k].job >= 1 && idx < x->w->in.njobs && !strcmp(x->resv[idx], mv[k].name))
                x->resv_start[idx] = mv[k].start;
        }
        int64_t wk = batch_next_wakeup(x->e[s]);
        x->wake[s] = wk > x->now ? wk : BATCH_NEVER;
    }
    return 0;
}

static int build(struct run *x, char *err, size_t len)
{
    const struct msim_scenario *s = x->s;
    x->nengines = x->kind == MSIM_POOLED ? 1 : s->nsites;
    int64_t total = 0;
    double work_speed = 0;
    for (size_t i = 0; i < s->nsites; i++) {
        int64_t p = (int64_t)s->sites[i].nodes * s->sites[i].node_procs;
        total += p;
        work_speed += (double)p * s->sites[i].speed;
    }
    for (size_t i = 0; i < x->nengines; i++) {
        const struct msim_site *site = &s->sites[i];
        struct batch_node_spec n;
        memset(&n, 0, sizeof n);
        int32_t nodes = site->nodes;
        n.cap.procs = site->node_procs;
        x->speed[i] = site->speed;
        if (x->kind == MSIM_POOLED) { /* one machine of the total size, mean speed */
            nodes = (int32_t)total;
            n.cap.procs = 1;
            x->speed[i] = work_speed / (double)total;
        }
        if (!(x->e[i] = batch_engine_new(&site->cfg)))
            return fail(err, len, "site %s: bad batch configuration: %s", site->name,
                        strerror(errno));
        for (int32_t k = 0; k < nodes; k++) {
            snprintf(n.name, sizeof n.name, "n%05d", k);
            if (batch_node_add(x->e[i], &n) < 0)
                return fail(err, len, "site %s: adding node %s: %s", site->name, n.name,
                            strerror(errno));
        }
        x->info[i] = (struct meta_site){.up = true,
                                        .speed = x->speed[i],
                                        .total_procs = nodes * n.cap.procs,
                                        .max_procs = nodes * n.cap.procs};
        x->wake[i] = BATCH_NEVER;
    }
    return 0;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void summarize(struct run *x)
{
    const struct msim_workload *w = x->w;
    struct msim_result *r = x->r;
    double work[MSIM_MAX_SITES] = {0};
    int64_t first = w->in.jobs[0].submit, last = first;
    size_t n = w->in.njobs;
    for (size_t i = 0; i < n; i++) {
        const struct sim_job *j = &w->in.jobs[i];
        const struct msim_job *mj = &r->jobs[i];
        int64_t wait = mj->start - j->submit;
        double b = msim_bsld(wait, mj->run);
        r->mean_wait += (double)wait;
        r->mean_bsld += b;
        r->mean_turnaround += (double)(mj->end - j->submit);
        if (w->grid[i]) {
            r->grid_wait += (double)wait;
            r->grid_bsld += b;
            r->grid_wait_max = wait > r->grid_wait_max ? wait : r->grid_wait_max;
        } else {
            r->local_wait += (double)wait;
            r->local_bsld += b;
            r->local_wait_max = wait > r->local_wait_max ? wait : r->local_wait_max;
            r->local_starved += wait > 2 * 86400;
        }
        work[mj->site] += (double)mj->run * j->procs;
        last = mj->end > last ? mj->end : last;
    }
    r->mean_wait /= (double)n;
    r->mean_bsld /= (double)n;
    r->mean_turnaround /= (double)n;
    if (w->ngrid) {
        r->grid_wait /= (double)w->ngrid;
        r->grid_bsld /= (double)w->ngrid;
    }
    if (n > w->ngrid) {
        r->local_wait /= (double)(n - w->ngrid);
        r->local_bsld /= (double)(n - w->ngrid);
    }
    double span = (double)(last - first);
    for (size_t s = 0; s < x->nengines; s++)
        r->util[s] = span > 0 ? work[s] / ((double)x->info[s].total_procs * span) : 0;
}

/* The event loop. 0 or -1 (err). */
static int loop(struct run *x, char *err, size_t len)
{
    const struct msim_workload *w = x->w;
    size_t i = 0, n = w->in.njobs, *arrivals = malloc(n * sizeof *arrivals);
    if (!arrivals)
        return fail(err, len, "out of memory");
    int rc = -1;
    while (i < n || x->h.n || x->pending) {
        int64_t t = i < n ? w->in.jobs[i].submit : BATCH_NEVER;
        if (x->h.n && x->h.v[0].t < t)
            t = x->h.v[0].t;
        for (size_t s = 0; s < x->nengines; s++)
            t = x->wake[s] < t ? x->wake[s] : t;
        if (t == BATCH_NEVER) {
            fail(err, len, "%zu jobs can never start (the sites are too small)", x->pending);
            goto out;
        }
        x->now = t;
        while (x->h.n && x->h.v[0].t == t) {
            size_t idx = heap_pop(&x->h).job;
            const struct sim_job *j = &w->in.jobs[idx];
            struct msim_job *mj = &x->r->jobs[idx];
            int32_t s = mj->site;
            if (batch_job_finish(x->e[s], idx + 1, t) < 0)
                goto engine;
            int64_t wall = at_speed(j->walltime, x->speed[s]);
            x->run_end[s] -= (int64_t)j->procs * (mj->start + wall);
            x->run_procs[s] -= j->procs;
            x->dirty[s] = true;
            x->changed[s] |= mj->run < wall;
        }
        size_t na = 0;
        for (; i < n && w->in.jobs[i].submit == t; i++) {
            if (x->kind == MSIM_POOLED || !w->grid[i]) {
                if (submit(x, i, x->kind == MSIM_POOLED ? 0 : w->home[i]) < 0)
                    goto engine;
            } else {
                arrivals[na++] = i;
            }
        }
        if (cycles(x) < 0)
            goto engine;
        for (size_t k = 0; k < na; k++)
            if (place(x, arrivals[k]) < 0)
                goto engine;
        if (x->nrevoked && replace_revoked(x) < 0)
            goto engine;
        bool any = false;
        for (size_t s = 0; s < x->nengines; s++)
            any |= x->changed[s];
        if (any && x->s->reevaluate && x->nplaced &&
            (x->kind == META_EARLIEST_COMPLETION || x->kind == META_EARLIEST_START)) {
            refresh_info(x);
            if (reevaluate(x) < 0)
                goto engine;
        }
        memset(x->changed, 0, sizeof x->changed);
        if (cycles(x) < 0)
            goto engine;
    }
    rc = 0;
    goto out;
engine:
    fail(err, len, "engine: %s", strerror(errno));
out:
    free(arrivals);
    return rc;
}

int msim_run(const struct msim_scenario *s, const struct msim_workload *w, int kind,
             struct msim_result *r, char *err, size_t len)
{
    double t0 = mono();
    if (kind < 0 || kind >= MSIM_KINDS)
        return fail(err, len, "unknown run kind %d", kind);
    if (w->in.njobs == 0)
        return fail(err, len, "no job to simulate");
    struct run x = {.s = s, .w = w, .kind = kind, .r = r, .rank_state = s->seed};
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->jobs = calloc(w->in.njobs, sizeof *r->jobs);
    x.resv = calloc(w->in.njobs, sizeof *x.resv);
    x.resv_start = calloc(w->in.njobs, sizeof *x.resv_start);
    x.listed = calloc(w->in.njobs, sizeof *x.listed);
    int rc = -1;
    if (!r->jobs || !x.resv || !x.resv_start || !x.listed) {
        fail(err, len, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < w->in.njobs; i++)
        r->jobs[i].start = r->jobs[i].end = -1;
    if (kind != META_RANDOM) /* the seed is the random policy's; the others take turns from 0 */
        x.rank_state = 0;
    if (build(&x, err, len) < 0 || loop(&x, err, len) < 0)
        goto out;
    summarize(&x);
    rc = 0;
out:
    for (size_t i = 0; i < x.nengines; i++)
        batch_engine_destroy(&x.e[i]);
    free(x.h.v);
    free(x.resv);
    free(x.resv_start);
    free(x.placed);
    free(x.listed);
    free(x.revoked);
    r->wall_s = mono() - t0;
    if (rc < 0)
        msim_result_free(r);
    return rc;
}

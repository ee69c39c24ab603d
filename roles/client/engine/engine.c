/*
 * engine.c - the client scheduling engine's state: configuration, processor types,
 * projects and tasks, the passage of time (run time, REC and exp_avg_cpu, host
 * on-fraction), project priorities for both policies and the backoff formulas.
 * The simulations, scheduling and RPC policy live in engine_rrsim.c, engine_sched.c
 * and engine_fetch.c.
 */
#include "roles/client/engine/engine.h"
#include "roles/client/engine/engine_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- RNG: xoshiro256** seeded through splitmix64 ---- */

static uint64_t rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void engine_rng_seed(struct engine_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix(&x);
}

static uint64_t rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t engine_rng_next(struct engine_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

double engine_rng_uniform(struct engine_rng *r)
{
    return (double)(engine_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- configuration ---- */

void engine_config_defaults(struct engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->policy = ENGINE_POLICY_REC;
    c->fetch = ENGINE_FETCH_DEADLINE;
    c->min_buf = 0.1 * 86400;
    c->additional_buf = 0.5 * 86400;
    c->time_slice = 3600;
    c->poll_period = 60;
    c->rec_half_life = 10 * 86400;
    c->debt_decay = 7 * 86400;
    c->rpc_backoff_min = 60;
    c->rpc_backoff_max = 4 * 3600;
    c->rsc_backoff_min = 600;
    c->rsc_backoff_max = 86400;
    c->master_fetch_period = 10;
    c->report_cushion = 86400;
    c->report_max_delay = 86400;
    c->report_batch = 0.25;
    c->deadline_slack = 0.84;
    c->deadline_reserve_max = 12 * 3600;
    c->avail_half_life = 10 * 86400;
    c->fetch_min_jobs = 2;
    c->burst = 1;
    c->burst_slack = 0.78;
    c->burst_min_jobs = 3;
}

const char *engine_config_check(const struct engine_config *c)
{
    if (c->policy != ENGINE_POLICY_REC && c->policy != ENGINE_POLICY_DEBT2004)
        return "policy must be rec or debt2004";
    if (c->fetch != ENGINE_FETCH_DEADLINE && c->fetch != ENGINE_FETCH_BOINC)
        return "fetch must be deadline or boinc";
    if (!(c->min_buf >= 0) || !(c->additional_buf >= 0))
        return "min_buf and additional_buf must be >= 0";
    if (!(c->time_slice > 0) || !(c->poll_period > 0))
        return "time_slice and poll must be > 0";
    if (!(c->rec_half_life > 0) || !(c->debt_decay > 0) || !(c->avail_half_life > 0))
        return "rec_half_life, debt_decay and avail_half_life must be > 0";
    if (!(c->rpc_backoff_min > 0) || !(c->rpc_backoff_max >= c->rpc_backoff_min))
        return "rpc_backoff_min must be > 0 and <= rpc_backoff_max";
    if (!(c->rsc_backoff_min > 0) || !(c->rsc_backoff_max >= c->rsc_backoff_min))
        return "rsc_backoff_min must be > 0 and <= rsc_backoff_max";
    if (c->master_fetch_period < 1)
        return "master_fetch_period must be >= 1";
    if (!(c->report_cushion >= 0) || !(c->report_max_delay >= 0))
        return "report_cushion and report_max_delay must be >= 0";
    if (!(c->report_batch >= 0 && c->report_batch <= 1))
        return "report_batch must be in [0, 1]";
    if (!(c->deadline_slack >= 0 && c->deadline_slack < 1))
        return "deadline_slack must be in [0, 1)";
    if (!(c->deadline_reserve_max >= 0))
        return "deadline_reserve_max must be >= 0";
    if (!(c->fetch_min_jobs >= 1 && c->fetch_min_jobs <= 100))
        return "fetch_min_jobs must be in [1, 100]";
    if (!(c->burst_slack >= 0 && c->burst_slack < 1))
        return "burst_slack must be in [0, 1)";
    if (!(c->burst_min_jobs >= 1 && c->burst_min_jobs <= 100))
        return "burst_min_jobs must be in [1, 100]";
    return NULL;
}

int engine_policy_parse(const char *s)
{
    if (!strcmp(s, "rec"))
        return ENGINE_POLICY_REC;
    if (!strcmp(s, "debt2004"))
        return ENGINE_POLICY_DEBT2004;
    return -1;
}

const char *engine_policy_name(enum engine_policy p)
{
    return p == ENGINE_POLICY_DEBT2004 ? "debt2004" : "rec";
}

int engine_fetch_parse(const char *s)
{
    if (!strcmp(s, "deadline"))
        return ENGINE_FETCH_DEADLINE;
    if (!strcmp(s, "boinc"))
        return ENGINE_FETCH_BOINC;
    return -1;
}

const char *engine_fetch_name(enum engine_fetch f)
{
    return f == ENGINE_FETCH_BOINC ? "boinc" : "deadline";
}

/* ---- lifetime ---- */

struct engine *engine_new(const struct engine_config *cfg, int ncpus, double cpu_flops,
                          uint64_t seed)
{
    if (engine_config_check(cfg) || ncpus < 0 || !(cpu_flops > 0)) {
        errno = EINVAL;
        return NULL;
    }
    struct engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->cfg = *cfg;
    engine_rng_seed(&e->rng, seed);
    strcpy(e->ptypes[0].name, "cpu");
    e->ptypes[0].ninstances = ncpus;
    e->ptypes[0].flops = cpu_flops;
    e->nptypes = 1;
    e->last_tick = -1;
    e->host_on = 1;
    e->on_frac = 1;
    e->rr_dirty = 1;
    e->sched_dirty = 1;
    e->session_project = -1;
    e->last_fetch_check = -INFINITY;
    return e;
}

void engine_destroy(struct engine **ep)
{
    if (!ep || !*ep)
        return;
    struct engine *e = *ep;
    free(e->projects);
    free(e->tasks);
    free(e->running);
    free(e->sched.start);
    free(e->sched.preempt);
    free(e->work);
    free(e->report);
    free(e);
    *ep = NULL;
}

int engine_ptype_add(struct engine *e, const char *name, int ninstances, double flops)
{
    if (!name || !*name || strlen(name) >= ENGINE_NAME_MAX || ninstances < 0 || !(flops > 0) ||
        engine_ptype_find(e, name) >= 0) {
        errno = EINVAL;
        return -1;
    }
    if (e->nptypes >= ENGINE_MAX_PTYPES) {
        errno = ENOSPC;
        return -1;
    }
    struct engine_ptype *t = &e->ptypes[e->nptypes];
    strcpy(t->name, name);
    t->ninstances = ninstances;
    t->flops = flops;
    e->rr_dirty = e->sched_dirty = 1;
    return e->nptypes++;
}

void engine_ptype_reserve(struct engine *e, int t, int n)
{
    if (t < 0 || t >= e->nptypes)
        return;
    struct engine_ptype *pt = &e->ptypes[t];
    int total = pt->ninstances + pt->reserved;
    n = n < 0 ? 0 : n > total ? total : n;
    if (n == pt->reserved)
        return;
    pt->reserved = n;
    pt->ninstances = total - n;
    e->rr_dirty = e->sched_dirty = 1;
}

int engine_ptype_find(const struct engine *e, const char *name)
{
    for (int i = 0; i < e->nptypes; i++)
        if (!strcmp(e->ptypes[i].name, name))
            return i;
    return -1;
}

int engine_project_add(struct engine *e, const char *name, double share,
                       const char *const *endpoints, int nendpoints, const char *master)
{
    if (!name || !*name || strlen(name) >= ENGINE_NAME_MAX || !(share > 0) || !isfinite(share) ||
        nendpoints < 0 || nendpoints > ENGINE_MAX_ENDPOINTS ||
        (nendpoints == 0 && (!master || !*master)) ||
        (master && strlen(master) >= ENGINE_URL_MAX)) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < nendpoints; i++)
        if (!endpoints[i] || !*endpoints[i] || strlen(endpoints[i]) >= ENGINE_URL_MAX) {
            errno = EINVAL;
            return -1;
        }
    if (e->nprojects == e->projects_cap) {
        int cap = e->projects_cap ? 2 * e->projects_cap : 8;
        struct engine_project *np = realloc(e->projects, (size_t)cap * sizeof *np);
        if (!np)
            return -1;
        e->projects = np;
        e->projects_cap = cap;
    }
    struct engine_project *p = &e->projects[e->nprojects];
    memset(p, 0, sizeof *p);
    strcpy(p->name, name);
    p->share = share;
    for (int i = 0; i < nendpoints; i++)
        strcpy(p->endpoints[i], endpoints[i]);
    p->nendpoints = nendpoints;
    if (master)
        strcpy(p->master, master);
    /* no scheduler known yet: the master list is the only way in */
    p->master_pending = nendpoints == 0;
    e->rr_dirty = e->sched_dirty = 1;
    return e->nprojects++;
}

long engine_task_add(struct engine *e, double now, int project, const struct engine_new_task *nt)
{
    if (project < 0 || project >= e->nprojects || nt->ptype < 0 || nt->ptype >= e->nptypes ||
        !(nt->usage > 0) ||
        nt->usage > e->ptypes[nt->ptype].ninstances + e->ptypes[nt->ptype].reserved ||
        !(nt->est_duration > 0) || !isfinite(nt->est_duration) || !isfinite(nt->deadline)) {
        errno = EINVAL;
        return -1;
    }
    if (e->ntasks == e->tasks_cap) {
        size_t cap = e->tasks_cap ? 2 * e->tasks_cap : 64;
        size_t *run = realloc(e->running, cap * sizeof *run);
        if (!run)
            return -1;
        e->running = run;
        struct engine_task *nt2 = realloc(e->tasks, cap * sizeof *nt2);
        if (!nt2)
            return -1;
        e->tasks = nt2;
        e->tasks_cap = cap;
    }
    struct engine_task *t = &e->tasks[e->ntasks];
    memset(t, 0, sizeof *t);
    t->id = nt->id;
    t->user = nt->user;
    t->project = project;
    t->ptype = nt->ptype;
    t->usage = nt->usage;
    t->est_duration = nt->est_duration;
    t->received = now;
    t->deadline = nt->deadline;
    t->state = ENGINE_TASK_QUEUED;
    t->run_pos = -1;
    t->seq = e->next_seq++;
    t->rr_finish = now;

    /* seed 002: a task of this type arriving clears the (project, type) backoff */
    struct engine_rsc *r = &e->projects[project].rsc[nt->ptype];
    r->backoff_interval = 0;
    r->backoff_until = 0;
    r->latency = nt->deadline - now;
    double w = nt->usage * nt->est_duration;
    r->job_work = r->job_work > 0 ? 0.7 * r->job_work + 0.3 * w : w;
    e->rr_dirty = e->sched_dirty = 1;
    return (long)e->ntasks++;
}

long engine_task_find(const struct engine *e, uint64_t id)
{
    for (size_t i = 0; i < e->ntasks; i++)
        if (e->tasks[i].id == id)
            return (long)i;
    return -1;
}

void engine_task_set_state(struct engine *e, size_t i, int state)
{
    struct engine_task *t = &e->tasks[i];
    int was_finished = !engine_task_live(t);
    if (t->state == ENGINE_TASK_RUNNING && state != ENGINE_TASK_RUNNING) {
        size_t last = e->running[--e->nrunning];
        e->running[t->run_pos] = last;
        e->tasks[last].run_pos = t->run_pos;
        t->run_pos = -1;
    } else if (t->state != ENGINE_TASK_RUNNING && state == ENGINE_TASK_RUNNING) {
        t->run_pos = (long)e->nrunning;
        e->running[e->nrunning++] = i;
    }
    t->state = state;
    int finished = !engine_task_live(t);
    e->nfinished += (size_t)finished - (size_t)was_finished;
    if (finished != was_finished)
        e->finished_gen++;
}

void engine_task_remove(struct engine *e, size_t i)
{
    if (i >= e->ntasks)
        return;
    if (engine_task_live(&e->tasks[i]))
        e->rr_dirty = 1;
    e->sched_dirty = 1;
    engine_task_set_state(e, i, ENGINE_TASK_ABORTED); /* leave the running list */
    e->nfinished--;
    e->finished_gen++;
    size_t last = e->ntasks - 1;
    if (i != last) {
        e->tasks[i] = e->tasks[last];
        if (e->tasks[i].run_pos >= 0)
            e->running[e->tasks[i].run_pos] = i;
    }
    e->ntasks--;
}

/* ---- time ---- */

/* Credit earned at `rate` FLOPs per second over dt while decaying with factor f over
 * the same interval (f = exp(-dt/tau)): the exact integral rate * tau * (1 - f). */
static double decayed_credit(double rate, double dt, double f, double tau)
{
    if (dt <= 0)
        return 0;
    if (dt < 1e-6 * tau)
        return rate * dt;
    return rate * tau * (1 - f);
}

void engine_tick(struct engine *e, double now, int on)
{
    if (e->last_tick < 0 || !(now > e->last_tick)) {
        if (e->last_tick < 0)
            e->last_tick = now;
        e->host_on = on;
        return;
    }
    double dt = now - e->last_tick;
    int was_on = e->host_on;
    double wa = exp2(-dt / e->cfg.avail_half_life);
    e->on_frac = e->on_frac * wa + (was_on ? 1 - wa : 0);

    double rec_tau = e->cfg.rec_half_life / M_LN2, debt_tau = e->cfg.debt_decay;
    double frec = exp(-dt / rec_tau), fdebt = exp(-dt / debt_tau);
    for (int p = 0; p < e->nprojects; p++) {
        e->projects[p].rec *= frec;
        e->projects[p].exp_avg_cpu *= fdebt;
    }
    if (was_on) {
        for (size_t k = 0; k < e->nrunning; k++) {
            struct engine_task *t = &e->tasks[e->running[k]];
            t->elapsed += dt;
            double rate = t->usage * e->ptypes[t->ptype].flops;
            struct engine_project *p = &e->projects[t->project];
            p->rec += decayed_credit(rate, dt, frec, rec_tau);
            p->exp_avg_cpu += decayed_credit(rate, dt, fdebt, debt_tau);
        }
    }
    e->last_tick = now;
    e->host_on = on;
}

void engine_task_stop(struct engine *e, size_t i)
{
    struct engine_task *t = &e->tasks[i];
    if (t->state != ENGINE_TASK_RUNNING)
        return;
    if (t->elapsed > t->checkpoint_elapsed) {
        t->lost += t->elapsed - t->checkpoint_elapsed;
        t->elapsed = t->checkpoint_elapsed;
    }
    engine_task_set_state(e, i, ENGINE_TASK_QUEUED);
    t->preempt_wanted = 0;
}

void engine_host_avail(struct engine *e, double now, int on)
{
    engine_tick(e, now, on);
    if (!on)
        while (e->nrunning > 0)
            engine_task_stop(e, e->running[e->nrunning - 1]);
    e->sched_dirty = 1;
}

void engine_task_done(struct engine *e, double now, size_t i)
{
    if (i >= e->ntasks)
        return;
    struct engine_task *t = &e->tasks[i];
    engine_task_set_state(e, i, ENGINE_TASK_DONE);
    t->completed = now;
    t->fraction_done = 1;
    /* deadline mode: a result finished while its project is in a failure backoff must
       not wait for the end of that backoff (it may be hours, from failed fetches before
       the result existed): the project may be probed rpc_backoff_min after its last
       failed contact, as contact_failed would have allowed had the result been there */
    struct engine_project *q = &e->projects[t->project];
    if (e->cfg.fetch == ENGINE_FETCH_DEADLINE && q->nrpc_failures > 0 && q->min_rpc_time > now &&
        t->deadline > now)
        q->min_rpc_time = fmax(now, fmin(q->min_rpc_time, q->last_fail + e->cfg.rpc_backoff_min));
    /* the others' deadline-miss flags can only improve: the simulation is refreshed
       when it goes stale, not on every completion */
    e->sched_dirty = 1;
}

void engine_task_checkpoint(struct engine *e, size_t i, double checkpoint_elapsed)
{
    if (i >= e->ntasks)
        return;
    struct engine_task *t = &e->tasks[i];
    if (checkpoint_elapsed <= t->checkpoint_elapsed)
        return;
    t->checkpoint_elapsed = checkpoint_elapsed;
    if (t->preempt_wanted)
        e->preempt_ready = 1;
}

double engine_task_remaining(const struct engine_task *t)
{
    if (t->state == ENGINE_TASK_DONE || t->state == ENGINE_TASK_ABORTED)
        return 0;
    double left = t->est_duration - t->elapsed;
    if (left < 0)
        left = 0;
    double f = t->fraction_done;
    if (f > 0 && f < 1 && t->elapsed > 0) {
        /* trust the application's progress more as it grows (as BOINC does) */
        double by_frac = t->elapsed * (1 - f) / f;
        left = (1 - f) * left + f * by_frac;
    }
    return left;
}

void *engine_work_get(struct engine *e, size_t bytes)
{
    if (bytes > e->work_cap) {
        size_t cap = e->work_cap ? e->work_cap : 4096;
        while (cap < bytes)
            cap *= 2;
        void *w = malloc(cap);
        if (!w)
            return NULL;
        free(e->work);
        e->work = w;
        e->work_cap = cap;
    }
    return e->work;
}

double engine_avail(const struct engine *e)
{
    return e->on_frac < 0.05 ? 0.05 : e->on_frac > 1 ? 1 : e->on_frac;
}

/* ---- priorities and backoff ---- */

void engine_priorities(const struct engine *e, const double *extra, double *prio)
{
    double sum_share = 0, sum_x = 0;
    for (int p = 0; p < e->nprojects; p++) {
        const struct engine_project *pr = &e->projects[p];
        sum_share += pr->share;
        double x = e->cfg.policy == ENGINE_POLICY_REC ? pr->rec : pr->exp_avg_cpu;
        sum_x += x + (extra ? extra[p] : 0);
    }
    for (int p = 0; p < e->nprojects; p++) {
        const struct engine_project *pr = &e->projects[p];
        double share = sum_share > 0 ? pr->share / sum_share : 0;
        double x = e->cfg.policy == ENGINE_POLICY_REC ? pr->rec : pr->exp_avg_cpu;
        x += extra ? extra[p] : 0;
        double xn = sum_x > 0 ? x / sum_x : 0;
        if (e->cfg.policy == ENGINE_POLICY_REC)
            prio[p] = share > 0 ? -xn / share : -INFINITY; /* seed 002: SP = -REC/share */
        else
            prio[p] = share / (xn > 1e-9 ? xn : 1e-9); /* seed 000: share / exp_avg_cpu */
    }
}

double engine_rpc_backoff(struct engine *e, int n)
{
    double x = e->cfg.rpc_backoff_min * ldexp(1, n > 60 ? 60 : n);
    if (x > e->cfg.rpc_backoff_max)
        x = e->cfg.rpc_backoff_max;
    return x * (0.5 + 0.5 * engine_rng_uniform(&e->rng));
}

void engine_rsc_backoff(struct engine *e, double now, int project, int ptype)
{
    struct engine_rsc *r = &e->projects[project].rsc[ptype];
    if (r->backoff_interval <= 0)
        r->backoff_interval = e->cfg.rsc_backoff_min;
    else
        r->backoff_interval *= 2;
    if (r->backoff_interval > e->cfg.rsc_backoff_max)
        r->backoff_interval = e->cfg.rsc_backoff_max;
    r->backoff_until = now + r->backoff_interval;
}

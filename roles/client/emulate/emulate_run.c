/*
 * emulate_run.c - one emulation: the engine (engine.h) runs against simulated project
 * servers on a simulated host in simulated time, event by event (poll ticks, task
 * completions, time-slice ends, the host turning on and off), and the figures of merit
 * of BOINC's client emulator are computed:
 *   idle fraction    capacity not used while the host was on (peak FLOPs)
 *   wasted fraction  work of results reported after their deadline / capacity
 *   share violation  sum over projects of |used - share * total used| / total used
 *   monotony         1 - 1/(x+1), x = mean over projects of the RMS time since the
 *                    project last ran / (time slice * nprojects)
 *   RPCs per job     RPCs that reached a server / jobs received (BOINC prints half)
 * The world (host availability, server availability, job sizes, RPC failures) draws
 * from its own random streams, so every policy meets the same world.
 */
#include "roles/client/emulate/emulate_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An alternating process of exponential up and down periods, plus forced-down windows. */
struct emu_proc {
    double mean_up, mean_down;
    int up;
    double next; /* next toggle of the random part */
    struct engine_rng rng;
    const struct emu_windows *down;
};

struct emu_job {
    double true_dur; /* the real run time, unknown to the engine */
    int app;
    int row, nrows; /* timeline rows while running; row < 0: not drawn */
    long next_free;
};

struct run {
    const struct emu_scenario *sc;
    int finished_now; /* a task finished at this instant: the live client polls then */
    const struct emu_options *o;
    struct emu_result *res;
    struct engine *e;
    struct emu_proc host;
    struct emu_proc servers[EMU_MAX_PROJECTS];
    struct engine_rng jobs_rng[EMU_MAX_PROJECTS], fail_rng[EMU_MAX_PROJECTS];
    struct emu_job *jobs;
    size_t njobs, jobs_cap;
    long free_head;
    uint64_t next_id;
    struct engine_new_task *newbuf;
    size_t new_cap;
    double t;
    int on;
    double peak_flops; /* of the whole host */
    double idle_run[EMU_MAX_PROJECTS], sumsq[EMU_MAX_PROJECTS];
    unsigned char ran[EMU_MAX_PROJECTS];
    int row_job[EMU_TL_MAX_ROWS];
    double row_t0[EMU_TL_MAX_ROWS];
    int type_row0[ENGINE_MAX_PTYPES], type_rows[ENGINE_MAX_PTYPES];
    double off_since;
};

static uint64_t stream(uint64_t seed, uint64_t k)
{
    return seed ^ (0x9e3779b97f4a7c15ULL * (k + 1));
}

static double exp_sample(struct engine_rng *r, double mean)
{
    return -mean * log(1 - engine_rng_uniform(r));
}

static void proc_init(struct emu_proc *p, double frac, double mean_up,
                      const struct emu_windows *down, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    engine_rng_seed(&p->rng, seed);
    p->down = down;
    p->mean_up = mean_up;
    p->up = frac > 0;
    p->next = INFINITY;
    if (frac > 0 && frac < 1) {
        p->mean_down = mean_up * (1 - frac) / frac;
        p->next = exp_sample(&p->rng, mean_up);
    }
}

static int in_windows(const struct emu_windows *w, double t)
{
    for (int i = 0; i < w->n; i++)
        if (t >= w->start[i] && t < w->end[i])
            return 1;
    return 0;
}

/* State at t; queries must not go back in time. */
static int proc_up(struct emu_proc *p, double t)
{
    while (p->next <= t) {
        p->up = !p->up;
        p->next += exp_sample(&p->rng, p->up ? p->mean_up : p->mean_down);
    }
    return p->up && !(p->down && in_windows(p->down, t));
}

static double proc_next_change(struct emu_proc *p, double t)
{
    proc_up(p, t);
    double next = p->next;
    for (int i = 0; p->down && i < p->down->n; i++) {
        if (p->down->start[i] > t && p->down->start[i] < next)
            next = p->down->start[i];
        if (p->down->end[i] > t && p->down->end[i] < next)
            next = p->down->end[i];
    }
    return next;
}

/* ---- jobs ---- */

static long job_new(struct run *r, double true_dur, int app)
{
    long j;
    if (r->free_head >= 0) {
        j = r->free_head;
        r->free_head = r->jobs[j].next_free;
    } else {
        if (r->njobs == r->jobs_cap) {
            size_t cap = r->jobs_cap ? 2 * r->jobs_cap : 256;
            struct emu_job *v = realloc(r->jobs, cap * sizeof *v);
            if (!v)
                return -1;
            r->jobs = v;
            r->jobs_cap = cap;
        }
        j = (long)r->njobs++;
    }
    r->jobs[j].true_dur = true_dur;
    r->jobs[j].app = app;
    r->jobs[j].row = -1;
    r->jobs[j].nrows = 0;
    r->jobs[j].next_free = -1;
    return j;
}

static void job_free(struct run *r, long j)
{
    r->jobs[j].next_free = r->free_head;
    r->free_head = j;
}

static double sample_size(struct engine_rng *g, const struct emu_app *a)
{
    double x = a->size_mean;
    switch (a->dist) {
    case EMU_DIST_NORMAL: {
        double u1 = 1 - engine_rng_uniform(g), u2 = engine_rng_uniform(g);
        x = a->size_mean + a->size_sd * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        break;
    }
    case EMU_DIST_EXP:
        x = exp_sample(g, a->size_mean);
        break;
    case EMU_DIST_UNIFORM:
        x = a->size_mean + a->size_sd * sqrt(3) * (2 * engine_rng_uniform(g) - 1);
        break;
    default:
        break;
    }
    return x > 0.01 * a->size_mean ? x : 0.01 * a->size_mean;
}

/* ---- timeline ---- */

static void tl_release(struct run *r, long j)
{
    struct emu_job *jb = &r->jobs[j];
    struct emu_timeline *tl = r->o->timeline;
    for (int k = 0; k < jb->nrows; k++) {
        int row = jb->row + k;
        if (tl && r->row_job[row] == j)
            emulate_timeline_add(tl, r->row_t0[row], r->t, row, r->sc->apps[jb->app].project);
        r->row_job[row] = -1;
    }
    jb->row = -1;
    jb->nrows = 0;
}

static void tl_take(struct run *r, long j, int ptype, double usage)
{
    if (!r->o->timeline)
        return;
    int need = (int)ceil(usage - 1e-9), base = r->type_row0[ptype], n = r->type_rows[ptype];
    if (need < 1)
        need = 1;
    for (int k = 0; k + need <= n; k++) {
        int ok = 1;
        for (int m = 0; m < need && ok; m++)
            ok = r->row_job[base + k + m] < 0;
        if (!ok)
            continue;
        for (int m = 0; m < need; m++) {
            r->row_job[base + k + m] = (int)j;
            r->row_t0[base + k + m] = r->t;
        }
        r->jobs[j].row = base + k;
        r->jobs[j].nrows = need;
        return;
    }
}

/* Records, for each project, the periods its server was down over the timeline's window:
 * a fresh process seeded as in run_setup replays the same periods (its random stream
 * advances only at its own toggles, whenever the run looked at it). */
static int tl_servers(struct run *r)
{
    const struct emu_scenario *sc = r->sc;
    struct emu_timeline *tl = r->o->timeline;
    for (int p = 0; p < sc->nprojects; p++) {
        const struct emu_project *pp = &sc->projects[p];
        struct emu_proc srv;
        proc_init(&srv, pp->up_frac, pp->up_mean, &pp->outages,
                  stream(sc->seed, 100 + (uint64_t)p));
        for (double t = 0; t < tl->to;) {
            int up = proc_up(&srv, t);
            double next = proc_next_change(&srv, t);
            if (!up && emulate_timeline_down(tl, t, fmin(next, sc->duration), p))
                return -1;
            t = next;
        }
    }
    return 0;
}

static void tl_rows_init(struct run *r)
{
    struct emu_timeline *tl = r->o->timeline;
    int row = 0;
    for (int t = 0; t < r->e->nptypes; t++) {
        r->type_row0[t] = row;
        int n = r->e->ptypes[t].ninstances;
        if (row + n > EMU_TL_MAX_ROWS)
            n = EMU_TL_MAX_ROWS - row;
        r->type_rows[t] = n;
        for (int k = 0; tl && k < n; k++)
            snprintf(tl->row_names[row + k], sizeof tl->row_names[0], "%s %d", r->e->ptypes[t].name,
                     k);
        row += n;
    }
    if (tl)
        tl->nrows = row;
    for (int k = 0; k < EMU_TL_MAX_ROWS; k++)
        r->row_job[k] = -1;
}

/* ---- the servers ---- */

static const char *why_name(int why)
{
    static const char *const names[] = {"none", "requested", "report", "fetch", "retry", "master"};
    return why >= 0 && why <= ENGINE_WHY_MASTER ? names[why] : "?";
}

/* The scheduler endpoints project p lists at time t. */
static void endpoint_name(const struct run *r, int p, int k, double t, char *buf, size_t n)
{
    const struct emu_project *pp = &r->sc->projects[p];
    int moved = pp->moved_at >= 0 && t >= pp->moved_at;
    snprintf(buf, n, "%s/%ssched%d", pp->name, moved ? "v2/" : "", k);
}

static int endpoint_valid(const struct run *r, int p, const char *url)
{
    char buf[ENGINE_URL_MAX];
    for (int k = 0; k < r->sc->projects[p].schedulers; k++) {
        endpoint_name(r, p, k, r->t, buf, sizeof buf);
        if (!strcmp(buf, url))
            return 1;
    }
    return 0;
}

static void log_action(struct run *r, const struct engine_action *a, int ok, size_t njobs)
{
    FILE *f = r->o->rpc_log;
    if (!f)
        return;
    double secs = 0, inst = 0;
    for (int t = 0; t < ENGINE_MAX_PTYPES; t++) {
        secs += a->req[t].secs;
        inst += a->req[t].instances;
    }
    const struct engine_project *q = &r->e->projects[a->project];
    fprintf(f, "%s,%.3f,%s,%s,%s,%s,%d,%zu,%zu,%.3f,%.3f,%d,%.3f\n", r->o->label, r->t, q->name,
            a->kind == ENGINE_ACT_MASTER ? "master" : "rpc", why_name(a->reason), a->url, ok,
            a->nreport, njobs, secs, inst, q->nrpc_failures, q->min_rpc_time);
}

/* Accounts a reported result: met or missed its deadline, or aborted. */
static void account_report(struct run *r, const struct engine_task *t)
{
    struct emu_project_result *pr = &r->res->projects[t->project];
    double flops = r->e->ptypes[t->ptype].flops * t->usage;
    r->res->lost_flops += t->lost * flops;
    if (t->state == ENGINE_TASK_ABORTED) {
        r->res->aborted++;
        pr->aborted++;
    } else if (r->t > t->deadline) {
        double spent = (t->elapsed + t->lost) * flops;
        r->res->missed++;
        r->res->missed_report += t->completed <= t->deadline;
        r->res->wasted_flops += spent;
        pr->missed++;
        pr->wasted_flops += spent;
    } else {
        r->res->met++;
        pr->met++;
    }
    job_free(r, (long)t->user);
}

static int new_push(struct run *r, size_t n, const struct engine_new_task *t)
{
    if (n == r->new_cap) {
        size_t cap = r->new_cap ? 2 * r->new_cap : 64;
        struct engine_new_task *v = realloc(r->newbuf, cap * sizeof *v);
        if (!v)
            return -1;
        r->newbuf = v;
        r->new_cap = cap;
    }
    r->newbuf[n] = *t;
    return 0;
}

/* Picks an enabled app of project p for type t by weight; -1 if none. */
static int choose_app(struct run *r, int p, int t, const unsigned char *off)
{
    const struct emu_scenario *sc = r->sc;
    double total = 0;
    for (int a = 0; a < sc->napps; a++)
        if (sc->apps[a].project == p && sc->apps[a].ptype == t && !off[a])
            total += sc->apps[a].weight;
    if (total <= 0)
        return -1;
    double x = engine_rng_uniform(&r->jobs_rng[p]) * total;
    int last = -1;
    for (int a = 0; a < sc->napps; a++) {
        if (sc->apps[a].project != p || sc->apps[a].ptype != t || off[a])
            continue;
        last = a;
        if ((x -= sc->apps[a].weight) < 0)
            return a;
    }
    return last;
}

/* The server's answer to a request: jobs while the request is not met (BOINC's
 * scheduler), skipping apps whose jobs would miss the deadline given the queue the
 * client reported. Returns the number of jobs, or -1 on ENOMEM. */
static long server_jobs(struct run *r, const struct engine_action *a)
{
    const struct emu_scenario *sc = r->sc;
    int p = a->project;
    const struct emu_project *pp = &sc->projects[p];
    size_t n = 0, max = pp->max_jobs_per_rpc > 0 ? (size_t)pp->max_jobs_per_rpc : 100000;
    unsigned char off[EMU_MAX_APPS] = {0};
    for (int t = 0; t < r->e->nptypes; t++) {
        double secs = a->req[t].secs, inst = a->req[t].instances, delay = a->req[t].delay;
        double flops = r->e->ptypes[t].flops, ninst = r->e->ptypes[t].ninstances;
        while ((secs > 0 || inst > 0) && n < max) {
            int k = choose_app(r, p, t, off);
            if (k < 0)
                break;
            const struct emu_app *ap = &sc->apps[k];
            double est = ap->size_est / (flops * ap->usage);
            if (pp->deadline_check && delay + est > ap->deadline) {
                off[k] = 1;
                continue;
            }
            double dur = sample_size(&r->jobs_rng[p], ap) / (flops * ap->usage);
            long j = job_new(r, dur, k);
            struct engine_new_task nt = {r->next_id++, (uint64_t)j, t,
                                         ap->usage,    est,         r->t + ap->deadline};
            if (j < 0 || new_push(r, n, &nt))
                return -1;
            n++;
            secs -= est * ap->usage;
            inst -= ap->usage;
            delay += est * ap->usage / ninst;
        }
    }
    return (long)n;
}

static int do_rpc(struct run *r, const struct engine_action *a)
{
    int p = a->project;
    const struct emu_project *pp = &r->sc->projects[p];
    struct emu_project_result *pr = &r->res->projects[p];
    struct engine_reply rep = {0};
    r->res->rpc_attempts++;
    int up = proc_up(&r->servers[p], r->t) && endpoint_valid(r, p, a->url);
    if (up && pp->rpc_failure_rate > 0)
        up = engine_rng_uniform(&r->fail_rng[p]) >= pp->rpc_failure_rate;
    if (!up) {
        pr->rpc_failed++;
        log_action(r, a, 0, 0);
        return engine_rpc_done(r->e, r->t, a, &rep);
    }
    rep.ok = 1;
    r->res->rpcs_ok++;
    pr->rpcs_ok++;
    for (size_t k = 0; k < a->nreport; k++)
        account_report(r, &r->e->tasks[a->report[k]]);
    long n = in_windows(&pp->no_work, r->t) ? 0 : server_jobs(r, a);
    if (n < 0)
        return -1;
    rep.tasks = r->newbuf;
    rep.ntasks = (size_t)n;
    rep.request_delay = pp->request_delay;
    r->res->jobs += (unsigned long)n;
    pr->jobs += (unsigned long)n;
    log_action(r, a, 1, (size_t)n);
    return engine_rpc_done(r->e, r->t, a, &rep);
}

static void do_master(struct run *r, const struct engine_action *a)
{
    int p = a->project;
    int ok = proc_up(&r->servers[p], r->t);
    char names[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    const char *list[ENGINE_MAX_ENDPOINTS];
    int n = r->sc->projects[p].schedulers;
    for (int k = 0; k < n; k++) {
        endpoint_name(r, p, k, r->t, names[k], sizeof names[k]);
        list[k] = names[k];
    }
    r->res->master_fetches++;
    log_action(r, a, ok, 0);
    engine_master_done(r->e, r->t, p, ok, list, n);
}

/* Every action the engine wants at this instant (bounded: each project can be tried
 * only a few times before it backs off). */
static int poll_all(struct run *r)
{
    int limit = 4 * r->sc->nprojects + 16;
    for (int k = 0; k < limit; k++) {
        struct engine_action act;
        engine_poll(r->e, r->t, &act);
        if (act.kind == ENGINE_ACT_NONE)
            break;
        if (act.kind == ENGINE_ACT_MASTER)
            do_master(r, &act);
        else if (do_rpc(r, &act) < 0 && errno == ENOMEM)
            return -1;
    }
    return 0;
}

/* ---- time ---- */

/* Charges [r->t, tn) to the figures: capacity, use per project, monotony. */
static void account(struct run *r, double tn)
{
    double dt = tn - r->t;
    if (!r->on || dt <= 0)
        return;
    struct engine *e = r->e;
    int np = r->sc->nprojects;
    memset(r->ran, 0, (size_t)np);
    for (size_t k = 0; k < e->nrunning; k++) {
        const struct engine_task *t = &e->tasks[e->running[k]];
        double f = t->usage * e->ptypes[t->ptype].flops * dt;
        r->res->used_flops += f;
        r->res->projects[t->project].used_flops += f;
        r->ran[t->project] = 1;
    }
    r->res->capacity_flops += r->peak_flops * dt;
    r->res->on_time += dt;
    for (int p = 0; p < np; p++) {
        if (r->ran[p]) {
            r->idle_run[p] = 0;
            continue;
        }
        double a = r->idle_run[p], b = a + dt; /* integral of R^2 as R grows a -> b */
        r->sumsq[p] += (b * b * b - a * a * a) / 3;
        r->idle_run[p] = b;
    }
}

/* After time moved to r->t: finished tasks, progress and checkpoints of the others. */
static void progress(struct run *r)
{
    struct engine *e = r->e;
    /* backwards: a task that finishes leaves e->running, the last entry taking its slot */
    for (size_t k = e->nrunning; k-- > 0;) {
        size_t i = e->running[k];
        struct engine_task *t = &e->tasks[i];
        long j = (long)t->user;
        double dur = r->jobs[j].true_dur;
        if (t->elapsed >= dur - 1e-7 * (1 + dur)) {
            t->elapsed = dur;
            tl_release(r, j);
            engine_task_done(e, r->t, i);
            r->finished_now = 1;
            continue;
        }
        t->fraction_done = t->elapsed / dur;
        double ck = r->sc->apps[r->jobs[j].app].checkpoint;
        if (ck > 0) {
            double c = floor((t->elapsed + 1e-6) / ck) * ck;
            engine_task_checkpoint(e, i, c > t->elapsed ? t->elapsed : c);
        }
    }
}

/* The earliest instant something happens after r->t. */
static double next_event(struct run *r, double next_poll, double end)
{
    double tn = end;
    tn = fmin(tn, proc_next_change(&r->host, r->t));
    if (r->on) {
        tn = fmin(tn, next_poll);
        if (r->e->next_resched > r->t)
            tn = fmin(tn, r->e->next_resched);
        for (size_t k = 0; k < r->e->nrunning; k++) {
            const struct engine_task *t = &r->e->tasks[r->e->running[k]];
            tn = fmin(tn, r->t + r->jobs[t->user].true_dur - t->elapsed);
            double ck = r->sc->apps[r->jobs[t->user].app].checkpoint;
            if (t->preempt_wanted && ck > 0) /* it will be preempted at its checkpoint */
                tn = fmin(tn, r->t + (floor(t->elapsed / ck + 1e-9) + 1) * ck - t->elapsed);
        }
    }
    if (!(tn > r->t)) /* never stall on rounding */
        tn = nextafter(r->t, INFINITY);
    return tn;
}

static void apply_schedule(struct run *r, const struct engine_sched *s)
{
    for (size_t k = 0; k < s->npreempt; k++)
        tl_release(r, (long)r->e->tasks[s->preempt[k]].user);
    for (size_t k = 0; k < s->nstart; k++) {
        const struct engine_task *t = &r->e->tasks[s->start[k]];
        tl_take(r, (long)t->user, t->ptype, t->usage);
    }
}

static void host_change(struct run *r, int on)
{
    struct emu_timeline *tl = r->o->timeline;
    if (!on) {
        for (size_t k = 0; k < r->e->nrunning; k++)
            tl_release(r, (long)r->e->tasks[r->e->running[k]].user);
        r->off_since = r->t;
    } else if (tl) {
        for (int row = 0; row < tl->nrows; row++)
            emulate_timeline_add(tl, r->off_since, r->t, row, -1);
    }
    engine_host_avail(r->e, r->t, on);
    r->on = on;
}

/* ---- set-up and results ---- */

static int run_setup(struct run *r, char *err, size_t errlen)
{
    const struct emu_scenario *sc = r->sc;
    r->e = engine_new(&sc->cfg, sc->cpus, sc->cpu_flops, stream(sc->seed, 0));
    if (!r->e) {
        snprintf(err, errlen, "cannot create the engine: %s", strerror(errno));
        return -1;
    }
    r->peak_flops = sc->cpus * sc->cpu_flops;
    for (int g = 0; g < sc->ngpus; g++) {
        if (engine_ptype_add(r->e, sc->gpus[g].name, sc->gpus[g].count, sc->gpus[g].flops) < 0) {
            snprintf(err, errlen, "[gpu %s]: %s", sc->gpus[g].name, strerror(errno));
            return -1;
        }
        r->peak_flops += sc->gpus[g].count * sc->gpus[g].flops;
    }
    for (int p = 0; p < sc->nprojects; p++) {
        const struct emu_project *pp = &sc->projects[p];
        char names[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX], master[ENGINE_URL_MAX];
        const char *list[ENGINE_MAX_ENDPOINTS];
        for (int k = 0; k < pp->schedulers; k++) {
            endpoint_name(r, p, k, -INFINITY, names[k], sizeof names[k]);
            list[k] = names[k];
        }
        snprintf(master, sizeof master, "%s/master", pp->name);
        if (engine_project_add(r->e, pp->name, pp->share, list, pp->schedulers, master) < 0) {
            snprintf(err, errlen, "[project %s]: %s", pp->name, strerror(errno));
            return -1;
        }
        proc_init(&r->servers[p], pp->up_frac, pp->up_mean, &pp->outages,
                  stream(sc->seed, 100 + (uint64_t)p));
        engine_rng_seed(&r->jobs_rng[p], stream(sc->seed, 200 + (uint64_t)p));
        engine_rng_seed(&r->fail_rng[p], stream(sc->seed, 300 + (uint64_t)p));
    }
    proc_init(&r->host, sc->on_frac, sc->on_mean, &sc->off, stream(sc->seed, 1));
    r->free_head = -1;
    tl_rows_init(r);
    return 0;
}

static void run_results(struct run *r)
{
    struct emu_result *res = r->res;
    const struct emu_scenario *sc = r->sc;
    for (size_t i = 0; i < r->e->ntasks; i++) {
        const struct engine_task *t = &r->e->tasks[i];
        res->lost_flops += t->lost * t->usage * r->e->ptypes[t->ptype].flops;
    }
    double cap = res->capacity_flops, used = res->used_flops;
    res->idle_fraction = cap > 0 ? fmax(0, cap - used) / cap : 0;
    res->wasted_fraction = cap > 0 ? res->wasted_flops / cap : 0;
    res->lost_fraction = cap > 0 ? res->lost_flops / cap : 0;
    double total_share = 0, sv = 0, ms = 0;
    for (int p = 0; p < sc->nprojects; p++)
        total_share += sc->projects[p].share;
    res->nprojects = sc->nprojects;
    for (int p = 0; p < sc->nprojects; p++) {
        struct emu_project_result *pr = &res->projects[p];
        pr->share = sc->projects[p].share / total_share;
        pr->used_share = used > 0 ? pr->used_flops / used : 0;
        sv += fabs(pr->used_flops - used * pr->share);
        ms += res->on_time > 0 ? sqrt(r->sumsq[p] / res->on_time) : 0;
    }
    res->share_violation = used > 0 ? sv / used : 0;
    double n = sc->nprojects;
    double x = ms / (n * sc->cfg.time_slice * n);
    res->monotony = 1 - 1 / (x + 1);
    res->rpcs_per_job = res->jobs ? (double)res->rpcs_ok / (double)res->jobs : 0;
    res->rr_runs = r->e->rr_runs;
    res->sched_runs = r->e->sched_runs;
}

static int run_loop(struct run *r, char *err, size_t errlen)
{
    double end = r->sc->duration, next_poll = 0;
    r->t = 0;
    r->on = proc_up(&r->host, 0);
    engine_tick(r->e, 0, r->on);
    if (!r->on)
        host_change(r, 0);
    for (;;) {
        if (r->on) {
            if (r->t >= next_poll || r->finished_now) {
                if (poll_all(r))
                    goto nomem;
                while (next_poll <= r->t)
                    next_poll += r->sc->cfg.poll_period;
            }
            r->finished_now = 0;
            const struct engine_sched *s = engine_schedule(r->e, r->t);
            if (!s)
                goto nomem;
            apply_schedule(r, s);
        }
        if (r->t >= end)
            break;
        double tn = next_event(r, next_poll, end);
        account(r, tn);
        engine_tick(r->e, tn, r->on);
        r->t = tn;
        if (r->on)
            progress(r);
        int on = proc_up(&r->host, r->t);
        if (on != r->on) {
            host_change(r, on);
            if (on)
                next_poll = r->t;
        }
    }
    if (r->o->timeline) { /* close the open bars */
        for (size_t k = 0; k < r->e->nrunning; k++)
            tl_release(r, (long)r->e->tasks[r->e->running[k]].user);
        if (!r->on)
            host_change(r, 1);
        if (tl_servers(r))
            goto nomem;
    }
    return 0;
nomem:
    snprintf(err, errlen, "out of memory at t=%.0f s", r->t);
    return -1;
}

int emulate_run(const struct emu_scenario *sc, const struct emu_options *o, struct emu_result *res,
                char *err, size_t errlen)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(res, 0, sizeof *res);
    r->sc = sc;
    r->o = o;
    r->res = res;
    int rc = run_setup(r, err, errlen);
    if (rc == 0)
        rc = run_loop(r, err, errlen);
    if (rc == 0)
        run_results(r);
    engine_destroy(&r->e);
    free(r->jobs);
    free(r->newbuf);
    free(r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->sim_wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return rc;
}

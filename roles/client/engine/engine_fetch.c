/*
 * engine_fetch.c - the scheduler RPC policy and work fetch, "whom to ask for how much
 * work" (seed 000 and seed 002; MISSION C2, C3, C8).
 *
 * RPC policy: a project is contacted only when now >= min_rpc_time. A session tries
 * each scheduler endpoint once; if all fail, nrpc_failures grows and min_rpc_time moves
 * by a randomised exponential backoff; every master_fetch_period consecutive failures
 * the master list is re-read, and endpoints new in it reset the failures and backoff.
 * Completed results are reported when their deadline is near (report_cushion; deadline
 * mode: or when less than (1 - report_batch) of their reporting reserve is left) or when
 * they have waited report_max_delay, and with any RPC to their project; any RPC to a project that
 * is the top fetchable one for a processor type also asks for that type's shortfall (piggy-back).
 *
 * Work fetch: rec policy - a type needs work when its saturated time is below min_buf;
 * the fetchable project with the highest priority (REC adjusted by its queued work) is
 * asked for the type's shortfall and idle instances. debt2004 policy - a get-work
 * session opens when the queued work per instance falls below the low water mark
 * (min_buf) and stays open until it reaches the high water mark (max_buf); the project
 * with the largest resource debt is asked for the difference. Per (project, type)
 * backoffs skip projects that recently had no work of that type. Deadline mode caps
 * every request by the room a fluid EDF schedule leaves before the project's deadline.
 */
#include "roles/client/engine/engine.h"
#include "roles/client/engine/engine_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Queued work per project in FLOPs, the "adjust SP(P) for queued work" of seed 002. */
static void queued_credit(const struct engine *e, double *extra)
{
    for (int p = 0; p < e->nprojects; p++)
        extra[p] = 0;
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *t = &e->tasks[i];
        if (engine_task_live(t))
            extra[t->project] += engine_task_remaining(t) * t->usage * e->ptypes[t->ptype].flops;
    }
}

static int project_contactable(const struct engine *e, double now, int p)
{
    const struct engine_project *pr = &e->projects[p];
    return !pr->suspended && now >= pr->min_rpc_time && !pr->master_pending && pr->nendpoints > 0;
}

/* Deadline mode: the jobs a request to a project must be able to bring to be worth an
 * RPC. fetch_min_jobs, so that each RPC carries a batch (issue 11 item 11b), but one
 * once an instance of type t is idle (saturated time 0). Not sooner: waiting until an
 * instance idles lets the queue drain so that the room holds a batch again (a one-job
 * fetch "because an instance would idle within a poll" was a third of all RPCs on
 * BOINC's sample). */
static double min_jobs(const struct engine *e, int p, int t)
{
    if (e->rr[t].saturated <= 0)
        return 1;
    return engine_burst(e, p, t) ? e->cfg.burst_min_jobs : e->cfg.fetch_min_jobs;
}

/* A batch project (engine_burst) still running tasks of type t: no new batch yet. */
static int burst_busy(const struct engine *e, int p, int t)
{
    if (!engine_burst(e, p, t))
        return 0;
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *k = &e->tasks[i];
        if (k->project == p && k->ptype == t && engine_task_live(k))
            return 1;
    }
    return 0;
}

/* Deadline mode: 1 if the project's next tasks of type t can still meet their deadline
 * (room for min_jobs of them). */
static int deadline_room_ok(struct engine *e, double now, int p, int t)
{
    const struct engine_rsc *r = &e->projects[p].rsc[t];
    if (e->cfg.fetch != ENGINE_FETCH_DEADLINE || r->latency <= 0)
        return 1;
    if (burst_busy(e, p, t))
        return 0;
    double job = r->job_work > 0 ? r->job_work : 1;
    return engine_room(e, now, t, p, r->latency, job, NULL) >= min_jobs(e, p, t) * job - ENGINE_EPS;
}

/* Whether project p may be asked for work of type t now. */
static int fetchable(struct engine *e, double now, int p, int t)
{
    const struct engine_project *pr = &e->projects[p];
    return project_contactable(e, now, p) && !pr->no_new_work && now >= pr->rsc[t].backoff_until &&
           deadline_room_ok(e, now, p, t);
}

/* The fetchable project with the highest priority for type t, or -1. */
static int top_project(struct engine *e, double now, int t, const double *prio)
{
    int best = -1;
    for (int p = 0; p < e->nprojects; p++)
        if ((best < 0 || prio[p] > prio[best]) && fetchable(e, now, p, t))
            best = p;
    /* batches keep the shares only if a project whose batch still runs is not overtaken
       by one it ranks above: the instances alternate between batches in priority order */
    if (best >= 0 && engine_burst(e, best, t))
        for (int q = 0; q < e->nprojects; q++)
            if (q != best && prio[q] > prio[best] && burst_busy(e, q, t))
                return -1;
    return best;
}

/* Queued work per instance of type t, in wall seconds (the 2004 "estimated time to
 * complete the queued work"). */
static double queue_est(const struct engine *e, int t)
{
    int n = e->ptypes[t].ninstances;
    return n > 0 ? e->rr[t].queued / n : INFINITY;
}

/* The request for type t addressed to project p. */
static void request_for(struct engine *e, double now, int p, int t, struct engine_request *r)
{
    const struct engine_rr_type *rr = &e->rr[t];
    double ninst = e->ptypes[t].ninstances;
    double max_buf = e->cfg.min_buf + e->cfg.additional_buf;
    double secs = e->cfg.policy == ENGINE_POLICY_DEBT2004 ? (max_buf - queue_est(e, t)) * ninst
                                                          : rr->shortfall;
    double inst = rr->idle_now;
    if (e->starved[t] > 0) { /* one task per instance the project lacks */
        const struct engine_rsc *rs = &e->projects[p].rsc[t];
        inst = fmax(inst, e->starved[t]);
        secs = fmax(secs, e->starved[t] * (rs->job_work > 0 ? rs->job_work : 1));
    }
    /* the delay the server checks deadlines with: BOINC sends the EDF busy time of the
       deadline-miss tasks (seed 002); deadline mode the start an EDF schedule would give
       this project's next task (below), or the saturated time if its latency is unknown */
    r->delay = e->cfg.fetch == ENGINE_FETCH_BOINC ? rr->busy : fmax(rr->saturated, rr->busy);
    if (e->cfg.fetch == ENGINE_FETCH_DEADLINE && secs > 0) {
        const struct engine_rsc *rs = &e->projects[p].rsc[t];
        if (rs->latency > 0) {
            double job = rs->job_work > 0 ? rs->job_work : 1;
            double room = engine_room(e, now, t, p, rs->latency, job, &r->delay);
            double n = floor(room / job + ENGINE_EPS); /* whole jobs that fit */
            if (n < 1 || n < min_jobs(e, p, t) - ENGINE_EPS) {
                secs = inst = 0;
            } else {
                /* the server sends while the request is positive: n - 1/2 jobs' worth
                   brings n (asking for room - job lost one job whenever the room held
                   a whole number of them) */
                secs = fmin(secs, (n - 0.5) * job);
                inst = fmin(inst, n);
            }
        } else {
            secs = fmin(secs, ninst * fmax(e->cfg.min_buf, e->cfg.poll_period));
        }
    }
    r->secs = secs > 0 ? secs : 0;
    r->instances = inst > 0 ? inst : 0;
}

/* Brings the simulation up to date if something changed or it is stale. */
static int rr_fresh(struct engine *e, double now)
{
    if (e->rr_dirty || now - e->rr_time >= e->cfg.poll_period)
        return engine_rr_simulate(e, now);
    return 0;
}

/* Whether type t needs work now (updates the debt2004 get-work session). */
static int type_needs_work(struct engine *e, int t)
{
    double max_buf = e->cfg.min_buf + e->cfg.additional_buf;
    if (e->ptypes[t].ninstances <= 0)
        return 0;
    if (e->cfg.policy == ENGINE_POLICY_REC)
        return e->rr[t].saturated < e->cfg.min_buf;
    double est = queue_est(e, t);
    if (e->get_work[t] && est >= max_buf)
        e->get_work[t] = 0;
    else if (!e->get_work[t] && est < e->cfg.min_buf)
        e->get_work[t] = 1;
    return e->get_work[t];
}

/* Cheap test on the last simulation: could any type need work by now? */
static int maybe_needs_work(const struct engine *e, double now)
{
    if (e->rr_dirty)
        return 1;
    double age = now - e->rr_time;
    for (int t = 0; t < e->nptypes; t++) {
        if (e->ptypes[t].ninstances <= 0)
            continue;
        if (e->get_work[t])
            return 1;
        double have = e->cfg.policy == ENGINE_POLICY_REC ? e->rr[t].saturated : queue_est(e, t);
        if (have - age < e->cfg.min_buf + ENGINE_EPS)
            return 1;
    }
    return 0;
}

/* Fills act for an RPC to project p: its results, and requests for the types in
 * `want` (bitmask) or, if want is 0, piggy-backed requests for the types where p is the
 * top fetchable project. Returns 0, or -1 on ENOMEM. */
static int build_rpc(struct engine *e, double now, int p, int reason, unsigned want,
                     const double *prio, struct engine_action *act)
{
    memset(act, 0, sizeof *act);
    act->kind = ENGINE_ACT_RPC;
    act->reason = reason;
    act->project = p;
    size_t n = 0;
    for (size_t i = 0; i < e->ntasks; i++)
        n += e->tasks[i].project == p && !engine_task_live(&e->tasks[i]);
    if (n > e->report_cap) {
        size_t *r = realloc(e->report, n * sizeof *r);
        if (!r)
            return -1;
        e->report = r;
        e->report_cap = n;
    }
    n = 0;
    for (size_t i = 0; i < e->ntasks; i++)
        if (e->tasks[i].project == p && !engine_task_live(&e->tasks[i]))
            e->report[n++] = i;
    act->report = e->report;
    act->nreport = n;
    if (!e->projects[p].no_new_work && (want || prio)) {
        for (int t = 0; t < e->nptypes; t++) {
            /* piggy-back: p is the top fetchable project for t and t needs work (rec:
               saturated < min_buf, as BOINC's compute_work_request; debt2004: always,
               topping the queue up past the high water mark, seed 000) */
            int ask = want ? (want >> t) & 1
                           : top_project(e, now, t, prio) == p &&
                                 (e->cfg.policy == ENGINE_POLICY_DEBT2004 || type_needs_work(e, t));
            if (ask)
                request_for(e, now, p, t, &act->req[t]);
            if (act->req[t].secs > 0 || act->req[t].instances > 0)
                act->fetch = 1;
        }
    }
    if (e->session_project != p || e->session_endpoint >= e->projects[p].nendpoints) {
        e->session_project = p;
        e->session_endpoint = 0;
        e->session_reason = reason;
    }
    act->endpoint = e->session_endpoint;
    act->url = e->projects[p].endpoints[act->endpoint];
    return 0;
}

/* Deadline mode: the instances of type t the top fetchable project p lacks to use its
 * share of them (BOINC 6's "project starved" criterion). A full buffer of long-deadline
 * work must not lock out a project whose deadlines only allow a short queue. */
static double starved_instances(struct engine *e, double now, int t, const double *prio)
{
    int p = top_project(e, now, t, prio);
    if (p < 0)
        return 0;
    double total = 0, used = 0;
    for (int q = 0; q < e->nprojects; q++)
        if (q == p || e->projects[q].rsc[t].latency > 0)
            total += e->projects[q].share;
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *k = &e->tasks[i];
        if (k->project == p && k->ptype == t && engine_task_live(k))
            used += k->usage;
    }
    double want = e->ptypes[t].ninstances * e->projects[p].share / total - used;
    return want >= 1 - ENGINE_EPS ? floor(want + ENGINE_EPS) : 0;
}

/* Work fetch: the types needing work and the project to ask; -1 if none. */
static int choose_fetch(struct engine *e, double now, const double *prio, unsigned *want)
{
    unsigned need = 0;
    for (int t = 0; t < e->nptypes; t++) {
        e->starved[t] = 0;
        if (type_needs_work(e, t))
            need |= 1u << t;
        else if (e->cfg.fetch == ENGINE_FETCH_DEADLINE && e->ptypes[t].ninstances > 0 &&
                 (e->starved[t] = starved_instances(e, now, t, prio)) > 0)
            need |= 1u << t;
    }
    *want = 0;
    if (!need)
        return -1;
    /* GPU types first, then the CPU */
    for (int k = 0; k < e->nptypes; k++) {
        int t = k < e->nptypes - 1 ? k + 1 : 0;
        if (!((need >> t) & 1))
            continue;
        int p = top_project(e, now, t, prio);
        if (p < 0)
            continue;
        /* seed 002: asking p for t, we may ask for the other needy types too, even
           if p is backed off for them */
        for (int u = 0; u < e->nptypes; u++)
            if (((need >> u) & 1) && (u == t || deadline_room_ok(e, now, p, u)))
                *want |= 1u << u;
        struct engine_request r;
        request_for(e, now, p, t, &r);
        if (r.secs > 0 || r.instances > 0)
            return p;
        *want = 0;
    }
    return -1;
}

/* Which projects have results due for reporting: deadline within report_cushion, or
 * waiting for report_max_delay. Remembers when the next one falls due, so that most
 * polls do not look at the tasks at all. */
static void reports_due(struct engine *e, double now, unsigned char *due)
{
    for (int p = 0; p < e->nprojects; p++)
        due[p] = 0;
    if (e->nfinished == 0 || (e->report_gen == e->finished_gen && now < e->report_at))
        return;
    double next = INFINITY;
    for (int p = 0; p < e->nprojects; p++)
        e->projects[p].oldest_live = INFINITY;
    for (size_t i = 0; i < e->ntasks; i++) {
        struct engine_project *q = &e->projects[e->tasks[i].project];
        if (engine_task_live(&e->tasks[i]) && e->tasks[i].received < q->oldest_live)
            q->oldest_live = e->tasks[i].received;
    }
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *t = &e->tasks[i];
        if (engine_task_live(t))
            continue;
        /* rule 8: a batch's results go as soon as its last task ends */
        if (t->received < e->projects[t->project].oldest_live &&
            engine_burst(e, t->project, t->ptype)) {
            due[t->project] = 1;
            continue;
        }
        double cushion = e->cfg.report_cushion;
        if (e->cfg.fetch == ENGINE_FETCH_DEADLINE) /* keep most of the reserve for outages */
            cushion = fmin(cushion, (1 - e->cfg.report_batch) *
                                        (t->deadline - engine_task_plan_deadline(e, t)));
        double at = fmin(t->deadline - cushion, t->completed + e->cfg.report_max_delay);
        if (now >= at)
            due[t->project] = 1;
        else if (at < next)
            next = at;
    }
    /* a project with a due result reports all of its results: look again next time */
    for (int p = 0; p < e->nprojects; p++)
        if (due[p])
            next = now;
    e->report_gen = e->finished_gen;
    e->report_at = next;
}

/* engine_poll without the bookkeeping; pr, ex and due have nprojects entries. */
static void poll_once(struct engine *e, double now, struct engine_action *act, double *pr,
                      double *ex, unsigned char *due)
{
    if (e->session_project >= 0) { /* the next endpoint of a failing session */
        int p = e->session_project;
        if (rr_fresh(e, now))
            return;
        queued_credit(e, ex);
        engine_priorities(e, ex, pr);
        unsigned want = 0;
        if (e->session_reason == ENGINE_WHY_FETCH)
            choose_fetch(e, now, pr, &want);
        build_rpc(e, now, p, ENGINE_WHY_RETRY, want, want ? NULL : pr, act);
        return;
    }
    for (int p = 0; p < e->nprojects; p++) {
        struct engine_project *q = &e->projects[p];
        if (q->master_pending && !q->suspended && q->master[0] && now >= q->master_time) {
            act->kind = ENGINE_ACT_MASTER;
            act->reason = ENGINE_WHY_MASTER;
            act->project = p;
            act->url = q->master;
            return;
        }
    }
    reports_due(e, now, due);
    int p = -1, reason = ENGINE_WHY_NONE;
    for (int k = 0; k < e->nprojects && p < 0; k++)
        if (e->projects[k].rpc_requested && project_contactable(e, now, k))
            p = k, reason = ENGINE_WHY_REQUESTED;
    for (int k = 0; k < e->nprojects && p < 0; k++)
        if (due[k] && project_contactable(e, now, k))
            p = k, reason = ENGINE_WHY_REPORT;
    if (p < 0 && (now - e->last_fetch_check < e->cfg.poll_period || !maybe_needs_work(e, now)))
        return;
    if (rr_fresh(e, now))
        return;
    queued_credit(e, ex);
    engine_priorities(e, ex, pr);
    if (p >= 0) {
        build_rpc(e, now, p, reason, 0, pr, act);
        return;
    }
    e->last_fetch_check = now;
    unsigned want;
    p = choose_fetch(e, now, pr, &want);
    if (p >= 0)
        build_rpc(e, now, p, ENGINE_WHY_FETCH, want, NULL, act);
}

void engine_poll(struct engine *e, double now, struct engine_action *act)
{
    memset(act, 0, sizeof *act);
    if (!e->host_on || e->nprojects == 0)
        return;
    /* not in the work buffer: the simulations reuse it */
    size_t np = (size_t)e->nprojects;
    double stack[2 * 64];
    unsigned char due_stack[64];
    double *pr = np <= 64 ? stack : malloc(2 * np * sizeof *pr);
    unsigned char *due = np <= 64 ? due_stack : malloc(np);
    if (pr && due)
        poll_once(e, now, act, pr, pr + np, due);
    memset(e->starved, 0, sizeof e->starved); /* only for the request just built */
    if (pr != stack)
        free(pr);
    if (due != due_stack)
        free(due);
    e->act = *act;
}

static int size_desc(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Deadline mode: the earliest deadline still ahead among p's results waiting to be
 * reported, or INFINITY. */
static double pending_deadline(const struct engine *e, double now, int p)
{
    double best = INFINITY;
    for (size_t i = 0; i < e->ntasks; i++) {
        const struct engine_task *t = &e->tasks[i];
        if (t->project == p && t->state == ENGINE_TASK_DONE && t->deadline > now &&
            t->deadline < best)
            best = t->deadline;
    }
    return best;
}

/* A contact with project p failed (all endpoints, or the master list). An attempt at or
 * after the end of the exponential backoff counts as a failure: nrpc_failures grows, the
 * backoff restarts, and every master_fetch_period failures the master list is re-read
 * (seed 000). In deadline mode, while finished results are still worth reporting, extra
 * attempts ("probes") are made inside the backoff, at the latest halfway to the earliest
 * of their deadlines and never closer than rpc_backoff_min; a failed probe changes
 * nothing in the backoff itself. */
static void contact_failed(struct engine *e, double now, int p)
{
    struct engine_project *q = &e->projects[p];
    q->last_fail = now;
    if (now >= q->backoff_until - ENGINE_EPS) {
        q->nrpc_failures++;
        q->backoff_until = now + engine_rpc_backoff(e, q->nrpc_failures);
        if (q->master[0] && q->nrpc_failures % e->cfg.master_fetch_period == 0 &&
            !q->master_pending) {
            q->master_pending = 1;
            q->master_time = now;
        }
    }
    q->min_rpc_time = q->backoff_until;
    if (e->cfg.fetch == ENGINE_FETCH_DEADLINE) {
        double dl = pending_deadline(e, now, p);
        if (dl < INFINITY)
            q->min_rpc_time =
                fmin(q->backoff_until, now + fmax(e->cfg.rpc_backoff_min, (dl - now) / 2));
    }
}

int engine_rpc_done(struct engine *e, double now, const struct engine_action *act,
                    const struct engine_reply *reply)
{
    if (act->kind != ENGINE_ACT_RPC || act->project < 0 || act->project >= e->nprojects) {
        errno = EINVAL;
        return -1;
    }
    int p = act->project;
    struct engine_project *q = &e->projects[p];
    if (!reply->ok) {
        q->rpcs_failed++;
        if (act->endpoint + 1 < q->nendpoints) {
            e->session_project = p;
            e->session_endpoint = act->endpoint + 1;
            return 0;
        }
        e->session_project = -1;
        contact_failed(e, now, p);
        if (e->session_reason == ENGINE_WHY_FETCH)
            e->last_fetch_check = -INFINITY; /* try the next project right away */
        return 0;
    }
    e->session_project = -1;
    q->rpcs_ok++;
    q->nrpc_failures = 0;
    q->backoff_until = 0;
    q->rpc_requested = 0;
    q->min_rpc_time = reply->request_delay > 0 ? now + reply->request_delay : 0;

    /* act->report indexes e->tasks as it was at engine_poll: remove from the top */
    size_t *rep = (size_t *)act->report;
    if (act->nreport > 0)
        qsort(rep, act->nreport, sizeof *rep, size_desc);
    for (size_t k = 0; k < act->nreport; k++)
        if (rep[k] < e->ntasks && e->tasks[rep[k]].project == p &&
            !engine_task_live(&e->tasks[rep[k]]))
            engine_task_remove(e, rep[k]);

    unsigned got = 0;
    int rc = 0;
    for (size_t k = 0; k < reply->ntasks; k++) {
        if (engine_task_add(e, now, p, &reply->tasks[k]) < 0)
            rc = -1;
        else
            got |= 1u << reply->tasks[k].ptype;
    }
    for (int t = 0; t < e->nptypes; t++)
        if ((act->req[t].secs > 0 || act->req[t].instances > 0) && !((got >> t) & 1))
            engine_rsc_backoff(e, now, p, t);
    if (act->fetch && !got)
        e->last_fetch_check = -INFINITY; /* nothing came: try the next project */
    e->rr_dirty = e->sched_dirty = 1;
    return rc;
}

void engine_master_done(struct engine *e, double now, int project, int ok,
                        const char *const *endpoints, int n)
{
    if (project < 0 || project >= e->nprojects)
        return;
    struct engine_project *q = &e->projects[project];
    q->master_fetches++;
    int valid = 0;
    for (int i = 0; ok && i < n && i < ENGINE_MAX_ENDPOINTS; i++)
        valid += endpoints[i] && *endpoints[i] && strlen(endpoints[i]) < ENGINE_URL_MAX;
    if (!ok || valid == 0) {
        int pending = q->master_pending;
        q->master_pending = 0; /* a failed re-read is not a reason to schedule another */
        contact_failed(e, now, project);
        q->master_pending = pending;
        q->master_time = q->min_rpc_time;
        return;
    }
    int fresh = 0;
    char list[ENGINE_MAX_ENDPOINTS][ENGINE_URL_MAX];
    int m = 0;
    for (int i = 0; i < n && m < ENGINE_MAX_ENDPOINTS; i++) {
        if (!endpoints[i] || !*endpoints[i] || strlen(endpoints[i]) >= ENGINE_URL_MAX)
            continue;
        int known = 0;
        for (int j = 0; j < q->nendpoints; j++)
            known |= !strcmp(q->endpoints[j], endpoints[i]);
        fresh |= !known;
        strcpy(list[m++], endpoints[i]);
    }
    memcpy(q->endpoints, list, sizeof list[0] * (size_t)m);
    q->nendpoints = m;
    q->master_pending = 0;
    if (fresh) { /* seed 000: new scheduler endpoints reset failures and backoff */
        q->nrpc_failures = 0;
        q->backoff_until = 0;
        q->min_rpc_time = 0;
    }
}

double engine_prefetch_room(double cap, int slots, double held, double finish_rate, double rtt_s,
                            double cover_s)
{
    double rate = finish_rate > 0 ? finish_rate : 0;
    double hold = cap;
    if (rate > 0)
        hold = fmin(cap, rate * fmax(cover_s, 0) + (slots > 0 ? slots : 0));
    double drain = fmin(fmax(held, 0), rate * fmax(rtt_s, 0));
    double room = hold - held + drain;
    return room > 0 ? room : 0;
}

/*
 * metaplace.c - placement rounds (docs/meta.md "A job's life", "Placing many jobs at
 * once"): which sites can hold a job, ESTIMATE to every eligible site at once (shared by
 * the jobs of one pass that ask the same), the decision once all answered or the
 * timeout passed (meta_rank, whole-second ties spread, arrays ranked by their last
 * wave), RESERVE and SUBMIT at the best site (or a move's reservation), a failed
 * placement or move, a cancel at the site, and a placement resumed after a restart.
 * Above the messages (metasend.c) and the jobs (metajob.c); the replies come from
 * metasite.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/fileoffer.h"
#include "daemon/filestore.h"
#include "daemon/loop.h"
#include "lib/text.h"
#include "roles/meta/live/meta_int.h"

/* ---- eligibility ---- */

static bool site_ok(const struct msite *s, const struct meta_request *r)
{
    return s->known && s->info.up && meta_site_can_hold(&s->info, r, NULL, 0);
}

/* Site i may be asked to take job j: up, wide enough, and it never refused j for good. */
static bool site_for(const struct meta *M, const struct mjob *j, int i)
{
    return !(j->refused & (1ull << i)) && site_ok(&M->site[i], &j->rq);
}

bool meta_nowhere(struct meta *M, const struct meta_request *r, char *why, size_t whylen)
{
    size_t len = (size_t)snprintf(why, whylen, "no site can ever hold this job:");
    for (int i = 0; i < M->nsites; i++) {
        struct msite *s = &M->site[i];
        /* Not known yet, or no host reported yet (a site whose nodes have not
         * connected, or are all gone, like a Slurm partition with every node down):
         * spool it, placement will tell. */
        if (!s->known || s->info.max_procs == 0)
            return false;
        struct meta_site any = s->info;
        any.up = true; /* a site down now may come back */
        char w[200];
        if (meta_site_can_hold(&any, r, w, sizeof w))
            return false;
        if (len < whylen)
            len += (size_t)snprintf(why + len, whylen - len, "%s site %s: %s", i ? ";" : "",
                                    s->name, w);
    }
    text_fix(why);
    return M->nsites > 0;
}

/* ---- placement ---- */

static void round_over(struct meta *M, struct mjob *j, const char *why)
{
    if (j->phase != PH_IDLE && M->inflight)
        M->inflight--;
    j->phase = PH_IDLE;
    j->tried = 0;
    j->retry_at = loop_now_ms() + 1000;
    if (why && strcmp(meta_job_reason(j), why)) {
        meta_job_reason_set(j, why);
        meta_job_dirty(M, j);
    }
}

/* An array of N one-element tasks at site s: ranked by when its last wave would end,
 * so the start the policy sees is the first element's start plus the waves before the
 * last one (N over the site's processors, each the walltime at the site's speed). A
 * bigger or faster site finishes a big array sooner even if it starts it later. */
static int64_t array_start(const struct msite *s, const struct mjob *j, int64_t start)
{
    if (j->ntasks <= 1 || start == META_NEVER)
        return start;
    int64_t width =
        s->info.total_procs > 0 ? s->info.total_procs / (j->rq.procs > 0 ? j->rq.procs : 1) : 1;
    if (width < 1)
        width = 1;
    int64_t waves = ((int64_t)j->ntasks + width - 1) / width;
    double speed = s->info.speed > 0 ? s->info.speed : 1;
    return start + (int64_t)((double)(waves - 1) * (double)j->rq.walltime / speed);
}

/* Estimates of a burst of placements are taken before any of them reserved, so equal
 * ones are common (every idle site answers "now"). For the ranking a start counts in
 * whole seconds and, among equal ones, the site given fewer placements in this second
 * comes first: a burst spreads over equally good sites instead of piling on the first
 * (whose `flex` reservations would then start later and later). */
static int64_t tie_break(const struct msite *s, int64_t start, int64_t sec)
{
    if (start == META_NEVER)
        return start;
    int64_t n = s->burst_sec == sec ? s->burst_n : 0;
    return (start + 999) / 1000 * 1000 + (n < 999 ? n : 999);
}

static void burst_count(struct msite *s, int64_t sec)
{
    if (s->burst_sec != sec) {
        s->burst_sec = sec;
        s->burst_n = 0;
    }
    s->burst_n++;
}

/* ---- staging time (issue 26) ---- */

struct in_list {
    struct in_file {
        uint8_t d[SHA256_LEN];
        uint64_t size;
    } * v;
    uint32_t n, cap;
};

static int in_add(void *arg, const msgpack_object *in)
{
    struct in_list *l = arg;
    size_t hl;
    const char *h = wire_get_str(in, "hash", &hl);
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 16;
        void *p = realloc(l->v, nc * sizeof *l->v);
        if (!p)
            return -1;
        l->v = p, l->cap = nc;
    }
    if (h && filestore_parse_hash(h, hl, l->v[l->n].d) == 0)
        l->v[l->n++].size = wire_get_u64(in, "size", 0);
    return 0;
}

static int in_cmp(const void *a, const void *b)
{
    return memcmp(((const struct in_file *)a)->d, ((const struct in_file *)b)->d, SHA256_LEN);
}

/* The bytes of j's inputs (each distinct file once) site i lacks as far as the spool
 * knows (what its offers there acknowledged, fileoffer_held: a batch site's store, or a
 * Slurm site's in its workdir); 0 when it has no bandwidth (the staging time is not
 * known: nothing is added), when the job has no inputs, or without memory. One site per
 * call: each site's ESTIMATE answer asks for its own. */
static uint64_t inputs_missing(struct meta *M, const struct mjob *j, int i)
{
    const struct msite *s = &M->site[i];
    if (!(s->info.bandwidth_mb_s > 0) || !meta_files_has_inputs(j))
        return 0;
    struct in_list l = {0};
    uint64_t miss = 0;
    if (meta_files_each_input(j, in_add, &l) == 0 && l.n) {
        qsort(l.v, l.n, sizeof *l.v, in_cmp);
        for (uint32_t k = 0; k < l.n; k++) {
            if (k && !memcmp(l.v[k].d, l.v[k - 1].d, SHA256_LEN))
                continue;
            uint64_t held = fileoffer_held(s->offer, l.v[k].d);
            miss += l.v[k].size - (held < l.v[k].size ? held : l.v[k].size);
        }
    }
    free(l.v);
    return miss;
}

int64_t meta_staged_start(struct meta *M, const struct mjob *j, int i,
                          const struct meta_est_answer *a)
{
    uint64_t miss = a->earliest == META_NEVER ? 0 : inputs_missing(M, j, i);
    if (!miss)
        return a->earliest;
    const struct meta_site *s = &M->site[i].info;
    if (M->policy == META_SLURM_M || j->ntasks > 1) /* queued only once staged: the sum */
        return meta_start_staged(s, a->earliest, miss);
    /* the sites' times are wall-clock ms (docs/wire.md) */
    int64_t t = meta_first_start(a->w, a->n, wall_now_ms() + meta_stage_ms(s, miss));
    return t != META_NEVER ? t : meta_start_staged(s, a->earliest, miss);
}

/* Picks the best site not tried yet and reserves there (or submits, for slurm_m). */
void meta_decide(struct meta *M, struct mjob *j)
{
    int cand[META_MAX_SITES], order[META_MAX_SITES];
    int64_t start[META_MAX_SITES];
    size_t n = 0;
    bool mv = j->phase >= PH_MV_EST;
    int64_t sec = loop_now_ms() / 1000;
    for (int i = 0; i < M->nsites; i++) /* the estimates hold the staging (issue 26) */
        if (site_for(M, j, i) && !(j->tried & (1ull << i)) && (!mv || i != j->site)) {
            cand[n] = i;
            int64_t st = meta_est(j, i);
            start[n++] = tie_break(&M->site[i], array_start(&M->site[i], j, st), sec);
        }
    struct meta_site sites[META_MAX_SITES];
    for (int i = 0; i < M->nsites; i++)
        sites[i] = M->site[i].info;
    size_t k = meta_rank(M->policy, sites, cand, start, n, &j->rq, &M->rr_state, order);
    if (mv) {
        /* a move only when clearly better: earlier by more than the margin */
        int64_t cur = meta_est(j, j->site);
        int64_t to = k ? meta_est(j, order[0]) : META_NEVER;
        if (k == 0 || cur == META_NEVER || to + M->cfg.move_margin_s * 1000 >= cur) {
            j->phase = PH_IDLE;
            if (M->inflight)
                M->inflight--;
            return;
        }
        int s = order[0];
        burst_count(&M->site[s], sec);
        j->tried |= 1ull << s;
        j->attempt++;
        j->mv_site = s;
        meta_resv_name(M, j, j->attempt, j->mv_resv, sizeof j->mv_resv);
        j->mv_sjob = 0;
        j->phase = PH_MV_RESERVE;
        meta_job_dirty(M, j);
        log_info("job %" PRIu64 ": site %s offers a start %llds earlier than %s: moving", j->id,
                 M->site[s].name, (long long)((cur - meta_est(j, s)) / 1000),
                 M->site[j->site].name);
        meta_send_reserve(M, &M->site[s], j, j->mv_resv, meta_est(j, s));
        return;
    }
    if (k == 0) {
        bool refused = false; /* every site that can hold it refused it in this round */
        for (int i = 0; i < M->nsites && !refused; i++)
            refused = site_for(M, j, i) && (j->tried & (1ull << i));
        /* issue 27: the last refusal stays the reason, not "waiting for a site to be up"
         * while the sites are up */
        round_over(M, j,
                   n         ? "no site offered a start estimate; trying again"
                   : refused ? NULL
                             : "waiting for a site that can hold it to be up");
        return;
    }
    int s = order[0];
    burst_count(&M->site[s], sec);
    j->tried |= 1ull << s;
    j->attempt++;
    j->requeueing = false; /* a new copy: a requeue is over once the job is placed anew */
    j->site = s;
    j->sjob = 0;
    j->est_start = meta_est(j, s);
    if (M->policy == META_SLURM_M || j->ntasks > 1) { /* sbatch -M, or an array: no reservation */
        j->resv[0] = '\0';
        j->phase = PH_SUBMIT;
        meta_job_set(M, j, MJ_PLACING, "");
        meta_submit(M, &M->site[s], j); /* its inputs offered there first (issue 26) */
        return;
    } else {
        /* RESERVE and the SUBMIT into it leave together (one round trip, not two):
         * the site takes them in order on this one connection, so the submission finds
         * the reservation, or is refused when the reservation was (then the next site) */
        meta_resv_name(M, j, j->attempt, j->resv, sizeof j->resv);
        j->phase = PH_SUBMIT;
        meta_send_reserve(M, &M->site[s], j, j->resv, j->est_start);
        meta_job_set(M, j, MJ_PLACING, "");
        meta_submit(M, &M->site[s], j);
        return;
    }
}

int64_t meta_est(const struct mjob *j, int i)
{
    return j->start_est && i >= 0 ? j->start_est[i] : 0;
}

int meta_est_fill(struct meta *M, struct mjob *j, int64_t v)
{
    size_t n = M->nsites > 0 ? (size_t)M->nsites : 1;
    if (!j->start_est) {
        if (!(j->start_est = malloc(n * sizeof *j->start_est)))
            return -1;
        M->nest++;
    }
    for (size_t i = 0; i < n; i++)
        j->start_est[i] = v;
    return 0;
}

int meta_est_set(struct meta *M, struct mjob *j, int i, int64_t v)
{
    if (!j->start_est && meta_est_fill(M, j, 0) < 0)
        return -1;
    j->start_est[i] = v;
    return 0;
}

/* The sites of elig whose estimates a placement waits for: all but those that let
 * META_EST_LATE estimates in a row time out (a slow or stuck site would hold every
 * placement for meta.estimate_timeout_ms), unless that leaves none. */
static uint64_t awaited(const struct meta *M, uint64_t elig)
{
    uint64_t w = 0;
    for (int i = 0; i < M->nsites; i++)
        if ((elig & (1ull << i)) && M->site[i].est_late < META_EST_LATE)
            w |= 1ull << i;
    return w ? w : elig;
}

/* ESTIMATE of j to the sites of elig: those of `wait` as `kind` (id), the others as
 * probes that nothing waits for. */
static void send_estimates(struct meta *M, struct mjob *j, uint64_t elig, uint64_t wait, int kind,
                           uint64_t id)
{
    for (int i = 0; i < M->nsites; i++)
        if (elig & (1ull << i))
            meta_send_estimate(M, &M->site[i], j, wait & (1ull << i) ? kind : RK_PROBE,
                               wait & (1ull << i) ? id : 0);
}

void meta_ask_estimates(struct meta *M, struct mjob *j, bool move)
{
    if (meta_est_fill(M, j, META_NEVER) < 0) { /* no memory: a round later */
        j->retry_at = loop_now_ms() + 1000;
        return;
    }
    if (move) /* its own site: the start the site plans for it (JOB_GET `estimate`) */
        j->start_est[j->site] = j->est_start > 0 ? j->est_start : META_NEVER;
    uint64_t elig = 0;
    for (int i = 0; i < M->nsites; i++)
        if (site_for(M, j, i) && !(j->tried & (1ull << i)) && !(move && i == j->site))
            elig |= 1ull << i;
    j->asked = awaited(M, elig);
    send_estimates(M, j, elig, j->asked, RK_EST, j->id);
    j->phase = move ? PH_MV_EST : PH_EST;
    j->phase_deadline = loop_now_ms() + M->cfg.estimate_timeout_ms;
    M->inflight++;
    if (!j->asked)
        meta_decide(M, j);
}

/* ---- estimate groups ----
 * The jobs of one placement pass that ask the same thing (processors, walltime, memory,
 * disk, user) share one ESTIMATE per site: a burst of N like jobs costs each site one
 * estimate instead of N. Every member gets the answer; meta_decide() then spreads equal
 * answers over the sites (tie_break) and the `flex` reservations settle the rest. */

static struct megroup *group_find(struct meta *M, uint64_t id)
{
    for (uint32_t i = 0; i < M->neg; i++)
        if (M->eg[i].id == id)
            return &M->eg[i];
    return NULL;
}

static void group_done(struct meta *M, struct megroup *g)
{
    if (g->pending && --g->pending)
        return;
    free(g->jobs);
    *g = M->eg[--M->neg];
}

static bool same_ask(struct meta *M, const struct mjob *a, const struct mjob *b)
{
    return a->rq.procs == b->rq.procs && a->ppn == b->ppn && a->rq.walltime == b->rq.walltime &&
           a->rq.mem == b->rq.mem && a->rq.disk == b->rq.disk &&
           !strcmp(meta_job_user(M, a), meta_job_user(M, b));
}

/* Places j in a group of this pass (first..neg) asking the same, or opens one and sends
 * its ESTIMATEs. Without memory: alone, as before. */
static void ask_grouped(struct meta *M, struct mjob *j, uint32_t first)
{
    struct megroup *g = NULL;
    for (uint32_t i = first; i < M->neg && !g; i++) {
        struct mjob *l = meta_job_find(M, M->eg[i].jobs[0]);
        if (l && same_ask(M, l, j))
            g = &M->eg[i];
    }
    if (g && g->n == g->cap) {
        void *p = realloc(g->jobs, 2 * g->cap * sizeof *g->jobs);
        if (!p) {
            meta_ask_estimates(M, j, false);
            return;
        }
        g->jobs = p;
        g->cap *= 2;
    }
    if (g) {
        if (meta_est_fill(M, j, META_NEVER) < 0) { /* no memory: a round later */
            j->retry_at = loop_now_ms() + 1000;
            return;
        }
        g->jobs[g->n++] = j->id;
        j->asked = g->asked;
        j->phase = PH_EST;
        j->phase_deadline = loop_now_ms() + M->cfg.estimate_timeout_ms;
        M->inflight++;
        if (!j->asked)
            meta_decide(M, j);
        return;
    }
    uint64_t asked = 0;
    for (int i = 0; i < M->nsites; i++)
        if (site_for(M, j, i))
            asked |= 1ull << i;
    void *p = NULL;
    if (meta_est_fill(M, j, META_NEVER) < 0) { /* no memory: a round later */
        j->retry_at = loop_now_ms() + 1000;
        return;
    }
    if (!asked || (M->neg == M->capeg &&
                   !(p = realloc(M->eg, (M->capeg ? 2 * M->capeg : 16) * sizeof *M->eg)))) {
        meta_ask_estimates(M, j, false);
        return;
    }
    if (p) {
        M->eg = p;
        M->capeg = M->capeg ? 2 * M->capeg : 16;
    }
    g = &M->eg[M->neg];
    if (!(g->jobs = malloc(16 * sizeof *g->jobs))) {
        meta_ask_estimates(M, j, false);
        return;
    }
    M->neg++;
    g->id = ++M->next_gid;
    g->cap = 16;
    g->n = 1;
    g->jobs[0] = j->id;
    uint64_t elig = asked;
    asked = awaited(M, elig);
    g->asked = asked;
    g->pending = 0;
    for (int i = 0; i < M->nsites; i++)
        g->pending += (asked >> i) & 1;
    send_estimates(M, j, elig, asked, RK_GEST, g->id);
    j->asked = asked;
    j->phase = PH_EST;
    j->phase_deadline = loop_now_ms() + M->cfg.estimate_timeout_ms;
    M->inflight++;
}

/* A site's answer (e: its earliest start, or META_NEVER; answered false: no answer
 * will come) to a group's ESTIMATE, given to every member still waiting for it. */
void meta_group_answer(struct meta *M, uint64_t gid, int site, const struct meta_est_answer *a,
                       bool answered)
{
    struct megroup *g = group_find(M, gid);
    if (!g)
        return;
    for (uint32_t k = 0; k < g->n; k++) {
        struct mjob *j = meta_job_find(M, g->jobs[k]);
        if (!j || j->phase != PH_EST || !(j->asked & (1ull << site)))
            continue;
        if (answered) /* held since its round began (PH_EST) */
            meta_est_set(M, j, site, meta_staged_start(M, j, site, a));
        j->asked &= ~(1ull << site);
        if (!j->asked && answered)
            meta_decide(M, j);
    }
    group_done(M, g);
}

void meta_place_some(struct meta *M)
{
    int64_t now = loop_now_ms();
    bool up = false;
    for (int i = 0; i < M->nsites && !up; i++)
        up = M->site[i].info.up;
    if (!up)
        return; /* no site to ask: a round per spooled job and second would find none */
    uint32_t first = M->neg;
    for (uint32_t i = 0; i < M->njobs && M->inflight < META_INFLIGHT_MAX; i++) {
        struct mjob *j = M->jobs[i];
        if (j->state != MJ_QUEUED || j->phase != PH_IDLE || now < j->retry_at || j->dep || j->held)
            continue; /* j->dep: waits for its dependency (metadep.c) */
        if (meta_policy_uses_estimates(M->policy)) {
            if (j->tried)
                meta_ask_estimates(M, j, false);
            else
                ask_grouped(M, j, first);
        } else {
            if (meta_est_fill(M, j, loop_now_ms()) < 0) {
                j->retry_at = now + 1000; /* no memory: a round later */
                continue;
            }
            M->inflight++;
            j->phase = PH_EST;
            meta_decide(M, j);
        }
    }
}

/* Placement at site s failed (refused, timed out): back to the spool, next site. */
void meta_place_failed(struct meta *M, struct mjob *j, const char *why)
{
    char r[300];
    snprintf(r, sizeof r, "site %s: %s", M->site[j->site].name, why);
    log_info("job %" PRIu64 ": placement failed at %s", j->id, r);
    j->site = -1;
    j->resv[0] = '\0';
    meta_job_set(M, j, MJ_QUEUED, r);
    if ((long)j->attempt >= M->cfg.max_attempts) {
        round_over(M, j, NULL);
        char e[400];
        snprintf(e, sizeof e,
                 "no site took the job in %ld placements (meta.max_attempts); the last: %.250s",
                 M->cfg.max_attempts, r);
        j->exit = -1; /* it never ran */
        meta_job_set(M, j, MJ_FAILED, e);
        return;
    }
    j->phase = PH_EST;
    meta_decide(M, j);
}

void meta_place_refused(struct meta *M, struct mjob *j, const char *why)
{
    char r[256];
    snprintf(r, sizeof r, "refused by site %s: %s", M->site[j->site].name, why);
    j->refused |= 1ull << j->site;
    bool all = true;
    for (int i = 0; i < M->nsites; i++)
        all = all && (j->refused & (1ull << i));
    if (!all) { /* another site may take it (its classes, its hosts differ) */
        meta_place_failed(M, j, why);
        return;
    }
    log_info("job %" PRIu64 ": %s; every site refused it: failed", j->id, r);
    j->site = -1;
    j->resv[0] = '\0';
    round_over(M, j, NULL);
    j->exit = -1; /* it never ran */
    meta_job_set(M, j, MJ_FAILED, r);
}

void meta_move_failed(struct meta *M, struct mjob *j, const char *why)
{
    log_info("job %" PRIu64 ": not moved to %s: %s", j->id, M->site[j->mv_site].name, why);
    j->mv_site = -1;
    j->mv_resv[0] = '\0';
    j->mv_sjob = 0;
    meta_job_dirty(M, j);
    j->phase = PH_IDLE;
    if (M->inflight)
        M->inflight--;
}

void meta_job_cancel_at_site(struct meta *M, struct mjob *j)
{
    /* orders of the outbox (metaorder.c): stored in this turn, before the user's OK, and
     * sent until the site acknowledges them */
    if (j->site >= 0 && !j->sjob && j->state == MJ_PLACING) /* its submission unanswered */
        meta_order_cancel_unanswered(M, j);
    if (j->site >= 0) {
        meta_order_add(M, j->site, OR_CANCEL, j->id, j->sjob, NULL);
        meta_send_release(M, &M->site[j->site], j->resv);
    }
    if (j->mv_site >= 0) {
        meta_order_add(M, j->mv_site, OR_CANCEL, j->id, j->mv_sjob, NULL);
        meta_send_release(M, &M->site[j->mv_site], j->mv_resv);
    }
    if (j->phase != PH_IDLE && M->inflight)
        M->inflight--;
    j->phase = PH_IDLE;
    j->mv_site = -1;
}

void meta_resume(struct meta *M, struct mjob *j)
{
    j->phase = PH_IDLE;
    j->est_start = 0;
    if (j->mv_site >= 0 && j->withdrawing && j->site >= 0) {
        /* a move was withdrawing its old copy: ask again (the same answer if it was) */
        j->phase = PH_MV_WITHDRAW;
        M->inflight++;
        meta_send_withdraw(M, j);
    } else if (j->mv_site >= 0) {
        /* a move that had not withdrawn anything (nothing was submitted at the new
         * site before that): given up, its reservation released */
        meta_send_release(M, &M->site[j->mv_site], j->mv_resv);
        j->mv_site = -1;
        j->mv_resv[0] = '\0';
        j->mv_sjob = 0;
        meta_job_dirty(M, j);
    } else if (j->state == MJ_PLACING && j->site >= 0 && !j->requeueing) {
        j->phase = PH_SUBMIT;
        M->inflight++;
        /* at start no site is up yet: its submission (its inputs first) goes when the
           site answers (site_up), not now into a connection not made yet */
        if (M->site[j->site].info.up)
            meta_submit(M, &M->site[j->site], j);
    }
}

void meta_job_requeue(struct meta *M, struct mjob *j)
{
    j->requeues++;
    meta_job_dirty(M, j);
    if (MJ_ENDED(j->state) || j->site < 0) { /* ended at its site, or never placed */
        if (MJ_ENDED(j->state))
            meta_job_requeue_now(M, j, "requeued by its user: placed again");
        return;
    }
    struct msite *s = &M->site[j->site];
    meta_job_cancel_at_site(M, j); /* orders: the copy's cancel, the reservation */
    j->withdrawing = false;        /* the cancel decides now, not a withdrawal */
    char r[200];
    if (!s->info.up) {
        /* the site cannot confirm anything: the requester vouches that its copy will not
         * run (a lost site); the cancel reaches the site if it ever answers again */
        snprintf(r, sizeof r,
                 "requeued while site %s is unreachable: placed again (its copy there is "
                 "cancelled when the site answers)",
                 s->name);
        meta_job_requeue_now(M, j, r);
        return;
    }
    j->requeueing = true;
    snprintf(r, sizeof r, "requeueing: waiting for site %s to cancel its copy", s->name);
    meta_job_set(M, j, (enum mj_state)j->state, r);
}

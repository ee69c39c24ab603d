/*
 * place.h - the metascheduler's placement policy, pure C without I/O (MISSION M2, M3).
 *
 * The live role (gridnode meta) and its simulator (gridnode meta --simulate) both call
 * these functions: one policy, two drivers. The caller knows each site's resources (the
 * information service, M2) and, for the estimate-based policies, each eligible site's
 * earliest start for the job (ESTIMATE replies, or the simulated site's engine); these
 * functions decide which sites may hold a job and in which order to try them.
 *
 * Times are milliseconds (int64); memory and disk are MB.
 */
#ifndef GRIDNODE_META_PLACE_H
#define GRIDNODE_META_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_NEVER INT64_MAX

enum meta_policy {
    META_EARLIEST_COMPLETION, /* default: estimated start + walltime / speed, earliest first */
    META_EARLIEST_START,      /* estimated start, earliest first */
    META_LEAST_QUEUED,        /* least queued work per processor (no estimates needed) */
    META_ROUND_ROBIN,         /* eligible sites in turn (no estimates needed) */
    META_RANDOM,              /* a random eligible site (no estimates needed) */
    META_SLURM_M,             /* Slurm's sbatch -M: earliest start at submit; the caller makes
                               * no reservation and never re-evaluates */
    META_NPOLICIES
};

/* What the information service knows of one site. */
struct meta_site {
    bool up;             /* answering, and taking jobs */
    double speed;        /* relative speed (1 = reference); a job's run time is walltime / speed */
    int32_t total_procs; /* processors of the whole site */
    int32_t max_procs;   /* the widest job it can ever run (its largest partition) */
    int64_t max_mem;     /* per process, MB; 0 = no limit known */
    int64_t max_disk;    /* per process, MB; 0 = no limit known */
    int64_t queued_work; /* processor-ms of work queued or running there */
    /* the distinct feature lists of its hosts (issue 27, lib/constraint.h; borrowed
     * from the caller, which keeps them while the struct is used); 0: none known */
    const char *const *fsets;
    int32_t nfsets;
    /* how many hosts have each list (SITE feature_hosts), borrowed; NULL: not known
     * (a site older than the field): each list then stands for one host */
    const uint32_t *fhosts;
    /* issue 26: the configured rate, MB/s (10^6 bytes), at which the spool moves a
     * job's inputs to the site; 0: not known (staging then adds nothing) */
    double bandwidth_mb_s;
};

/* A job's resource request. */
struct meta_request {
    int32_t procs;
    int64_t mem, disk;      /* per process, MB */
    int64_t walltime;       /* ms, at speed 1 */
    const char *constraint; /* node features wanted (issue 27), NULL any; borrowed */
};

/* Parses a policy name ("estimate", "earliest_start", "least_queued", "round_robin",
 * "random", "slurm_m"); -1 if unknown. */
int meta_policy_parse(const char *name);
const char *meta_policy_name(enum meta_policy p);
/* Whether the policy needs the sites' start estimates. */
bool meta_policy_uses_estimates(enum meta_policy p);

/* Whether site s can ever hold request r (M2): up, wide enough, memory and disk, and
 * (issue 27) a host whose features satisfy r's constraint. When it cannot, why (if not
 * NULL) gets the reason. */
bool meta_site_can_hold(const struct meta_site *s, const struct meta_request *r, char *why,
                        size_t whylen);

/*
 * Orders the candidate sites for request r under policy p, best first. cand[0..n) are
 * site indices into sites[] (sites the caller found eligible); start[i] is cand[i]'s
 * estimated start (ms since the epoch, META_NEVER if it gave none or cannot) and is read
 * only by the estimate-based policies. Writes the order into out[0..n) (site indices)
 * and returns how many sites are worth trying (those with an estimate, for the estimate
 * policies; all n otherwise). *state carries the round-robin position (round_robin, and
 * the tie rule below) or the random generator between calls (start it at any value, e.g.
 * a seed; one state per sequence of placements). Sites with equal keys take turns: the
 * first one at or after the site that came first last time + 1, wrapping around (round
 * robin among equally good sites); slurm_m keeps Slurm's rule, the lowest index. Results
 * are reproducible from the state.
 */
size_t meta_rank(enum meta_policy p, const struct meta_site *sites, const int *cand,
                 const int64_t *start, size_t n, const struct meta_request *r, uint64_t *state,
                 int *out);

/*
 * Issue 26: the time (ms, rounded up) to move `bytes` of a job's inputs to site s at its
 * configured bandwidth; 0 when s has none configured or nothing is to be moved.
 */
int64_t meta_stage_ms(const struct meta_site *s, uint64_t bytes);
/* The start a ranking sees for a job whose inputs of `bytes` the site lacks: the site's
 * estimated start plus meta_stage_ms (the spool submits only once they are there);
 * META_NEVER stays. */
int64_t meta_start_staged(const struct meta_site *s, int64_t start, uint64_t bytes);

/* One of a site's possible starts (ESTIMATE's `starts`, docs/wire.md): the request may
 * start at any time in [from, to); to < 0: no end. */
struct meta_window {
    int64_t from, to;
};
/*
 * Issue 25 item 4: the first possible start at or after `ready` (when the job's inputs
 * can be at the site) among windows w[0..n) in time order: max(from, ready) in the first
 * window that has not ended by then; META_NEVER when none of them reaches `ready` (the
 * caller then falls back on meta_start_staged). Staging runs while the job would wait:
 * a site busy until after `ready` loses nothing to it.
 */
int64_t meta_first_start(const struct meta_window *w, size_t n, int64_t ready);

/* The estimated completion (ms) of r starting at `start` on site s: start + walltime / speed. */
int64_t meta_completion(const struct meta_site *s, const struct meta_request *r, int64_t start);

#endif

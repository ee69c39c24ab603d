/*
 * scored.h - SCore-D style resource management of the cluster manager (seed 001, K1-K9):
 * hosts grouped into clusters, admission of parallel jobs to the least loaded cluster
 * relative to speed, cluster limits, priority queues with states and attributes, gang
 * and exclusive execution with space sharing, CPU time / residence / memory / disk
 * enforcement, and the console.
 *
 * The policy half (scored_policy.c, scored_console.c) is pure functions over the plain
 * structs below; the I/O half (scored.c, scored_store.c) feeds them from messages,
 * timers and store records. docs/cluster-resources.md explains the decisions.
 */
#ifndef GRIDNODE_SCORED_H
#define GRIDNODE_SCORED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SD_MAXQ 8    /* queues at most */
#define SD_MAXLIM 64 /* clusters with explicit limits */
#define SD_NAME 64
#define SD_MAXPROCS 4096 /* processes of one parallel job */
#define SD_COC "*"       /* the cluster name of a cluster of clusters */

enum sd_qstate { SDQ_DISABLED = 0, SDQ_ENABLED = 1, SDQ_ACTIVATED = 2 };
enum sd_qmode { SDQ_GANG = 0, SDQ_EXCLUSIVE = 1 };

/* One queue's state and attributes (K4, K5); 0 means unlimited / unset. */
struct sd_queue {
    int state; /* enum sd_qstate */
    int mode;  /* enum sd_qmode */
    uint64_t max_cpu_s, residence_s;
    uint32_t mem_pct, disk_pct;
    char group[SD_NAME];
};

/* A cluster limit as set by the console: -1 = default (from the hosts), 0 = none. */
struct sd_limit {
    char cluster[SD_NAME];
    int64_t mem_mb, disk_mb, jobs;
};

/* Everything the console changes; stored as one record, durable across restarts. */
struct sd_settings {
    uint32_t nq;
    struct sd_queue q[SD_MAXQ];
    uint32_t nlim;
    struct sd_limit lim[SD_MAXLIM];
};

/* One cluster as the policy sees it (built from the hosts each decision). */
struct sd_cluster {
    char name[SD_NAME];
    double speed; /* slowest host's speed */
    uint32_t nhosts;
    uint32_t *hosts;              /* node indices (owned by the caller) */
    uint64_t cores;               /* sum of the hosts' cores */
    uint64_t procs;               /* processes of admitted, unfinished jobs on its hosts */
    uint64_t mem_mb, disk_mb;     /* effective limits: 0 = none */
    uint64_t max_jobs;            /* 0 = none */
    uint64_t held_mem, held_disk; /* sum of admitted jobs' limits */
    uint64_t njobs;               /* admitted, unfinished jobs */
};

/* What a parallel job asks for (K2). Zero means "not given". */
struct sd_request {
    uint32_t nprocs, ppn;
    uint64_t mem_mb, disk_mb;
    uint32_t queue;
    bool coc; /* a cluster of clusters is acceptable */
};

/* The outcome of admission. */
struct sd_admission {
    int cluster;                /* index into the candidates, or ncl for the cluster of clusters */
    uint64_t mem_lim, disk_lim; /* per-host job limits, 0 = none */
    bool never;                 /* no cluster could ever hold it (waiting cannot help) */
    char why[256];              /* on refusal: the missing resource */
};

/* ---- scored_policy.c (pure) ---- */

/* Limit arithmetic of K8: cluster x pct / 100, or user if smaller; 0 when not active. */
uint64_t sd_job_limit(uint64_t cluster_lim, uint32_t pct, uint64_t user);
/* Hosts a job needs: ceil(nprocs / ppn). */
uint32_t sd_hosts_needed(const struct sd_request *rq);
/*
 * Chooses a cluster for rq among cl[0..ncl) (and, when rq->coc, the cluster of clusters
 * coc, which may be NULL): the one with the lowest procs/cores/speed that can hold it now;
 * at equal relative load the faster; a cluster of clusters only when no single one fits.
 * q is the job's queue. host_cores[i] gives node i's cores (to check ppn). Returns 0
 * with a->cluster set, or -1 with a->why (and a->never when waiting cannot help).
 */
int sd_admit(const struct sd_cluster *cl, uint32_t ncl, const struct sd_cluster *coc,
             const struct sd_queue *q, const struct sd_request *rq, const uint32_t *host_cores,
             struct sd_admission *a);
/*
 * Picks need hosts of cluster k for a job: those with cores >= ppn and the fewest
 * assigned processes (host_procs[node]), ties by node index. out gets node indices in
 * order. Returns 0, or -1 if fewer than need qualify.
 */
int sd_pick_hosts(const struct sd_cluster *k, uint32_t need, uint32_t ppn,
                  const uint32_t *host_cores, const uint32_t *host_procs, uint32_t *out);

/*
 * Constraint counts (issue 27, lib/constraint.h "NAME*N": at least N of the job's hosts
 * have NAME). feat[node] is each node's canonical feature list; c the job's constraint
 * (hosts already filtered by its per-host part).
 *
 * sd_counts_fit: whether cluster k has hosts enough with cores >= ppn for every count;
 * the first one short into why (NULL: not wanted).
 * sd_pick_hosts_counted: as sd_pick_hosts, first the hosts the counts need: for each
 * count in turn, until N of the picked have its name, the host having it that has the
 * most of the counts still short, then the fewest processes, then the lowest index;
 * then the rest as sd_pick_hosts. 0, or -1 when need hosts cannot meet the counts.
 */
bool sd_counts_fit(const struct sd_cluster *k, uint32_t ppn, const uint32_t *host_cores,
                   const char *const *feat, const char *c, char *why, size_t n);
/* sd_counts_fit over cl[0..*ncl): keeps (in order) the clusters that fit, *ncl their
 * number, *coc_ok whether coc (NULL: none) fits; false, with the first shortfall in
 * why, when no cluster of cl fits (a cluster of clusters is only an alternative to
 * one: sd_admit). */
bool sd_counts_filter(struct sd_cluster *cl, uint32_t *ncl, const struct sd_cluster *coc,
                      uint32_t ppn, const uint32_t *host_cores, const char *const *feat,
                      const char *c, char *why, size_t n, bool *coc_ok);
int sd_pick_hosts_counted(const struct sd_cluster *k, uint32_t need, uint32_t ppn,
                          const uint32_t *host_cores, const uint32_t *host_procs,
                          const char *const *feat, const char *c, uint32_t *out);

/* One admitted job, as the time-slicing decision sees it. */
struct sd_slot_job {
    uint64_t id;
    uint32_t queue;
    bool runnable;       /* its queue is activated */
    bool running;        /* scheduled right now */
    bool started;        /* was ever scheduled */
    int mode;            /* its queue's mode */
    int64_t last_ran_ms; /* when it was last descheduled or started (rotation order) */
    uint32_t nhosts;
    const uint32_t *hosts; /* node indices */
    bool run;              /* out: scheduled in this slot */
};

/*
 * The gang / exclusive / space-sharing decision (K6): queues in priority order; within
 * a queue, exclusive jobs already started first then FIFO, gang jobs by rotation (with
 * rotate, the jobs not running now before those running, else the running ones keep
 * their hosts); a job runs when all its hosts are free, and claims them. Lower queues get
 * the hosts higher ones leave free. nnodes bounds the node indices.
 */
void sd_schedule(struct sd_slot_job *jobs, uint32_t n, uint32_t nnodes, bool rotate);

/* CPU checks of K7 on a running job. */
enum sd_cpu_verdict { SD_CPU_OK, SD_CPU_KILL, SD_CPU_DEMOTE };
enum sd_cpu_verdict sd_cpu_check(double cpu_s, double res_base_s, uint64_t max_cpu_s,
                                 uint64_t residence_s, uint32_t queue, uint32_t nq);

/* ---- scored_console.c (pure) ---- */

enum sd_cmd {
    SDC_ERROR = -1,
    SDC_NOTHING = 0, /* blank line or comment */
    SDC_CHANGED,     /* settings changed (msg says what) */
    SDC_QUEUES,      /* read-only: show the queues */
    SDC_CLUSTERS,    /* read-only: show the clusters and their limits */
    SDC_HOSTS,
    SDC_JOBS,
    SDC_HELP,
};

void sd_settings_default(struct sd_settings *s, uint32_t nq);
/* The limit entry of a cluster (NULL when it has none). */
const struct sd_limit *sd_limit_find(const struct sd_settings *s, const char *cluster);
/*
 * Parses and applies one console command line to s. Returns the kind; msg gets a
 * confirmation or the error text. s is changed only on SDC_CHANGED.
 */
enum sd_cmd sd_console_line(struct sd_settings *s, const char *line, char *msg, size_t n);
/* Appends the queue table to out (at most n bytes in all, NUL-terminated). */
void sd_console_queues(const struct sd_settings *s, char *out, size_t n);
const char *sd_qstate_name(int s);
const char *sd_qmode_name(int m);
extern const char sd_console_help[];

#endif

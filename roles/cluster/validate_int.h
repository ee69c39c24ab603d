/*
 * validate_int.h - the structures shared by validate.c (replication, quorum, trust,
 * spot checks) and validator.c (application validators run as child processes).
 * docs/validation.md describes the behaviour.
 */
#ifndef GRIDNODE_VALIDATE_INT_H
#define GRIDNODE_VALIDATE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "roles/cluster/cluster.h"

#define VALID_MAX_RESULTS 32 /* max_results at most (and quorum, replicas) */

enum vc_status { VC_PENDING = 0, VC_CANONICAL, VC_AGREES, VC_REJECTED };
enum vc_why {
    VW_NONE = 0,
    VW_DISAGREES,  /* a different answer than the quorum's */
    VW_INVALID,    /* the validator said it is not valid on its own */
    VW_SPOTFAIL,   /* its node later failed a spot check (backtracking) */
    VW_PROBATION,  /* its node was on probation after a failed spot check */
    VW_NODE_ERROR, /* the node could not run the task */
    VW_REPEAT,     /* a second result from the same node / host / address */
    VW_LOST,       /* its stored record could not be read back */
    VW_NOQUORUM,   /* the task failed: max_results without a quorum */
    VW_VALIDATOR,  /* the task failed: its validator failed too often */
};
enum vt_state { VT_OPEN = 0, VT_VALIDATING, VT_DONE };
enum v_distinct { VD_SESSION = 0, VD_HOST, VD_ADDRESS };

/* One result of a checked task (a candidate for the canonical result). */
struct vcand {
    uint32_t node;  /* node index, UINT32_MAX when unknown (forgotten session) */
    uint32_t seq;   /* third key part in the "vres" table */
    uint32_t issue; /* as the node reported it */
    uint64_t cls;   /* answer class: equal classes agree; 0 = invalid */
    int64_t recv_ms;
    uint8_t status, why; /* enum vc_status, enum vc_why */
    bool ok;             /* exit 0, no signal, no timeout, no error */
    bool error;          /* a node-side error result */
    void *rec;           /* the stored record while the task is undecided (else NULL) */
    size_t len;
};

/* One copy handed out and not returned yet. */
struct vcopy {
    uint32_t node, issue;
    int64_t expiry_ms;
};

struct vtask {
    uint8_t state; /* enum vt_state */
    uint8_t vruns; /* validator runs that failed (crash, timeout, bad output) */
    uint8_t want;  /* copies still to hand out */
    bool inq;      /* in vs->q */
    uint8_t ncand, ncopy;
    uint32_t nextseq;
    struct vcand *cand;
    struct vcopy *copy; /* copies out now */
    uint32_t *holder;   /* [issue - 1]: the node each copy went to (UINT32_MAX: unknown) */
    uint32_t nholder;
    char *fail_why; /* a validator's failure, for the log and the record */
};

/* A job's validation settings (SUBMIT), and its tasks' checking state. */
struct jvalid {
    uint32_t replicas, quorum, max_results;
    uint8_t distinct; /* enum v_distinct */
    bool adaptive;
    bool known;        /* every task has a known answer: a pool of spot checks */
    char *validator;   /* NULL: exact comparison of exit status and stdout */
    struct vtask **vt; /* [nvt]: tasks 0..nvt-1, grown as tasks are handed out (a bag of
                          10,000,000 tasks costs what its handed-out tasks hold) */
    uint32_t nvt;
    uint64_t *ka; /* known jobs: the answer class of each task */
    uint64_t spot_pass, spot_fail;
};

struct vent {
    uint64_t job;
    uint32_t idx;
};

struct vrun; /* validator.c */

/* A spot check handed out and not answered yet (only those get a verdict). */
struct vspot {
    uint32_t node, idx;
    uint64_t job;
};
#define VSPOT_MAX 65536

struct vstate {
    uint8_t key[16]; /* SipHash key: answer classes cannot be forged by a node */
    uint64_t rng;
    struct heap_ent *heap; /* copies by expiry */
    uint32_t nheap, capheap;
    struct vent *q; /* tasks that want another copy (ring) */
    uint32_t qhead, qlen, qcap;
    struct vent *resume; /* undecided tasks to decide again (after load, validator slot) */
    uint32_t nresume, capresume;
    struct vrun *runs; /* running validators */
    uint32_t nruns;
    uint64_t validator_runs, validator_failures, reopened, spot_issued;
    uint32_t ntrusted;   /* active trusted nodes (valid_ntrusted) */
    uint32_t nknown;     /* known-answer jobs that may be live (0: no spot checks at all) */
    struct vspot *spots; /* ring of spot checks out, oldest dropped beyond VSPOT_MAX */
    uint32_t spot_head, nspots;
    int64_t ntrusted_ms;
};

/* valid_state.c: the validation state in memory, and its part of the records */
struct vtask *valid_vt(const struct job *j, uint32_t idx);
struct vtask *vt_get_ext(struct job *j, uint32_t idx); /* created when missing */
/* A new candidate of vt (seq: vt->nextseq++), zeroed; NULL beyond 250 or out of memory. */
struct vcand *valid_cand_add(struct vtask *vt);
/* The copy heap: out of memory, the copy never expires (its task waits for the result). */
void valid_heap_push(struct vstate *vs, struct heap_ent e);
void valid_heap_add(struct cluster *c, uint64_t job, uint32_t idx, const struct vcopy *cp);
extern const char *const valid_distinct_names[3];          /* enum v_distinct */
extern const char *const valid_why_text[VW_VALIDATOR + 1]; /* enum vc_why */
/* The "vres" key of candidate seq of task (job, idx). */
void valid_vres_key(uint8_t key[16], uint64_t job, uint32_t idx, uint32_t seq);

/* validate.c */
/* Decides a task from its candidates' classes (after a validator, or at once). */
int valid_evaluate(struct cluster *c, struct job *j, uint32_t idx);
/* The task failed for good with the reason (validator failures). */
int valid_fail_task(struct cluster *c, struct job *j, uint32_t idx, uint8_t why);
void valid_resume_add(struct cluster *c, uint64_t job, uint32_t idx);
uint64_t valid_hash(const struct vstate *vs, const void *p, size_t n, uint64_t salt);
uint64_t valid_siphash(const uint8_t k[16], const uint8_t *p, size_t n); /* SipHash-2-4 */
double valid_rand(struct vstate *vs);                                    /* uniform in [0, 1) */
uint64_t valid_class(const struct vstate *vs, const msgpack_object *res);
bool valid_trusted(const struct cluster *c, const struct node *n);
uint32_t valid_ntrusted(struct cluster *c); /* active trusted nodes, recounted each 100 ms */
double valid_check_prob(const struct cluster *c, const struct node *n);
void valid_trust_valid(struct cluster *c, uint32_t ni);
void valid_trust_invalid(struct cluster *c, uint32_t ni);
void valid_want_more(struct cluster *c, struct job *j, uint32_t idx, struct vtask *vt);
void valid_copy_remove(struct cluster *c, struct vtask *vt, uint32_t k);
bool valid_same_owner(const struct cluster *c, const struct jvalid *v, uint32_t a, uint32_t b);
/* Re-verifies what node n answered since its last passed spot check; tasks reopened. */
uint32_t valid_backtrack(struct cluster *c, struct node *n);
/* Was spot check (job, idx) handed to node ni (and not answered yet)? Forgets it. */
bool valid_spot_take(struct cluster *c, uint32_t ni, uint64_t job, uint32_t idx);
int valid_holder_set(struct vtask *vt, uint32_t issue, uint32_t node);

/* validator.c */
int validator_start(struct cluster *c, struct job *j, uint32_t idx);
void validator_tick(struct cluster *c);
void validator_free_all(struct cluster *c);
bool validator_busy(const struct cluster *c);

#endif

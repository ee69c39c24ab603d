/*
 * depend.h - job dependencies (submit --dependency, issue 27) with Slurm's vocabulary:
 * the parser, the canonical text and the evaluation every role uses (cluster SUBMIT and
 * PSUBMIT; docs/wire.md 6.1 "Dependencies"). Pure: the caller says what it knows of a
 * job through a callback.
 */
#ifndef GRIDNODE_DEPEND_H
#define GRIDNODE_DEPEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEPEND_LEN_MAX 1024u  /* the wire field's cap, bytes */
#define DEPEND_TERMS_MAX 512u /* one (type, id) pair each; 1 KiB cannot hold more */

enum dep_type { DEP_AFTER = 0, DEP_AFTERANY, DEP_AFTEROK, DEP_AFTERNOTOK, DEP_SINGLETON };

/* What a role knows of a job a term names. */
enum dep_job {
    DJ_UNKNOWN = 0, /* never existed, or purged */
    DJ_PENDING,     /* not started */
    DJ_STARTED,     /* started, not ended */
    DJ_OK,          /* ended successfully */
    DJ_NOTOK        /* ended otherwise: failed, killed, cancelled */
};

/* One term: a type and a job id (0 for singleton); done: decided (met, or under "?"
 * never satisfiable) and no longer shown or checked. */
struct dep_term {
    uint8_t type, done;
    uint64_t id;
};

struct depend {
    bool any; /* terms joined by '?': any one may hold; else ',': all must */
    uint32_t n;
    struct dep_term *t;
};

/*
 * Parses s (len bytes): terms joined by ',' (all) or '?' (any), not both; a term is
 * "singleton" or TYPE:ID[:ID...] with TYPE after, afterany, afterok, afternotok (one
 * term per id). 0 and *d filled (free with depend_free), or -1 with a one-line reason
 * naming the term in why.
 */
int depend_parse(const char *s, size_t len, struct depend *d, char *why, size_t wl);
void depend_free(struct depend *d);

/* The terms not done in canonical form ("afterok:1:2,singleton"); "" when none. */
void depend_format(const struct depend *d, char *buf, size_t len);

/* What is known of job id; *shown (may stay NULL) the state name users see. */
typedef enum dep_job (*dep_lookup_fn)(void *arg, uint64_t id, const char **shown);

enum dep_verdict { DEP_WAIT = 0, DEP_MET, DEP_NEVER };

/*
 * Evaluates d: marks the terms now decided done (*changed set when any was), and says
 * whether the whole holds. singleton_blocked: another job of the same user and name
 * goes before this one. why gets, for DEP_NEVER, the term and its cause ("afterok:12
 * (job 12 failed)"); else "" (the first term waited for is the first of depend_format:
 * built when shown, not on every re-check).
 * A job no longer known (purged) counts as ended: after and afterany hold, afterok and
 * afternotok can never be checked and so never hold.
 */
enum dep_verdict depend_eval(struct depend *d, dep_lookup_fn fn, void *arg, bool singleton_blocked,
                             bool *changed, char *why, size_t wl);

/* The first term naming a job fn does not know (DJ_UNKNOWN): its index, or -1. */
int depend_unknown(const struct depend *d, dep_lookup_fn fn, void *arg);
/* "afterok:12" of term k into buf. */
void depend_term_text(const struct depend *d, uint32_t k, char *buf, size_t len);
bool depend_has_singleton(const struct depend *d);

#endif

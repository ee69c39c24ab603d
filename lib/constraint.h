/*
 * constraint.h - node features and job constraints (submit --constraint, issue 27) with
 * Slurm's syntax: the parser, the canonical text and the match against a host's feature
 * list. Pure and in lib/ because every level uses it: the cluster's task and parallel
 * placement, the batch engine (pure: lib/ only) and the spool's site filter.
 *
 * A feature is a name of 1..FEATURE_NAME_MAX bytes of [A-Za-z0-9_.+-]; case matters.
 * A host's features are a list of names (canonical: sorted, unique, joined by ',').
 * A constraint is names joined by '&' (AND) and '|' (OR), with parentheses; '&' binds
 * tighter than '|' ("a|b&c" is "a|(b&c)"). Spaces are dropped. A name may carry a
 * count, Slurm's "graphics*4" (1..CONSTRAINT_COUNT_MAX): at least that many of the job's
 * hosts have the feature; counts go only with '&' (a constraint with a count and a '|'
 * is refused, as Slurm refuses it). In a constraint with counts every name without one
 * is asked of every host of the job, and each count is checked on its own (a host with
 * both a and b counts for a*1 and for b*1). Matching OR ("[a|b]"), brackets and ',' are
 * refused with a reason saying so.
 */
#ifndef GRIDNODE_CONSTRAINT_H
#define GRIDNODE_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONSTRAINT_LEN_MAX 1024u /* the wire field's cap, bytes */
#define CONSTRAINT_NAMES_MAX 64u /* names in one constraint */
#define CONSTRAINT_DEPTH_MAX 16u /* nested parentheses */
#define FEATURE_NAME_MAX 64u     /* bytes of one feature name */
#define FEATURES_MAX 64u         /* names one host declares */
#define FEATURES_LEN_MAX (FEATURES_MAX * (FEATURE_NAME_MAX + 1))
#define CONSTRAINT_COUNT_MAX 4096u /* NAME*N: hosts, at most (a job's processes, at most) */

/* One counted name of a constraint (NAME*N). */
struct constraint_count {
    char name[FEATURE_NAME_MAX + 1];
    uint32_t n;
};

/* Whether s[0..n) is a valid feature name. */
bool feature_name_ok(const char *s, size_t n);

/*
 * Parses the constraint s[0..len) into its canonical text (spaces dropped) in out
 * (capacity cap; len + 1 is always enough). 0, or -1 with a one-line reason in why
 * (wl bytes) naming the position and what to write instead. An empty constraint is
 * an error (the caller leaves the field out instead).
 */
int constraint_parse(const char *s, size_t len, char *out, size_t cap, char *why, size_t wl);

/*
 * Whether a host with the canonical feature list features (NULL or "": none) satisfies
 * constraint c. NULL or "" c: every host does. Text that does not parse never
 * matches (a stored record cannot make a host match by being damaged). A counted name
 * (NAME*N) asks nothing of one host: it reads as true here, and constraint_counts_met
 * checks it over the job's hosts.
 */
bool constraint_match(const char *c, const char *features);

/* The counted names of c, the first max of them into v; how many c has (0: none, or c
 * NULL/""), or -1 when c does not parse. */
int constraint_counts(const char *c, struct constraint_count *v, size_t max);

/* The largest count of c: the fewest hosts a job with c spans; 0 without counts. */
uint32_t constraint_hosts_min(const char *c);

/*
 * Whether hosts f[0..n) (canonical feature lists, each already satisfying c per host)
 * meet c's counts: for every NAME*N, the hosts having NAME number N or more; w (NULL:
 * 1 each) weighs host h as w[h] hosts (a list standing for w[h] hosts of a site).
 * True without counts; false when c does not parse.
 */
bool constraint_counts_met(const char *c, const char *const *f, const uint32_t *w, size_t n);

/*
 * Whether a job may carry constraint c: counts ask for several hosts, so only a
 * parallel job may have them, and only up to hosts_max (the most hosts it can span: its
 * processes, or fewer when a level fixes its layout). 0, or -1 with the reason and what
 * to do in why.
 */
int constraint_job_ok(const char *c, bool parallel, uint64_t hosts_max, char *why, size_t wl);

/* c without its counts ("gpu*2&big" -> "gpu&big": every host has them) into out (cap);
 * 0, or -1 when it does not fit. */
int constraint_plain(const char *c, char *out, size_t cap);

/*
 * Normalises a feature list s[0..len) (names separated by ',' and/or spaces) into out
 * (capacity cap; len + 1 is enough): sorted, duplicates dropped, joined by ','. 0, or
 * -1 with the bad name and the rule in why. "" is a valid, empty list.
 */
int features_norm(const char *s, size_t len, char *out, size_t cap, char *why, size_t wl);

/* Whether the canonical list (NULL: none) holds name. */
bool features_has(const char *list, const char *name);

/*
 * Adds the names of canonical list add to canonical list *acc (capacity cap), keeping
 * it canonical. 0, or -1 (the union does not fit; *acc unchanged).
 */
int features_union(char *acc, size_t cap, const char *add);

#endif

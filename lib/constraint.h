/*
 * constraint.h - node features and job constraints (submit --constraint, issue 27) with
 * Slurm's syntax: the parser, the canonical text and the match against a host's feature
 * list. Pure and in lib/ because every level uses it: the cluster's task and parallel
 * placement, the batch engine (pure: lib/ only) and the spool's site filter.
 *
 * A feature is a name of 1..FEATURE_NAME_MAX bytes of [A-Za-z0-9_.+-]; case matters.
 * A host's features are a list of names (canonical: sorted, unique, joined by ',').
 * A constraint is names joined by '&' (AND) and '|' (OR), with parentheses; '&' binds
 * tighter than '|' ("a|b&c" is "a|(b&c)"). Spaces are dropped. Slurm's counts
 * ("a*2"), matching OR ("[a|b]") and ',' are refused with a reason saying so.
 */
#ifndef GRIDNODE_CONSTRAINT_H
#define GRIDNODE_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>

#define CONSTRAINT_LEN_MAX 1024u /* the wire field's cap, bytes */
#define CONSTRAINT_NAMES_MAX 64u /* names in one constraint */
#define CONSTRAINT_DEPTH_MAX 16u /* nested parentheses */
#define FEATURE_NAME_MAX 64u     /* bytes of one feature name */
#define FEATURES_MAX 64u         /* names one host declares */
#define FEATURES_LEN_MAX (FEATURES_MAX * (FEATURE_NAME_MAX + 1))

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
 * matches (a stored record cannot make a host match by being damaged).
 */
bool constraint_match(const char *c, const char *features);

/*
 * Normalises a feature list s[0..len) (names separated by ',' and/or spaces) into out
 * (capacity cap; len + 1 is enough): sorted, duplicates dropped, joined by ','. 0, or
 * -1 with the bad name and the rule in why. "" is a valid, empty list.
 */
int features_norm(const char *s, size_t len, char *out, size_t cap, char *why, size_t wl);

/*
 * Adds the names of canonical list add to canonical list *acc (capacity cap), keeping
 * it canonical. 0, or -1 (the union does not fit; *acc unchanged).
 */
int features_union(char *acc, size_t cap, const char *add);

#endif

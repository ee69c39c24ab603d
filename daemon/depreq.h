/*
 * depreq.h - a request's `dependency` (submit --dependency) read, checked and
 * authorized the same way at every level (cluster, batch role, spool): the text is
 * parsed (wire/depend.h), every named job must exist at this level, and a job of
 * another user may be named only by an administrator (curve_may_touch).
 */
#ifndef GRIDNODE_DAEMON_DEPREQ_H
#define GRIDNODE_DAEMON_DEPREQ_H

#include <msgpack.h>
#include <stddef.h>

#include "wire/depend.h"

/* The owner (user name) of job id at this level, or NULL if there is none. */
typedef const char *(*dep_owner_fn)(void *arg, uint64_t id);

/*
 * The request m's `dependency`: *out is NULL when it has none, else a new struct depend
 * (free with depreq_free). lookup and owner describe this level's jobs (arg is theirs);
 * `here` names the level in the refusal ("here", "at this spool"). 0, or -1 with why
 * set (bad syntax, an unknown job, another user's job) and *out NULL.
 */
int depreq_read(const msgpack_object *m, dep_lookup_fn lookup, dep_owner_fn owner, void *arg,
                const char *here, struct depend **out, char *why, size_t wl);
void depreq_free(struct depend *d);

#endif

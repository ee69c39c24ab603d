/*
 * jobargv.h - the checks of a job's "argv" beyond its descriptor (docs/wire.md 6.1,
 * 6.6): one function for every role that takes a job (cluster SUBMIT and PSUBMIT, the
 * batch role, the grid spool), so a request one level accepts is never refused for
 * its argv by the level it is passed to (issue 27).
 */
#ifndef GRIDNODE_JOBARGV_H
#define GRIDNODE_JOBARGV_H

#include <msgpack.h>

/* The largest argv element, bytes: expanded ({i}, {n}, {job}) it must still fit a
 * task's 64 KiB cap at the node. */
#define JOBARGV_ELEM_MAX 16384u

/*
 * Checks argv (an array of str, as the descriptor guarantees, or NULL when absent):
 * present and non-empty, a non-empty first element, no NUL byte, no element longer
 * than JOBARGV_ELEM_MAX bytes. NULL when fine, else a static one-line reason naming
 * the field (and the element and limit).
 */
const char *jobargv_problem(const msgpack_object *argv);

#endif

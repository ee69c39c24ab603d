/*
 * fetch.h - `gridnode fetch` (issue 26) and the table of a task's kept output files that
 * `gridnode job ID --output` prints.
 */
#ifndef GRIDNODE_FETCH_H
#define GRIDNODE_FETCH_H

#include <msgpack.h>

/* The "files" of task map t (kept outputs) as indented rows NAME SIZE SHA256. */
void fetch_print_files(const msgpack_object *t);

#endif

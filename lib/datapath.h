/*
 * datapath.h - the names files carry through the grid (issue 26, docs/data.md): a
 * relative path inside a task's working directory, checked the same way by the
 * submitting tool, the cluster, the node that places or collects files, and fetch,
 * so that no name can reach outside the directory it is meant for. Pure.
 */
#ifndef GRIDNODE_DATAPATH_H
#define GRIDNODE_DATAPATH_H

#include <stddef.h>

#define DATAPATH_MAX 1024

/*
 * Why name[0..len) is not an acceptable file name, or NULL when it is: relative (no
 * leading '/'), made of components separated by single '/', none of them empty, "."
 * or "..", no NUL or control character, at most DATAPATH_MAX bytes.
 */
const char *datapath_problem(const char *name, size_t len);

#endif

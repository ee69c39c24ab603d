/*
 * jobenv.h - the environment and working directory a job's tasks start with (issue 15:
 * `submit --export`, `--chdir`; docs/wire.md 6.1 "env", "chdir"). One check of the
 * fields for every role that takes them (cluster, batch, grid spool) and for the node
 * that applies them (roles/client/live/runner.c), so each refuses the same things.
 */
#ifndef GRIDNODE_JOBENV_H
#define GRIDNODE_JOBENV_H

#include <msgpack.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct wire_buf;

#define JOBENV_MAX_BYTES (64u * 1024) /* all "NAME=value" strings together */
#define JOBENV_MAX_VARS 4096u         /* the wire cap of the "env" array */
#define JOBENV_CHDIR_MAX 1024u        /* bytes of "chdir" */

/*
 * Checks the optional "env" (array of "NAME=value": NAME of letters, digits and '_',
 * not starting with a digit; no NUL byte; JOBENV_MAX_BYTES together) and "chdir" (an
 * absolute path, no NUL byte) of map m. 0, or -1 with why (naming the field and the
 * limit) written to why[0..n).
 */
int jobenv_check(const msgpack_object *m, char *why, size_t n);

/* A variable name of n bytes at s: letters, digits and '_', not starting with a digit. */
bool jobenv_name_ok(const char *s, size_t n);

/* "env" of m as a malloc'd NULL-terminated array of malloc'd strings (*count set), or
 * NULL when absent or empty; *oom set when memory ran out. */
char **jobenv_dup(const msgpack_object *m, uint32_t *count, int *oom);
void jobenv_free(char **env);

/* Writes "env" (when env is non-empty) and "chdir" (when cwd is non-empty) into wb;
 * returns how many fields it wrote, or with wb NULL how many it would. */
uint32_t jobenv_put(struct wire_buf *wb, char *const *env, const char *cwd);

#endif

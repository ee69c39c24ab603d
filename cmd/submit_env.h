/* submit_env.h - `submit --export` and `--chdir` (issue 15): what travels with the job. */
#ifndef GRIDNODE_SUBMIT_ENV_H
#define GRIDNODE_SUBMIT_ENV_H

#include <stddef.h>

/*
 * The "NAME=value" strings --export=spec asks for (spec NULL: none), as a malloc'd
 * NULL-terminated array in *env (NULL when empty), and --chdir dir made absolute
 * against the current directory in *cwd (NULL when dir is NULL). 0, or -1 with why
 * (in the user's words, naming the limit) in why[0..n).
 */
int submit_env_build(const char *spec, const char *dir, char ***env, char **cwd, char *why,
                     size_t n);
void submit_env_free(char **env, char *cwd);

#endif

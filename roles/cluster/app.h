/*
 * app.h - the application interface of X3: an application yields numbered data
 * portions of a job; the task server does not care which node computes which one.
 * The first (and so far only) application is the command template: argv with "{i}"
 * (task index), "{n}" (task count) and "{job}" (job id) replaced, plus the task's
 * optional standard input stored at submission.
 */
#ifndef GRIDNODE_APP_H
#define GRIDNODE_APP_H

#include <stddef.h>
#include <stdint.h>

struct cluster;
struct job;
struct wire_buf;

struct app_ops {
    const char *kind;
    /* Sets *idx to the next portion never handed out; -1 when none remain. */
    int (*next)(struct cluster *c, struct job *j, uint32_t *idx);
    /*
     * Writes the portion's payload as three map entries - "argv", "shell", "stdin" -
     * into wb and sets *input_bytes to its input size. 0, or -1 if the input cannot be
     * read (the store failed).
     */
    int (*encode)(struct cluster *c, struct job *j, uint32_t idx, struct wire_buf *wb,
                  size_t *input_bytes);
};

extern const struct app_ops app_template;

/* Expands {i}, {n}, {job} in s; malloc'd result or NULL. */
char *app_expand(const char *s, uint64_t job, uint32_t idx, uint32_t ntasks);

#endif

/*
 * maui.h - what the batch role's commands share (cmd/maui.c): --help, the batch
 * role's default endpoint, one request, durations for people. mauinode.c uses them and
 * prints diagnose -n and -j for maui.c.
 */
#ifndef GRIDNODE_CMD_MAUI_H
#define GRIDNODE_CMD_MAUI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cli.h"

/* Prints usage and the common options when argv asks for --help; true then. */
bool maui_want_help(int argc, char **argv, const char *usage);
/* cli_common with the batch role's default endpoint ($GRIDNODE_BATCH, else :7400). */
int maui_common(struct cli *c, const char *prog, int *argc, char **argv);
/* Sends wb (freed): 0 with r to free, or 1 (the reason printed). */
int maui_call(struct cli *c, struct wire_buf *wb, struct cli_reply *r);
/* "1:02:03" from milliseconds; "-" when negative. */
const char *maui_dur(int64_t ms, char *b, size_t n);

/* The tables of diagnose -n and -j (mauinode.c): rows is the merged array of rows. */
void maui_diag_nodes(const msgpack_object *rows);
void maui_diag_jobs(const msgpack_object *rows);

#endif

/* jobs.c - temporary until the command lands in this session. */
#include <stdio.h>
#include "cmd/cmd.h"
int cmd_jobs(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "gridnode jobs: not built yet\n"); return 1; }

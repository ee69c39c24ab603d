/* submit.c - temporary until the command lands in this session. */
#include <stdio.h>
#include "cmd/cmd.h"
int cmd_submit(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "gridnode submit: not built yet\n"); return 1; }

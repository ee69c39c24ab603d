/* cancel.c - temporary until the command lands in this session. */
#include <stdio.h>
#include "cmd/cmd.h"
int cmd_cancel(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "gridnode cancel: not built yet\n"); return 1; }

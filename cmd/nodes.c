/* nodes.c - temporary until the command lands in this session. */
#include <stdio.h>
#include "cmd/cmd.h"
int cmd_nodes(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "gridnode nodes: not built yet\n"); return 1; }

/* dump.c - temporary until the command lands in this session. */
#include <stdio.h>
#include "cmd/cmd.h"
int cmd_dump(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "gridnode dump: not built yet\n"); return 1; }

/* client.c - `gridnode client`: the execution host role (see roles/client/). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

int cmd_client(int argc, char **argv)
{
    /* --emulate hands over to the emulator */
    (void)argc;
    (void)argv;
    fprintf(stderr, "gridnode client: not built yet\n");
    return 1;
}

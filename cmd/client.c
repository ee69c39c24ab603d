/* client.c - `gridnode client`: the execution host role (see roles/client/). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "roles/client/client.h"

int cmd_client(int argc, char **argv)
{
    /* --emulate hands over to the emulator */
    return client_main(argc, argv);
}

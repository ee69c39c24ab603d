/* client.c - `gridnode client`: the execution host role (see roles/client/). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "roles/client/live/client.h"
#include "roles/client/emulate/emulate.h"

int cmd_client(int argc, char **argv)
{
    /* --emulate hands over to the emulator */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--emulate"))
            return emulate_main(argc, argv);
    /* the multi-project client's control commands */
    if (argc > 1 &&
        (!strcmp(argv[1], "status") || !strcmp(argv[1], "attach") || !strcmp(argv[1], "detach")))
        return vcl_cmd(argc, argv);
    return client_main(argc, argv);
}

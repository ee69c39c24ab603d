/*
 * meta.c - `gridnode meta`: the metascheduler role (roles/meta/, docs/meta.md).
 * `--simulate` belongs to the policy simulator (roles/meta/sim*.c, built separately);
 * everything else starts the live spool.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "roles/meta/meta.h"

int cmd_meta(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--simulate")) {
            fprintf(stderr, "gridnode meta: --simulate is not part of this build yet\n");
            return 2;
        }
    return meta_main(argc, argv);
}

/*
 * meta.c - `gridnode meta`: the metascheduler role. --simulate runs the simulator
 * (roles/meta/simcmd.c); the live role is built in another branch of issue #10.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "roles/meta/sim.h"

int cmd_meta(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--simulate", 10) || !strcmp(argv[i], "--help") ||
            !strcmp(argv[i], "-h"))
            return meta_simulate_main(argc, argv);
    fprintf(stderr, "gridnode meta: the live role is not built yet (try 'gridnode meta --simulate "
                    "TRACE --sites 4')\n");
    return 1;
}

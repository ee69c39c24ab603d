/*
 * meta.c - `gridnode meta`: the metascheduler role (roles/meta/, docs/meta.md).
 * `--simulate` runs the policy simulator (roles/meta/sim*.c); everything else starts
 * the live spool (roles/meta/live/meta.c). Both place jobs with roles/meta/engine/place.c.
 */
#include <string.h>

#include "cmd/cmd.h"
#include "roles/meta/live/meta.h"
#include "roles/meta/sim/sim.h"

int cmd_meta(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--simulate", 10))
            return meta_simulate_main(argc, argv);
    return meta_main(argc, argv);
}

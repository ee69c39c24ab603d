/* cluster.c - `gridnode cluster`: the cluster manager / task server role. */
#include "cmd/cmd.h"
#include "roles/cluster/cluster.h"

int cmd_cluster(int argc, char **argv)
{
    return cluster_main(argc, argv);
}

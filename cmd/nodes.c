/* nodes.c - `gridnode nodes`: the node table of a cluster manager (X2). */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "lib/loop.h"

static const char usage[] =
    "usage: gridnode nodes [options]\n\nLists the nodes known to the cluster manager: "
    "activity, slots, tasks running,\nresults returned, measured seconds per work unit, last "
    "contact.\nQUOTA is tasks used/allowed today for a node held back after node-side "
    "errors\n(tasks.node_daily_quota; '-' when not limited).\n";

static void print_row(const msgpack_object *n, int64_t now)
{
    char name[15], cl[11], ip[17], spus[16];
    cli_text(n, "node", name, sizeof name);
    cli_text(n, "cluster", cl, sizeof cl);
    cli_text(n, "ip", ip, sizeof ip);
    double spu = wire_get_f64(n, "spu", 0);
    if (spu > 0)
        snprintf(spus, sizeof spus, "%.3f", spu);
    else
        snprintf(spus, sizeof spus, "-");
    char quota[24] = "-";
    if (wire_get_u64(n, "quota", 0) > 0)
        snprintf(quota, sizeof quota, "%llu/%llu",
                 (unsigned long long)wire_get_u64(n, "quota_used", 0),
                 (unsigned long long)wire_get_u64(n, "quota", 0));
    printf("%-14s %-10s %-16s %-6s %5llu %5llu %7llu %8llu %8s %11s  %.0f s ago\n", name,
           cl[0] ? cl : "-", ip[0] ? ip : "-", wire_get_bool(n, "active", false) ? "yes" : "no",
           (unsigned long long)wire_get_u64(n, "slots", 0),
           (unsigned long long)wire_get_u64(n, "mhz", 0),
           (unsigned long long)wire_get_u64(n, "running", 0),
           (unsigned long long)wire_get_u64(n, "results", 0), spus, quota,
           (double)(now - wire_get_i64(n, "last", now)) / 1000.0);
}

int cmd_nodes(int argc, char **argv)
{
    struct cli c;
    struct cli_pages p;
    int rc = cli_simple_list(&c, "gridnode nodes", usage, WT_NODE_LIST, argc, argv, &p);
    if (rc >= 0)
        return rc;
    if (c.json) {
        cli_print_json_pages(&p, "nodes");
    } else {
        int64_t now = wall_now_ms();
        uint32_t total = 0;
        printf("%-14s %-10s %-16s %-6s %5s %5s %7s %8s %8s %11s  %s\n", "NODE", "CLUSTER", "IP",
               "ACTIVE", "SLOTS", "MHZ", "RUNNING", "RESULTS", "S/UNIT", "QUOTA", "LAST SEEN");
        for (uint32_t k = 0; k < p.n; k++) {
            const msgpack_object *nodes = wire_get(p.r[k]->msg.root, "nodes");
            for (uint32_t i = 0; i < nodes->via.array.size; i++, total++)
                print_row(&nodes->via.array.ptr[i], now);
        }
        if (total == 0)
            printf("(no nodes yet; start one with gridnode client)\n");
    }
    cli_pages_free(&p);
    return 0;
}

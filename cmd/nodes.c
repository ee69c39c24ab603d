/* nodes.c - `gridnode nodes`: the node table of a cluster manager (X2). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "daemon/loop.h"

static const char usage[] =
    "usage: gridnode nodes [options]\n\nLists the nodes known to the cluster manager: "
    "activity, slots, tasks running,\nresults returned, measured seconds per work unit, last "
    "contact.\nQUOTA is tasks used/allowed today for a node held back after node-side "
    "errors\n(tasks.node_daily_quota; '-' when not limited).\n"
    "Result checking (docs/validation.md): CONSEC is its results found valid in a row,\n"
    "ERR% the share of its checked results found wrong, SPOT known-answer checks\n"
    "passed/failed ('P' while on probation after a failed one).\n"
    "ACTIVE is 'drain' for a drained node still running tasks, 'drained' once it runs\n"
    "none; the reasons are listed below the table, and so are the features of the\n"
    "active nodes that declared any (client.features, architecture, OS), which\n"
    "submit --constraint matches.\n\n"
    "Drain and resume (like Slurm's scontrol update nodename=X state=drain|resume):\n"
    "  --drain NODE --reason TEXT  NODE gets no new tasks and is not chosen for new\n"
    "                              parallel jobs; what it runs finishes. Stored: kept\n"
    "                              across restarts of NODE and of the cluster manager.\n"
    "  --resume NODE               NODE gets work again.\n";

/* --drain NODE --reason TEXT / --resume NODE: NODE_CTL (docs/wire.md 6.17). */
static int node_ctl(struct cli *c, int argc, char **argv)
{
    const char *drain = NULL, *resume = NULL, *reason = NULL;
    for (int i = 1; i < argc; i++) {
        const char **dst = !strcmp(argv[i], "--drain")    ? &drain
                           : !strcmp(argv[i], "--resume") ? &resume
                           : !strcmp(argv[i], "--reason") ? &reason
                                                          : NULL;
        if (!dst) {
            fprintf(stderr, "%s: unexpected argument '%s' (see gridnode nodes --help)\n", c->prog,
                    argv[i]);
            return 2;
        }
        if (i + 1 >= argc || !argv[i + 1][0]) {
            fprintf(stderr, "%s: %s needs a value (see gridnode nodes --help)\n", c->prog, argv[i]);
            return 2;
        }
        *dst = argv[++i];
    }
    if (drain && resume) {
        fprintf(stderr, "%s: give --drain or --resume, not both\n", c->prog);
        return 2;
    }
    if (drain && !reason) {
        fprintf(stderr,
                "%s: --drain needs --reason TEXT (why the node is drained: it is "
                "shown in gridnode nodes)\n",
                c->prog);
        return 2;
    }
    if (!drain && reason) {
        fprintf(stderr, "%s: --reason goes with --drain NODE\n", c->prog);
        return 2;
    }
    const char *node = drain ? drain : resume;
    if (strlen(node) > 63 || (reason && strlen(reason) > 255)) {
        fprintf(stderr, "%s: %s\n", c->prog,
                strlen(node) > 63 ? "a node name has at most 63 bytes"
                                  : "--reason has at most 255 bytes");
        return 2;
    }
    struct wire_buf wb;
    struct cli_reply r;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_NODE_CTL, 1, reason ? 3 : 2);
    wire_put_str(&wb, "node", node);
    wire_put_str(&wb, "op", drain ? "drain" : "resume");
    if (reason)
        wire_put_str(&wb, "reason", reason);
    int rc = cli_call(c, &wb, 1, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    cli_reply_free(&r);
    if (c->json)
        printf("{\"node\":\"%s\",\"%s\":true}\n", node, drain ? "drained" : "resumed");
    else
        printf("node %s %s\n", node, drain ? "drained" : "resumed");
    return 0;
}

static void print_row(const msgpack_object *n, int64_t now)
{
    char name[57], cl[41], ip[17], spus[16];
    cli_cell(n, "node", 14, name, sizeof name);
    cli_cell(n, "cluster", 10, cl, sizeof cl);
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
    uint64_t nv = wire_get_u64(n, "valid", 0), ni = wire_get_u64(n, "invalid", 0);
    char err[16] = "-", spot[32];
    if (nv + ni > 0)
        snprintf(err, sizeof err, "%.1f", 100.0 * (double)ni / (double)(nv + ni));
    snprintf(spot, sizeof spot, "%llu/%llu%s", (unsigned long long)wire_get_u64(n, "spot_pass", 0),
             (unsigned long long)wire_get_u64(n, "spot_fail", 0),
             wire_get_u64(n, "probation", 0) ? " P" : "");
    printf("%s %s %-16s %-6s %5llu %5llu %7llu %8llu %8s %11s %6llu %5s %9s  %.0f s ago\n", name,
           cl, ip[0] ? ip : "-",
           wire_get(n, "drain") ? (wire_get_u64(n, "running", 0) ? "drain" : "drained")
           : wire_get_bool(n, "active", false) ? "yes"
                                               : "no",
           (unsigned long long)wire_get_u64(n, "slots", 0),
           (unsigned long long)wire_get_u64(n, "mhz", 0),
           (unsigned long long)wire_get_u64(n, "running", 0),
           (unsigned long long)wire_get_u64(n, "results", 0), spus, quota,
           (unsigned long long)wire_get_u64(n, "consec_valid", 0), err, spot,
           (double)(now - wire_get_i64(n, "last", now)) / 1000.0);
}

/* The features of the active nodes that declared any (submit --constraint asks for
 * them; issue 27), below the table as the drain reasons. */
static void print_features(const struct cli_pages *p)
{
    bool head = false;
    for (uint32_t k = 0; k < p->n; k++) {
        const msgpack_object *nodes = wire_get(p->r[k]->msg.root, "nodes");
        for (uint32_t i = 0; i < nodes->via.array.size; i++) {
            const msgpack_object *n = &nodes->via.array.ptr[i];
            char name[64], f[1100];
            cli_text(n, "features", f, sizeof f);
            if (!f[0] || !wire_get_bool(n, "active", false))
                continue;
            if (!head)
                printf("\n%-14s %s\n", "NODE", "FEATURES (submit --constraint)");
            head = true;
            cli_text(n, "node", name, sizeof name);
            printf("%-14s %s\n", name, f);
        }
    }
}

int cmd_nodes(int argc, char **argv)
{
    struct cli c;
    struct cli_pages p;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--drain") || !strcmp(argv[i], "--resume") ||
            !strcmp(argv[i], "--reason")) {
            if (cli_common(&c, "gridnode nodes", &argc, argv) < 0)
                return 2;
            return node_ctl(&c, argc, argv);
        }
    int rc = cli_simple_list(&c, "gridnode nodes", usage, WT_NODE_LIST, argc, argv, &p);
    if (rc >= 0)
        return rc;
    if (c.json) {
        cli_print_json_pages(&p, "nodes");
    } else {
        int64_t now = wall_now_ms();
        uint32_t total = 0;
        printf("%-14s %-10s %-16s %-6s %5s %5s %7s %8s %8s %11s %6s %5s %9s  %s\n", "NODE",
               "CLUSTER", "IP", "ACTIVE", "SLOTS", "MHZ", "RUNNING", "RESULTS", "S/UNIT", "QUOTA",
               "CONSEC", "ERR%", "SPOT", "LAST SEEN");
        for (uint32_t k = 0; k < p.n; k++) {
            const msgpack_object *nodes = wire_get(p.r[k]->msg.root, "nodes");
            for (uint32_t i = 0; i < nodes->via.array.size; i++, total++)
                print_row(&nodes->via.array.ptr[i], now);
        }
        if (total == 0)
            printf("(no nodes yet; start one with gridnode client)\n");
        bool head = false; /* the drained nodes' reasons, like sinfo -R */
        for (uint32_t k = 0; k < p.n; k++) {
            const msgpack_object *nodes = wire_get(p.r[k]->msg.root, "nodes");
            for (uint32_t i = 0; i < nodes->via.array.size; i++) {
                const msgpack_object *n = &nodes->via.array.ptr[i];
                char name[64], why[256];
                if (!wire_get(n, "drain"))
                    continue;
                if (!head)
                    printf("\n%-14s %-8s %-20s %s\n", "DRAINED NODE", "STATE", "SINCE", "REASON");
                head = true;
                cli_text(n, "node", name, sizeof name);
                cli_text(n, "drain", why, sizeof why);
                char since[32] = "-";
                time_t t = (time_t)(wire_get_i64(n, "drain_since", 0) / 1000);
                struct tm tm;
                if (t > 0 && localtime_r(&t, &tm))
                    strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", &tm);
                printf("%-14s %-8s %-20s %s\n", name,
                       wire_get_u64(n, "running", 0) ? "drain" : "drained", since, why);
            }
        }
        print_features(&p);
    }
    cli_pages_free(&p);
    return 0;
}

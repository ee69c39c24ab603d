/*
 * main.c - the gridnode binary: one executable, a role or a tool per subcommand.
 * The table below is the whole command set; `gridnode help` prints it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "wire/wire.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"cluster", cmd_cluster, "run the cluster manager / task server role"},
    {"client", cmd_client, "run the execution host (volunteer client) role"},
    {"submit", cmd_submit, "submit a job (a bag of tasks) to a cluster manager"},
    {"jobs", cmd_jobs, "list the jobs of a cluster manager"},
    {"job", cmd_job, "show one job: status and per-task results"},
    {"cancel", cmd_cancel, "cancel jobs"},
    {"hold", cmd_hold, "hold jobs: their tasks are not handed out until released"},
    {"release", cmd_release, "release held jobs"},
    {"requeue", cmd_requeue, "start jobs again from scratch (running tasks are killed)"},
    {"purge", cmd_purge, "remove finished jobs and their results"},
    {"fetch", cmd_fetch, "download the output files a job's tasks kept"},
    {"acct", cmd_acct, "accounting records of finished jobs, and use per user (sacct)"},
    {"nodes", cmd_nodes, "list the nodes known to a cluster manager"},
    {"console", cmd_console, "cluster manager console: limits, queues, hosts, parallel jobs"},
    {"keygen", cmd_keygen, "make a CURVE key pair (NAME.key secret, NAME.pub public)"},
    {"dump", cmd_dump, "print a role's stored state (works while it runs)"},
    {"batch", cmd_batch, "batch scheduler (Maui-like); --simulate replays a workload trace"},
    {"meta", cmd_meta,
     "metascheduler: a grid spool placing jobs on batch sites (--simulate: compare policies)"},
    {"showq", cmd_showq, "batch queue: active, eligible and blocked jobs"},
    {"checkjob", cmd_checkjob, "one batch job: priority, reservation, why it waits"},
    {"showstart", cmd_showstart, "estimated start of a batch job or of PROCS@DURATION"},
    {"diagnose", cmd_diagnose, "batch priorities factor by factor (-p), fairshare (-f)"},
    {"canceljob", cmd_canceljob, "cancel batch jobs"},
    {"setres", cmd_setres, "set an administrative reservation (admins)"},
    {"showres", cmd_showres, "list reservations (-n: by host)"},
    {"showbf", cmd_showbf, "batch backfill windows: processors free now and for how long"},
    {"checknode", cmd_checknode, "one batch host: state, jobs, features, reservations"},
    {"showstats", cmd_showstats, "batch site statistics: jobs, wait, xfactor, load"},
    {"releaseres", cmd_releaseres, "release reservations (admins)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gridnode COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n`gridnode COMMAND --help` describes a command; `gridnode --version` (-V)\n"
                 "prints the version.\n"
                 "Exit status of every command: 0 done, 1 failed (the role refused, or could\n"
                 "not be asked: the message says which and what to do), 2 a usage error (an\n"
                 "unknown option, a value that is not one the option takes: a state, a whole\n"
                 "number); job and submit --wait add 3 failed, 4 killed, 5 cancelled.\n");
}

/*
 * "--opt=value" is "--opt value" for every command (issue 15): split here, once, so each
 * command's parser sees one form. Up to a bare "--" only. `submit` splits its own
 * options (cmd/submit.c): what follows its PROGRAM belongs to the program.
 */
static char **split_eq(int *argc, char **argv)
{
    static char **out; /* reachable for the life of the process */
    out = malloc(((size_t)*argc * 2 + 1) * sizeof *out);
    if (!out)
        return argv;
    int n = 0;
    bool rest = false;
    for (int i = 0; i < *argc; i++) {
        char *a = argv[i], *eq = strchr(a, '=');
        if (!strcmp(a, "--"))
            rest = true;
        if (!rest && i > 1 && a[0] == '-' && a[1] == '-' && eq && eq > a + 2) {
            *eq = '\0';
            out[n++] = a;
            out[n++] = eq + 1;
        } else {
            out[n++] = a;
        }
    }
    out[n] = NULL;
    *argc = n;
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("gridnode %s (wire protocol %d)\n", GRIDNODE_VERSION, WIRE_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "submit") != 0)
        argv = split_eq(&argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gridnode: unknown command '%s'; run 'gridnode help' for the list\n", argv[1]);
    return 2;
}

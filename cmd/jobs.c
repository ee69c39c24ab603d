/* jobs.c - `gridnode jobs`: the jobs of a cluster manager as a table. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] = "usage: gridnode jobs [options]\n\nLists every job of the cluster "
                            "manager with its progress.\n";

int cmd_jobs(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode jobs", &argc, argv) < 0)
        return 2;
    if (argc > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", c.prog, argv[1], usage);
        return 2;
    }
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_LIST, 1, 0);
    int rc = cli_call(&c, &wb, 1, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    const msgpack_object *jobs = wire_get(r.msg.root, "jobs");
    if (c.json) {
        cli_print_json(jobs);
    } else {
        printf("%6s  %-16s %-10s %-9s %8s %8s %8s %8s %5s  %s\n", "JOB", "NAME", "USER",
               "STATE", "TASKS", "DONE", "FAILED", "RUNNING", "DUPS", "SUBMITTED");
        for (uint32_t i = 0; i < jobs->via.array.size; i++) {
            const msgpack_object *j = &jobs->via.array.ptr[i];
            char name[17], user[11], state[10], t[32];
            wire_get_strbuf(j, "name", name, sizeof name);
            wire_get_strbuf(j, "user", user, sizeof user);
            wire_get_strbuf(j, "state", state, sizeof state);
            printf("%6llu  %-16s %-10s %-9s %8llu %8llu %8llu %8llu %5llu  %s\n",
                   (unsigned long long)wire_get_u64(j, "job", 0), name[0] ? name : "-",
                   user[0] ? user : "-", state, (unsigned long long)wire_get_u64(j, "ntasks", 0),
                   (unsigned long long)wire_get_u64(j, "done", 0),
                   (unsigned long long)wire_get_u64(j, "failed", 0),
                   (unsigned long long)wire_get_u64(j, "running", 0),
                   (unsigned long long)wire_get_u64(j, "dups", 0),
                   cli_time(wire_get_i64(j, "submitted", 0), t, sizeof t));
        }
        if (jobs->via.array.size == 0)
            printf("(no jobs; submit one with gridnode submit)\n");
    }
    cli_reply_free(&r);
    return 0;
}

/* cancel.c - `gridnode cancel ID`: cancel a job. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] =
    "usage: gridnode cancel [options] JOB\n\nCancels a job: no more of its tasks are handed "
    "out, and nodes running them are told to stop.\n";

int cmd_cancel(int argc, char **argv)
{
    struct cli c;
    struct wire_buf wb;
    struct cli_reply r;
    uint64_t job;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode cancel", &argc, argv) < 0)
        return 2;
    if (argc != 2) {
        fprintf(stderr, "%s: give exactly one job id\n%s", c.prog, usage);
        return 2;
    }
    if (cli_u64(&c, "JOB", argv[1], &job) < 0)
        return 2;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_CANCEL, 1, 1);
    wire_put_u64(&wb, "job", job);
    int rc = cli_call(&c, &wb, 1, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    if (c.json)
        printf("{\"job\":%llu,\"cancelled\":true}\n", (unsigned long long)job);
    else
        printf("job %llu cancelled\n", (unsigned long long)job);
    cli_reply_free(&r);
    return 0;
}

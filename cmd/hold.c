/* hold.c - `gridnode hold|release JOB...`: keep a job's tasks from being handed out, and
 * let them go again (Slurm's scontrol hold / release); `gridnode requeue JOB...`: start
 * a job again from scratch (scontrol requeue). JOB_CTL, docs/wire.md 6.16. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage_hold[] =
    "usage: gridnode hold [options] JOB...\n\nHolds jobs (bags of tasks): none of their "
    "tasks is handed out, new or re-issued, until\n`gridnode release`. Tasks already "
    "running finish and their results are kept. The hold\nis stored: it survives a "
    "restart of the cluster manager. `gridnode jobs` shows \"held\".\n"
    "With -e BATCH_EP (a batch role): its pending tasks are not started until released\n"
    "(as `submit --hold`, Maui's user hold); running ones go on.\n";

static const char usage_release[] =
    "usage: gridnode release [options] JOB...\n\nReleases held jobs: their tasks are "
    "handed out again.\n";

static const char usage_requeue[] =
    "usage: gridnode requeue [options] JOB...\n\nRequeues jobs on the cluster manager, "
    "like Slurm's scontrol requeue: the job\nstarts again from scratch, keeping its id; "
    "`gridnode job` counts the requeues.\n"
    "A bag of tasks: its running tasks are killed on their nodes, every task goes\n"
    "back to new; earlier results are dropped. A held job stays held.\n"
    "A parallel job: its processes are killed and it shows \"requeueing\" until every\n"
    "node has confirmed they are gone (a dead node's count as gone); then it is\n"
    "\"waiting\" again, placed anew by the scheduler; earlier outputs and exit codes\n"
    "are dropped.\n"
    "A job of a batch role: requeue it there (gridnode requeue -e BATCH_EP JOB): its\n"
    "running tasks are cancelled at their cluster and go back to the batch queue\n"
    "once the cluster confirms they ended (\"requeueing\" until then), keeping their\n"
    "submission time for priority; ended tasks run again; results of earlier runs\n"
    "are dropped; a job never started is left as it is.\n"
    "A cancelled job cannot be requeued (submit it again). Only the job's owner or\n"
    "an administrator may requeue it.\n";

static int job_ctl(int argc, char **argv, const char *op, const char *usage)
{
    struct cli c;
    char prog[32];
    snprintf(prog, sizeof prog, "gridnode %s", op);
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, prog, &argc, argv) < 0)
        return 2;
    if (argc < 2) {
        fprintf(stderr, "%s: give one or more job ids\n%s", c.prog, usage);
        return 2;
    }
    uint64_t ids[argc];
    for (int i = 1; i < argc; i++)
        if (cli_u64(&c, "JOB", argv[i], &ids[i]) < 0)
            return 2;
    int status = 0;
    const char *done = !strcmp(op, "hold")      ? "held"
                       : !strcmp(op, "release") ? "released"
                                                : "requeued";
    for (int i = 1; i < argc; i++) { /* each on its own: one bad id does not stop the rest */
        struct wire_buf wb;
        struct cli_reply r;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_JOB_CTL, (uint64_t)i, 2);
        wire_put_u64(&wb, "job", ids[i]);
        wire_put_str(&wb, "op", op);
        int rc = cli_call(&c, &wb, (uint64_t)i, &r);
        wire_buf_free(&wb);
        if (rc != 0) {
            status = 1;
            if (rc < 0)
                break; /* unreachable: the others would fail alike */
            continue;
        }
        if (c.json)
            printf("{\"job\":%llu,\"%s\":true}\n", (unsigned long long)ids[i], done);
        else
            printf("job %llu %s\n", (unsigned long long)ids[i], done);
        cli_reply_free(&r);
    }
    return status;
}

int cmd_hold(int argc, char **argv)
{
    return job_ctl(argc, argv, "hold", usage_hold);
}

int cmd_release(int argc, char **argv)
{
    return job_ctl(argc, argv, "release", usage_release);
}

int cmd_requeue(int argc, char **argv)
{
    return job_ctl(argc, argv, "requeue", usage_requeue);
}

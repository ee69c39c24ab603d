/* hold.c - the tools that act on several jobs by id: `gridnode cancel JOB...` (CANCEL,
 * Slurm's scancel), `gridnode hold|release JOB...`: keep a job's tasks from being handed
 * out, and let them go again (Slurm's scontrol hold / release); `gridnode requeue
 * JOB...`: start a job again from scratch (scontrol requeue). JOB_CTL, docs/wire.md
 * 6.16. Each id is asked on its own: one that fails does not stop the others; the
 * exit status is 1 when any failed, and the last line names them. */
#include <stdbool.h>
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

static const char usage_cancel[] =
    "usage: gridnode cancel [options] JOB...\n\nCancels jobs: no more of their tasks are "
    "handed out, and nodes running them are told\nto stop (a batch role's or a grid spool's "
    "job: its parts at their cluster or site\nare cancelled there). Each job is cancelled on "
    "its own; a job that cannot be\n(no such job, already finished, another user's) does not "
    "stop the others.\n"
    "Exit status: 0 every job cancelled, 1 any not (the last line names them), 2 a\n"
    "usage error.\n";

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
    "A job of the grid spool (-e META_EP): its copy at its site is cancelled and the\n"
    "job is placed again once the site confirms (\"requeueing\" until then); while\n"
    "the site is unreachable it is placed again at once (you vouch that its copy will\n"
    "not run there; the cancel reaches the site when it answers again).\n"
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
    bool cancel = !strcmp(op, "cancel");
    const char *done = cancel                   ? "cancelled"
                       : !strcmp(op, "hold")    ? "held"
                       : !strcmp(op, "release") ? "released"
                                                : "requeued";
    if (argc > 2 && cli_keep(&c) < 0) /* one connection for all of them */
        return 1;
    char failed[256] = "";
    int nfailed = 0;
    for (int i = 1; i < argc; i++) { /* each on its own: one bad id does not stop the rest */
        struct wire_buf wb;
        struct cli_reply r;
        char named[64];
        struct cli one = c;
        snprintf(named, sizeof named, "%s: job %llu", c.prog, (unsigned long long)ids[i]);
        one.prog = named; /* an error names the job it is about */
        wire_buf_init(&wb);
        wire_begin(&wb, cancel ? WT_CANCEL : WT_JOB_CTL, (uint64_t)i, cancel ? 1 : 2);
        wire_put_u64(&wb, "job", ids[i]);
        if (!cancel)
            wire_put_str(&wb, "op", op);
        int rc = cli_call(&one, &wb, (uint64_t)i, &r);
        wire_buf_free(&wb);
        if (rc != 0) {
            size_t used = strlen(failed);
            if (used + 24 < sizeof failed)
                snprintf(failed + used, sizeof failed - used, "%s%llu", nfailed ? ", " : "",
                         (unsigned long long)ids[i]);
            else if (used + 5 < sizeof failed && !strstr(failed, "..."))
                snprintf(failed + used, sizeof failed - used, ", ...");
            nfailed++;
            if (rc < 0) { /* unreachable: the others would fail alike */
                nfailed += argc - 1 - i;
                break;
            }
            continue;
        }
        if (c.json)
            printf("{\"job\":%llu,\"%s\":true}\n", (unsigned long long)ids[i], done);
        else
            printf("job %llu %s\n", (unsigned long long)ids[i], done);
        cli_reply_free(&r);
    }
    cli_unkeep(&c);
    if (nfailed && argc > 2)
        fprintf(stderr, "%s: %d of %d jobs not %s: %s\n", c.prog, nfailed, argc - 1, done, failed);
    return nfailed ? 1 : 0;
}

int cmd_cancel(int argc, char **argv)
{
    return job_ctl(argc, argv, "cancel", usage_cancel);
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

/*
 * cmd.h - every subcommand of the gridnode binary. Each is cmd/<name>.c exporting
 * cmd_<name>(argc, argv) with argv[0] the subcommand name; it returns the process
 * exit status (0 success, 1 failure, 2 usage error).
 */
#ifndef GRIDNODE_CMD_H
#define GRIDNODE_CMD_H

/* The release of the gridnode binary, printed by `gridnode --version` (and so in the
 * man pages' footer): the one place it is written; raise it on a release. The wire
 * protocol has its own version (WIRE_VERSION, wire/wire.h). */
#define GRIDNODE_VERSION "0.9.0"

int cmd_cluster(int argc, char **argv);
int cmd_client(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_purge(int argc, char **argv);
int cmd_fetch(int argc, char **argv); /* issue 26 */
int cmd_acct(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_meta(int argc, char **argv);
int cmd_console(int argc, char **argv);
int cmd_hold(int argc, char **argv);
int cmd_release(int argc, char **argv);
int cmd_requeue(int argc, char **argv);
/* maui.c: the batch role's commands */
int cmd_showq(int argc, char **argv);
int cmd_checkjob(int argc, char **argv);
int cmd_showstart(int argc, char **argv);
int cmd_diagnose(int argc, char **argv);
int cmd_canceljob(int argc, char **argv);
int cmd_setres(int argc, char **argv);
int cmd_showres(int argc, char **argv);
int cmd_showbf(int argc, char **argv);
int cmd_checknode(int argc, char **argv);
int cmd_showstats(int argc, char **argv);
int cmd_releaseres(int argc, char **argv);

#endif

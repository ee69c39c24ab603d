/*
 * console.c - `gridnode console`: console commands against a cluster manager (K9),
 * one-shot (`gridnode console 'disable 2'`) or interactively (one command per line
 * from standard input). Each exchange is one CONSOLE request; its changes are durable
 * before the answer arrives.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] =
    "usage: gridnode console [options] [COMMAND...]\n"
    "\n"
    "Runs console commands against a cluster manager: show and change cluster limits,\n"
    "queue states and attributes, list jobs and hosts. With COMMAND (several words, or\n"
    "several commands separated by ';'), runs it and exits; without, reads commands\n"
    "from standard input, one per line. `help` lists the commands.\n";

/* One CONSOLE exchange; prints the output. 0 ok, 1 refused or no answer. */
static int run(struct cli *c, const char *cmd, uint64_t id)
{
    struct wire_buf wb;
    struct cli_reply r;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_CONSOLE, id, 1);
    wire_put_str(&wb, "cmd", cmd);
    int rc = cli_call(c, &wb, id, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    if (c->json) {
        cli_print_json(r.msg.root);
    } else {
        size_t n;
        const char *out = wire_get_str(r.msg.root, "out", &n);
        fwrite(out, 1, n, stdout);
        fflush(stdout);
    }
    cli_reply_free(&r);
    return 0;
}

int cmd_console(int argc, char **argv)
{
    struct cli c;
    char cmd[16384] = "";
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode console", &argc, argv) < 0)
        return 2;
    if (argc > 1) {
        size_t len = 0;
        for (int i = 1; i < argc && len < sizeof cmd - 1; i++)
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s%s", i > 1 ? " " : "",
                                    argv[i]);
        return run(&c, cmd, 1);
    }
    bool tty = isatty(0);
    int rc = 0;
    uint64_t id = 1;
    for (;;) {
        if (tty) {
            fputs("console> ", stdout);
            fflush(stdout);
        }
        if (!fgets(cmd, sizeof cmd, stdin))
            break;
        cmd[strcspn(cmd, "\n")] = '\0';
        if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit"))
            break;
        if (cmd[strspn(cmd, " \t")] == '\0')
            continue;
        rc |= run(&c, cmd, id++);
    }
    return rc;
}

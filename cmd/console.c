/*
 * console.c - `gridnode console`: console commands against a cluster manager (K9),
 * one-shot (`gridnode console 'disable 2'`) or interactively (one command per line
 * from standard input). Each exchange is one CONSOLE request; its changes are durable
 * before the answer arrives.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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

static void console_fill(struct wire_buf *wb, const void *arg)
{
    wire_put_str(wb, "cmd", arg);
}

/* One CONSOLE request, every page of its output (a long `jobs` or `hosts` listing comes
 * in pages, docs/wire.md 6.7); prints the output (--json: one {"out": ...} object).
 * 0 ok, 1 refused or no answer. */
static int run(struct cli *c, const char *cmd)
{
    struct cli_pages p;
    if (cli_list_fields(c, WT_CONSOLE, 1, console_fill, cmd, &p) != 0)
        return 1;
    if (c->json) {
        size_t total = 0, len = 0, n;
        for (uint32_t i = 0; i < p.n; i++)
            if (wire_get_str(p.r[i]->msg.root, "out", &n))
                total += n;
        char *all = malloc(total + 1);
        for (uint32_t i = 0; all && i < p.n; i++) {
            const char *o = wire_get_str(p.r[i]->msg.root, "out", &n);
            if (o) {
                memcpy(all + len, o, n);
                len += n;
            }
        }
        json_t *j = all ? json_pack("{s:s%}", "out", all, len) : NULL;
        if (j)
            json_dumpf(j, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(j);
        free(all);
    } else {
        for (uint32_t i = 0; i < p.n; i++) {
            size_t n;
            const char *out = wire_get_str(p.r[i]->msg.root, "out", &n);
            if (out)
                fwrite(out, 1, n, stdout);
        }
        fflush(stdout);
    }
    cli_pages_free(&p);
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
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s%s", i > 1 ? " " : "", argv[i]);
        return run(&c, cmd);
    }
    bool tty = isatty(0);
    int rc = 0;
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
        rc |= run(&c, cmd);
    }
    return rc;
}

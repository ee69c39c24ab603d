/*
 * clientctl.c - `gridnode client status|attach|detach`: the multi-project client's
 * control commands (like boinccmd --get_state / --project_attach / --project_detach),
 * spoken to the client's control socket (client.control; its bound endpoint is in
 * STATE_DIR/endpoint).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "roles/client/live/client.h"

static const char usage[] =
    "usage: gridnode client status [-s STATE_DIR | -e CONTROL] [--json]\n"
    "       gridnode client attach NAME [--share N] [--scheduler EP]... [--master EP]\n"
    "                              [-s STATE_DIR | -e CONTROL]\n"
    "       gridnode client detach NAME [-s STATE_DIR | -e CONTROL]\n"
    "\n"
    "Talks to a running multi-project client. status: its projects (share, REC,\n"
    "priority, failures, backoffs, next RPC), tasks (state, deadline, estimated\n"
    "remaining time, predicted deadline miss) and processor types (instances,\n"
    "shortfall, saturated time). attach: adds a project (or changes an attached one's\n"
    "share and endpoints); --scheduler may be repeated, a project with only --master\n"
    "reads its schedulers from there first. detach: stops the project's tasks and\n"
    "forgets them and the project. Both are kept in the client's state directory.\n"
    "  -s, --state-dir DIR the client's state directory (reads DIR/endpoint)\n"
    "  -e, --endpoint EP   the client's control endpoint instead\n"
    "  --timeout MS        give up waiting for the reply after MS ms (default 10000)\n"
    "  --json              machine-readable output (status)\n"
    "With CURVE (the default) the control endpoint is served with the client's own key\n"
    "and admits the admin, node and peer keys of its authorized_keys (a user's key gets\n"
    "DENIED): GRIDNODE_SERVER_KEY is the client's public key (its security.secret_key's\n"
    ".pub), GRIDNODE_KEY an admitted key. In a scripts/grid grid:\n"
    "  GRIDNODE_KEY=DIR/keys/admin.key GRIDNODE_SERVER_KEY=DIR/keys/node1.pub \\\n"
    "  gridnode client status -s DIR/node1\n";

static double num(const msgpack_object *m, const char *k)
{
    return wire_get_f64(m, k, 0);
}

static void fmt_dur(double s, char *buf, size_t n)
{
    if (s <= 0)
        snprintf(buf, n, "-");
    else if (s < 120)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 7200)
        snprintf(buf, n, "%.0fm", s / 60);
    else
        snprintf(buf, n, "%.1fh", s / 3600);
}

static void print_state(const msgpack_object *root)
{
    const msgpack_object *pr = wire_get(root, "projects"), *ts = wire_get(root, "tasks"),
                         *pt = wire_get(root, "ptypes");
    char a[32], b[32], c[32], name[80], txt[300];
    printf("PROJECT          SHARE        REC  PRIORITY  FAIL  BACKOFF  NEXT_RPC  TASKS  "
           "SESSION\n");
    for (uint32_t i = 0; pr && i < pr->via.array.size; i++) {
        const msgpack_object *p = &pr->via.array.ptr[i];
        unsigned n = 0;
        size_t nl;
        const char *pn = wire_get_str(p, "name", &nl);
        for (uint32_t k = 0; ts && k < ts->via.array.size; k++) {
            size_t tl;
            const char *tp = wire_get_str(&ts->via.array.ptr[k], "project", &tl);
            n += tp && pn && tl == nl && !memcmp(tp, pn, nl);
        }
        cli_text(p, "name", name, sizeof name);
        cli_text(p, "session", txt, sizeof txt);
        fmt_dur(num(p, "backoff_s"), a, sizeof a);
        fmt_dur(num(p, "next_rpc_s"), b, sizeof b);
        printf("%-15s %6g %10.3g %9.3f %5.0f %8s %9s %6u  %s\n", name, num(p, "share"),
               num(p, "rec"), num(p, "priority"), num(p, "failures"), a, b, n, txt[0] ? txt : "-");
    }
    printf(
        "\nPROJECT          JOB.IDX      STATE      TYPE    ELAPSED  REMAINING  DEADLINE  MISS\n");
    double now = (double)time(NULL);
    for (uint32_t i = 0; ts && i < ts->via.array.size; i++) {
        const msgpack_object *t = &ts->via.array.ptr[i];
        char id[64], st[16], ty[40];
        cli_text(t, "project", name, sizeof name);
        cli_text(t, "state", st, sizeof st);
        cli_text(t, "ptype", ty, sizeof ty);
        snprintf(id, sizeof id, "%llu.%llu", (unsigned long long)wire_get_u64(t, "job", 0),
                 (unsigned long long)wire_get_u64(t, "idx", 0));
        fmt_dur(num(t, "elapsed_s"), a, sizeof a);
        fmt_dur(num(t, "remaining_s"), b, sizeof b);
        fmt_dur(num(t, "deadline") - now, c, sizeof c);
        printf("%-15s %-12s %-10s %-7s %8s %10s %9s  %s\n", name, id, st, ty, a, b, c,
               wire_get_bool(t, "deadline_miss", false) ? "yes" : "no");
    }
    printf("\nTYPE      INSTANCES  BUSY  SHORTFALL  SATURATED  QUEUED\n");
    for (uint32_t i = 0; pt && i < pt->via.array.size; i++) {
        const msgpack_object *t = &pt->via.array.ptr[i];
        char ty[40];
        cli_text(t, "type", ty, sizeof ty);
        fmt_dur(num(t, "saturated"), a, sizeof a);
        printf("%-9s %9llu %5llu %10.0f %10s %7.0f\n", ty,
               (unsigned long long)wire_get_u64(t, "instances", 0),
               (unsigned long long)wire_get_u64(t, "busy", 0), num(t, "shortfall"), a,
               num(t, "queued"));
        if (wire_get_u64(t, "ranks", 0))
            printf("%-9s %9llu more taken by parallel jobs' processes\n", "",
                   (unsigned long long)wire_get_u64(t, "ranks", 0));
    }
    cli_text(root, "health", txt, sizeof txt);
    if (txt[0])
        printf("\nNODE UNHEALTHY: %s\n(no new work; tasks not started were handed back; it "
               "checks again with a growing delay)\n",
               txt);
}

/* -s DIR: the control endpoint the client wrote in DIR/endpoint. */
static int endpoint_from_dir(const char *dir, char *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/endpoint", dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, (int)n, f)) {
        fprintf(stderr,
                "gridnode client: cannot read %s (is a multi-project client running "
                "with that state directory?)\n",
                path);
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

int vcl_cmd(int argc, char **argv)
{
    /* argv[0] = "client", argv[1] = the verb */
    const char *verb = argv[1];
    char prog[64], ep[512];
    struct cli c;
    snprintf(prog, sizeof prog, "gridnode client %s", verb);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
    argv++;
    argc--;
    if (cli_common(&c, prog, &argc, argv) < 0)
        return 2;
    const char *name = NULL, *master = NULL, *dir = NULL;
    const char *eps[8];
    int neps = 0;
    double share = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-s") || !strcmp(a, "--state-dir")) && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(a, "--share") && i + 1 < argc) {
            char *end;
            share = strtod(argv[++i], &end);
            if (*end || !(share > 0) || !isfinite(share)) {
                fprintf(stderr, "%s: --share wants a number > 0, not '%s'\n", prog, argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--scheduler") && i + 1 < argc) {
            if (neps == 8) {
                fprintf(stderr, "%s: at most 8 --scheduler endpoints\n", prog);
                return 2;
            }
            eps[neps++] = argv[++i];
        } else if (!strcmp(a, "--master") && i + 1 < argc)
            master = argv[++i];
        else if (a[0] != '-' && !name && strcmp(verb, "status"))
            name = a;
        else {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", prog, a, usage);
            return 2;
        }
    }
    if (strcmp(verb, "status") && !name) {
        fprintf(stderr, "%s: which project? (gridnode client %s NAME)\n", prog, verb);
        return 2;
    }
    if (dir) {
        if (endpoint_from_dir(dir, ep, sizeof ep) < 0)
            return 1;
        c.endpoint = ep;
    }
    struct wire_buf wb;
    struct cli_reply r;
    uint64_t id = 1;
    wire_buf_init(&wb);
    if (!strcmp(verb, "status")) {
        wire_begin(&wb, WT_CLIENT_STATUS, id, 0);
    } else if (!strcmp(verb, "attach")) {
        wire_begin(&wb, WT_ATTACH, id, 1 + (share > 0) + (neps > 0) + (master != NULL));
        wire_put_str(&wb, "project", name);
        if (share > 0)
            wire_put_f64(&wb, "share", share);
        if (neps > 0)
            wire_put_strv(&wb, "endpoints", (char *const *)eps, (uint32_t)neps);
        if (master)
            wire_put_str(&wb, "master", master);
    } else {
        wire_begin(&wb, WT_DETACH, id, 1);
        wire_put_str(&wb, "project", name);
    }
    int rc = cli_call(&c, &wb, id, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    if (r.msg.type == WT_CLIENT_STATE) {
        if (c.json)
            cli_print_json(r.msg.root);
        else
            print_state(r.msg.root);
    } else if (!c.json) {
        printf("project %s %s\n", name, !strcmp(verb, "attach") ? "attached" : "detached");
    }
    cli_reply_free(&r);
    return 0;
}

/*
 * purge.c - `gridnode purge [--older-than DURATION] [JOB...]`: remove finished jobs
 * (their records, task results and outputs) from a cluster manager or a batch role,
 * printing what went.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

#define PURGE_IDS_MAX 100000 /* ids in one request (the descriptor's cap) */

static const char usage[] =
    "usage: gridnode purge [options] [--older-than DURATION] [JOB...]\n"
    "\n"
    "Removes finished jobs (done, failed, killed or cancelled) from the role at -e: a\n"
    "cluster manager, a batch role or the grid spool (administrators only): their records,\n"
    "task results, duplicates, inputs and outputs; their accounting records stay. A job\n"
    "that has not ended is refused (cancel it first) and then nothing is purged. Without\n"
    "JOB ids, every job that ended more than DURATION ago goes. Each role also purges by\n"
    "itself jobs that ended more than its jobs.retention_s ago (configs/cluster.ini,\n"
    "batch.ini, meta.ini).\n"
    "  --older-than D  only jobs that ended at least D ago: seconds, or a number with\n"
    "                  s, m, h or d (e.g. 90m, 7d); 0 = every finished job\n"
    "Prints a table of the purged jobs (JOB STATE ENDED NAME), or with --json one array.\n"
    "Exit status: 0 done (also when nothing matched), 1 an error (nothing purged).\n";

/* "90", "90s", "15m", "2h", "7d" -> seconds; -1 if not a duration. */
static long long parse_duration(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9') /* strtoll would take a sign or a space */
        return -1;
    long long v = strtoll(s, &end, 10), mul = 1;
    if (end == s || v < 0)
        return -1;
    if (*end && end[1])
        return -1;
    switch (*end) {
    case '\0':
    case 's':
        break;
    case 'm':
        mul = 60;
        break;
    case 'h':
        mul = 3600;
        break;
    case 'd':
        mul = 86400;
        break;
    default:
        return -1;
    }
    return v > (1LL << 40) / mul ? -1 : v * mul;
}

static void print_rows(const struct cli *c, const msgpack_object *jobs, bool *first)
{
    for (uint32_t i = 0; i < jobs->via.array.size; i++) {
        const msgpack_object *j = &jobs->via.array.ptr[i];
        char when[32], name[256], state[32];
        if (c->json) {
            printf("%s", *first ? "" : ",");
            cli_print_json(j);
        } else {
            wire_get_strbuf(j, "name", name, sizeof name);
            wire_get_strbuf(j, "state", state, sizeof state);
            printf("%-8llu %-10s %-19s %s\n", (unsigned long long)wire_get_u64(j, "job", 0), state,
                   cli_time(wire_get_i64(j, "finished", 0), when, sizeof when), name);
        }
        *first = false;
    }
}

int cmd_purge(int argc, char **argv)
{
    struct cli c;
    long long older = -1;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode purge", &argc, argv) < 0)
        return 2;
    uint64_t *ids = calloc((size_t)argc + 1, sizeof *ids);
    uint32_t nids = 0;
    if (!ids)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--older-than") && i + 1 < argc) {
            if ((older = parse_duration(argv[++i])) < 0) {
                fprintf(stderr,
                        "%s: --older-than: '%s' is not a duration (e.g. 3600, 90m, "
                        "12h, 7d)\n",
                        c.prog, argv[i]);
                free(ids);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "%s: unknown option %s\n%s", c.prog, argv[i], usage);
            free(ids);
            return 2;
        } else if (cli_u64(&c, "JOB", argv[i], &ids[nids++]) < 0) {
            free(ids);
            return 2;
        }
    }
    if (nids == 0 && older < 0) {
        fprintf(stderr,
                "%s: name the jobs to purge, or give --older-than DURATION "
                "(--older-than 0: every finished job)\n",
                c.prog);
        free(ids);
        return 2;
    }
    if (nids > PURGE_IDS_MAX) {
        fprintf(stderr, "%s: at most %d job ids at once\n", c.prog, PURGE_IDS_MAX);
        free(ids);
        return 2;
    }
    int rc = 0;
    bool first = true, more = true;
    uint32_t total = 0;
    for (uint64_t id = 1; more; id++) {
        struct wire_buf wb;
        struct cli_reply r;
        wire_buf_init(&wb);
        wire_begin(&wb, WT_PURGE, id, (nids ? 1 : 0) + (older >= 0 ? 1 : 0));
        if (nids) {
            wire_put_key(&wb, "jobs");
            wire_pack_array(&wb, nids);
            for (uint32_t i = 0; i < nids; i++)
                wire_pack_u64(&wb, ids[i]);
        }
        if (older >= 0)
            wire_put_u64(&wb, "older_than_s", (uint64_t)older);
        int crc = cli_call(&c, &wb, id, &r);
        wire_buf_free(&wb);
        if (crc != 0) {
            rc = 1;
            break;
        }
        if (id == 1 && c.json) /* the head once there is a table (not over an error) */
            printf("[");
        else if (id == 1)
            printf("%-8s %-10s %-19s %s\n", "JOB", "STATE", "ENDED", "NAME");
        const msgpack_object *jobs = wire_get(r.msg.root, "jobs");
        print_rows(&c, jobs, &first);
        total += jobs->via.array.size;
        more = !nids && wire_get_bool(r.msg.root, "more", false) && jobs->via.array.size > 0;
        cli_reply_free(&r);
    }
    if (c.json && rc == 0)
        printf("]\n");
    else if (rc == 0)
        fprintf(stderr, "%u job(s) purged\n", total);
    free(ids);
    return rc;
}

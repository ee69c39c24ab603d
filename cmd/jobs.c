/* jobs.c - `gridnode jobs`: the jobs of a cluster manager as a table. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"

static const char usage[] =
    "usage: gridnode jobs [options]\n\nLists every job of the cluster "
    "manager with its progress (a job whose tasks all ended is \"done\",\nor \"failed\" when "
    "any task failed). Long lists are fetched page by page. Against a grid spool\n"
    "(gridnode meta) each job's site, the site's job id and the grid state are shown.\n";

/* A row of the grid spool (gridnode meta, docs/wire.md 6.13): it carries "gstate". */
static bool is_grid_row(const msgpack_object *j)
{
    return wire_get(j, "gstate") != NULL;
}

static void print_grid_row(const msgpack_object *j)
{
    char name[17], user[11], gstate[10], site[13], reason[200], t[32];
    cli_text(j, "name", name, sizeof name);
    cli_text(j, "user", user, sizeof user);
    cli_text(j, "gstate", gstate, sizeof gstate);
    cli_text(j, "site", site, sizeof site);
    cli_text(j, "reason", reason, sizeof reason);
    uint64_t sj = wire_get_u64(j, "site_job", 0);
    char sjs[24] = "-", ex[24] = "-";
    if (sj)
        snprintf(sjs, sizeof sjs, "%llu", (unsigned long long)sj);
    if (wire_get_u64(j, "done", 0) && strcmp(gstate, "cancelled"))
        snprintf(ex, sizeof ex, "%lld", (long long)wire_get_i64(j, "exit", 0));
    printf("%6llu  %-16s %-10s %-9s %-12s %8s %5llu %4s  %s  %s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name[0] ? name : "-",
           user[0] ? user : "-", gstate, site[0] ? site : "-", sjs,
           (unsigned long long)wire_get_u64(j, "procs", 0), ex,
           cli_time(wire_get_i64(j, "submitted", 0), t, sizeof t), reason);
}

static void print_row(const msgpack_object *j)
{
    char name[17], user[11], state[10], t[32];
    cli_text(j, "name", name, sizeof name);
    cli_text(j, "user", user, sizeof user);
    cli_text(j, "state", state, sizeof state);
    printf("%6llu  %-16s %-10s %-9s %8llu %8llu %8llu %8llu %5llu  %s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name[0] ? name : "-",
           user[0] ? user : "-", state, (unsigned long long)wire_get_u64(j, "ntasks", 0),
           (unsigned long long)wire_get_u64(j, "done", 0),
           (unsigned long long)wire_get_u64(j, "failed", 0),
           (unsigned long long)wire_get_u64(j, "running", 0),
           (unsigned long long)wire_get_u64(j, "dups", 0),
           cli_time(wire_get_i64(j, "submitted", 0), t, sizeof t));
}

/* The table: bag jobs of every page, then the parallel jobs of every page. */
static void print_table(const struct cli_pages *p)
{
    uint32_t npar = 0, nall = 0;
    const msgpack_object *first = p->n ? wire_get(p->r[0]->msg.root, "jobs") : NULL;
    if (first && first->via.array.size && is_grid_row(&first->via.array.ptr[0])) {
        printf("%6s  %-16s %-10s %-9s %-12s %8s %5s %4s  %-19s  %s\n", "JOB", "NAME", "USER",
               "STATE", "SITE", "SITE_JOB", "PROCS", "EXIT", "SUBMITTED", "REASON");
        for (uint32_t k = 0; k < p->n; k++) {
            const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
            for (uint32_t i = 0; i < jobs->via.array.size; i++)
                print_grid_row(&jobs->via.array.ptr[i]);
        }
        return;
    }
    printf("%6s  %-16s %-10s %-9s %8s %8s %8s %8s %5s  %s\n", "JOB", "NAME", "USER", "STATE",
           "TASKS", "DONE", "FAILED", "RUNNING", "DUPS", "SUBMITTED");
    for (uint32_t k = 0; k < p->n; k++) {
        const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
        for (uint32_t i = 0; i < jobs->via.array.size; i++, nall++)
            if (cli_is_pjob(&jobs->via.array.ptr[i]))
                npar++;
            else
                print_row(&jobs->via.array.ptr[i]);
    }
    if (nall == 0)
        printf("(no jobs; submit one with gridnode submit)\n");
    if (!npar)
        return;
    printf("\nparallel jobs:\n");
    cli_pjob_header();
    for (uint32_t k = 0; k < p->n; k++) {
        const msgpack_object *jobs = wire_get(p->r[k]->msg.root, "jobs");
        for (uint32_t i = 0; i < jobs->via.array.size; i++)
            if (cli_is_pjob(&jobs->via.array.ptr[i]))
                cli_pjob_row(&jobs->via.array.ptr[i]);
    }
}

int cmd_jobs(int argc, char **argv)
{
    struct cli c;
    struct cli_pages p;
    int rc = cli_simple_list(&c, "gridnode jobs", usage, WT_JOB_LIST, argc, argv, &p);
    if (rc >= 0)
        return rc;
    if (c.json)
        cli_print_json_pages(&p, "jobs");
    else
        print_table(&p);
    cli_pages_free(&p);
    return 0;
}

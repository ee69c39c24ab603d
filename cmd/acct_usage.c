/*
 * acct_usage.c - `gridnode acct --usage` (acct_usage.h): the records of the window
 * summed per user and account, as sreport's cluster UserUtilizationByAccount: jobs,
 * elapsed seconds, core-seconds (elapsed x the cores a job held: a parallel job's
 * processes, a bag task's one) and CPU seconds where the role measured them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/acct_usage.h"
#include "wire/wire.h"

struct use {
    char user[64], group[64];
    uint64_t jobs;
    double run_s, core_s, cpu_s;
};

static int by_use(const void *pa, const void *pb)
{
    const struct use *a = pa, *b = pb;
    int d = (a->core_s < b->core_s) - (a->core_s > b->core_s); /* the largest first */
    if (!d)
        d = strcmp(a->user, b->user);
    return d ? d : strcmp(a->group, b->group);
}

/* The (user, group) entry of u[0..*n) for record r, added when new; NULL: no memory. */
static struct use *entry(struct use **u, size_t *n, size_t *cap, const msgpack_object *r)
{
    char user[64], group[64];
    wire_get_strbuf(r, "user", user, sizeof user);
    wire_get_strbuf(r, "group", group, sizeof group);
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*u)[i].user, user) && !strcmp((*u)[i].group, group))
            return &(*u)[i];
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct use *v = realloc(*u, nc * sizeof *v);
        if (!v)
            return NULL;
        *u = v;
        *cap = nc;
    }
    struct use *e = &(*u)[(*n)++];
    memset(e, 0, sizeof *e);
    memcpy(e->user, user, sizeof user);
    memcpy(e->group, group, sizeof group);
    return e;
}

static void print_one(const struct use *e, bool json, bool csv, bool first)
{
    const char *g = *e->group ? e->group : "-", *u = *e->user ? e->user : "-";
    if (json)
        printf("%s{\"user\":\"%s\",\"account\":\"%s\",\"jobs\":%llu,\"elapsed_s\":%.3f,"
               "\"core_s\":%.3f,\"cpu_s\":%.3f}",
               first ? "" : ",", e->user, *e->group ? e->group : "", (unsigned long long)e->jobs,
               e->run_s, e->core_s, e->cpu_s);
    else if (csv)
        printf("%s,%s,%llu,%.3f,%.3f,%.3f\n", u, g, (unsigned long long)e->jobs, e->run_s,
               e->core_s, e->cpu_s);
    else
        printf("%-12s %-12s %8llu %14.1f %14.1f %14.1f\n", u, g, (unsigned long long)e->jobs,
               e->run_s, e->core_s, e->cpu_s);
}

/* Names are written into JSON and CSV unescaped: keep only plain printable ASCII
 * without quotes, backslashes or commas (a user or group name never holds others). */
static void plain(char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\' || *s == ',')
            *s = '?';
}

int acct_usage_print(const msgpack_object *rows, bool json, bool csv)
{
    struct use *u = NULL, total = {"TOTAL", "", 0, 0, 0, 0};
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < rows->via.array.size; i++) {
        const msgpack_object *r = &rows->via.array.ptr[i];
        struct use *e = entry(&u, &n, &cap, r);
        if (!e) {
            fprintf(stderr, "gridnode acct: out of memory\n");
            free(u);
            return 1;
        }
        double run = wire_get_f64(r, "run_s", 0);
        uint64_t cores = wire_get_u64(r, "cores", 1);
        e->jobs++;
        e->run_s += run;
        e->core_s += run * (double)(cores ? cores : 1);
        e->cpu_s += wire_get_f64(r, "cpu_s", 0);
    }
    if (n)
        qsort(u, n, sizeof *u, by_use);
    if (json)
        putchar('[');
    else if (csv)
        printf("user,account,jobs,elapsed_s,core_s,cpu_s\n");
    else
        printf("%-12s %-12s %8s %14s %14s %14s\n", "USER", "ACCOUNT", "JOBS", "ELAPSED_S", "CORE_S",
               "CPU_S");
    for (size_t i = 0; i < n; i++) {
        plain(u[i].user);
        plain(u[i].group);
        print_one(&u[i], json, csv, i == 0);
        total.jobs += u[i].jobs;
        total.run_s += u[i].run_s;
        total.core_s += u[i].core_s;
        total.cpu_s += u[i].cpu_s;
    }
    if (json)
        printf("]\n");
    else if (!csv)
        print_one(&total, false, false, false);
    free(u);
    return 0;
}

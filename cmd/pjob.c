/* pjob.c - how the user tools print parallel jobs (SCore-D side of the cluster). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "lib/text.h"

bool cli_is_pjob(const msgpack_object *j)
{
    size_t n;
    const char *k = wire_get_str(j, "kind", &n);
    return k && n == 8 && !memcmp(k, "parallel", 8);
}

void cli_pjob_header(void)
{
    printf("%6s  %-16s %-10s %-9s %5s %5s %-10s %8s  %s\n", "JOB", "NAME", "USER", "STATE", "QUEUE",
           "PROCS", "CLUSTER", "CPU_S", "HOSTS / REASON");
}

void cli_pjob_row(const msgpack_object *j)
{
    char name[65], user[41], state[10], cl[41], reason[200], hosts[200] = "";
    const msgpack_object *h = wire_get(j, "hosts");
    cli_cell(j, "name", 16, name, sizeof name);
    cli_cell(j, "user", 10, user, sizeof user);
    cli_text(j, "state", state, sizeof state);
    cli_cell(j, "cluster", 10, cl, sizeof cl);
    cli_text(j, "reason", reason, sizeof reason);
    for (uint32_t i = 0, len = 0; h && i < h->via.array.size && len < sizeof hosts - 2; i++) {
        if (i)
            hosts[len++] = ',';
        len +=
            (uint32_t)text_escape(hosts + len, sizeof hosts - len, h->via.array.ptr[i].via.str.ptr,
                                  h->via.array.ptr[i].via.str.size);
    }
    printf("%6llu  %s %s %-9s %5llu %5llu %s %8.1f  %s%s%s\n",
           (unsigned long long)wire_get_u64(j, "job", 0), name, user, state,
           (unsigned long long)wire_get_u64(j, "queue", 0),
           (unsigned long long)wire_get_u64(j, "procs", 0), cl, wire_get_f64(j, "cpu_s", 0),
           hosts[0] ? hosts : "-", reason[0] ? " / " : "", reason);
}

/* "ran 12.0 s (stopped time not counted)" from a cluster's run_s; a batch role's row has
 * none (it has no stopped time): from its start to its end, or to now while it runs. */
static void ran(const msgpack_object *j, char *buf, size_t n)
{
    int64_t start = wire_get_i64(j, "started", 0), end = wire_get_i64(j, "finished", 0);
    if (start <= 0) {
        snprintf(buf, n, "not started");
    } else if (wire_get(j, "run_s")) {
        snprintf(buf, n, "ran %.1f s (stopped time not counted)", wire_get_f64(j, "run_s", 0));
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        int64_t to = end > 0 ? end : now;
        snprintf(buf, n, "%s %.1f s", end > 0 ? "ran" : "running for",
                 to > start ? (double)(to - start) / 1000.0 : 0.0);
    }
}

void cli_pjob_print(const msgpack_object *j, bool ranks_too)
{
    char t1[32], t2[32], t3[32], rs[80];
    const msgpack_object *ranks = ranks_too ? wire_get(j, "ranks") : NULL;
    cli_pjob_header();
    cli_pjob_row(j);
    ran(j, rs, sizeof rs);
    printf("\nsubmitted %s, started %s, finished %s; %s\n"
           "limits: memory %llu MiB, disk %llu MiB per host (0 = none), CPU %llu s, wall clock "
           "%llu s (0 = none); queue at submission %llu, demoted %llu time(s)\n",
           cli_time(wire_get_i64(j, "submitted", 0), t1, sizeof t1),
           cli_time(wire_get_i64(j, "started", 0), t2, sizeof t2),
           cli_time(wire_get_i64(j, "finished", 0), t3, sizeof t3), rs,
           (unsigned long long)wire_get_u64(j, "mem_lim", 0),
           (unsigned long long)wire_get_u64(j, "disk_lim", 0),
           (unsigned long long)wire_get_u64(j, "max_cpu_s", 0),
           (unsigned long long)wire_get_u64(j, "limit_s", 0),
           (unsigned long long)wire_get_u64(j, "queue0", 0),
           (unsigned long long)wire_get_u64(j, "demotions", 0));
    if (wire_get_u64(j, "requeues", 0)) /* gridnode requeue (issue 15): Slurm's Restarts */
        printf("requeued %llu times\n", (unsigned long long)wire_get_u64(j, "requeues", 0));
    if (wire_get_bool(j, "network", false)) /* submit --network (issue 23) */
        printf("network: on (submit --network)\n");
    if (wire_get_u64(j, "checkpoint_s", 0)) { /* submit -p --checkpoint-s (issue 26) */
        printf("checkpoints: every %llu s to the cluster, by generation (submit --checkpoint-s); ",
               (unsigned long long)wire_get_u64(j, "checkpoint_s", 0));
        if (wire_get(j, "ckpt_gen"))
            printf("complete: generation %llu (a run again starts from it)\n",
                   (unsigned long long)wire_get_u64(j, "ckpt_gen", 0));
        else
            printf("no generation complete yet\n");
    }
    char con[1100]; /* submit --constraint (issue 27) */
    cli_text(j, "constraint", con, sizeof con);
    if (con[0])
        printf("constraint: %s (only nodes with these features)\n", con);
    if (!ranks)
        return;
    printf("\n%5s  %-14s %-8s %5s %4s %8s %9s %9s  %s\n", "RANK", "HOST", "STATE", "EXIT", "SIG",
           "CPU_S", "RSS_KB", "DISK_KB", "ERROR");
    for (uint32_t i = 0; i < ranks->via.array.size; i++) {
        const msgpack_object *r = &ranks->via.array.ptr[i];
        char host[57], st[9], err[120];
        cli_cell(r, "host", 14, host, sizeof host);
        cli_text(r, "state", st, sizeof st);
        cli_text(r, "error", err, sizeof err);
        printf("%5llu  %s %-8s %5lld %4llu %8.1f %9llu %9llu  %s\n",
               (unsigned long long)wire_get_u64(r, "rank", 0), host, st,
               (long long)wire_get_i64(r, "exit", 0),
               (unsigned long long)wire_get_u64(r, "signal", 0), wire_get_f64(r, "cpu_s", 0),
               (unsigned long long)wire_get_u64(r, "rss_kb", 0),
               (unsigned long long)wire_get_u64(r, "disk_kb", 0), err);
    }
}

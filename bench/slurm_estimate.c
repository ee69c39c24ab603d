/*
 * slurm_estimate.c - the timed part of bench/slurm_site.sh: the Slurm site adapter
 * (roles/meta/slurm/slurm.c) on its own loop, answering N ESTIMATE requests one at a time
 * (each one an `sbatch --test-only` run without blocking the loop), so the figure is
 * the adapter's latency as the spool sees it, beside `sbatch --test-only` alone.
 *
 *   slurm_estimate SLURM_URL N
 *
 * Prints one JSON object: n, p50_ms, p99_ms, mean_ms. Exit 1 when a reply is not STARTS
 * with an estimate, or does not come within 30 s.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "roles/meta/slurm/slurm.h"
#include "wire/wire.h"

struct st {
    struct loop *l;
    struct slurm_site *S;
    int n, done, bad;
    int64_t sent;
    double *ms;
};

static void ask(struct st *s)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_ESTIMATE, (uint64_t)s->done + 1, 3);
    wire_put_u64(&wb, "procs", 1);
    wire_put_u64(&wb, "walltime_s", 60);
    wire_put_u64(&wb, "max", 1);
    s->sent = loop_now_ms();
    slurm_site_request(s->S, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

static void on_reply(void *arg, const void *data, size_t len)
{
    struct st *s = arg;
    struct wire_msg m;
    struct wire_error we;
    if (wire_decode(data, len, false, &m, &we) < 0 || m.type != WT_STARTS ||
        wire_get_i64(m.root, "earliest", -1) < 0) {
        s->bad++;
        if (m.inited || m.desc)
            wire_msg_free(&m);
        loop_stop(s->l);
        return;
    }
    wire_msg_free(&m);
    s->ms[s->done++] = (double)(loop_now_ms() - s->sent);
    if (s->done == s->n)
        loop_stop(s->l);
    else
        ask(s);
}

static void tick(struct loop *l, void *arg)
{
    (void)l;
    struct st *s = arg;
    slurm_site_tick(s->S);
}

static void give_up(struct loop *l, void *arg)
{
    (void)arg;
    loop_stop(l);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: slurm_estimate SLURM_URL N\n");
        return 2;
    }
    struct st s = {0};
    s.n = atoi(argv[2]);
    if (s.n < 1 || s.n > 100000 || !(s.ms = calloc((size_t)s.n, sizeof *s.ms)))
        return 2;
    struct slurm_conf c;
    char err[400];
    if (slurm_url_parse(argv[1], &c, err, sizeof err) < 0) {
        fprintf(stderr, "slurm_estimate: %s\n", err);
        return 2;
    }
    log_init("bench", LOG_LEVEL_WARN);
    s.l = loop_new();
    if (!s.l || !(s.S = slurm_site_new(&c, "bench", "meta", s.l, on_reply, &s, err, sizeof err))) {
        fprintf(stderr, "slurm_estimate: %s\n", err);
        return 1;
    }
    loop_timer(s.l, 50, 1, tick, &s); /* as the spool ticks */
    loop_timer(s.l, 30000 + (int64_t)s.n * 1000, 0, give_up, &s);
    ask(&s);
    loop_run(s.l);
    slurm_site_destroy(&s.S);
    loop_destroy(&s.l);
    if (s.bad || s.done < s.n) {
        fprintf(stderr, "slurm_estimate: %d of %d answered, %d bad\n", s.done, s.n, s.bad);
        return 1;
    }
    double sum = 0;
    for (int i = 0; i < s.n; i++)
        sum += s.ms[i];
    qsort(s.ms, (size_t)s.n, sizeof *s.ms, cmp);
    printf("{\"n\":%d,\"p50_ms\":%.1f,\"p99_ms\":%.1f,\"mean_ms\":%.2f}\n", s.n, s.ms[s.n / 2],
           s.ms[(s.n * 99) / 100 < s.n ? (s.n * 99) / 100 : s.n - 1], sum / s.n);
    free(s.ms);
    return 0;
}

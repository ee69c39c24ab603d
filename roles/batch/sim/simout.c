/*
 * simout.c - writes what the simulator computed (see simout.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/sim/simout.h"

static int closed(FILE *f, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

int simout_csv(const char *path, const struct sim_input *in, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "id,submit,start,end,procs,wait,bsld\n");
    for (size_t i = 0; i < in->njobs; i++) {
        const struct sim_job *j = &in->jobs[i];
        double run = (double)j->run, wait = (double)(j->start - j->submit);
        double sd = (wait + run) / (run > 10 ? run : 10);
        fprintf(f, "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%d,%" PRId64 ",%.4f\n", j->id,
                j->submit, j->start, j->end, j->procs, j->start - j->submit, sd > 1 ? sd : 1);
    }
    return closed(f, path, err, errlen);
}

/* A stable colour per job. */
static void colour(int64_t id, char *buf, size_t len)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ULL;
    snprintf(buf, len, "hsl(%u,%u%%,%u%%)", (unsigned)(h >> 40) % 360,
             45 + (unsigned)(h >> 20) % 40, 45 + (unsigned)(h >> 8) % 20);
}

static void gantt_axes(FILE *f, double W, double H, double L, double T, int64_t from, int64_t to,
                       int64_t procs)
{
    double span = (double)(to - from);
    double step = 3600;
    while (span / step > 12)
        step *= 2;
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n");
    for (double s = 0; s <= span; s += step) {
        double x = L + (W - L - 10) * s / span;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0fh</text>\n",
                x, T, x, H - 30, x, H - 15, s / 3600);
    }
    for (int k = 0; k <= 4; k++) {
        double y = H - 30 - (H - 30 - T) * k / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%lld</text>\n", L - 4, y + 4,
                (long long)(procs * k / 4));
    }
    fprintf(f,
            "<text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" "
            "text-anchor=\"middle\">processors</text>\n</g>\n",
            (H + T) / 2, (H + T) / 2);
}

int simout_gantt(const char *path, const struct sim_input *in, const struct sim_result *r,
                 int64_t procs, int32_t node_procs, int64_t from, int64_t to, char *err,
                 size_t errlen)
{
    if (to <= from) {
        snprintf(err, errlen, "--gantt-range: the end must come after the start");
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    const double W = 1400, H = 700, L = 60, T = 40;
    double xs = (W - L - 10) / (double)(to - from), ys = (H - 30 - T) / (double)procs;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\">Schedule, "
            "%lld processors, t = %lld .. %lld s</text>\n",
            W, H, W, H, L, (long long)procs, (long long)from, (long long)to);
    gantt_axes(f, W, H, L, T, from, to, procs);
    char col[48];
    for (size_t i = 0; i < in->njobs; i++) {
        const struct sim_job *j = &in->jobs[i];
        if (j->start < 0 || j->end < from || j->start >= to || !r->run_cnt)
            continue;
        int64_t a = j->start > from ? j->start : from, b = j->end < to ? j->end : to;
        colour(j->id, col, sizeof col);
        for (size_t k = r->run_off[i]; k < r->run_off[i] + (size_t)r->run_cnt[i]; k++) {
            double y = H - 30 - (double)(r->run_node[k] + r->run_len[k]) * node_procs * ys;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                    "stroke=\"#fff\" stroke-width=\"0.2\"><title>job %" PRId64 ": %d procs, "
                    "submit %" PRId64 ", start %" PRId64 ", end %" PRId64 "</title></rect>\n",
                    L + (double)(a - from) * xs, y, (double)(b - a) * xs,
                    (double)r->run_len[k] * node_procs * ys, col, j->id, j->procs, j->submit,
                    j->start, j->end);
        }
    }
    fprintf(f, "</svg>\n");
    return closed(f, path, err, errlen);
}

void simout_diagnose(FILE *out, struct batch_engine *e, int64_t now, const struct sim_input *in)
{
    size_t n = batch_job_ids(e, true, NULL, 0);
    uint64_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids)
        return;
    batch_job_ids(e, true, ids, n);
    fprintf(out, "diagnose -p at t=%" PRId64 ": %zu pending jobs\n", now, n);
    fprintf(out, "%-10s %12s", "job", "priority");
    for (int f = 0; f < BATCH_NFACTORS; f++)
        fprintf(out, " %10s", batch_factor_name(f));
    fprintf(out, "\n%-10s %12s", "weights", "");
    struct batch_prio p;
    if (n > 0 && batch_priority_explain(e, ids[0], now, &p) == 0)
        for (int f = 0; f < BATCH_NFACTORS; f++)
            fprintf(out, " %10g", p.weight[f]);
    fprintf(out, "\n");
    for (size_t i = 0; i < n; i++) {
        if (batch_priority_explain(e, ids[i], now, &p) < 0)
            continue;
        uint64_t shown =
            in && ids[i] >= 1 && ids[i] <= in->njobs ? (uint64_t)in->jobs[ids[i] - 1].id : ids[i];
        fprintf(out, "%-10" PRIu64 " %12.2f", shown, p.total);
        for (int f = 0; f < BATCH_NFACTORS; f++)
            fprintf(out, " %10.2f", p.value[f]);
        fprintf(out, "\n");
    }
    free(ids);
}

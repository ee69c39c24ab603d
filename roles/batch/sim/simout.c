/*
 * simout.c - writes what the simulator computed (see simout.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/sim/simout.h"
#include "lib/timeaxis.h"

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

#define G_W 1400.0
#define G_H 760.0
#define G_L 60.0
#define G_T 40.0
#define G_B (G_H - 90) /* the bottom of the plot */

/* Grid lines, tick labels and both axis labels. The x axis reads in one unit (lib/timeaxis.h)
 * counted from the first submission of the trace (origin); times are engine units, unit
 * of them per second. */
static void gantt_axes(FILE *f, int64_t from, int64_t to, int64_t origin, int64_t unit,
                       int64_t procs)
{
    double span = (double)(to - from) / (double)unit;
    struct time_axis_unit u = time_axis_unit(span);
    double a = (double)(from - origin) / (double)unit / u.secs;
    double b = (double)(to - origin) / (double)unit / u.secs;
    double step = time_axis_step(b - a, &u, 10), xs = (G_W - G_L - 10) / (b - a);
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n");
    for (double v = ceil(a / step - 1e-9) * step; v <= b + 1e-9 * step; v += step) {
        double x = G_L + (v - a) * xs;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                x, G_T, x, G_B, x, G_B + 15, fabs(v) < step * 1e-6 ? 0 : v);
    }
    for (int k = 0; k <= 4; k++) {
        double y = G_B - (G_B - G_T) * k / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%lld</text>\n", G_L - 4, y + 4,
                (long long)(procs * k / 4));
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time since the first "
            "submission of the trace (%s)</text>\n"
            "<text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" "
            "text-anchor=\"middle\">processors</text>\n</g>\n",
            (G_L + G_W - 10) / 2, G_B + 32, u.name, (G_B + G_T) / 2, (G_B + G_T) / 2);
}

/* The caption under the plot: what a rectangle, its colour and its number mean. */
static void gantt_caption(FILE *f)
{
    fprintf(f,
            "<g font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"hsl(200,60%%,55%%)\"/>"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"hsl(30,60%%,55%%)\"/>"
            "<text x=\"%.0f\" y=\"%.0f\">one colour per job: a job is the rectangles of its "
            "colour, one per run of consecutive nodes it held, from its start to its end; the "
            "number inside is the trace's job id where it fits (every rectangle's tooltip names "
            "its job, processors, and submit, start and end times in the trace)</text></g>\n",
            G_L, G_B + 48, G_L + 14, G_B + 48, G_L + 32, G_B + 58);
}

/* The job id inside the rectangle (x, y, w, h) where the text fits. */
static void gantt_label(FILE *f, double x, double y, double w, double h, int64_t id)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, id);
    if (w < 6.2 * n + 4 || h < 11)
        return;
    fprintf(f,
            "<text x=\"%.2f\" y=\"%.2f\" font-family=\"sans-serif\" font-size=\"10\" "
            "text-anchor=\"middle\" fill=\"#000\" pointer-events=\"none\">%s</text>\n",
            x + w / 2, y + h / 2 + 3.5, buf);
}

/* The job's rectangles (one per run of consecutive nodes, clipped to [from, to)) and its
 * id in the largest one that holds it. */
static void gantt_job(FILE *f, const struct sim_job *j, const struct sim_result *r, size_t i,
                      int32_t node_procs, int64_t from, int64_t to, double xs, double ys)
{
    int64_t a = j->start > from ? j->start : from, b = j->end < to ? j->end : to;
    char col[48];
    colour(j->id, col, sizeof col);
    double bx = 0, by = 0, bw = 0, bh = 0;
    for (size_t k = r->run_off[i]; k < r->run_off[i] + (size_t)r->run_cnt[i]; k++) {
        double y = G_B - (double)(r->run_node[k] + r->run_len[k]) * node_procs * ys;
        double x = G_L + (double)(a - from) * xs, w = (double)(b - a) * xs;
        double h = (double)r->run_len[k] * node_procs * ys;
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                "stroke=\"#fff\" stroke-width=\"0.2\"><title>job %" PRId64 ": %d procs, "
                "submit %" PRId64 ", start %" PRId64 ", end %" PRId64 "</title></rect>\n",
                x, y, w, h, col, j->id, j->procs, j->submit, j->start, j->end);
        if (h > bh) {
            bx = x, by = y, bw = w, bh = h;
        }
    }
    gantt_label(f, bx, by, bw, bh, j->id);
}

int simout_gantt(const char *path, const struct sim_input *in, const struct sim_result *r,
                 int64_t procs, int32_t node_procs, int64_t from, int64_t to, int64_t unit,
                 char *err, size_t errlen)
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
    if (unit < 1)
        unit = 1;
    double xs = (G_W - G_L - 10) / (double)(to - from), ys = (G_B - G_T) / (double)procs;
    size_t shown = 0;
    for (size_t i = 0; i < in->njobs; i++)
        shown += in->jobs[i].start >= 0 && in->jobs[i].end >= from && in->jobs[i].start < to;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\">Schedule of "
            "%lld processors from %g to %g s after the first submission: %zu jobs ran in "
            "it</text>\n",
            G_W, G_H, G_W, G_H, G_L, (long long)procs,
            (double)(from - r->first_submit) / (double)unit,
            (double)(to - r->first_submit) / (double)unit, shown);
    gantt_axes(f, from, to, r->first_submit, unit, procs);
    gantt_caption(f);
    for (size_t i = 0; i < in->njobs; i++) {
        const struct sim_job *j = &in->jobs[i];
        if (j->start < 0 || j->end < from || j->start >= to || !r->run_cnt)
            continue;
        gantt_job(f, j, r, i, node_procs, from, to, xs, ys);
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

/*
 * simout.c - the meta simulator's outputs: the comparison table, the same as JSON, a CSV
 * per job and an SVG bar chart comparing the policies (see simout.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/text.h"
#include "roles/meta/sim/simout.h"

static int closed(FILE *f, const char *path, char *err, size_t len)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, len, "%s: write failed: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static size_t nutil(const struct msim_scenario *s, const struct msim_result *r)
{
    return r->kind == MSIM_POOLED ? 1 : s->nsites;
}

void msimout_table(FILE *out, const struct msim_scenario *s, const struct msim_workload *w,
                   const char *trace, const struct msim_result *r, size_t nr)
{
    fprintf(out, "trace     %s\n", text_esc(trace));
    fprintf(out, "sites    ");
    for (size_t i = 0; i < s->nsites; i++)
        fprintf(out, " %s(%d procs, speed %g)", text_esc(s->sites[i].name),
                s->sites[i].nodes * s->sites[i].node_procs, s->sites[i].speed);
    fprintf(out,
            "\njobs      %zu (%zu at the grid spool, %zu local); %zu refused: wider than "
            "every site\n",
            w->in.njobs, w->ngrid, w->in.njobs - w->ngrid, w->refused);
    if (w->local_traced || w->local_refused)
        fprintf(out,
                "          %zu of the local jobs from the sites' own traces (%zu left out: "
                "wider than their site)\n",
                w->local_traced, w->local_refused);
    fputc('\n', out);
    fprintf(out, "%-15s %12s %10s %14s %10s %6s %8s  %s\n", "POLICY", "MEAN_WAIT_S", "MEAN_BSLD",
            "MEAN_TURNARND_S", "GRID_BSLD", "MOVED", "WALL_S", "UTILIZATION");
    for (size_t k = 0; k < nr; k++) {
        fprintf(out, "%-15s %12.0f %10.2f %14.0f %10.2f %6zu %8.2f ", msim_kind_name(r[k].kind),
                r[k].mean_wait, r[k].mean_bsld, r[k].mean_turnaround, r[k].grid_bsld, r[k].moved,
                r[k].wall_s);
        for (size_t i = 0; i < nutil(s, &r[k]); i++)
            fprintf(out, " %.3f", r[k].util[i]);
        fputc('\n', out);
    }
}

int msimout_json(FILE *out, const struct msim_scenario *s, const struct msim_workload *w,
                 const char *trace, const struct msim_result *r, size_t nr, double wall_s)
{
    json_t *j = json_object(), *sites = json_array(), *runs = json_array();
    if (!j || !sites || !runs)
        goto nomem;
    for (size_t i = 0; i < s->nsites; i++)
        json_array_append_new(sites, json_pack("{s:s,s:i,s:i,s:f}", "name", s->sites[i].name,
                                               "nodes", s->sites[i].nodes, "node_procs",
                                               s->sites[i].node_procs, "speed", s->sites[i].speed));
    for (size_t k = 0; k < nr; k++) {
        json_t *u = json_object();
        for (size_t i = 0; u && i < nutil(s, &r[k]); i++)
            json_object_set_new(u, r[k].kind == MSIM_POOLED ? "pooled" : s->sites[i].name,
                                json_real(r[k].util[i]));
        json_array_append_new(
            runs,
            json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:o*,s:I,s:I,s:I,s:f}", "policy",
                      msim_kind_name(r[k].kind), "mean_wait_s", r[k].mean_wait, "mean_bsld",
                      r[k].mean_bsld, "mean_turnaround_s", r[k].mean_turnaround, "grid_mean_wait_s",
                      r[k].grid_wait, "grid_mean_bsld", r[k].grid_bsld, "utilization", u, "moved",
                      (json_int_t)r[k].moved, "reservations_failed", (json_int_t)r[k].resv_failed,
                      "cycles", (json_int_t)r[k].cycles, "wall_s", r[k].wall_s));
        json_t *last = json_array_get(runs, json_array_size(runs) - 1);
        if (last) {
            json_object_set_new(last, "grid_max_wait_s", json_integer(r[k].grid_wait_max));
            json_object_set_new(last, "local_mean_wait_s", json_real(r[k].local_wait));
            json_object_set_new(last, "local_mean_bsld", json_real(r[k].local_bsld));
            json_object_set_new(last, "local_max_wait_s", json_integer(r[k].local_wait_max));
            json_object_set_new(last, "local_over_2d",
                                json_integer((json_int_t)r[k].local_starved));
            json_object_set_new(last, "guard_released",
                                json_integer((json_int_t)r[k].guard_released));
            json_object_set_new(last, "moved_up", json_integer((json_int_t)r[k].moved_up));
        }
    }
    json_object_set_new(j, "trace", json_string(trace));
    json_object_set_new(j, "sites", sites);
    json_object_set_new(j, "jobs", json_integer((json_int_t)w->in.njobs));
    json_object_set_new(j, "grid_jobs", json_integer((json_int_t)w->ngrid));
    json_object_set_new(j, "refused", json_integer((json_int_t)w->refused));
    json_object_set_new(j, "local_traced", json_integer((json_int_t)w->local_traced));
    json_object_set_new(j, "local_refused", json_integer((json_int_t)w->local_refused));
    json_object_set_new(j, "grid_share", json_real(s->grid_share));
    json_object_set_new(j, "margin_s", json_integer(s->margin));
    json_object_set_new(j, "runs", runs);
    json_object_set_new(j, "wall_s", json_real(wall_s));
    char *txt = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!txt)
        return -1;
    fprintf(out, "%s\n", txt);
    free(txt);
    return 0;
nomem:
    json_decref(j);
    json_decref(sites);
    json_decref(runs);
    return -1;
}

int msimout_csv(const char *path, const struct msim_scenario *s, const struct msim_workload *w,
                const struct msim_result *r, size_t nr, char *err, size_t len)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, len, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "policy,id,grid,site,submit,start,end,procs,run,wait,bsld,moves\n");
    for (size_t k = 0; k < nr; k++)
        for (size_t i = 0; i < w->in.njobs; i++) {
            const struct sim_job *j = &w->in.jobs[i];
            const struct msim_job *m = &r[k].jobs[i];
            const char *site = r[k].kind == MSIM_POOLED ? "pooled" : s->sites[m->site].name;
            fprintf(f,
                    "%s,%" PRId64 ",%d,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%d,%" PRId64
                    ",%" PRId64 ",%.4f,%u\n",
                    msim_kind_name(r[k].kind), j->id, w->grid[i] ? 1 : 0, site, j->submit, m->start,
                    m->end, j->procs, m->run, m->start - j->submit,
                    msim_bsld(m->start - j->submit, m->run), (unsigned)m->moves);
        }
    return closed(f, path, err, len);
}

/* One panel of bars: value(r[k]) per run, scaled to the panel's largest. */
static void panel(FILE *f, double x0, double y0, double w, double h, const char *title,
                  const struct msim_result *r, size_t nr, int which)
{
    double max = 0, v[MSIM_KINDS];
    for (size_t k = 0; k < nr; k++) {
        v[k] = which == 0 ? r[k].mean_bsld : which == 1 ? r[k].mean_wait : r[k].mean_turnaround;
        max = v[k] > max ? v[k] : max;
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n", x0, y0 - 8, title);
    double bw = w / (double)(nr ? nr : 1);
    for (size_t k = 0; k < nr; k++) {
        double bh = max > 0 ? (h - 30) * v[k] / max : 0, x = x0 + bw * (double)k;
        const char *fill = r[k].kind == MSIM_POOLED                ? "#999"
                           : r[k].kind == META_SLURM_M             ? "#c97"
                           : r[k].kind == META_EARLIEST_COMPLETION ? "#3a7"
                                                                   : "#58b";
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%s</text>\n",
                x + 4, y0 + h - 30 - bh, bw - 8, bh, fill, x + bw / 2, y0 + h - 34 - bh,
                which == 0 ? 2 : 0, v[k], x + bw / 2, y0 + h - 16, msim_kind_name(r[k].kind));
    }
}

int msimout_svg(const char *path, const char *trace, const struct msim_result *r, size_t nr,
                char *err, size_t len)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, len, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    double W = 120.0 * (double)(nr ? nr : 1) + 40, H = 3 * 240 + 60;
    char esc[512];
    /* the trace name goes into XML: keep only safe characters */
    snprintf(esc, sizeof esc, "%s", trace);
    for (char *p = esc; *p; p++)
        if (*p == '<' || *p == '>' || *p == '&' || *p == '"')
            *p = '_';
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"20\" y=\"24\" font-size=\"14\">gridnode meta --simulate: %s</text>\n",
            W, H, esc);
    panel(f, 20, 70, W - 40, 220, "mean bounded slowdown (10 s)", r, nr, 0);
    panel(f, 20, 310, W - 40, 220, "mean wait (s)", r, nr, 1);
    panel(f, 20, 550, W - 40, 220, "mean turnaround (s)", r, nr, 2);
    fprintf(f, "</svg>\n");
    return closed(f, path, err, len);
}

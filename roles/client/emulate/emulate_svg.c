/*
 * emulate_svg.c - the emulator's timeline: which project ran on which processor
 * instance over time, one horizontal bar per instance, grey while the host is off,
 * and above them a thin row per project server, dark while it was down; one panel per
 * emulated policy, stacked in a single SVG file, with one time unit on every axis.
 */
#include "roles/client/emulate/emulate_int.h"
#include "lib/timeaxis.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int emulate_timeline_add(struct emu_timeline *tl, double t0, double t1, int row, int project)
{
    if (t0 < tl->from)
        t0 = tl->from;
    if (t1 > tl->to)
        t1 = tl->to;
    if (!(t1 > t0) || row < 0 || row >= tl->nrows)
        return 0;
    if (tl->nseg == tl->cap) {
        size_t cap = tl->cap ? 2 * tl->cap : 1024;
        struct emu_segment *s = realloc(tl->seg, cap * sizeof *s);
        if (!s)
            return -1;
        tl->seg = s;
        tl->cap = cap;
    }
    tl->seg[tl->nseg++] = (struct emu_segment){t0, t1, row, project};
    return 0;
}

int emulate_timeline_down(struct emu_timeline *tl, double t0, double t1, int project)
{
    t0 = fmax(t0, tl->from);
    t1 = fmin(t1, tl->to);
    if (!(t1 > t0))
        return 0;
    for (size_t i = tl->nseg; i-- > 0;) { /* the project's last down period */
        struct emu_segment *s = &tl->seg[i];
        if (s->row != EMU_ROW_SERVER || s->project != project)
            continue;
        if (s->t1 >= t0) {
            s->t1 = fmax(s->t1, t1);
            return 0;
        }
        break;
    }
    if (tl->nseg == tl->cap) {
        size_t cap = tl->cap ? 2 * tl->cap : 1024;
        struct emu_segment *s = realloc(tl->seg, cap * sizeof *s);
        if (!s)
            return -1;
        tl->seg = s;
        tl->cap = cap;
    }
    tl->seg[tl->nseg++] = (struct emu_segment){t0, t1, EMU_ROW_SERVER, project};
    return 0;
}

void emulate_timeline_free(struct emu_timeline *tl)
{
    free(tl->seg);
    tl->seg = NULL;
    tl->nseg = tl->cap = 0;
}

static const char *const palette[] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
    "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#9c9ede",
};
#define NPALETTE (sizeof palette / sizeof palette[0])

#define LEFT 90
#define WIDTH 1100
#define ROW_H 12
#define SROW_H 9   /* a project server's row */
#define PANEL_X 64 /* a panel's height beyond its rows: title, axis, axis label */
#define DOWN_COLOR "#222"

/* The panel's height. */
static double panel_height(const struct emu_scenario *sc, const struct emu_timeline *tl)
{
    return sc->nprojects * SROW_H + 4 + tl->nrows * ROW_H + PANEL_X;
}

/* The x axis under a panel whose rows end at y: ticks in one unit, and its label. */
static void panel_axis(FILE *f, const struct emu_timeline *tl, double y)
{
    double span = tl->to - tl->from, scale = WIDTH / span;
    struct time_axis_unit u = time_axis_unit(span);
    double step = time_axis_step(span / u.secs, &u, 12) * u.secs;
    for (double t = ceil(tl->from / step - 1e-9) * step; t <= tl->to + 1e-6 * step; t += step)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%g"
                "</text>\n",
                LEFT + (t - tl->from) * scale, y + 12, fabs(t) < 1e-6 * step ? 0 : t / u.secs);
    fprintf(f,
            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">time since the "
            "start of the emulation (%s)</text>\n",
            LEFT + WIDTH / 2.0, y + 26, u.name);
}

static void panel(FILE *f, const struct emu_scenario *sc, const struct emu_timeline *tl,
                  const char *title, double y0)
{
    double span = tl->to - tl->from, scale = WIDTH / span;
    fprintf(f, "<text x=\"4\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n", y0 + 14, title);
    double stop = y0 + 22, top = stop + sc->nprojects * SROW_H + 4;
    for (int p = 0; p < sc->nprojects; p++)
        fprintf(f, "<text x=\"4\" y=\"%.0f\" font-size=\"8\">%s server</text>\n",
                stop + p * SROW_H + 7, sc->projects[p].name);
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#e8f3e8\"/>\n", LEFT,
            stop, WIDTH, sc->nprojects * SROW_H);
    for (int row = 0; row < tl->nrows; row++)
        fprintf(f, "<text x=\"4\" y=\"%.0f\" font-size=\"10\">%s</text>\n", top + row * ROW_H + 10,
                tl->row_names[row]);
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT,
            top, WIDTH, tl->nrows * ROW_H);
    for (size_t i = 0; i < tl->nseg; i++) {
        const struct emu_segment *s = &tl->seg[i];
        double x = LEFT + (s->t0 - tl->from) * scale, w = fmax((s->t1 - s->t0) * scale, 0.3);
        if (s->row == EMU_ROW_SERVER) {
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                    "<title>%s server down %.0f-%.0f s</title></rect>\n",
                    x, stop + s->project * SROW_H + 1, w, SROW_H - 2, DOWN_COLOR,
                    sc->projects[s->project].name, s->t0, s->t1);
            continue;
        }
        const char *color = s->project < 0 ? "#b0b0b0" : palette[s->project % NPALETTE];
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                "<title>%s %.0f-%.0f s</title></rect>\n",
                x, top + s->row * ROW_H + 1, w, ROW_H - 2, color,
                s->project < 0 ? "host off" : sc->projects[s->project].name, s->t0, s->t1);
    }
    panel_axis(f, tl, top + tl->nrows * ROW_H);
}

int emulate_svg_write(const char *path, const struct emu_scenario *sc,
                      struct emu_timeline *const *tls, const char *const *titles, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double height = 30;
    for (int i = 0; i < n; i++)
        height += panel_height(sc, tls[i]);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            LEFT + WIDTH + 10, height);
    double y = 0;
    for (int i = 0; i < n; i++) {
        panel(f, sc, tls[i], titles[i], y);
        y += panel_height(sc, tls[i]);
    }
    double x = 4;
    for (int p = 0; p < sc->nprojects; p++) {
        fprintf(f,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">%s</text>\n",
                x, y + 2, palette[p % NPALETTE], x + 13, y + 11, sc->projects[p].name);
        x += 20 + 7 * (double)strlen(sc->projects[p].name);
    }
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"#b0b0b0\"/>"
            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">host off</text>\n"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">server down (its row above the "
            "processors: scheduled outages and random unavailability)</text>\n</svg>\n",
            x, y + 2, x + 13, y + 11, x + 70, y + 2, DOWN_COLOR, x + 83, y + 11);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        if (!errno)
            errno = EIO;
        return -1;
    }
    return 0;
}

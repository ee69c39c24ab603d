/*
 * emulate_svg.c - the emulator's timeline: which project ran on which processor
 * instance over time, one horizontal bar per instance, grey while the host is off;
 * one panel per emulated policy, stacked in a single SVG file.
 */
#include "roles/client/emulate/emulate_int.h"

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

/* A tick step giving about 10 ticks over span seconds. */
static double tick_step(double span)
{
    static const double steps[] = {1,    5,    10,    30,    60,    300,    600,    1800,
                                   3600, 7200, 21600, 43200, 86400, 172800, 604800, 2592000};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span / steps[i] <= 12)
            return steps[i];
    return 2592000 * ceil(span / 2592000 / 12);
}

static void fmt_time(double t, char *buf, size_t n)
{
    if (t >= 86400 && fmod(t, 3600) == 0)
        snprintf(buf, n, "%gd%gh", floor(t / 86400), fmod(t, 86400) / 3600);
    else if (t >= 3600)
        snprintf(buf, n, "%gh", t / 3600);
    else
        snprintf(buf, n, "%gs", t);
}

#define LEFT 90
#define WIDTH 1100
#define ROW_H 12

static void panel(FILE *f, const struct emu_scenario *sc, const struct emu_timeline *tl,
                  const char *title, double y0)
{
    double span = tl->to - tl->from, scale = WIDTH / span;
    fprintf(f, "<text x=\"4\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n", y0 + 14, title);
    double top = y0 + 22;
    for (int row = 0; row < tl->nrows; row++)
        fprintf(f, "<text x=\"4\" y=\"%.0f\" font-size=\"10\">%s</text>\n", top + row * ROW_H + 10,
                tl->row_names[row]);
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT,
            top, WIDTH, tl->nrows * ROW_H);
    for (size_t i = 0; i < tl->nseg; i++) {
        const struct emu_segment *s = &tl->seg[i];
        const char *color = s->project < 0 ? "#b0b0b0" : palette[s->project % NPALETTE];
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                "<title>%s %.0f-%.0f s</title></rect>\n",
                LEFT + (s->t0 - tl->from) * scale, top + s->row * ROW_H + 1,
                fmax((s->t1 - s->t0) * scale, 0.3), ROW_H - 2, color,
                s->project < 0 ? "host off" : sc->projects[s->project].name, s->t0, s->t1);
    }
    double axis = top + tl->nrows * ROW_H + 12, step = tick_step(span);
    for (double t = ceil(tl->from / step) * step; t <= tl->to + 1e-9; t += step) {
        char buf[32];
        fmt_time(t, buf, sizeof buf);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%s"
                "</text>\n",
                LEFT + (t - tl->from) * scale, axis, buf);
    }
}

int emulate_svg_write(const char *path, const struct emu_scenario *sc,
                      struct emu_timeline *const *tls, const char *const *titles, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double height = 30;
    for (int i = 0; i < n; i++)
        height += tls[i]->nrows * ROW_H + 50;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            LEFT + WIDTH + 10, height);
    double y = 0;
    for (int i = 0; i < n; i++) {
        panel(f, sc, tls[i], titles[i], y);
        y += tls[i]->nrows * ROW_H + 50;
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
            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">host off</text>\n</svg>\n",
            x, y + 2, x + 13, y + 11);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        if (!errno)
            errno = EIO;
        return -1;
    }
    return 0;
}

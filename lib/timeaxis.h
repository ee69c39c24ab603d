/*
 * timeaxis.h - the time axis of the SVG pictures (the batch simulator's Gantt chart,
 * the client emulator's timeline): one unit for the whole axis, chosen from its span,
 * and a tick step that keeps the labels apart.
 */
#ifndef GRIDNODE_TIMEAXIS_H
#define GRIDNODE_TIMEAXIS_H

struct time_axis_unit {
    const char *name; /* "s", "min", "h" or "d" */
    double secs;      /* seconds per unit */
};

/* The unit of an axis spanning span seconds: s up to 3 minutes, min up to 3 hours, h
 * up to 4 days, d beyond. */
struct time_axis_unit time_axis_unit(double span);
/* A tick step, in units, giving at most max_ticks ticks over span units: hours by 1, 2,
 * 3, 6, 12 or 24, else 1, 2 or 5 times a power of ten. */
double time_axis_step(double span, const struct time_axis_unit *u, int max_ticks);

#endif

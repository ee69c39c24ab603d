/*
 * timeaxis.c - the SVG pictures' time axis (see timeaxis.h).
 */
#include "lib/timeaxis.h"

#include <math.h>
#include <stddef.h>

struct time_axis_unit time_axis_unit(double span)
{
    if (span <= 180)
        return (struct time_axis_unit){"s", 1};
    if (span <= 3 * 3600)
        return (struct time_axis_unit){"min", 60};
    if (span <= 4 * 86400)
        return (struct time_axis_unit){"h", 3600};
    return (struct time_axis_unit){"d", 86400};
}

double time_axis_step(double span, const struct time_axis_unit *u, int max_ticks)
{
    static const double hours[] = {1, 2, 3, 6, 12, 24}, mult[] = {1, 2, 5};
    for (size_t k = 0; u->secs == 3600 && k < sizeof hours / sizeof hours[0]; k++)
        if (span / hours[k] <= max_ticks)
            return hours[k];
    for (double p = pow(10, floor(log10(span / max_ticks))); p < 1e300; p *= 10)
        for (int m = 0; m < 3; m++)
            if (span / (mult[m] * p) <= max_ticks)
                return mult[m] * p;
    return span;
}

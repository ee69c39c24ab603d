/*
 * prefetch.c - how many tasks the live client asks for (see prefetch.h).
 */
#include "roles/client/prefetch.h"

#include <math.h>
#include <stddef.h>

#define PREFETCH_ALPHA 0.3 /* weight of a new duration sample */

void prefetch_observe(struct prefetch *p, uint64_t job, double wall_s)
{
    if (!(wall_s > 0) || !isfinite(wall_s))
        return;
    struct prefetch_job *e = NULL, *old = &p->jobs[0];
    for (size_t i = 0; i < PREFETCH_JOBS && !e; i++) {
        struct prefetch_job *j = &p->jobs[i];
        if (j->n > 0 && j->job == job)
            e = j;
        else if (old->n > 0 && (j->n == 0 || j->used < old->used))
            old = j; /* a free entry, else the least recently used */
    }
    if (!e) {
        e = old;
        e->job = job;
        e->n = 0;
    }
    e->s = e->n == 0 ? wall_s : (1 - PREFETCH_ALPHA) * e->s + PREFETCH_ALPHA * wall_s;
    if (e->n < UINT32_MAX)
        e->n++;
    e->used = ++p->clock;
}

double prefetch_job_s(const struct prefetch *p, uint64_t job)
{
    for (size_t i = 0; i < PREFETCH_JOBS; i++)
        if (p->jobs[i].n > 0 && p->jobs[i].job == job)
            return p->jobs[i].s;
    return 0;
}

double prefetch_left_s(double est_s, double elapsed_s)
{
    if (!(est_s > 0))
        return -1;
    if (elapsed_s < 0)
        elapsed_s = 0;
    if (elapsed_s <= est_s)
        return est_s - elapsed_s;
    return elapsed_s <= 1.5 * est_s ? 0 : elapsed_s;
}

double prefetch_cover_s(double srtt_ms, double rttvar_ms, uint32_t samples)
{
    if (samples == 0 || !(srtt_ms >= 0) || !(rttvar_ms >= 0))
        return 0;
    return (2 * srtt_ms + 4 * rttvar_ms) / 1000.0;
}

/* Tasks one slot starts within `window` seconds when each takes next_s: at least 1. */
static double per_slot(double window, double next_s, double max)
{
    double k = ceil(window / next_s);
    return k < 1 ? 1 : k > max ? max : k;
}

uint32_t prefetch_want(const struct prefetch_need *n)
{
    uint32_t held = n->running + n->queued;
    if (n->slots == 0 || held >= n->max_held)
        return 0;
    double room = (double)(n->max_held - held);
    int known = n->next_s > 0 && n->cover_s > 0 && isfinite(n->next_s) && isfinite(n->cover_s);
    double need = 0;
    uint32_t free = n->running < n->slots ? n->slots - n->running : 0;
    need += (double)free * (known ? per_slot(n->cover_s, n->next_s, n->max_held) : 1);
    for (uint32_t i = 0; known && n->left_s && i < n->running && need < n->max_held; i++) {
        double left = n->left_s[i];
        if (left >= 0 && left < n->cover_s)
            need += per_slot(n->cover_s - left, n->next_s, n->max_held);
    }
    double want = need - (double)n->queued;
    if (want <= 0)
        return 0;
    return (uint32_t)(want < room ? want : room);
}

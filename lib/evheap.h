/*
 * evheap.h - a binary min-heap of (time, job index) events, shared by the simulators
 * (roles/batch/sim/sim.c, roles/meta/sim/sim.c). Header-only (static inline): it sits on the
 * replays' hot path.
 */
#ifndef GRIDNODE_EVHEAP_H
#define GRIDNODE_EVHEAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct ev {
    int64_t t;
    size_t job;
};
struct heap {
    struct ev *v;
    size_t n, cap;
};

/* Adds x; 0, or -1 when out of memory (the heap is unchanged). */
static inline int heap_push(struct heap *h, struct ev x)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 1024;
        void *p = realloc(h->v, nc * sizeof *h->v);
        if (!p)
            return -1;
        h->v = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    for (; i > 0 && h->v[(i - 1) / 2].t > x.t; i = (i - 1) / 2)
        h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = x;
    return 0;
}

/* Removes and returns the earliest event; the heap must not be empty. */
static inline struct ev heap_pop(struct heap *h)
{
    struct ev top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1].t < h->v[c].t)
            c++;
        if (h->v[c].t >= x.t)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = x;
    return top;
}

#endif

/*
 * idmap.h - a multimap from 64-bit ids to pointers, each pointer at most once per id
 * (e.g. a job id to the held requests naming it: daemon/endwait.c), with one mark per id.
 * Open addressing with linear probing, at most half full, deletion without tombstones;
 * an id's pointers are a small array. Lookups, additions and removals take O(1) expected
 * time plus the id's number of pointers.
 */
#ifndef GRIDNODE_IDMAP_H
#define GRIDNODE_IDMAP_H

#include <stdbool.h>
#include <stdint.h>

struct idmap_slot; /* idmap.c */

/* Zero-initialised: an empty map. */
struct idmap {
    struct idmap_slot *s;
    uint32_t nused, cap; /* cap: 0 or a power of two */
};

/* p under id (nothing when it is there already): 0, or -1 when out of memory (the map
 * is as it was). p must not be NULL. */
int idmap_add(struct idmap *m, uint64_t id, void *p);
/* p no longer under id (nothing when it is not); an id left with no pointer is gone,
 * its mark with it. */
void idmap_del(struct idmap *m, uint64_t id, const void *p);
/* The pointers under id and their number (NULL, 0: none). Valid until the next
 * idmap_add or idmap_del. */
void *const *idmap_get(const struct idmap *m, uint64_t id, uint32_t *n);
/* Whether id is in the map. */
bool idmap_has(const struct idmap *m, uint64_t id);
/* Sets id's mark: true when id is in the map and was not marked. */
bool idmap_mark(struct idmap *m, uint64_t id);
/* Clears id's mark (nothing when id is not in the map). */
void idmap_unmark(struct idmap *m, uint64_t id);
/* Frees the map's memory; it is empty again. */
void idmap_free(struct idmap *m);

#endif

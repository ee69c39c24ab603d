/*
 * idmap.c - a multimap from 64-bit ids to pointers (idmap.h).
 */
#include <stdlib.h>

#include "lib/idmap.h"

/* One id's pointers (v[0..n)); n == 0: a free slot (all zeros). */
struct idmap_slot {
    uint64_t id;
    void **v;
    uint32_t n, cap;
    bool mark;
};

static uint32_t home(const struct idmap *m, uint64_t id)
{
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

static struct idmap_slot *find(const struct idmap *m, uint64_t id)
{
    for (uint32_t i = m->cap ? home(m, id) : 0; m->cap && m->s[i].n; i = (i + 1) & (m->cap - 1))
        if (m->s[i].id == id)
            return &m->s[i];
    return NULL;
}

/* Doubles the table (or makes the first): 0, or -1 (no memory; the table is as it was). */
static int grow(struct idmap *m)
{
    uint32_t oc = m->cap, nc = oc ? oc * 2 : 64;
    struct idmap_slot *old = m->s, *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    m->s = ns;
    m->cap = nc;
    for (uint32_t i = 0; i < oc; i++) {
        if (!old[i].n)
            continue;
        uint32_t k = home(m, old[i].id);
        while (ns[k].n)
            k = (k + 1) & (nc - 1);
        ns[k] = old[i];
    }
    free(old);
    return 0;
}

int idmap_add(struct idmap *m, uint64_t id, void *p)
{
    struct idmap_slot *s = find(m, id);
    for (uint32_t i = 0; s && i < s->n; i++)
        if (s->v[i] == p)
            return 0;
    if (!s) {
        if ((m->nused + 1) * 2 > m->cap && grow(m) < 0)
            return -1;
        uint32_t i = home(m, id);
        while (m->s[i].n)
            i = (i + 1) & (m->cap - 1);
        s = &m->s[i]; /* free: all zeros, and stays so until its first pointer */
    }
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 2;
        void *v = realloc(s->v, nc * sizeof *s->v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = nc;
    }
    if (!s->n) {
        s->id = id;
        m->nused++;
    }
    s->v[s->n++] = p;
    return 0;
}

/* Frees slot i and moves back the slots after it whose probe passed it (linear
 * probing's deletion without tombstones). */
static void slot_free(struct idmap *m, uint32_t i)
{
    free(m->s[i].v);
    m->s[i] = (struct idmap_slot){0};
    m->nused--;
    for (uint32_t j = (i + 1) & (m->cap - 1); m->s[j].n; j = (j + 1) & (m->cap - 1)) {
        uint32_t k = home(m, m->s[j].id);
        /* j stays unless its home lies cyclically outside (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        m->s[i] = m->s[j];
        m->s[j] = (struct idmap_slot){0};
        i = j;
    }
}

void idmap_del(struct idmap *m, uint64_t id, const void *p)
{
    struct idmap_slot *s = find(m, id);
    for (uint32_t i = 0; s && i < s->n; i++)
        if (s->v[i] == p) {
            s->v[i] = s->v[--s->n];
            if (!s->n)
                slot_free(m, (uint32_t)(s - m->s));
            return;
        }
}

void *const *idmap_get(const struct idmap *m, uint64_t id, uint32_t *n)
{
    struct idmap_slot *s = find(m, id);
    *n = s ? s->n : 0;
    return s ? s->v : NULL;
}

bool idmap_has(const struct idmap *m, uint64_t id)
{
    return find(m, id) != NULL;
}

bool idmap_mark(struct idmap *m, uint64_t id)
{
    struct idmap_slot *s = find(m, id);
    if (!s || s->mark)
        return false;
    s->mark = true;
    return true;
}

void idmap_unmark(struct idmap *m, uint64_t id)
{
    struct idmap_slot *s = find(m, id);
    if (s)
        s->mark = false;
}

void idmap_free(struct idmap *m)
{
    for (uint32_t i = 0; i < m->cap; i++)
        free(m->s[i].v);
    free(m->s);
    *m = (struct idmap){0};
}

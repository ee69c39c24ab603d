/*
 * maps.c - the small containers the engine needs: a string -> int map, a
 * uint64 -> int map (job ids) and a growable-array helper. Open addressing with
 * linear probing, capacity a power of two, load factor at most 1/2.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roles/batch/engine/internal.h"

int bs_vec_reserve(void **arr, int32_t *cap, int32_t n, size_t sz)
{
    if (n <= *cap)
        return 0;
    int64_t nc = *cap ? *cap : 8;
    while (nc < n)
        nc *= 2;
    if (nc > INT32_MAX) {
        errno = ENOMEM;
        return -1;
    }
    void *p = realloc(*arr, (size_t)nc * sz);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    *arr = p;
    *cap = (int32_t)nc;
    return 0;
}

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static uint32_t id_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

int32_t bs_strmap_get(const struct strmap *m, const char *k)
{
    if (m->cap == 0)
        return -1;
    for (uint32_t i = str_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], k) == 0)
            return m->vals[i];
    }
}

/* Rehashes m into a table of ncap slots; 0 or -1 (ENOMEM, m unchanged). */
static int strmap_grow(struct strmap *m, uint32_t ncap)
{
    char **nk = calloc(ncap, sizeof *nk);
    int32_t *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        errno = ENOMEM;
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        uint32_t j = str_hash(m->keys[i]) & (ncap - 1);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

int bs_strmap_put(struct strmap *m, const char *k, int32_t v)
{
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m, m->cap ? m->cap * 2 : 16) < 0)
        return -1;
    uint32_t i = str_hash(k) & (m->cap - 1);
    for (; m->keys[i]; i = (i + 1) & (m->cap - 1)) {
        if (strcmp(m->keys[i], k) == 0) {
            m->vals[i] = v;
            return 0;
        }
    }
    if (!(m->keys[i] = strdup(k))) {
        errno = ENOMEM;
        return -1;
    }
    m->vals[i] = v;
    m->n++;
    return 0;
}

bool bs_strmap_set(struct strmap *m, const char *k, int32_t v)
{
    if (m->cap == 0)
        return false;
    for (uint32_t i = str_hash(k) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1))
        if (strcmp(m->keys[i], k) == 0) {
            m->vals[i] = v;
            return true;
        }
    return false;
}

void bs_strmap_free(struct strmap *m)
{
    for (uint32_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int32_t bs_idmap_get(const struct idmap *m, uint64_t k)
{
    if (m->cap == 0)
        return -1;
    for (uint32_t i = id_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->vals[i] < 0)
            return -1;
        if (m->keys[i] == k)
            return m->vals[i];
    }
}

/* Rehashes m into ncap slots; 0 or -1 (ENOMEM, m unchanged). */
static int idmap_grow(struct idmap *m, uint32_t ncap)
{
    uint64_t *nk = malloc(ncap * sizeof *nk);
    int32_t *nv = malloc(ncap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        errno = ENOMEM;
        return -1;
    }
    for (uint32_t i = 0; i < ncap; i++)
        nv[i] = -1;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->vals[i] < 0)
            continue;
        uint32_t j = id_hash(m->keys[i]) & (ncap - 1);
        while (nv[j] >= 0)
            j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

int bs_idmap_put(struct idmap *m, uint64_t k, int32_t v)
{
    if ((m->n + 1) * 2 > m->cap && idmap_grow(m, m->cap ? m->cap * 2 : 64) < 0)
        return -1;
    uint32_t i = id_hash(k) & (m->cap - 1);
    for (; m->vals[i] >= 0; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == k) {
            m->vals[i] = v;
            return 0;
        }
    }
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
    return 0;
}

void bs_idmap_del(struct idmap *m, uint64_t k)
{
    if (m->cap == 0)
        return;
    uint32_t mask = m->cap - 1, i = id_hash(k) & mask;
    for (; m->vals[i] >= 0; i = (i + 1) & mask)
        if (m->keys[i] == k)
            break;
    if (m->vals[i] < 0)
        return;
    m->vals[i] = -1;
    m->n--;
    /* Backward-shift: move later entries of the run into the hole when their
     * home slot does not lie (cyclically) between the hole and them. */
    for (uint32_t j = (i + 1) & mask; m->vals[j] >= 0; j = (j + 1) & mask) {
        uint32_t home = id_hash(m->keys[j]) & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->vals[j] = -1;
        i = j;
    }
}

void bs_idmap_free(struct idmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/*
 * purgeq.c - purged jobs whose records are still being deleted (purgeq.h).
 */
#include "daemon/purgeq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "store/store.h"

#define MARK "purge/"

static int push(struct purgeq *q, uint64_t id)
{
    if (q->n == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 16;
        uint64_t *p = realloc(q->ids, cap * sizeof *p);
        if (!p)
            return -1;
        q->ids = p;
        q->cap = cap;
    }
    q->ids[q->n++] = id;
    return 0;
}

static int mark_key(char *buf, size_t len, uint64_t id)
{
    return snprintf(buf, len, MARK "%020" PRIu64, id);
}

int purgeq_mark(struct purgeq *q, struct store *s, int t_meta, uint64_t id)
{
    char mk[64];
    int ml = mark_key(mk, sizeof mk, id);
    return store_put(s, t_meta, mk, (size_t)ml, "", 0) < 0 || push(q, id) < 0 ? -1 : 0;
}

static int load_mark(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    char text[64];
    (void)val;
    (void)vlen;
    if (klen <= strlen(MARK) || klen >= sizeof text || memcmp(key, MARK, strlen(MARK)))
        return 1; /* past the markers (keys are in order) */
    memcpy(text, key, klen);
    text[klen] = '\0';
    return push(arg, strtoull(text + strlen(MARK), NULL, 10)) < 0 ? -1 : 0;
}

int purgeq_load(struct purgeq *q, struct store *s, int t_meta)
{
    return store_iter(s, t_meta, MARK, strlen(MARK), load_mark, q);
}

void purgeq_free(struct purgeq *q)
{
    free(q->ids);
    q->ids = NULL;
    q->n = q->cap = 0;
}

bool purgeq_has(const struct purgeq *q, uint64_t id)
{
    return ids_has(q->ids, q->n, id);
}

struct sweep {
    struct store *s;
    int table;
    uint64_t id;
    uint32_t budget;
    bool more; /* stopped on the budget */
};

static int del_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct sweep *w = arg;
    (void)val;
    (void)vlen;
    if (klen < 8 || store_key_get_u64(key) != w->id)
        return 1;
    if (w->budget == 0) {
        w->more = true;
        return 1;
    }
    w->budget--;
    return store_del(w->s, w->table, key, klen) < 0 ? -1 : 0;
}

int purgeq_step(struct purgeq *q, struct store *s, int t_meta, const int *tables, size_t ntables,
                uint32_t budget)
{
    struct sweep w = {s, 0, 0, budget, false};
    while (q->n > 0 && w.budget > 0) {
        uint8_t from[8];
        w.id = q->ids[q->n - 1];
        store_key_u64(from, w.id);
        for (size_t t = 0; t < ntables && !w.more; t++) {
            w.table = tables[t];
            if (w.table >= 0 && store_iter(s, w.table, from, 8, del_one, &w) < 0)
                return -1;
        }
        if (w.more)
            return 0; /* the rest in the next turns */
        char mk[64];
        int ml = mark_key(mk, sizeof mk, w.id);
        if (store_del(s, t_meta, mk, (size_t)ml) < 0)
            return -1;
        q->n--;
        log_debug("job %" PRIu64 ": every record purged", w.id);
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint32_t ids_sort_unique(uint64_t *ids, uint32_t n)
{
    uint32_t k = 0;
    if (n)
        qsort(ids, n, sizeof *ids, cmp_u64);
    for (uint32_t i = 0; i < n; i++)
        if (k == 0 || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    return k;
}

bool ids_has(const uint64_t *ids, uint32_t n, uint64_t id)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id;
}

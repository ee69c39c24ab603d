/*
 * test_idmap.c - lib/idmap.c against a plain model (a list of (id, pointer) pairs and a
 * set of marked ids) over many random additions, removals and marks: ids from a small
 * range (long probe runs, removals moving slots back) and from the whole 64-bit range,
 * each pointer at most once per id, marks gone with their id, growth from empty.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "lib/idmap.h"

#define PAIRS_MAX 4096
#define PTRS 8

static char ptrs[PTRS]; /* the pointers stored: &ptrs[k] */

struct model {
    uint64_t id[PAIRS_MAX];
    int p[PAIRS_MAX];
    uint32_t n;
    uint64_t marked[PAIRS_MAX];
    uint32_t nmarked;
};

static int model_find(const struct model *md, uint64_t id, int p)
{
    for (uint32_t i = 0; i < md->n; i++)
        if (md->id[i] == id && md->p[i] == p)
            return (int)i;
    return -1;
}

static uint32_t model_count(const struct model *md, uint64_t id)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < md->n; i++)
        c += md->id[i] == id;
    return c;
}

static int model_marked(const struct model *md, uint64_t id)
{
    for (uint32_t i = 0; i < md->nmarked; i++)
        if (md->marked[i] == id)
            return (int)i;
    return -1;
}

/* The map's pointers under id are the model's, each once. */
static void check_id(const struct idmap *m, const struct model *md, uint64_t id)
{
    uint32_t n;
    void *const *v = idmap_get(m, id, &n);
    assert_int_equal(n, model_count(md, id));
    assert_int_equal(idmap_has(m, id), n > 0);
    for (uint32_t i = 0; i < n; i++) {
        int k = (int)((char *)v[i] - ptrs);
        assert_true(k >= 0 && k < PTRS);
        assert_true(model_find(md, id, k) >= 0);
        for (uint32_t j = 0; j < i; j++)
            assert_ptr_not_equal(v[i], v[j]);
    }
}

static uint64_t pick_id(const struct model *md, unsigned *seed, uint64_t range)
{
    if (md->n && rand_r(seed) % 2) /* an id in the map: removals and repeats */
        return md->id[(uint32_t)rand_r(seed) % md->n];
    if (!range) /* the whole range */
        return ((uint64_t)rand_r(seed) << 40) ^ ((uint64_t)rand_r(seed) << 20) ^
               (uint64_t)rand_r(seed);
    return (uint64_t)rand_r(seed) % range;
}

static void one_op(struct idmap *m, struct model *md, unsigned *seed, uint64_t range)
{
    uint64_t id = pick_id(md, seed, range);
    int p = rand_r(seed) % PTRS, op = rand_r(seed) % 10, at;
    if (op < 5 && md->n < PAIRS_MAX) { /* add */
        assert_int_equal(idmap_add(m, id, &ptrs[p]), 0);
        if (model_find(md, id, p) < 0) {
            md->id[md->n] = id;
            md->p[md->n++] = p;
        }
    } else if (op < 8) { /* remove (maybe absent) */
        idmap_del(m, id, &ptrs[p]);
        if ((at = model_find(md, id, p)) >= 0) {
            md->id[at] = md->id[--md->n];
            md->p[at] = md->p[md->n];
        }
        if (!model_count(md, id) && (at = model_marked(md, id)) >= 0)
            md->marked[at] = md->marked[--md->nmarked]; /* gone with its id */
    } else if (op < 9) {                                /* mark */
        bool want = model_count(md, id) && model_marked(md, id) < 0;
        assert_int_equal(idmap_mark(m, id), want);
        if (want)
            md->marked[md->nmarked++] = id;
    } else { /* unmark */
        idmap_unmark(m, id);
        if ((at = model_marked(md, id)) >= 0)
            md->marked[at] = md->marked[--md->nmarked];
    }
    check_id(m, md, id);
}

static void run(uint64_t range, unsigned seed, int ops)
{
    static struct model md;
    struct idmap m = {0};
    md.n = md.nmarked = 0;
    printf("idmap: seed %u, range %llu, %d operations\n", seed, (unsigned long long)range, ops);
    for (int i = 0; i < ops; i++) {
        one_op(&m, &md, &seed, range);
        if (i % 4999 == 0) /* every id of the model, and marks the model has */
            for (uint32_t k = 0; k < md.n; k++) {
                check_id(&m, &md, md.id[k]);
                bool was = model_marked(&md, md.id[k]) >= 0;
                if (!was) { /* marking an unmarked id says so; undone */
                    assert_true(idmap_mark(&m, md.id[k]));
                    idmap_unmark(&m, md.id[k]);
                } else {
                    assert_false(idmap_mark(&m, md.id[k]));
                }
            }
    }
    /* empty it: every id gone */
    while (md.n) {
        uint64_t id = md.id[md.n - 1];
        idmap_del(&m, id, &ptrs[md.p[--md.n]]);
        check_id(&m, &md, id);
    }
    assert_int_equal(m.nused, 0);
    idmap_free(&m);
}

static unsigned seed_of(void)
{
    const char *s = getenv("IDMAP_SEED");
    return s ? (unsigned)strtoul(s, NULL, 10) : 12345u;
}

static void test_small_ids(void **state)
{
    (void)state;
    run(300, seed_of(), 40000); /* many collisions, long runs */
}

static void test_any_ids(void **state)
{
    (void)state;
    run(0, seed_of() + 1, 20000);
}

static void test_empty_map(void **state)
{
    (void)state;
    struct idmap m = {0};
    uint32_t n = 7;
    assert_null(idmap_get(&m, 5, &n));
    assert_int_equal(n, 0);
    assert_false(idmap_has(&m, 5));
    assert_false(idmap_mark(&m, 5));
    idmap_unmark(&m, 5);
    idmap_del(&m, 5, &ptrs[0]);
    idmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_map),
        cmocka_unit_test(test_small_ids),
        cmocka_unit_test(test_any_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

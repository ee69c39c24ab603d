/*
 * test_batch_part.c - the partition kept across regroupings (part.c): reservations
 * created and released in random order (by tasks and by node names, some ending on
 * their own at a cycle, nodes going down and up, jobs running) must give, after every
 * step, the groups a plain reference computes from scratch: every up node keyed by
 * (class, features, capacity, live reservations holding it), the keys in order, the
 * nodes of a key in ascending index (a group's membership bits). The same state
 * regrouped from scratch (the partition dropped) must give the same groups again.
 * The busy bitmap, kept across regroupings, must hold exactly the up nodes of the
 * running jobs (started, adopted, ended), and each job's bitmap words must name the
 * class its nodes are in. Capacities change too (a node's base class). Every
 * reservation by tasks must take the nodes a plain reference picks (resv.c's node
 * choice from bitmap words and classes). In half of the rounds the classes emptied by
 * releases are freed at every update (their ids reused). The live reservation list
 * and the name index (released slots kept out of the engine's passes) must hold
 * exactly the live slots, ascending, and each live one's name, every live reservation's
 * bitmap words exactly its nodes, and a released one no nodes left after an update;
 * reservations named by
 * the test reuse a few names (refused while one is live, free again once released).
 * The seed is printed; set BATCH_TEST_SEED to repeat a run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/batch/engine/batch.h"
#include "roles/batch/engine/internal.h"

#define NNODES 160

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* The reference: node i's key as a string of numbers, compared field by field. */
struct rkey {
    int64_t f[6];
    int32_t resv[64];
    int32_t n;
    int32_t node;
};

static int rkey_cmp(const void *pa, const void *pb)
{
    const struct rkey *a = pa, *b = pb;
    for (int k = 0; k < 6; k++)
        if (a->f[k] != b->f[k])
            return a->f[k] < b->f[k] ? -1 : 1;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int32_t k = 0; k < a->n; k++)
        if (a->resv[k] != b->resv[k])
            return a->resv[k] < b->resv[k] ? -1 : 1;
    return a->node < b->node ? -1 : a->node > b->node;
}

static bool same_key(const struct rkey *a, const struct rkey *b)
{
    return memcmp(a->f, b->f, sizeof a->f) == 0 && a->n == b->n &&
           memcmp(a->resv, b->resv, (size_t)a->n * sizeof *a->resv) == 0;
}

/* Checks e's groups and node positions against the reference. */
static void check_groups(struct batch_engine *e)
{
    static struct rkey k[NNODES];
    int32_t n = 0;
    for (int32_t i = 0; i < e->nnodes; i++) {
        const struct bnode *x = &e->nodes[i];
        if (!x->up) {
            assert_int_equal(bs_part_node_group(e, i), -1);
            continue;
        }
        struct rkey *y = &k[n++];
        memset(y, 0, sizeof *y);
        y->f[0] = x->cls;
        y->f[1] = x->fset;
        y->f[2] = x->cap.procs;
        y->f[3] = x->cap.mem;
        y->f[4] = x->cap.disk;
        y->f[5] = x->cap.swap;
        y->node = i;
        for (int32_t r = 0; r < e->nresv; r++) {
            if (!e->resv[r].live)
                continue;
            for (int32_t m = 0; m < e->resv[r].nnodes; m++)
                if (e->resv[r].nodes[m] == i) {
                    assert_true(y->n < 64);
                    y->resv[y->n++] = r;
                }
        }
    }
    qsort(k, (size_t)n, sizeof *k, rkey_cmp);
    static int32_t gn[NNODES];
    int32_t g = -1, pos = 0, ngn = 0;
    for (int32_t x = 0; x < n; x++) {
        if (x == 0 || !same_key(&k[x - 1], &k[x])) {
            g++;
            pos = 0;
            assert_true(g < e->ngroups);
            const struct bgroup *gr = &e->groups[g];
            assert_int_equal(gr->cls, k[x].f[0]);
            assert_int_equal(gr->cap.procs, k[x].f[2]);
            assert_int_equal(gr->cap.mem, k[x].f[3]);
            assert_int_equal(gr->nresv, k[x].n);
            for (int32_t m = 0; m < gr->nresv; m++)
                assert_int_equal(gr->resv[m], k[x].resv[m]);
            ngn = 0; /* its nodes, from its membership bits in ascending index */
            for (int32_t w = gr->wlo; w < gr->whi; w++)
                for (uint64_t b = bs_group_word(gr, w); b; b &= b - 1) {
                    assert_true(ngn < NNODES);
                    gn[ngn++] = w * 64 + __builtin_ctzll(b);
                }
            assert_int_equal(ngn, gr->nnodes);
        }
        const struct bgroup *gr = &e->groups[g];
        assert_true(pos < gr->nnodes);
        assert_int_equal(gn[pos], k[x].node);
        assert_int_equal(bs_part_node_group(e, k[x].node), g);
        pos++;
        if (x + 1 == n || !same_key(&k[x], &k[x + 1]))
            assert_int_equal(pos, gr->nnodes);
    }
    assert_int_equal(g + 1, e->ngroups);
}

/* Checks the busy bitmap against the running jobs' up nodes, and each running job's
 * bitmap words against the classes. */
static void check_busy(struct batch_engine *e)
{
    uint64_t want[(NNODES + 63) / 64] = {0};
    for (int32_t x = 0; x < e->nrunning; x++) {
        int32_t slot = e->running[x];
        struct bjob *j = &e->jobs[slot];
        bs_engine_fill_nodes(e, slot);
        int32_t cover = 0;
        for (int32_t i = 0; i < j->nnodes; i++)
            if (e->nodes[j->nodes[i]].up) {
                want[j->nodes[i] / 64] |= 1ULL << (j->nodes[i] % 64);
                cover++;
            }
        int32_t got = 0;
        for (int32_t r = 0; r < j->nruns; r++) {
            const struct bjob_run *u = &j->runs[r];
            const struct bclass *c = &e->part.c[u->part];
            assert_true(c->group >= 0 && c->group < e->ngroups);
            assert_int_equal(u->mask & ~bs_group_word(&e->groups[c->group], u->word), 0);
            got += bs_pop64(u->mask);
        }
        assert_int_equal(got, cover);
    }
    for (int32_t w = 0; w < (NNODES + 63) / 64; w++)
        assert_int_equal(e->busy[w], want[w]);
}

/* The nodes a reservation of `tasks` one-processor tasks over [s, t) takes, by a plain
 * reference: up nodes in index order that no running job holds past s and no live
 * reservation overlapping [s, t) holds, until the tasks fit; how many, or -1. */
static int32_t ref_pick(struct batch_engine *e, int32_t tasks, int64_t s, int64_t t, int32_t *out)
{
    int32_t n = 0, got = 0;
    for (int32_t i = 0; i < e->nnodes && got < tasks; i++) {
        bool held = !e->nodes[i].up;
        for (int32_t x = 0; !held && x < e->nrunning; x++) {
            int32_t slot = e->running[x];
            struct bjob *j = &e->jobs[slot];
            bs_engine_fill_nodes(e, slot);
            for (int32_t k = 0; j->end_est > s && k < j->nnodes; k++)
                held = held || j->nodes[k] == i;
        }
        for (int32_t r = 0; !held && r < e->nresv; r++) {
            const struct bresv *v = &e->resv[r];
            for (int32_t k = 0; v->live && v->start < t && v->end > s && k < v->nnodes; k++)
                held = held || v->nodes[k] == i;
        }
        if (held)
            continue;
        out[n++] = i;
        got += (int32_t)e->nodes[i].cap.procs;
    }
    return got >= tasks ? n : -1;
}

/* The live list and the name index against a pass over every slot; each live
 * reservation's bitmap words hold its nodes; a released one out of the classes has
 * none left. */
static void check_live(struct batch_engine *e)
{
    int32_t x = 0;
    for (int32_t r = 0; r < e->nresv; r++) {
        const struct bresv *v = &e->resv[r];
        if (!v->live) { /* after an update: its nodes freed, its name free or reused */
            assert_null(v->words);
            assert_null(v->nodes);
            assert_int_equal(v->nnodes, 0);
            int32_t o = bs_resv_by_name(e, v->name); /* none, or a later live namesake */
            assert_true(o == -1 || (o != r && e->resv[o].live));
            continue;
        }
        static uint64_t a[(NNODES + 63) / 64], b[(NNODES + 63) / 64];
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        for (int32_t i = 0; i < v->nnodes; i++)
            a[v->nodes[i] / 64] |= 1ULL << (v->nodes[i] % 64);
        assert_non_null(v->words);
        for (int32_t i = 0; i < v->nwords; i++) {
            assert_true(v->words[i].word >= 0 && v->words[i].word < (NNODES + 63) / 64);
            assert_int_equal(b[v->words[i].word] & v->words[i].mask, 0); /* each node once */
            b[v->words[i].word] |= v->words[i].mask;
        }
        assert_memory_equal(a, b, sizeof a);
        assert_true(x < e->nrlive);
        assert_int_equal(e->rlive[x++], r);
        assert_int_equal(bs_resv_by_name(e, v->name), r);
    }
    assert_int_equal(x, e->nrlive);
    assert_int_equal(batch_resv_count(e), (size_t)e->nrlive);
}

static void step(struct batch_engine *e, int64_t *now, uint64_t *jid)
{
    uint32_t what = rnd(100);
    char why[256];
    if (what < 40) { /* a reservation by tasks: the nodes the reference takes */
        struct batch_resv_req q = {0};
        q.tasks = 1 + (int32_t)rnd(24);
        q.per_task.procs = 1;
        q.start = *now + (int64_t)rnd(400);
        q.duration = 1 + (int64_t)rnd(300);
        int64_t s = q.start > *now ? q.start : *now;
        if (e->now > s)
            s = e->now;
        static int32_t want[NNODES];
        int32_t nw = ref_pick(e, q.tasks, s, s + q.duration, want);
        char name[BATCH_NAME_MAX], given[16];
        if (rnd(4) == 0) { /* a name of a few: refused while a namesake is live */
            snprintf(given, sizeof given, "adm%u", rnd(3));
            q.name = given;
            if (bs_resv_by_name(e, given) >= 0)
                nw = -1;
        }
        int rc = batch_resv_create(e, &q, *now, name, sizeof name, why, sizeof why);
        assert_int_equal(rc, nw >= 0 ? 0 : -1);
        struct batch_resv_info ri;
        if (rc == 0) {
            assert_int_equal(batch_resv_find(e, name, &ri), 0);
            assert_int_equal(ri.nnodes, nw);
            for (int32_t i = 0; i < nw; i++)
                assert_int_equal(ri.nodes[i], want[i]);
        }
    } else if (what < 55) { /* by names (often refused unless restored) */
        char names[4][16];
        const char *list[4];
        size_t nn = 1 + rnd(4);
        for (size_t i = 0; i < nn; i++) {
            snprintf(names[i], sizeof names[i], "n%03u", rnd(NNODES));
            list[i] = names[i];
        }
        struct batch_resv_req q = {0};
        q.nodes = list;
        q.nnodes = nn;
        q.restore = rnd(3) == 0; /* taken as they are, down or reserved */
        q.start = *now + (int64_t)rnd(400);
        q.duration = 1 + (int64_t)rnd(300);
        (void)batch_resv_create(e, &q, *now, NULL, 0, why, sizeof why);
    } else if (what < 80) { /* a release */
        int32_t live = 0;
        for (int32_t r = 0; r < e->nresv; r++)
            live += e->resv[r].live;
        if (live) {
            int32_t pick = (int32_t)rnd((uint32_t)live);
            for (int32_t r = 0; r < e->nresv; r++)
                if (e->resv[r].live && pick-- == 0) {
                    assert_int_equal(batch_resv_release(e, e->resv[r].name), 0);
                    break;
                }
        }
    } else if (what < 92) { /* time passes: jobs come, run, end; reservations expire */
        struct batch_job_spec s = {0};
        s.id = ++*jid;
        snprintf(s.user, sizeof s.user, "u%u", rnd(3));
        s.tasks = 1 + (int32_t)rnd(12);
        s.per_task.procs = 1;
        s.walltime = 10 + (int64_t)rnd(200);
        s.submit = *now;
        assert_int_equal(batch_job_submit(e, &s), 0);
        *now += (int64_t)rnd(120);
        struct batch_cycle_stats st;
        assert_int_equal(batch_cycle(e, *now, &st), 0);
        for (uint64_t id = 1; id <= *jid; id++) {
            struct batch_job_info bi;
            if (batch_job_info(e, id, &bi) == 0 && bi.state == BATCH_JOB_RUNNING && rnd(3) == 0)
                (void)batch_job_finish(e, id, *now);
        }
    } else if (what < 95) { /* a job adopted on free up nodes (the live role's restart) */
        int32_t nodes[3], nn = 0;
        for (int32_t tries = 0; tries < 20 && nn < 3; tries++) {
            int32_t n = (int32_t)rnd(NNODES);
            bool dup = false;
            for (int32_t i = 0; i < nn; i++)
                dup = dup || nodes[i] == n;
            if (!dup && e->nodes[n].up && !batch_node_busy(e, n))
                nodes[nn++] = n;
        }
        if (nn) {
            struct batch_job_spec s = {0};
            s.id = ++*jid;
            snprintf(s.user, sizeof s.user, "u%u", rnd(3));
            s.tasks = nn;
            s.per_task.procs = 1;
            s.walltime = 10 + (int64_t)rnd(200);
            s.submit = *now;
            assert_int_equal(batch_job_adopt(e, &s, nodes, nn, *now), 0);
        }
    } else if (what < 97) { /* a node's capacity changes (another base class) */
        int32_t n = (int32_t)rnd(NNODES);
        struct batch_res cap = {1 + (int64_t)rnd(2), 1000 * (1 + (int64_t)rnd(2)), 0, 0};
        assert_int_equal(batch_node_set_cap(e, n, &cap), 0);
    } else { /* a node goes down or comes up */
        int32_t n = (int32_t)rnd(NNODES);
        assert_int_equal(batch_node_set_up(e, n, !e->nodes[n].up), 0);
    }
}

static void test_random_resv(void **state)
{
    (void)state;
    const char *env = getenv("BATCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_batch_part seed %llu (BATCH_TEST_SEED)\n", (unsigned long long)seed);
    for (int round = 0; round < 6; round++) {
        rng = seed * 2654435761ULL + (uint64_t)round * 97 + 1;
        struct batch_config c;
        batch_config_defaults(&c);
        struct batch_engine *e = batch_engine_new(&c);
        assert_non_null(e);
        if (round % 2) /* empty classes freed and their ids reused at every update */
            e->part.recycle_slack = -1000;
        for (int32_t i = 0; i < NNODES; i++) { /* three base classes, interleaved */
            struct batch_node_spec s = {.cap = {1 + (i % 3 == 0), 1000 * (1 + i % 2), 0, 0}};
            snprintf(s.name, sizeof s.name, "n%03d", i);
            assert_true(batch_node_add(e, &s) >= 0);
        }
        int64_t now = 1000;
        uint64_t jid = 0;
        for (int s = 0; s < 150; s++) {
            step(e, &now, &jid);
            if (rnd(4) == 0)
                continue; /* several changes in one regrouping */
            assert_int_equal(bs_engine_regroup(e), 0);
            check_groups(e);
            check_busy(e);
            check_live(e);
            if (rnd(8) == 0) { /* from scratch: the same groups */
                e->part.ok = false;
                assert_int_equal(bs_engine_regroup(e), 0);
                check_groups(e);
                check_busy(e);
            }
        }
        batch_engine_destroy(&e);
    }
}

/* bs_run64 (the node loops go run by run): the runs of a word, lowest first, are its
 * maximal runs of set bits, and together its bits; edge words included. */
static void test_run64(void **state)
{
    (void)state;
    rng = 88172645463325252ULL;
    for (int round = 0; round < 20000; round++) {
        uint64_t x = ((uint64_t)rnd(1u << 31) << 33) ^ ((uint64_t)rnd(1u << 31) << 2) ^ rnd(4);
        if (round < 4) /* all, the top bit, the bottom bit, the top half */
            x = (uint64_t[]){~0ULL, 1ULL << 63, 1, ~0ULL << 32}[round];
        uint64_t seen = 0;
        for (uint64_t b = x, run; b; b &= ~run) {
            int32_t lo;
            run = bs_run64(b, &lo);
            assert_int_equal(lo, __builtin_ctzll(b));
            assert_int_equal(run & ~b, 0);                        /* its bits are set */
            assert_int_equal((run >> lo) & ((run >> lo) + 1), 0); /* one run from lo */
            assert_int_equal(b & (run << 1) & ~run, 0);           /* maximal */
            seen |= run;
        }
        assert_true(seen == x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run64),
        cmocka_unit_test(test_random_resv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

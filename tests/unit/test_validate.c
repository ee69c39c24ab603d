/*
 * test_validate.c - result validation (roles/cluster/validate*.c, docs/validation.md):
 * SipHash-2-4 against the published test vector; the trust rules (threshold, check
 * probability falling with the record, never below check_min, probation); and the
 * durable state of a checked job: settings, candidates with their verdicts, copies
 * handed out, node trust and known answers are written by the role's own save
 * functions into a real LMDB store, reloaded by cluster_load and compared.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roles/cluster/scored_int.h"
#include "roles/cluster/validate_int.h"
#include "store/store.h"

static char dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void test_siphash_vector(void **state)
{
    (void)state;
    uint8_t k[16], m[15];
    for (int i = 0; i < 16; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        m[i] = (uint8_t)i;
    /* SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e */
    assert_true(valid_siphash(k, m, 15) == 0xa129ca6149be45e5ULL);
    assert_true(valid_siphash(k, m, 0) == 0x726fdb47dd0e0e31ULL);
}

static void test_trust_rules(void **state)
{
    (void)state;
    struct cluster c;
    struct node n;
    memset(&c, 0, sizeof c);
    memset(&n, 0, sizeof n);
    c.cfg.v_trust_after = 20;
    c.cfg.v_check_min = 0.05;
    n.tr.consec = 19;
    assert_false(valid_trusted(&c, &n));
    n.tr.consec = 20;
    assert_true(valid_trusted(&c, &n));
    assert_true(valid_check_prob(&c, &n) == 1.0);
    n.tr.consec = 40;
    assert_true(valid_check_prob(&c, &n) == 0.25); /* (20/40)^2 */
    n.tr.consec = 100000;
    assert_true(valid_check_prob(&c, &n) == 0.05); /* never below check_min */
    n.tr.probation = 1;
    assert_false(valid_trusted(&c, &n)); /* failed a spot check: not trusted */
}

static void cl_open(struct cluster *c)
{
    char err[256];
    memset(c, 0, sizeof *c);
    c->cfg.hb_s = 1;
    c->cfg.sd_queues = 4;
    c->cfg.max_attempts = 3;
    c->cfg.v_trust_after = 20;
    struct store_opts so = {"cluster", cluster_store_tables, STORE_SYNC_NONE, 0, false};
    c->store = store_open(dir, &so, err, sizeof err);
    if (!c->store)
        fail_msg("store_open: %s", err);
    cluster_store_find_tables(c);
    assert_true(c->t_vres >= 0 && c->t_known >= 0);
    assert_non_null(c->sd = calloc(1, sizeof *c->sd));
    assert_int_equal(scored_open(c), 0);
    assert_int_equal(valid_init(c), 0);
    c->next_job = 1;
}

static void cl_close(struct cluster *c)
{
    store_close(&c->store);
    cluster_free_state(c);
    valid_free(c);
    scored_close(c);
}

static struct node *node(struct cluster *c, const char *sid)
{
    struct node *n = cluster_node_new(c);
    assert_non_null(n);
    snprintf(n->sid, sizeof n->sid, "%s", sid);
    snprintf(n->name, sizeof n->name, "host-%s", sid);
    n->active = true;
    n->cores = n->slots = 1;
    assert_int_equal(cluster_node_register(c), 0);
    return &c->nodes[c->nnodes - 1];
}

/* A SUBMIT map for valid_submit, built as msgpack. */
static struct job *job_with(struct cluster *c, uint32_t ntasks, bool known, msgpack_unpacked *up)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_pack_map(&wb, known ? 4 : 6);
    wire_put_u64(&wb, "quorum", 2);
    wire_put_u64(&wb, "max_results", 5);
    wire_put_str(&wb, "distinct", "host");
    if (known) {
        wire_put_key(&wb, "known");
        wire_pack_array(&wb, ntasks);
        for (uint32_t i = 0; i < ntasks; i++) {
            wire_pack_map(&wb, 2);
            wire_put_i64(&wb, "exit", 0);
            wire_put_bin(&wb, "stdout", "k\n", 2);
        }
    } else {
        wire_put_bool(&wb, "adaptive", true);
        wire_put_str(&wb, "validator", "./check");
        wire_put_u64(&wb, "replicas", 3);
    }
    size_t off = 0;
    msgpack_unpacked_init(up);
    assert_int_equal(msgpack_unpack_next(up, wb.sb.data, wb.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    struct job *j = calloc(1, sizeof *j);
    j->id = c->next_job++;
    j->name = strdup("v");
    j->user = strdup("u");
    j->argv = calloc(2, sizeof *j->argv);
    j->argv[0] = strdup("sim");
    j->argc = 1;
    j->ntasks = ntasks;
    j->complexity = 1;
    j->limit_s = 10;
    j->state = JS_QUEUED;
    j->issuable = true;
    assert_null(valid_submit(c, j, &up->data));
    assert_int_equal(cluster_job_add(c, j), 0);
    cluster_mark_job(c, j);
    wire_buf_free(&wb);
    return j;
}

/* A result map as a node sends it. */
static void result(struct cluster *c, struct node *n, struct job *j, uint32_t idx, uint32_t issue,
                   const char *out)
{
    struct wire_buf wb;
    msgpack_unpacked up;
    size_t off = 0;
    wire_buf_init(&wb);
    wire_pack_map(&wb, 5);
    wire_put_u64(&wb, "job", j->id);
    wire_put_u64(&wb, "idx", idx);
    wire_put_u64(&wb, "issue", issue);
    wire_put_i64(&wb, "exit", 0);
    wire_put_bin(&wb, "stdout", out, strlen(out));
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, wb.sb.data, wb.sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(tasks_result(c, n, &up.data), 0);
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

static void test_checked_job_survives_reload(void **state)
{
    (void)state;
    struct cluster c;
    msgpack_unpacked u1, u2;
    snprintf(dir, sizeof dir, "/tmp/test_validate.XXXXXX");
    assert_non_null(mkdtemp(dir));
    cl_open(&c);
    struct node *a = node(&c, "aaaa"), *b = node(&c, "bbbb"), *d = node(&c, "dddd");
    a->tr = (struct ntrust){25, 30, 2, 4, 1, 2, 12345};
    cluster_mark_node(&c, a);
    struct job *j = job_with(&c, 3, false, &u1);
    uint32_t jid = (uint32_t)j->id;
    struct job *k = job_with(&c, 2, true, &u2);
    uint32_t kid = (uint32_t)k->id;
    assert_int_equal(job_grow_tasks(j, 3), 0);
    j->next_new = 3;
    /* task 0: three copies out (a, b, d); a and b answer differently */
    assert_int_equal(valid_issued(&c, &c.nodes[0], j, 0, 99999999999LL), 0);
    for (int i = 1; i < 3; i++) { /* the other two copies come from the queue */
        struct job *qj = NULL;
        uint32_t qidx = 99;
        assert_int_equal(valid_take(&c, &c.nodes[i], 0, &qj, &qidx), 0);
        assert_ptr_equal(qj, j);
        assert_int_equal(qidx, 0);
        assert_int_equal(valid_issued(&c, &c.nodes[i], j, 0, 99999999999LL), 0);
    }
    struct job *none = NULL;
    uint32_t nidx;
    assert_int_equal(valid_take(&c, &c.nodes[2], 0, &none, &nidx), -1); /* 3 copies out */
    assert_int_equal(valid_take(&c, &c.nodes[0], 0, &none, &nidx), 0);
    assert_ptr_equal(none, k); /* a is on probation: spot checks only */
    result(&c, &c.nodes[0], j, 0, 1, "x\n");
    result(&c, &c.nodes[1], j, 0, 2, "y\n");
    assert_int_equal(cluster_save_dirty(&c), 0);
    assert_int_equal(store_commit(c.store), 0);
    (void)b, (void)d;
    msgpack_unpacked_destroy(&u1);
    msgpack_unpacked_destroy(&u2);
    cl_close(&c);

    cl_open(&c);
    assert_int_equal(cluster_load(&c), 0);
    assert_int_equal(c.load_skipped, 0);
    j = cluster_job_find(&c, jid);
    k = cluster_job_find(&c, kid);
    assert_non_null(j);
    assert_non_null(j->v);
    assert_int_equal(j->v->quorum, 2);
    assert_int_equal(j->v->replicas, 3);
    assert_int_equal(j->v->max_results, 5);
    assert_int_equal(j->v->distinct, VD_HOST);
    assert_true(j->v->adaptive);
    assert_string_equal(j->v->validator, "./check");
    assert_true(k->v->known);
    assert_int_equal(k->next_new, 2); /* a pool: never handed out in index order */
    assert_true(k->v->ka[0] != 0 && k->v->ka[0] == k->v->ka[1]);
    struct vtask *vt = valid_vt(j, 0);
    assert_non_null(vt);
    assert_int_equal(vt->ncand, 2);
    assert_int_equal(vt->ncopy, 1); /* d still holds its copy */
    assert_string_equal(c.nodes[vt->copy[0].node].sid, "dddd");
    assert_int_equal(c.nodes[vt->copy[0].node].inflight, 1);
    assert_true(vt->cand[0].cls != 0 && vt->cand[0].cls != vt->cand[1].cls);
    /* a is on probation (failed a spot check): its result does not count */
    assert_int_equal(vt->cand[0].status, VC_REJECTED);
    assert_int_equal(vt->cand[0].why, VW_PROBATION);
    assert_null(vt->cand[0].rec);
    assert_int_equal(vt->cand[1].status, VC_PENDING);
    assert_non_null(vt->cand[1].rec); /* undecided: kept for the validator */
    assert_int_equal(vt->want, 0);    /* d's copy is still out: enough for a quorum */
    assert_string_equal(c.nodes[vt->cand[1].node].sid, "bbbb");
    struct node *a2 = cluster_node_find(&c, "aaaa", 4);
    assert_int_equal(a2->tr.consec, 25);
    assert_int_equal(a2->tr.ninvalid, 2);
    assert_int_equal(a2->tr.spot_fail, 1);
    assert_int_equal(a2->tr.probation, 2);
    assert_true(a2->tr.spot_ok_ms == 12345);
    cl_close(&c);
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_vector),
        cmocka_unit_test(test_trust_rules),
        cmocka_unit_test(test_checked_job_survives_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

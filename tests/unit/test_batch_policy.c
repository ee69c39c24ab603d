/*
 * test_batch_policy.c - small hand-built workloads with start times computed by
 * hand, replayed through the SWF reader and the simulator (which drives the
 * engine): FCFS, EASY and conservative backfill, the node model, walltime
 * overruns, the skipped records, the job window, and malformed traces; the
 * streamed reader (swf_stream) against swf_read, and the streamed simulation
 * (sim_stream) against sim_prepare + sim_run, in and out of submit order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "roles/batch/sim/sim.h"

struct tj { /* one trace job: submit, run, procs, requested time */
    int64_t submit, run;
    int32_t procs;
    int64_t req;
};

/* An SWF text for jobs[0, n), numbered from 1. */
static char *swf_text(const struct tj *jobs, int n, const char *header)
{
    size_t cap = 200 + (size_t)n * 120;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "%s", header ? header : "; MaxProcs: 4\n");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%d %lld -1 %lld %d -1 -1 %d %lld -1 1 %d 1 -1 1 -1 -1 -1\n", i + 1,
                                (long long)jobs[i].submit, (long long)jobs[i].run, jobs[i].procs,
                                jobs[i].procs, (long long)jobs[i].req, 1 + i % 3);
    return s;
}

struct run {
    struct sim_input in;
    struct sim_result r;
};

/* Simulates jobs on `procs` processors (nodes of node_procs) with a policy. */
static void simulate(struct run *out, const struct tj *jobs, int n, int64_t procs,
                     int32_t node_procs, const char *policy, enum sim_estimate est)
{
    struct batch_config c;
    struct swf_trace t;
    char err[256];
    batch_config_defaults(&c);
    if (!strcmp(policy, "fcfs"))
        c.backfill = BATCH_BF_NONE;
    else if (!strcmp(policy, "conservative"))
        c.reservation_depth = BATCH_UNLIMITED;
    else if (!strcmp(policy, "bestfit"))
        c.backfill = BATCH_BF_BESTFIT;
    char *text = swf_text(jobs, n, NULL);
    assert_int_equal(swf_parse(text, strlen(text), "case", &t, err, sizeof err), 0);
    struct sim_opts o = {.procs = procs,
                         .node_procs = node_procs,
                         .estimate = est,
                         .cfg = &c,
                         .record_nodes = true,
                         .diag_at = -1};
    memset(out, 0, sizeof *out);
    assert_int_equal(sim_prepare(&t, &o, &out->in, err, sizeof err), 0);
    if (sim_run(&out->in, &o, &out->r, err, sizeof err) != 0)
        fail_msg("sim_run: %s", err);
    swf_free(&t);
    free(text);
}

static void run_free(struct run *r)
{
    sim_input_free(&r->in);
    sim_result_free(&r->r);
}

static void expect_starts(const struct tj *jobs, int n, int64_t procs, int32_t node_procs,
                          const char *policy, enum sim_estimate est, const int64_t *want)
{
    struct run r;
    simulate(&r, jobs, n, procs, node_procs, policy, est);
    assert_int_equal(r.in.njobs, n);
    for (int i = 0; i < n; i++)
        if (r.in.jobs[i].start != want[i])
            fail_msg("%s: job %d starts at %lld, expected %lld", policy, i + 1,
                     (long long)r.in.jobs[i].start, (long long)want[i]);
    run_free(&r);
}

/* Machine of 4. Job 2 (3 procs) blocks; job 3 fits in the hole and ends before job 2
 * may start; job 4 would delay job 2 and waits. */
static void test_case_a(void **state)
{
    (void)state;
    const struct tj jobs[] = {{0, 10, 2, 10}, {0, 10, 4, 10}, {1, 5, 2, 5}, {2, 20, 1, 20}};
    const int64_t fcfs[] = {0, 10, 20, 20}, easy[] = {0, 10, 1, 20}, cons[] = {0, 10, 1, 20};
    expect_starts(jobs, 4, 4, 1, "fcfs", SIM_EST_REQUESTED, fcfs);
    expect_starts(jobs, 4, 4, 1, "easy", SIM_EST_REQUESTED, easy);
    expect_starts(jobs, 4, 4, 1, "conservative", SIM_EST_REQUESTED, cons);
}

/* Machine of 4. Job 2 (2 procs) waits for job 1 (3 procs) until 10; EASY lets the
 * long narrow job 4 use the processor job 2 leaves spare at 10, which delays job 3
 * (4 procs) to 51; conservative gives job 3 its reservation [20, 30) first, so job 4
 * must wait until 30. FCFS runs them in order. */
static void test_case_b(void **state)
{
    (void)state;
    const struct tj jobs[] = {{0, 10, 3, 10}, {0, 10, 2, 10}, {0, 10, 4, 10}, {1, 50, 1, 50}};
    const int64_t fcfs[] = {0, 10, 20, 30}, easy[] = {0, 10, 51, 1}, cons[] = {0, 10, 20, 30};
    expect_starts(jobs, 4, 4, 1, "fcfs", SIM_EST_REQUESTED, fcfs);
    expect_starts(jobs, 4, 4, 1, "easy", SIM_EST_REQUESTED, easy);
    expect_starts(jobs, 4, 4, 1, "conservative", SIM_EST_REQUESTED, cons);
}

/* Requested times longer than the runs: job 1 asks 100 but runs 10. Job 2's
 * reservation is made for 100 and moves to 10 when job 1 ends; job 3 (asks 200,
 * runs 5) would overlap job 2's reservation under its request, so it runs after
 * job 2. With actual run times as estimates it fits before job 2 at once. */
static void test_inexact_estimates(void **state)
{
    (void)state;
    const struct tj jobs[] = {{0, 10, 3, 100}, {1, 10, 4, 20}, {2, 5, 1, 200}};
    const int64_t req[] = {0, 10, 20}, act[] = {0, 10, 2};
    expect_starts(jobs, 3, 4, 1, "easy", SIM_EST_REQUESTED, req);
    expect_starts(jobs, 3, 4, 1, "conservative", SIM_EST_REQUESTED, req);
    expect_starts(jobs, 3, 4, 1, "easy", SIM_EST_ACTUAL, act);
}

/* Nodes of 2 processors, one job per node: a 3-processor job takes two nodes. */
static void test_nodes(void **state)
{
    (void)state;
    const struct tj jobs[] = {{0, 10, 3, 10}, {0, 10, 2, 10}, {0, 10, 1, 10}};
    /* 3 nodes of 2: job 1 takes 2 nodes, job 2 the third, job 3 waits */
    const int64_t want[] = {0, 0, 10};
    expect_starts(jobs, 3, 6, 2, "easy", SIM_EST_REQUESTED, want);
    struct run r;
    simulate(&r, jobs, 3, 6, 2, "easy", SIM_EST_REQUESTED);
    int32_t nodes = 0;
    for (int32_t k = 0; k < r.r.run_cnt[0]; k++)
        nodes += r.r.run_len[r.r.run_off[0] + k];
    assert_int_equal(nodes, 2);
    run_free(&r);
}

/* BESTFIT (B4): among jobs that fit the widest window, the one using most
 * processors starts first, even behind a smaller one in priority order. */
static void test_bestfit(void **state)
{
    (void)state;
    /* job 1 holds 4 of 8 until 100; job 2 (8 procs) is reserved at 100; jobs 3 (1
     * proc) and 4 (3 procs) both fit now and end before 100; job 5 (4 procs, 10 s)
     * fits too: FIRSTFIT starts 3 then 4 (5 no longer fits); BESTFIT starts 5. */
    const struct tj jobs[] = {
        {0, 100, 4, 100}, {1, 10, 8, 10}, {2, 10, 1, 10}, {2, 10, 3, 10}, {2, 10, 4, 10}};
    const int64_t ff[] = {0, 100, 2, 2, 12}, bf[] = {0, 100, 12, 12, 2};
    expect_starts(jobs, 5, 8, 1, "easy", SIM_EST_REQUESTED, ff);
    expect_starts(jobs, 5, 8, 1, "bestfit", SIM_EST_REQUESTED, bf);
}

static void test_figures(void **state)
{
    (void)state;
    /* two jobs back to back on 2 processors: utilization 1, waits 0 and 10 */
    const struct tj jobs[] = {{0, 10, 2, 10}, {0, 10, 2, 10}};
    struct run r;
    simulate(&r, jobs, 2, 2, 1, "easy", SIM_EST_REQUESTED);
    assert_int_equal(r.r.jobs, 2);
    assert_true(r.r.utilization > 0.999 && r.r.utilization < 1.001);
    assert_true(r.r.mean_wait > 4.99 && r.r.mean_wait < 5.01);
    assert_true(r.r.max_wait > 9.99 && r.r.max_wait < 10.01);
    /* bounded slowdowns 1 and (10 + 10) / 10 = 2 */
    assert_true(r.r.mean_bsld > 1.499 && r.r.mean_bsld < 1.501);
    run_free(&r);
}

static void test_records(void **state)
{
    (void)state;
    const char *text = "; MaxProcs: 8\n; Queue: 1 batch\n"
                       "1 0 -1 10 2 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 -1\n"    /* run > request */
                       "2 0 -1 -1 2 -1 -1 2 5 -1 5 1 1 -1 1 -1 -1 -1\n"    /* no run time */
                       "3 0 -1 10 -1 -1 -1 -1 5 -1 1 1 1 -1 1 -1 -1 -1\n"  /* no procs */
                       "4 0 -1 10 16 -1 -1 16 50 -1 1 1 1 -1 1 -1 -1 -1\n" /* too wide */
                       "5 1 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n"   /* no request */
                       "6 2 -1 3 1 -1 -1 1 9 -1 1 1 1 -1 1 -1 -1 -1\n";
    struct swf_trace t;
    struct sim_input in;
    struct batch_config c;
    char err[256];
    batch_config_defaults(&c);
    assert_int_equal(swf_parse(text, strlen(text), "rec", &t, err, sizeof err), 0);
    assert_int_equal(t.max_procs, 8);
    assert_string_equal(t.queue_name[1], "batch");
    struct sim_opts o = {.procs = 8, .node_procs = 1, .cfg = &c, .diag_at = -1};
    memset(&in, 0, sizeof in);
    assert_int_equal(sim_prepare(&t, &o, &in, err, sizeof err), 0);
    assert_int_equal(in.njobs, 3);
    assert_int_equal(in.skip_no_run, 1);
    assert_int_equal(in.skip_no_procs, 1);
    assert_int_equal(in.skip_too_wide, 1);
    assert_int_equal(in.truncated, 1);
    assert_int_equal(in.no_request, 1);
    assert_int_equal(in.jobs[0].run, 5); /* killed at its walltime */
    assert_int_equal(in.jobs[1].walltime, 10);
    sim_input_free(&in);
    /* the window: skip one usable job, take one */
    o.start = 1;
    o.count = 1;
    memset(&in, 0, sizeof in);
    assert_int_equal(sim_prepare(&t, &o, &in, err, sizeof err), 0);
    assert_int_equal(in.njobs, 1);
    assert_int_equal(in.jobs[0].id, 5);
    sim_input_free(&in);
    o.start = 10;
    memset(&in, 0, sizeof in);
    assert_int_equal(sim_prepare(&t, &o, &in, err, sizeof err), -1);
    assert_non_null(strstr(err, "no job"));
    swf_free(&t);
}

static void expect_bad_n(const char *text, size_t len, const char *what)
{
    struct swf_trace t;
    char err[256] = "";
    assert_int_equal(swf_parse(text, len, "bad.swf", &t, err, sizeof err), -1);
    if (!strstr(err, what))
        fail_msg("error '%s' does not mention '%s'", err, what);
}

static void expect_bad(const char *text, const char *what)
{
    struct swf_trace t;
    char err[256] = "";
    assert_int_equal(swf_parse(text, strlen(text), "bad.swf", &t, err, sizeof err), -1);
    if (!strstr(err, what))
        fail_msg("error '%s' does not mention '%s'", err, what);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_bad("1 0 -1 10 2\n", "bad.swf:1: expected 18 fields, found 5");
    expect_bad("; c\n1 0 -1 10 2 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 x\n", "bad.swf:2: field 18");
    expect_bad("1 0 -1 10 2 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 -1 7\n", "more than 18");
    expect_bad("1 0 -1 10 -5 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 -1\n", "field 5 is -5");
    expect_bad("1 0 -1 10 2 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 99999999999999999999\n", "field 18");
    expect_bad_n("1 0 -1 1\0 2", 10, "NUL");
    struct swf_trace t;
    char err[256];
    assert_int_equal(swf_read("/nonexistent/trace.swf", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/trace.swf: cannot open"));
    /* fractions and exponents in unused fields are fine */
    const char *ok = "1 0 -1 10 2 12.5 1e3 2 5 -1 1 1 1 -1 1 -1 -1 -1";
    assert_int_equal(swf_parse(ok, strlen(ok), "ok", &t, err, sizeof err), 0);
    assert_int_equal(t.njobs, 1);
    swf_free(&t);
}

/* A deterministic mixed workload of n records, submit times non-decreasing or
 * (shuffled) not, with some records the simulator skips. */
static char *mixed_text(int n, bool shuffled, const char *header)
{
    size_t cap = 200 + (size_t)n * 120, len;
    char *s = malloc(cap);
    uint64_t x = 88172645463325252u;
    len = (size_t)snprintf(s, cap, "%s", header);
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        long long submit =
            (long long)i * 400 + (shuffled && x % 7 == 0 ? -(long long)(x % 500) : 0);
        int procs = 1 + (int)(x % 13) % 9, run = x % 23 == 0 ? -1 : (int)(x % 3000);
        long long req = x % 5 == 0 ? -1 : run + (long long)(x % 2000);
        len += (size_t)snprintf(s + len, cap - len,
                                "%d %lld -1 %d %d -1 -1 %d %lld -1 1 %d 1 -1 %d -1 -1 -1\n", i + 1,
                                submit < 0 ? 0 : submit, run, procs, procs, req, 1 + i % 5, i % 3);
    }
    return s;
}

struct blocks { /* a sim_source over a parsed trace, k records at a time */
    const struct swf_trace *t;
    size_t k, next;
};

static int blocks_next(void *arg, const struct swf_job **recs, size_t *n, char *err, size_t len)
{
    struct blocks *b = arg;
    (void)err;
    (void)len;
    *n = b->t->njobs - b->next < b->k ? b->t->njobs - b->next : b->k;
    *recs = b->t->jobs + b->next;
    b->next += *n;
    return 0;
}

static void expect_same_run(const struct run *a, const struct run *b)
{
    assert_int_equal(a->in.njobs, b->in.njobs);
    assert_int_equal(a->in.skip_no_run, b->in.skip_no_run);
    assert_int_equal(a->in.before_window, b->in.before_window);
    assert_int_equal(a->in.truncated, b->in.truncated);
    assert_int_equal(a->in.no_request, b->in.no_request);
    for (size_t i = 0; i < a->in.njobs; i++) {
        const struct sim_job *x = &a->in.jobs[i], *y = &b->in.jobs[i];
        assert_int_equal(x->id, y->id);
        assert_int_equal(x->start, y->start);
        assert_int_equal(x->end, y->end);
        assert_int_equal(a->r.run_cnt[i], b->r.run_cnt[i]);
        for (int32_t k = 0; k < a->r.run_cnt[i]; k++) {
            assert_int_equal(a->r.run_node[a->r.run_off[i] + (size_t)k],
                             b->r.run_node[b->r.run_off[i] + (size_t)k]);
            assert_int_equal(a->r.run_len[a->r.run_off[i] + (size_t)k],
                             b->r.run_len[b->r.run_off[i] + (size_t)k]);
        }
    }
    assert_int_equal(a->r.cycles, b->r.cycles);
    assert_true(a->r.mean_wait == b->r.mean_wait && a->r.utilization == b->r.utilization);
    assert_true(a->r.mean_bsld == b->r.mean_bsld && a->r.median_wait == b->r.median_wait);
}

/* sim_stream gives exactly the results of sim_prepare + sim_run, whatever the
 * block size, with windows, and when the trace is out of submit order. */
static void test_stream_sim(void **state)
{
    (void)state;
    struct batch_config c;
    char err[256];
    batch_config_defaults(&c);
    const size_t window[][2] = {{0, 0}, {100, 250}, {0, 1}, {3500, 0}};
    const size_t ks[] = {1, 7, 4096};
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        char *text = mixed_text(4500, shuffled, "; MaxProcs: 16\n");
        struct swf_trace t;
        assert_int_equal(swf_parse(text, strlen(text), "mixed", &t, err, sizeof err), 0);
        for (size_t w = 0; w < sizeof window / sizeof window[0]; w++) {
            struct sim_opts o = {.procs = 16,
                                 .node_procs = 2,
                                 .cfg = &c,
                                 .start = window[w][0],
                                 .count = window[w][1],
                                 .record_nodes = true,
                                 .diag_at = -1};
            struct run ref, got;
            memset(&ref, 0, sizeof ref);
            assert_int_equal(sim_prepare(&t, &o, &ref.in, err, sizeof err), 0);
            assert_int_equal(sim_run(&ref.in, &o, &ref.r, err, sizeof err), 0);
            for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
                struct blocks b = {&t, ks[k], 0};
                struct sim_source src = {blocks_next, &b};
                memset(&got, 0, sizeof got);
                if (sim_stream(&got.in, &o, &src, &got.r, err, sizeof err) != 0)
                    fail_msg("sim_stream: %s", err);
                expect_same_run(&ref, &got);
                run_free(&got);
            }
            run_free(&ref);
        }
        /* errors: nothing in the window, a machine that cannot be built */
        struct blocks b = {&t, 5, 0};
        struct sim_source src = {blocks_next, &b};
        struct sim_opts o = {.procs = 16, .node_procs = 1, .cfg = &c, .start = 9000, .diag_at = -1};
        struct run got;
        memset(&got, 0, sizeof got);
        assert_int_equal(sim_stream(&got.in, &o, &src, &got.r, err, sizeof err), -1);
        assert_non_null(strstr(err, "no job to simulate (the trace has 4500 records"));
        run_free(&got);
        o.node_procs = 3;
        assert_int_equal(sim_stream(&got.in, &o, &src, &got.r, err, sizeof err), -1);
        assert_non_null(strstr(err, "cannot be split"));
        run_free(&got);
        swf_free(&t);
        free(text);
    }
}

/* Writes text to a new temporary file, gzip-compressed or not; returns its path. */
static char *temp_trace(const char *text, bool gz)
{
    char *path = strdup("/tmp/test_batch_swfXXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    if (gz) {
        gzFile g = gzdopen(fd, "wb");
        assert_int_equal(gzwrite(g, text, (unsigned)strlen(text)), (int)strlen(text));
        assert_int_equal(gzclose(g), Z_OK);
    } else {
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
    }
    return path;
}

/* Reads path through a stream: every record, then the end. */
static void stream_all(const char *path, struct swf_trace *t, const struct swf_trace **head,
                       struct swf_stream **s)
{
    char err[256];
    const struct swf_job *recs;
    size_t n, total = 0, blocks = 0;
    assert_int_equal(swf_stream_open(path, s, err, sizeof err), 0);
    assert_non_null(*head = swf_stream_header(*s, err, sizeof err));
    while (swf_stream_next(*s, &recs, &n, err, sizeof err) == 0 && n > 0) {
        for (size_t i = 0; i < n; i++)
            assert_int_equal(recs[i].id, (int64_t)(total + i + 1));
        total += n;
        blocks++;
    }
    assert_int_equal(swf_stream_finish(*s, t, err, sizeof err), 0);
    assert_int_equal(t->njobs, total);
    assert_true(blocks > 1); /* big enough for several blocks */
}

/* The stream hands over exactly swf_read's records and header, plain or gzip;
 * a header line below the first record shows in the final header only; a bad line
 * is reported where it is; closing early stops the reader. */
static void test_stream_reader(void **state)
{
    (void)state;
    char err[256];
    char *text = mixed_text(20000, false, "; MaxProcs: 16\n; Queue: 2 batch\n");
    for (int gz = 0; gz < 2; gz++) {
        char *path = temp_trace(text, gz);
        struct swf_trace ref, t;
        const struct swf_trace *head;
        struct swf_stream *s;
        assert_int_equal(swf_read(path, &ref, err, sizeof err), 0);
        memset(&t, 0, sizeof t);
        stream_all(path, &t, &head, &s);
        assert_true(swf_same_header(head, &ref) && swf_same_header(&t, &ref));
        assert_int_equal(t.lines, ref.lines);
        assert_null(t.jobs);
        assert_int_equal(swf_stream_records(s, &t, err, sizeof err), 0);
        for (size_t i = 0; i < ref.njobs; i++) { /* field by field: the padding differs */
            const struct swf_job *x = &t.jobs[i], *y = &ref.jobs[i];
            assert_true(x->id == y->id && x->submit == y->submit && x->wait == y->wait &&
                        x->run == y->run && x->procs == y->procs && x->req_procs == y->req_procs);
            assert_true(x->req_time == y->req_time && x->req_mem == y->req_mem &&
                        x->status == y->status && x->user == y->user && x->group == y->group);
            assert_true(x->queue == y->queue && x->partition == y->partition && x->line == y->line);
        }
        assert_int_equal(head->max_procs, 16);
        assert_string_equal(head->queue_name[2], "batch");
        swf_stream_close(&s);
        assert_null(s);
        swf_free(&t);
        swf_free(&ref);
        /* closed while reading */
        assert_int_equal(swf_stream_open(path, &s, err, sizeof err), 0);
        swf_stream_close(&s);
        unlink(path);
        free(path);
    }
    /* a late header line, then a bad line */
    size_t len = strlen(text);
    char *late = malloc(len + 200);
    snprintf(late, len + 200, "%s; MaxProcs: 32\n", text);
    char *path = temp_trace(late, false);
    struct swf_trace t;
    const struct swf_trace *head;
    struct swf_stream *s;
    memset(&t, 0, sizeof t);
    stream_all(path, &t, &head, &s);
    assert_int_equal(head->max_procs, 16);
    assert_int_equal(t.max_procs, 32);
    assert_false(swf_same_header(head, &t));
    swf_stream_close(&s);
    swf_free(&t);
    unlink(path);
    free(path);
    snprintf(late, len + 200, "%s1 2 3\n", text);
    path = temp_trace(late, true);
    const struct swf_job *recs;
    size_t n;
    int rc;
    assert_int_equal(swf_stream_open(path, &s, err, sizeof err), 0);
    assert_non_null(swf_stream_header(s, err, sizeof err));
    while ((rc = swf_stream_next(s, &recs, &n, err, sizeof err)) == 0 && n > 0)
        ;
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, ":20003: expected 18 fields, found 3"));
    assert_int_equal(swf_stream_finish(s, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, ":20003: expected 18 fields"));
    swf_stream_close(&s);
    swf_free(&t);
    unlink(path);
    free(path);
    /* a file failing before any record; a file that is not there */
    path = temp_trace("; MaxProcs: 4\nbad\n", false);
    assert_int_equal(swf_stream_open(path, &s, err, sizeof err), 0);
    assert_null(swf_stream_header(s, err, sizeof err));
    assert_non_null(strstr(err, ":2: field 1 is not a number"));
    swf_stream_close(&s);
    unlink(path);
    free(path);
    assert_int_equal(swf_stream_open("/nonexistent/t.swf", &s, err, sizeof err), -1);
    assert_null(s);
    assert_non_null(strstr(err, "/nonexistent/t.swf: cannot open"));
    free(late);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_a),
        cmocka_unit_test(test_case_b),
        cmocka_unit_test(test_inexact_estimates),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_bestfit),
        cmocka_unit_test(test_figures),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_stream_sim),
        cmocka_unit_test(test_stream_reader),
    };
    return cmocka_run_group_tests_name("batch_policy", tests, NULL, NULL);
}

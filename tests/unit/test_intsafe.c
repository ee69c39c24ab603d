/*
 * test_intsafe.c - integer safety of the time and size fields that arrive from outside
 * (issue 23 item 8, docs/wire.md 2 "Ranges"): one row per message field that a role adds
 * to or multiplies, with its documented bound; each row checks that the descriptor holds
 * that bound and that INT64_MAX, INT64_MIN, -1, the bound and the bound + 1 are accepted
 * or refused (FIELD, naming the field) as the bound says. Also the readers of the
 * free-form reply maps (wire_get_time, wire_get_capped).
 */
#include "test_wire.h"

#define DAY 86400ull

struct row {
    uint32_t type;
    const char *path; /* "field", or "array.field" inside the elements of an array of maps */
    enum wire_ftype ftype;
    uint64_t cap; /* the documented bound (int: -cap..cap) */
};

static const struct row rows[] = {
    /* batch role: reservations (the RESV_SET start = INT64_MAX overflow), estimates */
    {WT_RESV_SET, "start", WF_INT, WIRE_TIME_MS_MAX},
    {WT_RESV_SET, "end", WF_INT, WIRE_TIME_MS_MAX},
    {WT_RESV_SET, "duration_s", WF_UINT, WIRE_DURATION_S_MAX},
    {WT_RESV_SET, "tasks", WF_UINT, 1u << 20},
    {WT_RESV_SET, "procs", WF_UINT, 4096},
    {WT_RESV_SET, "mem_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_RESV_SET, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_RESERVE, "start", WF_INT, WIRE_TIME_MS_MAX},
    {WT_RESERVE, "duration_s", WF_UINT, WIRE_DURATION_S_MAX},
    {WT_RESERVE, "procs", WF_UINT, 1u << 20},
    {WT_RESERVE, "mem_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_RESERVE, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_ESTIMATE, "procs", WF_UINT, 1u << 20},
    {WT_ESTIMATE, "walltime_s", WF_UINT, 366 * DAY},
    {WT_ESTIMATE, "mem_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_ESTIMATE, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_ESTIMATE, "max", WF_UINT, 100},
    /* jobs, at every role that takes them (cluster, batch, meta) */
    {WT_SUBMIT, "ntasks", WF_UINT, 10000000},
    {WT_SUBMIT, "limit_s", WF_UINT, 366 * DAY},
    {WT_SUBMIT, "deadline_s", WF_UINT, 366 * DAY},
    {WT_SUBMIT, "known.exit", WF_INT, INT32_MAX},
    {WT_PSUBMIT, "procs", WF_UINT, 4096},
    {WT_PSUBMIT, "ppn", WF_UINT, 4096},
    {WT_PSUBMIT, "mem_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_PSUBMIT, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_PSUBMIT, "cpu_s", WF_UINT, 366 * DAY * 4096},
    {WT_PSUBMIT, "limit_s", WF_UINT, 366 * DAY},
    {WT_PSUBMIT, "deadline_s", WF_UINT, 366 * DAY},
    {WT_PURGE, "older_than_s", WF_UINT, WIRE_TIME_S_MAX},
    {WT_JOB_GET, "from", WF_UINT, UINT32_MAX},
    {WT_JOB_GET, "count", WF_UINT, 100000},
    {WT_EVENTS, "wait_ms", WF_UINT, 30000},
    {WT_EVENTS, "max", WF_UINT, 10000},
    /* nodes -> cluster */
    {WT_HELLO, "cores", WF_UINT, 1u << 20},
    {WT_HELLO, "slots", WF_UINT, 1u << 20},
    {WT_HELLO, "mhz", WF_UINT, 1000000},
    {WT_HELLO, "mem_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_HELLO, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_RESULT, "want", WF_UINT, 1024},
    {WT_RESULT, "results.exit", WF_INT, INT32_MAX},
    {WT_PSYNC, "disk_mb", WF_UINT, WIRE_SIZE_MB_MAX},
    {WT_PSYNC, "wait_ms", WF_UINT, 30000},
    {WT_WORK_WAIT, "wait_ms", WF_UINT, 60000}, /* issue 26 evidence 8 */
    {WT_PSYNC, "procs.rss_kb", WF_UINT, WIRE_SIZE_KB_MAX},
    {WT_PSYNC, "procs.disk_kb", WF_UINT, WIRE_SIZE_KB_MAX},
    {WT_PSYNC, "procs.exit", WF_INT, INT32_MAX},
    /* replies a node, the batch role or the meta role reads */
    {WT_WELCOME, "hb_s", WF_UINT, WIRE_WAIT_S_MAX},
    {WT_WELCOME, "poll_s", WF_UINT, WIRE_WAIT_S_MAX},
    {WT_TASKS, "wait_s", WF_UINT, WIRE_WAIT_S_MAX},
    {WT_PSYNC_ACK, "sync_ms", WF_UINT, WIRE_WAIT_S_MAX * 1000},
    {WT_STARTS, "earliest", WF_INT, WIRE_TIME_MS_MAX},
    {WT_STARTS, "now", WF_INT, WIRE_TIME_MS_MAX},
    {WT_QUEUE, "now", WF_INT, WIRE_TIME_MS_MAX},
    {WT_RESVS, "now", WF_INT, WIRE_TIME_MS_MAX},
};

/* The field list holding the row's field, and that field. */
static const struct wire_field *find_field(const struct row *r, const struct wire_field **list)
{
    const struct wire_desc *d = wire_desc_find(r->type);
    assert_non_null(d);
    const struct wire_field *fields = d->fields;
    const char *key = r->path, *dot = strchr(key, '.');
    if (dot) {
        const struct wire_field *a = NULL;
        for (const struct wire_field *f = fields; f->key && !a; f++)
            if (strlen(f->key) == (size_t)(dot - key) && !strncmp(f->key, key, dot - key))
                a = f;
        if (!a || !a->elem_fields)
            fail_msg("%s: no array of maps '%.*s'", d->name, (int)(dot - key), key);
        fields = a->elem_fields;
        key = dot + 1;
    }
    for (const struct wire_field *f = fields; f->key; f++)
        if (!strcmp(f->key, key)) {
            *list = fields;
            return f;
        }
    fail_msg("%s: no field %s", d->name, r->path);
    return NULL;
}

static void pack_i64(struct wire_buf *wb, const struct mut *m)
{
    msgpack_pack_int64(&wb->pk, (int64_t)m->n);
}

static void pack_u64(struct wire_buf *wb, const struct mut *m)
{
    msgpack_pack_uint64(&wb->pk, m->n);
}

/* Builds the row's message with the field set to v (signed unless big) and decodes it. */
static void check_value(const struct row *r, const struct wire_field *list, const char *key,
                        bool is_signed, uint64_t v, bool ok)
{
    struct mut mu = {list, key, false, is_signed ? pack_i64 : pack_u64, v, NULL};
    const struct wire_desc *d = wire_desc_find(r->type);
    struct wire_buf wb;
    wire_buf_init(&wb);
    build_msg(&wb, d, TEST_ID, false, &mu); /* every field: "known" is optional */
    if (ok) {
        expect_accept(&wb, d->request);
    } else {
        struct wire_error e;
        expect_reject(&wb, d->request, WE_FIELD, &e);
        if (!strstr(e.text, key))
            fail_msg("%s %s: the refusal '%s' does not name the field", d->name, r->path, e.text);
    }
    wire_buf_free(&wb);
}

static void test_field_bounds(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        const struct wire_field *list = NULL, *f = find_field(r, &list);
        if (f->type != r->ftype || f->max != r->cap)
            fail_msg("%s: the descriptor says %s cap %llu, docs/wire.md %s cap %llu", r->path,
                     wire_ftype_name(f->type), (unsigned long long)f->max,
                     wire_ftype_name(r->ftype), (unsigned long long)r->cap);
        bool in = r->ftype == WF_INT;
        /* INT64_MAX, INT64_MIN, -1, the cap, the cap + 1 (and their negatives for int) */
        check_value(r, list, f->key, false, (uint64_t)INT64_MAX, r->cap >= (uint64_t)INT64_MAX);
        check_value(r, list, f->key, true, (uint64_t)INT64_MIN, false);
        check_value(r, list, f->key, true, (uint64_t)-1, in);
        check_value(r, list, f->key, false, r->cap, true);
        check_value(r, list, f->key, false, r->cap + 1, false);
        check_value(r, list, f->key, false, 0, true);
        if (in) {
            check_value(r, list, f->key, true, (uint64_t) - (int64_t)r->cap, true);
            check_value(r, list, f->key, true, (uint64_t)(-(int64_t)r->cap - 1), false);
        }
    }
}

/* The arithmetic the bounds are for stays in int64 at its extremes. */
static void test_bounds_keep_arithmetic_in_range(void **state)
{
    (void)state;
    int64_t r;
    /* RESV_SET: start + duration_s * 1000, and end - start */
    assert_false(
        __builtin_add_overflow((int64_t)WIRE_TIME_MS_MAX, (int64_t)WIRE_DURATION_S_MAX * 1000, &r));
    assert_false(__builtin_sub_overflow((int64_t)WIRE_TIME_MS_MAX, -(int64_t)WIRE_TIME_MS_MAX, &r));
    /* PURGE: now - older_than_s * 1000 */
    assert_false(
        __builtin_sub_overflow((int64_t)WIRE_TIME_MS_MAX, (int64_t)WIRE_TIME_S_MAX * 1000, &r));
    /* per-host memory of a parallel job, and a reservation's memory */
    assert_false(__builtin_mul_overflow((int64_t)WIRE_SIZE_MB_MAX, (int64_t)4096, &r));
    assert_false(__builtin_mul_overflow((int64_t)WIRE_SIZE_MB_MAX, (int64_t)(1 << 20), &r));
    /* a site's queued + running elements in hours of work (meta) */
    assert_false(__builtin_mul_overflow((int64_t)UINT32_MAX * 2, (int64_t)3600000, &r));
}

/* A map {key: v} (v signed or not), decoded. */
static void one_map(struct wire_buf *wb, msgpack_unpacked *up, const char *key, bool is_signed,
                    uint64_t v)
{
    wire_buf_reset(wb);
    wire_pack_map(wb, 1);
    wire_pack_str(wb, key);
    if (is_signed)
        msgpack_pack_int64(&wb->pk, (int64_t)v);
    else
        msgpack_pack_uint64(&wb->pk, v);
    msgpack_unpacked_init(up);
    assert_int_equal(msgpack_unpack_next(up, wb->sb.data, wb->sb.size, NULL),
                     MSGPACK_UNPACK_SUCCESS);
}

static void test_free_form_readers(void **state)
{
    (void)state;
    static const struct {
        bool is_signed;
        uint64_t v;
        int64_t time;   /* wire_get_time(.., dflt 5) */
        uint64_t count; /* wire_get_capped(.., dflt 5, cap 1000) */
    } cases[] = {
        {false, (uint64_t)INT64_MAX, 5, 1000},
        {false, UINT64_MAX, 5, 1000},
        {true, (uint64_t)INT64_MIN, 5, 5},
        {true, (uint64_t)-1, -1, 5},
        {false, WIRE_TIME_MS_MAX, (int64_t)WIRE_TIME_MS_MAX, 1000},
        {false, WIRE_TIME_MS_MAX + 1, 5, 1000},
        {true, (uint64_t) - (int64_t)WIRE_TIME_MS_MAX, -(int64_t)WIRE_TIME_MS_MAX, 5},
        {true, (uint64_t)(-(int64_t)WIRE_TIME_MS_MAX - 1), 5, 5},
        {false, 999, 999, 999},
        {false, 1001, 1001, 1000},
    };
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msgpack_unpacked up;
        one_map(&wb, &up, "t", cases[i].is_signed, cases[i].v);
        assert_int_equal(wire_get_time(&up.data, "t", 5), cases[i].time);
        assert_int_equal(wire_get_capped(&up.data, "t", 5, 1000), cases[i].count);
        assert_int_equal(wire_get_time(&up.data, "absent", 5), 5);
        msgpack_unpacked_destroy(&up);
    }
    wire_buf_free(&wb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field_bounds),
        cmocka_unit_test(test_bounds_keep_arithmetic_in_range),
        cmocka_unit_test(test_free_form_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_wire_bound.c - the decoder's cost bound (wire/bound.c): frames whose declared
 * content exceeds what their type's descriptor can need are refused from the headers
 * alone, before msgpack-c builds objects for them. Peak memory is measured with
 * getrusage(ru_maxrss) around each decode, after the frame itself is in memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "wire/bound.h"
#include "wire/wire.h"

#define BIG_NILS (60u << 20) /* the 60 MiB of nils */
/* Growth of peak RSS a refused frame may cause: far below the frame (and the ~1.5 GB
   msgpack-c would build), yet loose enough for allocator noise and ASan. */
#define RSS_SLACK_KB (24 * 1024)

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/*
 * A frame: the envelope (type t, id 7) and then `key` holding an array32 of n nils,
 * plus `extra` entries (each packed by the caller into pre, pre_len bytes) before it.
 * The whole buffer is written, so it counts in RSS before the decode starts.
 */
static uint8_t *nil_frame(uint32_t t, const char *key, uint32_t n, size_t *len)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, t, 7, 1);
    wire_put_key(&wb, key);
    msgpack_pack_array(&wb.pk, n);
    size_t head = wb.sb.size;
    uint8_t *p = malloc(head + n);
    assert_non_null(p);
    memcpy(p, wb.sb.data, head);
    memset(p + head, 0xc0, n);
    wire_buf_free(&wb);
    *len = head + n;
    return p;
}

/* Decodes buf; expects failure with code and a text containing `needle`; checks RSS. */
static void expect_refused(const uint8_t *buf, size_t len, bool want_request, int code,
                           const char *needle)
{
    struct wire_msg m;
    struct wire_error e;
    long before = maxrss_kb();
    int rc = wire_decode(buf, len, want_request, &m, &e);
    long grew = maxrss_kb() - before;
    if (rc == 0)
        wire_msg_free(&m);
    assert_int_equal(rc, -1);
    if (e.code != code || !strstr(e.text, needle))
        fail_msg("got %d '%s', expected %d with '%s'", e.code, e.text, code, needle);
    if (grew > RSS_SLACK_KB)
        fail_msg("peak RSS grew by %ld KiB decoding a %zu-byte frame", grew, len);
}

static void test_unknown_key_nils(void **state)
{
    (void)state;
    size_t len;
    uint8_t *p = nil_frame(WT_HELLO, "junk", BIG_NILS, &len);
    expect_refused(p, len, true, WE_FIELD, "unknown field 'junk' holds too many values");
    struct wire_msg m;
    struct wire_error e;
    assert_int_equal(wire_decode(p, len, true, &m, &e), -1);
    assert_int_equal(e.id, 7); /* the reply can still carry the request id */
    free(p);
}

static void test_array_over_cap_nils(void **state)
{
    (void)state;
    size_t len;
    uint8_t *p = nil_frame(WT_RESULT, "results", BIG_NILS, &len);
    expect_refused(p, len, true, WE_FIELD, "RESULT: field 'results' has 62914560 elements");
    free(p);
    /* a default-capped array (argv of SUBMIT: 256) */
    p = nil_frame(WT_SUBMIT, "argv", 1u << 20, &len);
    expect_refused(p, len, true, WE_FIELD, "field 'argv' has 1048576 elements, more than 256");
    free(p);
}

static void test_container_in_scalar_field(void **state)
{
    (void)state;
    size_t len;
    uint8_t *p = nil_frame(WT_HELLO, "node", BIG_NILS, &len);
    expect_refused(p, len, true, WE_FIELD, "HELLO: field 'node' must be of type str");
    free(p);
}

/* Replies with free-form maps (NODES) are bounded by the total of values. */
static void test_free_form_total(void **state)
{
    (void)state;
    uint32_t n = WIRE_MAX_VALUES; /* empty maps: one value each, plus the array itself */
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_NODES, 7, 1);
    wire_put_key(&wb, "nodes");
    msgpack_pack_array(&wb.pk, n);
    size_t head = wb.sb.size, len = head + n;
    uint8_t *p = malloc(len);
    assert_non_null(p);
    memcpy(p, wb.sb.data, head);
    memset(p + head, 0x80, n);
    wire_buf_free(&wb);
    expect_refused(p, len, false, WE_FIELD, "NODES: the message holds more than");
    /* the same reply with fewer nodes is fine */
    struct wire_msg m;
    struct wire_error e;
    p[head - 4] = 0, p[head - 3] = 0, p[head - 2] = 0x10, p[head - 1] = 0; /* 4096 nodes */
    assert_int_equal(wire_decode(p, head + 4096, false, &m, &e), 0);
    assert_int_equal(m.root->via.map.size, 4);
    wire_msg_free(&m);
    free(p);
}

/* The envelope is judged before anything is built, in the documented order. */
static void test_envelope_before_build(void **state)
{
    (void)state;
    size_t len;
    uint8_t *p = nil_frame(999, "junk", BIG_NILS, &len);
    expect_refused(p, len, true, WE_TYPE, "\"t\" missing or unknown");
    free(p);
    p = nil_frame(WT_NODES, "junk", BIG_NILS, &len);
    expect_refused(p, len, true, WE_TYPE, "NODES is not a request");
    free(p);
    /* a root that is not a map is refused without building it */
    uint8_t *a = malloc(5 + BIG_NILS);
    assert_non_null(a);
    a[0] = 0xdd, a[1] = 0x03, a[2] = 0xc0, a[3] = 0, a[4] = 0;
    memset(a + 5, 0xc0, BIG_NILS);
    expect_refused(a, 5 + BIG_NILS, true, WE_MALFORMED, "must be a msgpack map");
    free(a);
}

/* Small additions under unknown keys (a newer peer) are still accepted. */
static void test_small_unknown_accepted(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_LIST, 7, 2);
    wire_put_key(&wb, "future");
    wire_pack_array(&wb, 1000);
    for (int i = 0; i < 1000; i++)
        wire_pack_u64(&wb, (uint64_t)i);
    wire_put_str(&wb, "note", "hi");
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, true, &m, &e), 0);
    wire_msg_free(&m);
    /* just over the allowance across two keys */
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 7, 2);
    wire_put_key(&wb, "a");
    wire_pack_array(&wb, WIRE_UNKNOWN_VALUES / 2);
    for (uint32_t i = 0; i < WIRE_UNKNOWN_VALUES / 2; i++)
        msgpack_pack_nil(&wb.pk);
    wire_put_key(&wb, "b");
    wire_pack_array(&wb, WIRE_UNKNOWN_VALUES / 2);
    for (uint32_t i = 0; i < WIRE_UNKNOWN_VALUES / 2; i++)
        msgpack_pack_nil(&wb.pk);
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, true, &m, &e), -1);
    assert_int_equal(e.code, WE_FIELD);
    assert_non_null(strstr(e.text, "unknown field 'b'"));
    wire_buf_free(&wb);
}

/* Nested field lists are walked: one result map with a huge unknown value. */
static void test_nested_unknown(void **state)
{
    (void)state;
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_RESULT, 7, 3);
    wire_put_str(&wb, "sid", "s");
    wire_put_u64(&wb, "want", 0);
    wire_put_key(&wb, "results");
    wire_pack_array(&wb, 1);
    wire_pack_map(&wb, 5);
    wire_put_u64(&wb, "job", 1);
    wire_put_u64(&wb, "idx", 0);
    wire_put_u64(&wb, "issue", 1);
    wire_put_u64(&wb, "exit", 0);
    wire_put_key(&wb, "blob");
    msgpack_pack_map(&wb.pk, 1u << 20);
    size_t head = wb.sb.size, len = head + (2u << 20);
    uint8_t *p = malloc(len);
    assert_non_null(p);
    memcpy(p, wb.sb.data, head);
    memset(p + head, 0xc0, 2u << 20);
    wire_buf_free(&wb);
    expect_refused(p, len, true, WE_FIELD, "unknown field 'blob'");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_key_nils),
        cmocka_unit_test(test_array_over_cap_nils),
        cmocka_unit_test(test_container_in_scalar_field),
        cmocka_unit_test(test_free_form_total),
        cmocka_unit_test(test_envelope_before_build),
        cmocka_unit_test(test_small_unknown_accepted),
        cmocka_unit_test(test_nested_unknown),
    };
    return cmocka_run_group_tests_name("wire_bound", tests, NULL, NULL);
}

/*
 * test_text.c - lib/text.c: cutting text on UTF-8 character boundaries (every cut
 * position of multi-byte strings, 4-byte sequences, invalid input), in-place repair of
 * buffers vsnprintf cut, display escaping; and the wire paths built on them
 * (wire_get_strbuf, wire_error_msg, wire_pack_strn, wire_pack_object) never producing
 * invalid UTF-8.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "lib/text.h"
#include "wire/wire.h"

/* 1-, 2-, 3- and 4-byte characters: "a", e-acute, euro sign, U+1F600 */
static const char mixed[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z\xf0\x9f\x98\x80";

static bool is_boundary(const char *s, size_t i)
{
    return (s[i] & 0xc0) != 0x80;
}

static void test_copy_every_cut(void **state)
{
    (void)state;
    size_t n = strlen(mixed);
    for (size_t cap = 0; cap <= n + 2; cap++) {
        char buf[64];
        memset(buf, 'X', sizeof buf);
        size_t got = text_copy(buf, cap, mixed, n);
        if (cap == 0) {
            assert_int_equal(got, 0);
            assert_int_equal(buf[0], 'X');
            continue;
        }
        assert_true(got <= cap - 1);
        assert_int_equal(buf[got], '\0');
        assert_memory_equal(buf, mixed, got);
        assert_true(got == n || is_boundary(mixed, got));
        assert_true(text_utf8_valid(buf, got));
        /* the longest boundary that fits was taken */
        size_t best = 0;
        for (size_t i = 0; i <= n && i <= cap - 1; i++)
            if (i == n || is_boundary(mixed, i))
                best = i;
        assert_int_equal(got, best);
    }
}

static void test_copy_invalid(void **state)
{
    (void)state;
    char buf[32];
    /* lone continuation, overlong, surrogate, > U+10FFFF, cut 3-byte, 0xff */
    const char bad[] = "\x80x\xc0\xafy\xed\xa0\x80z\xf4\x90\x80\x80w\xe2\x82";
    size_t got = text_copy(buf, sizeof buf, bad, sizeof bad - 1);
    assert_true(text_utf8_valid(buf, got));
    assert_string_equal(buf, "?x??y???z????w??");
    assert_false(text_utf8_valid(bad, sizeof bad - 1));
    assert_true(text_utf8_valid(mixed, strlen(mixed)));
    /* NUL bytes stay data (a NUL-terminated result ends at the first) */
    got = text_copy(buf, sizeof buf, "a\0b", 3);
    assert_int_equal(got, 3);
}

static void test_seq_len(void **state)
{
    (void)state;
    assert_int_equal(text_seq_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(text_seq_len((const unsigned char *)"\xf0\x9f\x98\x80", 3), 0);
    assert_int_equal(text_seq_len((const unsigned char *)"\xf0\x8f\x98\x80", 4), 0);
    assert_int_equal(text_seq_len((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
    assert_int_equal(text_seq_len((const unsigned char *)"\xf5\x80\x80\x80", 4), 0);
    assert_int_equal(text_seq_len((const unsigned char *)"\xe0\x9f\x80", 3), 0);
    assert_int_equal(text_seq_len((const unsigned char *)"\xee\x80\x80", 3), 3);
    assert_int_equal(text_seq_len((const unsigned char *)"", 0), 0);
}

static void test_fix_every_cut(void **state)
{
    (void)state;
    size_t n = strlen(mixed);
    for (size_t cap = 1; cap <= n + 1; cap++) {
        char buf[64];
        snprintf(buf, cap, "%s", mixed); /* what a fixed buffer does */
        text_fix(buf);
        size_t got = strlen(buf);
        assert_true(text_utf8_valid(buf, got));
        assert_memory_equal(buf, mixed, got);
        assert_true(got == n || is_boundary(mixed, got));
        assert_true(got + 3 >= cap - 1); /* at most one character dropped */
    }
    char bad[] = "\xffok\xc3(\xe2\x82";
    text_fix(bad);
    assert_string_equal(bad, "?ok?(");
}

static void test_escape(void **state)
{
    (void)state;
    char buf[128];
    const char in[] = "a\nb\tc\r\x1b[31m\x7f\\\xc2\x85\xc2\xa0\xe2\x82\xac\xff";
    text_escape(buf, sizeof buf, in, sizeof in - 1);
    assert_string_equal(buf, "a\\nb\\tc\\r\\x1b[31m\\x7f\\\\\\u0085\xc2\xa0\xe2\x82\xac\\xff");
    for (const char *p = buf; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    /* cut only between whole escapes and characters */
    size_t full = strlen(buf);
    for (size_t cap = 1; cap <= full + 1; cap++) {
        char cut[128];
        size_t got = text_escape(cut, cap, in, sizeof in - 1);
        assert_true(got < cap);
        assert_memory_equal(cut, buf, got);
        assert_true(text_utf8_valid(cut, got));
        assert_true(got == full || buf[got] == '\\' || is_boundary(buf, got));
    }
    assert_string_equal(text_esc("x\ny"), "x\\ny");
    assert_string_equal(text_esc(NULL), "(null)");
}

/* The wire paths: nothing the roles send or store is invalid UTF-8. */
static void test_wire_paths(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    wire_buf_init(&wb);
    /* a cut name (valid text cut to 64 bytes inside a character) through the writer */
    char name[300] = "";
    for (int i = 0; i < 80; i++)
        strcat(name, "\xe2\x82\xac");
    char cut[64];
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_ERROR, 1, 2);
    wire_put_u64(&wb, "code", 1);
    snprintf(cut, sizeof cut, "%s", name);
    wire_put_str(&wb, "msg", cut); /* 63 bytes: 21 whole euro signs exactly */
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, false, &m, &e), 0);
    wire_msg_free(&m);
    snprintf(cut, 63, "%s", name); /* 62 bytes: ends inside a character */
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_ERROR, 1, 2);
    wire_put_u64(&wb, "code", 1);
    wire_put_str(&wb, "msg", cut);
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, false, &m, &e), 0);
    /* wire_get_strbuf cuts on a boundary */
    char small[8];
    wire_get_strbuf(m.root, "msg", small, sizeof small);
    assert_string_equal(small, "\xe2\x82\xac\xe2\x82\xac");
    wire_msg_free(&m);
    /* an error text quoting a name cut by the 512-byte buffer */
    wire_buf_reset(&wb);
    char longname[600] = "";
    for (int i = 0; i < 199; i++)
        strcat(longname, "\xe2\x82\xac");
    wire_error_msg(&wb, 9, WE_INVALID, "x%s", longname);
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, false, &m, &e), 0);
    wire_msg_free(&m);
    /* wire_pack_object of a map with an unvalidated str (an echo) stays valid */
    wire_buf_reset(&wb);
    wire_pack_map(&wb, 1);
    wire_pack_str(&wb, "k");
    wire_pack_strn(&wb, "\xff\xfe", 2);
    assert_int_equal(wb.sb.size, 6); /* 81 a1 'k' a2 then the text */
    assert_memory_equal(wb.sb.data + 4, "??", 2);
    /* and wire_pack_object re-packs a decoded str through the same check */
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    const char raw[] = "\x81\xa1k\xa2\xff\xfe";
    assert_int_equal(msgpack_unpack_next(&up, raw, 6, &off), MSGPACK_UNPACK_SUCCESS);
    wire_buf_reset(&wb);
    wire_pack_object(&wb, &up.data);
    assert_int_equal(wb.sb.size, 6);
    assert_memory_equal(wb.sb.data + 4, "??", 2);
    msgpack_unpacked_destroy(&up);
    /* keys must be valid UTF-8: made valid, "k\xff" and "k?" would collide in an echo */
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 3, 1);
    wire_pack_strn(&wb, "k", 1);
    wb.sb.data[wb.sb.size - 2] = (char)0xa2; /* make it a 2-byte key */
    wb.sb.size--;
    msgpack_sbuffer_write(&wb.sb, "k\xff", 2);
    msgpack_pack_nil(&wb.pk);
    assert_int_equal(wire_decode(wb.sb.data, wb.sb.size, true, &m, &e), -1);
    assert_int_equal(e.code, WE_FIELD);
    assert_string_equal(e.text, "JOB_LIST: map keys must be valid UTF-8");
    wire_buf_free(&wb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_every_cut), cmocka_unit_test(test_copy_invalid),
        cmocka_unit_test(test_seq_len),        cmocka_unit_test(test_fix_every_cut),
        cmocka_unit_test(test_escape),         cmocka_unit_test(test_wire_paths),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}

/*
 * test_wire.c - the message codec: the envelope and every rejection path of
 * wire_decode on malformed bytes; the declared-count pre-pass against msgpack-c itself
 * on random inputs (seed printed, GRIDNODE_SEED overrides); readers' defaults, writers
 * and error texts. The descriptor table's own tests are in test_wire_msgs.c.
 */
#include "test_wire.h"

/* ---- envelope ---- */

/* Writes a map with the given envelope entries (a negative value leaves one out). */
struct env {
    int v_kind, t_kind, id_kind; /* 0 absent, 1 uint value, 2 text, 3 negative, 4 float */
    uint64_t v, t, id;
};

static void pack_env_val(struct wire_buf *wb, int kind, uint64_t val)
{
    switch (kind) {
    case 1:
        wire_pack_u64(wb, val);
        break;
    case 2:
        wire_pack_str(wb, "1");
        break;
    case 3:
        msgpack_pack_int64(&wb->pk, -1);
        break;
    case 4:
        msgpack_pack_double(&wb->pk, (double)val);
        break;
    }
}

static void build_env(struct wire_buf *wb, const struct env *e)
{
    wire_buf_reset(wb);
    wire_pack_map(wb, (e->v_kind > 0) + (e->t_kind > 0) + (e->id_kind > 0));
    if (e->v_kind) {
        wire_put_key(wb, "v");
        pack_env_val(wb, e->v_kind, e->v);
    }
    if (e->t_kind) {
        wire_put_key(wb, "t");
        pack_env_val(wb, e->t_kind, e->t);
    }
    if (e->id_kind) {
        wire_put_key(wb, "id");
        pack_env_val(wb, e->id_kind, e->id);
    }
}

static void test_envelope(void **state)
{
    (void)state;
    static const struct {
        struct env e;
        int code;
        uint64_t id; /* expected err.id */
    } cases[] = {
        {{1, 1, 1, WIRE_VERSION, WT_JOB_LIST, 5}, 0, 5},
        {{0, 1, 1, 0, WT_JOB_LIST, 5}, WE_VERSION, 5},
        {{1, 1, 1, WIRE_VERSION + 1, WT_JOB_LIST, 5}, WE_VERSION, 5},
        {{1, 1, 1, 0, WT_JOB_LIST, 5}, WE_VERSION, 5},
        {{2, 1, 1, 0, WT_JOB_LIST, 5}, WE_VERSION, 5},
        {{3, 1, 1, 0, WT_JOB_LIST, 5}, WE_VERSION, 5},
        {{1, 1, 0, WIRE_VERSION, WT_JOB_LIST, 0}, WE_FIELD, 0},
        {{1, 1, 3, WIRE_VERSION, WT_JOB_LIST, 0}, WE_FIELD, 0},
        {{1, 1, 2, WIRE_VERSION, WT_JOB_LIST, 0}, WE_FIELD, 0},
        {{1, 1, 4, WIRE_VERSION, WT_JOB_LIST, 8}, WE_FIELD, 0},
        {{1, 1, 1, WIRE_VERSION, WT_JOB_LIST, UINT64_MAX}, 0, UINT64_MAX},
        {{1, 1, 1, WIRE_VERSION, WT_JOB_LIST, 0}, 0, 0},
        {{1, 0, 1, WIRE_VERSION, 0, 6}, WE_TYPE, 6},
        {{1, 1, 1, WIRE_VERSION, 99, 6}, WE_TYPE, 6},
        {{1, 1, 1, WIRE_VERSION, 0, 6}, WE_TYPE, 6},
        {{1, 2, 1, WIRE_VERSION, 0, 6}, WE_TYPE, 6},
        {{1, 3, 1, WIRE_VERSION, 0, 6}, WE_TYPE, 6},
        {{1, 4, 1, WIRE_VERSION, WT_JOB_LIST, 6}, WE_TYPE, 6},
        /* a type that would alias JOB_LIST if truncated to 32 bits */
        {{1, 1, 1, WIRE_VERSION, (1ull << 32) + WT_JOB_LIST, 6}, WE_TYPE, 6},
        {{1, 1, 1, WIRE_VERSION, WT_OK, 6}, WE_TYPE, 6}, /* a reply, not a request */
    };
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct wire_msg m;
        struct wire_error e;
        build_env(&wb, &cases[i].e);
        int rc = wire_decode(wb.sb.data, wb.sb.size, true, &m, &e);
        if (cases[i].code == 0) {
            if (rc < 0)
                fail_msg("case %zu: %s", i, e.text);
            assert_int_equal(m.id, cases[i].id);
            wire_msg_free(&m);
            continue;
        }
        if (rc == 0 || e.code != cases[i].code)
            fail_msg("case %zu: rc %d code %d (%s), want %d", i, rc, e.code, e.text, cases[i].code);
        assert_int_equal(e.id, cases[i].id);
        assert_true(strlen(e.text) > 0);
    }
    /* the reply type passes when replies are wanted */
    struct env ok = {1, 1, 1, WIRE_VERSION, WT_OK, 6};
    build_env(&wb, &ok);
    expect_accept(&wb, false);
    /* a NULL error pointer is allowed */
    struct wire_msg m;
    assert_int_equal(wire_decode("\x90", 1, true, &m, NULL), -1);
    wire_buf_free(&wb);
}

/* ---- malformed bytes ---- */

static void expect_malformed(const void *buf, size_t len, const char *what)
{
    struct wire_msg m;
    struct wire_error e;
    for (int want = 0; want < 2; want++) {
        int rc = wire_decode(buf, len, want, &m, &e);
        if (rc == 0 || e.code != WE_MALFORMED)
            fail_msg("%s: rc %d code %d (%s)", what, rc, e.code, e.text);
        assert_int_equal(e.id, 0);
        assert_false(m.inited);
    }
    assert_int_equal(wire_precheck(buf, len), -1);
}

static void test_empty_trailing_nonmap(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_error e;
    wire_buf_init(&wb);
    expect_malformed("", 0, "empty");
    expect_malformed(NULL, 0, "NULL empty");
    build_msg(&wb, wire_desc_find(WT_HELLO), 3, false, NULL);
    msgpack_pack_nil(&wb.pk);
    expect_malformed(wb.sb.data, wb.sb.size, "trailing nil");
    build_msg(&wb, wire_desc_find(WT_HELLO), 3, false, NULL);
    char *one = malloc(wb.sb.size);
    assert_non_null(one);
    memcpy(one, wb.sb.data, wb.sb.size);
    msgpack_sbuffer_write(&wb.sb, one, wb.sb.size); /* two messages in one frame */
    free(one);
    expect_malformed(wb.sb.data, wb.sb.size, "two messages");
    /* well-formed but not a map */
    static const uint8_t arr[] = {0x93, 0x01, 0x02, 0x03};
    static const uint8_t num[] = {0x01};
    static const uint8_t str[] = {0xa1, 'v'};
    static const uint8_t nil[] = {0xc0};
    const struct {
        const uint8_t *p;
        size_t n;
    } nonmaps[] = {{arr, sizeof arr}, {num, 1}, {str, sizeof str}, {nil, 1}};
    for (size_t i = 0; i < 4; i++) {
        struct wire_msg m;
        assert_int_equal(wire_precheck(nonmaps[i].p, nonmaps[i].n), 0);
        assert_int_equal(wire_decode(nonmaps[i].p, nonmaps[i].n, true, &m, &e), -1);
        assert_int_equal(e.code, WE_MALFORMED);
        assert_non_null(strstr(e.text, "map"));
    }
    /* non-string keys at the top level */
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 12, 1);
    wire_pack_u64(&wb, 1);
    wire_pack_u64(&wb, 2);
    expect_reject(&wb, true, WE_FIELD, &e);
    assert_int_equal(e.id, 12);
    assert_non_null(strstr(e.text, "keys must be strings"));
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 12, 1);
    wire_pack_bin(&wb, "x", 1); /* bytes are not text */
    wire_pack_u64(&wb, 2);
    expect_reject(&wb, true, WE_FIELD, &e);
    /* unknown string keys are ignored */
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 12, 1);
    wire_put_str(&wb, "future", "x");
    expect_accept(&wb, true);
    wire_buf_free(&wb);
}

static void test_truncated(void **state)
{
    (void)state;
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (const struct wire_desc *d = wire_descs; d->name; d++) {
        build_msg(&wb, d, 300, false, NULL);
        for (size_t n = 0; n < wb.sb.size; n++) {
            /* a private copy so ASan sees any read past the prefix */
            uint8_t *p = malloc(n ? n : 1);
            assert_non_null(p);
            memcpy(p, wb.sb.data, n);
            expect_malformed(p, n, d->name);
            free(p);
        }
    }
    wire_buf_free(&wb);
}

/* A valid JOB_LIST map header declaring one more entry, key "x", then raw bytes. */
static void expect_malformed_tail(const uint8_t *tail, size_t n, const char *what)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_LIST, 1, 1);
    wire_put_key(&wb, "x");
    msgpack_sbuffer_write(&wb.sb, (const char *)tail, n);
    uint8_t *p = malloc(wb.sb.size);
    assert_non_null(p);
    memcpy(p, wb.sb.data, wb.sb.size);
    expect_malformed(p, wb.sb.size, what);
    free(p);
    expect_malformed(tail, n, what); /* and at the root */
    wire_buf_free(&wb);
}

static void test_huge_counts(void **state)
{
    (void)state;
    static const uint8_t cases[][8] = {
        {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0}, /* array32 of 4 G */
        {0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0}, /* map32 */
        {0xdb, 0xff, 0xff, 0xff, 0xff, 'a', 'b'},   /* str32 */
        {0xc6, 0xff, 0xff, 0xff, 0xff, 'a', 'b'},   /* bin32 */
        {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 'b'},  /* ext32 */
        {0xdc, 0xff, 0xff, 0xc0, 0xc0, 0xc0, 0xc0}, /* array16 */
        {0xde, 0xff, 0xff, 0xc0, 0xc0, 0xc0, 0xc0}, /* map16 */
        {0xdd, 0x00, 0x00, 0x00, 0x07, 0xc0, 0xc0}, /* array32 of 7, 2 present */
        {0xdf, 0x00, 0x00, 0x00, 0x02, 0xc0, 0xc0}, /* map32 of 2 = 4 objects, 2 present */
        {0xda, 0x00, 0x03, 'a', 'b', 0, 0},         /* str16 of 3, 2 present (n=5) */
        {0xc7, 0x05, 0x01, 'a', 'b', 'c', 0},       /* ext8 of 5 */
        {0xd8, 0x01, 'a', 'b', 'c', 0, 0},          /* fixext16 */
        {0xcb, 0x00, 0x00, 0x00, 0, 0, 0},          /* float64 cut short */
        {0xdd, 0xff, 0xff, 0xff, 0, 0, 0},          /* length itself cut short (n=4) */
    };
    static const size_t lens[] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 5, 6, 5, 4, 4};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "huge count case %zu", i);
        expect_malformed_tail(cases[i], lens[i], what);
    }
}

static void test_c1_byte(void **state)
{
    (void)state;
    static const uint8_t c1[] = {0xc1};
    static const uint8_t in_array[] = {0x92, 0x01, 0xc1};
    expect_malformed(c1, 1, "0xc1 alone");
    expect_malformed_tail(c1, 1, "0xc1 value");
    expect_malformed_tail(in_array, sizeof in_array, "0xc1 in an array");
}

/* An unknown key "x" holding `depth` nested one-element arrays. */
static int decode_nested(int depth)
{
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_LIST, 1, 1);
    wire_put_key(&wb, "x");
    for (int i = 0; i < depth - 1; i++)
        wire_pack_array(&wb, 1);
    wire_pack_array(&wb, 0);
    int rc = wire_decode(wb.sb.data, wb.sb.size, true, &m, &e);
    if (rc == 0)
        wire_msg_free(&m);
    else
        assert_int_equal(e.code, WE_MALFORMED);
    wire_buf_free(&wb);
    return rc;
}

static void test_nesting(void **state)
{
    (void)state;
    assert_int_equal(decode_nested(1), 0);
    assert_int_equal(decode_nested(20), 0);
    assert_int_equal(decode_nested(40), -1);
    assert_int_equal(decode_nested(1000), -1);
    assert_int_equal(decode_nested(200000), -1); /* the pre-pass has no recursion */
}

/* ---- the pre-pass against msgpack-c (differential property) ---- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    /* xorshift64*: small and reproducible */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static uint32_t rndn(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

/* Packs a random object; depth may go past msgpack-c's 32 on purpose. */
static void pack_random(msgpack_packer *pk, int depth)
{
    uint32_t k = rndn(depth > 40 ? 9 : 12);
    switch (k) {
    case 0:
        msgpack_pack_nil(pk);
        break;
    case 1:
        msgpack_pack_true(pk);
        break;
    case 2:
        msgpack_pack_uint64(pk, rnd() >> rndn(64));
        break;
    case 3:
        msgpack_pack_int64(pk, -(int64_t)(rnd() >> (rndn(63) + 1)) - 1);
        break;
    case 4:
        msgpack_pack_double(pk, 1.5);
        break;
    case 5:
        msgpack_pack_float(pk, 2.5f);
        break;
    case 6:
    case 7: {
        char s[300];
        uint32_t n = rndn(4) == 0 ? rndn(300) : rndn(8);
        memset(s, 'q', n);
        if (k == 6)
            msgpack_pack_str_with_body(pk, s, n);
        else
            msgpack_pack_bin_with_body(pk, s, n);
        break;
    }
    case 8: {
        static const size_t extn[] = {1, 2, 4, 8, 16, 0, 3, 200};
        char s[200] = {0};
        size_t n = extn[rndn(8)];
        msgpack_pack_ext_with_body(pk, s, n, (int8_t)rndn(100));
        break;
    }
    case 9:
    case 10: {
        uint32_t n = rndn(3) == 0 ? rndn(20) : rndn(3);
        msgpack_pack_array(pk, n);
        for (uint32_t i = 0; i < n; i++)
            pack_random(pk, depth + 1);
        break;
    }
    default: {
        uint32_t n = rndn(3);
        msgpack_pack_map(pk, n);
        for (uint32_t i = 0; i < 2 * n; i++)
            pack_random(pk, depth + 1);
        break;
    }
    }
}

/*
 * An upper bound of what msgpack-c would allocate for container headers anywhere in
 * p: every byte is treated as a possible header. Inputs above the bound are not given
 * to msgpack-c when the pre-pass refused them (that allocation is what the pre-pass is
 * for).
 */
static uint64_t alloc_bound(const uint8_t *p, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = 0;
        if (p[i] >= 0x80 && p[i] <= 0x9f)
            c = p[i] & 0x0f;
        else if ((p[i] == 0xdc || p[i] == 0xde) && i + 2 < n)
            c = (uint64_t)p[i + 1] << 8 | p[i + 2];
        else if ((p[i] == 0xdd || p[i] == 0xdf) && i + 4 < n)
            c = (uint64_t)p[i + 1] << 24 | (uint64_t)p[i + 2] << 16 | (uint64_t)p[i + 3] << 8 |
                p[i + 4];
        sum += 2 * c;
    }
    return sum;
}

struct diff_stats {
    int accepted, rejected, deep, skipped;
};

static void diff_one(const uint8_t *p, size_t n, struct diff_stats *st, uint64_t seed, int iter)
{
    int pre = wire_precheck(p, n);
    if (pre < 0 && alloc_bound(p, n) > (1u << 20)) {
        st->skipped++;
        return;
    }
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    int rc = msgpack_unpack_next(&up, (const char *)p, n, &off);
    msgpack_unpacked_destroy(&up);
    if (rc == MSGPACK_UNPACK_NOMEM_ERROR) {
        st->deep++;
        return;
    }
    bool whole = rc == MSGPACK_UNPACK_SUCCESS && off == n;
    if ((pre == 0) != whole)
        fail_msg("seed %llu iteration %d: precheck %d but msgpack rc %d off %zu of %zu",
                 (unsigned long long)seed, iter, pre, rc, off, n);
    if (pre == 0)
        st->accepted++;
    else
        st->rejected++;
}

static uint64_t test_seed(void)
{
    const char *s = getenv("GRIDNODE_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    if (seed == 0)
        seed = 1;
    printf("test_wire: random seed %llu (set GRIDNODE_SEED to repeat)\n", (unsigned long long)seed);
    return seed;
}

static void test_precheck_differential(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    struct diff_stats st = {0};
    rng_state = seed;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (int it = 0; it < 6000; it++) {
        uint8_t buf[4096];
        size_t n;
        if (it % 3 == 0) { /* short random bytes */
            n = rndn(12);
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd();
        } else { /* a random object, possibly damaged */
            int deep = it % 25 == 0 ? 28 + (int)rndn(10) : 0;
            msgpack_sbuffer_clear(&sb);
            for (int d = 0; d < deep; d++) /* past msgpack-c's 32 levels now and then */
                msgpack_pack_array(&pk, 1);
            pack_random(&pk, deep);
            n = sb.size < sizeof buf - 8 ? sb.size : sizeof buf - 8;
            memcpy(buf, sb.data, n);
            switch (rndn(6)) {
            case 0:
                n = n ? rndn((uint32_t)n) : 0;
                break; /* truncate */
            case 1:
                if (n)
                    buf[rndn((uint32_t)n)] = (uint8_t)rnd();
                break; /* flip */
            case 2:
                buf[n++] = (uint8_t)rnd();
                break; /* append */
            default:
                break; /* intact */
            }
        }
        uint8_t *p = malloc(n ? n : 1); /* exact size: ASan catches over-reads */
        assert_non_null(p);
        memcpy(p, buf, n);
        diff_one(p, n, &st, seed, it);
        free(p);
    }
    msgpack_sbuffer_destroy(&sb);
    printf("test_wire: precheck differential: %d accepted, %d rejected, %d too deep, %d "
           "skipped\n",
           st.accepted, st.rejected, st.deep, st.skipped);
    assert_true(st.accepted > 1000);
    assert_true(st.rejected > 1000);
}

/* ---- readers and writers ---- */

static void test_readers(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    char buf[8];
    size_t len = 99;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_JOB_LIST, 1, 9);
    wire_put_u64(&wb, "u", 5);
    wire_put_i64(&wb, "neg", -5);
    wire_put_u64(&wb, "big", UINT64_MAX);
    wire_put_f64(&wb, "f", 0.25);
    wire_put_bool(&wb, "b", true);
    wire_put_str(&wb, "s", "hello world");
    wire_put_bin(&wb, "bin", "\0\1", 2);
    wire_put_key(&wb, "f32");
    msgpack_pack_float(&wb.pk, 1.5f);
    wire_put_strn(&wb, "sn", "abcdef", 3);
    assert_int_equal(decode(&wb, true, &m, &e), 0);
    const msgpack_object *r = m.root;
    assert_int_equal(wire_get_u64(r, "u", 1), 5);
    assert_int_equal(wire_get_u64(r, "neg", 1), 1); /* wrong type: the default */
    assert_int_equal(wire_get_u64(r, "missing", 9), 9);
    assert_true(wire_get_u64(r, "big", 0) == UINT64_MAX);
    assert_int_equal(wire_get_i64(r, "neg", 0), -5);
    assert_int_equal(wire_get_i64(r, "u", 0), 5);
    assert_int_equal(wire_get_i64(r, "big", -1), -1); /* above INT64_MAX */
    assert_int_equal(wire_get_i64(r, "s", -2), -2);
    assert_true(wire_get_f64(r, "f", 0) == 0.25);
    assert_true(wire_get_f64(r, "f32", 0) == 1.5);
    assert_true(wire_get_f64(r, "u", 0) == 5.0);
    assert_true(wire_get_f64(r, "neg", 0) == -5.0);
    assert_true(wire_get_f64(r, "s", 7.5) == 7.5);
    assert_true(wire_get_f64(r, "missing", 7.5) == 7.5);
    assert_true(wire_get_bool(r, "b", false));
    assert_false(wire_get_bool(r, "u", false));
    assert_true(wire_get_bool(r, "missing", true));
    const char *s = wire_get_str(r, "s", &len);
    assert_int_equal(len, 11);
    assert_memory_equal(s, "hello world", 11);
    assert_null(wire_get_str(r, "bin", &len)); /* bytes are not text */
    assert_int_equal(len, 0);
    assert_null(wire_get_str(r, "missing", &len));
    const uint8_t *b = wire_get_bin(r, "bin", &len);
    assert_int_equal(len, 2);
    assert_int_equal(b[1], 1);
    assert_null(wire_get_bin(r, "s", &len));
    wire_get_strbuf(r, "s", buf, sizeof buf);
    assert_string_equal(buf, "hello w"); /* truncated to the buffer */
    wire_get_strbuf(r, "missing", buf, sizeof buf);
    assert_string_equal(buf, "");
    buf[0] = 'z';
    wire_get_strbuf(r, "s", buf, 0); /* cap 0 writes nothing */
    assert_int_equal(buf[0], 'z');
    wire_get_strbuf(r, "sn", buf, sizeof buf);
    assert_string_equal(buf, "abc");
    char *dup = wire_get_strdup(r, "s");
    assert_string_equal(dup, "hello world");
    free(dup);
    assert_null(wire_get_strdup(r, "u"));
    assert_null(wire_get(NULL, "u"));
    assert_null(wire_get(wire_get(r, "u"), "u")); /* not a map */
    wire_msg_free(&m);
    wire_buf_free(&wb);
}

static void test_error_msg(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    char big[1000];
    memset(big, 'e', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    wire_buf_init(&wb);
    wire_error_msg(&wb, 31, WE_NOT_FOUND, "no job %d", 7);
    assert_int_equal(decode(&wb, false, &m, &e), 0);
    assert_int_equal(m.type, WT_ERROR);
    assert_int_equal(m.id, 31);
    assert_int_equal(wire_get_u64(m.root, "code", 0), WE_NOT_FOUND);
    char text[64];
    wire_get_strbuf(m.root, "msg", text, sizeof text);
    assert_string_equal(text, "no job 7");
    wire_msg_free(&m);
    wire_buf_reset(&wb);
    wire_error_msg(&wb, 1, WE_INVALID, "%s", big); /* truncated, still well-formed */
    assert_int_equal(decode(&wb, false, &m, &e), 0);
    size_t len;
    wire_get_str(m.root, "msg", &len);
    assert_true(len > 0 && len < sizeof big - 1);
    wire_msg_free(&m);
    /* wire_pack_object copies a decoded message exactly */
    build_msg(&wb, wire_desc_find(WT_RESULT), 5, false, NULL);
    assert_int_equal(decode(&wb, true, &m, &e), 0);
    struct wire_buf copy;
    wire_buf_init(&copy);
    wire_pack_object(&copy, m.root);
    assert_int_equal(copy.sb.size, wb.sb.size);
    assert_memory_equal(copy.sb.data, wb.sb.data, wb.sb.size);
    wire_msg_free(&m);
    wire_buf_free(&copy);
    wire_buf_free(&wb);
}

/* The error text names the message and the field even for long keys or values. */
/* A key given twice is refused, at the top level and inside a nested map: msgpack-c
 * and Python's msgpack disagree on which copy wins. Maps over 256 entries too. */
static void test_duplicate_keys_and_big_maps(void **state)
{
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    (void)state;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_TASK_GET, 7, 3);
    wire_put_str(&wb, "sid", "abc");
    wire_put_u64(&wb, "want", 1);
    wire_put_u64(&wb, "want", 1000);
    assert_int_equal(decode(&wb, true, &m, &e), -1);
    assert_int_equal(e.code, WE_FIELD);
    assert_non_null(strstr(e.text, "'want' appears twice"));
    assert_int_equal(e.id, 7);
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_STATUS, 8, 2);
    wire_put_str(&wb, "sid", "abc");
    wire_put_key(&wb, "running");
    wire_pack_array(&wb, 1);
    wire_pack_map(&wb, 4);
    wire_put_u64(&wb, "job", 1);
    wire_put_u64(&wb, "idx", 2);
    wire_put_u64(&wb, "issue", 3);
    wire_put_u64(&wb, "idx", 9);
    assert_int_equal(decode(&wb, true, &m, &e), -1);
    assert_non_null(strstr(e.text, "'idx' appears twice"));
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_JOB_LIST, 9, 300);
    for (int i = 0; i < 300; i++) {
        char k[16];
        snprintf(k, sizeof k, "x%d", i);
        wire_put_u64(&wb, k, 1);
    }
    assert_int_equal(decode(&wb, true, &m, &e), -1);
    assert_non_null(strstr(e.text, "more than 256"));
    wire_buf_free(&wb);
}

static void test_error_text_bounded(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_error e;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_TASK_GET, 8, 2);
    wire_put_str(&wb, "sid", "s");
    wire_put_u64(&wb, "want", 1025);
    expect_reject(&wb, true, WE_FIELD, &e);
    assert_int_equal(e.id, 8);
    assert_non_null(strstr(e.text, "TASK_GET: field 'want' is 1025, above its maximum 1024"));
    assert_true(strlen(e.text) < sizeof e.text);
    wire_buf_free(&wb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope),
        cmocka_unit_test(test_empty_trailing_nonmap),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_c1_byte),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_precheck_differential),
        cmocka_unit_test(test_readers),
        cmocka_unit_test(test_error_msg),
        cmocka_unit_test(test_error_text_bounded),
        cmocka_unit_test(test_duplicate_keys_and_big_maps),
    };
    return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}

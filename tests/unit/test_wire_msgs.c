/*
 * test_wire_msgs.c - the descriptor table (wire/msgs.c): every descriptor is sane and
 * round-trips, built generically from its field table (test_wire.h); each required
 * field is required, each field's type and cap is enforced, nested maps are checked.
 */
#include "test_wire.h"

/* Checks a decoded value against what pack_valid wrote. */
static void check_valid(const msgpack_object *o, enum wire_ftype t, uint64_t max,
                        enum wire_ftype elem, const struct wire_field *ef, bool required_only)
{
    switch (t) {
    case WF_UINT:
        assert_int_equal(o->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        assert_int_equal(o->via.u64, valid_uint(max));
        break;
    case WF_INT:
        assert_int_equal(o->type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
        assert_int_equal(o->via.i64, -7);
        break;
    case WF_FLOAT:
        assert_int_equal(o->type, MSGPACK_OBJECT_FLOAT64);
        assert_true(o->via.f64 == 2.5);
        break;
    case WF_BOOL:
        assert_int_equal(o->type, MSGPACK_OBJECT_BOOLEAN);
        assert_true(o->via.boolean);
        break;
    case WF_STR:
        assert_int_equal(o->type, MSGPACK_OBJECT_STR);
        assert_int_equal(o->via.str.size, max && max < 5 ? max : 5);
        assert_memory_equal(o->via.str.ptr, "hello", o->via.str.size);
        break;
    case WF_BIN:
        assert_int_equal(o->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(o->via.bin.size, 3);
        assert_memory_equal(o->via.bin.ptr, "\0\1\2", 3);
        break;
    case WF_ARRAY:
        assert_int_equal(o->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(o->via.array.size, 2);
        for (uint32_t i = 0; i < 2; i++)
            check_valid(&o->via.array.ptr[i], elem, 0, elem, ef, required_only);
        break;
    case WF_MAP:
        assert_int_equal(o->type, MSGPACK_OBJECT_MAP);
        if (!ef) {
            assert_int_equal(wire_get_u64(o, "k", 0), 1);
            break;
        }
        for (const struct wire_field *f = ef; f->key; f++) {
            const msgpack_object *v = wire_get(o, f->key);
            if (!f->required && required_only) {
                assert_null(v);
                continue;
            }
            assert_non_null(v);
            check_valid(v, f->type, f->max, f->elem, f->elem_fields, required_only);
        }
        break;
    }
}

/* ---- round trips ---- */

static void test_descs_sane(void **state)
{
    (void)state;
    int n = 0;
    for (const struct wire_desc *d = wire_descs; d->name; d++, n++) {
        assert_ptr_equal(wire_desc_find(d->type), d);
        assert_non_null(d->fields);
        for (const struct wire_desc *o = d + 1; o->name; o++) {
            assert_int_not_equal(o->type, d->type);
            assert_string_not_equal(o->name, d->name);
        }
        for (const struct wire_field *f = d->fields; f->key; f++) {
            assert_string_not_equal(f->key, "v");
            assert_string_not_equal(f->key, "t");
            assert_string_not_equal(f->key, "id");
            for (const struct wire_field *g = f + 1; g->key; g++)
                assert_string_not_equal(f->key, g->key);
        }
    }
    assert_true(n >= 19);
    assert_null(wire_desc_find(0));
    assert_null(wire_desc_find(3));
    assert_null(wire_desc_find(UINT32_MAX));
    assert_string_equal(wire_err_name(WE_MALFORMED), "MALFORMED");
    assert_string_equal(wire_err_name(WE_STATE), "STATE");
    assert_string_equal(wire_err_name(0), "UNKNOWN");
    assert_string_equal(wire_err_name(99), "UNKNOWN");
    assert_string_equal(wire_err_name(-1), "UNKNOWN");
}

static void roundtrip_one(const struct wire_desc *d, bool required_only)
{
    struct wire_buf wb;
    struct wire_msg m;
    struct wire_error e;
    wire_buf_init(&wb);
    build_msg(&wb, d, TEST_ID, required_only, NULL);
    if (wire_decode(wb.sb.data, wb.sb.size, false, &m, &e) < 0)
        fail_msg("%s (required_only %d): %s", d->name, required_only, e.text);
    assert_ptr_equal(m.desc, d);
    assert_int_equal(m.type, d->type);
    assert_int_equal(m.id, TEST_ID);
    assert_int_equal(wire_get_u64(m.root, "v", 0), WIRE_VERSION);
    check_valid(m.root, WF_MAP, 0, WF_MAP, d->fields, required_only);
    wire_msg_free(&m);
    wire_msg_free(&m); /* twice is harmless */
    if (d->request) {
        expect_accept(&wb, true);
    } else {
        expect_reject(&wb, true, WE_TYPE, &e);
        assert_int_equal(e.id, TEST_ID);
        assert_non_null(strstr(e.text, d->name));
    }
    wire_buf_free(&wb);
}

static void test_roundtrip_all(void **state)
{
    (void)state;
    for (const struct wire_desc *d = wire_descs; d->name; d++) {
        roundtrip_one(d, false);
        roundtrip_one(d, true);
    }
}

/* Optional fields sent as nil count as absent; required ones as missing. */
static void pack_nil(struct wire_buf *wb, const struct mut *m)
{
    (void)m;
    msgpack_pack_nil(&wb->pk);
}

/* Calls fn for every (table, field) reachable from d, each table once. */
typedef void (*field_fn)(const struct wire_desc *d, const struct wire_field *table,
                         const struct wire_field *f);
static void walk_fields(const struct wire_desc *d, const struct wire_field *table, field_fn fn,
                        const struct wire_field **seen, int *nseen)
{
    for (int i = 0; i < *nseen; i++)
        if (seen[i] == table)
            return;
    seen[(*nseen)++] = table;
    for (const struct wire_field *f = table; f->key; f++) {
        fn(d, table, f);
        if (f->elem_fields)
            walk_fields(d, f->elem_fields, fn, seen, nseen);
    }
}

static void for_each_field(field_fn fn)
{
    for (const struct wire_desc *d = wire_descs; d->name; d++) {
        const struct wire_field *seen[32];
        int nseen = 0;
        walk_fields(d, d->fields, fn, seen, &nseen);
    }
}

static void missing_one(const struct wire_desc *d, const struct wire_field *table,
                        const struct wire_field *f)
{
    struct wire_buf wb;
    struct wire_error e;
    struct mut omit = {table, f->key, true, NULL, 0, f};
    struct mut nil = {table, f->key, false, pack_nil, 0, f};
    wire_buf_init(&wb);
    build_msg(&wb, d, TEST_ID, false, &omit);
    if (f->required) {
        expect_reject(&wb, false, WE_FIELD, &e);
        assert_int_equal(e.id, TEST_ID);
        assert_non_null(strstr(e.text, f->key));
        assert_non_null(strstr(e.text, "required"));
        assert_non_null(strstr(e.text, d->name));
    } else {
        expect_accept(&wb, false);
    }
    build_msg(&wb, d, TEST_ID, false, &nil);
    if (f->required)
        expect_reject(&wb, false, WE_FIELD, &e);
    else
        expect_accept(&wb, false);
    wire_buf_free(&wb);
}

static void test_missing_required(void **state)
{
    (void)state;
    for_each_field(missing_one);
}

/* ---- wrong types ---- */

enum kind { K_POS, K_NEG, K_BIGU, K_F64, K_F32, K_BOOL, K_STR, K_BIN, K_ARR, K_MAP, K_NKINDS };

static void pack_kind(struct wire_buf *wb, const struct mut *m)
{
    switch ((enum kind)m->n) {
    case K_POS:
        wire_pack_u64(wb, 3);
        break;
    case K_NEG:
        msgpack_pack_int64(&wb->pk, -3);
        break;
    case K_BIGU:
        wire_pack_u64(wb, UINT64_MAX);
        break;
    case K_F64:
        msgpack_pack_double(&wb->pk, 0.5);
        break;
    case K_F32:
        msgpack_pack_float(&wb->pk, 0.5f);
        break;
    case K_BOOL:
        msgpack_pack_false(&wb->pk);
        break;
    case K_STR:
        wire_pack_str(wb, "x");
        break;
    case K_BIN:
        wire_pack_bin(wb, "x", 1);
        break;
    case K_ARR:
        wire_pack_array(wb, 0);
        break;
    case K_MAP:
        wire_pack_map(wb, 0);
        break;
    case K_NKINDS:
        break;
    }
}

static bool has_required(const struct wire_field *fields)
{
    for (const struct wire_field *f = fields; f && f->key; f++)
        if (f->required)
            return true;
    return false;
}

/* Whether a value of kind k is acceptable for field f. */
static bool kind_ok(const struct wire_field *f, enum kind k)
{
    switch (f->type) {
    case WF_UINT:
        return k == K_POS || (k == K_BIGU && f->max == 0);
    case WF_INT:
        return k == K_POS || k == K_NEG;
    case WF_FLOAT:
        return k <= K_F32;
    case WF_BOOL:
        return k == K_BOOL;
    case WF_STR:
        return k == K_STR;
    case WF_BIN:
        return k == K_BIN;
    case WF_ARRAY:
        return k == K_ARR;
    case WF_MAP:
        return k == K_MAP && !has_required(f->elem_fields);
    }
    return false;
}

static void wrong_types_one(const struct wire_desc *d, const struct wire_field *table,
                            const struct wire_field *f)
{
    struct wire_buf wb;
    struct wire_error e;
    wire_buf_init(&wb);
    for (int k = 0; k < K_NKINDS; k++) {
        struct mut mu = {table, f->key, false, pack_kind, (uint64_t)k, f};
        build_msg(&wb, d, TEST_ID, false, &mu);
        if (kind_ok(f, (enum kind)k)) {
            expect_accept(&wb, false);
            continue;
        }
        expect_reject(&wb, false, WE_FIELD, &e);
        assert_int_equal(e.id, TEST_ID);
        if (!strstr(e.text, f->key) && !strstr(e.text, "required"))
            fail_msg("%s.%s kind %d: error does not name the field: %s", d->name, f->key, k,
                     e.text);
    }
    wire_buf_free(&wb);
}

static void test_wrong_types(void **state)
{
    (void)state;
    for_each_field(wrong_types_one);
}

/* ---- caps ---- */

static void pack_sized(struct wire_buf *wb, const struct mut *m)
{
    const struct wire_field *f = m->f;
    switch (f->type) {
    case WF_UINT:
        wire_pack_u64(wb, m->n);
        break;
    case WF_STR:
    case WF_BIN: {
        char *s = malloc(m->n + 1);
        assert_non_null(s);
        memset(s, 'a', m->n);
        if (f->type == WF_STR)
            wire_pack_strn(wb, s, m->n);
        else
            wire_pack_bin(wb, s, m->n);
        free(s);
        break;
    }
    case WF_ARRAY:
        wire_pack_array(wb, (uint32_t)m->n);
        for (uint64_t i = 0; i < m->n; i++)
            pack_valid(wb, f->elem, 0, f->elem, f->elem_fields, true, NULL);
        break;
    case WF_MAP:
        wire_pack_map(wb, (uint32_t)m->n);
        for (uint64_t i = 0; i < m->n; i++) {
            char k[24];
            snprintf(k, sizeof k, "k%llu", (unsigned long long)i);
            wire_pack_str(wb, k);
            wire_pack_u64(wb, i);
        }
        break;
    default:
        break;
    }
}

static uint64_t field_cap(const struct wire_field *f)
{
    switch (f->type) {
    case WF_UINT:
        return f->max;
    case WF_STR:
        return f->max ? f->max : DEFAULT_STR_CAP;
    case WF_BIN:
        return f->max ? f->max : DEFAULT_BIN_CAP;
    case WF_ARRAY:
        return f->max ? f->max : DEFAULT_ARRAY_CAP;
    case WF_MAP:
        return f->elem_fields ? 0 : f->max;
    default:
        return 0;
    }
}

static int ncaps_tested;

static void caps_one(const struct wire_desc *d, const struct wire_field *table,
                     const struct wire_field *f)
{
    struct wire_buf wb;
    struct wire_error e;
    uint64_t cap = field_cap(f);
    /* arrays capped at UINT32_MAX (replies listing jobs or nodes) are not built */
    if (cap == 0 || (f->type != WF_UINT && cap > (32u << 20)))
        return;
    wire_buf_init(&wb);
    struct mut at = {table, f->key, false, pack_sized, cap, f};
    struct mut over = {table, f->key, false, pack_sized, cap + 1, f};
    build_msg(&wb, d, TEST_ID, false, &at); /* at the cap is accepted */
    expect_accept(&wb, false);
    build_msg(&wb, d, TEST_ID, false, &over);
    expect_reject(&wb, false, WE_FIELD, &e);
    assert_int_equal(e.id, TEST_ID);
    assert_non_null(strstr(e.text, f->key));
    ncaps_tested++;
    wire_buf_free(&wb);
}

static void test_caps(void **state)
{
    (void)state;
    ncaps_tested = 0;
    for_each_field(caps_one);
    printf("test_wire_msgs: %d field caps checked\n", ncaps_tested);
    assert_true(ncaps_tested >= 40);
}

/* argv elements (strings inside an array) get the default string cap. */
static void test_array_element_caps(void **state)
{
    (void)state;
    struct wire_buf wb;
    struct wire_error e;
    char *big = malloc(DEFAULT_STR_CAP + 2);
    assert_non_null(big);
    memset(big, 'x', DEFAULT_STR_CAP + 1);
    big[DEFAULT_STR_CAP + 1] = '\0';
    wire_buf_init(&wb);
    wire_begin(&wb, WT_SUBMIT, 9, 2);
    wire_put_u64(&wb, "ntasks", 1);
    wire_put_key(&wb, "argv");
    wire_pack_array(&wb, 2);
    wire_pack_str(&wb, "echo");
    wire_pack_str(&wb, big);
    expect_reject(&wb, true, WE_FIELD, &e);
    assert_non_null(strstr(e.text, "argv"));
    big[DEFAULT_STR_CAP] = '\0';
    wire_buf_reset(&wb);
    wire_begin(&wb, WT_SUBMIT, 9, 2);
    wire_put_u64(&wb, "ntasks", 1);
    wire_put_key(&wb, "argv");
    wire_pack_array(&wb, 2);
    wire_pack_str(&wb, "echo");
    wire_pack_str(&wb, big);
    expect_accept(&wb, true);
    free(big);
    wire_buf_free(&wb);
}

/* ---- nested maps ---- */

static void pack_results(struct wire_buf *wb, const struct mut *m)
{
    const struct wire_desc *d = wire_desc_find(WT_RESULT);
    const struct wire_field *rf = d->fields[1].elem_fields;
    wire_pack_array(wb, 2);
    pack_valid(wb, WF_MAP, 0, WF_MAP, rf, true, NULL);
    switch (m->n) {
    case 0:
        wire_pack_u64(wb, 5);
        break; /* not a map */
    case 1:    /* a non-string key */
        wire_pack_map(wb, 1);
        wire_pack_u64(wb, 1);
        wire_pack_u64(wb, 2);
        break;
    case 2: /* exit as text */
        wire_pack_map(wb, 4);
        wire_put_u64(wb, "job", 1);
        wire_put_u64(wb, "idx", 1);
        wire_put_u64(wb, "issue", 1);
        wire_put_str(wb, "exit", "0");
        break;
    default: /* idx above UINT32_MAX */
        wire_pack_map(wb, 4);
        wire_put_u64(wb, "job", 1);
        wire_put_u64(wb, "idx", (uint64_t)UINT32_MAX + 1);
        wire_put_u64(wb, "issue", 1);
        wire_put_i64(wb, "exit", 0);
        break;
    }
}

static void test_nested_element_wrong(void **state)
{
    (void)state;
    const struct wire_desc *d = wire_desc_find(WT_RESULT);
    const char *want[] = {"must be of type map", "keys must be strings", "'exit'", "'idx'"};
    struct wire_buf wb;
    struct wire_error e;
    assert_string_equal(d->fields[1].key, "results");
    wire_buf_init(&wb);
    for (uint64_t i = 0; i < 4; i++) {
        struct mut mu = {d->fields, "results", false, pack_results, i, &d->fields[1]};
        build_msg(&wb, d, 77, true, &mu);
        expect_reject(&wb, true, WE_FIELD, &e);
        assert_int_equal(e.id, 77);
        if (!strstr(e.text, want[i]))
            fail_msg("case %d: '%s' lacks '%s'", (int)i, e.text, want[i]);
        assert_non_null(strstr(e.text, "RESULT: "));
    }
    wire_buf_free(&wb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descs_sane),
        cmocka_unit_test(test_roundtrip_all),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_array_element_caps),
        cmocka_unit_test(test_nested_element_wrong),
    };
    return cmocka_run_group_tests_name("wire_msgs", tests, NULL, NULL);
}

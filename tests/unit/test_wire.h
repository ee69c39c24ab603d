/*
 * test_wire.h - what the wire unit tests share (test_wire.c: the codec; test_wire_msgs.c:
 * the descriptor table): a generic message builder that writes a valid message of any
 * descriptor from its field table, with one field omitted or replaced, and decoding
 * helpers that expect acceptance or a given rejection. Included by one test file each.
 */
#ifndef GRIDNODE_TEST_WIRE_H
#define GRIDNODE_TEST_WIRE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/wire.h"

#define DEFAULT_STR_CAP (64u << 10) /* wire/bound.h's caps for max = 0 */
#define DEFAULT_BIN_CAP (16u << 20)
#define DEFAULT_ARRAY_CAP 4096u
#define TEST_ID 4242u

/* ---- a generic message builder ---- */

/* One change applied wherever a map is built from `fields`: omit or replace `key`. */
struct mut {
    const struct wire_field *fields;
    const char *key;
    bool omit;
    void (*pack)(struct wire_buf *wb, const struct mut *m); /* replacement value */
    uint64_t n;                                             /* argument of pack */
    const struct wire_field *f;                             /* the field replaced */
};

static void pack_map_fields(struct wire_buf *wb, const struct wire_field *fields,
                            bool required_only, const struct mut *mu);

static uint64_t valid_uint(uint64_t max)
{
    return max && max < 7 ? max : 7;
}

/* Packs one valid value of type t (no key). */
static void pack_valid(struct wire_buf *wb, enum wire_ftype t, uint64_t max, enum wire_ftype elem,
                       const struct wire_field *ef, bool required_only, const struct mut *mu)
{
    switch (t) {
    case WF_UINT:
        wire_pack_u64(wb, valid_uint(max));
        break;
    case WF_INT:
        msgpack_pack_int64(&wb->pk, -7);
        break;
    case WF_FLOAT:
        msgpack_pack_double(&wb->pk, 2.5);
        break;
    case WF_BOOL:
        msgpack_pack_true(&wb->pk);
        break;
    case WF_STR:
        wire_pack_strn(wb, "hello", max && max < 5 ? max : 5);
        break;
    case WF_BIN:
        wire_pack_bin(wb, "\0\1\2", 3);
        break;
    case WF_ARRAY:
        wire_pack_array(wb, 2);
        for (int i = 0; i < 2; i++)
            pack_valid(wb, elem, 0, elem, ef, required_only, mu);
        break;
    case WF_MAP:
        if (ef) {
            pack_map_fields(wb, ef, required_only, mu);
        } else {
            wire_pack_map(wb, 1);
            wire_pack_str(wb, "k");
            wire_pack_u64(wb, 1);
        }
        break;
    }
}

static bool included(const struct wire_field *fields, const struct wire_field *f,
                     bool required_only, const struct mut *mu)
{
    if (mu && mu->fields == fields && !strcmp(mu->key, f->key))
        return !mu->omit;
    return f->required || !required_only;
}

static void pack_map_fields(struct wire_buf *wb, const struct wire_field *fields,
                            bool required_only, const struct mut *mu)
{
    uint32_t n = 0;
    for (const struct wire_field *f = fields; f->key; f++)
        n += included(fields, f, required_only, mu);
    wire_pack_map(wb, n);
    for (const struct wire_field *f = fields; f->key; f++) {
        if (!included(fields, f, required_only, mu))
            continue;
        wire_put_key(wb, f->key);
        if (mu && mu->fields == fields && !strcmp(mu->key, f->key))
            mu->pack(wb, mu);
        else
            pack_valid(wb, f->type, f->max, f->elem, f->elem_fields, required_only, mu);
    }
}

/* A whole message of descriptor d: envelope plus its fields. */
static void build_msg(struct wire_buf *wb, const struct wire_desc *d, uint64_t id,
                      bool required_only, const struct mut *mu)
{
    uint32_t n = 0;
    wire_buf_reset(wb);
    for (const struct wire_field *f = d->fields; f->key; f++)
        n += included(d->fields, f, required_only, mu);
    wire_begin(wb, d->type, id, n);
    for (const struct wire_field *f = d->fields; f->key; f++) {
        if (!included(d->fields, f, required_only, mu))
            continue;
        wire_put_key(wb, f->key);
        if (mu && mu->fields == d->fields && !strcmp(mu->key, f->key))
            mu->pack(wb, mu);
        else
            pack_valid(wb, f->type, f->max, f->elem, f->elem_fields, required_only, mu);
    }
}

static int decode(struct wire_buf *wb, bool want_request, struct wire_msg *m, struct wire_error *e)
{
    return wire_decode(wb->sb.data, wb->sb.size, want_request, m, e);
}

/* Decodes wb expecting failure with code; returns with err filled. */
static void expect_reject(struct wire_buf *wb, bool want_request, int code, struct wire_error *e)
{
    struct wire_msg m;
    int rc = decode(wb, want_request, &m, e);
    if (rc == 0 || e->code != code)
        fail_msg("expected rejection with %s, got rc %d code %s (%s)", wire_err_name(code), rc,
                 wire_err_name(e->code), e->text);
    assert_false(m.inited);
    assert_null(m.root);
}

static void expect_accept(struct wire_buf *wb, bool want_request)
{
    struct wire_msg m;
    struct wire_error e;
    if (decode(wb, want_request, &m, &e) < 0)
        fail_msg("expected acceptance, got %s: %s", wire_err_name(e.code), e.text);
    wire_msg_free(&m);
}

#endif

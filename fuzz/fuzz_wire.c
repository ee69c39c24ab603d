/*
 * fuzz_wire.c - libFuzzer target for the wire decoder.
 *
 * Each input is decoded as a request and as any message. Checked on every input:
 *  - the declared-count pre-pass agrees with msgpack-c: wire_precheck() accepts exactly
 *    when msgpack_unpack_next() returns SUCCESS with every byte used (msgpack-c's
 *    NOMEM for nesting deeper than 32 is the one allowed difference); inputs the
 *    pre-pass refused are given to msgpack-c only when their declared counts are small,
 *    since refusing the others is the pre-pass's purpose;
 *  - a refused frame gets a known error code and a NUL-terminated text; a frame the
 *    pre-pass refused is MALFORMED with no request id;
 *  - an accepted message can be read with every reader of its descriptor's fields and,
 *    re-encoded with wire_pack_object(), decodes again to the same type and id.
 * ASan/UBSan watch the project's code (Debian's msgpack-c is not instrumented).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#define ALLOC_BOUND_MAX (1u << 20) /* container elements msgpack-c may allocate */

static void die(const char *what, const uint8_t *data, size_t size)
{
    fprintf(stderr, "fuzz_wire: %s (input of %zu bytes)\n", what, size);
    (void)data;
    abort();
}

/*
 * An upper bound of the container elements msgpack-c allocates for data: every byte is
 * taken as a possible array or map header.
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

static void check_precheck(const uint8_t *data, size_t size)
{
    int pre = wire_precheck(data, size);
    if (pre < 0 && alloc_bound(data, size) > ALLOC_BOUND_MAX)
        return;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    int rc = msgpack_unpack_next(&up, (const char *)data, size, &off);
    msgpack_unpacked_destroy(&up);
    if (rc == MSGPACK_UNPACK_NOMEM_ERROR)
        return;
    int whole = rc == MSGPACK_UNPACK_SUCCESS && off == size;
    if ((pre == 0) != whole)
        die(pre == 0 ? "precheck accepted what msgpack-c refuses"
                     : "precheck refused what msgpack-c accepts",
            data, size);
}

/* Reads every field of the descriptor with the matching reader (and a wrong one). */
static void read_fields(const msgpack_object *map, const struct wire_field *fields)
{
    char buf[16];
    size_t len;
    for (const struct wire_field *f = fields; f->key; f++) {
        const msgpack_object *o = wire_get(map, f->key);
        (void)wire_get_u64(map, f->key, 0);
        (void)wire_get_i64(map, f->key, 0);
        (void)wire_get_f64(map, f->key, 0);
        (void)wire_get_bool(map, f->key, false);
        (void)wire_get_str(map, f->key, &len);
        (void)wire_get_bin(map, f->key, &len);
        wire_get_strbuf(map, f->key, buf, sizeof buf);
        free(wire_get_strdup(map, f->key));
        if (!o || !f->elem_fields)
            continue;
        if (o->type == MSGPACK_OBJECT_ARRAY) {
            for (uint32_t i = 0; i < o->via.array.size; i++)
                read_fields(&o->via.array.ptr[i], f->elem_fields);
        } else if (o->type == MSGPACK_OBJECT_MAP) {
            read_fields(o, f->elem_fields);
        }
    }
}

static void check_decode(const uint8_t *data, size_t size, bool want_request, int pre)
{
    struct wire_msg m;
    struct wire_error e;
    if (wire_decode(data, size, want_request, &m, &e) < 0) {
        if (e.code < WE_MALFORMED || e.code > WE_STATE ||
            strnlen(e.text, sizeof e.text) == sizeof e.text)
            die("bad wire_error", data, size);
        if (pre < 0 && (e.code != WE_MALFORMED || e.id != 0))
            die("refused by precheck but not MALFORMED", data, size);
        if (m.inited || m.root)
            die("failed decode left a message", data, size);
        return;
    }
    if (pre < 0)
        die("decoded what precheck refused", data, size);
    if (!m.desc || m.desc->type != m.type || (want_request && !m.desc->request))
        die("inconsistent message", data, size);
    read_fields(m.root, m.desc->fields);
    struct wire_buf wb;
    struct wire_msg again;
    wire_buf_init(&wb);
    wire_pack_object(&wb, m.root);
    if (wire_decode(wb.sb.data, wb.sb.size, want_request, &again, &e) < 0)
        die("re-encoded message does not decode", data, size);
    if (again.type != m.type || again.id != m.id)
        die("re-encoded message differs", data, size);
    wire_msg_free(&again);
    wire_buf_free(&wb);
    wire_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int pre = wire_precheck(data, size);
    check_precheck(data, size);
    check_decode(data, size, true, pre);
    check_decode(data, size, false, pre);
    return 0;
}

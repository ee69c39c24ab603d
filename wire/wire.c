/*
 * wire.c - the message codec: envelope and descriptor validation, field readers and
 * writers. The pre-passes over a frame's headers are in bound.c, the descriptors
 * themselves in msgs.c.
 */
#include "wire/wire.h"
#include "wire/bound.h"
#include "lib/constraint.h"
#include "lib/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int seterr(struct wire_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int seterr(struct wire_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
        text_fix(err->text); /* quoted peer bytes, or a cut inside a character */
    }
    return -1;
}

static int key_is(const msgpack_object *k, const char *key)
{
    size_t n = strlen(key);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
           memcmp(k->via.str.ptr, key, n) == 0;
}

const msgpack_object *wire_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (key_is(&map->via.map.ptr[i].key, key))
            return &map->via.map.ptr[i].val;
    return NULL;
}

/* True if p[0..n) is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF). */
static bool utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char b = p[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
        if (len == 0 || b > 0xf4 || i + len > n)
            return false;
        for (size_t k = 1; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
        if ((b == 0xe0 && p[i + 1] < 0xa0) || (b == 0xed && p[i + 1] > 0x9f) ||
            (b == 0xf0 && p[i + 1] < 0x90) || (b == 0xf4 && p[i + 1] > 0x8f))
            return false;
        i += len;
    }
    return true;
}

/* Checks one value against a type; `what` names it in the error text. */
static int check_value(const msgpack_object *o, enum wire_ftype t, uint64_t max,
                       enum wire_ftype elem, const struct wire_field *elem_fields, const char *what,
                       struct wire_error *err)
{
    switch (t) {
    case WF_UINT:
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            goto badtype;
        if (max && o->via.u64 > max)
            return seterr(err, WE_FIELD, "field '%s' is %llu, above its maximum %llu", what,
                          (unsigned long long)o->via.u64, (unsigned long long)max);
        return 0;
    case WF_INT:
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
            /* -(i64 + 1) + 1 is |i64| without the overflow of -INT64_MIN */
            if (max && (uint64_t)(-(o->via.i64 + 1)) + 1 > max)
                return seterr(err, WE_FIELD, "field '%s' is %lld, below its minimum -%llu", what,
                              (long long)o->via.i64, (unsigned long long)max);
            return 0;
        }
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > INT64_MAX)
            goto badtype;
        if (max && o->via.u64 > max)
            return seterr(err, WE_FIELD, "field '%s' is %llu, above its maximum %llu", what,
                          (unsigned long long)o->via.u64, (unsigned long long)max);
        return 0;
    case WF_FLOAT:
        if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64 ||
            o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
            o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return 0;
        goto badtype;
    case WF_BOOL:
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
            goto badtype;
        return 0;
    case WF_STR:
    case WF_BIN: {
        if (o->type != (t == WF_STR ? MSGPACK_OBJECT_STR : MSGPACK_OBJECT_BIN))
            goto badtype;
        uint64_t cap = max ? max : (t == WF_STR ? WIRE_DEFAULT_STR : WIRE_DEFAULT_BIN);
        uint32_t size = t == WF_STR ? o->via.str.size : o->via.bin.size;
        if (size > cap)
            return seterr(err, WE_FIELD, "field '%s' has %u bytes, more than %llu", what, size,
                          (unsigned long long)cap);
        if (t == WF_STR && !utf8_valid((const unsigned char *)o->via.str.ptr, size))
            return seterr(err, WE_FIELD, "field '%s' is not valid UTF-8", what);
        return 0;
    }
    case WF_ARRAY: {
        if (o->type != MSGPACK_OBJECT_ARRAY)
            goto badtype;
        uint64_t cap = max ? max : WIRE_DEFAULT_ARRAY;
        if (o->via.array.size > cap)
            return seterr(err, WE_FIELD, "field '%s' has %u elements, more than %llu", what,
                          o->via.array.size, (unsigned long long)cap);
        for (uint32_t i = 0; i < o->via.array.size; i++)
            if (check_value(&o->via.array.ptr[i], elem, 0, elem, elem_fields, what, err) < 0)
                return -1;
        return 0;
    }
    case WF_MAP:
        if (o->type != MSGPACK_OBJECT_MAP)
            goto badtype;
        if (max && o->via.map.size > max)
            return seterr(err, WE_FIELD, "field '%s' has %u entries, more than %llu", what,
                          o->via.map.size, (unsigned long long)max);
        return elem_fields ? wire_check_map(o, elem_fields, err) : 0;
    }
badtype:
    return seterr(err, WE_FIELD, "field '%s' must be of type %s", what, wire_ftype_name(t));
}

int wire_check_map(const msgpack_object *map, const struct wire_field *fields,
                   struct wire_error *err)
{
    if (map->type != MSGPACK_OBJECT_MAP)
        return seterr(err, WE_FIELD, "expected a map");
    if (map->via.map.size > WIRE_MAX_MAP)
        return seterr(err, WE_FIELD, "a map has %u entries, more than %u", map->via.map.size,
                      WIRE_MAX_MAP);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return seterr(err, WE_FIELD, "map keys must be strings");
        /* a key echoed or quoted must not change when made valid (and collide) */
        if (!utf8_valid((const unsigned char *)k->via.str.ptr, k->via.str.size))
            return seterr(err, WE_FIELD, "map keys must be valid UTF-8");
        /* readers differ on which duplicate wins (msgpack-c: first, Python: last) */
        for (uint32_t j = 0; j < i; j++) {
            const msgpack_object *o = &map->via.map.ptr[j].key;
            if (o->via.str.size == k->via.str.size &&
                !memcmp(o->via.str.ptr, k->via.str.ptr, k->via.str.size))
                return seterr(err, WE_FIELD, "key '%.*s' appears twice in a map",
                              (int)(k->via.str.size > 64 ? 64 : k->via.str.size), k->via.str.ptr);
        }
    }
    for (const struct wire_field *f = fields; f->key; f++) {
        const msgpack_object *v = wire_get(map, f->key);
        if (!v || v->type == MSGPACK_OBJECT_NIL) {
            if (f->required)
                return seterr(err, WE_FIELD, "field '%s' (%s) is required", f->key,
                              wire_ftype_name(f->type));
            continue;
        }
        if (check_value(v, f->type, f->max, f->elem, f->elem_fields, f->key, err) < 0)
            return -1;
    }
    return 0;
}

void wire_msg_free(struct wire_msg *m)
{
    if (m->inited)
        msgpack_unpacked_destroy(&m->up);
    m->inited = false;
    m->root = NULL;
}

int wire_decode(const void *buf, size_t len, bool want_request, struct wire_msg *m,
                struct wire_error *err)
{
    memset(m, 0, sizeof *m);
    if (err)
        memset(err, 0, sizeof *err);
    if (len == 0 || wire_precheck(buf, len) < 0)
        return seterr(err, WE_MALFORMED, "not one well-formed msgpack object (%zu bytes)", len);
    /* envelope and descriptor caps from the headers alone, before anything is built */
    if (wire_bound(buf, len, want_request, err) < 0)
        return -1;
    msgpack_unpacked_init(&m->up);
    m->inited = true;
    size_t off = 0;
    int rc = msgpack_unpack_next(&m->up, buf, len, &off);
    if (rc != MSGPACK_UNPACK_SUCCESS || off != len) {
        wire_msg_free(m);
        return seterr(err, WE_MALFORMED, "msgpack decoding failed (too deep or malformed)");
    }
    m->root = &m->up.data;
    if (m->root->type != MSGPACK_OBJECT_MAP)
        goto fail_map;
    const msgpack_object *id = wire_get(m->root, "id");
    if (id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        m->id = id->via.u64;
        if (err)
            err->id = m->id;
    }
    const msgpack_object *v = wire_get(m->root, "v");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != WIRE_VERSION) {
        seterr(err, WE_VERSION, "protocol version \"v\" must be %d", WIRE_VERSION);
        goto fail;
    }
    if (!id || id->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        seterr(err, WE_FIELD, "request id \"id\" (uint) is required");
        goto fail;
    }
    const msgpack_object *t = wire_get(m->root, "t");
    if (!t || t->type != MSGPACK_OBJECT_POSITIVE_INTEGER || t->via.u64 > UINT32_MAX ||
        !(m->desc = wire_desc_find((uint32_t)t->via.u64))) {
        seterr(err, WE_TYPE, "message type \"t\" missing or unknown");
        goto fail;
    }
    m->type = (uint32_t)t->via.u64;
    if (want_request && !m->desc->request) {
        seterr(err, WE_TYPE, "%s is not a request", m->desc->name);
        goto fail;
    }
    if (wire_check_map(m->root, m->desc->fields, err) < 0) {
        if (err) {
            char tmp[sizeof err->text];
            memcpy(tmp, err->text, sizeof tmp);
            int n = snprintf(err->text, sizeof err->text, "%s: ", m->desc->name);
            if (n > 0 && (size_t)n < sizeof err->text)
                memcpy(err->text + n, tmp, sizeof err->text - (size_t)n - 1);
            err->text[sizeof err->text - 1] = '\0';
            text_fix(err->text);
        }
        goto fail;
    }
    return 0;
fail_map:
    seterr(err, WE_MALFORMED, "a message must be a msgpack map");
fail:
    wire_msg_free(m);
    return -1;
}

/* ---- readers ---- */

uint64_t wire_get_u64(const msgpack_object *map, const char *key, uint64_t dflt)
{
    const msgpack_object *o = wire_get(map, key);
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : dflt;
}

int64_t wire_get_i64(const msgpack_object *map, const char *key, int64_t dflt)
{
    const msgpack_object *o = wire_get(map, key);
    if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return o->via.i64;
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        return (int64_t)o->via.u64;
    return dflt;
}

int64_t wire_get_time(const msgpack_object *map, const char *key, int64_t dflt)
{
    int64_t v = wire_get_i64(map, key, dflt);
    return v >= -(int64_t)WIRE_TIME_MS_MAX && v <= (int64_t)WIRE_TIME_MS_MAX ? v : dflt;
}

uint64_t wire_get_capped(const msgpack_object *map, const char *key, uint64_t dflt, uint64_t cap)
{
    uint64_t v = wire_get_u64(map, key, dflt);
    return v < cap ? v : cap;
}

double wire_get_f64(const msgpack_object *map, const char *key, double dflt)
{
    const msgpack_object *o = wire_get(map, key);
    if (!o)
        return dflt;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return o->via.f64;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return (double)o->via.i64;
    default:
        return dflt;
    }
}

bool wire_get_bool(const msgpack_object *map, const char *key, bool dflt)
{
    const msgpack_object *o = wire_get(map, key);
    return o && o->type == MSGPACK_OBJECT_BOOLEAN ? o->via.boolean : dflt;
}

const char *wire_get_str(const msgpack_object *map, const char *key, size_t *len)
{
    const msgpack_object *o = wire_get(map, key);
    if (!o || o->type != MSGPACK_OBJECT_STR) {
        *len = 0;
        return NULL;
    }
    *len = o->via.str.size;
    return o->via.str.ptr;
}

const void *wire_get_bin(const msgpack_object *map, const char *key, size_t *len)
{
    const msgpack_object *o = wire_get(map, key);
    if (!o || o->type != MSGPACK_OBJECT_BIN) {
        *len = 0;
        return NULL;
    }
    *len = o->via.bin.size;
    return o->via.bin.ptr;
}

void wire_get_strbuf(const msgpack_object *map, const char *key, char *buf, size_t cap)
{
    size_t n;
    const char *s = wire_get_str(map, key, &n);
    text_copy(buf, cap, s ? s : "", n); /* cut on a character boundary */
}

int wire_get_constraint(const msgpack_object *map, char **out, char *why, size_t wl)
{
    size_t n;
    const char *s = wire_get_str(map, "constraint", &n);
    char t[CONSTRAINT_LEN_MAX + 1];
    *out = NULL;
    if (!s)
        return 0;
    if (constraint_parse(s, n, t, sizeof t, why, wl) < 0)
        return -1;
    if (!(*out = strdup(t))) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    return 0;
}

char *wire_get_strdup(const msgpack_object *map, const char *key)
{
    size_t n;
    const char *s = wire_get_str(map, key, &n);
    return s ? strndup(s, n) : NULL;
}

/* ---- writers ---- */

void wire_buf_init(struct wire_buf *wb)
{
    msgpack_sbuffer_init(&wb->sb);
    msgpack_packer_init(&wb->pk, &wb->sb, msgpack_sbuffer_write);
}

void wire_buf_reset(struct wire_buf *wb)
{
    msgpack_sbuffer_clear(&wb->sb);
}

void wire_buf_free(struct wire_buf *wb)
{
    msgpack_sbuffer_destroy(&wb->sb);
    memset(wb, 0, sizeof *wb);
}

bool wire_one_value(const void *p, size_t n)
{
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    bool one = msgpack_unpack_next(&up, p, n, &off) == MSGPACK_UNPACK_SUCCESS && off == n;
    msgpack_unpacked_destroy(&up);
    return one;
}

#ifdef GRIDNODE_WIRE_CHECK
void wire_check_out(const void *p, size_t n, const char *what, const char *file, int line)
{
    if (wire_one_value(p, n))
        return;
    fprintf(stderr,
            "gridnode BUG: wire: %s at %s:%d is not one msgpack value (%zu bytes; a map or "
            "array size that does not match what was written?)\n",
            what, file, line, n);
    abort();
}
#endif

void wire_pack_str(struct wire_buf *wb, const char *s)
{
    wire_pack_strn(wb, s, strlen(s));
}
/* Every str gridnode writes is well-formed UTF-8: bytes that are not (a name cut
   inside a character, peer bytes quoted in a message) become '?'. */
void wire_pack_strn(struct wire_buf *wb, const char *s, size_t n)
{
    if (text_utf8_valid(s, n)) {
        msgpack_pack_str_with_body(&wb->pk, s, n);
        return;
    }
    char *fixed = malloc(n + 1);
    if (!fixed) { /* keep the frame well-formed: an empty str */
        msgpack_pack_str_with_body(&wb->pk, "", 0);
        return;
    }
    size_t m = text_copy(fixed, n + 1, s, n);
    msgpack_pack_str_with_body(&wb->pk, fixed, m);
    free(fixed);
}
void wire_pack_bin(struct wire_buf *wb, const void *p, size_t n)
{
    msgpack_pack_bin_with_body(&wb->pk, p, n);
}
void wire_pack_map(struct wire_buf *wb, uint32_t n)
{
    msgpack_pack_map(&wb->pk, n);
}
void wire_pack_array(struct wire_buf *wb, uint32_t n)
{
    msgpack_pack_array(&wb->pk, n);
}
void wire_pack_u64(struct wire_buf *wb, uint64_t v)
{
    msgpack_pack_uint64(&wb->pk, v);
}
/* Copies o as it is, except that str values and keys go through wire_pack_strn (an
   echo of a peer's unvalidated unknown keys stays valid UTF-8). Depth is bounded by
   msgpack-c's 32 levels. */
void wire_pack_object(struct wire_buf *wb, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        wire_pack_strn(wb, o->via.str.ptr, o->via.str.size);
        return;
    case MSGPACK_OBJECT_ARRAY:
        msgpack_pack_array(&wb->pk, o->via.array.size);
        for (uint32_t i = 0; i < o->via.array.size; i++)
            wire_pack_object(wb, &o->via.array.ptr[i]);
        return;
    case MSGPACK_OBJECT_MAP:
        msgpack_pack_map(&wb->pk, o->via.map.size);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            wire_pack_object(wb, &o->via.map.ptr[i].key);
            wire_pack_object(wb, &o->via.map.ptr[i].val);
        }
        return;
    default:
        msgpack_pack_object(&wb->pk, *o);
    }
}

void wire_put_key(struct wire_buf *wb, const char *key)
{
    wire_pack_str(wb, key);
}
void wire_put_u64(struct wire_buf *wb, const char *key, uint64_t v)
{
    wire_put_key(wb, key);
    msgpack_pack_uint64(&wb->pk, v);
}
void wire_put_i64(struct wire_buf *wb, const char *key, int64_t v)
{
    wire_put_key(wb, key);
    msgpack_pack_int64(&wb->pk, v);
}
void wire_put_f64(struct wire_buf *wb, const char *key, double v)
{
    wire_put_key(wb, key);
    msgpack_pack_double(&wb->pk, v);
}
void wire_put_bool(struct wire_buf *wb, const char *key, bool v)
{
    wire_put_key(wb, key);
    if (v)
        msgpack_pack_true(&wb->pk);
    else
        msgpack_pack_false(&wb->pk);
}
void wire_put_str(struct wire_buf *wb, const char *key, const char *s)
{
    wire_put_strn(wb, key, s, strlen(s));
}
void wire_put_strn(struct wire_buf *wb, const char *key, const char *s, size_t n)
{
    wire_put_key(wb, key);
    wire_pack_strn(wb, s, n);
}
void wire_put_bin(struct wire_buf *wb, const char *key, const void *p, size_t n)
{
    wire_put_key(wb, key);
    wire_pack_bin(wb, p, n);
}

void wire_put_strv(struct wire_buf *wb, const char *key, char *const *v, uint32_t n)
{
    wire_put_key(wb, key);
    wire_pack_array(wb, n);
    for (uint32_t i = 0; i < n; i++)
        wire_pack_str(wb, v[i]);
}

void wire_begin(struct wire_buf *wb, uint32_t type, uint64_t id, uint32_t nfields)
{
    wire_pack_map(wb, nfields + 3);
    wire_put_u64(wb, "v", WIRE_VERSION);
    wire_put_u64(wb, "t", type);
    wire_put_u64(wb, "id", id);
}

void wire_error_purged(struct wire_buf *wb, uint64_t id, uint64_t job, const char *where)
{
    char text[400];
    snprintf(text, sizeof text,
             "no job %llu %s: it ended and was purged (its accounting record stays: gridnode "
             "acct)",
             (unsigned long long)job, where);
    text_fix(text);
    wire_begin(wb, WT_ERROR, id, 3);
    wire_put_u64(wb, "code", WE_NOT_FOUND);
    wire_put_str(wb, "msg", text);
    wire_put_bool(wb, "purged", true);
}

void wire_error_msg(struct wire_buf *wb, uint64_t id, int code, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    text_fix(text); /* cut inside a character, or quoted peer bytes */
    wire_begin(wb, WT_ERROR, id, 2);
    wire_put_u64(wb, "code", (uint64_t)code);
    wire_put_str(wb, "msg", text);
}

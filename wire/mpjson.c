/* mpjson.c - msgpack to JSON (see mpjson.h). */
#include "wire/mpjson.h"

#include <stdio.h>
#include <stdlib.h>

#include "wire/wire.h"

static json_t *bytes_json(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s)
        return s;
    char *hex = malloc(2 * n + 1);
    if (!hex)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)p[i]);
    json_t *o = json_pack("{s:s}", "hex", hex);
    free(hex);
    return o;
}

json_t *mpjson(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return json_null();
    case MSGPACK_OBJECT_BOOLEAN:
        return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return o->via.u64 <= INT64_MAX ? json_integer((json_int_t)o->via.u64)
                                       : json_real((double)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return json_integer(o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: {
        json_t *r = json_real(o->via.f64);
        return r ? r : json_null(); /* NaN and infinities have no JSON form */
    }
    case MSGPACK_OBJECT_STR:
        return bytes_json(o->via.str.ptr, o->via.str.size);
    case MSGPACK_OBJECT_BIN:
        return bytes_json(o->via.bin.ptr, o->via.bin.size);
    case MSGPACK_OBJECT_EXT:
        return bytes_json(o->via.ext.ptr, o->via.ext.size);
    case MSGPACK_OBJECT_ARRAY: {
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < o->via.array.size; i++)
            json_array_append_new(a, mpjson(&o->via.array.ptr[i]));
        return a;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *m = json_object();
        for (uint32_t i = 0; m && i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            char kb[128];
            if (k->type == MSGPACK_OBJECT_STR)
                snprintf(kb, sizeof kb, "%.*s", (int)k->via.str.size, k->via.str.ptr);
            else if (k->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                snprintf(kb, sizeof kb, "%llu", (unsigned long long)k->via.u64);
            else
                snprintf(kb, sizeof kb, "?%u", i);
            json_object_set_new(m, kb, mpjson(&o->via.map.ptr[i].val));
        }
        return m;
    }
    }
    return json_null();
}

json_t *mpjson_bytes(const void *p, size_t n)
{
    msgpack_unpacked up;
    size_t off = 0;
    json_t *j = NULL;
    if (wire_precheck(p, n) < 0)
        return NULL;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, p, n, &off) == MSGPACK_UNPACK_SUCCESS)
        j = mpjson(&up.data);
    msgpack_unpacked_destroy(&up);
    return j;
}

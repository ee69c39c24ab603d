/*
 * mpjson.h - msgpack objects as JSON (jansson), for --json output and `gridnode dump`.
 * Byte strings become JSON text when they are valid UTF-8, else {"hex": "..."}.
 * Integers above INT64_MAX become reals (JSON has no larger integers in jansson).
 */
#ifndef GRIDNODE_MPJSON_H
#define GRIDNODE_MPJSON_H

#include <jansson.h>
#include <msgpack.h>

/* New reference, or NULL when out of memory. */
json_t *mpjson(const msgpack_object *o);
/* Decodes bytes (checked with wire_precheck) and converts them; NULL if not msgpack. */
json_t *mpjson_bytes(const void *p, size_t n);

#endif

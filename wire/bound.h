/*
 * bound.h - wire/'s internal header: the caps the codec (wire.c) and the pre-passes
 * (bound.c) share, and the descriptor-aware cost bound run by wire_decode() before
 * msgpack-c builds any object (bound.c; the declared-count pre-pass, wire_precheck, is
 * public: wire.h).
 */
#ifndef GRIDNODE_WIRE_BOUND_H
#define GRIDNODE_WIRE_BOUND_H

#include "wire/wire.h"

/* Default caps when a descriptor says max = 0. */
#define WIRE_DEFAULT_STR (64u << 10)
#define WIRE_DEFAULT_BIN (16u << 20)
#define WIRE_DEFAULT_ARRAY 4096u
/* Entries in any validated map: keeps the duplicate-key check cheap. */
#define WIRE_MAX_MAP 256u

/* Values (msgpack objects) the values of unknown keys may hold, in the whole message. */
#define WIRE_UNKNOWN_VALUES 65536u
/* Values in one whole message (~24 bytes each once decoded). Only replies with
   free-form maps (JOBS, NODES, JOB, SD_STATE) can come near it. */
#define WIRE_MAX_VALUES (8u << 20)

/*
 * Checks, reading only msgpack headers, that buf[0..len) (already accepted by
 * wire_precheck) is a map with a valid envelope whose content fits its type's
 * descriptor: array counts within caps, no container where a scalar is expected, at
 * most WIRE_UNKNOWN_VALUES values under unknown keys and WIRE_MAX_VALUES in all.
 * Returns 0, or -1 with err filled exactly as wire_decode() reports (code, text, id).
 */
int wire_bound(const uint8_t *buf, size_t len, bool want_request, struct wire_error *err);

#endif

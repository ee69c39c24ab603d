/*
 * emulate_keys.h - the scenario file's key table (emulate_keys.c), shared by the parser
 * (emulate_scenario.c). Internal to the emulator.
 */
#ifndef GRIDNODE_EMULATE_KEYS_H
#define GRIDNODE_EMULATE_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum emu_sec_kind { SK_EMULATION, SK_CLIENT, SK_HOST, SK_GPU, SK_PROJECT, SK_APP };
enum emu_key_type {
    KT_TIME,  /* seconds, with an optional unit: s m h d w */
    KT_NEVER, /* a time, or "never" (-1) */
    KT_NUM,   /* a real number */
    KT_INT,
    KT_BOOL,    /* yes/no/true/false/1/0 */
    KT_SEED,    /* unsigned 64-bit */
    KT_POLICY,  /* rec | debt2004 */
    KT_FETCH,   /* deadline | boinc */
    KT_DIST,    /* normal | fixed | exp | uniform */
    KT_WINDOWS, /* START-END or START+LENGTH, comma separated */
    KT_NAME,
};

struct emu_key {
    int sec;
    const char *name;
    int type;
    size_t off;
    double min, max; /* inclusive range; min_open: min itself excluded */
    int min_open;
    const char *dflt; /* NULL: required */
    const char *help;
};

extern const struct emu_key emulate_keys[];
extern const size_t emulate_nkeys;
extern const char *const emulate_sec_names[6];

/* Parses value into the field of key k in the struct at base; 0 or -1 with msg. */
int emulate_key_apply(const struct emu_key *k, void *base, const char *value, char *msg, size_t n);
/* Sets every key of section kind sec that has a default. */
void emulate_keys_defaults(int sec, void *base);
/* Index of key name in section kind sec, or -1. */
int emulate_key_index(int sec, const char *name);
/* Prints "key = value" for every key of section kind sec. */
void emulate_section_print(int sec, const void *base, FILE *out);

#endif

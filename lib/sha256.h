/*
 * sha256.h - SHA-256 (FIPS 180-4), with a state that can be saved and restored, so a
 * file received in chunks is hashed as it arrives and the hash survives a restart
 * (docs/data.md). Pure: no I/O.
 */
#ifndef GRIDNODE_SHA256_H
#define GRIDNODE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX 65 /* 64 hex digits and the NUL */
/* sha256_save()'s bytes: the 8 state words, the byte count, the pending block */
#define SHA256_SAVED (32 + 8 + 64)

struct sha256 {
    uint32_t h[8];
    uint64_t n; /* bytes hashed so far */
    uint8_t buf[64];
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *p, size_t n);
/* The digest of everything given; s is left unusable (init it again). */
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);
/* The whole state as SHA256_SAVED bytes, and back (0, or -1 when len is wrong). */
void sha256_save(const struct sha256 *s, uint8_t out[SHA256_SAVED]);
int sha256_load(struct sha256 *s, const void *p, size_t len);
/* Lower-case hex of a digest into out (SHA256_HEX bytes). */
void sha256_hex(const uint8_t d[SHA256_LEN], char out[SHA256_HEX]);
/* Whether s[0..len) is 64 lower-case hex digits (a hash as the wire carries it). */
int sha256_is_hex(const char *s, size_t len);
/* The hash (hex) and size of the file at path, opened O_RDONLY | O_CLOEXEC | oflags (e.g.
 * O_NOFOLLOW); 0, or -1 with errno. Not thread-safe (one static read buffer). */
int sha256_file(const char *path, int oflags, char hex[SHA256_HEX], uint64_t *size);

#endif

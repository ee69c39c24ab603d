/*
 * z85.c - Z85 encoding and decoding (see z85.h; ZeroMQ RFC 32): each 4-byte group is a
 * big-endian 32-bit number written as 5 base-85 digits, most significant first.
 */
#include "lib/z85.h"

#include <stdint.h>

static const char alphabet[86] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 ".-:+=^!/*?&<>()[]{}@%$#";

size_t z85_encode(char *out, const unsigned char *in, size_t n)
{
    if (n % 4)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = (uint32_t)in[i] << 24 | (uint32_t)in[i + 1] << 16 | (uint32_t)in[i + 2] << 8 |
                     in[i + 3];
        for (int d = 4; d >= 0; d--) {
            out[o + (size_t)d] = alphabet[v % 85];
            v /= 85;
        }
        o += 5;
    }
    out[o] = '\0';
    return o;
}

/* The value of Z85 character c, or -1. */
static int digit(char c)
{
    for (int i = 0; i < 85; i++)
        if (alphabet[i] == c)
            return i;
    return -1;
}

long z85_decode(unsigned char *out, const char *in, size_t len)
{
    if (len % 5)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 5) {
        uint64_t v = 0;
        for (size_t k = 0; k < 5; k++) {
            int d = digit(in[i + k]);
            if (d < 0)
                return -1;
            v = v * 85 + (uint64_t)d;
        }
        if (v > UINT32_MAX)
            return -1;
        out[o++] = (unsigned char)(v >> 24);
        out[o++] = (unsigned char)(v >> 16);
        out[o++] = (unsigned char)(v >> 8);
        out[o++] = (unsigned char)v;
    }
    return (long)o;
}

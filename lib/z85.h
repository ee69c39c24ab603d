/*
 * z85.h - Z85 (ZeroMQ RFC 32), the text form of CURVE keys: every 4 bytes become 5
 * printable characters. Used by the user tools to read key files without libzmq
 * (cmd/zmtp_curve.c); the roles may keep using libzmq's own z85 functions.
 */
#ifndef GRIDNODE_Z85_H
#define GRIDNODE_Z85_H

#include <stddef.h>

/*
 * Encodes n bytes (n a multiple of 4) into out (5 * n / 4 characters and a NUL).
 * Returns the characters written, or 0 (nothing written) when n is not a multiple of 4.
 */
size_t z85_encode(char *out, const unsigned char *in, size_t n);
/*
 * Decodes len characters (len a multiple of 5, every one of the Z85 alphabet, each group
 * at most 2^32 - 1) into out (4 * len / 5 bytes). Returns the bytes written, or -1
 * (out may be partly written) on bad input.
 */
long z85_decode(unsigned char *out, const char *in, size_t len);

#endif

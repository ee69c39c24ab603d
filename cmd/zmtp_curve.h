/*
 * zmtp_curve.h - the client side of CurveZMQ (ZeroMQ RFC 26) as ZMTP 3.0 carries it
 * (RFC 25), for the user tools' own ZMTP client (cmd/zmtp.c): the HELLO, INITIATE and
 * MESSAGE commands built and the WELCOME, READY and MESSAGE commands checked and
 * opened, with libsodium. Pure: no sockets; the caller moves the bytes. The byte layout
 * is the one libzmq 4.3 speaks (short nonces big-endian, 1 for HELLO and counting up;
 * a MESSAGE's plaintext starts with a flags byte: 1 more, 2 command).
 */
#ifndef GRIDNODE_ZMTP_CURVE_H
#define GRIDNODE_ZMTP_CURVE_H

#include <stddef.h>
#include <stdint.h>

#define ZCURVE_KEY 32          /* bytes of a key */
#define ZCURVE_HELLO_LEN 200   /* body of a HELLO */
#define ZCURVE_WELCOME_LEN 168 /* body of a WELCOME */
#define ZCURVE_MSG_OVERHEAD 33 /* "\7MESSAGE", nonce, MAC, flags */
#define ZCURVE_READY_MAX 1024  /* a longer READY (metadata) is refused */
#define ZCURVE_FLAG_MORE 0x01  /* in a MESSAGE's plaintext flags byte */
#define ZCURVE_FLAG_CMD 0x02
#define ZCURVE_META "\013Socket-Type\0\0\0\6DEALER" /* our INITIATE metadata */
#define ZCURVE_META_LEN 22
#define ZCURVE_INITIATE_LEN (113 + 16 + 128 + ZCURVE_META_LEN) /* body of our INITIATE */

struct zmtp_curve {
    unsigned char pub[ZCURVE_KEY], sec[ZCURVE_KEY];       /* C, c: our long-term pair */
    unsigned char server[ZCURVE_KEY];                     /* S: the server's long-term key */
    unsigned char cn_pub[ZCURVE_KEY], cn_sec[ZCURVE_KEY]; /* C', c': this connection's */
    unsigned char cn_server[ZCURVE_KEY];                  /* S', from the WELCOME */
    unsigned char cookie[96];                             /* from the WELCOME */
    unsigned char precom[ZCURVE_KEY];                     /* S' and c' combined */
    uint64_t nonce;                                       /* our next short nonce */
    uint64_t peer_nonce; /* the server's last short nonce (0: none yet) */
};

/*
 * Prepares cv from our secret key and the server's public key (each 40 Z85
 * characters): derives our public key and makes this connection's key pair. 0, or -1
 * with a message in err (a key that is not Z85).
 */
int zcurve_init(struct zmtp_curve *cv, const char *secret_z85, const char *server_z85, char *err,
                size_t errlen);
/* Writes the HELLO command's body (ZCURVE_HELLO_LEN bytes) into out. 0, or -1 (the
 * server key is not a usable point of the curve). */
int zcurve_hello(struct zmtp_curve *cv, unsigned char out[ZCURVE_HELLO_LEN]);
/*
 * Checks and opens a WELCOME command's body (b, n): takes the server's connection key
 * and cookie. 0, or -1 (malformed, or its box does not open with the server's key).
 */
int zcurve_welcome(struct zmtp_curve *cv, const unsigned char *b, size_t n);
/*
 * Writes the INITIATE command's body (ZCURVE_INITIATE_LEN bytes) into out, vouching
 * with vouch_nonce (16 random bytes; fixed in tests). 0, or -1 (the server's connection
 * key is not a usable point).
 */
int zcurve_initiate(struct zmtp_curve *cv, unsigned char out[ZCURVE_INITIATE_LEN],
                    const unsigned char vouch_nonce[16]);
/*
 * Checks and opens a READY command's body (b, n): its box and its metadata (well-formed
 * properties). 0, or -1.
 */
int zcurve_ready(struct zmtp_curve *cv, const unsigned char *b, size_t n);
/*
 * Writes a MESSAGE command's body for (data, len) with plaintext flags (ZCURVE_FLAG_*)
 * into out (len + ZCURVE_MSG_OVERHEAD bytes, which may not overlap data).
 */
void zcurve_message(struct zmtp_curve *cv, unsigned char *out, unsigned flags, const void *data,
                    size_t len);
/*
 * Checks and opens a MESSAGE command's body (b, n) in place: its short nonce must be
 * above the last one seen. 0 with *flags, *data (inside b) and *len set, or -1.
 */
int zcurve_open(struct zmtp_curve *cv, unsigned char *b, size_t n, unsigned *flags,
                unsigned char **data, size_t *len);
/* Is (b, n) the command named name (its length byte and letters first)? */
int zcurve_is(const unsigned char *b, size_t n, const char *name);

#endif

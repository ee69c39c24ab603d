/*
 * zmtp_curve.c - the CurveZMQ client commands (see zmtp_curve.h). Every box is made and
 * opened with libsodium's crypto_box: Box[X](A->B) is crypto_box_easy of X with A's
 * secret and B's public key under a 24-byte nonce of a 16-byte prefix naming the command
 * and an 8-byte big-endian short nonce (WELCOME and the vouch use 8 + 16 bytes).
 */
#include "cmd/zmtp_curve.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "lib/z85.h"

_Static_assert(crypto_box_PUBLICKEYBYTES == ZCURVE_KEY && crypto_box_SECRETKEYBYTES == ZCURVE_KEY &&
                   crypto_box_BEFORENMBYTES == ZCURVE_KEY && crypto_box_NONCEBYTES == 24 &&
                   crypto_box_MACBYTES == 16,
               "libsodium's crypto_box is not the one CurveZMQ uses");

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A full nonce: the 16-byte prefix and the short nonce n. */
static void nonce_of(unsigned char out[24], const char *prefix, uint64_t n)
{
    memcpy(out, prefix, 16);
    put64(out + 16, n);
}

int zcurve_is(const unsigned char *b, size_t n, const char *name)
{
    size_t l = strlen(name);
    return n >= l + 1 && b[0] == l && memcmp(b + 1, name, l) == 0;
}

int zcurve_init(struct zmtp_curve *cv, const char *secret_z85, const char *server_z85, char *err,
                size_t errlen)
{
    memset(cv, 0, sizeof *cv);
    if (sodium_init() < 0) {
        snprintf(err, errlen, "cannot start libsodium");
        return -1;
    }
    if (strlen(secret_z85) != 40 || z85_decode(cv->sec, secret_z85, 40) != ZCURVE_KEY ||
        strlen(server_z85) != 40 || z85_decode(cv->server, server_z85, 40) != ZCURVE_KEY) {
        snprintf(err, errlen, "a CURVE key is not 40 Z85 characters");
        return -1;
    }
    crypto_scalarmult_base(cv->pub, cv->sec);
    crypto_box_keypair(cv->cn_pub, cv->cn_sec);
    cv->nonce = 1;
    return 0;
}

int zcurve_hello(struct zmtp_curve *cv, unsigned char out[ZCURVE_HELLO_LEN])
{
    static const unsigned char zero[64];
    unsigned char nonce[24];
    memset(out, 0, ZCURVE_HELLO_LEN);
    memcpy(out, "\5HELLO\1\0", 8); /* name, CurveZMQ version 1.0, then 72 bytes padding */
    memcpy(out + 80, cv->cn_pub, ZCURVE_KEY);
    nonce_of(nonce, "CurveZMQHELLO---", cv->nonce++);
    memcpy(out + 112, nonce + 16, 8);
    /* the signature: Box[64 zero bytes](C'->S); fails for a server key that is a weak
     * point of the curve */
    return crypto_box_easy(out + 120, zero, sizeof zero, nonce, cv->server, cv->cn_sec) == 0 ? 0
                                                                                             : -1;
}

int zcurve_welcome(struct zmtp_curve *cv, const unsigned char *b, size_t n)
{
    unsigned char nonce[24], plain[128];
    if (n != ZCURVE_WELCOME_LEN || !zcurve_is(b, n, "WELCOME"))
        return -1;
    memcpy(nonce, "WELCOME-", 8);
    memcpy(nonce + 8, b + 8, 16);
    /* Box[S' + cookie](S->C') */
    if (crypto_box_open_easy(plain, b + 24, 144, nonce, cv->server, cv->cn_sec) != 0)
        return -1;
    memcpy(cv->cn_server, plain, ZCURVE_KEY);
    memcpy(cv->cookie, plain + ZCURVE_KEY, sizeof cv->cookie);
    sodium_memzero(plain, sizeof plain);
    return crypto_box_beforenm(cv->precom, cv->cn_server, cv->cn_sec) == 0 ? 0 : -1;
}

int zcurve_initiate(struct zmtp_curve *cv, unsigned char out[ZCURVE_INITIATE_LEN],
                    const unsigned char vouch_nonce[16])
{
    unsigned char nonce[24], vouch[64], plain[128 + ZCURVE_META_LEN];
    /* the vouch: Box[C' + S](C->S'), proving that we hold c */
    memcpy(vouch, cv->cn_pub, ZCURVE_KEY);
    memcpy(vouch + ZCURVE_KEY, cv->server, ZCURVE_KEY);
    memcpy(nonce, "VOUCH---", 8);
    memcpy(nonce + 8, vouch_nonce, 16);
    memcpy(plain, cv->pub, ZCURVE_KEY);
    memcpy(plain + 32, vouch_nonce, 16);
    if (crypto_box_easy(plain + 48, vouch, sizeof vouch, nonce, cv->cn_server, cv->sec) != 0)
        return -1;
    memcpy(plain + 128, ZCURVE_META, ZCURVE_META_LEN);
    memcpy(out, "\10INITIATE", 9);
    memcpy(out + 9, cv->cookie, sizeof cv->cookie);
    nonce_of(nonce, "CurveZMQINITIATE", cv->nonce++);
    memcpy(out + 105, nonce + 16, 8);
    /* Box[C + vouch + metadata](C'->S') */
    crypto_box_easy_afternm(out + 113, plain, sizeof plain, nonce, cv->precom);
    sodium_memzero(plain, sizeof plain);
    return 0;
}

/* Are (p, n) well-formed ZMTP metadata properties (name length, name, 4-byte value
 * length, value; names not empty)? */
static int metadata_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t nl = p[i];
        if (nl == 0 || n - i < 1 + nl + 4)
            return 0;
        i += 1 + nl;
        uint64_t vl =
            (uint64_t)p[i] << 24 | (uint64_t)p[i + 1] << 16 | (uint64_t)p[i + 2] << 8 | p[i + 3];
        i += 4;
        if (vl > n - i)
            return 0;
        i += (size_t)vl;
    }
    return 1;
}

int zcurve_ready(struct zmtp_curve *cv, const unsigned char *b, size_t n)
{
    unsigned char nonce[24], plain[ZCURVE_READY_MAX];
    if (n < 14 + 16 || n > 14 + 16 + sizeof plain || !zcurve_is(b, n, "READY"))
        return -1;
    uint64_t sn = get64(b + 6);
    nonce_of(nonce, "CurveZMQREADY---", sn);
    /* Box[metadata](S'->C') */
    if (crypto_box_open_easy_afternm(plain, b + 14, n - 14, nonce, cv->precom) != 0)
        return -1;
    cv->peer_nonce = sn;
    return metadata_ok(plain, n - 30) ? 0 : -1;
}

void zcurve_message(struct zmtp_curve *cv, unsigned char *out, unsigned flags, const void *data,
                    size_t len)
{
    unsigned char nonce[24];
    memcpy(out, "\7MESSAGE", 8);
    nonce_of(nonce, "CurveZMQMESSAGEC", cv->nonce++);
    memcpy(out + 8, nonce + 16, 8);
    /* the plaintext (flags, data) where the box's ciphertext goes: encrypted in place */
    out[32] = (unsigned char)flags;
    if (len)
        memcpy(out + 33, data, len);
    crypto_box_easy_afternm(out + 16, out + 32, len + 1, nonce, cv->precom);
}

int zcurve_open(struct zmtp_curve *cv, unsigned char *b, size_t n, unsigned *flags,
                unsigned char **data, size_t *len)
{
    unsigned char nonce[24];
    if (n < ZCURVE_MSG_OVERHEAD || !zcurve_is(b, n, "MESSAGE"))
        return -1;
    uint64_t sn = get64(b + 8);
    if (sn <= cv->peer_nonce) /* replayed or reordered */
        return -1;
    nonce_of(nonce, "CurveZMQMESSAGES", sn);
    if (crypto_box_open_easy_afternm(b + 32, b + 16, n - 16, nonce, cv->precom) != 0)
        return -1;
    cv->peer_nonce = sn;
    *flags = b[32];
    *data = b + 33;
    *len = n - ZCURVE_MSG_OVERHEAD;
    return 0;
}

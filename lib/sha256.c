/*
 * sha256.c - SHA-256 (FIPS 180-4) with a savable state (see sha256.h).
 */
#include "lib/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SHA256_X86 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

#ifdef SHA256_X86
/*
 * The same compression over n blocks with the x86 SHA extensions (SHA-NI: 4 rounds per
 * pair of sha256rnds2, the message schedule by sha256msg1/msg2): about ten times the
 * portable code where the processor has them (bench/stage.sh hashes every byte at each
 * hop). The state is kept as ABEF / CDGH, the layout the instructions use.
 */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_ni(uint32_t h[8], const uint8_t *p,
                                                                  size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                        /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                             /* CDGH */
    for (; n > 0; n--, p += 64) {
        __m128i w[16], save0 = s0, save1 = s1;
        for (int i = 0; i < 16; i++) {
            if (i < 4) {
                w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            } else {
                __m128i x = _mm_sha256msg1_epu32(w[i - 4], w[i - 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[i - 1], w[i - 2], 4));
                w[i] = _mm_sha256msg2_epu32(x, w[i - 1]);
            }
            __m128i m = _mm_add_epi32(w[i], _mm_loadu_si128((const __m128i *)&K[4 * i]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
        }
        s0 = _mm_add_epi32(s0, save0);
        s1 = _mm_add_epi32(s1, save1);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                                  /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                 /* DCHG */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0)); /* DCBA */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));    /* HGFE */
}

/* Whether the processor has the SHA extensions (and SSE4.1, SSSE3): asked once. */
static int have_ni(void)
{
    static int known = -1;
    unsigned a, b, c, d;
    if (known < 0) {
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_1) && (c & bit_SSSE3) &&
                __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
    }
    return known;
}
#endif

/* n whole blocks at p into h. */
static void blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#ifdef SHA256_X86
    if (have_ni()) {
        blocks_ni(h, p, n);
        return;
    }
#endif
    for (; n > 0; n--, p += 64)
        block(h, p);
}

void sha256_init(struct sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->n = 0;
    memset(s->buf, 0, sizeof s->buf);
}

void sha256_update(struct sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t have = (size_t)(s->n % 64);
    s->n += n;
    if (have) {
        size_t take = 64 - have < n ? 64 - have : n;
        memcpy(s->buf + have, p, take);
        p += take, n -= take;
        if (have + take < 64)
            return;
        block(s->h, s->buf);
    }
    blocks(s->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(s->buf, p, n);
}

void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN])
{
    uint64_t bits = s->n * 8;
    size_t have = (size_t)(s->n % 64);
    s->buf[have++] = 0x80;
    if (have > 56) {
        memset(s->buf + have, 0, 64 - have);
        block(s->h, s->buf);
        have = 0;
    }
    memset(s->buf + have, 0, 56 - have);
    for (int i = 0; i < 8; i++)
        s->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    block(s->h, s->buf);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (uint8_t)(s->h[i] >> (24 - 8 * k));
}

void sha256_save(const struct sha256 *s, uint8_t out[SHA256_SAVED])
{
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (uint8_t)(s->h[i] >> (24 - 8 * k));
    for (int i = 0; i < 8; i++)
        out[32 + i] = (uint8_t)(s->n >> (56 - 8 * i));
    memcpy(out + 40, s->buf, 64);
}

int sha256_load(struct sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (len != SHA256_SAVED)
        return -1;
    for (int i = 0; i < 8; i++)
        s->h[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
                  (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    s->n = 0;
    for (int i = 0; i < 8; i++)
        s->n = s->n << 8 | p[32 + i];
    memcpy(s->buf, p + 40, 64);
    return 0;
}

void sha256_hex(const uint8_t d[SHA256_LEN], char out[SHA256_HEX])
{
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_LEN; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[64] = '\0';
}

int sha256_is_hex(const char *s, size_t len)
{
    if (len != 64)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int sha256_file(const char *path, int oflags, char hex[SHA256_HEX], uint64_t *size)
{
    static uint8_t buf[1 << 16];
    struct sha256 s;
    uint8_t d[SHA256_LEN];
    int fd = open(path, O_RDONLY | O_CLOEXEC | oflags);
    if (fd < 0)
        return -1;
    sha256_init(&s);
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            sha256_update(&s, buf, (size_t)r);
    int e = errno;
    close(fd);
    if (r < 0) {
        errno = e;
        return -1;
    }
    *size = s.n;
    sha256_final(&s, d);
    sha256_hex(d, hex);
    return 0;
}

/*
 * test_zmtp_curve.c - the tools' own CurveZMQ client: lib/z85.c (RFC 32's example,
 * libzmq's encoder, bad input), the commands of cmd/zmtp_curve.c checked from the
 * server's side with fixed keys and nonces (HELLO, WELCOME, INITIATE with its vouch and
 * metadata, READY, MESSAGE both ways; tampered, truncated, replayed and misnamed
 * commands refused), and cmd/zmtp.c over CURVE against a real libzmq ROUTER with a ZAP
 * handler: requests of every size, a refused key, a wrong server key, a plain server,
 * heartbeats answered; and against a scripted server whose answers are malformed or
 * out of order: a clear error each, never a crash or a hang.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "cmd/zmtp.h"
#include "cmd/zmtp_curve.h"
#include "lib/z85.h"

/* The key pairs of RFC 26's and libzmq's CURVE examples. */
static const char srv_pub_z85[] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
static const char srv_sec_z85[] = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
static const char cli_pub_z85[] = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
static const char cli_sec_z85[] = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs";

static void key_of(unsigned char out[32], const char *z85)
{
    assert_int_equal(z85_decode(out, z85, 40), 32);
}

static void test_z85(void **state)
{
    (void)state;
    static const unsigned char hello[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
    char text[64];
    unsigned char bin[48];
    assert_int_equal(z85_encode(text, hello, 8), 10);
    assert_string_equal(text, "HelloWorld");
    assert_int_equal(z85_decode(bin, "HelloWorld", 10), 8);
    assert_memory_equal(bin, hello, 8);
    /* random keys: the same text as libzmq's encoder, and back */
    for (int k = 0; k < 50; k++) {
        unsigned char key[32], back[32];
        char zt[41];
        randombytes_buf(key, sizeof key);
        assert_int_equal(z85_encode(text, key, 32), 40);
        assert_non_null(zmq_z85_encode(zt, key, 32));
        assert_string_equal(text, zt);
        assert_int_equal(z85_decode(back, text, 40), 32);
        assert_memory_equal(back, key, 32);
    }
    /* bad input: length, characters outside the alphabet, a group over 2^32 - 1 */
    assert_int_equal(z85_encode(text, hello, 7), 0);
    assert_int_equal(z85_decode(bin, "Hello", 4), -1);
    assert_int_equal(z85_decode(bin, "Hel\"o", 5), -1);
    assert_int_equal(z85_decode(bin, "Hel o", 5), -1);
    assert_int_equal(z85_decode(bin, "#####", 5), -1);
    assert_int_equal(z85_decode(bin, "%nSc0", 5), 4); /* 2^32 - 1 */
    assert_memory_equal(bin, "\xff\xff\xff\xff", 4);
}

/* The server's side of one connection, built here from the RFC with libsodium. */
struct fake_server {
    unsigned char pub[32], sec[32];       /* S, s */
    unsigned char cn_pub[32], cn_sec[32]; /* S', s' */
    unsigned char client_cn[32];          /* C' from the HELLO */
    unsigned char cookie[96];
};

static void nonce16(unsigned char n[24], const char *prefix, uint64_t v)
{
    memcpy(n, prefix, 16);
    for (int i = 0; i < 8; i++)
        n[16 + i] = (unsigned char)(v >> (56 - 8 * i));
}

/* A client with fixed keys: the long-term pair of the examples, a transient pair
 * from a fixed seed. */
static void client_fixed(struct zmtp_curve *cv)
{
    char err[160];
    unsigned char seed[32];
    memset(seed, 7, sizeof seed);
    assert_int_equal(zcurve_init(cv, cli_sec_z85, srv_pub_z85, err, sizeof err), 0);
    crypto_box_seed_keypair(cv->cn_pub, cv->cn_sec, seed);
}

/* HELLO checked by the server; its WELCOME for it into w. */
static void server_hello_welcome(struct fake_server *s, const unsigned char *hello,
                                 unsigned char w[ZCURVE_WELCOME_LEN])
{
    unsigned char nonce[24], zero[64], plain[128], seed[32];
    key_of(s->pub, srv_pub_z85);
    key_of(s->sec, srv_sec_z85);
    memset(seed, 9, sizeof seed);
    crypto_box_seed_keypair(s->cn_pub, s->cn_sec, seed);
    assert_memory_equal(hello, "\5HELLO\1\0", 8);
    for (int i = 8; i < 80; i++)
        assert_int_equal(hello[i], 0);
    memcpy(s->client_cn, hello + 80, 32);
    memcpy(nonce, "CurveZMQHELLO---", 16);
    memcpy(nonce + 16, hello + 112, 8);
    assert_int_equal(crypto_box_open_easy(zero, hello + 120, 80, nonce, s->client_cn, s->sec), 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(zero[i], 0);
    memset(s->cookie, 0x5c, sizeof s->cookie);
    memcpy(plain, s->cn_pub, 32);
    memcpy(plain + 32, s->cookie, 96);
    memcpy(w, "\7WELCOME", 8);
    memset(w + 8, 0x21, 16);
    memcpy(nonce, "WELCOME-", 8);
    memcpy(nonce + 8, w + 8, 16);
    assert_int_equal(crypto_box_easy(w + 24, plain, 128, nonce, s->client_cn, s->sec), 0);
}

static void test_commands(void **state)
{
    (void)state;
    struct zmtp_curve cv;
    struct fake_server s;
    unsigned char hello[ZCURVE_HELLO_LEN], w[ZCURVE_WELCOME_LEN], bad[ZCURVE_WELCOME_LEN];
    unsigned char pub[32];
    client_fixed(&cv);
    key_of(pub, cli_pub_z85);
    assert_memory_equal(cv.pub, pub, 32); /* the public key derived from the secret */
    assert_int_equal(zcurve_hello(&cv, hello), 0);
    assert_memory_equal(hello + 112, "\0\0\0\0\0\0\0\1", 8); /* the first short nonce */
    server_hello_welcome(&s, hello, w);
    /* a WELCOME that is cut, misnamed or tampered with is refused */
    assert_int_equal(zcurve_welcome(&cv, w, sizeof w - 1), -1);
    memcpy(bad, w, sizeof w);
    bad[1] = 'w';
    assert_int_equal(zcurve_welcome(&cv, bad, sizeof bad), -1);
    memcpy(bad, w, sizeof w);
    bad[100] ^= 1;
    assert_int_equal(zcurve_welcome(&cv, bad, sizeof bad), -1);
    assert_int_equal(zcurve_welcome(&cv, w, sizeof w), 0);
    assert_memory_equal(cv.cn_server, s.cn_pub, 32);

    /* INITIATE: cookie, nonce 2, and a box holding C, the vouch and our metadata */
    unsigned char ini[ZCURVE_INITIATE_LEN], vn[16], nonce[24], plain[128 + ZCURVE_META_LEN];
    memset(vn, 0x33, sizeof vn);
    assert_int_equal(zcurve_initiate(&cv, ini, vn), 0);
    assert_memory_equal(ini, "\10INITIATE", 9);
    assert_memory_equal(ini + 9, s.cookie, 96);
    assert_memory_equal(ini + 105, "\0\0\0\0\0\0\0\2", 8);
    nonce16(nonce, "CurveZMQINITIATE", 2);
    assert_int_equal(
        crypto_box_open_easy(plain, ini + 113, sizeof ini - 113, nonce, s.client_cn, s.cn_sec), 0);
    assert_memory_equal(plain, pub, 32);
    assert_memory_equal(plain + 32, vn, 16);
    unsigned char vouch[64];
    memcpy(nonce, "VOUCH---", 8);
    memcpy(nonce + 8, vn, 16);
    assert_int_equal(crypto_box_open_easy(vouch, plain + 48, 80, nonce, pub, s.cn_sec), 0);
    assert_memory_equal(vouch, s.client_cn, 32);
    assert_memory_equal(vouch + 32, s.pub, 32);
    assert_memory_equal(plain + 128, "\013Socket-Type\0\0\0\6DEALER", ZCURVE_META_LEN);

    /* READY from the server, nonce 1, metadata Socket-Type ROUTER */
    static const char meta[] = "\013Socket-Type\0\0\0\6ROUTER";
    unsigned char ready[14 + 16 + 22], rbad[sizeof ready];
    memcpy(ready, "\5READY", 6);
    memcpy(ready + 6, "\0\0\0\0\0\0\0\1", 8);
    nonce16(nonce, "CurveZMQREADY---", 1);
    assert_int_equal(
        crypto_box_easy(ready + 14, (const unsigned char *)meta, 22, nonce, s.client_cn, s.cn_sec),
        0);
    memcpy(rbad, ready, sizeof ready);
    rbad[20] ^= 0x80;
    assert_int_equal(zcurve_ready(&cv, rbad, sizeof rbad), -1);
    assert_int_equal(zcurve_ready(&cv, ready, 29), -1);
    assert_int_equal(zcurve_ready(&cv, ready, sizeof ready), 0);

    /* MESSAGE to the server: nonce 3, flags byte 0, the data */
    unsigned char m[5 + ZCURVE_MSG_OVERHEAD], mp[6];
    zcurve_message(&cv, m, 0, "hello", 5);
    assert_memory_equal(m, "\7MESSAGE\0\0\0\0\0\0\0\3", 16);
    nonce16(nonce, "CurveZMQMESSAGEC", 3);
    assert_int_equal(crypto_box_open_easy(mp, m + 16, sizeof m - 16, nonce, s.client_cn, s.cn_sec),
                     0);
    assert_memory_equal(mp, "\0hello", 6);

    /* MESSAGEs from the server: opened in place; replayed, tampered, cut refused */
    unsigned char r[3 + ZCURVE_MSG_OVERHEAD], r2[sizeof r], *data;
    unsigned flags;
    size_t len;
    memcpy(r, "\7MESSAGE\0\0\0\0\0\0\0\2", 16);
    nonce16(nonce, "CurveZMQMESSAGES", 2);
    assert_int_equal(
        crypto_box_easy(r + 16, (const unsigned char *)"\2abc", 4, nonce, s.client_cn, s.cn_sec),
        0);
    memcpy(r2, r, sizeof r);
    r2[sizeof r2 - 1] ^= 1;
    assert_int_equal(zcurve_open(&cv, r2, sizeof r2, &flags, &data, &len), -1);
    assert_int_equal(zcurve_open(&cv, r2, ZCURVE_MSG_OVERHEAD - 1, &flags, &data, &len), -1);
    memcpy(r2, r, sizeof r);
    assert_int_equal(zcurve_open(&cv, r, sizeof r, &flags, &data, &len), 0);
    assert_int_equal(flags, ZCURVE_FLAG_CMD);
    assert_int_equal(len, 3);
    assert_memory_equal(data, "abc", 3);
    assert_int_equal(zcurve_open(&cv, r2, sizeof r2, &flags, &data, &len), -1); /* replay */
    r2[1] = 'm';
    assert_int_equal(zcurve_open(&cv, r2, sizeof r2, &flags, &data, &len), -1);
    sodium_memzero(&cv, sizeof cv);
}

static void test_bad_keys(void **state)
{
    (void)state;
    struct zmtp_curve cv;
    char err[160];
    assert_int_equal(zcurve_init(&cv, "short", srv_pub_z85, err, sizeof err), -1);
    assert_non_null(strstr(err, "Z85"));
    assert_int_equal(
        zcurve_init(&cv, cli_sec_z85, "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf ", err, sizeof err),
        -1);
    /* the zero key is no point of the curve: HELLO cannot be made */
    unsigned char hello[ZCURVE_HELLO_LEN];
    assert_int_equal(
        zcurve_init(&cv, cli_sec_z85, "0000000000000000000000000000000000000000", err, sizeof err),
        0);
    assert_int_equal(zcurve_hello(&cv, hello), -1);
}

/* ---- against libzmq ---- */

/* A CURVE ROUTER echo server (bytes reversed) with a ZAP handler that admits the key
 * `admit` only; or a plain one (curve false). */
struct server {
    void *ctx, *sock, *zap;
    char endpoint[64];
    unsigned char admit[32];
    int answers, heartbeat_ms, delay_ms;
    volatile int stop;
    pthread_t th, zth;
};

static void *zap_handler(void *arg)
{
    struct server *s = arg;
    while (!s->stop) {
        zmq_pollitem_t it = {s->zap, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 50) <= 0)
            continue;
        zmq_msg_t f[7];
        int n = 0;
        do {
            zmq_msg_init(&f[n]);
            if (zmq_msg_recv(&f[n], s->zap, 0) < 0)
                return NULL;
        } while (zmq_msg_more(&f[n]) && ++n < 7);
        int ok =
            n == 6 && zmq_msg_size(&f[6]) == 32 && memcmp(zmq_msg_data(&f[6]), s->admit, 32) == 0;
        zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(s->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
        zmq_send(s->zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
        zmq_send(s->zap, ok ? "OK" : "no", 2, ZMQ_SNDMORE);
        zmq_send(s->zap, "u", 1, ZMQ_SNDMORE);
        zmq_send(s->zap, "", 0, 0);
        for (int i = 0; i <= n && i < 7; i++)
            zmq_msg_close(&f[i]);
    }
    return NULL;
}

static void *serve(void *arg)
{
    struct server *s = arg;
    for (int k = 0; k < s->answers; k++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, s->sock, 0) < 0 || zmq_msg_recv(&body, s->sock, 0) < 0)
            break;
        size_t n = zmq_msg_size(&body);
        unsigned char *in = zmq_msg_data(&body), *out = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            out[i] = in[n - 1 - i];
        if (s->delay_ms)
            usleep((useconds_t)s->delay_ms * 1000);
        zmq_send(s->sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
        zmq_send(s->sock, out, n, 0);
        free(out);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return NULL;
}

static void server_start(struct server *s, bool curve, int answers)
{
    int zero = 0, one = 1, timeout = 3 * s->heartbeat_ms;
    size_t len = sizeof s->endpoint;
    s->answers = answers;
    s->ctx = zmq_ctx_new();
    if (curve) {
        s->zap = zmq_socket(s->ctx, ZMQ_REP);
        zmq_setsockopt(s->zap, ZMQ_LINGER, &zero, sizeof zero);
        assert_int_equal(zmq_bind(s->zap, "inproc://zeromq.zap.01"), 0);
        assert_int_equal(pthread_create(&s->zth, NULL, zap_handler, s), 0);
    }
    s->sock = zmq_socket(s->ctx, ZMQ_ROUTER);
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (curve) {
        zmq_setsockopt(s->sock, ZMQ_CURVE_SERVER, &one, sizeof one);
        zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, srv_sec_z85, 40);
    }
    if (s->heartbeat_ms > 0) {
        zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_IVL, &s->heartbeat_ms, sizeof s->heartbeat_ms);
        zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    }
    assert_int_equal(zmq_bind(s->sock, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len), 0);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
    pthread_join(s->th, NULL);
    zmq_close(s->sock);
    if (s->zap) {
        s->stop = 1;
        pthread_join(s->zth, NULL);
        zmq_close(s->zap);
    }
    zmq_ctx_term(s->ctx);
}

static struct zmtp_keys client_keys(void)
{
    struct zmtp_keys k;
    memcpy(k.secret, cli_sec_z85, 41);
    memcpy(k.server, srv_pub_z85, 41);
    return k;
}

static void expect_echo(struct zmtp *z, const unsigned char *msg, size_t n)
{
    const unsigned char *got;
    size_t len;
    int rc = zmtp_recv(z, &got, &len);
    if (rc)
        fprintf(stderr, "zmtp_recv: %s\n", z->err);
    assert_int_equal(rc, 0);
    assert_int_equal(len, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], msg[n - 1 - i]);
}

/* Requests of every frame size, the first with the handshake, then more on the
 * same connection. */
static void test_libzmq_roundtrips(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 222, 223, 4096, 70000, 3u << 20};
    size_t ns = sizeof sizes / sizeof sizes[0];
    struct server s = {0};
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    key_of(s.admit, cli_pub_z85);
    server_start(&s, true, (int)(ns + 1));
    unsigned char *msg = malloc(sizes[ns - 1]);
    assert_non_null(msg);
    for (size_t i = 0; i < sizes[ns - 1]; i++)
        msg[i] = (unsigned char)(i * 7 + 3);
    int rc = zmtp_open_curve(&z, s.endpoint, 10000, 10000, 64u << 20, &k, msg, 17);
    if (rc)
        fprintf(stderr, "zmtp_open_curve: %s\n", z.err);
    assert_int_equal(rc, 0);
    expect_echo(&z, msg, 17);
    for (size_t i = 0; i < ns; i++) {
        assert_int_equal(zmtp_send(&z, msg, sizes[i]), 0);
        expect_echo(&z, msg, sizes[i]);
    }
    zmtp_close(&z);
    server_stop(&s);
    free(msg);
}

/* The ZAP handler refuses our key: ERROR, told apart from other failures. */
static void test_libzmq_key_refused(void **state)
{
    (void)state;
    struct server s = {0};
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    memset(s.admit, 1, sizeof s.admit);
    server_start(&s, true, 0);
    assert_int_equal(zmtp_open_curve(&z, s.endpoint, 10000, 10000, 1024, &k, "x", 1), -1);
    assert_int_equal(z.refused, ZMTP_KEY_REFUSED);
    assert_non_null(strstr(z.err, "400"));
    zmtp_close(&z);
    server_stop(&s);
}

/* We hold the wrong server key (the server cannot open our HELLO and closes), or the
 * server runs plain: both a failed handshake, soon, not a timeout. */
static void test_libzmq_wrong_server_or_plain(void **state)
{
    (void)state;
    struct server s = {0};
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    memcpy(k.server, cli_pub_z85, 41);
    key_of(s.admit, cli_pub_z85);
    server_start(&s, true, 0);
    assert_int_equal(zmtp_open_curve(&z, s.endpoint, 10000, 10000, 1024, &k, "x", 1), -1);
    assert_int_equal(z.refused, ZMTP_HANDSHAKE);
    zmtp_close(&z);
    server_stop(&s);

    struct server p = {0};
    k = client_keys();
    server_start(&p, false, 0);
    assert_int_equal(zmtp_open_curve(&z, p.endpoint, 10000, 10000, 1024, &k, "x", 1), -1);
    assert_int_equal(z.refused, ZMTP_HANDSHAKE);
    zmtp_close(&z);
    server_stop(&p);
}

/* A server with heartbeats on that answers slowly: its PINGs come encrypted and get
 * encrypted PONGs, so the connection stays up until the answer. */
static void test_libzmq_heartbeats(void **state)
{
    (void)state;
    struct server s = {.heartbeat_ms = 100, .delay_ms = 1000};
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    key_of(s.admit, cli_pub_z85);
    server_start(&s, true, 1);
    assert_int_equal(zmtp_open_curve(&z, s.endpoint, 20000, 20000, 1024, &k, "ping?", 5), 0);
    expect_echo(&z, (const unsigned char *)"ping?", 5);
    zmtp_close(&z);
    server_stop(&s);
}

/* ---- a scripted server: after the client's greeting and HELLO, sends `reply` ---- */

struct script {
    int lfd;
    const unsigned char *reply;
    size_t len;
};

static void *scripted(void *arg)
{
    struct script *sc = arg;
    int c = accept(sc->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    unsigned char in[64 + 2 + ZCURVE_HELLO_LEN];
    size_t got = 0;
    while (got < sizeof in) {
        ssize_t n = recv(c, in + got, sizeof in - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (send(c, sc->reply, sc->len, MSG_NOSIGNAL) < 0) {
        close(c);
        return NULL;
    }
    char sink[256];
    while (recv(c, sink, sizeof sink, 0) > 0) /* until the client gives up */
        ;
    close(c);
    return NULL;
}

/* Runs the client against a server answering reply; returns its error text. */
static void against(const unsigned char *reply, size_t len, enum zmtp_refusal want,
                    const char *words)
{
    struct script sc = {socket(AF_INET, SOCK_STREAM, 0), reply, len};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(sc.lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(sc.lfd, 4), 0);
    assert_int_equal(getsockname(sc.lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, scripted, &sc), 0);
    char ep[64];
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(zmtp_open_curve(&z, ep, 5000, 0, 1024, &k, "x", 1), -1);
    if (!strstr(z.err, words))
        fprintf(stderr, "error: %s (expected '%s')\n", z.err, words);
    assert_non_null(strstr(z.err, words));
    assert_int_equal(z.refused, want);
    zmtp_close(&z);
    pthread_join(th, NULL);
    close(sc.lfd);
}

static void test_malformed_server(void **state)
{
    (void)state;
    unsigned char r[64 + 9 + 300];
    static const unsigned char g[12] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
    memset(r, 0, sizeof r);
    memcpy(r, g, sizeof g);
    memcpy(r + 12, "CURVE", 5);
    /* a WELCOME of the wrong size */
    memcpy(r + 64, "\4\11\7WELCOME\0", 11);
    against(r, 64 + 11, ZMTP_HANDSHAKE, "WELCOME does not open");
    /* a WELCOME of the right size whose box does not open */
    r[64 + 1] = ZCURVE_WELCOME_LEN;
    against(r, 64 + 2 + ZCURVE_WELCOME_LEN, ZMTP_HANDSHAKE, "WELCOME does not open");
    /* a message frame, not a command */
    r[64] = 0;
    against(r, 64 + 2 + ZCURVE_WELCOME_LEN, ZMTP_OK, "malformed (expected WELCOME)");
    /* a command with a name longer than itself */
    memcpy(r + 64, "\4\3\50ab", 5);
    against(r, 64 + 5, ZMTP_OK, "malformed");
    /* another command than WELCOME */
    memcpy(r + 64, "\4\6\5READY", 8);
    against(r, 64 + 8, ZMTP_OK, "sent READY, not WELCOME");
    /* ERROR: the key refused; its reason shown printable only */
    memcpy(r + 64, "\4\13\5ERROR\4ab\n\33", 13);
    against(r, 64 + 13, ZMTP_KEY_REFUSED, "refused the connection: ab");
    /* a frame over the size limit */
    memcpy(r + 64, "\6\0\0\0\0\1\0\0\0", 9);
    against(r, 64 + 9, ZMTP_OK, "over the");
    /* a greeting that is not ZMTP 3 */
    r[10] = 2;
    against(r, 64, ZMTP_OK, "does not speak ZMTP 3");
    /* a greeting with another mechanism */
    r[10] = 3;
    memcpy(r + 12, "PLAIN", 5);
    against(r, 64, ZMTP_HANDSHAKE, "mechanism 'PLAIN', not CURVE");
}

/* ---- a scripted CURVE server: a real handshake, then scripted MESSAGEs ---- */

struct curve_script {
    int lfd;
    int mode; /* 0 replay, 1 tampered, 2 plaintext command, 3 PING wanting a PONG */
    unsigned char cn_client[32], cn_sec[32], precom[32];
};

static int recv_exact(int c, unsigned char *b, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(c, b + got, n - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* A frame header and a MESSAGE from the server with nonce sn and plaintext (p, n). */
static size_t server_message(struct curve_script *sc, unsigned char *out, uint64_t sn,
                             const unsigned char *p, size_t n)
{
    unsigned char nonce[24];
    out[0] = 0;
    out[1] = (unsigned char)(n + 32);
    memcpy(out + 2, "\7MESSAGE", 8);
    nonce16(nonce, "CurveZMQMESSAGES", sn);
    memcpy(out + 10, nonce + 16, 8);
    if (crypto_box_easy_afternm(out + 18, p, n, nonce, sc->precom) != 0)
        return 0;
    return n + 34;
}

static void *curve_scripted(void *arg)
{
    struct curve_script *sc = arg;
    unsigned char in[64 + 2 + ZCURVE_HELLO_LEN], out[512], srv_sec[32], cn_pub[32], nonce[24];
    int c = accept(sc->lfd, NULL, NULL);
    if (c < 0 || recv_exact(c, in, sizeof in) < 0)
        goto done;
    /* greeting and WELCOME */
    z85_decode(srv_sec, srv_sec_z85, 40);
    memcpy(sc->cn_client, in + 66 + 80, 32);
    crypto_box_keypair(cn_pub, sc->cn_sec);
    unsigned char plain[128];
    memcpy(plain, cn_pub, 32);
    randombytes_buf(plain + 32, 96);
    memset(out, 0, 64);
    memcpy(out, "\xff\0\0\0\0\0\0\0\1\x7f\3\0CURVE", 17);
    out[32] = 1; /* as-server */
    out[64] = 4;
    out[65] = ZCURVE_WELCOME_LEN;
    memcpy(out + 66, "\7WELCOME", 8);
    randombytes_buf(out + 74, 16);
    memcpy(nonce, "WELCOME-", 8);
    memcpy(nonce + 8, out + 74, 16);
    if (crypto_box_easy(out + 90, plain, 128, nonce, sc->cn_client, srv_sec) != 0 ||
        send(c, out, 66 + ZCURVE_WELCOME_LEN, MSG_NOSIGNAL) < 0)
        goto done;
    /* INITIATE (not checked here: test_commands does), READY */
    unsigned char ini[9 + ZCURVE_INITIATE_LEN], msg[2 + 1 + ZCURVE_MSG_OVERHEAD];
    if (recv_exact(c, ini, sizeof ini) < 0 ||
        crypto_box_beforenm(sc->precom, sc->cn_client, sc->cn_sec) != 0)
        goto done;
    memcpy(out, "\4\36\5READY\0\0\0\0\0\0\0\1", 16);
    nonce16(nonce, "CurveZMQREADY---", 1);
    if (crypto_box_easy_afternm(out + 16, NULL, 0, nonce, sc->precom) != 0 ||
        send(c, out, 32, MSG_NOSIGNAL) < 0 || recv_exact(c, msg, sizeof msg) < 0)
        goto done;
    size_t o = server_message(sc, out, 2, (const unsigned char *)"\0hi", 3);
    if (sc->mode == 0) { /* "hi", then the same MESSAGE again */
        memcpy(out + o, out, o);
        o *= 2;
    } else if (sc->mode == 1) {
        out[o - 1] ^= 1;
    } else if (sc->mode == 2) {
        memcpy(out, "\4\5\4PING", 7);
        o = 7;
    } else { /* a PING; "ok" only after a PONG that opens, nonce 4 */
        o = server_message(sc, out, 2, (const unsigned char *)"\2\4PING\0\0", 8);
    }
    if (send(c, out, o, MSG_NOSIGNAL) < 0)
        goto done;
    if (sc->mode == 3) {
        unsigned char pong[2 + 6 + ZCURVE_MSG_OVERHEAD - 1], pp[6];
        if (recv_exact(c, pong, sizeof pong) < 0)
            goto done;
        nonce16(nonce, "CurveZMQMESSAGEC", 4);
        if (pong[1] != sizeof pong - 2 || memcmp(pong + 10, nonce + 16, 8) != 0 ||
            crypto_box_open_easy_afternm(pp, pong + 18, sizeof pong - 18, nonce, sc->precom) ||
            memcmp(pp, "\2\4PONG", 6) != 0)
            goto done;
        o = server_message(sc, out, 3, (const unsigned char *)"\0ok", 3);
        if (send(c, out, o, MSG_NOSIGNAL) < 0)
            goto done;
    }
    char sink[256];
    while (recv(c, sink, sizeof sink, 0) > 0) /* until the client gives up */
        ;
done:
    if (c >= 0)
        close(c);
    return NULL;
}

/* The client's first recv (and, for mode 0, its second) against mode's script. */
static void after_handshake(int mode, const char *first, const char *words)
{
    struct curve_script sc = {.lfd = socket(AF_INET, SOCK_STREAM, 0), .mode = mode};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(sc.lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(sc.lfd, 4), 0);
    assert_int_equal(getsockname(sc.lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, curve_scripted, &sc), 0);
    char ep[64];
    struct zmtp z;
    struct zmtp_keys k = client_keys();
    const unsigned char *d;
    size_t n;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    int rc = zmtp_open_curve(&z, ep, 5000, 1000, 1024, &k, "x", 1);
    if (rc)
        fprintf(stderr, "zmtp_open_curve: %s\n", z.err);
    assert_int_equal(rc, 0);
    rc = zmtp_recv(&z, &d, &n);
    if (first) {
        assert_int_equal(rc, 0);
        assert_int_equal(n, strlen(first));
        assert_memory_equal(d, first, n);
        rc = words ? zmtp_recv(&z, &d, &n) : 0;
    }
    if (words) {
        assert_int_equal(rc, -1);
        if (!strstr(z.err, words))
            fprintf(stderr, "error: %s (expected '%s')\n", z.err, words);
        assert_non_null(strstr(z.err, words));
    }
    zmtp_close(&z);
    pthread_join(th, NULL);
    close(sc.lfd);
}

static void test_after_handshake(void **state)
{
    (void)state;
    after_handshake(0, "hi", "does not open"); /* a replayed MESSAGE */
    after_handshake(1, NULL, "does not open"); /* a tampered one */
    after_handshake(2, NULL, "unencrypted command (PING)");
    after_handshake(3, "ok", NULL); /* an encrypted PING gets an encrypted PONG */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_z85),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_libzmq_roundtrips),
        cmocka_unit_test(test_libzmq_key_refused),
        cmocka_unit_test(test_libzmq_wrong_server_or_plain),
        cmocka_unit_test(test_libzmq_heartbeats),
        cmocka_unit_test(test_malformed_server),
        cmocka_unit_test(test_after_handshake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

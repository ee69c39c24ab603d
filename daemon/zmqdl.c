/*
 * zmqdl.c - libzmq, loaded on first use. The binary is not linked against libzmq:
 * every zmq_* function the code calls is defined here and forwards to libzmq.so.5,
 * which is dlopen()ed the first time any of them runs. Loading libzmq and the
 * fifteen libraries it pulls in (libstdc++, libsodium, libpgm, libnorm, Kerberos,
 * ...) costs about 3 ms of page faults and relocations at every process start; the
 * user tools (submit, jobs, ...) speak ZMTP themselves over TCP (cmd/zmtp.c) and so
 * never pay it, while the roles pay it once, at their first zmq call.
 *
 * Calling a zmq_* function not listed here fails at link time (undefined
 * reference): add it to the table. If libzmq.so.5 cannot be loaded the process
 * stops with a message (as the dynamic loader would have at start-up).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

/* X(return type, name, parameters, arguments) for every function used. */
#define ZMQ_FUNCS(X)                                                                               \
    X(void *, zmq_ctx_new, (void), ())                                                             \
    X(int, zmq_ctx_term, (void *c), (c))                                                           \
    X(int, zmq_ctx_set, (void *c, int o, int v), (c, o, v))                                        \
    X(void *, zmq_socket, (void *c, int t), (c, t))                                                \
    X(int, zmq_close, (void *s), (s))                                                              \
    X(int, zmq_setsockopt, (void *s, int o, const void *v, size_t n), (s, o, v, n))                \
    X(int, zmq_getsockopt, (void *s, int o, void *v, size_t *n), (s, o, v, n))                     \
    X(int, zmq_bind, (void *s, const char *a), (s, a))                                             \
    X(int, zmq_connect, (void *s, const char *a), (s, a))                                          \
    X(int, zmq_send, (void *s, const void *b, size_t n, int f), (s, b, n, f))                      \
    X(int, zmq_poll, (zmq_pollitem_t * i, int n, long t), (i, n, t))                               \
    X(int, zmq_msg_init, (zmq_msg_t * m), (m))                                                     \
    X(int, zmq_msg_close, (zmq_msg_t * m), (m))                                                    \
    X(int, zmq_msg_recv, (zmq_msg_t * m, void *s, int f), (m, s, f))                               \
    X(void *, zmq_msg_data, (zmq_msg_t * m), (m))                                                  \
    X(size_t, zmq_msg_size, (const zmq_msg_t *m), (m))                                             \
    X(const char *, zmq_msg_gets, (const zmq_msg_t *m, const char *p), (m, p))                     \
    X(const char *, zmq_strerror, (int e), (e))                                                    \
    X(int, zmq_msg_more, (const zmq_msg_t *m), (m))                                                \
    X(int, zmq_curve_keypair, (char *p, char *s), (p, s))                                          \
    X(int, zmq_curve_public, (char *p, const char *s), (p, s))                                     \
    X(char *, zmq_z85_encode, (char *d, const uint8_t *s, size_t n), (d, s, n))                    \
    X(int, zmq_socket_monitor, (void *s, const char *a, int e), (s, a, e))

static struct {
#define X(ret, name, params, args) ret(*name) params;
    ZMQ_FUNCS(X)
#undef X
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *lib = dlopen("libzmq.so.5", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "gridnode: cannot load libzmq (install libzmq5): %s\n", dlerror());
        exit(127);
    }
#define X(ret, name, params, args)                                                                 \
    if (!(*(void **)&fn.name = dlsym(lib, #name))) {                                               \
        fprintf(stderr, "gridnode: libzmq.so.5 lacks %s: %s\n", #name, dlerror());                 \
        exit(127);                                                                                 \
    }
    ZMQ_FUNCS(X)
#undef X
}

#define X(ret, name, params, args)                                                                 \
    ret name params                                                                                \
    {                                                                                              \
        pthread_once(&once, load);                                                                 \
        return fn.name args;                                                                       \
    }
ZMQ_FUNCS(X)
#undef X

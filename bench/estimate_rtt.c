/*
 * estimate_rtt.c - the timed requester of bench/batch_showstart.sh: sends ESTIMATE
 * (showstart ID) requests to a live batch role one at a time over a DEALER and
 * times each round trip, so the figure measures the role and not a python client.
 *
 *   estimate_rtt ENDPOINT N < job-ids      (one pending job id a line)
 *
 * First it times N requests for a job id that does not exist (the role answers
 * NOT_FOUND without estimating: the floor of one round trip), then N requests for
 * ids picked at random from stdin; every reply must be STARTS. Prints one JSON
 * object: p50_us, p99_us, floor_p50_us, floor_p99_us. Exit 1 on any error or a
 * reply missing for 60 s.
 */
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define WT_ESTIMATE 84
#define WT_STARTS 85

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One ESTIMATE for job `job`; returns the reply's type, or -1. */
static int64_t ask(void *d, uint64_t id, uint64_t job)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_uint64(&pk, WT_ESTIMATE);
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_uint64(&pk, id);
    msgpack_pack_str_with_body(&pk, "job", 3);
    msgpack_pack_uint64(&pk, job);
    int rc = zmq_send(d, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    if (rc < 0)
        return -1;
    zmq_pollitem_t it = {d, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 60000) != 1)
        return -1;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, d, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int64_t t = -1;
    if (msgpack_unpack_next(&u, zmq_msg_data(&m), zmq_msg_size(&m), NULL) ==
            MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < u.data.via.map.size; i++) {
            const msgpack_object_kv *kv = &u.data.via.map.ptr[i];
            if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 1 &&
                kv->key.via.str.ptr[0] == 't' && kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                t = (int64_t)kv->val.via.u64;
        }
    msgpack_unpacked_destroy(&u);
    zmq_msg_close(&m);
    return t;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: estimate_rtt ENDPOINT N < job-ids\n");
        return 2;
    }
    int n = atoi(argv[2]);
    size_t nids = 0, cap = 1024;
    uint64_t *ids = malloc(cap * sizeof *ids), v;
    double *lat = malloc((n > 0 ? (size_t)n : 1) * sizeof *lat),
           *flo = malloc((n > 0 ? (size_t)n : 1) * sizeof *flo);
    if (!ids || !lat || !flo || n < 1)
        return 2;
    while (scanf("%" SCNu64, &v) == 1) {
        if (nids == cap) {
            uint64_t *ni = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!ni)
                return 2;
            ids = ni;
        }
        ids[nids++] = v;
    }
    if (!nids) {
        fprintf(stderr, "estimate_rtt: no job ids on stdin\n");
        return 2;
    }
    void *ctx = zmq_ctx_new(), *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(d, argv[1]) < 0) {
        fprintf(stderr, "estimate_rtt: cannot connect to %s\n", argv[1]);
        return 1;
    }
    uint64_t id = 1;
    unsigned seed = 9;
    for (int i = 0; i < n; i++) { /* the floor: NOT_FOUND, no estimate */
        double t0 = now_us();
        if (ask(d, id++, UINT64_MAX >> 1) < 0) {
            fprintf(stderr, "estimate_rtt: no reply from %s\n", argv[1]);
            return 1;
        }
        flo[i] = now_us() - t0;
    }
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        uint64_t job = ids[(seed >> 4) % nids];
        double t0 = now_us();
        int64_t t = ask(d, id++, job);
        lat[i] = now_us() - t0;
        if (t != WT_STARTS) {
            fprintf(stderr, "estimate_rtt: job %" PRIu64 ": reply type %" PRId64 ", not STARTS\n",
                    job, t);
            return 1;
        }
    }
    qsort(lat, (size_t)n, sizeof *lat, cmpd);
    qsort(flo, (size_t)n, sizeof *flo, cmpd);
    int p99 = n * 99 / 100 < n ? n * 99 / 100 : n - 1;
    printf("{\"p50_us\": %.0f, \"p99_us\": %.0f, \"floor_p50_us\": %.0f, \"floor_p99_us\": %.0f}\n",
           lat[n / 2], lat[p99], flo[n / 2], flo[p99]);
    zmq_close(d);
    zmq_ctx_term(ctx);
    free(ids);
    free(lat);
    free(flo);
    return 0;
}

/*
 * test_fileoffer.c - daemon/fileoffer.h between two real stores: a file of two and a half
 * chunks offered by one level reaches the other whole through FILE_HAVE and FILE_PUT
 * (the receiver's own handlers answer), at most FILEOFFER_INFLIGHT chunks in flight; a
 * chunk whose bytes are lost makes the answers out of step and the offer goes on from
 * what the receiver holds; an offer begun again after the receiver kept part of the file resumes
 * there; a refusal ends the offer with the receiver's text; another user's upload of the
 * same file under way at the receiver makes the offer wait (nothing sent meanwhile) and,
 * once it stalled, the offer sends the file from 0; the sweep deletes only the files
 * nothing named.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/fileoffer.h"
#include "store/store.h"

static const struct store_table tables[] = {{"files", STORE_KEY_STR}, {NULL}};

/* One level: a store and its file store. */
struct level {
    char dir[64], files[96];
    struct store *s;
    bool failed;
    struct filestore *fs;
};

/* A request queued to the receiver, with the key its answer goes back with. */
struct sent {
    void *data;
    size_t len;
    uint64_t key;
};

struct fx {
    struct level from, to;
    struct fileoffer *o;
    struct sent q[64];
    uint32_t nq;
    uint64_t key, next_id;
    uint32_t drop; /* 1 + index of a FILE_PUT whose bytes are lost (only the state is
                      answered: the next ones are out of step), 0 none */
    uint32_t puts;
    uint64_t user_bytes; /* the receiver's files.user_mb, in bytes (0: none) */
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int level_open(struct level *l)
{
    strcpy(l->dir, "/tmp/gridnode-fo-XXXXXX");
    if (!mkdtemp(l->dir))
        return -1;
    snprintf(l->files, sizeof l->files, "%s/files", l->dir);
    char err[256];
    struct store_opts o = {"test", tables, STORE_SYNC_NONE, 0, false};
    if (!(l->s = store_open(l->dir, &o, err, sizeof err)))
        return -1;
    struct filestore_cfg c = {l->s, store_table(l->s, "files"), l->files, "the test", &l->failed,
                              NULL};
    return (l->fs = filestore_open(&c)) ? 0 : -1;
}

static void level_close(struct level *l)
{
    filestore_destroy(&l->fs);
    store_close(&l->s);
    nftw(l->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void commit(struct level *l)
{
    assert_int_equal(filestore_sync(l->fs), 0);
    assert_int_equal(store_commit(l->s), 0);
}

static void begin(void *role, void *peer, uint64_t key, uint32_t type, uint32_t nfields,
                  struct wire_buf *wb)
{
    struct fx *f = role;
    assert_ptr_equal(peer, &f->to);
    assert_true(type == WT_FILE_HAVE || type == WT_FILE_PUT);
    f->key = key;
    wire_begin(wb, type, ++f->next_id, nfields);
}

static void queue(void *role, void *peer, struct wire_buf *wb)
{
    struct fx *f = role;
    (void)peer;
    assert_true(f->nq < 64);
    f->q[f->nq++] = (struct sent){malloc(wb->sb.size), wb->sb.size, f->key};
    memcpy(f->q[f->nq - 1].data, wb->sb.data, wb->sb.size);
}

/* The receiver answers the oldest queued request; the answer goes to the offer. Returns
 * whether an offer ended. */
static bool pump_one(struct fx *f)
{
    struct sent s = f->q[0];
    memmove(f->q, f->q + 1, --f->nq * sizeof f->q[0]);
    struct wire_msg m, rm;
    struct wire_error we;
    assert_int_equal(wire_decode(s.data, s.len, true, &m, &we), 0); /* m points into s */
    bool lose = m.type == WT_FILE_PUT && ++f->puts == f->drop;
    struct wire_buf reply;
    wire_buf_init(&reply);
    struct filestore_limits lim = {1ull << 30, f->user_bytes};
    if (m.type == WT_FILE_HAVE || lose) /* lose: its bytes never arrive, the state does */
        filestore_h_have(f->to.fs, &lim, &m, "alice", &reply);
    else
        filestore_h_put(f->to.fs, &lim, &m, "alice", &reply);
    wire_msg_free(&m);
    free(s.data);
    commit(&f->to);
    assert_int_equal(wire_decode(reply.sb.data, reply.sb.size, false, &rm, &we), 0);
    bool ended = fileoffer_reply(f->o, f, &f->to, s.key, &rm);
    wire_msg_free(&rm);
    wire_buf_free(&reply);
    return ended;
}

static struct fileoffer *offer_new(struct fx *f)
{
    struct fileoffer_cfg cfg = {f->from.fs, "the sender", "cluster", "c1", 2, begin, queue};
    return fileoffer_new(&cfg);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || level_open(&f->from) < 0 || level_open(&f->to) < 0)
        return -1;
    f->o = offer_new(f);
    *state = f;
    return f->o ? 0 : -1;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (uint32_t i = 0; i < f->nq; i++)
        free(f->q[i].data);
    fileoffer_destroy(&f->o);
    assert_null(f->o);
    fileoffer_destroy(&f->o); /* NULL-safe */
    level_close(&f->from);
    level_close(&f->to);
    free(f);
    return 0;
}

/* A whole file of n bytes in level l: its hash in d, its bytes (malloc'd) returned. */
static char *put_file(struct level *l, size_t n, uint8_t seed, uint8_t d[SHA256_LEN])
{
    char *data = malloc(n), why[400];
    int code;
    for (size_t i = 0; i < n; i++)
        data[i] = (char)(i * 13 + seed);
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, data, n);
    sha256_final(&s, d);
    assert_non_null(filestore_append(l->fs, NULL, d, n, NULL, data, n, &code, why, sizeof why));
    commit(l);
    return data;
}

/* A job's kept map naming file d (size n) as its input "in.bin". */
static void job_map(struct wire_buf *wb, const uint8_t d[SHA256_LEN], size_t n)
{
    char hex[SHA256_HEX];
    sha256_hex(d, hex);
    wire_buf_init(wb);
    wire_pack_map(wb, 2);
    wire_put_key(wb, "inputs");
    wire_pack_array(wb, 1);
    wire_pack_map(wb, 3);
    wire_put_str(wb, "name", "in.bin");
    wire_put_str(wb, "hash", hex);
    wire_put_u64(wb, "size", n);
    wire_put_key(wb, "outputs");
    wire_pack_array(wb, 0);
}

/* Offers the job's inputs and pumps until the queue is empty: the last inputs answer. */
static int offer_all(struct fx *f, const struct wire_buf *job, char *why, size_t wl)
{
    int rc = fileoffer_inputs(f->o, f, &f->to, job->sb.data, job->sb.size, UINT32_MAX, "alice",
                              false, why, wl);
    for (uint32_t turns = 0; f->nq && turns < 1000; turns++) {
        assert_true(f->nq <= FILEOFFER_INFLIGHT);
        pump_one(f);
    }
    assert_int_equal(f->nq, 0);
    if (rc == 1)
        return 1;
    return fileoffer_inputs(f->o, f, &f->to, job->sb.data, job->sb.size, UINT32_MAX, "alice", false,
                            why, wl);
}

static void whole_at(struct fx *f, const uint8_t d[SHA256_LEN], const char *data, size_t n)
{
    struct fsfile *x = filestore_find(f->to.fs, d);
    assert_true(x && x->done && x->size == n);
    char *back = malloc(n);
    assert_int_equal(filestore_read(f->to.fs, x, 0, back, n), (ssize_t)n);
    assert_memory_equal(back, data, n);
    free(back);
}

static void a_file_reaches_the_receiver_whole(void **state)
{
    struct fx *f = *state;
    uint8_t d[SHA256_LEN];
    size_t n = WIRE_FILE_CHUNK * 5 / 2;
    char *data = put_file(&f->from, n, 1, d), why[400] = "";
    struct wire_buf job;
    job_map(&job, d, n);
    assert_int_equal(offer_all(f, &job, why, sizeof why), 1);
    whole_at(f, d, data, n);
    /* offered again: known whole, nothing sent */
    assert_int_equal(fileoffer_inputs(f->o, f, &f->to, job.sb.data, job.sb.size, UINT32_MAX,
                                      "alice", false, why, sizeof why),
                     1);
    assert_int_equal(f->nq, 0);
    wire_buf_free(&job);
    free(data);
}

static void a_lost_chunk_and_a_new_offer_go_on_from_what_is_held(void **state)
{
    struct fx *f = *state;
    uint8_t d[SHA256_LEN];
    size_t n = WIRE_FILE_CHUNK * 7 / 2;
    char *data = put_file(&f->from, n, 2, d), why[400] = "";
    struct wire_buf job;
    job_map(&job, d, n);
    f->drop = 2; /* the second chunk never arrives: the third is out of step */
    assert_int_equal(offer_all(f, &job, why, sizeof why), 1);
    whole_at(f, d, data, n);
    assert_true(f->puts > 4); /* the chunks after the lost one went again */
    /* the receiver kept half of another file (kill -9 of the sender): a new offer
     * resumes there (the first FILE_PUT starts at what it holds) */
    uint8_t d2[SHA256_LEN];
    char *data2 = put_file(&f->from, n, 3, d2), why2[400];
    int code;
    assert_non_null(filestore_append(f->to.fs, NULL, d2, n, "alice", data2, 2 * WIRE_FILE_CHUNK,
                                     &code, why2, sizeof why2));
    commit(&f->to);
    fileoffer_destroy(&f->o);
    f->o = offer_new(f);
    struct wire_buf job2;
    job_map(&job2, d2, n);
    f->puts = 0;
    f->drop = 0;
    assert_int_equal(offer_all(f, &job2, why, sizeof why), 1);
    assert_int_equal(f->puts, 2); /* chunks 3 and 4 only */
    whole_at(f, d2, data2, n);
    wire_buf_free(&job);
    wire_buf_free(&job2);
    free(data);
    free(data2);
}

static void a_refused_file_ends_its_offer_with_the_reason(void **state)
{
    struct fx *f = *state;
    uint8_t d[SHA256_LEN];
    size_t n = 3000;
    char *data = put_file(&f->from, n, 4, d), why[400] = "";
    struct wire_buf job;
    job_map(&job, d, n);
    f->user_bytes = 1000; /* the receiver's files.user_mb is smaller than the file */
    assert_int_equal(offer_all(f, &job, why, sizeof why), -1);
    assert_non_null(strstr(why, "input 'in.bin' could not be sent to cluster c1: "));
    assert_non_null(strstr(why, "files.user_mb"));
    /* refused stays refused, unless a new submission retries it */
    assert_int_equal(fileoffer_inputs(f->o, f, &f->to, job.sb.data, job.sb.size, UINT32_MAX,
                                      "alice", false, why, sizeof why),
                     -1);
    f->user_bytes = 0;
    assert_int_equal(fileoffer_inputs(f->o, f, &f->to, job.sb.data, job.sb.size, UINT32_MAX,
                                      "alice", true, why, sizeof why),
                     0);
    assert_int_equal(offer_all(f, &job, why, sizeof why), 1);
    whole_at(f, d, data, n);
    wire_buf_free(&job);
    free(data);
}

static void another_users_upload_makes_the_offer_wait(void **state)
{
    struct fx *f = *state;
    uint8_t d[SHA256_LEN];
    size_t n = WIRE_FILE_CHUNK * 3 / 2;
    char *data = put_file(&f->from, n, 8, d), why[400] = "";
    int code;
    /* bob is uploading the same bytes at the receiver: one chunk so far */
    assert_non_null(filestore_append(f->to.fs, NULL, d, n, "bob", data, WIRE_FILE_CHUNK, &code, why,
                                     sizeof why));
    commit(&f->to);
    struct wire_buf job;
    job_map(&job, d, n);
    assert_int_equal(offer_all(f, &job, why, sizeof why), 0); /* told to wait */
    assert_int_equal(f->puts, 0);
    assert_int_equal(f->nq, 0); /* not asked again before the wait is over */
    struct fsfile *x = filestore_find(f->to.fs, d);
    assert_true(x && !x->done && x->have == WIRE_FILE_CHUNK && !strcmp(x->user, "bob"));
    /* bob's upload stalls: after the wait the offer sends it all, from 0, for alice */
    x->t_ms -= FILESTORE_FOREIGN_MS + 1000;
    usleep((FILESTORE_WAIT_MS + 100) * 1000);
    assert_int_equal(offer_all(f, &job, why, sizeof why), 1);
    assert_int_equal(f->puts, 2);
    whole_at(f, d, data, n);
    assert_string_equal(filestore_find(f->to.fs, d)->user, "alice");
    wire_buf_free(&job);
    free(data);
}

static void the_sweep_deletes_only_what_nothing_names(void **state)
{
    struct fx *f = *state;
    uint8_t named[SHA256_LEN], row[SHA256_LEN], loose[SHA256_LEN];
    free(put_file(&f->from, 100, 5, named));
    free(put_file(&f->from, 200, 6, row));
    free(put_file(&f->from, 300, 7, loose));
    struct wire_buf job, r;
    job_map(&job, named, 100);
    job_map(&r, row, 200); /* a row's "files" has the inputs' shape: name, hash, size */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, r.sb.data, r.sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *rows = wire_get(&up.data, "inputs");
    struct wire_buf rec;
    wire_buf_init(&rec);
    wire_pack_map(&rec, 1);
    wire_put_key(&rec, "files");
    wire_pack_object(&rec, rows);
    int64_t last = 0;
    assert_true(filesweep_due(&last, 10 * 3600 * 1000));
    assert_false(filesweep_due(&last, 10 * 3600 * 1000 + 1000)); /* hourly */
    filesweep_begin(f->from.fs);
    filestore_each_input(job.sb.data, job.sb.size, UINT32_MAX, filesweep_mark, f->from.fs);
    filesweep_mark_record(f->from.fs, NULL, 0, rec.sb.data, rec.sb.size);
    assert_int_equal(filesweep_end(f->from.fs, INT64_MAX), 0);
    commit(&f->from);
    assert_non_null(filestore_find(f->from.fs, named));
    assert_non_null(filestore_find(f->from.fs, row));
    assert_null(filestore_find(f->from.fs, loose));
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&rec);
    wire_buf_free(&job);
    wire_buf_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_file_reaches_the_receiver_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lost_chunk_and_a_new_offer_go_on_from_what_is_held, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_refused_file_ends_its_offer_with_the_reason, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(another_users_upload_makes_the_offer_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(the_sweep_deletes_only_what_nothing_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

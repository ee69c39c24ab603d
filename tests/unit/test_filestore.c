/*
 * test_filestore.c - daemon/filestore.h: a file received in chunks is whole once its last
 * chunk hashes to its name and is found again after the store is reopened; a partial
 * file goes on from its stored count; the record carries the user it is charged to and
 * the per-user sums (files.user_mb) come back from the records; a record written before
 * "user" existed loads charged to nobody; FILE_HAVE over a user's limit is refused
 * naming it; a partial upload takes chunks only from its user (another is told to wait,
 * nothing written) until it stalls, then restarts from 0 for the other user.
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

#include "daemon/filestore.h"
#include "store/store.h"

static const struct store_table tables[] = {{"files", STORE_KEY_STR}, {NULL}};

struct fx {
    char dir[64], files[96];
    struct store *s;
    int t;
    bool failed;
    struct filestore *fs;
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static struct filestore *reopen(struct fx *f)
{
    struct filestore_cfg c = {f->s, f->t, f->files, "the test", &f->failed, NULL};
    filestore_destroy(&f->fs);
    f->fs = filestore_open(&c);
    return f->fs;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/gridnode-fs-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->files, sizeof f->files, "%s/files", f->dir);
    char err[256];
    struct store_opts o = {"test", tables, STORE_SYNC_NONE, 0, false};
    if (!(f->s = store_open(f->dir, &o, err, sizeof err)))
        return -1;
    f->t = store_table(f->s, "files");
    *state = f;
    return reopen(f) ? 0 : -1;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    filestore_destroy(&f->fs);
    store_close(&f->s);
    nftw(f->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void digest(const void *p, size_t n, uint8_t d[SHA256_LEN])
{
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
}

static void commit(struct fx *f)
{
    assert_int_equal(filestore_sync(f->fs), 0);
    assert_int_equal(store_commit(f->s), 0);
}

static void chunks_resume_and_charge_their_user(void **state)
{
    struct fx *f = *state;
    char data[3000], why[400];
    uint8_t d[SHA256_LEN];
    int code;
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7);
    digest(data, sizeof data, d);
    struct fsfile *x =
        filestore_append(f->fs, NULL, d, sizeof data, "alice", data, 1000, &code, why, sizeof why);
    assert_non_null(x);
    assert_int_equal(filestore_user_bytes(f->fs, "alice"), sizeof data);
    commit(f);
    assert_non_null(reopen(f)); /* as after kill -9: the count and the hash state stay */
    x = filestore_find(f->fs, d);
    assert_non_null(x);
    assert_int_equal(x->have, 1000);
    assert_false(x->done);
    assert_string_equal(x->user, "alice");
    assert_int_equal(filestore_user_bytes(f->fs, "alice"), sizeof data);
    assert_int_equal(filestore_user_bytes(f->fs, "bob"), 0);
    x = filestore_append(f->fs, x, d, sizeof data, "bob", data + 1000, 2000, &code, why,
                         sizeof why);
    assert_non_null(x);
    assert_true(x->done);
    commit(f);
    assert_non_null(reopen(f));
    x = filestore_find(f->fs, d);
    assert_true(x && x->done && x->size == sizeof data);
    char back[3000];
    assert_int_equal(filestore_read(f->fs, x, 0, back, sizeof back), sizeof back);
    assert_memory_equal(back, data, sizeof data);
    assert_int_equal(filestore_user_bytes(f->fs, "alice"), sizeof data); /* the first's */
    assert_int_equal(filestore_drop(f->fs, x), 0);
    assert_int_equal(filestore_user_bytes(f->fs, "alice"), 0);
    commit(f);
}

static void a_record_without_user_is_charged_to_nobody(void **state)
{
    struct fx *f = *state;
    char hex[SHA256_HEX], path[400], dir[200];
    uint8_t d[SHA256_LEN];
    digest("abc", 3, d);
    sha256_hex(d, hex);
    snprintf(dir, sizeof dir, "%s/%.2s", f->files, hex);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/%s", dir, hex);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("abc", fp);
    fclose(fp);
    struct wire_buf wb; /* as the cluster wrote it before files.user_mb */
    wire_buf_init(&wb);
    wire_pack_map(&wb, 4);
    wire_put_u64(&wb, "size", 3);
    wire_put_u64(&wb, "have", 3);
    wire_put_bool(&wb, "done", true);
    wire_put_i64(&wb, "t", 1);
    assert_int_equal(store_put(f->s, f->t, hex, 64, wb.sb.data, wb.sb.size), 0);
    wire_buf_free(&wb);
    assert_int_equal(store_commit(f->s), 0);
    assert_non_null(reopen(f));
    struct fsfile *x = filestore_find(f->fs, d);
    assert_true(x && x->done && x->size == 3 && !x->user[0]);
}

static void file_have_over_the_users_limit_is_refused(void **state)
{
    struct fx *f = *state;
    char data[2048], why[400];
    uint8_t d[SHA256_LEN];
    int code;
    memset(data, 'x', sizeof data);
    digest(data, sizeof data, d);
    assert_non_null(filestore_append(f->fs, NULL, d, sizeof data, "alice", data, sizeof data, &code,
                                     why, sizeof why));
    struct filestore_limits lim = {1u << 20, 3000};
    struct wire_buf req, reply;
    wire_buf_init(&req);
    wire_buf_init(&reply);
    wire_begin(&req, WT_FILE_HAVE, 7, 3);
    wire_put_str(&req, "hash", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    wire_put_u64(&req, "size", 1000);
    wire_put_str(&req, "user", "alice");
    struct wire_msg m;
    struct wire_error we;
    assert_int_equal(wire_decode(req.sb.data, req.sb.size, false, &m, &we), 0);
    filestore_h_have(f->fs, &lim, &m, "alice", &reply);
    struct wire_msg r;
    assert_int_equal(wire_decode(reply.sb.data, reply.sb.size, false, &r, &we), 0);
    assert_int_equal(r.type, WT_ERROR);
    assert_int_equal(wire_get_u64(r.root, "code", 0), WE_REFUSED);
    char msg[400];
    wire_get_strbuf(r.root, "msg", msg, sizeof msg);
    assert_non_null(strstr(msg, "files.user_mb"));
    assert_non_null(strstr(msg, "user alice holds 1 MB"));
    wire_msg_free(&r);
    wire_buf_reset(&reply); /* another user is within its own limit */
    filestore_h_have(f->fs, &lim, &m, "bob", &reply);
    assert_int_equal(wire_decode(reply.sb.data, reply.sb.size, false, &r, &we), 0);
    assert_int_equal(r.type, WT_FILE_STATE);
    wire_msg_free(&r);
    wire_msg_free(&m);
    wire_buf_free(&req);
    wire_buf_free(&reply);
}

/* FILE_PUT of [off, off+len) of data (FILE_HAVE when len is 0) by user, with the
 * hash of all size bytes of data; the reply decoded into *r (the caller frees it before
 * the next call: r points into the reply kept here). */
static void put(struct fx *f, const struct filestore_limits *lim, const char *user,
                const uint8_t *data, uint64_t size, uint64_t off, size_t len, struct wire_msg *r)
{
    char hex[SHA256_HEX];
    uint8_t d[SHA256_LEN];
    digest(data, size, d);
    sha256_hex(d, hex);
    static struct wire_buf reply;
    struct wire_buf req;
    wire_buf_init(&req);
    wire_buf_free(&reply);
    wire_buf_init(&reply);
    wire_begin(&req, len ? WT_FILE_PUT : WT_FILE_HAVE, 9, len ? 4 : 2);
    wire_put_str(&req, "hash", hex);
    wire_put_u64(&req, "size", size);
    if (len) {
        wire_put_u64(&req, "off", off);
        wire_put_bin(&req, "data", data + off, len);
    }
    struct wire_msg m;
    struct wire_error we;
    assert_int_equal(wire_decode(req.sb.data, req.sb.size, false, &m, &we), 0);
    if (len)
        filestore_h_put(f->fs, lim, &m, user, &reply);
    else
        filestore_h_have(f->fs, lim, &m, user, &reply);
    assert_int_equal(wire_decode(reply.sb.data, reply.sb.size, false, r, &we), 0);
    wire_msg_free(&m);
    wire_buf_free(&req);
}

static void a_partial_upload_takes_chunks_only_from_its_user(void **state)
{
    struct fx *f = *state;
    static uint8_t data[3000], junk[3000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7), junk[i] = 0xee;
    struct filestore_limits lim = {1u << 20, 0};
    struct wire_msg r;
    put(f, &lim, "alice", data, sizeof data, 0, 1000, &r); /* alice's upload begins */
    assert_int_equal(r.type, WT_FILE_STATE);
    assert_int_equal(wire_get_u64(r.root, "have", 0), 1000);
    wire_msg_free(&r);
    /* bob, knowing the hash, sends other bytes at alice's offset: told to wait, and
       nothing of his is written (alice's upload would fail its hash check) */
    memcpy(junk, data, 1000);
    uint8_t d[SHA256_LEN];
    digest(data, sizeof data, d);
    put(f, &lim, "bob", data, sizeof data, 0, 0, &r); /* FILE_HAVE */
    assert_int_equal(r.type, WT_FILE_STATE);
    assert_true(wire_get_u64(r.root, "wait_ms", 0) > 0);
    assert_false(wire_get_bool(r.root, "early", false));
    wire_msg_free(&r);
    {
        /* a FILE_PUT of junk under alice's hash */
        char hex[SHA256_HEX];
        sha256_hex(d, hex);
        struct wire_buf req, reply;
        wire_buf_init(&req);
        wire_buf_init(&reply);
        wire_begin(&req, WT_FILE_PUT, 9, 4);
        wire_put_str(&req, "hash", hex);
        wire_put_u64(&req, "size", sizeof data);
        wire_put_u64(&req, "off", 1000);
        wire_put_bin(&req, "data", junk + 1000, 1000);
        struct wire_msg m;
        struct wire_error we;
        assert_int_equal(wire_decode(req.sb.data, req.sb.size, false, &m, &we), 0);
        filestore_h_put(f->fs, &lim, &m, "bob", &reply);
        assert_int_equal(wire_decode(reply.sb.data, reply.sb.size, false, &r, &we), 0);
        assert_int_equal(r.type, WT_FILE_STATE);
        assert_true(wire_get_u64(r.root, "wait_ms", 0) > 0);
        assert_int_equal(wire_get_u64(r.root, "have", 0), 1000);
        wire_msg_free(&r);
        wire_msg_free(&m);
        wire_buf_free(&req);
        wire_buf_free(&reply);
    }
    /* alice goes on and her file is whole */
    put(f, &lim, "alice", data, sizeof data, 1000, 2000, &r);
    assert_int_equal(r.type, WT_FILE_STATE);
    assert_true(wire_get_bool(r.root, "done", false));
    wire_msg_free(&r);
    struct fsfile *x = filestore_find(f->fs, d);
    assert_true(x && x->done && !strcmp(x->user, "alice"));

    /* a stalled upload: carol's 1000 bytes, then nothing past the limit */
    static uint8_t other[2000];
    for (size_t i = 0; i < sizeof other; i++)
        other[i] = (uint8_t)(i * 13 + 1);
    put(f, &lim, "carol", other, sizeof other, 0, 1000, &r);
    wire_msg_free(&r);
    uint8_t od[SHA256_LEN];
    digest(other, sizeof other, od);
    x = filestore_find(f->fs, od);
    assert_non_null(x);
    x->t_ms -= FILESTORE_FOREIGN_MS + 1000;             /* its last chunk long ago */
    put(f, &lim, "bob", other, sizeof other, 0, 0, &r); /* FILE_HAVE: start from 0 */
    assert_int_equal(wire_get_u64(r.root, "wait_ms", 0), 0);
    assert_int_equal(wire_get_u64(r.root, "have", 1), 0);
    wire_msg_free(&r);
    put(f, &lim, "bob", other, sizeof other, 0, 2000, &r); /* bob's upload replaces it */
    assert_int_equal(r.type, WT_FILE_STATE);
    assert_true(wire_get_bool(r.root, "done", false));
    wire_msg_free(&r);
    x = filestore_find(f->fs, od);
    assert_true(x && x->done && !strcmp(x->user, "bob"));
    assert_int_equal(filestore_user_bytes(f->fs, "carol"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(chunks_resume_and_charge_their_user, setup, teardown),
        cmocka_unit_test_setup_teardown(a_record_without_user_is_charged_to_nobody, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(file_have_over_the_users_limit_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(a_partial_upload_takes_chunks_only_from_its_user, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

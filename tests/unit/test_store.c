/*
 * test_store.c - the LMDB store: durability across reopen, reads of committed data
 * only, discard, delete, iteration, the schema and role checks, map growth, the commit
 * fault hook, a read-only open beside a writer in another process, key helpers.
 * Every test has its own temporary directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "store/store.h"

#define MIB (1u << 20)
#define VAL_SIZE (64u << 10)

static const struct store_table tables[] = {
    {"items", STORE_KEY_U64},
    {"names", STORE_KEY_STR},
    {"pairs", STORE_KEY_U64_U32},
    {NULL},
};

struct fixture {
    char dir[64];
    struct store *s;
    char err[512];
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/gridnode-test-store-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(&f->s);
    nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static struct store *open_role(struct fixture *f, const char *role, size_t map_size, bool ro)
{
    struct store_opts o = {role, tables, STORE_SYNC_FULL, map_size, ro};
    f->err[0] = '\0';
    return store_open(f->dir, &o, f->err, sizeof f->err);
}

static struct store *open_ok(struct fixture *f)
{
    struct store *s = open_role(f, "test", 0, false);
    if (!s)
        fail_msg("store_open: %s", f->err);
    return s;
}

static void put_u64(struct store *s, int t, uint64_t k, const char *val)
{
    uint8_t key[8];
    store_key_u64(key, k);
    assert_int_equal(store_put(s, t, key, sizeof key, val, strlen(val)), 0);
}

/* 1 if absent; 0 and compares the value if present */
static int get_u64(struct store *s, int t, uint64_t k, const char *want)
{
    uint8_t key[8];
    void *val = NULL;
    size_t vlen = 0;
    store_key_u64(key, k);
    int rc = store_get(s, t, key, sizeof key, &val, &vlen);
    assert_true(rc == 0 || rc == 1);
    if (rc == 0) {
        if (want) {
            assert_int_equal(vlen, strlen(want));
            assert_string_equal(val, want); /* copies are NUL-terminated */
        }
        free(val);
    }
    return rc;
}

static void test_reopen(void **state)
{
    struct fixture *f = *state;
    f->s = open_ok(f);
    int items = store_table(f->s, "items"), names = store_table(f->s, "names");
    assert_true(items > 0 && names > 0);
    assert_int_equal(store_table(f->s, "meta"), 0);
    assert_int_equal(store_table(f->s, "nope"), -1);
    assert_int_equal(store_ntables(f->s), 4);
    assert_string_equal(store_table_name(f->s, items), "items");
    assert_int_equal(store_table_keyfmt(f->s, store_table(f->s, "pairs")), STORE_KEY_U64_U32);
    assert_string_equal(store_role(f->s), "test");
    put_u64(f->s, items, 1, "one");
    put_u64(f->s, items, 2, "two");
    assert_int_equal(store_put(f->s, names, "alice", 5, "", 0), 0); /* empty value */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_commit(f->s), 0); /* nothing buffered */
    store_close(&f->s);
    assert_null(f->s);
    f->s = open_ok(f);
    assert_int_equal(get_u64(f->s, items, 1, "one"), 0);
    assert_int_equal(get_u64(f->s, items, 2, "two"), 0);
    assert_int_equal(get_u64(f->s, items, 3, NULL), 1);
    void *val = NULL;
    size_t vlen = 99;
    assert_int_equal(store_get(f->s, names, "alice", 5, &val, &vlen), 0);
    assert_int_equal(vlen, 0);
    assert_non_null(val);
    free(val);
    assert_int_equal(store_count(f->s, items), 2);
    assert_int_equal(store_count(f->s, names), 1);
}

static void test_committed_only(void **state)
{
    struct fixture *f = *state;
    f->s = open_ok(f);
    int t = store_table(f->s, "items");
    put_u64(f->s, t, 7, "first");
    assert_int_equal(store_pending(f->s), 1);
    assert_int_equal(get_u64(f->s, t, 7, NULL), 1);
    assert_int_equal(store_count(f->s, t), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_pending(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 7, "first"), 0);
    put_u64(f->s, t, 7, "second");
    assert_int_equal(get_u64(f->s, t, 7, "first"), 0);
    /* two writes of one key in a turn: the last wins */
    put_u64(f->s, t, 7, "third");
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 7, "third"), 0);
}

static void test_discard(void **state)
{
    struct fixture *f = *state;
    f->s = open_ok(f);
    int t = store_table(f->s, "items");
    put_u64(f->s, t, 1, "kept");
    assert_int_equal(store_commit(f->s), 0);
    put_u64(f->s, t, 1, "dropped");
    put_u64(f->s, t, 2, "dropped");
    store_discard(f->s);
    assert_int_equal(store_pending(f->s), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 1, "kept"), 0);
    assert_int_equal(get_u64(f->s, t, 2, NULL), 1);
    /* close discards what was not committed */
    put_u64(f->s, t, 3, "lost");
    store_close(&f->s);
    f->s = open_ok(f);
    assert_int_equal(get_u64(f->s, t, 3, NULL), 1);
}

static void test_delete(void **state)
{
    struct fixture *f = *state;
    uint8_t key[8];
    f->s = open_ok(f);
    int t = store_table(f->s, "items");
    put_u64(f->s, t, 1, "a");
    put_u64(f->s, t, 2, "b");
    assert_int_equal(store_commit(f->s), 0);
    store_key_u64(key, 1);
    assert_int_equal(store_del(f->s, t, key, sizeof key), 0);
    assert_int_equal(get_u64(f->s, t, 1, "a"), 0); /* not yet committed */
    store_key_u64(key, 99);
    assert_int_equal(store_del(f->s, t, key, sizeof key), 0); /* absent: not an error */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 1, NULL), 1);
    assert_int_equal(get_u64(f->s, t, 2, "b"), 0);
    /* put then delete in one turn: applied in order */
    put_u64(f->s, t, 5, "x");
    store_key_u64(key, 5);
    assert_int_equal(store_del(f->s, t, key, sizeof key), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 5, NULL), 1);
    assert_int_equal(store_count(f->s, t), 1);
}

struct collect {
    uint64_t keys[256];
    int n, stop_after;
};

static int collect_fn(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct collect *c = arg;
    assert_int_equal(klen, 8);
    uint64_t k = store_key_get_u64(key);
    char want[32];
    snprintf(want, sizeof want, "v%llu", (unsigned long long)k);
    assert_int_equal(vlen, strlen(want));
    assert_memory_equal(val, want, vlen);
    c->keys[c->n++] = k;
    return c->stop_after && c->n >= c->stop_after;
}

static void test_iter(void **state)
{
    struct fixture *f = *state;
    uint8_t from[8];
    f->s = open_ok(f);
    int t = store_table(f->s, "items");
    struct collect c = {0};
    assert_int_equal(store_iter(f->s, t, NULL, 0, collect_fn, &c), 0); /* empty */
    assert_int_equal(c.n, 0);
    /* even keys 0..198 in a scrambled order, including values above 2^32 */
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t k = ((i * 37) % 100) * 2;
        char v[32];
        if (k == 198)
            k = 1ull << 40;
        snprintf(v, sizeof v, "v%llu", (unsigned long long)k);
        put_u64(f->s, t, k, v);
    }
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_iter(f->s, t, NULL, 0, collect_fn, &c), 0);
    assert_int_equal(c.n, 100);
    for (int i = 1; i < c.n; i++)
        assert_true(c.keys[i - 1] < c.keys[i]);
    assert_true(c.keys[99] == 1ull << 40);
    memset(&c, 0, sizeof c);
    store_key_u64(from, 51); /* absent: starts at the next key */
    assert_int_equal(store_iter(f->s, t, from, sizeof from, collect_fn, &c), 0);
    assert_int_equal(c.n, 100 - 26);
    assert_int_equal(c.keys[0], 52);
    memset(&c, 0, sizeof c);
    store_key_u64(from, 52); /* present: starts there */
    c.stop_after = 3;
    assert_int_equal(store_iter(f->s, t, from, sizeof from, collect_fn, &c), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.keys[2], 56);
    memset(&c, 0, sizeof c);
    store_key_u64(from, UINT64_MAX);
    assert_int_equal(store_iter(f->s, t, from, sizeof from, collect_fn, &c), 0);
    assert_int_equal(c.n, 0);
    assert_int_equal(store_iter(f->s, -1, NULL, 0, collect_fn, &c), -1);
    assert_int_equal(store_iter(f->s, 99, NULL, 0, collect_fn, &c), -1);
}

static void test_role_check(void **state)
{
    struct fixture *f = *state;
    f->s = open_role(f, "cluster", 0, false);
    assert_non_null(f->s);
    store_close(&f->s);
    f->s = open_role(f, "client", 0, false);
    assert_null(f->s);
    assert_non_null(strstr(f->err, "belongs to the cluster role, not client"));
    f->s = open_role(f, NULL, 0, false); /* no role given: the stored one is kept */
    assert_non_null(f->s);
    assert_string_equal(store_role(f->s), "cluster");
    store_close(&f->s);
    f->s = open_role(f, "cluster", 0, false);
    assert_non_null(f->s);
}

/* Writes meta "schema" as the msgpack value packed by fn(arg). */
static void write_schema(struct fixture *f, int as_string, uint64_t v)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (as_string)
        msgpack_pack_str_with_body(&pk, "one", 3);
    else
        msgpack_pack_uint64(&pk, v);
    f->s = open_ok(f);
    int meta = store_table(f->s, "meta");
    assert_int_equal(store_put(f->s, meta, "schema", 6, sb.data, sb.size), 0);
    assert_int_equal(store_commit(f->s), 0);
    store_close(&f->s);
    msgpack_sbuffer_destroy(&sb);
}

static void test_newer_schema(void **state)
{
    struct fixture *f = *state;
    write_schema(f, 0, STORE_SCHEMA + 1);
    f->s = open_role(f, "test", 0, false);
    assert_null(f->s);
    assert_non_null(strstr(f->err, "newer gridnode"));
    assert_non_null(strstr(f->err, "schema 2"));
    f->s = open_role(f, "test", 0, false); /* the refusal changed nothing */
    assert_null(f->s);
}

static void test_unreadable_schema(void **state)
{
    struct fixture *f = *state;
    write_schema(f, 1, 0);
    f->s = open_role(f, "test", 0, false);
    assert_null(f->s);
    assert_non_null(strstr(f->err, "schema"));
}

static void test_open_errors(void **state)
{
    struct fixture *f = *state;
    char dir[sizeof f->dir];
    memcpy(dir, f->dir, sizeof dir);
    f->s = open_role(f, "test", 0, true); /* read-only on an empty directory */
    assert_null(f->s);
    assert_true(strlen(f->err) > 0);
    snprintf(f->dir, sizeof f->dir, "%s/missing", dir);
    f->s = open_role(f, "test", 0, false);
    memcpy(f->dir, dir, sizeof dir);
    assert_null(f->s);
    assert_non_null(strstr(f->err, "does the directory exist"));
}

/* A value of VAL_SIZE bytes whose content depends on i. */
static void fill_value(uint8_t *v, uint32_t i)
{
    for (uint32_t k = 0; k < VAL_SIZE; k += 4) {
        uint32_t x = i * 2654435761u + k;
        memcpy(v + k, &x, 4);
    }
}

static void write_values(struct store *s, uint32_t from, uint32_t n)
{
    uint8_t *v = malloc(VAL_SIZE);
    assert_non_null(v);
    for (uint32_t i = from; i < from + n; i++) {
        uint8_t key[12];
        fill_value(v, i);
        store_key_u64_u32(key, 1, i);
        assert_int_equal(store_put(s, store_table(s, "pairs"), key, sizeof key, v, VAL_SIZE), 0);
    }
    free(v);
}

static void check_values(struct store *s, uint32_t n)
{
    uint8_t *want = malloc(VAL_SIZE);
    assert_non_null(want);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t key[12];
        void *val;
        size_t vlen;
        store_key_u64_u32(key, 1, i);
        assert_int_equal(store_get(s, store_table(s, "pairs"), key, sizeof key, &val, &vlen), 0);
        assert_int_equal(vlen, VAL_SIZE);
        fill_value(want, i);
        assert_memory_equal(val, want, VAL_SIZE);
        free(val);
    }
    free(want);
    assert_int_equal(store_count(s, store_table(s, "pairs")), n);
}

#define GROW_VALUES (20 * MIB / VAL_SIZE)

static void test_map_growth_turns(void **state)
{
    struct fixture *f = *state;
    f->s = open_role(f, "test", MIB, false);
    assert_non_null(f->s);
    assert_int_equal(store_map_size(f->s), MIB);
    for (uint32_t turn = 0; turn < 20; turn++) {
        write_values(f->s, turn * (GROW_VALUES / 20), GROW_VALUES / 20);
        assert_int_equal(store_commit(f->s), 0);
    }
    assert_true(store_map_size(f->s) >= 20 * MIB);
    store_close(&f->s);
    f->s = open_role(f, "test", MIB, false);
    assert_non_null(f->s);
    assert_true(store_map_size(f->s) >= 20 * MIB); /* adopted from the file */
    check_values(f->s, GROW_VALUES);
}

static void test_map_growth_one_turn(void **state)
{
    struct fixture *f = *state;
    f->s = open_role(f, "test", MIB, false);
    assert_non_null(f->s);
    write_values(f->s, 0, GROW_VALUES);
    assert_int_equal(store_commit(f->s), 0);
    assert_true(store_map_size(f->s) >= 20 * MIB);
    store_close(&f->s);
    f->s = open_role(f, "test", 0, false); /* default map: larger than the data */
    assert_non_null(f->s);
    check_values(f->s, GROW_VALUES);
    /* and it keeps growing after the reopen */
    write_values(f->s, GROW_VALUES, 2 * GROW_VALUES);
    assert_int_equal(store_commit(f->s), 0);
    check_values(f->s, 3 * GROW_VALUES);
}

/*
 * Reopening with a map smaller than the data: LMDB sizes the map to exactly the pages
 * in use, so the first write (store_open's metadata) has no room unless freed pages
 * happen to exist. Fixed (store_open leaves room after reopening); the test
 * skips while the open fails that way and checks everything once it is fixed.
 */
static void test_reopen_small_map(void **state)
{
    struct fixture *f = *state;
    f->s = open_role(f, "test", MIB, false);
    assert_non_null(f->s);
    write_values(f->s, 0, GROW_VALUES);
    assert_int_equal(store_commit(f->s), 0);
    store_close(&f->s);
    f->s = open_role(f, "test", MIB, false);
    if (!f->s && strstr(f->err, "MDB_MAP_FULL")) {
        printf("test_store: REGRESSION: reopening a store whose data exceeds map_size fails "
               "(%s)\n",
               f->err);
        fail();
    }
    if (!f->s)
        fail_msg("reopen: %s", f->err);
    check_values(f->s, GROW_VALUES);
    write_values(f->s, GROW_VALUES, GROW_VALUES);
    assert_int_equal(store_commit(f->s), 0);
    check_values(f->s, 2 * GROW_VALUES);
}

static void test_fault_commit(void **state)
{
    struct fixture *f = *state;
    f->s = open_ok(f);
    int t = store_table(f->s, "items");
    store_fault_commit(f->s, 1);
    put_u64(f->s, t, 1, "never");
    errno = 0;
    assert_int_equal(store_commit(f->s), -1);
    assert_int_equal(errno, EIO);
    assert_int_equal(store_pending(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 1, NULL), 1);
    put_u64(f->s, t, 2, "works");
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 2, "works"), 0);
    /* the second commit from now fails; empty commits do not count */
    store_fault_commit(f->s, 2);
    assert_int_equal(store_commit(f->s), 0);
    put_u64(f->s, t, 3, "ok");
    assert_int_equal(store_commit(f->s), 0);
    put_u64(f->s, t, 4, "fails");
    assert_int_equal(store_commit(f->s), -1);
    put_u64(f->s, t, 5, "ok again");
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(get_u64(f->s, t, 3, "ok"), 0);
    assert_int_equal(get_u64(f->s, t, 4, NULL), 1);
    assert_int_equal(get_u64(f->s, t, 5, "ok again"), 0);
    store_fault_commit(f->s, 0);
    put_u64(f->s, t, 6, "off");
    assert_int_equal(store_commit(f->s), 0);
}

/* ---- a reader beside a writer in another process ---- */

static int wait_byte(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    char b;
    if (poll(&p, 1, timeout_ms) != 1 || read(fd, &b, 1) != 1)
        return -1;
    return b;
}

/* The writer process: never returns. */
static void writer_child(const char *dir, int cmd, int ack)
{
    char err[512];
    struct store_opts o = {"writer", tables, STORE_SYNC_FULL, MIB, false};
    struct store *s = store_open(dir, &o, err, sizeof err);
    if (!s)
        _exit(10);
    uint8_t key[8];
    store_key_u64(key, 1);
    if (store_put(s, store_table(s, "items"), key, 8, "hello", 5) < 0 || store_commit(s) < 0 ||
        write(ack, "1", 1) != 1)
        _exit(11);
    if (wait_byte(cmd, 20000) != '2')
        _exit(12);
    uint8_t *v = malloc(VAL_SIZE);
    for (uint32_t i = 0; v && i < GROW_VALUES; i++) { /* grows the map well past 1 MiB */
        uint8_t k12[12];
        fill_value(v, i);
        store_key_u64_u32(k12, 1, i);
        if (store_put(s, store_table(s, "pairs"), k12, 12, v, VAL_SIZE) < 0)
            _exit(13);
    }
    free(v);
    if (store_commit(s) < 0 || write(ack, "2", 1) != 1)
        _exit(14);
    if (wait_byte(cmd, 20000) != 'q')
        _exit(15);
    store_close(&s);
    _exit(0);
}

static int reap(pid_t pid, int timeout_ms)
{
    int st;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void test_readonly_beside_writer(void **state)
{
    struct fixture *f = *state;
    int cmd[2], ack[2];
    assert_int_equal(pipe(cmd), 0);
    assert_int_equal(pipe(ack), 0);
    pid_t pid = fork(); /* no environment is open in this process across the fork */
    assert_true(pid >= 0);
    if (pid == 0) {
        close(cmd[1]);
        close(ack[0]);
        writer_child(f->dir, cmd[0], ack[1]);
    }
    close(cmd[0]);
    close(ack[1]);
    int ok = wait_byte(ack[0], 20000) == '1';
    if (ok) {
        f->s = open_role(f, NULL, 0, true);
        ok = f->s != NULL;
    }
    if (ok) {
        assert_string_equal(store_role(f->s), "writer");
        assert_int_equal(store_table_keyfmt(f->s, store_table(f->s, "pairs")), STORE_KEY_U64_U32);
        assert_int_equal(store_table_keyfmt(f->s, store_table(f->s, "items")), STORE_KEY_U64);
        assert_int_equal(get_u64(f->s, store_table(f->s, "items"), 1, "hello"), 0);
        uint8_t key[8] = {0};
        errno = 0;
        assert_int_equal(store_put(f->s, store_table(f->s, "items"), key, 8, "x", 1), -1);
        assert_int_equal(errno, EINVAL);
        assert_int_equal(store_commit(f->s), 0);
        ok = write(cmd[1], "2", 1) == 1 && wait_byte(ack[0], 30000) == '2';
    }
    if (ok) /* the writer grew the map while we had it open */
        check_values(f->s, GROW_VALUES);
    if (write(cmd[1], "q", 1) != 1)
        ok = 0;
    int rc = reap(pid, 20000);
    close(cmd[1]);
    close(ack[0]);
    if (!ok || rc != 0)
        fail_msg("reader/writer exchange failed (child status %d): %s", rc, f->err);
}

/* ---- arguments and helpers ---- */

static void test_bad_arguments(void **state)
{
    struct fixture *f = *state;
    uint8_t key[512] = {0};
    void *val;
    size_t vlen;
    f->s = open_ok(f);
    int t = store_table(f->s, "names");
    errno = 0;
    assert_int_equal(store_put(f->s, t, key, 0, "v", 1), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(store_put(f->s, t, key, 512, "v", 1), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(store_put(f->s, -1, key, 8, "v", 1), -1);
    assert_int_equal(store_put(f->s, store_ntables(f->s), key, 8, "v", 1), -1);
    assert_int_equal(store_del(f->s, t, key, 0), -1);
    assert_int_equal(store_pending(f->s), 0);
    assert_int_equal(store_put(f->s, t, key, 511, "v", 1), 0); /* LMDB's largest key */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_get(f->s, t, key, 511, &val, &vlen), 0);
    free(val);
    assert_int_equal(store_get(f->s, t, key, 0, &val, &vlen), -1);
    assert_int_equal(store_get(f->s, 99, key, 8, &val, &vlen), -1);
    assert_int_equal(store_count(f->s, -1), 0);
    store_close(NULL);
    struct store *none = NULL;
    store_close(&none);
    assert_non_null(store_strerror(0));
}

static void test_sync_modes(void **state)
{
    struct fixture *f = *state;
    for (int mode = STORE_SYNC_FULL; mode <= STORE_SYNC_NONE; mode++) {
        struct store_opts o = {"test", tables, (enum store_sync)mode, 0, false};
        char v[8];
        f->s = store_open(f->dir, &o, f->err, sizeof f->err);
        assert_non_null(f->s);
        snprintf(v, sizeof v, "m%d", mode);
        put_u64(f->s, store_table(f->s, "items"), (uint64_t)mode, v);
        assert_int_equal(store_commit(f->s), 0);
        store_close(&f->s);
    }
    f->s = open_ok(f);
    assert_int_equal(get_u64(f->s, store_table(f->s, "items"), STORE_SYNC_NONE, "m2"), 0);
    assert_int_equal(store_count(f->s, store_table(f->s, "items")), 3);
}

static void test_key_helpers(void **state)
{
    (void)state;
    uint8_t k8[8], k12[12], a[8], b[8];
    store_key_u64(k8, 0x0102030405060708ull);
    static const uint8_t want8[] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_memory_equal(k8, want8, 8);
    assert_true(store_key_get_u64(k8) == 0x0102030405060708ull);
    store_key_u64_u32(k12, UINT64_MAX - 1, 0xa0b0c0d0u);
    assert_true(store_key_get_u64(k12) == UINT64_MAX - 1);
    assert_int_equal(store_key_get_u32(k12 + 8), 0xa0b0c0d0u);
    assert_int_equal(k12[8], 0xa0);
    /* byte order is numeric order, which is what iteration relies on */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t p = x >> (i % 64), q = (x * 31) >> ((i * 7) % 64);
        store_key_u64(a, p);
        store_key_u64(b, q);
        int c = memcmp(a, b, 8);
        assert_true(p < q ? c < 0 : p > q ? c > 0 : c == 0);
    }
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_reopen),
        T(test_committed_only),
        T(test_discard),
        T(test_delete),
        T(test_iter),
        T(test_role_check),
        T(test_newer_schema),
        T(test_unreadable_schema),
        T(test_open_errors),
        T(test_map_growth_turns),
        T(test_map_growth_one_turn),
        T(test_reopen_small_map),
        T(test_fault_commit),
        T(test_readonly_beside_writer),
        T(test_bad_arguments),
        T(test_sync_modes),
        cmocka_unit_test(test_key_helpers),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}

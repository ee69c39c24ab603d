/*
 * test_curve.c - transport security (daemon/curve.c) and access control (daemon/access.c):
 * key files, the authorized-keys parser, local-endpoint rules, every access class, the
 * user rewrite, and a real CURVE round trip through the daemon skeleton on loopback
 * (the identity reaches the handler; an unknown key gets nothing).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "daemon/daemon.h"
#include "daemon/loop.h"
#include "wire/wire.h"

static char dir[64];

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_text(const char *name, const char *text)
{
    char p[128];
    path(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void pub_of(const char *name, char out[CURVE_KEY_Z85 + 1])
{
    char p[128], err[600];
    snprintf(p, sizeof p, "%s/%s.pub", dir, name);
    assert_int_equal(curve_read_key(p, false, out, err, sizeof err), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_curve.XXXXXX");
    assert_non_null(mkdtemp(dir));
    char err[600];
    const char *names[] = {"server", "alice", "bob", "node1", "peer1", "root", "evil", "peer2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(curve_keygen(dir, names[i], err, sizeof err), 0);
    char a[41], b[41], n[41], p[41], r[41], p2[41], text[1024];
    pub_of("peer2", p2);
    pub_of("alice", a);
    pub_of("bob", b);
    pub_of("node1", n);
    pub_of("peer1", p);
    pub_of("root", r);
    snprintf(text, sizeof text,
             "# comment\n\n%s alice user groups=physics,users\n%s bob user\n%s node1 node\n"
             "%s peer1 peer grant=JOB_LIST,SUBMIT\n%s root admin\n%s peer2 peer\n",
             a, b, n, p, r, p2);
    write_text("auth", text);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_keys(void **state)
{
    (void)state;
    char p[128], key[41], err[600];
    path(p, sizeof p, "alice.key");
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(curve_read_key(p, true, key, err, sizeof err), 0);
    assert_int_equal(strlen(key), 40);
    /* never overwritten */
    assert_int_equal(curve_keygen(dir, "alice", err, sizeof err), -1);
    assert_non_null(strstr(err, "remove it first"));
    /* a secret readable by others is refused, naming the fix */
    chmod(p, 0644);
    assert_int_equal(curve_read_key(p, true, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "chmod 600"));
    chmod(p, 0600);
    /* a key may start with '#' (z85): it is not a comment */
    write_text("hash.pub", "# a comment line\n#abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM\n");
    path(p, sizeof p, "hash.pub");
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), 0);
    assert_string_equal(key, "#abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM");
    /* junk, two keys, the wrong kind of file */
    write_text("junk.pub", "not a key\n");
    path(p, sizeof p, "junk.pub");
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a z85 key"));
    char two[128];
    snprintf(two, sizeof two, "%s\n%s\n", key, key);
    write_text("two.pub", two);
    path(p, sizeof p, "two.pub");
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than one key"));
    path(p, sizeof p, "alice.key"); /* a secret where a public key is meant */
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "name the .pub file"));
    path(p, sizeof p, "alice.pub");
    assert_int_equal(curve_read_key(p, true, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "must end in .key"));
    /* not a regular file: a directory, a FIFO (no hang), refused by name */
    path(p, sizeof p, "sub.pub");
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    path(p, sizeof p, "fifo.pub");
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    /* larger than a key file can be */
    char big[CURVE_KEYFILE_MAX + 64];
    memset(big, '#', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    write_text("big.pub", big);
    path(p, sizeof p, "big.pub");
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "larger than"));
    assert_int_equal(curve_keygen(dir, "a/b", err, sizeof err), -1);
}

/* Key values name files: never read as the key by their length (issue 23, item 6). */
static void test_key_literals(void **state)
{
    (void)state;
    char p[256], key[41], pub[41], err[600];
    pub_of("alice", pub);
    /* a key file whose whole path is 40 z85 characters: relative, in dir */
    const char *z = "abcdefghijABCDEFGHIJ0123456789klmnop.pub"; /* 36 + ".pub" = 40 */
    assert_int_equal(strlen(z), 40);
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    FILE *f = fopen(z, "w");
    assert_non_null(f);
    fprintf(f, "# gridnode CURVE public key of 'alice'\n%s\n", pub);
    fclose(f);
    assert_int_equal(curve_read_key(z, false, key, err, sizeof err), 0);
    assert_string_equal(key, pub);
    /* as the server key too (not taken as the literal text of its name) */
    memset(key, 0, sizeof key);
    assert_int_equal(curve_read_server_key(z, key, err, sizeof err), 0);
    assert_string_equal(key, pub);
    unlink(z);
    /* the same for a secret key file (its own text differs from its name) */
    char sec[41], want[41];
    path(p, sizeof p, "alice.key");
    assert_int_equal(curve_read_key(p, true, want, err, sizeof err), 0);
    const char *zs = "abcdefghijABCDEFGHIJ0123456789klmnop.key";
    int fd = open(zs, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    dprintf(fd, "# gridnode CURVE secret key of 'alice'\n%s\n", want);
    close(fd);
    assert_int_equal(curve_read_key(zs, true, sec, err, sizeof err), 0);
    assert_string_equal(sec, want);
    unlink(zs);
    assert_int_equal(chdir(cwd), 0);
    /* a bare 40-character key where a file is meant is refused, never used */
    assert_int_equal(curve_read_key(pub, false, key, err, sizeof err), -1);
    assert_int_equal(curve_read_server_key(pub, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "must end in .pub"));
    /* the literal form: only for the server key */
    snprintf(p, sizeof p, "z85:%s", pub);
    memset(key, 0, sizeof key);
    assert_int_equal(curve_read_server_key(p, key, err, sizeof err), 0);
    assert_string_equal(key, pub);
    assert_int_equal(curve_read_key(p, false, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "read from a file only"));
    assert_int_equal(curve_read_key(p, true, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "secret key is read from a file only"));
    /* a malformed literal */
    assert_int_equal(curve_read_server_key("z85:short", key, err, sizeof err), -1);
    assert_non_null(strstr(err, "40 z85 characters"));
    /* a literal as the secret key of a client or a server: refused with the reason */
    struct curve_conf c;
    memset(&c, 0, sizeof c);
    snprintf(c.secret_key, sizeof c.secret_key, "z85:%s", pub);
    snprintf(c.server_key, sizeof c.server_key, "z85:%s", pub);
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    assert_int_equal(curve_client_apply(s, &c, "tcp://127.0.0.1:1", err, sizeof err), -1);
    assert_non_null(strstr(err, "own key"));
    assert_non_null(strstr(err, "from a file only"));
    /* and with the secret from its file, the literal server key is applied */
    snprintf(c.secret_key, sizeof c.secret_key, "%s/alice.key", dir);
    assert_int_equal(curve_client_apply(s, &c, "tcp://127.0.0.1:1", err, sizeof err), 0);
    char got[41];
    size_t gl = sizeof got;
    assert_int_equal(zmq_getsockopt(s, ZMQ_CURVE_SERVERKEY, got, &gl), 0);
    assert_string_equal(got, pub);
    zmq_close(s);
    zmq_ctx_term(ctx);
}

static void test_endpoints(void **state)
{
    (void)state;
    assert_true(curve_endpoint_local("tcp://127.0.0.1:7300"));
    assert_true(curve_endpoint_local("tcp://127.0.0.1:*"));
    assert_true(curve_endpoint_local("tcp://localhost:1"));
    assert_true(curve_endpoint_local("tcp://[::1]:1"));
    assert_true(curve_endpoint_local("ipc:///tmp/x"));
    assert_true(curve_endpoint_local("tcp://127.0.0.1:0;127.0.0.1:5"));
    assert_false(curve_endpoint_local("tcp://0.0.0.0:7300"));
    assert_false(curve_endpoint_local("tcp://*:7300"));
    assert_false(curve_endpoint_local("tcp://10.0.0.1:7300"));
    assert_false(curve_endpoint_local("tcp://127.0.0.1:0;10.0.0.1:5"));
    assert_false(curve_endpoint_local("udp://127.0.0.1:1"));
}

static struct curve_conf conf_for(const char *secret, const char *auth)
{
    struct curve_conf c;
    memset(&c, 0, sizeof c);
    snprintf(c.secret_key, sizeof c.secret_key, "%s/%s", dir, secret);
    if (auth)
        snprintf(c.authorized_keys, sizeof c.authorized_keys, "%s/%s", dir, auth);
    return c;
}

static void test_server_config_errors(void **state)
{
    (void)state;
    struct loop *l = loop_new();
    void *ctx = zmq_ctx_new();
    char err[800];
    struct curve_conf c = {0};
    c.plain = 1;
    struct curve_server *s = curve_server_new(ctx, l, &c, "tcp://0.0.0.0:1", err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "only on loopback or ipc"));
    s = curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err);
    assert_non_null(s);
    assert_false(curve_server_secure(s));
    curve_server_destroy(&s);
    c.plain = 0;
    unsetenv("GRIDNODE_KEY");
    unsetenv("GRIDNODE_AUTHORIZED_KEYS");
    unsetenv("GRIDNODE_PLAIN");
    assert_null(curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err));
    assert_non_null(strstr(err, "no security configured"));
    write_text("badauth", "# ok\nQQQ alice user\n");
    c = conf_for("server.key", "badauth");
    assert_null(curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err));
    assert_non_null(strstr(err, "badauth:2:"));
    char a[41], text[200];
    pub_of("alice", a);
    snprintf(text, sizeof text, "%s alice wizard\n", a);
    write_text("badauth", text);
    assert_null(curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err));
    assert_non_null(strstr(err, "not user, admin, node or peer"));
    zmq_ctx_term(ctx);
    loop_destroy(&l);
}

/*
 * Unpacks the message in wb into m without checking the type's required fields (the
 * access decision needs only the type and the user/group fields); the buffer must stay
 * alive until wire_msg_free(m).
 */
static void decode(struct wire_buf *wb, struct wire_msg *m)
{
    size_t off = 0;
    memset(m, 0, sizeof *m);
    msgpack_unpacked_init(&m->up);
    m->inited = true;
    assert_int_equal(msgpack_unpack_next(&m->up, wb->sb.data, wb->sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    m->root = &m->up.data;
    m->type = (uint32_t)wire_get_u64(m->root, "t", 0);
    m->id = wire_get_u64(m->root, "id", 0);
    m->desc = wire_desc_find(m->type);
    assert_non_null(m->desc);
}

/* Is request (type, with optional user and group fields) allowed for identity id? */
static int allowed(const struct curve_ident *id, uint32_t type, const char *user, const char *group,
                   char *rewritten_user)
{
    struct wire_buf wb, out;
    struct wire_msg m;
    wire_buf_init(&wb);
    wire_buf_init(&out);
    wire_begin(&wb, type, 7, (user ? 1u : 0u) + (group ? 1u : 0u));
    if (user)
        wire_put_str(&wb, "user", user);
    if (group)
        wire_put_str(&wb, "group", group);
    decode(&wb, &m);
    bool rw = false;
    char why[400];
    int rc = curve_access(id, &m, &out, &rw, why, sizeof why);
    if (rewritten_user) {
        *rewritten_user = '\0';
        if (rw) {
            struct wire_msg m2;
            decode(&out, &m2);
            wire_get_strbuf(m2.root, "user", rewritten_user, 64);
            assert_int_equal(m2.id, 7);
            wire_msg_free(&m2);
        }
    }
    wire_msg_free(&m);
    wire_buf_free(&wb);
    wire_buf_free(&out);
    return rc;
}

/* Is a PSUBMIT with "hosts" (host picking) allowed for identity id? */
static int allowed_hosts(const struct curve_ident *id)
{
    struct wire_buf wb, out;
    struct wire_msg m;
    wire_buf_init(&wb);
    wire_buf_init(&out);
    wire_begin(&wb, WT_PSUBMIT, 7, 1);
    wire_put_key(&wb, "hosts");
    wire_pack_array(&wb, 1);
    wire_pack_str(&wb, "node1");
    decode(&wb, &m);
    bool rw = false;
    char why[400];
    int rc = curve_access(id, &m, &out, &rw, why, sizeof why);
    wire_msg_free(&m);
    wire_buf_free(&wb);
    wire_buf_free(&out);
    return rc;
}

static void test_access(void **state)
{
    (void)state;
    struct loop *l = loop_new();
    void *ctx = zmq_ctx_new();
    char err[800], k[41], u[64];
    struct curve_conf c = conf_for("server.key", "auth");
    struct curve_server *s = curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err);
    assert_non_null(s);
    pub_of("alice", k);
    const struct curve_ident *alice = curve_server_ident(s, k);
    pub_of("node1", k);
    const struct curve_ident *node = curve_server_ident(s, k);
    pub_of("peer1", k);
    const struct curve_ident *peer = curve_server_ident(s, k);
    pub_of("root", k);
    const struct curve_ident *root = curve_server_ident(s, k);
    pub_of("evil", k);
    assert_null(curve_server_ident(s, k));
    assert_non_null(alice);
    assert_string_equal(alice->name, "alice");
    assert_int_equal(alice->kind, CURVE_USER);
    assert_string_equal(alice->groups, "physics,users");
    assert_int_equal(node->kind, CURVE_NODE);
    assert_int_equal(root->kind, CURVE_ADMIN);
    assert_string_equal(curve_server_by_name(s, "bob")->name, "bob");
    /* nodes: the node protocol only */
    assert_int_equal(allowed(node, WT_HELLO, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(node, WT_RESULT, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(node, WT_SUBMIT, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(node, WT_JOB_LIST, NULL, NULL, NULL), -1);
    /* users: user requests as themselves; not the node protocol nor admin requests */
    assert_int_equal(allowed(alice, WT_SUBMIT, "bob", NULL, u), 0);
    assert_string_equal(u, "alice");
    assert_int_equal(allowed(alice, WT_SUBMIT, NULL, NULL, u), 0);
    assert_string_equal(u, "alice");
    assert_int_equal(allowed(alice, WT_SUBMIT, "alice", NULL, u), 0);
    assert_string_equal(u, ""); /* already right: not rewritten */
    assert_int_equal(allowed(alice, WT_SUBMIT, NULL, "physics", NULL), 0);
    assert_int_equal(allowed(alice, WT_SUBMIT, NULL, "wheel", NULL), -1);
    assert_int_equal(allowed(alice, WT_HELLO, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_CONSOLE, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_PURGE, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_RESV_SET, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_RESV_RELEASE, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_EVENTS, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_RESERVE, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(alice, WT_TASK_PIN, NULL, NULL, NULL), -1); /* issue 26 */
    assert_int_equal(allowed(node, WT_TASK_PIN, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(root, WT_TASK_PIN, NULL, NULL, NULL), 0);
    /* admins: everything, names honoured */
    assert_int_equal(allowed(root, WT_CONSOLE, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(root, WT_SUBMIT, "bob", NULL, u), 0);
    assert_string_equal(u, "");
    assert_int_equal(allowed(root, WT_HELLO, NULL, NULL, NULL), 0);
    /* peers: within the grant, for any user */
    assert_int_equal(allowed(peer, WT_SUBMIT, "carol", NULL, u), 0);
    assert_string_equal(u, "");
    assert_int_equal(allowed(peer, WT_JOB_LIST, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(peer, WT_CANCEL, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(peer, WT_EVENTS, NULL, NULL, NULL), -1);
    /* issue 23: NODE_CTL is an admin request; MASTER_GET is for every key; host
     * picking (PSUBMIT hosts) for admins and peers */
    assert_int_equal(allowed(alice, WT_NODE_CTL, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(node, WT_NODE_CTL, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(peer, WT_NODE_CTL, NULL, NULL, NULL), -1);
    assert_int_equal(allowed(root, WT_NODE_CTL, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(node, WT_MASTER_GET, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(alice, WT_MASTER_GET, NULL, NULL, NULL), 0);
    assert_int_equal(allowed(alice, WT_PSUBMIT, NULL, NULL, NULL), 0);
    assert_int_equal(allowed_hosts(alice), -1);
    assert_int_equal(allowed_hosts(root), 0);
    assert_int_equal(allowed_hosts(NULL), 0);
    /* plain: no identity, nothing refused */
    assert_int_equal(allowed(NULL, WT_CONSOLE, NULL, NULL, NULL), 0);
    /* ownership and groups through the current identity */
    curve_set_current(s, alice);
    assert_true(curve_may_touch("alice"));
    assert_false(curve_may_touch("bob"));
    assert_false(curve_may_touch(NULL));
    bool known;
    assert_true(curve_user_in_group("alice", "users", &known) && known);
    assert_false(curve_user_in_group("alice", "user", &known));
    assert_true(known);
    curve_user_in_group("nobody-here", "users", &known);
    assert_false(known);
    bool claim;
    assert_false(curve_may_see_sessions());
    assert_true(curve_may_use_session("alice", &claim) && !claim);
    assert_false(curve_may_use_session("node1", &claim));
    assert_true(curve_may_use_session("", &claim) && claim);
    curve_set_current(s, node);
    assert_true(curve_may_see_sessions());
    assert_false(curve_may_use_session("node2", &claim));
    curve_set_current(s, root);
    assert_true(curve_may_touch("bob"));
    assert_true(curve_may_use_session("node2", &claim) && !claim);
    curve_set_current(s, NULL);
    curve_server_destroy(&s);
    assert_null(curve_current());
    assert_true(curve_may_touch("anyone")); /* no server: plain */
    zmq_ctx_term(ctx);
    loop_destroy(&l);
}

/* ---- a real CURVE round trip through the daemon ---- */

static char seen[256]; /* names of the identities dispatched, in order */

static void dispatch(void *arg, const struct wire_msg *m, const char *peer, struct wire_buf *reply)
{
    (void)arg;
    (void)peer;
    const struct curve_ident *id = curve_current();
    size_t n = strlen(seen);
    snprintf(seen + n, sizeof seen - n, "%s;", id ? id->name : "(none)");
    wire_begin(reply, WT_OK, m->id, 0);
}

static int commit(void *arg)
{
    (void)arg;
    return 0;
}

static void reload(void *arg)
{
    (void)arg;
}

static void stop(struct loop *l, void *arg)
{
    (void)arg;
    loop_stop(l);
}

/* A client with key `who` that has sent one request of type. */
static void *client(struct daemon *d, const char *who, uint32_t type)
{
    char err[800];
    struct curve_conf c = conf_for(who, NULL);
    snprintf(c.server_key, sizeof c.server_key, "%s/server.pub", dir);
    void *s = zmq_socket(daemon_zctx(d), ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(curve_client_apply(s, &c, daemon_endpoint(d), err, sizeof err), 0);
    assert_int_equal(zmq_connect(s, daemon_endpoint(d)), 0);
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, type, 3, 0);
    assert_true(zmq_send(s, wb.sb.data, wb.sb.size, 0) >= 0);
    wire_buf_free(&wb);
    return s;
}

/* The reply type on s (1000 + code for an ERROR), or 0 for none; closes s. */
static uint32_t reply_of(void *s)
{
    uint32_t got = 0;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) >= 0) {
        struct wire_msg r;
        struct wire_error e;
        assert_int_equal(wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), false, &r, &e), 0);
        got = r.type == WT_ERROR ? 1000 + (uint32_t)wire_get_u64(r.root, "code", 0) : r.type;
        wire_msg_free(&r);
    }
    zmq_msg_close(&m);
    zmq_close(s);
    return got;
}

/* The request type named name (docs/wire.md names), or 0. */
static uint32_t type_named(const char *name, size_t len)
{
    for (uint32_t t = 1; t < 256; t++) {
        const struct wire_desc *d = wire_desc_find(t);
        if (d && d->request && strlen(d->name) == len && !strncmp(d->name, name, len))
            return t;
    }
    return 0;
}

/* Does a table cell say the identity is refused (DENIED, or a peer needing a grant)? */
static bool cell_refuses(const char *cell)
{
    while (*cell == ' ')
        cell++;
    return !strncmp(cell, "DENIED", 6) || !strncmp(cell, "only when its grant names", 25);
}

/*
 * docs/security.md's access table says what daemon/access.c does: for each row's
 * requests, an identity whose cell starts with DENIED (or, for the peer, "only when its
 * grant names them": a peer with the default grant) is refused, and the others are let
 * through (issue 23: the table is written from the code).
 */
static void test_access_table(void **state)
{
    (void)state;
    struct loop *l = loop_new();
    void *ctx = zmq_ctx_new();
    char err[800], k[41], line[1024];
    struct curve_conf c = conf_for("server.key", "auth");
    struct curve_server *s = curve_server_new(ctx, l, &c, "tcp://127.0.0.1:1", err, sizeof err);
    assert_non_null(s);
    const struct curve_ident *who[4];
    const char *names[4] = {"node1", "alice", "root", "peer2"};
    for (int i = 0; i < 4; i++) {
        pub_of(names[i], k);
        assert_non_null(who[i] = curve_server_ident(s, k));
    }
    FILE *f = fopen("docs/security.md", "r");
    assert_non_null(f); /* unit tests run from the top of the tree */
    bool in = false;
    int rows = 0, checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3))
            in = !strncmp(line, "## Access control", 17);
        if (!in || line[0] != '|' || !strncmp(line, "| request", 9) || !strncmp(line, "|--", 3))
            continue;
        char *cell[6] = {0};
        int nc = 0;
        for (char *p = strtok(line + 1, "|"); p && nc < 6; p = strtok(NULL, "|"))
            cell[nc++] = p;
        assert_int_equal(nc, 6); /* request, node, user, admin, peer, and the newline */
        rows++;
        for (const char *p = cell[0]; *p;) {
            size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
            uint32_t t = n >= 3 ? type_named(p, n) : 0;
            p += n ? n : 1;
            if (!t)
                continue;
            for (int i = 0; i < 4; i++) {
                int rc = allowed(who[i], t, NULL, NULL, NULL);
                if ((rc < 0) != cell_refuses(cell[1 + i]))
                    fail_msg("docs/security.md: %s for a %s key says '%s' but access.c %s it",
                             wire_desc_find(t)->name, names[i], cell[1 + i],
                             rc < 0 ? "refuses" : "allows");
            }
            checked++;
        }
    }
    fclose(f);
    assert_true(rows >= 8 && checked >= 30);
    curve_server_destroy(&s);
    zmq_ctx_term(ctx);
    loop_destroy(&l);
}

static void test_daemon_round_trip(void **state)
{
    (void)state;
    struct loop *l = loop_new();
    struct curve_conf c = conf_for("server.key", "auth");
    struct daemon_opts o = {"test", "tcp://127.0.0.1:*", dir, 0, .security = &c};
    struct daemon_ops ops = {dispatch, commit, reload, NULL, NULL};
    struct daemon *d = daemon_new(l, &o, &ops);
    assert_non_null(d);
    void *alice = client(d, "alice.key", WT_JOB_LIST);
    void *node = client(d, "node1.key", WT_JOB_LIST);
    void *evil = client(d, "evil.key", WT_JOB_LIST);
    loop_timer(l, 1500, 0, stop, NULL); /* handshakes on loopback: milliseconds */
    loop_run(l);
    assert_int_equal(reply_of(alice), WT_OK);
    assert_int_equal(reply_of(node), 1000 + WE_DENIED); /* refused before dispatch */
    assert_int_equal(reply_of(evil), 0);                /* refused at the handshake */
    assert_string_equal(seen, "alice;");
    daemon_destroy(&d);
    loop_destroy(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_key_literals),
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_server_config_errors),
        cmocka_unit_test(test_access),
        cmocka_unit_test(test_access_table),
        cmocka_unit_test(test_daemon_round_trip),
    };
    return cmocka_run_group_tests_name("curve", tests, setup, teardown);
}

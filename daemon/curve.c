/*
 * curve.c - CURVE keys, the ZAP handler of serving roles, the authorized-keys table
 * and the client side of a CURVE connection (see curve.h and docs/security.md).
 */
#include "daemon/curve.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/log.h"
#include "daemon/loop.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define REFUSE_LOG_MS 10000 /* at most one report of refused keys per this period */
#define RELOAD_CHECK_MS 1000

struct curve_server {
    bool secure;
    struct loop *loop;
    void *zap;
    char secret[CURVE_KEY_Z85 + 1];
    char auth_path[CONFIG_STR_MAX];
    struct curve_ident *ids; /* sorted by key */
    size_t nids;
    struct stat auth_st;
    int64_t checked_ms;
    /* refused handshakes since the last report */
    uint64_t refused;
    char last_key[CURVE_KEY_Z85 + 1], last_addr[64];
    int64_t last_report_ms;
    int report_timer;
};

static struct curve_server *cur_server;
static const struct curve_ident *cur_ident;

/* ---- keys ---- */

static bool z85_key(const char *s, size_t n)
{
    static const char alpha[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                ".-:+=^!/*?&<>()[]{}@%$#";
    if (n != CURVE_KEY_Z85)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(alpha, s[i]))
            return false;
    return true;
}

static int write_file(const char *path, const char *text, mode_t mode, char *err, size_t el)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf(err, el, "cannot create %s: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (remove it first to replace the key)" : "");
        return -1;
    }
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0 ? 0 : -1;
    if (rc < 0)
        snprintf(err, el, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

int curve_keygen(const char *dir, const char *name, char *err, size_t el)
{
    char pub[CURVE_KEY_Z85 + 1], sec[CURVE_KEY_Z85 + 1], path[4096], text[512];
    if (!*name || strchr(name, '/') || strlen(name) >= CURVE_NAME_MAX) {
        snprintf(err, el, "bad key name '%s' (1-%d characters, no '/')", name, CURVE_NAME_MAX - 1);
        return -1;
    }
    if (zmq_curve_keypair(pub, sec) < 0) {
        snprintf(err, el, "cannot make a key pair: %s", zmq_strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    snprintf(text, sizeof text,
             "# gridnode CURVE secret key of '%s': keep it private (mode 0600)\n"
             "# public key: %s\n%s\n",
             name, pub, sec);
    if (write_file(path, text, 0600, err, el) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s.pub", dir, name);
    snprintf(text, sizeof text, "# gridnode CURVE public key of '%s'\n%s\n", name, pub);
    if (write_file(path, text, 0644, err, el) < 0) {
        snprintf(path, sizeof path, "%s/%s.key", dir, name);
        unlink(path);
        return -1;
    }
    return 0;
}

/* Does path end in suffix (".key", ".pub") after a non-empty name? */
static bool has_suffix(const char *path, const char *suffix)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), s = strlen(suffix);
    return n > s && !strcmp(base + n - s, suffix);
}

/*
 * Finds the one key of a key file's text: lines that are blank or start with '#' are
 * comments, except a line that is exactly one z85 key (a key may start with '#'); the
 * first other line must be the key, and no other such line may follow.
 */
static int parse_key_text(char *text, const char *path, char out[CURVE_KEY_Z85 + 1], char *err,
                          size_t el)
{
    int nkeys = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line, *e;
        while (isspace((unsigned char)*p))
            p++;
        for (e = p + strlen(p); e > p && isspace((unsigned char)e[-1]); e--)
            ;
        bool key = z85_key(p, (size_t)(e - p));
        if (!*p || (*p == '#' && !key))
            continue;
        if (!key || nkeys++) {
            snprintf(err, el,
                     "%s: %s (a key file holds one 40-character z85 key on a line of its own, "
                     "and '#' comments; make one with gridnode keygen)",
                     path, key ? "holds more than one key" : "a line is not a z85 key");
            return -1;
        }
        memcpy(out, p, CURVE_KEY_Z85);
        out[CURVE_KEY_Z85] = '\0';
    }
    if (nkeys)
        return 0;
    snprintf(err, el, "%s holds no z85 key (40 characters; make one with gridnode keygen)", path);
    return -1;
}

int curve_read_key(const char *path, bool secret, char out[CURVE_KEY_Z85 + 1], char *err, size_t el)
{
    const char *sfx = secret ? ".key" : ".pub";
    if (!strncmp(path, CURVE_LITERAL_PREFIX, strlen(CURVE_LITERAL_PREFIX))) {
        snprintf(err, el,
                 "%s: a %s key is read from a file only (NAME%s from gridnode keygen); a "
                 "literal " CURVE_LITERAL_PREFIX "KEY is accepted only as the server's public "
                 "key (security.server_key, GRIDNODE_SERVER_KEY)",
                 path, secret ? "secret" : "public", sfx);
        return -1;
    }
    if (!has_suffix(path, sfx)) {
        snprintf(err, el,
                 "%s is not a %s key file: its name must end in %s (as gridnode keygen "
                 "writes NAME.key, the secret, and NAME.pub, the public key)%s",
                 path, secret ? "secret" : "public", sfx,
                 secret && has_suffix(path, ".pub")    ? "; this is a public key"
                 : !secret && has_suffix(path, ".key") ? "; this is a secret key, never give it "
                                                         "out: name the .pub file"
                                                       : "");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    char text[CURVE_KEYFILE_MAX + 1];
    ssize_t n = -1;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, el, "cannot read key file %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > CURVE_KEYFILE_MAX) {
        snprintf(err, el, "%s is not a key file (%s)", path,
                 S_ISREG(st.st_mode) ? "larger than 4096 bytes" : "not a regular file");
        goto done;
    }
    if (secret && (st.st_mode & 077)) {
        snprintf(err, el, "secret key file %s is readable by others (mode %03o): chmod 600 %s",
                 path, (unsigned)(st.st_mode & 0777), path);
        goto done;
    }
    if ((n = read(fd, text, CURVE_KEYFILE_MAX)) < 0)
        snprintf(err, el, "cannot read key file %s: %s", path, strerror(errno));
done:
    if (fd >= 0)
        close(fd);
    if (n < 0)
        return -1;
    text[n] = '\0';
    if (memchr(text, '\0', (size_t)n)) {
        snprintf(err, el, "%s is not a key file (it holds a NUL byte)", path);
        return -1;
    }
    return parse_key_text(text, path, out, err, el);
}

int curve_read_server_key(const char *value, char out[CURVE_KEY_Z85 + 1], char *err, size_t el)
{
    size_t pl = strlen(CURVE_LITERAL_PREFIX);
    if (strncmp(value, CURVE_LITERAL_PREFIX, pl))
        return curve_read_key(value, false, out, err, el);
    if (!z85_key(value + pl, strlen(value + pl))) {
        snprintf(err, el,
                 "'%.60s' is not " CURVE_LITERAL_PREFIX "KEY with KEY 40 z85 characters (the "
                 "public key a .pub file holds)",
                 value);
        return -1;
    }
    memcpy(out, value + pl, CURVE_KEY_Z85 + 1);
    return 0;
}

void curve_conf_env(struct curve_conf *c)
{
    static const struct {
        const char *env;
        size_t off;
    } m[] = {{"GRIDNODE_KEY", offsetof(struct curve_conf, secret_key)},
             {"GRIDNODE_SERVER_KEY", offsetof(struct curve_conf, server_key)},
             {"GRIDNODE_AUTHORIZED_KEYS", offsetof(struct curve_conf, authorized_keys)}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char *f = (char *)c + m[i].off;
        const char *v = getenv(m[i].env);
        if (!*f && v && strlen(v) < CONFIG_STR_MAX)
            strcpy(f, v);
    }
    const char *p = getenv("GRIDNODE_PLAIN");
    if (p && (!strcmp(p, "1") || !strcmp(p, "true") || !strcmp(p, "yes")))
        c->plain = 1;
}

bool curve_endpoint_local(const char *ep)
{
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9))
        return true;
    if (strncmp(ep, "tcp://", 6))
        return false;
    const char *h = ep + 6, *semi = strchr(h, ';'); /* tcp://SOURCE;DEST */
    if (semi)
        h = semi + 1;
    return !strncmp(h, "127.", 4) || !strncmp(h, "localhost:", 10) || !strncmp(h, "[::1]:", 6) ||
           !strncmp(h, "lo:", 3);
}

/* ---- the authorized-keys table ---- */

static int cmp_ident(const void *a, const void *b)
{
    return strcmp(((const struct curve_ident *)a)->key, ((const struct curve_ident *)b)->key);
}

/* Parses one line "KEY NAME KIND [groups=a,b] [grant=X,Y]" into id; 0, 1 (blank), -1. */
static int parse_line(char *line, struct curve_ident *id, char *why, size_t wl)
{
    static const char *const kinds[] = {"user", "admin", "node", "peer"};
    char *save = NULL, *tok[8];
    int n = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t && n < 8;
         t = strtok_r(NULL, " \t\r\n", &save))
        tok[n++] = t;
    if (n == 0 || (tok[0][0] == '#' && !(n >= 3 && z85_key(tok[0], strlen(tok[0])))))
        return 1; /* a comment (a key may start with '#') */
    memset(id, 0, sizeof *id);
    if (n < 3 || !z85_key(tok[0], strlen(tok[0])) || strlen(tok[1]) >= CURVE_NAME_MAX) {
        snprintf(why, wl, "expected 'PUBLIC-KEY NAME KIND [groups=G,..] [grant=REQ,..]'");
        return -1;
    }
    strcpy(id->key, tok[0]);
    strcpy(id->name, tok[1]);
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(tok[2], kinds[i]))
            k = i;
    if (k < 0) {
        snprintf(why, wl, "kind '%.20s' is not user, admin, node or peer", tok[2]);
        return -1;
    }
    id->kind = (enum curve_kind)k;
    for (int i = 3; i < n; i++) {
        if (!strncmp(tok[i], "groups=", 7) && strlen(tok[i] + 7) < sizeof id->groups)
            strcpy(id->groups, tok[i] + 7);
        else if (!strncmp(tok[i], "grant=", 6) && strlen(tok[i] + 6) < sizeof id->grant)
            strcpy(id->grant, tok[i] + 6);
        else {
            snprintf(why, wl, "unknown or too long option '%.40s'", tok[i]);
            return -1;
        }
    }
    return 0;
}

/* Loads path into a new sorted table; 0, or -1 with "file:line: why" in err. */
static int load_auth(const char *path, struct curve_ident **out, size_t *nout, struct stat *st,
                     char *err, size_t el)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, el, "cannot read authorized keys %s: %s", path, strerror(errno));
        return -1;
    }
    struct curve_ident *ids = NULL, id;
    size_t n = 0, cap = 0;
    char line[1024], why[200];
    int lineno = 0, rc = 0;
    fstat(fileno(f), st);
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        int r = parse_line(line, &id, why, sizeof why);
        if (r < 0) {
            snprintf(err, el, "%s:%d: %s", path, lineno, why);
            rc = -1;
        } else if (r == 0) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                struct curve_ident *g = realloc(ids, cap * sizeof *g);
                if (!g) {
                    snprintf(err, el, "out of memory");
                    rc = -1;
                    break;
                }
                ids = g;
            }
            ids[n++] = id;
        }
    }
    fclose(f);
    if (rc < 0) {
        free(ids);
        return -1;
    }
    qsort(ids, n, sizeof *ids, cmp_ident);
    *out = ids;
    *nout = n;
    return 0;
}

/*
 * Re-reads the authorized keys when the file changed: at most once a second, or at
 * once when force (a handshake with an unknown key: it may have just been added; a
 * stat is cheap next to the CURVE handshake that came with it).
 */
static void maybe_reload(struct curve_server *s, bool force)
{
    int64_t now = loop_now_ms();
    struct stat st;
    if (!force && now - s->checked_ms < RELOAD_CHECK_MS)
        return;
    s->checked_ms = now;
    if (stat(s->auth_path, &st) < 0 ||
        (st.st_mtim.tv_sec == s->auth_st.st_mtim.tv_sec &&
         st.st_mtim.tv_nsec == s->auth_st.st_mtim.tv_nsec && st.st_ino == s->auth_st.st_ino &&
         st.st_size == s->auth_st.st_size))
        return;
    struct curve_ident *ids;
    size_t n;
    char err[600];
    if (load_auth(s->auth_path, &ids, &n, &st, err, sizeof err) < 0) {
        log_warnx("authorized keys not reloaded, the previous ones stay in force: %s", err);
        s->auth_st = st; /* report once per change */
        return;
    }
    free(s->ids);
    s->ids = ids;
    s->nids = n;
    s->auth_st = st;
    log_info("authorized keys reloaded from %s: %zu keys", s->auth_path, n);
}

static const struct curve_ident *find_key(struct curve_server *s, const char *key)
{
    struct curve_ident k;
    snprintf(k.key, sizeof k.key, "%s", key);
    return bsearch(&k, s->ids, s->nids, sizeof k, cmp_ident);
}

const struct curve_ident *curve_server_ident(struct curve_server *s, const char *user_id)
{
    if (!s || !s->secure || !user_id)
        return NULL;
    maybe_reload(s, false);
    return find_key(s, user_id);
}

const struct curve_ident *curve_server_by_name(struct curve_server *s, const char *name)
{
    if (!s || !s->secure)
        return NULL;
    for (size_t i = 0; i < s->nids; i++)
        if (!strcmp(s->ids[i].name, name))
            return &s->ids[i];
    return NULL;
}

/* ---- the ZAP handler (RFC 27) ---- */

static void report_refused(struct curve_server *s, bool force)
{
    int64_t now = loop_now_ms();
    if (!s->refused || (!force && now - s->last_report_ms < REFUSE_LOG_MS))
        return;
    log_warnx("refused %llu connection(s) with keys not in %s (last: key %s from %s); add the "
              "key to admit it",
              (unsigned long long)s->refused, s->auth_path, s->last_key, s->last_addr);
    s->refused = 0;
    s->last_report_ms = now;
}

static void on_report_timer(struct loop *l, void *arg)
{
    (void)l;
    report_refused(arg, false);
}

/* Answers one ZAP request: 200 with the z85 key as User-Id, or 400. */
static void zap_one(struct curve_server *s)
{
    zmq_msg_t f[8];
    int n = 0;
    bool more = true;
    while (more && n < 8) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], s->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[n]);
            break;
        }
        more = zmq_msg_more(&f[n]);
        n++;
    }
    if (n == 0)
        return;
    char key[CURVE_KEY_Z85 + 1] = "", addr[64] = "";
    bool ok = false;
    if (n >= 7 && zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) &&
        zmq_msg_size(&f[6]) == 32 && zmq_z85_encode(key, zmq_msg_data(&f[6]), 32)) {
        maybe_reload(s, false);
        ok = find_key(s, key) != NULL;
        if (!ok) {
            maybe_reload(s, true);
            ok = find_key(s, key) != NULL;
        }
    }
    if (n >= 4)
        snprintf(addr, sizeof addr, "%.*s",
                 (int)(zmq_msg_size(&f[3]) < 63 ? zmq_msg_size(&f[3]) : 63),
                 (const char *)zmq_msg_data(&f[3]));
    if (!ok) {
        s->refused++;
        snprintf(s->last_key, sizeof s->last_key, "%s", *key ? key : "(none)");
        snprintf(s->last_addr, sizeof s->last_addr, "%s", *addr ? addr : "?");
        report_refused(s, false);
    }
    zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE);
    if (n >= 2)
        zmq_send(s->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(s->zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    const char *text = ok ? "OK" : "key not authorized";
    zmq_send(s->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(s->zap, ok ? key : "", ok ? CURVE_KEY_Z85 : 0, ZMQ_SNDMORE);
    zmq_send(s->zap, "", 0, 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void on_zap(struct loop *l, void *arg)
{
    struct curve_server *s = arg;
    (void)l;
    for (int i = 0; i < 256; i++) {
        int ev = 0;
        size_t sz = sizeof ev;
        if (zmq_getsockopt(s->zap, ZMQ_EVENTS, &ev, &sz) < 0 || !(ev & ZMQ_POLLIN))
            break;
        zap_one(s);
    }
}

struct curve_server *curve_server_new(void *zctx, struct loop *l, const struct curve_conf *conf,
                                      const char *listen, char *err, size_t el)
{
    struct curve_conf c = conf ? *conf : (struct curve_conf){0};
    curve_conf_env(&c);
    struct curve_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, el, "out of memory");
        return NULL;
    }
    s->loop = l;
    s->report_timer = -1;
    if (c.plain) {
        if (!curve_endpoint_local(listen)) {
            snprintf(err, el,
                     "security.plain (no CURVE) is allowed only on loopback or ipc:// endpoints, "
                     "not %s: configure security.secret_key and security.authorized_keys",
                     listen);
            goto fail;
        }
        log_warnx("running plain (security.plain): no encryption, no authentication");
        cur_server = s;
        return s;
    }
    if (!*c.secret_key || !*c.authorized_keys) {
        snprintf(err, el,
                 "no security configured: set security.secret_key and security.authorized_keys "
                 "(make keys with 'gridnode keygen NAME'), or security.plain = true for a "
                 "loopback-only test setup");
        goto fail;
    }
    char e2[600];
    if (curve_read_key(c.secret_key, true, s->secret, e2, sizeof e2) < 0) {
        snprintf(err, el, "security.secret_key: %s", e2);
        goto fail;
    }
    snprintf(s->auth_path, sizeof s->auth_path, "%s", c.authorized_keys);
    if (load_auth(s->auth_path, &s->ids, &s->nids, &s->auth_st, e2, sizeof e2) < 0) {
        snprintf(err, el, "security.authorized_keys: %s", e2);
        goto fail;
    }
    s->checked_ms = loop_now_ms();
    s->last_report_ms = loop_now_ms() - REFUSE_LOG_MS;
    int zero = 0;
    if (!(s->zap = zmq_socket(zctx, ZMQ_REP)) ||
        zmq_setsockopt(s->zap, ZMQ_LINGER, &zero, sizeof zero) < 0 ||
        zmq_bind(s->zap, ZAP_ENDPOINT) < 0 || loop_add_socket(l, s->zap, on_zap, s) < 0) {
        snprintf(err, el, "cannot start the ZAP handler: %s", zmq_strerror(errno));
        goto fail;
    }
    s->report_timer = loop_timer(l, REFUSE_LOG_MS, 1, on_report_timer, s);
    s->secure = true;
    cur_server = s;
    log_info("CURVE on: %zu authorized keys from %s", s->nids, s->auth_path);
    return s;
fail:
    curve_server_destroy(&s);
    return NULL;
}

int curve_server_apply(struct curve_server *s, void *sock)
{
    int one = 1;
    if (!s->secure)
        return 0;
    return zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0 ||
                   zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, s->secret, CURVE_KEY_Z85) < 0
               ? -1
               : 0;
}

bool curve_server_secure(const struct curve_server *s)
{
    return s && s->secure;
}

void curve_server_destroy(struct curve_server **sp)
{
    if (!sp || !*sp)
        return;
    struct curve_server *s = *sp;
    int saved = errno;
    report_refused(s, true);
    if (s->report_timer > 0)
        loop_timer_cancel(s->loop, s->report_timer);
    if (s->zap) {
        loop_remove_socket(s->loop, s->zap);
        zmq_close(s->zap);
    }
    if (cur_server == s) {
        cur_server = NULL;
        cur_ident = NULL;
    }
    free(s->ids);
    free(s);
    *sp = NULL;
    errno = saved;
}

const struct curve_ident *curve_current(void)
{
    return cur_server && cur_server->secure ? cur_ident : NULL;
}

void curve_set_current(struct curve_server *s, const struct curve_ident *id)
{
    cur_server = s;
    cur_ident = id;
}

bool curve_user_in_group(const char *user, const char *group, bool *known)
{
    const struct curve_ident *id = curve_server_by_name(cur_server, user);
    *known = id != NULL;
    if (!id)
        return false;
    size_t gl = strlen(group);
    for (const char *p = id->groups; *p;) {
        size_t n = strcspn(p, ",");
        if (n == gl && !strncmp(p, group, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* ---- connecting ---- */

const char *curve_handshake_failure(unsigned event)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return "the server refused our key: it is not in the server's authorized keys "
               "(security.authorized_keys); give the server's administrator our public key "
               "(GRIDNODE_KEY / security.secret_key)";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
        event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        return "the CURVE handshake failed: the server's public key is not the one we were "
               "given (GRIDNODE_SERVER_KEY / security.server_key), or the server does not run "
               "CURVE";
    return NULL;
}

unsigned curve_monitor_event(void *mon)
{
    zmq_msg_t f;
    uint16_t ev = 0;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, mon, ZMQ_DONTWAIT) >= 0 && zmq_msg_size(&f) >= 2)
        memcpy(&ev, zmq_msg_data(&f), 2);
    while (zmq_msg_more(&f)) { /* the second frame: the endpoint */
        zmq_msg_close(&f);
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, mon, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_msg_close(&f);
    return ev;
}

#define WATCH_LOG_MS 60000
#define WATCH_EVENTS                                                                               \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |                  \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

struct curve_watch {
    struct loop *loop;
    void *mon;
    char endpoint[CONFIG_STR_MAX];
    int64_t last_log_ms;
};

static void on_watch(struct loop *l, void *arg)
{
    struct curve_watch *w = arg;
    (void)l;
    for (int i = 0; i < 64; i++) {
        int ev = 0;
        size_t sz = sizeof ev;
        if (zmq_getsockopt(w->mon, ZMQ_EVENTS, &ev, &sz) < 0 || !(ev & ZMQ_POLLIN))
            break;
        const char *why = curve_handshake_failure(curve_monitor_event(w->mon));
        int64_t now = loop_now_ms();
        if (why && now - w->last_log_ms >= WATCH_LOG_MS) {
            log_warnx("cannot talk to %s: %s", w->endpoint, why);
            w->last_log_ms = now;
        }
    }
}

struct curve_watch *curve_watch_new(void *zctx, struct loop *l, void *sock, const char *endpoint)
{
    static unsigned seq;
    char addr[64];
    int zero = 0;
    struct curve_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->loop = l;
    w->last_log_ms = loop_now_ms() - WATCH_LOG_MS;
    snprintf(w->endpoint, sizeof w->endpoint, "%s", endpoint);
    snprintf(addr, sizeof addr, "inproc://curve-watch-%d-%u", (int)getpid(), ++seq);
    if (zmq_socket_monitor(sock, addr, WATCH_EVENTS) < 0 ||
        !(w->mon = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(w->mon, ZMQ_LINGER, &zero, sizeof zero) < 0 ||
        zmq_connect(w->mon, addr) < 0 || loop_add_socket(l, w->mon, on_watch, w) < 0) {
        log_debug("cannot watch the handshakes with %s: %s", endpoint, zmq_strerror(errno));
        if (w->mon)
            zmq_close(w->mon);
        free(w);
        return NULL;
    }
    return w;
}

void curve_watch_destroy(struct curve_watch **wp)
{
    if (!wp || !*wp)
        return;
    struct curve_watch *w = *wp;
    loop_remove_socket(w->loop, w->mon);
    zmq_close(w->mon);
    free(w);
    *wp = NULL;
}

bool curve_client_secure(const struct curve_conf *conf)
{
    struct curve_conf c = conf ? *conf : (struct curve_conf){0};
    curve_conf_env(&c);
    return !c.plain;
}

int curve_client_keys(const struct curve_conf *conf, const char *endpoint,
                      char sec[CURVE_KEY_Z85 + 1], char srv[CURVE_KEY_Z85 + 1], char *err,
                      size_t el)
{
    struct curve_conf c = conf ? *conf : (struct curve_conf){0};
    curve_conf_env(&c);
    char e2[600];
    if (c.plain) {
        if (curve_endpoint_local(endpoint))
            return 1;
        snprintf(err, el,
                 "plain (no CURVE) is allowed only to loopback or ipc:// endpoints, not %s: set "
                 "GRIDNODE_KEY and GRIDNODE_SERVER_KEY (or security.secret_key/server_key)",
                 endpoint);
        return -1;
    }
    if (!*c.secret_key || !*c.server_key) {
        snprintf(err, el,
                 "no CURVE keys for %s: set GRIDNODE_KEY (own secret key file, from 'gridnode "
                 "keygen') and GRIDNODE_SERVER_KEY (the server's public key), or "
                 "security.secret_key/server_key; GRIDNODE_PLAIN=1 for a plain loopback test "
                 "setup",
                 endpoint);
        return -1;
    }
    if (curve_read_key(c.secret_key, true, sec, e2, sizeof e2) < 0) {
        snprintf(err, el, "own key: %s", e2);
        return -1;
    }
    if (curve_read_server_key(c.server_key, srv, e2, sizeof e2) < 0) {
        snprintf(err, el, "server key: %s", e2);
        return -1;
    }
    return 0;
}

int curve_client_apply(void *sock, const struct curve_conf *conf, const char *endpoint, char *err,
                       size_t el)
{
    char pub[CURVE_KEY_Z85 + 1], sec[CURVE_KEY_Z85 + 1], srv[CURVE_KEY_Z85 + 1];
    int rc = curve_client_keys(conf, endpoint, sec, srv, err, el);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (zmq_curve_public(pub, sec) < 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, srv, CURVE_KEY_Z85) < 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, CURVE_KEY_Z85) < 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, CURVE_KEY_Z85) < 0) {
        snprintf(err, el, "cannot set the CURVE keys: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

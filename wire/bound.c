/*
 * bound.c - the pre-passes over a frame's msgpack headers, run before msgpack-c builds
 * anything: the declared-count check (wire_precheck) and the descriptor-aware bound
 * (wire_bound), both on one header reader.
 *
 * wire_precheck, the pre-pass of DEPENDENCIES.md: walk the object headers keeping a
 * count of objects still to read; each needs at least one byte, so a declared count
 * larger than the bytes left is a lie and is rejected before msgpack-c allocates for it.
 *
 * wire_bound: msgpack_unpack_next() builds one msgpack_object (24 bytes, 48 per map entry) for
 * every value, so a 60 MiB frame of nils costs ~1.5 GB whatever the descriptor says. This walk
 * reads the envelope and checks, from the headers alone, that the frame holds no more
 * than its type's descriptor can legitimately need:
 *  - the root is a map of at most WIRE_MAX_MAP entries and its envelope is valid;
 *  - a known field's value has the right shape (an array field holds an array of at most
 *    its cap, a scalar field holds no container), recursively through nested field lists;
 *  - the values of unknown keys hold at most WIRE_UNKNOWN_VALUES values in the whole
 *    message (they are for small additions by newer peers);
 *  - the whole message holds at most WIRE_MAX_VALUES values (this only binds replies
 *    with free-form maps: every request's descriptor already bounds it far lower).
 * Full type checks still happen afterwards on the built objects (wire_check_map).
 */
#include "wire/bound.h"
#include "lib/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Containers msgpack-c can nest (its fixed parse stack); the root map counts. */
#define WIRE_MAX_DEPTH 32

enum hclass { H_NIL, H_SCALAR, H_STR, H_BIN, H_EXT, H_ARRAY, H_MAP };

struct hdr {
    enum hclass cls;
    bool pos_int;        /* a non-negative integer: value in u */
    uint64_t u;          /* integer value, or count of an array / map */
    const uint8_t *body; /* str/bin bytes */
    uint64_t size;       /* str/bin size */
};

struct walk {
    const uint8_t *p;
    size_t len, pos;
    uint64_t values, unknown; /* values seen in all, and under unknown keys */
    const char *tname;        /* type name for error texts, or NULL */
    int depth;                /* containers open around the walk's position */
    struct wire_error *err;
};

static uint64_t rd_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static int fail(struct walk *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct walk *w, int code, const char *fmt, ...)
{
    if (!w->err)
        return -1;
    va_list ap;
    int n = 0;
    w->err->code = code;
    if (w->tname && code == WE_FIELD)
        n = snprintf(w->err->text, sizeof w->err->text, "%s: ", w->tname);
    va_start(ap, fmt);
    vsnprintf(w->err->text + n, sizeof w->err->text - (size_t)n, fmt, ap);
    va_end(ap);
    text_fix(w->err->text); /* a quoted key may be cut inside a character or invalid */
    return -1;
}

/* Reads one header at w->pos and steps over it and any payload (not over children). */
static int rd_hdr(struct walk *w, struct hdr *h)
{
    const uint8_t *p = w->p;
    size_t left = w->len - w->pos;
    memset(h, 0, sizeof *h);
    if (left == 0)
        goto bad;
    uint8_t b = p[w->pos++];
    left--;
    uint64_t skip = 0;
    int lb = 0;
    if (b <= 0x7f) {
        h->cls = H_SCALAR, h->pos_int = true, h->u = b;
        return 0;
    }
    if (b >= 0xe0) {
        h->cls = H_SCALAR;
        return 0;
    }
    if (b <= 0x8f) {
        h->cls = H_MAP, h->u = b & 0x0f;
        return 0;
    }
    if (b <= 0x9f) {
        h->cls = H_ARRAY, h->u = b & 0x0f;
        return 0;
    }
    if (b <= 0xbf) {
        h->cls = H_STR, skip = b & 0x1f;
        goto body;
    }
    h->cls = H_SCALAR;
    switch (b) {
    case 0xc0:
        h->cls = H_NIL;
        return 0;
    case 0xc2:
    case 0xc3:
        return 0;
    case 0xc4:
    case 0xc5:
    case 0xc6:
        h->cls = H_BIN, lb = 1 << (b - 0xc4);
        break;
    case 0xd9:
    case 0xda:
    case 0xdb:
        h->cls = H_STR, lb = 1 << (b - 0xd9);
        break;
    case 0xc7:
    case 0xc8:
    case 0xc9:
        h->cls = H_EXT, lb = 1 << (b - 0xc7);
        break;
    case 0xca:
    case 0xd2:
        skip = 4;
        break;
    case 0xcb:
    case 0xd3:
        skip = 8;
        break;
    case 0xd0:
        skip = 1;
        break;
    case 0xd1:
        skip = 2;
        break;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
        int n = 1 << (b - 0xcc);
        if ((size_t)n > left)
            goto bad;
        h->pos_int = true, h->u = rd_be(p + w->pos, n);
        w->pos += (size_t)n;
        return 0;
    }
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        h->cls = H_EXT, skip = 1 + (1u << (b - 0xd4));
        break;
    case 0xdc:
    case 0xdd:
    case 0xde:
    case 0xdf: {
        int n = b & 1 ? 4 : 2;
        if ((size_t)n > left)
            goto bad;
        h->cls = b >= 0xde ? H_MAP : H_ARRAY, h->u = rd_be(p + w->pos, n);
        w->pos += (size_t)n;
        return 0;
    }
    default:
        goto bad;
    }
    if (lb) {
        if ((size_t)lb > left)
            goto bad;
        skip = rd_be(p + w->pos, lb) + (h->cls == H_EXT);
        w->pos += (size_t)lb;
        left -= (size_t)lb;
    }
body:
    if (skip > w->len - w->pos)
        goto bad;
    h->body = p + w->pos, h->size = skip;
    w->pos += (size_t)skip;
    return 0;
bad:
    return fail(w, WE_MALFORMED, "not one well-formed msgpack object (%zu bytes)", w->len);
}

/* flatten: rd_hdr inlined here, where every object of every frame and record passes */
__attribute__((flatten)) int wire_precheck(const uint8_t *p, size_t len)
{
    struct walk w = {.p = p, .len = len}; /* no err: a failure is only -1 */
    uint64_t pending = 1;                 /* objects still to read */
    while (pending > 0) {
        struct hdr h;
        if (rd_hdr(&w, &h) < 0)
            return -1;
        pending--;
        if (h.cls == H_ARRAY)
            pending += h.u;
        else if (h.cls == H_MAP)
            pending += 2 * h.u;
        if (pending > len - w.pos)
            return -1;
    }
    return w.pos == len ? 0 : -1;
}

/* Counts n more values against the message's total. */
static int count(struct walk *w, uint64_t n)
{
    w->values += n;
    if (w->values > WIRE_MAX_VALUES)
        return fail(w, WE_FIELD, "the message holds more than %u values", WIRE_MAX_VALUES);
    return 0;
}

/*
 * Steps over one whole value whose header h was just read, counting every value in it.
 * unknown: the values count against the unknown-key allowance; key names it in errors.
 */
static int skip_rest(struct walk *w, const struct hdr *h, bool unknown, const char *key,
                     size_t keylen)
{
    if (!key) /* stepping over only (the envelope scan): nothing is counted */
        unknown = false;
    /* open[d]: values still to read in the container open at depth w->depth + d */
    uint64_t open[WIRE_MAX_DEPTH + 1];
    int d = 0;
    uint64_t n = 1;
    struct hdr c = *h;
    for (;;) {
        if (unknown && (w->unknown += n) > WIRE_UNKNOWN_VALUES)
            return fail(w, WE_FIELD,
                        "unknown field '%.*s' holds too many values (unknown fields may hold "
                        "%u values in all)",
                        (int)(keylen > 64 ? 64 : keylen), key, WIRE_UNKNOWN_VALUES);
        if (key && count(w, n) < 0)
            return -1;
        if (c.cls == H_ARRAY || c.cls == H_MAP) {
            if (w->depth + d + 1 > WIRE_MAX_DEPTH)
                return fail(w, WE_MALFORMED, "msgpack decoding failed (too deep or malformed)");
            open[++d] = c.cls == H_ARRAY ? c.u : 2 * c.u;
        }
        while (d > 0 && open[d] == 0)
            d--;
        if (d == 0)
            return 0;
        open[d]--;
        if (rd_hdr(w, &c) < 0)
            return -1;
    }
}

static int walk_map(struct walk *w, uint64_t n, const struct wire_field *fields);
static int walk_array(struct walk *w, uint64_t n, uint64_t max, enum wire_ftype elem,
                      const struct wire_field *elem_fields, const char *what);
static int walk_fmap(struct walk *w, uint64_t n, uint64_t max, const struct wire_field *elem_fields,
                     const char *what);

/* Walks one value expected to be of type t (header already read into h). */
static int walk_value(struct walk *w, const struct hdr *h, enum wire_ftype t, uint64_t max,
                      enum wire_ftype elem, const struct wire_field *elem_fields, const char *what)
{
    bool container = h->cls == H_ARRAY || h->cls == H_MAP;
    bool want_array = t == WF_ARRAY, want_map = t == WF_MAP;
    if (!container)
        return count(w, 1); /* a wrong scalar is reported by wire_check_map */
    if ((h->cls == H_ARRAY && !want_array) || (h->cls == H_MAP && !want_map))
        return fail(w, WE_FIELD, "field '%s' must be of type %s", what, wire_ftype_name(t));
    if (count(w, 1) < 0)
        return -1;
    if (w->depth + 1 > WIRE_MAX_DEPTH)
        return fail(w, WE_MALFORMED, "msgpack decoding failed (too deep or malformed)");
    w->depth++;
    int rc = want_array ? walk_array(w, h->u, max, elem, elem_fields, what)
                        : walk_fmap(w, h->u, max, elem_fields, what);
    w->depth--;
    return rc;
}

/* The n elements of an array field (header already read). */
static int walk_array(struct walk *w, uint64_t n, uint64_t max, enum wire_ftype elem,
                      const struct wire_field *elem_fields, const char *what)
{
    uint64_t cap = max ? max : WIRE_DEFAULT_ARRAY;
    if (n > cap)
        return fail(w, WE_FIELD, "field '%s' has %llu elements, more than %llu", what,
                    (unsigned long long)n, (unsigned long long)cap);
    for (uint64_t i = 0; i < n; i++) {
        struct hdr c;
        if (rd_hdr(w, &c) < 0 || walk_value(w, &c, elem, 0, elem, elem_fields, what) < 0)
            return -1;
    }
    return 0;
}

/* The n entries of a map field (header already read). */
static int walk_fmap(struct walk *w, uint64_t n, uint64_t max, const struct wire_field *elem_fields,
                     const char *what)
{
    if (max && n > max)
        return fail(w, WE_FIELD, "field '%s' has %llu entries, more than %llu", what,
                    (unsigned long long)n, (unsigned long long)max);
    if (elem_fields)
        return walk_map(w, n, elem_fields);
    /* a free-form map (replies only): its content is bounded by the message total */
    for (uint64_t i = 0; i < 2 * n; i++) {
        struct hdr c;
        if (rd_hdr(w, &c) < 0 || skip_rest(w, &c, false, "", 0) < 0)
            return -1;
    }
    return 0;
}

static const struct wire_field *find_field(const struct wire_field *fields, const struct hdr *k)
{
    if (k->cls != H_STR)
        return NULL;
    if (k->size == 0)
        return NULL;
    for (const struct wire_field *f = fields; f->key; f++) /* first byte first: cheap */
        if (f->key[0] == (char)k->body[0] && strnlen(f->key, k->size + 1) == k->size &&
            memcmp(f->key, k->body, k->size) == 0)
            return f;
    return NULL;
}

/* Walks the n entries of a map described by fields (header already read). */
static int walk_map(struct walk *w, uint64_t n, const struct wire_field *fields)
{
    if (n > WIRE_MAX_MAP)
        return fail(w, WE_FIELD, "a map has %llu entries, more than %u", (unsigned long long)n,
                    WIRE_MAX_MAP);
    for (uint64_t i = 0; i < n; i++) {
        struct hdr k, v;
        if (rd_hdr(w, &k) < 0)
            return -1;
        const struct wire_field *f = find_field(fields, &k);
        const char *name = k.cls == H_STR ? (const char *)k.body : "(non-string key)";
        size_t nlen = k.cls == H_STR ? (size_t)k.size : strlen(name);
        if (f ? count(w, 1) < 0 : skip_rest(w, &k, true, name, nlen) < 0)
            return -1;
        if (rd_hdr(w, &v) < 0)
            return -1;
        if (!f) {
            if (skip_rest(w, &v, true, name, nlen) < 0)
                return -1;
        } else if (v.cls != H_NIL &&
                   walk_value(w, &v, f->type, f->max, f->elem, f->elem_fields, f->key) < 0)
            return -1;
    }
    return 0;
}

static const struct wire_field envelope_fields[] = {
    {"v", WF_UINT, true},
    {"t", WF_UINT, true},
    {"id", WF_UINT, true},
    {NULL},
};

/* Reads the envelope keys of the root map (first occurrence wins, as in wire_get). */
static int scan_envelope(struct walk *w, uint64_t n, struct hdr env[3], bool seen[3])
{
    for (uint64_t i = 0; i < n; i++) {
        struct hdr k, v;
        if (rd_hdr(w, &k) < 0 || rd_hdr(w, &v) < 0)
            return -1;
        const struct wire_field *f = find_field(envelope_fields, &k);
        int slot = f ? (int)(f - envelope_fields) : -1;
        if (slot >= 0 && !seen[slot]) {
            seen[slot] = true;
            env[slot] = v;
        }
        if ((v.cls == H_ARRAY || v.cls == H_MAP) && skip_rest(w, &v, false, NULL, 0) < 0)
            return -1;
    }
    return 0;
}

int wire_bound(const uint8_t *buf, size_t len, bool want_request, struct wire_error *err)
{
    struct walk w = {.p = buf, .len = len, .err = err, .depth = 1};
    struct hdr root, env[3];
    bool seen[3] = {false, false, false};
    if (rd_hdr(&w, &root) < 0)
        return -1;
    if (root.cls != H_MAP)
        return fail(&w, WE_MALFORMED, "a message must be a msgpack map");
    size_t start = w.pos;
    if (scan_envelope(&w, root.u, env, seen) < 0)
        return -1;
    bool id_ok = seen[2] && env[2].pos_int;
    if (err && id_ok)
        err->id = env[2].u;
    if (!seen[0] || !env[0].pos_int || env[0].u != WIRE_VERSION)
        return fail(&w, WE_VERSION, "protocol version \"v\" must be %d", WIRE_VERSION);
    if (!id_ok)
        return fail(&w, WE_FIELD, "request id \"id\" (uint) is required");
    const struct wire_desc *d = NULL;
    if (!seen[1] || !env[1].pos_int || env[1].u > UINT32_MAX ||
        !(d = wire_desc_find((uint32_t)env[1].u)))
        return fail(&w, WE_TYPE, "message type \"t\" missing or unknown");
    if (want_request && !d->request)
        return fail(&w, WE_TYPE, "%s is not a request", d->name);
    /* the real walk: the envelope keys are unknown keys of the descriptor (6 values of
       the allowance) */
    w.pos = start;
    w.tname = d->name;
    w.depth = 1;
    return walk_map(&w, root.u, d->fields);
}

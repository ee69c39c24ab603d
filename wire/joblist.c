/*
 * joblist.c - JOB_LIST's filters (docs/wire.md 6.2), shared by the cluster manager, the
 * batch role and the grid spool (joblist.h).
 */
#include <string.h>

#include "wire/joblist.h"

/* Does str field key of the request allow the value v? Absent: yes. For "state", a
 * comma-separated list of states. */
static bool allows(const msgpack_object *m, const char *key, const char *v)
{
    size_t n, vl = strlen(v);
    const char *f = wire_get_str(m, key, &n);
    if (!f)
        return true;
    if (strcmp(key, "state") != 0)
        return n == vl && !memcmp(f, v, n);
    for (const char *p = f, *end = f + n; p <= end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t l = (size_t)((comma ? comma : end) - p);
        if (l == vl && !memcmp(p, v, l))
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

bool joblist_allows(const msgpack_object *req, const char *user, const char *state,
                    const char *name, int64_t queue)
{
    const msgpack_object *q = wire_get(req, "queue");
    return allows(req, "user", user ? user : "") && allows(req, "state", state ? state : "") &&
           allows(req, "name", name ? name : "") &&
           (!q || (queue >= 0 && q->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                   (int64_t)q->via.u64 == queue));
}

bool joblist_filtered(const msgpack_object *req)
{
    return wire_get(req, "user") || wire_get(req, "state") || wire_get(req, "name") ||
           wire_get(req, "queue");
}

/* The str field key of row as a NUL-terminated copy in buf (cut to its size). */
static const char *row_str(const msgpack_object *row, const char *key, char *buf, size_t size)
{
    size_t n;
    if (!wire_get_str(row, key, &n))
        return NULL;
    wire_get_strbuf(row, key, buf, size);
    return buf;
}

bool joblist_row_allows(const msgpack_object *req, const void *row, size_t len)
{
    if (!joblist_filtered(req))
        return true;
    msgpack_unpacked up;
    size_t off = 0;
    bool ok = true;
    msgpack_unpacked_init(&up);
    if (wire_precheck((const uint8_t *)row, len) == 0 &&
        msgpack_unpack_next(&up, row, len, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object *r = &up.data, *q = wire_get(r, "queue");
        char user[257], name[257], state[64], gstate[64];
        int64_t queue = q && q->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)q->via.u64 : -1;
        const char *u = row_str(r, "user", user, sizeof user);
        const char *n = row_str(r, "name", name, sizeof name);
        const char *g = row_str(r, "gstate", gstate, sizeof gstate);
        ok = joblist_allows(req, u, row_str(r, "state", state, sizeof state), n, queue) ||
             (g && joblist_allows(req, u, g, n, queue));
    }
    msgpack_unpacked_destroy(&up);
    return ok;
}

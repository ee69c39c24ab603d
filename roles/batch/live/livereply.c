/*
 * livereply.c - what the Maui commands and the site interface (livecmd.c,
 * liveresvcmd.c) and the reservations (liveresv.c) share: error replies, the paging
 * of list replies, comma lists of names, the administrator check, and a job's
 * credentials.
 */
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/curve.h"
#include "lib/text.h"
#include "roles/batch/live/live_int.h"

const char *const live_acl_keys[BATCH_CRED_KINDS] = {"users", "groups", "accounts", "classes",
                                                     "qoss"};

__attribute__((format(printf, 4, 5))) void live_fail(struct wire_buf *reply, uint64_t id, int code,
                                                     const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    text_fix(buf);
    wire_buf_reset(reply);
    wire_error_msg(reply, id, code, "%s", buf);
}

int live_words_split(const char *s, struct live_words *w)
{
    memset(w, 0, sizeof *w);
    if (!s || !*s)
        return 0;
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    if (!(w->buf = strdup(s)) || !(w->v = calloc(n, sizeof *w->v))) {
        free(w->buf);
        return -1;
    }
    for (char *save = NULL, *t = strtok_r(w->buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        w->v[w->n++] = t;
    return 0;
}

void live_words_free(struct live_words *w)
{
    free(w->buf);
    free(w->v);
}

bool live_in_list(const char *list, const char *name)
{
    if (!list || !name || !*name)
        return false;
    size_t l = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == l && !memcmp(p, name, l))
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

/*
 * The requester is an administrator: listed in batch.admins or, when that is empty, root
 * or the user the batch role runs as (Maui's default primary administrator).
 */
bool live_is_admin(struct live *L, const msgpack_object *m)
{
    const struct curve_ident *id = curve_current();
    if (id) /* CURVE on: the key's kind decides, not a name in the request */
        return id->kind == CURVE_ADMIN;
    char user[BATCH_NAME_MAX];
    wire_get_strbuf(m, "user", user, sizeof user);
    if (L->cfg.live.admins[0])
        return live_in_list(L->cfg.live.admins, user);
    if (!user[0])
        return false;
    struct passwd *pw = getpwuid(geteuid());
    return !strcmp(user, "root") || (pw && !strcmp(user, pw->pw_name));
}

/* Host name of an engine node ("" unknown). */
const char *live_node_host(struct live *L, int32_t n)
{
    int cl;
    const char *h = n >= 0 && n < L->nslots ? live_slot_host(L, n, &cl) : NULL;
    return h ? h : "";
}

/* Distinct hosts of a comma list of engine node names, packed as an array. */
void live_put_hosts_of_nodes(struct live *L, struct wire_buf *wb, const char *key,
                             const char *nodes)
{
    struct live_words w;
    const char **hosts = NULL;
    size_t nh = 0;
    if (live_words_split(nodes, &w) == 0 && w.n && (hosts = calloc(w.n, sizeof *hosts)))
        for (size_t i = 0; i < w.n; i++) {
            const char *h = live_node_host(L, batch_node_find(L->eng, w.v[i]));
            bool dup = !*h;
            for (size_t k = 0; k < nh && !dup; k++)
                dup = !strcmp(hosts[k], h);
            if (!dup)
                hosts[nh++] = h;
        }
    wire_put_key(wb, key);
    wire_pack_array(wb, (uint32_t)nh);
    for (size_t k = 0; k < nh; k++)
        wire_pack_str(wb, hosts[k]);
    free(hosts);
    live_words_free(&w);
}

void live_put_list(struct wire_buf *wb, const char *key, const char *list)
{
    struct live_words w;
    if (live_words_split(list, &w) < 0)
        w.n = 0;
    wire_put_key(wb, key);
    wire_pack_array(wb, (uint32_t)w.n);
    for (size_t i = 0; i < w.n; i++)
        wire_pack_str(wb, w.v[i]);
    live_words_free(&w);
}

/* A comma list from an array of str field; NULL when absent/empty; *bad on a name
 * with a comma or a control character. */
char *live_list_field(const msgpack_object *m, const char *key, bool *bad)
{
    const msgpack_object *a = wire_get(m, key);
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size)
        return NULL;
    size_t cap = 1;
    for (uint32_t i = 0; i < a->via.array.size; i++)
        cap += a->via.array.ptr[i].via.str.size + 1;
    char *s = malloc(cap), *p = s;
    if (!s) {
        *bad = true;
        return NULL;
    }
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        if (!o->via.str.size || o->via.str.size >= BATCH_NAME_MAX)
            *bad = true;
        for (uint32_t k = 0; k < o->via.str.size; k++)
            if ((unsigned char)o->via.str.ptr[k] < 0x20 || o->via.str.ptr[k] == ',')
                *bad = true;
        memcpy(p, o->via.str.ptr, o->via.str.size);
        p += o->via.str.size;
        *p++ = ',';
    }
    p[-1] = '\0';
    return s;
}

const char *live_job_cred(const struct ljob *j, int k)
{
    const char *s = k == BATCH_CRED_USER      ? j->user
                    : k == BATCH_CRED_GROUP   ? j->group
                    : k == BATCH_CRED_ACCOUNT ? j->account
                    : k == BATCH_CRED_CLASS   ? j->class_
                                              : j->qos;
    return s ? s : "";
}

/* The paging of list replies: see struct live_page in live_int.h. */
void live_page_init(struct live_page *pg, const struct wire_msg *m)
{
    pg->from = wire_get_u64(m->root, "from", 0);
    pg->count = wire_get_u64(m->root, "count", 100000);
    if (pg->count == 0)
        pg->count = 1;
    pg->n = 0;
    pg->more = false;
    wire_buf_init(&pg->rows);
}

bool live_page_add(struct live_page *pg)
{
    pg->more = pg->n >= pg->count || (pg->n > 0 && pg->rows.sb.size >= LIVE_LIST_MAX);
    if (!pg->more)
        pg->n++;
    return !pg->more;
}

void live_page_reply(struct live_page *pg, struct wire_buf *reply, const struct wire_msg *m,
                     uint32_t type, int64_t now, const char *key, uint64_t next)
{
    wire_begin(reply, type, m->id, 2 + pg->more);
    wire_put_i64(reply, "now", now);
    wire_put_key(reply, key);
    wire_pack_array(reply, pg->n);
    msgpack_sbuffer_write(&reply->sb, pg->rows.sb.data, pg->rows.sb.size);
    if (pg->more)
        wire_put_u64(reply, "next", next);
    wire_buf_free(&pg->rows);
}

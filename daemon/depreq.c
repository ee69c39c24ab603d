/*
 * depreq.c - a request's `dependency` read, checked and authorized (see depreq.h).
 */
#include "daemon/depreq.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/curve.h"
#include "wire/wire.h"

void depreq_free(struct depend *d)
{
    if (!d)
        return;
    depend_free(d);
    free(d);
}

int depreq_read(const msgpack_object *m, dep_lookup_fn lookup, dep_owner_fn owner, void *arg,
                const char *here, struct depend **out, char *why, size_t wl)
{
    size_t n;
    const char *s = wire_get_str(m, "dependency", &n);
    char term[48];
    *out = NULL;
    if (!s)
        return 0;
    struct depend *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    if (depend_parse(s, n, d, why, wl) < 0) {
        free(d);
        return -1;
    }
    int k = depend_unknown(d, lookup, arg);
    if (k >= 0) {
        depend_term_text(d, (uint32_t)k, term, sizeof term);
        snprintf(why, wl, "dependency term %s: no job %llu %s (gridnode jobs lists them)", term,
                 (unsigned long long)d->t[k].id, here);
    }
    for (uint32_t i = 0; k < 0 && i < d->n; i++) {
        const char *user = d->t[i].type == DEP_SINGLETON ? NULL : owner(arg, d->t[i].id);
        if (user && !curve_may_touch(user)) {
            depend_term_text(d, i, term, sizeof term);
            snprintf(why, wl,
                     "dependency term %s: job %llu belongs to another user (only "
                     "administrators may depend on other users' jobs)",
                     term, (unsigned long long)d->t[i].id);
            k = (int)i;
        }
    }
    if (k >= 0) {
        depreq_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

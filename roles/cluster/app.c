/* app.c - the command-template application (see app.h). */
#include "roles/cluster/app.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/cluster/cluster.h"
#include "store/store.h"
#include "wire/wire.h"

char *app_expand(const char *s, uint64_t job, uint32_t idx, uint32_t ntasks)
{
    size_t cap = strlen(s) + 64, len = 0;
    char *out = malloc(cap);
    while (out && *s) {
        char num[24];
        const char *rep = NULL;
        size_t skip = 0;
        if (!strncmp(s, "{i}", 3)) {
            snprintf(num, sizeof num, "%" PRIu32, idx);
            rep = num, skip = 3;
        } else if (!strncmp(s, "{n}", 3)) {
            snprintf(num, sizeof num, "%" PRIu32, ntasks);
            rep = num, skip = 3;
        } else if (!strncmp(s, "{job}", 5)) {
            snprintf(num, sizeof num, "%" PRIu64, job);
            rep = num, skip = 5;
        }
        size_t add = rep ? strlen(rep) : 1;
        if (len + add + 1 > cap) {
            char *n = realloc(out, cap = (cap + add) * 2);
            if (!n) {
                free(out);
                return NULL;
            }
            out = n;
        }
        if (rep) {
            memcpy(out + len, rep, add);
            s += skip;
        } else {
            out[len] = *s++;
        }
        len += add;
    }
    if (out)
        out[len] = '\0';
    return out;
}

static int tmpl_next(struct cluster *c, struct job *j, uint32_t *idx)
{
    (void)c;
    if (j->next_new >= j->ntasks)
        return -1;
    *idx = j->next_new;
    return 0;
}

static int tmpl_encode(struct cluster *c, struct job *j, uint32_t idx, struct wire_buf *wb,
                       size_t *input_bytes)
{
    void *in = NULL;
    size_t inlen = 0;
    if (j->has_stdin) {
        uint8_t key[12];
        store_key_u64_u32(key, j->id, idx);
        int rc = store_get(c->store, c->t_stdin, key, sizeof key, &in, &inlen);
        if (rc < 0)
            return -1;
        if (rc == 1)
            inlen = 0;
    }
    wire_put_key(wb, "argv");
    wire_pack_array(wb, j->argc);
    for (uint32_t i = 0; i < j->argc; i++) {
        char *a = app_expand(j->argv[i], j->id, idx, j->ntasks);
        wire_pack_str(wb, a ? a : j->argv[i]);
        free(a);
    }
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bin(wb, "stdin", in ? in : "", inlen);
    free(in);
    *input_bytes = inlen;
    return 0;
}

const struct app_ops app_template = {"template", tmpl_next, tmpl_encode};

/*
 * files_cut.c - cut-through (issue 26 evidence 8, docs/data.md "Speed", docs/wire.md
 * 6.19): a job may name an input whose upload is still going, and its nodes fetch the
 * chunks the cluster already holds meanwhile. A FILE_GET of a chunk not held yet is held
 * (daemon_hold) until the FILE_PUT that brings it, the end of the upload (a file whose
 * bytes did not hash to its name is dropped: an ERROR), or FILES_CUT_HOLD_MS: then it
 * is answered "not yet" (FILE_DATA without data, with "have") and the reader asks again.
 * An upload that brought no chunk for files.upload_wait_s is answered with an ERROR
 * naming the file, so a peer that never finishes holds no node for ever. Also the
 * FILE_DATA reply itself (files_cut_data), for every chunk files.c serves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/cluster/cluster.h"
#include "roles/cluster/files.h"

/* Hold kinds FILES_CUT_KIND + slot (the chunk's index modulo FILES_CUT_SLOTS): a peer
 * holds at most FILES_CUT_SLOTS reads (daemon_hold keeps one per peer and kind). */
#define FILES_CUT_SLOTS 16u
/* Well under a node's request timeout (2 x its RPC timeout + 2 s, live_stage.c). */
#define FILES_CUT_HOLD_MS 1500

struct cut {
    uint64_t handle, req_id, off, len;
    uint8_t d[SHA256_LEN];
};

static struct cut *cuts;
static uint32_t ncut, capcut;

bool files_cut_kind(uint32_t kind)
{
    return kind >= FILES_CUT_KIND && kind < FILES_CUT_KIND + FILES_CUT_SLOTS;
}

/*
 * Adds key and a bin of n bytes to wb and returns where its n bytes go (the caller fills
 * them), or NULL (out of memory; wb is then not a whole message). A chunk is read
 * straight into the reply: no buffer of its own, one copy fewer per MiB sent.
 */
static void *reply_bin(struct wire_buf *wb, const char *key, size_t n)
{
    wire_put_key(wb, key);
    msgpack_pack_bin(&wb->pk, n);
    msgpack_sbuffer *sb = &wb->sb;
    if (sb->alloc - sb->size < n) {
        size_t want = sb->size + n;
        char *p = realloc(sb->data, want);
        if (!p)
            return NULL;
        sb->data = p;
        sb->alloc = want;
    }
    void *at = sb->data + sb->size;
    sb->size += n;
    return at;
}

void files_cut_data(struct cluster *c, struct wire_buf *wb, uint64_t req_id, const struct fsfile *f,
                    uint64_t off, uint64_t len)
{
    char hex[SHA256_HEX];
    sha256_hex(f->d, hex);
    wire_buf_reset(wb);
    wire_begin(wb, WT_FILE_DATA, req_id, 4 + !f->done);
    wire_put_strn(wb, "hash", hex, 64);
    wire_put_u64(wb, "size", f->size);
    wire_put_u64(wb, "off", off);
    if (!f->done) /* still being uploaded: what the cluster holds so far */
        wire_put_u64(wb, "have", f->have);
    void *at = reply_bin(wb, "data", len);
    if (!at || filestore_read(c->files, f, off, at, len) != (ssize_t)len) {
        log_warn("files: cannot read %.12s", hex);
        wire_buf_reset(wb);
        wire_error_msg(wb, req_id, WE_STORAGE, "the cluster could not read file %.12s; retry later",
                       hex);
    }
}

/*
 * The answer to a read of [off, off+len) of file d that can be given now, written into
 * wb: the data, an ERROR (the file is gone; its upload stalled), or, when final, "not
 * yet". Returns false (wb untouched) when it should wait and final is false.
 */
static bool answer(struct cluster *c, struct wire_buf *wb, uint64_t req_id,
                   const uint8_t d[SHA256_LEN], uint64_t off, uint64_t len, bool final)
{
    char hex[SHA256_HEX];
    struct fsfile *f = filestore_find(c->files, d);
    int64_t quiet = f ? wall_now_ms() - f->t_ms : 0;
    sha256_hex(d, hex);
    if (f && (f->done || off + len <= f->have)) {
        files_cut_data(c, wb, req_id, f, off, len);
        return true;
    }
    wire_buf_reset(wb);
    if (!f) {
        wire_error_msg(wb, req_id, WE_NOT_FOUND,
                       "file %.12s is no longer at the cluster: its upload failed (its bytes "
                       "did not hash to its name) or it was purged; submit the job again",
                       hex);
        return true;
    }
    if (quiet > c->cfg.files_upload_wait_s * 1000) {
        wire_error_msg(wb, req_id, WE_STATE,
                       "the upload of file %.12s stalled: no chunk for %lld s "
                       "(files.upload_wait_s = %ld; %llu of %llu bytes held); the uploader "
                       "stopped: upload it again (gridnode submit --input resumes it)",
                       hex, (long long)(quiet / 1000), c->cfg.files_upload_wait_s,
                       (unsigned long long)f->have, (unsigned long long)f->size);
        return true;
    }
    if (!final)
        return false;
    wire_begin(wb, WT_FILE_DATA, req_id, 5); /* not yet: ask again */
    wire_put_strn(wb, "hash", hex, 64);
    wire_put_u64(wb, "size", f->size);
    wire_put_u64(wb, "off", off);
    wire_put_u64(wb, "have", f->have);
    wire_put_bin(wb, "data", "", 0);
    return true;
}

void files_cut_get(struct cluster *c, struct request *r, struct fsfile *f, uint64_t off,
                   uint64_t len)
{
    if (answer(c, r->reply, r->msg->id, f->d, off, len, false))
        return;
    uint32_t kind = FILES_CUT_KIND + (uint32_t)((off / WIRE_FILE_CHUNK) % FILES_CUT_SLOTS);
    if (ncut == capcut && capcut < DAEMON_HELD_MAX) {
        uint32_t nc = capcut ? capcut * 2 : 64;
        struct cut *v = realloc(cuts, nc * sizeof *v);
        if (v)
            cuts = v, capcut = nc;
    }
    uint64_t h = ncut < capcut ? daemon_hold(c->daemon, kind, FILES_CUT_HOLD_MS) : 0;
    if (!h) { /* cannot be held: "not yet" now (the reader waits before asking again) */
        answer(c, r->reply, r->msg->id, f->d, off, len, true);
        return;
    }
    struct cut *k = &cuts[ncut++];
    *k = (struct cut){h, r->msg->id, off, len, {0}};
    memcpy(k->d, f->d, SHA256_LEN);
}

void files_cut_progress(struct cluster *c, const uint8_t d[SHA256_LEN])
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    for (;;) { /* in the order of the chunks: the reader takes them in order */
        uint32_t best = ncut;
        for (uint32_t i = 0; i < ncut; i++)
            if (!memcmp(cuts[i].d, d, SHA256_LEN) && (best == ncut || cuts[i].off < cuts[best].off))
                best = i;
        if (best == ncut)
            break;
        struct cut k = cuts[best];
        if (!answer(c, &wb, k.req_id, k.d, k.off, k.len, false))
            break;
        cuts[best] = cuts[--ncut];
        daemon_reply_held(c->daemon, k.handle, &wb); /* -1: expired meanwhile */
    }
    wire_buf_free(&wb);
}

void files_cut_expire(struct cluster *c, uint64_t handle, uint64_t req_id, struct wire_buf *reply)
{
    for (uint32_t i = 0; i < ncut; i++)
        if (cuts[i].handle == handle) {
            struct cut k = cuts[i];
            cuts[i] = cuts[--ncut];
            answer(c, reply, req_id, k.d, k.off, k.len, true);
            return;
        }
    wire_error_msg(reply, req_id, WE_STATE, "the held request was lost; send it again");
}

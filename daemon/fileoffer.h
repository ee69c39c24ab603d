/*
 * fileoffer.h - a role's files offered to the role below it and copied back from it
 * (issue 26, docs/data.md "Through the batch role", "Through the grid spool"), shared by
 * the batch role (to its clusters) and the grid spool (to its sites).
 *
 *   fileoffer.c   inputs offered to one peer: FILE_HAVE, then chunked FILE_PUT from the
 *                 role's own store, FILEOFFER_INFLIGHT chunks in flight per file (a reply
 *                 out of step goes on from what the peer holds), a bounded number of
 *                 files at once; and the FILE_DATA chunks of an output copied back,
 *                 appended to the store
 *   fileget.c     FILE_GET answered from the role's store (the job's owner only)
 *   filesweep.c   the sweep of the files no job names (docs/data.md "Retention")
 *
 * Nothing here is stored: after kill -9 of either side the role offers the files again
 * and FILE_HAVE says how much the peer kept (its acknowledged chunks are durable), so an
 * upload resumes. The module sends nothing itself: the role builds and queues each
 * request through its callbacks (its own request bookkeeping, timeouts and socket).
 */
#ifndef GRIDNODE_DAEMON_FILEOFFER_H
#define GRIDNODE_DAEMON_FILEOFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/filestore.h"
#include "wire/wire.h"

struct fileoffer;

#define FILEOFFER_INFLIGHT 4 /* FILE_PUT chunks of one file in flight */
/* The default of fileoffer_cfg.recheck_ms. */
#define FILEOFFER_RECHECK_MS 60000

struct fileoffer_cfg {
    struct filestore *files; /* the role's store: what is offered is read here */
    const char *self;        /* "the batch role": in error texts */
    const char *peer_kind;   /* "cluster", "site": in error texts and log lines */
    const char *peer_name;   /* the peer's name (copied) */
    uint32_t active;         /* files offered at once (at least 1) */
    /*
     * Begins a request of wire type (WT_FILE_HAVE or WT_FILE_PUT) with nfields fields in
     * wb (initialised, empty); key comes back to fileoffer_reply with its answer. role
     * and peer are the caller's, as given to the call that sends.
     */
    void (*begin)(void *role, void *peer, uint64_t key, uint32_t type, uint32_t nfields,
                  struct wire_buf *wb);
    /* Queues the request built in wb to the peer (wb is freed by the module). */
    void (*send)(void *role, void *peer, struct wire_buf *wb);
    /* A file the peer said it held whole longer ago than this (ms; 0: the default,
     * FILEOFFER_RECHECK_MS) is asked about again before a start names it: the peer's
     * store sweeps files no job names (files.keep_s), and a start naming a swept file
     * would be refused. It should exceed the time to ask about a job's inputs (a
     * FILE_HAVE per file, cfg.active at once), or a start could wait for ever. */
    int64_t recheck_ms;
};

/* A new, empty offer to one peer (cfg copied): the handle, or NULL (out of memory). */
struct fileoffer *fileoffer_new(const struct fileoffer_cfg *cfg);
/* Forgets every file (the peer went down: offered again once it is up). NULL-safe; sets
 * *p NULL. */
void fileoffer_destroy(struct fileoffer **p);

/*
 * The inputs task idx gets of a kept job map (data, len: filestore_each_input's shape;
 * idx UINT32_MAX: all) offered to the peer, charged there to user (NULL or "": nobody).
 * A file is offered once however many jobs name it. retry: a file the peer refused
 * before is offered again (a new submission). Starts waiting files. Returns 1 when every
 * input is whole at the peer, 0 while one is under way, -1 when one was refused or
 * cannot be offered (the reason in why).
 */
int fileoffer_inputs(struct fileoffer *o, void *role, void *peer, const void *data, size_t len,
                     uint32_t idx, const char *user, bool retry, char *why, size_t wl);
/* The bytes of file d the peer acknowledged holding so far (0: none, or never offered
 * there; o may be NULL). The spool's staging estimate reads it (issue 26). */
uint64_t fileoffer_held(const struct fileoffer *o, const uint8_t d[SHA256_LEN]);
/*
 * The peer's answer (FILE_STATE or ERROR) to the request begun with key: the next
 * chunks sent, or the file whole or refused. Returns true when a file's offer ended
 * (whole or refused): the caller then looks again at what waited for it (its jobs
 * started or failed); false otherwise (an answer to nothing offered is ignored).
 */
bool fileoffer_reply(struct fileoffer *o, void *role, void *peer, uint64_t key,
                     const struct wire_msg *m);

/*
 * One FILE_DATA chunk (m) of an output copied back from the peer, appended to fs when it
 * is the next one the store lacks (a repeated or out-of-step chunk is ignored: the
 * caller asks for what is missing). max: the largest file taken (UINT64_MAX: no limit). from: the
 * peer in texts ("the cluster", "its site"). A file new here is charged to user (the
 * job's owner: its outputs count in files.user_mb; NULL nobody). Returns 0, or -1 with
 * the reason in why (a
 * bad hash, a chunk beyond the end, a size other than the one stored, a write that
 * failed).
 */
int fileoffer_take_chunk(struct filestore *fs, const struct wire_msg *m, uint64_t max,
                         const char *from, const char *peer, const char *user, char *why,
                         size_t wl);
/* The fields of a FILE_GET (5) asking for the next chunk of output hash h (64 hex
 * digits) of task idx of the peer's job: from what the store holds of it (have, NULL:
 * nothing). */
void fileoffer_put_get(struct wire_buf *wb, const char *h, uint64_t job, uint64_t idx,
                       const struct fsfile *have);

/* ---- fileget.c ---- */

/* What a level tells fileget_answer (role: the caller's, given back). */
struct fileget_level {
    struct filestore *files;
    const char *at; /* "" or " at the grid spool": after the job in error texts */
    /* Job's owner (NULL: none; *found false when there is no such job). */
    const char *(*owner)(void *role, uint64_t job, bool *found);
    /* Whether hex (64 hex digits) names an input of job (out false; idx unused) or an
     * output of its task idx copied back here (out true). */
    bool (*named)(void *role, uint64_t job, bool out, uint64_t idx, const char *hex);
};

/* FILE_GET m answered into reply: FILE_DATA (at most WIRE_FILE_CHUNK_MAX bytes), or an
 * ERROR (a bad hash, no such job, not the owner's nor an administrator's key, a file the
 * job does not name or that is not whole here, a read that failed). */
void fileget_answer(const struct fileget_level *lv, void *role, const struct wire_msg *m,
                    struct wire_buf *reply);
/* Whether a stored row (msgpack map with a "files" list; rec NULL: none) names hex. */
bool fileget_row_names(const void *rec, size_t len, const char *hex);
/* For filestore_each_input (hex: 64 hex digits): 1 when the entry's "hash" is hex. */
int fileget_is_hash(void *hex, const msgpack_object *in);

/* ---- filesweep.c ---- */

/* Whether an hourly sweep is due (*last_ms: the last one, updated when due). */
bool filesweep_due(int64_t *last_ms, int64_t now_ms);
/* Begins a sweep: no file is named yet. */
void filesweep_begin(struct filestore *fs);
/* For filestore_each_input (arg: the struct filestore): the entry's "hash" is kept. */
int filesweep_mark(void *fs, const msgpack_object *e);
/* The files a row (a map with a "files" list, the task rows' shape) names are kept. */
void filesweep_mark_row(struct filestore *fs, const msgpack_object *row);
/* For store_iter (arg: the struct filestore): a stored row's files are kept. */
int filesweep_mark_record(void *fs, const void *key, size_t klen, const void *val, size_t vlen);
/* Ends the sweep: every file not kept and not changed since older_ms deleted (logged).
 * Returns 0, or -1 (a record could not be buffered: the turn fails). */
int filesweep_end(struct filestore *fs, int64_t older_ms);

#endif

/*
 * acct.h - job accounting (issue 27, docs/accounting.md): the durable record of each
 * finished job that every role running jobs keeps in its store's "acct" table, the
 * ACCT request that reads them (docs/wire.md 6.18), and their retention.
 *
 * A role fills one struct acct_rec when a job ends and calls acct_save in the turn
 * that stores the job's end, so the record is committed with it (and rewritten, the
 * same, when the ended job is saved again). The record is kept after `gridnode purge`
 * removes the job; acct_sweep deletes records older than acct.keep_days, and the
 * oldest ones over acct.max_records, in bounded batches (one call per loop tick).
 * Records are msgpack maps under the job id (STORE_KEY_U64): an ACCT row is the record
 * as stored, so every level answers with the same fields.
 */
#ifndef GRIDNODE_ACCT_H
#define GRIDNODE_ACCT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/config.h"
#include "store/store.h"
#include "wire/wire.h"

#define ACCT_TABLE "acct"
#define ACCT_HOSTS_MAX 64    /* node names kept per record; "nhosts" has the full count */
#define ACCT_SWEEP_SCAN 4096 /* records looked at per acct_sweep call */
#define ACCT_PAGE_COUNT 1000u
#define ACCT_REPLY_MAX (1u << 20) /* an ACCT reply stops adding rows past this size */

/* [acct] of a role's configuration. */
struct acct_conf {
    long keep_days;   /* delete records of jobs finished longer ago (0: keep) */
    long max_records; /* keep at most this many, the oldest go first (0: no cap) */
};

/* The [acct] rows of a role's config_key table; type is its config struct, m the
 * struct acct_conf member. */
#define ACCT_CONFIG_KEYS(type, m)                                                                  \
    {"acct",                                                                                       \
     "keep_days",                                                                                  \
     CONFIG_INT,                                                                                   \
     "365",                                                                                        \
     offsetof(type, m.keep_days),                                                                  \
     0,                                                                                            \
     36600,                                                                                        \
     NULL,                                                                                         \
     "keep the accounting record of a finished job this many days (0: for ever)"},                 \
    {                                                                                              \
        "acct", "max_records", CONFIG_INT, "1000000", offsetof(type, m.max_records), 0, 1e9, NULL, \
            "keep at most this many accounting records, the oldest go first (0: no cap)"           \
    }

/* One finished job. Strings may be NULL (left out); times are ms since the epoch, 0:
 * unknown; cpu_s < 0: unknown. */
struct acct_rec {
    uint64_t job;
    const char *user, *group, *name;
    const char *kind;  /* "bag", "array", "parallel" */
    const char *state; /* the level's final state: done, failed, cancelled, killed, ... */
    const char *reason;
    const char *site; /* where it ran, for the batch role and the spool; NULL: here */
    int64_t exit;
    uint32_t signal;
    int64_t submitted_ms, started_ms, finished_ms;
    double run_s; /* wall seconds it ran */
    double cpu_s; /* CPU seconds of all its processes */
    uint32_t procs, nhosts;
    const char *const *hosts; /* nhosts names; at most ACCT_HOSTS_MAX are stored */
    uint64_t cores;           /* processors held, for core-seconds (0: procs) */
};

/* Buffers the record of r under r->job in table (store_put): 0, or -1 with errno. */
int acct_save(struct store *s, int table, const struct acct_rec *r, struct wire_buf *wb);

/* Where acct_sweep goes on next time. */
struct acct_sweep {
    uint64_t cursor;
};

/*
 * Deletes (buffered: committed with the turn) at most ACCT_SWEEP_SCAN records' worth:
 * those of table finished before now_ms - keep_days, looked at from st->cursor on
 * (wrapping at the end), and the oldest ids while the table holds more than
 * max_records. Returns the number of deletions buffered, or -1 (store failed).
 */
long acct_sweep(struct store *s, int table, const struct acct_conf *cf, int64_t now_ms,
                struct acct_sweep *st);

/*
 * Answers ACCT request m from table into reply: the records passing its filters (user,
 * group, state, name, job, start / end window) in job id order from "from", at most
 * "count" (default ACCT_PAGE_COUNT) and about ACCT_REPLY_MAX bytes; "next" when cut.
 */
void acct_reply(struct store *s, int table, const struct wire_msg *m, struct wire_buf *reply);

#endif

/*
 * wire.h - gridnode's messages: one enum of types, one descriptor table, the codec.
 *
 * Every message is one ZeroMQ frame holding one msgpack map. Three keys are in every
 * message: "v" (protocol version, WIRE_VERSION), "t" (type, enum wire_type) and "id"
 * (request id chosen by the requester, echoed in the reply). The other keys are the
 * typed fields listed in the type's descriptor (wire/msgs.c). docs/wire.md is the
 * normative description; change it together with this file and bump WIRE_VERSION on
 * any incompatible change.
 */
#ifndef GRIDNODE_WIRE_H
#define GRIDNODE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#define WIRE_VERSION 1
/* Largest frame a role accepts (ZMQ_MAXMSGSIZE); larger ones drop the connection. */
#define WIRE_MAX_FRAME (64u << 20)

/* Message types, grouped by who sends them. Values are never reused. */
enum wire_type {
    /* replies shared by every request */
    WT_ERROR = 1, /* any request failed: code + text */
    WT_OK = 2,    /* request done, nothing to return */
    /* node (client role) -> cluster: the X-Com pull protocol */
    WT_HELLO = 10,      /* identify; reply WELCOME */
    WT_WELCOME = 11,    /* session id issued or confirmed */
    WT_TASK_GET = 12,   /* give task(s); reply TASKS */
    WT_TASKS = 13,      /* zero or more tasks ("no tasks" when empty) */
    WT_RESULT = 14,     /* take result(s) and give next (want > 0); reply TASKS */
    WT_LEAVE = 15,      /* take result(s), if any, I am leaving; reply OK */
    WT_STATUS = 16,     /* heartbeat while computing; reply STATUS_ACK */
    WT_STATUS_ACK = 17, /* heartbeat answer: tasks to abandon */
    WT_PSYNC = 18,      /* parallel processes: measurements in; reply PSYNC_ACK */
    WT_PSYNC_ACK = 19,  /* what each of the node's parallel processes should do */
    /* user tools -> cluster */
    WT_SUBMIT = 30,    /* new job; reply SUBMITTED */
    WT_SUBMITTED = 31, /* the job id */
    WT_JOB_LIST = 32,  /* reply JOBS */
    WT_JOBS = 33,
    WT_JOB_GET = 34, /* one job with its tasks; reply JOB */
    WT_JOB = 35,
    WT_CANCEL = 36,    /* reply OK */
    WT_NODE_LIST = 37, /* reply NODES */
    WT_NODES = 38,
    /* user tools -> cluster: SCore-D resource management */
    WT_PSUBMIT = 39, /* parallel job; reply SUBMITTED */
    WT_CONSOLE = 40, /* console commands; reply CONSOLE_OUT */
    WT_CONSOLE_OUT = 41,
    WT_SD_INFO = 42, /* clusters and queues; reply SD_STATE */
    WT_SD_STATE = 43,
    /* user tools -> cluster: purging finished jobs */
    WT_PURGE = 54,    /* reply PURGED */
    WT_PURGED = 55,   /* the jobs purged */
    WT_JOB_CTL = 56,  /* hold / release a job (issue 15); reply OK */
    WT_NODE_CTL = 57, /* drain / resume a node by name (issue 15); reply OK */
    /* batch role (or any driver) -> cluster: the change feed (issue 9) */
    WT_EVENTS = 60, /* events from a sequence number on; reply EVENT_LIST */
    WT_EVENT_LIST = 61,

    /* batch role: Maui's commands and the site interface (docs/wire.md 6.12) */
    WT_SHOWQ = 80, /* the queue: active / eligible / blocked; reply QUEUE */
    WT_QUEUE = 81,
    WT_CHECKJOB = 82, /* one job as the scheduler sees it; reply JOBCHECK */
    WT_JOBCHECK = 83,
    WT_ESTIMATE = 84, /* start estimate of a job or a request (showstart); reply STARTS */
    WT_STARTS = 85,
    WT_DIAGNOSE = 86, /* priority factors / fairshare; reply DIAG */
    WT_DIAG = 87,
    WT_RESV_SET = 88, /* admin reservation (setres); reply RESV */
    WT_RESV = 89,
    WT_RESV_LIST = 90, /* reservations (showres); reply RESVS */
    WT_RESVS = 91,
    WT_RESV_RELEASE = 92, /* releaseres; reply OK */
    WT_RESERVE = 93,      /* site interface: reservation for one job; reply RESV */
    WT_SITE_INFO = 94,    /* site summary; reply SITE */
    WT_SITE = 95,
    /* issue #11: the master list (docs/wire.md 6.14) and the multi-project client (6.15) */
    WT_MASTER_GET = 100,    /* a project's scheduler endpoints; reply MASTER */
    WT_MASTER = 101,        /* {project, endpoints} */
    WT_CLIENT_STATUS = 102, /* to a client's control socket; reply CLIENT_STATE */
    WT_CLIENT_STATE = 103,  /* projects, tasks, processor types */
    WT_ATTACH = 104,        /* attach a project (or change its share/endpoints); reply OK */
    WT_DETACH = 105,        /* detach a project; reply OK */
    /* issue 27: accounting, at every role that runs jobs (docs/wire.md 6.18) */
    WT_ACCT = 106, /* finished jobs' records (sacct); reply ACCTS */
    WT_ACCTS = 107,
    /* issue 26: files through the grid, content-addressed (docs/wire.md 6.19, data.md) */
    WT_FILE_HAVE = 120,  /* how much of a file the receiver holds; reply FILE_STATE */
    WT_FILE_STATE = 121, /* {hash, size, have, done, chunk} */
    WT_FILE_PUT = 122,   /* one chunk of a file, in order; reply FILE_STATE */
    WT_FILE_GET = 123,   /* one chunk of a job's file; reply FILE_DATA */
    WT_FILE_DATA = 124,  /* {hash, size, off, data} */
    WT_CKPT = 125,       /* a task's latest checkpoint (its files, uploaded); reply OK */
    /* issue 26: a batch role moves its pinned task to another host (docs/wire.md 6.19) */
    WT_TASK_PIN = 148, /* re-pin a one-task job to a host, re-issue its task; reply OK */
    /* Maui's node and site commands at the batch role (issue 27, docs/wire.md 6.12) */
    WT_SHOWBF = 130,    /* backfill windows; reply BACKFILL */
    WT_BACKFILL = 131,  /* {windows, class, now} */
    WT_CHECKNODE = 132, /* one host: state, jobs, features, reservations; reply NODECHECK */
    WT_NODECHECK = 133, /* {node} */
    WT_SHOWSTATS = 134, /* site statistics from the accounting records; reply SITESTATS */
    WT_SITESTATS = 135, /* {stats} */
    /* issue 26 evidence 8: an idle node told of new work at once (docs/wire.md 5.7) */
    WT_WORK_WAIT = 152, /* held until a job is submitted or wait_ms passes; reply WORK_WAKE */
    WT_WORK_WAKE = 153, /* {work}: true when a job was submitted (ask for tasks now) */
    WT_JOB_WAIT = 160,  /* held until one of the jobs ended or wait_ms passes; reply JOB_ENDED */
    WT_JOB_ENDED = 161, /* {jobs}: the ended ones' rows (JOB_GET's "job"), [] at wait_ms */
};

/* WORK_WAIT: how long a cluster holds one at most (its "wait_ms"; the default 20 s). */
#define WIRE_WORK_WAIT_MAX_MS 60000u
#define WIRE_WORK_WAIT_MS 20000u
/* JOB_WAIT (issue 28): jobs one request names at most, and its longest hold. */
#define WIRE_JOB_WAIT_JOBS 64u
#define WIRE_JOB_WAIT_MAX_MS 60000u

/* Files (issue 26): a chunk's usual and largest size (FILE_PUT / FILE_GET "data"), the
 * largest file, entries of a SUBMIT's "inputs" and "outputs". */
#define WIRE_FILE_CHUNK (1u << 20)
#define WIRE_FILE_CHUNK_MAX (8u << 20)
#define WIRE_FILE_SIZE_MAX (1ull << 44)
#define WIRE_FILE_INPUTS_MAX 100000u
#define WIRE_FILE_OUTPUTS_MAX 64u

/* Error codes carried by WT_ERROR ("code"). Values are never reused. */
enum wire_err {
    WE_MALFORMED = 1, /* not one well-formed msgpack map, or trailing bytes */
    WE_VERSION = 2,   /* "v" missing or not WIRE_VERSION */
    WE_TYPE = 3,      /* "t" missing, unknown, or not a request */
    WE_FIELD = 4,     /* a field missing, of the wrong type or too large */
    WE_NOT_FOUND = 5, /* unknown job or other object */
    WE_SESSION = 6,   /* unknown session id: send HELLO again */
    WE_INVALID = 7,   /* well-formed but not acceptable (reason in text) */
    WE_STORAGE = 8,   /* the state could not be made durable; nothing changed; retry */
    WE_STATE = 9,     /* not possible in the object's current state */
    WE_REFUSED = 10,  /* admission refused: the text names the missing resource */
    WE_DENIED = 17,   /* the requester's identity may not do this (docs/security.md) */
    WE_AUTH = 22,     /* the requester's key is not (or no longer) authorized */
};

/*
 * Ranges of the time and size fields (docs/wire.md 2, "Ranges"): every field that
 * arrives from outside and is later added to or multiplied is capped where the message
 * is validated, so that the arithmetic done on it stays far inside int64.
 */
/* times in ms since the epoch: |t| <= 9999-12-31T23:59:59.999Z */
#define WIRE_TIME_MS_MAX 253402300799999ull
/* the same in unix seconds */
#define WIRE_TIME_S_MAX 253402300799ull
/* durations in seconds (reservations, limits): 3,660 days */
#define WIRE_DURATION_S_MAX (3660ull * 86400)
/* a node's waits and heartbeats in seconds: 7 days */
#define WIRE_WAIT_S_MAX (7ull * 86400)
/* memory and disk in MB (2^40 MB = 1 EiB), and in kB */
#define WIRE_SIZE_MB_MAX (1ull << 40)
#define WIRE_SIZE_KB_MAX (1ull << 50)

/* Field types of a descriptor. */
enum wire_ftype {
    WF_UINT,  /* non-negative integer */
    WF_INT,   /* any integer in int64 range; max set: -max <= value <= max */
    WF_FLOAT, /* float32/float64, or an integer */
    WF_BOOL,
    WF_STR,   /* UTF-8 text (not validated); max = bytes */
    WF_BIN,   /* bytes; max = bytes */
    WF_ARRAY, /* max = elements; elem / elem_fields describe the elements */
    WF_MAP,   /* max = entries; elem_fields describe it when set */
};

struct wire_field {
    const char *key;
    enum wire_ftype type;
    bool required;
    uint64_t max;                         /* 0: the type's default cap (bound.h) */
    enum wire_ftype elem;                 /* WF_ARRAY element type */
    const struct wire_field *elem_fields; /* fields of map elements or of a WF_MAP */
};

struct wire_desc {
    uint32_t type;
    const char *name;                /* as written in docs/wire.md */
    const char *sender;              /* "node", "user", "cluster" (documentation) */
    bool request;                    /* a role accepts it as a request */
    const struct wire_field *fields; /* terminated by {NULL} */
};

/* The descriptor for a type, or NULL if unknown. */
const struct wire_desc *wire_desc_find(uint32_t type);
/* All descriptors, terminated by an entry with name NULL. */
extern const struct wire_desc wire_descs[];
/* The fields of one result map (RESULT, LEAVE); the cluster stores only these. */
extern const struct wire_field wire_result_fields[];
const char *wire_err_name(int code);
/* A field type's name as error texts write it ("uint", "str", ...). */
const char *wire_ftype_name(enum wire_ftype t);

/* ---- decoding ---- */

/*
 * A decoded message. root points into `up` (and through it into the input buffer):
 * the input bytes must stay alive and unchanged until wire_msg_free().
 */
struct wire_msg {
    msgpack_unpacked up;
    const msgpack_object *root; /* the whole map */
    const struct wire_desc *desc;
    uint32_t type;
    uint64_t id;
    bool inited;
};

/* Why a decode failed: code (enum wire_err), text, and the request id if it was read. */
struct wire_error {
    int code;
    uint64_t id;
    char text[200];
};

/*
 * Checks that buf[0..len) is exactly one msgpack object whose declared counts and
 * lengths fit in the bytes present (msgpack-c allocates for declared counts before
 * reading them). Returns 0 if acceptable, -1 if not. Never reads past len.
 */
int wire_precheck(const uint8_t *buf, size_t len);

/*
 * Decodes and validates one frame: precheck, unpack, envelope ("v", "t", "id"), then
 * every field against the type's descriptor (nested arrays and maps included). Unknown
 * keys are ignored. On success returns 0 and fills m (free with wire_msg_free). On
 * failure returns -1, fills err (err->id is the request id when it could be read, else 0)
 * and leaves m freed. want_request: accept only types with desc->request set.
 */
int wire_decode(const void *buf, size_t len, bool want_request, struct wire_msg *m,
                struct wire_error *err);
void wire_msg_free(struct wire_msg *m);

/* Checks one map against a field list (used by wire_decode, and for stored records). */
int wire_check_map(const msgpack_object *map, const struct wire_field *fields,
                   struct wire_error *err);

/* ---- reading fields (after validation, types are known to match) ---- */

/* The value of key in map, or NULL when absent (or map is not a map). */
const msgpack_object *wire_get(const msgpack_object *map, const char *key);
uint64_t wire_get_u64(const msgpack_object *map, const char *key, uint64_t dflt);
int64_t wire_get_i64(const msgpack_object *map, const char *key, int64_t dflt);
/*
 * For the free-form maps of peers' replies (JOB, JOBS, SITE rows: no descriptor covers
 * their keys): a time in ms since the epoch, dflt when absent or beyond
 * +-WIRE_TIME_MS_MAX; a count or size, at most cap (dflt when absent or negative).
 */
int64_t wire_get_time(const msgpack_object *map, const char *key, int64_t dflt);
uint64_t wire_get_capped(const msgpack_object *map, const char *key, uint64_t dflt, uint64_t cap);
double wire_get_f64(const msgpack_object *map, const char *key, double dflt);
bool wire_get_bool(const msgpack_object *map, const char *key, bool dflt);
/* Text or bytes: pointer into the message (not NUL-terminated) and its size; NULL if absent. */
const char *wire_get_str(const msgpack_object *map, const char *key, size_t *len);
const void *wire_get_bin(const msgpack_object *map, const char *key, size_t *len);
/* Copies text into a NUL-terminated buffer of size cap (truncating); "" if absent. */
void wire_get_strbuf(const msgpack_object *map, const char *key, char *buf, size_t cap);
/* malloc'd NUL-terminated copy of a text field (NULL if absent or out of memory). */
char *wire_get_strdup(const msgpack_object *map, const char *key);
/* map's "constraint" (submit --constraint, lib/constraint.h) in canonical form, malloc'd
 * into *out (NULL when absent): 0, or -1 with why (bad syntax, out of memory). Every
 * level reads a request's or a record's constraint through it. */
int wire_get_constraint(const msgpack_object *map, char **out, char *why, size_t wl);

/* ---- encoding ---- */

struct wire_buf {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

void wire_buf_init(struct wire_buf *wb);
void wire_buf_reset(struct wire_buf *wb);
void wire_buf_free(struct wire_buf *wb);
/* Whether p..p+n holds exactly one msgpack value: a message or record as written. A
 * hand-counted map or array size that is wrong leaves bytes over or runs short, which a
 * peer's msgpack_unpack_next would not notice (it ignores what follows). */
bool wire_one_value(const void *p, size_t n);
/* The ASan build defines GRIDNODE_WIRE_CHECK: a message or record about to leave this
 * process that is not one value is a bug of this program, said ("gridnode BUG: wire:",
 * with where and what) before abort(), so the tests catch it at once. Elsewhere free. */
#ifdef GRIDNODE_WIRE_CHECK
void wire_check_out(const void *p, size_t n, const char *what, const char *file, int line);
#define WIRE_CHECK_OUT(p, n, what) wire_check_out((p), (n), (what), __FILE__, __LINE__)
#else
#define WIRE_CHECK_OUT(p, n, what) ((void)0)
#endif

/* Starts a message: a map of nfields + 3 entries with v, t and id already written. */
void wire_begin(struct wire_buf *wb, uint32_t type, uint64_t id, uint32_t nfields);
/* NOT_FOUND for a job id below the role's next one (ids are given in order, never again,
 * and only a purge removes a job): `purged` true, so a level above that followed the job
 * takes it as ended there, never as lost (docs/wire.md ERROR). where: "at cluster X"... */
void wire_error_purged(struct wire_buf *wb, uint64_t id, uint64_t job, const char *where);
/* Writes one error reply (a whole message). */
void wire_error_msg(struct wire_buf *wb, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* key + value pairs */
void wire_put_u64(struct wire_buf *wb, const char *key, uint64_t v);
void wire_put_i64(struct wire_buf *wb, const char *key, int64_t v);
void wire_put_f64(struct wire_buf *wb, const char *key, double v);
void wire_put_bool(struct wire_buf *wb, const char *key, bool v);
void wire_put_str(struct wire_buf *wb, const char *key, const char *s);
void wire_put_strn(struct wire_buf *wb, const char *key, const char *s, size_t n);
void wire_put_bin(struct wire_buf *wb, const char *key, const void *p, size_t n);
/* key + an array of the n strings of v (an argv). */
void wire_put_strv(struct wire_buf *wb, const char *key, char *const *v, uint32_t n);
/* key only; follow with exactly one value (wire_pack_*). */
void wire_put_key(struct wire_buf *wb, const char *key);

/* bare values, for arrays and nested maps */
void wire_pack_map(struct wire_buf *wb, uint32_t n);
void wire_pack_array(struct wire_buf *wb, uint32_t n);
void wire_pack_u64(struct wire_buf *wb, uint64_t v);
void wire_pack_str(struct wire_buf *wb, const char *s);
void wire_pack_strn(struct wire_buf *wb, const char *s, size_t n);
void wire_pack_bin(struct wire_buf *wb, const void *p, size_t n);
/* Copies a decoded object as it is. */
void wire_pack_object(struct wire_buf *wb, const msgpack_object *o);

#endif

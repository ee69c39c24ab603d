/*
 * msgs.c - the descriptor of every message type: its fields, their types and caps.
 * wire_decode() validates every frame against this table before any handler runs.
 * docs/wire.md describes the same table for people; keep them in step.
 */
#include "wire/wire.h"

#include <stddef.h>

#define SID_MAX 64
#define NAME_MAX_ 256
#define MAX_BATCH 1024 /* tasks or results in one message */

/*
 * Rows that several descriptors share, written once. Each macro expands to its rows in
 * place, so every descriptor keeps its own order (wire_check_map reports the first bad
 * field in that order, and docs/wire.md lists them so). One row a line: clang-format
 * would fold these.
 */
/* clang-format off */
/* the task a message is about */
#define TASK_REF_FIELDS                                                                    \
    {"job", WF_UINT, true},                                                                \
    {"idx", WF_UINT, true, UINT32_MAX},                                                    \
    {"issue", WF_UINT, true, UINT32_MAX}
/* a task's or a parallel process's captured output, and whether it was cut */
#define OUTPUT_FIELDS                                                                      \
    {"stdout", WF_BIN, false},                                                             \
    {"stderr", WF_BIN, false},                                                             \
    {"out_trunc", WF_BOOL, false},                                                         \
    {"err_trunc", WF_BOOL, false}
/* issue 15: submit --export / --chdir (wire/jobenv.h); env_max: entries of "env" */
#define JOBENV_FIELDS(env_max)                                                             \
    {"env", WF_ARRAY, false, env_max, WF_STR},                                             \
    {"chdir", WF_STR, false, 1024}
/* a job's fields read by the batch role only (docs/wire.md 6.11) */
#define BATCH_FIELDS                                                                       \
    {"account", WF_STR, false, NAME_MAX_},                                                 \
    {"qos", WF_STR, false, NAME_MAX_},                                                     \
    {"class", WF_STR, false, NAME_MAX_},                                                   \
    {"resv", WF_STR, false, NAME_MAX_},                                                    \
    {"early", WF_BOOL, false},                                                             \
    {"hold", WF_BOOL, false}
/* issue 11: a job's report deadline and GPUs */
#define GPU_REQ_FIELDS                                                                     \
    {"deadline_s", WF_UINT, false, 366u * 86400},                                          \
    {"gpus", WF_UINT, false, 64},                                                          \
    {"gpu_type", WF_STR, false, 31}
/* memory and disk of a resource request */
#define MEM_DISK_FIELDS                                                                    \
    {"mem_mb", WF_UINT, false, WIRE_SIZE_MB_MAX},                                          \
    {"disk_mb", WF_UINT, false, WIRE_SIZE_MB_MAX}
/* who may use a reservation (RESV_SET, RESERVE) */
#define ACL_MAX 256
#define ACL_FIELDS                                                                         \
    {"users", WF_ARRAY, false, ACL_MAX, WF_STR},                                           \
    {"groups", WF_ARRAY, false, ACL_MAX, WF_STR},                                          \
    {"accounts", WF_ARRAY, false, ACL_MAX, WF_STR},                                        \
    {"classes", WF_ARRAY, false, ACL_MAX, WF_STR},                                         \
    {"qoss", WF_ARRAY, false, ACL_MAX, WF_STR}

/*
 * Paged lists (docs/wire.md 6.2): a list request names its page; a list reply carries
 * its rows and, when cut short, the cursor to ask again from.
 */
/* the page asked for: rows from the cursor "from" on, at most "count" of them */
#define PAGE_FROM {"from", WF_UINT, false}
#define PAGE_COUNT {"count", WF_UINT, false, 100000}
#define PAGE_FIELDS PAGE_FROM, PAGE_COUNT
/* a list reply's rows under key, an array of maps (req: the reply carries only that list) */
#define LIST_ROWS(key, req) {key, WF_ARRAY, req, UINT32_MAX, WF_MAP}
/* the reply was cut short: ask again with from = next */
#define LIST_NEXT {"next", WF_UINT, false}
/* clang-format on */

/* issue 26: one input file of a job (SUBMIT) or of a task (its task map) */
static const struct wire_field input_fields[] = {
    {"name", WF_STR, true, 1024}, /* relative path in the task's working directory */
    {"hash", WF_STR, true, 64},   /* SHA-256, 64 lower-case hex digits */
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"task", WF_UINT, false, UINT32_MAX}, /* SUBMIT: only task i gets it (submit {i}) */
    {NULL},
};

/* issue 26: one output file a task kept (RESULT "files", JOB task maps) */
static const struct wire_field outfile_fields[] = {
    {"name", WF_STR, true, 1024},
    {"hash", WF_STR, true, 64},
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {NULL},
};

/* clang-format off */
/* issue 26: the files of a job (SUBMIT) and of each of its tasks (task maps) */
#define FILES_FIELDS                                                                       \
    {"inputs", WF_ARRAY, false, WIRE_FILE_INPUTS_MAX, WF_MAP, input_fields},               \
    {"outputs", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX, WF_STR}
/* clang-format on */

/* one task as handed to a node */
static const struct wire_field task_fields[] = {
    TASK_REF_FIELDS,
    {"argv", WF_ARRAY, true, 256, WF_STR},
    {"shell", WF_BOOL, false},
    {"stdin", WF_BIN, false},
    {"limit_s", WF_UINT, true},      /* no cap: a node clamps it, one bad task must not */
    {"complexity", WF_FLOAT, false}, /* cost the reply's others (docs/wire.md 2) */
    /* issue 11 (work request in seconds per processor type) */
    {"ptype", WF_STR, false, 32}, /* "cpu" or the GPU type it runs on */
    {"gpus", WF_UINT, false, 64}, /* GPU instances it needs */
    {"deadline", WF_UINT, false}, /* report deadline, unix seconds */
    {"est_s", WF_FLOAT, false},   /* estimated run time on this host */
    JOBENV_FIELDS(4096),
    {"network", WF_BOOL, false}, /* issue 23: the job asked for the network */
    FILES_FIELDS,                /* issue 26 */
    /* issue 26: checkpoints (docs/data.md): the upload period, the cap, the latest */
    {"checkpoint_s", WF_UINT, false, 86400 * 365},
    {"ckpt_mb", WF_UINT, false, 1u << 30},
    {"ckpt", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields},
    {"ckpt_issue", WF_UINT, false, UINT32_MAX},
    {NULL},
};

/* one GPU type a node declares (HELLO "gpus") */
static const struct wire_field gpu_fields[] = {
    {"type", WF_STR, true, 31},
    {"count", WF_UINT, true, 64},
    {"gflops", WF_FLOAT, false},
    {NULL},
};

/* one result as reported by a node */
const struct wire_field wire_result_fields[] = {
    TASK_REF_FIELDS,
    {"exit", WF_INT, true, INT32_MAX},
    {"signal", WF_UINT, false, 255},
    {"timeout", WF_BOOL, false},
    {"error", WF_STR, false, 1024},
    {"cpu_s", WF_FLOAT, false},
    {"wall_s", WF_FLOAT, false},
    OUTPUT_FIELDS,
    {"files", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields}, /* 26 */
    {"files_note", WF_STR, false, 1024}, /* 26: outputs not kept (symbolic links) */
    {NULL},
};

/* a task a node says it is running */
static const struct wire_field running_fields[] = {
    TASK_REF_FIELDS,
    {NULL},
};

static const struct wire_field f_error[] = {
    {"code", WF_UINT, true},
    {"msg", WF_STR, true},
    {"field", WF_STR, false, 64}, /* the request field at fault, when said (issue 27) */
    {"purged", WF_BOOL, false},   /* NOT_FOUND: the job named was purged (it ended there) */
    {NULL},
};

static const struct wire_field f_none[] = {{NULL}};

static const struct wire_field f_hello[] = {
    {"sid", WF_STR, false, SID_MAX},
    {"client", WF_STR, true, NAME_MAX_},
    {"node", WF_STR, true, NAME_MAX_},
    {"cluster", WF_STR, false, NAME_MAX_},
    {"os", WF_STR, false, NAME_MAX_},
    {"mhz", WF_UINT, false, 1000000},
    {"cores", WF_UINT, true, 1u << 20},
    {"mem_mb", WF_UINT, false, WIRE_SIZE_MB_MAX},
    {"slots", WF_UINT, false, 1u << 20},
    {"arch", WF_STR, false, NAME_MAX_},
    {"model", WF_STR, false, NAME_MAX_},
    {"disk_mb", WF_UINT, false, WIRE_SIZE_MB_MAX},
    {"procs", WF_BOOL, false},
    {"inc", WF_STR, false, SID_MAX}, /* the cluster state the node's tasks came from */
    {"gpus", WF_ARRAY, false, 4, WF_MAP, gpu_fields},
    {"cpu_gflops", WF_FLOAT, false},
    {"features", WF_STR, false, 1024}, /* issue 27: lib/constraint.h feature list */
    {NULL},
};

static const struct wire_field f_welcome[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"hb_s", WF_UINT, true, WIRE_WAIT_S_MAX},
    {"resumed", WF_BOOL, true},
    {"poll_s", WF_UINT, false, WIRE_WAIT_S_MAX},
    {"inc", WF_STR, false, SID_MAX}, /* the incarnation of the cluster's state */
    {NULL},
};

/* "req": processor type -> seconds wanted (checked by the cluster: numbers >= 0) */
#define REQ_TYPES 16
static const struct wire_field f_task_get[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"want", WF_UINT, true, MAX_BATCH},
    {"req", WF_MAP, false, REQ_TYPES},
    {NULL},
};

static const struct wire_field f_tasks[] = {
    {"tasks", WF_ARRAY, true, MAX_BATCH, WF_MAP, task_fields},
    {"more", WF_BOOL, true},
    {"wait_s", WF_UINT, true, WIRE_WAIT_S_MAX},
    {"acked", WF_UINT, false},
    {"reason", WF_STR, false},
    {"cancel", WF_ARRAY, false, MAX_BATCH, WF_MAP, running_fields},
    {"stale", WF_UINT, false}, /* of the acked results, those of another incarnation */
    {"none", WF_ARRAY, false, REQ_TYPES, WF_STR}, /* requested types without work now */
    {NULL},
};

static const struct wire_field f_result[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"results", WF_ARRAY, true, MAX_BATCH, WF_MAP, wire_result_fields},
    {"want", WF_UINT, true, MAX_BATCH},
    {"inc", WF_STR, false, SID_MAX}, /* the incarnation the results' tasks came from */
    {"req", WF_MAP, false, REQ_TYPES},
    {NULL},
};

static const struct wire_field f_leave[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"results", WF_ARRAY, false, MAX_BATCH, WF_MAP, wire_result_fields},
    {"inc", WF_STR, false, SID_MAX},
    {NULL},
};

static const struct wire_field f_status[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"running", WF_ARRAY, true, MAX_BATCH, WF_MAP, running_fields},
    {NULL},
};

static const struct wire_field f_status_ack[] = {
    {"cancel", WF_ARRAY, true, MAX_BATCH, WF_MAP, running_fields},
    {NULL},
};

/* a known answer of a spot-check task (SUBMIT "known", docs/validation.md) */
static const struct wire_field known_fields[] = {
    {"exit", WF_INT, true, INT32_MAX},
    {"stdout", WF_BIN, false},
    {NULL},
};

static const struct wire_field f_submit[] = {
    {"dependency", WF_STR, false, 1024}, /* issue 27: wire/depend.h */
    {"constraint", WF_STR, false, 1024}, /* issue 27: lib/constraint.h */
    {"argv", WF_ARRAY, true, 256, WF_STR},
    {"ntasks", WF_UINT, true, 10000000},
    {"name", WF_STR, false, NAME_MAX_},
    {"user", WF_STR, false, NAME_MAX_},
    {"shell", WF_BOOL, false},
    {"complexity", WF_FLOAT, false},
    {"limit_s", WF_UINT, false, 366u * 86400},
    {"stdin", WF_ARRAY, false, 100000, WF_BIN},
    {"key", WF_STR, false, 128}, /* request key: a retry returns the first job */
    /* result validation (docs/validation.md) */
    {"replicas", WF_UINT, false, 32},
    {"quorum", WF_UINT, false, 32},
    {"max_results", WF_UINT, false, 32},
    {"validator", WF_STR, false, 4096},
    {"adaptive", WF_BOOL, false},
    {"distinct", WF_STR, false, 16},
    {"known", WF_ARRAY, false, 100000, WF_MAP, known_fields},
    BATCH_FIELDS,
    GPU_REQ_FIELDS,
    JOBENV_FIELDS(4096),
    {"network", WF_BOOL, false},                   /* issue 23: tasks keep the host's network */
    FILES_FIELDS,                                  /* issue 26: submit --input / --output */
    {"checkpoint_s", WF_UINT, false, 86400 * 365}, /* issue 26: submit --checkpoint-s */
    {"host", WF_STR, false, NAME_MAX_}, /* issue 26: only this node (a batch role placed it) */
    /* issue 26: task 0's checkpoint carried from another cluster (a batch role's move) */
    {"ckpt", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields},
    {NULL},
};

static const struct wire_field f_submitted[] = {
    {"job", WF_UINT, true},
    {"state", WF_STR, false, NAME_MAX_},
    {"cluster", WF_STR, false, NAME_MAX_},
    {"reason", WF_STR, false, 1024},
    {"repeat", WF_BOOL, false}, /* the key named a job submitted before */
    {NULL},
};

/* one parallel process as a node reports it (PSYNC) */
static const struct wire_field pstat_fields[] = {
    {"job", WF_UINT, true},
    {"rank", WF_UINT, true, 4095},
    {"state", WF_STR, true, 8},
    {"cpu_s", WF_FLOAT, false},
    {"rss_kb", WF_UINT, false, WIRE_SIZE_KB_MAX},
    {"disk_kb", WF_UINT, false, WIRE_SIZE_KB_MAX},
    {"exit", WF_INT, false, INT32_MAX},
    {"signal", WF_UINT, false, 255},
    {"error", WF_STR, false, 1024},
    OUTPUT_FIELDS,
    /* issue 26: with "exit", the outputs it kept (uploaded before), and what was not */
    {"files", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields},
    {"files_note", WF_STR, false, 1024},
    {NULL},
};

/* what a node should do with one parallel process (PSYNC_ACK) */
static const struct wire_field pcmd_fields[] = {
    {"job", WF_UINT, true},
    {"rank", WF_UINT, true, 4095},
    {"want", WF_STR, true, 8},
    {"argv", WF_ARRAY, false, 256, WF_STR},
    {"shell", WF_BOOL, false},
    JOBENV_FIELDS(4096 + 64),    /* "env": the job's --export and up to 64 more */
    {"network", WF_BOOL, false}, /* issue 23: false: the process runs without it */
    FILES_FIELDS, /* issue 26: the rank's inputs (placed before it starts), output globs */
    /* issue 26: a parallel job's checkpoints (docs/data.md "Checkpoints of parallel jobs"):
       the period, the cap, the job's run, the rank's files of the complete generation */
    {"checkpoint_s", WF_UINT, false, 86400 * 365},
    {"ckpt_mb", WF_UINT, false, 1u << 30},
    {"ckpt_run", WF_UINT, false, UINT32_MAX},
    {"ckpt", WF_ARRAY, false, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields},
    {"ckpt_gen", WF_UINT, false, UINT32_MAX},
    {NULL},
};

static const struct wire_field f_psync[] = {
    {"sid", WF_STR, true, SID_MAX},
    {"procs", WF_ARRAY, true, MAX_BATCH, WF_MAP, pstat_fields},
    {"disk_mb", WF_UINT, false, WIRE_SIZE_MB_MAX},
    {"wait_ms", WF_UINT, false, 30000}, /* long-poll: hold the reply while nothing changes */
    {NULL},
};

/* EVENTS -> EVENT_LIST: the cluster's change feed (docs/wire.md 6.9) */
static const struct wire_field f_events[] = {
    {"from", WF_UINT, false},
    {"epoch", WF_STR, false, 64},
    {"wait_ms", WF_UINT, false, 30000},
    {"max", WF_UINT, false, 10000},
    {NULL},
};

static const struct wire_field f_event_list[] = {
    {"epoch", WF_STR, true, 64},
    {"inc", WF_STR, true, 64},
    {"first", WF_UINT, true},
    {"next", WF_UINT, true},
    {"reset", WF_BOOL, true},
    {"events", WF_ARRAY, true, 10000, WF_MAP},
    {NULL},
};

static const struct wire_field f_psync_ack[] = {
    {"procs", WF_ARRAY, true, 65536, WF_MAP, pcmd_fields},
    {"sync_ms", WF_UINT, true, WIRE_WAIT_S_MAX * 1000},
    {"watchfs", WF_ARRAY, true, 64, WF_STR},
    {NULL},
};

static const struct wire_field f_psubmit[] = {
    {"dependency", WF_STR, false, 1024}, /* issue 27: wire/depend.h */
    {"constraint", WF_STR, false, 1024}, /* issue 27: lib/constraint.h */
    {"argv", WF_ARRAY, true, 256, WF_STR},
    {"procs", WF_UINT, true, 4096},
    {"ppn", WF_UINT, false, 4096},
    {"name", WF_STR, false, NAME_MAX_},
    {"user", WF_STR, false, NAME_MAX_},
    {"group", WF_STR, false, NAME_MAX_},
    {"shell", WF_BOOL, false},
    {"queue", WF_UINT, false, 255},
    MEM_DISK_FIELDS,
    {"cpu_s", WF_UINT, false, 366ull * 86400 * 4096},
    {"limit_s", WF_UINT, false, 366u * 86400},
    {"wait", WF_BOOL, false},
    {"coc", WF_BOOL, false},
    BATCH_FIELDS,
    {"key", WF_STR, false, 128},              /* request key: a retry returns the first job */
    {"hosts", WF_ARRAY, false, 4096, WF_STR}, /* explicit placement: rank i on hosts[i] */
    JOBENV_FIELDS(4096),
    GPU_REQ_FIELDS, /* refused by the cluster when set (parallel jobs are not pulled) */
    {"network", WF_BOOL, false},                   /* issue 23: recorded; see docs/wire.md 6.6 */
    FILES_FIELDS,                                  /* issue 26: as SUBMIT's, "task" naming a rank */
    {"checkpoint_s", WF_UINT, false, 86400 * 365}, /* issue 26: submit -p --checkpoint-s */
    {"ckpt_from", WF_UINT, false}, /* issue 26: a batch role's run again: the run before */
    {NULL},
};

static const struct wire_field f_console[] = {
    {"cmd", WF_STR, true, 16384},
    PAGE_FROM, /* the first output line wanted (6.7 paging) */
    {NULL},
};

static const struct wire_field f_console_out[] = {
    {"out", WF_STR, true},
    LIST_NEXT,
    {NULL},
};

static const struct wire_field f_sd_state[] = {
    LIST_ROWS("clusters", true),
    {"queues", WF_ARRAY, true, 256, WF_MAP},
    LIST_NEXT,
    {NULL},
};

/* JOB_LIST, NODE_LIST: one page of a list (docs/wire.md 6.2) */
static const struct wire_field f_list[] = {
    PAGE_FIELDS,
    {NULL},
};

/* JOB_LIST: a page, optionally filtered (issue 15, like squeue -u -t -p -n) */
static const struct wire_field f_job_list[] = {
    PAGE_FIELDS,
    {"user", WF_STR, false, NAME_MAX_},
    {"state", WF_STR, false, NAME_MAX_}, /* one state or several, comma-separated */
    {"name", WF_STR, false, NAME_MAX_},
    {"queue", WF_UINT, false, 255},
    {NULL},
};

static const struct wire_field f_jobs[] = {
    LIST_ROWS("jobs", true),
    LIST_NEXT,
    {NULL},
};

static const struct wire_field f_job_get[] = {
    {"job", WF_UINT, true},
    {"tasks", WF_BOOL, false},
    {"output", WF_BOOL, false},
    {"from", WF_UINT, false, UINT32_MAX}, /* a task index */
    PAGE_COUNT,
    {NULL},
};

/* issue 27: the JOB of a spool's job --output, as its site answered (docs/wire.md 6.13) */
static const struct wire_field f_job_at_site[] = {
    {"job", WF_MAP, true},
    LIST_ROWS("tasks", false),
    {"output_at", WF_MAP, false},
    LIST_NEXT,
    {NULL},
};

static const struct wire_field f_job[] = {
    {"job", WF_MAP, true},
    LIST_ROWS("tasks", false),
    LIST_NEXT,
    {"at_site", WF_MAP, false, 0, 0, f_job_at_site},
    {"site_error", WF_STR, false, 1024},
    {NULL},
};

static const struct wire_field f_cancel[] = {
    {"job", WF_UINT, true},
    {"unstarted", WF_BOOL, false}, /* a batch site's withdrawal (6.12, issue 24) */
    {NULL},
};

static const struct wire_field f_purge[] = {
    {"jobs", WF_ARRAY, false, 100000, WF_UINT},
    {"older_than_s", WF_UINT, false, WIRE_TIME_S_MAX},
    {NULL},
};

static const struct wire_field f_job_ctl[] = {
    {"job", WF_UINT, true},
    {"op", WF_STR, true, 16}, /* "hold", "release" or "requeue" */
    {NULL},
};

static const struct wire_field f_node_ctl[] = {
    {"node", WF_STR, true, 63},     /* the node's name, as `gridnode nodes` shows it */
    {"op", WF_STR, true, 16},       /* "drain" or "resume" */
    {"reason", WF_STR, false, 255}, /* required for "drain" */
    {NULL},
};

static const struct wire_field f_purged[] = {
    LIST_ROWS("jobs", true),
    {"more", WF_BOOL, false},
    {NULL},
};

static const struct wire_field f_nodes[] = {
    LIST_ROWS("nodes", true),
    LIST_NEXT,
    {NULL},
};

/* ---- batch role: Maui's commands and the site interface (docs/wire.md 6.12) ---- */
static const struct wire_field f_showq[] = {
    {"user", WF_STR, false, NAME_MAX_}, /* only this user's jobs */
    {"all", WF_BOOL, false},            /* also the ended jobs still kept */
    PAGE_FIELDS,
    {NULL},
};

static const struct wire_field f_rows[] = {
    LIST_ROWS("jobs", false),
    LIST_ROWS("resvs", false),
    LIST_ROWS("creds", false),
    {"now", WF_INT, false, WIRE_TIME_MS_MAX},
    LIST_NEXT,
    {NULL},
};

static const struct wire_field f_checkjob[] = {
    {"job", WF_UINT, true},
    {NULL},
};

static const struct wire_field f_jobcheck[] = {
    {"job", WF_MAP, true},
    {NULL},
};

/* a resource request: ESTIMATE, RESV_SET, RESERVE */
static const struct wire_field f_estimate[] = {
    {"job", WF_UINT, false},
    {"procs", WF_UINT, false, 1u << 20},
    {"ppn", WF_UINT, false, 4096},
    MEM_DISK_FIELDS,
    {"walltime_s", WF_UINT, false, 366u * 86400},
    {"user", WF_STR, false, NAME_MAX_},
    {"group", WF_STR, false, NAME_MAX_},
    {"account", WF_STR, false, NAME_MAX_},
    {"class", WF_STR, false, NAME_MAX_},
    {"qos", WF_STR, false, NAME_MAX_},
    {"max", WF_UINT, false, 100},
    {"constraint", WF_STR, false, 1024}, /* issue 27: lib/constraint.h */
    {NULL},
};

static const struct wire_field f_starts[] = {
    {"earliest", WF_INT, true, WIRE_TIME_MS_MAX}, /* ms since the epoch; -1 never */
    {"starts", WF_ARRAY, true, 100, WF_MAP},
    {"now", WF_INT, true, WIRE_TIME_MS_MAX},
    {"job", WF_UINT, false},
    {"state", WF_STR, false, NAME_MAX_},
    {"reason", WF_STR, false, 1024},
    {NULL},
};

/* DIAGNOSE: "what" is "priority", "fairshare", "nodes" or "jobs" */
static const struct wire_field f_diagnose[] = {
    {"what", WF_STR, true, 16},
    {"job", WF_UINT, false},
    PAGE_FIELDS,
    {NULL},
};

static const struct wire_field f_resv_set[] = {
    {"user", WF_STR, false, NAME_MAX_}, /* the requester */
    {"name", WF_STR, false, 63},
    ACL_FIELDS,
    {"tasks", WF_UINT, false, 1u << 20},
    {"procs", WF_UINT, false, 4096}, /* per task */
    MEM_DISK_FIELDS,
    {"hosts", WF_ARRAY, false, 4096, WF_STR},
    {"class", WF_STR, false, NAME_MAX_},        /* partition: the cluster to take them from */
    {"start", WF_INT, false, WIRE_TIME_MS_MAX}, /* ms since the epoch; absent or 0: now */
    {"end", WF_INT, false, WIRE_TIME_MS_MAX},
    {"duration_s", WF_UINT, false, WIRE_DURATION_S_MAX},
    {NULL},
};

static const struct wire_field f_resv[] = {
    {"resv", WF_MAP, true},
    {NULL},
};

static const struct wire_field f_resv_list[] = {
    {"name", WF_STR, false, 63},
    {"host", WF_STR, false, NAME_MAX_},
    PAGE_FIELDS,
    {NULL},
};

static const struct wire_field f_resv_release[] = {
    {"user", WF_STR, false, NAME_MAX_},
    {"name", WF_STR, true, 63},
    {NULL},
};

static const struct wire_field f_reserve[] = {
    {"user", WF_STR, false, NAME_MAX_},
    ACL_FIELDS,
    {"procs", WF_UINT, true, 1u << 20},
    {"ppn", WF_UINT, false, 4096},
    MEM_DISK_FIELDS,
    {"class", WF_STR, false, NAME_MAX_},
    {"start", WF_INT, false, WIRE_TIME_MS_MAX},
    {"duration_s", WF_UINT, true, WIRE_DURATION_S_MAX},
    {"flex", WF_BOOL, false},
    {"constraint", WF_STR, false, 1024}, /* issue 27: only nodes with these features */
    {NULL},
};

/* MASTER: the project's current scheduler endpoints (issue 11, C1) */
static const struct wire_field f_master[] = {
    {"project", WF_STR, true, NAME_MAX_},
    {"endpoints", WF_ARRAY, true, 64, WF_STR},
    {NULL},
};

static const struct wire_field f_site[] = {
    {"site", WF_MAP, false},   /* a batch site's SITE (6.12) */
    LIST_ROWS("sites", false), /* the grid spool's SITE (6.13) */
    {NULL},
};

/* issue #11: client control (docs/wire.md 6.15) */

static const struct wire_field f_client_state[] = {
    {"projects", WF_ARRAY, true, 4096, WF_MAP},
    {"tasks", WF_ARRAY, true, 1u << 20, WF_MAP},
    {"ptypes", WF_ARRAY, true, 64, WF_MAP},
    {"policy", WF_STR, false, NAME_MAX_},
    {NULL},
};

static const struct wire_field f_attach[] = {
    {"project", WF_STR, true, 63},
    {"share", WF_FLOAT, false},
    {"endpoints", WF_ARRAY, false, 8, WF_STR},
    {"master", WF_STR, false, 255},
    {NULL},
};

static const struct wire_field f_detach[] = {
    {"project", WF_STR, true, 63},
    {NULL},
};

/* issue 27: accounting (docs/wire.md 6.18) */
/* issue 26: files (docs/wire.md 6.19) */
#define FILE_HASH                                                                                  \
    {                                                                                              \
        "hash", WF_STR, true, 64                                                                   \
    }
static const struct wire_field f_file_have[] = {
    FILE_HASH,
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"user", WF_STR, false, NAME_MAX_}, /* charged to (files.user_mb); CURVE: the key's */
    {NULL},
};

static const struct wire_field f_file_state[] = {
    FILE_HASH,
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"have", WF_UINT, true, WIRE_FILE_SIZE_MAX},    /* bytes held, in order from 0 */
    {"done", WF_BOOL, true},                        /* whole and verified */
    {"chunk", WF_UINT, false, WIRE_FILE_CHUNK_MAX}, /* the chunk size to send */
    {"early", WF_BOOL, false},           /* a SUBMIT may name the file before it is whole */
    {"wait_ms", WF_UINT, false, 600000}, /* another user's upload is under way: ask later */
    {NULL},
};

static const struct wire_field f_file_put[] = {
    FILE_HASH,
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"off", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"data", WF_BIN, true, WIRE_FILE_CHUNK_MAX},
    {"user", WF_STR, false, NAME_MAX_}, /* as FILE_HAVE */
    {NULL},
};

static const struct wire_field f_work_wait[] = {
    {"wait_ms", WF_UINT, false, WIRE_WORK_WAIT_MAX_MS}, /* absent: WIRE_WORK_WAIT_MS */
    {NULL},
};

static const struct wire_field f_work_wake[] = {
    {"work", WF_BOOL, true}, /* a job was submitted; false: wait_ms passed */
    {NULL},
};

static const struct wire_field f_job_wait[] = {
    {"jobs", WF_ARRAY, true, WIRE_JOB_WAIT_JOBS, WF_UINT},
    {"wait_ms", WF_UINT, false, WIRE_JOB_WAIT_MAX_MS}, /* absent: 25 s */
    {NULL},
};

static const struct wire_field f_job_ended[] = {
    LIST_ROWS("jobs", true), /* the ended jobs' rows, as JOB_GET's "job" */
    {NULL},
};

static const struct wire_field f_file_get[] = {
    FILE_HASH,
    {"job", WF_UINT, true},
    {"idx", WF_UINT, false, UINT32_MAX}, /* an output of this task; absent: an input */
    {"off", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"len", WF_UINT, true, WIRE_FILE_CHUNK_MAX},
    {NULL},
};

static const struct wire_field f_file_data[] = {
    FILE_HASH,
    {"size", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"off", WF_UINT, true, WIRE_FILE_SIZE_MAX},
    {"data", WF_BIN, true, WIRE_FILE_CHUNK_MAX},
    {"have", WF_UINT, false, WIRE_FILE_SIZE_MAX}, /* still being uploaded: bytes held */
    {NULL},
};

static const struct wire_field f_ckpt[] = {
    {"sid", WF_STR, true, 64},
    {"job", WF_UINT, true},
    {"idx", WF_UINT, true, UINT32_MAX},
    {"issue", WF_UINT, true, UINT32_MAX},
    {"files", WF_ARRAY, true, WIRE_FILE_OUTPUTS_MAX * 16, WF_MAP, outfile_fields},
    {"gen", WF_UINT, false, UINT32_MAX}, /* a parallel job's rank (idx): its generation */
    {NULL},
};

/* TASK_PIN (issue 26): a batch role's pinned task moves to the host its scheduler chose */
static const struct wire_field f_task_pin[] = {
    {"job", WF_UINT, true},
    {"host", WF_STR, true, NAME_MAX_}, /* the node's name (HELLO "node") */
    {NULL},
};

static const struct wire_field f_acct[] = {
    PAGE_FIELDS, /* from: a job id */
    {"job", WF_UINT, false},
    {"user", WF_STR, false, NAME_MAX_},
    {"group", WF_STR, false, NAME_MAX_},
    {"state", WF_STR, false, NAME_MAX_}, /* one state or several, comma-separated */
    {"name", WF_STR, false, NAME_MAX_},
    {"kind", WF_STR, false, 64},
    {"start", WF_UINT, false, WIRE_TIME_MS_MAX},
    {"end", WF_UINT, false, WIRE_TIME_MS_MAX},
    {NULL},
};

/* issue 27: Maui's showbf, checknode, showstats (docs/wire.md 6.12) */
static const struct wire_field f_showbf[] = {
    {"class", WF_STR, false, NAME_MAX_},
    {NULL},
};

static const struct wire_field f_backfill[] = {
    {"windows", WF_ARRAY, true, 4096, WF_MAP},
    {"class", WF_STR, false, NAME_MAX_},
    {"now", WF_INT, true, WIRE_TIME_MS_MAX},
    {NULL},
};

static const struct wire_field f_checknode[] = {
    {"node", WF_STR, true, NAME_MAX_},
    {NULL},
};

static const struct wire_field f_nodecheck[] = {
    {"node", WF_MAP, true},
    {NULL},
};

static const struct wire_field f_showstats[] = {
    {"since", WF_INT, false, WIRE_TIME_MS_MAX},
    {NULL},
};

static const struct wire_field f_sitestats[] = {
    {"stats", WF_MAP, true},
    {NULL},
};

static const struct wire_field f_accts[] = {
    LIST_ROWS("rows", true),
    LIST_NEXT,
    {NULL},
};

const struct wire_desc wire_descs[] = {
    {WT_ERROR, "ERROR", "any", false, f_error},
    {WT_OK, "OK", "any", false, f_none},
    {WT_HELLO, "HELLO", "node", true, f_hello},
    {WT_WELCOME, "WELCOME", "cluster", false, f_welcome},
    {WT_TASK_GET, "TASK_GET", "node", true, f_task_get},
    {WT_TASKS, "TASKS", "cluster", false, f_tasks},
    {WT_RESULT, "RESULT", "node", true, f_result},
    {WT_LEAVE, "LEAVE", "node", true, f_leave},
    {WT_STATUS, "STATUS", "node", true, f_status},
    {WT_STATUS_ACK, "STATUS_ACK", "cluster", false, f_status_ack},
    {WT_SUBMIT, "SUBMIT", "user", true, f_submit},
    {WT_SUBMITTED, "SUBMITTED", "cluster", false, f_submitted},
    {WT_JOB_LIST, "JOB_LIST", "user", true, f_job_list},
    {WT_JOBS, "JOBS", "cluster", false, f_jobs},
    {WT_JOB_GET, "JOB_GET", "user", true, f_job_get},
    {WT_JOB, "JOB", "cluster", false, f_job},
    {WT_CANCEL, "CANCEL", "user", true, f_cancel},
    {WT_NODE_LIST, "NODE_LIST", "user", true, f_list},
    {WT_NODES, "NODES", "cluster", false, f_nodes},
    {WT_PSYNC, "PSYNC", "node", true, f_psync},
    {WT_PSYNC_ACK, "PSYNC_ACK", "cluster", false, f_psync_ack},
    {WT_PSUBMIT, "PSUBMIT", "user", true, f_psubmit},
    {WT_CONSOLE, "CONSOLE", "user", true, f_console},
    {WT_CONSOLE_OUT, "CONSOLE_OUT", "cluster", false, f_console_out},
    {WT_SD_INFO, "SD_INFO", "user", true, f_list},
    {WT_SD_STATE, "SD_STATE", "cluster", false, f_sd_state},
    {WT_PURGE, "PURGE", "user", true, f_purge},
    {WT_JOB_CTL, "JOB_CTL", "user", true, f_job_ctl},
    {WT_NODE_CTL, "NODE_CTL", "user", true, f_node_ctl},
    {WT_PURGED, "PURGED", "cluster", false, f_purged},
    {WT_EVENTS, "EVENTS", "batch", true, f_events},
    {WT_EVENT_LIST, "EVENT_LIST", "cluster", false, f_event_list},
    {WT_SHOWQ, "SHOWQ", "user", true, f_showq},
    {WT_QUEUE, "QUEUE", "batch", false, f_rows},
    {WT_CHECKJOB, "CHECKJOB", "user", true, f_checkjob},
    {WT_JOBCHECK, "JOBCHECK", "batch", false, f_jobcheck},
    {WT_ESTIMATE, "ESTIMATE", "user", true, f_estimate},
    {WT_STARTS, "STARTS", "batch", false, f_starts},
    {WT_DIAGNOSE, "DIAGNOSE", "user", true, f_diagnose},
    {WT_DIAG, "DIAG", "batch", false, f_rows},
    {WT_RESV_SET, "RESV_SET", "user", true, f_resv_set},
    {WT_RESV, "RESV", "batch", false, f_resv},
    {WT_RESV_LIST, "RESV_LIST", "user", true, f_resv_list},
    {WT_RESVS, "RESVS", "batch", false, f_rows},
    {WT_RESV_RELEASE, "RESV_RELEASE", "user", true, f_resv_release},
    {WT_RESERVE, "RESERVE", "user", true, f_reserve},
    {WT_SITE_INFO, "SITE_INFO", "user", true, f_none},
    {WT_SITE, "SITE", "batch", false, f_site},
    {WT_MASTER_GET, "MASTER_GET", "node", true, f_none},
    {WT_MASTER, "MASTER", "cluster", false, f_master},
    {WT_CLIENT_STATUS, "CLIENT_STATUS", "user", true, f_none},
    {WT_CLIENT_STATE, "CLIENT_STATE", "node", false, f_client_state},
    {WT_ATTACH, "ATTACH", "user", true, f_attach},
    {WT_DETACH, "DETACH", "user", true, f_detach},
    {WT_ACCT, "ACCT", "user", true, f_acct},
    {WT_ACCTS, "ACCTS", "cluster", false, f_accts},
    {WT_FILE_HAVE, "FILE_HAVE", "user", true, f_file_have}, /* issue 26 */
    {WT_FILE_STATE, "FILE_STATE", "cluster", false, f_file_state},
    {WT_FILE_PUT, "FILE_PUT", "user", true, f_file_put},
    {WT_FILE_GET, "FILE_GET", "user", true, f_file_get},
    {WT_FILE_DATA, "FILE_DATA", "cluster", false, f_file_data},
    {WT_SHOWBF, "SHOWBF", "user", true, f_showbf},
    {WT_BACKFILL, "BACKFILL", "batch", false, f_backfill},
    {WT_CHECKNODE, "CHECKNODE", "user", true, f_checknode},
    {WT_NODECHECK, "NODECHECK", "batch", false, f_nodecheck},
    {WT_SHOWSTATS, "SHOWSTATS", "user", true, f_showstats},
    {WT_SITESTATS, "SITESTATS", "batch", false, f_sitestats},
    {WT_CKPT, "CKPT", "node", true, f_ckpt},
    {WT_TASK_PIN, "TASK_PIN", "batch", true, f_task_pin},
    {WT_WORK_WAIT, "WORK_WAIT", "node", true, f_work_wait}, /* issue 26 evidence 8 */
    {WT_WORK_WAKE, "WORK_WAKE", "cluster", false, f_work_wake},
    {WT_JOB_WAIT, "JOB_WAIT", "user", true, f_job_wait}, /* issue 28 */
    {WT_JOB_ENDED, "JOB_ENDED", "batch", false, f_job_ended},
    {0, NULL, NULL, false, NULL},
};

const struct wire_desc *wire_desc_find(uint32_t type)
{
    for (const struct wire_desc *d = wire_descs; d->name; d++)
        if (d->type == type)
            return d;
    return NULL;
}

const char *wire_err_name(int code)
{
    static const char *names[] = {NULL,
                                  "MALFORMED",
                                  "VERSION",
                                  "TYPE",
                                  "FIELD",
                                  "NOT_FOUND",
                                  "SESSION",
                                  "INVALID",
                                  "STORAGE",
                                  "STATE",
                                  "REFUSED",
                                  [WE_DENIED] = "DENIED",
                                  [WE_AUTH] = "AUTH"};
    if (code > 0 && (size_t)code < sizeof names / sizeof names[0] && names[code])
        return names[code];
    return "UNKNOWN";
}

const char *wire_ftype_name(enum wire_ftype t)
{
    static const char *names[] = {"uint", "int", "float", "bool", "str", "bin", "array", "map"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

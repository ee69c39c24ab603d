/*
 * cli.h - what the user tools (submit, jobs, job, cancel, nodes) share: the common
 * options, one request/reply exchange with a cluster manager, and table output.
 */
#ifndef GRIDNODE_CLI_H
#define GRIDNODE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

struct cli {
    const char *endpoint; /* -e, else $GRIDNODE_CLUSTER, else tcp://127.0.0.1:7300 */
    int timeout_ms;       /* --timeout */
    int connect_ms;       /* --connect-timeout: how long a refused connection is retried */
    bool json;            /* --json */
    const char *prog;     /* "gridnode jobs" */
    /* {wire field, what the user typed} pairs ending in {NULL}: an ERROR's text is
     * told in the user's words (cli_user_words); NULL: as it came */
    const char *const (*words)[2];
    struct cli_conn *conn; /* cli_keep: one connection for every request; NULL: one each */
};

/*
 * Takes -e/--endpoint, --timeout, --json out of argv (compacting it). Returns 0, or -1
 * after printing an error.
 */
int cli_common(struct cli *c, const char *prog, int *argc, char **argv);
const char *cli_common_help(void);

/* A reply: the message and the frame it points into. Free with cli_reply_free. */
struct cli_reply {
    unsigned char *frame; /* malloc'd copy of the reply's bytes */
    size_t len;
    struct wire_msg msg;
};

/*
 * Sends the request in wb and waits for its reply. Returns 0 with the reply decoded;
 * 1 when the reply is an ERROR (printed to stderr); -1 when no reply came (printed).
 * On 0 the caller frees r with cli_reply_free.
 */
int cli_call(const struct cli *c, struct wire_buf *wb, uint64_t id, struct cli_reply *r);
void cli_reply_free(struct cli_reply *r);

/*
 * The kept connection (cliconn.c): after cli_keep, cli_call and everything built on it
 * send every request over one connection (opened at the first request, opened again
 * after it was lost), so a tool making several requests pays the connection set-up
 * (TCP, ZMTP and CURVE handshakes: several round trips on a long link) once. Replies
 * are matched by request id; a reply to another request is kept for its own cli_call
 * or cli_recv (at most 64). cli_unkeep closes it. cli_keep: 0, or -1 (printed).
 */
int cli_keep(struct cli *c);
void cli_unkeep(struct cli *c);
/* Kept connection: sends one request without waiting for its reply. 0, or -1 (the
 * connection could not be made or was lost: cli_report prints why). */
int cli_send(const struct cli *c, struct wire_buf *wb);
/* Kept connection: the next reply (of any request id, an ERROR as any other: not
 * printed) within timeout_ms. 0 with r set; -1 when none came (cli_lost tells whether
 * the connection was lost, cli_report prints why). */
int cli_recv(const struct cli *c, int timeout_ms, struct cli_reply *r);
/* Kept connection: the reply to request id (sent with cli_send), as cli_call. */
int cli_await(const struct cli *c, uint64_t id, struct cli_reply *r);
bool cli_lost(const struct cli *c);
void cli_report(const struct cli *c);
/* Prints an ERROR reply as cli_call does (clierr.c): "prog: text; what to do next" in the
 * user's words, or with --json one JSON line {"prog","code","error","msg"} on stderr. */
void cli_print_error(const struct cli *c, const struct cli_reply *r);

/*
 * The whole of a tool whose request has no fields (jobs, nodes): --help, the common
 * options, no other arguments, one exchange. Returns -1 with the reply in r (free it
 * with cli_reply_free), or else the exit status to return.
 */
int cli_simple(struct cli *c, const char *prog, const char *usage, uint32_t type, int argc,
               char **argv, struct cli_reply *r);

/*
 * Every page of a list (JOB_LIST, NODE_LIST): requests from 0 on, following each reply's
 * "next" (which must move forward) until a reply has none. Returns 0 with the replies
 * in p (free with cli_pages_free), else the exit status (1) after printing the error.
 */
struct cli_pages {
    struct cli_reply **r; /* each reply on its own: a decoded message must not move */
    uint32_t n;
};
int cli_list(const struct cli *c, uint32_t type, struct cli_pages *p);
void cli_pages_free(struct cli_pages *p);

/*
 * cli_list of a request with fields (SHOWQ, DIAGNOSE, RESV_LIST, CONSOLE, SD_INFO):
 * fill (when set) writes nfields key/value pairs into each page's request, before
 * "from". Same result as cli_list.
 */
typedef void cli_fill_fn(struct wire_buf *wb, const void *arg);
int cli_list_fields(const struct cli *c, uint32_t type, uint32_t nfields, cli_fill_fn *fill,
                    const void *arg, struct cli_pages *p);

/*
 * The array under key of every page as one array object (shallow: its elements point
 * into the pages, so it is valid while p is). 0, or -1 (out of memory, printed). Free
 * out->via.array.ptr with free().
 */
int cli_pages_merge(const struct cli *c, const struct cli_pages *p, const char *key,
                    msgpack_object *out);

/*
 * cli_simple's argument handling for a list tool (jobs, nodes), then cli_list. Returns
 * -1 with the pages in p, or else the exit status to return.
 */
int cli_simple_list(struct cli *c, const char *prog, const char *usage, uint32_t type, int argc,
                    char **argv, struct cli_pages *p);

/* The JSON of the array key of every page, one array (the shape of an unpaged list). */
void cli_print_json_pages(const struct cli_pages *p, const char *key);

/* Rewrites an error text in place: drops a leading "TYPE refused: " and replaces each
 * whole-word wire field name by the option the user typed (words as in struct cli). */
void cli_user_words(const char *const (*words)[2], char *text, size_t cap);

/*
 * argv[i] is "--opt=value": returns an argv with it split into "--opt" "value" (argc
 * grows by one). For a parser that must split by itself (submit: what follows PROGRAM
 * is the program's); main.c splits for every other command.
 */
char **cli_split_eq(int *argc, char **argv, int i);

/* Exit statuses of --wait (job, submit): the job did not succeed. */
#define CLI_EXIT_FAILED 3    /* a task failed, or the parallel job failed */
#define CLI_EXIT_KILLED 4    /* the parallel job was killed (a limit) */
#define CLI_EXIT_CANCELLED 5 /* cancelled */

/*
 * A str field of a reply for a table cell or a message line: escaped (control
 * characters, newlines, invalid UTF-8 shown as \n, \x1b and the like, see
 * lib/text.h) and cut to cap - 1 bytes on an escape or character boundary; "" if
 * absent. --json output does not use this: it stays exact.
 */
void cli_text(const msgpack_object *map, const char *key, char *buf, size_t cap);

/*
 * Table cells in terminal columns, not bytes (a UTF-8 name must not shift the columns
 * after it): cli_pad copies s into buf cut to at most width columns (on a character)
 * and padded with spaces to exactly width; cli_cell does so for the str field key of
 * map, escaped as cli_text does ("-" if absent or empty). Both return buf; cap of 4 x
 * width + 1 bytes always holds the cell. cli_columns: the columns of s (combining marks
 * 0, East Asian wide characters 2).
 */
const char *cli_pad(const char *s, int width, char *buf, size_t cap);
const char *cli_cell(const msgpack_object *map, const char *key, int width, char *buf, size_t cap);
int cli_columns(const char *s);

/* Prints the msgpack object as one line of JSON. */
void cli_print_json(const msgpack_object *o);

/* Formats milliseconds since the epoch as local "YYYY-mm-dd HH:MM:SS" ("-" if 0). */
const char *cli_time(int64_t ms, char *buf, size_t n);

/*
 * The one parser of a numeric option or argument of every command: s must be a whole
 * number in decimal and nothing else (no sign, no space, no unit, nothing after it)
 * within lo..hi. 0 with *out set; else -1 after printing "PROG: OPT wants a whole
 * number LO..HI, not 'S'" (the caller exits 2, a usage error).
 */
int cli_uint(const char *prog, const char *opt, const char *s, uint64_t lo, uint64_t hi,
             uint64_t *out);
/* cli_uint over 0..UINT64_MAX with c's prog. */
int cli_u64(const struct cli *c, const char *what, const char *s, uint64_t *out);

/* Parallel jobs (pjob.c): is this job map one, and printing it. */
bool cli_is_pjob(const msgpack_object *j);
void cli_pjob_header(void);
void cli_pjob_row(const msgpack_object *j);
/* The job's table row and its times and limits; with ranks_too its rank table too. */
void cli_pjob_print(const msgpack_object *j, bool ranks_too);

/* Waits until a job has ended, with progress on stderr (job.c, `job --wait`); its exit
 * status. Uses and then closes c's kept connection (cli_keep), if any. */
int cmd_job_wait(struct cli *c, uint64_t job);

#endif

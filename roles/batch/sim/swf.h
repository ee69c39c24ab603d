/*
 * swf.h - reading Standard Workload Format traces (Parallel Workloads Archive),
 * plain or gzip-compressed (zlib reads both).
 *
 * A data line has 18 whitespace-separated numeric fields: 1 job number, 2 submit
 * time, 3 wait, 4 run time, 5 allocated processors, 6 average CPU time, 7 used
 * memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status,
 * 12 user, 13 group, 14 executable, 15 queue, 16 partition, 17 preceding job,
 * 18 think time; -1 means unknown. Lines starting with ';' are header comments, of
 * which MaxProcs, MaxNodes and "Queue: N name" are used.
 */
#ifndef GRIDNODE_BATCH_SWF_H
#define GRIDNODE_BATCH_SWF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct swf_job {
    int64_t id, submit, wait, run;
    int32_t procs, req_procs;
    int64_t req_time, req_mem;
    int32_t status, user, group, queue, partition;
    int64_t line; /* line number in the file */
};

#define SWF_MAX_QUEUES 64

struct swf_trace {
    struct swf_job *jobs;
    size_t njobs, cap;
    int64_t max_procs, max_nodes;     /* -1 when the header does not say */
    char *queue_name[SWF_MAX_QUEUES]; /* from "; Queue: N name" lines, or NULL */
    size_t lines;
    double read_s; /* wall time the reading took (swf_read, swf_stream_finish) */
};

/* Reads the whole trace at path into t (zeroed by the caller). 0, or -1 with a
 * message naming the file, the line and the problem in err (t is freed then). */
int swf_read(const char *path, struct swf_trace *t, char *err, size_t errlen);
/* The same from a string held in memory (for tests); name is used in messages. */
int swf_parse(const char *text, size_t len, const char *name, struct swf_trace *t, char *err,
              size_t errlen);
void swf_free(struct swf_trace *t);

/*
 * A stream reads a trace in a thread of its own and hands the parsed records over
 * in blocks of a few thousand, in file order, so that a consumer (the simulator)
 * works on the first records while the rest are still being inflated and parsed.
 * The records handed over stay valid until swf_stream_close. One consumer thread.
 */
struct swf_stream;

/* Opens path and starts the reader thread. 0, or -1 with a message in err (the
 * file cannot be opened, no thread) and *s NULL. */
int swf_stream_open(const char *path, struct swf_stream **s, char *err, size_t errlen);
/* Waits for the first block of records (or the end of the file) and returns the
 * header as read so far: max_procs, max_nodes and queue_name (no records). Header
 * lines further down the file are not in it; swf_stream_finish gives the final
 * header, to compare with swf_same_header. Valid until swf_stream_close. NULL with
 * the reading error in err if the file failed before any record. */
const struct swf_trace *swf_stream_header(struct swf_stream *s, char *err, size_t errlen);
/* The next block of records: waits until one is parsed; *jobs points to *n records.
 * *n is 0 at the end of the file. 0, or -1 with the reading error (as swf_read
 * reports it: file, line, problem) once the records before it were handed over. */
int swf_stream_next(struct swf_stream *s, const struct swf_job **jobs, size_t *n, char *err,
                    size_t errlen);
/* Waits for the end of the file and fills t (zeroed by the caller; swf_free it) with
 * the final header, the record and line counts and read_s, but no records (t->jobs
 * NULL). 0, or -1 with the reading error in err. */
int swf_stream_finish(struct swf_stream *s, struct swf_trace *t, char *err, size_t errlen);
/* After swf_stream_finish: copies every record into t->jobs, as swf_read would
 * have. 0 or -1 (out of memory). */
int swf_stream_records(struct swf_stream *s, struct swf_trace *t, char *err, size_t errlen);
/* Stops the reader if it is still running and frees the stream; NULL-safe, sets *s
 * to NULL. */
void swf_stream_close(struct swf_stream **s);
/* Whether a and b have the same MaxProcs, MaxNodes and queue names. */
bool swf_same_header(const struct swf_trace *a, const struct swf_trace *b);

#endif

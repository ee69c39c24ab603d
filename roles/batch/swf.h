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
};

/* Reads the whole trace at path into t (zeroed by the caller). 0, or -1 with a
 * message naming the file, the line and the problem in err (t is freed then). */
int swf_read(const char *path, struct swf_trace *t, char *err, size_t errlen);
/* The same from a string held in memory (for tests); name is used in messages. */
int swf_parse(const char *text, size_t len, const char *name, struct swf_trace *t, char *err,
              size_t errlen);
void swf_free(struct swf_trace *t);

#endif

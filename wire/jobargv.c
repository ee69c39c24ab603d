/*
 * jobargv.c - the checks of a job's argv shared by the cluster, the batch role and
 * the grid spool (jobargv.h).
 */
#include <string.h>

#include "wire/jobargv.h"

const char *jobargv_problem(const msgpack_object *argv)
{
    if (!argv || argv->type != MSGPACK_OBJECT_ARRAY || argv->via.array.size == 0)
        return "argv is empty: give the program to run";
    for (uint32_t i = 0; i < argv->via.array.size; i++) {
        const msgpack_object *a = &argv->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_STR)
            return "argv elements must be strings";
        if (memchr(a->via.str.ptr, 0, a->via.str.size))
            return "argv elements must not contain NUL bytes";
        if (a->via.str.size > JOBARGV_ELEM_MAX)
            return "an argument is longer than 16384 bytes (argv: at most 16 KiB each): put "
                   "a long script in a file and run that";
    }
    if (argv->via.array.ptr[0].via.str.size == 0)
        return "argv[0] is empty: argv must name a program (a non-empty first element)";
    return NULL;
}

/*
 * datapath.c - checking the relative file names of inputs and outputs (datapath.h).
 */
#include "lib/datapath.h"

#include <string.h>

const char *datapath_problem(const char *name, size_t len)
{
    if (len == 0)
        return "is empty";
    if (len > DATAPATH_MAX)
        return "is longer than 1024 bytes";
    if (name[0] == '/')
        return "is an absolute path (it must lie inside the task's working directory)";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return "holds a control character";
    for (size_t i = 0; i < len;) {
        size_t n = 0;
        while (i + n < len && name[i + n] != '/')
            n++;
        if (n == 0)
            return "has an empty component ('//' or a trailing '/')";
        if ((n == 1 && name[i] == '.') || (n == 2 && !memcmp(name + i, "..", 2)))
            return "has a '.' or '..' component (it must lie inside the task's working "
                   "directory)";
        i += n;
        if (i < len && ++i == len)
            return "has an empty component ('//' or a trailing '/')";
    }
    return NULL;
}

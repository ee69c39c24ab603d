/* fsutil.h - small file-system helpers shared by the roles. */
#ifndef GRIDNODE_FSUTIL_H
#define GRIDNODE_FSUTIL_H

/* Creates dir and its missing parents (mode 0755). 0, or -1 with errno. */
int fs_mkdir_p(const char *dir);

#include <stddef.h>

/* Writes len bytes of buf to dir/name atomically: a temporary file in dir, then
 * rename, so a reader sees the old file or the whole new one, never a part.
 * 0, or -1 with errno (the temporary file removed). */
int fs_write_atomic(const char *dir, const char *name, const char *buf, size_t len);

#endif

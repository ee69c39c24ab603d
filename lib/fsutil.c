/* fsutil.c - file-system helpers (see fsutil.h). */
#include "lib/fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int fs_mkdir_p(const char *dir)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int fs_write_atomic(const char *dir, const char *name, const char *buf, size_t len)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= (int)sizeof tmp ||
        snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    size_t n = fwrite(buf, 1, len, f);
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno;
    if (!err && n != len)
        err = EIO;
    if (!err && rename(tmp, path) < 0)
        err = errno;
    if (err) {
        remove(tmp);
        errno = err;
        return -1;
    }
    return 0;
}

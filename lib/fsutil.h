/* fsutil.h - small file-system helpers shared by the roles. */
#ifndef GRIDNODE_FSUTIL_H
#define GRIDNODE_FSUTIL_H

/* Creates dir and its missing parents (mode 0755). 0, or -1 with errno. */
int fs_mkdir_p(const char *dir);

#endif

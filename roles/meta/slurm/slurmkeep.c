/*
 * slurmkeep.c - a Slurm site's job directories removed once the spool is done with them
 * (issue 26, docs/data.md "Retention"): WORKDIR/<the job's key>/ of a job the spool
 * ended (its outputs copied into the spool's own store and committed) is removed
 * `keep_s` seconds after that, as HTCondor removes a job's spool directory when the job
 * leaves the queue.
 *
 * The spool says which directories it is done with (slurm_done_fn, asked by name: the
 * directory is named by the SUBMIT's key), so nothing it still needs goes: a job still
 * queued, running, having its outputs copied or with an order outstanding keeps its
 * directory, and so does every directory whose name the spool does not know (another
 * spool's, an operator's). The workdir is looked through in bounded steps (SK_STEP
 * entries a tick, a pass every SK_PASS_MS at most); a directory is removed by a child
 * process under the jobs' identity (the loop never waits on a big tree; the job's files
 * are that identity's) that never follows a symbolic link, then the spool removes the
 * emptied directory itself (the workdir is its). A removal cut short by kill -9 leaves
 * a directory the next pass after the restart finds and finishes. The inputs the
 * directory linked go at the input store's next sweep (slurm_site_sweep), and so do the
 * directory's records in WORKDIR/.gridnode-jobs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/loop.h"
#include "lib/log.h"
#include "roles/meta/slurm/slurm_int.h"

#define SK_PASS_MS 2000    /* a pass over the workdir starts this often at most */
#define SK_STEP 64         /* workdir entries looked at per tick */
#define SK_RM_MS 600000    /* a removal may take this long (killed then; a later pass goes on) */
#define SK_DEPTH 256       /* levels of a job's tree removed at most */
#define SK_RETRY_MS 600000 /* a directory whose removal failed is tried again after this */

void slurm_site_retain(struct slurm_site *S, slurm_done_fn fn, void *arg)
{
    S->keep_fn = fn;
    S->keep_arg = arg;
}

/* ---- the removal (in the child) ---- */

/* The names in directory fd dfd (at most 256 a call, malloc'd, NULL-terminated; *more
 * set when there were more). NULL when it cannot be read (errno). */
static char **names_of(int dfd, bool *more)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    rewinddir(d);
    char **v = calloc(257, sizeof *v);
    size_t n = 0;
    *more = false;
    for (struct dirent *e; v && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == 256) {
            *more = true;
            break;
        }
        if (!(v[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    return v;
}

int slurm_rm_tree(int dfd, int depth_max)
{
    int err = 0;
    bool more = true;
    for (int rounds = 0; more && rounds < 1 << 20; rounds++) {
        /* names read first and the directory closed before descending: one fd a level */
        char **v = names_of(dfd, &more);
        if (!v)
            return -1;
        size_t removed = 0;
        for (size_t i = 0; v[i]; i++) {
            struct stat st;
            if (fstatat(dfd, v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue; /* gone meanwhile */
            if (S_ISDIR(st.st_mode)) {
                /* O_NOFOLLOW: a link put in its place is refused here, never entered */
                int sub = openat(dfd, v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 || depth_max <= 1) {
                    err = err ? err : sub < 0 ? errno : ELOOP;
                    if (sub >= 0)
                        close(sub);
                    continue;
                }
                (void)fchmod(sub, 0700); /* its owner may remove what it holds */
                if (slurm_rm_tree(sub, depth_max - 1) < 0 && !err)
                    err = errno;
                close(sub);
                if (unlinkat(dfd, v[i], AT_REMOVEDIR) == 0)
                    removed++;
                else if (!err)
                    err = errno;
            } else if (unlinkat(dfd, v[i], 0) == 0) { /* a file or a link, never its target */
                removed++;
            } else if (!err) {
                err = errno;
            }
        }
        for (size_t i = 0; v[i]; i++)
            free(v[i]);
        free(v);
        if (!removed)
            break; /* nothing more can go: the first failure is told */
    }
    errno = err;
    return err ? -1 : 0;
}

static int rm_child(struct slurm_site *S, struct sreq *r)
{
    (void)S;
    int fd = open(r->fdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "cannot open %s: %s", r->fdir, strerror(errno));
        return errno == ENOENT ? 0 : 2;
    }
    (void)fchmod(fd, 0700);
    int rc = slurm_rm_tree(fd, SK_DEPTH);
    if (rc < 0)
        fprintf(stderr, "cannot empty %s: %s", r->fdir, strerror(errno));
    close(fd);
    return rc < 0 ? 2 : 0;
}

/* ---- the passes (in the spool) ---- */

/* Whether name failed to go lately (its retry time not come). */
static bool failed_lately(struct slurm_site *S, const char *name, int64_t now)
{
    for (uint32_t i = 0; i < S->nkeep_failed; i++)
        if (!strcmp(S->keep_failed[i].name, name))
            return now < S->keep_failed[i].retry_at;
    return false;
}

static void note_failed(struct slurm_site *S, const char *name, int64_t now)
{
    uint32_t i = 0;
    while (i < S->nkeep_failed && strcmp(S->keep_failed[i].name, name))
        i++;
    if (i == SLURM_KEEP_FAILED_MAX) /* the oldest note goes */
        memmove(&S->keep_failed[0], &S->keep_failed[1], --i * sizeof S->keep_failed[0]);
    else if (i == S->nkeep_failed)
        S->nkeep_failed++;
    snprintf(S->keep_failed[i].name, sizeof S->keep_failed[i].name, "%s", name);
    S->keep_failed[i].retry_at = now + SK_RETRY_MS;
}

void slurm_keep_removed(struct slurm_site *S, struct sreq *r)
{
    S->keep_busy = false;
    const char *name = strrchr(r->fdir, '/') + 1;
    char b[600];
    if (!slurm_cmd_ok(r)) {
        slurm_why(S, r, b, sizeof b);
        log_warnx("%s (tried again in %d s)", b, SK_RETRY_MS / 1000);
        note_failed(S, name, loop_now_ms());
    } else if (rmdir(r->fdir) < 0 && errno != ENOENT) {
        log_warn("slurm site %s: cannot remove the job directory %s", S->site, r->fdir);
        note_failed(S, name, loop_now_ms());
    } else {
        log_info("slurm site %s: job directory %s removed (the spool is done with its job; "
                 "keep_s %ld)",
                 S->site, r->fdir, S->c.keep_s);
        slurm_files_forget(S, r->fdir);
    }
    slurm_req_free(S, r);
}

/* Starts the removal of WORKDIR/name: false when it cannot be started. */
static bool remove_dir(struct slurm_site *S, const char *name)
{
    struct sreq *r = slurm_req_new(S, T_RM, 0);
    if (!r)
        return false;
    if (asprintf(&r->fdir, "%s/%s", S->c.workdir, name) < 0) {
        r->fdir = NULL;
        slurm_req_free(S, r);
        return false;
    }
    r->child = rm_child;
    r->tmo = SK_RM_MS;
    slurm_cmd(S, r, C_RM, false);
    S->keep_busy = true;
    return true;
}

void slurm_keep_tick(struct slurm_site *S)
{
    if (!S->keep_fn || !S->c.workdir[0] || S->keep_busy)
        return;
    int64_t now = loop_now_ms();
    if (!S->keep_scan) {
        if (now < S->keep_next)
            return;
        S->keep_next = now + SK_PASS_MS;
        if (!(S->keep_scan = opendir(S->c.workdir)))
            return; /* a missing workdir is named when a job is sent there */
    }
    int64_t wall = wall_now_ms();
    for (int n = 0; n < SK_STEP; n++) {
        struct dirent *e = readdir(S->keep_scan);
        if (!e) {
            closedir(S->keep_scan);
            S->keep_scan = NULL;
            return;
        }
        if (e->d_name[0] == '.')
            continue; /* the store and the records */
        /* the spool is asked first (memory only): a shared file system is touched only
         * for the directories that are due */
        int64_t since = S->keep_fn(S->keep_arg, e->d_name);
        if (since < 0 || wall < since + S->c.keep_s * 1000 || failed_lately(S, e->d_name, now))
            continue;
        struct stat st;
        if (e->d_type != DT_DIR &&
            (e->d_type != DT_UNKNOWN ||
             fstatat(dirfd(S->keep_scan), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
             !S_ISDIR(st.st_mode)))
            continue; /* not a directory (a link among them is never followed) */
        if (remove_dir(S, e->d_name))
            return; /* one at a time: the pass goes on once it is done */
    }
}

void slurm_keep_free(struct slurm_site *S)
{
    if (S->keep_scan)
        closedir(S->keep_scan);
    S->keep_scan = NULL;
}

/*
 * cgroup.c - memory and process-count limits of tasks through cgroups (see cgroup.h,
 * docs/security.md "Resource limits").
 *
 * Layout: v1 keeps two trees, hierarchy 0 the memory one and 1 the pids one, each with
 * PARENT/gridnode/client-PID/NAME; v2 one tree (hierarchy 0) with the same names. NAME
 * is tSEQ for a bag task and jSEQ for the ranks of a parallel job.
 */
#include "roles/client/live/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

#define ROOT "/sys/fs/cgroup"
#define NH 2 /* hierarchies at most (v1: memory, pids) */

struct cgroup {
    struct cgroup *next;
    const void *owner;
    uint64_t job; /* 0: a bag task's */
    uint32_t refs;
    uint64_t mem_mb, pids;   /* in force */
    uint64_t job_mb;         /* the job's own request (0: none) */
    char path[NH][PATH_MAX]; /* "" for an unused hierarchy */
};

static struct {
    int version, nh;
    char base[NH][PATH_MAX]; /* PARENT/gridnode/client-PID */
    char grid[NH][PATH_MAX]; /* PARENT/gridnode */
    bool memsw, swapmax;
    uint64_t mem_mb, pids;
    uint64_t seq;
    struct cgroup *groups;
    /* empty task cgroups kept for the next tasks: making and removing a memory cgroup
       per task cost a third of a small task's throughput (bench/client_e2e.sh) */
    struct cgroup *idle;
    uint32_t nidle;
} cg;

#define CGROUP_IDLE_MAX 256

int cgroup_version(void)
{
    return cg.version;
}

uint64_t cgroup_task_memory_mb(void)
{
    return cg.mem_mb;
}

uint64_t cgroup_task_pids_max(void)
{
    return cg.pids;
}

/* ---- parsing ---- */

int cgroup_parse_key(const char *text, const char *key, uint64_t *value)
{
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) || l[kl] != ' ')
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(l + kl + 1, &end, 10);
        if (errno || end == l + kl + 1 || (*end && *end != '\n'))
            return -1;
        *value = v;
        return 0;
    }
    return -1;
}

/* True if the comma-separated list [s, e) holds word. */
static bool list_has(const char *s, const char *e, const char *word)
{
    size_t wl = strlen(word);
    while (s < e) {
        const char *c = memchr(s, ',', (size_t)(e - s));
        const char *t = c ? c : e;
        if ((size_t)(t - s) == wl && !memcmp(s, word, wl))
            return true;
        s = t + 1;
    }
    return false;
}

int cgroup_parse_self(const char *text, const char *controller, char *path, size_t n)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *c1 = strchr(l, ':'), *nl = strchrnul(l, '\n');
        const char *c2 = c1 && c1 < nl ? memchr(c1 + 1, ':', (size_t)(nl - c1 - 1)) : NULL;
        if (!c2)
            continue;
        bool hit = controller ? list_has(c1 + 1, c2, controller)
                              : (c1 - l == 1 && l[0] == '0' && c2 == c1 + 1);
        size_t pl = (size_t)(nl - c2 - 1);
        if (!hit)
            continue;
        if (pl == 0 || c2[1] != '/' || pl >= n)
            return -1;
        memcpy(path, c2 + 1, pl);
        path[pl] = '\0';
        return 0;
    }
    return -1;
}

/* ---- files ---- */

/* Reads up to n - 1 bytes of path into buf (NUL-terminated). 0 or -1. */
static int read_text(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r;
    while ((r = read(fd, buf, n - 1)) < 0 && errno == EINTR)
        ;
    int e = errno;
    close(fd);
    errno = e;
    if (r < 0)
        return -1;
    buf[r] = '\0';
    return 0;
}

/* Writes text to dir/name. 0 or -1 with errno. */
static int write_at(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return w == (ssize_t)strlen(text) ? 0 : -1;
}

static bool exists_at(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* True if dir/name (a list of controllers, space-separated) holds memory and pids. */
static bool has_controllers(const char *dir, const char *name)
{
    char path[PATH_MAX + 64], buf[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (read_text(path, buf, sizeof buf) < 0)
        return false;
    bool mem = false, pids = false;
    for (char *s = strtok(buf, " \n"); s; s = strtok(NULL, " \n")) {
        mem |= !strcmp(s, "memory");
        pids |= !strcmp(s, "pids");
    }
    return mem && pids;
}

/* ---- the client's parent cgroup ---- */

/* rmdir, retried for up to about a second while it is busy; when kill is set, the
 * processes still listed in its cgroup.procs are killed between the tries. */
static int rmdir_wait(const char *dir, bool kill_left)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 100; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return -1;
        if (kill_left) {
            char path[PATH_MAX + 64], buf[4096];
            snprintf(path, sizeof path, "%s/cgroup.procs", dir);
            if (read_text(path, buf, sizeof buf) == 0)
                for (char *s = strtok(buf, "\n"); s; s = strtok(NULL, "\n"))
                    kill((pid_t)atol(s), SIGKILL);
        }
        nanosleep(&ts, NULL);
    }
    errno = EBUSY;
    return -1;
}

/* Removes the task and job cgroups under dir (a client's directory), killing what
 * is left running in them: a client killed by SIGKILL leaves them behind. */
static void remove_children(const char *dir)
{
    DIR *sub = opendir(dir);
    struct dirent *s;
    while (sub && (s = readdir(sub))) {
        char child[PATH_MAX + 300];
        if (s->d_type != DT_DIR || s->d_name[0] == '.')
            continue;
        snprintf(child, sizeof child, "%s/%s", dir, s->d_name);
        rmdir_wait(child, true); /* what its tasks left running dies with it */
    }
    if (sub)
        closedir(sub);
}

/* Removes the client-PID directories under grid of clients that are gone, with their
 * empty children (a client killed by SIGKILL leaves them; its tasks went with it). */
static void remove_stale(const char *grid)
{
    DIR *d = opendir(grid);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "client-", 7))
            continue;
        long pid = strtol(e->d_name + 7, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.3800s/%s", grid, e->d_name);
        remove_children(dir);
        if (rmdir(dir) == 0)
            log_info("cgroup: removed %s of a client that is gone", dir);
        else
            log_warnx("cgroup: cannot remove %s of a client that is gone: %s", dir,
                      strerror(errno));
    }
    if (d)
        closedir(d);
}

/* Makes parent/gridnode/client-PID (hierarchy h), enabling memory and pids for the
 * children of the directories it makes under v2. 0 or -1 with errno. */
static int make_base(int h, const char *parent)
{
    snprintf(cg.grid[h], PATH_MAX, "%.3900s/gridnode", parent);
    snprintf(cg.base[h], PATH_MAX, "%.3900s/gridnode/client-%d", parent, (int)getpid());
    for (int attempt = 0; attempt < 3; attempt++) { /* another client may remove gridnode */
        if (mkdir(cg.grid[h], 0755) < 0 && errno != EEXIST)
            return -1;
        if (cg.version == CGROUP_V2 && !has_controllers(cg.grid[h], "cgroup.subtree_control") &&
            write_at(cg.grid[h], "cgroup.subtree_control", "+memory +pids") < 0)
            return -1;
        remove_stale(cg.grid[h]);
        if (mkdir(cg.base[h], 0755) == 0)
            break;
        if (errno == EEXIST) {
            /* a client that had this PID before (PIDs wrap) died without removing it:
               its task cgroups would collide with ours (t1, t2, ...) */
            log_info("cgroup: %s was left by a gone client with this PID; emptying it", cg.base[h]);
            remove_children(cg.base[h]);
            break;
        }
        if (errno != ENOENT)
            return -1;
    }
    if (cg.version == CGROUP_V2 &&
        write_at(cg.base[h], "cgroup.subtree_control", "+memory +pids") < 0) {
        int e = errno;
        rmdir(cg.base[h]);
        errno = e;
        return -1;
    }
    return 0;
}

/* The candidate parents of hierarchy h (mounted at mnt; own: the client's own cgroup
 * there, or NULL): v1 own then the root; v2 own's parent then the root (own itself
 * only as the root: a v2 cgroup that holds processes has no controllers for its
 * children). Tries each; 0 or -1 with why. */
static int find_base(int h, const char *mnt, const char *own, char *why, size_t n)
{
    char cand[3][PATH_MAX];
    int nc = 0, e = 0;
    if (own && strcmp(own, "/")) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%.3000s%s", mnt, own);
        if (cg.version == CGROUP_V2)
            *strrchr(p, '/') = '\0';
        if (strcmp(p, mnt) && access(p, F_OK) == 0)
            snprintf(cand[nc++], PATH_MAX, "%s", p);
    }
    snprintf(cand[nc++], PATH_MAX, "%s", mnt);
    for (int i = 0; i < nc; i++) {
        if (cg.version == CGROUP_V2 && !has_controllers(cand[i], "cgroup.subtree_control")) {
            snprintf(why, n, "v2: memory and pids are not enabled in %.200s/cgroup.subtree_control",
                     cand[i]);
            e = 0;
            continue;
        }
        if (make_base(h, cand[i]) == 0)
            return 0;
        e = errno;
        snprintf(why, n, "cannot make %.200s: %s", cg.base[h], strerror(e));
    }
    (void)e;
    return -1;
}

/* The client's own cgroup path for controller (NULL: v2), or NULL when unknown. */
static const char *own_path(const char *controller, char *buf, size_t n)
{
    char text[4096];
    if (read_text("/proc/self/cgroup", text, sizeof text) < 0 ||
        cgroup_parse_self(text, controller, buf, n) < 0)
        return NULL;
    return buf;
}

static int detect(char *why, size_t n)
{
    char own[PATH_MAX];
    if (access(ROOT "/cgroup.controllers", F_OK) == 0) {
        cg.version = CGROUP_V2;
        cg.nh = 1;
        if (!has_controllers(ROOT, "cgroup.controllers")) {
            snprintf(why, n, "v2 without the memory and pids controllers");
            return -1;
        }
        return find_base(0, ROOT, own_path(NULL, own, sizeof own), why, n);
    }
    static const char *const ctl[NH] = {"memory", "pids"};
    cg.version = CGROUP_V1;
    cg.nh = NH;
    for (int h = 0; h < NH; h++) {
        char mnt[64];
        snprintf(mnt, sizeof mnt, ROOT "/%s", ctl[h]);
        if (!exists_at(mnt, "cgroup.procs")) {
            snprintf(why, n, "no cgroup v2, and no v1 %s hierarchy at %s", ctl[h], mnt);
            return -1;
        }
        if (find_base(h, mnt, own_path(ctl[h], own, sizeof own), why, n) < 0)
            return -1;
    }
    return 0;
}

int cgroup_init(uint64_t memory_mb, uint64_t pids_max, char *desc, size_t n)
{
    char why[300] = "";
    memset(&cg, 0, sizeof cg);
    cg.mem_mb = memory_mb;
    cg.pids = pids_max;
    if (!memory_mb && !pids_max) {
        snprintf(desc, n, "none (client.task_memory_mb and client.task_pids_max are 0)");
        return CGROUP_NONE;
    }
    if (detect(why, sizeof why) < 0) {
        for (int h = 0; h < NH; h++)
            if (cg.base[h][0])
                rmdir(cg.base[h]);
        memset(cg.base, 0, sizeof cg.base);
        snprintf(desc, n, "none (%s)", why);
        cg.version = CGROUP_NONE;
        return CGROUP_NONE;
    }
    cg.memsw = cg.version == CGROUP_V1 && exists_at(cg.base[0], "memory.memsw.limit_in_bytes");
    cg.swapmax = cg.version == CGROUP_V2 && exists_at(cg.base[0], "memory.swap.max");
    char mem[40] = "none", pids[40] = "none";
    if (memory_mb)
        snprintf(mem, sizeof mem, "%" PRIu64 " MiB", memory_mb);
    if (pids_max)
        snprintf(pids, sizeof pids, "%" PRIu64, pids_max);
    snprintf(desc, n, "v%d memory+pids (task memory %s%s, pids %s; %s%s%s)", cg.version, mem,
             cg.memsw || cg.swapmax ? " with swap" : "", pids, cg.base[0], cg.nh > 1 ? ", " : "",
             cg.nh > 1 ? cg.base[1] : "");
    return cg.version;
}

static void remove_group(struct cgroup *g)
{
    for (int h = 0; h < NH; h++)
        if (g->path[h][0] && rmdir_wait(g->path[h], true) < 0)
            log_warn("cgroup: cannot remove %s", g->path[h]);
    free(g);
}

void cgroup_shutdown(void)
{
    while (cg.idle) {
        struct cgroup *g = cg.idle;
        cg.idle = g->next;
        remove_group(g);
    }
    cg.nidle = 0;
    for (int h = 0; cg.version && h < cg.nh; h++) {
        if (rmdir_wait(cg.base[h], true) < 0)
            log_warn("cgroup: cannot remove %s", cg.base[h]);
        rmdir(cg.grid[h]); /* fails while another client uses it */
    }
    cg.version = CGROUP_NONE;
}

/* ---- the cgroups of tasks ---- */

/* Writes the limits of g for mem_mb and pids (0: none). 0 or -1 with errno. */
static int set_limits(struct cgroup *g, uint64_t mem_mb, uint64_t pids)
{
    char m[32] = "max", p[32] = "max";
    if (mem_mb)
        snprintf(m, sizeof m, "%" PRIu64, mem_mb << 20);
    if (pids)
        snprintf(p, sizeof p, "%" PRIu64, pids);
    int rc = 0;
    if (cg.version == CGROUP_V2) {
        rc = write_at(g->path[0], "memory.max", m);
        if (rc == 0 && cg.swapmax)
            rc = write_at(g->path[0], "memory.swap.max", "0");
        if (rc == 0)
            rc = write_at(g->path[0], "pids.max", p);
    } else {
        if (!mem_mb)
            snprintf(m, sizeof m, "-1");
        /* memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every step: swap's
           limit first when raising, last when lowering (0 is no limit) */
        bool up = (mem_mb ? mem_mb : UINT64_MAX) >= (g->mem_mb ? g->mem_mb : UINT64_MAX);
        if (cg.memsw && up)
            rc = write_at(g->path[0], "memory.memsw.limit_in_bytes", m);
        if (rc == 0)
            rc = write_at(g->path[0], "memory.limit_in_bytes", m);
        if (rc == 0 && cg.memsw && !up)
            rc = write_at(g->path[0], "memory.memsw.limit_in_bytes", m);
        if (rc == 0)
            rc = write_at(g->path[1], "pids.max", p);
    }
    if (rc == 0) {
        g->mem_mb = mem_mb;
        g->pids = pids;
    }
    return rc;
}

/* The smaller of two limits, 0 meaning none. */
static uint64_t min_limit(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* The limits of a group of k ranks (or of one task, k = 1), saturating. */
static void limits_for(const struct cgroup *g, uint64_t k, uint64_t *mem, uint64_t *pids)
{
    *mem = cg.mem_mb && cg.mem_mb <= UINT64_MAX / 1024 / 1024 / k ? cg.mem_mb * k : cg.mem_mb;
    *pids = cg.pids && cg.pids <= UINT64_MAX / k ? cg.pids * k : cg.pids;
    *mem = min_limit(*mem, g->job_mb);
    if (*mem && *mem < CGROUP_MEMORY_MIN_MB)
        *mem = CGROUP_MEMORY_MIN_MB;
}

struct cgroup *cgroup_take(const void *owner, uint64_t job, uint64_t memory_mb)
{
    uint64_t mem, pids;
    if (!cg.version) {
        errno = ENOSYS;
        return NULL;
    }
    for (struct cgroup *g = job ? cg.groups : NULL; g; g = g->next)
        if (g->owner == owner && g->job == job) {
            limits_for(g, g->refs + 1, &mem, &pids);
            if (set_limits(g, mem, pids) < 0)
                return NULL;
            g->refs++;
            return g;
        }
    if (!job && cg.idle) { /* an empty task cgroup of an earlier task */
        struct cgroup *g = cg.idle;
        g->job_mb = memory_mb;
        limits_for(g, 1, &mem, &pids);
        if ((mem != g->mem_mb || pids != g->pids) && set_limits(g, mem, pids) < 0)
            return NULL;
        cg.idle = g->next;
        cg.nidle--;
        g->owner = owner;
        g->refs = 1;
        g->next = cg.groups;
        cg.groups = g;
        return g;
    }
    struct cgroup *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->owner = owner;
    g->job = job;
    g->job_mb = memory_mb;
    g->refs = 1;
    int h, tries = 0;
    do { /* a name left by a gone client that could not be removed: the next one */
        uint64_t seq = ++cg.seq;
        for (h = 0; h < cg.nh; h++) {
            snprintf(g->path[h], PATH_MAX, "%.4000s/%c%" PRIu64, cg.base[h], job ? 'j' : 't', seq);
            if (mkdir(g->path[h], 0755) < 0)
                break;
        }
        if (h < cg.nh) {
            int e = errno;
            for (int k = 0; k < h; k++)
                rmdir(g->path[k]);
            memset(g->path, 0, sizeof g->path);
            errno = e;
        }
    } while (h < cg.nh && errno == EEXIST && ++tries < 8);
    limits_for(g, 1, &mem, &pids);
    if (h < cg.nh || set_limits(g, mem, pids) < 0) {
        int e = errno;
        for (int k = 0; k < NH; k++)
            if (g->path[k][0])
                rmdir(g->path[k]);
        free(g);
        errno = e;
        return NULL;
    }
    g->next = cg.groups;
    cg.groups = g;
    return g;
}

/* Whether no process is left in g (a task's escaped descendants make it not). */
static bool group_empty(const struct cgroup *g)
{
    for (int h = 0; h < NH; h++) {
        char path[PATH_MAX + 64], buf[64];
        if (!g->path[h][0])
            continue;
        snprintf(path, sizeof path, "%s/cgroup.procs", g->path[h]);
        if (read_text(path, buf, sizeof buf) < 0 || buf[0])
            return false;
    }
    return true;
}

void cgroup_put(struct cgroup **gp)
{
    struct cgroup *g = gp ? *gp : NULL;
    if (!g)
        return;
    *gp = NULL;
    if (--g->refs > 0)
        return;
    for (struct cgroup **p = &cg.groups; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    if (!g->job && cg.nidle < CGROUP_IDLE_MAX && group_empty(g)) {
        g->next = cg.idle; /* the next task's (its OOM count read at its start) */
        cg.idle = g;
        cg.nidle++;
        return;
    }
    remove_group(g);
}

uint64_t cgroup_memory_mb(const struct cgroup *g)
{
    return g ? g->mem_mb : 0;
}

uint64_t cgroup_oom_kills(const struct cgroup *g)
{
    char path[PATH_MAX + 64], buf[1024];
    uint64_t v = 0;
    if (!g)
        return 0;
    snprintf(path, sizeof path, "%s/%s", g->path[0],
             cg.version == CGROUP_V2 ? "memory.events" : "memory.oom_control");
    if (read_text(path, buf, sizeof buf) == 0 && cgroup_parse_key(buf, "oom_kill", &v) == 0)
        return v;
    /* a v1 kernel before 4.13 has no oom_kill count: the limit was reached at least */
    snprintf(path, sizeof path, "%s/memory.failcnt", g->path[0]);
    if (cg.version == CGROUP_V1 && read_text(path, buf, sizeof buf) == 0)
        return strtoull(buf, NULL, 10) > 0;
    return 0;
}

int cgroup_open_procs(const struct cgroup *g, int fd[2])
{
    fd[0] = fd[1] = -1;
    for (int h = 0; h < cg.nh; h++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/cgroup.procs", g->path[h]);
        if ((fd[h] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
            int e = errno;
            if (h)
                close(fd[0]);
            fd[0] = fd[1] = -1;
            errno = e;
            return -1;
        }
    }
    return 0;
}

int cgroup_join(const int fd[2])
{
    for (int h = 0; h < NH; h++)
        if (fd[h] >= 0 && write(fd[h], "0", 1) != 1)
            return -1;
    return 0;
}

/*
 * scored.c - SCore-D resource management, the I/O side: the hosts file, the policy's
 * view of the clusters, parallel job submission and admission (PSUBMIT), ending jobs,
 * the time-slicing tick, limit enforcement, and the clusters of SD_INFO. Decisions are
 * made by the pure functions of engine/scored.h; this file gathers their inputs and applies
 * their outputs. The node protocol (PSYNC) is in scored_psync.c and scored_ack.c,
 * start-up and the console in scored_admin.c.
 */
#include <grp.h>
#include <ini.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/constraint.h"
#include "lib/log.h"
#include "lib/text.h"
#include "daemon/loop.h"
#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"
#include "wire/jobargv.h"
#include "wire/jobenv.h"

/* ---- hosts file ---- */

int scored_hostline(void *user, const char *section, const char *name, const char *value)
{
    struct scored *sd = user;
    struct sd_hostent *h = NULL;
    for (uint32_t i = 0; i < sd->nhf; i++)
        if (!strcmp(sd->hf[i].name, section))
            h = &sd->hf[i];
    if (!h) {
        struct sd_hostent *n = realloc(sd->hf, (sd->nhf + 1) * sizeof *n);
        if (!n || strlen(section) >= SD_NAME)
            return 0;
        sd->hf = n;
        h = &sd->hf[sd->nhf++];
        memset(h, 0, sizeof *h);
        snprintf(h->name, sizeof h->name, "%s", section);
        h->speed = 0;
    }
    if (!strcmp(name, "cluster") && strlen(value) < SD_NAME) {
        snprintf(h->cluster, sizeof h->cluster, "%s", value);
    } else if (!strcmp(name, "speed")) {
        char *end;
        h->speed = strtod(value, &end);
        return *end == '\0' && h->speed > 0 && h->speed < 1e9;
    } else if (!strcmp(name, "watchfs") && strlen(value) < sizeof h->watchfs) {
        snprintf(h->watchfs, sizeof h->watchfs, "%s", value);
    } else {
        return 0;
    }
    return 1;
}

const struct sd_hostent *scored_hostent(const struct cluster *c, const char *name)
{
    for (uint32_t i = 0; c->sd && i < c->sd->nhf; i++)
        if (!strcmp(c->sd->hf[i].name, name))
            return &c->sd->hf[i];
    return NULL;
}

void scored_node_class(const struct cluster *c, const struct node *n, char *name, size_t len,
                       double *speed)
{
    const struct sd_hostent *h = scored_hostent(c, n->name);
    if (h && h->cluster[0])
        snprintf(name, len, "%s", h->cluster);
    else if (n->cluster[0])
        snprintf(name, len, "%s", n->cluster);
    else
        snprintf(name, len, "%s/%s", n->arch[0] ? n->arch : "?", n->model[0] ? n->model : "?");
    text_fix(name); /* peer-given names: never cut inside a character */
    *speed = h && h->speed > 0 ? h->speed : 1.0;
}

/* ---- building the policy's view ---- */

struct view {
    struct sd_cluster *cl;
    uint32_t ncl;
    struct sd_cluster coc;
    uint32_t *host_cores, *host_procs; /* by node index */
    uint32_t *hostbuf;
    /* submit -p --constraint (issue 27): only hosts whose features satisfy it are in
       the view; the load of jobs on hosts left out is not charged to their cluster */
    const char *constraint;
};

static void view_free(struct view *v)
{
    free(v->cl);
    free(v->host_cores);
    free(v->host_procs);
    free(v->hostbuf);
    memset(v, 0, sizeof *v);
}

/* a drained node is no host for new parallel jobs (drain.c) */
static bool is_host(const struct node *n)
{
    return n->active && n->procs && !n->drain;
}

static bool admitted(const struct pjob *j)
{
    return j->state == PJ_QUEUED || j->state == PJ_RUNNING || j->state == PJ_STOPPED;
}

static int cluster_index(const struct view *v, const char *name)
{
    for (uint32_t i = 0; i < v->ncl; i++)
        if (!strcmp(v->cl[i].name, name))
            return (int)i;
    return -1;
}

static void cluster_limits(const struct cluster *c, struct sd_cluster *k, uint64_t mem,
                           uint64_t disk)
{
    const struct sd_limit *l = sd_limit_find(&c->sd->set, k->name);
    k->mem_mb = l && l->mem_mb >= 0 ? (uint64_t)l->mem_mb : mem;
    k->disk_mb = l && l->disk_mb >= 0 ? (uint64_t)l->disk_mb : disk;
    k->max_jobs = l && l->jobs > 0 ? (uint64_t)l->jobs : 0;
}

/* Charges an admitted job to the clusters and hosts it uses. */
static void view_charge(struct view *v, const struct cluster *c, const struct pjob *j)
{
    bool *seen = calloc(v->ncl + 1, 1);
    /* a placed job (PSUBMIT hosts) may put a different number of ranks on each host */
    uint32_t *per = j->placed && j->ranks ? calloc(j->nhosts + 1, sizeof *per) : NULL;
    for (uint32_t r = 0; per && r < j->rq.nprocs; r++)
        if (j->ranks[r].host < j->nhosts)
            per[j->ranks[r].host]++;
    for (uint32_t h = 0; h < j->nhosts; h++) {
        uint32_t n = j->hosts[h], np = per ? per[h] : j->rq.ppn;
        if (n >= c->nnodes)
            continue;
        v->host_procs[n] += np;
        if (v->constraint && !v->host_cores[n]) /* a host left out of this view */
            continue;
        char name[SD_NAME];
        double sp;
        scored_node_class(c, &c->nodes[n], name, sizeof name, &sp);
        int k = cluster_index(v, name);
        if (k < 0)
            continue;
        v->cl[k].procs += np;
        if (seen && !seen[k]) {
            seen[k] = true;
            v->cl[k].held_mem += j->mem_lim;
            v->cl[k].held_disk += j->disk_lim;
            v->cl[k].njobs++;
        }
    }
    free(per);
    free(seen);
}

/*
 * Groups the active hosts into clusters (by name from scored_node_class), with default
 * limits from the hosts (smallest memory, smallest free disk), console limits on top,
 * and the load and held limits of the admitted jobs. Returns 0 or -1 (out of memory).
 */
static int view_build(struct cluster *c, struct view *v, const char *constraint)
{
    memset(v, 0, sizeof *v);
    v->constraint = constraint;
    v->cl = calloc(c->nnodes + 1, sizeof *v->cl);
    v->host_cores = calloc(c->nnodes + 1, sizeof *v->host_cores);
    v->host_procs = calloc(c->nnodes + 1, sizeof *v->host_procs);
    v->hostbuf = calloc(2 * (size_t)c->nnodes + 1, sizeof *v->hostbuf);
    uint64_t *mem = calloc(c->nnodes + 1, sizeof *mem), *disk = calloc(c->nnodes + 1, 8);
    if (!v->cl || !v->host_cores || !v->host_procs || !v->hostbuf || !mem || !disk) {
        free(mem);
        free(disk);
        view_free(v);
        return -1;
    }
    uint32_t used = 0;
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < c->nnodes; i++) {
            const struct node *n = &c->nodes[i];
            char name[SD_NAME];
            double sp;
            if (!is_host(n) || !constraint_match(constraint, n->features))
                continue;
            scored_node_class(c, n, name, sizeof name, &sp);
            int k = cluster_index(v, name);
            if (pass == 0) {
                v->host_cores[i] = n->slots ? n->slots : n->cores;
                if (k < 0) {
                    k = (int)v->ncl++;
                    snprintf(v->cl[k].name, SD_NAME, "%s", name);
                    v->cl[k].speed = sp;
                    mem[k] = n->mem_mb;
                    disk[k] = n->disk_mb;
                }
                struct sd_cluster *K = &v->cl[k];
                K->nhosts++;
                K->cores += v->host_cores[i];
                K->speed = sp < K->speed ? sp : K->speed;
                mem[k] = n->mem_mb < mem[k] ? n->mem_mb : mem[k];
                disk[k] = n->disk_mb < disk[k] ? n->disk_mb : disk[k];
            } else {
                if (!v->cl[k].hosts) {
                    v->cl[k].hosts = v->hostbuf + used;
                    used += v->cl[k].nhosts;
                    v->cl[k].nhosts = 0;
                }
                v->cl[k].hosts[v->cl[k].nhosts++] = i;
            }
        }
    /* the cluster of clusters: every host, the slowest speed, the smallest limits */
    struct sd_cluster *o = &v->coc;
    snprintf(o->name, sizeof o->name, "%s", SD_COC);
    o->hosts = v->hostbuf + used;
    o->speed = 1e18;
    for (uint32_t k = 0; k < v->ncl; k++) {
        cluster_limits(c, &v->cl[k], mem[k], disk[k]);
        for (uint32_t h = 0; h < v->cl[k].nhosts; h++)
            o->hosts[o->nhosts++] = v->cl[k].hosts[h];
        o->cores += v->cl[k].cores;
        o->speed = v->cl[k].speed < o->speed ? v->cl[k].speed : o->speed;
        o->mem_mb = k == 0 || v->cl[k].mem_mb < o->mem_mb ? v->cl[k].mem_mb : o->mem_mb;
        o->disk_mb = k == 0 || v->cl[k].disk_mb < o->disk_mb ? v->cl[k].disk_mb : o->disk_mb;
    }
    free(mem);
    free(disk);
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++)
        if (admitted(c->sd->jobs[i]))
            view_charge(v, c, c->sd->jobs[i]);
    for (uint32_t k = 0; k < v->ncl; k++) {
        o->procs += v->cl[k].procs;
        o->held_mem = v->cl[k].held_mem > o->held_mem ? v->cl[k].held_mem : o->held_mem;
        o->held_disk = v->cl[k].held_disk > o->held_disk ? v->cl[k].held_disk : o->held_disk;
    }
    return 0;
}

/* ---- admission ---- */

/*
 * Tries to give job j a cluster and hosts now. Returns 0 (j is queued), or -1 with the
 * reason in why (never set when waiting cannot help).
 */
static int admit(struct cluster *c, struct pjob *j, char *why, size_t n, bool *never)
{
    struct view v;
    struct sd_admission a;
    *never = false;
    if (view_build(c, &v, j->constraint) < 0) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    if (j->constraint && v.ncl == 0) { /* issue 27: hosts may join later (waits) */
        snprintf(why, n,
                 "no active host has the features of constraint %s (gridnode nodes lists "
                 "them)",
                 j->constraint);
        view_free(&v);
        return -1;
    }
    const char **feat = NULL; /* constraint counts (issue 27): each node's features */
    bool coc_ok = true;
    if (constraint_hosts_min(j->constraint) > 0) {
        if (!(feat = calloc(c->nnodes + 1, sizeof *feat))) {
            snprintf(why, n, "out of memory");
            view_free(&v);
            return -1;
        }
        for (uint32_t i = 0; i < c->nnodes; i++)
            feat[i] = c->nodes[i].features;
        if (!sd_counts_filter(v.cl, &v.ncl, j->rq.coc ? &v.coc : NULL, j->rq.ppn, v.host_cores,
                              feat, j->constraint, why, n, &coc_ok)) {
            free(feat);
            view_free(&v);
            return -1; /* hosts may join or change: waits */
        }
    }
    int rc = sd_admit(v.cl, v.ncl, coc_ok ? &v.coc : NULL, &c->sd->set.q[j->queue], &j->rq,
                      v.host_cores, &a);
    if (rc < 0) {
        snprintf(why, n, "%s", a.why);
        *never = a.never;
        free(feat);
        view_free(&v);
        return -1;
    }
    const struct sd_cluster *k = a.cluster == (int)v.ncl ? &v.coc : &v.cl[a.cluster];
    uint32_t need = sd_hosts_needed(&j->rq);
    uint32_t *hosts = calloc(need + 1, sizeof *hosts);
    int prc = !hosts ? -1
              : feat ? sd_pick_hosts_counted(k, need, j->rq.ppn, v.host_cores, v.host_procs, feat,
                                             j->constraint, hosts)
                     : sd_pick_hosts(k, need, j->rq.ppn, v.host_cores, v.host_procs, hosts);
    free(feat);
    if (prc < 0 || (!j->ranks && !(j->ranks = calloc(j->rq.nprocs, sizeof *j->ranks)))) {
        free(hosts);
        snprintf(why, n, "hosts: cannot place the job on cluster %s", k->name);
        view_free(&v);
        return -1;
    }
    free(j->hosts);
    j->hosts = hosts;
    j->nhosts = need;
    for (uint32_t r = 0; r < j->rq.nprocs; r++)
        j->ranks[r].host = r / j->rq.ppn;
    snprintf(j->cluster, sizeof j->cluster, "%s", k->name);
    j->mem_lim = a.mem_lim;
    j->disk_lim = a.disk_lim;
    const struct sd_queue *q = &c->sd->set.q[j->queue];
    j->max_cpu_s = q->max_cpu_s;
    if (j->req_cpu_s && (!j->max_cpu_s || j->req_cpu_s < j->max_cpu_s))
        j->max_cpu_s = j->req_cpu_s;
    j->state = PJ_QUEUED;
    j->reason[0] = '\0';
    view_free(&v);
    log_info("parallel job %llu admitted to cluster %s (%u host(s), queue %u)",
             (unsigned long long)j->id, j->cluster, need, j->queue);
    return 0;
}

/*
 * Memory and disk limits held by the admitted jobs, per node index (MiB): one pass
 * over the live jobs, so checking every host of a wide job stays linear.
 */
static int nodes_held(const struct cluster *c, uint64_t **mem, uint64_t **disk)
{
    *mem = calloc(c->nnodes + 1, sizeof **mem);
    *disk = calloc(c->nnodes + 1, sizeof **disk);
    if (!*mem || !*disk) {
        free(*mem);
        free(*disk);
        return -1;
    }
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        for (uint32_t h = 0; admitted(j) && h < j->nhosts; h++)
            if (j->hosts[h] < c->nnodes) {
                (*mem)[j->hosts[h]] += j->mem_lim;
                (*disk)[j->hosts[h]] += j->disk_lim;
            }
    }
    return 0;
}

/* The active, procs-capable session named name; else why not in why. */
static int placed_node(const struct cluster *c, const msgpack_object *o, char *why, size_t n)
{
    int other = -1;
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const struct node *nd = &c->nodes[i];
        if (strlen(nd->name) != o->via.str.size ||
            memcmp(nd->name, o->via.str.ptr, o->via.str.size))
            continue;
        if (is_host(nd))
            return (int)i;
        other = (int)i;
    }
    if (other < 0)
        snprintf(why, n, "host %.*s: unknown (no node of that name has joined)",
                 (int)(o->via.str.size > 200 ? 200 : o->via.str.size), o->via.str.ptr);
    else
        snprintf(why, n, "host %s: %s", c->nodes[other].name,
                 c->nodes[other].active ? "does not run parallel processes" : "inactive");
    text_fix(why);
    return -1;
}

/* Checks that placed job j fits on its hosts now: cores, memory, disk. */
static int placed_fits(struct cluster *c, struct pjob *j, const uint32_t *cnt, char *why, size_t n)
{
    struct view v;
    uint64_t *hmem, *hdisk;
    if (nodes_held(c, &hmem, &hdisk) < 0) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    if (view_build(c, &v, NULL) < 0) {
        free(hmem);
        free(hdisk);
        snprintf(why, n, "out of memory");
        return -1;
    }
    int rc = 0;
    for (uint32_t h = 0; h < j->nhosts && rc == 0; h++) {
        uint32_t x = j->hosts[h];
        const struct node *nd = &c->nodes[x];
        uint32_t fr = v.host_cores[x] > v.host_procs[x] ? v.host_cores[x] - v.host_procs[x] : 0;
        uint64_t mem = hmem[x], disk = hdisk[x];
        if (cnt[h] > fr) {
            snprintf(why, n, "host %s: %u free core(s) of %u, the job needs %u", nd->name, fr,
                     v.host_cores[x], cnt[h]);
            rc = -1;
        } else if (j->rq.mem_mb && nd->mem_mb &&
                   (mem > nd->mem_mb || nd->mem_mb - mem < j->rq.mem_mb)) {
            snprintf(why, n, "host %s: %llu MiB of memory free of %llu, the job needs %llu",
                     nd->name, (unsigned long long)(mem > nd->mem_mb ? 0 : nd->mem_mb - mem),
                     (unsigned long long)nd->mem_mb, (unsigned long long)j->rq.mem_mb);
            rc = -1;
        } else if (j->rq.disk_mb && (disk > nd->disk_mb || nd->disk_mb - disk < j->rq.disk_mb)) {
            snprintf(why, n, "host %s: %llu MiB of disk free of %llu, the job needs %llu", nd->name,
                     (unsigned long long)(disk > nd->disk_mb ? 0 : nd->disk_mb - disk),
                     (unsigned long long)nd->disk_mb, (unsigned long long)j->rq.disk_mb);
            rc = -1;
        }
    }
    view_free(&v);
    free(hmem);
    free(hdisk);
    return rc;
}

/*
 * PSUBMIT with "hosts": rank i on the session named hl[i]. Admission is immediate and
 * final; an admitted job runs at once (no waiting, no time slicing). Returns 0, or -1
 * with the host and the missing resource in why.
 */
static int admit_placed(struct cluster *c, struct pjob *j, const msgpack_object *hl, char *why,
                        size_t n)
{
    uint32_t np = j->rq.nprocs, nh = 0, ppn = 0;
    uint32_t *hosts = calloc(np + 1, sizeof *hosts), *cnt = calloc(np + 1, sizeof *cnt);
    int rc = -1;
    if (!hosts || !cnt || (!j->ranks && !(j->ranks = calloc(np, sizeof *j->ranks)))) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    for (uint32_t r = 0; r < np; r++) {
        int x = placed_node(c, &hl->via.array.ptr[r], why, n);
        uint32_t k = 0;
        if (x < 0)
            goto out;
        while (k < nh && hosts[k] != (uint32_t)x)
            k++;
        if (k == nh)
            hosts[nh++] = (uint32_t)x;
        j->ranks[r].host = k;
        ppn = ++cnt[k] > ppn ? cnt[k] : ppn;
    }
    free(j->hosts);
    j->hosts = hosts;
    j->nhosts = nh;
    hosts = NULL;
    j->rq.ppn = ppn;
    j->mem_lim = j->rq.mem_mb;
    j->disk_lim = j->rq.disk_mb;
    if (placed_fits(c, j, cnt, why, n) < 0)
        goto out;
    double sp;
    scored_node_class(c, &c->nodes[j->hosts[0]], j->cluster, sizeof j->cluster, &sp);
    const struct sd_queue *q = &c->sd->set.q[j->queue];
    j->max_cpu_s = q->max_cpu_s;
    if (j->req_cpu_s && (!j->max_cpu_s || j->req_cpu_s < j->max_cpu_s))
        j->max_cpu_s = j->req_cpu_s;
    j->placed = true;
    j->state = PJ_RUNNING;
    j->started_ms = j->slice_ms = j->last_ran_ms = wall_now_ms();
    j->reason[0] = '\0';
    rc = 0;
out:
    free(hosts);
    free(cnt);
    return rc;
}

/*
 * Is user a member of the Unix group? (K5.) With CURVE on, user is the requester's
 * identity (daemon/access.c sets it) and its groups are those of its authorized-keys
 * entry; a user without an entry (named by a peer role acting for it) falls back to
 * the host's groups (NSS), as without CURVE.
 */
static bool group_member(const char *user, const char *group)
{
    bool known;
    bool in = curve_user_in_group(user, group, &known);
    if (known)
        return in;
    struct group *g = getgrnam(group);
    struct passwd *pw = getpwnam(user);
    if (!g || !pw)
        return false;
    int ng = 256;
    gid_t groups[256];
    if (getgrouplist(user, pw->pw_gid, groups, &ng) < 0)
        return false;
    for (int i = 0; i < ng; i++)
        if (groups[i] == g->gr_gid)
            return true;
    return false;
}

/* ---- ending jobs ---- */

/*
 * submit -p --group (issue 27): a user identity's group was checked against its
 * authorized-keys entry (daemon/access.c). Otherwise (plain, or an administrator or
 * peer naming the user) the group is only a name the request gives: the user's keys
 * entry decides when it has one; else, as the queue group rules ask this host (NSS),
 * the group must be a group here and the user, when this host knows it, a member.
 * NULL, or the reason in why.
 */
static const char *plain_group_problem(const struct pjob *j, char *why, size_t wl)
{
    const struct curve_ident *id = curve_current();
    bool known;
    if ((id && id->kind == CURVE_USER) || !j->group || !j->group[0])
        return NULL;
    bool in = curve_user_in_group(j->user, j->group, &known);
    if (known && !in)
        snprintf(why, wl, "user '%s' is not a member of group '%s' (its authorized-keys entry)",
                 j->user, j->group);
    else if (known)
        return NULL;
    else if (!getgrnam(j->group))
        snprintf(why, wl,
                 "group '%s' is not a group of the cluster manager's host (getent group lists "
                 "them); leave --group out, or name one",
                 j->group);
    else if (j->user[0] && getpwnam(j->user) && !group_member(j->user, j->group))
        snprintf(why, wl, "user '%s' is not a member of group '%s' on the cluster manager's host",
                 j->user, j->group);
    else
        return NULL;
    return why;
}

/* Ends j in state st with the reason fmt (a no-op when j has ended); marks a reschedule. */
void scored_job_end(struct cluster *c, struct pjob *j, enum pj_state st, const char *fmt, ...)
{
    int64_t now = wall_now_ms();
    va_list ap;
    if (PJ_TERMINAL(j->state))
        return;
    if (j->state == PJ_RUNNING)
        j->run_ms += now - j->slice_ms;
    va_start(ap, fmt);
    vsnprintf(j->reason, sizeof j->reason, fmt, ap);
    va_end(ap);
    text_fix(j->reason); /* it may quote peer-given names */
    j->state = st;
    j->finished_ms = now;
    j->dirty = true;
    c->sd->resched = true;
    log_info("parallel job %llu %s%s%s", (unsigned long long)j->id, pj_state_name(st),
             j->reason[0] ? ": " : "", j->reason);
}

void scored_job_lost(struct cluster *c, struct pjob *j, const char *fmt, ...)
{
    char why[200];
    va_list ap;
    if (PJ_TERMINAL(j->state) || j->state == PJ_REQUEUEING)
        return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!j->placed && j->requeues < (uint32_t)c->cfg.sd_lost_requeues && !scored_requeue(c, j)) {
        if (j->state == PJ_REQUEUEING) /* else already waiting again */
            snprintf(j->reason, sizeof j->reason, "requeued after a node failure: %.200s", why);
        log_info("parallel job %llu requeued after a node failure (%u of %ld): %s",
                 (unsigned long long)j->id, j->requeues + (j->state == PJ_REQUEUEING),
                 c->cfg.sd_lost_requeues, why);
        return;
    }
    j->lost = true;
    scored_job_end(c, j, PJ_FAILED, "%s", why);
}

void scored_cancel(struct cluster *c, struct pjob *j)
{
    scored_job_end(c, j, PJ_CANCELLED, "cancelled by the user");
}

void scored_node_left(struct cluster *c, struct node *n, const char *why)
{
    uint32_t me = (uint32_t)(n - c->nodes);
    for (uint32_t i = c->sd ? c->sd->live_from : 0; c->sd && i < c->sd->njobs; i++) {
        struct pjob *j = c->sd->jobs[i];
        if (!admitted(j))
            continue;
        for (uint32_t h = 0; h < j->nhosts; h++)
            if (j->hosts[h] == me) {
                scored_job_lost(c, j, "host %s %s", n->name, why);
                break;
            }
    }
}

/* ---- the slot decision and the checks of each tick ---- */

/* Wall clock, CPU time and residence of an admitted job: kill or demote. */
void scored_check_limits(struct cluster *c, struct pjob *j, int64_t now)
{
    int64_t run = j->run_ms + (j->state == PJ_RUNNING ? now - j->slice_ms : 0);
    if (j->limit_s && run > (int64_t)j->limit_s * 1000) {
        scored_job_end(c, j, PJ_KILLED,
                       "wall-clock limit: ran %.1f s (time stopped not "
                       "counted), over its limit of %llu s",
                       (double)run / 1000.0, (unsigned long long)j->limit_s);
        return;
    }
    const struct sd_queue *q = &c->sd->set.q[j->queue];
    switch (sd_cpu_check(j->cpu_s, j->res_base, j->max_cpu_s, q->residence_s, j->queue,
                         c->sd->set.nq)) {
    case SD_CPU_KILL:
        scored_job_end(c, j, PJ_KILLED, "CPU time: %.1f s over the maximum of %llu s", j->cpu_s,
                       (unsigned long long)j->max_cpu_s);
        break;
    case SD_CPU_DEMOTE:
        j->queue++;
        j->demotions++;
        snprintf(j->reason, sizeof j->reason,
                 "moved to queue %u after %.1f s CPU time in "
                 "queue %u (residence %llu s)",
                 j->queue, j->cpu_s - j->res_base, j->queue - 1,
                 (unsigned long long)q->residence_s);
        j->res_base = j->cpu_s;
        j->dirty = true;
        c->sd->resched = true;
        log_info("parallel job %llu: %s", (unsigned long long)j->id, j->reason);
        break;
    case SD_CPU_OK:
        break;
    }
}

static bool hosts_up(const struct cluster *c, const struct pjob *j)
{
    for (uint32_t h = 0; h < j->nhosts; h++)
        if (j->hosts[h] >= c->nnodes || !c->nodes[j->hosts[h]].active)
            return false;
    return true;
}

/* Waiting jobs whose queue is not disabled try admission again, oldest first. */
static void retry_waiting(struct cluster *c)
{
    for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
        struct pjob *j = c->sd->jobs[i];
        char why[256];
        bool never;
        if (j->state != PJ_WAITING || j->dep) /* dep: jobdep.c releases it first */
            continue;
        if (admit(c, j, why, sizeof why, &never) == 0) {
            j->dirty = true;
        } else if (strcmp(why, j->reason)) {
            snprintf(j->reason, sizeof j->reason, "%s", why);
            j->dirty = true;
        }
    }
}

static void apply_slot(struct cluster *c, struct pjob *j, bool run, int64_t now)
{
    if (run && j->state != PJ_RUNNING) {
        j->state = PJ_RUNNING;
        j->slice_ms = now;
        j->last_ran_ms = now;
        if (!j->started_ms)
            j->started_ms = now;
        j->dirty = true;
    } else if (!run && j->state == PJ_RUNNING) {
        j->state = PJ_STOPPED;
        j->run_ms += now - j->slice_ms;
        j->last_ran_ms = now;
        j->dirty = true;
    }
    (void)c;
}

void scored_schedule(struct cluster *c, bool rotate)
{
    struct scored *sd = c->sd;
    int64_t now = wall_now_ms();
    sd->resched = false;
    for (uint32_t i = sd->live_from; i < sd->njobs; i++) {
        struct pjob *j = sd->jobs[i];
        if (j->state == PJ_REQUEUEING) /* ranks on hosts that died count as gone */
            scored_requeue_progress(c, j);
        if (admitted(j) && j->started_ms && !hosts_up(c, j))
            scored_job_lost(c, j, "a host of the job became inactive");
        else if (admitted(j))
            scored_check_limits(c, j, now);
    }
    retry_waiting(c);
    struct sd_slot_job *s = calloc(sd->njobs - sd->live_from + 1, sizeof *s);
    struct pjob **map = calloc(sd->njobs - sd->live_from + 1, sizeof *map);
    uint32_t n = 0;
    if (!s || !map)
        goto out;
    for (uint32_t i = sd->live_from; i < sd->njobs; i++) {
        struct pjob *j = sd->jobs[i];
        if (!admitted(j))
            continue;
        if (j->placed) { /* placed by the batch role: runs until it ends, never sliced */
            apply_slot(c, j, true, now);
            continue;
        }
        const struct sd_queue *q = &sd->set.q[j->queue];
        s[n] = (struct sd_slot_job){j->id,
                                    j->queue,
                                    q->state == SDQ_ACTIVATED && hosts_up(c, j),
                                    j->state == PJ_RUNNING,
                                    j->started_ms != 0,
                                    q->mode,
                                    j->last_ran_ms,
                                    j->nhosts,
                                    j->hosts,
                                    false};
        map[n++] = j;
    }
    sd_schedule(s, n, c->nnodes, rotate);
    for (uint32_t i = 0; i < n; i++)
        apply_slot(c, map[i], s[i].run, now);
out:
    free(s);
    free(map);
}

/* ---- settled jobs ---- */

/*
 * A job is settled when it has ended, its end is saved and published, and no process
 * of it is left on any node (none started and not seen exiting, none named by a node's
 * last PSYNC): no per-turn or per-PSYNC work concerns it any more.
 */
static bool settled(const struct pjob *j)
{
    if (!PJ_TERMINAL(j->state) || j->dirty || j->ev_state != (uint8_t)(j->state + 1))
        return false;
    for (uint32_t r = 0; j->ranks && r < j->rq.nprocs; r++)
        if (j->ranks[r].st == PR_STARTED || j->ranks[r].held)
            return false;
    return true;
}

void scored_settle(struct cluster *c)
{
    struct scored *sd = c->sd;
    while (sd->live_from < sd->njobs && settled(sd->jobs[sd->live_from]))
        sd->live_from++;
}

/* ---- PSUBMIT ---- */

/* Replaces r's reply with an ERROR of code and the formatted text. */
void scored_reply_err(struct request *r, int code, const char *fmt, ...)
{
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    wire_buf_reset(r->reply);
    wire_error_msg(r->reply, r->msg->id, code, "%s", text);
}

static struct pjob *job_from_msg(struct cluster *c, const msgpack_object *m)
{
    const msgpack_object *argv = wire_get(m, "argv");
    struct pjob *j = calloc(1, sizeof *j);
    if (!j || !(j->argv = calloc(argv->via.array.size + 1, sizeof *j->argv)))
        goto fail;
    j->argc = argv->via.array.size;
    for (uint32_t i = 0; i < j->argc; i++)
        if (!(j->argv[i] =
                  strndup(argv->via.array.ptr[i].via.str.ptr, argv->via.array.ptr[i].via.str.size)))
            goto fail;
    j->name = wire_get_strdup(m, "name");
    j->user = wire_get_strdup(m, "user");
    j->group = wire_get_strdup(m, "group");
    if (wire_get(m, "key") && !(j->key = wire_get_strdup(m, "key")))
        goto fail;
    if (!j->name && !(j->name = strdup("")))
        goto fail;
    if (!j->user && !(j->user = strdup("")))
        goto fail;
    if (!j->group && !(j->group = strdup("")))
        goto fail;
    j->shell = wire_get_bool(m, "shell", false);
    j->wait = wire_get_bool(m, "wait", false);
    j->network = wire_get_bool(m, "network", false); /* submit --network (issue 23) */
    uint32_t nenv;
    int eoom;
    j->env = jobenv_dup(m, &nenv, &eoom); /* --export / --chdir (issue 15) */
    if (eoom || (wire_get(m, "chdir") && !(j->cwd = wire_get_strdup(m, "chdir"))))
        goto fail;
    j->rq.nprocs = (uint32_t)wire_get_u64(m, "procs", 1);
    j->rq.ppn = (uint32_t)wire_get_u64(m, "ppn", 1);
    j->rq.mem_mb = wire_get_u64(m, "mem_mb", 0);
    j->rq.disk_mb = wire_get_u64(m, "disk_mb", 0);
    j->rq.coc = wire_get_bool(m, "coc", false);
    j->req_cpu_s = wire_get_u64(m, "cpu_s", 0);
    j->limit_s = wire_get_u64(m, "limit_s", 0);
    j->queue = j->queue0 = j->rq.queue =
        (uint32_t)wire_get_u64(m, "queue", (uint64_t)c->cfg.sd_default_queue);
    j->submitted_ms = wall_now_ms();
    j->id = c->next_job;
    return j;
fail:
    scored_job_free(j);
    return NULL;
}

static const char *psubmit_invalid(const struct cluster *c, const msgpack_object *m)
{
    const char *bad = jobargv_problem(wire_get(m, "argv")); /* as SUBMIT, batch and meta */
    if (bad)
        return bad;
    if (wire_get_u64(m, "procs", 1) == 0 || wire_get_u64(m, "ppn", 1) == 0)
        return "procs and ppn must be at least 1";
    if (wire_get_u64(m, "queue", (uint64_t)c->cfg.sd_default_queue) >= c->sd->set.nq)
        return "no such queue";
    const msgpack_object *hl = wire_get(m, "hosts");
    if (hl && hl->via.array.size != wire_get_u64(m, "procs", 1))
        return "hosts must name exactly one host per process (as many names as procs)";
    for (uint32_t i = 0; hl && i < hl->via.array.size; i++)
        if (hl->via.array.ptr[i].via.str.size == 0 || hl->via.array.ptr[i].via.str.size >= 64)
            return "a name in hosts is empty or longer than 63 bytes";
    /* issue 11: GPUs and report deadlines are for bag-of-tasks jobs (SUBMIT) only */
    if (wire_get_u64(m, "gpus", 0) > 0 || wire_get(m, "gpu_type"))
        return "parallel jobs cannot ask for GPUs (gpus, gpu_type: submit a bag of tasks)";
    if (wire_get(m, "deadline_s"))
        return "parallel jobs have no report deadline (deadline_s is for bags of tasks); use "
               "limit_s for a time limit";
    static char ewhy[160]; /* the loop is single-threaded; read before the next request */
    if (jobenv_check(m, ewhy, sizeof ewhy) < 0)
        return ewhy;
    return NULL;
}

void h_psubmit(struct cluster *c, struct request *r)
{
    const msgpack_object *m = r->msg->root;
    const char *bad = psubmit_invalid(c, m);
    char why[256];
    if (!bad && wire_get(m, "dependency") && wire_get(m, "hosts"))
        bad = "dependency cannot be given with hosts (a job placed on named hosts starts at "
              "once)";
    bool never;
    if (!bad)
        bad = subkey_invalid(m);
    if (bad) {
        scored_reply_err(r, WE_INVALID, "PSUBMIT refused: %s (queues are 0..%u)", bad,
                         c->sd->set.nq - 1);
        return;
    }
    /* issue 26: as SUBMIT's, a "task" naming a rank */
    if ((bad = files_par_check(c, m, why, sizeof why))) {
        scored_reply_err(r, WE_INVALID, "PSUBMIT refused: %s", bad);
        return;
    }
    struct pjob *j = subkey_find_pjob(c, m);
    if (j) { /* a retry of a submission that was stored: the same job again */
        log_info("parallel job %llu: PSUBMIT repeated with the same key, not stored again",
                 (unsigned long long)j->id);
        wire_begin(r->reply, WT_SUBMITTED, r->msg->id, 5);
        wire_put_u64(r->reply, "job", j->id);
        wire_put_str(r->reply, "state", pj_state_name(j->state));
        wire_put_str(r->reply, "cluster", j->cluster);
        wire_put_str(r->reply, "reason", j->reason);
        wire_put_bool(r->reply, "repeat", true);
        return;
    }
    j = job_from_msg(c, m);
    if (j && files_par_attach(j, m) < 0)
        scored_job_free(j), j = NULL;
    if (!j) {
        c->turn_failed = true;
        scored_reply_err(r, WE_STORAGE, "out of memory; nothing was changed, retry later");
        return;
    }
    const struct sd_queue *q = &c->sd->set.q[j->queue];
    if (q->state == SDQ_DISABLED) {
        scored_reply_err(r, WE_REFUSED, "queue %u is disabled", j->queue);
        goto refused;
    }
    if (q->group[0] && !group_member(j->user, q->group)) {
        scored_reply_err(r, WE_REFUSED,
                         "queue %u accepts only members of group %s; user '%s' is not "
                         "one on this host",
                         j->queue, q->group, j->user);
        goto refused;
    }
    const msgpack_object *hl = wire_get(m, "hosts");
    /* a job placed on named hosts comes from a batch scheduler (PSUBMIT(hosts)): its
       group is that role's Maui credential, which its own rules judged */
    if (!hl && plain_group_problem(j, why, sizeof why)) { /* issue 27 */
        scored_reply_err(r, WE_INVALID, "PSUBMIT refused: %s", why);
        goto refused;
    }
    if (wire_get_constraint(m, &j->constraint, why, sizeof why) < 0 || /* issue 27 */
        constraint_job_ok(j->constraint, true, hl ? j->rq.nprocs : sd_hosts_needed(&j->rq), why,
                          sizeof why) < 0) {
        scored_reply_err(r, WE_INVALID, "PSUBMIT refused: %s", why);
        goto refused;
    }
    if (jobdep_submit(c, m, &j->dep, why, sizeof why) < 0) { /* issue 27 */
        scored_reply_err(r, WE_INVALID, "PSUBMIT refused: %s", why);
        goto refused;
    }
    if (j->dep) { /* waits; admission is tried once the dependency holds (jobdep.c) */
        j->state = PJ_WAITING;
        cluster_dep_reason(j->dep, j->reason, sizeof j->reason);
    } else if (hl && admit_placed(c, j, hl, why, sizeof why) < 0) {
        scored_reply_err(r, WE_REFUSED, "cannot place the job on the hosts named: %s", why);
        goto refused;
    } else if (!hl && admit(c, j, why, sizeof why, &never) < 0) {
        if (!j->wait) {
            scored_reply_err(r, WE_REFUSED, "no cluster can take the job: %s", why);
            goto refused;
        }
        j->state = PJ_WAITING;
        snprintf(j->reason, sizeof j->reason, "%s", why);
    }
    if (scored_job_add(c, j) < 0) {
        c->turn_failed = true;
        scored_reply_err(r, WE_STORAGE, "out of memory; nothing was changed, retry later");
        goto refused;
    }
    c->next_job++;
    c->meta_dirty = true;
    j->dirty = true;
    c->sd->resched = true;
    if (files_pckpt_from(c, j, m) < 0) /* issue 26: a batch role's run again */
        c->turn_failed = true;
    wire_begin(r->reply, WT_SUBMITTED, r->msg->id, 4);
    wire_put_u64(r->reply, "job", j->id);
    wire_put_str(r->reply, "state", pj_state_name(j->state));
    wire_put_str(r->reply, "cluster", j->cluster);
    wire_put_str(r->reply, "reason", j->reason);
    return;
refused:
    log_info("parallel job refused (user '%s', queue %u)", j->user, j->queue);
    scored_job_free(j);
}

/* ---- SD_INFO: the clusters as maps ---- */

void scored_pack_clusters(struct cluster *c, struct wire_buf *wb)
{
    uint64_t next;
    scored_pack_clusters_page(c, wb, 0, UINT64_MAX, SIZE_MAX, &next);
}

void scored_pack_clusters_page(struct cluster *c, struct wire_buf *out, uint64_t from,
                               uint64_t count, size_t max_bytes, uint64_t *next)
{
    struct view v;
    *next = 0;
    if (view_build(c, &v, NULL) < 0) {
        wire_pack_array(out, 0);
        return;
    }
    struct wire_buf page, *wb = &page;
    uint32_t n = 0, k;
    wire_buf_init(&page);
    for (k = from < v.ncl ? (uint32_t)from : v.ncl; k < v.ncl; k++) {
        if (n >= count || (n > 0 && page.sb.size >= max_bytes)) {
            *next = k;
            break;
        }
        n++;
        const struct sd_cluster *K = &v.cl[k];
        double load = K->cores ? (double)K->procs / (double)K->cores : 0;
        wire_pack_map(wb, 13);
        wire_put_str(wb, "name", K->name);
        wire_put_f64(wb, "speed", K->speed);
        wire_put_key(wb, "hosts");
        wire_pack_array(wb, K->nhosts);
        for (uint32_t h = 0; h < K->nhosts; h++)
            wire_pack_str(wb, c->nodes[K->hosts[h]].name);
        wire_put_u64(wb, "cores", K->cores);
        wire_put_u64(wb, "procs", K->procs);
        wire_put_f64(wb, "load", load);
        wire_put_f64(wb, "rel_load", load / (K->speed > 0 ? K->speed : 1));
        wire_put_u64(wb, "mem_mb", K->mem_mb);
        wire_put_u64(wb, "disk_mb", K->disk_mb);
        wire_put_u64(wb, "max_jobs", K->max_jobs);
        wire_put_u64(wb, "jobs", K->njobs);
        wire_put_u64(wb, "held_mem", K->held_mem);
        wire_put_u64(wb, "held_disk", K->held_disk);
    }
    wire_pack_array(out, n);
    msgpack_sbuffer_write(&out->sb, page.sb.data, page.sb.size);
    wire_buf_free(&page);
    view_free(&v);
}

/*
 * scored_ack.c - SCore-D resource management: the PSYNC_ACK a node gets (docs/wire.md 5.6),
 * the desired state of every parallel process it holds, for an answered PSYNC
 * (scored_psync.c) and a held one answered later (feed.c).
 */
#include <stdio.h>
#include <string.h>

#include "roles/cluster/files.h"
#include "roles/cluster/scored_int.h"

/* What the node should do with rank r of j; NULL: nothing to say (not started, not held). */
static const char *want(const struct pjob *j, const struct prank *p)
{
    if (p->st == PR_EXITED)
        return NULL;
    if (PJ_KILLS(j->state)) /* ended, or requeueing */
        return p->held || p->st == PR_STARTED ? "kill" : NULL;
    if (j->state == PJ_RUNNING)
        return "run";
    return p->held ? "stop" : NULL;
}

/*
 * Whether j's processes keep the host's network (issue 23, docs/security.md): always
 * when there are several (ranks talk to each other across hosts), else only when the job
 * asked (submit --network). A one-process job, which each element of a batch role's bag
 * job is, is then cut off like a bag task.
 */
static bool net_on(const struct pjob *j)
{
    return j->network || j->rq.nprocs > 1;
}

/*
 * One command; a start ("run" of a process the node did not report) carries its spec.
 * *left: the input entries this reply may still name (issue 26, FILES_PAR_INPUTS_MAX);
 * a start whose inputs would pass it goes without its spec (the node starts nothing
 * without one) and gets it in a later reply.
 */
static void pack_cmd(struct cluster *c, struct wire_buf *wb, const struct pjob *j, uint32_t r,
                     const char *w, uint32_t me, uint32_t *left)
{
    const struct prank *p = &j->ranks[r];
    bool spec = !p->held && !strcmp(w, "run");
    uint32_t nck = spec ? files_pckpt_cmd_nfields(c, j, r) : 0; /* reads its checkpoint */
    uint32_t nin = spec ? files_par_rank_inputs(j, r) + files_pckpt_cmd_files() : 0;
    if (nin > *left && *left < FILES_PAR_INPUTS_MAX)
        spec = false; /* the next reply */
    else
        *left -= nin < *left ? nin : *left;
    uint32_t nenv = 0;
    while (j->env && j->env[nenv])
        nenv++;
    wire_pack_map(
        wb, spec ? 7 + (j->cwd != NULL) + (j->mem_lim > 0) + files_par_cmd_nfields(j) + nck : 3);
    wire_put_u64(wb, "job", j->id);
    wire_put_u64(wb, "rank", r);
    wire_put_str(wb, "want", w);
    if (!spec)
        return;
    wire_put_strv(wb, "argv", j->argv, (uint32_t)j->argc);
    wire_put_bool(wb, "shell", j->shell);
    wire_put_bool(wb, "network", net_on(j)); /* always said: absent, a node keeps it on */
    char buf[4096];
    size_t len = 0;
    for (uint32_t h = 0; h < j->nhosts && len < sizeof buf; h++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", h ? "," : "",
                                j->hosts[h] < c->nnodes ? c->nodes[j->hosts[h]].name : "?");
    char e[6][4200];
    snprintf(e[0], sizeof e[0], "GRIDNODE_JOB=%llu", (unsigned long long)j->id);
    snprintf(e[1], sizeof e[1], "GRIDNODE_RANK=%u", r);
    snprintf(e[2], sizeof e[2], "GRIDNODE_SIZE=%u", j->rq.nprocs);
    snprintf(e[3], sizeof e[3], "GRIDNODE_PPN=%u", j->rq.ppn);
    snprintf(e[4], sizeof e[4], "GRIDNODE_HOSTS=%s", buf);
    snprintf(e[5], sizeof e[5], "GRIDNODE_NODE=%s", me < c->nnodes ? c->nodes[me].name : "");
    wire_put_key(wb, "env");
    wire_pack_array(wb, 6 + nenv);
    for (uint32_t i = 0; i < nenv; i++) /* --export (issue 15): ours come last and win */
        wire_pack_str(wb, j->env[i]);
    for (int i = 0; i < 6; i++)
        wire_pack_str(wb, e[i]);
    if (j->cwd)
        wire_put_str(wb, "chdir", j->cwd);
    if (j->mem_lim > 0) /* the node's cgroup for the job caps it (docs/security.md) */
        wire_put_u64(wb, "mem_mb", j->mem_lim);
    files_par_cmd_pack(j, r, wb);      /* issue 26: its inputs, the output globs */
    files_pckpt_cmd_pack(c, j, r, wb); /* and its checkpoint (files_pckpt.c) */
}

/* Would the node act on w for p (not already in that state as it reported)? */
static bool is_action(const struct prank *p, const char *w)
{
    if (!p->held)
        return true;
    return !((w[0] == 'r' && p->rep == 'r') || (w[0] == 's' && p->rep == 's'));
}

/*
 * Writes the PSYNC_ACK commands for node me: every rank it should run, stop or kill
 * (wb NULL: only counts). Returns how many of them the node would act on.
 */
static uint32_t pack_cmds(struct cluster *c, struct wire_buf *wb, uint32_t me)
{
    uint32_t count = 0, actions = 0, left = FILES_PAR_INPUTS_MAX;
    for (int pass = 0; pass < (wb ? 2 : 1); pass++) {
        if (pass == 1) {
            wire_put_key(wb, "procs");
            wire_pack_array(wb, count);
        }
        for (uint32_t i = c->sd->live_from; i < c->sd->njobs; i++) {
            const struct pjob *j = c->sd->jobs[i];
            if (j->state == PJ_WAITING || !j->ranks)
                continue;
            for (uint32_t r = 0; r < j->rq.nprocs; r++) {
                const struct prank *p = &j->ranks[r];
                const char *w = j->hosts[p->host] == me ? want(j, p) : NULL;
                if (!w)
                    continue;
                if (pass == 0) {
                    count++;
                    actions += is_action(p, w);
                } else {
                    pack_cmd(c, wb, j, r, w, me, &left);
                }
            }
        }
    }
    return actions;
}

void scored_psync_ack(struct cluster *c, struct wire_buf *wb, uint64_t id, uint32_t me)
{
    const struct node *n = &c->nodes[me];
    const struct sd_hostent *he = scored_hostent(c, n->name);
    struct request rr = {NULL, "", wb}, *r = &rr;
    wire_begin(r->reply, WT_PSYNC_ACK, id, 3);
    pack_cmds(c, r->reply, me);
    wire_put_u64(r->reply, "sync_ms", (uint64_t)c->cfg.sd_sync_ms);
    wire_put_key(r->reply, "watchfs");
    char wf[CONFIG_VALUE_MAX + 1], *save = NULL;
    uint32_t nw = 0;
    snprintf(wf, sizeof wf, "%s", he ? he->watchfs : "");
    for (char *t = strtok_r(wf, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
        nw++;
    wire_pack_array(r->reply, nw);
    snprintf(wf, sizeof wf, "%s", he ? he->watchfs : "");
    for (char *t = strtok_r(wf, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
        wire_pack_str(r->reply, t);
}

uint32_t scored_psync_actions(struct cluster *c, uint32_t me)
{
    return pack_cmds(c, NULL, me);
}

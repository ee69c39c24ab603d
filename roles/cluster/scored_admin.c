/*
 * scored_admin.c - the administrative side of SCore-D resource management: start-up
 * (hosts file, stored settings and jobs, the startup file of console commands), the
 * CONSOLE request (commands applied atomically and committed before the reply) and
 * SD_INFO (clusters and queues as maps, also used by the statistics page).
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "daemon/loop.h"
#include "lib/text.h"
#include "roles/cluster/scored_int.h"
#include "store/store.h"

/* ---- rendering (console text) ---- */

struct out {
    char *buf;
    size_t len, cap;
};

/* The whole output of one CONSOLE request is built up to CONSOLE_TEXT_MAX bytes; a
 * CONSOLE_OUT carries whole lines from "from" on, at most CONSOLE_PAGE_MAX bytes (the
 * reply's text stays under the 64 KiB str cap), and "next" when lines are left. */
#define CONSOLE_TEXT_MAX (64u << 20)
#define CONSOLE_PAGE_MAX 60000u

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct out *o, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap + (size_t)n + 1) * 2;
        if (cap > CONSOLE_TEXT_MAX) /* bounded; a reply carries one page of it */
            return;
        char *b = realloc(o->buf, cap);
        if (!b)
            return;
        o->buf = b;
        o->cap = cap;
    }
}

static void show_clusters(struct cluster *c, struct out *o)
{
    struct wire_buf wb;
    msgpack_unpacked up;
    size_t off = 0;
    wire_buf_init(&wb);
    scored_pack_clusters(c, &wb);
    msgpack_unpacked_init(&up);
    outf(o, "%-16s %6s %5s %5s %6s %10s %10s %6s %10s %10s\n", "CLUSTER", "SPEED", "HOSTS", "CORES",
         "LOAD", "MEM_MB", "DISK_MB", "JOBS", "HELD_MEM", "HELD_DISK");
    if (msgpack_unpack_next(&up, wb.sb.data, wb.sb.size, &off) == MSGPACK_UNPACK_SUCCESS)
        for (uint32_t i = 0; i < up.data.via.array.size; i++) {
            const msgpack_object *k = &up.data.via.array.ptr[i];
            char name[SD_NAME];
            wire_get_strbuf(k, "name", name, sizeof name);
            const msgpack_object *h = wire_get(k, "hosts");
            outf(o, "%-16s %6.2f %5u %5llu %6.2f %10llu %10llu %3llu/%-2llu %10llu %10llu\n", name,
                 wire_get_f64(k, "speed", 0), h ? h->via.array.size : 0,
                 (unsigned long long)wire_get_u64(k, "cores", 0), wire_get_f64(k, "load", 0),
                 (unsigned long long)wire_get_u64(k, "mem_mb", 0),
                 (unsigned long long)wire_get_u64(k, "disk_mb", 0),
                 (unsigned long long)wire_get_u64(k, "jobs", 0),
                 (unsigned long long)wire_get_u64(k, "max_jobs", 0),
                 (unsigned long long)wire_get_u64(k, "held_mem", 0),
                 (unsigned long long)wire_get_u64(k, "held_disk", 0));
        }
    msgpack_unpacked_destroy(&up);
    wire_buf_free(&wb);
}

static void show_hosts(struct cluster *c, struct out *o)
{
    outf(o, "%-14s %-16s %6s %5s %8s %8s %-6s %-8s\n", "HOST", "CLUSTER", "SPEED", "CORES",
         "MEM_MB", "DISK_MB", "ACTIVE", "ARCH");
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const struct node *n = &c->nodes[i];
        char cl[SD_NAME];
        double sp;
        if (!n->procs)
            continue;
        scored_node_class(c, n, cl, sizeof cl, &sp);
        outf(o, "%-14s %-16s %6.2f %5u %8llu %8llu %-6s %-8s\n", n->name, cl, sp,
             n->slots ? n->slots : n->cores, (unsigned long long)n->mem_mb,
             (unsigned long long)n->disk_mb, n->active ? "yes" : "no", n->arch);
    }
}

static void show_jobs(struct cluster *c, struct out *o)
{
    outf(o, "%6s %-10s %-9s %5s %5s %-12s %8s  %s\n", "JOB", "USER", "STATE", "QUEUE", "PROCS",
         "CLUSTER", "CPU_S", "REASON");
    for (uint32_t i = 0; i < c->sd->njobs; i++) {
        const struct pjob *j = c->sd->jobs[i];
        outf(o, "%6llu %-10s %-9s %5u %5u %-12s %8.1f  %s\n", (unsigned long long)j->id,
             j->user[0] ? j->user : "-", pj_state_name(j->state), j->queue, j->rq.nprocs,
             j->cluster[0] ? j->cluster : "-", j->cpu_s, j->reason);
    }
}

/* ---- CONSOLE ---- */

/*
 * Runs the commands of text (lines or ';'-separated) against a copy of the settings:
 * all or nothing. Returns 0 with the output in o and *changed set, or -1 with the
 * error in o (the settings untouched).
 */
static int console_run(struct cluster *c, const char *text, struct out *o, bool *changed,
                       bool apply)
{
    struct sd_settings t = c->sd->set;
    char *copy = strdup(text), *save = NULL, msg[300];
    int rc = 0, lineno = 0;
    *changed = false;
    if (!copy)
        return -1;
    for (char *line = strtok_r(copy, "\n;", &save); line; line = strtok_r(NULL, "\n;", &save)) {
        lineno++;
        switch (sd_console_line(&t, line, msg, sizeof msg)) {
        case SDC_ERROR:
            o->len = 0;
            outf(o, "command %d: %s", lineno, msg);
            rc = -1;
            goto out;
        case SDC_NOTHING:
            break;
        case SDC_CHANGED:
            *changed = true;
            outf(o, "ok: %s\n", msg);
            break;
        case SDC_QUEUES: {
            char buf[4096] = "";
            sd_console_queues(&t, buf, sizeof buf);
            outf(o, "%s", buf);
            break;
        }
        case SDC_CLUSTERS:
            show_clusters(c, o);
            break;
        case SDC_HOSTS:
            show_hosts(c, o);
            break;
        case SDC_JOBS:
            show_jobs(c, o);
            break;
        case SDC_HELP:
            outf(o, "%s", sd_console_help);
            break;
        }
    }
    if (*changed && apply)
        c->sd->set = t;
out:
    free(copy);
    return rc;
}

/*
 * Lines [from, ...) of the output o as one page: whole lines up to CONSOLE_PAGE_MAX
 * bytes (at least one line, cut on a character boundary if it alone is longer). Sets
 * *next to the first line left out, or 0 when none is.
 */
static void console_page(struct wire_buf *wb, const struct out *o, uint64_t from, uint64_t *next)
{
    const char *p = o->buf ? o->buf : "", *end = p + o->len;
    uint64_t line = 0;
    while (line < from && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
        line++;
    }
    const char *q = p;
    *next = 0;
    while (q < end) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        const char *e = nl ? nl + 1 : end;
        if ((size_t)(e - p) > CONSOLE_PAGE_MAX && q > p) {
            *next = line;
            break;
        }
        q = e;
        line++;
    }
    char *cut = NULL;
    size_t n = (size_t)(q - p);
    if (n > CONSOLE_PAGE_MAX && (cut = malloc(CONSOLE_PAGE_MAX + 1)))
        n = text_copy(cut, CONSOLE_PAGE_MAX + 1, p, n);
    wire_put_key(wb, "out");
    wire_pack_strn(wb, cut ? cut : p, n);
    free(cut);
}

void h_console(struct cluster *c, struct request *r)
{
    char *text = wire_get_strdup(r->msg->root, "cmd");
    /* a later page runs the commands again on a copy, for their output only: the
     * first page (from 0) applied and committed them */
    uint64_t from = wire_get_u64(r->msg->root, "from", 0);
    struct out o = {NULL, 0, 0};
    bool changed;
    outf(&o, "%s", "");
    if (!text || !o.buf) {
        free(text);
        free(o.buf);
        c->turn_failed = true;
        wire_buf_reset(r->reply);
        wire_error_msg(r->reply, r->msg->id, WE_STORAGE, "out of memory; retry later");
        return;
    }
    if (console_run(c, text, &o, &changed, from == 0) < 0) {
        wire_buf_reset(r->reply);
        wire_error_msg(r->reply, r->msg->id, WE_INVALID, "%.*s", 480, o.buf ? o.buf : "");
    } else {
        if (changed && from == 0) {
            c->sd->set_dirty = true;
            c->sd->resched = true;
            log_info("console: %s", text);
        }
        struct wire_buf page;
        uint64_t next;
        wire_buf_init(&page);
        console_page(&page, &o, from, &next);
        wire_begin(r->reply, WT_CONSOLE_OUT, r->msg->id, 1 + (next != 0));
        msgpack_sbuffer_write(&r->reply->sb, page.sb.data, page.sb.size);
        if (next)
            wire_put_u64(r->reply, "next", next);
        wire_buf_free(&page);
    }
    free(o.buf);
    free(text);
}

/* ---- SD_INFO ---- */

void scored_pack_queues(const struct cluster *c, struct wire_buf *wb)
{
    const struct sd_settings *s = &c->sd->set;
    wire_pack_array(wb, s->nq);
    for (uint32_t i = 0; i < s->nq; i++) {
        const struct sd_queue *q = &s->q[i];
        uint32_t njobs = 0;
        for (uint32_t k = c->sd->live_from; k < c->sd->njobs; k++)
            njobs += c->sd->jobs[k]->queue == i && !PJ_TERMINAL(c->sd->jobs[k]->state);
        wire_pack_map(wb, 9);
        wire_put_u64(wb, "queue", i);
        wire_put_str(wb, "state", sd_qstate_name(q->state));
        wire_put_str(wb, "mode", sd_qmode_name(q->mode));
        wire_put_u64(wb, "max_cpu_s", q->max_cpu_s);
        wire_put_u64(wb, "residence_s", q->residence_s);
        wire_put_u64(wb, "mem_pct", q->mem_pct);
        wire_put_u64(wb, "disk_pct", q->disk_pct);
        wire_put_str(wb, "group", q->group);
        wire_put_u64(wb, "jobs", njobs);
    }
}

/* SD_STATE is paged by clusters (docs/wire.md 6.8): "from" a cluster's position, a page
 * ends after "count" clusters or once it passes CLUSTER_LIST_MAX bytes; every page
 * carries all the queues. */
void h_sd_info(struct cluster *c, struct request *r)
{
    uint64_t from = wire_get_u64(r->msg->root, "from", 0);
    uint64_t count = wire_get_u64(r->msg->root, "count", 100000), next = 0;
    struct wire_buf rows;
    wire_buf_init(&rows);
    scored_pack_clusters_page(c, &rows, from, count ? count : 1, CLUSTER_LIST_MAX, &next);
    wire_begin(r->reply, WT_SD_STATE, r->msg->id, 2 + (next != 0));
    wire_put_key(r->reply, "clusters");
    msgpack_sbuffer_write(&r->reply->sb, rows.sb.data, rows.sb.size);
    wire_put_key(r->reply, "queues");
    scored_pack_queues(c, r->reply);
    if (next)
        wire_put_u64(r->reply, "next", next);
    wire_buf_free(&rows);
}

/* ---- start-up ---- */

static int run_rc(struct cluster *c, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024], msg[300];
    int lineno = 0;
    if (!f) {
        log_warn("cannot read the startup file %s", path);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        enum sd_cmd k = sd_console_line(&c->sd->set, line, msg, sizeof msg);
        if (k == SDC_ERROR) {
            log_warnx("%s:%d: %s", path, lineno, msg);
            fclose(f);
            return -1;
        }
        if (k == SDC_CHANGED)
            log_info("%s:%d: %s", path, lineno, msg);
    }
    fclose(f);
    return 0;
}

/* Reads the hosts file path into sd (hf, nhf); 0, or -1 with err saying whether the
 * file cannot be read or which line is wrong. */
static int read_hosts(struct scored *sd, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "queues.hosts: cannot read the hosts file '%s': %s", path,
                 strerror(errno));
        return -1;
    }
    int line = ini_parse_file(f, scored_hostline, sd);
    fclose(f);
    if (line != 0) {
        snprintf(err, errlen,
                 "%s:%d: bad hosts file line (sections are host names; keys cluster, "
                 "speed, watchfs)",
                 path, line);
        return -1;
    }
    return 0;
}

int scored_check_config(const struct cluster_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->sd_default_queue >= cfg->sd_queues) {
        snprintf(err, errlen, "queues.default (%ld) must be below queues.count (%ld)",
                 cfg->sd_default_queue, cfg->sd_queues);
        return -1;
    }
    if (cfg->sd_hosts[0]) {
        struct scored scratch = {0};
        int rc = read_hosts(&scratch, cfg->sd_hosts, err, errlen);
        free(scratch.hf);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int scored_open(struct cluster *c)
{
    struct scored *sd = c->sd;
    char err[512];
    sd->t_pjobs = store_table(c->store, "pjobs");
    sd->t_scored = store_table(c->store, "scored");
    sd->t_poutput = store_table(c->store, "poutput");
    sd->t_pckpt = store_table(c->store, "pckpt"); /* issue 26: files_pckpt.c */
    if (!c->cfg.sd_hosts[0])
        return 0;
    if (read_hosts(sd, c->cfg.sd_hosts, err, sizeof err) < 0) {
        log_warnx("%s", err);
        return -1;
    }
    log_info("hosts file %s: %u host(s)", c->cfg.sd_hosts, sd->nhf);
    return 0;
}

void scored_close(struct cluster *c)
{
    if (!c->sd)
        return;
    scored_free_state(c);
    free(c->sd->hf);
    free(c->sd);
    c->sd = NULL;
}

/* Applies the startup file once, on a state that never had it applied; commits. */
int scored_startup(struct cluster *c)
{
    if (!c->cfg.sd_rc[0] || c->sd->rc_applied)
        return 0;
    if (run_rc(c, c->cfg.sd_rc) < 0)
        return -1;
    c->sd->rc_applied = true;
    c->sd->set_dirty = true;
    if (scored_save_dirty(c) < 0 || store_commit(c->store) < 0) {
        log_warn("cannot save the settings of the startup file");
        return -1;
    }
    log_info("startup file %s applied", c->cfg.sd_rc);
    return 0;
}

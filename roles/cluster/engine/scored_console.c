/*
 * scored_console.c - the console command language (K9), pure: parsing one line and
 * applying it to the settings (queue states and attributes, cluster limits). The same
 * lines make up the startup file (scored.rc). Read-only commands are recognised here
 * and rendered by scored.c, which knows the hosts and jobs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roles/cluster/engine/scored.h"

const char sd_console_help[] =
    "console commands (one per line, or separated by ';'):\n"
    "  queues | clusters | hosts | jobs     show state\n"
    "  queue Q state disabled|enabled|activated\n"
    "  enable Q | disable Q | activate Q | deactivate Q\n"
    "  queue Q mode gang|exclusive\n"
    "  queue Q cpu SECONDS|unlimited        maximum CPU time of a job (summed over its processes)\n"
    "  queue Q residence SECONDS|unlimited  CPU time before a job moves one queue down\n"
    "  queue Q mem PCT|none                 job memory limit = cluster limit x PCT / 100\n"
    "  queue Q disk PCT|none                job disk limit = cluster limit x PCT / 100\n"
    "  queue Q group NAME|none              only members of the Unix group may submit\n"
    "  limit CLUSTER mem MIB|default|none   cluster memory limit (per host)\n"
    "  limit CLUSTER disk MIB|default|none  cluster disk limit (per host)\n"
    "  limit CLUSTER jobs N|none            admitted jobs at most\n"
    "  help\n";

const char *sd_qstate_name(int s)
{
    static const char *n[] = {"disabled", "enabled", "activated"};
    return s >= 0 && s < 3 ? n[s] : "?";
}

const char *sd_qmode_name(int m)
{
    return m == SDQ_EXCLUSIVE ? "exclusive" : "gang";
}

void sd_settings_default(struct sd_settings *s, uint32_t nq)
{
    memset(s, 0, sizeof *s);
    s->nq = nq < 1 ? 1 : nq > SD_MAXQ ? SD_MAXQ : nq;
    for (uint32_t i = 0; i < s->nq; i++) {
        s->q[i].state = SDQ_ACTIVATED;
        s->q[i].mode = SDQ_GANG;
    }
}

const struct sd_limit *sd_limit_find(const struct sd_settings *s, const char *cluster)
{
    for (uint32_t i = 0; i < s->nlim; i++)
        if (!strcmp(s->lim[i].cluster, cluster))
            return &s->lim[i];
    return NULL;
}

#define MAXW 8
/* Splits line into at most MAXW words (in buf); returns the count, -1 if too many. */
static int split(const char *line, char *buf, size_t n, char **w)
{
    snprintf(buf, n, "%s", line);
    int c = 0;
    for (char *p = buf; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            break;
        if (c == MAXW)
            return -1;
        w[c++] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
    }
    return c;
}

/* A non-negative integer, or one of the words meaning 0 ("unlimited", "none"). */
static int number(const char *s, uint64_t max, uint64_t *out)
{
    if (!strcmp(s, "unlimited") || !strcmp(s, "none") || !strcmp(s, "off")) {
        *out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = v;
    return 0;
}

static enum sd_cmd fail(char *msg, size_t n, const char *fmt, const char *arg)
{
    snprintf(msg, n, fmt, arg);
    return SDC_ERROR;
}

static enum sd_cmd queue_attr(struct sd_settings *s, struct sd_queue *q, uint32_t qi, char **w,
                              char *msg, size_t n)
{
    const char *a = w[2], *v = w[3];
    uint64_t x;
    if (!strcmp(a, "state")) {
        int st = !strcmp(v, "disabled")                               ? SDQ_DISABLED
                 : !strcmp(v, "enabled") || !strcmp(v, "deactivated") ? SDQ_ENABLED
                 : !strcmp(v, "activated")                            ? SDQ_ACTIVATED
                                                                      : -1;
        if (st < 0)
            return fail(msg, n, "bad state '%s': disabled, enabled or activated", v);
        q->state = st;
    } else if (!strcmp(a, "mode")) {
        if (strcmp(v, "gang") && strcmp(v, "exclusive"))
            return fail(msg, n, "bad mode '%s': gang or exclusive", v);
        q->mode = !strcmp(v, "exclusive") ? SDQ_EXCLUSIVE : SDQ_GANG;
    } else if (!strcmp(a, "cpu") || !strcmp(a, "residence")) {
        if (number(v, 366ull * 86400 * 1000, &x) < 0)
            return fail(msg, n, "bad seconds '%s' (a number, or unlimited)", v);
        *(!strcmp(a, "cpu") ? &q->max_cpu_s : &q->residence_s) = x;
    } else if (!strcmp(a, "mem") || !strcmp(a, "disk")) {
        if (number(v, 100, &x) < 0)
            return fail(msg, n, "bad percentage '%s' (0..100, or none)", v);
        *(!strcmp(a, "mem") ? &q->mem_pct : &q->disk_pct) = (uint32_t)x;
    } else if (!strcmp(a, "group")) {
        if (strlen(v) >= sizeof q->group)
            return fail(msg, n, "group name '%s' too long", v);
        snprintf(q->group, sizeof q->group, "%s", strcmp(v, "none") ? v : "");
    } else {
        return fail(msg, n,
                    "unknown queue attribute '%s' (state, mode, cpu, residence, mem, "
                    "disk, group)",
                    a);
    }
    (void)s;
    snprintf(msg, n, "queue %u %s %s", qi, a, v);
    return SDC_CHANGED;
}

static enum sd_cmd limit_cmd(struct sd_settings *s, char **w, char *msg, size_t n)
{
    struct sd_limit *l = (struct sd_limit *)sd_limit_find(s, w[1]);
    const char *a = w[2], *v = w[3];
    int64_t x;
    if (strlen(w[1]) >= SD_NAME)
        return fail(msg, n, "cluster name '%s' too long", w[1]);
    if (!strcmp(v, "default")) {
        x = -1;
    } else {
        uint64_t u;
        if (number(v, 1ull << 40, &u) < 0)
            return fail(msg, n, "bad value '%s' (a number, default or none)", v);
        x = (int64_t)u;
    }
    if (strcmp(a, "mem") && strcmp(a, "disk") && strcmp(a, "jobs"))
        return fail(msg, n, "unknown limit '%s' (mem, disk, jobs)", a);
    if (!l) {
        if (s->nlim == SD_MAXLIM)
            return fail(msg, n, "too many clusters with limits (%s)", "64");
        l = &s->lim[s->nlim++];
        memset(l, 0, sizeof *l);
        snprintf(l->cluster, sizeof l->cluster, "%s", w[1]);
        l->mem_mb = l->disk_mb = -1;
        l->jobs = 0;
    }
    if (!strcmp(a, "mem"))
        l->mem_mb = x;
    else if (!strcmp(a, "disk"))
        l->disk_mb = x;
    else
        l->jobs = x < 0 ? 0 : x;
    snprintf(msg, n, "limit %s %s %s", w[1], a, v);
    return SDC_CHANGED;
}

/* Parses a queue number; NULL (msg set) if bad. */
static struct sd_queue *queue_arg(struct sd_settings *s, const char *a, uint32_t *qi, char *msg,
                                  size_t n)
{
    uint64_t x;
    if (number(a, SD_MAXQ, &x) < 0 || !strcmp(a, "none") || x >= s->nq) {
        snprintf(msg, n, "no queue '%s' (queues are 0..%u)", a, s->nq - 1);
        return NULL;
    }
    *qi = (uint32_t)x;
    return &s->q[x];
}

enum sd_cmd sd_console_line(struct sd_settings *s, const char *line, char *msg, size_t n)
{
    char buf[512], *w[MAXW];
    struct sd_settings t = *s;
    uint32_t qi;
    struct sd_queue *q;
    int c = split(line, buf, sizeof buf, w);
    enum sd_cmd r;
    msg[0] = '\0';
    if (c < 0)
        return fail(msg, n, "too many words in '%s'", line);
    if (c == 0)
        return SDC_NOTHING;
    if (c == 1 && (!strcmp(w[0], "queues") || !strcmp(w[0], "show")))
        return SDC_QUEUES;
    if (c == 1 && !strcmp(w[0], "clusters"))
        return SDC_CLUSTERS;
    if (c == 1 && !strcmp(w[0], "hosts"))
        return SDC_HOSTS;
    if (c == 1 && !strcmp(w[0], "jobs"))
        return SDC_JOBS;
    if (c == 1 && !strcmp(w[0], "help"))
        return SDC_HELP;
    if (c == 2 && (!strcmp(w[0], "enable") || !strcmp(w[0], "disable") ||
                   !strcmp(w[0], "activate") || !strcmp(w[0], "deactivate"))) {
        if (!(q = queue_arg(&t, w[1], &qi, msg, n)))
            return SDC_ERROR;
        q->state = !strcmp(w[0], "disable")    ? SDQ_DISABLED
                   : !strcmp(w[0], "activate") ? SDQ_ACTIVATED
                                               : SDQ_ENABLED;
        snprintf(msg, n, "queue %u %s", qi, sd_qstate_name(q->state));
        r = SDC_CHANGED;
    } else if (c == 4 && !strcmp(w[0], "queue")) {
        if (!(q = queue_arg(&t, w[1], &qi, msg, n)))
            return SDC_ERROR;
        r = queue_attr(&t, q, qi, w, msg, n);
    } else if (c == 4 && !strcmp(w[0], "limit")) {
        r = limit_cmd(&t, w, msg, n);
    } else {
        return fail(msg, n, "unknown command '%s' (try help)", line);
    }
    if (r == SDC_CHANGED)
        *s = t;
    return r;
}

void sd_console_queues(const struct sd_settings *s, char *out, size_t n)
{
    size_t len = strlen(out);
    len += (size_t)snprintf(out + len, len < n ? n - len : 0,
                            "%-5s %-9s %-9s %10s %10s %5s %5s  %s\n", "QUEUE", "STATE", "MODE",
                            "MAX_CPU_S", "RESIDENCE", "MEM%", "DISK%", "GROUP");
    for (uint32_t i = 0; i < s->nq && len < n; i++) {
        const struct sd_queue *q = &s->q[i];
        char cpu[24] = "-", res[24] = "-", mem[16] = "-", disk[16] = "-";
        if (q->max_cpu_s)
            snprintf(cpu, sizeof cpu, "%llu", (unsigned long long)q->max_cpu_s);
        if (q->residence_s)
            snprintf(res, sizeof res, "%llu", (unsigned long long)q->residence_s);
        if (q->mem_pct)
            snprintf(mem, sizeof mem, "%u", q->mem_pct);
        if (q->disk_pct)
            snprintf(disk, sizeof disk, "%u", q->disk_pct);
        len += (size_t)snprintf(out + len, n - len, "%-5u %-9s %-9s %10s %10s %5s %5s  %s\n", i,
                                sd_qstate_name(q->state), sd_qmode_name(q->mode), cpu, res, mem,
                                disk, q->group[0] ? q->group : "-");
    }
}

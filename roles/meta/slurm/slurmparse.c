/*
 * slurmparse.c - the Slurm adapter's pure parsers (slurm.h "parsing"; unit-tested):
 * Slurm's times, the start sbatch --test-only gives, job states in the site interface's
 * words, `scontrol -o` fields, shell quoting, bf_window, the spool's reservation names,
 * and the slurm://SLURM_CONF?param=value&... site URL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "roles/meta/slurm/slurm.h"

int64_t slurm_time_ms(const char *s)
{
    struct tm tm = {0};
    char tail = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &tail) < 6)
        return -1;
    if (tail && tail != '|' && tail != ' ' && tail != '\n')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? -1 : (int64_t)t * 1000;
}

int64_t slurm_test_only_start(const char *text)
{
    const char *p = text ? strstr(text, " to start at ") : NULL;
    return p ? slurm_time_ms(p + 13) : -1;
}

const char *slurm_state_word(const char *st)
{
    static const struct {
        const char *slurm, *word;
    } map[] = {
        {"PENDING", "queued"},      {"REQUEUED", "queued"},      {"REQUEUE_FED", "queued"},
        {"REQUEUE_HOLD", "queued"}, {"RESV_DEL_HOLD", "queued"}, {"CONFIGURING", "queued"},
        {"SUSPENDED", "running"},   {"RUNNING", "running"},      {"COMPLETING", "running"},
        {"STAGE_OUT", "running"},   {"SIGNALING", "running"},    {"RESIZING", "running"},
        {"COMPLETED", "done"},      {"CANCELLED", "cancelled"},  {"TIMEOUT", "killed"},
        {"PREEMPTED", "killed"},    {"DEADLINE", "killed"},      {"OUT_OF_MEMORY", "killed"},
        {"FAILED", "failed"},       {"NODE_FAIL", "failed"},     {"BOOT_FAIL", "failed"},
        {"SPECIAL_EXIT", "failed"}, {"REVOKED", "cancelled"},
    };
    for (size_t i = 0; st && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(st, map[i].slurm))
            return map[i].word;
    return "queued";
}

bool slurm_field(const char *line, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = line; p && *p;) {
        if ((p == line || p[-1] == ' ') && !strncmp(p, key, kl) && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t l = strcspn(v, " \n");
            if (n) {
                size_t c = l < n - 1 ? l : n - 1;
                memcpy(out, v, c);
                out[c] = '\0';
            }
            return true;
        }
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (n)
        out[0] = '\0';
    return false;
}

bool slurm_shquote(char *buf, size_t cap, const char *s, size_t len)
{
    size_t n = strlen(buf);
    if (n + 3 > cap)
        return false;
    buf[n++] = '\'';
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\'') {
            if (n + 5 > cap)
                return false;
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else {
            if (n + 2 > cap)
                return false;
            buf[n++] = s[i];
        }
    }
    if (n + 2 > cap)
        return false;
    buf[n++] = '\'';
    buf[n] = '\0';
    return true;
}

long slurm_bf_window_min(const char *sp)
{
    const char *p = sp ? strstr(sp, "bf_window=") : NULL;
    if (!p || (p != sp && p[-1] != ','))
        return 1440;
    long v = strtol(p + 10, NULL, 10);
    return v > 0 ? v : 1440;
}

bool slurm_meta_resv_name(const char *name)
{
    const char *p = name;
    if (*p++ != 'm' || !strchr("0123456789abcdef", *p) || !*p)
        return false;
    while (*p && strchr("0123456789abcdef", *p))
        p++;
    for (int part = 0; part < 2; part++) {
        if (*p++ != '-' || !(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return !*p;
}

int slurm_url_parse(const char *url, struct slurm_conf *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->timeout_ms = 4000;
    c->max_cmds = 8;
    c->keep_s = 86400;
    snprintf(c->dir, sizeof c->dir, "/tmp");
    if (strncmp(url, "slurm://", 8)) {
        snprintf(err, errlen, "'%s' is not slurm://SLURM_CONF[?param=value&...]", url);
        return -1;
    }
    const char *p = url + 8, *q = strchr(p, '?');
    size_t pl = q ? (size_t)(q - p) : strlen(p);
    if (pl >= sizeof c->conf || (pl && p[0] != '/')) {
        snprintf(err, errlen,
                 "%s: the slurm.conf path must be absolute (slurm:///etc/slurm/slurm.conf)", url);
        return -1;
    }
    memcpy(c->conf, p, pl);
    c->conf[pl] = '\0';
    char params[1024];
    snprintf(params, sizeof params, "%s", q ? q + 1 : "");
    for (char *save = NULL, *t = strtok_r(params, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: '%s' is not param=value", url, t);
            return -1;
        }
        *eq = '\0';
        const char *v = eq + 1;
        struct {
            const char *k;
            char *dst;
            size_t n;
        } s[] = {{"partition", c->partition, sizeof c->partition},
                 {"account", c->account, sizeof c->account},
                 {"qos", c->qos, sizeof c->qos},
                 {"cluster", c->cluster, sizeof c->cluster},
                 {"user", c->user, sizeof c->user},
                 {"dir", c->dir, sizeof c->dir},
                 {"workdir", c->workdir, sizeof c->workdir},
                 {"bin", c->bin, sizeof c->bin}};
        bool done = false;
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
            if (!strcmp(t, s[i].k)) {
                if (strlen(v) >= s[i].n || strpbrk(v, " '\"\\;")) {
                    snprintf(err, errlen, "%s: bad value for %s", url, t);
                    return -1;
                }
                snprintf(s[i].dst, s[i].n, "%s", v);
                done = true;
            }
        if (!done && (!strcmp(t, "timeout_ms") || !strcmp(t, "max_cmds"))) {
            char *end = NULL;
            long n = strtol(v, &end, 10);
            bool to = t[0] == 't';
            if (!*v || *end || n < (to ? 100 : 1) || n > (to ? 600000 : 256)) {
                snprintf(err, errlen, "%s: %s must be %s", url, t,
                         to ? "100..600000 (ms)" : "1..256");
                return -1;
            }
            *(to ? &c->timeout_ms : &c->max_cmds) = n;
            done = true;
        }
        if (!done && !strcmp(t, "bandwidth_mb_s")) { /* issue 26: the placement estimate */
            char *end = NULL;
            c->bandwidth_mb_s = strtod(v, &end);
            if (!*v || *end || !(c->bandwidth_mb_s > 0 && c->bandwidth_mb_s < 1e9)) {
                snprintf(err, errlen, "%s: bandwidth_mb_s must be a number above 0 (MB/s)", url);
                return -1;
            }
            done = true;
        }
        if (!done && !strcmp(t, "keep_s")) { /* issue 26: a job directory's retention */
            char *end = NULL;
            c->keep_s = strtol(v, &end, 10);
            if (!*v || *end || c->keep_s < 0 || c->keep_s > 100L * 365 * 86400) {
                snprintf(err, errlen, "%s: keep_s must be 0..3153600000 (seconds)", url);
                return -1;
            }
            done = true;
        }
        if (!done) {
            snprintf(err, errlen,
                     "%s: unknown parameter '%s' (partition, account, qos, cluster, user, dir, "
                     "workdir, bin, timeout_ms, max_cmds, bandwidth_mb_s, keep_s)",
                     url, t);
            return -1;
        }
    }
    if (c->dir[0] != '/' || (c->workdir[0] && c->workdir[0] != '/')) {
        snprintf(err, errlen, "%s: %s must be an absolute path", url,
                 c->dir[0] != '/' ? "dir" : "workdir");
        return -1;
    }
    return 0;
}

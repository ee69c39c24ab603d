/*
 * metasitelist.c - the spool's site list (meta_int.h): meta.sites ("NAME=ENDPOINT
 * [speed=S]", comma-separated) and meta.sites_file (one site per line), parsed into the
 * sites the spool connects to (metasite.c), with each problem named by its source.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/text.h"
#include "roles/meta/live/meta_int.h"
#include "roles/meta/slurm/slurm.h"

/* Adds the site t (NAME=ENDPOINT, or ENDPOINT: named after it; t is changed) from
 * `from` (the key or file:line, for messages); 0, or -1 with why in err. */
static int site_add(struct meta *M, char *t, const char *from, char *err, size_t errlen)
{
    if (M->nsites == META_MAX_SITES) {
        snprintf(err, errlen, "%s: more than %d sites in all", from, META_MAX_SITES);
        return -1;
    }
    struct msite *s = &M->site[M->nsites];
    memset(s, 0, sizeof *s);
    s->idx = M->nsites;
    char *eq = strchr(t, '=');
    const char *ep = eq ? eq + 1 : t;
    if (eq)
        *eq = '\0';
    struct slurm_conf sc;
    char serr[300];
    if (!strncmp(ep, "slurm://", 8) && slurm_url_parse(ep, &sc, serr, sizeof serr) < 0) {
        snprintf(err, errlen, "%s: %s", from, serr);
        return -1;
    }
    if (strncmp(ep, "tcp://", 6) && strncmp(ep, "ipc://", 6) && strncmp(ep, "slurm://", 8)) {
        snprintf(err, errlen,
                 "%s: '%s' is not an endpoint (tcp://HOST:PORT) or a Slurm cluster "
                 "(slurm://SLURM_CONF)",
                 from, ep);
        return -1;
    }
    snprintf(s->ep, sizeof s->ep, "%s", ep);
    if (eq && t[0]) {
        snprintf(s->name, sizeof s->name, "%s", t);
    } else {
        const char *p = strstr(ep, "://");
        snprintf(s->name, sizeof s->name, "%s", p ? p + 3 : ep);
        for (char *c = s->name; *c; c++)
            if (*c == ':' || *c == '/')
                *c = '_';
    }
    for (int k = 0; k < M->nsites; k++)
        if (!strcmp(M->site[k].name, s->name)) {
            snprintf(err, errlen, "%s names site '%s' twice", from, s->name);
            return -1;
        }
    s->info.speed = 1.0;
    if (!strncmp(ep, "slurm://", 8)) /* issue 26: its bandwidth_mb_s, if given */
        s->info.bandwidth_mb_s = sc.bandwidth_mb_s;
    M->nsites++;
    return 0;
}

/* One option of a meta.sites_file line: speed=S (relative speed, above 0), or
 * bandwidth_mb_s=B (issue 26: the rate the spool moves inputs there at, MB/s, above 0;
 * the placement estimate adds the staging time). 0, or -1 with why in err. */
static int site_option(struct msite *s, const char *opt, const char *from, char *err, size_t errlen)
{
    bool sp = !strncmp(opt, "speed=", 6), bw = !strncmp(opt, "bandwidth_mb_s=", 15);
    char *end = NULL;
    double v = sp ? strtod(opt + 6, &end) : bw ? strtod(opt + 15, &end) : 0;
    if (!end || *end || !(v > 0 && v < 1e9)) {
        snprintf(err, errlen, "%s: '%s' is not speed=S or bandwidth_mb_s=B (a number above 0)",
                 from, opt);
        return -1;
    }
    if (sp)
        s->info.speed = v;
    else
        s->info.bandwidth_mb_s = v;
    return 0;
}

/* The sites of meta.sites_file: a line is NAME=ENDPOINT, then optionally speed=S and
 * bandwidth_mb_s=B; blank lines and lines starting with # are skipped. 0, or -1 with
 * why in err. */
static int sites_file(struct meta *M, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "meta.sites_file: cannot read '%s': %s", path, strerror(errno));
        return -1;
    }
    char line[CONFIG_STR_MAX + 64], from[CONFIG_STR_MAX + 32];
    int rc = 0;
    for (int n = 1; rc == 0 && fgets(line, sizeof line, f); n++) {
        snprintf(from, sizeof from, "%s:%d", path, n);
        char *save = NULL, *t = strtok_r(line, " \t\r\n", &save), *opt;
        if (!t || t[0] == '#')
            continue;
        if (strlen(t) >= sizeof M->site[0].ep) {
            snprintf(err, errlen, "%s: the site is longer than %zu bytes", from,
                     sizeof M->site[0].ep - 1);
            rc = -1;
        } else if ((rc = site_add(M, t, from, err, errlen)) == 0) {
            while (rc == 0 && (opt = strtok_r(NULL, " \t\r\n", &save)))
                rc = site_option(&M->site[M->nsites - 1], opt, from, err, errlen);
        }
    }
    fclose(f);
    return rc;
}

int meta_sites_parse(struct meta *M, char *err, size_t errlen)
{
    char list[CONFIG_STR_MAX];
    snprintf(list, sizeof list, "%s", M->cfg.sites);
    M->nsites = 0;
    for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
        if (site_add(M, t, "meta.sites", err, errlen) < 0)
            return -1;
    if (M->cfg.sites_file[0] && sites_file(M, M->cfg.sites_file, err, errlen) < 0)
        return -1;
    if (!M->nsites) {
        snprintf(err, errlen,
                 "meta.sites is empty: name at least one batch site, e.g. --set "
                 "meta.sites=a=tcp://127.0.0.1:7400 (or list them in meta.sites_file)");
        return -1;
    }
    snprintf(list, sizeof list, "%s", M->cfg.speeds);
    for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        char *eq = strchr(t, '=');
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : 0;
        int k = 0;
        if (eq)
            *eq = '\0';
        while (eq && k < M->nsites && strcmp(M->site[k].name, t))
            k++;
        if (!eq || k == M->nsites || !end || *end || !(v > 0 && v < 1e6)) {
            snprintf(err, errlen, "meta.speeds: '%s' is not SITE=SPEED for a site of meta.sites",
                     t);
            return -1;
        }
        M->site[k].info.speed = v;
    }
    return 0;
}

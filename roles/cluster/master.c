/*
 * master.c - MASTER_GET (issue 11, MISSION C1): the project's current list of scheduler
 * endpoints, BOINC's "master URL" in our own form. The cluster serves it from its
 * [project] section: name, and endpoints (comma-separated) or endpoints_file. The file
 * is read again on every request, so a project administrator moves the scheduler by
 * editing it (no restart, no signal); its format is one endpoint per line or
 * comma-separated, blank lines and '#' comments ignored.
 *
 * Decisions: a cluster without project.name answers NOT_FOUND. An endpoints_file that
 * cannot be read, or that lists no endpoint, falls back to project.endpoints when that
 * is set (logged), else the request gets STATE naming the file: an empty list would
 * make clients forget every scheduler. At most MASTER_MAX endpoints of at most
 * MASTER_EP_MAX bytes each; longer lines are skipped (logged), a longer file is cut.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "roles/cluster/cluster.h"

#define MASTER_MAX 64         /* the MASTER descriptor's cap */
#define MASTER_EP_MAX 255     /* bytes of one endpoint */
#define MASTER_FILE_MAX 65536 /* bytes of the endpoints file read */

struct eplist {
    char ep[MASTER_MAX][MASTER_EP_MAX + 1];
    uint32_t n;
    uint32_t skipped;
};

/* Adds the endpoints of text (separated by commas, blanks or newlines; # comments). */
static void eplist_parse(struct eplist *l, const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (text[i] == '#') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        if (text[i] == ',' || text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
            text[i] == '\r' || text[i] == '\0') {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && !strchr(",# \t\r\n", text[i]) && text[i] != '\0')
            i++;
        size_t n = i - s;
        if (n > MASTER_EP_MAX || l->n == MASTER_MAX) {
            l->skipped++;
            continue;
        }
        memcpy(l->ep[l->n], text + s, n);
        l->ep[l->n][n] = '\0';
        l->n++;
    }
}

/* Reads the endpoints file into l; 0, or -1 with errno (ENOENT, EIO, ...). */
static int eplist_file(struct eplist *l, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *buf = malloc(MASTER_FILE_MAX);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return -1;
    }
    size_t len = fread(buf, 1, MASTER_FILE_MAX, f);
    int err = ferror(f) ? EIO : 0;
    fclose(f);
    if (!err)
        eplist_parse(l, buf, len);
    free(buf);
    errno = err;
    return err ? -1 : 0;
}

void master_reply(struct cluster *c, const struct wire_msg *msg, struct wire_buf *reply)
{
    const struct cluster_cfg *cfg = &c->cfg;
    struct eplist *l = calloc(1, sizeof *l);
    if (!cfg->project_name[0]) {
        wire_error_msg(reply, msg->id, WE_NOT_FOUND,
                       "this cluster serves no project master list (no [project] name in "
                       "its configuration)");
        goto out;
    }
    if (!l) {
        wire_error_msg(reply, msg->id, WE_STORAGE, "out of memory; retry later");
        goto out;
    }
    if (cfg->project_endpoints_file[0]) {
        if (eplist_file(l, cfg->project_endpoints_file) < 0)
            log_warn("project.endpoints_file %s", cfg->project_endpoints_file);
        else if (l->n == 0)
            log_warnx("project.endpoints_file %s lists no endpoint", cfg->project_endpoints_file);
    }
    if (l->n == 0)
        eplist_parse(l, cfg->project_endpoints, strlen(cfg->project_endpoints));
    if (l->skipped)
        log_warnx("project endpoints: %u entr%s skipped (more than %d, or longer than %d "
                  "bytes)",
                  l->skipped, l->skipped == 1 ? "y" : "ies", MASTER_MAX, MASTER_EP_MAX);
    if (l->n == 0) {
        wire_error_msg(reply, msg->id, WE_STATE,
                       "project %s has no scheduler endpoint to give: project.endpoints is "
                       "empty and project.endpoints_file '%s' is unreadable or empty (see the "
                       "cluster's log)",
                       cfg->project_name, cfg->project_endpoints_file);
        goto out;
    }
    wire_begin(reply, WT_MASTER, msg->id, 2);
    wire_put_str(reply, "project", cfg->project_name);
    wire_put_key(reply, "endpoints");
    wire_pack_array(reply, l->n);
    for (uint32_t i = 0; i < l->n; i++)
        wire_pack_str(reply, l->ep[i]);
out:
    free(l);
}

/*
 * health.c - node health probes shared by both client drivers (health.h).
 */
#include "roles/client/live/health.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/fsutil.h"
#include "lib/log.h"

bool health_sick(struct health *h, const char *why, int64_t now_ms)
{
    if (h->sick[0])
        return false;
    snprintf(h->sick, sizeof h->sick, "%.250s", why && why[0] ? why : "unknown host fault");
    h->n = 0;
    h->next_ms = now_ms + HEALTH_FIRST_S * 1000;
    log_warnx("this node stops taking tasks: %s; it checks again in %d s (tasks it holds are "
              "handed back as node-side errors)",
              h->sick, HEALTH_FIRST_S);
    return true;
}

int health_probe(const char *state_dir, char *why, size_t len)
{
    char work[600], probe[640], back[8] = "";
    snprintf(work, sizeof work, "%s/work", state_dir);
    snprintf(probe, sizeof probe, "%s/.health", work);
    FILE *f = NULL;
    if (fs_mkdir_p(work) < 0 || !(f = fopen(probe, "w")) || fputs("ok\n", f) < 0 ||
        fflush(f) != 0) {
        snprintf(why, len, "cannot write in %s: %s", work, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    errno = 0;
    if (!(f = fopen(probe, "r")) || !fgets(back, sizeof back, f) || strcmp(back, "ok\n")) {
        snprintf(why, len, "cannot read back %s: %s", probe, errno ? strerror(errno) : "bad data");
        if (f)
            fclose(f);
        unlink(probe);
        return -1;
    }
    fclose(f);
    unlink(probe);
    return 0;
}

bool health_check(struct health *h, const char *state_dir, int64_t now_ms)
{
    char why[700];
    if (!h->sick[0] || now_ms < h->next_ms)
        return false;
    if (health_probe(state_dir, why, sizeof why) == 0) {
        log_info("node healthy again (was: %s): taking tasks", h->sick);
        h->sick[0] = '\0';
        h->n = 0;
        return true;
    }
    h->n++;
    int64_t d = (int64_t)HEALTH_FIRST_S << (h->n < 8 ? h->n : 8);
    if (d > HEALTH_MAX_S)
        d = HEALTH_MAX_S;
    h->next_ms = now_ms + d * 1000;
    log_debug("still unhealthy (%s); next check in %lld s", why, (long long)d);
    return false;
}

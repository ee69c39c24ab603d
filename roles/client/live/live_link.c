/*
 * live_link.c - the multi-project client's connections to its projects' servers
 * (live.h): one DEALER per endpoint (CURVE applied, its connection watched through
 * daemon/netopts.h), closed with every reference to it, found by its endpoint, and
 * the request timeout its measured round trips give. The replies and connection
 * events on it are live_rpc.c's, which adds it to the loop.
 *
 * Each scheduler endpoint of each project has its own DEALER, connected at start and
 * kept (ZeroMQ reconnects in the background; ZMQ_IMMEDIATE makes a send to an endpoint
 * that is down fail at once), so a project that is down costs no waiting: its RPC fails
 * at once, the engine backs it off and goes on with the others.
 */
#include "roles/client/live/live.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/curve.h"
#include "daemon/loop.h"
#include "lib/log.h"

/*
 * A DEALER of project p connected to url, or NULL (logged). Not in the loop yet: the
 * caller adds s->sock and s->link.mon (vcl_sock_open in live_rpc.c).
 */
struct lsock *vcl_link_open(struct live *l, int p, const char *url)
{
    struct lsock *s = calloc(1, sizeof *s);
    int zero = 0, one = 1;
    int64_t maxmsg = WIRE_MAX_FRAME;
    if (!s)
        return NULL;
    s->l = l;
    s->project = p;
    snprintf(s->url, sizeof s->url, "%s", url);
    s->created_ms = loop_now_ms();
    if (!(s->sock = zmq_socket(l->zctx, ZMQ_DEALER))) {
        free(s);
        return NULL;
    }
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    char err[800], name[40];
    snprintf(name, sizeof name, "vcl-%p", s->sock);
    if (netopts_link_open(&s->link, l->zctx, s->sock, l->cfg->link_timeout_s * 1000, name,
                          s->created_ms) < 0)
        log_warnx("project %s: cannot watch the connection to %s (%s): heal detection waits "
                  "for the backoff",
                  l->e->projects[p].name, url, zmq_strerror(errno));
    if (curve_client_apply(s->sock, &l->cfg->sec, url, err, sizeof err) < 0) {
        log_warnx("project %s: %s", l->e->projects[p].name, err);
        goto fail;
    }
    if (zmq_connect(s->sock, url) < 0) {
        log_warnx("project %s: cannot connect to %s: %s", l->e->projects[p].name, url,
                  zmq_strerror(errno));
        goto fail;
    }
    return s;
fail:
    netopts_link_close(&s->link);
    zmq_close(s->sock);
    free(s);
    return NULL;
}

/* Closes *sp (NULL-safe; sets it to NULL); the RPC and STATUS in flight on it lose it. */
void vcl_sock_close(struct live *l, struct lsock **sp)
{
    struct lsock *s = *sp;
    if (!s)
        return;
    if (l->rpc.sock == s)
        l->rpc.sock = NULL;
    if (l->rpc.master == s)
        l->rpc.master = NULL;
    for (int p = 0; p < l->e->nprojects; p++)
        if (l->proj[p].status_sock == s) {
            l->proj[p].status_sock = NULL;
            l->proj[p].status_id = 0;
        }
    loop_remove_socket(l->loop, s->sock);
    if (s->link.mon)
        loop_remove_socket(l->loop, s->link.mon);
    netopts_link_close(&s->link);
    zmq_close(s->sock);
    free(s);
    *sp = NULL;
}

/* Project p's socket to url, or NULL. */
struct lsock *vcl_project_sock(struct live *l, int p, const char *url)
{
    struct lproj *lp = &l->proj[p];
    for (int k = 0; k < lp->nsocks; k++)
        if (lp->socks[k] && !strcmp(lp->socks[k]->url, url))
            return lp->socks[k];
    return NULL;
}

struct lsock *vcl_project_session_sock(struct live *l, int p)
{
    return vcl_project_sock(l, p, l->proj[p].session_url);
}

/* The request timeout on s: rpc.timeout_ms, longer when its measured round trips are. */
int64_t vcl_rpc_timeout(const struct live *l, const struct lsock *s)
{
    return s ? netopts_rtt_timeout(&s->link.rtt, l->cfg->timeout_ms) : l->cfg->timeout_ms;
}

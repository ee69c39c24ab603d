/*
 * livehost.c - the cluster managers' hosts as the engine sees them: each core of a
 * host is one engine node (struct lhost: slot0.., then xslot for cores gained later),
 * a host's up/down and blocked state, its resizing, the engine node -> host map, and
 * the classes (one per cluster) a job or request may name. Lower than the cluster
 * driver (liveclu.c), which reports what the clusters say, and than the commands,
 * which read the map.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/loop.h"
#include "lib/constraint.h"
#include "lib/log.h"
#include "lib/text.h"
#include "roles/batch/live/live_int.h"

const char *live_slot_host(const struct live *L, int32_t slot, int *cl)
{
    if (slot < 0 || slot >= L->nslots) {
        *cl = -1;
        return "?";
    }
    *cl = L->slot_cl[slot];
    return L->cl[*cl].hosts[L->slot_host[slot]].name;
}

/* The engine's view of a host: up when its cluster says so and it is not blocked. */
static void host_engine_sync(struct live *L, struct lhost *h)
{
    bool up = h->up && !h->blocked_until;
    for (int32_t k = 0; k < h->nslots; k++)
        batch_node_set_up(L->eng, live_host_slot(h, k), up && k < h->ncores);
    live_want_cycle(L);
}

void live_host_set_up(struct live *L, struct lclu *c, struct lhost *h, bool up)
{
    if (h->up == up)
        return;
    h->up = up;
    h->changed = live_now(L);
    host_engine_sync(L, h);
    log_info("cluster %s: host %s %s", c->name, h->name, up ? "up" : "down");
}

/*
 * A start refused by the cluster (its admission is the final check: e.g. cores taken
 * by a job submitted to the cluster directly, behind the batch role's back): the
 * hosts of the refused placement take no new work for LIVE_REFUSED_BLOCK_MS, so the
 * job is placed elsewhere or retried a second later, never in a tight loop.
 */
void live_hosts_block(struct live *L, struct lclu *c, const char *hosts)
{
    for (uint32_t i = 0; hosts && i < c->nhosts; i++) {
        struct lhost *h = &c->hosts[i];
        size_t nl = strlen(h->name);
        bool named = false;
        for (const char *p = hosts; *p && !named;) {
            size_t l = strcspn(p, ",");
            named = l == nl && !memcmp(p, h->name, l);
            p += l + (p[l] == ',');
        }
        if (!named)
            continue;
        h->blocked_until = loop_now_ms() + LIVE_REFUSED_BLOCK_MS;
        host_engine_sync(L, h);
    }
}

void live_hosts_unblock(struct live *L, struct lclu *c, int64_t now)
{
    for (uint32_t i = 0; i < c->nhosts; i++) {
        struct lhost *h = &c->hosts[i];
        if (h->blocked_until && now >= h->blocked_until) {
            h->blocked_until = 0;
            host_engine_sync(L, h);
        }
    }
}

/* Room for n more engine nodes in the slot -> host maps; 0/-1. */
static int slots_reserve(struct live *L, int32_t n)
{
    int32_t need = L->nslots + n;
    if (need <= L->capslots)
        return 0;
    int32_t nc = need * 2;
    int16_t *a = realloc(L->slot_cl, (size_t)nc * sizeof *a);
    if (a)
        L->slot_cl = a;
    int32_t *b = realloc(L->slot_host, (size_t)nc * sizeof *b);
    if (b)
        L->slot_host = b;
    if (!a || !b)
        return -1;
    L->capslots = nc;
    return 0;
}

/* Adds engine node "host/k" (down) of host number hi of cluster c; its index or -1. */
static int32_t core_add(struct live *L, struct lclu *c, uint32_t hi, const char *name, uint64_t k,
                        const struct batch_res *cap)
{
    struct batch_node_spec ns;
    memset(&ns, 0, sizeof ns);
    /* unique across clusters: the cluster's name in front when it is not the first */
    char nm[3 * BATCH_NAME_MAX];
    snprintf(nm, sizeof nm, "%s%s%s/%llu", c->idx ? c->name : "", c->idx ? ":" : "", name,
             (unsigned long long)k);
    text_copy(ns.name, sizeof ns.name, nm, strlen(nm));
    snprintf(ns.class_, sizeof ns.class_, "%s", c->name);
    /* the host, for a job's processes-per-host limit (--ppn) */
    char *slash = strrchr(nm, '/');
    text_copy(ns.host, sizeof ns.host, nm, slash ? (size_t)(slash - nm) : strlen(nm));
    ns.cap = *cap;
    if (slots_reserve(L, 1) < 0)
        return -1;
    int32_t idx = batch_node_add(L->eng, &ns);
    if (idx < 0) {
        log_warn("cannot add node %s to the scheduler", ns.name);
        return -1;
    }
    batch_node_set_up(L->eng, idx, false);
    L->slot_cl[idx] = (int16_t)c->idx;
    L->slot_host[idx] = (int32_t)hi;
    L->nslots = idx + 1;
    return idx;
}

/* One core's share of a host's memory and disk. */
static struct batch_res core_cap(uint64_t cores, uint64_t mem, uint64_t disk)
{
    return (struct batch_res){1, (int64_t)(mem / cores), (int64_t)(disk / cores), 0};
}

/*
 * Host h now offers `cores` cores, mem and disk (a client restarted with more slots,
 * memory added): cores it never had become new engine nodes, cores it no longer
 * offers stay down (a job running there keeps them until it ends), and every core's
 * share of memory and disk is updated (batch_node_set_cap: safe while jobs run).
 */
static void host_resize(struct live *L, struct lclu *c, struct lhost *h, uint64_t cores,
                        uint64_t mem, uint64_t disk)
{
    if (!cores || cores > 4096 ||
        ((int32_t)cores == h->ncores && mem == h->mem_mb && disk == h->disk_mb))
        return;
    struct batch_res cap = core_cap(cores, mem, disk);
    if ((int32_t)cores > h->nslots) {
        int32_t more = (int32_t)cores - h->nslots;
        int32_t *x = realloc(h->xslot, (size_t)(h->nslots - h->nbase + more) * sizeof *x);
        if (!x)
            return; /* the next report tries again */
        h->xslot = x;
        while (h->nslots < (int32_t)cores) {
            int32_t idx =
                core_add(L, c, (uint32_t)(h - c->hosts), h->name, (uint64_t)h->nslots, &cap);
            if (idx < 0)
                break;
            h->xslot[h->nslots - h->nbase] = idx;
            h->nslots++;
        }
    }
    log_info("cluster %s: host %s now offers %llu cores (was %d), %llu MB memory, %llu MB disk",
             c->name, h->name, (unsigned long long)cores, h->ncores, (unsigned long long)mem,
             (unsigned long long)disk);
    h->ncores = (int32_t)cores < h->nslots ? (int32_t)cores : h->nslots;
    h->mem_mb = mem;
    h->disk_mb = disk;
    for (int32_t k = 0; k < h->nslots; k++)
        batch_node_set_cap(L->eng, live_host_slot(h, k), &cap);
    host_engine_sync(L, h);
}

/* The host named name of cluster c, created (with its engine nodes, down) if new. */
static struct lhost *host_get(struct live *L, struct lclu *c, const char *name, uint64_t cores,
                              uint64_t mem, uint64_t disk)
{
    for (uint32_t i = 0; i < c->nhosts; i++)
        if (!strcmp(c->hosts[i].name, name))
            return &c->hosts[i];
    if (!cores || cores > 4096 || strlen(name) >= BATCH_NAME_MAX - 8)
        return NULL;
    if (c->nhosts == c->caphosts) {
        uint32_t nc = c->caphosts ? c->caphosts * 2 : 16;
        void *p = realloc(c->hosts, nc * sizeof *c->hosts);
        if (!p)
            return NULL;
        c->hosts = p;
        c->caphosts = nc;
    }
    if (slots_reserve(L, (int32_t)cores) < 0)
        return NULL;
    struct lhost *h = &c->hosts[c->nhosts];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    h->slot0 = L->nslots;
    struct batch_res cap = core_cap(cores, mem, disk);
    for (uint64_t k = 0; k < cores; k++)
        if (core_add(L, c, c->nhosts, name, k, &cap) < 0)
            return NULL;
    h->nslots = h->nbase = h->ncores = (int32_t)cores;
    h->mem_mb = mem;
    h->disk_mb = disk;
    c->nhosts++;
    return h;
}

int32_t live_host_free_slot(struct live *L, int cl, const char *host, const int32_t *taken,
                            int32_t ntaken)
{
    struct lclu *c = &L->cl[cl];
    for (uint32_t i = 0; i < c->nhosts; i++) {
        struct lhost *h = &c->hosts[i];
        if (strcmp(h->name, host))
            continue;
        for (int32_t k = 0; k < h->ncores; k++) {
            int32_t s = live_host_slot(h, k);
            bool used = false;
            for (int32_t t = 0; t < ntaken && !used; t++)
                used = taken[t] == s;
            if (used || (L->eng && batch_node_busy(L->eng, s)))
                continue; /* another adopted element holds this core */
            return s;
        }
    }
    return -1;
}

/* The features of host h are now the row's "features" (issue 27): every engine node
 * of the host gets them (a list that does not read is taken as none). */
static void host_features(struct live *L, struct lhost *h, const msgpack_object *m)
{
    size_t n;
    const char *s = wire_get_str(m, "features", &n);
    char f[sizeof h->features], why[160];
    if (!s || features_norm(s, n, f, sizeof f, why, sizeof why) < 0)
        f[0] = '\0';
    const char *now = batch_node_features(L->eng, live_host_slot(h, 0));
    if (now && !strcmp(now, f))
        return;
    snprintf(h->features, sizeof h->features, "%s", f);
    for (int32_t k = 0; k < h->nslots; k++)
        batch_node_set_features(L->eng, live_host_slot(h, k), f);
    live_want_cycle(L);
}

/* Applies one NODES row or "host" event. */
void live_host_update(struct live *L, struct lclu *c, const msgpack_object *m, bool sync)
{
    char name[BATCH_NAME_MAX], sid[80];
    wire_get_strbuf(m, "node", name, sizeof name);
    wire_get_strbuf(m, "sid", sid, sizeof sid);
    if (!name[0] || !wire_get_bool(m, "procs", false))
        return;
    bool active = wire_get_bool(m, "active", false);
    uint64_t cores = wire_get_u64(m, "slots", 0); /* the cores it offers, else all */
    if (!cores)
        cores = wire_get_u64(m, "cores", 0);
    /* a free-form row: capped as HELLO caps them (docs/wire.md 2, Ranges) */
    uint64_t mem = wire_get_capped(m, "mem_mb", 0, WIRE_SIZE_MB_MAX),
             disk = wire_get_capped(m, "disk_mb", 0, WIRE_SIZE_MB_MAX);
    struct lhost *h = host_get(L, c, name, cores, mem, disk);
    if (!h)
        return;
    if (active) { /* an inactive session's row is stale: not the host's size now */
        host_resize(L, c, h, cores, mem, disk);
        host_features(L, h, m);
    }
    if (sync) { /* during a resync: up if any of its sessions is active */
        h->seen = true;
        if (active) {
            h->seen_up = true;
            snprintf(h->sid, sizeof h->sid, "%s", sid);
        }
        return;
    }
    if (active) {
        snprintf(h->sid, sizeof h->sid, "%s", sid);
        live_host_set_up(L, c, h, true);
    } else if (!strcmp(h->sid, sid)) {
        live_host_set_up(L, c, h, false);
    }
}

bool live_class_unknown(const struct live *L, const char *cls, char *why, size_t len)
{
    for (int i = 0; i < L->ncl; i++)
        if (!strcmp(L->cl[i].name, cls))
            return false;
    int n = snprintf(why, len,
                     "no such class '%.*s': a class is one of the clusters in "
                     "batch.clusters:",
                     BATCH_NAME_MAX, cls);
    for (int i = 0; i < L->ncl && n > 0 && (size_t)n < len; i++)
        n += snprintf(why + n, len - (size_t)n, "%s %s", i ? "," : "", L->cl[i].name);
    text_fix(why);
    return true;
}

bool live_constraint_impossible(const struct live *L, const char *cls, const char *con, char *why,
                                size_t len)
{
    int ci = L->default_cl;
    for (int i = 0; cls && *cls && i < L->ncl; i++)
        if (!strcmp(L->cl[i].name, cls))
            ci = i;
    if (!con || ci < 0 || ci >= L->ncl || L->cl[ci].nhosts == 0)
        return false;
    const struct lclu *c = &L->cl[ci];
    char have[512] = "";
    const char **ok = calloc(c->nhosts + 1, sizeof *ok); /* the hosts that satisfy it */
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->nhosts; i++) {
        if (constraint_match(con, c->hosts[i].features) && ok)
            ok[n++] = c->hosts[i].features;
        features_union(have, sizeof have, c->hosts[i].features);
    }
    /* counts (NAME*N, issue 27): hosts enough among them; out of memory: not refused */
    bool fits = ok ? n > 0 && constraint_counts_met(con, ok, NULL, n) : true;
    free(ok);
    if (fits)
        return false;
    struct constraint_count v[CONSTRAINT_NAMES_MAX];
    int nv = n > 0 ? constraint_counts(con, v, CONSTRAINT_NAMES_MAX) : 0;
    uint32_t k = 0, with = 0; /* the first count short, and the hosts that have its name */
    for (; nv > 0 && k < (uint32_t)nv && k < CONSTRAINT_NAMES_MAX; k++) {
        with = 0;
        for (uint32_t i = 0; i < c->nhosts; i++)
            with += constraint_match(con, c->hosts[i].features) &&
                    features_has(c->hosts[i].features, v[k].name);
        if (with < v[k].n)
            break;
    }
    if (n > 0 && nv > 0 && k < (uint32_t)nv)
        snprintf(why, len,
                 "constraint %s: cluster %s has too few hosts for its counts (%u host(s) with "
                 "%s and the constraint's other features, %s*%u asks for %u); gridnode "
                 "checknode HOST shows a host's features",
                 con, c->name, with, v[k].name, v[k].name, v[k].n, v[k].n);
    else if (n > 0)
        snprintf(why, len, "constraint %s: cluster %s has too few hosts for its counts", con,
                 c->name);
    else
        snprintf(why, len,
                 "constraint %s: no host of cluster %s has such features (its hosts have: %s); "
                 "gridnode checknode HOST shows a host's features",
                 con, c->name, have[0] ? have : "none");
    text_fix(why);
    return true;
}

bool live_ppn_impossible(const struct live *L, const char *cls, uint32_t procs, uint32_t ppn,
                         char *why, size_t len)
{
    int ci = L->default_cl;
    for (int i = 0; cls && *cls && i < L->ncl; i++)
        if (!strcmp(L->cl[i].name, cls))
            ci = i;
    if (ci < 0 || ci >= L->ncl || L->cl[ci].nhosts == 0 || ppn == 0)
        return false;
    const struct lclu *c = &L->cl[ci];
    uint64_t most = 0, fit = 0; /* the most cores of a host; processes at ppn per host */
    for (uint32_t i = 0; i < c->nhosts; i++) {
        uint64_t n = c->hosts[i].ncores > 0 ? (uint64_t)c->hosts[i].ncores : 0;
        most = n > most ? n : most;
        fit += n < ppn ? n : ppn;
    }
    if (ppn > most)
        snprintf(
            why, len,
            "ppn %u (processes per host) is more than the cores of any host of cluster %s (the "
            "largest has %llu): "
            "give --ppn %llu or less",
            ppn, c->name, (unsigned long long)most, (unsigned long long)most);
    else if (fit < procs)
        snprintf(why, len,
                 "%u processes at most %u per host need %u hosts: cluster %s has %u hosts, "
                 "which hold %llu at %u per host",
                 procs, ppn, (procs + ppn - 1) / ppn, c->name, c->nhosts, (unsigned long long)fit,
                 ppn);
    else
        return false;
    return true;
}

/*
 * linkemu.c - a user-space link emulator for tests/net (this kernel has no netem).
 *
 *   linkemu [--seed N] NETNS=ADDR ...
 *
 * For each argument it enters the named network namespace (/var/run/netns/NETNS),
 * creates a TUN device "gnlink0" there (IPv4, no packet info) and goes back; the test
 * then gives the device ADDR/24 and brings it up. linkemu is the star in the middle:
 * every IPv4 packet a namespace sends into its gnlink0 is read here, passed through the
 * sender's "out" link and the receiver's "in" link (delay, jitter, loss, duplication,
 * reordering, partitions) and written to the receiver's device at its delivery time.
 * Packets to unknown addresses and non-IPv4 packets are dropped.
 *
 * Commands, one per line on stdin (each answered with one line, "ok ..." or
 * "error: ..."); end of input ends the program, so a test that dies takes it along:
 *   set N DIR [delay=MS] [jitter=MS] [loss=P] [dup=P] [reorder=P]
 *   down N DIR        partition node N (DIR: in, out or both; in = packets to N)
 *   up N              heal every partition of node N (and stop its flapping)
 *   flap N UP_MS DOWN_MS   alternate up and down (both directions) until "up N"
 *   stats             "ok fwd=.. lost=.. cut=.. dup=.. queued=.."
 * N is the 1-based position on the command line; 0 means every node.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define MAX_NODES 32
#define QUEUE_MAX 50000 /* packets in flight; beyond: tail drop, like a full router queue */
#define PKT_MAX 65536

struct dirp { /* one direction of a node's link */
    double delay_ms, jitter_ms, loss, dup, reorder;
    bool cut;
};

struct node {
    int fd;
    uint32_t addr; /* network order */
    struct dirp out, in;
    int64_t flap_up_ms, flap_down_ms, flap_next; /* flapping when flap_up_ms > 0 */
    bool flap_is_down;
    int64_t last_at[MAX_NODES]; /* latest delivery time to each node (keeps order) */
};

struct pkt {
    int64_t at; /* delivery time, microseconds */
    uint64_t seq;
    int dst;
    uint32_t len;
    unsigned char *data;
};

static struct node nodes[MAX_NODES];
static int nnodes;
static struct pkt *heap;
static size_t nheap;
static uint64_t seqno, n_fwd, n_lost, n_cut, n_dup, n_qdrop;
static uint64_t rng_state;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double rnd(void) /* uniform [0, 1) (xorshift64*) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static bool before(const struct pkt *a, const struct pkt *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct pkt p)
{
    size_t i = nheap++;
    heap[i] = p;
    while (i > 0 && before(&heap[i], &heap[(i - 1) / 2])) {
        struct pkt t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static struct pkt heap_pop(void)
{
    struct pkt top = heap[0];
    heap[0] = heap[--nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < nheap && before(&heap[l], &heap[m]))
            m = l;
        if (r < nheap && before(&heap[r], &heap[m]))
            m = r;
        if (m == i)
            break;
        struct pkt t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
    return top;
}

/* Opens a TUN device named gnlink0 inside network namespace ns; -1 on error. */
static int tun_in_netns(const char *ns)
{
    char path[300];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(path, O_RDONLY | O_CLOEXEC);
    int fd = -1;
    if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) < 0) {
        fprintf(stderr, "linkemu: cannot enter network namespace %s: %s\n", ns, strerror(errno));
        goto out;
    }
    fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "gnlink0");
    if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fprintf(stderr, "linkemu: cannot create a TUN device in %s: %s\n", ns, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    if (setns(self, CLONE_NEWNET) < 0) {
        fprintf(stderr, "linkemu: cannot return to the first namespace: %s\n", strerror(errno));
        exit(1);
    }
out:
    if (self >= 0)
        close(self);
    if (target >= 0)
        close(target);
    return fd;
}

static bool node_down(const struct node *n, bool out)
{
    return (out ? n->out.cut : n->in.cut) || (n->flap_up_ms > 0 && n->flap_is_down);
}

/* Queues one copy of a packet from src to dst through both links. */
static void queue_copy(int src, int dst, const unsigned char *buf, uint32_t len, int64_t now)
{
    const struct dirp *o = &nodes[src].out, *i = &nodes[dst].in;
    if (nheap >= QUEUE_MAX) {
        n_qdrop++;
        return;
    }
    double d = o->delay_ms + i->delay_ms;
    double j = o->jitter_ms + i->jitter_ms;
    int64_t at = now + (int64_t)((d + (j > 0 ? (2 * rnd() - 1) * j : 0)) * 1000);
    if (at < now)
        at = now;
    double reorder = o->reorder + i->reorder;
    if (!(reorder > 0 && rnd() < reorder) && at < nodes[src].last_at[dst])
        at = nodes[src].last_at[dst]; /* FIFO unless this one is picked to overtake */
    else if (reorder > 0 && at > now)
        at = now + (at - now) / 2;
    if (at > nodes[src].last_at[dst])
        nodes[src].last_at[dst] = at;
    unsigned char *copy = malloc(len);
    if (!copy) {
        n_qdrop++;
        return;
    }
    memcpy(copy, buf, len);
    heap_push((struct pkt){at, seqno++, dst, len, copy});
}

static void on_packet(int src, const unsigned char *buf, uint32_t len, int64_t now)
{
    if (len < 20 || (buf[0] >> 4) != 4)
        return; /* IPv4 only */
    uint32_t daddr;
    memcpy(&daddr, buf + 16, 4);
    int dst = -1;
    for (int k = 0; k < nnodes; k++)
        if (nodes[k].addr == daddr)
            dst = k;
    if (dst < 0 || dst == src)
        return;
    if (node_down(&nodes[src], true) || node_down(&nodes[dst], false)) {
        n_cut++;
        return;
    }
    double loss = 1 - (1 - nodes[src].out.loss) * (1 - nodes[dst].in.loss);
    if (loss > 0 && rnd() < loss) {
        n_lost++;
        return;
    }
    queue_copy(src, dst, buf, len, now);
    double dup = nodes[src].out.dup + nodes[dst].in.dup;
    if (dup > 0 && rnd() < dup) {
        n_dup++;
        queue_copy(src, dst, buf, len, now);
    }
}

static void deliver_due(int64_t now)
{
    while (nheap > 0 && heap[0].at <= now) {
        struct pkt p = heap_pop();
        if (write(nodes[p.dst].fd, p.data, p.len) == (ssize_t)p.len)
            n_fwd++;
        else
            n_qdrop++; /* the receiving device is down or full: lost like on a wire */
        free(p.data);
    }
}

static void flap_tick(int64_t now_ms)
{
    for (int k = 0; k < nnodes; k++) {
        struct node *n = &nodes[k];
        if (n->flap_up_ms <= 0 || now_ms < n->flap_next)
            continue;
        n->flap_is_down = !n->flap_is_down;
        n->flap_next = now_ms + (n->flap_is_down ? n->flap_down_ms : n->flap_up_ms);
    }
}

static int set_dir(struct dirp *p, char *kv)
{
    char *eq = strchr(kv, '=');
    if (!eq)
        return -1;
    *eq = '\0';
    char *end;
    double v = strtod(eq + 1, &end);
    if (*end || v < 0)
        return -1;
    if (!strcmp(kv, "delay"))
        p->delay_ms = v;
    else if (!strcmp(kv, "jitter"))
        p->jitter_ms = v;
    else if (!strcmp(kv, "loss") && v <= 1)
        p->loss = v;
    else if (!strcmp(kv, "dup") && v <= 1)
        p->dup = v;
    else if (!strcmp(kv, "reorder") && v <= 1)
        p->reorder = v;
    else
        return -1;
    return 0;
}

/* Applies one command to node k (index) ; returns an error text or NULL. */
static const char *apply(int k, char *verb, char **arg, int narg)
{
    struct node *n = &nodes[k];
    bool in = narg > 0 && (!strcmp(arg[0], "in") || !strcmp(arg[0], "both"));
    bool out = narg > 0 && (!strcmp(arg[0], "out") || !strcmp(arg[0], "both"));
    if (!strcmp(verb, "set")) {
        if (!in && !out)
            return "set N in|out|both key=value...";
        for (int a = 1; a < narg; a++) {
            char c1[128], c2[128]; /* set_dir cuts its argument */
            snprintf(c1, sizeof c1, "%s", arg[a]);
            snprintf(c2, sizeof c2, "%s", arg[a]);
            if ((in && set_dir(&n->in, c1) < 0) || (out && set_dir(&n->out, c2) < 0))
                return "bad key=value (delay, jitter in ms; loss, dup, reorder in [0,1])";
        }
    } else if (!strcmp(verb, "down")) {
        if (!in && !out)
            return "down N in|out|both";
        n->in.cut |= in;
        n->out.cut |= out;
    } else if (!strcmp(verb, "up")) {
        n->in.cut = n->out.cut = false;
        n->flap_up_ms = 0;
        n->flap_is_down = false;
    } else if (!strcmp(verb, "flap")) {
        if (narg < 2 || atol(arg[0]) <= 0 || atol(arg[1]) <= 0)
            return "flap N UP_MS DOWN_MS";
        n->flap_up_ms = atol(arg[0]);
        n->flap_down_ms = atol(arg[1]);
        n->flap_is_down = false;
        n->flap_next = now_us() / 1000 + n->flap_up_ms;
    } else {
        return "unknown command (set, down, up, flap, stats)";
    }
    return NULL;
}

static void command(char *line)
{
    char *tok[16];
    int nt = 0;
    for (char *s = strtok(line, " \t\r\n"); s && nt < 16; s = strtok(NULL, " \t\r\n"))
        tok[nt++] = s;
    if (nt == 0)
        return;
    if (!strcmp(tok[0], "stats")) {
        printf("ok fwd=%llu lost=%llu cut=%llu dup=%llu qdrop=%llu queued=%zu\n",
               (unsigned long long)n_fwd, (unsigned long long)n_lost, (unsigned long long)n_cut,
               (unsigned long long)n_dup, (unsigned long long)n_qdrop, nheap);
        fflush(stdout);
        return;
    }
    const char *err = NULL;
    char *end = NULL;
    long k = nt > 1 ? strtol(tok[1], &end, 10) : -1;
    if (nt < 2 || *end || k < 0 || k > nnodes)
        err = "usage: VERB N ... (N: node number from 1, 0: all)";
    for (int i = k ? (int)k - 1 : 0; !err && i < (k ? k : nnodes); i++)
        err = apply(i, tok[0], tok + 2, nt - 2);
    printf(err ? "error: %s\n" : "ok\n", err);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int a = 1;
    rng_state = (uint64_t)now_us() | 1;
    if (argc > 2 && !strcmp(argv[1], "--seed")) {
        rng_state = strtoull(argv[2], NULL, 10) | 1;
        a = 3;
    }
    if (a >= argc || argc - a > MAX_NODES) {
        fprintf(stderr, "usage: linkemu [--seed N] NETNS=IPV4ADDR ... (at most %d)\n", MAX_NODES);
        return 2;
    }
    fprintf(stderr, "linkemu: seed %llu\n", (unsigned long long)rng_state);
    heap = calloc(QUEUE_MAX, sizeof *heap);
    for (; a < argc; a++) {
        char ns[256];
        snprintf(ns, sizeof ns, "%s", argv[a]);
        char *eq = strchr(ns, '=');
        struct in_addr ia;
        if (!eq || inet_pton(AF_INET, eq + 1, &ia) != 1) {
            fprintf(stderr, "linkemu: %s: expected NETNS=IPV4ADDR\n", argv[a]);
            return 2;
        }
        *eq = '\0';
        struct node *n = &nodes[nnodes++];
        n->addr = ia.s_addr;
        if ((n->fd = tun_in_netns(ns)) < 0)
            return 1;
    }
    printf("ready %d\n", nnodes);
    fflush(stdout);
    static unsigned char buf[PKT_MAX];
    char line[1024];
    size_t llen = 0;
    for (;;) {
        struct pollfd p[MAX_NODES + 1];
        for (int k = 0; k < nnodes; k++)
            p[k] = (struct pollfd){nodes[k].fd, POLLIN, 0};
        p[nnodes] = (struct pollfd){0, POLLIN, 0};
        int64_t now = now_us(), wait = 50000; /* flapping needs a tick */
        if (nheap > 0 && heap[0].at - now < wait)
            wait = heap[0].at > now ? heap[0].at - now : 0;
        if (poll(p, (nfds_t)nnodes + 1, (int)((wait + 999) / 1000)) < 0 && errno != EINTR)
            return 1;
        now = now_us();
        flap_tick(now / 1000);
        for (int k = 0; k < nnodes; k++)
            for (int burst = 0; burst < 64 && (p[k].revents & POLLIN); burst++) {
                ssize_t r = read(nodes[k].fd, buf, sizeof buf);
                if (r <= 0)
                    break;
                on_packet(k, buf, (uint32_t)r, now);
            }
        if (p[nnodes].revents & (POLLIN | POLLHUP)) {
            ssize_t r = read(0, line + llen, sizeof line - 1 - llen);
            if (r <= 0)
                return 0; /* the test is gone: so are we (the devices vanish with us) */
            llen += (size_t)r;
            char *nl;
            while ((nl = memchr(line, '\n', llen))) {
                *nl = '\0';
                command(line);
                llen -= (size_t)(nl + 1 - line);
                memmove(line, nl + 1, llen);
            }
            if (llen == sizeof line - 1)
                llen = 0; /* an endless line: drop it */
        }
        deliver_due(now_us());
    }
}

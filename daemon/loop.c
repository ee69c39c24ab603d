/* loop.c - zmq_poll event loop with timers and a before-sleep hook (see loop.h). */
#include "daemon/loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "lib/log.h"

#define LOOP_MAX_ITEMS 512
#define LOOP_MAX_TIMERS 1024

struct loop_item {
    void *sock;
    int fd;
    loop_fn fn;
    void *arg;
    int removed;
};

struct loop_timer {
    int id;
    int64_t due, every;
    loop_fn fn;
    void *arg;
};

struct loop {
    struct loop_item items[LOOP_MAX_ITEMS];
    int nitems;
    struct loop_timer timers[LOOP_MAX_TIMERS];
    int ntimers, next_id;
    loop_fn before;
    void *before_arg;
    int stop;
};

static volatile sig_atomic_t loop_signalled;

static void on_signal(int sig)
{
    (void)sig;
    loop_signalled = 1;
}

void loop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int loop_stopping(void)
{
    return loop_signalled;
}

int64_t loop_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct loop *loop_new(void)
{
    return calloc(1, sizeof(struct loop));
}

void loop_destroy(struct loop **lp)
{
    if (lp && *lp) {
        free(*lp);
        *lp = NULL;
    }
}

static int add_item(struct loop *l, void *sock, int fd, loop_fn fn, void *arg)
{
    if (l->nitems >= LOOP_MAX_ITEMS) {
        errno = ENOSPC;
        return -1;
    }
    l->items[l->nitems++] = (struct loop_item){sock, fd, fn, arg, 0};
    return 0;
}

int loop_add_socket(struct loop *l, void *sock, loop_fn fn, void *arg)
{
    return add_item(l, sock, -1, fn, arg);
}

int loop_add_fd(struct loop *l, int fd, loop_fn fn, void *arg)
{
    return add_item(l, NULL, fd, fn, arg);
}

void loop_remove_fd(struct loop *l, int fd)
{
    for (int i = 0; i < l->nitems; i++)
        if (!l->items[i].sock && l->items[i].fd == fd)
            l->items[i].removed = 1;
}

void loop_remove_socket(struct loop *l, void *sock)
{
    for (int i = 0; i < l->nitems; i++)
        if (l->items[i].sock == sock)
            l->items[i].removed = 1;
}

int loop_timer(struct loop *l, int64_t ms, int repeat, loop_fn fn, void *arg)
{
    if (l->ntimers >= LOOP_MAX_TIMERS) {
        errno = ENOSPC;
        return -1;
    }
    if (++l->next_id <= 0)
        l->next_id = 1;
    l->timers[l->ntimers++] = (struct loop_timer){l->next_id, loop_now_ms() + ms,
                                                  repeat ? (ms > 0 ? ms : 1) : 0, fn, arg};
    return l->next_id;
}

void loop_timer_cancel(struct loop *l, int id)
{
    for (int i = 0; i < l->ntimers; i++)
        if (l->timers[i].id == id) {
            l->timers[i] = l->timers[--l->ntimers];
            return;
        }
}

void loop_before_sleep(struct loop *l, loop_fn fn, void *arg)
{
    l->before = fn;
    l->before_arg = arg;
}

void loop_stop(struct loop *l)
{
    l->stop = 1;
}

static void compact_items(struct loop *l)
{
    int j = 0;
    for (int i = 0; i < l->nitems; i++)
        if (!l->items[i].removed)
            l->items[j++] = l->items[i];
    l->nitems = j;
}

/* Runs every due timer once; a timer may add or cancel timers while this runs. */
static void run_timers(struct loop *l)
{
    int64_t now = loop_now_ms();
    for (int i = 0; i < l->ntimers;) {
        struct loop_timer t = l->timers[i];
        if (t.due > now) {
            i++;
            continue;
        }
        if (t.every)
            l->timers[i++].due = now + t.every;
        else
            l->timers[i] = l->timers[--l->ntimers];
        t.fn(l, t.arg);
    }
}

int loop_run(struct loop *l)
{
    zmq_pollitem_t items[LOOP_MAX_ITEMS];
    while (!l->stop && !loop_signalled) {
        compact_items(l);
        int n = l->nitems;
        for (int i = 0; i < n; i++)
            items[i] = (zmq_pollitem_t){l->items[i].sock, l->items[i].fd, ZMQ_POLLIN, 0};
        long timeout = -1;
        int64_t now = loop_now_ms();
        for (int i = 0; i < l->ntimers; i++) {
            int64_t d = l->timers[i].due - now;
            if (d < 0)
                d = 0;
            if (timeout < 0 || d < timeout)
                timeout = (long)d;
        }
        int rc = zmq_poll(items, n, timeout);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            log_warnx("poll: %s", zmq_strerror(errno));
            return -1;
        }
        for (int i = 0; i < n && rc > 0; i++)
            if ((items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) && !l->items[i].removed)
                l->items[i].fn(l, l->items[i].arg);
        run_timers(l);
        if (l->before)
            l->before(l, l->before_arg);
    }
    return 0;
}

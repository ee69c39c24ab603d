/*
 * loop.h - the one event loop every role runs: zmq_poll over ZeroMQ sockets and plain
 * file descriptors, millisecond timers, and a before-sleep hook where a role commits
 * the turn's writes (group commit) and then sends the turn's replies.
 *
 * A turn: poll (timeout = next timer) -> call the handler of every ready item -> run
 * due timers -> before-sleep hook. SIGINT and SIGTERM stop the loop after the turn.
 */
#ifndef GRIDNODE_LOOP_H
#define GRIDNODE_LOOP_H

#include <stdint.h>

struct loop;
typedef void (*loop_fn)(struct loop *l, void *arg);

struct loop *loop_new(void);
/* NULL-safe; does not close the sockets or descriptors it watched. */
void loop_destroy(struct loop **lp);

/* Watches a ZeroMQ socket (readable) or a file descriptor (readable). 0 or -1. */
int loop_add_socket(struct loop *l, void *sock, loop_fn fn, void *arg);
int loop_add_fd(struct loop *l, int fd, loop_fn fn, void *arg);
/* Stops watching a descriptor or socket (safe from inside a handler). */
void loop_remove_fd(struct loop *l, int fd);
void loop_remove_socket(struct loop *l, void *sock);

/*
 * Calls fn after ms milliseconds, then every ms milliseconds if repeat is nonzero.
 * Returns a timer id (> 0) or -1. Cancelling an unknown id does nothing.
 */
int loop_timer(struct loop *l, int64_t ms, int repeat, loop_fn fn, void *arg);
void loop_timer_cancel(struct loop *l, int id);

void loop_before_sleep(struct loop *l, loop_fn fn, void *arg);

/* Installs SIGINT/SIGTERM handlers that stop every loop; ignores SIGPIPE. */
void loop_signals(void);
/* Runs until loop_stop() or a stop signal. Returns 0, or -1 if polling failed. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);
/* Nonzero once SIGINT/SIGTERM arrived. */
int loop_stopping(void);

/* Monotonic and wall-clock time in milliseconds. */
int64_t loop_now_ms(void);
int64_t wall_now_ms(void);

#endif

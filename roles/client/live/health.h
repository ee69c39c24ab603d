/*
 * health.h - node health, shared by both client drivers (client.c, live.c).
 *
 * A host that cannot run tasks (its working directory unusable, its state not saved,
 * fork failing) is "sick": the driver stops taking work, hands back what it holds as
 * node-side errors and re-probes with a doubling backoff (HEALTH_FIRST_S ..
 * HEALTH_MAX_S) until the probe passes. A task's own failure (nonzero exit, a program
 * that does not exist) never makes a node sick. The policy a driver applies while sick
 * is its own: docs/client-scheduling.md ("Node health") for the multi-project client.
 */
#ifndef GRIDNODE_HEALTH_H
#define GRIDNODE_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEALTH_FIRST_S 5
#define HEALTH_MAX_S 300

struct health {
    char sick[300];  /* why this host cannot run tasks; "" = healthy */
    int64_t next_ms; /* monotonic time of the next probe while sick */
    uint32_t n;      /* probes failed since it became sick */
};

/*
 * Marks the host sick for `why` (no-op if it is already): logs "this node stops taking
 * tasks: WHY" once and schedules the first probe HEALTH_FIRST_S from now_ms. Returns
 * true if it just became sick.
 */
bool health_sick(struct health *h, const char *why, int64_t now_ms);
/*
 * Probes state_dir/work: creates it, writes, flushes, reads back and removes a file.
 * 0, or -1 with the reason in why.
 */
int health_probe(const char *state_dir, char *why, size_t len);
/*
 * While sick and the probe is due (now_ms >= next_ms): probes; healthy again -> logs
 * "node healthy again", clears h->sick and returns true; still sick -> doubles the
 * interval. False otherwise.
 */
bool health_check(struct health *h, const char *state_dir, int64_t now_ms);

#endif

/*
 * engine_int.h - helpers shared by the engine's files (engine*.c); not part of the
 * engine's interface.
 */
#ifndef GRIDNODE_ENGINE_INT_H
#define GRIDNODE_ENGINE_INT_H

#include "roles/client/engine/engine.h"

#define ENGINE_EPS 1e-9

/* Returns the engine's scratch memory, at least bytes long and 16-byte aligned pieces
 * carved by the caller; valid until the next call. NULL on ENOMEM. */
void *engine_work_get(struct engine *e, size_t bytes);
/* Moves task i to state (enum engine_task_state), keeping e->running and e->nfinished
 * up to date. Never fails: e->running is sized with e->tasks. */
void engine_task_set_state(struct engine *e, size_t i, int state);
/* Stops running task i; it will restart from its last checkpoint (the rest is lost). */
void engine_task_stop(struct engine *e, size_t i);
/* The host's averaged on-fraction, bounded away from 0 for divisions. */
double engine_avail(const struct engine *e);
/* 1 if the task still needs processing (queued or running). */
static inline int engine_task_live(const struct engine_task *t)
{
    return t->state == ENGINE_TASK_QUEUED || t->state == ENGINE_TASK_RUNNING;
}

#endif

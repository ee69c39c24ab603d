/*
 * simout.h - the simulator's outputs: the per-job CSV, the Gantt chart (SVG), the
 * figures as one JSON object, and diagnose -p style priority tables.
 */
#ifndef GRIDNODE_BATCH_SIMOUT_H
#define GRIDNODE_BATCH_SIMOUT_H

#include <stdio.h>

#include "roles/batch/sim/sim.h"

/* id,submit,start,end,procs,wait,bsld per job. 0 or -1 with err. */
int simout_csv(const char *path, const struct sim_input *in, char *err, size_t errlen);
/* Processors x time over [from, to) (absolute trace times, unit of them per second;
 * the axis counts from r->first_submit); jobs need recorded nodes. Each job's id is
 * written inside its rectangle where it fits. 0 or -1 with err. */
int simout_gantt(const char *path, const struct sim_input *in, const struct sim_result *r,
                 int64_t procs, int32_t node_procs, int64_t from, int64_t to, int64_t unit,
                 char *err, size_t errlen);
/* Prints diagnose -p for every pending job of e at now; with in, engine job ids
 * (positions in in->jobs, from 1) are shown as the trace's job numbers. */
void simout_diagnose(FILE *out, struct batch_engine *e, int64_t now, const struct sim_input *in);

#endif

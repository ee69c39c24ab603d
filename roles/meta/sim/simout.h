/*
 * simout.h - the meta simulator's outputs: the comparison table (one row per policy and
 * reference), the same as one JSON object, a CSV per job and an SVG comparing the runs.
 */
#ifndef GRIDNODE_META_SIMOUT_H
#define GRIDNODE_META_SIMOUT_H

#include <stdio.h>

#include "roles/meta/sim/sim.h"

void msimout_table(FILE *out, const struct msim_scenario *s, const struct msim_workload *w,
                   const char *trace, const struct msim_result *r, size_t nr);
/* 0 or -1 (out of memory). */
int msimout_json(FILE *out, const struct msim_scenario *s, const struct msim_workload *w,
                 const char *trace, const struct msim_result *r, size_t nr, double wall_s);
/* policy,id,grid,site,submit,start,end,procs,run,wait,bsld,moves: one row per job and run.
 * 0 or -1 with err. */
int msimout_csv(const char *path, const struct msim_scenario *s, const struct msim_workload *w,
                const struct msim_result *r, size_t nr, char *err, size_t len);
/* Bars of mean bounded slowdown, wait and turnaround per run. 0 or -1 with err. */
int msimout_svg(const char *path, const char *trace, const struct msim_result *r, size_t nr,
                char *err, size_t len);

#endif

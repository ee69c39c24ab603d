/*
 * live.h - the live batch role's entry point (`gridnode batch -c FILE`); what is inside
 * is declared in live_int.h.
 */
#ifndef GRIDNODE_BATCH_LIVE_H
#define GRIDNODE_BATCH_LIVE_H

#include <stddef.h>

struct batch_ini;

/* Runs the live role with the configuration read from batch.ini; the exit status. */
int live_main(int argc, char **argv, struct batch_ini *cfg);
/* The live role's configuration checks beyond each key's own (endpoints, a cluster
 * to drive): run by --check-config and at start-up alike. 0, or -1 with err. */
int live_check_config(const struct batch_ini *cfg, char *err, size_t errlen);

#endif

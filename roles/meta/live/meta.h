/*
 * meta.h - the metascheduler role (`gridnode meta`, issue 10): a grid spool that places
 * each job on one of its batch sites by their start estimates, reserves there, submits
 * into the reservation and follows the job to its end (docs/meta.md).
 */
#ifndef GRIDNODE_META_H
#define GRIDNODE_META_H

/* The live role: config (-c FILE, --set, --check-config, --help), then the loop. */
int meta_main(int argc, char **argv);

#endif

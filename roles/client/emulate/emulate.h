/*
 * emulate.h - `gridnode client --emulate SCENARIO.ini`: runs the client scheduling
 * engine (engine.h) against simulated projects in simulated time and prints BOINC's
 * client-emulator figures of merit. docs/client-scheduling.md describes it.
 */
#ifndef GRIDNODE_EMULATE_H
#define GRIDNODE_EMULATE_H

/* argv as given to `gridnode client ...` (argv[0] = "client"); returns the exit status:
 * 0 success, 1 failure (bad scenario, I/O error), 2 usage error. */
int emulate_main(int argc, char **argv);

#endif

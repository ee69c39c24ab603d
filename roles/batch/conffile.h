/*
 * conffile.h - batch.ini: reading it (inih), single-key overrides (--set) and
 * printing the effective configuration (--check-config). The keys and their
 * defaults are documented in configs/batch.ini.
 *
 * The batch_conf_* functions fill the engine's settings only (the meta simulator's
 * sites): the live driver's sections are checked as strictly and then dropped. The
 * whole file, the live driver's settings included, is struct batch_ini
 * (roles/batch/liveconf.h), read by the same code.
 */
#ifndef GRIDNODE_BATCH_CONFFILE_H
#define GRIDNODE_BATCH_CONFFILE_H

#include <stddef.h>
#include <stdio.h>

#include "roles/batch/engine/batch.h"

/* Applies the file at path on top of c. 0, or -1 with "FILE:LINE: problem" in err
 * (c may then hold part of the file). Duplicate keys are errors. */
int batch_conf_load(struct batch_config *c, const char *path, char *err, size_t errlen);
/* Applies the INI text in s (for tests); name is used in messages. */
int batch_conf_load_string(struct batch_config *c, const char *s, const char *name, char *err,
                           size_t errlen);
/* Applies one "SECTION.KEY=VALUE" (a credential section is "user:NAME"). */
int batch_conf_set(struct batch_config *c, const char *assignment, char *err, size_t errlen);

#endif

/*
 * conffile.h - batch.ini: reading it (inih), single-key overrides (--set) and
 * printing the effective configuration (--check-config). The keys and their
 * defaults are documented in configs/batch.ini.
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
/* Writes c as an INI file that batch_conf_load reads back to the same values. */
void batch_conf_print(const struct batch_config *c, FILE *out);

#endif

/*
 * config.h - role configuration: INI files (inih) described by a key table, overridden
 * by `--set section.key=value` flags. The table is the single description of every key
 * (type, default, range, one-line help); --check-config prints the effective values.
 */
#ifndef GRIDNODE_CONFIG_H
#define GRIDNODE_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define CONFIG_STR_MAX 256
/* Longest string value: 'key = value' must fit inih's 200-byte line. */
#define CONFIG_VALUE_MAX 160
#define CONFIG_MAX_SETS 64

enum config_type { CONFIG_STR, CONFIG_INT, CONFIG_DOUBLE, CONFIG_BOOL, CONFIG_ENUM };

struct config_key {
    const char *section, *name;
    enum config_type type;
    const char *dflt; /* default, as it would be written in the file */
    size_t offset;    /* into the role's config struct: char[CONFIG_STR_MAX], long, double, int */
    double min, max;  /* numeric range (ignored when min == max) */
    const char *choices; /* CONFIG_ENUM: "full|meta|none"; stored as int index */
    const char *help;
};

/*
 * Fills cfg from defaults, then file (if not NULL), then each "section.key=value" of
 * sets. Returns 0, or -1 with every error in err, one a line ("FILE:LINE: message",
 * "--set S.K=V: message"; the first 20, then "... and more errors"): the whole file is
 * read, so one --check-config shows all that is wrong with it.
 */
int config_load(const struct config_key *keys, void *cfg, const char *file, char *const *sets,
                int nsets, char *err, size_t errlen);

/* Prints the effective configuration as an INI file with each key's help. */
void config_print(const struct config_key *keys, const void *cfg, FILE *out);

/* The parsed command line shared by every role. */
struct role_args {
    const char *config;
    char *sets[CONFIG_MAX_SETS];
    int nsets;
    int check;
    int help;
    const char *extra; /* first unrecognised argument, for the error */
};

/* Parses -c FILE, --set k=v, --check-config, --help; 0 or -1 (message printed). */
int role_args_parse(int argc, char **argv, struct role_args *ra);

/*
 * A role's checks of a loaded configuration beyond each key's type and range (keys
 * that depend on each other, files that must exist, endpoints): every check start-up
 * makes, so that --check-config accepts exactly what the role would start with.
 * 0, or -1 with err naming the key and what is wrong.
 */
typedef int (*config_check_fn)(const void *cfg, char *err, size_t errlen);

/*
 * The common role start: parses arguments, prints help, loads keys into cfg, runs
 * check (if not NULL), prints the configuration for --check-config. Returns -1 to
 * continue starting the role, otherwise the exit status (1 for a configuration error,
 * in --check-config and at start-up alike).
 */
int role_configure(const char *role, const char *usage, const struct config_key *keys, void *cfg,
                   int argc, char **argv, config_check_fn check);

/* Checks shared by the roles' config_check_fn: 0, or -1 with err naming key. */
int config_check_endpoint(const char *key, const char *value, int bind, char *err, size_t errlen);
int config_check_log_level(const char *key, const char *value, char *err, size_t errlen);
/* A file named by key exists and can be read (an empty value is allowed: unset). */
int config_check_file(const char *key, const char *path, char *err, size_t errlen);

#endif

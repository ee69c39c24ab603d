/*
 * liveconf.h - batch.ini as a whole: the engine's settings (struct batch_config) and
 * the live driver's ([batch], [store], [limits], [security], [stats], [acct], [files],
 * [jobs]), which the
 * engine never sees and --simulate only checks. Read, overridden and printed by
 * conffile.c, as the engine's part (conffile.h); the keys every daemon shares come
 * from daemon/daemon.h's key block and CURVE_CONFIG_KEYS.
 */
#ifndef GRIDNODE_BATCH_LIVECONF_H
#define GRIDNODE_BATCH_LIVECONF_H

#include <stdio.h>

#include "daemon/acct.h"
#include "daemon/curve.h"
#include "roles/batch/conffile.h"

#define BATCH_LIVE_STR 1024

/* The live driver's settings. Defaults in batch_ini_defaults. The fields the shared
 * key block describes have its types: char[CONFIG_STR_MAX], long (CONFIG_INT), int. */
struct batch_live_cfg {
    char listen[CONFIG_STR_MAX];
    char state_dir[CONFIG_STR_MAX];
    char clusters[BATCH_LIVE_STR]; /* "ep,ep" or "name=ep,..." */
    char admins[BATCH_LIVE_STR];   /* user names allowed to run admin commands */
    char log_level[16];
    int64_t max_interval_s; /* a cycle at least this often */
    int64_t max_array;      /* largest SUBMIT ntasks taken (Slurm's MaxArraySize) */
    int64_t lost_requeues;  /* runs of an element lost to a host, rerun (issue 24) */
    int sync;               /* enum store_sync: 0 full, 1 meta, 2 none */
    long map_mb;
    long peer_queue;
    struct curve_conf sec;    /* [security] (daemon/curve.h) */
    int64_t stats_interval_s; /* [stats] (daemon/statspage.h, livestats.c) */
    char stats_http[256];
    struct acct_conf acct; /* [acct] (daemon/acct.h, liveacct.c) */
    /* [files] (issue 26, livefiles.c): one file (and a job's inputs together) at most, a
       user's uploads at most (0: no limit), in MB */
    int64_t files_job_mb, files_user_mb;
    int64_t files_keep_s;    /* a stored file no job names is deleted once unchanged this long */
    int64_t files_recheck_s; /* a cluster's holding of a file asked again after this */
    int64_t retention_s;     /* [jobs]: finished jobs purged this long after they ended;
                                0 never (livepurge.c) */
};

/* Everything batch.ini says. */
struct batch_ini {
    struct batch_config eng;
    struct batch_live_cfg live;
};

/* Maui's defaults for the engine (batch_config_defaults), the live driver's own. */
void batch_ini_defaults(struct batch_ini *f);
/* Frees what the engine's part owns; f can be filled again with batch_ini_defaults. */
void batch_ini_clear(struct batch_ini *f);
/* Deep copy; 0 or -1 (ENOMEM). */
int batch_ini_copy(struct batch_ini *dst, const struct batch_ini *src);
/* As batch_conf_load, batch_conf_load_string and batch_conf_set, for every section. */
int batch_ini_load(struct batch_ini *f, const char *path, char *err, size_t errlen);
int batch_ini_load_string(struct batch_ini *f, const char *s, const char *name, char *err,
                          size_t errlen);
int batch_ini_set(struct batch_ini *f, const char *assignment, char *err, size_t errlen);
/* Writes f as an INI file that batch_ini_load reads back to the same values. */
void batch_ini_print(const struct batch_ini *f, FILE *out);

#endif

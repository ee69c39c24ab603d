/*
 * slurm.h - a real Slurm cluster as a metascheduler site (issue 14, docs/meta.md
 * "Slurm sites").
 *
 * The adapter is an in-process site: the spool hands it the same site-interface
 * requests (docs/wire.md 6.12) it sends a gridnode batch role over ZeroMQ, and gets
 * the same replies back, so placement, tracking, re-evaluation, kill -9 recovery and
 * the stray-reservation sweep work unchanged. Each request becomes one or two Slurm
 * client commands (sinfo, squeue, sbatch, scontrol, scancel) run with fork/exec,
 * non-blocking pipes watched by the role's loop and a deadline per command (the
 * process group is killed); the loop never waits for a command.
 *
 * A site is named in meta.sites as NAME=slurm://SLURM_CONF[?param=value&...] (an
 * empty path: the clients' default configuration). Parameters: partition, account,
 * qos, cluster (-M), user (the identity jobs run as; needs the spool to run as root),
 * dir (where jobs run and write slurm-<id>.out/.err; default /tmp), bin (directory of
 * the Slurm commands; default: PATH), timeout_ms (per command, default 4000),
 * max_cmds (commands at once, default 8), workdir (issue 26: the directory, shared
 * with the site's nodes, under which a job with files gets its own working directory;
 * default none: such jobs are refused), bandwidth_mb_s (issue 26: the rate inputs reach
 * workdir at, for the placement estimate; default none), keep_s (issue 26: how long a
 * job's directory under workdir stays once the spool is done with the job; default
 * 86400).
 */
#ifndef GRIDNODE_META_SLURM_H
#define GRIDNODE_META_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLURM_STR 256

struct slurm_conf {
    char conf[SLURM_STR], partition[64], account[64], qos[64], cluster[64], user[64];
    char dir[SLURM_STR], bin[SLURM_STR], workdir[SLURM_STR];
    long timeout_ms, max_cmds;
    double bandwidth_mb_s;
    long keep_s; /* a job directory's retention once the spool is done with it (issue 26) */
};

struct loop;
struct slurm_site;

/* Called with one encoded reply frame (a site-interface reply, docs/wire.md 6.12). It
 * is called from the loop's handlers and timers only, never from slurm_site_request. */
typedef void (*slurm_reply_fn)(void *arg, const void *data, size_t len);

/* Parses slurm://PATH?k=v&... into c. 0, or -1 with a message naming the problem. */
int slurm_url_parse(const char *url, struct slurm_conf *c, char *err, size_t errlen);

/* A new adapter; owner is the name the spool reserves under (meta.user): Slurm keeps no
 * owner, so reservations named like the spool's (m<inc>-<job>-<attempt>) are listed
 * with this owner. NULL when out of memory or a Slurm command cannot be found (err). */
struct slurm_site *slurm_site_new(const struct slurm_conf *c, const char *site, const char *owner,
                                  struct loop *l, slurm_reply_fn fn, void *arg, char *err,
                                  size_t errlen);
/* NULL-safe; kills commands still running (their process groups) and reaps them. */
void slurm_site_destroy(struct slurm_site **sp);

/* One request frame (copied). Every request gets exactly one reply, except when Slurm
 * cannot be reached for SITE_INFO or JOB_GET (the spool's deadline then marks the site
 * down, as for a batch role that does not answer). */
void slurm_site_request(struct slurm_site *S, const void *data, size_t len);
/* Deadlines, reaping, queued commands, replies due: call often (the spool's tick). */
void slurm_site_tick(struct slurm_site *S);
/* The site's input store swept (issue 26; with the spool's own sweep, hourly): a stored
 * input no job directory links (link count 1) unchanged for keep_s seconds, and a part
 * file no offer is writing unchanged that long, deleted. Files deleted, or -1 (no store
 * or it cannot be read; nothing deleted). */
long slurm_site_sweep(struct slurm_site *S, int64_t keep_s);

/* Whether the spool is done with the job whose directory under workdir is named name
 * (the SUBMIT's key, slurm_files_dir): the wall ms since which it is (the job ended at
 * the spool, its outputs copied into the spool's store and committed), or -1 while it
 * still needs it or does not know the name (another spool's: left alone). */
typedef int64_t (*slurm_done_fn)(void *arg, const char *name);
/* Turns on the removal of job directories (issue 26, docs/data.md "Retention"): each
 * directory under workdir that fn says the spool is done with is removed keep_s after
 * that, by a child process under the jobs' identity that never follows a symbolic link;
 * a removal cut short (kill -9) is finished by a later pass. */
void slurm_site_retain(struct slurm_site *S, slurm_done_fn fn, void *arg);
/* The tree under directory fd dfd emptied (dfd itself stays), never through a symbolic
 * link (each level opened with O_NOFOLLOW beneath the one above: a link is removed, not
 * followed), directories made writable by their owner first; at most depth_max levels.
 * 0, or -1 with errno (the first failure; what could be removed is). */
int slurm_rm_tree(int dfd, int depth_max);

/* ---- parsing (pure; unit-tested) ---- */

/* A Slurm local time "YYYY-MM-DDTHH:MM:SS" as ms since the epoch; -1 for anything else
 * (N/A, Unknown, None). */
int64_t slurm_time_ms(const char *s);
/* The start of "... Job N to start at TIME using ..." (sbatch --test-only), ms; -1. */
int64_t slurm_test_only_start(const char *text);
/* A Slurm job state (squeue %T) in the site interface's words: queued, running, done,
 * failed, killed, cancelled. */
const char *slurm_state_word(const char *state);
/* The value of KEY=value in a one-line `scontrol -o` record, into out. false if absent. */
bool slurm_field(const char *line, const char *key, char *out, size_t n);
/* A shell-quoted copy of s appended to buf (of capacity cap, kept NUL-terminated);
 * false if it did not fit. */
bool slurm_shquote(char *buf, size_t cap, const char *s, size_t len);
/* bf_window (minutes) in a SchedulerParameters value; 1440 (Slurm's default) if absent. */
long slurm_bf_window_min(const char *sched_params);
/* Whether name is one of the spool's reservation names (m<hex>-<digits>-<digits>). */
bool slurm_meta_resv_name(const char *name);

#endif

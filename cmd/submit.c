/* submit.c - `gridnode submit`: send a job (a bag of N tasks) to a cluster manager. */
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "cmd/submit_data.h"
#include "cmd/submit_env.h"
#include "lib/constraint.h"
#include "roles/cluster/app.h"
#include "wire/jobenv.h"

static const char usage[] =
    "usage: gridnode submit [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Submits a job of N tasks. In PROGRAM and ARGS, {i} becomes the task index\n"
    "(0..N-1), {n} the task count and {job} the job id. Prints the job id.\n"
    "  -n, --tasks N          number of tasks (default 1)\n"
    "  --name NAME            job name\n"
    "  --user USER            owner (default $USER)\n"
    "  --shell                run PROGRAM as a /bin/sh -c script (ARGS become $0, $1..)\n"
    "  --complexity X         relative work per task, for re-issue estimates (default 1)\n"
    "  --limit SECONDS        wall-clock limit per task (default: the cluster's)\n"
    "  --stdin PATTERN        task i reads the file PATTERN with {i} expanded\n"
    "  --input FILE           (repeatable) every task finds FILE in its working directory\n"
    "                         under its base name; a directory is taken whole; a PATTERN\n"
    "                         with {i} gives task i its own file. Files are uploaded to\n"
    "                         the cluster (or batch role) first, only what it lacks; a\n"
    "                         batch role passes them on (docs/data.md). A cluster takes\n"
    "                         the job after a file's first MiB and its nodes fetch the\n"
    "                         rest as it arrives: submit returns when the upload ends.\n"
    "                         With -p, every process (rank) gets it, {i} being the rank\n"
    "  --output GLOB          (repeatable) files a task leaves in its working directory\n"
    "                         that match GLOB are kept (gridnode fetch JOB gets them);\n"
    "                         with -p, every rank's, fetched as DIR/RANK/FILE\n"
    "  --checkpoint-s S       every S seconds a running task's checkpoint directory\n"
    "                         ($GRIDNODE_CHECKPOINT_DIR) is sent to the cluster, so a task\n"
    "                         issued again to another node starts from it (at most\n"
    "                         files.ckpt_mb per task; docs/data.md). Without it the\n"
    "                         directory still survives a restart of the node. With -p,\n"
    "                         every rank has its own and writes the generation's number\n"
    "                         into .generation there last: a requeued job restarts from\n"
    "                         the newest generation every rank sent\n"
    "  --deadline SECONDS     report deadline of each task after it is handed out\n"
    "                         (default: the cluster's tasks.deadline_s); a result after it\n"
    "                         is still taken and counted as late\n"
    "  --gpus N               GPU instances each task needs: tasks go only to volunteer\n"
    "                         clients that declared at least N GPUs of one type\n"
    "  --gpu-type TYPE        that GPU type (nvidia, amd, intel, ...; default: any)\n"
    "  --export WHAT          environment of the tasks (like sbatch): ALL (every variable\n"
    "                         here), NONE, VAR (its value here) or VAR=value, comma-\n"
    "                         separated (ALL,TMPDIR=/scratch), over the node's own;\n"
    "                         default: the node's environment only; 64 KiB at most\n"
    "  --chdir DIR            run the tasks in DIR on the nodes (relative: to the current\n"
    "                         directory here) instead of a fresh empty directory\n"
    "  --network              the tasks keep the node's network; without it a task runs in\n"
    "                         an empty network namespace: no other host, not even the\n"
    "                         node's own 127.0.0.1 (docs/security.md). Processes of a\n"
    "                         parallel job of more than one process have it anyway\n"
    "  -d, --dependency LIST  start only once LIST holds (as sbatch): afterok:ID[:ID..]\n"
    "                         (ended successfully), afternotok:ID (ended failed, killed\n"
    "                         or cancelled), afterany:ID (ended), after:ID (started or\n"
    "                         ended), singleton (no earlier job of your name and user\n"
    "                         still queued or running); terms joined by , (all must\n"
    "                         hold) or ? (any may). Until then the job is queued with\n"
    "                         reason Dependency; one that can never hold (afterok on a\n"
    "                         job that failed) is cancelled: DependencyNeverSatisfied\n"
    "  -C, --constraint EXPR  run only on nodes with these features (as sbatch): names\n"
    "                         joined by & (all) and | (any), & before |, parentheses\n"
    "                         ('gpu&avx2', 'arm|x86_64'); with -p, NAME*N: at least N\n"
    "                         of the job's hosts have NAME ('gpu*2&linux', & only).\n"
    "                         A node's features are its\n"
    "                         client.features, its architecture and OS (gridnode nodes\n"
    "                         lists them; at a batch role, gridnode checknode HOST); a\n"
    "                         batch role refuses a job no host of it can satisfy, the\n"
    "                         spool one no site can\n"
    "  --wait                 wait for the job to end (like `gridnode job ID --wait`)\n"
    "  --key KEY              request key (1..128 bytes; default: a random one per run).\n"
    "                         The cluster manager keeps one job per key and user: the\n"
    "                         same key sent again returns the first job, never a second\n"
    "  --retries N            when no answer comes within --timeout, send the same request\n"
    "                         (same key) again, up to N times (default 3)\n"
    "\n"
    "Result checking (docs/validation.md; default: the first result of a task is final):\n"
    "  --replicas R           copies of each task handed out at first, to different nodes\n"
    "  --quorum Q             agreeing results needed (default 1; 2 with --adaptive)\n"
    "  --max-results M        results at most before the task fails without a quorum\n"
    "                         (default quorum or replicas + 2; at most 32)\n"
    "  --validator CMD        /bin/sh -c CMD judges the results instead of exact equality\n"
    "                         of exit status and stdout (interface: docs/validation.md)\n"
    "  --adaptive             results of trusted nodes may be accepted alone\n"
    "  --distinct WHAT        copies of a task go to different session (default), host\n"
    "                         or address\n"
    "  --known PATTERN        known-answer tasks: the file PATTERN ({i} expanded) is task\n"
    "                         i's expected stdout (exit 0); the job becomes a pool of spot\n"
    "                         checks mixed into every node's work until it is cancelled\n"
    "\n"
    "A parallel job (SCore-D side: N processes started together on hosts the cluster\n"
    "manager chooses; each gets GRIDNODE_RANK, GRIDNODE_SIZE, GRIDNODE_HOSTS, GRIDNODE_PPN,\n"
    "GRIDNODE_JOB and GRIDNODE_NODE in its environment):\n"
    "  -p, --procs N          number of processes (makes the job parallel)\n"
    "  --ppn N                processes per host (default 1 at a cluster manager; a batch\n"
    "                         role or the spool then packs them core by core, and --ppn\n"
    "                         makes it at most N per host)\n"
    "  --queue Q              priority queue, 0 highest (default: the cluster's)\n"
    "  --mem MIB, --disk MIB  per-host memory / disk limits, always enforced (capped by\n"
    "                         the queue's share of the cluster limit when one is set)\n"
    "  --cpu SECONDS          maximum CPU time, summed over all processes\n"
    "  --group GROUP          Unix group (queues with a group accept only its members)\n"
    "  --wait-resources       wait when no cluster can take it now, instead of a refusal\n"
    "  --coc                  a cluster of clusters is acceptable\n"
    "  (--limit is the job's wall-clock limit; time stopped by gang scheduling does not count)\n"
    "\n"
    "Scheduling with a batch role (gridnode batch; the cluster manager ignores these):\n"
    "  -A, --account NAME     account charged (fairshare, limits, reservation ACLs)\n"
    "  --qos NAME             quality of service\n"
    "  --class NAME           class = partition: one of the batch role's clusters\n"
    "  --resv NAME            run inside this reservation (setres, or RESERVE of a site)\n"
    "  --early                may start before / away from its reservation (Maui B5)\n"
    "  --exact-start          never before its reservation (a grid spool, gridnode meta,\n"
    "                         lets its jobs start early by default)\n"
    "  --hold                 stays pending until released\n"
    "  (--limit is the walltime: the job is ended when it passes it)\n"
    "\n"
    "A job script: when PROGRAM is a file whose first comment lines hold #GRIDNODE\n"
    "directives (like #SBATCH), those lines give options (`#GRIDNODE -n 10 --name x`),\n"
    "options on the command line override them, and the script's text is sent with the\n"
    "job (run by its #! interpreter with -c, else by /bin/sh; ARGS become $1..). The\n"
    "directives end at the first line that is not a comment or blank. Scripts up to\n"
    "16384 bytes.\n";

struct submit_opts {
    uint64_t ntasks, limit, procs, ppn, queue, mem, disk, cpu;
    uint64_t deadline, gpus; /* issue 11; 0: not given */
    uint64_t ckpt_s;         /* --checkpoint-s (issue 26); 0: not given */
    const char *gpu_type;
    bool has_queue, wait_res, coc;
    const char *group, *key;
    const char *account, *qos, *class_, *resv; /* batch role only */
    bool early, exact, hold;
    uint64_t replicas, quorum, max_results;
    const char *validator, *distinct, *known;
    bool adaptive;
    uint64_t retries;
    char keybuf[40];
    double complexity;
    const char *name, *user, *stdin_pattern;
    const char *export_spec, *chdir; /* --export, --chdir (issue 15; submit_env.c) */
    bool shell, wait, has_limit;
    bool network;                                       /* --network (issue 23) */
    const char *dependency;                             /* --dependency (issue 27) */
    char *inputs[256], *outputs[WIRE_FILE_OUTPUTS_MAX]; /* issue 26 (submit_data.c) */
    int ninputs, noutputs;
    const char *constraint;                             /* --constraint (issue 27) */
    bool has_tasks, has_procs, has_ppn, has_complexity; /* given on the command line */
    char **argv;
    int argc;
    char **optv; /* the argv parse() read; its options are optv[1..optc-1] */
    int optc;
};

/* Is a (an option of submit, not of cli_common) one the usage text lists? */
static bool known_option(const char *a)
{
    size_t n = strlen(a);
    for (const char *p = strstr(usage, a); p; p = strstr(p + 1, a))
        if ((p[-1] == ' ' || p[-1] == '(') && (p[n] == ' ' || p[n] == ',' || p[n] == ')'))
            return true;
    return false;
}

/*
 * What no cluster manager could accept, or what would be silently ignored, refused
 * here in the words the user typed (issue 15). Bags of tasks (-n) and parallel jobs (-p)
 * take different options; an option of the other kind is an error, not a no-op.
 */
static int check_opts(struct cli *c, const struct submit_opts *o)
{
    const char *bad = NULL;
    char why[200];
    if (o->has_procs && o->procs == 0)
        bad = "-p/--procs must be at least 1 (the number of processes)";
    else if (o->has_procs && o->procs > 1000000)
        bad = "-p/--procs must be at most 1000000";
    else if (o->has_ppn && o->ppn == 0)
        bad = "--ppn must be at least 1 (processes per host)";
    else if (o->has_ppn && !o->has_procs)
        bad = "--ppn is for parallel jobs: give -p N as well";
    else if (o->has_procs && o->ppn > o->procs)
        bad = "--ppn cannot be larger than -p/--procs";
    else if (o->has_tasks && o->ntasks == 0)
        bad = "-n/--tasks must be at least 1";
    else if (o->retries > 100)
        bad = "--retries must be 0..100";
    else if ((o->name && !*o->name) || (o->user && !*o->user) || (o->group && !*o->group))
        bad = "--name, --user and --group must not be empty";
    if (!bad && o->has_procs) { /* bag-of-tasks options given to a parallel job */
        const char *opt = o->has_tasks             ? "-n/--tasks"
                          : o->stdin_pattern       ? "--stdin"
                          : o->has_complexity      ? "--complexity"
                          : o->deadline            ? "--deadline"
                          : o->gpus || o->gpu_type ? "--gpus/--gpu-type"
                                                   : NULL;
        if (opt) {
            snprintf(why, sizeof why,
                     "%s is for a bag of tasks, not a parallel job (-p): drop one of them", opt);
            bad = why;
        }
    } else if (!bad) { /* parallel-job options given to a bag of tasks */
        const char *opt = o->has_queue  ? "--queue"
                          : o->mem      ? "--mem"
                          : o->disk     ? "--disk"
                          : o->cpu      ? "--cpu"
                          : o->group    ? "--group"
                          : o->wait_res ? "--wait-resources"
                          : o->coc      ? "--coc"
                                        : NULL;
        if (opt) {
            snprintf(why, sizeof why,
                     "%s is for a parallel job: add -p N (or drop %s for a bag of tasks)", opt,
                     opt);
            bad = why;
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %s\n", c->prog, bad);
        return -1;
    }
    return 0;
}

static int parse(struct cli *c, int argc, char **argv, struct submit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ntasks = 1;
    o->complexity = 1;
    o->user = getenv("USER");
    o->retries = 3;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int inl = 0; /* the index of a value given as --opt=value */
        if (a[0] == '-' && a[1] == '-' && strchr(a, '=') > a + 2) {
            argv = cli_split_eq(&argc, argv, i);
            a = argv[i];
            v = argv[inl = i + 1];
        }
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--tasks")) && v) {
            if (cli_u64(c, "--tasks", argv[++i], &o->ntasks) < 0)
                return -1;
            o->has_tasks = true;
        } else if (!strcmp(a, "--name") && v) {
            o->name = argv[++i];
        } else if (!strcmp(a, "--user") && v) {
            o->user = argv[++i];
        } else if (!strcmp(a, "--stdin") && v) {
            o->stdin_pattern = argv[++i];
        } else if (!strcmp(a, "--input") && v) {
            if (o->ninputs == 256) {
                fprintf(stderr, "%s: --input at most 256 times (a directory counts once)\n",
                        c->prog);
                return -1;
            }
            o->inputs[o->ninputs++] = argv[++i];
        } else if (!strcmp(a, "--output") && v) {
            if (o->noutputs == (int)WIRE_FILE_OUTPUTS_MAX) {
                fprintf(stderr, "%s: --output at most %u times\n", c->prog, WIRE_FILE_OUTPUTS_MAX);
                return -1;
            }
            o->outputs[o->noutputs++] = argv[++i];
        } else if (!strcmp(a, "--export") && v) {
            o->export_spec = argv[++i];
        } else if ((!strcmp(a, "--dependency") || !strcmp(a, "-d")) && v) {
            o->dependency = argv[++i];
        } else if ((!strcmp(a, "--constraint") || !strcmp(a, "-C")) && v) {
            char canon[CONSTRAINT_LEN_MAX + 1], why[200];
            o->constraint = argv[++i];
            if (constraint_parse(o->constraint, strlen(o->constraint), canon, sizeof canon, why,
                                 sizeof why) < 0) {
                fprintf(stderr, "%s: --constraint '%s': %s\n", c->prog, o->constraint, why);
                return -1;
            }
        } else if ((!strcmp(a, "--chdir") || !strcmp(a, "-D")) && v) {
            o->chdir = argv[++i];
        } else if (!strcmp(a, "--limit") && v) {
            if (cli_u64(c, "--limit", argv[++i], &o->limit) < 0)
                return -1;
            o->has_limit = true;
        } else if (!strcmp(a, "--checkpoint-s") && v) {
            if (cli_u64(c, "--checkpoint-s", argv[++i], &o->ckpt_s) < 0)
                return -1;
            if (o->ckpt_s == 0 || o->ckpt_s > 365u * 86400) {
                fprintf(stderr, "%s: --checkpoint-s must be 1..31536000 seconds\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--deadline") && v) {
            if (cli_u64(c, "--deadline", argv[++i], &o->deadline) < 0)
                return -1;
            if (o->deadline == 0 || o->deadline > 366u * 86400) {
                fprintf(stderr, "%s: --deadline must be 1..31622400 seconds\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--gpus") && v) {
            if (cli_u64(c, "--gpus", argv[++i], &o->gpus) < 0)
                return -1;
            if (o->gpus > 64) {
                fprintf(stderr, "%s: --gpus must be 0..64\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--gpu-type") && v) {
            o->gpu_type = argv[++i];
            if (!*o->gpu_type || strlen(o->gpu_type) > 31) {
                fprintf(stderr, "%s: --gpu-type must be 1..31 bytes (e.g. nvidia)\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--complexity") && v) {
            char *end;
            o->complexity = strtod(argv[++i], &end);
            o->has_complexity = true;
            if (*end || !(o->complexity > 0)) {
                fprintf(stderr, "%s: --complexity must be a positive number\n", c->prog);
                return -1;
            }
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--procs")) && v) {
            if (cli_u64(c, "--procs", argv[++i], &o->procs) < 0)
                return -1;
            o->has_procs = true;
        } else if (!strcmp(a, "--ppn") && v) {
            if (cli_u64(c, "--ppn", argv[++i], &o->ppn) < 0)
                return -1;
            o->has_ppn = true;
        } else if (!strcmp(a, "--queue") && v) {
            char *end;
            o->queue = strtoull(argv[++i], &end, 10);
            o->has_queue = true;
            if (*end || !*argv[i] || o->queue > 255) {
                fprintf(stderr, "%s: --queue must be a queue number\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--mem") && v) {
            if (cli_u64(c, "--mem", argv[++i], &o->mem) < 0)
                return -1;
        } else if (!strcmp(a, "--disk") && v) {
            if (cli_u64(c, "--disk", argv[++i], &o->disk) < 0)
                return -1;
        } else if (!strcmp(a, "--cpu") && v) {
            if (cli_u64(c, "--cpu", argv[++i], &o->cpu) < 0)
                return -1;
        } else if (!strcmp(a, "--key") && v) {
            o->key = argv[++i];
            if (!*o->key || strlen(o->key) > 128) {
                fprintf(stderr, "%s: --key must be 1..128 bytes\n", c->prog);
                return -1;
            }
        } else if (!strcmp(a, "--replicas") && v) {
            if (cli_u64(c, "--replicas", argv[++i], &o->replicas) < 0)
                return -1;
        } else if (!strcmp(a, "--quorum") && v) {
            if (cli_u64(c, "--quorum", argv[++i], &o->quorum) < 0)
                return -1;
        } else if (!strcmp(a, "--max-results") && v) {
            if (cli_u64(c, "--max-results", argv[++i], &o->max_results) < 0)
                return -1;
        } else if (!strcmp(a, "--validator") && v) {
            o->validator = argv[++i];
        } else if (!strcmp(a, "--distinct") && v) {
            o->distinct = argv[++i];
        } else if (!strcmp(a, "--known") && v) {
            o->known = argv[++i];
        } else if (!strcmp(a, "--adaptive")) {
            o->adaptive = true;
        } else if (!strcmp(a, "--retries") && v) {
            if (cli_u64(c, "--retries", argv[++i], &o->retries) < 0)
                return -1;
        } else if (!strcmp(a, "--group") && v) {
            o->group = argv[++i];
        } else if ((!strcmp(a, "-A") || !strcmp(a, "--account")) && v) {
            o->account = argv[++i];
        } else if (!strcmp(a, "--qos") && v) {
            o->qos = argv[++i];
        } else if (!strcmp(a, "--class") && v) {
            o->class_ = argv[++i];
        } else if (!strcmp(a, "--resv") && v) {
            o->resv = argv[++i];
        } else if (!strcmp(a, "--early")) {
            o->early = true;
        } else if (!strcmp(a, "--exact-start")) {
            o->exact = true;
        } else if (!strcmp(a, "--hold")) {
            o->hold = true;
        } else if (!strcmp(a, "--wait-resources")) {
            o->wait_res = true;
        } else if (!strcmp(a, "--coc")) {
            o->coc = true;
        } else if (!strcmp(a, "--shell")) {
            o->shell = true;
        } else if (!strcmp(a, "--wait")) {
            o->wait = true;
        } else if (!strcmp(a, "--network")) {
            o->network = true;
        } else if (!v && known_option(a)) {
            fprintf(stderr, "%s: %s needs a value (%s VALUE or %s=VALUE)\n", c->prog, a, a, a);
            return -1;
        } else {
            fprintf(stderr, "%s: unknown option '%s' (gridnode submit --help lists them)\n",
                    c->prog, a);
            return -1;
        }
        if (inl && i < inl) { /* a flag given a value: --wait=yes */
            fprintf(stderr, "%s: %s takes no value (give it as %s alone)\n", c->prog, a, a);
            return -1;
        }
    }
    o->argv = argv + i;
    o->argc = argc - i;
    o->optv = argv;
    o->optc = i > 1 && !strcmp(argv[i - 1], "--") ? i - 1 : i;
    if (!o->key) { /* a random key per invocation: retries of this run return one job */
        uint8_t rnd[16];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
            for (size_t k = 0; k < sizeof rnd; k++, x = x * 6364136223846793005ull + 1)
                rnd[k] = (uint8_t)(x >> 56);
        }
        for (size_t k = 0; k < sizeof rnd; k++)
            snprintf(o->keybuf + 2 * k, 3, "%02x", rnd[k]);
        o->key = o->keybuf;
    }
    if (o->argc == 0) {
        fprintf(stderr, "%s: no program given\n%s", c->prog, usage);
        return -1;
    }
    if (o->early && o->exact) {
        fprintf(stderr, "%s: --early and --exact-start contradict each other\n", c->prog);
        return -1;
    }
    return check_opts(c, o);
}

/* Reads the whole file into *buf; 0 or -1 with errno. */
static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!f || !b) {
        if (f)
            fclose(f);
        free(b);
        return -1;
    }
    size_t r;
    while ((r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                fclose(f);
                return -1;
            }
            b = nb;
        }
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

/* Appends one stdin per task to wb; -1 (printed) when a file cannot be read. */
static int pack_stdin(struct cli *c, const struct submit_opts *o, struct wire_buf *wb)
{
    wire_put_key(wb, "stdin");
    wire_pack_array(wb, (uint32_t)o->ntasks);
    for (uint64_t i = 0; i < o->ntasks; i++) {
        char *path = app_expand(o->stdin_pattern, 0, (uint32_t)i, (uint32_t)o->ntasks), *buf;
        size_t len;
        if (!path || read_file(path, &buf, &len) < 0) {
            fprintf(stderr, "%s: cannot read stdin of task %llu from '%s': %s\n", c->prog,
                    (unsigned long long)i, path ? path : o->stdin_pattern, strerror(errno));
            free(path);
            return -1;
        }
        wire_pack_bin(wb, buf, len);
        free(buf);
        free(path);
    }
    return 0;
}

/*
 * Sends the request in wb (it carries o->key) and waits for the reply; with no answer,
 * sends the same request again (a new connection), up to o->retries times. The key makes
 * this safe: a request that was stored but whose reply was lost returns the same job.
 * Returns as cli_call.
 */
static int call_retrying(struct cli *c, const struct submit_opts *o, struct wire_buf *wb,
                         struct cli_reply *r)
{
    /* --wait: the submission and the wait share one connection (cmd_job_wait closes it) */
    if (o->wait && cli_keep(c) < 0)
        return -1;
    for (uint64_t a = 1;; a++) {
        int rc = cli_call(c, wb, 1, r);
        if (rc != 0 && (rc > 0 || a > o->retries))
            cli_unkeep(c);
        if (rc >= 0 || a > o->retries)
            return rc;
        fprintf(stderr,
                "%s: sending again (retry %llu of %llu) with the same request key %s; "
                "the cluster manager keeps one job per key\n",
                c->prog, (unsigned long long)a, (unsigned long long)o->retries, o->key);
    }
}

/* How many result-checking fields put_valid() writes (the known answers not counted). */
static uint32_t valid_fields(const struct submit_opts *o)
{
    return (o->replicas > 0) + (o->quorum > 0) + (o->max_results > 0) + (o->validator != NULL) +
           o->adaptive + (o->distinct != NULL) + (o->known != NULL);
}

/* The result-checking fields; -1 (said why) if a known answer cannot be read. */
static int put_valid(struct cli *c, struct wire_buf *wb, const struct submit_opts *o)
{
    if (o->replicas)
        wire_put_u64(wb, "replicas", o->replicas);
    if (o->quorum)
        wire_put_u64(wb, "quorum", o->quorum);
    if (o->max_results)
        wire_put_u64(wb, "max_results", o->max_results);
    if (o->validator)
        wire_put_str(wb, "validator", o->validator);
    if (o->adaptive)
        wire_put_bool(wb, "adaptive", true);
    if (o->distinct)
        wire_put_str(wb, "distinct", o->distinct);
    if (!o->known)
        return 0;
    wire_put_key(wb, "known");
    wire_pack_array(wb, (uint32_t)o->ntasks);
    for (uint64_t i = 0; i < o->ntasks; i++) {
        char *path = app_expand(o->known, 0, (uint32_t)i, (uint32_t)o->ntasks), *buf;
        size_t len;
        if (!path || read_file(path, &buf, &len) < 0) {
            fprintf(stderr, "%s: cannot read the known answer of task %llu from '%s': %s\n",
                    c->prog, (unsigned long long)i, path ? path : o->known, strerror(errno));
            free(path);
            return -1;
        }
        wire_pack_map(wb, 2);
        wire_put_i64(wb, "exit", 0);
        wire_put_bin(wb, "stdout", buf, len);
        free(buf);
        free(path);
    }
    return 0;
}

/* How many of the batch role's scheduling fields put_sched() writes. */
static uint32_t sched_fields(const struct submit_opts *o)
{
    return (o->account != NULL) + (o->qos != NULL) + (o->class_ != NULL) + (o->resv != NULL) +
           (o->early || o->exact) + o->hold + (o->dependency != NULL) + (o->constraint != NULL);
}

/* The batch role's scheduling fields (SUBMIT and PSUBMIT alike). */
static void put_sched(struct wire_buf *wb, const struct submit_opts *o)
{
    const char *keys[] = {"account", "qos", "class", "resv"};
    const char *vals[] = {o->account, o->qos, o->class_, o->resv};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (vals[k])
            wire_put_str(wb, keys[k], vals[k]);
    if (o->early || o->exact) /* --exact-start: early false, said explicitly */
        wire_put_bool(wb, "early", !o->exact);
    if (o->hold)
        wire_put_bool(wb, "hold", true);
    if (o->dependency) /* checked by the role (wire/depend.c): its refusal names the term */
        wire_put_str(wb, "dependency", o->dependency);
    if (o->constraint) /* checked here and by the role (lib/constraint.c) */
        wire_put_str(wb, "constraint", o->constraint);
}

/* The PSUBMIT of a parallel job; the exit status. */
static int submit_parallel(struct cli *c, const struct submit_opts *o)
{
    struct wire_buf wb;
    struct cli_reply r;
    wire_buf_init(&wb);
    char **env, *cwd, why[300];
    if (submit_env_build(o->export_spec, o->chdir, &env, &cwd, why, sizeof why) < 0) {
        fprintf(stderr, "%s: %s\n", c->prog, why);
        return 2;
    }
    struct submit_data *sd; /* issue 26: every rank's inputs, {i} naming the rank */
    if (submit_data_prepare(c, o->user, o->inputs, o->ninputs, o->outputs, o->noutputs, o->procs,
                            &sd) < 0) {
        submit_env_free(env, cwd);
        return 1;
    }
    uint32_t nf = 6 + o->has_ppn + (o->name != NULL) + (o->user != NULL) + (o->group != NULL) +
                  o->has_queue + (o->mem > 0) + (o->disk > 0) + (o->cpu > 0) + o->has_limit +
                  sched_fields(o) + o->network + jobenv_put(NULL, env, cwd) +
                  submit_data_nfields(sd) + (o->ckpt_s > 0);
    wire_begin(&wb, WT_PSUBMIT, 1, nf);
    submit_data_put(&wb, sd);
    put_sched(&wb, o);
    jobenv_put(&wb, env, cwd); /* --export / --chdir (issue 15) */
    submit_env_free(env, cwd);
    wire_put_strv(&wb, "argv", o->argv, (uint32_t)o->argc);
    wire_put_u64(&wb, "procs", o->procs);
    if (o->has_ppn) /* not given: the cluster's default (1), packed at batch and meta */
        wire_put_u64(&wb, "ppn", o->ppn);
    wire_put_bool(&wb, "shell", o->shell);
    wire_put_bool(&wb, "wait", o->wait_res);
    wire_put_bool(&wb, "coc", o->coc);
    wire_put_str(&wb, "key", o->key);
    if (o->name)
        wire_put_str(&wb, "name", o->name);
    if (o->user)
        wire_put_str(&wb, "user", o->user);
    if (o->group)
        wire_put_str(&wb, "group", o->group);
    if (o->has_queue)
        wire_put_u64(&wb, "queue", o->queue);
    if (o->mem)
        wire_put_u64(&wb, "mem_mb", o->mem);
    if (o->disk)
        wire_put_u64(&wb, "disk_mb", o->disk);
    if (o->cpu)
        wire_put_u64(&wb, "cpu_s", o->cpu);
    if (o->has_limit)
        wire_put_u64(&wb, "limit_s", o->limit);
    if (o->network)
        wire_put_bool(&wb, "network", true);
    if (o->ckpt_s) /* issue 26: every rank's, by generation (docs/data.md) */
        wire_put_u64(&wb, "checkpoint_s", o->ckpt_s);
    int rc = call_retrying(c, o, &wb, &r);
    wire_buf_free(&wb);
    if (rc != 0) {
        submit_data_free(&sd);
        return 1;
    }
    uint64_t job = wire_get_u64(r.msg.root, "job", 0);
    char state[16], cl[64], reason[300];
    cli_text(r.msg.root, "state", state, sizeof state);
    cli_text(r.msg.root, "cluster", cl, sizeof cl);
    cli_text(r.msg.root, "reason", reason, sizeof reason);
    if (c->json)
        cli_print_json(r.msg.root);
    else if (!strcmp(state, "waiting"))
        printf("submitted parallel job %llu (%llu processes): waiting: %s\n",
               (unsigned long long)job, (unsigned long long)o->procs, reason);
    else if (!strcmp(cl, "*"))
        printf("submitted parallel job %llu (%llu processes) to a cluster of clusters\n",
               (unsigned long long)job, (unsigned long long)o->procs);
    else if (cl[0])
        printf("submitted parallel job %llu (%llu processes) to cluster %s\n",
               (unsigned long long)job, (unsigned long long)o->procs, cl);
    else /* a batch role or a grid spool: it places the job later, on a cluster or site */
        printf("submitted parallel job %llu (%llu processes): %s at %s, which places it "
               "(gridnode job %llu -e %s shows where)\n",
               (unsigned long long)job, (unsigned long long)o->procs, state[0] ? state : "queued",
               c->endpoint, (unsigned long long)job, c->endpoint);
    cli_reply_free(&r);
    fflush(stdout);
    rc = submit_data_finish(c, sd, job, o->retries); /* cut-through: the rest of the inputs */
    submit_data_free(&sd);
    if (!o->wait || rc < 0)
        cli_unkeep(c); /* kept for the uploads of --input (issue 26) */
    return rc < 0 ? 1 : o->wait ? cmd_job_wait(c, job) : 0;
}

/* The fields of SUBMIT / PSUBMIT as the options that set them, for the role's refusals
 * (longer phrases first). */
static const char *const submit_words[][2] = {
    {"procs and ppn", "-p/--procs and --ppn"},
    {"ntasks", "-n/--tasks"},
    {"procs", "-p/--procs"},
    {"ppn", "--ppn"},
    {"limit_s", "--limit"},
    {"deadline_s", "--deadline"},
    {"checkpoint_s", "--checkpoint-s"},
    {"gpu_type", "--gpu-type"},
    {"gpus", "--gpus"},
    {"env entry", "--export item"},
    {"chdir", "--chdir"},
    {"network", "--network"},
    {"dependency", "--dependency"},
    {"constraint", "--constraint"},
    {"complexity", "--complexity"},
    {"stdin", "--stdin"},
    {"no such queue", "no such queue (--queue)"},
    {"mem_mb", "--mem"},
    {"disk_mb", "--disk"},
    {"cpu_s", "--cpu"},
    {"argv", "PROGRAM"},
    {NULL, NULL},
};

/* A job script's header: the tokens of its #GRIDNODE lines, split on blanks ('..' and
 * ".." quote). Appends to toks (pointers into text, which it edits); -1 when too many. */
static int directives(char *text, char **toks, int cap, int *n)
{
    char *line = text;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *p = line + strspn(line, " \t\r");
        if (*p && *p != '#') { /* the first command: no directives after it */
            if (nl)
                *nl = '\n';
            break;
        }
        if (!strncmp(p, "#GRIDNODE", 9) && (p[9] == ' ' || p[9] == '\t')) {
            p += 9;
            for (;;) {
                p += strspn(p, " \t\r");
                if (!*p)
                    break;
                if (*n >= cap)
                    return -1;
                char q = (*p == '"' || *p == '\'') ? *p++ : 0, *end;
                char *tok = toks[(*n)++] = p;
                end = q ? strchr(p, q) : p + strcspn(p, " \t\r");
                bool last = !end || !*end;
                if (last)
                    p += strlen(p);
                else
                    *end = '\0', p = end + 1;
                char *eq = strchr(tok, '='); /* --opt=value: two words, as main.c */
                if (!q && eq && !strncmp(tok, "--", 2)) {
                    if (*n >= cap)
                        return -1;
                    *eq = '\0';
                    toks[(*n)++] = eq + 1;
                }
                if (last)
                    break;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

#define SCRIPT_MAX 16384 /* a task's argv element (roles/cluster/handlers.c) */

/*
 * When o names a job script (a file with #GRIDNODE directives), parses again with the
 * directives first and the command line's options after them (the last given wins),
 * the script's text as the program. 0 (also when it is no job script), or -1 (printed).
 */
static int job_script(struct cli *c, struct submit_opts *o)
{
    static char text[SCRIPT_MAX + 1], hdr[SCRIPT_MAX + 1], interp[256];
    static char *nargv[1024];
    const char *path = o->argv[0];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t len = fread(text, 1, SCRIPT_MAX + 1, f);
    fclose(f);
    text[len < SCRIPT_MAX ? len : SCRIPT_MAX] = '\0';
    if (memchr(text, '\0', len < SCRIPT_MAX ? len : SCRIPT_MAX) || !strstr(text, "#GRIDNODE"))
        return 0; /* a program, or a script without directives: run as it is */
    if (len > SCRIPT_MAX) {
        fprintf(stderr,
                "%s: job script %s is longer than %d bytes; keep the work in a "
                "program it runs\n",
                c->prog, path, SCRIPT_MAX);
        return -1;
    }
    memcpy(hdr, text, len + 1);
    char *toks[512];
    int nt = 0;
    if (directives(hdr, toks, 512, &nt) < 0) {
        fprintf(stderr, "%s: %s: too many #GRIDNODE words (512 at most)\n", c->prog, path);
        return -1;
    }
    if (nt == 0)
        return 0;
    int n = 0;
    nargv[n++] = o->optv[0];
    for (int k = 0; k < nt; k++)
        nargv[n++] = toks[k];
    /* the directives alone must be options: a stray word would become the program */
    struct submit_opts d;
    nargv[n] = "--";
    nargv[n + 1] = "true";
    if (parse(c, n + 2, nargv, &d) < 0) {
        fprintf(stderr, "  (in the #GRIDNODE lines of %s)\n", path);
        return -1;
    }
    if (d.argc != 1) {
        fprintf(stderr, "%s: %s: '%s' in a #GRIDNODE line is not an option\n", c->prog, path,
                toks[d.argv - nargv - 1]);
        return -1;
    }
    if ((size_t)(n + o->optc + o->argc + 8) > sizeof nargv / sizeof *nargv) {
        fprintf(stderr, "%s: too many arguments\n", c->prog);
        return -1;
    }
    for (int k = 1; k < o->optc; k++)
        nargv[n++] = o->optv[k];
    bool shell = true;
    if (!strncmp(text, "#!", 2)) { /* its interpreter, unless it is the shell's */
        size_t l = strcspn(text + 2, "\n");
        snprintf(interp, sizeof interp, "%.*s", (int)(l < 255 ? l : 255), text + 2);
        char *w = interp + strspn(interp, " \t");
        if (strcmp(w, "/bin/sh") && strncmp(w, "/bin/sh ", 8)) {
            nargv[n++] = "--";
            for (char *t = strtok(w, " \t\r"); t; t = strtok(NULL, " \t\r"))
                nargv[n++] = t;
            nargv[n++] = "-c";
            shell = false;
        }
    }
    if (shell) {
        nargv[n++] = "--shell";
        nargv[n++] = "--";
    }
    nargv[n++] = text;
    nargv[n++] = (char *)path; /* $0 */
    for (int k = 1; k < o->argc; k++)
        nargv[n++] = o->argv[k];
    nargv[n] = NULL;
    return parse(c, n, nargv, o);
}

int cmd_submit(int argc, char **argv)
{
    struct cli c;
    struct submit_opts o;
    struct wire_buf wb;
    struct cli_reply r;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s%s", usage, cli_common_help());
        return 0;
    }
    if (cli_common(&c, "gridnode submit", &argc, argv) < 0 || parse(&c, argc, argv, &o) < 0 ||
        job_script(&c, &o) < 0)
        return 2;
    c.words = submit_words;
    if (o.procs)
        return submit_parallel(&c, &o);
    if (o.ntasks == 0 || o.ntasks > 10000000 || (o.stdin_pattern && o.ntasks > 100000)) {
        fprintf(stderr, "%s: --tasks must be 1..10000000 (1..100000 with --stdin)\n", c.prog);
        return 2;
    }
    wire_buf_init(&wb);
    if (o.gpu_type && !o.gpus) {
        fprintf(stderr, "%s: --gpu-type needs --gpus N (the GPUs each task uses)\n", c.prog);
        return 2;
    }
    char **env, *cwd, why[300];
    if (submit_env_build(o.export_spec, o.chdir, &env, &cwd, why, sizeof why) < 0) {
        fprintf(stderr, "%s: %s\n", c.prog, why);
        return 2;
    }
    if (o.known && o.ntasks > 100000) {
        fprintf(stderr, "%s: --known takes at most 100000 tasks\n", c.prog);
        return 2;
    }
    struct submit_data *sd; /* issue 26: inputs uploaded before the SUBMIT naming them */
    if (submit_data_prepare(&c, o.user, o.inputs, o.ninputs, o.outputs, o.noutputs, o.ntasks, &sd) <
        0) {
        submit_env_free(env, cwd);
        return 1;
    }
    uint32_t nf = 5 + (o.name != NULL) + (o.user != NULL) + o.has_limit +
                  (o.stdin_pattern != NULL) + sched_fields(&o) + (o.deadline > 0) + (o.gpus > 0) +
                  (o.gpu_type != NULL) + valid_fields(&o) + o.network + jobenv_put(NULL, env, cwd) +
                  submit_data_nfields(sd) + (o.ckpt_s > 0);
    wire_begin(&wb, WT_SUBMIT, 1, nf);
    put_sched(&wb, &o);
    if (put_valid(&c, &wb, &o) < 0) {
        wire_buf_free(&wb);
        submit_data_free(&sd);
        cli_unkeep(&c);
        return 1;
    }
    wire_put_strv(&wb, "argv", o.argv, (uint32_t)o.argc);
    wire_put_u64(&wb, "ntasks", o.ntasks);
    wire_put_bool(&wb, "shell", o.shell);
    wire_put_f64(&wb, "complexity", o.complexity);
    wire_put_str(&wb, "key", o.key);
    if (o.name)
        wire_put_str(&wb, "name", o.name);
    if (o.user)
        wire_put_str(&wb, "user", o.user);
    if (o.has_limit)
        wire_put_u64(&wb, "limit_s", o.limit);
    if (o.deadline)
        wire_put_u64(&wb, "deadline_s", o.deadline);
    if (o.ckpt_s) /* issue 26 */
        wire_put_u64(&wb, "checkpoint_s", o.ckpt_s);
    if (o.gpus)
        wire_put_u64(&wb, "gpus", o.gpus);
    if (o.gpu_type)
        wire_put_str(&wb, "gpu_type", o.gpu_type);
    if (o.network)
        wire_put_bool(&wb, "network", true);
    jobenv_put(&wb, env, cwd);
    submit_env_free(env, cwd);
    submit_data_put(&wb, sd);
    if (o.stdin_pattern && pack_stdin(&c, &o, &wb) < 0) {
        wire_buf_free(&wb);
        submit_data_free(&sd);
        cli_unkeep(&c);
        return 1;
    }
    int rc = call_retrying(&c, &o, &wb, &r);
    wire_buf_free(&wb);
    if (rc != 0) {
        submit_data_free(&sd);
        return 1;
    }
    uint64_t job = wire_get_u64(r.msg.root, "job", 0);
    if (c.json)
        cli_print_json(r.msg.root);
    else
        printf("submitted job %llu (%llu task%s)\n", (unsigned long long)job,
               (unsigned long long)o.ntasks, o.ntasks == 1 ? "" : "s");
    cli_reply_free(&r);
    fflush(stdout);
    rc = submit_data_finish(&c, sd, job, o.retries); /* cut-through: the rest of the inputs */
    submit_data_free(&sd);
    if (!o.wait || rc < 0)
        cli_unkeep(&c); /* kept for the uploads of --input (issue 26) */
    return rc < 0 ? 1 : o.wait ? cmd_job_wait(&c, job) : 0;
}

/* submit.c - `gridnode submit`: send a job (a bag of N tasks) to a cluster manager. */
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "roles/cluster/app.h"

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
    "  --deadline SECONDS     report deadline of each task after it is handed out\n"
    "                         (default: the cluster's tasks.deadline_s); a result after it\n"
    "                         is still taken and counted as late\n"
    "  --gpus N               GPU instances each task needs: tasks go only to volunteer\n"
    "                         clients that declared at least N GPUs of one type\n"
    "  --gpu-type TYPE        that GPU type (nvidia, amd, intel, ...; default: any)\n"
    "  --wait                 wait for the job to end (like `gridnode job ID --wait`)\n"
    "  --key KEY              request key (1..128 bytes; default: a random one per run).\n"
    "                         The cluster manager keeps one job per key and user: the\n"
    "                         same key sent again returns the first job, never a second\n"
    "  --retries N            when no answer comes within --timeout, send the same request\n"
    "                         (same key) again, up to N times (default 3)\n"
    "\n"
    "A parallel job (SCore-D side: N processes started together on hosts the cluster\n"
    "manager chooses; each gets GRIDNODE_RANK, GRIDNODE_SIZE, GRIDNODE_HOSTS, GRIDNODE_PPN,\n"
    "GRIDNODE_JOB and GRIDNODE_NODE in its environment):\n"
    "  -p, --procs N          number of processes (makes the job parallel)\n"
    "  --ppn N                processes per host (default 1)\n"
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
    "  --hold                 stays pending until released\n"
    "  (--limit is the walltime: the job is ended when it passes it)\n";

struct submit_opts {
    uint64_t ntasks, limit, procs, ppn, queue, mem, disk, cpu;
    uint64_t deadline, gpus; /* issue 11; 0: not given */
    const char *gpu_type;
    bool has_queue, wait_res, coc;
    const char *group, *key;
    const char *account, *qos, *class_, *resv; /* batch role only */
    bool early, hold;
    uint64_t retries;
    char keybuf[40];
    double complexity;
    const char *name, *user, *stdin_pattern;
    bool shell, wait, has_limit;
    char **argv;
    int argc;
};

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
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--tasks")) && v) {
            if (cli_u64(c, "--tasks", argv[++i], &o->ntasks) < 0)
                return -1;
        } else if (!strcmp(a, "--name") && v) {
            o->name = argv[++i];
        } else if (!strcmp(a, "--user") && v) {
            o->user = argv[++i];
        } else if (!strcmp(a, "--stdin") && v) {
            o->stdin_pattern = argv[++i];
        } else if (!strcmp(a, "--limit") && v) {
            if (cli_u64(c, "--limit", argv[++i], &o->limit) < 0)
                return -1;
            o->has_limit = true;
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
            if (*end || !(o->complexity > 0)) {
                fprintf(stderr, "%s: --complexity must be a positive number\n", c->prog);
                return -1;
            }
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--procs")) && v) {
            if (cli_u64(c, "--procs", argv[++i], &o->procs) < 0)
                return -1;
        } else if (!strcmp(a, "--ppn") && v) {
            if (cli_u64(c, "--ppn", argv[++i], &o->ppn) < 0)
                return -1;
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
        } else {
            fprintf(stderr, "%s: unknown option '%s'\n%s", c->prog, a, usage);
            return -1;
        }
    }
    o->argv = argv + i;
    o->argc = argc - i;
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
    return 0;
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
    for (uint64_t a = 1;; a++) {
        int rc = cli_call(c, wb, 1, r);
        if (rc >= 0 || a > o->retries)
            return rc;
        fprintf(stderr,
                "%s: sending again (retry %llu of %llu) with the same request key %s; "
                "the cluster manager keeps one job per key\n",
                c->prog, (unsigned long long)a, (unsigned long long)o->retries, o->key);
    }
}

/* How many of the batch role's scheduling fields put_sched() writes. */
static uint32_t sched_fields(const struct submit_opts *o)
{
    return (o->account != NULL) + (o->qos != NULL) + (o->class_ != NULL) + (o->resv != NULL) +
           o->early + o->hold;
}

/* The batch role's scheduling fields (SUBMIT and PSUBMIT alike). */
static void put_sched(struct wire_buf *wb, const struct submit_opts *o)
{
    const char *keys[] = {"account", "qos", "class", "resv"};
    const char *vals[] = {o->account, o->qos, o->class_, o->resv};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (vals[k])
            wire_put_str(wb, keys[k], vals[k]);
    if (o->early)
        wire_put_bool(wb, "early", true);
    if (o->hold)
        wire_put_bool(wb, "hold", true);
}

/* The PSUBMIT of a parallel job; the exit status. */
static int submit_parallel(struct cli *c, const struct submit_opts *o)
{
    struct wire_buf wb;
    struct cli_reply r;
    wire_buf_init(&wb);
    uint32_t nf = 7 + (o->name != NULL) + (o->user != NULL) + (o->group != NULL) + o->has_queue +
                  (o->mem > 0) + (o->disk > 0) + (o->cpu > 0) + o->has_limit + sched_fields(o);
    wire_begin(&wb, WT_PSUBMIT, 1, nf);
    put_sched(&wb, o);
    wire_put_strv(&wb, "argv", o->argv, (uint32_t)o->argc);
    wire_put_u64(&wb, "procs", o->procs);
    wire_put_u64(&wb, "ppn", o->ppn ? o->ppn : 1);
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
    int rc = call_retrying(c, o, &wb, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
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
    else
        printf("submitted parallel job %llu (%llu processes) to cluster %s\n",
               (unsigned long long)job, (unsigned long long)o->procs, cl);
    cli_reply_free(&r);
    fflush(stdout);
    return o->wait ? cmd_job_wait(c, job) : 0;
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
    if (cli_common(&c, "gridnode submit", &argc, argv) < 0 || parse(&c, argc, argv, &o) < 0)
        return 2;
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
    uint32_t nf = 5 + (o.name != NULL) + (o.user != NULL) + o.has_limit +
                  (o.stdin_pattern != NULL) + sched_fields(&o) + (o.deadline > 0) + (o.gpus > 0) +
                  (o.gpu_type != NULL);
    wire_begin(&wb, WT_SUBMIT, 1, nf);
    put_sched(&wb, &o);
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
    if (o.gpus)
        wire_put_u64(&wb, "gpus", o.gpus);
    if (o.gpu_type)
        wire_put_str(&wb, "gpu_type", o.gpu_type);
    if (o.stdin_pattern && pack_stdin(&c, &o, &wb) < 0) {
        wire_buf_free(&wb);
        return 1;
    }
    int rc = call_retrying(&c, &o, &wb, &r);
    wire_buf_free(&wb);
    if (rc != 0)
        return 1;
    uint64_t job = wire_get_u64(r.msg.root, "job", 0);
    if (c.json)
        cli_print_json(r.msg.root);
    else
        printf("submitted job %llu (%llu task%s)\n", (unsigned long long)job,
               (unsigned long long)o.ntasks, o.ntasks == 1 ? "" : "s");
    cli_reply_free(&r);
    fflush(stdout);
    return o.wait ? cmd_job_wait(&c, job) : 0;
}

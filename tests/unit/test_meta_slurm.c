/* test_meta_slurm.c - the Slurm site adapter (roles/meta/slurm/slurm.c): its parsers, and the
 * adapter itself on the role's loop against stand-in Slurm commands (shell scripts in a
 * temporary bin=DIR): replies, a command that hangs (killed at its deadline while the
 * loop keeps running), bad requests. The real Slurm is tests/system/test_meta_slurm.py. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/loop.h"
#include "lib/sha256.h"
#include "roles/meta/slurm/slurm.h"
#include "wire/wire.h"

static void test_parsers(void **st)
{
    (void)st;
    setenv("TZ", "UTC", 1);
    tzset();
    assert_int_equal(slurm_time_ms("1970-01-01T00:01:40"), 100000);
    assert_int_equal(slurm_time_ms("N/A"), -1);
    assert_int_equal(slurm_time_ms("Unknown"), -1);
    assert_int_equal(slurm_time_ms(NULL), -1);
    assert_int_equal(slurm_test_only_start("sbatch: Job 2001 to start at 1970-01-01T00:00:10 using "
                                           "1 processors on nodes vm in partition debug\n"),
                     10000);
    assert_int_equal(slurm_test_only_start("sbatch: error: Batch job submission failed"), -1);
    assert_string_equal(slurm_state_word("PENDING"), "queued");
    assert_string_equal(slurm_state_word("COMPLETING"), "running");
    assert_string_equal(slurm_state_word("COMPLETED"), "done");
    assert_string_equal(slurm_state_word("TIMEOUT"), "killed");
    assert_string_equal(slurm_state_word("CANCELLED"), "cancelled");
    assert_string_equal(slurm_state_word("NODE_FAIL"), "failed");
    char v[64];
    const char *ln = "ReservationName=m1-2-3 StartTime=2026-01-01T00:00:00 CoreCnt=2 Users=root";
    assert_true(slurm_field(ln, "CoreCnt", v, sizeof v));
    assert_string_equal(v, "2");
    assert_true(slurm_field(ln, "ReservationName", v, sizeof v));
    assert_string_equal(v, "m1-2-3");
    assert_false(slurm_field(ln, "Name", v, sizeof v)); /* not the tail of another key */
    char q[64] = "";
    assert_true(slurm_shquote(q, sizeof q, "it's", 4));
    assert_string_equal(q, "'it'\\''s'");
    char small[6] = "";
    assert_false(slurm_shquote(small, sizeof small, "abcdef", 6));
    assert_int_equal(slurm_bf_window_min("bf_interval=1,bf_window=4320"), 4320);
    assert_int_equal(slurm_bf_window_min("(null)"), 1440);
    assert_int_equal(slurm_bf_window_min("xbf_window=5"), 1440);
    assert_true(slurm_meta_resv_name("m23a9f13a3b4520f7-1-1"));
    assert_false(slurm_meta_resv_name("m23a9-1"));
    assert_false(slurm_meta_resv_name("maint"));
    assert_false(slurm_meta_resv_name("m1-2-3x"));
}

static void test_url(void **st)
{
    (void)st;
    struct slurm_conf c;
    char err[300];
    assert_int_equal(slurm_url_parse("slurm:///etc/slurm/slurm.conf?partition=batch&account=grid"
                                     "&qos=normal&timeout_ms=2500&dir=/scratch",
                                     &c, err, sizeof err),
                     0);
    assert_string_equal(c.conf, "/etc/slurm/slurm.conf");
    assert_string_equal(c.partition, "batch");
    assert_string_equal(c.account, "grid");
    assert_string_equal(c.qos, "normal");
    assert_string_equal(c.dir, "/scratch");
    assert_int_equal(c.timeout_ms, 2500);
    assert_int_equal(slurm_url_parse("slurm://", &c, err, sizeof err), 0);
    assert_string_equal(c.conf, "");
    assert_string_equal(c.dir, "/tmp");
    assert_int_equal(slurm_url_parse("slurm://relative.conf", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "absolute"));
    assert_int_equal(slurm_url_parse("slurm://?colour=red", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "colour"));
    assert_int_equal(slurm_url_parse("slurm://?timeout_ms=5", &c, err, sizeof err), -1);
    assert_int_equal(slurm_url_parse("slurm://?partition=a;rm", &c, err, sizeof err), -1);
    assert_int_equal(slurm_url_parse("tcp://x:1", &c, err, sizeof err), -1);
}

/* ---- the adapter on a loop, against stand-in commands ---- */

struct fx {
    char dir[64];
    struct loop *l;
    struct slurm_site *S;
    int nrep;
    struct {
        uint32_t type;
        uint64_t id, code;
        char msg[300];
        int64_t earliest;
        uint64_t job;
        char state[32], reason[128];
        int64_t exit;
        uint64_t have; /* FILE_STATE (issue 26) */
        bool done;
    } rep[16];
};

static void on_reply(void *arg, const void *data, size_t len)
{
    struct fx *f = arg;
    struct wire_msg m;
    struct wire_error we;
    assert_int_equal(wire_decode(data, len, false, &m, &we), 0); /* a valid reply */
    if (f->nrep < 16) {
        __typeof__(f->rep[0]) *r = &f->rep[f->nrep++];
        r->type = m.type;
        r->id = m.id;
        r->code = wire_get_u64(m.root, "code", 0);
        wire_get_strbuf(m.root, "msg", r->msg, sizeof r->msg);
        r->earliest = wire_get_i64(m.root, "earliest", -2);
        r->job = wire_get_u64(m.root, "job", 0);
        r->have = wire_get_u64(m.root, "have", 0);
        r->done = wire_get_bool(m.root, "done", false);
        const msgpack_object *j = wire_get(m.root, "job");
        if (j && j->type == MSGPACK_OBJECT_MAP) {
            wire_get_strbuf(j, "state", r->state, sizeof r->state);
            wire_get_strbuf(j, "reason", r->reason, sizeof r->reason);
            r->exit = wire_get_i64(j, "exit", -99);
        }
    }
    wire_msg_free(&m);
}

static void script(struct fx *f, const char *name, const char *body)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", f->dir, name);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fprintf(fp, "#!/bin/sh\n%s\n", body);
    fclose(fp);
    chmod(p, 0755);
}

/* The fake Slurm commands of every test; timeout_ms bounds each command. The fakes answer
 * at once, but on a loaded machine a shell's start alone can take hundreds of ms.
 * scontrol show config answers a second late on purpose: a poll that ends before the
 * site's configuration is known must still ask accounting (job 43 below); it did not,
 * and test_adapter failed whenever a loaded machine ran squeue before scontrol. */
static int setup_with(void **st, int timeout_ms)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/test_meta_slurm.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    script(f, "sinfo", "echo 'debug*|up|1/3/0/4|1/0/0/1'");
    script(f, "scontrol",
           "case \"$1\" in show) sleep 1; echo 'SchedulerParameters     = bf_window=60'; "
           "echo 'AccountingStorageType   = accounting_storage/slurmdbd';; "
           "create) echo created;; delete) echo \"scontrol: delete_reservation $2: Requested "
           "reservation is invalid\" >&2; exit 1;; *) echo \"Invalid reservation $*\" >&2; "
           "exit 1;; "
           "esac");
    script(f, "squeue",
           "case \"$*\" in *--jobs=*) echo '42|RUNNING|2026-01-01T00:00:00|"
           "2026-01-01T01:00:00|0|None|vm|';; *--name=*) ;; *) echo PD; echo R;; "
           "esac");
    script(f, "sbatch",
           "case \"$*\" in *--test-only*) echo 'sbatch: Job 9 to start at "
           "2030-01-01T00:00:00 using 1 processors' >&2;; *hang*) exec sleep 30;; "
           "*) echo 77;; esac");
    script(f, "sacct", "echo '43|FAILED|2026-01-01T00:00:00|2026-01-01T00:10:00|3:0'");
    script(f, "scancel", "echo 'scancel: error: Invalid job id 5' >&2; exit 1");
    f->l = loop_new();
    struct slurm_conf c;
    char err[300], url[200];
    snprintf(url, sizeof url, "slurm://?bin=%s&timeout_ms=%d&dir=%s", f->dir, timeout_ms, f->dir);
    if (slurm_url_parse(url, &c, err, sizeof err) < 0)
        return -1;
    f->S = slurm_site_new(&c, "t", "meta", f->l, on_reply, f, err, sizeof err);
    if (!f->S)
        return -1;
    *st = f;
    return 0;
}

/* test_adapter: no command is meant to time out */
static int setup(void **st)
{
    return setup_with(st, 20000);
}

/* test_hang_killed_loop_free: a hanging sbatch is killed at 1 s */
static int setup_hang(void **st)
{
    return setup_with(st, 1000);
}

static int teardown(void **st)
{
    struct fx *f = *st;
    slurm_site_destroy(&f->S);
    assert_null(f->S);
    loop_destroy(&f->l);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void tick(struct loop *l, void *arg)
{
    struct fx *f = arg;
    slurm_site_tick(f->S);
    (void)l;
}

static void stop(struct loop *l, void *arg)
{
    (void)arg;
    loop_stop(l);
}

static int want_n;
static void check_done(struct loop *l, void *arg)
{
    struct fx *f = arg;
    if (f->nrep >= want_n)
        loop_stop(l);
}

/* Runs the loop until n replies arrived or ms passed; the time it took. */
static int64_t run_until(struct fx *f, int n, int64_t ms)
{
    want_n = n;
    int64_t t0 = loop_now_ms();
    int a = loop_timer(f->l, 10, 1, tick, f), b = loop_timer(f->l, 10, 1, check_done, f);
    int c = loop_timer(f->l, ms, 0, stop, NULL);
    (void)c;
    loop_run(f->l);
    loop_timer_cancel(f->l, a);
    loop_timer_cancel(f->l, b);
    loop_timer_cancel(f->l, c);
    return loop_now_ms() - t0;
}

static void request(struct fx *f, uint32_t type, uint64_t id, const char *k1, uint64_t v1,
                    const char *skey, const char *sval, bool argv)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, type, id, (k1 ? 1 : 0) + (skey ? 1 : 0) + (argv ? 2 : 0));
    if (k1)
        wire_put_u64(&wb, k1, v1);
    if (skey)
        wire_put_str(&wb, skey, sval);
    if (argv) {
        char *av[] = {"echo", "hang"};
        wire_put_strv(&wb, "argv", av, 2);
        wire_put_u64(&wb, "procs", 1);
    }
    slurm_site_request(f->S, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

static int find(struct fx *f, uint64_t id)
{
    for (int i = 0; i < f->nrep; i++)
        if (f->rep[i].id == id)
            return i;
    return -1;
}

/* (the loop runs once per test: a stopped loop stays stopped) */
static void test_adapter(void **st)
{
    struct fx *f = *st;
    setenv("TZ", "UTC", 1);
    tzset();
    request(f, WT_SITE_INFO, 1, NULL, 0, NULL, NULL, false);
    request(f, WT_ESTIMATE, 2, "procs", 1, NULL, NULL, false);
    request(f, WT_JOB_GET, 3, "job", 42, NULL, NULL, false);
    request(f, WT_CANCEL, 4, "job", 5, NULL, NULL, false);
    request(f, WT_NODE_LIST, 5, NULL, 0, NULL, NULL, false);
    slurm_site_request(f->S, "\x81\xa1v", 3); /* malformed: an error reply, id 0 */
    /* jobs squeue no longer lists: from accounting (43), or failed, never "not found" (44) */
    request(f, WT_JOB_GET, 10, "job", 43, NULL, NULL, false);
    request(f, WT_JOB_GET, 11, "job", 44, NULL, NULL, false);
    /* a reservation Slurm dropped by itself (PURGE_COMP): gone, not an error to retry */
    request(f, WT_RESV_RELEASE, 12, NULL, 0, "name", "m1-1-1", false);
    run_until(f, 9, 10000);
    assert_int_equal(f->nrep, 9);
    int i = find(f, 1);
    assert_true(i >= 0 && f->rep[i].type == WT_SITE);
    i = find(f, 2);
    assert_true(i >= 0 && f->rep[i].type == WT_STARTS);
    assert_int_equal(f->rep[i].earliest, (int64_t)1893456000 * 1000);
    i = find(f, 3);
    assert_true(i >= 0 && f->rep[i].type == WT_JOB);
    assert_string_equal(f->rep[i].state, "running");
    i = find(f, 4);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR);
    assert_int_equal(f->rep[i].code, WE_NOT_FOUND);
    assert_non_null(strstr(f->rep[i].msg, "Invalid job id"));
    i = find(f, 5);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR);
    assert_int_equal(f->rep[i].code, WE_TYPE);
    i = find(f, 0);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR);
    i = find(f, 10);
    assert_true(i >= 0 && f->rep[i].type == WT_JOB);
    assert_string_equal(f->rep[i].state, "failed");
    assert_int_equal(f->rep[i].exit, 3);
    i = find(f, 11);
    assert_true(i >= 0 && f->rep[i].type == WT_JOB);
    assert_string_equal(f->rep[i].state, "failed");
    assert_non_null(strstr(f->rep[i].reason, "no longer knows"));
    i = find(f, 12);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR);
    assert_int_equal(f->rep[i].code, WE_NOT_FOUND);
}

static void test_hang_killed_loop_free(void **st)
{
    struct fx *f = *st;
    /* 7: a submission whose sbatch hangs, with a key: killed at its 1,000 ms deadline and
     * left unanswered (the spool resends with the key); 9: the same without a key: an
     * error naming the timeout; 8: an estimate, answered while those hang */
    request(f, WT_PSUBMIT, 7, NULL, 0, "key", "meta:x:1.1", true);
    request(f, WT_PSUBMIT, 9, NULL, 0, NULL, NULL, true);
    request(f, WT_ESTIMATE, 8, "procs", 1, NULL, NULL, false);
    /* the loop runs 3.5 s: past 7's deadline too (its squeue comes first), and never a
     * third reply */
    int64_t took = run_until(f, 3, 3500);
    assert_int_equal(f->nrep, 2);
    assert_int_equal(f->rep[0].id, 8); /* first: the loop was not blocked */
    assert_int_equal(f->rep[1].id, 9);
    assert_int_equal(f->rep[1].type, WT_ERROR);
    assert_non_null(strstr(f->rep[1].msg, "did not finish within 1000 ms"));
    assert_int_equal(find(f, 7), -1);
    assert_true(took >= 3400 && took < 9000);
}

/* ---- issue 26: files at the site ---- */

static void file_req(struct slurm_site *S, uint32_t type, uint64_t id, const char *hex,
                     uint64_t size, uint64_t off, const void *data, size_t len)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, type, id, type == WT_FILE_PUT ? 4 : 2);
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", size);
    if (type == WT_FILE_PUT) {
        wire_put_u64(&wb, "off", off);
        wire_put_bin(&wb, "data", data, len);
    }
    slurm_site_request(S, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

static void hex_of(const void *p, size_t n, char hex[SHA256_HEX])
{
    struct sha256 s;
    uint8_t d[SHA256_LEN];
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
    sha256_hex(d, hex);
}

/* Inputs received in order (a chunk out of step changes nothing), checked by hash and
 * kept read-only; bytes that do not hash to the name refused; a workdir that does not
 * exist named (and not made); a full disk (a 64 KiB tmpfs in a mount namespace of this
 * process, root only) is STORAGE "disk full". */
static void test_files(void **st)
{
    struct fx *f = *st;
    char wd[128], err[300], url[300], hx[SHA256_HEX], bad[SHA256_HEX], big[SHA256_HEX];
    snprintf(wd, sizeof wd, "%s/wd", f->dir);
    assert_int_equal(mkdir(wd, 0755), 0);
    struct slurm_conf c;
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s", f->dir, f->dir, wd);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    struct slurm_site *W = slurm_site_new(&c, "w", "meta", f->l, on_reply, f, err, sizeof err);
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s/gone", f->dir, f->dir, f->dir);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    struct slurm_site *G = slurm_site_new(&c, "g", "meta", f->l, on_reply, f, err, sizeof err);
    assert_non_null(W);
    assert_non_null(G);
    const char *text = "hello, world";
    hex_of(text, 12, hx);
    hex_of("abc", 3, bad);
    file_req(W, WT_FILE_HAVE, 20, hx, 12, 0, NULL, 0);
    file_req(W, WT_FILE_PUT, 21, hx, 12, 0, text, 5);
    file_req(W, WT_FILE_PUT, 22, hx, 12, 3, text + 3, 4); /* out of step: ignored */
    file_req(W, WT_FILE_PUT, 23, hx, 12, 5, text + 5, 7);
    file_req(W, WT_FILE_HAVE, 24, hx, 12, 0, NULL, 0);
    file_req(W, WT_FILE_HAVE, 25, bad, 3, 0, NULL, 0);
    file_req(W, WT_FILE_PUT, 26, bad, 3, 0, "xyz", 3);
    file_req(G, WT_FILE_HAVE, 27, hx, 12, 0, NULL, 0);
    bool full = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
                mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                mount("tmpfs", wd, "tmpfs", 0, "size=64k") == 0;
    static char zeros[200000];
    if (full) {
        hex_of(zeros, sizeof zeros, big);
        file_req(W, WT_FILE_HAVE, 28, big, sizeof zeros, 0, NULL, 0);
        file_req(W, WT_FILE_PUT, 29, big, sizeof zeros, 0, zeros, sizeof zeros);
    }
    run_until(f, full ? 10 : 8, 10000);
    int i = find(f, 20);
    assert_true(i >= 0 && f->rep[i].type == WT_FILE_STATE && f->rep[i].have == 0);
    i = find(f, 21);
    assert_true(i >= 0 && f->rep[i].have == 5 && !f->rep[i].done);
    i = find(f, 22);
    assert_true(i >= 0 && f->rep[i].have == 5 && !f->rep[i].done);
    i = find(f, 23);
    assert_true(i >= 0 && f->rep[i].have == 12 && f->rep[i].done);
    i = find(f, 24);
    assert_true(i >= 0 && f->rep[i].done);
    i = find(f, 25);
    assert_true(i >= 0 && f->rep[i].type == WT_FILE_STATE && !f->rep[i].done);
    i = find(f, 26);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR && f->rep[i].code == WE_INVALID);
    assert_non_null(strstr(f->rep[i].msg, "changed while it was sent"));
    i = find(f, 27);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR && f->rep[i].code == WE_INVALID);
    assert_non_null(strstr(f->rep[i].msg, "/gone cannot be used"));
    if (full) {
        i = find(f, 28);
        assert_true(i >= 0 && f->rep[i].type == WT_FILE_STATE);
        i = find(f, 29);
        assert_true(i >= 0 && f->rep[i].type == WT_ERROR && f->rep[i].code == WE_STORAGE);
        assert_non_null(strstr(f->rep[i].msg, "disk full"));
        slurm_site_destroy(&W); /* its part file open on the tmpfs */
        assert_int_equal(umount2(wd, MNT_DETACH), 0);
    } else {
        print_message("not root: the full disk case is not run\n");
    }
    char p[300];
    struct stat sb;
    snprintf(p, sizeof p, "%s/.gridnode-files/%s", wd, hx);
    if (!full) { /* (under the tmpfs, gone with it) */
        assert_int_equal(stat(p, &sb), 0);
        assert_int_equal(sb.st_size, 12);
        assert_int_equal(sb.st_mode & 0777, 0444);
    }
    snprintf(p, sizeof p, "%s/.gridnode-files/part/%s", wd, bad);
    assert_int_not_equal(stat(p, &sb), 0); /* the bad bytes dropped */
    snprintf(p, sizeof p, "%s/gone", f->dir);
    assert_int_not_equal(stat(p, &sb), 0); /* never made */
    slurm_site_destroy(&W);
    slurm_site_destroy(&G);
}

/* The site's input store swept (slurm_site_sweep): an input a job directory links stays,
 * one no job directory links and a part file no offer writes go once unchanged keep_s. */
static void test_sweep(void **st)
{
    struct fx *f = *st;
    char wd[128], err[300], url[300], p[300], q[300], part[300], job[300];
    char hx[SHA256_HEX], other[SHA256_HEX], bad[SHA256_HEX];
    snprintf(wd, sizeof wd, "%s/wd", f->dir);
    snprintf(p, sizeof p, "%s/.gridnode-files", wd);
    snprintf(q, sizeof q, "%s/.gridnode-files/part", wd);
    assert_int_equal(mkdir(wd, 0755), 0);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(mkdir(q, 0755), 0);
    struct slurm_conf c;
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s", f->dir, f->dir, wd);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    struct slurm_site *W = slurm_site_new(&c, "w", "meta", f->l, on_reply, f, err, sizeof err);
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s/gone", f->dir, f->dir, f->dir);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    struct slurm_site *G = slurm_site_new(&c, "g", "meta", f->l, on_reply, f, err, sizeof err);
    assert_non_null(W);
    assert_non_null(G);
    hex_of("linked", 6, hx);
    hex_of("other", 5, other);
    hex_of("abc", 3, bad);
    snprintf(p, sizeof p, "%s/.gridnode-files/%s", wd, hx);
    snprintf(q, sizeof q, "%s/.gridnode-files/%s", wd, other);
    snprintf(part, sizeof part, "%s/.gridnode-files/part/%s", wd, bad);
    snprintf(job, sizeof job, "%s/job-in", wd);
    const char *paths[] = {p, q, part};
    for (int i = 0; i < 3; i++) {
        FILE *w = fopen(paths[i], "w");
        assert_non_null(w);
        fputs("x", w);
        fclose(w);
    }
    assert_int_equal(link(p, job), 0); /* a job directory's input */
    struct stat sb;
    assert_int_equal(slurm_site_sweep(W, 3600), 0); /* nothing unchanged that long */
    sleep(1);
    assert_int_equal(slurm_site_sweep(W, 0), 2); /* the unlinked one and the part */
    assert_int_equal(stat(p, &sb), 0);
    assert_int_not_equal(stat(q, &sb), 0);
    assert_int_not_equal(stat(part, &sb), 0);
    assert_int_equal(unlink(job), 0); /* the job directory went: its input goes too */
    sleep(1);
    assert_int_equal(slurm_site_sweep(W, 0), 1);
    assert_int_not_equal(stat(p, &sb), 0);
    assert_int_equal(slurm_site_sweep(G, 0), -1); /* its workdir does not exist */
    slurm_site_destroy(&W);
    slurm_site_destroy(&G);
}

/* A PSUBMIT with files (issue 26): inputs of one rank only are refused naming a batch
 * site; shared ones are linked once into the job's one directory, and its record says
 * it is parallel (its outputs are named 0/NAME). */
static void psubmit_files(struct slurm_site *S, uint64_t id, const char *hex, bool ranked)
{
    struct wire_buf wb;
    wire_buf_init(&wb);
    wire_begin(&wb, WT_PSUBMIT, id, 6);
    wire_put_key(&wb, "argv");
    wire_pack_array(&wb, 1);
    wire_pack_str(&wb, "true");
    wire_put_u64(&wb, "procs", 2);
    wire_put_str(&wb, "key", ranked ? "meta:x:3.1" : "meta:x:4.1");
    wire_put_u64(&wb, "limit_s", 60);
    wire_put_key(&wb, "inputs");
    wire_pack_array(&wb, 1);
    wire_pack_map(&wb, 3 + ranked);
    wire_put_str(&wb, "name", "in.txt");
    wire_put_str(&wb, "hash", hex);
    wire_put_u64(&wb, "size", 12);
    if (ranked)
        wire_put_u64(&wb, "task", 1);
    wire_put_key(&wb, "outputs");
    wire_pack_array(&wb, 1);
    wire_pack_str(&wb, "*.out");
    slurm_site_request(S, wb.sb.data, wb.sb.size);
    wire_buf_free(&wb);
}

static void test_parallel_files(void **st)
{
    struct fx *f = *st;
    char wd[128], err[300], url[300], hx[SHA256_HEX], p[300];
    snprintf(wd, sizeof wd, "%s/wd", f->dir);
    assert_int_equal(mkdir(wd, 0755), 0);
    struct slurm_conf c;
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s", f->dir, f->dir, wd);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    struct slurm_site *W = slurm_site_new(&c, "w", "meta", f->l, on_reply, f, err, sizeof err);
    assert_non_null(W);
    const char *text = "hello, world";
    hex_of(text, 12, hx);
    file_req(W, WT_FILE_HAVE, 30, hx, 12, 0, NULL, 0);
    file_req(W, WT_FILE_PUT, 31, hx, 12, 0, text, 12);
    psubmit_files(W, 32, hx, true);
    psubmit_files(W, 33, hx, false);
    struct slurm_site *keep = f->S;
    f->S = W;
    run_until(f, 4, 10000);
    f->S = keep;
    int i = find(f, 31);
    assert_true(i >= 0 && f->rep[i].done);
    i = find(f, 32);
    assert_true(i >= 0 && f->rep[i].type == WT_ERROR && f->rep[i].code == WE_INVALID);
    assert_non_null(strstr(f->rep[i].msg, "need a batch site"));
    i = find(f, 33);
    assert_true(i >= 0 && f->rep[i].type == WT_SUBMITTED && f->rep[i].job == 77);
    struct stat sb;
    snprintf(p, sizeof p, "%s/meta:x:4.1/in.txt", wd);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_nlink, 2); /* the store's copy, linked once */
    snprintf(p, sizeof p, "%s/meta:x:3.1", wd);
    assert_int_not_equal(stat(p, &sb), 0); /* the refused one made nothing */
    snprintf(p, sizeof p, "%s/.gridnode-jobs/77", wd);
    FILE *r = fopen(p, "r");
    assert_non_null(r);
    char line[300] = "";
    assert_non_null(fgets(line, sizeof line, r));
    fclose(r);
    assert_non_null(strstr(line, "/meta:x:4.1\tparallel\n"));
    slurm_site_destroy(&W);
}

/* ---- job directories' retention (issue 26, slurmkeep.c) ---- */

static int64_t keep_done(void *arg, const char *name)
{
    (void)arg;
    return !strcmp(name, "meta:x:1.1") ? 1000 : -1; /* ended long ago; the rest needed */
}

static char gone_path[300];
static void check_gone(struct loop *l, void *arg)
{
    (void)arg;
    struct stat sb;
    if (lstat(gone_path, &sb) < 0)
        loop_stop(l);
}

static void put(const char *path, const char *text)
{
    FILE *w = fopen(path, "w");
    assert_non_null(w);
    fputs(text, w);
    fclose(w);
}

/* A directory the spool is done with is removed, its links removed and never followed
 * (a file and a directory outside stay whole), a read-only subdirectory and a deep tree
 * included; one the spool still needs stays; the record of the removed one goes at the
 * sweep, the other's stays. slurm_rm_tree stops at its depth. */
static void test_retention(void **st)
{
    struct fx *f = *st;
    char wd[128], err[300], url[300], p[400], done[200], busy[200], out[200];
    snprintf(wd, sizeof wd, "%s/wd", f->dir);
    snprintf(done, sizeof done, "%s/meta:x:1.1", wd);
    snprintf(busy, sizeof busy, "%s/meta:x:2.1", wd);
    snprintf(out, sizeof out, "%s/outside", f->dir);
    assert_int_equal(mkdir(wd, 0755), 0);
    assert_int_equal(mkdir(out, 0755), 0);
    assert_int_equal(mkdir(done, 0700), 0);
    assert_int_equal(mkdir(busy, 0700), 0);
    snprintf(p, sizeof p, "%s/keep.txt", out);
    put(p, "outside\n");
    snprintf(p, sizeof p, "%s/res.out", done);
    put(p, "result\n");
    snprintf(p, sizeof p, "%s/link.txt", done);
    assert_int_equal(symlink("../../outside/keep.txt", p), 0);
    snprintf(p, sizeof p, "%s/linkdir", done);
    assert_int_equal(symlink(out, p), 0);
    char deep[400];
    snprintf(deep, sizeof deep, "%s/sub", done);
    assert_int_equal(mkdir(deep, 0755), 0);
    for (int i = 0; i < 20; i++) { /* sub/d/d/.../d */
        strcat(deep, "/d");
        assert_int_equal(mkdir(deep, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/f", deep);
    put(p, "deep\n");
    snprintf(p, sizeof p, "%s/sub", done);
    assert_int_equal(chmod(p, 0500), 0); /* read-only: made writable by its owner */
    snprintf(p, sizeof p, "%s/b.out", busy);
    put(p, "busy\n");
    snprintf(p, sizeof p, "%s/.gridnode-jobs", wd);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/.gridnode-files", wd);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/.gridnode-jobs/7", wd);
    char rec[300];
    snprintf(rec, sizeof rec, "%s\n*.out\n", done);
    put(p, rec);
    snprintf(p, sizeof p, "%s/.gridnode-jobs/8", wd);
    snprintf(rec, sizeof rec, "%s\tparallel\n*.out\n", busy);
    put(p, rec);

    /* the depth bound: 20 levels are more than 5 */
    snprintf(p, sizeof p, "%s/sub/d", done);
    int fd = open(p, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(slurm_rm_tree(fd, 5), -1);
    assert_int_equal(errno, ELOOP);
    close(fd);

    struct slurm_conf c;
    snprintf(url, sizeof url, "slurm://?bin=%s&dir=%s&workdir=%s&keep_s=0", f->dir, f->dir, wd);
    assert_int_equal(slurm_url_parse(url, &c, err, sizeof err), 0);
    assert_int_equal(c.keep_s, 0);
    struct slurm_site *W = slurm_site_new(&c, "w", "meta", f->l, on_reply, f, err, sizeof err);
    assert_non_null(W);
    slurm_site_retain(W, keep_done, NULL);
    struct slurm_site *keep = f->S;
    f->S = W; /* the tick drives W */
    snprintf(gone_path, sizeof gone_path, "%s", done);
    int a = loop_timer(f->l, 10, 1, tick, f), b = loop_timer(f->l, 10, 1, check_gone, NULL);
    int t = loop_timer(f->l, 20000, 0, stop, NULL);
    loop_run(f->l);
    loop_timer_cancel(f->l, a);
    loop_timer_cancel(f->l, b);
    loop_timer_cancel(f->l, t);
    f->S = keep;
    struct stat sb;
    assert_int_not_equal(lstat(done, &sb), 0); /* removed */
    snprintf(p, sizeof p, "%s/keep.txt", out);
    assert_int_equal(stat(p, &sb), 0); /* the links' targets stay */
    assert_int_equal(sb.st_size, 8);
    snprintf(p, sizeof p, "%s/b.out", busy);
    assert_int_equal(stat(p, &sb), 0); /* still needed */
    assert_int_equal(slurm_site_sweep(W, 3600), 0);
    snprintf(p, sizeof p, "%s/.gridnode-jobs/7", wd);
    assert_int_not_equal(stat(p, &sb), 0); /* its directory went */
    snprintf(p, sizeof p, "%s/.gridnode-jobs/8", wd);
    assert_int_equal(stat(p, &sb), 0);
    slurm_site_destroy(&W);
    assert_int_not_equal(slurm_url_parse("slurm://?keep_s=-1", &c, err, sizeof err), 0);
    assert_non_null(strstr(err, "keep_s"));
    assert_int_not_equal(slurm_url_parse("slurm://?keep_s=1d", &c, err, sizeof err), 0);
    assert_int_equal(slurm_url_parse("slurm://", &c, err, sizeof err), 0);
    assert_int_equal(c.keep_s, 86400); /* the default: a day */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_url),
        cmocka_unit_test_setup_teardown(test_adapter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hang_killed_loop_free, setup_hang, teardown),
        cmocka_unit_test_setup_teardown(test_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parallel_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

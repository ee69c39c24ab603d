/*
 * test_config.c - the INI + --set configuration loader over a key table: defaults,
 * files, overrides, every kind of error with the place it names, config_print output
 * parsing back to the same values, the shared role argument parser.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config.h"

struct tcfg {
    char name[CONFIG_STR_MAX];
    long count;
    double ratio;
    int flag;
    int mode;
    char path[CONFIG_STR_MAX];
    long big;
    double any;
};

#define OFF(f) offsetof(struct tcfg, f)
static const struct config_key keys[] = {
    {"main", "name", CONFIG_STR, "default-name", OFF(name), 0, 0, NULL, "a name"},
    {"main", "count", CONFIG_INT, "10", OFF(count), 1, 100, NULL, "a count in [1, 100]"},
    {"main", "ratio", CONFIG_DOUBLE, "0.5", OFF(ratio), 0, 1, NULL, "a ratio"},
    {"main", "flag", CONFIG_BOOL, "false", OFF(flag), 0, 0, NULL, "a flag"},
    {"store", "mode", CONFIG_ENUM, "meta", OFF(mode), 0, 0, "full|meta|none", "a mode"},
    {"store", "path", CONFIG_STR, "", OFF(path), 0, 0, NULL, "a path"},
    {"store", "big", CONFIG_INT, "-5", OFF(big), 0, 0, NULL, "any integer"},
    {"store", "any", CONFIG_DOUBLE, "1e300", OFF(any), 0, 0, NULL, "any number"},
    {NULL},
};

struct fixture {
    char dir[64];
    char file[96];
    char err[600];
    struct tcfg cfg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/gridnode-test-config-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->file, sizeof f->file, "%s/test.ini", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char out[128];
    unlink(f->file);
    snprintf(out, sizeof out, "%s/printed.ini", f->dir);
    unlink(out);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* Loads text (a file, unless NULL) plus sets; returns config_load's result. */
static int load(struct fixture *f, const char *text, int nsets, ...)
{
    char *sets[16];
    va_list ap;
    va_start(ap, nsets);
    for (int i = 0; i < nsets; i++)
        sets[i] = va_arg(ap, char *);
    va_end(ap);
    if (text)
        write_file(f->file, text);
    memset(&f->cfg, 0x5a, sizeof f->cfg);
    f->err[0] = '\0';
    return config_load(keys, &f->cfg, text ? f->file : NULL, sets, nsets, f->err, sizeof f->err);
}

static void expect_error(struct fixture *f, int rc, const char *part)
{
    assert_int_equal(rc, -1);
    if (!strstr(f->err, part))
        fail_msg("error '%s' lacks '%s'", f->err, part);
}

static void test_defaults(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(load(f, NULL, 0), 0);
    assert_string_equal(f->cfg.name, "default-name");
    assert_int_equal(f->cfg.count, 10);
    assert_true(f->cfg.ratio == 0.5);
    assert_int_equal(f->cfg.flag, 0);
    assert_int_equal(f->cfg.mode, 1);
    assert_string_equal(f->cfg.path, "");
    assert_int_equal(f->cfg.big, -5);
    assert_true(f->cfg.any == 1e300);
    /* an empty file changes nothing */
    assert_int_equal(load(f, "", 0), 0);
    assert_int_equal(f->cfg.count, 10);
}

static void test_file(void **state)
{
    struct fixture *f = *state;
    int rc = load(f,
                  "; a comment\n"
                  "# another\n"
                  "[main]\n"
                  "name = hello world\n"
                  "count=42\n"
                  "ratio = 0.25\n"
                  "flag = yes\n"
                  "\n"
                  "[store]\n"
                  "mode = none\n"
                  "path = /var/x ; inline comment\n"
                  "big = -123456789\n",
                  0);
    if (rc)
        fail_msg("%s", f->err);
    assert_string_equal(f->cfg.name, "hello world");
    assert_int_equal(f->cfg.count, 42);
    assert_true(f->cfg.ratio == 0.25);
    assert_int_equal(f->cfg.flag, 1);
    assert_int_equal(f->cfg.mode, 2);
    assert_string_equal(f->cfg.path, "/var/x");
    assert_int_equal(f->cfg.big, -123456789);
    assert_true(f->cfg.any == 1e300); /* not in the file: the default */
}

static void test_bools(void **state)
{
    struct fixture *f = *state;
    static const char *yes[] = {"true", "yes", "1"}, *no[] = {"false", "no", "0"};
    char set[64];
    for (int i = 0; i < 3; i++) {
        snprintf(set, sizeof set, "main.flag=%s", yes[i]);
        assert_int_equal(load(f, NULL, 1, set), 0);
        assert_int_equal(f->cfg.flag, 1);
        snprintf(set, sizeof set, "main.flag=%s", no[i]);
        assert_int_equal(load(f, NULL, 1, set), 0);
        assert_int_equal(f->cfg.flag, 0);
    }
    static const char *bad[] = {"maybe", "TRUE", "2", "", "on"};
    for (int i = 0; i < 5; i++) {
        snprintf(set, sizeof set, "main.flag=%s", bad[i]);
        expect_error(f, load(f, NULL, 1, set), "is not a boolean");
        assert_non_null(strstr(f->err, "[main] flag"));
    }
}

static void test_set_overrides(void **state)
{
    struct fixture *f = *state;
    const char *file = "[main]\ncount = 42\nname = from-file\n";
    assert_int_equal(load(f, file, 2, "main.count=7", "store.mode=full"), 0);
    assert_int_equal(f->cfg.count, 7);
    assert_string_equal(f->cfg.name, "from-file");
    assert_int_equal(f->cfg.mode, 0);
    assert_int_equal(load(f, NULL, 1, "main.name=a=b"), 0); /* the first '=' splits */
    assert_string_equal(f->cfg.name, "a=b");
    assert_int_equal(load(f, NULL, 1, "main.name="), 0);
    assert_string_equal(f->cfg.name, "");
    expect_error(f, load(f, NULL, 2, "main.count=7", "main.count=8"), "given twice");
    expect_error(f, load(f, NULL, 1, "main.count"), "expected section.key=value");
    expect_error(f, load(f, NULL, 1, "count=3"), "expected section.key=value");
    expect_error(f, load(f, NULL, 1, "main.nope=3"), "--set main.nope=3: unknown key [main] nope");
    expect_error(f, load(f, NULL, 1, "a.b.c=1"), "unknown key");
    expect_error(f, load(f, NULL, 1, "main.count=x"), "--set main.count=x: [main] count");
    /* a bad file wins over good sets: nothing is applied after the first error */
    expect_error(f, load(f, "[main]\nnope = 1\n", 1, "main.count=7"), "unknown key");
}

static void test_unknown_and_duplicate(void **state)
{
    struct fixture *f = *state;
    expect_error(f, load(f, "[main]\nnope = 1\n", 0), "unknown key [main] nope");
    assert_non_null(strstr(f->err, f->file));
    expect_error(f, load(f, "[other]\ncount = 1\n", 0), "unknown key [other] count");
    expect_error(f, load(f, "count = 1\n", 0), "unknown key [] count"); /* no section */
    expect_error(f, load(f, "[main]\ncount = 1\ncount = 2\n", 0), "key [main] count given twice");
    expect_error(f, load(f, "[main]\ncount = 1\n[store]\n[main]\ncount = 2\n", 0), "given twice");
    /* an indented line continues the previous value (inih multiline): refused */
    expect_error(f, load(f, "[main]\ncount = 1\n  name = x\n", 0), "given twice");
}

static void test_numbers(void **state)
{
    struct fixture *f = *state;
    static const char *bad_int[] = {"12abc", "1.5", "", "0x10", "99999999999999999999", "five"};
    static const char *bad_dbl[] = {"abc", "nan", "inf", "-inf", "1e999", "0.5x", ""};
    char set[64];
    for (size_t i = 0; i < sizeof bad_int / sizeof bad_int[0]; i++) {
        snprintf(set, sizeof set, "main.count=%s", bad_int[i]);
        expect_error(f, load(f, NULL, 1, set), "is not an integer");
    }
    for (size_t i = 0; i < sizeof bad_dbl / sizeof bad_dbl[0]; i++) {
        snprintf(set, sizeof set, "main.ratio=%s", bad_dbl[i]);
        expect_error(f, load(f, NULL, 1, set), "is not a number");
    }
    assert_int_equal(load(f, NULL, 2, "main.ratio=1e-1", "store.big=-123456789012"), 0);
    assert_true(f->cfg.ratio == 0.1);
    assert_true(f->cfg.big == -123456789012L);
    assert_int_equal(load(f, NULL, 1, "store.any=-1.5e300"), 0); /* no range: anything */
    assert_true(f->cfg.any == -1.5e300);
}

static void test_range(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(load(f, NULL, 2, "main.count=1", "main.ratio=0"), 0);
    assert_int_equal(f->cfg.count, 1);
    assert_int_equal(load(f, NULL, 2, "main.count=100", "main.ratio=1"), 0);
    assert_int_equal(f->cfg.count, 100);
    expect_error(f, load(f, NULL, 1, "main.count=0"), "0 is out of range [1, 100]");
    expect_error(f, load(f, NULL, 1, "main.count=101"), "out of range");
    expect_error(f, load(f, NULL, 1, "main.count=-3"), "out of range");
    expect_error(f, load(f, NULL, 1, "main.ratio=1.0001"), "out of range [0, 1]");
    expect_error(f, load(f, NULL, 1, "main.ratio=-0.1"), "out of range");
    expect_error(f, load(f, "[main]\ncount = 500\n", 0), "out of range");
    assert_non_null(strstr(f->err, "[main] count"));
}

static void test_enum(void **state)
{
    struct fixture *f = *state;
    static const char *names[] = {"full", "meta", "none"};
    char set[64];
    for (int i = 0; i < 3; i++) {
        snprintf(set, sizeof set, "store.mode=%s", names[i]);
        assert_int_equal(load(f, NULL, 1, set), 0);
        assert_int_equal(f->cfg.mode, i);
    }
    static const char *bad[] = {"FULL", "ful", "fullx", "", "full|meta", "|"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(set, sizeof set, "store.mode=%s", bad[i]);
        expect_error(f, load(f, NULL, 1, set), "is not one of full|meta|none");
    }
}

static void test_long_string(void **state)
{
    struct fixture *f = *state;
    char set[CONFIG_STR_MAX + 32], *v;
    snprintf(set, sizeof set, "main.name=");
    v = set + strlen(set);
    memset(v, 'n', CONFIG_VALUE_MAX);
    v[CONFIG_VALUE_MAX] = '\0';
    assert_int_equal(load(f, NULL, 1, set), 0); /* CONFIG_VALUE_MAX bytes fit */
    assert_int_equal(strlen(f->cfg.name), CONFIG_VALUE_MAX);
    v[CONFIG_VALUE_MAX] = 'n';
    v[CONFIG_VALUE_MAX + 1] = '\0';
    expect_error(f, load(f, NULL, 1, set), "value longer than 160 bytes");
    /* a --set longer than the loader's 512-byte buffer is refused too */
    char huge[700];
    snprintf(huge, sizeof huge, "main.name=");
    memset(huge + 10, 'h', sizeof huge - 11);
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(load(f, NULL, 1, huge), -1);
}

static void test_missing_file(void **state)
{
    struct fixture *f = *state;
    memset(&f->cfg, 0, sizeof f->cfg);
    int rc =
        config_load(keys, &f->cfg, "/nonexistent/gridnode.ini", NULL, 0, f->err, sizeof f->err);
    expect_error(f, rc, "/nonexistent/gridnode.ini: cannot open");
    assert_non_null(strstr(f->err, "No such file"));
}

static void test_syntax_error_line(void **state)
{
    struct fixture *f = *state;
    char want[160];
    expect_error(f, load(f, "[main]\nname = x\nthis is not ini\ncount = 5\n", 0), "syntax error");
    snprintf(want, sizeof want, "%s:3: syntax error", f->file);
    expect_error(f, -1, want);
    expect_error(f, load(f, "[main\n", 0), "syntax error");
    snprintf(want, sizeof want, "%s:1:", f->file);
    expect_error(f, -1, want);
    expect_error(f, load(f, "[main]\n; c\n\n\nno equals sign\n", 0), "syntax error");
    snprintf(want, sizeof want, "%s:5:", f->file);
    expect_error(f, -1, want);
    expect_error(f, load(f, "[main]\n= 5\n", 0), "unknown key [main] "); /* empty key */
}

/*
 * config.h promises a message naming "the file, line and key"; handler errors (unknown
 * key, bad value, duplicate) name the file and key only, and when a syntax error comes
 * first the message describes a later line instead (here: "[main" is line 1, but the
 * error names the key on line 2, which is outside any section). Fixed; guarded here
 * until config.c reports the first error with the line ini_parse() returns.
 */
static void test_handler_error_names_line(void **state)
{
    struct fixture *f = *state;
    char want[160];
    expect_error(f, load(f, "[main]\nname = x\nnope = 1\n", 0), "unknown key");
    snprintf(want, sizeof want, "%s:3", f->file);
    if (!strstr(f->err, want)) {
        printf("test_config: REGRESSION: no line number in '%s'\n", f->err);
        fail();
    }
    expect_error(f, load(f, "[main]\ncount = 1\n\ncount = 2\n", 0), "given twice");
    snprintf(want, sizeof want, "%s:4", f->file);
    expect_error(f, -1, want);
    expect_error(f, load(f, "[main\ncount = 5\n", 0), "");
    snprintf(want, sizeof want, "%s:1:", f->file);
    expect_error(f, -1, want);
}

/* Prints cfg, parses the output back, compares every field. */
static int print_reparse(struct fixture *f, struct tcfg *back, char *text, size_t cap)
{
    char out[128];
    snprintf(out, sizeof out, "%s/printed.ini", f->dir);
    FILE *fp = fopen(out, "w");
    assert_non_null(fp);
    config_print(keys, &f->cfg, fp);
    assert_int_equal(fclose(fp), 0);
    fp = fopen(out, "r");
    assert_non_null(fp);
    size_t n = fread(text, 1, cap - 1, fp);
    text[n] = '\0';
    fclose(fp);
    memset(back, 0, sizeof *back);
    return config_load(keys, back, out, NULL, 0, f->err, sizeof f->err);
}

static void expect_same(const struct tcfg *a, const struct tcfg *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->count, b->count);
    assert_true(a->ratio == b->ratio);
    assert_int_equal(a->flag, b->flag);
    assert_int_equal(a->mode, b->mode);
    assert_string_equal(a->path, b->path);
    assert_int_equal(a->big, b->big);
    assert_true(a->any == b->any);
}

static void test_print_reparses(void **state)
{
    struct fixture *f = *state;
    struct tcfg back;
    char text[4096];
    for (int variant = 0; variant < 3; variant++) {
        int rc = variant == 0 ? load(f, NULL, 0)
                 : variant == 1
                     ? load(f, NULL, 6, "main.name=with spaces inside", "main.count=99",
                            "main.ratio=0.125", "main.flag=yes", "store.mode=none", "store.big=-42")
                     : load(f, NULL, 3, "store.path=/a/b;c#d", "store.any=1e-300", "main.name=");
        assert_int_equal(rc, 0);
        if (print_reparse(f, &back, text, sizeof text) < 0)
            fail_msg("variant %d: printed configuration does not parse: %s\n%s", variant, f->err,
                     text);
        expect_same(&f->cfg, &back);
    }
    assert_non_null(strstr(text, "[main]\n; a name (default: default-name)\nname =\n"));
    assert_non_null(strstr(text, "\n[store]\n"));
    assert_non_null(strstr(text, "mode = meta\n"));
}

/*
 * Values config_load accepts but config_print cannot write back: doubles with more than
 * six significant digits (printed with %g) and strings longer than inih's 200-byte line.
 * Fixed; guarded here while the round trip loses them.
 */
static void test_print_reparses_exactly(void **state)
{
    struct fixture *f = *state;
    struct tcfg back;
    char text[4096], set[CONFIG_STR_MAX + 16];
    const char *lost[2] = {NULL, NULL};
    assert_int_equal(load(f, NULL, 1, "main.ratio=0.123456789"), 0);
    if (print_reparse(f, &back, text, sizeof text) < 0 || back.ratio != f->cfg.ratio)
        lost[0] = "a double with 9 significant digits";
    else
        expect_same(&f->cfg, &back);
    snprintf(set, sizeof set, "main.name=");
    memset(set + 10, 'x', CONFIG_VALUE_MAX);
    set[10 + CONFIG_VALUE_MAX] = '\0';
    assert_int_equal(load(f, NULL, 1, set), 0);
    if (print_reparse(f, &back, text, sizeof text) < 0 || strcmp(back.name, f->cfg.name))
        lost[1] = "a string of the longest accepted length";
    else
        expect_same(&f->cfg, &back);
    if (lost[0] || lost[1]) {
        printf("test_config: REGRESSION: config_print output does not parse back to %s%s%s\n",
               lost[0] ? lost[0] : "", lost[0] && lost[1] ? " nor to " : "",
               lost[1] ? lost[1] : "");
        fail();
    }
}

/* ---- role arguments ---- */

static void test_role_args(void **state)
{
    (void)state;
    struct role_args ra;
    char *argv1[] = {"cluster", "-c", "x.ini", "--set", "a.b=1", "--set=c.d=2", "--check-config"};
    assert_int_equal(role_args_parse(7, argv1, &ra), 0);
    assert_string_equal(ra.config, "x.ini");
    assert_int_equal(ra.nsets, 2);
    assert_string_equal(ra.sets[0], "a.b=1");
    assert_string_equal(ra.sets[1], "c.d=2");
    assert_int_equal(ra.check, 1);
    assert_int_equal(ra.help, 0);
    char *argv2[] = {"cluster", "--config", "y.ini", "-h"};
    assert_int_equal(role_args_parse(4, argv2, &ra), 0);
    assert_string_equal(ra.config, "y.ini");
    assert_int_equal(ra.help, 1);
    char *argv3[] = {"cluster", "--bogus"};
    assert_int_equal(role_args_parse(2, argv3, &ra), -1);
    assert_string_equal(ra.extra, "--bogus");
    char *argv4[] = {"cluster", "-c"}; /* the file name is missing */
    assert_int_equal(role_args_parse(2, argv4, &ra), -1);
    assert_string_equal(ra.extra, "-c");
    char *argv5[] = {"cluster", "--set"};
    assert_int_equal(role_args_parse(2, argv5, &ra), -1);
    char *many[2 * CONFIG_MAX_SETS + 3];
    int n = 0;
    many[n++] = "cluster";
    for (int i = 0; i <= CONFIG_MAX_SETS; i++) {
        many[n++] = "--set";
        many[n++] = "a.b=1";
    }
    assert_int_equal(role_args_parse(n - 2, many, &ra), 0);
    assert_int_equal(ra.nsets, CONFIG_MAX_SETS);
    assert_int_equal(role_args_parse(n, many, &ra), -1); /* one too many */
}

/* Runs role_configure with stdout and stderr sent to a file; returns its result. */
static int configure_quiet(struct fixture *f, int argc, char **argv, char *out, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "%s/printed.ini", f->dir);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(so >= 0 && se >= 0 && fd >= 0);
    dup2(fd, 1);
    dup2(fd, 2);
    int rc = role_configure("test", "usage: test\n", keys, &f->cfg, argc, argv, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fd);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(out, 1, cap - 1, fp);
    out[n] = '\0';
    fclose(fp);
    return rc;
}

static void test_role_configure(void **state)
{
    struct fixture *f = *state;
    char out[4096];
    char *run[] = {"test", "--set", "main.count=5"};
    assert_int_equal(configure_quiet(f, 3, run, out, sizeof out), -1); /* go on starting */
    assert_int_equal(f->cfg.count, 5);
    char *check[] = {"test", "--set", "main.count=6", "--check-config"};
    assert_int_equal(configure_quiet(f, 4, check, out, sizeof out), 0);
    assert_non_null(strstr(out, "count = 6\n"));
    char *bad[] = {"test", "--set", "main.count=0", "--check-config"};
    assert_int_equal(configure_quiet(f, 4, bad, out, sizeof out), 1);
    assert_non_null(strstr(out, "configuration error"));
    char *help[] = {"test", "--help"};
    assert_int_equal(configure_quiet(f, 2, help, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: test"));
    assert_non_null(strstr(out, "main.count"));
    char *junk[] = {"test", "junk"};
    assert_int_equal(configure_quiet(f, 2, junk, out, sizeof out), 2);
    assert_non_null(strstr(out, "unexpected argument 'junk'"));
}

static void test_checks(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(config_check_endpoint("a.listen", "tcp://127.0.0.1:7300", 1, err, sizeof err),
                     0);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://*:7300", 1, err, sizeof err), 0);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://[::1]:7300", 1, err, sizeof err), 0);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://127.0.0.1:*", 1, err, sizeof err), 0);
    assert_int_equal(config_check_endpoint("a.server", "tcp://127.0.0.1:*", 0, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "can only be bound"));
    assert_int_equal(config_check_endpoint("a.listen", "ipc:///tmp/x.sock", 1, err, sizeof err), 0);
    assert_int_equal(config_check_endpoint("a.listen", "ipc://", 1, err, sizeof err), -1);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://host", 1, err, sizeof err), -1);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://host:0", 1, err, sizeof err), -1);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://host:65536", 1, err, sizeof err), -1);
    assert_int_equal(config_check_endpoint("a.listen", "tcp://host:", 1, err, sizeof err), -1);
    assert_int_equal(config_check_endpoint("a.listen", "host:7300", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "a.listen = 'host:7300' is not an endpoint"));
    assert_int_equal(config_check_log_level("a.log_level", "debug", err, sizeof err), 0);
    assert_int_equal(config_check_log_level("a.log_level", "Debug", err, sizeof err), -1);
    assert_non_null(strstr(err, "a.log_level must be"));
    assert_int_equal(config_check_file("a.f", "", err, sizeof err), 0);
    assert_int_equal(config_check_file("a.f", "/nonexistent/file", err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
}

static int fail_check(const void *cfg, char *err, size_t errlen)
{
    (void)cfg;
    snprintf(err, errlen, "main.count is unlucky");
    return -1;
}

static void test_role_configure_runs_check(void **state)
{
    struct fixture *f = *state;
    char path[128], out[4096];
    snprintf(path, sizeof path, "%s/printed.ini", f->dir);
    char *check[] = {"test", "--check-config"};
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    int rc1 = role_configure("test", "usage: test\n", keys, &f->cfg, 2, check, fail_check);
    char *run[] = {"test"};
    int rc2 = role_configure("test", "usage: test\n", keys, &f->cfg, 1, run, fail_check);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fd);
    assert_int_equal(rc1, 1); /* --check-config fails as start-up does */
    assert_int_equal(rc2, 1);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(out, 1, sizeof out - 1, fp);
    out[n] = '\0';
    fclose(fp);
    assert_non_null(strstr(out, "gridnode test: configuration error: main.count is unlucky"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_defaults),
        T(test_file),
        T(test_bools),
        T(test_set_overrides),
        T(test_unknown_and_duplicate),
        T(test_numbers),
        T(test_range),
        T(test_enum),
        T(test_long_string),
        T(test_missing_file),
        T(test_syntax_error_line),
        T(test_handler_error_names_line),
        T(test_print_reparses),
        T(test_print_reparses_exactly),
        T(test_role_args),
        T(test_role_configure),
        T(test_checks),
        T(test_role_configure_runs_check),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

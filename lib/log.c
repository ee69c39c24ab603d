/* log.c - role-tagged logging to stderr (see log.h). */
#include "lib/log.h"
#include "lib/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *log_role = "gridnode";
static enum log_level log_max = LOG_LEVEL_INFO;

void log_init(const char *role, enum log_level level)
{
    log_role = role;
    log_max = level;
}

void log_set_level(enum log_level level)
{
    log_max = level;
}

int log_level_parse(const char *name)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

static void log_vline(enum log_level lvl, const char *tag, int err, const char *fmt, va_list ap)
{
    if (lvl > log_max)
        return;
    char raw[1024], msg[1024], stamp[32];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    vsnprintf(raw, sizeof raw, fmt, ap);
    /* one line each, whatever names from peers it quotes (newlines, ESC, bad UTF-8) */
    text_escape(msg, sizeof msg, raw, strlen(raw));
    if (err)
        fprintf(stderr, "%s.%03ld %s[%ld] %s: %s: %s\n", stamp, (long)tv.tv_usec / 1000, log_role,
                (long)getpid(), tag, msg, strerror(err));
    else
        fprintf(stderr, "%s.%03ld %s[%ld] %s: %s\n", stamp, (long)tv.tv_usec / 1000, log_role,
                (long)getpid(), tag, msg);
}

#define LOG_BODY(lvl, tag, err)                                                                    \
    do {                                                                                           \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        log_vline(lvl, tag, err, fmt, ap);                                                         \
        va_end(ap);                                                                                \
    } while (0)

void log_warn(const char *fmt, ...)
{
    int err = errno;
    LOG_BODY(LOG_LEVEL_WARN, "warn", err);
    errno = err;
}
void log_warnx(const char *fmt, ...)
{
    LOG_BODY(LOG_LEVEL_WARN, "warn", 0);
}
void log_info(const char *fmt, ...)
{
    LOG_BODY(LOG_LEVEL_INFO, "info", 0);
}
void log_debug(const char *fmt, ...)
{
    LOG_BODY(LOG_LEVEL_DEBUG, "debug", 0);
}

void fatal(const char *fmt, ...)
{
    int err = errno;
    LOG_BODY(LOG_LEVEL_ERROR, "fatal", err);
    exit(1);
}

void fatalx(const char *fmt, ...)
{
    LOG_BODY(LOG_LEVEL_ERROR, "fatal", 0);
    exit(1);
}

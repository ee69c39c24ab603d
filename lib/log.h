/*
 * log.h - OpenBSD-shaped logging. Every line carries the role name and goes to
 * stderr: "2026-11-23T10:00:00.123 cluster[1234] warn: message".
 */
#ifndef GRIDNODE_LOG_H
#define GRIDNODE_LOG_H

#include <stdarg.h>

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

/* Sets the role name printed on each line and the most verbose level shown. */
void log_init(const char *role, enum log_level level);
/* Parses "error", "warn", "info" or "debug"; -1 if the name is unknown. */
int log_level_parse(const char *name);
void log_set_level(enum log_level level);

void log_warn(const char *fmt, ...)
    __attribute__((format(printf, 1, 2))); /* adds strerror(errno) */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Start-up errors and impossible internal states only: never on network input. */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif

/* Levelled logging to stderr, shared by the client core and rgpud.  A
 * session of rgpud forwards its fd 2 to the client (daemon/output.c) and
 * logs to a copy of the original one instead (rgpu_log_set_fd). */
#ifndef RGPU_LOG_H
#define RGPU_LOG_H

#include <stddef.h>

/* trace: the client logs every request it sends (name, whether it waits). */
enum rgpu_log_level {
    RGPU_LOG_ERROR, RGPU_LOG_WARN, RGPU_LOG_INFO, RGPU_LOG_DEBUG, RGPU_LOG_TRACE
};

void rgpu_log_init(const char *prefix, const char *level_name);
void rgpu_log_set_level(int level);
/* The program name that begins each line (rgpu_log_init's prefix). */
const char *rgpu_log_prefix(void);
/* Where log lines go (STDERR_FILENO until set); one write per line. */
void rgpu_log_set_fd(int fd);
int rgpu_log_fd(void);
int rgpu_log_enabled(int level);
void rgpu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put a sentence saying why something failed in buf (of size len) and
 * return -1: for functions that report failures to their caller. */
int rgpu_reason(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define rgpu_error(...) rgpu_log(RGPU_LOG_ERROR, __VA_ARGS__)
#define rgpu_warn(...)  rgpu_log(RGPU_LOG_WARN, __VA_ARGS__)
#define rgpu_info(...)  rgpu_log(RGPU_LOG_INFO, __VA_ARGS__)
#define rgpu_debug(...) rgpu_log(RGPU_LOG_DEBUG, __VA_ARGS__)
#define rgpu_trace(...) rgpu_log(RGPU_LOG_TRACE, __VA_ARGS__)

#endif

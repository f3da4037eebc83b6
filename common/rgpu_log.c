#include "rgpu_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int log_level = RGPU_LOG_WARN;
static const char *log_prefix = "rgpu";
static int log_fd = STDERR_FILENO;

static int parse_level(const char *name, int fallback)
{
    static const char *const names[] = { "error", "warn", "info", "debug", "trace" };
    if (!name || !*name)
        return fallback;
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, names[i]) == 0)
            return i;
    return fallback;
}

void rgpu_log_init(const char *prefix, const char *level_name)
{
    log_prefix = prefix;
    log_level = parse_level(level_name, log_level);
}

void rgpu_log_set_level(int level)
{
    log_level = level;
}

const char *rgpu_log_prefix(void)
{
    return log_prefix;
}

void rgpu_log_set_fd(int fd)
{
    log_fd = fd;
}

int rgpu_log_fd(void)
{
    return log_fd;
}

int rgpu_log_enabled(int level)
{
    return level <= log_level;
}

void rgpu_log(int level, const char *fmt, ...)
{
    static const char *const tags[] = { "error", "warning", "info", "debug", "trace" };
    char line[1024];
    va_list ap;
    int n;

    if (level > log_level)
        return;
    n = snprintf(line, sizeof line, "%s[%d]: %s: ", log_prefix, (int)getpid(), tags[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    /* One write per line keeps lines whole when several processes log. */
    if (write(log_fd, line, strlen(line)) < 0)
        return;
}

int rgpu_reason(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return -1;
}

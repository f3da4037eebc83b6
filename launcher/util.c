/* Small helpers of the launcher: messages, clocks, logs of helper
 * processes, paths and ports. */
#include "launcher.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int verbose;

static void vsay(const char *fmt, va_list ap)
{
    /* One write per message, so that lines from the command and its
     * helpers, which share our stderr, do not interleave mid-line. */
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "rgpu: ");
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (n >= (int)sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    (void)!write(STDERR_FILENO, buf, (size_t)n);
}

void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

void note(const char *fmt, ...)
{
    va_list ap;
    if (!verbose)
        return;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    /* No restart on EINTR: a signal should end waits early, the callers
     * check for it. */
    nanosleep(&ts, NULL);
}

/* ---- helper logs ----------------------------------------------------------- */

int log_open(void)
{
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/rgpu-log.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/rgpu-log.XXXXXX");
        fd = mkostemp(path, O_CLOEXEC);
    }
    /* Unlinked at once: nothing is left behind however we exit. */
    if (fd >= 0)
        unlink(path);
    return fd;
}

void log_read(int fd, char *buf, size_t size)
{
    struct stat sb;
    off_t start = 0;
    ssize_t n = 0;
    buf[0] = '\0';
    if (fd < 0 || fstat(fd, &sb) < 0)
        return;
    if (sb.st_size > (off_t)size - 1)
        start = sb.st_size - ((off_t)size - 1);     /* the end says most */
    n = pread(fd, buf, size - 1, start);
    buf[n > 0 ? n : 0] = '\0';
}

void log_show(int fd, const char *who)
{
    char buf[8192];
    log_read(fd, buf, sizeof buf);
    size_t len = strlen(buf);
    while (len && buf[len - 1] == '\n')
        buf[--len] = '\0';
    if (!len)
        return;
    fprintf(stderr, "rgpu: %s said:\n", who);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "    %s\n", line);
}

int log_contains(int fd, const char *needle)
{
    char buf[8192];
    log_read(fd, buf, sizeof buf);
    return strstr(buf, needle) != NULL;
}

/* ---- paths ------------------------------------------------------------------- */

int self_dir(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

int in_build_tree(const char *dir)
{
    /* meson keeps meson-private/ at the build root, one level above
     * launcher/: an installed rgpu never has it beside its directory. */
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/../meson-private", dir);
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int is_executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

int split_host_port(const char *spec, char *host, size_t hlen, char *port, size_t plen,
                    int def_port)
{
    const char *colon;
    if (!spec || !*spec)
        return -1;
    if (spec[0] == '[') {                               /* [v6addr]:port */
        const char *end = strchr(spec, ']');
        if (!end || (end[1] && end[1] != ':'))
            return -1;
        snprintf(host, hlen, "%.*s", (int)(end - spec - 1), spec + 1);
        colon = end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(spec, ':');
        if (colon && strchr(spec, ':') != colon)        /* bare v6: no port */
            colon = NULL;
        snprintf(host, hlen, "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    }
    if (colon) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end || p < 1 || p > 65535)
            return -1;
    }
    if (colon)
        snprintf(port, plen, "%s", colon + 1);
    else
        snprintf(port, plen, "%d", def_port);
    return host[0] ? 0 : -1;
}

int private_dir(char *buf, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    /* A socket path must fit in 108 bytes: a long TMPDIR is passed over. */
    if (!tmp || tmp[0] != '/' || strlen(tmp) > 60)
        tmp = "/tmp";
    if ((size_t)snprintf(buf, size, "%s/rgpu-XXXXXX", tmp) >= size)
        return -1;
    return mkdtemp(buf) ? 0 : -1;     /* mkdtemp makes it 0700 */
}

/* Server addresses (see rgpu_addr.h). */
#include "rgpu_addr.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Put a sentence in err and return -1 (rgpu_log.h). */
#define FAIL(...) rgpu_reason(err, errlen, __VA_ARGS__)

/* ---- parsing ------------------------------------------------------------------ */

static int parse_unix(const char *spec, const char *path, struct rgpu_addr *a, char *err,
                      size_t errlen)
{
    if (!*path)
        return FAIL("'%s' names no socket path (unix:/PATH)", spec);
    if (strlen(path) >= sizeof a->path)
        return FAIL("socket path '%s' is longer than the %zu bytes a Unix socket allows",
                    path, sizeof a->path - 1);
    a->kind = RGPU_ADDR_UNIX;
    snprintf(a->path, sizeof a->path, "%s", path);
    return 0;
}

static int parse_port(const char *spec, const char *p, struct rgpu_addr *a, char *err,
                      size_t errlen)
{
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (!*p || *end || errno || v < 1 || v > 65535 || *p == '+' || *p == '-' || *p == ' ')
        return FAIL("'%s': port '%s' is not a number from 1 to 65535", spec, p);
    snprintf(a->port, sizeof a->port, "%ld", v);
    return 0;
}

static int set_host(const char *spec, const char *host, size_t len, struct rgpu_addr *a,
                    char *err, size_t errlen)
{
    if (len == 0)
        return FAIL("'%s' names no host (HOST:PORT, [IPV6]:PORT or unix:/PATH)", spec);
    if (len >= sizeof a->host)
        return FAIL("'%s': host name too long", spec);
    memcpy(a->host, host, len);
    a->host[len] = '\0';
    return 0;
}

int rgpu_addr_parse(const char *spec, struct rgpu_addr *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (!spec || !*spec)
        return FAIL("empty server address (HOST:PORT, [IPV6]:PORT or unix:/PATH)");
    if (strncmp(spec, "unix:", 5) == 0)
        return parse_unix(spec, spec + 5, a, err, errlen);
    if (spec[0] == '/')
        return parse_unix(spec, spec, a, err, errlen);
    a->kind = RGPU_ADDR_TCP;
    snprintf(a->port, sizeof a->port, "%d", RGPU_DEFAULT_PORT);
    if (spec[0] == '[') {                       /* [V6] or [V6]:PORT */
        const char *end = strchr(spec, ']');
        if (!end)
            return FAIL("'%s': '[' without its ']' ([IPV6]:PORT)", spec);
        if (end[1] && end[1] != ':')
            return FAIL("'%s': after ']' comes ':PORT' or nothing", spec);
        if (set_host(spec, spec + 1, (size_t)(end - spec - 1), a, err, errlen) < 0)
            return -1;
        return end[1] == ':' ? parse_port(spec, end + 2, a, err, errlen) : 0;
    }
    const char *colon = strchr(spec, ':');
    if (colon && strchr(colon + 1, ':'))        /* bare IPv6: no port */
        return set_host(spec, spec, strlen(spec), a, err, errlen);
    if (set_host(spec, spec, colon ? (size_t)(colon - spec) : strlen(spec), a, err, errlen) < 0)
        return -1;
    return colon ? parse_port(spec, colon + 1, a, err, errlen) : 0;
}

void rgpu_addr_format(const struct rgpu_addr *a, char *buf, size_t len)
{
    if (a->kind == RGPU_ADDR_UNIX)
        snprintf(buf, len, "unix:%s", a->path);
    else if (strchr(a->host, ':'))
        snprintf(buf, len, "[%s]:%s", a->host, a->port);
    else
        snprintf(buf, len, "%s:%s", a->host, a->port);
}

/* ---- dialing ------------------------------------------------------------------ */

static int unix_sockaddr(const struct rgpu_addr *a, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    snprintf(sun->sun_path, sizeof sun->sun_path, "%s", a->path);
    return 0;
}

/* connect() bounded by timeout_ms: a host that drops packets would
 * otherwise hold the caller for the kernel's two minutes. */
static int connect_within(int fd, const struct sockaddr *sa, socklen_t salen, int timeout_ms)
{
    if (timeout_ms < 0)
        return connect(fd, sa, salen);
    int flags = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -1;
    if (connect(fd, sa, salen) < 0) {
        if (errno != EINPROGRESS && errno != EAGAIN)
            return -1;
        struct pollfd pfd = { fd, POLLOUT, 0 };
        int rc, e = 0;
        socklen_t len = sizeof e;
        while ((rc = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        if (rc == 0)
            errno = ETIMEDOUT;
        if (rc <= 0)
            return -1;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
            return -1;
        if (e) {
            errno = e;
            return -1;
        }
    }
    return fcntl(fd, F_SETFL, flags);
}

static int dial_unix(const struct rgpu_addr *a, int timeout_ms, char *err, size_t errlen)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unix_sockaddr(a, &sun);
    if (fd < 0 || connect_within(fd, (struct sockaddr *)&sun, sizeof sun, timeout_ms) < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s%s", a->path, strerror(e),
                 e == EACCES ? " (rgpud lets its own user, root and its group in: ask to be "
                               "added to that group)" : "");
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int dial_tcp(const struct rgpu_addr *a, int timeout_ms, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
    int fd = -1, e = 0, one = 1;
    int rc = getaddrinfo(a->host, a->port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", a->host, gai_strerror(rc));
        errno = EHOSTUNREACH;
        return -1;
    }
    for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect_within(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms) < 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "%s", strerror(e));
        errno = e;
        return -1;
    }
    /* Requests and replies are small and awaited: never hold them back. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int rgpu_addr_dial(const struct rgpu_addr *a, int timeout_ms, char *err, size_t errlen)
{
    return a->kind == RGPU_ADDR_UNIX ? dial_unix(a, timeout_ms, err, errlen)
                                     : dial_tcp(a, timeout_ms, err, errlen);
}

/* ---- listening ---------------------------------------------------------------- */

/* Something is at the socket path already.  Only a socket file that nobody
 * answers on (left by an rgpud that was killed) may be removed: never a
 * regular file or a link someone put there, never a live rgpud's. */
static int clear_stale(const struct rgpu_addr *a, char *err, size_t errlen)
{
    struct stat sb;
    char e2[64];
    if (lstat(a->path, &sb) < 0)
        return errno == ENOENT ? 0 : FAIL("%s: %s", a->path, strerror(errno));
    if (!S_ISSOCK(sb.st_mode))
        return FAIL("%s exists and is not a socket: not touching it (remove it or choose "
                    "another path)", a->path);
    int fd = dial_unix(a, 1000, e2, sizeof e2);
    if (fd >= 0) {
        close(fd);
        return FAIL("%s: another rgpud answers there already", a->path);
    }
    if (errno != ECONNREFUSED)
        return FAIL("%s exists and cannot be checked (%s): not replacing it", a->path, e2);
    if (unlink(a->path) < 0)
        return FAIL("cannot remove the stale socket %s: %s", a->path, strerror(errno));
    return 0;
}

static int listen_unix(const struct rgpu_addr *a, mode_t mode, gid_t gid, char *err,
                       size_t errlen)
{
    struct sockaddr_un sun;
    int fd = -1;

    unix_sockaddr(a, &sun);
    if (clear_stale(a, err, errlen) < 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return FAIL("socket: %s", strerror(errno));
    /* bind() creates the file: with no permission at all for a moment, so
     * that nobody connects before the mode and group are right. */
    mode_t old = umask(0777);
    int rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
    int e = errno;
    umask(old);
    if (rc < 0) {
        close(fd);
        return FAIL("cannot listen on %s: %s", a->path, strerror(e));
    }
    if ((gid != (gid_t)-1 && chown(a->path, (uid_t)-1, gid) < 0) || chmod(a->path, mode) < 0 ||
        listen(fd, 64) < 0) {
        e = errno;
        close(fd);
        unlink(a->path);
        return FAIL("cannot set up %s (group %ld, mode %04o): %s", a->path,
                    gid == (gid_t)-1 ? -1L : (long)gid, (unsigned)mode, strerror(e));
    }
    return fd;
}

static int listen_tcp(const struct rgpu_addr *a, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
    char text[300];
    int fd, one = 1;

    rgpu_addr_format(a, text, sizeof text);
    int rc = getaddrinfo(a->host, a->port, &hints, &res);
    if (rc != 0)
        return FAIL("cannot resolve %s: %s", text, gai_strerror(rc));
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", text, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int rgpu_addr_listen(const struct rgpu_addr *a, mode_t unix_mode, gid_t unix_gid, char *err,
                     size_t errlen)
{
    return a->kind == RGPU_ADDR_UNIX ? listen_unix(a, unix_mode, unix_gid, err, errlen)
                                     : listen_tcp(a, err, errlen);
}

int rgpu_addr_is_loopback(const struct rgpu_addr *a)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
    int loop = 1;
    if (a->kind != RGPU_ADDR_TCP)
        return 0;
    if (getaddrinfo(a->host, a->port, &hints, &res) != 0)
        return 0;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET)
            loop &= (ntohl(((const struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) ==
                    127;
        else if (ai->ai_family == AF_INET6)
            loop &= IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
        else
            loop = 0;
    }
    freeaddrinfo(res);
    return loop;
}

/* Hello and welcome with rgpud (common/rgpu_proto.h), bounded in time.
 *
 * The launcher says hello itself before running anything: it is how it
 * knows that a private daemon or a tunnel is ready, and it turns "the
 * program failed somewhere inside CUDA" into a message about the server. */
#include "launcher.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int ms_left(double deadline)
{
    double left = deadline - now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* connect() that gives up at the deadline: a host that drops packets
 * would otherwise hold us for the kernel's two minutes. */
static int connect_by(const struct addrinfo *ai, double deadline, int *err)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
        *err = errno;
        close(fd);
        return -1;
    }
    struct pollfd pfd = { fd, POLLOUT, 0 };
    int rc = poll(&pfd, 1, ms_left(deadline));
    socklen_t len = sizeof *err;
    if (rc <= 0) {
        *err = rc == 0 ? ETIMEDOUT : errno;
        close(fd);
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) < 0 || *err) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

static int dial(const char *spec, double deadline, char *why, size_t whylen, int *err)
{
    char host[256], port[32];
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
    int fd = -1;

    *err = 0;
    if (split_host_port(spec, host, sizeof host, port, sizeof port, RGPU_DEFAULT_PORT) < 0) {
        snprintf(why, whylen, "'%s' is not HOST:PORT", spec);
        *err = EINVAL;
        return -1;
    }
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(why, whylen, "cannot resolve %s: %s", host, gai_strerror(rc));
        *err = EHOSTUNREACH;
        return -1;
    }
    for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
        fd = connect_by(ai, deadline, err);
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(*err));
    return fd;
}

static int send_hello(int fd)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_HELLO);
    msgpack_pack_int(&pk, RGPU_PROTO_VERSION);
    msgpack_pack_str_with_body(&pk, "rgpu-launcher", 13);
    struct iovec iov = { sb.data, sb.size };
    int rc = rgpu_write_frame(fd, &iov, 1);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void copy_str(const msgpack_object *o, char *buf, size_t size)
{
    if (o->type == MSGPACK_OBJECT_STR)
        snprintf(buf, size, "%.*s", (int)o->via.str.size, o->via.str.ptr);
    else
        buf[0] = '\0';
}

/* [2, proto, status, runtime, driver, name, message] */
static int parse_welcome(const char *frame, size_t len, struct welcome *w)
{
    msgpack_zone zone;
    msgpack_object root;
    int64_t v[5];
    int ok = -1;

    msgpack_zone_init(&zone, 1024);
    if (rgpu_unpack_frame(frame, len, &zone, &root) < 0 || root.type != MSGPACK_OBJECT_ARRAY ||
        root.via.array.size < 7)
        goto out;
    const msgpack_object *f = root.via.array.ptr;
    for (int i = 0; i < 5; i++)
        if (rgpu_obj_i64(&f[i], &v[i]) < 0)
            goto out;
    if (v[0] != RGPU_MSG_WELCOME)
        goto out;
    w->proto = (int)v[1];
    w->status = (int)v[2];
    w->runtime_version = (int)v[3];
    w->driver_version = (int)v[4];
    copy_str(&f[5], w->name, sizeof w->name);
    copy_str(&f[6], w->message, sizeof w->message);
    ok = 0;
out:
    msgpack_zone_destroy(&zone);
    return ok;
}

/* rgpu_read_frame retries reads a signal interrupts; waiting here first
 * lets ^C end the wait at once. */
static int wait_readable(int fd, double deadline)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    int rc = poll(&pfd, 1, ms_left(deadline));
    if (rc == 0)
        errno = EAGAIN;
    return rc > 0 ? 0 : -1;
}

static enum probe_result read_welcome(int fd, double deadline, struct welcome *w, char *why,
                                      size_t whylen)
{
    struct timeval tv = { ms_left(deadline) / 1000, (ms_left(deadline) % 1000) * 1000 };
    char *frame = NULL;
    size_t len;

    if (tv.tv_sec == 0 && tv.tv_usec == 0)
        tv.tv_usec = 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (send_hello(fd) < 0 || wait_readable(fd, deadline) < 0 ||
        rgpu_read_frame(fd, &frame, &len) < 0) {
        int e = errno;
        snprintf(why, whylen, "%s", e == EPIPE || e == ECONNRESET
                                        ? "the connection closed before a welcome"
                                        : strerror(e));
        if (e == EINTR)
            return PROBE_INTERRUPTED;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return PROBE_TIMEOUT;
        return e == EPIPE || e == ECONNRESET ? PROBE_CLOSED : PROBE_GARBLED;
    }
    int rc = parse_welcome(frame, len, w);
    free(frame);
    if (rc < 0) {
        snprintf(why, whylen, "the answer to hello is not an rgpud welcome");
        return PROBE_GARBLED;
    }
    return PROBE_OK;
}

enum probe_result probe(const char *spec, double timeout_s, struct welcome *w, char *why,
                        size_t whylen)
{
    double deadline = now_s() + timeout_s;
    int err;

    memset(w, 0, sizeof *w);
    why[0] = '\0';
    int fd = dial(spec, deadline, why, whylen, &err);
    if (fd < 0) {
        if (err == EINTR)
            return PROBE_INTERRUPTED;
        if (err == ETIMEDOUT)
            return PROBE_TIMEOUT;
        return err == ECONNREFUSED ? PROBE_REFUSED : PROBE_UNREACHABLE;
    }
    enum probe_result r = read_welcome(fd, deadline, w, why, whylen);
    close(fd);
    return r;
}

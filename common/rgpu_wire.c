#include "rgpu_wire.h"
#include "rgpu_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ---- frames --------------------------------------------------------------- */

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Wait until fd has room for a write, for ever when lim->idle_ms is -1,
 * else until idle_ms pass with neither room nor, when lim->alive is given,
 * a sign that the peer lives (then another idle_ms): -1 with ETIMEDOUT.
 * POLLERR and POLLHUP count as room: the write that follows reports them. */
static int wait_room(int fd, const struct rgpu_send_limit *lim)
{
    struct pollfd pfd = { .fd = fd, .events = POLLOUT };
    if (lim->idle_ms < 0)
        return poll(&pfd, 1, -1) < 0 && errno != EINTR ? -1 : 0;
    if (lim->alive)
        lim->alive(lim->arg);           /* the baseline: life from now on */
    long deadline = now_ms() + lim->idle_ms;
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0) {
            if (!lim->alive || !lim->alive(lim->arg)) {
                errno = ETIMEDOUT;
                return -1;
            }
            deadline = now_ms() + lim->idle_ms;
            continue;
        }
        int r = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Write every byte of iov.  Without a limit, blocking writev(2) as the
 * socket allows; with one, non-blocking sends and wait_room between them,
 * so that no wait for room outlasts the limit.  Partial writes advance
 * iov (the caller's copy); on failure some of the bytes may have gone,
 * so the stream is then unusable. */
static int write_all_iov(int fd, struct iovec *iov, int n, const struct rgpu_send_limit *lim)
{
    int is_socket = lim != NULL;
    while (n > 0) {
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)(n > IOV_MAX ? IOV_MAX : n) };
        ssize_t w = is_socket ? sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)
                              : writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ENOTSOCK && is_socket) {
                is_socket = 0;          /* a pipe in a test: blocking writes */
                continue;
            }
            if (is_socket && (errno == EAGAIN || errno == EWOULDBLOCK) &&
                wait_room(fd, lim) == 0)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int rgpu_write_frame_start(int fd, size_t total, const void *head, size_t head_len)
{
    uint32_t be;
    if (total > RGPU_FRAME_MAX || head_len > total) {
        errno = EMSGSIZE;
        return -1;
    }
    be = htonl((uint32_t)total);
    struct iovec iov[2] = { { &be, sizeof be }, { (void *)head, head_len } };
    return write_all_iov(fd, iov, 2, NULL);
}

int rgpu_write_raw_limited(int fd, const void *p, size_t n, const struct rgpu_send_limit *lim)
{
    struct iovec iov = { (void *)p, n };
    return write_all_iov(fd, &iov, 1, lim);
}

int rgpu_write_raw(int fd, const void *p, size_t n)
{
    return rgpu_write_raw_limited(fd, p, n, NULL);
}

int rgpu_write_frame_after_limited(int fd, const void *framed, size_t framed_len,
                                   const struct iovec *parts, int nparts,
                                   const struct rgpu_send_limit *lim)
{
    struct iovec iov[9];
    size_t total = 0;
    uint32_t be;
    int n = 0;

    if (nparts < 1 || nparts > 7) {
        errno = EINVAL;
        return -1;
    }
    if (framed_len)
        iov[n++] = (struct iovec){ (void *)framed, framed_len };
    iov[n++] = (struct iovec){ &be, sizeof be };
    for (int i = 0; i < nparts; i++) {
        iov[n++] = parts[i];
        total += parts[i].iov_len;
    }
    if (total > RGPU_FRAME_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    be = htonl((uint32_t)total);
    return write_all_iov(fd, iov, n, lim);
}

int rgpu_write_frame_after(int fd, const void *framed, size_t framed_len,
                           const struct iovec *parts, int nparts)
{
    return rgpu_write_frame_after_limited(fd, framed, framed_len, parts, nparts, NULL);
}

int rgpu_write_frame(int fd, const struct iovec *parts, int nparts)
{
    return rgpu_write_frame_after(fd, NULL, 0, parts, nparts);
}


/* Wait until fd is readable or deadline (CLOCK_MONOTONIC ms; -1: none)
 * has passed (ETIMEDOUT). */
static int wait_readable_until(int fd, long deadline)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    long left = deadline < 0 ? -1 : deadline - now_ms();
    if (deadline >= 0 && left <= 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    if (poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left) < 0 && errno != EINTR)
        return -1;
    return 0;
}

/* Read exactly n bytes, never blocking past deadline (a CLOCK_MONOTONIC
 * time in ms; -1: none).  The read is tried first without waiting, so
 * bytes already in the socket cost no poll(2): the rest of a frame is
 * nearly always there, and the deadline is free on the hot path. */
static int read_all_polled(int fd, char *p, size_t n, int eof_ok, long deadline)
{
    char *start = p;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r < 0 && errno == ENOTSOCK)
            r = read(fd, p, n);         /* a pipe in a test: blocking */
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = (eof_ok && p == start) ? EPIPE : ECONNRESET;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (wait_readable_until(fd, deadline) < 0)
            return -1;
    }
    return 0;
}

/* A bulk read (a copy's payload) outruns its sender on an idle machine and
 * finds the socket empty again and again: there, a failed non-blocking
 * recv, a poll and a recv per arrival cost three system calls where a
 * blocking recv costs one.  So large reads block in recv, with
 * SO_RCVTIMEO in slices of at most a second standing in for the deadline
 * (the socket's own setting is put back after). */
#define BLOCKING_READ_MIN ((size_t)256 << 10)
#define BLOCKING_SLICE_MS 1000L

static int read_all_blocking(int fd, char *p, size_t n, long deadline)
{
    struct timeval saved, slice = { 0, 0 };
    socklen_t sl = sizeof saved;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &saved, &sl) < 0)
        return read_all_polled(fd, p, n, 0, deadline);     /* a pipe in a test */
    if (deadline >= 0) {
        long left = deadline - now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        left = left < BLOCKING_SLICE_MS ? left : BLOCKING_SLICE_MS;
        slice.tv_sec = left / 1000;
        slice.tv_usec = (left % 1000) * 1000;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) < 0)
            return read_all_polled(fd, p, n, 0, deadline);
    }
    /* Without a deadline the socket's own SO_RCVTIMEO, if set, bounds each
     * wait, as for any read. */
    int rc = 0;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = ECONNRESET;
            rc = -1;
            break;
        }
        int expired = errno == EAGAIN || errno == EWOULDBLOCK;
        if (errno == EINTR || (expired && deadline >= 0 && now_ms() < deadline))
            continue;
        if (expired)
            errno = ETIMEDOUT;
        rc = -1;
        break;
    }
    if (deadline >= 0) {
        int err = errno;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &saved, sizeof saved);
        errno = err;
    }
    return rc;
}

static int read_all_until(int fd, void *buf, size_t n, int eof_ok, long deadline)
{
    if (n >= BLOCKING_READ_MIN && !eof_ok)
        return read_all_blocking(fd, buf, n, deadline);
    return read_all_polled(fd, buf, n, eof_ok, deadline);
}

/* A frame's length from its 4-byte big-endian header: 0, or -1 with errno
 * EMSGSIZE when it is empty or above max.  Every frame read, buffered or
 * not, is measured here. */
static int frame_length(const unsigned char hdr[4], size_t max, size_t *n)
{
    *n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (*n == 0 || *n > max) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

int rgpu_read_frame_timed(int fd, char **buf, size_t *len, int frame_ms)
{
    return rgpu_read_frame_limited(fd, buf, len, RGPU_FRAME_MAX, frame_ms);
}

int rgpu_read_frame_limited(int fd, char **buf, size_t *len, size_t max, int frame_ms)
{
    unsigned char hdr[4];
    long deadline;
    ssize_t r;

    /* The wait for a frame: a plain blocking read, as cheap as ever; the
     * socket's SO_RCVTIMEO, where set, bounds it. */
    do
        r = recv(fd, hdr, sizeof hdr, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0 && errno == ENOTSOCK)
        r = read(fd, hdr, sizeof hdr);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = ETIMEDOUT;
        return -1;
    }
    if (r == 0) {
        errno = EPIPE;
        return -1;
    }
    /* From its first byte, the whole frame within frame_ms. */
    deadline = frame_ms < 0 ? -1 : now_ms() + frame_ms;
    if (read_all_until(fd, hdr + r, sizeof hdr - (size_t)r, 0, deadline) < 0)
        return -1;
    size_t n;
    if (frame_length(hdr, max, &n) < 0)
        return -1;
    /* A large frame on a slow link gets 1 ms more per 256 bytes (a floor
     * of 256 KB/s): 72 MiB may take 5 minutes, a small one frame_ms. */
    if (deadline >= 0)
        deadline += (long)(n >> 8);
    char *p = malloc(n);
    if (!p)
        return -1;
    if (read_all_until(fd, p, n, 0, deadline) < 0) {
        free(p);
        return -1;
    }
    *buf = p;
    *len = n;
    return 0;
}

int rgpu_read_frame(int fd, char **buf, size_t *len)
{
    return rgpu_read_frame_timed(fd, buf, len, -1);
}

/* ---- msgpack pre-check ------------------------------------------------------ */

struct scan {
    const unsigned char *p, *end;
    uint64_t objects;           /* decoded objects so far */
};

static int take(struct scan *s, size_t n)
{
    if ((size_t)(s->end - s->p) < n)
        return -1;
    s->p += n;
    return 0;
}

static int read_be(struct scan *s, unsigned bytes, uint64_t *v)
{
    if ((size_t)(s->end - s->p) < bytes)
        return -1;
    *v = 0;
    for (unsigned i = 0; i < bytes; i++)
        *v = (*v << 8) | s->p[i];
    s->p += bytes;
    return 0;
}

/* ---- read-ahead ---------------------------------------------------------------- */

void rgpu_reader_init(struct rgpu_reader *r, int fd)
{
    r->fd = fd;
    r->start = r->end = 0;
}

int rgpu_reader_pending(const struct rgpu_reader *r)
{
    return r->end > r->start;
}

/* Buffer at least need bytes (need <= RGPU_READER_BUF), taking whatever
 * more the socket has.  Between frames (idle) with nothing buffered the
 * wait is a plain blocking recv (SO_RCVTIMEO bounds it); inside a frame,
 * deadline does. */
static int reader_fill(struct rgpu_reader *r, size_t need, int idle, long deadline)
{
    if (r->start > 0 && r->end - r->start < need) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    while (r->end - r->start < need) {
        int waiting = idle && r->end == r->start;
        ssize_t n = recv(r->fd, r->buf + r->end, sizeof r->buf - r->end,
                         waiting ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == ENOTSOCK)
            n = read(r->fd, r->buf + r->end, sizeof r->buf - r->end);
        if (n > 0) {
            r->end += (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = waiting ? EPIPE : ECONNRESET;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (waiting && (errno == EAGAIN || errno == EWOULDBLOCK))
            errno = ETIMEDOUT;
        if (waiting || (errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        if (wait_readable_until(r->fd, deadline) < 0)
            return -1;
    }
    return 0;
}

int rgpu_reader_begin(struct rgpu_reader *r, size_t *len, int frame_ms, long *deadline)
{
    *deadline = -1;
    if (!rgpu_reader_pending(r) && reader_fill(r, 1, 1, -1) < 0)
        return -1;
    /* From its first byte, the whole frame within frame_ms. */
    if (frame_ms >= 0)
        *deadline = now_ms() + frame_ms;
    if (reader_fill(r, 4, 0, *deadline) < 0)
        return -1;
    size_t n;
    if (frame_length((const unsigned char *)r->buf + r->start, RGPU_FRAME_MAX, &n) < 0)
        return -1;
    r->start += 4;
    if (*deadline >= 0)
        *deadline += (long)(n >> 8);    /* as rgpu_read_frame_timed */
    *len = n;
    return 0;
}

int rgpu_reader_peek(struct rgpu_reader *r, size_t need, long deadline, const char **p)
{
    if (need > RGPU_READER_BUF) {
        errno = EINVAL;
        return -1;
    }
    if (reader_fill(r, need, 0, deadline) < 0)
        return -1;
    *p = r->buf + r->start;
    return 0;
}

int rgpu_reader_read(struct rgpu_reader *r, void *buf, size_t len, long deadline)
{
    /* What is buffered, then the rest straight into buf (a bulk copy does
     * not pass through the read-ahead buffer). */
    size_t have = r->end - r->start < len ? r->end - r->start : len;
    memcpy(buf, r->buf + r->start, have);
    r->start += have;
    if (r->start == r->end)
        r->start = r->end = 0;
    if (have < len && read_all_until(r->fd, (char *)buf + have, len - have, 0, deadline) < 0)
        return -1;
    return 0;
}

int rgpu_reader_frame(struct rgpu_reader *r, char **buf, size_t *len, int frame_ms)
{
    long deadline;
    size_t n;
    if (rgpu_reader_begin(r, &n, frame_ms, &deadline) < 0)
        return -1;
    char *p = malloc(n);
    if (!p)
        return -1;
    if (rgpu_reader_read(r, p, n, deadline) < 0) {
        free(p);
        return -1;
    }
    *buf = p;
    *len = n;
    return 0;
}

/* ---- frames that end in bulk bytes -------------------------------------------- */

static int scan_object(struct scan *s, int depth);

int rgpu_split_trailing_bin(const char *buf, size_t have, size_t len, size_t *head,
                            size_t *bin_at)
{
    struct scan s = { .p = (const unsigned char *)buf, .end = (const unsigned char *)buf + have };
    uint64_t left[RGPU_MAX_DEPTH + 1];     /* elements still due at each level */
    int depth = 0;
    left[0] = 1;                            /* the root */
    while (s.p < s.end) {
        const unsigned char *at = s.p;
        unsigned char b = *s.p;
        uint64_t n;
        if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {            /* an array */
            s.p++;
            if ((b & 0xf0) == 0x90)
                n = b & 0x0f;
            else if (read_be(&s, b == 0xdc ? 2 : 4, &n) < 0)
                return -1;
            left[depth]--;
            if (n > 0) {
                if (depth == RGPU_MAX_DEPTH)
                    return -1;
                left[++depth] = n;
            }
        } else if (b == 0xc4 || b == 0xc5 || b == 0xc6) {              /* a bin */
            s.p++;
            if (read_be(&s, b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4, &n) < 0)
                return -1;
            size_t end = (size_t)(s.p - (const unsigned char *)buf);
            /* The last element of every array around it, running to the
             * frame's end: the body is the rest of the frame. */
            int last = left[depth] == 1;
            for (int d = 0; d < depth && last; d++)
                last = left[d] == 0;
            if (last && end <= len && n == len - end) {
                *head = end;
                *bin_at = (size_t)(at - (const unsigned char *)buf);
                return 0;
            }
            if (take(&s, n) < 0)
                return -1;
            left[depth]--;
        } else {
            if (scan_object(&s, depth) < 0)
                return -1;
            left[depth]--;
        }
        while (depth > 0 && left[depth] == 0)
            depth--;
        if (depth == 0 && left[0] == 0)
            return -1;                      /* the whole frame, no trailing bin */
    }
    return -1;
}

void rgpu_empty_trailing_bin(char *head, size_t bin_at)
{
    unsigned char b = (unsigned char)head[bin_at];
    memset(head + bin_at + 1, 0, b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4);
}

int rgpu_unpack_frame_head(const char *p, size_t have, size_t len, char *buf, size_t *head,
                           msgpack_zone *zone, msgpack_object *root)
{
    size_t bin_at;
    if (rgpu_split_trailing_bin(p, have, len, head, &bin_at) < 0) {
        *head = 0;
        return -1;
    }
    memcpy(buf, p, *head);      /* *head <= have: the split saw it all */
    rgpu_empty_trailing_bin(buf, bin_at);
    return rgpu_unpack_frame(buf, *head, zone, root);
}

static int scan_object(struct scan *s, int depth);

/* Every element takes at least one byte, so a count larger than what is
 * left is a lie told to make the unpacker allocate. */
static int scan_container(struct scan *s, uint64_t count, int per_item, int depth)
{
    if (depth >= RGPU_MAX_DEPTH || count > (uint64_t)(s->end - s->p))
        return -1;
    /* msgpack-c allocates one msgpack_object (24 bytes) per element, a
     * pair per map entry, before it reads them: bound the total. */
    s->objects += count * (uint64_t)per_item;
    if (s->objects > RGPU_MAX_OBJECTS)
        return -1;
    for (uint64_t i = 0; i < count * (uint64_t)per_item; i++)
        if (scan_object(s, depth + 1) < 0)
            return -1;
    return 0;
}

static int scan_object(struct scan *s, int depth)
{
    uint64_t n;
    if (s->p >= s->end)
        return -1;
    unsigned char b = *s->p++;

    if (b <= 0x7f || b >= 0xe0)                 /* fixint */
        return 0;
    if ((b & 0xf0) == 0x80)                     /* fixmap */
        return scan_container(s, b & 0x0f, 2, depth);
    if ((b & 0xf0) == 0x90)                     /* fixarray */
        return scan_container(s, b & 0x0f, 1, depth);
    if ((b & 0xe0) == 0xa0)                     /* fixstr */
        return take(s, b & 0x1f);

    switch (b) {
    case 0xc0: case 0xc2: case 0xc3:            /* nil, false, true */
        return 0;
    case 0xc4: case 0xd9:                       /* bin8, str8 */
        return read_be(s, 1, &n) < 0 ? -1 : take(s, n);
    case 0xc5: case 0xda:                       /* bin16, str16 */
        return read_be(s, 2, &n) < 0 ? -1 : take(s, n);
    case 0xc6: case 0xdb:                       /* bin32, str32 */
        return read_be(s, 4, &n) < 0 ? -1 : take(s, n);
    case 0xcc: case 0xd0: return take(s, 1);
    case 0xcd: case 0xd1: return take(s, 2);
    case 0xca: case 0xce: case 0xd2: return take(s, 4);
    case 0xcb: case 0xcf: case 0xd3: return take(s, 8);
    case 0xdc:                                  /* array16 */
        return read_be(s, 2, &n) < 0 ? -1 : scan_container(s, n, 1, depth);
    case 0xdd:                                  /* array32 */
        return read_be(s, 4, &n) < 0 ? -1 : scan_container(s, n, 1, depth);
    case 0xde:                                  /* map16 */
        return read_be(s, 2, &n) < 0 ? -1 : scan_container(s, n, 2, depth);
    case 0xdf:                                  /* map32 */
        return read_be(s, 4, &n) < 0 ? -1 : scan_container(s, n, 2, depth);
    default:                                    /* ext types: never ours */
        return -1;
    }
}

static int check_counted(const char *buf, size_t len, uint64_t *objects)
{
    struct scan s = { .p = (const unsigned char *)buf, .end = (const unsigned char *)buf + len };
    if (scan_object(&s, 0) < 0)
        return -1;
    *objects = s.objects;
    return s.p == s.end ? 0 : -1;
}

int rgpu_msgpack_check(const char *buf, size_t len)
{
    uint64_t objects;
    return check_counted(buf, len, &objects);
}

int rgpu_unpack_frame(const char *buf, size_t len, msgpack_zone *zone,
                      msgpack_object *root)
{
    uint64_t objects;
    return rgpu_unpack_frame_counted(buf, len, zone, root, &objects);
}

int rgpu_unpack_frame_counted(const char *buf, size_t len, msgpack_zone *zone,
                              msgpack_object *root, uint64_t *objects)
{
    size_t off = 0;
    if (check_counted(buf, len, objects) < 0)
        return -1;
    if (msgpack_unpack(buf, len, &off, zone, root) != MSGPACK_UNPACK_SUCCESS || off != len)
        return -1;
    return 0;
}

int rgpu_obj_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    *v = o->via.u64;
    return 0;
}

int rgpu_obj_i64(const msgpack_object *o, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > INT64_MAX)
            return -1;
        *v = (int64_t)o->via.u64;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *v = o->via.i64;
        return 0;
    }
    return -1;
}

void rgpu_unix_buffers(int fd)
{
    struct sockaddr_storage a;
    socklen_t alen = sizeof a;
    int size = RGPU_UNIX_SNDBUF;
    if (getsockname(fd, (struct sockaddr *)&a, &alen) == 0 && a.ss_family == AF_UNIX)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

void rgpu_spin_until_readable(int fd, long spin_ns)
{
    struct timespec t0, t;
    char c;
    if (spin_ns <= 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EINTR))
            return;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < spin_ns);
}

long rgpu_spin_ns(const char *setting)
{
    if (setting && *setting) {
        long us = atol(setting);
        return us > 0 && us < 1000000 ? us * 1000 : 0;
    }
    return sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? 50 * 1000 : 0;
}

/* The session's standard output and error, forwarded to the client.
 *
 * A kernel's printf and a failed device-side assert reach the host through
 * the driver, which writes them to the process's stdout and stderr when the
 * host synchronises with the device (a synchronise, a blocking copy, a
 * module load or unload, a context's end, the start of a launch).  In rgpu
 * that process is the session, so before any CUDA library is loaded its fds
 * 1 and 2 become pipes; what arrives in them goes to the client as output
 * frames ([RGPU_MSG_OUTPUT, fd, bin], common/rgpu_proto.h), whose core
 * writes the bytes to its own fd 1 or 2.  The session's own logging goes to
 * a copy of the original fd 2 (rgpu_log_set_fd), where it went before.
 *
 * Order: everything written while a call ran is sent before that call's
 * reply (output_before_reply), so that a program sees its kernels' output
 * when its synchronise returns, as on a local GPU.  A sender thread sends
 * whatever arrives meanwhile (output of calls that get no reply, of other
 * client threads), so that a writer never waits on a full pipe for long:
 * the driver writes while a synchronise runs, and nobody else would read
 * the pipe until that synchronise returned.
 *
 * Bounds: a pipe holds at most its capacity, and frames go out through the
 * session's socket like any other; a client that stops reading makes the
 * sender wait, then the writer (the driver, inside the client's own
 * synchronise), and after the frame timeout ends the session.  Nothing is
 * buffered here beyond one chunk.
 *
 * A known limit: while a device-to-host copy streams its data frame
 * (daemon/copy.c) no other frame can go out, and the copy's own stream
 * synchronises may make the driver print.  What it prints then is what
 * other client threads' kernels printed meanwhile (its own stream's
 * output went at its first piece, before the frame began); should that
 * exceed a pipe's room, the copy would wait on the pipe and the sender on
 * the copy's frame. */
#include "rgpud.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

/* One output frame carries at most this much. */
#define OUTPUT_CHUNK ((size_t)64 << 10)
/* Room the pipes ask for: a kernel's printf buffer (1 MiB by default)
 * fits whole, so the driver seldom waits for the sender.  Capped by
 * /proc/sys/fs/pipe-max-size; the default 64 KiB is correct, only slower. */
#define PIPE_ROOM (1 << 20)

static struct {
    int rd[2];                  /* read ends of the pipes behind fds 1 and 2; -1: none */
    size_t room[2];             /* their capacity */
    /* Held while bytes are between a pipe and the socket, so that a reply
     * never overtakes output read before it. */
    pthread_mutex_t lock;
    char buf[OUTPUT_CHUNK];     /* under lock */
} O = { { -1, -1 }, { 0, 0 }, PTHREAD_MUTEX_INITIALIZER, { 0 } };

/* Descriptors 0-2 open, so that a pipe never lands on one of them. */
static void std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            rgpu_warn("cannot open /dev/null for descriptor %d: %s", fd, strerror(errno));
}

/* Logging goes on to where fd 2 pointed so far: a copy above 2. */
static void keep_logging(void)
{
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        rgpu_warn("cannot keep a descriptor for the log (%s): logging stops", strerror(errno));
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    }
    rgpu_log_set_fd(fd);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_report_fd((void *)(intptr_t)fd);  /* a session's crash is ours to read */
#endif
}

/* Make target (1 or 2) the write end of a new pipe; *rd its read end,
 * non-blocking.  The write end blocks, as a terminal or a file would
 * make the writer wait. */
static int capture_fd(int target, int *rd, size_t *room)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    if (fcntl(p[1], F_SETPIPE_SZ, PIPE_ROOM) < 0)
        rgpu_debug("pipe for descriptor %d keeps its default size (%s)", target, strerror(errno));
    int size = fcntl(p[1], F_GETPIPE_SZ);
    if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0 || dup2(p[1], target) < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    close(p[1]);
    *rd = p[0];
    *room = size > 0 ? (size_t)size : 4096;
    return 0;
}

void output_capture(void)
{
    std_fds_open();
    /* What the C library holds for the old destinations goes there. */
    fflush(stdout);
    fflush(stderr);
    keep_logging();
    for (int i = 0; i < 2; i++)
        if (capture_fd(i + 1, &O.rd[i], &O.room[i]) < 0)
            rgpu_warn("cannot capture the session's descriptor %d (%s): what is written there "
                      "stays on the server", i + 1, strerror(errno));
    /* The driver may print through the C library's stdout: unbuffered, its
     * bytes reach the pipe before the call that wrote them returns. */
    setvbuf(stdout, NULL, _IONBF, 0);
}

/* [OUTPUT, fd, bin] */
static void send_output(int fd, const char *p, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_OUTPUT);
    msgpack_pack_int(&pk, fd);
    msgpack_pack_bin_with_body(&pk, p, n);
    session_send(&sb);
    msgpack_sbuffer_destroy(&sb);
}

/* With O.lock held: send what pipe i holds, up to limit bytes. */
static void drain(int i, size_t limit)
{
    size_t sent = 0;
    while (sent < limit) {
        size_t want = limit - sent < sizeof O.buf ? limit - sent : sizeof O.buf;
        ssize_t n = read(O.rd[i], O.buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        send_output(i + 1, O.buf, (size_t)n);
        sent += (size_t)n;
        if ((size_t)n < want)
            return;         /* a pipe's read returns less only when it is empty */
    }
}

void output_before_reply(void)
{
    struct pollfd pfd[2] = { { .fd = O.rd[0], .events = POLLIN },
                             { .fd = O.rd[1], .events = POLLIN } };
    if (O.rd[0] < 0 && O.rd[1] < 0)
        return;
    /* The call's bytes are in the pipes once these return (a library may
     * have buffered stdout again). */
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&O.lock);
    if (poll(pfd, 2, 0) > 0) {
        /* A pipe's capacity covers everything it held when the call
         * returned, however fast other threads write meanwhile. */
        for (int i = 0; i < 2; i++)
            if (pfd[i].revents & POLLIN)
                drain(i, O.room[i]);
    }
    pthread_mutex_unlock(&O.lock);
}

/* Sends output as it arrives, a chunk per pipe and turn. */
static void *sender_main(void *arg)
{
    struct pollfd pfd[2] = { { .fd = O.rd[0], .events = POLLIN },
                             { .fd = O.rd[1], .events = POLLIN } };
    (void)arg;
    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rgpu_error("polling the session's output: %s; output now waits for replies",
                       strerror(errno));
            return NULL;
        }
        pthread_mutex_lock(&O.lock);
        for (int i = 0; i < 2; i++) {
            if (pfd[i].revents & POLLIN)
                drain(i, OUTPUT_CHUNK);
            else if (pfd[i].revents & (POLLHUP | POLLERR | POLLNVAL))
                pfd[i].fd = -1;         /* the descriptor was closed: nothing more comes */
        }
        pthread_mutex_unlock(&O.lock);
    }
}

void output_start(void)
{
    pthread_t t;
    if (O.rd[0] < 0 && O.rd[1] < 0)
        return;
    if (pthread_create(&t, NULL, sender_main, NULL) != 0) {
        rgpu_warn("cannot start the output thread: output waits for replies");
        return;
    }
    pthread_detach(t);
}

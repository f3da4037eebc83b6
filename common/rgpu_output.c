/* What the server's session wrote to its stdout and stderr (kernels'
 * printf, device-side assert messages, the libraries' own prints), written
 * to this process's fds 1 and 2 (daemon/output.c, common/rgpu_proto.h).
 *
 * On a local GPU the driver writes that output through this process's C
 * library streams, during the call that synchronises.  Here the bytes come
 * as output frames ahead of that call's reply, and the thread that reads
 * them writes them out before the reply is handed over.  The stream's lock
 * is held meanwhile and its buffer flushed first, so that what the program
 * printed before the synchronise comes first, and no other thread's printf
 * lands inside a frame's bytes.
 *
 * Calls that go without waiting (a lazy synchronise, docs/synchronisation.md)
 * would let such output arrive only with a later reply: the stubs know
 * which kernels may print and make the synchronises after them wait
 * (rgpu_printing.c), and output that arrives unforeseen is told there. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write the bytes to fd (1 or 2) behind what the program's stream holds. */
static void write_behind_stream(int fd, const char *p, size_t n)
{
    FILE *stream = fd == STDOUT_FILENO ? stdout : stderr;
    flockfile(stream);
    fflush(stream);
    /* A closed or broken descriptor loses the output, as it would have
     * lost the driver's (SIGPIPE, where it is not ignored, ends the
     * program as it would have then). */
    (void)write_all(fd, p, n);
    funlockfile(stream);
}

int rgpu_output_frame(const char *frame, size_t len)
{
    msgpack_zone zone;
    msgpack_object root;
    uint64_t fd;
    int rc = -1;

    msgpack_zone_init(&zone, 256);
    if (rgpu_unpack_frame(frame, len, &zone, &root) == 0 && root.type == MSGPACK_OBJECT_ARRAY &&
        root.via.array.size == 3 && rgpu_obj_u64(&root.via.array.ptr[1], &fd) == 0 &&
        (fd == STDOUT_FILENO || fd == STDERR_FILENO) &&
        root.via.array.ptr[2].type == MSGPACK_OBJECT_BIN) {
        const msgpack_object_bin *bin = &root.via.array.ptr[2].via.bin;
        if (fd == STDOUT_FILENO && bin->size)
            rgpu_printing_output_arrived();
        write_behind_stream((int)fd, bin->ptr, bin->size);
        rc = 0;
    }
    msgpack_zone_destroy(&zone);
    return rc;
}

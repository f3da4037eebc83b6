/* Frames on a stream socket, and the check that makes a frame safe to hand
 * to msgpack-c. */
#ifndef RGPU_WIRE_H
#define RGPU_WIRE_H

#include <stddef.h>
#include <sys/uio.h>

#include <msgpack.h>

/* Write one frame made of the given pieces (their total is the frame
 * length).  Returns 0, or -1 with errno set. */
int rgpu_write_frame(int fd, const struct iovec *parts, int nparts);

/* Read one frame into a malloc'd buffer.  Returns 0, or -1 with errno set:
 * EPIPE on a clean end of stream, EMSGSIZE when the announced length is
 * beyond RGPU_FRAME_MAX. */
int rgpu_read_frame(int fd, char **buf, size_t *len);

/* Busy-poll fd for up to spin_ns until it is readable (or at its end, or
 * failed) before a blocking read: a frame that comes within that time is
 * read without the scheduler's wake-up latency, at the price of a busy core
 * meanwhile.  Measured on the H200 host over loopback, 50 us on both ends
 * took a synchronous round trip from about 20 us to about 13. */
void rgpu_spin_until_readable(int fd, long spin_ns);
/* The spin time: setting (microseconds, from RGPU_SPIN_US or RGPUD_SPIN_US)
 * when given, else 50 us on a machine of 4 or more online CPUs and none on
 * a smaller one, where the spinning side would take the core the other
 * side needs. */
long rgpu_spin_ns(const char *setting);

/* Validate that buf holds exactly one msgpack object whose every array and
 * map count fits in the bytes left (msgpack-c allocates for a count before
 * it reads the elements) and whose nesting is at most RGPU_MAX_DEPTH.
 * Returns 0 when safe. */
int rgpu_msgpack_check(const char *buf, size_t len);

/* Check then unpack one frame.  On success *root is valid while zone lives.
 * Returns 0, or -1 when the frame is not acceptable msgpack. */
int rgpu_unpack_frame(const char *buf, size_t len, msgpack_zone *zone,
                      msgpack_object *root);

/* Helpers for reading decoded messages. */
int rgpu_obj_u64(const msgpack_object *o, uint64_t *v);
int rgpu_obj_i64(const msgpack_object *o, int64_t *v);

#endif

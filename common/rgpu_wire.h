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

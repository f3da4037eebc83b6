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
/* The same, after framed_len bytes of frames already framed (a batch of
 * requests), in one writev. */
int rgpu_write_frame_after(int fd, const void *framed, size_t framed_len,
                           const struct iovec *parts, int nparts);

/* A frame written in pieces: its length (total bytes), then head_len bytes
 * of it; the rest follows with rgpu_write_raw, exactly total - head_len
 * bytes, before any other frame. */
int rgpu_write_frame_start(int fd, size_t total, const void *head, size_t head_len);
int rgpu_write_raw(int fd, const void *p, size_t n);

/* A bound on a write's waits for room in the socket (a peer that reads
 * nothing: frozen, or stuck): the write fails with ETIMEDOUT once idle_ms
 * pass with no room and, if alive is given, alive(arg) says the peer
 * showed no life since its last call either (it is called once when a
 * wait begins, to start afresh).  idle_ms -1: no bound.  The functions
 * without a limit block as the socket does (its SO_SNDTIMEO, if set, ends
 * a write that made no progress with EAGAIN).  After any failure part of
 * the frame may have gone: the stream is unusable. */
struct rgpu_send_limit {
    int idle_ms;
    int (*alive)(void *arg);
    void *arg;
};
int rgpu_write_frame_after_limited(int fd, const void *framed, size_t framed_len,
                                   const struct iovec *parts, int nparts,
                                   const struct rgpu_send_limit *lim);
int rgpu_write_raw_limited(int fd, const void *p, size_t n, const struct rgpu_send_limit *lim);

/* Read one frame into a malloc'd buffer.  Returns 0, or -1 with errno set:
 * EPIPE on a clean end of stream, EMSGSIZE when the announced length is
 * beyond RGPU_FRAME_MAX. */
int rgpu_read_frame(int fd, char **buf, size_t *len);

/* rgpu_read_frame, with a time limit inside the frame: from its first
 * byte, the whole frame must arrive within frame_ms plus 1 ms per 256
 * bytes of it (-1: no limit).  The wait for the first byte is bounded only
 * by the socket's SO_RCVTIMEO, if set.  Fails with errno ETIMEDOUT when
 * either runs out.  A peer idle between frames is normal (a notebook); a
 * peer that stops inside a frame is stalled or hostile. */
int rgpu_read_frame_timed(int fd, char **buf, size_t *len, int frame_ms);

/* rgpu_read_frame_timed for frames of at most max bytes (EMSGSIZE above):
 * the handshake's, read before the peer is known (common/rgpu_hello.c).
 * Reads exactly the frame, nothing after it. */
int rgpu_read_frame_limited(int fd, char **buf, size_t *len, size_t max, int frame_ms);

/* A frame reader that reads ahead: requests sent without waiting (kernel
 * launches, async copies) arrive back to back, and one recv(2) of up to
 * RGPU_READER_BUF bytes then serves many frames instead of two system
 * calls each.  Same timeouts as rgpu_read_frame_timed. */
#define RGPU_READER_BUF (64u << 10)
struct rgpu_reader {
    int fd;
    size_t start, end;          /* buffered bytes: buf[start..end) */
    char buf[RGPU_READER_BUF];
};
void rgpu_reader_init(struct rgpu_reader *r, int fd);
/* Whether bytes of a next frame are already buffered (no need to wait on
 * the socket). */
int rgpu_reader_pending(const struct rgpu_reader *r);
int rgpu_reader_frame(struct rgpu_reader *r, char **buf, size_t *len, int frame_ms);

/* rgpu_reader_frame in steps, for frames whose bulk bytes go elsewhere
 * than a frame buffer (a copy's payload, straight into its destination):
 * begin waits for the next frame and reads its length (EMSGSIZE: 0 or
 * beyond RGPU_FRAME_MAX) and gives the deadline of the rest; peek makes the
 * next need bytes (at most RGPU_READER_BUF, and no more than the frame has
 * left: the caller's bound) visible at *p without consuming them; read
 * consumes the next len bytes of the frame into buf.  Large reads block in
 * recv(2), with the deadline as a receive timeout. */
int rgpu_reader_begin(struct rgpu_reader *r, size_t *len, int frame_ms, long *deadline);
int rgpu_reader_peek(struct rgpu_reader *r, size_t need, long deadline, const char **p);
int rgpu_reader_read(struct rgpu_reader *r, void *buf, size_t len, long deadline);

/* A frame of len bytes whose msgpack ends in a bin that is the last element
 * of every array around it, its body running to the frame's end: bulk
 * bytes that need not pass through a frame buffer.  Given the frame's first
 * `have` bytes, 0 with *head the length of everything before the bin's
 * body and *bin_at the offset of the bin's header; -1 when the frame has
 * another shape, or needs more than `have` bytes to tell. */
int rgpu_split_trailing_bin(const char *buf, size_t have, size_t len, size_t *head,
                            size_t *bin_at);
/* Set that bin's length to 0 in a copy of the head, which then reads as
 * complete msgpack (the body being elsewhere). */
void rgpu_empty_trailing_bin(char *head, size_t bin_at);
/* Both in one, for a frame of len bytes whose first `have` bytes are at p:
 * *head 0 when it has no such bin; else its head's length, the head
 * copied into buf (cap bytes, at least `have`) with the bin emptied, and
 * 0 returned when that unpacks into *root (in zone), -1 when not. */
int rgpu_unpack_frame_head(const char *p, size_t have, size_t len, char *buf, size_t *head,
                           msgpack_zone *zone, msgpack_object *root);

/* The most array elements and map entries (a map entry counts twice) one
 * frame may decode to.  msgpack-c spends a 24-byte msgpack_object on each
 * before reading it, so a frame of one-byte elements would cost 24 times
 * its size: 2^18 objects bound that to 6 MiB.  The largest legitimate
 * frames hold a few thousand (a 512-parameter launch layout, the error
 * texts of a library); bulk data travels as bin, one object. */
#define RGPU_MAX_OBJECTS        (1u << 18)

/* Send buffers of a Unix stream socket: a bulk copy's writer blocks each
 * time the peer's queue holds SO_SNDBUF bytes (the default, about 200 KiB,
 * cost a plain socket pair a fifth of its throughput on the development
 * machine against 2 MiB).  Asks for RGPU_UNIX_SNDBUF, which the system caps
 * at net.core.wmem_max; TCP tunes its own buffers and is left alone. */
#define RGPU_UNIX_SNDBUF (2 << 20)
void rgpu_unix_buffers(int fd);

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
 * it reads the elements), whose nesting is at most RGPU_MAX_DEPTH and
 * whose containers hold at most RGPU_MAX_OBJECTS elements in all.
 * Returns 0 when safe. */
int rgpu_msgpack_check(const char *buf, size_t len);

/* Check then unpack one frame.  On success *root is valid while zone lives.
 * Returns 0, or -1 when the frame is not acceptable msgpack. */
int rgpu_unpack_frame(const char *buf, size_t len, msgpack_zone *zone,
                      msgpack_object *root);

/* rgpu_unpack_frame, also telling how many objects the frame decoded to
 * (array elements and map keys and values). */
int rgpu_unpack_frame_counted(const char *buf, size_t len, msgpack_zone *zone,
                              msgpack_object *root, uint64_t *objects);

/* Helpers for reading decoded messages. */
int rgpu_obj_u64(const msgpack_object *o, uint64_t *v);
int rgpu_obj_i64(const msgpack_object *o, int64_t *v);

#endif

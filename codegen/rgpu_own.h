/* rgpu's own library (codegen/rgpu.ann): the procedures of the client core
 * that belong to no CUDA library, served by rgpud's session itself.  They
 * are declared as C functions so that the one codec marshals them (see
 * codegen/cudart_own.h for the conventions); their client functions are
 * generated into the client core (librgpu-client.so.0), their serve_
 * functions written in the daemon files named. */
#ifndef RGPU_OWN_H
#define RGPU_OWN_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu_module_wire.h"

/* Their status: 0, or what went wrong. */
typedef int rgpu_status;
enum rgpu_statuses {
    RGPU_STATUS_OK = 0,
    RGPU_STATUS_INVALID = 1,        /* an argument the call cannot take */
    RGPU_STATUS_NOT_FOUND = 2,      /* nothing to answer */
    RGPU_STATUS_NOT_SUPPORTED = 3,  /* the server cannot serve the call */
    RGPU_STATUS_UNAVAILABLE = 4,    /* no server */
    RGPU_STATUS_NO_MEMORY = 5,      /* the server cannot hold what was asked */
};

/* A request that waits for nothing but its turn: its reply says every
 * request sent before it has run (the client's bound on how far it runs
 * ahead: common/rgpu_client.c; served in daemon/session.c). */
rgpu_status rgpu_fence(void);

/* A failure of a request sent without waiting that no reply has reported
 * yet: the library whose call failed, and its status (a transport failure
 * as its RGPU_E* number). */
struct rgpu_unreported {
    int32_t status;
    char lib[12];
};
/* Those of every client thread, each told once: *count of them, the first
 * capacity in entries (asked at exit, so that none is lost:
 * common/rgpu_client.c; served in daemon/session.c). */
rgpu_status rgpu_unreported(struct rgpu_unreported *entries, size_t capacity, size_t *count);

/* The text a library of the server's (lib "cudart", "cuda", "cublas",
 * "cublasLt" or "cudnn") gives for its status code (cudaGetErrorString,
 * cuGetErrorString...), into text: max_size bytes, its NUL included, a
 * longer text cut there.  RGPU_STATUS_NOT_FOUND when the library has none
 * for code but its text for an unknown one (common/rgpu_client.c, asked
 * once per code; served in daemon/error_texts.c). */
rgpu_status rgpu_error_string(const char *lib, int code, char *text, size_t max_size);

/* ==== module images and libraries loaded late ====================================== */

/* One piece of a module image larger than RGPU_IMAGE_INLINE_MAX
 * (codegen/rgpu_module_wire.h), which the session assembles in a buffer of
 * the calling client thread for the request that loads it
 * (common/rgpu_image.c; served in daemon/image_stage.c).  Pieces come in
 * order, at most RGPU_IMAGE_PIECE bytes each, the first at offset 0, which
 * drops an unfinished image of that thread and is where the server says
 * whether it holds an image of total bytes (RGPU_STATUS_NO_MEMORY: its
 * staging limit or its memory refuses); anything out of order is a
 * protocol error. */
rgpu_status rgpu_image_piece(uint64_t total, uint64_t offset, size_t size, const void *piece);

/* A stub library loaded after the session began: its name and its
 * procedure table's digest (rgpu_hello.h), checked as the hello's are; a
 * server whose table differs answers RGPU_EVERSION, and the client ends
 * the session (common/rgpu_client.c; served in daemon/auth.c). */
rgpu_status rgpu_late_lib(const char *lib, const void *digest, size_t digest_size);
/* ==== shared memory: common/rgpu_mapped.c, served in daemon/hand_cuda.c ====
 * The client's own copies between the program's copy of mapped or managed
 * memory and its GPU copy, on a non-blocking stream of the session's in
 * the memory's context, never behind the program's work (a pull may come
 * from the host-function thread while a host function holds its stream).
 * One chunk of at most RGPU_COPY_CHUNK bytes each, the device range the
 * session's over all count bytes; the bytes travel as the copies' do
 * (stream and sink, codegen/cudart_own.h).  RGPU_STATUS_INVALID: a range
 * that is not the session's, or the driver's failure (rgpud logs it). */
rgpu_status rgpu_shared_htod(void *dst, size_t count, const void *data);
rgpu_status rgpu_shared_dtoh(void *data, size_t count, const void *src);

#endif

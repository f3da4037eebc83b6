/* Bulk copies on the server (daemon/copy.c): a copy's bytes pass through
 * host staging buffers kept by the session, one piece on the network while
 * the GPU copies the next. */
#ifndef RGPUD_COPY_H
#define RGPUD_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "rgpud.h"

/* One API's asynchronous copies and stream wait (the runtime's or the
 * driver's), returning its status. */
struct copy_api {
    int (*htod)(uint64_t dst, const void *src, size_t n, uint64_t stream);
    int (*dtoh)(void *dst, uint64_t src, size_t n, uint64_t stream);
    int (*sync)(uint64_t stream);
};

/* Host to device of a streamed request's payload (all c->in_len bytes, to
 * dst, which the caller has checked): each piece is read from the socket
 * while the previous one is copied.  Returns the first failing status (the
 * rest of the payload is then read and dropped), or -RGPU_ENOMEM. */
int copy_htod_streamed(struct hand_call *c, const struct copy_api *api, uint64_t dst,
                       uint64_t stream);

/* Device to host of count bytes from src (checked by the caller), sent as
 * a data frame ahead of the reply: each piece is sent while the next is
 * copied.  When the first piece fails, nothing is sent and its status
 * returned; a later failure is returned after the frame is completed with
 * zeros.  -RGPU_ENOMEM: nothing sent. */
int copy_dtoh_streamed(struct hand_call *c, const struct copy_api *api, uint64_t src,
                       size_t count, uint64_t stream);

/* A context or device reset may have unpinned the staging buffers: pin
 * them again at their next use (memguards.c). */
void copy_forget_pinning(void);

#endif

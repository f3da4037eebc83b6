/* Bulk copies on the server (daemon/copy.c): a copy's bytes pass through
 * host staging buffers kept by the session, one piece on the network while
 * the GPU copies the next. */
#ifndef RGPUD_COPY_H
#define RGPUD_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "rgpud.h"

/* One API's asynchronous copies and stream wait (the runtime's or the
 * driver's), returning its status; whether its functions are there; its
 * invalid-value status. */
struct copy_api {
    int (*htod)(uint64_t dst, const void *src, size_t n, uint64_t stream);
    int (*dtoh)(void *dst, uint64_t src, size_t n, uint64_t stream);
    int (*sync)(uint64_t stream);
    int (*available)(void);
    int invalid_value;
};

/* Host to device of the running call's streamed bytes (all of
 * serve_stream_left(), to dst, which the caller has checked): each piece
 * is read from the socket while the previous one is copied.  Returns the
 * first failing status (the rest of the bytes are then read and dropped),
 * or -RGPU_ENOMEM. */
int copy_htod_streamed(const struct copy_api *api, uint64_t dst, uint64_t stream);

/* Device to host of count bytes from src (checked by the caller), sent as
 * the running call's data frame ahead of its reply: each piece is sent
 * while the next is copied.  When the first piece fails, nothing is sent
 * and its status returned; a later failure is returned after the frame is
 * completed with zeros.  -RGPU_ENOMEM: nothing sent. */
int copy_dtoh_streamed(const struct copy_api *api, uint64_t src, size_t count, uint64_t stream);

/* One copy of count bytes between host memory and device memory, the
 * serve_ functions' (rgpu_htod, rgpu_dtoh and the driver's rgpu_cu_htod,
 * rgpu_cu_dtoh: codegen/cudart_own.h, cuda_own.h) for both APIs: the host
 * side in the frame or streamed (serve_stream_left), in a buffer or sent
 * ahead as the call's sink (serve_sink_len).  The device range is checked
 * as the session's here too.  A copy to the device whose client does not
 * wait for the reply (serve_waited) returns once its bytes are in the
 * staging ring and their copy enqueued; any other copy returns once it has
 * finished.  The API's status, or -RGPU_E*. */
int copy_htod(const struct copy_api *api, uint64_t dst, uint64_t stream, const void *data,
              size_t count);
int copy_dtoh(const struct copy_api *api, void *data, size_t count, uint64_t src,
              uint64_t stream);
/* What a serve_ function returns for such a status (serve_transport). */
int copy_served(int rc);

/* Wait for every copy to the device still in flight from the staging
 * ring (copy_htod of a call sent without waiting): before a context is
 * destroyed or a device reset, while their events can still be waited
 * for (guards.c, memguards.c). */
void copy_drain(void);

/* A context or device reset may have unpinned the staging buffers: pin
 * them again at their next use (memguards.c). */
void copy_forget_pinning(void);

#endif

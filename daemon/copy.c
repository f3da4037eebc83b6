/* Bulk copies on the server: staging and the pipelines of pieces.
 *
 * A host-to-device copy's payload is not read into a frame buffer: the
 * handler reads it from the socket a piece at a time into one of two
 * staging buffers and copies each piece asynchronously, so that the PCIe
 * copy of one piece runs while the next arrives.  A device-to-host copy
 * goes the other way: the GPU fills one buffer while the other is sent, as
 * a data frame ahead of the reply (common/rgpu_proto.h).  Every piece's
 * copy is waited for before its call returns: nothing the GPU does
 * outlives the request, so no later call (a stream destroyed, a context
 * reset) can pull a buffer out from under a copy.
 *
 * The staging buffers are the session's own memory, page-locked with
 * cuMemHostRegister where the driver lets us, so that the driver's DMA
 * reads and writes them directly instead of passing pageable memory
 * through a staging copy of its own.  Registered rather than allocated
 * with cuMemHostAlloc: a context or device reset unregisters them but
 * cannot free them, so they stay valid (only pageable until pinned again).
 * Where the driver refuses (or the fake backend lacks the call) they stay
 * ordinary memory and the copies are as correct, if slower. */
#include "copy.h"
#include "owned.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A piece: large enough that a system call and a copy launch per piece are
 * noise, small enough that the pipeline fills and drains quickly. */
#define PIECE ((size_t)1 << 20)

struct staging {
    pthread_mutex_t lock;
    char *buf;                  /* two pieces */
    unsigned pinned_in;         /* the pinning generation it was tried in; 0: never */
};

/* One set per direction: a device-to-host copy of one client thread may
 * run while another thread's host-to-device payload is read. */
static struct staging to_device = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };
static struct staging to_host = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };
static atomic_uint pinning = 1;

void copy_forget_pinning(void)
{
    atomic_fetch_add(&pinning, 1);
}

/* Pin st's buffers if not tried since the last reset: needs a current
 * context (a driver-API program may have none yet; then later). */
static void pin(struct staging *st)
{
    __typeof__(&cuMemHostRegister_v2) reg =
        (__typeof__(&cuMemHostRegister_v2))backend_sym("cuda", "cuMemHostRegister_v2");
    __typeof__(&cuCtxGetCurrent) current =
        (__typeof__(&cuCtxGetCurrent))backend_sym("cuda", "cuCtxGetCurrent");
    unsigned gen = atomic_load(&pinning);
    CUcontext ctx = NULL;

    if (st->pinned_in == gen)
        return;
    if (!reg || !current) {
        st->pinned_in = gen;
        return;
    }
    if (current(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    /* Portable: pinned for every context, whichever device copies. */
    CUresult rc = reg(st->buf, 2 * PIECE, CU_MEMHOSTREGISTER_PORTABLE);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        rgpu_debug("copy staging (%zu KiB) page-locked", 2 * PIECE >> 10);
    else
        rgpu_debug("copy staging stays pageable: cuMemHostRegister returned %d", (int)rc);
    st->pinned_in = gen;
}

/* Lock st and make its buffers ready; -1 (unlocked) when out of memory. */
static int staging_take(struct staging *st)
{
    pthread_mutex_lock(&st->lock);
    if (!st->buf) {
        void *p;
        if (posix_memalign(&p, 4096, 2 * PIECE) != 0) {
            pthread_mutex_unlock(&st->lock);
            return -1;
        }
        st->buf = p;
    }
    pin(st);
    return 0;
}

static size_t piece_len(size_t count, size_t off)
{
    return count - off < PIECE ? count - off : PIECE;
}

int copy_htod_streamed(const struct copy_api *api, uint64_t dst, uint64_t stream)
{
    struct staging *st = &to_device;
    size_t count = serve_stream_left(), off = 0;
    int status = 0, in_flight = 0;

    if (staging_take(st) < 0)
        return -RGPU_ENOMEM;
    for (unsigned i = 0; off < count; i++) {
        size_t n = piece_len(count, off);
        char *b = st->buf + (i & 1) * PIECE;
        /* This buffer's last copy (two pieces ago) was waited for before
         * the previous piece's began; the previous one runs meanwhile. */
        serve_stream_read(b, n);
        if (in_flight) {
            int rc = api->sync(stream);
            status = status ? status : rc;
            in_flight = 0;
        }
        if (status == 0) {
            status = api->htod(dst + off, b, n, stream);
            in_flight = status == 0;
        }
        off += n;
    }
    if (in_flight) {
        int rc = api->sync(stream);
        status = status ? status : rc;
    }
    pthread_mutex_unlock(&st->lock);
    return status;
}

int copy_dtoh_streamed(const struct copy_api *api, uint64_t src, size_t count, uint64_t stream)
{
    struct staging *st = &to_host;
    size_t off = 0;

    if (staging_take(st) < 0)
        return -RGPU_ENOMEM;
    /* The first piece before anything is sent: a copy that fails at once
     * (a poisoned context, a bad stream) gets a plain error reply. */
    int status = api->dtoh(st->buf, src, piece_len(count, 0), stream);
    if (status == 0)
        status = api->sync(stream);
    if (status != 0) {
        pthread_mutex_unlock(&st->lock);
        return status;
    }
    serve_data_begin(count);
    int valid = 1;                          /* whether this piece's bytes are good */
    for (unsigned i = 0; off < count; i++) {
        size_t n = piece_len(count, off), next = off + n;
        char *b = st->buf + (i & 1) * PIECE, *nb = st->buf + ((i + 1) & 1) * PIECE;
        int issued = 0;
        /* The next piece's buffer was sent from last time round. */
        if (next < count && status == 0) {
            status = api->dtoh(nb, src + next, piece_len(count, next), stream);
            issued = status == 0;
        }
        if (!valid)
            memset(b, 0, n);                /* a failed copy's garbage is not sent */
        serve_data_write(b, n);
        valid = 0;
        if (issued) {
            int rc = api->sync(stream);
            status = status ? status : rc;
            valid = rc == 0;
        }
        off = next;
    }
    serve_data_end();
    pthread_mutex_unlock(&st->lock);
    return status;
}

/* ---- one copy, for either API ------------------------------------------------------ */

/* Only the session's device memory (daemon/owned.c): the codec checked the
 * range already; asked again, so that no annotation change can open the
 * server's own memory to a copy. */
static int device_range_ok(uint64_t ptr, size_t count)
{
    return (ptr || !count) && owned_range(ptr, count);
}

int copy_htod(const struct copy_api *api, uint64_t dst, uint64_t stream, const void *data,
              size_t count)
{
    if (!api->available())
        return -RGPU_ENOSYM;
    if (!device_range_ok(dst, count) || (!data && !serve_stream_left() && count))
        return api->invalid_value;
    if (serve_stream_left())
        return copy_htod_streamed(api, dst, stream);
    int rc = api->htod(dst, data, count, stream);
    return rc ? rc : api->sync(stream);     /* the frame is freed after we return */
}

int copy_dtoh(const struct copy_api *api, void *data, size_t count, uint64_t src,
              uint64_t stream)
{
    char none;
    if (!api->available())
        return -RGPU_ENOSYM;
    if (count > RGPU_FRAME_MAX - 4096)          /* its data frame must fit a frame */
        return -RGPU_ETOOBIG;
    if (!device_range_ok(src, count) || (!data && !serve_sink_len() && count))
        return api->invalid_value;
    if (serve_sink_len())
        return copy_dtoh_streamed(api, src, count, stream);
    int rc = api->dtoh(data ? data : &none, src, count, stream);
    return rc ? rc : api->sync(stream);
}

int copy_served(int rc)
{
    return rc < 0 ? serve_transport(-rc) : rc;
}

int hand_streamed(const struct hand_proc *hp)
{
    return strcmp(hp->name, RGPU_H_IMAGE_PIECE) == 0;      /* daemon/image_stage.c */
}

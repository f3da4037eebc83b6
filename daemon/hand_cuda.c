/* The driver API's procedures written by hand, server side: the serve_
 * functions of rgpu's own (codegen/cuda_own.h: copies between host and
 * device memory, whose one implementation for both APIs is
 * daemon/copy.c, device attributes), and of the client core's copies of
 * shared memory (codegen/rgpu_own.h, rgpu_shared_htod and
 * rgpu_shared_dtoh; client side: common/rgpu_mapped.c).  Launches:
 * daemon/hand_cuda_launch.c; modules, libraries and JIT linking:
 * hand_cuda_modules.c. */
#include "rgpud.h"
#include "copy.h"
#include "image_check.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"
#include "rgpu_serve.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)

static int drv_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
    return REAL(cuMemcpyHtoDAsync_v2)(dst, src, n, (CUstream)stream);
}

static int drv_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
    return REAL(cuMemcpyDtoHAsync_v2)(dst, src, n, (CUstream)stream);
}

static int drv_sync(uint64_t stream)
{
    return REAL(cuStreamSynchronize)((CUstream)stream);
}

static int drv_available(void)
{
    return REAL(cuMemcpyHtoDAsync_v2) && REAL(cuMemcpyDtoHAsync_v2) && REAL(cuStreamSynchronize);
}

static const struct copy_api driver_copies = { drv_htod, drv_dtoh, drv_sync, drv_available,
                                               CUDA_ERROR_INVALID_VALUE };

/* The copies between host and device memory (daemon/copy.c serves them for
 * both APIs; the codec checked the stream and the device range). */
CUresult serve_rgpu_cu_htod(CUdeviceptr dst, CUstream stream, size_t count, const void *data)
{
    return copy_served(copy_htod(&driver_copies, dst, (uint64_t)(uintptr_t)stream, data, count));
}

CUresult serve_rgpu_cu_dtoh(void *data, size_t count, CUdeviceptr src, CUstream stream)
{
    return copy_served(copy_dtoh(&driver_copies, data, count, src, (uint64_t)(uintptr_t)stream));
}

/* ---- the client's own copies of shared memory ---------------------------------- */

/* What keeps the program's copy of shared memory and its GPU copy alike
 * (common/rgpu_mapped.c) copies on a stream of its own: non-blocking, made
 * for the copy in the context that owns the memory and destroyed after it.
 * So such a copy never queues behind the program's work, above all behind
 * a host function that waits for the client (which may be the one asking,
 * from its host-function thread, which has no context current here), and
 * sees the memory as the work finished so far left it. */
struct shared_stream {
    CUstream stream;
    int pushed;                 /* a context was pushed for it */
};

static int shared_stream_open(uint64_t dev, struct shared_stream *s)
{
    CUcontext ctx = NULL;
    s->stream = NULL;
    s->pushed = 0;
    NEED(REAL(cuPointerGetAttribute) && REAL(cuCtxPushCurrent_v2) && REAL(cuCtxPopCurrent_v2) &&
         REAL(cuStreamCreate) && REAL(cuStreamDestroy_v2));
    int rc = REAL(cuPointerGetAttribute)(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)dev);
    if (rc == CUDA_SUCCESS && ctx && (rc = REAL(cuCtxPushCurrent_v2)(ctx)) == CUDA_SUCCESS)
        s->pushed = 1;
    if (rc == CUDA_SUCCESS)
        rc = REAL(cuStreamCreate)(&s->stream, CU_STREAM_NON_BLOCKING);
    return rc;
}

static void shared_stream_close(struct shared_stream *s)
{
    CUcontext ctx;
    if (s->stream)
        REAL(cuStreamDestroy_v2)(s->stream);
    if (s->pushed)
        REAL(cuCtxPopCurrent_v2)(&ctx);
}

/* The status of a shared-memory copy: the driver's failure as an
 * argument the call could not take (logged here: the client only keeps
 * the GPU's and the program's copies apart until the next one). */
static rgpu_status shared_status(int rc, const char *what)
{
    if (rc < 0)
        return serve_transport(-rc);
    if (rc != CUDA_SUCCESS)
        rgpu_debug("shared memory %s: the driver returned %d", what, rc);
    return rc == CUDA_SUCCESS ? RGPU_STATUS_OK : RGPU_STATUS_INVALID;
}

/* The program's bytes to a GPU copy; the codec checked the range as the
 * session's before the driver is asked about it. */
rgpu_status serve_rgpu_shared_htod(void *dst, size_t count, const void *data)
{
    struct shared_stream s;
    uint64_t d = (uint64_t)(uintptr_t)dst;
    int rc = shared_stream_open(d, &s);
    if (rc == CUDA_SUCCESS)
        rc = copy_htod(&driver_copies, d, (uint64_t)(uintptr_t)s.stream, data, count);
    shared_stream_close(&s);
    return shared_status(rc, "to the device");
}

/* A GPU copy's bytes for the program's (sent ahead of the reply from
 * RGPU_STREAM_MIN bytes up, by copy_dtoh). */
rgpu_status serve_rgpu_shared_dtoh(void *data, size_t count, const void *src)
{
    struct shared_stream s;
    uint64_t from = (uint64_t)(uintptr_t)src;
    int rc = shared_stream_open(from, &s);
    if (rc == CUDA_SUCCESS)
        rc = copy_dtoh(&driver_copies, data, count, from, (uint64_t)(uintptr_t)s.stream);
    shared_stream_close(&s);
    return shared_status(rc, "to the host");
}

CUresult serve_rgpu_cu_device_attrs(int *values, unsigned char *answered, size_t count,
                                    CUdevice dev)
{
    int devices = 0;
    if (!REAL(cuDeviceGetAttribute) || !REAL(cuDeviceGetCount))
        return serve_transport(RGPU_ENOSYM);
    if (!values || !answered)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = REAL(cuDeviceGetCount)(&devices);
    if (rc == CUDA_SUCCESS && (dev < 0 || dev >= devices))
        rc = CUDA_ERROR_INVALID_DEVICE;
    memset(answered, 0, count);
    for (size_t a = 1; rc == CUDA_SUCCESS && a < count && a < CU_DEVICE_ATTRIBUTE_MAX; a++)
        answered[a] = REAL(cuDeviceGetAttribute)(&values[a], (CUdevice_attribute)a, dev) ==
                      CUDA_SUCCESS;
    return rc;
}

/* cuStreamGetCaptureInfo_v3 with its arrays (codegen/cuda_own.h), as the
 * runtime's (daemon/hand_cudart.c). */
CUresult serve_rgpu_cu_capture_info(CUstream stream, int per_thread, CUstreamCaptureStatus *status,
                                    cuuint64_t *id, CUgraph *graph, CUgraphNode *deps,
                                    CUgraphEdgeData *edges, size_t max_deps, size_t *count)
{
    _Static_assert(sizeof(CUgraphEdgeData) == sizeof(uint64_t), "8-byte edge records");
    __typeof__(&cuStreamGetCaptureInfo_v3) query =
        (__typeof__(&cuStreamGetCaptureInfo_v3))backend_sym(
            "cuda", per_thread ? "cuStreamGetCaptureInfo_v3_ptsz" : "cuStreamGetCaptureInfo_v3");
    const CUgraphNode *d = NULL;
    const CUgraphEdgeData *e = NULL;
    size_t n = 0;
    if (!query)
        return serve_transport(RGPU_ENOSYM);
    CUresult rc = query(stream, status, id, graph, deps ? &d : NULL, edges ? &e : NULL, &n);
    if (rc != CUDA_SUCCESS)
        n = 0;
    capture_arrays_out(d, e, n, deps, edges, max_deps);
    if (count)
        *count = n;
    return rc;
}

/* The driver API's procedures written by hand, server side: the serve_
 * functions of rgpu's own (codegen/cuda_own.h: copies between host and
 * device memory, whose one implementation for both APIs is
 * daemon/copy.c, device attributes), and the shared-memory copies still
 * packed by hand (client side: common/rgpu_mapped.c; argument lists:
 * common/rgpu_hand_procs.h).  Launches: daemon/hand_cuda_launch.c;
 * modules, libraries and JIT linking: hand_cuda_modules.c. */
#include "rgpud.h"
#include "copy.h"
#include "image_check.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

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

/* The copies of rgpu.shared_htod's [dst, stream, bin] -> [] and
 * rgpu.shared_dtoh's [src, count, stream] -> [bin], once their stream is
 * known good (the bytes streamed, or sent ahead as a data frame, by
 * copy_htod and copy_dtoh). */
static int htod_on(struct hand_call *c, uint64_t dst, const void *p, size_t n, uint64_t stream)
{
    int rc = copy_htod(&driver_copies, dst, stream, p, c->in_len ? c->in_len : n);
    if (rc < 0)
        return rc;
    msgpack_pack_array(c->out, 0);
    return rc;
}

static int dtoh_on(struct hand_call *c, uint64_t src, uint64_t count, uint64_t stream)
{
    void *buf = NULL;
    c->sink_len = count >= RGPU_STREAM_MIN ? count : 0;
    if (!c->sink_len && !(buf = malloc(count ? count : 1)))
        return -RGPU_ENOMEM;
    int rc = copy_dtoh(&driver_copies, buf, count, src, stream);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    msgpack_pack_array(c->out, 1);
    if (buf)
        hand_payload(c, buf, rc ? 0 : count);
    else
        msgpack_pack_bin(c->out, 0);
    return rc;
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

/* [dst, 0, bin] -> []: the program's bytes to a GPU copy */
static int h_shared_htod(struct hand_call *c)
{
    uint64_t dst, zero;
    const void *p;
    size_t n;
    struct shared_stream s;
    PROTO_IF(args_count(c, 3) || arg_u64(c, 0, &dst) || arg_u64(c, 1, &zero) ||
             arg_bin(c, 2, &p, &n) || zero != 0);
    /* The memory is the session's before the driver is asked about it. */
    if (!owned_range(dst, c->in_len ? c->in_len : n))
        return htod_on(c, dst, p, n, 0);        /* refused there */
    int rc = shared_stream_open(dst, &s);
    if (rc == CUDA_SUCCESS)
        rc = htod_on(c, dst, p, n, (uint64_t)(uintptr_t)s.stream);
    else if (rc > 0)
        msgpack_pack_array(c->out, 0);
    shared_stream_close(&s);
    return rc;
}

/* [src, count, 0] -> [bin]: a GPU copy's bytes for the program's */
static int h_shared_dtoh(struct hand_call *c)
{
    uint64_t src, count, zero;
    struct shared_stream s;
    PROTO_IF(args_count(c, 3) || arg_u64(c, 0, &src) || arg_u64(c, 1, &count) ||
             arg_u64(c, 2, &zero) || zero != 0);
    if (!owned_range(src, count))
        return dtoh_on(c, src, count, 0);       /* refused there */
    int rc = shared_stream_open(src, &s);
    if (rc == CUDA_SUCCESS) {
        rc = dtoh_on(c, src, count, (uint64_t)(uintptr_t)s.stream);
    } else if (rc > 0) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_nil(c->out);
    }
    shared_stream_close(&s);
    return rc;
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

const struct hand_proc hand_cuda_procs[] = {
    { "rgpu", RGPU_H_SHARED_HTOD, h_shared_htod },
    { "rgpu", RGPU_H_SHARED_DTOH, h_shared_dtoh },
};
const int hand_cuda_nprocs = sizeof hand_cuda_procs / sizeof hand_cuda_procs[0];

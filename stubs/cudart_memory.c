/* Hand-written memory calls of libcudart: allocations (tracked, so that
 * cudaMemcpyDefault can tell device from host), copies that move host bytes
 * with the call, pinned host memory (client memory: pinning is the
 * server's business when the bytes arrive), and symbols.  Server side:
 * daemon/hand_cudart.c and daemon/copy.c. */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "cudart_own.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

/* ---- allocations ------------------------------------------------------------ */

/* The device new memory goes to, where the client knows it without asking
 * (the thread's device, once known): recorded with the range for
 * cudaPointerGetAttributes; -1 leaves it to be asked there, once. */
static int current_device_known(void)
{
    int dev;
    return rgpu_thread_device(&dev) ? dev : -1;
}

#undef cudaMalloc
RGPU_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    const void *argv[] = { &devPtr, &size };
    if (!devPtr)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaMalloc, argv);
    if (rc == cudaSuccess && *devPtr)
        rgpu_ranges_add_on((uint64_t)(uintptr_t)*devPtr, size, RGPU_RANGE_DEVICE,
                           current_device_known());
    return rc;
}

#undef cudaMallocPitch
RGPU_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    const void *argv[] = { &devPtr, &pitch, &width, &height };
    if (!devPtr || !pitch)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaMallocPitch, argv);
    if (rc == cudaSuccess && *devPtr)
        rgpu_ranges_add_on((uint64_t)(uintptr_t)*devPtr, *pitch * height, RGPU_RANGE_DEVICE,
                           current_device_known());
    return rc;
}

/* A stream-ordered allocation (argv as the procedure takes it): the range
 * is recorded once the address is known, which is at the call. */
static cudaError_t malloc_async(const struct rgpu_proc *proc, const void *const *argv,
                                void **devPtr, size_t size)
{
    if (!devPtr)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == cudaSuccess && *devPtr)
        rgpu_ranges_add((uint64_t)(uintptr_t)*devPtr, size, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cudaMallocAsync
RGPU_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
    const void *argv[] = { &devPtr, &size, &stream };
    return malloc_async(RGPU_CUDART_cudaMallocAsync, argv, devPtr, size);
}

RGPU_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream)
{
    const void *argv[] = { &devPtr, &size, &stream };
    return malloc_async(RGPU_CUDART_cudaMallocAsync_ptsz, argv, devPtr, size);
}

#undef cudaMallocFromPoolAsync
RGPU_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream)
{
    const void *argv[] = { &ptr, &size, &memPool, &stream };
    return malloc_async(RGPU_CUDART_cudaMallocFromPoolAsync, argv, ptr, size);
}

RGPU_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                     cudaMemPool_t memPool, cudaStream_t stream)
{
    const void *argv[] = { &ptr, &size, &memPool, &stream };
    return malloc_async(RGPU_CUDART_cudaMallocFromPoolAsync_ptsz, argv, ptr, size);
}

#undef cudaFree
RGPU_EXPORT cudaError_t cudaFree(void *devPtr)
{
    const void *argv[] = { &devPtr };
    /* Managed memory: the program's copy goes first, so that nothing is
     * pushed into memory being freed (stubs/cudart_mapped.c). */
    rgpu_mapped_release((uint64_t)(uintptr_t)devPtr, 1, NULL);
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaFree, argv);
    if (rc == cudaSuccess && devPtr)
        rgpu_ranges_remove((uint64_t)(uintptr_t)devPtr);
    return rc;
}

static cudaError_t free_async(const struct rgpu_proc *proc, void *devPtr, cudaStream_t stream)
{
    const void *argv[] = { &devPtr, &stream };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == cudaSuccess && devPtr)
        rgpu_ranges_remove((uint64_t)(uintptr_t)devPtr);
    return rc;
}

#undef cudaFreeAsync
RGPU_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
    return free_async(RGPU_CUDART_cudaFreeAsync, devPtr, stream);
}

RGPU_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream)
{
    return free_async(RGPU_CUDART_cudaFreeAsync_ptsz, devPtr, stream);
}

/* ---- pinned host memory: plain client memory --------------------------------- */

RGPU_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    if (!ptr)
        return RESULT(cudaErrorInvalidValue);
    /* Page-aligned like the real thing, so programs that rely on it work. */
    if (posix_memalign(ptr, 4096, size ? size : 1) != 0)
        return RESULT(cudaErrorMemoryAllocation);
    rgpu_ranges_add_on((uint64_t)(uintptr_t)*ptr, size, RGPU_RANGE_PINNED,
                       current_device_known());
    return cudaSuccess;
}

/* cudaHostAlloc, cudaFreeHost, cudaHostRegister, cudaHostUnregister,
 * cudaHostGetFlags and cudaHostGetDevicePointer: stubs/cudart_mapped.c. */

/* The device of the server memory at base (a range of this process's),
 * recorded at allocation or asked once and kept; -1 when the server
 * cannot say. */
static int range_device(uint64_t base)
{
    int dev = rgpu_ranges_device(base);
    if (dev >= 0)
        return dev;
    if (rgpu_pointer_device(&dev, (const void *)(uintptr_t)base) != cudaSuccess)
        return -1;
    if (dev >= 0)
        rgpu_ranges_set_device(base, dev);
    return dev;
}

RGPU_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                                 const void *ptr)
{
    uint64_t base;
    if (!attributes)
        return RESULT(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    int kind = rgpu_ranges_find((uint64_t)(uintptr_t)ptr, &base, NULL);
    uint64_t host, dev, p = (uint64_t)(uintptr_t)ptr;
    if (kind == RGPU_RANGE_MANAGED) {
        attributes->type = cudaMemoryTypeManaged;
        attributes->device = range_device(base);
        attributes->hostPointer = attributes->devicePointer = (void *)ptr;
    } else if (kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED) {
        /* Mapped host memory has a device address (rgpu_mapped.c).  Host
         * memory is the client's: its device is the one current when it
         * was made, where known. */
        attributes->type = cudaMemoryTypeHost;
        attributes->device = rgpu_ranges_device(base) >= 0 ? rgpu_ranges_device(base) : 0;
        attributes->hostPointer = (void *)ptr;
        if (rgpu_mapped_find(p, kind == RGPU_RANGE_MAPPED, &host, &dev, NULL, NULL)) {
            uint64_t off = p - (kind == RGPU_RANGE_MAPPED ? dev : host);
            attributes->hostPointer = (void *)(uintptr_t)(host + off);
            attributes->devicePointer = (void *)(uintptr_t)(dev + off);
        }
    } else if (kind == RGPU_RANGE_DEVICE) {
        attributes->type = cudaMemoryTypeDevice;
        attributes->device = range_device(base);
        attributes->devicePointer = (void *)ptr;
    } else {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->hostPointer = (void *)ptr;
    }
    return cudaSuccess;
}

/* ---- copies --------------------------------------------------------------------- */

/* Device memory as unified addressing sees it: mapped and managed
 * memory are the GPU's copy there (rgpu_mapped.c). */
static int is_device(const void *p)
{
    int kind = rgpu_ranges_find((uint64_t)(uintptr_t)p, NULL, NULL);
    return kind == RGPU_RANGE_DEVICE || kind == RGPU_RANGE_MAPPED ||
           kind == RGPU_RANGE_MANAGED;
}

/* cudaMemcpyDefault: decide from the pointers, as unified addressing does. */
static enum cudaMemcpyKind resolve_kind(void *dst, const void *src, enum cudaMemcpyKind kind)
{
    if (kind != cudaMemcpyDefault)
        return kind;
    int d = is_device(dst), s = is_device(src);
    return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

/* A copy to the device returns once its bytes are sent where the policy
 * allows (common/rgpu_lazy.c): the host buffer is then free for reuse,
 * which is all CUDA promises of a copy from pageable memory. */
static cudaError_t htod(void *dst, const void *src, size_t count, cudaStream_t stream)
{
    uint64_t d = (uint64_t)(uintptr_t)dst, s = (uint64_t)(uintptr_t)stream;
    if (rgpu_sticky_error())
        return RESULT(rgpu_sticky_error());
    int rc = rgpu_copy_to_device(LIB, RGPU_CUDART_rgpu_htod, d, src, count, s,
                                 !rgpu_lazy_copy_to_device(d, count, s));
    if (rc == cudaSuccess && rgpu_mapped_active())
        rgpu_mapped_wrote(d, src, count);
    return rc;
}

static cudaError_t dtoh(void *dst, const void *src, size_t count, cudaStream_t stream)
{
    return rgpu_copy_to_host(LIB, RGPU_CUDART_rgpu_dtoh, dst, (uint64_t)(uintptr_t)src, count,
                             (uint64_t)(uintptr_t)stream);
}

/* Device to device: no host memory is involved, so the copy waits for
 * nothing (CUDA's own cudaMemcpy does not either) once the client knows
 * both ranges and the stream. */
static cudaError_t dtod(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                        cudaStream_t stream, int async)
{
    int lazy = rgpu_lazy_copy_on_device((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                        count, (uint64_t)(uintptr_t)stream);
    if (rgpu_sticky_error())
        return RESULT(rgpu_sticky_error());
    const void *argv[] = { &dst, &src, &count, &kind, &stream, &async };
    return rgpu_call_unwaited_when(LIB, RGPU_CUDART_rgpu_copy_dtod, argv, lazy);
}

static cudaError_t memcpy_any(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                              cudaStream_t stream, int async)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    if (count == 0)
        return cudaSuccess;
    kind = resolve_kind(dst, src, kind);
    /* A copy "from the host" out of mapped memory reads what the GPU's
     * copy holds in stream order, as the device's DMA would. */
    uint64_t mapped_src = kind == cudaMemcpyHostToDevice && rgpu_mapped_active()
                              ? rgpu_mapped_gpu_copy((uint64_t)(uintptr_t)src, count) : 0;
    if (mapped_src) {
        src = (const void *)(uintptr_t)mapped_src;
        kind = cudaMemcpyDeviceToDevice;
    }
    /* Into a capture, a copy with host memory is a node that moves the
     * bytes each time the graph runs (rgpu_graph_host.c). */
    int captured = 0, rc = 0;
    if (async && (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost))
        rc = kind == cudaMemcpyHostToDevice
                 ? rgpu_capture_copy_1d(LIB, "cudaMemcpyAsync", (uint64_t)(uintptr_t)stream,
                                        RGPU_COPY_TO_DEVICE, (uint64_t)(uintptr_t)src,
                                        (uint64_t)(uintptr_t)dst, count, &captured)
                 : rgpu_capture_copy_1d(LIB, "cudaMemcpyAsync", (uint64_t)(uintptr_t)stream,
                                        RGPU_COPY_TO_HOST, (uint64_t)(uintptr_t)dst,
                                        (uint64_t)(uintptr_t)src, count, &captured);
    if (rc != 0 || captured)
        return rc;
    /* A copy "to the host" into mapped memory writes the GPU's copy in
     * stream order, as the device's DMA would, and comes back with the
     * GPU's other writes at the synchronise; written into the program's
     * copy alone, a later synchronise would take the bytes for the
     * program's and put back what the GPU's copy held. */
    uint64_t mapped_dst = kind == cudaMemcpyDeviceToHost && rgpu_mapped_active()
                              ? rgpu_mapped_gpu_copy((uint64_t)(uintptr_t)dst, count) : 0;
    if (mapped_dst) {
        cudaError_t e = dtod((void *)(uintptr_t)mapped_dst, src, count,
                             cudaMemcpyDeviceToDevice, stream, async);
        return e == cudaSuccess ? cudaStreamSynchronize(stream) : e;
    }
    switch (kind) {
    case cudaMemcpyHostToHost:
        memmove(dst, src, count);
        return cudaSuccess;
    case cudaMemcpyHostToDevice:
        return htod(dst, src, count, stream);
    case cudaMemcpyDeviceToHost:
        return dtoh(dst, src, count, stream);
    default:
        return dtod(dst, src, count, kind, stream, async);
    }
}

#undef cudaMemcpy
RGPU_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind)
{
    return memcpy_any(dst, src, count, kind, NULL, 0);
}

RGPU_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind)
{
    return memcpy_any(dst, src, count, kind, cudaStreamPerThread, 0);
}

/* Host memory here is pageable as far as the GPU knows, so an async copy
 * to or from the host completes before returning, as CUDA does for
 * pageable memory; device-to-device stays asynchronous. */
#undef cudaMemcpyAsync
RGPU_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_any(dst, src, count, kind, stream, 1);
}

RGPU_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_any(dst, src, count, kind, stream ? stream : cudaStreamPerThread, 1);
}

static cudaError_t memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                            size_t width, size_t height, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (width > dpitch || width > spitch)
        return RESULT(cudaErrorInvalidPitchValue);
    if (width == 0 || height == 0)
        return cudaSuccess;
    kind = resolve_kind(dst, src, kind);
    if (kind == cudaMemcpyHostToHost) {
        for (size_t r = 0; r < height; r++)
            memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
        return cudaSuccess;
    }
    if (kind == cudaMemcpyDeviceToDevice) {
        return rgpu_copy_dtod_2d(dst, dpitch, src, spitch, width, height, stream);
    }
    if (kind == cudaMemcpyHostToDevice)
        return rgpu_copy_htod_2d(LIB, RGPU_CUDART_rgpu_htod_2d, (uint64_t)(uintptr_t)dst,
                                 dpitch, src, spitch, width, height,
                                 (uint64_t)(uintptr_t)stream, 1);
    return rgpu_copy_dtoh_2d(LIB, RGPU_CUDART_rgpu_dtoh_2d, dst, dpitch,
                             (uint64_t)(uintptr_t)src, spitch, width, height,
                             (uint64_t)(uintptr_t)stream);
}

#undef cudaMemcpy2D
RGPU_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return memcpy2d(dst, dpitch, src, spitch, width, height, kind, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src,
                                          size_t spitch, size_t width, size_t height,
                                          enum cudaMemcpyKind kind)
{
    return memcpy2d(dst, dpitch, src, spitch, width, height, kind, cudaStreamPerThread);
}

#undef cudaMemcpy2DAsync
RGPU_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                          size_t spitch, size_t width, size_t height,
                                          enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy2d(dst, dpitch, src, spitch, width, height, kind, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                               size_t spitch, size_t width, size_t height,
                                               enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy2d(dst, dpitch, src, spitch, width, height, kind,
                    stream ? stream : cudaStreamPerThread);
}

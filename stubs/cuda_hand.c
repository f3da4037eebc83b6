/* Hand-written parts of libcuda.so.1: what codegen/cuda.ann marks
 * `hand`, `client` or `local`, contexts (cuda_contexts.c), launches
 * (cuda_launch.c) and modules, libraries and JIT linking (cuda_modules.c)
 * apart.  Server side: daemon/hand_cuda.c. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

/* ---- answered locally ---------------------------------------------------------- */

#undef cuGetErrorName
RGPU_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    *pStr = rgpu_cuda_error_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#undef cuGetErrorString
RGPU_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    /* The driver's texts come from the server's driver (asked once); the
     * header's description stands in without one. */
    *pStr = rgpu_server_error_string(LIB, error);
    if (!*pStr)
        *pStr = rgpu_cuda_error_string(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuGetProcAddress hands back our own functions, the ABI the caller asked
 * for: the newest one not newer than cudaVersion, per-thread-stream
 * flavour where asked and one exists (table: build/stubs/cuda_procaddr.c). */
extern const struct rgpu_procaddr rgpu_cuda_procaddr[];

static const struct rgpu_procaddr *best_abi(const char *symbol, int version, int per_thread,
                                            int *known)
{
    const struct rgpu_procaddr *best = NULL;
    for (const struct rgpu_procaddr *p = rgpu_cuda_procaddr; p->base; p++) {
        if (strcmp(p->base, symbol) != 0 || p->per_thread != per_thread)
            continue;
        *known = 1;
        if ((int)p->version <= version && (!best || p->version > best->version))
            best = p;
    }
    return best;
}

static void *self_symbol(const char *name)
{
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *fn = self ? dlsym(self, name) : NULL;
    if (self)
        dlclose(self);
    return fn;
}

#undef cuGetProcAddress_v2
RGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus)
{
    int known = 0;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct rgpu_procaddr *p = best_abi(symbol, cudaVersion, per_thread, &known);
    if (!p && per_thread)       /* most functions have no per-thread flavour */
        p = best_abi(symbol, cudaVersion, 0, &known);
    /* Functions without a PFN typedef are exported under their own name. */
    *pfn = p ? self_symbol(p->symbol) : known ? NULL : self_symbol(symbol);
    CUdriverProcAddressQueryResult r = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS
                                       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (symbolStatus)
        *symbolStatus = r;
    rgpu_trace("cuGetProcAddress %s (version %d%s): %s", symbol, cudaVersion,
               per_thread ? ", per-thread stream" : "", p ? p->symbol : *pfn ? symbol : "none");
    /* A symbol not found is no error: success, NULL and the status say so,
     * as cuda.h documents (a static runtime turns an error into
     * cudaErrorSymbolNotFound). */
    return CUDA_SUCCESS;
}

/* The CUDA 11.3 to 11.8 form, without the query result. */
#undef cuGetProcAddress
RGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* Pinned host memory is plain client memory. */
#undef cuMemAllocHost
RGPU_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    if (posix_memalign(pp, 4096, bytesize ? bytesize : 1) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Recorded, so that pointer attributes say "host" (stubs/cuda_pointers.c). */
    rgpu_ranges_add((uint64_t)(uintptr_t)*pp, bytesize ? bytesize : 1, RGPU_RANGE_PINNED);
    return CUDA_SUCCESS;
}

/* The CUDA 2.x form: a 32-bit size. */
RGPU_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    return cuMemAllocHost_v2(pp, bytesize);
}

/* cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister(_v2), cuMemHostUnregister,
 * cuMemHostGetFlags: stubs/cuda_mapped.c. */

/* ---- allocations ---------------------------------------------------------------- */

#undef cuMemAlloc
RGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    const void *argv[] = { &dptr, &bytesize };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAlloc_v2, argv);
    if (rc == CUDA_SUCCESS && dptr)
        rgpu_ranges_add(*dptr, bytesize, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemAllocPitch
RGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                        size_t Height, unsigned int ElementSizeBytes)
{
    const void *argv[] = { &dptr, &pPitch, &WidthInBytes, &Height, &ElementSizeBytes };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAllocPitch_v2, argv);
    if (rc == CUDA_SUCCESS && dptr && pPitch)
        rgpu_ranges_add(*dptr, *pPitch * Height, RGPU_RANGE_DEVICE);
    return rc;
}

/* A stream-ordered allocation (argv as the procedure takes it): the address
 * is known at the call, so the range is recorded then. */
static CUresult alloc_async(const struct rgpu_proc *proc, const void *const *argv,
                            CUdeviceptr *dptr, size_t bytesize)
{
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS && dptr)
        rgpu_ranges_add(*dptr, bytesize, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemAllocAsync
RGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocAsync, argv, dptr, bytesize);
}

RGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocAsync_ptsz, argv, dptr, bytesize);
}

#undef cuMemAllocFromPoolAsync
RGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &pool, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocFromPoolAsync, argv, dptr, bytesize);
}

RGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &pool, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocFromPoolAsync_ptsz, argv, dptr, bytesize);
}

#undef cuMemFree
RGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    const void *argv[] = { &dptr };
    /* Managed memory: the program's copy goes first (stubs/cuda_mapped.c). */
    rgpu_mapped_release(dptr, 1, NULL);
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemFree_v2, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(dptr);
    return rc;
}

static CUresult free_async(const struct rgpu_proc *proc, CUdeviceptr dptr, CUstream hStream)
{
    const void *argv[] = { &dptr, &hStream };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(dptr);
    return rc;
}

#undef cuMemFreeAsync
RGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(RGPU_CUDA_cuMemFreeAsync, dptr, hStream);
}

RGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(RGPU_CUDA_cuMemFreeAsync_ptsz, dptr, hStream);
}

/* ---- copies ------------------------------------------------------------------------- */

static CUresult htod(CUdeviceptr dst, const void *src, size_t count, CUstream stream)
{
    uint64_t s = (uint64_t)(uintptr_t)stream, host, dev;
    if (rgpu_sticky_error())
        return (CUresult)rgpu_sticky_error();
    /* From mapped memory: its GPU copy, in stream order, as DMA reads it
     * (common/rgpu_mapped.c). */
    if (rgpu_mapped_find((uint64_t)(uintptr_t)src, 0, &host, &dev, NULL, NULL))
        return cuMemcpyDtoDAsync_v2(dst, dev + ((uint64_t)(uintptr_t)src - host), count, stream);
    int rc = rgpu_copy_to_device(LIB, RGPU_CUDA_rgpu_cu_htod, dst, src, count, s,
                                 !rgpu_lazy_copy_to_device(dst, count, s));
    if (rc == CUDA_SUCCESS)
        rgpu_mapped_wrote(dst, src, count);
    return rc;
}

/* A "device" address that is really the program's pinned memory: with
 * unified addressing the driver copies from and to it as from device
 * memory.  Its GPU copy when it has one (mapped memory, or pinned memory a
 * device call named: common/rgpu_mapped.c), else 0: the bytes are here. */
static int pinned_here(CUdeviceptr p, CUdeviceptr *gpu_copy)
{
    uint64_t host, dev;
    *gpu_copy = 0;
    if (rgpu_mapped_find(p, 0, &host, &dev, NULL, NULL)) {
        *gpu_copy = dev + (p - host);
        return 1;
    }
    return rgpu_ranges_find(p, NULL, NULL) == RGPU_RANGE_PINNED;
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t count, CUstream stream)
{
    CUdeviceptr copy, shared = rgpu_mapped_gpu_copy((uint64_t)(uintptr_t)dst, count);
    if (shared) {
        /* Into shared memory: the bytes go to its GPU copy in stream order,
         * as a DMA writes the memory kernels see, and come back with the
         * GPU's other writes when the stream is synchronised.  Written into
         * the program's copy alone, a later synchronise would take them for
         * the program's and put back what the GPU's copy held. */
        if (pinned_here(src, &copy) && copy)
            src = copy;
        CUresult rc = cuMemcpyDtoDAsync_v2(shared, src, count, stream);
        return rc == CUDA_SUCCESS ? cuStreamSynchronize(stream) : rc;
    }
    if (pinned_here(src, &copy) && !copy) {
        /* Host to host, in stream order. */
        CUresult rc = cuStreamSynchronize(stream);
        if (rc == CUDA_SUCCESS)
            memmove(dst, (const void *)(uintptr_t)src, count);
        return rc;
    }
    return rgpu_copy_to_host(LIB, RGPU_CUDA_rgpu_cu_dtoh, dst, copy ? copy : src, count,
                             (uint64_t)(uintptr_t)stream);
}

#undef cuMemcpyHtoD
RGPU_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(dstDevice, srcHost, ByteCount, NULL);
}

/* Into a capture, a copy with host memory is a node that moves the bytes
 * each time the graph runs (rgpu_graph_host.c); *done when it was. */
static CUresult captured(int dir, uint64_t host, uint64_t dev, size_t count, CUstream stream,
                         int *done)
{
    return (CUresult)rgpu_capture_copy_1d(LIB, "cuMemcpyAsync", (uint64_t)(uintptr_t)stream,
                                          dir, host, dev, count, done);
}

#undef cuMemcpyHtoDAsync
RGPU_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream)
{
    int done = 0;
    CUresult rc = captured(RGPU_COPY_TO_DEVICE, (uint64_t)(uintptr_t)srcHost, dstDevice,
                           ByteCount, hStream, &done);
    return rc != CUDA_SUCCESS || done ? rc : htod(dstDevice, srcHost, ByteCount, hStream);
}

#undef cuMemcpyDtoH
RGPU_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(dstHost, srcDevice, ByteCount, NULL);
}

#undef cuMemcpyDtoHAsync
RGPU_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream)
{
    int done = 0;
    CUresult rc = captured(RGPU_COPY_TO_HOST, (uint64_t)(uintptr_t)dstHost, srcDevice,
                           ByteCount, hStream, &done);
    return rc != CUDA_SUCCESS || done ? rc : dtoh(dstHost, srcDevice, ByteCount, hStream);
}

/* ---- unified copies and virtual memory ---------------------------------------- */

#undef cuMemMap
RGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    const void *argv[] = { &ptr, &size, &offset, &handle, &flags };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemMap, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_add(ptr, size, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemUnmap
RGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    const void *argv[] = { &ptr, &size };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemUnmap, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(ptr);
    return rc;
}

/* Mapped and managed memory count as the GPU's copy (rgpu_mapped.c). */
static int on_device(CUdeviceptr p)
{
    int kind = rgpu_ranges_find(p, NULL, NULL);
    return kind == RGPU_RANGE_DEVICE || kind == RGPU_RANGE_MAPPED || kind == RGPU_RANGE_MANAGED;
}

/* With unified addressing either side may be host memory: the bytes of
 * host memory must travel, so decide from the ranges we handed out. */
static CUresult unified_copy(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream stream,
                             int async)
{
    int d = on_device(dst), s = on_device(src);
    if (d && s)
        return async ? cuMemcpyDtoDAsync_v2(dst, src, count, stream)
                     : cuMemcpyDtoD_v2(dst, src, count);
    if (d && async)
        return cuMemcpyHtoDAsync_v2(dst, (const void *)(uintptr_t)src, count, stream);
    if (s && async)
        return cuMemcpyDtoHAsync_v2((void *)(uintptr_t)dst, src, count, stream);
    if (d)
        return htod(dst, (const void *)(uintptr_t)src, count, stream);
    if (s)
        return dtoh((void *)(uintptr_t)dst, src, count, stream);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, count);
    return CUDA_SUCCESS;
}

#undef cuMemcpy
RGPU_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return unified_copy(dst, src, ByteCount, NULL, 0);
}

#undef cuMemcpyAsync
RGPU_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream)
{
    return unified_copy(dst, src, ByteCount, hStream, 1);
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cuda_lib);
}

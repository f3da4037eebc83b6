/* libcudart calls answered without the server, or built from other calls:
 * error names and strings, the per-thread last error, driver entry points
 * (rgpu's own libcuda), versions, and copies to and from __device__
 * variables. */
#include "rgpu_client.h"
#include "cudart_procs.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define RESULT(e) rgpu_runtime_result(e)

int rgpu_cudart_symbol(const void *symbol, uint64_t *dev, size_t *size);

RGPU_EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    const char *s = rgpu_cudart_error_name(error);
    return s ? s : "cudaErrorUnknown";
}

/* The runtime's error texts are not in the headers: the server's runtime
 * gives them (asked once).  Without a server, the header's description
 * stands in. */
RGPU_EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    const char *s = rgpu_server_error_string(&rgpu_cudart_lib, error);
    if (!s)
        s = rgpu_cudart_error_string(error);
    return s ? s : "unrecognized error code";
}

RGPU_EXPORT cudaError_t cudaGetLastError(void)
{
    return (cudaError_t)rgpu_last_error(1);
}

RGPU_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return (cudaError_t)rgpu_last_error(0);
}

/* The older of this stub's version (its headers': 13050 for CUDA 13.5's,
 * 12090 for libcudart.so.12) and the server's runtime: what the program
 * can use, since what came after the server's runtime is refused.  A
 * program that checks the version before using a newer function then
 * takes the path an older runtime would make it take. */
RGPU_EXPORT cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return RESULT(cudaErrorInvalidValue);
    int mine = rgpu_cudart_lib.version ? rgpu_cudart_lib.version : CUDART_VERSION;
    int theirs = rgpu_server_lib_version("cudart");
    *runtimeVersion = theirs > 0 && theirs < mine ? theirs : mine;
    return cudaSuccess;
}

RGPU_EXPORT struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                                enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = { x, y, z, w, f };
    return d;
}

/* ---- driver entry points: always rgpu's libcuda ---------------------------- */

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int version,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !funcPtr)
        return RESULT(cudaErrorInvalidValue);
    /* Our libcuda.so.1 is already loaded or next to us on the path. */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    get_proc_fn get = cuda ? (get_proc_fn)dlsym(cuda, "cuGetProcAddress_v2") : NULL;
    CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *funcPtr = NULL;
    if (get)
        get(symbol, funcPtr, (int)version, flags, &r);
    if (status)
        *status = r == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                  : r == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      ? cudaDriverEntryPointVersionNotSufficent
                      : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, status);
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                                     unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags | cudaEnablePerThreadDefaultStream,
                       status);
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, status);
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags | cudaEnablePerThreadDefaultStream,
                       status);
}

/* ---- __device__ variables ----------------------------------------------------- */

RGPU_EXPORT cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    uint64_t dev;
    size_t size;
    int rc = rgpu_cudart_symbol(symbol, &dev, &size);
    if (rc == cudaSuccess && devPtr)
        *devPtr = (void *)(uintptr_t)dev;
    return rc;
}

RGPU_EXPORT cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    uint64_t dev;
    size_t n;
    int rc = rgpu_cudart_symbol(symbol, &dev, &n);
    if (rc == cudaSuccess && size)
        *size = n;
    return rc;
}

static cudaError_t to_symbol(const void *symbol, const void *src, size_t count, size_t offset,
                             enum cudaMemcpyKind kind, cudaStream_t stream, int async)
{
    uint64_t dev;
    size_t size;
    int rc = rgpu_cudart_symbol(symbol, &dev, &size);
    if (rc != cudaSuccess)
        return rc;
    if (offset > size || count > size - offset)
        return RESULT(cudaErrorInvalidValue);
    return async ? cudaMemcpyAsync((void *)(uintptr_t)(dev + offset), src, count, kind, stream)
                 : cudaMemcpy((void *)(uintptr_t)(dev + offset), src, count, kind);
}

static cudaError_t from_symbol(void *dst, const void *symbol, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, cudaStream_t stream, int async)
{
    uint64_t dev;
    size_t size;
    int rc = rgpu_cudart_symbol(symbol, &dev, &size);
    if (rc != cudaSuccess)
        return rc;
    if (offset > size || count > size - offset)
        return RESULT(cudaErrorInvalidValue);
    return async ? cudaMemcpyAsync(dst, (void *)(uintptr_t)(dev + offset), count, kind, stream)
                 : cudaMemcpy(dst, (void *)(uintptr_t)(dev + offset), count, kind);
}

#undef cudaMemcpyToSymbol
RGPU_EXPORT cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind)
{
    return to_symbol(symbol, src, count, offset, kind, NULL, 0);
}

RGPU_EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src,
                                                size_t count, size_t offset,
                                                enum cudaMemcpyKind kind)
{
    return to_symbol(symbol, src, count, offset, kind, NULL, 0);
}

#undef cudaMemcpyFromSymbol
RGPU_EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count,
                                             size_t offset, enum cudaMemcpyKind kind)
{
    return from_symbol(dst, symbol, count, offset, kind, NULL, 0);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count,
                                                  size_t offset, enum cudaMemcpyKind kind)
{
    return from_symbol(dst, symbol, count, offset, kind, NULL, 0);
}

#undef cudaMemcpyToSymbolAsync
RGPU_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src,
                                                size_t count, size_t offset,
                                                enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return to_symbol(symbol, src, count, offset, kind, stream, 1);
}

RGPU_EXPORT cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src,
                                                     size_t count, size_t offset,
                                                     enum cudaMemcpyKind kind,
                                                     cudaStream_t stream)
{
    return to_symbol(symbol, src, count, offset, kind, stream, 1);
}

#undef cudaMemcpyFromSymbolAsync
RGPU_EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                                  size_t offset, enum cudaMemcpyKind kind,
                                                  cudaStream_t stream)
{
    return from_symbol(dst, symbol, count, offset, kind, stream, 1);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol,
                                                       size_t count, size_t offset,
                                                       enum cudaMemcpyKind kind,
                                                       cudaStream_t stream)
{
    return from_symbol(dst, symbol, count, offset, kind, stream, 1);
}

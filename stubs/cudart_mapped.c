/* Mapped (zero-copy) host memory and managed memory of libcudart: the GPU's
 * copy is device memory the session allocates, the program's is client
 * memory at the same address where it can be had, and common/rgpu_mapped.c
 * keeps the two coherent at synchronisations (docs/architecture.md,
 * "Mapped and managed memory").  The driver's twins: stubs/cuda_mapped.c. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

static void free_device(uint64_t dev)
{
    void *p = (void *)(uintptr_t)dev;
    const void *argv[] = { &p };
    (void)rgpu_call(LIB, RGPU_CUDART_cudaFree, argv);
}

/* Device memory for the GPU's copy of size bytes at *dev. */
static cudaError_t alloc_device(size_t size, uint64_t *dev)
{
    void *p = NULL, **pp = &p;
    const void *argv[] = { &pp, &size };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaMalloc, argv);
    *dev = (uint64_t)(uintptr_t)p;
    return rc;
}

/* Fresh shared memory starts as zeros on both sides. */
static cudaError_t zero_device(uint64_t dev, size_t size)
{
    void *p = (void *)(uintptr_t)dev;
    int value = 0;
    const void *argv[] = { &p, &value, &size };
    return rgpu_call(LIB, RGPU_CUDART_cudaMemset, argv);
}

/* Share [host, host+size) with the GPU's copy at dev; the client ranges
 * say what each address is. */
static cudaError_t share(uint64_t host, uint64_t dev, size_t size, int flags, int host_kind)
{
    return rgpu_mapped_share(host, dev, size, flags, host_kind) < 0
               ? RESULT(cudaErrorMemoryAllocation) : cudaSuccess;
}

/* cudaHostAlloc(cudaHostAllocMapped): the program's copy at the GPU's
 * address (one pointer for both, as unified addressing gives), or, when
 * the client has something there, elsewhere: cudaHostGetDevicePointer
 * then answers the GPU's. */
static cudaError_t host_alloc_mapped(void **pHost, size_t size)
{
    uint64_t dev;
    size = size ? size : 1;
    int rc = alloc_device(size, &dev);
    if (rc != cudaSuccess)
        return rc;
    uint64_t host = rgpu_mapped_place(dev, size, "cudaHostAlloc");
    if (!host) {
        free_device(dev);
        return RESULT(cudaErrorMemoryAllocation);
    }
    rc = zero_device(dev, size);
    if (rc == cudaSuccess)
        rc = share(host, dev, size, RGPU_MAPPED_OWN_HOST, RGPU_RANGE_PINNED);
    if (rc != cudaSuccess) {
        rgpu_mapped_unmap(host, size);
        free_device(dev);
        return rc;
    }
    *pHost = (void *)(uintptr_t)host;
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (!pHost)
        return RESULT(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                            cudaHostAllocWriteCombined))
        return RESULT(cudaErrorInvalidValue);
    if (flags & cudaHostAllocMapped)
        return host_alloc_mapped(pHost, size);
    return cudaMallocHost(pHost, size);
}

RGPU_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    uint64_t dev, p = (uint64_t)(uintptr_t)ptr;
    uint64_t host;
    int flags = 0;
    int mapped = rgpu_mapped_find(p, 0, &host, NULL, NULL, &flags) && host == p;
    if (mapped && rgpu_mapped_release(p, 0, &dev)) {
        free_device(dev);
        if (flags & RGPU_MAPPED_OWN_HOST)
            return cudaSuccess;     /* unmapped by the release */
    }
    rgpu_ranges_remove(p);
    free(ptr);
    return cudaSuccess;
}

/* Registered memory is the program's own: pinned memory as far as copies
 * go, mapped or not.  Its GPU copy (at another address:
 * canUseHostPointerForRegisteredMem is 0, so programs ask
 * cudaHostGetDevicePointer) is made when a device call first names it, as
 * for any pinned memory (map_pinned_on_demand below): until then no kernel
 * can reach it, and a program that registers a large buffer only to copy
 * through it pays nothing at its synchronisations. */
RGPU_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    if (!ptr || !size)
        return RESULT(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
                            cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
        return RESULT(cudaErrorInvalidValue);
    int kind = rgpu_ranges_find((uint64_t)(uintptr_t)ptr, NULL, NULL);
    if (kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED)
        return RESULT(cudaErrorHostMemoryAlreadyRegistered);
    rgpu_ranges_add((uint64_t)(uintptr_t)ptr, size, RGPU_RANGE_PINNED);
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    uint64_t dev, p = (uint64_t)(uintptr_t)ptr;
    if (!ptr)
        return RESULT(cudaErrorInvalidValue);
    if (rgpu_mapped_release(p, 0, &dev)) {
        free_device(dev);
        return cudaSuccess;
    }
    if (rgpu_ranges_find(p, NULL, NULL) != RGPU_RANGE_PINNED)
        return RESULT(cudaErrorHostMemoryNotRegistered);
    rgpu_ranges_remove(p);
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    uint64_t p = (uint64_t)(uintptr_t)pHost;
    if (!pFlags)
        return RESULT(cudaErrorInvalidValue);
    *pFlags = rgpu_mapped_find(p, 0, NULL, NULL, NULL, NULL) ? cudaHostAllocMapped
                                                             : cudaHostAllocDefault;
    return cudaSuccess;
}

/* Pinned memory that was not allocated mapped is mapped on demand, as
 * unified addressing maps every pinned allocation: from now on it has a
 * GPU copy, kept coherent like the others. */
static int map_pinned_on_demand(uint64_t p)
{
    uint64_t base, dev;
    size_t size;
    if (rgpu_ranges_find(p, &base, &size) != RGPU_RANGE_PINNED)
        return 0;
    if (alloc_device(size, &dev) != cudaSuccess)
        return 0;
    if (rgpu_mapped_add(base, dev, size, 0) < 0) {
        free_device(dev);
        return 0;
    }
    rgpu_ranges_add(dev, size, RGPU_RANGE_MAPPED);
    return 1;
}

RGPU_EXPORT cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    uint64_t host, dev, p = (uint64_t)(uintptr_t)pHost;
    if (!pDevice || !pHost || flags != 0)
        return RESULT(cudaErrorInvalidValue);
    if (!rgpu_mapped_find(p, 0, &host, &dev, NULL, NULL) &&
        !(map_pinned_on_demand(p) && rgpu_mapped_find(p, 0, &host, &dev, NULL, NULL)))
        return RESULT(cudaErrorInvalidValue);
    *pDevice = (void *)(uintptr_t)(dev + (p - host));
    return cudaSuccess;
}

/* Managed memory must have one address on both sides: the client's copy
 * goes at the address the GPU's driver chose, and when something of the
 * client's is there the allocation fails (docs/architecture.md). */
#undef cudaMallocManaged
RGPU_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    const void *argv[] = { &devPtr, &size, &flags };
    if (!devPtr)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_call_waiting(LIB, RGPU_CUDART_cudaMallocManaged, argv);
    if (rc != cudaSuccess || !*devPtr)
        return rc;
    uint64_t p = (uint64_t)(uintptr_t)*devPtr;
    if (rgpu_mapped_map_at(p, size) < 0) {
        rgpu_warn("cudaMallocManaged: the GPU's address %#llx is taken in this process",
                  (unsigned long long)p);
        free_device(p);
        *devPtr = NULL;
        return RESULT(cudaErrorMemoryAllocation);
    }
    if (zero_device(p, size) != cudaSuccess ||
        rgpu_mapped_add(p, p, size, RGPU_MAPPED_MANAGED | RGPU_MAPPED_OWN_HOST) < 0) {
        rgpu_mapped_unmap(p, size);
        free_device(p);
        *devPtr = NULL;
        return RESULT(cudaErrorMemoryAllocation);
    }
    rgpu_ranges_add(p, size, RGPU_RANGE_MANAGED);
    return cudaSuccess;
}

/* Pinned memory that a device call names gets its GPU copy through here
 * (common/rgpu_mapped.c). */
__attribute__((constructor)) static void register_pinned_mapper(void)
{
    rgpu_mapped_register_pinned_mapper(LIB, map_pinned_on_demand);
}

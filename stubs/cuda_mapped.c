/* Mapped (zero-copy) host memory and managed memory of libcuda: the
 * driver's twins of stubs/cudart_mapped.c (the coherence:
 * common/rgpu_mapped.c; docs/architecture.md, "Mapped and managed
 * memory").  A program that links the runtime statically reaches these
 * through cuGetProcAddress. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <stdlib.h>

#define LIB (&rgpu_cuda_lib)

static void free_device(uint64_t dev)
{
    CUdeviceptr p = dev;
    const void *argv[] = { &p };
    (void)rgpu_call(LIB, RGPU_CUDA_cuMemFree_v2, argv);
}

static CUresult alloc_device(size_t size, uint64_t *dev)
{
    CUdeviceptr p = 0, *pp = &p;
    const void *argv[] = { &pp, &size };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAlloc_v2, argv);
    *dev = p;
    return (CUresult)rc;
}

/* Fresh shared memory starts as zeros on both sides. */
static CUresult zero_device(uint64_t dev, size_t size)
{
    CUdeviceptr p = dev;
    unsigned char value = 0;
    const void *argv[] = { &p, &value, &size };
    return (CUresult)rgpu_call(LIB, RGPU_CUDA_cuMemsetD8_v2, argv);
}

static CUresult share(uint64_t host, uint64_t dev, size_t size, int flags)
{
    return rgpu_mapped_share(host, dev, size, flags, RGPU_RANGE_PINNED) < 0
               ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* CU_MEMHOSTALLOC_DEVICEMAP: the program's copy at the GPU's address where
 * it can be had, else elsewhere (cuMemHostGetDevicePointer answers). */
static CUresult host_alloc_mapped(void **pp, size_t size)
{
    uint64_t dev;
    size = size ? size : 1;
    CUresult rc = alloc_device(size, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t host = rgpu_mapped_place(dev, size, "cuMemHostAlloc");
    if (!host) {
        free_device(dev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = zero_device(dev, size);
    if (rc == CUDA_SUCCESS)
        rc = share(host, dev, size, RGPU_MAPPED_OWN_HOST);
    if (rc != CUDA_SUCCESS) {
        rgpu_mapped_unmap(host, size);
        free_device(dev);
        return rc;
    }
    *pp = (void *)(uintptr_t)host;
    return CUDA_SUCCESS;
}

#undef cuMemHostAlloc
RGPU_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTALLOC_DEVICEMAP)
        return host_alloc_mapped(pp, bytesize);
    return cuMemAllocHost_v2(pp, bytesize);
}

#undef cuMemFreeHost
RGPU_EXPORT CUresult cuMemFreeHost(void *p)
{
    uint64_t host, dev, a = (uint64_t)(uintptr_t)p;
    int flags = 0;
    if (rgpu_mapped_find(a, 0, &host, NULL, NULL, &flags) && host == a &&
        rgpu_mapped_release(a, 0, &dev)) {
        free_device(dev);
        if (flags & RGPU_MAPPED_OWN_HOST)
            return CUDA_SUCCESS;
    }
    if (p)
        rgpu_ranges_remove(a);
    free(p);
    return CUDA_SUCCESS;
}

#undef cuMemHostRegister
RGPU_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!p || !bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    int kind = rgpu_ranges_find(a, NULL, NULL);
    if (kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED)
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    /* Mapped or not, the program's own memory is pinned memory for copies;
     * its GPU copy (elsewhere: CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is
     * 0, so programs ask cuMemHostGetDevicePointer) is made when a device
     * call first names it (map_pinned_on_demand below, as
     * stubs/cudart_mapped.c does). */
    rgpu_ranges_add(a, bytesize, RGPU_RANGE_PINNED);
    return CUDA_SUCCESS;
}

/* The form before CUDA 6.5: the same on the client. */
RGPU_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister_v2(p, bytesize, Flags);
}

#undef cuMemHostUnregister
RGPU_EXPORT CUresult cuMemHostUnregister(void *p)
{
    uint64_t a = (uint64_t)(uintptr_t)p, dev;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (rgpu_mapped_release(a, 0, &dev)) {
        free_device(dev);
        return CUDA_SUCCESS;
    }
    if (rgpu_ranges_find(a, NULL, NULL) != RGPU_RANGE_PINNED)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    rgpu_ranges_remove(a);
    return CUDA_SUCCESS;
}

#undef cuMemHostGetFlags
RGPU_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = rgpu_mapped_find((uint64_t)(uintptr_t)p, 0, NULL, NULL, NULL, NULL)
                  ? CU_MEMHOSTALLOC_DEVICEMAP : 0;
    return CUDA_SUCCESS;
}

/* Pinned memory not allocated mapped gets its GPU copy on demand, as
 * unified addressing maps every pinned allocation. */
static int map_pinned_on_demand(uint64_t p)
{
    uint64_t base, dev;
    size_t size;
    if (rgpu_ranges_find(p, &base, &size) != RGPU_RANGE_PINNED)
        return 0;
    if (alloc_device(size, &dev) != CUDA_SUCCESS)
        return 0;
    if (rgpu_mapped_add(base, dev, size, 0) < 0) {
        free_device(dev);
        return 0;
    }
    rgpu_ranges_add(dev, size, RGPU_RANGE_MAPPED);
    return 1;
}

#undef cuMemHostGetDevicePointer
RGPU_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    uint64_t host, dev, a = (uint64_t)(uintptr_t)p;
    if (!pdptr || !p || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!rgpu_mapped_find(a, 0, &host, &dev, NULL, NULL) &&
        !(map_pinned_on_demand(a) && rgpu_mapped_find(a, 0, &host, &dev, NULL, NULL)))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = dev + (a - host);
    return CUDA_SUCCESS;
}

/* Managed memory: one address on both sides, or the allocation fails. */
#undef cuMemAllocManaged
RGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    const void *argv[] = { &dptr, &bytesize, &flags };
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    int rc = rgpu_call_waiting(LIB, RGPU_CUDA_cuMemAllocManaged, argv);
    if (rc != CUDA_SUCCESS || !*dptr)
        return (CUresult)rc;
    uint64_t p = *dptr;
    if (rgpu_mapped_map_at(p, bytesize) < 0) {
        rgpu_warn("cuMemAllocManaged: the GPU's address %#llx is taken in this process",
                  (unsigned long long)p);
        free_device(p);
        *dptr = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (zero_device(p, bytesize) != CUDA_SUCCESS ||
        rgpu_mapped_add(p, p, bytesize, RGPU_MAPPED_MANAGED | RGPU_MAPPED_OWN_HOST) < 0) {
        rgpu_mapped_unmap(p, bytesize);
        free_device(p);
        *dptr = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rgpu_ranges_add(p, bytesize, RGPU_RANGE_MANAGED);
    return CUDA_SUCCESS;
}

/* Pinned memory that a device call names gets its GPU copy through here
 * (common/rgpu_mapped.c). */
__attribute__((constructor)) static void register_pinned_mapper(void)
{
    rgpu_mapped_register_pinned_mapper(LIB, map_pinned_on_demand);
}

/* Mapped (zero-copy) host memory and managed memory of libcuda, the
 * driver's spelling of stubs/host_mapped.c (which the runtime shares).  A
 * program that links the runtime statically reaches these through
 * cuGetProcAddress. */
#include "rgpu_client.h"
#include "host_mapped.h"
#include "cuda_procs.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

static void free_device(uint64_t dev)
{
    CUdeviceptr p = dev;
    const void *argv[] = { &p };
    (void)rgpu_call(LIB, RGPU_CUDA_cuMemFree_v2, argv);
}

static int alloc_device(size_t size, uint64_t *dev)
{
    CUdeviceptr p = 0, *pp = &p;
    const void *argv[] = { &pp, &size };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAlloc_v2, argv);
    *dev = p;
    return rc;
}

static int zero_device(uint64_t dev, size_t size)
{
    CUdeviceptr p = dev;
    unsigned char value = 0;
    const void *argv[] = { &p, &value, &size };
    return rgpu_call(LIB, RGPU_CUDA_cuMemsetD8_v2, argv);
}

static const struct host_mapped_api api = {
    .lib = LIB,
    .alloc_device = alloc_device,
    .zero_device = zero_device,
    .free_device = free_device,
    .out_of_memory = CUDA_ERROR_OUT_OF_MEMORY,
    .already_registered = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    .not_registered = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
    .host_alloc_name = "cuMemHostAlloc",
    .managed_name = "cuMemAllocManaged",
};

#undef cuMemHostAlloc
RGPU_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTALLOC_DEVICEMAP)
        return (CUresult)host_mapped_alloc(&api, pp, bytesize);
    return cuMemAllocHost_v2(pp, bytesize);
}

#undef cuMemFreeHost
RGPU_EXPORT CUresult cuMemFreeHost(void *p)
{
    return (CUresult)host_mapped_free(&api, p);
}

#undef cuMemHostRegister
RGPU_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    if (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    return (CUresult)host_mapped_register(&api, p, bytesize);
}

/* The form before CUDA 6.5: the same on the client. */
RGPU_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister_v2(p, bytesize, Flags);
}

#undef cuMemHostUnregister
RGPU_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return (CUresult)host_mapped_unregister(&api, p);
}

#undef cuMemHostGetFlags
RGPU_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = host_mapped_is_mapped(p) ? CU_MEMHOSTALLOC_DEVICEMAP : 0;
    return CUDA_SUCCESS;
}

#undef cuMemHostGetDevicePointer
RGPU_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    uint64_t dev;
    if (!pdptr || !p || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int rc = host_mapped_device_pointer(&api, p, &dev);
    if (rc == 0)
        *pdptr = dev;
    return (CUresult)rc;
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
    rc = host_mapped_adopt_managed(&api, *dptr, bytesize);
    if (rc != 0)
        *dptr = 0;
    return (CUresult)rc;
}

/* Pinned memory that a device call names gets its GPU copy through here
 * (common/rgpu_mapped.c). */
static int map_pinned_on_demand(uint64_t p)
{
    return host_mapped_map_pinned(&api, p);
}

__attribute__((constructor)) static void register_pinned_mapper(void)
{
    rgpu_mapped_register_pinned_mapper(LIB, map_pinned_on_demand);
}

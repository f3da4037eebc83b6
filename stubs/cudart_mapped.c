/* Mapped (zero-copy) host memory and managed memory of libcudart, the
 * runtime's spelling of stubs/host_mapped.c (which the driver shares). */
#include "rgpu_client.h"
#include "host_mapped.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

static void free_device(uint64_t dev)
{
    void *p = (void *)(uintptr_t)dev;
    const void *argv[] = { &p };
    (void)rgpu_call(LIB, RGPU_CUDART_cudaFree, argv);
}

static int alloc_device(size_t size, uint64_t *dev)
{
    void *p = NULL, **pp = &p;
    const void *argv[] = { &pp, &size };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaMalloc, argv);
    *dev = (uint64_t)(uintptr_t)p;
    return rc;
}

static int zero_device(uint64_t dev, size_t size)
{
    void *p = (void *)(uintptr_t)dev;
    int value = 0;
    const void *argv[] = { &p, &value, &size };
    return rgpu_call(LIB, RGPU_CUDART_cudaMemset, argv);
}

static const struct host_mapped_api api = {
    .lib = LIB,
    .alloc_device = alloc_device,
    .zero_device = zero_device,
    .free_device = free_device,
    .out_of_memory = cudaErrorMemoryAllocation,
    .already_registered = cudaErrorHostMemoryAlreadyRegistered,
    .not_registered = cudaErrorHostMemoryNotRegistered,
    .host_alloc_name = "cudaHostAlloc",
    .managed_name = "cudaMallocManaged",
};

RGPU_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (!pHost)
        return RESULT(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                            cudaHostAllocWriteCombined))
        return RESULT(cudaErrorInvalidValue);
    if (flags & cudaHostAllocMapped)
        return host_mapped_alloc(&api, pHost, size);
    return cudaMallocHost(pHost, size);
}

RGPU_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    return host_mapped_free(&api, ptr);
}

RGPU_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
                            cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
        return RESULT(cudaErrorInvalidValue);
    return host_mapped_register(&api, ptr, size);
}

RGPU_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    return host_mapped_unregister(&api, ptr);
}

RGPU_EXPORT cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    if (!pFlags)
        return RESULT(cudaErrorInvalidValue);
    *pFlags = host_mapped_is_mapped(pHost) ? cudaHostAllocMapped : cudaHostAllocDefault;
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    uint64_t dev;
    if (!pDevice || !pHost || flags != 0)
        return RESULT(cudaErrorInvalidValue);
    int rc = host_mapped_device_pointer(&api, pHost, &dev);
    if (rc == 0)
        *pDevice = (void *)(uintptr_t)dev;
    return rc;
}

#undef cudaMallocManaged
RGPU_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    const void *argv[] = { &devPtr, &size, &flags };
    if (!devPtr)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_call_waiting(LIB, RGPU_CUDART_cudaMallocManaged, argv);
    if (rc != cudaSuccess || !*devPtr)
        return rc;
    rc = host_mapped_adopt_managed(&api, (uint64_t)(uintptr_t)*devPtr, size);
    if (rc != 0)
        *devPtr = NULL;
    return rc;
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

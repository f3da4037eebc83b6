/* CUDA IPC, runtime API: memory another client process of the same rgpud
 * exported (the driver's side and the design: stubs/cuda_ipc.c,
 * daemon/ipc.c).  Opening and closing keep this process's device ranges
 * true; the opened allocation's size is asked of the server's driver
 * through rgpu's libcuda, which shares this process's session. */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "cudart_procs.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#define LIB (&rgpu_cudart_lib)

typedef CUresult (*address_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

static size_t opened_size(void *ptr)
{
    /* Our libcuda.so.1 is already loaded or next to us on the path. */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    address_range_fn range =
        cuda ? (address_range_fn)dlsym(cuda, "cuMemGetAddressRange_v2") : NULL;
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!range || range(&base, &size, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS ||
        base != (CUdeviceptr)(uintptr_t)ptr)
        size = 0;
    if (cuda)
        dlclose(cuda);
    return size;
}

RGPU_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                             unsigned int flags)
{
    const void *argv[] = { &devPtr, &handle, &flags };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaIpcOpenMemHandle, argv);
    if (rc == cudaSuccess && devPtr && *devPtr) {
        size_t size = opened_size(*devPtr);
        if (size)
            rgpu_ranges_add((uint64_t)(uintptr_t)*devPtr, size, RGPU_RANGE_DEVICE);
    }
    return rc;
}

RGPU_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    const void *argv[] = { &devPtr };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaIpcCloseMemHandle, argv);
    if (rc == cudaSuccess)
        rgpu_ranges_remove((uint64_t)(uintptr_t)devPtr);
    return rc;
}

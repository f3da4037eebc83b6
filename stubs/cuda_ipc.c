/* CUDA IPC, driver API: memory another client process of the same rgpud
 * exported.  The handle's bytes are the server driver's own and travel as
 * they are (generated cuIpcGetMemHandle, cuIpcGetEventHandle,
 * cuIpcOpenEventHandle); opening and closing memory also keep this
 * process's device ranges (stubs/client_ranges.c) true, so that copies and
 * cuPointerGetAttribute know the opened address for device memory.  The
 * server records the same range in its memory table (daemon/ipc.c). */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "cuda_procs.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

/* The size of the allocation the server opened at dptr, asked of the
 * server's driver (an opened handle says nothing of its size); 0 when it
 * cannot tell. */
static size_t opened_size(CUdeviceptr dptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUdeviceptr *pbase = &base;
    size_t *psize = &size;
    const void *argv[] = { &pbase, &psize, &dptr };
    if (rgpu_call(LIB, RGPU_CUDA_cuMemGetAddressRange_v2, argv) != CUDA_SUCCESS || base != dptr)
        return 0;
    return size;
}

#undef cuIpcOpenMemHandle
RGPU_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                           unsigned int Flags)
{
    const void *argv[] = { &pdptr, &handle, &Flags };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuIpcOpenMemHandle_v2, argv);
    if (rc == CUDA_SUCCESS && pdptr) {
        size_t size = opened_size(*pdptr);
        if (size)
            rgpu_ranges_add(*pdptr, size, RGPU_RANGE_DEVICE);
    }
    return rc;
}

/* The CUDA 4.1 export, for programs built before cuda.h renamed it. */
RGPU_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                        unsigned int Flags)
{
    return cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

RGPU_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    const void *argv[] = { &dptr };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuIpcCloseMemHandle, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(dptr);
    return rc;
}

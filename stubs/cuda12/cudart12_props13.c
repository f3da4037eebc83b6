/* The CUDA 13 side of libcudart.so.12's functions for CUDA 12's layouts:
 * the facts of a device that no device attribute gives, read from CUDA
 * 13's cudaDeviceProp (cudart12_props.c), and CUDA 13's pointer
 * attributes (cudart12_pointers.c).  Compiled with CUDA 13's
 * headers, inside libcudart.so.12 (where cudaGetDeviceProperties is the
 * CUDA 13 stub's own, renamed: stubs/cuda12/meson.build). */
#include "cudart12_props.h"

#include <cuda_runtime_api.h>
#include <string.h>

int rgpu_cuda12_pointer_attributes(const void *ptr, struct rgpu_cuda12_pointer *out)
{
    struct cudaPointerAttributes a;
    int rc = cudaPointerGetAttributes(&a, ptr);
    if (rc != cudaSuccess)
        return rc;
    out->type = (int)a.type;
    out->device = a.device;
    out->device_pointer = a.devicePointer;
    out->host_pointer = a.hostPointer;
    return cudaSuccess;
}

int rgpu_cuda12_device_identity(int device, struct rgpu_cuda12_identity *id)
{
    struct cudaDeviceProp p;
    int rc = cudaGetDeviceProperties(&p, device);
    if (rc != cudaSuccess)
        return rc;
    memcpy(id->name, p.name, sizeof id->name);
    memcpy(id->uuid, p.uuid.bytes, sizeof id->uuid);
    memcpy(id->luid, p.luid, sizeof id->luid);
    id->luid_device_node_mask = p.luidDeviceNodeMask;
    id->total_global_mem = p.totalGlobalMem;
    id->unified_function_pointers = p.unifiedFunctionPointers;
    return cudaSuccess;
}

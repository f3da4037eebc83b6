/* cudaPointerGetAttributes of libcudart.so.12: CUDA 12's
 * cudaPointerAttributes is CUDA 13's without the trailing reserved fields,
 * which a CUDA 12 program's structure has no room for.  Compiled with the
 * CUDA 12 headers alone; CUDA 13's answer comes through
 * cudart12_props13.c (the client's pointer tracking, stubs/cudart_memory.c). */
#include "cudart12_props.h"
#include "rgpu_client.h"

#include <cuda_runtime_api.h>
#include <string.h>

#if CUDART_VERSION < 12000 || CUDART_VERSION >= 13000
#error "cudart12_pointers.c is compiled with the CUDA 12 headers"
#endif

RGPU_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                                 const void *ptr)
{
    struct rgpu_cuda12_pointer p;
    if (!attributes)
        return cudaErrorInvalidValue;
    int rc = rgpu_cuda12_pointer_attributes(ptr, &p);
    if (rc != cudaSuccess)
        return (cudaError_t)rc;     /* the CUDA 13 stub has set the last error */
    memset(attributes, 0, sizeof *attributes);
    attributes->type = (enum cudaMemoryType)p.type;
    attributes->device = p.device;
    attributes->devicePointer = p.device_pointer;
    attributes->hostPointer = p.host_pointer;
    return cudaSuccess;
}

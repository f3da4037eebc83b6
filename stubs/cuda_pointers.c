/* Pointer attributes.  Host memory the program believes pinned, and mapped
 * host memory, are client memory (stubs/cuda_hand.c, stubs/cuda_mapped.c):
 * answered here, for they mean nothing in rgpud's process (XLA asks which
 * memory space a buffer it frees is in).  Device memory, and what this
 * process did not record (a module's globals), is the driver's answer.
 * cuPointerGetAttributes asks several attributes of one pointer at once,
 * as the static CUDA runtime's cudaPointerGetAttributes does; unlike
 * cuPointerGetAttribute it never fails for a pointer CUDA does not know:
 * that pointer's attributes read as zeros. */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <string.h>

uint32_t rgpu_cu_pointer_attr_size(int attribute);

#define LIB (&rgpu_cuda_lib)

static void pinned_attribute(CUpointer_attribute a, void *data, CUdeviceptr ptr)
{
    uint64_t host, dev, base = 0;
    size_t size = 0;
    /* Mapped host memory (common/rgpu_mapped.c): ptr is the program's or
     * the GPU's address of it. */
    int by_dev = rgpu_ranges_find(ptr, NULL, NULL) == RGPU_RANGE_MAPPED;
    if (rgpu_mapped_find(ptr, by_dev, &host, &dev, NULL, NULL)) {
        uint64_t off = ptr - (by_dev ? dev : host);
        if (a == CU_POINTER_ATTRIBUTE_HOST_POINTER || a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER) {
            *(uint64_t *)data = (a == CU_POINTER_ATTRIBUTE_HOST_POINTER ? host : dev) + off;
            return;
        }
        if (a == CU_POINTER_ATTRIBUTE_MAPPED) {
            *(int *)data = 1;
            return;
        }
    }
    rgpu_ranges_find(ptr, &base, &size);
    switch (a) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(uint64_t *)data = base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = size;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:   /* the same address, as with UVA */
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT:          /* pinned for the current context */
        cuCtxGetCurrent((CUcontext *)data);
        break;
    default:    /* not mapped into the device, not managed, no buffer id */
        break;
    }
}

#undef cuPointerGetAttributes
RGPU_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes,
                                            CUpointer_attribute *attributes, void **data,
                                            CUdeviceptr ptr)
{
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i] || !rgpu_cu_pointer_attr_size(attributes[i]))
            return CUDA_ERROR_INVALID_VALUE;
    int kind = rgpu_ranges_find(ptr, NULL, NULL);
    for (unsigned i = 0; i < numAttributes; i++) {
        memset(data[i], 0, rgpu_cu_pointer_attr_size(attributes[i]));
        if (kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED) {
            pinned_attribute(attributes[i], data[i], ptr);
        } else if (kind == RGPU_RANGE_DEVICE || kind == RGPU_RANGE_MANAGED) {
            CUresult rc = cuPointerGetAttribute(data[i], attributes[i], ptr);
            if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_INVALID_VALUE &&
                rc != CUDA_ERROR_NOT_SUPPORTED)
                return rc;      /* the session failed, not the question */
        }
    }
    return CUDA_SUCCESS;
}

static int client_memory(CUdeviceptr ptr)
{
    int kind = rgpu_ranges_find(ptr, NULL, NULL);
    return kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED;
}

#undef cuPointerGetAttribute
RGPU_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                           CUdeviceptr ptr)
{
    if (!client_memory(ptr)) {
        const void *argv[] = { &data, &attribute, &ptr };
        return (CUresult)rgpu_call(LIB, RGPU_CUDA_cuPointerGetAttribute, argv);
    }
    if (!data || !rgpu_cu_pointer_attr_size(attribute))
        return CUDA_ERROR_INVALID_VALUE;
    memset(data, 0, rgpu_cu_pointer_attr_size(attribute));
    pinned_attribute(attribute, data, ptr);
    return CUDA_SUCCESS;
}

/* Between the two sides of libcudart.so.12's cudaGetDeviceProperties_v2,
 * compiled against different CUDA releases' headers: plain C types only. */
#ifndef RGPU_CUDART12_PROPS_H
#define RGPU_CUDART12_PROPS_H

#include <stddef.h>

struct rgpu_cuda12_identity {
    char name[256];
    unsigned char uuid[16];
    char luid[8];
    unsigned int luid_device_node_mask;
    size_t total_global_mem;
    int unified_function_pointers;
};

/* From CUDA 13's cudaDeviceProp: cudaSuccess (0) or its error. */
int rgpu_cuda12_device_identity(int device, struct rgpu_cuda12_identity *id);

/* CUDA 13's cudaPointerAttributes, whose fields are CUDA 12's followed by
 * reserved ones (cudart12_pointers.c). */
struct rgpu_cuda12_pointer {
    int type;               /* enum cudaMemoryType: the same values in both */
    int device;
    void *device_pointer;
    void *host_pointer;
};
int rgpu_cuda12_pointer_attributes(const void *ptr, struct rgpu_cuda12_pointer *out);

#endif

/* CUDA arrays in the driver stub (stubs/cuda_arrays.c), for the 2D copies
 * of stubs/cuda_copies2d.c. */
#ifndef CUDA_ARRAYS_H
#define CUDA_ARRAYS_H

#include <cuda.h>

/* A 2D copy with at least one CUDA array side, on layer src_z / dst_z of
 * a 3D array; done before it returns.  Array to array: refused. */
CUresult rgpu_cuda_array_copy(const CUDA_MEMCPY2D *c, size_t src_z, size_t dst_z,
                              CUstream stream);
/* cuMemcpy2D's copy between linear memory (stubs/cuda_copies2d.c); array
 * sides go to rgpu_cuda_array_copy. */
CUresult rgpu_cuda_copy_2d(const CUDA_MEMCPY2D *c, CUstream stream, int async);

#endif

/* rgpu's own procedures of libcuda (codegen/cuda.ann, "procedures"):
 * requests of the wire that are no driver function, declared as C
 * functions so that the one codec marshals them as it does the driver's
 * (see codegen/cudart_own.h for the conventions). */
#ifndef RGPU_CUDA_OWN_H
#define RGPU_CUDA_OWN_H

#include <cuda.h>
#include <stddef.h>

/* ---- CUDA arrays: stubs/cuda_arrays.c, daemon/hand_arrays.c --------------------
 * One layer z of an array (0 for a 2D one) and linear memory; x and width
 * count bytes, y and height rows.  Host rows travel packed (rows_size =
 * width * height) and the copy is done before the reply; device sides
 * name a pitched device range that the server checks over its extent. */

CUresult rgpu_cu_array_from_host(CUarray array, size_t x, size_t y, size_t z, size_t width,
                                 size_t height, CUstream stream, const void *rows,
                                 size_t rows_size);
CUresult rgpu_cu_array_to_host(CUarray array, size_t x, size_t y, size_t z, size_t width,
                               size_t height, CUstream stream, void *rows, size_t rows_size);
CUresult rgpu_cu_array_from_device(CUarray array, size_t x, size_t y, size_t z,
                                   CUdeviceptr src, size_t spitch, size_t width, size_t height,
                                   CUstream stream);
CUresult rgpu_cu_array_to_device(CUdeviceptr dst, size_t dpitch, CUarray array, size_t x,
                                 size_t y, size_t z, size_t width, size_t height,
                                 CUstream stream);

#endif

/* rgpu's own procedures of libcudart (codegen/cudart.ann, "procedures"):
 * requests of the wire that are no runtime function, declared as C
 * functions so that the one codec marshals them as it does the library's.
 * The client function of each is generated and called by the hand-written
 * stub named beside it; the server runs serve_<name>, written by hand in
 * the daemon file named.  Parameters follow the library's conventions:
 * handles are checked against the session's table by their type, device
 * pointers by their annotation, buffers by their length parameter. */
#ifndef RGPU_CUDART_OWN_H
#define RGPU_CUDART_OWN_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* ---- CUDA arrays: stubs/cudart_arrays.c, daemon/hand_arrays.c ------------------
 * x and width count bytes, y and height rows.  Host rows travel packed
 * (rows_size = width * height), done before the reply as the runtime's
 * synchronous copies are.  Device sides name a pitched device range that
 * the server checks over its whole extent. */

/* cudaMemcpy2DToArray(Async) from host memory. */
cudaError_t rgpu_array_from_host(cudaArray_t array, size_t x, size_t y, size_t width,
                                 size_t height, cudaStream_t stream, const void *rows,
                                 size_t rows_size);
/* cudaMemcpy2DFromArray(Async) to host memory. */
cudaError_t rgpu_array_to_host(cudaArray_const_t array, size_t x, size_t y, size_t width,
                               size_t height, cudaStream_t stream, void *rows, size_t rows_size);
/* cudaMemcpy2DToArray(Async) from device memory. */
cudaError_t rgpu_array_from_device(cudaArray_t array, size_t x, size_t y, const void *src,
                                   size_t spitch, size_t width, size_t height,
                                   cudaStream_t stream);
/* cudaMemcpy2DFromArray(Async) to device memory. */
cudaError_t rgpu_array_to_device(void *dst, size_t dpitch, cudaArray_const_t array, size_t x,
                                  size_t y, size_t width, size_t height, cudaStream_t stream);
/* One layer z of a cudaMemcpy3D between host memory and an array. */
cudaError_t rgpu_array_layer_from_host(cudaArray_t array, size_t x, size_t y, size_t z,
                                       size_t width, size_t height, cudaStream_t stream,
                                       const void *rows, size_t rows_size);
cudaError_t rgpu_array_layer_to_host(cudaArray_const_t array, size_t x, size_t y, size_t z,
                                     size_t width, size_t height, cudaStream_t stream,
                                     void *rows, size_t rows_size);

#endif

/* rgpu's own procedures of libcublas (codegen/cublas.ann, "procedures"):
 * requests of the wire that are no cuBLAS function, declared as C
 * functions so that the one codec marshals them (see codegen/cudart_own.h
 * for the conventions). */
#ifndef RGPU_CUBLAS_OWN_H
#define RGPU_CUBLAS_OWN_H

#include <cublas_api.h>
#include <stddef.h>

/* cublasSetMatrix, cublasGetMatrix, cublasSetVector, cublasGetVector (and
 * their Async and _64 forms; stubs/cublas_hand.c through
 * common/rgpu_copy.c, served in daemon/hand_cudart.c): the runtime's 2D
 * copies (rgpu_htod_2d and rgpu_dtoh_2d of codegen/cudart_own.h) with
 * cuBLAS's statuses, a failed copy CUBLAS_STATUS_MAPPING_ERROR. */
cublasStatus_t rgpu_cublas_htod_2d(void *dst, size_t dpitch, size_t width, size_t height,
                                   cudaStream_t stream, size_t rows_size, const void *rows);
cublasStatus_t rgpu_cublas_dtoh_2d(void *rows, size_t rows_size, const void *src, size_t spitch,
                                   size_t width, size_t height, cudaStream_t stream);

/* Whether the client's program logs cuBLAS's messages (cublasLoggerConfigure,
 * cublasSetLoggerCallback): rgpud's callback sends them to the client
 * (stubs/cublas_logger.c through common/rgpu_liblog.c; daemon/liblog.c). */
cublasStatus_t rgpu_cublas_log_settings(int on);

#endif

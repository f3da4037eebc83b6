/* Entry points libcublas.so.13 exports that no NVIDIA header declares.
 * cuSOLVER calls cublasSetEnvironmentMode on the cuBLAS handle it makes, so
 * a stub that refused it would fail every cusolverDnCreate.  Prototypes as
 * the library's own code reads its arguments: a handle (NULL or not yet
 * initialised: CUBLAS_STATUS_NOT_INITIALIZED), then a mode of 0 or 1 (else
 * CUBLAS_STATUS_INVALID_VALUE) or where to write it. */
#ifndef RGPU_CUBLAS_UNDOCUMENTED_H
#define RGPU_CUBLAS_UNDOCUMENTED_H

#include <cublas_api.h>

cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t handle, int mode);
cublasStatus_t cublasGetEnvironmentMode(cublasHandle_t handle, int *mode);

#endif

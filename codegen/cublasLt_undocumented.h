/* Entry points libcublasLt.so.13 exports that no NVIDIA header declares,
 * the cuBLASLt twins of cublasSetEnvironmentMode/cublasGetEnvironmentMode
 * (codegen/cublas_undocumented.h): prototypes as the library's own code
 * reads its arguments. */
#ifndef RGPU_CUBLASLT_UNDOCUMENTED_H
#define RGPU_CUBLASLT_UNDOCUMENTED_H

#include <cublasLt.h>

cublasStatus_t cublasLtSetEnvironmentMode(cublasLtHandle_t handle, int mode);
cublasStatus_t cublasLtGetEnvironmentMode(cublasLtHandle_t handle, int *mode);

#endif

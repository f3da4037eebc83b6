/* Hand-written parts of libcublas: the pointer mode of each handle (which
 * decides whether alpha, beta and results are host values or device
 * pointers), host<->device vector and matrix copies, and what is answered
 * on the client.  Everything else is generated from codegen/cublas.ann. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "cublas_procs.h"

#include <cublas_api.h>
#include <stdio.h>
#include <string.h>

#define LIB (&rgpu_cublas_lib)

/* ---- pointer mode per handle -------------------------------------------------- */

static struct rgpu_keyed modes = RGPU_KEYED_INIT;    /* handle -> cublasPointerMode_t */

/* Every cuBLAS call with scalars takes the handle first. */
static int scalars_on_host(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    (void)param;
    if (proc->nparams == 0 || strcmp(proc->params[0].name, "handle") != 0)
        return 1;
    int64_t mode;
    return !rgpu_keyed_get(&modes, *(const cublasHandle_t *)argv[0], &mode) ||
           mode == CUBLAS_POINTER_MODE_HOST;
}

static int is_complex_type(int t)
{
    switch (t) {
    case CUDA_C_16F: case CUDA_C_16BF: case CUDA_C_32F: case CUDA_C_64F:
    case CUDA_C_8I: case CUDA_C_8U: case CUDA_C_32I: case CUDA_C_32U:
        return 1;
    default:
        return 0;
    }
}

/* Bytes of an untyped scalar: its type is a cudaDataType (axpy, dot...) or
 * a cublasComputeType_t (gemm), whose scalars are real or complex as the
 * output matrix is (ctype). */
static uint32_t scalar_bytes(int type, int ctype)
{
    int cplx = is_complex_type(ctype);
    switch (type) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC:
        return cplx ? 4 : 2;
    case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_PEDANTIC: case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF: case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        return cplx ? 8 : 4;
    case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        return cplx ? 16 : 8;
    case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC:
        return 4;
    case CUDA_R_16F: case CUDA_R_16BF: case CUDA_C_8I: case CUDA_C_8U:
        return 2;
    case CUDA_R_8I: case CUDA_R_8U:
        return 1;
    case CUDA_R_32F: case CUDA_C_16F: case CUDA_C_16BF: case CUDA_R_32I: case CUDA_R_32U:
        return 4;
    case CUDA_R_64F: case CUDA_C_32F: case CUDA_C_32I: case CUDA_C_32U:
        return 8;
    case CUDA_C_64F:
        return 16;
    default:
        return 16;      /* unknown: the largest; the server ignores the rest */
    }
}

static int int_arg(const struct rgpu_proc *proc, int index, const void *const *argv)
{
    if (index < 0 || index >= proc->nparams)
        return -1;
    return *(const int *)argv[index];
}

static uint32_t untyped_scalar_size(const struct rgpu_proc *proc, unsigned param,
                                    const void *const *argv)
{
    const struct rgpu_param *p = &proc->params[param];
    return scalar_bytes(int_arg(proc, p->len_arg, argv), int_arg(proc, p->aux_arg, argv));
}

static const struct rgpu_scalar_policy cublas_scalars = { scalars_on_host, untyped_scalar_size, NULL };

__attribute__((constructor)) static void register_policy(void)
{
    rgpu_register_scalar_policy(LIB, &cublas_scalars);
}

/* ---- handles -------------------------------------------------------------------- */

#undef cublasCreate_v2
RGPU_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    const void *argv[] = { &handle };
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasCreate_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && handle)
        rgpu_keyed_set(&modes, *handle, CUBLAS_POINTER_MODE_HOST);
    return rc;
}

#undef cublasDestroy_v2
RGPU_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    const void *argv[] = { &handle };
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasDestroy_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rgpu_keyed_remove(&modes, handle);
    return rc;
}

#undef cublasSetPointerMode_v2
RGPU_EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    const void *argv[] = { &handle, &mode };
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasSetPointerMode_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rgpu_keyed_set(&modes, handle, mode);
    return rc;
}

/* ---- vectors and matrices between host and device ------------------------------- */

/* A runtime failure moving bytes is cuBLAS's mapping error. */
static cublasStatus_t copy_status(int rc)
{
    return rc == 0 ? CUBLAS_STATUS_SUCCESS
           : rc == CUBLAS_STATUS_NOT_SUPPORTED || rc == CUBLAS_STATUS_NOT_INITIALIZED
               ? (cublasStatus_t)rc
               : CUBLAS_STATUS_MAPPING_ERROR;
}

static cublasStatus_t set_matrix(int64_t rows, int64_t cols, int64_t elemSize, const void *A,
                                 int64_t lda, void *B, int64_t ldb, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elemSize <= 0 || lda <= 0 || ldb <= 0 || lda < rows ||
        ldb < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows == 0 || cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_htod_2d(LIB, "cublasSetMatrix", (uint64_t)(uintptr_t)B,
                                         (size_t)ldb * es, A, (size_t)lda * es, (size_t)rows * es,
                                         (size_t)cols, (uint64_t)(uintptr_t)stream));
}

static cublasStatus_t get_matrix(int64_t rows, int64_t cols, int64_t elemSize, const void *A,
                                 int64_t lda, void *B, int64_t ldb, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elemSize <= 0 || lda <= 0 || ldb <= 0 || lda < rows ||
        ldb < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows == 0 || cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_dtoh_2d(LIB, "cublasGetMatrix", B, (size_t)ldb * es,
                                         (uint64_t)(uintptr_t)A, (size_t)lda * es,
                                         (size_t)rows * es, (size_t)cols,
                                         (uint64_t)(uintptr_t)stream));
}

/* A vector with strides is a matrix of n rows of one element. */
static cublasStatus_t set_vector(int64_t n, int64_t elemSize, const void *x, int64_t incx,
                                 void *y, int64_t incy, cudaStream_t stream)
{
    if (n < 0 || elemSize <= 0 || incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_htod_2d(LIB, "cublasSetVector", (uint64_t)(uintptr_t)y,
                                         (size_t)incy * es, x, (size_t)incx * es, es, (size_t)n,
                                         (uint64_t)(uintptr_t)stream));
}

static cublasStatus_t get_vector(int64_t n, int64_t elemSize, const void *x, int64_t incx,
                                 void *y, int64_t incy, cudaStream_t stream)
{
    if (n < 0 || elemSize <= 0 || incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_dtoh_2d(LIB, "cublasGetVector", y, (size_t)incy * es,
                                         (uint64_t)(uintptr_t)x, (size_t)incx * es, es, (size_t)n,
                                         (uint64_t)(uintptr_t)stream));
}

RGPU_EXPORT cublasStatus_t cublasSetVector(int n, int elemSize, const void *x, int incx,
                                           void *devicePtr, int incy)
{
    return set_vector(n, elemSize, x, incx, devicePtr, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetVector(int n, int elemSize, const void *x, int incx, void *y,
                                           int incy)
{
    return get_vector(n, elemSize, x, incx, y, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

/* The Async forms: the host side must be done with when they return, so
 * they complete before returning, as pageable copies do. */
RGPU_EXPORT cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void *hostPtr,
                                                int incx, void *devicePtr, int incy,
                                                cudaStream_t stream)
{
    return set_vector(n, elemSize, hostPtr, incx, devicePtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void *devicePtr,
                                                int incx, void *hostPtr, int incy,
                                                cudaStream_t stream)
{
    return get_vector(n, elemSize, devicePtr, incx, hostPtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                                int lda, void *B, int ldb, cudaStream_t stream)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                                int lda, void *B, int ldb, cudaStream_t stream)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

/* The _64 forms take 64-bit sizes; the copies are the same. */
RGPU_EXPORT cublasStatus_t cublasSetVector_64(int64_t n, int64_t elemSize, const void *x,
                                              int64_t incx, void *devicePtr, int64_t incy)
{
    return set_vector(n, elemSize, x, incx, devicePtr, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetVector_64(int64_t n, int64_t elemSize, const void *x,
                                              int64_t incx, void *y, int64_t incy)
{
    return get_vector(n, elemSize, x, incx, y, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetVectorAsync_64(int64_t n, int64_t elemSize,
                                                   const void *hostPtr, int64_t incx,
                                                   void *devicePtr, int64_t incy,
                                                   cudaStream_t stream)
{
    return set_vector(n, elemSize, hostPtr, incx, devicePtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetVectorAsync_64(int64_t n, int64_t elemSize,
                                                   const void *devicePtr, int64_t incx,
                                                   void *hostPtr, int64_t incy,
                                                   cudaStream_t stream)
{
    return get_vector(n, elemSize, devicePtr, incx, hostPtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                                   const void *A, int64_t lda, void *B,
                                                   int64_t ldb, cudaStream_t stream)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                                   const void *A, int64_t lda, void *B,
                                                   int64_t ldb, cudaStream_t stream)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

/* ---- answered on the client --------------------------------------------------------- */

RGPU_EXPORT const char *cublasGetStatusName(cublasStatus_t status)
{
    const char *s = rgpu_cublas_error_name(status);
    return s ? s : "CUBLAS_STATUS_UNKNOWN";
}

RGPU_EXPORT const char *cublasGetStatusString(cublasStatus_t status)
{
    const char *s = rgpu_server_error_string(LIB, status);
    return s ? s : cublasGetStatusName(status);
}

RGPU_EXPORT size_t cublasGetCudartVersion(void)
{
    return CUDART_VERSION;
}

RGPU_EXPORT void cublasXerbla(const char *srName, int info)
{
    fprintf(stderr, " ** On entry to %s parameter number %d had an illegal value\n",
            srName ? srName : "?", info);
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cublas_lib);
}

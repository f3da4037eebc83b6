// Library calls on a NULL handle answer what the libraries answer natively
// (measured with CUDA 13.0's cuBLAS 13, cuBLASLt 13 and cuDNN 9 on a host
// without a GPU, where the handle check comes before anything touches
// one): cuBLAS CUBLAS_STATUS_NOT_INITIALIZED for every call; cuBLASLt
// NOT_INITIALIZED for a NULL cuBLASLt handle, whatever the descriptor,
// CUBLAS_STATUS_INVALID_VALUE for a NULL descriptor; cuDNN
// CUDNN_STATUS_BAD_PARAM.  Through rgpu, a call whose scalars' place the
// server cannot ask of a NULL handle, or whose pointers it refuses, must
// still answer for the NULL handle first, as the library would.
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cudnn.h>
#include "check.h"

static float *const bogus = (float *)0x1000;   // never read: the handle fails first

static void blas_is(cublasStatus_t got, cublasStatus_t want, const char *name)
{
    char buf[160];
    check(got == want, fmt_name(buf, sizeof buf, "%s -> %d", name, (int)want), "got %d",
          (int)got);
}

static void dnn_is(cudnnStatus_t got, cudnnStatus_t want, const char *name)
{
    char buf[160];
    check(got == want, fmt_name(buf, sizeof buf, "%s -> %d", name, (int)want), "got %d",
          (int)got);
}

static void test_cublas(void)
{
    const cublasStatus_t want = CUBLAS_STATUS_NOT_INITIALIZED;
    const float one = 1, zero = 0;
    float result = 0;
    cublasHandle_t h = NULL;
    cublasPointerMode_t mode;
    blas_is(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, bogus, 2, bogus, 2, &zero,
                        bogus, 2), want, "cublasSgemm on a NULL handle");
    blas_is(cublasSscal(h, 2, &one, bogus, 1), want, "cublasSscal on a NULL handle");
    blas_is(cublasSaxpy(h, 2, &one, bogus, 1, bogus, 1), want, "cublasSaxpy on a NULL handle");
    blas_is(cublasSdot(h, 2, bogus, 1, bogus, 1, &result), want, "cublasSdot on a NULL handle");
    blas_is(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, bogus, CUDA_R_32F, 2, bogus,
                         CUDA_R_32F, 2, &zero, bogus, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT), want, "cublasGemmEx on a NULL handle");
    blas_is(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, bogus, 2, 4,
                                      bogus, 2, 4, &zero, bogus, 2, 4, 3), want,
            "cublasSgemmStridedBatched on a NULL handle");
    blas_is(cublasGetPointerMode(h, &mode), want, "cublasGetPointerMode on a NULL handle");
    blas_is(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), want,
            "cublasSetPointerMode on a NULL handle");
    blas_is(cublasSetStream(h, 0), want, "cublasSetStream on a NULL handle");
    blas_is(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), want, "cublasSetMathMode on a NULL handle");
    blas_is(cublasSetWorkspace(h, NULL, 0), want, "cublasSetWorkspace on a NULL handle");
    blas_is(cublasDestroy(h), want, "cublasDestroy of a NULL handle");
}

static void test_cublaslt(void)
{
    const float one = 1, zero = 0;
    cublasLtMatmulDesc_t desc = NULL;
    int32_t mode;
    size_t written;
    blas_is(cublasLtMatmul(NULL, NULL, &one, bogus, NULL, bogus, NULL, &zero, bogus, NULL, bogus,
                           NULL, NULL, NULL, 0, 0), CUBLAS_STATUS_NOT_INITIALIZED,
            "cublasLtMatmul on a NULL handle and descriptor");
    blas_is(cublasLtMatmulDescGetAttribute(NULL, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
                                           sizeof mode, &written), CUBLAS_STATUS_INVALID_VALUE,
            "cublasLtMatmulDescGetAttribute of a NULL descriptor");
    if (!check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ==
                   CUBLAS_STATUS_SUCCESS, "cublasLtMatmulDescCreate", "failed"))
        return;
    blas_is(cublasLtMatmul(NULL, desc, &one, bogus, NULL, bogus, NULL, &zero, bogus, NULL, bogus,
                           NULL, NULL, NULL, 0, 0), CUBLAS_STATUS_NOT_INITIALIZED,
            "cublasLtMatmul on a NULL handle");
    cublasLtMatmulDescDestroy(desc);
}

static void test_cudnn(void)
{
    const float one = 1, zero = 0;
    cudnnTensorDescriptor_t t = NULL;
    dnn_is(cudnnSetStream(NULL, 0), CUDNN_STATUS_BAD_PARAM, "cudnnSetStream on a NULL handle");
    if (!check(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS,
               "cudnnCreateTensorDescriptor", "failed"))
        return;
    dnn_is(cudnnAddTensor(NULL, &one, t, bogus, &zero, t, bogus), CUDNN_STATUS_BAD_PARAM,
           "cudnnAddTensor on a NULL handle");
    cudnnDestroyTensorDescriptor(t);
}

int main(void)
{
    test_cublas();
    test_cublaslt();
    test_cudnn();
    return check_failures ? 1 : 0;
}

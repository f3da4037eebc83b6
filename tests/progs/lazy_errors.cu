// Errors of work that rgpu sends without waiting (docs/synchronisation.md):
//
//   lazy_errors                 the checks that hold natively and through rgpu
//   lazy_errors deferred        + rgpu's lazy mode: the synchronise returned at
//                               once, the fault came with the next waiting call
//   lazy_errors strict          + RGPU_SYNC=strict: the synchronise reported it
//   lazy_errors unknown-handles + a stream or cuBLAS handle the process never had
//                               fails at once (not natively: a real driver may crash)
//   lazy_errors exit            faults, synchronises lazily and exits: rgpu must
//                               log the error no call reported (tests/lazy-errors.sh)
//
// A kernel writing through a bogus pointer faults; natively the
// cudaStreamSynchronize after it returns cudaErrorIllegalAddress.  Through
// rgpu in lazy mode that synchronise goes without waiting and the fault is
// reported by the next call that waits, with the same code.  The default
// output names only the first failing call's code, so it is the same in
// both cases.
#include <cublas_v2.h>
#include <string.h>

#include "check.h"
#include "kernels.cuh"

static int *const bogus = (int *)0x10;

static void unknown_handles(void)
{
    cudaStream_t s;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_err(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle,
              "cudaStreamSynchronize of a destroyed stream");
    check_err(cudaStreamSynchronize((cudaStream_t)0x5eed), cudaErrorInvalidResourceHandle,
              "cudaStreamSynchronize of a stream never made");
    float x = 1, *d;
    check_cuda(cudaMalloc((void **)&d, 2 * sizeof(float)), "cudaMalloc");
    cublasStatus_t st = cublasSaxpy((cublasHandle_t)0x5eed, 1, &x, d, 1, d + 1, 1);
    check(st == CUBLAS_STATUS_NOT_INITIALIZED, "cublasSaxpy with a handle never made",
          "got %d", (int)st);
    st = cublasSetMathMode((cublasHandle_t)0x5eed, CUBLAS_DEFAULT_MATH);
    check(st == CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode with a handle never made",
          "got %d", (int)st);
    st = cublasSetStream((cublasHandle_t)0x5eed, NULL);
    check(st == CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream with a handle never made",
          "got %d", (int)st);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int *dev = NULL, host = 0;
    cudaStream_t s;

    if (strcmp(mode, "unknown-handles") == 0) {
        unknown_handles();
        return check_failures ? 1 : 0;
    }
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    check_cuda(cudaMalloc((void **)&dev, sizeof(int)), "cudaMalloc");
    k_poke<<<1, 1, 0, s>>>(bogus);
    check_err(cudaGetLastError(), cudaSuccess, "the faulting launch itself succeeds");
    cudaError_t sync = cudaStreamSynchronize(s);
    if (strcmp(mode, "exit") == 0)
        return 0;       /* nothing waits after the lazy synchronise */
    cudaError_t copy = cudaMemcpy(&host, dev, sizeof host, cudaMemcpyDeviceToHost);
    check_err(sync ? sync : copy, cudaErrorIllegalAddress,
              "first error of cudaStreamSynchronize, cudaMemcpy");
    check_err(copy, cudaErrorIllegalAddress, "cudaMemcpy after the fault (sticky)");
    if (strcmp(mode, "deferred") == 0)
        check_err(sync, cudaSuccess, "lazy cudaStreamSynchronize returned at once");
    if (strcmp(mode, "strict") == 0)
        check_err(sync, cudaErrorIllegalAddress, "strict cudaStreamSynchronize reported it");
    return check_failures ? 1 : 0;
}

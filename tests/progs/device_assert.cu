// A failed assert in a kernel: its message (and what the kernel printed
// before it) shows at the next synchronise, which fails with
// cudaErrorAssert; the error is sticky, as a fault is (tests/progs/errors.cu
// has the same sequence for an illegal address).  The message goes to
// stderr ("device_output.cuh:LINE: void k_assert(int): block: [1,0,0],
// thread: [2,0,0] Assertion `v != bad` failed."): tests/device-output.sh
// checks it there; stdout holds only what does not depend on timing.
#include <cuda.h>

#include "check.h"
#include "device_output.cuh"

int main(void)
{
    void *p = NULL;

    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    check_cuda(cudaDeviceSynchronize(), "a context");
    printf("host: thread 6 of k_assert fails its assert\n");
    k_assert<<<2, 4>>>(6);
    check_err(cudaGetLastError(), cudaSuccess, "the launch");
    check_err(cudaDeviceSynchronize(), cudaErrorAssert, "cudaDeviceSynchronize");
    check_err(cudaPeekAtLastError(), cudaErrorAssert, "cudaPeekAtLastError");
    check_err(cudaGetLastError(), cudaErrorAssert, "cudaGetLastError");
    check_err(cudaMalloc(&p, 256), cudaErrorAssert, "cudaMalloc (sticky)");
    k_print<<<1, 1>>>(1, 1);
    check_err(cudaGetLastError(), cudaErrorAssert, "a launch after the assert");
    CUresult r = cuCtxSynchronize();
    check(r == CUDA_ERROR_ASSERT, "cuCtxSynchronize -> CUDA_ERROR_ASSERT", "CUresult %d", (int)r);
    printf("host: cudaDeviceSynchronize says %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
    return check_exit_status();
}

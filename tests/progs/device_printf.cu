// What kernels print reaches the program's stdout where CUDA prints it: at
// cudaDeviceSynchronize, cuCtxSynchronize, a stream or event synchronise
// and a blocking copy to the host, after everything the program printed
// before, and before anything it prints after.  Two kernels launched
// before one synchronise print in launch order.  k_lines prints more than
// a pipe holds; k_formats each conversion once.
//
// `device_printf buffered` leaves stdout fully buffered (a file or a pipe):
// the program's own lines still in the buffer at a synchronise must come
// before the kernels' (tests/device-output.sh).  Without an argument
// stdout is line-buffered, so that the order does not depend on how the
// driver writes (through the C library or not): tests/gpu/run.sh compares
// this run natively and through rgpu.  `device_printf exit` ends right
// after a launch that does not wait (its configuration known), at whose
// start the driver printed what the kernel before it printed: that output
// must not be lost.
#include <cuda.h>
#include <string.h>

#include "check.h"
#include "device_output.cuh"

#define LINES 4000      // about 110 KB: more than a default pipe holds

static void host(const char *what)
{
    printf("host: %s\n", what);
}

// A kernel prints, another launch (printing nothing) starts, the end:
// nothing waits after the kernel.  The second launch's configuration is
// known from a first one, so that it does not wait either.
static int print_then_exit(void)
{
    cudaStream_t s;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    k_lines<<<1, 1, 0, s>>>(0);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    k_print<<<1, 1, 0, s>>>(7, 70);
    k_lines<<<1, 1, 0, s>>>(0);
    return check_exit_status();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "buffered") != 0)
        setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    if (strcmp(mode, "exit") == 0)
        return print_then_exit();

    host("before the kernels");
    k_print<<<3, 4>>>(1, 10);
    host("between the kernels");
    k_print<<<2, 8>>>(2, 20);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after two kernels");
    host("after cudaDeviceSynchronize");

    k_print<<<1, 2>>>(3, 30);
    CUresult r = cuCtxSynchronize();
    check(r == CUDA_SUCCESS, "cuCtxSynchronize", "CUresult %d", (int)r);
    host("after cuCtxSynchronize");

    cudaStream_t s;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    k_print<<<2, 1, 0, s>>>(4, 40);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    host("after cudaStreamSynchronize");

    cudaEvent_t e;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    k_print<<<1, 3, 0, s>>>(5, 50);
    check_cuda(cudaEventRecord(e, s), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(e), "cudaEventSynchronize");
    host("after cudaEventSynchronize");

    int *d = NULL, x = -1;
    check_cuda(cudaMalloc(&d, sizeof *d), "cudaMalloc");
    check_cuda(cudaMemset(d, 0, sizeof *d), "cudaMemset");
    k_print<<<4, 4>>>(6, 60);
    check_cuda(cudaMemcpy(&x, d, sizeof x, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
    host("after cudaMemcpy to the host");

    k_lines<<<1, 1>>>(LINES);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after k_lines");
    host("after k_lines");

    k_formats<<<1, 1>>>(-42, 3735928559u, -1234567890123LL, 3.14159265, 0.5f, 'Z');
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after k_formats");
    host("done");

    check_cuda(cudaEventDestroy(e), "cudaEventDestroy");
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_cuda(cudaFree(d), "cudaFree");
    return check_exit_status();
}

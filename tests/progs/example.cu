// rgpu's first example: an ordinary CUDA program, built with
//   nvcc -cudart shared -o example example.cu
// It computes y = 2*x + y over a million floats on whatever GPU the CUDA
// libraries it loads lead to: the local one, or a remote one through rgpu.
#include <stdio.h>
#include <stdlib.h>
#include "check.h"
#include "kernels.cuh"

int main(void)
{
    const int n = 1 << 20;
    struct cudaDeviceProp prop;
    float *x, *y, *h = (float *)malloc(n * sizeof(float));

    if (!check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"))
        return 1;
    printf("device 0: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);

    if (!check_cuda(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc x") ||
        !check_cuda(cudaMalloc(&y, n * sizeof(float)), "cudaMalloc y"))
        return 1;

    // x[i] = i mod 1000, y[i] = 1: every result is an exact small integer.
    for (int i = 0; i < n; i++)
        h[i] = (float)(i % 1000);
    cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int i = 0; i < n; i++)
        h[i] = 1.0f;
    cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice);

    k_axpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
    check_cuda(cudaGetLastError(), "launch k_axpy");
    check_cuda(cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost), "copy y back");

    int bad = 0;
    for (int i = 0; i < n; i++)
        if (h[i] != 2.0f * (float)(i % 1000) + 1.0f)
            bad++;
    check(bad == 0, "y = 2*x + y over 1048576 floats", "%d wrong values", bad);

    cudaFree(x);
    cudaFree(y);
    free(h);
    return check_exit_status();
}

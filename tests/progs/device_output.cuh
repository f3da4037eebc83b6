// Kernels that print and assert, for device_printf.cu and device_assert.cu.
//
// Not in kernels.cuh: a launch of a kernel that may printf makes rgpu's
// synchronises after it wait (docs/synchronisation.md), and a program
// that launches no such kernel keeps its waits apart from these.  The fake GPU backend carries a CPU twin
// of each (tests/fakegpu/kernels.c).  Every line is printed by one thread,
// or by threads in an order CUDA keeps (one thread's printfs), so that the
// output does not depend on scheduling.
#pragma once
#include <assert.h>
#include <stdio.h>

// The last thread of the last block says who it is.
__global__ void k_print(int tag, int value)
{
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == blockDim.x - 1)
        printf("k_print %d: block [%u,%u,%u] thread [%u,%u,%u] of grid %u block %u: value %d\n",
               tag, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z,
               gridDim.x, blockDim.x, value);
}

// Thread 0 prints n numbered lines: more than a pipe holds at once.
__global__ void k_lines(int n)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int i = 0; i < n; i++)
            printf("k_lines: line %05d of %d\n", i, n);
}

// The conversions device printf supports, each once.
__global__ void k_formats(int i, unsigned u, long long ll, double d, float f, char c)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        printf("k_formats: %d %u %x %lld %.3f %.2e %g %c %s %5d|%-5d|\n", i, u, u, ll, d, d,
               (double)f, c, "text", i, i);
}

// Thread number bad (counting across blocks) prints, then fails its assert.
__global__ void k_assert(int bad)
{
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v == bad)
        printf("k_assert: thread %d is about to fail its assert\n", v);
    assert(v != bad);
}

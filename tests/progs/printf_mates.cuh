// One module whose kernels differ in whether they print, for printf_step.cu
// (tests/printf-lazy.sh): rgpu makes a synchronise wait only after a kernel
// that may print (docs/synchronisation.md, "What kernels print"), so a step
// that launches only the silent mates of pm_print goes without waiting.
// The fake GPU backend carries a CPU twin of each (tests/fakegpu/kernels.c).
#pragma once
#include <assert.h>
#include <stdio.h>

// Prints through a device function that is not inlined: the call graph,
// not the kernel's own code, says that pm_via prints.
__device__ __noinline__ void pm_say(int tag, int value)
{
    printf("pm_via %d: value %d\n", tag, value);
}

// Thread 0 of block 0 prints.
__global__ void pm_print(int tag, int value)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        printf("pm_print %d: value %d\n", tag, value);
}

__global__ void pm_via(int tag, int value)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        pm_say(tag, value);
}

// y = a * x + y: silent.
__global__ void pm_mate(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// Asserts that x holds no NaN: an assert alone does not print until it
// fails, so its launches leave synchronises unwaited too.
__global__ void pm_finite(const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(x[i] == x[i]);
}

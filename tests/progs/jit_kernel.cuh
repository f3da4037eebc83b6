// Device code for tests/progs/jit_link.cu, compiled at build time as
// relocatable code (nvcc -rdc=true) into a cubin and into PTX.  The kernel
// calls a function defined in another input (jit_device.cuh): only a link
// (cuLink*) makes it loadable.  The fake GPU runs it as a CPU twin
// (tests/fakegpu/kernels.c), which knows what jit_scale computes.
#pragma once

extern __device__ float jit_scale(float v);

// y[i] = jit_scale(x[i]) = 2 * x[i] + 1 for i < n.
extern "C" __global__ void k_jit_scale(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = jit_scale(x[i]);
}

// Device code for tests/progs/jit_link.cu: the function jit_kernel.cuh's
// kernel calls, compiled at build time as relocatable code into a cubin and
// a fatbin, and linked with the kernel by cuLink*.
#pragma once

__device__ float jit_scale(float v)
{
    return 2.0f * v + 1.0f;
}

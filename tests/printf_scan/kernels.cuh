// Kernels that reach printf in every way a call graph records, and kernels
// that do not, compiled by nvcc in several forms (tests/meson.build) for
// tests/printf_scan/scan.c, which checks what common/rgpu_printf_scan.c
// finds in each.  Never run: only their images are read.
#pragma once
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

__device__ __noinline__ void say(int x)
{
    printf("say %d\n", x);
}

__device__ __noinline__ void mid(int x)
{
    say(x + 1);
}

__device__ __noinline__ int bottom_up(int n)
{
    if (n <= 0) {
        printf("bottom\n");
        return 0;
    }
    return bottom_up(n - 1) + 1;
}

__device__ __noinline__ int triple(int n)
{
    return 3 * n;
}

__device__ void loud(int *p)
{
    printf("loud %d\n", *p);
}

__device__ void silent(int *p)
{
    *p = 2;
}

typedef void (*action)(int *);
__device__ action actions[2] = { loud, silent };

struct base {
    __device__ virtual void go(int *p) { *p = 5; }
};
struct derived : base {
    __device__ void go(int *p) override { printf("derived %d\n", *p); }
};

// Print: directly, through two calls, through recursion, through a pointer,
// through a virtual call.
extern "C" __global__ void k_print(int *p) { printf("hello %d\n", p[0]); }
extern "C" __global__ void k_chain(int *p) { mid(p[0]); }
extern "C" __global__ void k_recursive(int *p) { p[0] = bottom_up(p[1]); }
extern "C" __global__ void k_pointer(int *p) { actions[p[0] & 1](p); }
extern "C" __global__ void k_virtual(int *p)
{
    derived d;
    base b;
    base *o = p[0] ? static_cast<base *>(&d) : &b;
    o->go(p);
}

// Prints in its code for GPUs older than sm_90 only, as PyTorch's flash
// attention does (archs.fatbin holds sm_80 and sm_90 cubins).
extern "C" __global__ void k_arch(int *p)
{
#if __CUDA_ARCH__ < 900
    printf("k_arch needs sm_90\n");
#endif
    p[0] = 1;
}

// Silent: a helper, an assert, the device heap.
extern "C" __global__ void k_quiet(int *p) { p[threadIdx.x] += triple(p[0]); }
extern "C" __global__ void k_assert(int *p) { assert(p[0] == 0); }
extern "C" __global__ void k_heap(int *p)
{
    int *q = (int *)malloc(sizeof *q);
    if (q) {
        *q = p[0];
        p[1] = *q;
        free(q);
    }
}

// Test kernels shared by the integration programs in tests/progs/.
//
// The fake GPU backend (tests/fakegpu/) carries a CPU implementation of each
// kernel here, looked up by its mangled name; a kernel added here needs its
// CPU twin there, or launching it on the fake backend fails with
// cudaErrorInvalidDeviceFunction.  Keep signatures plain so the mangled names
// stay stable.
#pragma once
#include <stdint.h>
#include <cooperative_groups.h>

struct rgpu_test_params {         // a struct parameter with mixed alignment
    float *out;
    const float *in;
    int n;
    float scale;
    double offset;
    char tag[12];
};

struct rgpu_test_big {            // a 4 KiB parameter block
    long long v[512];
};

struct alignas(64) rgpu_test_map { // a TMA descriptor's shape: 128 bytes, 64-aligned
    unsigned long long w[16];
};

// Does nothing: launch-rate benchmark and the smallest launch.
__global__ void k_empty(void) {}

// p[i] = v for i < n.
__global__ void k_fill_u32(uint32_t *p, uint32_t v, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v;
}

// out[0..15] = the map's words, out[16] = tag: a tensor map by value after a
// small parameter, as XLA's and Triton's TMA kernels take theirs.
__global__ void k_param_map(unsigned long long *out, int tag,
                            const __grid_constant__ struct rgpu_test_map map)
{
    int i = threadIdx.x;
    if (blockIdx.x == 0 && i < 16)
        out[i] = map.w[i];
    if (blockIdx.x == 0 && i == 16)
        out[16] = (unsigned long long)tag;
}

// y[i] = a * x[i] + y[i].
__global__ void k_axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// out[i] = in[i] * scale + offset + tag[i % 12].
__global__ void k_struct(struct rgpu_test_params p)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n)
        p.out[i] = p.in[i] * p.scale + (float)p.offset + (float)p.tag[i % 12];
}

// out[0] = sum of b.v[]; out[1] = b.v[511] (checks the tail arrived).
__global__ void k_big(long long *out, struct rgpu_test_big b)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        long long s = 0;
        for (int i = 0; i < 512; i++)
            s += b.v[i];
        out[0] = s;
        out[1] = b.v[511];
    }
}

// Scalars of every width, in an order that forces padding.
__global__ void k_scalars(char c, short s, int i, long long l, float f,
                          double d, unsigned char u, double *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = c; out[1] = s; out[2] = i; out[3] = (double)l;
        out[4] = f; out[5] = d; out[6] = u;
    }
}

// p[i] += 1 for i < n: run many times to check stream ordering.
__global__ void k_inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

// dst[i] = src[i] * 2 for i < n: reads what an earlier launch wrote.
__global__ void k_double(int *dst, const int *src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = src[i] * 2;
}

// Writes through whatever pointer it is given: a bad pointer faults.
__global__ void k_poke(int *p)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *p = 42;
}

// A grid-wide barrier (a cooperative launch): every thread writes
// data[i] = 3 * i + 1, the grid syncs, then out[i] = data[n - 1 - i], which
// another block wrote.
__global__ void k_coop_reverse(int *data, int *out, int n)
{
    cooperative_groups::grid_group g = cooperative_groups::this_grid();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] = 3 * i + 1;
    g.sync();
    if (i < n)
        out[i] = data[n - 1 - i];
}

// out[0] = whether the grid may sync (a cooperative launch), out[1] = the
// number of blocks in the grid.
__global__ void k_grid_info(int *out)
{
    cooperative_groups::grid_group g = cooperative_groups::this_grid();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = g.is_valid() ? 1 : 0;
        out[1] = (int)(gridDim.x * gridDim.y * gridDim.z);
    }
}

// A while loop's body in a conditional graph node: one thread adds 1 to *x
// and counts *left down; the loop goes on while something is left.
__global__ void k_count_down(int *left, int *x, cudaGraphConditionalHandle h)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *x += 1;
        int l = --*left;
        cudaGraphSetConditional(h, l > 0 ? 1u : 0u);
    }
}

// Sets a conditional node's value to *v (an if's or a switch's choice).
__global__ void k_set_cond(const int *v, cudaGraphConditionalHandle h)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cudaGraphSetConditional(h, (unsigned)*v);
}

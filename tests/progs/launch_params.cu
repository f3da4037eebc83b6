// Kernel parameters of every shape: none, scalars of each width (negative
// ones included, in an order that forces padding), a struct with mixed
// alignment, a 4 KiB struct, pointers; launched with <<<>>> and with
// cudaLaunchKernel, on one and on many blocks, with 3D dimensions and with
// dynamic shared memory.  rgpu learns the parameter layout from the server
// (cuFuncGetParamInfo), so a wrong offset or size shows up here.
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels.cuh"

static void test_empty(void)
{
    k_empty<<<1, 1>>>();
    check_cuda(cudaGetLastError(), "k_empty <<<1,1>>>");
    k_empty<<<1, 1, 0>>>();
    check_cuda(cudaGetLastError(), "k_empty dynamic shared 0");
    k_empty<<<1, 1, 1024>>>();
    check_cuda(cudaGetLastError(), "k_empty dynamic shared 1024");
    k_empty<<<dim3(2, 3, 4), dim3(4, 2, 2)>>>();
    check_cuda(cudaGetLastError(), "k_empty 3D grid and block");
    check_cuda(cudaDeviceSynchronize(), "k_empty synchronize");
}

// More dynamic shared memory than the kernel may use without opting in:
// the launch itself fails (what cudaGetLastError says right after it, as
// PyTorch checks every launch), also after launches of the kernel that
// went through; with cudaFuncSetAttribute it goes through, and fails
// again once the limit is lowered.
static void test_shared_limit(void)
{
    const int big = 64 << 10;
    k_empty<<<1, 32>>>();
    check_cuda(cudaGetLastError(), "k_empty before the shared memory limit");
    k_empty<<<1, 32, big>>>();
    check_err(cudaGetLastError(), cudaErrorInvalidValue,
              "k_empty with 64 KiB of dynamic shared memory, not opted in");
    check_cuda(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, big),
               "cudaFuncSetAttribute max dynamic shared memory 64 KiB");
    k_empty<<<1, 32, big>>>();
    check_cuda(cudaGetLastError(), "k_empty with 64 KiB, opted in");
    check_cuda(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
               "cudaFuncSetAttribute max dynamic shared memory back to 0");
    k_empty<<<1, 32, big>>>();
    check_err(cudaGetLastError(), cudaErrorInvalidValue,
              "k_empty with 64 KiB after the limit was lowered");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the shared memory launches");
}

static void test_scalars(void)
{
    const char c = -5;
    const short s = -1234;
    const int i = -123456789;
    const long long l = -1234567890123LL;
    const float f = 3.5f;
    const double d = -2.25e100;
    const unsigned char u = 250;
    const double want[7] = {(double)c, (double)s, (double)i, (double)l, (double)f, d, (double)u};
    const char *names[7] = {"char", "short", "int", "long long", "float", "double", "unsigned char"};
    double *dout, got[7];
    char name[64];

    if (!check_cuda(cudaMalloc(&dout, sizeof got), "k_scalars cudaMalloc"))
        return;
    check_cuda(cudaMemset(dout, 0, sizeof got), "k_scalars cudaMemset");
    k_scalars<<<1, 1>>>(c, s, i, l, f, d, u, dout);
    check_cuda(cudaGetLastError(), "k_scalars launch");
    check_cuda(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost), "k_scalars cudaMemcpy");
    for (int k = 0; k < 7; k++)
        check(got[k] == want[k], fmt_name(name, sizeof name, "k_scalars %s", names[k]),
              "got %.17g, want %.17g", got[k], want[k]);
    check_cuda(cudaFree(dout), "k_scalars cudaFree");
}

static void test_struct(void)
{
    const int n = 1000;
    float *in, *out, *h = (float *)malloc(n * sizeof(float));
    struct rgpu_test_params p;

    if (!check_cuda(cudaMalloc(&in, n * sizeof(float)), "k_struct cudaMalloc in") ||
        !check_cuda(cudaMalloc(&out, n * sizeof(float)), "k_struct cudaMalloc out"))
        return;
    for (int k = 0; k < n; k++)
        h[k] = (float)k;
    check_cuda(cudaMemcpy(in, h, n * sizeof(float), cudaMemcpyHostToDevice), "k_struct cudaMemcpy in");

    // Every intermediate is exactly representable, so the host result is
    // exact whether or not the compiler fuses the multiply-add.
    memset(&p, 0, sizeof p);
    p.out = out;
    p.in = in;
    p.n = n;
    p.scale = 2.5f;
    p.offset = 0.75;
    memcpy(p.tag, "rgpu-tag-XYZ", 12);   // all 12 bytes, no terminator
    k_struct<<<(n + 127) / 128, 128>>>(p);
    check_cuda(cudaGetLastError(), "k_struct launch");
    check_cuda(cudaMemcpy(h, out, n * sizeof(float), cudaMemcpyDeviceToHost), "k_struct cudaMemcpy out");
    int bad = -1;
    for (int k = 0; k < n && bad < 0; k++)
        if (h[k] != (float)k * 2.5f + 0.75f + (float)p.tag[k % 12])
            bad = k;
    check(bad < 0, "k_struct result", "out[%d] = %g", bad, bad < 0 ? 0.0 : h[bad]);
    check_cuda(cudaFree(in), "k_struct cudaFree in");
    check_cuda(cudaFree(out), "k_struct cudaFree out");
    free(h);
}

static void test_big(void)
{
    static struct rgpu_test_big b;
    long long *dout, got[2] = {0, 0}, sum = 0;

    for (int k = 0; k < 512; k++) {
        b.v[k] = (long long)k * k * 1000 - 5 * k;
        sum += b.v[k];
    }
    b.v[511] = 0x123456789ALL;   // distinctive tail
    sum += b.v[511] - ((long long)511 * 511 * 1000 - 5 * 511);
    if (!check_cuda(cudaMalloc(&dout, sizeof got), "k_big cudaMalloc"))
        return;
    k_big<<<1, 1>>>(dout, b);
    check_cuda(cudaGetLastError(), "k_big launch");
    check_cuda(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost), "k_big cudaMemcpy");
    check(got[0] == sum, "k_big sum", "got %lld, want %lld", got[0], sum);
    check(got[1] == b.v[511], "k_big tail", "got %lld, want %lld", got[1], b.v[511]);
    check_cuda(cudaFree(dout), "k_big cudaFree");
}

// y = a*x + y over n floats on several blocks (the last one partial), once
// with <<<>>> and once with cudaLaunchKernel on a created stream.
static void test_axpy(void)
{
    const int n = 100000, threads = 256, blocks = (n + threads - 1) / threads;
    float *x, *y, *h = (float *)malloc(n * sizeof(float));
    float a = 3.0f;
    cudaStream_t s;

    if (!check_cuda(cudaMalloc(&x, n * sizeof(float)), "k_axpy cudaMalloc x") ||
        !check_cuda(cudaMalloc(&y, n * sizeof(float)), "k_axpy cudaMalloc y") ||
        !check_cuda(cudaStreamCreate(&s), "k_axpy cudaStreamCreate"))
        return;
    for (int k = 0; k < n; k++)
        h[k] = (float)k;
    check_cuda(cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice), "k_axpy cudaMemcpy x");
    for (int k = 0; k < n; k++)
        h[k] = (float)(2 * k);
    check_cuda(cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice), "k_axpy cudaMemcpy y");

    k_axpy<<<blocks, threads>>>(a, x, y, n);                   // y = 5k
    check_cuda(cudaGetLastError(), "k_axpy <<<>>>");

    void *args[] = {&a, &x, &y, (void *)&n};
    check_cuda(cudaLaunchKernel((const void *)k_axpy, dim3(blocks), dim3(threads), args, 0, s),
               "k_axpy cudaLaunchKernel");                     // y = 8k
    check_cuda(cudaStreamSynchronize(s), "k_axpy cudaStreamSynchronize");
    check_cuda(cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost), "k_axpy cudaMemcpy y back");
    int bad = -1;
    for (int k = 0; k < n && bad < 0; k++)
        if (h[k] != (float)(8 * k))
            bad = k;
    check(bad < 0, "k_axpy result", "y[%d] = %g", bad, bad < 0 ? 0.0 : h[bad]);

    check_cuda(cudaStreamDestroy(s), "k_axpy cudaStreamDestroy");
    check_cuda(cudaFree(x), "k_axpy cudaFree x");
    check_cuda(cudaFree(y), "k_axpy cudaFree y");
    free(h);
}

int main(void)
{
    test_empty();
    test_shared_limit();
    test_scalars();
    test_struct();
    test_big();
    test_axpy();
    return check_exit_status();
}

// Managed memory on the path CUDA defines for devices without concurrent
// managed access: the program writes, a kernel reads and writes, the
// program reads after a synchronisation; prefetches, advice and stream
// attachment, and the range attributes they leave; the driver's
// cuMemAllocManaged.  Through rgpu the program's copy sits at the GPU's
// address and is kept coherent at synchronisations (docs/architecture.md).
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels.cuh"

#define N 5000

static unsigned blocks(int n) { return (unsigned)(n + 255) / 256; }

static void check_values(const int *p, int mul, int add, const char *name)
{
    int i = 0;
    while (i < N && p[i] == i * mul + add)
        i++;
    check(i == N, name, "element %d is %d, want %d", i, i < N ? p[i] : 0, i * mul + add);
}

static int range_attr(enum cudaMemRangeAttribute a, const void *p, size_t n)
{
    int v = -100;
    cudaError_t e = cudaMemRangeGetAttribute(&v, sizeof v, a, p, n);
    return e == cudaSuccess ? v : -1000 - (int)e;
}

static void host_kernel_host(void)
{
    int *m = NULL, *out = NULL;
    size_t bytes = N * sizeof(int);
    if (!check_cuda(cudaMallocManaged((void **)&m, bytes), "cudaMallocManaged") ||
        !check_cuda(cudaMallocManaged((void **)&out, bytes, cudaMemAttachGlobal),
                    "cudaMallocManaged (output)"))
        return;
    for (int i = 0; i < N; i++)
        m[i] = i;
    k_inc<<<blocks(N), 256>>>(m, N);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check_values(m, 1, 1, "host, then kernel, then host");
    for (int i = 0; i < N; i++)
        m[i] *= 2;                              // 2i + 2
    k_double<<<blocks(N), 256>>>(out, m, N);   // 4i + 4
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (second)");
    check_values(out, 4, 4, "kernel read the host's second writes");
    check_values(m, 2, 2, "the input is unchanged");

    cudaPointerAttributes attr;
    check_cuda(cudaPointerGetAttributes(&attr, m), "cudaPointerGetAttributes");
    check(attr.type == cudaMemoryTypeManaged, "managed pointer type", "type %d", (int)attr.type);

    // Prefetches and the range attributes they leave.
    struct cudaMemLocation gpu = { cudaMemLocationTypeDevice, 0 };
    struct cudaMemLocation cpu = { cudaMemLocationTypeHost, 0 };
    check_cuda(cudaMemPrefetchAsync(m, bytes, gpu, 0, 0), "cudaMemPrefetchAsync to the GPU");
    check_cuda(cudaDeviceSynchronize(), "sync after prefetch");
    int v = range_attr(cudaMemRangeAttributeLastPrefetchLocation, m, bytes);
    check(v == 0, "last prefetch location: device 0", "%d", v);
    check_cuda(cudaMemPrefetchAsync(m, bytes, cpu, 0, 0), "cudaMemPrefetchAsync to the host");
    check_cuda(cudaDeviceSynchronize(), "sync after prefetch to the host");
    v = range_attr(cudaMemRangeAttributeLastPrefetchLocation, m, bytes);
    check(v == cudaCpuDeviceId, "last prefetch location: the CPU", "%d", v);

    // Advice.
    v = range_attr(cudaMemRangeAttributeReadMostly, m, bytes);
    check(v == 0, "not read-mostly at first", "%d", v);
    check_cuda(cudaMemAdvise(m, bytes, cudaMemAdviseSetReadMostly, gpu), "cudaMemAdvise read-mostly");
    v = range_attr(cudaMemRangeAttributeReadMostly, m, bytes);
    check(v == 1, "read-mostly after advice", "%d", v);
    check_cuda(cudaMemAdvise(m, bytes, cudaMemAdviseUnsetReadMostly, gpu),
               "cudaMemAdvise unset read-mostly");
    check_cuda(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, gpu),
               "cudaMemAdvise preferred location");
    v = range_attr(cudaMemRangeAttributePreferredLocation, m, bytes);
    check(v == 0, "preferred location: device 0", "%d", v);

    // Kernels still see the data after all that, and the program sees theirs.
    k_inc<<<blocks(N), 256>>>(m, N);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (third)");
    check_values(m, 2, 3, "kernel after prefetch and advice");

    // Attached to a stream: that stream's synchronisation covers it.
    cudaStream_t s;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    check_cuda(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle),
               "cudaStreamAttachMemAsync single");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after attach");
    for (int i = 0; i < N; i++)
        m[i] = 10 * i;
    k_inc<<<blocks(N), 256, 0, s>>>(m, N);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    check_values(m, 10, 1, "kernel on an attached stream, seen after its sync");
    check_cuda(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachGlobal),
               "cudaStreamAttachMemAsync global");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after global attach");

    // Copies and memsets that name managed memory.
    int *host = (int *)malloc(bytes);
    for (int i = 0; i < N; i++)
        host[i] = 9 * i;
    check_cuda(cudaMemcpy(m, host, bytes, cudaMemcpyDefault), "cudaMemcpy into managed memory");
    check_values(m, 9, 0, "the program sees a copy into managed memory at once");
    k_inc<<<blocks(N), 256>>>(m, N);
    check_cuda(cudaMemcpy(host, m, bytes, cudaMemcpyDefault), "cudaMemcpy out of managed memory");
    check_values(host, 9, 1, "a copy out of managed memory follows the kernel");
    check_cuda(cudaMemset(m, 0, bytes), "cudaMemset of managed memory");
    check_cuda(cudaDeviceSynchronize(), "sync after memset");
    check_values(m, 0, 0, "memset of managed memory seen after sync");
    free(host);

    cudaStreamDestroy(s);
    check_cuda(cudaFree(out), "cudaFree (output)");
    check_cuda(cudaFree(m), "cudaFree");
}

// Small allocations may share a page (the GPU aligns them to 256 bytes):
// each keeps its own bytes, and one outlives its neighbour's free.
static void small_neighbours(void)
{
    int *a = NULL, *b = NULL;
    const int n = 100;
    if (!check_cuda(cudaMallocManaged((void **)&a, n * sizeof(int)), "cudaMallocManaged (a)") ||
        !check_cuda(cudaMallocManaged((void **)&b, n * sizeof(int)), "cudaMallocManaged (b)"))
        return;
    for (int i = 0; i < n; i++) {
        a[i] = i;
        b[i] = 1000 + i;
    }
    k_inc<<<1, 128>>>(a, n);
    k_double<<<1, 128>>>(b, b, n);
    check_cuda(cudaDeviceSynchronize(), "sync (neighbours)");
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= a[i] == i + 1 && b[i] == 2 * (1000 + i);
    check(ok, "small managed neighbours keep their own bytes", "a[0]=%d b[0]=%d", a[0], b[0]);
    check_cuda(cudaFree(a), "cudaFree (a)");
    for (int i = 0; i < n; i++)
        b[i] = 3 * i;
    k_inc<<<1, 128>>>(b, n);
    check_cuda(cudaDeviceSynchronize(), "sync (b alone)");
    ok = 1;
    for (int i = 0; i < n; i++)
        ok &= b[i] == 3 * i + 1;
    check(ok, "a managed allocation outlives its neighbour's free", "b[0]=%d", b[0]);
    check_cuda(cudaFree(b), "cudaFree (b)");
}

static void driver_managed(void)
{
    CUdeviceptr d = 0;
    size_t bytes = N * sizeof(int);
    if (!check(cuMemAllocManaged(&d, bytes, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS,
               "cuMemAllocManaged", "failed"))
        return;
    int *p = (int *)(uintptr_t)d;
    for (int i = 0; i < N; i++)
        p[i] = 4 * i;
    k_inc<<<blocks(N), 256>>>(p, N);
    check(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize", "failed");
    check_values(p, 4, 1, "cuMemAllocManaged: host, kernel, host");
    int rm = -1;
    CUresult r = cuMemRangeGetAttribute(&rm, sizeof rm, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, bytes);
    check(r == CUDA_SUCCESS && rm == 0, "cuMemRangeGetAttribute", "%d %d", (int)r, rm);
    check(cuMemFree(d) == CUDA_SUCCESS, "cuMemFree of managed memory", "failed");
}

static void bad_inputs(void)
{
    int *dev = NULL, *m = NULL, v = 0;
    check_cuda(cudaMalloc((void **)&dev, 4096), "cudaMalloc");
    cudaError_t e = cudaMemRangeGetAttribute(&v, sizeof v, cudaMemRangeAttributeReadMostly, dev,
                                             4096);
    check_err(e, cudaErrorInvalidValue, "cudaMemRangeGetAttribute of device memory");
    cudaGetLastError();
    e = cudaMallocManaged((void **)&m, 4096, 0);
    check_err(e, cudaErrorInvalidValue, "cudaMallocManaged with flags 0");
    cudaGetLastError();
    check_cuda(cudaMallocManaged((void **)&m, 4096), "cudaMallocManaged (small)");
    e = cudaMemRangeGetAttribute(&v, 3, cudaMemRangeAttributeReadMostly, m, 4096);
    check_err(e, cudaErrorInvalidValue, "cudaMemRangeGetAttribute with a bad size");
    cudaGetLastError();
    cudaFree(m);
    cudaFree(dev);
}

int main(void)
{
    int managed = 0;
    check_cuda(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0),
               "cudaDeviceGetAttribute managedMemory");
    check(managed == 1, "managed memory supported", "%d", managed);
    host_kernel_host();
    small_neighbours();
    driver_managed();
    bad_inputs();
    return check_failures ? 1 : 0;
}

// Mapped (zero-copy) host memory: kernels write host memory that the
// program reads after a synchronisation, and read what the program wrote
// before the launch.  cudaHostAlloc(Mapped), cudaHostRegister(Mapped),
// cudaHostGetDevicePointer (also of plain pinned memory, which unified
// addressing maps), cuMemHostAlloc(DEVICEMAP), and copies and memsets that
// name mapped memory.  Through rgpu the GPU's copy is device memory kept
// coherent at synchronisations (docs/architecture.md).
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels.cuh"

#define N 3000          // over two pages of ints, not a whole number of them

static unsigned blocks(int n) { return (unsigned)(n + 255) / 256; }

// The first index where p[i] != want(i), or n.
static int first_bad(const int *p, int n, int mul, int add)
{
    int i = 0;
    while (i < n && p[i] == i * mul + add)
        i++;
    return i;
}

static void check_values(const int *p, int mul, int add, const char *name)
{
    int i = first_bad(p, N, mul, add);
    check(i == N, name, "element %d is %d, want %d", i, i < N ? p[i] : 0, i * mul + add);
}

static void host_alloc_mapped(void)
{
    int *h = NULL, *d = NULL, *out = NULL, *dout = NULL;
    if (!check_cuda(cudaHostAlloc((void **)&h, N * sizeof(int), cudaHostAllocMapped),
                    "cudaHostAlloc mapped") ||
        !check_cuda(cudaHostGetDevicePointer((void **)&d, h, 0), "cudaHostGetDevicePointer"))
        return;
    unsigned flags = 0;
    check_cuda(cudaHostGetFlags(&flags, h), "cudaHostGetFlags");
    check((flags & cudaHostAllocMapped) != 0, "cudaHostGetFlags says mapped", "flags %#x", flags);

    // The program writes, a kernel reads and writes, the program reads.
    for (int i = 0; i < N; i++)
        h[i] = i;
    k_inc<<<blocks(N), 256>>>(d, N);
    check_cuda(cudaDeviceSynchronize(), "kernel on mapped memory");
    check_values(h, 1, 1, "kernel wrote mapped memory, seen after cudaDeviceSynchronize");

    // Again through a stream, with a second mapped buffer written by the kernel.
    cudaStream_t s;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    check_cuda(cudaHostAlloc((void **)&out, N * sizeof(int), cudaHostAllocMapped),
               "cudaHostAlloc mapped (output)");
    check_cuda(cudaHostGetDevicePointer((void **)&dout, out, 0), "cudaHostGetDevicePointer (output)");
    for (int i = 0; i < N; i++)
        h[i] = 3 * i;
    k_double<<<blocks(N), 256, 0, s>>>(dout, d, N);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    check_values(out, 6, 0, "kernel read the program's writes, result seen after cudaStreamSynchronize");

    // An event synchronisation covers it too.
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    k_inc<<<blocks(N), 256, 0, s>>>(dout, N);
    check_cuda(cudaEventRecord(ev, s), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(ev), "cudaEventSynchronize");
    check_values(out, 6, 1, "result seen after cudaEventSynchronize");

    // A copy from mapped memory after a kernel reads what the kernel wrote
    // (stream order); a memset of mapped memory is seen after a sync.
    int *dev = NULL, *back = (int *)malloc(N * sizeof(int));
    check_cuda(cudaMalloc((void **)&dev, N * sizeof(int)), "cudaMalloc");
    k_inc<<<blocks(N), 256>>>(dout, N);
    check_cuda(cudaMemcpy(dev, out, N * sizeof(int), cudaMemcpyHostToDevice),
               "cudaMemcpy from mapped memory");
    check_cuda(cudaMemcpy(back, dev, N * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy back");
    check_values(back, 6, 2, "copy from mapped memory follows the kernel");
    check_values(out, 6, 2, "mapped memory after a blocking copy");
    check_cuda(cudaMemsetAsync(dout, 0, N * sizeof(int), s), "cudaMemsetAsync on mapped memory");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after memset");
    check_values(out, 0, 0, "memset of mapped memory seen after sync");

    cudaPointerAttributes attr;
    check_cuda(cudaPointerGetAttributes(&attr, h), "cudaPointerGetAttributes");
    check(attr.type == cudaMemoryTypeHost && attr.devicePointer == d && attr.hostPointer == h,
          "pointer attributes of mapped memory", "type %d", (int)attr.type);

    free(back);
    cudaFree(dev);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
    check_cuda(cudaFreeHost(out), "cudaFreeHost (output)");
    check_cuda(cudaFreeHost(h), "cudaFreeHost");
}

static void host_register_mapped(void)
{
    size_t bytes = 4 * 4096;
    int *h = NULL, *d = NULL;
    if (posix_memalign((void **)&h, 4096, bytes) != 0)
        return;
    for (int i = 0; i < N; i++)
        h[i] = 5 * i;
    if (!check_cuda(cudaHostRegister(h, bytes, cudaHostRegisterMapped), "cudaHostRegister mapped") ||
        !check_cuda(cudaHostGetDevicePointer((void **)&d, h, 0),
                    "cudaHostGetDevicePointer (registered)"))
        return;
    k_inc<<<blocks(N), 256>>>(d, N);
    check_cuda(cudaDeviceSynchronize(), "kernel on registered memory");
    check_values(h, 5, 1, "kernel wrote registered memory");
    check_cuda(cudaHostUnregister(h), "cudaHostUnregister");
    check_values(h, 5, 1, "registered memory keeps its bytes after unregistering");
    free(h);
}

// Unified addressing maps all pinned memory: a device pointer of plain
// pinned memory works in kernels.
static void pinned_device_pointer(void)
{
    int *h = NULL, *d = NULL;
    if (!check_cuda(cudaMallocHost((void **)&h, N * sizeof(int)), "cudaMallocHost") ||
        !check_cuda(cudaHostGetDevicePointer((void **)&d, h, 0),
                    "cudaHostGetDevicePointer (pinned)"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = 7 * i;
    k_inc<<<blocks(N), 256>>>(d, N);
    check_cuda(cudaDeviceSynchronize(), "kernel on pinned memory");
    check_values(h, 7, 1, "kernel wrote pinned memory");
    check_cuda(cudaFreeHost(h), "cudaFreeHost (pinned)");
}

// A memset naming plain pinned memory, as JAX issues them: applied to the
// program's bytes in stream order (rgpu gives the range a GPU copy).
static void pinned_memset(void)
{
    unsigned char *h = NULL;
    size_t bytes = 3 * 4096 + 100;
    cudaStream_t s;
    if (!check_cuda(cudaMallocHost((void **)&h, bytes), "cudaMallocHost (memset)"))
        return;
    memset(h, 0x5a, bytes);
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate (memset)");
    check_cuda(cudaMemsetAsync(h + 50, 0x11, 5000, s), "cudaMemsetAsync on pinned memory");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (memset)");
    size_t i = 0;
    while (i < bytes && h[i] == ((i >= 50 && i < 5050) ? 0x11 : 0x5a))
        i++;
    check(i == bytes, "memset of pinned memory", "byte %zu is %#x", i, i < bytes ? h[i] : 0);

    void *dh = NULL;
    check(cuMemAllocHost(&dh, 8192) == CUDA_SUCCESS, "cuMemAllocHost", "failed");
    uint32_t *w = (uint32_t *)dh;
    for (int k = 0; k < 2048; k++)
        w[k] = 7;
    check(cuMemsetD32Async((CUdeviceptr)(uintptr_t)dh, 0xabcd, 1024, (CUstream)s) == CUDA_SUCCESS,
          "cuMemsetD32Async on pinned memory", "failed");
    check(cuStreamSynchronize((CUstream)s) == CUDA_SUCCESS, "cuStreamSynchronize", "failed");
    int k = 0;
    while (k < 2048 && w[k] == (k < 1024 ? 0xabcdu : 7u))
        k++;
    check(k == 2048, "cuMemsetD32Async of pinned memory", "word %d is %#x", k, k < 2048 ? w[k] : 0);
    // A kernel given the pinned pointer itself, as unified addressing allows.
    k_inc<<<blocks(1024), 256, 0, s>>>((int *)dh, 1024);
    check_cuda(cudaStreamSynchronize(s), "kernel on a pinned pointer");
    k = 0;
    while (k < 2048 && w[k] == (k < 1024 ? 0xabceu : 7u))
        k++;
    check(k == 2048, "kernel wrote pinned memory through its host pointer", "word %d is %#x", k,
          k < 2048 ? w[k] : 0);
    // Copies that name pinned memory as the device side, as unified
    // addressing allows: after a device call named it (its GPU copy) and
    // before (plain pinned memory: host to host).
    uint32_t back[1024];
    check(cuMemcpyDtoHAsync(back, (CUdeviceptr)(uintptr_t)dh, sizeof back, (CUstream)s) ==
              CUDA_SUCCESS && cuStreamSynchronize((CUstream)s) == CUDA_SUCCESS,
          "cuMemcpyDtoHAsync from pinned memory a kernel wrote", "failed");
    check(back[0] == 0xabceu && back[1023] == 0xabceu, "its bytes", "%#x %#x", back[0], back[1023]);
    void *fresh = NULL;
    check(cuMemAllocHost(&fresh, 4096) == CUDA_SUCCESS, "cuMemAllocHost (fresh)", "failed");
    memset(fresh, 0x3c, 4096);
    memset(back, 0, sizeof back);
    check(cuMemcpyDtoH(back, (CUdeviceptr)(uintptr_t)fresh, 4096) == CUDA_SUCCESS,
          "cuMemcpyDtoH from pinned memory no device call named", "failed");
    check(back[0] == 0x3c3c3c3cu && back[1023] == 0x3c3c3c3cu, "its bytes (host to host)",
          "%#x %#x", back[0], back[1023]);
    cuMemFreeHost(fresh);
    cuMemFreeHost(dh);
    cudaStreamDestroy(s);
    check_cuda(cudaFreeHost(h), "cudaFreeHost (memset)");
}

static void driver_mapped(void)
{
    int *h = NULL;
    CUdeviceptr d = 0;
    if (!check(cuMemHostAlloc((void **)&h, N * sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP) ==
                   CUDA_SUCCESS, "cuMemHostAlloc DEVICEMAP", "failed") ||
        !check(cuMemHostGetDevicePointer(&d, h, 0) == CUDA_SUCCESS, "cuMemHostGetDevicePointer",
               "failed"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = 11 * i;
    k_inc<<<blocks(N), 256>>>((int *)(uintptr_t)d, N);
    check(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize", "failed");
    check_values(h, 11, 1, "kernel wrote cuMemHostAlloc memory");
    check(cuMemFreeHost(h) == CUDA_SUCCESS, "cuMemFreeHost", "failed");
}

static void bad_inputs(void)
{
    int *plain = (int *)malloc(64), *d = NULL, *h = NULL;
    cudaError_t e = cudaHostGetDevicePointer((void **)&d, plain, 0);
    check(e == cudaErrorInvalidValue, "cudaHostGetDevicePointer of unregistered memory",
          "%s", cudaGetErrorName(e));
    cudaGetLastError();
    check_cuda(cudaHostAlloc((void **)&h, 64, cudaHostAllocMapped), "cudaHostAlloc (small)");
    e = cudaHostGetDevicePointer((void **)&d, h, 1);
    check(e == cudaErrorInvalidValue, "cudaHostGetDevicePointer with flags", "%s",
          cudaGetErrorName(e));
    cudaGetLastError();
    cudaFreeHost(h);
    free(plain);
}

// A reset frees mapped memory with everything else; what follows works.
static void after_reset(void)
{
    int *h = NULL, *d = NULL;
    check_cuda(cudaHostAlloc((void **)&h, 4096, cudaHostAllocMapped), "cudaHostAlloc before reset");
    h[0] = 1;
    check_cuda(cudaDeviceReset(), "cudaDeviceReset with mapped memory");
    check_cuda(cudaMalloc((void **)&d, 64), "cudaMalloc after reset");
    check_cuda(cudaMemset(d, 0, 64), "cudaMemset after reset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after reset");
    check_cuda(cudaFree(d), "cudaFree after reset");
}

int main(void)
{
    check_cuda(cudaSetDeviceFlags(cudaDeviceMapHost), "cudaSetDeviceFlags(cudaDeviceMapHost)");
    cudaDeviceProp prop;
    check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    check(prop.canMapHostMemory == 1, "canMapHostMemory", "%d", prop.canMapHostMemory);
    host_alloc_mapped();
    host_register_mapped();
    pinned_device_pointer();
    pinned_memset();
    driver_mapped();
    bad_inputs();
    after_reset();
    return check_failures ? 1 : 0;
}

// Stream-ordered allocation and the device's default memory pool, as
// PyTorch's cudaMallocAsync allocator uses them: pool attributes set and
// read (ints and 64-bit counts), allocations from the pool used with
// cudaMemcpyDefault (which needs the address known as device memory), the
// counts after freeing and trimming; and the driver's cuMemAllocAsync
// with cuMemcpy on unified addresses.
#include "check.h"

#include <cuda.h>
#include <string.h>

static bool round_trip_default(void *dev, size_t n, int seed)
{
    unsigned char host[4096], back[4096];
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(seed + i * 7);
    memset(back, 0, n);
    return cudaMemcpy(dev, host, n, cudaMemcpyDefault) == cudaSuccess &&
           cudaMemcpy(back, dev, n, cudaMemcpyDefault) == cudaSuccess && memcmp(host, back, n) == 0;
}

static cuuint64_t pool_u64(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
    cuuint64_t v = ~0ull;
    if (cudaMemPoolGetAttribute(pool, attr, &v) != cudaSuccess)
        return ~0ull;
    return v;
}

static void test_runtime_pool(void)
{
    cudaMemPool_t pool = NULL;
    cudaStream_t s = NULL;
    void *a = NULL, *b = NULL;
    int reuse = -1;

    if (!check_cuda(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool") ||
        !check_cuda(cudaStreamCreate(&s), "cudaStreamCreate"))
        return;
    cuuint64_t threshold = 64ull << 20;
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
               "set the release threshold");
    check(pool_u64(pool, cudaMemPoolAttrReleaseThreshold) == threshold,
          "the release threshold reads back", "%llu",
          (unsigned long long)pool_u64(pool, cudaMemPoolAttrReleaseThreshold));
    int off = 0;
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off),
               "set an int attribute");
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse) ==
              cudaSuccess && reuse == 0, "the int attribute reads back", "%d", reuse);

    check_cuda(cudaMallocAsync(&a, 1 << 20, s), "cudaMallocAsync 1 MiB");
    check_cuda(cudaMallocFromPoolAsync(&b, 4096, pool, s), "cudaMallocFromPoolAsync 4 KiB");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    check(pool_u64(pool, cudaMemPoolAttrUsedMemCurrent) >= (1 << 20) + 4096,
          "the pool counts what is in use", "%llu",
          (unsigned long long)pool_u64(pool, cudaMemPoolAttrUsedMemCurrent));
    check(round_trip_default(a, 4096, 1), "cudaMemcpyDefault with cudaMallocAsync memory",
          "data differ");
    check(round_trip_default(b, 4096, 2), "cudaMemcpyDefault with pool memory", "data differ");

    check_cuda(cudaFreeAsync(a, s), "cudaFreeAsync 1 MiB");
    check_cuda(cudaFreeAsync(b, s), "cudaFreeAsync 4 KiB");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after the frees");
    check(pool_u64(pool, cudaMemPoolAttrUsedMemCurrent) == 0, "nothing in use after the frees",
          "%llu", (unsigned long long)pool_u64(pool, cudaMemPoolAttrUsedMemCurrent));
    check_cuda(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo 0");
    check(pool_u64(pool, cudaMemPoolAttrReservedMemCurrent) == 0, "nothing reserved after trimming",
          "%llu", (unsigned long long)pool_u64(pool, cudaMemPoolAttrReservedMemCurrent));
    check(pool_u64(pool, cudaMemPoolAttrUsedMemHigh) >= (1 << 20) + 4096,
          "the high-water mark remembers", "%llu",
          (unsigned long long)pool_u64(pool, cudaMemPoolAttrUsedMemHigh));
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
}

// The driver's stream-ordered allocation, with cuMemcpy on unified
// addresses: host memory on one side, the async allocation on the other.
static void test_driver_async(void)
{
    CUdeviceptr d = 0;
    unsigned char host[4096], back[4096];
    for (int i = 0; i < 4096; i++)
        host[i] = (unsigned char)(i * 13 + 5);
    memset(back, 0, sizeof back);
    if (!check(cuMemAllocAsync(&d, sizeof host, NULL) == CUDA_SUCCESS, "cuMemAllocAsync",
               "failed"))
        return;
    check(cuStreamSynchronize(NULL) == CUDA_SUCCESS, "cuStreamSynchronize", "failed");
    check(cuMemcpy(d, (CUdeviceptr)(uintptr_t)host, sizeof host) == CUDA_SUCCESS &&
              cuMemcpy((CUdeviceptr)(uintptr_t)back, d, sizeof back) == CUDA_SUCCESS &&
              memcmp(host, back, sizeof host) == 0,
          "cuMemcpy between host memory and cuMemAllocAsync memory", "data differ");
    check(cuMemFreeAsync(d, NULL) == CUDA_SUCCESS, "cuMemFreeAsync", "failed");
    check(cuStreamSynchronize(NULL) == CUDA_SUCCESS, "cuStreamSynchronize after the free",
          "failed");
}

int main()
{
    check_cuda(cudaFree(0), "the runtime's context");
    test_runtime_pool();
    test_driver_async();
    return check_exit_status();
}

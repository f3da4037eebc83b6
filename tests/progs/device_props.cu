// Device discovery: count, properties, attributes (which must agree with
// the properties), versions, and a driver function obtained through
// cudaGetDriverEntryPoint(ByVersion) -- how PyTorch reaches the driver API.
// rgpu answers much of this from a snapshot taken at connect time, so the
// agreement checks catch a stale or misaligned snapshot.  Only fields that
// are fixed for a given machine are printed.
#include <stddef.h>
#include <cuda.h>   // CUresult, for calling the entry point
#include "check.h"

typedef CUresult (*get_count_fn)(int *);

int main(void)
{
    int count = 0, dev = -1;
    char name[320];

    cudaError_t e = cudaGetDeviceCount(&count);
    if (!check(e == cudaSuccess && count >= 1, "cudaGetDeviceCount >= 1", "%s, count %d",
               cudaGetErrorName(e), count))
        return 1;
    check_cuda(cudaSetDevice(0), "cudaSetDevice(0)");
    e = cudaGetDevice(&dev);
    check(e == cudaSuccess && dev == 0, "cudaGetDevice", "%s, device %d", cudaGetErrorName(e), dev);

    struct cudaDeviceProp p;
    if (!check_cuda(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties"))
        return 1;
    check(p.name[0] != 0, fmt_name(name, sizeof name, "name %s", p.name), "empty");
    check(p.major >= 1, fmt_name(name, sizeof name, "major %d", p.major), "too small");
    check(p.minor >= 0, fmt_name(name, sizeof name, "minor %d", p.minor), "negative");
    check(p.totalGlobalMem > 0, fmt_name(name, sizeof name, "totalGlobalMem %zu", p.totalGlobalMem), "zero");
    check(p.multiProcessorCount > 0,
          fmt_name(name, sizeof name, "multiProcessorCount %d", p.multiProcessorCount), "zero");
    check(p.warpSize == 32, fmt_name(name, sizeof name, "warpSize %d", p.warpSize), "not 32");
    check(p.maxThreadsPerBlock >= 1024,
          fmt_name(name, sizeof name, "maxThreadsPerBlock %d", p.maxThreadsPerBlock), "below 1024");

    // Attributes read one by one must agree with the property block.
    static const struct { cudaDeviceAttr attr; const char *name; size_t off; } attrs[] = {
#define A(a, f) {a, #a, offsetof(struct cudaDeviceProp, f)}
        A(cudaDevAttrComputeCapabilityMajor, major),
        A(cudaDevAttrComputeCapabilityMinor, minor),
        A(cudaDevAttrMultiProcessorCount, multiProcessorCount),
        A(cudaDevAttrWarpSize, warpSize),
        A(cudaDevAttrMaxThreadsPerBlock, maxThreadsPerBlock),
        A(cudaDevAttrMaxBlockDimX, maxThreadsDim[0]),
        A(cudaDevAttrMaxGridDimY, maxGridSize[1]),
        A(cudaDevAttrL2CacheSize, l2CacheSize),
        A(cudaDevAttrPciBusId, pciBusID),
        A(cudaDevAttrMaxThreadsPerMultiProcessor, maxThreadsPerMultiProcessor),
#undef A
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = -1, want = *(const int *)((const char *)&p + attrs[i].off);
        e = cudaDeviceGetAttribute(&v, attrs[i].attr, 0);
        check(e == cudaSuccess && v == want,
              fmt_name(name, sizeof name, "cudaDeviceGetAttribute %s matches props", attrs[i].name),
              "%s, attribute %d, property %d", cudaGetErrorName(e), v, want);
    }
    int shmem = -1;
    e = cudaDeviceGetAttribute(&shmem, cudaDevAttrMaxSharedMemoryPerBlock, 0);
    check(e == cudaSuccess && (size_t)shmem == p.sharedMemPerBlock,
          "cudaDeviceGetAttribute cudaDevAttrMaxSharedMemoryPerBlock matches props",
          "%s, attribute %d, property %zu", cudaGetErrorName(e), shmem, p.sharedMemPerBlock);

    // Versions: only their sanity is printed, the values vary by machine.
    int drv = 0, rt = 0;
    e = cudaDriverGetVersion(&drv);
    check(e == cudaSuccess && drv > 0, "cudaDriverGetVersion > 0", "%s, %d", cudaGetErrorName(e), drv);
    e = cudaRuntimeGetVersion(&rt);
    check(e == cudaSuccess && rt > 0, "cudaRuntimeGetVersion > 0", "%s, %d", cudaGetErrorName(e), rt);
    check(rt / 1000 == CUDART_VERSION / 1000, "runtime major matches the headers", "runtime %d, headers %d",
          rt, CUDART_VERSION);

    // The driver's cuDeviceGetCount, reached through the runtime, must be
    // callable and agree with cudaGetDeviceCount.  12000 is below any
    // driver that runs a CUDA 13 runtime and above cuDeviceGetCount's debut.
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    e = cudaGetDriverEntryPointByVersion("cuDeviceGetCount", &fn, 12000, cudaEnableDefault, &q);
    if (check(e == cudaSuccess && q == cudaDriverEntryPointSuccess && fn,
              "cudaGetDriverEntryPointByVersion cuDeviceGetCount", "%s, status %d, fn %s",
              cudaGetErrorName(e), (int)q, fn ? "set" : "NULL")) {
        int n = -1;
        CUresult r = ((get_count_fn)fn)(&n);
        check(r == CUDA_SUCCESS && n == count, "cuDeviceGetCount via entry point matches",
              "CUresult %d, count %d, want %d", (int)r, n, count);
    }

    fn = NULL;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    e = cudaGetDriverEntryPoint("cuDeviceGetCount", &fn, cudaEnableDefault, &q);
#pragma GCC diagnostic pop
    if (check(e == cudaSuccess && q == cudaDriverEntryPointSuccess && fn,
              "cudaGetDriverEntryPoint cuDeviceGetCount", "%s, status %d, fn %s",
              cudaGetErrorName(e), (int)q, fn ? "set" : "NULL")) {
        int n = -1;
        CUresult r = ((get_count_fn)fn)(&n);
        check(r == CUDA_SUCCESS && n == count, "cuDeviceGetCount via deprecated entry point matches",
              "CUresult %d, count %d, want %d", (int)r, n, count);
    }

    // An unknown symbol is not an error: success, NULL, "not found".
    fn = (void *)&count;
    e = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &q);
    check(e == cudaSuccess && q == cudaDriverEntryPointSymbolNotFound && !fn,
          "cudaGetDriverEntryPointByVersion unknown symbol", "%s, status %d, fn %s",
          cudaGetErrorName(e), (int)q, fn ? "set" : "NULL");

    return check_exit_status();
}

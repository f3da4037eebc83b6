// The driver API as PyTorch, Triton and NVRTC users drive it: contexts
// (created and primary), memory, a module loaded from a fatbin embedded in
// the program (kernels.cuh compiled with `nvcc -fatbin` at build time),
// parameter layout queries, launches with kernelParams and with `extra`,
// libraries and CUkernel handles, streams and events, and the virtual
// memory calls behind PyTorch's expandable segments.  Link with -lcuda.
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include "check.h"
#include "kernels_fatbin.h"   // generated: const unsigned char kernels_fatbin[]

#define N 4096
#define THREADS 256
#define BLOCKS ((N + THREADS - 1) / THREADS)

// Mangled names of kernels in kernels.cuh.
static const char AXPY[] = "_Z6k_axpyfPKfPfi";     // k_axpy(float, const float*, float*, int)
static const char FILL[] = "_Z10k_fill_u32Pjjy";   // k_fill_u32(uint32_t*, uint32_t, unsigned long long)

// Copies n u32 back from d and checks they all equal want.
static void check_u32(CUdeviceptr d, size_t n, uint32_t want, const char *name)
{
    uint32_t *h = (uint32_t *)malloc(n * sizeof *h);
    CUresult r = cuMemcpyDtoH(h, d, n * sizeof *h);
    size_t i = 0;
    while (r == CUDA_SUCCESS && i < n && h[i] == want)
        i++;
    if (r != CUDA_SUCCESS)
        check_cu(r, name);
    else
        check(i == n, name, "element %zu is 0x%x, want 0x%x", i, i < n ? h[i] : 0, want);
    free(h);
}

// Checks y[i] == k * i for i < N.
static void check_axpy(CUdeviceptr y, int k, const char *name)
{
    float h[N];
    CUresult r = cuMemcpyDtoH(h, y, sizeof h);
    int i = 0;
    while (r == CUDA_SUCCESS && i < N && h[i] == (float)(k * i))
        i++;
    if (r != CUDA_SUCCESS)
        check_cu(r, name);
    else
        check(i == N, name, "y[%d] = %g, want %d", i, i < N ? h[i] : 0.0f, k * i);
}

static void test_device(CUdevice *dev)
{
    int drv = 0, count = 0, major = 0;
    char devname[256] = "", name[320];
    size_t total = 0;

    CUresult r = cuDriverGetVersion(&drv);
    check(r == CUDA_SUCCESS && drv > 0, "cuDriverGetVersion > 0", "result %d, version %d", (int)r, drv);
    r = cuDeviceGetCount(&count);
    check(r == CUDA_SUCCESS && count >= 1, "cuDeviceGetCount >= 1", "result %d, count %d", (int)r, count);
    check_cu(cuDeviceGet(dev, 0), "cuDeviceGet(0)");
    check_cu(cuDeviceGetName(devname, sizeof devname, *dev), "cuDeviceGetName");
    check(devname[0] != 0, fmt_name(name, sizeof name, "device name %s", devname), "empty");
    r = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *dev);
    check(r == CUDA_SUCCESS && major > 0, fmt_name(name, sizeof name, "compute capability major %d", major),
          "result %d", (int)r);
    r = cuDeviceTotalMem(&total, *dev);
    check(r == CUDA_SUCCESS && total > 0, "cuDeviceTotalMem > 0", "result %d, %zu", (int)r, total);
}

// A context of our own: created current, usable, popped when destroyed.
static void test_ctx_create(CUdevice dev)
{
    CUcontext ctx = NULL, cur = NULL;
    CUdevice d = -1;
    CUdeviceptr p = 0;

    if (!check_cu(cuCtxCreate(&ctx, NULL, 0, dev), "cuCtxCreate"))
        return;
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx, "cuCtxGetCurrent is the new context",
          "another context is current");
    CUresult r = cuCtxGetDevice(&d);
    check(r == CUDA_SUCCESS && d == dev, "cuCtxGetDevice", "result %d, device %d", (int)r, (int)d);
    check_cu(cuMemAlloc(&p, 4096), "cuMemAlloc in created context");
    check_cu(cuMemsetD32(p, 0x01020304, 1024), "cuMemsetD32 in created context");
    check_u32(p, 1024, 0x01020304, "created context data");
    check_cu(cuMemFree(p), "cuMemFree in created context");
    check_cu(cuCtxSynchronize(), "cuCtxSynchronize");
    check_cu(cuCtxDestroy(ctx), "cuCtxDestroy");
    cur = ctx;
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "no current context after cuCtxDestroy",
          "a context is still current");
}

// The primary context's state follows retains, releases, resets and flags;
// the current context follows set, push and pop.  rgpu answers both from a
// cache: each change must show at once.
static void test_primary_state(CUdevice dev)
{
    CUcontext pctx = NULL, ctx = NULL, cur = NULL;
    unsigned flags = 0;
    int active = -1;

    check(cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active == 0,
          "primary context inactive before its first retain", "active %d", active);
    if (!check_cu(cuDevicePrimaryCtxRetain(&pctx, dev), "cuDevicePrimaryCtxRetain"))
        return;
    for (int i = 0; i < 2; i++)
        check(cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active == 1,
              "primary context active after a retain", "active %d", active);
    check_cu(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC), "cuDevicePrimaryCtxSetFlags");
    check(cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS &&
          (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC,
          "primary context flags as set", "flags 0x%x", flags);
    check_cu(cuDevicePrimaryCtxSetFlags(dev, 0), "cuDevicePrimaryCtxSetFlags 0");

    check_cu(cuCtxSetCurrent(pctx), "cuCtxSetCurrent primary");
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == pctx, "current: primary", "another");
    if (check_cu(cuCtxCreate(&ctx, NULL, 0, dev), "cuCtxCreate")) {
        check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx, "current: created", "another");
        check_cu(cuCtxPushCurrent(pctx), "cuCtxPushCurrent primary");
        check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == pctx, "current: pushed", "another");
        check_cu(cuCtxPopCurrent(&cur), "cuCtxPopCurrent");
        check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx, "current: after pop", "another");
        check_cu(cuCtxDestroy(ctx), "cuCtxDestroy");
    }
    check_cu(cuCtxSetCurrent(NULL), "cuCtxSetCurrent NULL");
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "current: none", "a context");

    check_cu(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    check(cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active == 0,
          "primary context inactive after its last release", "active %d", active);
    check_cu(cuDevicePrimaryCtxRetain(&pctx, dev), "cuDevicePrimaryCtxRetain again");
    check(cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active == 1,
          "primary context active again", "active %d", active);
    check_cu(cuDevicePrimaryCtxReset(dev), "cuDevicePrimaryCtxReset");
    // Whether a reset deactivates a context still retained is the driver's
    // business: print it, for the native and remote runs to agree on.
    active = -1;
    check_cu(cuDevicePrimaryCtxGetState(dev, &flags, &active), "cuDevicePrimaryCtxGetState");
    printf("info: primary context after a reset: active %d\n", active);
    check_cu(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease after the reset");
}

static void test_memory(void)
{
    CUdeviceptr d1 = 0, d2 = 0;
    uint32_t h[N];
    size_t free_b = 0, total_b = 0;

    if (!check_cu(cuMemAlloc(&d1, N * 4), "cuMemAlloc d1") || !check_cu(cuMemAlloc(&d2, N * 4), "cuMemAlloc d2"))
        return;
    check_cu(cuMemsetD32(d1, 0xdeadbeef, N), "cuMemsetD32");
    check_u32(d1, N, 0xdeadbeef, "cuMemsetD32 data");
    for (int i = 0; i < N; i++)
        h[i] = 0x5000000u + (uint32_t)i * 7919u;
    check_cu(cuMemcpyHtoD(d1, h, sizeof h), "cuMemcpyHtoD");
    check_cu(cuMemcpyDtoD(d2, d1, sizeof h), "cuMemcpyDtoD");
    uint32_t back[N];
    memset(back, 0, sizeof back);
    check_cu(cuMemcpyDtoH(back, d2, sizeof back), "cuMemcpyDtoH");
    check(memcmp(back, h, sizeof h) == 0, "HtoD/DtoD/DtoH data", "mismatch");
    CUresult r = cuMemGetInfo(&free_b, &total_b);
    check(r == CUDA_SUCCESS && total_b > 0 && free_b <= total_b, "cuMemGetInfo free <= total",
          "result %d, free %zu total %zu", (int)r, free_b, total_b);
    check_cu(cuMemFree(d1), "cuMemFree d1");
    check_cu(cuMemFree(d2), "cuMemFree d2");
}

// Large copies (through rgpu they stream in pieces): an odd size, on the
// null stream and on a stream of the program's.
static void test_big_copies(void)
{
    const size_t n = ((size_t)5 << 20) + 12345;
    CUdeviceptr d = 0;
    CUstream s = NULL;
    unsigned char *h = (unsigned char *)malloc(n), *back = (unsigned char *)malloc(n);
    if (!h || !back || !check_cu(cuMemAlloc(&d, n), "cuMemAlloc big") ||
        !check_cu(cuStreamCreate(&s, 0), "cuStreamCreate big")) {
        free(h);
        free(back);
        return;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(i ^ (i >> 9) ^ (i >> 17));
    memset(back, 0, n);
    check_cu(cuMemcpyHtoD(d, h, n), "cuMemcpyHtoD big");
    check_cu(cuMemcpyDtoH(back, d, n), "cuMemcpyDtoH big");
    check(memcmp(back, h, n) == 0, "big HtoD/DtoH data", "mismatch");
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)~h[i];
    memset(back, 0, n);
    check_cu(cuMemcpyHtoDAsync(d, h, n, s), "cuMemcpyHtoDAsync big");
    check_cu(cuMemcpyDtoHAsync(back, d, n, s), "cuMemcpyDtoHAsync big");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize big");
    check(memcmp(back, h, n) == 0, "big async HtoD/DtoH data", "mismatch");
    check_cu(cuStreamDestroy(s), "cuStreamDestroy big");
    check_cu(cuMemFree(d), "cuMemFree big");
    free(h);
    free(back);
}

// cuModuleLoadData + cuModuleGetFunction + cuFuncGetParamInfo, then k_axpy
// launched with kernelParams and with a packed `extra` buffer.
static void test_module(const void *image)
{
    CUmodule mod;
    CUfunction f, nf;
    CUdeviceptr x, y;
    float h[N];
    char name[128];

    if (!check_cu(cuModuleLoadData(&mod, image), "cuModuleLoadData fatbin") ||
        !check_cu(cuModuleGetFunction(&f, mod, AXPY), "cuModuleGetFunction k_axpy"))
        return;
    check_cu_is(cuModuleGetFunction(&nf, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND,
                "cuModuleGetFunction unknown name");

    // (float, pointer, pointer, int): the pointers are 8-aligned.
    static const size_t want_off[4] = {0, 8, 16, 24}, want_size[4] = {4, 8, 8, 4};
    size_t off[4] = {0}, size[4] = {0};
    for (int i = 0; i < 4; i++) {
        CUresult r = cuFuncGetParamInfo(f, i, &off[i], &size[i]);
        check(r == CUDA_SUCCESS && off[i] == want_off[i] && size[i] == want_size[i],
              fmt_name(name, sizeof name, "cuFuncGetParamInfo k_axpy %d", i), "result %d, offset %zu size %zu",
              (int)r, off[i], size[i]);
    }
    check_cu_is(cuFuncGetParamInfo(f, 4, &off[0], &size[0]), CUDA_ERROR_INVALID_VALUE,
                "cuFuncGetParamInfo past the last parameter");

    if (!check_cu(cuMemAlloc(&x, sizeof h), "cuMemAlloc x") || !check_cu(cuMemAlloc(&y, sizeof h), "cuMemAlloc y"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = (float)i;
    check_cu(cuMemcpyHtoD(x, h, sizeof h), "cuMemcpyHtoD x");
    for (int i = 0; i < N; i++)
        h[i] = (float)(2 * i);
    check_cu(cuMemcpyHtoD(y, h, sizeof h), "cuMemcpyHtoD y");

    float a = 3.0f;
    int n = N;
    void *params[] = {&a, &x, &y, &n};
    check_cu_is(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE,
                "cuLaunchKernel 2048 threads per block");
    check_cu(cuLaunchKernel(f, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel kernelParams");
    check_axpy(y, 5, "k_axpy via kernelParams");

    // The same arguments packed by hand at the offsets the driver reported;
    // the buffer size is where the last parameter ends.
    alignas(8) unsigned char buf[32];
    memset(buf, 0, sizeof buf);
    memcpy(buf + want_off[0], &a, 4);
    memcpy(buf + want_off[1], &x, 8);
    memcpy(buf + want_off[2], &y, 8);
    memcpy(buf + want_off[3], &n, 4);
    size_t buf_size = want_off[3] + want_size[3];
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size,
                     CU_LAUNCH_PARAM_END};
    check_cu(cuLaunchKernel(f, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, NULL, extra), "cuLaunchKernel extra");
    check_axpy(y, 8, "k_axpy via extra");

    check_cu(cuMemFree(x), "cuMemFree x");
    check_cu(cuMemFree(y), "cuMemFree y");
    check_cu(cuModuleUnload(mod), "cuModuleUnload");
}

// A 64-aligned 128-byte parameter (a TMA descriptor's shape) after a
// pointer and an int, as XLA launches its TMA kernels: its offset from
// cuFuncGetParamInfo, and its bytes as the kernel sees them after a
// launch with kernelParams, cuLaunchKernelEx with programmatic stream
// serialisation on a non-blocking stream (XLA's PDL launches), and a
// packed `extra` buffer.
static const char PARAM_MAP[] = "_Z11k_param_mapPyi13rgpu_test_map";
struct alignas(64) rgpu_test_map {  // as kernels.cuh declares it for the kernel
    unsigned long long w[16];
};

static void check_map_seen(CUdeviceptr out, const struct rgpu_test_map *m, int tag,
                           const char *how)
{
    unsigned long long seen[17];
    char name[160];
    memset(seen, 0, sizeof seen);
    check_cu(cuMemcpyDtoH(seen, out, sizeof seen),
             fmt_name(name, sizeof name, "k_param_map via %s: read back", how));
    int i = 0;
    while (i < 16 && seen[i] == m->w[i])
        i++;
    check(i == 16 && seen[16] == (unsigned long long)tag,
          fmt_name(name, sizeof name, "k_param_map via %s: the kernel saw the map and the int",
                   how), "word %d is %#llx, tag %llu", i, i < 16 ? seen[i] : 0, seen[16]);
}

static void test_map_param(const void *image)
{
    CUmodule mod;
    CUfunction f;
    CUdeviceptr out;
    CUstream s;
    char name[128];
    if (!check_cu(cuModuleLoadData(&mod, image), "cuModuleLoadData (map parameter)") ||
        !check_cu(cuModuleGetFunction(&f, mod, PARAM_MAP), "cuModuleGetFunction k_param_map") ||
        !check_cu(cuMemAlloc(&out, 17 * 8), "cuMemAlloc (map parameter)") ||
        !check_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (map parameter)"))
        return;
    // Where the image puts the map (nvcc aligns it less than the type's 64)
    // is the driver's answer; the packed buffer below follows it.
    size_t off[3] = {0}, size[3] = {0};
    static const size_t want_size[3] = {8, 4, 128};
    for (int i = 0; i < 3; i++) {
        CUresult r = cuFuncGetParamInfo(f, i, &off[i], &size[i]);
        check(r == CUDA_SUCCESS && size[i] == want_size[i] &&
                  (i == 0 || (off[i] >= off[i - 1] + size[i - 1] && off[i] % (i == 2 ? 16 : 4) == 0)),
              fmt_name(name, sizeof name, "cuFuncGetParamInfo k_param_map %d", i),
              "result %d, offset %zu size %zu", (int)r, off[i], size[i]);
    }
    struct rgpu_test_map m;
    for (int i = 0; i < 16; i++)
        m.w[i] = 0x0101010101010101ull * (unsigned)(i + 1) + 0x8000000000000000ull;
    int tag = 77;
    void *params[] = {&out, &tag, &m};
    check_cu(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL),
             "cuLaunchKernel k_param_map");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize (map parameter)");
    check_map_seen(out, &m, tag, "kernelParams");

    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    m.w[15] ^= 0xffff;
    tag = 78;
    check_cu(cuLaunchKernelEx(&cfg, f, params, NULL), "cuLaunchKernelEx k_param_map with PDL");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize (PDL)");
    check_map_seen(out, &m, tag, "cuLaunchKernelEx with programmatic stream serialisation");

    alignas(64) unsigned char buf[192];
    memset(buf, 0, sizeof buf);
    m.w[0] ^= 0xffff;
    tag = 79;
    memcpy(buf + off[0], &out, 8);
    memcpy(buf + off[1], &tag, 4);
    if (off[2] + 128 <= sizeof buf)
        memcpy(buf + off[2], &m, 128);
    size_t buf_size = off[2] + 128;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size,
                     CU_LAUNCH_PARAM_END};
    check_cu(cuLaunchKernelEx(&cfg, f, NULL, extra), "cuLaunchKernelEx k_param_map extra");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize (extra)");
    check_map_seen(out, &m, tag, "a packed extra buffer");

    // A configuration the driver refuses for this function (more dynamic
    // shared memory than it may use without opting in) fails at the launch,
    // also after launches of it that went through, and with the attribute
    // XLA's launches carry; once the function may use that much, the
    // launch goes through, and after the limit is lowered again it fails
    // again.  (A late failure would let XLA's autotuner time a launch that
    // did nothing as its fastest candidate.)
    const unsigned big = 64 << 10;
    check_cu_is(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, big, s, params, NULL), CUDA_ERROR_INVALID_VALUE,
                "cuLaunchKernel with 64 KiB of dynamic shared memory, not opted in");
    cfg.sharedMemBytes = big;
    check_cu_is(cuLaunchKernelEx(&cfg, f, params, NULL), CUDA_ERROR_INVALID_VALUE,
                "cuLaunchKernelEx (programmatic stream serialisation) with 64 KiB, not opted in");
    check_cu(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)big),
             "cuFuncSetAttribute max dynamic shared memory 64 KiB");
    tag = 80;
    check_cu(cuLaunchKernelEx(&cfg, f, params, NULL), "cuLaunchKernelEx with 64 KiB, opted in");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize (opted in)");
    check_map_seen(out, &m, tag, "a launch with 64 KiB of dynamic shared memory");
    check_cu(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0),
             "cuFuncSetAttribute max dynamic shared memory back to 0");
    check_cu_is(cuLaunchKernelEx(&cfg, f, params, NULL), CUDA_ERROR_INVALID_VALUE,
                "cuLaunchKernelEx with 64 KiB after the limit was lowered");
    check_cu(cuStreamSynchronize(s), "cuStreamSynchronize after the refused launches");

    check_cu(cuStreamDestroy(s), "cuStreamDestroy (map parameter)");
    check_cu(cuMemFree(out), "cuMemFree (map parameter)");
    check_cu(cuModuleUnload(mod), "cuModuleUnload (map parameter)");
}

// cuLibraryLoadData + cuLibraryGetKernel; a CUkernel passed to
// cuLaunchKernel as a CUfunction; then streams and events around it.
static void test_library(const void *image)
{
    CUlibrary lib;
    CUkernel k;
    CUfunction kf;
    CUdeviceptr d, d2;
    char name[128];

    if (!check_cu(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData fatbin") ||
        !check_cu(cuLibraryGetKernel(&k, lib, FILL), "cuLibraryGetKernel k_fill_u32"))
        return;

    static const size_t want_off[3] = {0, 8, 16}, want_size[3] = {8, 4, 8};
    for (int i = 0; i < 3; i++) {
        size_t off = 0, size = 0;
        CUresult r = cuKernelGetParamInfo(k, i, &off, &size);
        check(r == CUDA_SUCCESS && off == want_off[i] && size == want_size[i],
              fmt_name(name, sizeof name, "cuKernelGetParamInfo k_fill_u32 %d", i), "result %d, offset %zu size %zu",
              (int)r, off, size);
    }

    if (!check_cu(cuMemAlloc(&d, N * 4), "cuMemAlloc d") || !check_cu(cuMemAlloc(&d2, N * 4), "cuMemAlloc d2"))
        return;
    uint32_t v = 0xC0FFEE01;
    unsigned long long n = N;
    void *params[] = {&d, &v, &n};
    check_cu(cuLaunchKernel((CUfunction)k, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel CUkernel");
    check_u32(d, N, v, "k_fill_u32 via CUkernel");

    v = 0xC0FFEE02;
    check_cu(cuKernelGetFunction(&kf, k), "cuKernelGetFunction");
    check_cu(cuLaunchKernel(kf, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel cuKernelGetFunction");
    check_u32(d, N, v, "k_fill_u32 via cuKernelGetFunction");

    // Streams and events: s fills d and records `done`; s2 waits for it,
    // copies d to d2 and reads d2 back into pinned memory.
    CUstream s, s2;
    CUevent start, done;
    uint32_t *pinned = NULL;
    check_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate s");
    check_cu(cuStreamCreate(&s2, CU_STREAM_DEFAULT), "cuStreamCreate s2");
    check_cu(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate start");
    check_cu(cuEventCreate(&done, CU_EVENT_DEFAULT), "cuEventCreate done");
    check_cu(cuMemAllocHost((void **)&pinned, N * 4), "cuMemAllocHost");
    v = 0xC0FFEE03;
    check_cu(cuEventRecord(start, s), "cuEventRecord start");
    check_cu(cuLaunchKernel((CUfunction)k, BLOCKS, 1, 1, THREADS, 1, 1, 0, s, params, NULL),
             "cuLaunchKernel on stream");
    check_cu(cuEventRecord(done, s), "cuEventRecord done");
    check_cu(cuStreamWaitEvent(s2, done, 0), "cuStreamWaitEvent");
    check_cu(cuMemcpyDtoDAsync(d2, d, N * 4, s2), "cuMemcpyDtoDAsync");
    check_cu(cuMemcpyDtoHAsync(pinned, d2, N * 4, s2), "cuMemcpyDtoHAsync");
    check_cu(cuStreamSynchronize(s2), "cuStreamSynchronize s2");
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (pinned[i] != v)
            bad = i;
    check(bad < 0, "stream s2 sees s's fill after the event", "element %d is 0x%x", bad, bad < 0 ? 0 : pinned[bad]);
    check_cu(cuEventSynchronize(done), "cuEventSynchronize");
    check_cu_is(cuEventQuery(done), CUDA_SUCCESS, "cuEventQuery after sync");
    check_cu_is(cuStreamQuery(s), CUDA_SUCCESS, "cuStreamQuery after sync");
    float ms = -1;
    CUresult r = cuEventElapsedTime(&ms, start, done);
    check(r == CUDA_SUCCESS && ms >= 0, "cuEventElapsedTime >= 0", "result %d, %f ms", (int)r, ms);

    check_cu(cuEventDestroy(start), "cuEventDestroy start");
    check_cu(cuEventDestroy(done), "cuEventDestroy done");
    check_cu(cuStreamDestroy(s), "cuStreamDestroy s");
    check_cu(cuStreamDestroy(s2), "cuStreamDestroy s2");
    check_cu(cuMemFreeHost(pinned), "cuMemFreeHost");
    check_cu(cuMemFree(d), "cuMemFree d");
    check_cu(cuMemFree(d2), "cuMemFree d2");
    check_cu(cuLibraryUnload(lib), "cuLibraryUnload");
}

// The virtual memory calls of PyTorch's allocator (cuMemCreate found via
// cuGetProcAddress, as PyTorch does), then cuMemcpy and a kernel on the
// mapped range: rgpu must know the range is device memory.
static void test_vmm(CUdevice dev, const void *image)
{
    typedef decltype(&cuMemCreate) mem_create_fn;
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuGetProcAddress("cuMemCreate", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if (!check(r == CUDA_SUCCESS && q == CU_GET_PROC_ADDRESS_SUCCESS && fn, "cuGetProcAddress cuMemCreate",
               "result %d, status %d", (int)r, (int)q))
        return;

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (!check(r == CUDA_SUCCESS && gran > 0, "cuMemGetAllocationGranularity", "result %d", (int)r))
        return;
    const size_t size = 2 * gran;

    CUmemGenericAllocationHandle handle;
    CUdeviceptr va = 0;
    if (!check_cu(((mem_create_fn)fn)(&handle, size, &prop, 0), "cuMemCreate") ||
        !check_cu(cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve") ||
        !check_cu(cuMemMap(va, size, 0, handle, 0), "cuMemMap"))
        return;
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check_cu(cuMemSetAccess(va, size, &acc, 1), "cuMemSetAccess");

    // cuMemcpy infers directions from the addresses: host -> mapped range
    // -> host.
    uint8_t *src = (uint8_t *)malloc(size), *dst = (uint8_t *)malloc(size);
    for (size_t i = 0; i < size; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 12));
    memset(dst, 0, size);
    check_cu(cuMemcpy(va, (CUdeviceptr)src, size), "cuMemcpy host to mapped range");
    check_cu(cuMemcpy((CUdeviceptr)dst, va, size), "cuMemcpy mapped range to host");
    check(memcmp(src, dst, size) == 0, "mapped range data", "mismatch");

    // A kernel writing into the second granule of the mapped range.
    CUmodule mod;
    CUfunction fill;
    if (check_cu(cuModuleLoadData(&mod, image), "cuModuleLoadData for vmm") &&
        check_cu(cuModuleGetFunction(&fill, mod, FILL), "cuModuleGetFunction k_fill_u32")) {
        CUdeviceptr p = va + gran;
        uint32_t v = 0x7777AAAA;
        unsigned long long n = gran / 4;
        void *params[] = {&p, &v, &n};
        check_cu(cuLaunchKernel(fill, (unsigned)((n + THREADS - 1) / THREADS), 1, 1, THREADS, 1, 1, 0, NULL,
                                params, NULL),
                 "cuLaunchKernel into mapped range");
        check_u32(p, n, v, "k_fill_u32 in mapped range");
        check_u32(va, 1, *(const uint32_t *)src, "first granule untouched");
        check_cu(cuModuleUnload(mod), "cuModuleUnload vmm");
    }

    check_cu(cuMemUnmap(va, size), "cuMemUnmap");
    check_cu(cuMemRelease(handle), "cuMemRelease");
    check_cu(cuMemAddressFree(va, size), "cuMemAddressFree");
    free(src);
    free(dst);
}

int main(void)
{
    CUdevice dev = 0;
    CUcontext pctx = NULL, cur = NULL;

    // The generated array has no alignment guarantee; the fatbin header
    // holds 64-bit fields, so hand the driver an 8-aligned copy.
    void *image = malloc(sizeof kernels_fatbin);
    memcpy(image, kernels_fatbin, sizeof kernels_fatbin);

    if (!check_cu(cuInit(0), "cuInit"))
        return 1;
    test_device(&dev);
    test_ctx_create(dev);
    test_primary_state(dev);

    if (!check_cu(cuDevicePrimaryCtxRetain(&pctx, dev), "cuDevicePrimaryCtxRetain") ||
        !check_cu(cuCtxSetCurrent(pctx), "cuCtxSetCurrent primary"))
        return 1;
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == pctx, "cuCtxGetCurrent is the primary context",
          "another context is current");

    test_memory();
    test_big_copies();
    test_module(image);
    test_map_param(image);
    test_library(image);
    test_vmm(dev, image);

    check_cu(cuCtxSynchronize(), "cuCtxSynchronize");
    check_cu(cuCtxSetCurrent(NULL), "cuCtxSetCurrent NULL");
    check_cu(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    free(image);
    return check_exit_status();
}

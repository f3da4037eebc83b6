// The driver's older entry points, reached as programs built against older
// headers reach them: by name (dlsym, as FFmpeg and ctypes programs load
// the driver) and through cuGetProcAddress with an older CUDA version.
// libcuda.so.1 still exports them for such programs; cuda.h maps every
// name to its newest form, so this program names them itself.  Also: a
// context from cuCtxCreate_v4 with NULL and with zeroed parameters, and the
// profiler's start and stop, of the driver and of the runtime.
#include "check.h"

#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <dlfcn.h>

// The older prototypes (cuda.h declares them only in its internal view).
typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*ctx_destroy_fn)(CUcontext);
typedef CUresult (*primary_fn)(CUdevice);
typedef CUresult (*primary_flags_fn)(CUdevice, unsigned int);
typedef CUresult (*elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*total_mem_fn)(unsigned int *, CUdevice);
typedef CUresult (*get_proc_11_fn)(const char *, void **, int, cuuint64_t);

static const int N = 256;

static void *libcuda;

// An exported driver function by name, as dlsym finds it.
static void *by_name(const char *name)
{
    void *fn = libcuda ? dlsym(libcuda, name) : NULL;
    check(fn != NULL, name, "not exported: %s", dlerror());
    return fn;
}

// A driver function at an older CUDA version, through cuGetProcAddress.
static void *at_version(const char *name, int version)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    char what[128];
    check(r == CUDA_SUCCESS && fn && found == CU_GET_PROC_ADDRESS_SUCCESS,
          fmt_name(what, sizeof what, "cuGetProcAddress %s at %d", name, version),
          "status %d, found %d", (int)r, (int)found);
    return fn;
}

static bool check_cu(CUresult r, const char *name)
{
    const char *s = NULL;
    cuGetErrorName(r, &s);
    return check(r == CUDA_SUCCESS, name, "%s", s ? s : "unknown error");
}

// The current context can do work: fill device memory and read it back.
static void check_usable(const char *name)
{
    CUdeviceptr d = 0;
    unsigned int host[N];
    char what[160];
    bool ok = cuMemAlloc(&d, sizeof host) == CUDA_SUCCESS &&
              cuMemsetD32(d, 0x5eed0000u + N, N) == CUDA_SUCCESS &&
              cuMemcpyDtoH(host, d, sizeof host) == CUDA_SUCCESS;
    int bad = -1;
    for (int i = 0; ok && i < N && bad < 0; i++)
        if (host[i] != 0x5eed0000u + N)
            bad = i;
    check(ok && bad < 0, fmt_name(what, sizeof what, "%s: memory filled and read back", name),
          "%s", ok ? "a wrong value read back" : "a call failed");
    if (d)
        cuMemFree(d);
}

static bool is_current(CUcontext ctx)
{
    CUcontext cur = NULL;
    return cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx && ctx != NULL;
}

static int primary_active(unsigned int *flags)
{
    unsigned int f = 0;
    int active = -1;
    if (cuDevicePrimaryCtxGetState(0, &f, &active) != CUDA_SUCCESS)
        return -1;
    *flags = f;
    return active;
}

// The primary-context calls by their pre-CUDA 11 names, in FFmpeg's order:
// flags set while inactive, retain, work, release.
static void primary_context_by_old_names(CUdevice dev)
{
    primary_flags_fn set_flags = (primary_flags_fn)by_name("cuDevicePrimaryCtxSetFlags");
    primary_fn release = (primary_fn)by_name("cuDevicePrimaryCtxRelease");
    CUcontext primary = NULL;
    unsigned int flags = 0;
    if (!set_flags || !release)
        return;
    check_cu(set_flags(dev, CU_CTX_SCHED_BLOCKING_SYNC), "cuDevicePrimaryCtxSetFlags (unversioned)");
    check_cu(cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
    check(primary_active(&flags) == 1 && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC,
          "the retained primary context is active with the flags set", "flags 0x%x", flags);
    check_cu(cuCtxPushCurrent(primary), "cuCtxPushCurrent primary");
    check_usable("primary context");
    check_cu(cuCtxPopCurrent(NULL), "cuCtxPopCurrent primary");
    check_cu(release(dev), "cuDevicePrimaryCtxRelease (unversioned)");
    check(primary_active(&flags) == 0, "the primary context is inactive after its last release",
          "still active");
}

// A context just made by `create` (its result `created`): current, usable,
// destroyed.
static void use_and_destroy(CUresult created, CUcontext ctx, const char *name)
{
    char what[160];
    if (!check_cu(created, name))
        return;
    check(is_current(ctx), fmt_name(what, sizeof what, "%s: the new context is current", name),
          "another is");
    check_usable(name);
    check_cu(cuCtxDestroy(ctx), fmt_name(what, sizeof what, "%s: cuCtxDestroy", name));
}

static void contexts_by_old_abis(CUdevice dev)
{
    ctx_create_fn create_v2 = (ctx_create_fn)by_name("cuCtxCreate_v2");
    ctx_create_fn create_3020 = (ctx_create_fn)at_version("cuCtxCreate", 3020);
    ctx_destroy_fn destroy_v1 = (ctx_destroy_fn)by_name("cuCtxDestroy");
    CUcontext ctx = NULL;
    CUresult r;
    if (create_v2) {
        r = create_v2(&ctx, 0, dev);
        use_and_destroy(r, ctx, "cuCtxCreate_v2 (by name)");
    }
    if (create_3020) {
        r = create_3020(&ctx, 0, dev);
        use_and_destroy(r, ctx, "cuCtxCreate at CUDA 3.2");
    }
    if (create_v2 && destroy_v1 && check_cu(create_v2(&ctx, 0, dev), "cuCtxCreate_v2 again"))
        check_cu(destroy_v1(ctx), "cuCtxDestroy (unversioned)");
}

// cuCtxCreate_v4 as programs written for older drivers call it.
static void context_v4_plain(CUdevice dev)
{
    CUctxCreateParams zeroed = {};
    CUcontext ctx = NULL;
    CUresult r = cuCtxCreate(&ctx, NULL, 0, dev);
    use_and_destroy(r, ctx, "cuCtxCreate_v4 with NULL parameters");
    r = cuCtxCreate(&ctx, &zeroed, 0, dev);
    use_and_destroy(r, ctx, "cuCtxCreate_v4 with zeroed parameters");
}

// cuEventElapsedTime before CUDA 12.8, by name and at version 12.0.
static void elapsed_by_old_abi(CUdevice dev)
{
    elapsed_fn by_old_name = (elapsed_fn)by_name("cuEventElapsedTime");
    elapsed_fn at_12000 = (elapsed_fn)at_version("cuEventElapsedTime", 12000);
    CUcontext ctx = NULL;
    CUevent start = NULL, stop = NULL;
    if (!check_cu(cuCtxCreate(&ctx, NULL, 0, dev), "context for the events"))
        return;
    if (check_cu(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate start") &&
        check_cu(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate stop") &&
        check_cu(cuEventRecord(start, NULL), "cuEventRecord start") &&
        check_cu(cuEventRecord(stop, NULL), "cuEventRecord stop") &&
        check_cu(cuEventSynchronize(stop), "cuEventSynchronize")) {
        float a = -1, b = -1;
        if (by_old_name)
            check(by_old_name(&a, start, stop) == CUDA_SUCCESS && a >= 0,
                  "cuEventElapsedTime (unversioned): a time", "%f ms", a);
        if (at_12000)
            check(at_12000(&b, start, stop) == CUDA_SUCCESS && b >= 0,
                  "cuEventElapsedTime at CUDA 12.0: a time", "%f ms", b);
    }
    if (start)
        cuEventDestroy(start);
    if (stop)
        cuEventDestroy(stop);
    check_cu(cuCtxDestroy(ctx), "cuCtxDestroy of the events' context");
}

// The CUDA 11.3 cuGetProcAddress and a CUDA 2.x call with 32-bit sizes.
static void other_old_entry_points(CUdevice dev)
{
    get_proc_11_fn get_11 = (get_proc_11_fn)by_name("cuGetProcAddress");
    total_mem_fn total_v1 = (total_mem_fn)by_name("cuDeviceTotalMem");
    void *fn = NULL;
    unsigned int total = 0;
    if (get_11)
        check(get_11("cuMemAlloc", &fn, 3020, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS &&
              fn != NULL, "cuGetProcAddress (CUDA 11.3 form) finds cuMemAlloc", "not found");
    if (total_v1)
        check(total_v1(&total, dev) == CUDA_SUCCESS && total > 0,
              "cuDeviceTotalMem (unversioned, 32-bit size)", "failed");
}

static void profiler(CUdevice dev)
{
    CUcontext ctx = NULL;
    if (check_cu(cuCtxCreate(&ctx, NULL, 0, dev), "context for the profiler")) {
        check_cu(cuProfilerStart(), "cuProfilerStart");
        check_cu(cuProfilerStop(), "cuProfilerStop");
        check_cu(cuCtxDestroy(ctx), "cuCtxDestroy of the profiler's context");
    }
    check_cuda(cudaProfilerStart(), "cudaProfilerStart");
    check_cuda(cudaProfilerStop(), "cudaProfilerStop");
}

int main()
{
    CUdevice dev = 0;
    libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    check(libcuda != NULL, "dlopen libcuda.so.1", "%s", dlerror());
    if (!check_cu(cuInit(0), "cuInit") || !check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet"))
        return check_exit_status();

    primary_context_by_old_names(dev);
    contexts_by_old_abis(dev);
    context_v4_plain(dev);
    elapsed_by_old_abi(dev);
    other_old_entry_points(dev);
    profiler(dev);      // last: the runtime retains the primary context
    return check_exit_status();
}

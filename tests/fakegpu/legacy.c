// Fake libcuda.so.1: the older entry points NVIDIA's driver still exports
// for programs built against older headers (cuda.h maps each name to its
// newest form, so only such programs, dlsym and cuGetProcAddress with an
// older version reach these), and the profiler's start and stop.
//
// On one device and a context stack shared by all threads, the older rules
// mostly coincide with the newer ones; where they differ it is said.
#include "fakegpu.h"

#include <cudaProfiler.h>
#include <limits.h>

// cuda.h defines these names to their newest forms.
#undef cuCtxCreate
#undef cuCtxDestroy
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuDeviceGetUuid
#undef cuDeviceTotalMem
#undef cuMemGetInfo

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx);
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
CUresult CUDAAPI cuStreamDestroy(CUstream stream);
CUresult CUDAAPI cuEventDestroy(CUevent event);
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
CUresult CUDAAPI cuMemGetInfo(unsigned int *free_bytes, unsigned int *total);
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

// ---- Contexts -----------------------------------------------------------------------------

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    return cuCtxPushCurrent_v2(ctx);
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

// Before CUDA 11 the flags of an active primary context could not change;
// the _v2 form changes them.
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    unsigned int old;
    int active;
    CUresult r = cuDevicePrimaryCtxGetState(dev, &old, &active);

    if (r != CUDA_SUCCESS)
        return r;
    if (active)
        return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// ---- Streams, events, device facts ----------------------------------------------------------

CUresult CUDAAPI cuStreamDestroy(CUstream stream)
{
    return cuStreamDestroy_v2(stream);
}

CUresult CUDAAPI cuEventDestroy(CUevent event)
{
    return cuEventDestroy_v2(event);
}

// The _v2 form answers a MIG instance's own UUID; there is no MIG here.
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

// The CUDA 2.x sizes are 32 bits: larger values saturate.
static unsigned int narrow_size(size_t n)
{
    return n > UINT_MAX ? UINT_MAX : (unsigned int)n;
}

CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t n;
    CUresult r;

    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    r = cuDeviceTotalMem_v2(&n, dev);
    if (r == CUDA_SUCCESS)
        *bytes = narrow_size(n);
    return r;
}

CUresult CUDAAPI cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f, t;
    CUresult r;

    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    r = cuMemGetInfo_v2(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free_bytes = narrow_size(f);
        *total = narrow_size(t);
    }
    return r;
}

// ---- Profiler (cudaProfiler.h) -----------------------------------------------------------------
//
// No profiler is attached to the fake, so there is nothing to start or
// stop: both only need a usable current context, as on a GPU.

static CUresult profiler_switch(void)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuProfilerStart(void)
{
    return profiler_switch();
}

CUresult CUDAAPI cuProfilerStop(void)
{
    return profiler_switch();
}

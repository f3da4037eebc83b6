/* Contexts in libcuda.so.1: the calls that change what is current, and the
 * questions about it answered on the client (BRIEF 4.5).  PyTorch's device
 * guards ask cuDevicePrimaryCtxGetState around nearly every operation and
 * its cuBLAS handle pool asks cuCtxGetCurrent per matmul: each was a round
 * trip, over a thousand per training step.  Only this process's own calls
 * change either answer, so every call that may change one tells the core
 * (common/rgpu_client.h) and the cached answers are dropped.  What is
 * cached: a thread's current context when not NULL, a primary context once
 * seen active.  Everything else is asked. */
#include "rgpu_client.h"
#include "cuda_procs.h"
#include "cuda_export.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

/* ---- questions -------------------------------------------------------------------- */

#undef cuCtxGetCurrent
RGPU_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    const void *argv[] = { &pctx };
    uint64_t known;
    if (pctx && rgpu_thread_context(&known)) {
        *pctx = (CUcontext)(uintptr_t)known;
        return CUDA_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUDA_cuCtxGetCurrent, argv);
    if (rc == CUDA_SUCCESS && pctx && *pctx)
        rgpu_thread_set_context((uintptr_t)*pctx);
    return rc;
}

#undef cuDevicePrimaryCtxGetState
RGPU_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    const void *argv[] = { &dev, &flags, &active };
    unsigned known_flags;
    if (flags && active && rgpu_primary_active(dev, &known_flags)) {
        *flags = known_flags;
        *active = 1;
        return CUDA_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxGetState, argv);
    if (rc == CUDA_SUCCESS && flags && active && *active)
        rgpu_primary_set_active(dev, *flags);
    return rc;
}

/* ---- calls that change this thread's current context ------------------------------ */

#undef cuCtxCreate
RGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev)
{
    const void *argv[] = { &pctx, &ctxCreateParams, &flags, &dev };
    if (ctxCreateParams) {
        /* Its members point at arrays in this process. */
        static int logged;
        return rgpu_refused(LIB, "cuCtxCreate with creation parameters",
                            "execution-affinity and CIG parameters: not remoted yet", &logged);
    }
    rgpu_thread_forget_current();     /* the new context is current */
    return rgpu_call(LIB, RGPU_CUDA_cuCtxCreate_v4, argv);
}

#undef cuCtxSetCurrent
RGPU_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    const void *argv[] = { &ctx };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxSetCurrent, argv);
}

#undef cuCtxPushCurrent
RGPU_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    const void *argv[] = { &ctx };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxPushCurrent_v2, argv);
}

#undef cuCtxPopCurrent
RGPU_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    const void *argv[] = { &pctx };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxPopCurrent_v2, argv);
}

/* ---- calls that may change contexts for every thread ------------------------------- */

#undef cuCtxDestroy
RGPU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    const void *argv[] = { &ctx };
    rgpu_contexts_changed();
    rgpu_cls_context_ending(ctx);
    return rgpu_call(LIB, RGPU_CUDA_cuCtxDestroy_v2, argv);
}

#undef cuCtxSetFlags
RGPU_EXPORT CUresult cuCtxSetFlags(unsigned int flags)
{
    const void *argv[] = { &flags };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxSetFlags, argv);
}

#undef cuDevicePrimaryCtxRelease
RGPU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    const void *argv[] = { &dev };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxRelease_v2, argv);
}

#undef cuDevicePrimaryCtxReset
RGPU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    const void *argv[] = { &dev };
    rgpu_contexts_changed();
    rgpu_cls_primary_ending(dev);
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxReset_v2, argv);
}

#undef cuDevicePrimaryCtxSetFlags
RGPU_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    const void *argv[] = { &dev, &flags };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxSetFlags_v2, argv);
}

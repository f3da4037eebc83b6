/* Contexts in libcuda.so.1: the calls that change what is current, and the
 * questions about it answered on the client (a round trip is the unit of
 * cost: docs/architecture.md, "What the client answers itself").
 * PyTorch's device guards ask cuDevicePrimaryCtxGetState around nearly every operation and
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

/* The execution-affinity array of cuCtxCreate_v4's parameters, sent as
 * cuCtxCreate_v3 takes it: the parameters' members point into this
 * process, so the structure itself cannot travel.  Without affinity and
 * CUDA-in-graphics parameters (NULL or zeroed, as programs written for
 * older drivers pass them) it is a plain cuCtxCreate. */
static CUresult create_with_affinity(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                     unsigned int flags, CUdevice dev)
{
    const void *argv[] = { &pctx, &params, &n, &flags, &dev };
    rgpu_thread_forget_current();     /* the new context is current */
    return rgpu_call(LIB, RGPU_CUDA_cuCtxCreate_v3, argv);
}

#undef cuCtxCreate
RGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev)
{
    CUctxCreateParams *none = NULL;
    const void *argv[] = { &pctx, &none, &flags, &dev };
    if (ctxCreateParams && ctxCreateParams->cigParams) {
        /* A context on a graphics API's device (D3D12, Vulkan) of this
         * machine. */
        static int logged;
        return rgpu_refused(LIB, "cuCtxCreate with CUDA-in-graphics parameters",
                            "CIG shares a graphics device with the client's display: the GPU "
                            "is on another machine; create the context without cigParams",
                            &logged);
    }
    if (ctxCreateParams && ctxCreateParams->numExecAffinityParams != 0)
        return create_with_affinity(pctx, ctxCreateParams->execAffinityParams,
                                    ctxCreateParams->numExecAffinityParams, flags, dev);
    rgpu_thread_forget_current();     /* the new context is current */
    return rgpu_call(LIB, RGPU_CUDA_cuCtxCreate_v4, argv);
}

/* The older context-creation ABIs: the server's driver runs the entry
 * point the program named (cuCtxCreate is the CUDA 2.x one, _v2 that of
 * CUDA 3.2 to 11.3, _v3 added execution affinity). */
RGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                    int numParams, unsigned int flags, CUdevice dev)
{
    return create_with_affinity(pctx, paramsArray, numParams, flags, dev);
}

RGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    const void *argv[] = { &pctx, &flags, &dev };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxCreate_v2, argv);
}

RGPU_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    const void *argv[] = { &pctx, &flags, &dev };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxCreate, argv);
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

/* The context stack of CUDA before 4.0 (one thread per context): the
 * server's driver keeps those rules; the client forgets the same facts. */
RGPU_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    const void *argv[] = { &ctx };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxPushCurrent, argv);
}

RGPU_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    const void *argv[] = { &pctx };
    rgpu_thread_forget_current();
    return rgpu_call(LIB, RGPU_CUDA_cuCtxPopCurrent, argv);
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

RGPU_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    const void *argv[] = { &ctx };
    rgpu_contexts_changed();
    rgpu_cls_context_ending(ctx);
    return rgpu_call(LIB, RGPU_CUDA_cuCtxDestroy, argv);
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

/* The primary-context calls before CUDA 11 (FFmpeg and ctypes programs
 * load these names); same facts forgotten as by their _v2 forms. */
RGPU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    const void *argv[] = { &dev };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxRelease, argv);
}

RGPU_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    const void *argv[] = { &dev };
    rgpu_contexts_changed();
    rgpu_cls_primary_ending(dev);
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxReset, argv);
}

RGPU_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    const void *argv[] = { &dev, &flags };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDA_cuDevicePrimaryCtxSetFlags, argv);
}

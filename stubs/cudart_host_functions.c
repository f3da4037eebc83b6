/* cudaLaunchHostFunc (and CUDA 13.2's _v2) and cudaStreamAddCallback (and their _ptsz forms): the
 * program's function runs on the client when rgpud's stream reaches it, and
 * the stream waits for it (common/rgpu_callbacks.c, daemon/host_functions.c).
 * The _ptsz forms differ only in what the default stream means, which the
 * server's runtime decides. */
#include "rgpu_client.h"
#include "cudart_own.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>

#define LIB (&rgpu_cudart_lib)

/* It waits for its reply: the stream's error (one this process does not
 * hold, or destroyed) comes now, and nothing runs ahead of it. */
static cudaError_t enqueue(int ptsz, int callback, cudaStream_t stream,
                           enum rgpu_callback_kind kind, void *fn, void *data, unsigned flags)
{
    uint64_t token;
    int captured = 0;
    if (!fn)
        return (cudaError_t)rgpu_runtime_result(cudaErrorInvalidValue);
    uint64_t id = rgpu_host_func_reserve(kind, fn, data, (uint64_t)(uintptr_t)stream, &token);
    if (!id)
        return (cudaError_t)rgpu_runtime_result(cudaErrorMemoryAllocation);
    cudaError_t rc = rgpu_host_func(stream, ptsz, callback, id, flags, token, &captured);
    rgpu_host_func_placed(id, rc, captured);
    return rc;
}

RGPU_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return enqueue(0, 0, stream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

RGPU_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn,
                                                void *userData)
{
    return enqueue(1, 0, stream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

/* CUDA 13.2's form with a sync mode, blocking (0) or spin-wait (1): how
 * the host thread waits for its turn, not what runs or when, so both are
 * served as cudaLaunchHostFunc, which needs nothing of the server's
 * runtime that 13.0 lacks. */
static cudaError_t enqueue_v2(int ptsz, cudaStream_t stream, cudaHostFn_t fn, void *userData,
                              unsigned int syncMode)
{
    if (syncMode > 1)
        return (cudaError_t)rgpu_runtime_result(cudaErrorInvalidValue);
    return enqueue(ptsz, 0, stream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

RGPU_EXPORT cudaError_t cudaLaunchHostFunc_v2(cudaStream_t stream, cudaHostFn_t fn,
                                              void *userData, unsigned int syncMode)
{
    return enqueue_v2(0, stream, fn, userData, syncMode);
}

RGPU_EXPORT cudaError_t cudaLaunchHostFunc_v2_ptsz(cudaStream_t stream, cudaHostFn_t fn,
                                                   void *userData, unsigned int syncMode)
{
    return enqueue_v2(1, stream, fn, userData, syncMode);
}

RGPU_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                              void *userData, unsigned int flags)
{
    return enqueue(0, 1, stream, RGPU_CB_STREAM, (void *)callback, userData, flags);
}

RGPU_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream,
                                                   cudaStreamCallback_t callback, void *userData,
                                                   unsigned int flags)
{
    return enqueue(1, 1, stream, RGPU_CB_STREAM, (void *)callback, userData, flags);
}

/* cuLaunchHostFunc and cuStreamAddCallback (and their _ptsz forms): the
 * program's function runs on the client when rgpud's stream reaches it, and
 * the stream waits for it (common/rgpu_callbacks.c, daemon/host_functions.c). */
#include "rgpu_client.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>

/* It waits for its reply: the stream's error (one this process does not
 * hold, or destroyed) comes now, and nothing runs ahead of it. */
static CUresult enqueue(int ptsz, int callback, CUstream stream, enum rgpu_callback_kind kind,
                        void *fn, void *data, unsigned flags)
{
    uint64_t token;
    int captured = 0;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = rgpu_host_func_reserve(kind, fn, data, (uint64_t)(uintptr_t)stream, &token);
    if (!id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = rgpu_cu_host_func(stream, ptsz, callback, id, flags, token, &captured);
    rgpu_host_func_placed(id, rc, captured);
    return rc;
}

RGPU_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return enqueue(0, 0, hStream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

RGPU_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return enqueue(1, 0, hStream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

RGPU_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                         void *userData, unsigned int flags)
{
    return enqueue(0, 1, hStream, RGPU_CB_STREAM, (void *)callback, userData, flags);
}

RGPU_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                              void *userData, unsigned int flags)
{
    return enqueue(1, 1, hStream, RGPU_CB_STREAM, (void *)callback, userData, flags);
}

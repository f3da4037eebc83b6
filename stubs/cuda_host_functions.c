/* cuLaunchHostFunc and cuStreamAddCallback (and their _ptsz forms): the
 * program's function runs on the client when rgpud's stream reaches it, and
 * the stream waits for it (common/rgpu_callbacks.c, daemon/host_functions.c). */
#include "rgpu_client.h"
#include "cuda_procs.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

static CUresult enqueue(unsigned variant, const char *what, CUstream stream,
                        enum rgpu_callback_kind kind, void *fn, void *data, unsigned flags)
{
    return (CUresult)rgpu_host_func_enqueue(LIB, what, variant, (uint64_t)(uintptr_t)stream,
                                            kind, fn, data, flags);
}

RGPU_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return enqueue(4, "cuLaunchHostFunc", hStream, RGPU_CB_HOST_FN, (void *)fn, userData, 0);
}

RGPU_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return enqueue(5, "cuLaunchHostFunc_ptsz", hStream, RGPU_CB_HOST_FN, (void *)fn, userData,
                   0);
}

RGPU_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                         void *userData, unsigned int flags)
{
    return enqueue(6, "cuStreamAddCallback", hStream, RGPU_CB_STREAM, (void *)callback, userData,
                   flags);
}

RGPU_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                              void *userData, unsigned int flags)
{
    return enqueue(7, "cuStreamAddCallback_ptsz", hStream, RGPU_CB_STREAM, (void *)callback,
                   userData, flags);
}

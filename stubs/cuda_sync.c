/* Hand-written synchronisation of libcuda: the driver's twins of
 * stubs/cudart_sync.c (policy: common/rgpu_lazy.c,
 * docs/synchronisation.md).  Server side: the generated procedures and
 * rgpu.fence (daemon/session.c). */
#include "rgpu_client.h"
#include "cuda_procs.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

static CUresult synchronise(const struct rgpu_proc *proc, const void *const *argv, int lazy)
{
    return (CUresult)rgpu_call_synchronise(LIB, proc, argv, lazy);
}

#undef cuStreamSynchronize
RGPU_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    const void *argv[] = { &hStream };
    return synchronise(RGPU_CUDA_cuStreamSynchronize, argv,
                       rgpu_lazy_stream_sync((uint64_t)(uintptr_t)hStream));
}

RGPU_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    const void *argv[] = { &hStream };
    return synchronise(RGPU_CUDA_cuStreamSynchronize_ptsz, argv,
                       rgpu_lazy_stream_sync((uint64_t)(uintptr_t)hStream));
}

#undef cuEventSynchronize
RGPU_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    const void *argv[] = { &hEvent };
    return synchronise(RGPU_CUDA_cuEventSynchronize, argv,
                       rgpu_lazy_event_sync((uint64_t)(uintptr_t)hEvent));
}

#undef cuEventCreate
RGPU_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    const void *argv[] = { &phEvent, &Flags };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuEventCreate, argv);
    if (rc == CUDA_SUCCESS && phEvent)
        rgpu_event_note_flags((uint64_t)(uintptr_t)*phEvent, Flags);
    return (CUresult)rc;
}

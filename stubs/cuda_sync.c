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

/* s: the stream as the entry point means it (the _ptsz one's NULL is the
 * thread's own).  One that waited delivered what its kernels printed. */
static CUresult stream_synchronise(const struct rgpu_proc *proc, CUstream stream, uint64_t s)
{
    const void *argv[] = { &stream };
    int lazy = rgpu_lazy_stream_sync(s);
    CUresult rc = synchronise(proc, argv, lazy);
    if (!lazy && rc == CUDA_SUCCESS)
        rgpu_printing_stream_synced(s);
    return rc;
}

#undef cuStreamSynchronize
RGPU_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_synchronise(RGPU_CUDA_cuStreamSynchronize, hStream,
                              (uint64_t)(uintptr_t)hStream);
}

RGPU_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_synchronise(RGPU_CUDA_cuStreamSynchronize_ptsz, hStream,
                              hStream ? (uint64_t)(uintptr_t)hStream : RGPU_PER_THREAD_STREAM);
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

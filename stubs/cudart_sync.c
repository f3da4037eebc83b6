/* Hand-written synchronisation of libcudart: synchronises that need not
 * wait for the GPU, and the event facts that decide it (the policy:
 * common/rgpu_lazy.c, docs/synchronisation.md).  The driver's twins:
 * stubs/cuda_sync.c.  Server side: the generated procedures and rgpu.fence
 * (daemon/session.c). */
#include "rgpu_client.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>

#define LIB (&rgpu_cudart_lib)

static cudaError_t synchronise(const struct rgpu_proc *proc, const void *const *argv,
                               int lazy)
{
    return (cudaError_t)rgpu_call_synchronise(LIB, proc, argv, lazy);
}

/* s: the stream as the entry point means it (the _ptsz one's NULL is the
 * thread's own).  One that waited delivered what its kernels printed. */
static cudaError_t stream_synchronise(const struct rgpu_proc *proc, cudaStream_t stream,
                                      uint64_t s)
{
    const void *argv[] = { &stream };
    int lazy = rgpu_lazy_stream_sync(s);
    cudaError_t rc = synchronise(proc, argv, lazy);
    if (!lazy && rc == cudaSuccess)
        rgpu_printing_stream_synced(s);
    return rc;
}

#undef cudaStreamSynchronize
RGPU_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return stream_synchronise(RGPU_CUDART_cudaStreamSynchronize, stream,
                              (uint64_t)(uintptr_t)stream);
}

RGPU_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return stream_synchronise(RGPU_CUDART_cudaStreamSynchronize_ptsz, stream,
                              stream ? (uint64_t)(uintptr_t)stream : RGPU_PER_THREAD_STREAM);
}

#undef cudaEventSynchronize
RGPU_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    const void *argv[] = { &event };
    return synchronise(RGPU_CUDART_cudaEventSynchronize, argv,
                       rgpu_lazy_event_sync((uint64_t)(uintptr_t)event));
}

/* Events remember whether they may be timed: a synchronise of one that
 * may is where programs read the clock, so it waits. */
#undef cudaEventCreate
RGPU_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    const void *argv[] = { &event };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaEventCreate, argv);
    if (rc == cudaSuccess && event)
        rgpu_event_note_flags((uint64_t)(uintptr_t)*event, cudaEventDefault);
    return rc;
}

#undef cudaEventCreateWithFlags
RGPU_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    const void *argv[] = { &event, &flags };
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaEventCreateWithFlags, argv);
    if (rc == cudaSuccess && event)
        rgpu_event_note_flags((uint64_t)(uintptr_t)*event, flags);
    return rc;
}

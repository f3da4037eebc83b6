// Host functions: cuLaunchHostFunc and cuStreamAddCallback (and _ptsz).
//
// A driver calls a stream's host function on a thread of its own once the
// stream's earlier work is done, and the stream's later work waits until
// it has returned; other streams go on.  The fake device finishes work when
// it is enqueued, so a host function starts at once, on a thread of its own
// (never the caller's), and is "in flight" until it returns.  Meanwhile
// whatever would queue behind it waits for it: fg_check_stream, which every
// stream operation calls, waits for the host functions in flight on that
// stream, and on the legacy default stream, which synchronises with every
// other (non-blocking streams are treated as blocking ones: stricter, never
// wrong about order); a context synchronise waits for all of them, and a
// stream query answers CUDA_ERROR_NOT_READY while one is in flight.  After
// a fault, enqueued work is dropped (README): so is a host function, but a
// stream callback is called with the fault, as the documentation promises
// it "cudaSuccess or any persistent error on the stream".
#include "fakegpu.h"

#include <pthread.h>
#include <stdlib.h>

// Declared by cuda.h only under per-thread default streams.
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data);
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *data,
                                          unsigned int flags);

struct host_call {
    CUhostFn fn;
    CUstreamCallback callback;
    CUstream stream;
    CUresult status;
    void *data;
    struct host_call *next;
};

// In flight; under the core's lock.
static struct host_call *in_flight;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;

static int is_legacy(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY;
}

// Whether work on s (NULL: on any stream) must wait for h.
static int holds(const struct host_call *h, CUstream s, int any)
{
    return any || is_legacy(s) || is_legacy(h->stream) || h->stream == s;
}

static int busy(CUstream s, int any)
{
    for (struct host_call *h = in_flight; h; h = h->next)
        if (holds(h, s, any))
            return 1;
    return 0;
}

int fg_host_functions_busy(CUstream s)
{
    return busy(s, 0);
}

void fg_host_functions_wait(CUstream s)
{
    while (busy(s, 0))
        fg_wait(&finished);
}

void fg_host_functions_wait_all(void)
{
    while (busy(NULL, 1))
        fg_wait(&finished);
}

static void *host_thread(void *arg)
{
    struct host_call *h = arg;
    if (h->fn)
        h->fn(h->data);
    else
        h->callback(h->stream, h->status, h->data);
    fg_lock();
    for (struct host_call **pp = &in_flight; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    pthread_cond_broadcast(&finished);
    fg_unlock();
    free(h);
    return NULL;
}

static CUresult host_call(CUstream s, CUhostFn fn, CUstreamCallback callback, void *data,
                          unsigned flags)
{
    struct fg_ctx *c;
    int skip = 0;
    pthread_t t;

    if ((!fn && !callback) || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn && fg_capturing(s))
        return fg_capture_host(s, fn, data);    // a host node of the capture
    struct host_call *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (struct host_call){ fn, callback, s, CUDA_SUCCESS, data, NULL };
    fg_lock();
    CUresult r = fg_enter(FG_ENQUEUE, &c, &skip);
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(s);     // after the stream's earlier host functions
    if (r == CUDA_SUCCESS && skip && callback) {
        h->status = c->pending;
        skip = 0;
    }
    if (r == CUDA_SUCCESS && !skip) {
        if (pthread_create(&t, NULL, host_thread, h) != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            pthread_detach(t);
            h->next = in_flight;
            in_flight = h;
            h = NULL;
        }
    }
    fg_unlock();
    free(h);
    return r;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    return host_call(s, fn, NULL, data, 0);
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data)
{
    return host_call(s ? s : CU_STREAM_PER_THREAD, fn, NULL, data, 0);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *data,
                                     unsigned int flags)
{
    return host_call(s, NULL, cb, data, flags);
}

CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *data,
                                          unsigned int flags)
{
    return host_call(s ? s : CU_STREAM_PER_THREAD, NULL, cb, data, flags);
}

// Host functions: cudaLaunchHostFunc, cudaStreamAddCallback, cuLaunchHostFunc
// and cuStreamAddCallback run the program's function in stream order, on a
// thread that is not the caller's; later work on that stream waits for it,
// work on other streams does not.  A function that calls CUDA gets an answer
// (CUDA documents cudaErrorNotPermitted as one it may give), never a hang.
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "kernels.cuh"

#define N 4096
#define LOOP 1000
#define WAIT_S 20       // a callback or the program waits at most this long for the other

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Spin until *flag is set, at most WAIT_S seconds; whether it was.
static bool wait_flag(const int *flag)
{
    double end = now_s() + WAIT_S;
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
        if (now_s() > end)
            return false;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    return true;
}

static void set_flag(int *flag)
{
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
}

// ---- order on one stream: after the copy before it, before the copy after it

struct seen {
    const uint32_t *host;
    uint32_t value;
    int calls;
    pthread_t thread;
};

static void CUDART_CB record_value(void *arg)
{
    struct seen *s = (struct seen *)arg;
    s->value = s->host[0];
    s->thread = pthread_self();
    s->calls++;
}

static void order_on_stream(cudaStream_t a, uint32_t *d, uint32_t *h)
{
    struct seen s = { h, 0, 0, pthread_self() };
    k_fill_u32<<<N / 256, 256, 0, a>>>(d, 7, N);
    check_cuda(cudaMemcpyAsync(h, d, N * sizeof *h, cudaMemcpyDeviceToHost, a), "copy of 7");
    check_cuda(cudaLaunchHostFunc(a, record_value, &s), "cudaLaunchHostFunc");
    k_fill_u32<<<N / 256, 256, 0, a>>>(d, 9, N);
    check_cuda(cudaMemcpyAsync(h, d, N * sizeof *h, cudaMemcpyDeviceToHost, a), "copy of 9");
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize after the host function");
    check(s.calls == 1, "the host function ran once", "%d calls", s.calls);
    check(s.value == 7, "the host function saw the copy before it", "saw %u", s.value);
    check(h[0] == 9 && h[N - 1] == 9, "the copy after it ran after it", "h[0] = %u", h[0]);
    check(!pthread_equal(s.thread, pthread_self()), "the host function ran on another thread",
          "it ran on the caller's");
}

// ---- other streams go on while a host function waits -------------------------

static int released, host_fn_waited;

static void CUDART_CB wait_for_release(void *arg)
{
    (void)arg;
    host_fn_waited = wait_flag(&released);
}

static void other_streams_go_on(cudaStream_t a, cudaStream_t b, uint32_t *d, uint32_t *h)
{
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaLaunchHostFunc(a, wait_for_release, NULL), "host function that waits");
    // Stream a is held by the host function until we release it.
    k_fill_u32<<<N / 256, 256, 0, b>>>(d, 5, N);
    check_cuda(cudaEventRecord(ev, b), "cudaEventRecord on the other stream");
    check_cuda(cudaEventSynchronize(ev), "cudaEventSynchronize on the other stream");
    check_cuda(cudaMemcpyAsync(h, d, N * sizeof *h, cudaMemcpyDeviceToHost, b),
               "copy on the other stream");
    check_cuda(cudaStreamSynchronize(b), "cudaStreamSynchronize of the other stream");
    check(h[0] == 5, "the other stream's work ran while the host function waited", "h[0] = %u",
          h[0]);
    set_flag(&released);
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize of the held stream");
    check(host_fn_waited, "the host function was released", "it timed out");
    check_cuda(cudaEventDestroy(ev), "cudaEventDestroy");
}

// ---- cudaStreamAddCallback: stream and status ---------------------------------

struct callback_args {
    cudaStream_t stream;
    cudaError_t status;
    int calls;
};

static void CUDART_CB stream_callback(cudaStream_t stream, cudaError_t status, void *arg)
{
    struct callback_args *c = (struct callback_args *)arg;
    c->stream = stream;
    c->status = status;
    c->calls++;
}

static void add_callback(cudaStream_t a)
{
    struct callback_args c = { NULL, cudaErrorUnknown, 0 };
    k_empty<<<1, 1, 0, a>>>();
    check_cuda(cudaStreamAddCallback(a, stream_callback, &c, 0), "cudaStreamAddCallback");
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize after the callback");
    check(c.calls == 1, "the callback ran once", "%d calls", c.calls);
    check(c.stream == a, "the callback got the program's stream", "got %p", (void *)c.stream);
    check(c.status == cudaSuccess, "the callback got cudaSuccess", "got %s",
          cudaGetErrorName(c.status));

    struct callback_args d = { a, cudaErrorUnknown, 0 };
    check_cuda(cudaStreamAddCallback(0, stream_callback, &d, 0),
               "cudaStreamAddCallback on the default stream");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the callback");
    check(d.calls == 1 && d.stream == 0 && d.status == cudaSuccess,
          "the default stream's callback got stream 0", "%d calls, stream %p", d.calls,
          (void *)d.stream);
    check_err(cudaStreamAddCallback(a, stream_callback, &c, 1), cudaErrorInvalidValue,
              "cudaStreamAddCallback with flags 1");
    cudaGetLastError();
}

// ---- the driver's entry points -------------------------------------------------

static void CUDA_CB driver_host_fn(void *arg)
{
    ++*(int *)arg;
}

static void CUDA_CB driver_callback(CUstream stream, CUresult status, void *arg)
{
    struct callback_args *c = (struct callback_args *)arg;
    c->stream = (cudaStream_t)stream;
    c->status = status == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
    c->calls++;
}

static void driver_api(cudaStream_t a)
{
    int calls = 0;
    struct callback_args c = { NULL, cudaErrorUnknown, 0 };
    CUstream s = (CUstream)a;
    check(cuLaunchHostFunc(s, driver_host_fn, &calls) == CUDA_SUCCESS, "cuLaunchHostFunc",
          "failed");
    check(cuStreamAddCallback(s, driver_callback, &c, 0) == CUDA_SUCCESS, "cuStreamAddCallback",
          "failed");
    check(cuStreamSynchronize(s) == CUDA_SUCCESS, "cuStreamSynchronize", "failed");
    check(calls == 1, "cuLaunchHostFunc's function ran", "%d calls", calls);
    check(c.calls == 1 && c.stream == a && c.status == cudaSuccess,
          "cuStreamAddCallback's callback got the stream and CUDA_SUCCESS", "%d calls",
          c.calls);
}

// ---- many, in order -------------------------------------------------------------

static int order[LOOP], next_slot;

static void CUDART_CB append(void *arg)
{
    order[next_slot++] = (int)(intptr_t)arg;
}

static void many_in_order(cudaStream_t a, cudaStream_t b, int *counter)
{
    int in_order = 1;
    for (int i = 0; i < LOOP; i++) {
        k_inc<<<1, 32, 0, (i & 1) ? a : b>>>(counter, 1);
        cudaLaunchHostFunc(a, append, (void *)(intptr_t)i);
    }
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize after 1000 host functions");
    check(next_slot == LOOP, "1000 host functions ran", "%d ran", next_slot);
    for (int i = 0; i < next_slot; i++)
        in_order &= order[i] == i;
    check(in_order, "in the order they were enqueued", "out of order");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// ---- no later CUDA call: the function runs all the same --------------------------

static int ran_alone;

static void CUDART_CB set_ran_alone(void *arg)
{
    (void)arg;
    set_flag(&ran_alone);
}

static void runs_without_a_later_call(cudaStream_t a)
{
    check_cuda(cudaLaunchHostFunc(a, set_ran_alone, NULL), "host function nobody waits for");
    check(wait_flag(&ran_alone), "it ran while the program made no CUDA call", "it did not");
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize");
}

// ---- errors -----------------------------------------------------------------------

// A host function without a function.  (A destroyed stream is not tried:
// natively that is a use after free, which crashed on an H200; rgpu's
// answer to streams it never handed out is tests/badinput.c's.)
static void no_function(void)
{
    check_err(cudaLaunchHostFunc(0, NULL, NULL), cudaErrorInvalidValue,
              "cudaLaunchHostFunc without a function");
    cudaGetLastError();
}

static cudaError_t from_callback = cudaErrorUnknown;

static void CUDART_CB calls_cuda(void *arg)
{
    from_callback = cudaEventQuery((cudaEvent_t)arg);
}

static void callback_calling_cuda(cudaStream_t a)
{
    cudaEvent_t ev;
    check_cuda(cudaEventCreate(&ev), "cudaEventCreate");
    check_cuda(cudaEventRecord(ev, a), "cudaEventRecord");
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize");
    check_cuda(cudaLaunchHostFunc(a, calls_cuda, ev), "host function that calls CUDA");
    check_cuda(cudaStreamSynchronize(a), "cudaStreamSynchronize: no deadlock");
    fprintf(stderr, "cudaEventQuery from a host function: %s\n", cudaGetErrorName(from_callback));
    // CUDA may answer cudaErrorNotPermitted (rgpu does) or serve the call.
    check(from_callback == cudaErrorNotPermitted || from_callback == cudaSuccess,
          "a CUDA call from a host function is answered", "got %s",
          cudaGetErrorName(from_callback));
    check_cuda(cudaEventDestroy(ev), "cudaEventDestroy");
}

int main(void)
{
    cudaStream_t a, b;
    uint32_t *d, *h;
    int *counter;

    h = (uint32_t *)calloc(N, sizeof *h);
    if (!check_cuda(cudaMalloc(&d, N * sizeof *d), "cudaMalloc") ||
        !check_cuda(cudaMalloc(&counter, sizeof *counter), "cudaMalloc counter") ||
        !check_cuda(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), "stream a") ||
        !check_cuda(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), "stream b"))
        return 1;
    order_on_stream(a, d, h);
    other_streams_go_on(a, b, d, h);
    add_callback(a);
    driver_api(a);
    check_cuda(cudaMemset(counter, 0, sizeof *counter), "cudaMemset counter");
    many_in_order(a, b, counter);
    runs_without_a_later_call(a);
    no_function();
    callback_calling_cuda(a);
    check_cuda(cudaStreamDestroy(a), "cudaStreamDestroy a");
    check_cuda(cudaStreamDestroy(b), "cudaStreamDestroy b");
    cudaFree(d);
    cudaFree(counter);
    free(h);
    return check_failures ? 1 : 0;
}

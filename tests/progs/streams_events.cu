// Stream ordering and events: many launches on one stream, a cross-stream
// dependency through cudaEventRecord + cudaStreamWaitEvent, event and stream
// queries after synchronization, elapsed time, a non-blocking stream, the
// legacy default stream and cudaStreamPerThread.  rgpu sends launches and
// async copies without waiting for replies, so it must keep their order.
#include <stdlib.h>
#include "check.h"
#include "kernels.cuh"

#define N (1 << 22)        // big enough that the GPU work takes a while
#define LAUNCHES 64
#define BLOCKS ((N + 255) / 256)

// Every element of h[0..N) equals want.
static bool all_equal(const int *h, int want, int *bad)
{
    for (int i = 0; i < N; i++)
        if (h[i] != want) {
            *bad = i;
            return false;
        }
    return true;
}

static void check_all(const int *h, int want, const char *name)
{
    int bad = 0;
    bool ok = all_equal(h, want, &bad);
    check(ok, name, "element %d is %d, want %d", bad, h[bad], want);
}

int main(void)
{
    int *a, *b, *h;
    cudaStream_t s1, s2, snb;
    cudaEvent_t start, stop, ready;

    h = (int *)malloc(N * sizeof(int));
    if (!check_cuda(cudaMalloc(&a, N * sizeof(int)), "cudaMalloc a") ||
        !check_cuda(cudaMalloc(&b, N * sizeof(int)), "cudaMalloc b") ||
        !check_cuda(cudaStreamCreate(&s1), "cudaStreamCreate s1") ||
        !check_cuda(cudaStreamCreate(&s2), "cudaStreamCreate s2") ||
        !check_cuda(cudaEventCreate(&start), "cudaEventCreate start") ||
        !check_cuda(cudaEventCreate(&stop), "cudaEventCreate stop") ||
        !check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags ready"))
        return 1;

    // 1. LAUNCHES increments in order on s1, then read back on s1.
    check_cuda(cudaEventRecord(start, s1), "cudaEventRecord start");
    check_cuda(cudaMemsetAsync(a, 0, N * sizeof(int), s1), "cudaMemsetAsync a");
    for (int i = 0; i < LAUNCHES; i++)
        k_inc<<<BLOCKS, 256, 0, s1>>>(a, N);
    check_cuda(cudaGetLastError(), "k_inc launches");
    check_cuda(cudaEventRecord(ready, s1), "cudaEventRecord ready");
    check_cuda(cudaEventRecord(stop, s1), "cudaEventRecord stop");

    // 2. s2 waits for s1's increments, then doubles them into b.  Without
    // the wait, k_double would very likely read a partially incremented a.
    check_cuda(cudaStreamWaitEvent(s2, ready, 0), "cudaStreamWaitEvent");
    k_double<<<BLOCKS, 256, 0, s2>>>(b, a, N);
    check_cuda(cudaGetLastError(), "k_double launch");
    check_cuda(cudaMemcpyAsync(h, b, N * sizeof(int), cudaMemcpyDeviceToHost, s2),
               "cudaMemcpyAsync b");
    check_cuda(cudaStreamSynchronize(s2), "cudaStreamSynchronize s2");
    check_all(h, 2 * LAUNCHES, "cross-stream k_double sees all k_inc");

    check_cuda(cudaMemcpyAsync(h, a, N * sizeof(int), cudaMemcpyDeviceToHost, s1),
               "cudaMemcpyAsync a");
    check_cuda(cudaStreamSynchronize(s1), "cudaStreamSynchronize s1");
    check_all(h, LAUNCHES, "k_inc launches in order");

    // 3. Completed work: queries report success, elapsed time is sane.
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check_err(cudaEventQuery(stop), cudaSuccess, "cudaEventQuery after sync");
    check_err(cudaStreamQuery(s1), cudaSuccess, "cudaStreamQuery after sync");
    float ms = -1;
    cudaError_t e = cudaEventElapsedTime(&ms, start, stop);
    check(e == cudaSuccess && ms >= 0, "cudaEventElapsedTime >= 0", "%s, %f ms",
          cudaGetErrorName(e), ms);

    // A query while work may still run returns success or cudaErrorNotReady;
    // which one depends on timing, so only the set of answers is checked.
    for (int i = 0; i < LAUNCHES; i++)
        k_inc<<<BLOCKS, 256, 0, s1>>>(a, N);
    e = cudaStreamQuery(s1);
    check(e == cudaSuccess || e == cudaErrorNotReady, "cudaStreamQuery while busy",
          "%s", cudaGetErrorName(e));
    check_cuda(cudaStreamSynchronize(s1), "cudaStreamSynchronize s1 again");

    // 4. A non-blocking stream.
    unsigned flags = 0;
    check_cuda(cudaStreamCreateWithFlags(&snb, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags NonBlocking");
    e = cudaStreamGetFlags(snb, &flags);
    check(e == cudaSuccess && flags == cudaStreamNonBlocking, "cudaStreamGetFlags",
          "%s, flags %u", cudaGetErrorName(e), flags);
    k_fill_u32<<<BLOCKS, 256, 0, snb>>>((uint32_t *)b, 7, N);
    check_cuda(cudaMemcpyAsync(h, b, N * sizeof(int), cudaMemcpyDeviceToHost, snb),
               "cudaMemcpyAsync non-blocking");
    check_cuda(cudaStreamSynchronize(snb), "cudaStreamSynchronize non-blocking");
    check_all(h, 7, "non-blocking stream k_fill_u32");

    // 5. The legacy default stream: a synchronous cudaMemcpy after the launch
    // must see it.
    check_cuda(cudaMemset(a, 0, N * sizeof(int)), "cudaMemset a");
    k_inc<<<BLOCKS, 256>>>(a, N);
    k_inc<<<BLOCKS, 256, 0, 0>>>(a, N);
    check_cuda(cudaMemcpy(h, a, N * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy default");
    check_all(h, 2, "default stream k_inc");

    // 6. cudaStreamPerThread.
    k_inc<<<BLOCKS, 256, 0, cudaStreamPerThread>>>(a, N);
    check_cuda(cudaMemcpyAsync(h, a, N * sizeof(int), cudaMemcpyDeviceToHost, cudaStreamPerThread),
               "cudaMemcpyAsync per-thread");
    check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize per-thread");
    check_all(h, 3, "per-thread stream k_inc");

    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check_cuda(cudaEventDestroy(start), "cudaEventDestroy start");
    check_cuda(cudaEventDestroy(stop), "cudaEventDestroy stop");
    check_cuda(cudaEventDestroy(ready), "cudaEventDestroy ready");
    check_cuda(cudaStreamDestroy(s1), "cudaStreamDestroy s1");
    check_cuda(cudaStreamDestroy(s2), "cudaStreamDestroy s2");
    check_cuda(cudaStreamDestroy(snb), "cudaStreamDestroy non-blocking");
    check_cuda(cudaFree(a), "cudaFree a");
    check_cuda(cudaFree(b), "cudaFree b");
    free(h);
    return check_exit_status();
}

// The error codes a real GPU returns, and the last-error bookkeeping of the
// runtime: a failing call is recorded as the thread's last error,
// cudaGetLastError clears it, cudaPeekAtLastError does not; a fault in a
// kernel is sticky and poisons the context for good, so that test runs last.
// rgpu sends launches without waiting, so it must report launch errors and
// kernel faults at the same calls a local GPU would.
#include <string.h>
#include "check.h"
#include "kernels.cuh"

static void *const bogus = (void *)0x1234;

// A call that must fail with `want`, after which the error must be the
// thread's last error, and cleared once read.
static void expect_fail(cudaError_t got, cudaError_t want, const char *name)
{
    char buf[160];
    check_err(got, want, name);
    check_err(cudaGetLastError(), want, fmt_name(buf, sizeof buf, "%s: last error", name));
    check_err(cudaGetLastError(), cudaSuccess, fmt_name(buf, sizeof buf, "%s: last error cleared", name));
}

static void test_strings(void)
{
    static const struct { cudaError_t e; const char *name, *str; } t[] = {
        {cudaSuccess, "cudaSuccess", "no error"},
        {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
        {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
        {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
        {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
        {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
        {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    };
    char buf[160];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *n = cudaGetErrorName(t[i].e), *s = cudaGetErrorString(t[i].e);
        check(n && strcmp(n, t[i].name) == 0, fmt_name(buf, sizeof buf, "cudaGetErrorName(%d) = %s", (int)t[i].e, t[i].name),
              "got \"%s\"", n ? n : "(null)");
        check(s && strcmp(s, t[i].str) == 0, fmt_name(buf, sizeof buf, "cudaGetErrorString(%s) = %s", t[i].name, t[i].str),
              "got \"%s\"", s ? s : "(null)");
    }
}

// A launch with more threads per block than any GPU allows fails at launch
// time, synchronously, and does not poison the context.  Which code it
// reports changed with CUDA 13 (see BAD_LAUNCH_ERROR in check.h).
static void test_launch_config(void)
{
    k_empty<<<1, 2048>>>();
    check_err(cudaGetLastError(), BAD_LAUNCH_ERROR, "2048 threads: cudaGetLastError");
    check_err(cudaGetLastError(), cudaSuccess, "2048 threads: cleared on read");

    k_empty<<<1, 2048>>>();
    check_err(cudaPeekAtLastError(), BAD_LAUNCH_ERROR, "2048 threads: cudaPeekAtLastError");
    check_err(cudaPeekAtLastError(), BAD_LAUNCH_ERROR, "2048 threads: peek does not clear");
    check_err(cudaGetLastError(), BAD_LAUNCH_ERROR, "2048 threads: cudaGetLastError after peek");
    check_err(cudaGetLastError(), cudaSuccess, "2048 threads: cleared after peek");

    k_empty<<<0, 1>>>();
    check_err(cudaGetLastError(), BAD_LAUNCH_ERROR, "empty grid: cudaGetLastError");

    check_err(cudaDeviceSynchronize(), cudaSuccess, "bad launches: not sticky");
    k_empty<<<1, 1>>>();
    check_err(cudaGetLastError(), cudaSuccess, "good launch after bad launch");
}

// A kernel writing through a bogus pointer faults.  The fault shows at the
// next synchronization (not at the launch: when the kernel runs is timing)
// and then at every later call that uses the context: it is sticky.  Each
// failing call records it as the last error again; cudaGetLastError still
// clears that record (as measured on an H200, CUDA 13.0).
static void test_sticky_fault(void)
{
    void *p = NULL;
    k_poke<<<1, 1>>>((int *)bogus);
    check_err(cudaDeviceSynchronize(), cudaErrorIllegalAddress, "k_poke bogus: cudaDeviceSynchronize");
    check_err(cudaPeekAtLastError(), cudaErrorIllegalAddress, "after fault: cudaPeekAtLastError");
    check_err(cudaGetLastError(), cudaErrorIllegalAddress, "after fault: cudaGetLastError");
    check_err(cudaGetLastError(), cudaSuccess, "after fault: last error record cleared");
    check_err(cudaMalloc(&p, 256), cudaErrorIllegalAddress, "after fault: cudaMalloc (sticky)");
    check_err(cudaGetLastError(), cudaErrorIllegalAddress, "after fault: cudaMalloc recorded");
    k_empty<<<1, 1>>>();
    check_err(cudaGetLastError(), cudaErrorIllegalAddress, "after fault: launch refused");
    check_err(cudaDeviceSynchronize(), cudaErrorIllegalAddress, "after fault: cudaDeviceSynchronize again");
}

int main(void)
{
    char host[16] = {0};
    void *dev = NULL, *huge = NULL;
    int d = -1;

    test_strings();

    // Establish a working context first, so later failures are the ones
    // under test and not initialisation problems.
    if (!check_cuda(cudaMalloc(&dev, 256), "cudaMalloc"))
        return 1;

    expect_fail(cudaMemcpy(bogus, host, sizeof host, cudaMemcpyHostToDevice), cudaErrorInvalidValue,
                "cudaMemcpy H2D to bogus pointer");
    expect_fail(cudaMemcpy(host, bogus, sizeof host, cudaMemcpyDeviceToHost), cudaErrorInvalidValue,
                "cudaMemcpy D2H from bogus pointer");
    expect_fail(cudaFree(bogus), cudaErrorInvalidValue, "cudaFree bogus pointer");
    check_err(cudaFree(NULL), cudaSuccess, "cudaFree NULL");
    expect_fail(cudaMalloc(&huge, (size_t)1 << 62), cudaErrorMemoryAllocation, "cudaMalloc 4 EiB");

    expect_fail(cudaSetDevice(99), cudaErrorInvalidDevice, "cudaSetDevice(99)");
    cudaError_t e = cudaGetDevice(&d);
    check(e == cudaSuccess && d == 0, "cudaGetDevice still 0", "%s, device %d", cudaGetErrorName(e), d);
    struct cudaDeviceProp prop;
    expect_fail(cudaGetDeviceProperties(&prop, 99), cudaErrorInvalidDevice, "cudaGetDeviceProperties(99)");

    // Elapsed time between events created without timing is refused.
    cudaEvent_t e0, e1;
    float ms;
    check_cuda(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming), "cudaEventCreateWithFlags e0");
    check_cuda(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming), "cudaEventCreateWithFlags e1");
    check_cuda(cudaEventRecord(e0, 0), "cudaEventRecord e0");
    check_cuda(cudaEventRecord(e1, 0), "cudaEventRecord e1");
    check_cuda(cudaEventSynchronize(e1), "cudaEventSynchronize e1");
    expect_fail(cudaEventElapsedTime(&ms, e0, e1), cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime without timing");
    check_cuda(cudaEventDestroy(e0), "cudaEventDestroy e0");
    check_cuda(cudaEventDestroy(e1), "cudaEventDestroy e1");

    test_launch_config();

    // None of the above is sticky: the context still works.
    check_cuda(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy still works");
    check_cuda(cudaFree(dev), "cudaFree");

    test_sticky_fault();   // must stay last
    return check_exit_status();
}

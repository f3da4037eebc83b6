// rgpu-bench: the three costs that decide how a remoted CUDA program feels
// (BRIEF 3 and 4.5): a synchronous round trip, a batch of launches, and bulk
// copy bandwidth.  Run it natively and through rgpu and compare the columns.
//
// Output: one line per metric, "name value unit", aligned so that it reads as
// a table; lines starting with '#' are comments.  tests/gpu/run.sh parses it.
//
//   rgpu-bench [--quick]     --quick: CI size, for a smoke test on the fake GPU
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.cuh"   // k_empty: the fake GPU backend knows it by name

#define CK(call) check((call), #call, __LINE__)

static void check(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "rgpu-bench:%d: %s: %s (%s)\n", line, what,
                cudaGetErrorName(e), cudaGetErrorString(e));
        exit(1);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void metric(const char *name, double value, const char *unit)
{
    printf("%-24s %12.3f %s\n", name, value, unit);
    fflush(stdout);   // partial results survive a later failure or timeout
}

// Mean microseconds per call of cudaStreamQuery(0) on an idle device: the
// answer depends on the GPU, so every call is a full round trip through rgpu.
static void bench_stream_query(int n)
{
    CK(cudaStreamQuery(0));   // warm-up
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        CK(cudaStreamQuery(0));
    metric("stream_query_rtt", (now_s() - t0) * 1e6 / n, "us");
}

// Same with cudaDeviceSynchronize, the round trip that real programs pay most.
static void bench_device_sync(int n)
{
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        CK(cudaDeviceSynchronize());
    metric("device_sync_rtt", (now_s() - t0) * 1e6 / n, "us");
}

// n launches of an empty kernel and one synchronize: what a launch costs when
// nothing waits for it (rgpu may batch these without waiting for replies).
static void bench_launches(int n)
{
    // Warm-up: the first launch loads the module (uploads the fatbin in rgpu).
    k_empty<<<1, 1>>>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    double t0 = now_s();
    for (int i = 0; i < n; i++)
        k_empty<<<1, 1>>>();
    // <<<>>> returns nothing; a failed launch leaves its error as the last
    // error until read, so one check here covers the whole loop without
    // adding a call per launch.
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    double dt = now_s() - t0;
    metric("launch_total", dt * 1e3, "ms");
    metric("launch_per_call", dt * 1e6 / n, "us");
}

// Best of 3 after one warm-up, in GB/s (1e9 bytes/s).
static double best_copy_gbs(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind)
{
    double best = 0;
    CK(cudaMemcpy(dst, src, bytes, kind));   // warm-up
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        CK(cudaMemcpy(dst, src, bytes, kind));
        double gbs = bytes / (now_s() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

static void bench_copies(size_t bytes)
{
    void *dev, *pinned, *pageable;
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMemset(dev, 0x5a, bytes));
    CK(cudaMallocHost(&pinned, bytes));
    pageable = malloc(bytes);
    if (!pageable) {
        fprintf(stderr, "rgpu-bench: malloc(%zu) failed\n", bytes);
        exit(1);
    }
    // Touch every page first so that page faults are not timed as copy.
    memset(pageable, 1, bytes);
    memset(pinned, 2, bytes);

    metric("h2d_pageable", best_copy_gbs(dev, pageable, bytes, cudaMemcpyHostToDevice), "GB/s");
    metric("d2h_pageable", best_copy_gbs(pageable, dev, bytes, cudaMemcpyDeviceToHost), "GB/s");
    metric("h2d_pinned", best_copy_gbs(dev, pinned, bytes, cudaMemcpyHostToDevice), "GB/s");
    metric("d2h_pinned", best_copy_gbs(pinned, dev, bytes, cudaMemcpyDeviceToHost), "GB/s");

    free(pageable);
    CK(cudaFreeHost(pinned));
    CK(cudaFree(dev));
}

int main(int argc, char **argv)
{
    int calls = 20000, launches = 100000;
    size_t copy_mib = 256;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            calls = 1000;
            launches = 1000;
            copy_mib = 8;
        } else {
            fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }

    // Create the context before timing anything.
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# rgpu-bench: %s, %d calls, %d launches, %zu MiB copies\n",
           prop.name, calls, launches, copy_mib);

    bench_stream_query(calls);
    bench_device_sync(calls);
    bench_launches(launches);
    bench_copies(copy_mib << 20);
    return 0;
}

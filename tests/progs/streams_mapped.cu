// Streams over registered mapped memory, as a program that overlaps kernels
// and copies to the host does: the device flags set to blocking sync with
// mapped host memory, a page-aligned anonymous mmap registered with
// cudaHostRegisterMapped (and unregistered), kernels and asynchronous
// copies spread over four streams, events made with cudaEventBlockingSync
// timing each phase.  Through rgpu the registered memory has a GPU copy kept
// coherent at synchronisations (common/rgpu_mapped.c): every phase must
// finish (never hang) and leave the values a GPU leaves.
//
//   streams_mapped [MIB [REPS [host-only]]]
//
// MIB: the registered buffer's size (default 16), REPS: repetitions of each
// phase (default 10); host-only leaves out the last part, where a kernel
// takes the registered memory's device pointer (tests/mapped-roundtrips.sh:
// memory registered mapped whose device pointer no call named costs no
// coherence).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "kernels.cuh"

#define NSTREAMS 4
static int REPS = 10;

static unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }

// The first index where p[i] != want, or n.
static size_t first_not(const int *p, size_t n, int want)
{
    size_t i = 0;
    while (i < n && p[i] == want)
        i++;
    return i;
}

static void check_all(const int *p, size_t n, int want, const char *name)
{
    size_t i = first_not(p, n, want);
    check(i == n, name, "element %zu is %d, want %d", i, i < n ? p[i] : 0, want);
}

// An event pair around a phase: the elapsed time must be a real, non-negative time.
static void check_elapsed(cudaEvent_t start, cudaEvent_t stop, const char *name)
{
    float ms = -1.0f;
    cudaError_t e = cudaEventElapsedTime(&ms, start, stop);
    check(e == cudaSuccess && ms >= 0.0f, name, "%s, %f ms", cudaGetErrorName(e), ms);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 16;
    if (argc > 2)
        REPS = atoi(argv[2]);
    bool host_only = argc > 3 && strcmp(argv[3], "host-only") == 0;
    size_t bytes = mib << 20, n = bytes / sizeof(int);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    check_cuda(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost),
               "cudaSetDeviceFlags(BlockingSync | MapHost)");
    unsigned flags = 0;
    check_cuda(cudaGetDeviceFlags(&flags), "cudaGetDeviceFlags");
    check((flags & (cudaDeviceScheduleBlockingSync | cudaDeviceMapHost)) ==
              (cudaDeviceScheduleBlockingSync | cudaDeviceMapHost),
          "device flags say blocking sync and mapped host memory", "flags %#x", flags);

    // A page more than needed, aligned up to a page as such programs do.
    char *raw = (char *)mmap(NULL, bytes + page, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!check(raw != MAP_FAILED, "mmap", "failed"))
        return check_exit_status();
    int *h = (int *)(((uintptr_t)raw + page - 1) / page * page);
    if (!check_cuda(cudaHostRegister(h, bytes, cudaHostRegisterMapped),
                    "cudaHostRegister(mmap'd memory, Mapped)"))
        return check_exit_status();

    int *d = NULL;
    check_cuda(cudaMalloc((void **)&d, bytes), "cudaMalloc");
    check_cuda(cudaMemset(d, 0, bytes), "cudaMemset");

    cudaStream_t streams[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++)
        check_cuda(cudaStreamCreate(&streams[i]), "cudaStreamCreate");
    cudaEvent_t start, stop;
    check_cuda(cudaEventCreateWithFlags(&start, cudaEventBlockingSync),
               "cudaEventCreateWithFlags(BlockingSync) start");
    check_cuda(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync),
               "cudaEventCreateWithFlags(BlockingSync) stop");

    // One copy to the registered memory, timed on the legacy stream.
    memset(h, 0x5a, bytes);
    check_cuda(cudaEventRecord(start, 0), "cudaEventRecord start");
    check_cuda(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, streams[0]),
               "cudaMemcpyAsync device to registered memory");
    check_cuda(cudaEventRecord(stop, 0), "cudaEventRecord stop");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize after the copy");
    check_elapsed(start, stop, "elapsed time of the copy");
    check_all(h, n, 0, "the copy reached the registered memory");

    // One kernel on a created stream, timed on the legacy stream.
    check_cuda(cudaEventRecord(start, 0), "cudaEventRecord start (kernel)");
    k_inc<<<blocks_for(n), 256, 0, streams[0]>>>(d, (int)n);
    check_cuda(cudaGetLastError(), "k_inc launch");
    check_cuda(cudaEventRecord(stop, 0), "cudaEventRecord stop (kernel)");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize after the kernel");
    check_elapsed(start, stop, "elapsed time of the kernel");

    // Kernel then blocking copy, on the legacy stream, REPS times.
    check_cuda(cudaEventRecord(start, 0), "cudaEventRecord start (serial)");
    for (int r = 0; r < REPS; r++) {
        k_inc<<<blocks_for(n), 256>>>(d, (int)n);
        check_cuda(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (serial)");
    }
    check_cuda(cudaEventRecord(stop, 0), "cudaEventRecord stop (serial)");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize (serial)");
    check_elapsed(start, stop, "elapsed time of the serial phase");
    check_all(h, n, 1 + REPS, "serial kernels and copies");

    // Each stream its slice: kernels on all, then copies on all, REPS times.
    memset(h, 0xff, bytes);
    check_cuda(cudaMemset(d, 0, bytes), "cudaMemset (streamed)");
    size_t slice = n / NSTREAMS;
    check_cuda(cudaEventRecord(start, 0), "cudaEventRecord start (streamed)");
    for (int r = 0; r < REPS; r++) {
        for (int i = 0; i < NSTREAMS; i++)
            k_inc<<<blocks_for(slice), 256, 0, streams[i]>>>(d + i * slice, (int)slice);
        for (int i = 0; i < NSTREAMS; i++)
            cudaMemcpyAsync(h + i * slice, d + i * slice, slice * sizeof(int),
                            cudaMemcpyDeviceToHost, streams[i]);
    }
    check_cuda(cudaGetLastError(), "streamed launches and copies");
    check_cuda(cudaEventRecord(stop, 0), "cudaEventRecord stop (streamed)");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize (streamed)");
    check_elapsed(start, stop, "elapsed time of the streamed phase");
    check_all(h, n, REPS, "streamed kernels and copies");

    // The registered memory's device pointer in a kernel (zero copy).
    int *hd = NULL;
    if (!host_only &&
        check_cuda(cudaHostGetDevicePointer((void **)&hd, h, 0), "cudaHostGetDevicePointer")) {
        k_inc<<<blocks_for(n), 256, 0, streams[1]>>>(hd, (int)n);
        check_cuda(cudaStreamSynchronize(streams[1]), "kernel on the registered memory");
        check_all(h, n, REPS + 1, "a kernel wrote the registered memory");
    }

    for (int i = 0; i < NSTREAMS; i++)
        check_cuda(cudaStreamDestroy(streams[i]), "cudaStreamDestroy");
    check_cuda(cudaEventDestroy(start), "cudaEventDestroy start");
    check_cuda(cudaEventDestroy(stop), "cudaEventDestroy stop");
    check_cuda(cudaHostUnregister(h), "cudaHostUnregister");
    check_all(h, n, REPS + !host_only, "the memory keeps its bytes after unregistering");
    munmap(raw, bytes + page);
    check_cuda(cudaFree(d), "cudaFree");
    return check_exit_status();
}

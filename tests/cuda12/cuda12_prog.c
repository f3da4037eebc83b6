/* A CUDA 12 program: compiled against the CUDA 12.9 headers (from the
 * pinned wheels) and linked to libcudart.so.12, as a program built with a
 * CUDA 12 toolkit is.  It runs through rgpu's libcudart.so.12:
 *   - memory, copies, memsets, streams, events and device queries come back
 *     as CUDA defines them (the same functions as in CUDA 13);
 *   - cudaGetDeviceProperties (cudaGetDeviceProperties_v2 under CUDA 12's
 *     headers) fills CUDA 12's cudaDeviceProp, whose layout CUDA 13
 *     changed, agreeing with the device attributes; cudaPointerGetAttributes
 *     fills CUDA 12's smaller cudaPointerAttributes and nothing past it;
 *   - a function the server's CUDA 13 runtime lacks (cudaEventElapsedTime_v2,
 *     gone in CUDA 13) returns cudaErrorNotSupported, never success, and
 *     says why in rgpu's log (the test script checks the line).
 * Prints "cuda12: ok" when all of it holds.
 *
 * `cuda12_prog compare` leaves out what differs by design between a native
 * run (the real libcudart.so.12) and one through rgpu (served by CUDA 13):
 * the runtime version and the refusals.  Its output is then the same both
 * ways (tests/gpu/cuda12_check.sh compares them on the GPU host). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#if CUDART_VERSION < 12000 || CUDART_VERSION >= 13000
#error "build this against the CUDA 12 headers"
#endif

#define N 4096

static int failures;
static int comparing;   /* `compare`: what a native run prints the same */

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "cuda12: FAIL: %s\n", what);
        failures++;
    }
}

static void check_rc(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "cuda12: FAIL: %s: %s\n", what, cudaGetErrorName(rc));
        failures++;
    }
}

static void copies(void)
{
    static unsigned char host[N], back[N];
    unsigned char *dev = NULL;
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    check_rc(cudaMalloc((void **)&dev, N), "cudaMalloc");
    check_rc(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    /* CUDA 12's cudaPointerAttributes lacks CUDA 13's reserved tail. */
    struct {
        struct cudaPointerAttributes a;
        unsigned char guard[64];
    } pa;
    memset(&pa, 0xee, sizeof pa);
    check_rc(cudaPointerGetAttributes(&pa.a, dev + 16), "cudaPointerGetAttributes");
    check(pa.a.type == cudaMemoryTypeDevice, "a device pointer's type");
    check(pa.a.devicePointer == (void *)(dev + 16), "a device pointer is its own device pointer");
    check(pa.a.device == 0, "a device pointer's device");
    check(pa.guard[0] == 0xee && pa.guard[63] == 0xee, "nothing written past the structure");
    printf("cuda12: pointer attributes: type %d, device %d\n", (int)pa.a.type, pa.a.device);
    check_rc(cudaMemset(dev + N / 2, 0x5a, N / 4), "cudaMemset");
    cudaStream_t s;
    cudaEvent_t e;
    check_rc(cudaStreamCreate(&s), "cudaStreamCreate");
    check_rc(cudaEventCreate(&e), "cudaEventCreate");
    /* cudaStreamGetCaptureInfo_v2 under CUDA 12's headers, gone in CUDA 13:
     * on the GPU only (the fake backend has no cudaStreamGetCaptureInfo). */
    if (comparing) {
        enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
        check_rc(cudaStreamGetCaptureInfo(s, &capture, NULL, NULL, NULL, NULL),
                 "cudaStreamGetCaptureInfo");
        check(capture == cudaStreamCaptureStatusNone, "a stream that is not capturing");
        printf("cuda12: capture status %d\n", (int)capture);
    }
    check_rc(cudaMemcpyAsync(back, dev, N, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    check_rc(cudaEventRecord(e, s), "cudaEventRecord");
    check_rc(cudaEventSynchronize(e), "cudaEventSynchronize");
    unsigned long sum = 0;
    for (int i = 0; i < N; i++)
        sum = sum * 31 + back[i];
    printf("cuda12: %d bytes back, checksum %lu\n", N, sum);
    for (int i = 0; i < N; i++) {
        unsigned char want = i >= N / 2 && i < N / 2 + N / 4 ? 0x5a : host[i];
        if (back[i] != want) {
            fprintf(stderr, "cuda12: FAIL: byte %d is %#x, not %#x\n", i, back[i], want);
            failures++;
            break;
        }
    }
    check_rc(cudaEventDestroy(e), "cudaEventDestroy");
    check_rc(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_rc(cudaFree(dev), "cudaFree");
}

static void queries(void)
{
    int count = 0, version = 0, sms = 0;
    check_rc(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    check(count > 0, "at least one device");
    check_rc(cudaRuntimeGetVersion(&version), "cudaRuntimeGetVersion");
    check(version > 0, "a runtime version");
    check_rc(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0),
             "cudaDeviceGetAttribute");
    check(sms > 0, "multiprocessors");
    if (comparing)
        printf("cuda12: %d device(s), %d multiprocessors\n", count, sms);
    else
        printf("cuda12: %d device(s), runtime %d, %d multiprocessors\n", count, version, sms);
}

/* CUDA 12's headers turn cudaGetDeviceProperties into _v2, CUDA 12's layout. */
static void properties(void)
{
    struct cudaDeviceProp prop;
    int sms = 0, major = 0, warp = 0, threads = 0;
    memset(&prop, 0, sizeof prop);
    check_rc(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    check_rc(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    check_rc(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "major");
    check_rc(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0), "warp size");
    check_rc(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerBlock, 0), "threads");
    check(prop.name[0] != '\0', "a device name");
    check(prop.multiProcessorCount == sms && sms > 0, "multiProcessorCount is the attribute's");
    check(prop.major == major && major > 0, "major is the attribute's");
    check(prop.warpSize == warp && warp > 0, "warpSize is the attribute's");
    check(prop.maxThreadsPerBlock == threads && threads > 0, "maxThreadsPerBlock");
    check(prop.totalGlobalMem > 0, "totalGlobalMem");
    check(cudaPeekAtLastError() == cudaSuccess, "no error left behind");
    printf("cuda12: device 0: %s, compute capability %d.%d, %d SMs, %zu bytes, warp %d, "
           "%d threads per block, %zu bytes shared per block, L2 %d bytes, clock %d kHz\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem,
           prop.warpSize, prop.maxThreadsPerBlock, prop.sharedMemPerBlock, prop.l2CacheSize,
           prop.clockRate);
}

static void refusals(void)
{
    cudaError_t rc;
    cudaEvent_t a, b;
    float ms = -1;
    check_rc(cudaEventCreate(&a), "cudaEventCreate");
    check_rc(cudaEventCreate(&b), "cudaEventCreate");
    rc = cudaEventElapsedTime_v2(&ms, a, b);
    check(rc == cudaErrorNotSupported, "cudaEventElapsedTime_v2 (not in CUDA 13) is refused");
    check(ms == -1, "a refused call leaves its output alone");
    (void)cudaGetLastError();
    check_rc(cudaEventDestroy(a), "cudaEventDestroy");
    check_rc(cudaEventDestroy(b), "cudaEventDestroy");
    check_rc(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the refusals");
}

int main(int argc, char **argv)
{
    comparing = argc > 1 && strcmp(argv[1], "compare") == 0;
    queries();
    properties();
    copies();
    if (!comparing)
        refusals();
    if (failures)
        return 1;
    printf("cuda12: ok\n");
    return 0;
}

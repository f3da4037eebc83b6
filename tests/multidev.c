/* Several GPUs (tests/multidev.sh): device selection per thread, memory
 * per device (and the device pointer attributes name, however it was
 * allocated), peer access and copies between devices, streams and events
 * per device, cuBLAS and cuDNN handles bound to the device current at
 * their creation, and NVML's view of each device agreeing with CUDA's.
 * Runs natively (on the fake GPU with RGPU_FAKEGPU_DEVICES=N, or a GPU
 * machine's) and through rgpu; both print the same lines.
 *
 *   multidev N      N: the devices the program must see */
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nvml.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 8
#define THREADS 4
#define ROUNDS 50
#define BYTES (1u << 20)

static int failures;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, const char *what)
{
    pthread_mutex_lock(&report_lock);
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
    pthread_mutex_unlock(&report_lock);
}

static void expect(cudaError_t got, cudaError_t want, const char *what)
{
    if (got != want) {
        pthread_mutex_lock(&report_lock);
        printf("FAIL %s: %s, want %s\n", what, cudaGetErrorName(got), cudaGetErrorName(want));
        failures++;
        pthread_mutex_unlock(&report_lock);
    }
}

static int ordinal_of(const void *p)
{
    int dev = -1;
    if (cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                              (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return -1;
    return dev;
}

static void uuid_text(int dev, char out[64])
{
    CUuuid u;
    CUdevice d;
    memset(&u, 0, sizeof u);
    if (cuDeviceGet(&d, dev) != CUDA_SUCCESS || cuDeviceGetUuid_v2(&u, d) != CUDA_SUCCESS)
        snprintf(out, 64, "?");
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(out, 64, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

/* Each device: selected, its memory is its own, NVML names it as CUDA does. */
static void devices(int n, void *mem[])
{
    char bus[MAX_DEV][32], uuid[64], nvml_uuid[96];
    nvmlDevice_t h;
    for (int i = 0; i < n; i++) {
        int cur = -1;
        nvmlMemory_t before = { 0 }, after = { 0 };
        expect(cudaSetDevice(i), cudaSuccess, "cudaSetDevice");
        expect(cudaGetDevice(&cur), cudaSuccess, "cudaGetDevice");
        check(cur == i, "cudaGetDevice is the device set");
        check(nvmlDeviceGetHandleByIndex_v2((unsigned)i, &h) == NVML_SUCCESS, "NVML handle");
        check(nvmlDeviceGetMemoryInfo(h, &before) == NVML_SUCCESS, "NVML memory before");
        expect(cudaMalloc(&mem[i], BYTES), cudaSuccess, "cudaMalloc");
        check(nvmlDeviceGetMemoryInfo(h, &after) == NVML_SUCCESS, "NVML memory after");
        check(after.used >= before.used + BYTES, "the allocation shows on its device in NVML");
        check(ordinal_of(mem[i]) == i, "the allocation belongs to the device set");
        expect(cudaMemset(mem[i], 0x10 + i, BYTES), cudaSuccess, "cudaMemset");
        expect(cudaDeviceGetPCIBusId(bus[i], sizeof bus[i], i), cudaSuccess, "PCI bus id");
        uuid_text(i, uuid);
        check(nvmlDeviceGetUUID(h, nvml_uuid, sizeof nvml_uuid) == NVML_SUCCESS &&
                  strcmp(uuid, nvml_uuid) == 0,
              "NVML's UUID of the device is CUDA's");
        printf("device %d: %s %s\n", i, bus[i], uuid);
        for (int k = 0; k < i; k++)
            check(strcmp(bus[k], bus[i]) != 0, "devices sit on different buses");
    }
    expect(cudaSetDevice(n), cudaErrorInvalidDevice, "no device past the count");
    (void)cudaGetLastError();
}

struct worker {
    int id, device;
};

/* Each thread keeps its own device through many calls while the others
 * use theirs, making and freeing memory and streams (whose addresses the
 * library hands out again at once to another thread). */
static void *worker(void *arg)
{
    struct worker *w = arg;
    unsigned char *host = malloc(BYTES);
    void *p = NULL;
    expect(cudaSetDevice(w->device), cudaSuccess, "thread: cudaSetDevice");
    for (int r = 0; r < ROUNDS && host; r++) {
        int cur = -1;
        expect(cudaGetDevice(&cur), cudaSuccess, "thread: cudaGetDevice");
        check(cur == w->device, "thread: the device stays the thread's");
        expect(cudaMalloc(&p, BYTES), cudaSuccess, "thread: cudaMalloc");
        check(ordinal_of(p) == w->device, "thread: memory on the thread's device");
        cudaStream_t s = NULL;
        expect(cudaStreamCreate(&s), cudaSuccess, "thread: cudaStreamCreate");
        expect(cudaMemsetAsync(p, w->id + r, BYTES, s), cudaSuccess, "thread: cudaMemsetAsync");
        expect(cudaStreamSynchronize(s), cudaSuccess, "thread: cudaStreamSynchronize");
        expect(cudaStreamDestroy(s), cudaSuccess, "thread: cudaStreamDestroy");
        expect(cudaMemcpy(host, p, BYTES, cudaMemcpyDeviceToHost), cudaSuccess,
               "thread: cudaMemcpy");
        check(host[0] == (unsigned char)(w->id + r) && host[BYTES - 1] == host[0],
              "thread: the bytes set");
        expect(cudaFree(p), cudaSuccess, "thread: cudaFree");
    }
    free(host);
    return NULL;
}

static void threads(int n)
{
    pthread_t t[THREADS];
    struct worker w[THREADS];
    int before = -1, after = -1;
    expect(cudaSetDevice(0), cudaSuccess, "main: cudaSetDevice 0");
    expect(cudaGetDevice(&before), cudaSuccess, "main: cudaGetDevice");
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){ i, (i + 1) % n };
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    expect(cudaGetDevice(&after), cudaSuccess, "main: cudaGetDevice after");
    check(before == 0 && after == 0, "the other threads' devices are not the main thread's");
    printf("%d threads on %d devices: done\n", THREADS, n);
}

/* The device cudaPointerGetAttributes names (-1 when it fails). */
static int attr_device(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess)
        return -1;
    return a.device;
}

/* Memory of device 1 made every way the client cannot tell its device
 * from: after a driver context switch, through the driver, on a fresh
 * thread; runtime and driver pointer attributes both name device 1. */
static void *on_device_1_without_set(void *arg)
{
    CUcontext c1 = NULL;
    CUdevice d1;
    CUdeviceptr dp = 0;
    void *p = NULL;
    (void)arg;
    expect(cuDeviceGet(&d1, 1) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown, cudaSuccess,
           "cuDeviceGet 1");
    expect(cuDevicePrimaryCtxRetain(&c1, d1) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown,
           cudaSuccess, "cuDevicePrimaryCtxRetain 1");
    expect(cuCtxSetCurrent(c1) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown, cudaSuccess,
           "cuCtxSetCurrent 1");
    expect(cudaMalloc(&p, 4096), cudaSuccess, "cudaMalloc in device 1's context");
    check(attr_device(p) == 1 && ordinal_of(p) == 1,
          "pointer attributes: cudaMalloc in a context of device 1");
    check(cuMemAlloc(&dp, 4096) == CUDA_SUCCESS, "cuMemAlloc");
    check(attr_device((void *)(uintptr_t)dp) == 1 && ordinal_of((void *)(uintptr_t)dp) == 1,
          "pointer attributes: cuMemAlloc in device 1's context");
    check(cuMemFree(dp) == CUDA_SUCCESS, "cuMemFree");
    expect(cudaFree(p), cudaSuccess, "cudaFree");
    cuDevicePrimaryCtxRelease(d1);
    return NULL;
}

static void pointer_attributes(void *mem[], int n)
{
    pthread_t t;
    for (int i = 0; i < n; i++)
        check(attr_device(mem[i]) == i, "cudaPointerGetAttributes names the device");
    pthread_create(&t, NULL, on_device_1_without_set, NULL);
    pthread_join(t, NULL);
    printf("pointer attributes: %d devices\n", n);
}

/* Streams and events are their device's: a kernel or an event record
 * cannot go to a stream of another device, an event of another device
 * can be waited for. */
static void streams_events(void)
{
    cudaStream_t s1;
    cudaEvent_t e0, e1;
    expect(cudaSetDevice(1), cudaSuccess, "cudaSetDevice 1");
    expect(cudaStreamCreate(&s1), cudaSuccess, "stream on device 1");
    expect(cudaEventCreate(&e1), cudaSuccess, "event on device 1");
    expect(cudaSetDevice(0), cudaSuccess, "cudaSetDevice 0");
    expect(cudaEventCreate(&e0), cudaSuccess, "event on device 0");
    cudaError_t other = cudaEventRecord(e0, s1);
    (void)cudaGetLastError();
    expect(cudaEventRecord(e1, s1), cudaSuccess, "an event recorded on its own device's stream");
    expect(cudaStreamWaitEvent(NULL, e1, 0), cudaSuccess, "waiting for another device's event");
    expect(cudaEventSynchronize(e1), cudaSuccess, "cudaEventSynchronize");
    printf("event of device 0 on a stream of device 1: %s\n", cudaGetErrorName(other));
    expect(cudaEventDestroy(e0), cudaSuccess, "cudaEventDestroy");
    expect(cudaEventDestroy(e1), cudaSuccess, "cudaEventDestroy");
    expect(cudaStreamDestroy(s1), cudaSuccess, "cudaStreamDestroy");
}

/* cuBLAS and cuDNN handles made on device 1, with a stream of device 1,
 * run there after the thread switched to device 0 (on the fake GPU, a
 * handle's work on a stream of another device than its own fails: made
 * on the wrong device, these would compute nothing). */
static void library_handles(void)
{
    enum { N = 256 };
    float host[N], two = 2.0f, three = 3.0f;
    float *x = NULL;
    cudaStream_t s1;
    cublasHandle_t blas1 = NULL;
    cudnnHandle_t dnn1 = NULL;
    cudnnTensorDescriptor_t t = NULL;
    int cur = -1;
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    expect(cudaSetDevice(1), cudaSuccess, "cudaSetDevice 1");
    expect(cudaStreamCreate(&s1), cudaSuccess, "stream on device 1");
    expect(cudaMalloc((void **)&x, sizeof host), cudaSuccess, "cudaMalloc on device 1");
    expect(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess, "upload");
    check(cublasCreate(&blas1) == CUBLAS_STATUS_SUCCESS &&
              cublasSetStream(blas1, s1) == CUBLAS_STATUS_SUCCESS,
          "cuBLAS handle on device 1");
    check(cudnnCreate(&dnn1) == CUDNN_STATUS_SUCCESS && cudnnSetStream(dnn1, s1) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS &&
              cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, N) ==
                  CUDNN_STATUS_SUCCESS,
          "cuDNN handle on device 1");
    expect(cudaSetDevice(0), cudaSuccess, "cudaSetDevice 0");
    check(cublasSscal(blas1, N, &two, x, 1) == CUBLAS_STATUS_SUCCESS,
          "cuBLAS handle of device 1 used while device 0 is current");
    check(cudnnScaleTensor(dnn1, t, x, &three) == CUDNN_STATUS_SUCCESS,
          "cuDNN handle of device 1 used while device 0 is current");
    expect(cudaStreamSynchronize(s1), cudaSuccess, "cudaStreamSynchronize");
    expect(cudaGetDevice(&cur), cudaSuccess, "cudaGetDevice");
    check(cur == 0, "the libraries leave the thread's device alone");
    expect(cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess, "download");
    int right = 1;
    for (int i = 0; i < N; i++)
        right &= host[i] == (float)i * 6.0f;
    check(right, "the handles of device 1 computed on device 1's memory");
    printf("library handles of device 1 used from device 0: x[5] = %g\n", (double)host[5]);
    cudnnDestroyTensorDescriptor(t);
    cudnnDestroy(dnn1);
    cublasDestroy(blas1);
    expect(cudaFree(x), cudaSuccess, "cudaFree");
    expect(cudaStreamDestroy(s1), cudaSuccess, "cudaStreamDestroy");
    (void)cudaGetLastError();
}

/* Peer access and copies between devices 0 and 1. */
static void peers(void *mem[])
{
    int can = -1;
    unsigned char host[16];
    expect(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess, "cudaDeviceCanAccessPeer");
    printf("device 0 can access device 1: %d\n", can);
    expect(cudaSetDevice(0), cudaSuccess, "cudaSetDevice 0");
    /* GPUs without a peer link still copy between them, through the host. */
    if (can) {
        expect(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess, "cudaDeviceEnablePeerAccess");
        expect(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled,
               "cudaDeviceEnablePeerAccess again");
    }
    (void)cudaGetLastError();
    expect(cudaMemcpyPeer(mem[0], 0, mem[1], 1, BYTES / 2), cudaSuccess, "cudaMemcpyPeer");
    expect(cudaMemcpy(host, mem[0], sizeof host, cudaMemcpyDeviceToHost), cudaSuccess,
           "read back");
    check(host[0] == 0x11, "device 0 got device 1's bytes");
    expect(cudaMemcpy(mem[1], mem[0] + BYTES / 2 - 8, 16, cudaMemcpyDefault), cudaSuccess,
           "cudaMemcpyDefault between devices");
    expect(cudaMemcpy(host, mem[1], sizeof host, cudaMemcpyDeviceToHost), cudaSuccess,
           "read back");
    check(host[0] == 0x11 && host[8] == 0x10, "device 1 got device 0's bytes");
    if (can)
        expect(cudaDeviceDisablePeerAccess(1), cudaSuccess, "cudaDeviceDisablePeerAccess");
    expect(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled,
           "cudaDeviceDisablePeerAccess again");
    (void)cudaGetLastError();
    printf("peer copies: %02x %02x\n", host[0], host[8]);
}

int main(int argc, char **argv)
{
    int want = argc == 2 ? atoi(argv[1]) : 0, n = 0;
    unsigned nvml_n = 0;
    void *mem[MAX_DEV] = { 0 };
    if (want < 1 || want > MAX_DEV) {
        fprintf(stderr, "usage: %s DEVICES (1 to %d)\n", argv[0], MAX_DEV);
        return 2;
    }
    expect(cudaGetDeviceCount(&n), cudaSuccess, "cudaGetDeviceCount");
    check(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetCount_v2(&nvml_n) == NVML_SUCCESS,
          "NVML");
    printf("devices: CUDA %d, NVML %u\n", n, nvml_n);
    check(n == want && nvml_n == (unsigned)want, "the devices expected");
    if (n == want) {
        devices(n, mem);
        threads(n);
        if (n >= 2) {
            peers(mem);
            pointer_attributes(mem, n);
            streams_events();
            library_handles();
        }
    }
    for (int i = 0; i < n && i < MAX_DEV; i++)
        if (mem[i]) {
            cudaSetDevice(i);
            expect(cudaFree(mem[i]), cudaSuccess, "cudaFree");
        }
    nvmlShutdown();
    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}

/* Several GPUs (tests/multidev.sh): device selection per thread, memory
 * per device, peer access and copies between devices, and NVML's view of
 * each device agreeing with CUDA's.  Runs natively on the fake GPU with
 * RGPU_FAKEGPU_DEVICES=N and through rgpu against an rgpud whose fake has N
 * devices; both print the same lines.
 *
 *   multidev N      N: the devices the program must see */
#include <cuda.h>
#include <cuda_runtime_api.h>
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

/* Peer access and copies between devices 0 and 1. */
static void peers(void *mem[])
{
    int can = -1;
    unsigned char host[16];
    expect(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess, "cudaDeviceCanAccessPeer");
    printf("device 0 can access device 1: %d\n", can);
    expect(cudaSetDevice(0), cudaSuccess, "cudaSetDevice 0");
    expect(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess, "cudaDeviceEnablePeerAccess");
    expect(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled,
           "cudaDeviceEnablePeerAccess again");
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
        if (n >= 2)
            peers(mem);
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

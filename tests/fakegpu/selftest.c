// Self-test of the fake GPU backend, without rgpu in between:
//
//   fakegpu-selftest <path of the fake libcudart.so.N> <image>...
//
// dlopens the fake runtime (which pulls in the fake libcuda next to it),
// loads each image (fatbins and a cubin of tests/progs/kernels.cuh) as a
// library, checks parameter layouts against what this C compiler computes
// for the same parameter lists, launches kernels and checks their results
// and the error codes a real GPU gives for bad pointers and configurations.
// Prints one line per check; exits 1 if any failed.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Runtime and driver functions, resolved from the fake libraries.
#define FUNCS(X)                                                              \
    X(cudaGetDeviceCount) X(cudaGetDeviceProperties) X(cudaDeviceGetAttribute) \
    X(cudaDriverGetVersion) X(cudaRuntimeGetVersion) X(cudaSetDevice)         \
    X(cudaGetDevice) X(cudaMalloc) X(cudaFree) X(cudaMemGetInfo)              \
    X(cudaMallocPitch) X(cudaMemcpy) X(cudaMemcpyAsync) X(cudaMemcpy2D)       \
    X(cudaMemset) X(cudaMemset2D) X(cudaDeviceSynchronize) X(cudaDeviceReset) \
    X(cudaStreamCreate) X(cudaStreamDestroy) X(cudaStreamSynchronize)         \
    X(cudaEventCreate) X(cudaEventRecord) X(cudaEventSynchronize)             \
    X(cudaEventElapsedTime) X(cudaEventDestroy) X(cudaGetLastError)           \
    X(cudaPeekAtLastError) X(cudaGetErrorName) X(cudaLibraryLoadData)         \
    X(cudaLibraryUnload) X(cudaLibraryGetKernel) X(cudaLibraryGetGlobal)      \
    X(cudaFuncGetParamInfo) X(cudaFuncGetAttributes) X(cudaLaunchKernel)      \
    X(cuMemCreate) X(cuMemAddressReserve) X(cuMemMap) X(cuMemSetAccess)       \
    X(cuMemUnmap) X(cuMemRelease) X(cuMemAddressFree)                         \
    X(cuMemGetAllocationGranularity) X(cuLaunchKernel)

#define DECLARE(f) static __typeof__(&f) p_##f;
FUNCS(DECLARE)

static int failures;

static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!ok)
        failures++;
}

static void check_err(cudaError_t got, cudaError_t want, const char *what)
{
    check(got == want, "%s -> %s (got %s)", what, p_cudaGetErrorName(want),
          p_cudaGetErrorName(got));
}

static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    void *buf = NULL;

    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

// ---- Parameter layouts --------------------------------------------------------------------
//
// CUDA packs kernel parameters like the members of a struct: each at the
// next offset aligned to its own alignment.

struct rgpu_test_params {       // as in kernels.cuh
    float *out;
    const float *in;
    int n;
    float scale;
    double offset;
    char tag[12];
};

struct rgpu_test_big { long long v[512]; };

struct param { size_t size, align; };
#define P(T) { sizeof(T), _Alignof(T) }

static void check_layout(cudaKernel_t k, const char *name,
                         const struct param *ps, size_t n)
{
    size_t off = 0, got_off, got_size;

    for (size_t i = 0; i < n; i++) {
        cudaError_t e;

        off = (off + ps[i].align - 1) / ps[i].align * ps[i].align;
        got_off = got_size = 0;
        e = p_cudaFuncGetParamInfo(k, i, &got_off, &got_size);
        check(e == cudaSuccess && got_off == off && got_size == ps[i].size,
              "%s param %zu at %zu size %zu (got %s, %zu, %zu)", name, i, off,
              ps[i].size, p_cudaGetErrorName(e), got_off, got_size);
        off += ps[i].size;
    }
    check_err(p_cudaFuncGetParamInfo(k, n, &got_off, &got_size),
              cudaErrorInvalidValue, "cudaFuncGetParamInfo past the last");
}

static void check_layouts(cudaLibrary_t lib)
{
    static const struct param k_struct[] = { P(struct rgpu_test_params) };
    static const struct param k_big[] = { P(long long *), P(struct rgpu_test_big) };
    static const struct param k_scalars[] = {
        P(char), P(short), P(int), P(long long), P(float), P(double),
        P(unsigned char), P(double *),
    };
    static const struct param k_axpy[] = { P(float), P(float *), P(float *), P(int) };
    static const struct {
        const char *name;
        const struct param *ps;
        size_t n;
    } ks[] = {
        { "_Z8k_struct16rgpu_test_params", k_struct, 1 },
        { "_Z5k_bigPx13rgpu_test_big", k_big, 2 },
        { "_Z9k_scalarscsixfdhPd", k_scalars, 8 },
        { "_Z6k_axpyfPKfPfi", k_axpy, 4 },
    };
    cudaKernel_t k;

    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        cudaError_t e = p_cudaLibraryGetKernel(&k, lib, ks[i].name);
        check(e == cudaSuccess, "cudaLibraryGetKernel %s", ks[i].name);
        if (e == cudaSuccess)
            check_layout(k, ks[i].name, ks[i].ps, ks[i].n);
    }
    check_err(p_cudaLibraryGetKernel(&k, lib, "no_such_kernel"),
              cudaErrorSymbolNotFound, "cudaLibraryGetKernel unknown name");
}

// ---- Launches -------------------------------------------------------------------------------

#define N 1000

// What a launch with an impossible configuration reports (measured on an
// H200 with the CUDA 13.0 runtime; CUDA 12 said invalid configuration).
#if CUDART_VERSION >= 13000
#define BAD_LAUNCH cudaErrorInvalidValue
#else
#define BAD_LAUNCH cudaErrorInvalidConfiguration
#endif

static cudaKernel_t kernel(cudaLibrary_t lib, const char *name)
{
    cudaKernel_t k = NULL;

    check(p_cudaLibraryGetKernel(&k, lib, name) == cudaSuccess,
          "cudaLibraryGetKernel %s", name);
    return k;
}

static cudaError_t launch(cudaKernel_t k, dim3 g, dim3 b, void **args)
{
    return p_cudaLaunchKernel((const void *)k, g, b, args, 0, NULL);
}

static void test_axpy(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z6k_axpyfPKfPfi");
    float x[N], y[N], want[N], a = 1.5f;
    float *dx = NULL, *dy = NULL;
    int n = N;
    void *args[] = { &a, &dx, &dy, &n };
    int bad = -1;

    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.25f;
        y[i] = 1000.0f - (float)i / 3.0f;
        want[i] = fmaf(a, x[i], y[i]);
    }
    check(p_cudaMalloc((void **)&dx, sizeof x) == cudaSuccess &&
          p_cudaMalloc((void **)&dy, sizeof y) == cudaSuccess, "cudaMalloc x, y");
    p_cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    p_cudaMemcpy(dy, y, sizeof y, cudaMemcpyDefault);
    check_err(launch(k, (dim3){ (N + 255) / 256, 1, 1 }, (dim3){ 256, 1, 1 }, args),
              cudaSuccess, "launch k_axpy");
    check_err(p_cudaDeviceSynchronize(), cudaSuccess, "synchronize after k_axpy");
    check_err(p_cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), cudaSuccess,
              "copy y back");
    for (int i = 0; i < N && bad < 0; i++)
        if (y[i] != want[i])
            bad = i;
    check(bad < 0, "k_axpy results (first bad %d)", bad);

    // Bad configurations: the launch itself fails, and leaves a last error.
    check_err(launch(k, (dim3){ 1, 1, 1 }, (dim3){ 2048, 1, 1 }, args),
              BAD_LAUNCH, "2048 threads per block");
    check_err(launch(k, (dim3){ 1, 1, 1 }, (dim3){ 64, 32, 1 }, args),
              BAD_LAUNCH, "64x32 threads per block");
    check_err(launch(k, (dim3){ 1, 65536, 1 }, (dim3){ 32, 1, 1 }, args),
              BAD_LAUNCH, "grid.y 65536");
    check_err(p_cudaGetLastError(), BAD_LAUNCH, "cudaGetLastError after bad config");
    check_err(p_cudaGetLastError(), cudaSuccess, "cudaGetLastError cleared");
    check_err(launch((cudaKernel_t)(uintptr_t)0x1234, (dim3){ 1, 1, 1 },
                     (dim3){ 1, 1, 1 }, args),
              cudaErrorInvalidDeviceFunction, "launch of a bogus kernel handle");
    p_cudaGetLastError();
    p_cudaFree(dx);
    p_cudaFree(dy);
}

static void test_fill(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z10k_fill_u32Pjjy");
    uint32_t h[N + 8], v = 0xC0FFEE42;
    uint32_t *d = NULL;
    unsigned long long n = N;
    void *args[] = { &d, &v, &n };
    int bad = -1;

    check(p_cudaMalloc((void **)&d, sizeof h) == cudaSuccess, "cudaMalloc fill");
    p_cudaMemset(d, 0, sizeof h);
    check_err(launch(k, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, args),
              cudaSuccess, "launch k_fill_u32");
    p_cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N + 8 && bad < 0; i++)
        if (h[i] != (i < N ? v : 0))
            bad = i;
    check(bad < 0, "k_fill_u32 results, tail untouched (first bad %d)", bad);
    p_cudaFree(d);
}

// A kernel writing outside every allocation: the launch succeeds, the next
// synchronizing call reports the fault, and it stays until a reset.
static void test_fault(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z6k_pokePi");
    int *d = NULL, *bad = (int *)(uintptr_t)0x10;
    void *args[] = { &bad };
    void *p = NULL;

    check(p_cudaMalloc((void **)&d, 64) == cudaSuccess, "cudaMalloc poke");
    bad = d + 16;       // one past the end
    check_err(launch(k, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args),
              cudaSuccess, "launch k_poke past the end");
    check_err(p_cudaGetLastError(), cudaSuccess,
              "cudaGetLastError before the fault is seen");
    check_err(p_cudaDeviceSynchronize(), cudaErrorIllegalAddress,
              "cudaDeviceSynchronize after the fault");
    check_err(p_cudaMalloc(&p, 16), cudaErrorIllegalAddress, "cudaMalloc after the fault");
    check_err(p_cudaGetLastError(), cudaErrorIllegalAddress, "cudaGetLastError sticky");
    check_err(p_cudaGetLastError(), cudaErrorIllegalAddress, "cudaGetLastError sticky again");
    check_err(p_cudaFree(NULL), cudaErrorIllegalAddress, "cudaFree(NULL) after the fault");
    check_err(launch(k, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args),
              cudaErrorIllegalAddress, "launch after the fault");
    check_err(p_cudaDeviceReset(), cudaSuccess, "cudaDeviceReset");
    check_err(p_cudaGetLastError(), cudaSuccess, "cudaGetLastError after reset");
    check_err(p_cudaMalloc(&p, 16), cudaSuccess, "cudaMalloc after reset");
    p_cudaFree(p);
}

static void test_memory_errors(void)
{
    void *bogus = (void *)(uintptr_t)0x1000, *d = NULL;
    char h[64] = { 0 };

    check(p_cudaMalloc(&d, 32) == cudaSuccess, "cudaMalloc 32");
    check_err(p_cudaMemcpy(bogus, h, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue,
              "cudaMemcpy HostToDevice to a bogus address");
    check_err(p_cudaMemcpy(h, bogus, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue,
              "cudaMemcpy DeviceToHost from a bogus address");
    check_err(p_cudaMemcpy(d, h, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue,
              "cudaMemcpy past the end of an allocation");
    check_err(p_cudaMemset(bogus, 0, 16), cudaErrorInvalidValue, "cudaMemset on a bogus address");
    check_err(p_cudaFree(bogus), cudaErrorInvalidValue, "cudaFree of a bogus address");
    check_err(p_cudaFree((char *)d + 4), cudaErrorInvalidValue, "cudaFree inside an allocation");
    check_err(p_cudaMemcpy(h, h + 32, 16, (enum cudaMemcpyKind)7),
              cudaErrorInvalidMemcpyDirection, "cudaMemcpy with a bad kind");
    check_err(p_cudaFree(d), cudaSuccess, "cudaFree");
    check_err(p_cudaFree(NULL), cudaSuccess, "cudaFree(NULL)");
    p_cudaGetLastError();
}

static void test_2d(void)
{
    enum { W = 100, H = 7 };
    unsigned char src[H][W], dst[H][W];
    unsigned char *d = NULL;
    size_t pitch = 0;
    int ok = 1;

    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            src[y][x] = (unsigned char)(y * 31 + x);
    check_err(p_cudaMallocPitch((void **)&d, &pitch, W, H), cudaSuccess, "cudaMallocPitch");
    check(pitch >= W, "pitch %zu >= width", pitch);
    check_err(p_cudaMemset2D(d, pitch, 0xab, W, H), cudaSuccess, "cudaMemset2D");
    check_err(p_cudaMemcpy2D(dst, W, d, pitch, W, H, cudaMemcpyDeviceToHost), cudaSuccess,
              "cudaMemcpy2D DeviceToHost");
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ok &= dst[y][x] == 0xab;
    check(ok, "cudaMemset2D data");
    check_err(p_cudaMemcpy2D(d, pitch, src, W, W, H, cudaMemcpyHostToDevice), cudaSuccess,
              "cudaMemcpy2D HostToDevice");
    memset(dst, 0, sizeof dst);
    p_cudaMemcpy2D(dst, W, d, pitch, W, H, cudaMemcpyDefault);
    check(memcmp(src, dst, sizeof src) == 0, "cudaMemcpy2D round trip");
    {
        unsigned char *d2 = NULL;
        size_t pitch2 = 0;

        p_cudaMallocPitch((void **)&d2, &pitch2, W, H);
        check_err(p_cudaMemcpy2D(d2, pitch2, d, pitch, W, H, cudaMemcpyDeviceToDevice),
                  cudaSuccess, "cudaMemcpy2D DeviceToDevice");
        memset(dst, 0, sizeof dst);
        p_cudaMemcpy2D(dst, W, d2, pitch2, W, H, cudaMemcpyDeviceToHost);
        check(memcmp(src, dst, sizeof src) == 0, "cudaMemcpy2D DeviceToDevice data");
        p_cudaFree(d2);
    }
    check_err(p_cudaMemcpy2D(dst, W - 1, d, pitch, W, H, cudaMemcpyDeviceToHost),
              cudaErrorInvalidPitchValue, "cudaMemcpy2D pitch below width");
    p_cudaGetLastError();
    p_cudaFree(d);
}

static void test_streams_events(void)
{
    cudaStream_t s = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float ms = -1;
    int *d = NULL, h = 0, v = 7;

    check_err(p_cudaStreamCreate(&s), cudaSuccess, "cudaStreamCreate");
    check_err(p_cudaEventCreate(&a), cudaSuccess, "cudaEventCreate a");
    check_err(p_cudaEventCreate(&b), cudaSuccess, "cudaEventCreate b");
    check_err(p_cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle,
              "cudaEventElapsedTime before recording");
    p_cudaMalloc((void **)&d, sizeof *d);
    p_cudaEventRecord(a, s);
    p_cudaMemcpyAsync(d, &v, sizeof v, cudaMemcpyHostToDevice, s);
    p_cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    p_cudaEventRecord(b, s);
    check_err(p_cudaStreamSynchronize(s), cudaSuccess, "cudaStreamSynchronize");
    check(h == 7, "async copies in order (%d)", h);
    check_err(p_cudaEventSynchronize(b), cudaSuccess, "cudaEventSynchronize");
    check(p_cudaEventElapsedTime(&ms, a, b) == cudaSuccess, "cudaEventElapsedTime");
    check(ms >= 0, "elapsed %f ms >= 0", ms);
    check_err(p_cudaStreamDestroy(s), cudaSuccess, "cudaStreamDestroy");
    check_err(p_cudaStreamDestroy(s), cudaErrorInvalidResourceHandle,
              "cudaStreamDestroy twice");
    p_cudaEventDestroy(a);
    p_cudaEventDestroy(b);
    p_cudaFree(d);
    p_cudaGetLastError();
}

// Driver VMM: a reserved range backed by two granules, written by a copy
// and a kernel across the granule boundary.
static void test_vmm(cudaLibrary_t lib)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                            CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr va = 0;
    size_t gran = 0;
    cudaKernel_t k = kernel(lib, "_Z10k_fill_u32Pjjy");
    uint32_t v = 0x5a5a5a5a, got[4] = { 0 };
    unsigned long long n = 8;
    CUdeviceptr p;
    void *args[] = { &p, &v, &n };

    check(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)
          == CUDA_SUCCESS && gran == 2u << 20, "granularity 2 MiB");
    check(p_cuMemCreate(&h1, gran, &prop, 0) == CUDA_SUCCESS &&
          p_cuMemCreate(&h2, gran, &prop, 0) == CUDA_SUCCESS, "cuMemCreate x2");
    check(p_cuMemAddressReserve(&va, 2 * gran, 0, 0, 0) == CUDA_SUCCESS, "cuMemAddressReserve");
    check(p_cuMemMap(va, gran, 0, h1, 0) == CUDA_SUCCESS &&
          p_cuMemMap(va + gran, gran, 0, h2, 0) == CUDA_SUCCESS, "cuMemMap x2");
    check_err(p_cudaMemset((void *)(uintptr_t)va, 0, 16), cudaErrorInvalidValue,
              "mapped memory is inaccessible before cuMemSetAccess");
    check(p_cuMemSetAccess(va, 2 * gran, &acc, 1) == CUDA_SUCCESS, "cuMemSetAccess");
    p = va + gran - 16;     // 4 words in each granule
    check_err(launch(k, (dim3){ 1, 1, 1 }, (dim3){ 32, 1, 1 }, args), cudaSuccess,
              "k_fill_u32 across the granule boundary");
    check_err(p_cudaMemcpy(got, (void *)(uintptr_t)(va + gran - 8), sizeof got,
                           cudaMemcpyDefault), cudaSuccess, "copy across the boundary");
    check(got[0] == v && got[3] == v, "data across the boundary");
    check(p_cuMemUnmap(va, 2 * gran) == CUDA_SUCCESS && p_cuMemRelease(h1) == CUDA_SUCCESS &&
          p_cuMemRelease(h2) == CUDA_SUCCESS && p_cuMemAddressFree(va, 2 * gran) == CUDA_SUCCESS,
          "VMM teardown");
    p_cudaGetLastError();
}

// ---- Threads --------------------------------------------------------------------------------

static cudaLibrary_t thread_lib;

static void *thread_main(void *arg)
{
    cudaKernel_t k = NULL;
    uint32_t v = (uint32_t)(uintptr_t)arg, h[256];
    uint32_t *d = NULL;
    unsigned long long n = 256;
    void *args[] = { &d, &v, &n };
    uintptr_t bad = 0;

    for (int round = 0; round < 50 && !bad; round++) {
        if (p_cudaLibraryGetKernel(&k, thread_lib, "_Z10k_fill_u32Pjjy") ||
            p_cudaMalloc((void **)&d, sizeof h) ||
            launch(k, (dim3){ 1, 1, 1 }, (dim3){ 256, 1, 1 }, args) ||
            p_cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) || p_cudaFree(d))
            bad = 1;
        for (int i = 0; i < 256 && !bad; i++)
            bad = h[i] != v;
    }
    return (void *)bad;
}

static void test_threads(cudaLibrary_t lib)
{
    pthread_t t[4];
    int bad = 0;

    thread_lib = lib;
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, thread_main, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    check(!bad, "4 threads allocating, launching, copying");
}

// ---- Main ----------------------------------------------------------------------------------

static void test_device(void)
{
    struct cudaDeviceProp prop;
    int n = 0, v = 0, dev = -1;

    check(p_cudaGetDeviceCount(&n) == cudaSuccess && n == 1, "one device");
    check_err(p_cudaSetDevice(1), cudaErrorInvalidDevice, "cudaSetDevice(1)");
    p_cudaGetLastError();
    check(p_cudaSetDevice(0) == cudaSuccess && p_cudaGetDevice(&dev) == cudaSuccess &&
          dev == 0, "cudaSetDevice/cudaGetDevice 0");
    check(p_cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
          !strcmp(prop.name, "rgpu fake GPU") && prop.major == 9 && prop.minor == 0 &&
          prop.totalGlobalMem == 16ull << 30 && prop.maxThreadsPerBlock == 1024 &&
          prop.maxGridSize[1] == 65535 && prop.warpSize == 32,
          "cudaGetDeviceProperties");
    check(p_cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess &&
          v == prop.multiProcessorCount, "cudaDeviceGetAttribute matches the properties");
    check(p_cudaDriverGetVersion(&v) == cudaSuccess && v == 13000, "driver version");
    check(p_cudaRuntimeGetVersion(&v) == cudaSuccess && v == 13000, "runtime version");
}

static void test_image(const char *path)
{
    void *image = read_file(path);
    cudaLibrary_t lib = NULL;
    struct cudaFuncAttributes fa;
    cudaKernel_t k;
    void *g;

    printf("# image %s\n", path);
    check(image != NULL, "read %s", path);
    if (!image)
        return;
    check_err(p_cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0),
              cudaSuccess, "cudaLibraryLoadData");
    if (lib) {
        check_layouts(lib);
        k = kernel(lib, "_Z6k_axpyfPKfPfi");
        check(p_cudaFuncGetAttributes(&fa, k) == cudaSuccess && fa.numRegs > 0 &&
              fa.maxThreadsPerBlock == 1024, "cudaFuncGetAttributes k_axpy");
        check_err(p_cudaLibraryGetGlobal(&g, NULL, lib, "no_such_global"),
                  cudaErrorSymbolNotFound, "cudaLibraryGetGlobal unknown name");
        p_cudaGetLastError();
        test_axpy(lib);
        test_fill(lib);
        check_err(p_cudaLibraryUnload(lib), cudaSuccess, "cudaLibraryUnload");
    }
    free(image);
}

int main(int argc, char **argv)
{
    void *h, *lib_image;
    cudaLibrary_t lib = NULL;

    if (argc < 3) {
        fprintf(stderr, "usage: %s libcudart.so.N image...\n", argv[0]);
        return 2;
    }
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
#define RESOLVE(f)                                                     \
    *(void **)&p_##f = dlsym(h, #f);                                   \
    if (!p_##f) {                                                      \
        fprintf(stderr, "%s missing from the fake libraries\n", #f);  \
        return 1;                                                      \
    }
    FUNCS(RESOLVE)

    test_device();
    for (int i = 2; i < argc; i++)
        test_image(argv[i]);
    test_memory_errors();
    test_2d();
    test_streams_events();

    lib_image = read_file(argv[2]);
    if (lib_image && p_cudaLibraryLoadData(&lib, lib_image, NULL, NULL, 0, NULL,
                                           NULL, 0) == cudaSuccess) {
        test_vmm(lib);
        test_threads(lib);
        test_fault(lib);
        p_cudaLibraryUnload(lib);
    }
    free(lib_image);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}

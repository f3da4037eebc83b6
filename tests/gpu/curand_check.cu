// cuRAND on the GPU machine, natively and through rgpu (tests/gpu/run.sh
// builds it with plain `nvcc ... -lcurand`: the default, static, CUDA
// runtime, so both this program's runtime and cuRAND's own reach the driver
// through its export tables).
//
// The host API: pseudo-random generators (XORWOW, Philox, MRG32k3a, MTGP32)
// and a quasi-random one (Sobol), seeded, generating uniform, normal, double
// and raw 32-bit numbers on a stream.  The device API: a kernel that calls
// curand_init and curand_uniform / curand_normal4 per thread.
//
// A seeded generator is deterministic on a given GPU and library, so each
// set of numbers is printed as a 64-bit FNV-1a hash of its bytes: native and
// rgpu runs must print the same hashes.  Their statistics are also checked
// (mean and spread within several standard errors, values in range), so that
// a run that returns garbage identically both ways still fails.
#include <curand.h>
#include <curand_kernel.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <vector>
#include "../progs/check.h"

#define COUNT (1 << 20)
#define SEED 1234ULL

static cudaStream_t stream;

static bool check_rand(curandStatus_t s, const char *name)
{
    return check(s == CURAND_STATUS_SUCCESS, name, "curandStatus %d", (int)s);
}

// Setup that the rest depends on: report and stop.
static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

template <typename T>
static std::vector<T> download(const T *d, size_t n)
{
    std::vector<T> h(n);
    must(check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"), "sync");
    must(check_cuda(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost),
                    "cudaMemcpy to host"), "download");
    return h;
}

template <typename T>
static void print_hash(const char *name, const std::vector<T> &v)
{
    printf("%s: hash %016llx\n", name, (unsigned long long)fnv1a(v.data(), v.size() * sizeof(T)));
}

// Mean and standard deviation, in double.
template <typename T>
static void moments(const std::vector<T> &v, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    for (T x : v)
        s += x;
    *mean = s / v.size();
    for (T x : v)
        s2 += ((double)x - *mean) * ((double)x - *mean);
    *sd = sqrt(s2 / v.size());
}

// Uniform numbers in (0, 1] with the moments of U(0, 1): mean 1/2, standard
// deviation 1/sqrt(12).  Over 2^20 numbers the mean's standard error is
// 2.8e-4; the tolerances are about seven of them.
template <typename T>
static void check_uniform(const std::vector<T> &v, const char *name)
{
    char buf[160];
    size_t out_of_range = 0;
    for (T x : v)
        out_of_range += !(x > 0 && x <= 1);
    double mean, sd;
    moments(v, &mean, &sd);
    fprintf(stderr, "%s: mean %.6f sd %.6f\n", name, mean, sd);
    check(out_of_range == 0, fmt_name(buf, sizeof buf, "%s in (0, 1]", name), "%zu outside",
          out_of_range);
    check(fabs(mean - 0.5) < 0.002 && fabs(sd - 1 / sqrt(12.0)) < 0.002,
          fmt_name(buf, sizeof buf, "%s moments", name), "mean %.5f sd %.5f", mean, sd);
}

// Normal numbers, asked for with mean 0 and standard deviation 1.
static void check_normal(const std::vector<float> &v, const char *name)
{
    char buf[160];
    double mean, sd;
    moments(v, &mean, &sd);
    fprintf(stderr, "%s: mean %.6f sd %.6f\n", name, mean, sd);
    check(fabs(mean) < 0.007 && fabs(sd - 1) < 0.007,
          fmt_name(buf, sizeof buf, "%s moments", name), "mean %.5f sd %.5f", mean, sd);
}

static curandGenerator_t make_generator(curandRngType_t type, const char *label)
{
    char buf[160];
    curandGenerator_t g;
    must(check_rand(curandCreateGenerator(&g, type),
                    fmt_name(buf, sizeof buf, "%s create", label)), label);
    check_rand(curandSetStream(g, stream), fmt_name(buf, sizeof buf, "%s set stream", label));
    if (type != CURAND_RNG_QUASI_SOBOL32)
        check_rand(curandSetPseudoRandomGeneratorSeed(g, SEED),
                   fmt_name(buf, sizeof buf, "%s seed", label));
    return g;
}

// One pseudo-random generator: uniform floats, normal floats, and (XORWOW
// only) doubles and raw 32-bit numbers.  A second generator of the same type
// and seed must repeat the first's uniform numbers, and the first one's next
// batch must differ from its first.
static void host_generator(curandRngType_t type, const char *label, float *d, double *dd,
                           unsigned *du)
{
    char name[160];
    curandGenerator_t g = make_generator(type, label);
    fmt_name(name, sizeof name, "host %s uniform seed %llu", label, SEED);
    if (!check_rand(curandGenerateUniform(g, d, COUNT), name)) {
        curandDestroyGenerator(g);
        return;
    }
    std::vector<float> first = download(d, COUNT);
    print_hash(name, first);
    check_uniform(first, name);

    if (check_rand(curandGenerateUniform(g, d, COUNT), "uniform again"))
        check(download(d, COUNT) != first,
              fmt_name(name, sizeof name, "host %s next batch differs", label), "it repeats");

    curandGenerator_t again = make_generator(type, label);
    if (check_rand(curandGenerateUniform(again, d, COUNT), "uniform, second generator"))
        check(download(d, COUNT) == first,
              fmt_name(name, sizeof name, "host %s same seed repeats", label), "it differs");
    curandDestroyGenerator(again);

    fmt_name(name, sizeof name, "host %s normal seed %llu", label, SEED);
    if (check_rand(curandGenerateNormal(g, d, COUNT, 0.0f, 1.0f), name)) {
        std::vector<float> v = download(d, COUNT);
        print_hash(name, v);
        check_normal(v, name);
    }
    if (type == CURAND_RNG_PSEUDO_XORWOW) {
        fmt_name(name, sizeof name, "host %s uniform double", label);
        if (check_rand(curandGenerateUniformDouble(g, dd, COUNT), name)) {
            std::vector<double> v = download(dd, COUNT);
            print_hash(name, v);
            check_uniform(v, name);
        }
        fmt_name(name, sizeof name, "host %s raw 32-bit", label);
        if (check_rand(curandGenerate(g, du, COUNT), name))
            print_hash(name, download(du, COUNT));
    }
    check_rand(curandDestroyGenerator(g), fmt_name(name, sizeof name, "%s destroy", label));
}

static void host_sobol(float *d)
{
    curandGenerator_t g = make_generator(CURAND_RNG_QUASI_SOBOL32, "SOBOL32");
    check_rand(curandSetQuasiRandomGeneratorDimensions(g, 1), "SOBOL32 dimensions");
    if (check_rand(curandGenerateUniform(g, d, COUNT), "host SOBOL32 uniform")) {
        std::vector<float> v = download(d, COUNT);
        print_hash("host SOBOL32 uniform", v);
        check_uniform(v, "host SOBOL32 uniform");
    }
    curandDestroyGenerator(g);
}

// The device API: each thread its own XORWOW subsequence, or its own Philox
// subsequence, PER_THREAD numbers each.
#define THREADS 256
#define BLOCKS 64
#define PER_THREAD (COUNT / (THREADS * BLOCKS))

__global__ void xorwow_uniform(unsigned long long seed, float *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    curandState st;
    curand_init(seed, tid, 0, &st);
    for (int i = 0; i < PER_THREAD; i++)
        out[(size_t)i * THREADS * BLOCKS + tid] = curand_uniform(&st);
}

__global__ void philox_normal(unsigned long long seed, float *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    curandStatePhilox4_32_10_t st;
    curand_init(seed, tid, 0, &st);
    for (int i = 0; i < PER_THREAD; i += 4) {
        float4 r = curand_normal4(&st);
        float *o = out + (size_t)tid * PER_THREAD + i;
        o[0] = r.x;
        o[1] = r.y;
        o[2] = r.z;
        o[3] = r.w;
    }
}

static void device_api(float *d)
{
    xorwow_uniform<<<BLOCKS, THREADS, 0, stream>>>(SEED, d);
    if (check_cuda(cudaGetLastError(), "device curand_init + curand_uniform launch")) {
        std::vector<float> v = download(d, COUNT);
        print_hash("device XORWOW curand_uniform", v);
        check_uniform(v, "device XORWOW curand_uniform");
    }
    philox_normal<<<BLOCKS, THREADS, 0, stream>>>(SEED, d);
    if (check_cuda(cudaGetLastError(), "device Philox curand_normal4 launch")) {
        std::vector<float> v = download(d, COUNT);
        print_hash("device Philox curand_normal4", v);
        check_normal(v, "device Philox curand_normal4");
    }
}

int main(void)
{
    int version = 0;
    must(check_rand(curandGetVersion(&version), "curandGetVersion"), "version");
    printf("curand version %d\n", version);
    must(check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                    "cudaStreamCreate"), "stream");
    float *d;
    double *dd;
    unsigned *du;
    must(check_cuda(cudaMalloc(&d, COUNT * sizeof(float)), "cudaMalloc float"), "buffers");
    must(check_cuda(cudaMalloc(&dd, COUNT * sizeof(double)), "cudaMalloc double"), "buffers");
    must(check_cuda(cudaMalloc(&du, COUNT * sizeof(unsigned)), "cudaMalloc uint"), "buffers");

    host_generator(CURAND_RNG_PSEUDO_XORWOW, "XORWOW", d, dd, du);
    host_generator(CURAND_RNG_PSEUDO_PHILOX4_32_10, "PHILOX4_32_10", d, dd, du);
    host_generator(CURAND_RNG_PSEUDO_MRG32K3A, "MRG32K3A", d, dd, du);
    host_generator(CURAND_RNG_PSEUDO_MTGP32, "MTGP32", d, dd, du);
    host_sobol(d);
    device_api(d);

    cudaFree(d);
    cudaFree(dd);
    cudaFree(du);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

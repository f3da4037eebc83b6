// Modules loaded, used and unloaded again and again, as XLA does for each
// autotuning candidate: the driver may hand out a freed function's handle
// value for another function of the next module, so nothing known about a
// function handle (its parameter layout above all) may outlive its module.
// Each round loads the fatbin of kernels.cuh (as a module, or as a library
// every third round), launches eight of its kernels, whose parameters all
// differ, checks every result and unloads.  The fake backend runs this with
// FAKEGPU_REUSE_HANDLES=1, which reuses handle values the way the driver
// does.  Link with -lcuda.
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"
#include "kernels_fatbin.h"   // generated: const unsigned char kernels_fatbin[]

#define N 1024
#define THREADS 128
#define BLOCKS (N / THREADS)
#define ROUNDS 6

static const char FILL[] = "_Z10k_fill_u32Pjjy";   // (uint32_t *, uint32_t, unsigned long long)
static const char AXPY[] = "_Z6k_axpyfPKfPfi";     // (float, const float *, float *, int)
static const char INC[] = "_Z5k_incPii";           // (int *, int)
static const char DOUBLE[] = "_Z8k_doublePiPKii";  // (int *, const int *, int)
static const char STRUCT[] = "_Z8k_struct16rgpu_test_params";
static const char BIG[] = "_Z5k_bigPx13rgpu_test_big";
static const char SCALARS[] = "_Z9k_scalarscsixfdhPd";
static const char POKE[] = "_Z6k_pokePi";
#define NFUNCS 8

struct buffers {
    CUdeviceptr u, x, y, a, b, out;
};

struct code {
    CUmodule mod;
    CUlibrary lib;
    CUfunction fill, axpy, inc, dbl, strct, big, scalars, poke;
};

static bool get(struct code *c, CUfunction *f, const char *name, int round)
{
    char what[96];
    snprintf(what, sizeof what, "round %d: %s found", round, name);
    if (c->lib) {
        CUkernel k;
        CUresult r = cuLibraryGetKernel(&k, c->lib, name);
        *f = (CUfunction)k;
        return check_cu(r, what);
    }
    return check_cu(cuModuleGetFunction(f, c->mod, name), what);
}

static bool load(struct code *c, int round)
{
    char what[64];
    memset(c, 0, sizeof *c);
    bool as_library = round % 3 == 2;
    snprintf(what, sizeof what, "round %d: %s loaded", round, as_library ? "library" : "module");
    CUresult r = as_library
        ? cuLibraryLoadData(&c->lib, kernels_fatbin, NULL, NULL, 0, NULL, NULL, 0)
        : cuModuleLoadData(&c->mod, kernels_fatbin);
    if (!check_cu(r, what))
        return false;
    // Asked in a different order each round, so that which function gets
    // which reused handle changes too.
    const char *names[NFUNCS] = { FILL, AXPY, INC, DOUBLE, STRUCT, BIG, SCALARS, POKE };
    CUfunction *slots[NFUNCS] = { &c->fill, &c->axpy, &c->inc, &c->dbl,
                                  &c->strct, &c->big, &c->scalars, &c->poke };
    bool ok = true;
    for (int i = 0; i < NFUNCS; i++) {
        int k = (i + round) % NFUNCS;
        ok = get(c, slots[k], names[k], round) && ok;
    }
    return ok;
}

static void unload(struct code *c, int round)
{
    char what[64];
    snprintf(what, sizeof what, "round %d: unloaded", round);
    check_cu(c->lib ? cuLibraryUnload(c->lib) : cuModuleUnload(c->mod), what);
}

static CUresult launch(CUfunction f, void **args)
{
    return cuLaunchKernel(f, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, args, NULL);
}

// Every element of the n 4-byte words at d passes ok(i, word).
static bool all(CUdeviceptr d, bool (*ok)(int, uint32_t, int), int round, const char *name)
{
    uint32_t h[N];
    CUresult r = cuMemcpyDtoH(h, d, sizeof h);
    if (r != CUDA_SUCCESS)
        return check_cu(r, name);
    int i = 0;
    while (i < N && ok(i, h[i], round))
        i++;
    return check(i == N, name, "element %d is 0x%x", i, i < N ? h[i] : 0);
}

static bool fill_ok(int i, uint32_t v, int round) { (void)i; return v == 0xA0u + (uint32_t)round; }
static bool axpy_ok(int i, uint32_t v, int round)
{
    float f;
    memcpy(&f, &v, 4);
    return f == (float)(round + 2) * (float)i + 1.0f;
}
static bool inc_ok(int i, uint32_t v, int round) { return (int)v == i + round + 1; }
static bool double_ok(int i, uint32_t v, int round) { return (int)v == 2 * (i + round + 1); }

// k_struct, k_big, k_scalars and k_poke, each into b->out, checked at once.
static void run_struct_kernels(const struct buffers *b, const struct code *c, int round)
{
    char what[96];
    float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)i;
    check_cu(cuMemcpyHtoD(b->x, in, sizeof in), "in copied");
    struct rgpu_test_params p = { (float *)b->y, (const float *)b->x, N, 0.5f,
                                  (double)round, "abcdefghijk" };
    void *struct_args[] = { &p };
    snprintf(what, sizeof what, "round %d: k_struct launched", round);
    check_cu(launch(c->strct, struct_args), what);
    check_cu(cuMemcpyDtoH(out, b->y, sizeof out), "k_struct result copied");
    int i = 0;
    while (i < N && out[i] == (float)i * 0.5f + (float)round + (float)p.tag[i % 12])
        i++;
    snprintf(what, sizeof what, "round %d: k_struct result", round);
    check(i == N, what, "out[%d] = %g", i, i < N ? out[i] : 0.0f);

    static struct rgpu_test_big big;
    long long sum = 0;
    for (int k = 0; k < 512; k++)
        sum += big.v[k] = (long long)k * (round + 1);
    void *big_args[] = { (void *)&b->out, &big };
    snprintf(what, sizeof what, "round %d: k_big launched", round);
    check_cu(launch(c->big, big_args), what);
    long long got[2] = { 0, 0 };
    check_cu(cuMemcpyDtoH(got, b->out, sizeof got), "k_big result copied");
    snprintf(what, sizeof what, "round %d: k_big result", round);
    check(got[0] == sum && got[1] == big.v[511], what, "%lld %lld", got[0], got[1]);

    char ch = (char)(round + 1);
    short sh = (short)(-round);
    int in32 = 1000 + round;
    long long l = 1LL << (33 + round);
    float f = 0.25f * (float)round;
    double d = -1.5 * round;
    unsigned char u = (unsigned char)(200 + round);
    void *scalar_args[] = { &ch, &sh, &in32, &l, &f, &d, &u, (void *)&b->out };
    snprintf(what, sizeof what, "round %d: k_scalars launched", round);
    check_cu(launch(c->scalars, scalar_args), what);
    double s[7];
    check_cu(cuMemcpyDtoH(s, b->out, sizeof s), "k_scalars result copied");
    snprintf(what, sizeof what, "round %d: k_scalars result", round);
    check(s[0] == ch && s[1] == sh && s[2] == in32 && s[3] == (double)l && s[4] == f &&
          s[5] == d && s[6] == u, what, "%g %g %g %g %g %g %g", s[0], s[1], s[2], s[3], s[4],
          s[5], s[6]);

    void *poke_args[] = { (void *)&b->out };
    snprintf(what, sizeof what, "round %d: k_poke launched", round);
    check_cu(launch(c->poke, poke_args), what);
    int poked = 0;
    check_cu(cuMemcpyDtoH(&poked, b->out, sizeof poked), "k_poke result copied");
    snprintf(what, sizeof what, "round %d: k_poke result", round);
    check(poked == 42, what, "%d", poked);
}

static void run_round(const struct buffers *b, const struct code *c, int round)
{
    char what[96];
    uint32_t v = 0xA0u + (uint32_t)round;
    unsigned long long n = N;
    void *fill_args[] = { (void *)&b->u, &v, &n };
    snprintf(what, sizeof what, "round %d: k_fill_u32 launched", round);
    check_cu(launch(c->fill, fill_args), what);

    float ones[N], xs[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1.0f;
        xs[i] = (float)i;
    }
    check_cu(cuMemcpyHtoD(b->x, xs, sizeof xs), "x copied");
    check_cu(cuMemcpyHtoD(b->y, ones, sizeof ones), "y copied");
    float a = (float)(round + 2);
    int count = N;
    void *axpy_args[] = { &a, (void *)&b->x, (void *)&b->y, &count };
    snprintf(what, sizeof what, "round %d: k_axpy launched", round);
    check_cu(launch(c->axpy, axpy_args), what);

    int base[N];
    for (int i = 0; i < N; i++)
        base[i] = i + round;
    check_cu(cuMemcpyHtoD(b->a, base, sizeof base), "a copied");
    void *inc_args[] = { (void *)&b->a, &count };
    snprintf(what, sizeof what, "round %d: k_inc launched", round);
    check_cu(launch(c->inc, inc_args), what);
    void *double_args[] = { (void *)&b->b, (void *)&b->a, &count };
    snprintf(what, sizeof what, "round %d: k_double launched", round);
    check_cu(launch(c->dbl, double_args), what);

    snprintf(what, sizeof what, "round %d: k_fill_u32 result", round);
    all(b->u, fill_ok, round, what);
    snprintf(what, sizeof what, "round %d: k_axpy result", round);
    all(b->y, axpy_ok, round, what);
    snprintf(what, sizeof what, "round %d: k_inc result", round);
    all(b->a, inc_ok, round, what);
    snprintf(what, sizeof what, "round %d: k_double result", round);
    all(b->b, double_ok, round, what);
    run_struct_kernels(b, c, round);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    struct buffers b;
    if (!check_cu(cuInit(0), "cuInit") || !check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !check_cu(cuDevicePrimaryCtxRetain(&ctx, dev), "primary context retained") ||
        !check_cu(cuCtxSetCurrent(ctx), "primary context current"))
        return check_exit_status();
    CUdeviceptr *all_buffers[] = { &b.u, &b.x, &b.y, &b.a, &b.b, &b.out };
    for (int i = 0; i < 6; i++)
        check_cu(cuMemAlloc(all_buffers[i], N * 4), "buffer allocated");
    for (int round = 0; round < ROUNDS; round++) {
        struct code c;
        if (load(&c, round))
            run_round(&b, &c, round);
        unload(&c, round);
    }
    for (int i = 0; i < 6; i++)
        check_cu(cuMemFree(*all_buffers[i]), "buffer freed");
    cuDevicePrimaryCtxRelease(dev);
    return check_exit_status();
}

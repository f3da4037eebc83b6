// CPU twins of the test kernels in tests/progs/kernels.cuh,
// tests/progs/device_output.cuh, tests/progs/printf_mates.cuh and
// tests/progs/textures.cuh, and the loop
// that runs one over a grid.
//
// A twin is written per thread, like the CUDA kernel: it reads its
// parameters with FG_ARG (by ordinal, at the offset the cubin gives) and
// touches device memory only through FG_LD / FG_ST, which check every
// address against the fake allocations.  There is no __syncthreads: threads
// run one after another.
//
// Arithmetic mirrors what nvcc emits by default: a*b+c contracts to one
// fused multiply-add (-fmad=true), hence fmaf; integer overflow wraps.
#include "fakegpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Scratch for accesses that fault: the kernel body reads zeros from it and
// writes into it, never into host memory.
static _Thread_local _Alignas(64) unsigned char scratch[4096];

const void *fg_arg(struct fg_thread *t, unsigned i, size_t size)
{
    // The twin's parameter sizes were checked against the cubin at load
    // (fg_twin_find), so a mismatch here is a bug in the twin's body: stop
    // loudly rather than compute garbage.
    if (i >= t->func->nparams || t->func->params[i].size != size) {
        fprintf(stderr, "fakegpu: CPU twin of %s reads parameter %u as %zu "
                "bytes, which the cubin does not say\n", t->func->name, i, size);
        abort();
    }
    return t->params + t->func->params[i].offset;
}

// Host address for [a, a+n), or NULL after recording the fault.
static unsigned char *dev_access(struct fg_thread *t, CUdeviceptr a, size_t n)
{
    unsigned char *h;
    size_t len;

    if (n == 0 || n > sizeof scratch) {
        t->fault = CUDA_ERROR_LAUNCH_FAILED;
        return NULL;
    }
    // Natural alignment, as the hardware wants for 1..16 byte accesses.
    if ((n & (n - 1)) == 0 && n <= 16 && a % n) {
        t->fault = CUDA_ERROR_MISALIGNED_ADDRESS;
        return NULL;
    }
    if (a >= t->c_base && a - t->c_base <= t->c_len &&
        n <= t->c_len - (a - t->c_base))
        return t->c_host + (a - t->c_base);
    len = fg_mem_span(a, &h);
    if (len < n) {
        t->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
        return NULL;
    }
    t->c_base = a;
    t->c_len = len;
    t->c_host = h;
    return h;
}

const void *fg_ld(struct fg_thread *t, CUdeviceptr a, size_t n)
{
    unsigned char *h = t->fault ? NULL : dev_access(t, a, n);

    if (!h) {
        memset(scratch, 0, n < sizeof scratch ? n : sizeof scratch);
        return scratch;
    }
    return h;
}

void *fg_st(struct fg_thread *t, CUdeviceptr a, size_t n)
{
    unsigned char *h = t->fault ? NULL : dev_access(t, a, n);

    return h ? h : scratch;
}

// One phase of f over the whole grid.
static CUresult exec_phase(struct fg_thread *t, const struct fg_func *f)
{
    struct fg_dim *b = &t->blockIdx, *th = &t->threadIdx;
    struct fg_dim grid = t->gridDim, block = t->blockDim;

    for (b->z = 0; b->z < grid.z; b->z++)
    for (b->y = 0; b->y < grid.y; b->y++)
    for (b->x = 0; b->x < grid.x; b->x++)
        for (th->z = 0; th->z < block.z; th->z++)
        for (th->y = 0; th->y < block.y; th->y++)
        for (th->x = 0; th->x < block.x; th->x++) {
            f->twin->fn(t);
            if (t->fault)
                return t->fault;
        }
    return CUDA_SUCCESS;
}

CUresult fg_exec(const struct fg_func *f, struct fg_dim grid,
                 struct fg_dim block, const struct fg_launch_shape *shape,
                 const unsigned char *params)
{
    struct fg_thread t = {
        .gridDim = grid, .blockDim = block, .params = params, .func = f,
        .clusterDim = shape->cluster, .cooperative = shape->cooperative,
    };

    // grid.sync() outside a cooperative launch is undefined; this GPU
    // fails the kernel at its first sync, after the code before it ran.
    for (t.phase = 0; t.phase <= f->twin->grid_syncs; t.phase++) {
        if (t.phase > 0 && !shape->cooperative)
            return CUDA_ERROR_LAUNCH_FAILED;
        CUresult r = exec_phase(&t, f);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

// ---- Twins -----------------------------------------------------------------------------

// Global x index computed as the kernels do, in 32-bit unsigned arithmetic.
static unsigned gid32(const struct fg_thread *t)
{
    return t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
}

static int first_thread(const struct fg_thread *t)
{
    return t->blockIdx.x == 0 && t->threadIdx.x == 0;
}

// Device pointers inside parameters are plain 64-bit addresses.
struct rgpu_test_params {
    CUdeviceptr out, in;
    int32_t n;
    float scale;
    double offset;
    char tag[12];
};
_Static_assert(sizeof(struct rgpu_test_params) == 48, "kernels.cuh layout");

struct rgpu_test_big { long long v[512]; };
struct rgpu_test_map { unsigned long long w[16]; };

static void k_empty(struct fg_thread *t) { (void)t; }

static void k_fill_u32(struct fg_thread *t)
{
    CUdeviceptr p = FG_ARG(t, 0, CUdeviceptr);
    uint32_t v = FG_ARG(t, 1, uint32_t);
    unsigned long long n = FG_ARG(t, 2, unsigned long long);
    unsigned long long i = t->blockIdx.x * (unsigned long long)t->blockDim.x +
                           t->threadIdx.x;

    if (i < n)
        FG_ST(t, p + i * 4, uint32_t) = v;
}

static void k_axpy(struct fg_thread *t)
{
    float a = FG_ARG(t, 0, float);
    CUdeviceptr x = FG_ARG(t, 1, CUdeviceptr), y = FG_ARG(t, 2, CUdeviceptr);
    int n = FG_ARG(t, 3, int);
    int i = (int)gid32(t);

    if (i < n) {
        float xi = FG_LD(t, x + (int64_t)i * 4, float);
        float yi = FG_LD(t, y + (int64_t)i * 4, float);
        FG_ST(t, y + (int64_t)i * 4, float) = fmaf(a, xi, yi);
    }
}

// tests/progs/jit_kernel.cuh: y[i] = jit_scale(x[i]), where jit_scale
// (tests/progs/jit_device.cuh, linked in by cuLink*) is 2 * v + 1.
static void k_jit_scale(struct fg_thread *t)
{
    CUdeviceptr y = FG_ARG(t, 0, CUdeviceptr), x = FG_ARG(t, 1, CUdeviceptr);
    int n = FG_ARG(t, 2, int);
    int i = (int)gid32(t);

    if (i < n)
        FG_ST(t, y + (int64_t)i * 4, float) = fmaf(2.0f, FG_LD(t, x + (int64_t)i * 4, float),
                                                   1.0f);
}

static void k_struct(struct fg_thread *t)
{
    const struct rgpu_test_params *p = &FG_ARG(t, 0, struct rgpu_test_params);
    int i = (int)gid32(t);

    if (i < p->n) {
        float in = FG_LD(t, p->in + (int64_t)i * 4, float);
        FG_ST(t, p->out + (int64_t)i * 4, float) =
            fmaf(in, p->scale, (float)p->offset) + (float)p->tag[i % 12];
    }
}

static void k_big(struct fg_thread *t)
{
    CUdeviceptr out = FG_ARG(t, 0, CUdeviceptr);
    const struct rgpu_test_big *b = &FG_ARG(t, 1, struct rgpu_test_big);
    unsigned long long s = 0;

    if (!first_thread(t))
        return;
    for (int i = 0; i < 512; i++)
        s += (unsigned long long)b->v[i];
    FG_ST(t, out, long long) = (long long)s;
    FG_ST(t, out + 8, long long) = b->v[511];
}

// out[0..15] = the map's words, out[16] = tag (a 128-byte parameter at
// the offset the image gives, 64 after a pointer and an int).
static void k_param_map(struct fg_thread *t)
{
    CUdeviceptr out = FG_ARG(t, 0, CUdeviceptr);
    const unsigned long long *w = &FG_ARG(t, 2, struct rgpu_test_map).w[0];
    unsigned i = t->threadIdx.x;

    if (t->blockIdx.x != 0)
        return;
    if (i < 16)
        FG_ST(t, out + 8 * i, unsigned long long) = w[i];
    if (i == 16)
        FG_ST(t, out + 128, unsigned long long) = (unsigned long long)FG_ARG(t, 1, int);
}

static void k_scalars(struct fg_thread *t)
{
    CUdeviceptr out = FG_ARG(t, 7, CUdeviceptr);

    if (!first_thread(t))
        return;
    FG_ST(t, out + 0, double) = FG_ARG(t, 0, signed char);
    FG_ST(t, out + 8, double) = FG_ARG(t, 1, short);
    FG_ST(t, out + 16, double) = FG_ARG(t, 2, int);
    FG_ST(t, out + 24, double) = (double)FG_ARG(t, 3, long long);
    FG_ST(t, out + 32, double) = FG_ARG(t, 4, float);
    FG_ST(t, out + 40, double) = FG_ARG(t, 5, double);
    FG_ST(t, out + 48, double) = FG_ARG(t, 6, unsigned char);
}

static void k_inc(struct fg_thread *t)
{
    CUdeviceptr p = FG_ARG(t, 0, CUdeviceptr);
    int n = FG_ARG(t, 1, int);
    int i = (int)gid32(t);

    if (i < n) {
        uint32_t v = FG_LD(t, p + (int64_t)i * 4, uint32_t);
        FG_ST(t, p + (int64_t)i * 4, uint32_t) = v + 1;
    }
}

static void k_double(struct fg_thread *t)
{
    CUdeviceptr dst = FG_ARG(t, 0, CUdeviceptr), src = FG_ARG(t, 1, CUdeviceptr);
    int n = FG_ARG(t, 2, int);
    int i = (int)gid32(t);

    if (i < n) {
        uint32_t v = FG_LD(t, src + (int64_t)i * 4, uint32_t);
        FG_ST(t, dst + (int64_t)i * 4, uint32_t) = v * 2;
    }
}

static void k_poke(struct fg_thread *t)
{
    CUdeviceptr p = FG_ARG(t, 0, CUdeviceptr);

    if (first_thread(t))
        FG_ST(t, p, int) = 42;
}

// ---- Kernels that print and assert (tests/progs/device_output.cuh) -----------------------
//
// printf's conversions are the C library's, as the driver's formatting is;
// a float argument reaches printf as a double in CUDA too.

static void k_print(struct fg_thread *t)
{
    if (t->blockIdx.x == t->gridDim.x - 1 && t->threadIdx.x == t->blockDim.x - 1)
        fg_device_printf(t, "k_print %d: block [%u,%u,%u] thread [%u,%u,%u] of grid %u "
                         "block %u: value %d\n", FG_ARG(t, 0, int), t->blockIdx.x,
                         t->blockIdx.y, t->blockIdx.z, t->threadIdx.x, t->threadIdx.y,
                         t->threadIdx.z, t->gridDim.x, t->blockDim.x, FG_ARG(t, 1, int));
}

static void k_lines(struct fg_thread *t)
{
    int n = FG_ARG(t, 0, int);

    if (first_thread(t))
        for (int i = 0; i < n; i++)
            fg_device_printf(t, "k_lines: line %05d of %d\n", i, n);
}

static void k_formats(struct fg_thread *t)
{
    int i = FG_ARG(t, 0, int);
    unsigned u = FG_ARG(t, 1, unsigned);
    double d = FG_ARG(t, 3, double);

    if (first_thread(t))
        fg_device_printf(t, "k_formats: %d %u %x %lld %.3f %.2e %g %c %s %5d|%-5d|\n", i, u, u,
                         FG_ARG(t, 2, long long), d, d, (double)FG_ARG(t, 4, float),
                         FG_ARG(t, 5, char), "text", i, i);
}

static void k_assert(struct fg_thread *t)
{
    int v = (int)gid32(t);

    if (v == FG_ARG(t, 0, int)) {
        fg_device_printf(t, "k_assert: thread %d is about to fail its assert\n", v);
        // nvcc passes the path it compiled and the pretty function name;
        // the line is the assert's in device_output.cuh.
        fg_device_assert(t, "v != bad", "device_output.cuh", 44, "void k_assert(int)");
    }
}

// ---- One module's printing and silent kernels (tests/progs/printf_mates.cuh) --------------

static void pm_print(struct fg_thread *t)
{
    if (first_thread(t))
        fg_device_printf(t, "pm_print %d: value %d\n", FG_ARG(t, 0, int), FG_ARG(t, 1, int));
}

// pm_say's line, printed from its caller.
static void pm_via(struct fg_thread *t)
{
    if (first_thread(t))
        fg_device_printf(t, "pm_via %d: value %d\n", FG_ARG(t, 0, int), FG_ARG(t, 1, int));
}

static void pm_mate(struct fg_thread *t)
{
    k_axpy(t);              // the same body and parameters
}

static void pm_finite(struct fg_thread *t)
{
    CUdeviceptr x = FG_ARG(t, 0, CUdeviceptr);
    int n = FG_ARG(t, 1, int);
    int i = (int)gid32(t);

    if (i < n) {
        float v = FG_LD(t, x + (int64_t)i * 4, float);
        if (v != v)
            fg_device_assert(t, "x[i] == x[i]", "printf_mates.cuh", 44,
                             "void pm_finite(const float *, int)");
    }
}

// Phase 0 before grid.sync(), phase 1 after it.
static void k_coop_reverse(struct fg_thread *t)
{
    CUdeviceptr data = FG_ARG(t, 0, CUdeviceptr), out = FG_ARG(t, 1, CUdeviceptr);
    int n = FG_ARG(t, 2, int);
    int i = (int)gid32(t);

    if (i >= n)
        return;
    if (t->phase == 0)
        FG_ST(t, data + (int64_t)i * 4, int32_t) = (int32_t)(3u * (uint32_t)i + 1u);
    else
        FG_ST(t, out + (int64_t)i * 4, int32_t) =
            FG_LD(t, data + (int64_t)(n - 1 - i) * 4, int32_t);
}

static void k_grid_info(struct fg_thread *t)
{
    CUdeviceptr out = FG_ARG(t, 0, CUdeviceptr);

    if (!first_thread(t))
        return;
    FG_ST(t, out, int32_t) = t->cooperative ? 1 : 0;
    FG_ST(t, out + 4, int32_t) = (int32_t)(t->gridDim.x * t->gridDim.y * t->gridDim.z);
}

// Conditional graph nodes: cudaGraphSetConditional is fg_cond_set.  A
// handle no graph has is a fault, as the device's would be.
static void set_cond(struct fg_thread *t, unsigned long long h, unsigned value)
{
    if (fg_cond_set(h, value) != 0)
        t->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
}

static void k_count_down(struct fg_thread *t)
{
    CUdeviceptr left = FG_ARG(t, 0, CUdeviceptr), x = FG_ARG(t, 1, CUdeviceptr);

    if (!first_thread(t))
        return;
    FG_ST(t, x, int32_t) = FG_LD(t, x, int32_t) + 1;
    int32_t l = FG_LD(t, left, int32_t) - 1;
    FG_ST(t, left, int32_t) = l;
    set_cond(t, FG_ARG(t, 2, unsigned long long), l > 0 ? 1u : 0u);
}

static void k_set_cond(struct fg_thread *t)
{
    if (first_thread(t))
        set_cond(t, FG_ARG(t, 1, unsigned long long),
                 (unsigned)FG_LD(t, FG_ARG(t, 0, CUdeviceptr), int32_t));
}

// tests/progs/textures.cuh: out[y][x] = 2 * tex2D(tex, x + dx + 0.5, y + 0.5).
static void k_tex_fetch(struct fg_thread *t)
{
    CUtexObject tex = FG_ARG(t, 0, unsigned long long);
    CUdeviceptr out = FG_ARG(t, 1, CUdeviceptr);
    int w = FG_ARG(t, 2, int), h = FG_ARG(t, 3, int), dx = FG_ARG(t, 4, int);
    int x = (int)(t->blockIdx.x * t->blockDim.x + t->threadIdx.x);
    int y = (int)(t->blockIdx.y * t->blockDim.y + t->threadIdx.y);

    if (x < w && y < h) {
        float v = fg_tex2d_float(t, tex, (float)(x + dx) + 0.5f, (float)y + 0.5f);
        FG_ST(t, out + ((int64_t)y * w + x) * 4, float) = 2.0f * v;
    }
}

// tests/progs/textures.cuh: surf2Dwrite(100 * y + x + 0.5, surf, 4 * x, y).
static void k_surf_write(struct fg_thread *t)
{
    CUsurfObject surf = FG_ARG(t, 0, unsigned long long);
    int w = FG_ARG(t, 1, int), h = FG_ARG(t, 2, int);
    int x = (int)(t->blockIdx.x * t->blockDim.x + t->threadIdx.x);
    int y = (int)(t->blockIdx.y * t->blockDim.y + t->threadIdx.y);

    if (x < w && y < h)
        fg_surf2d_write_float(t, surf, (float)(100 * y + x) + 0.5f, x * 4, y);
}

// Mangled names as nvcc 13 emits them for kernels.cuh; sizes by ordinal;
// the grid-wide barriers each passes.
static const struct fg_twin twins[] = {
    { "_Z7k_emptyv", 0, { 0 }, k_empty, 0 },
    { "_Z10k_fill_u32Pjjy", 3, { 8, 4, 8 }, k_fill_u32, 0 },
    { "_Z6k_axpyfPKfPfi", 4, { 4, 8, 8, 4 }, k_axpy, 0 },
    { "_Z8k_struct16rgpu_test_params", 1, { 48 }, k_struct, 0 },
    { "_Z5k_bigPx13rgpu_test_big", 2, { 8, 4096 }, k_big, 0 },
    { "_Z11k_param_mapPyi13rgpu_test_map", 3, { 8, 4, 128 }, k_param_map, 0 },
    { "_Z9k_scalarscsixfdhPd", 8, { 1, 2, 4, 8, 4, 8, 1, 8 }, k_scalars, 0 },
    { "_Z5k_incPii", 2, { 8, 4 }, k_inc, 0 },
    { "_Z8k_doublePiPKii", 3, { 8, 8, 4 }, k_double, 0 },
    { "_Z6k_pokePi", 1, { 8 }, k_poke, 0 },
    { "_Z14k_coop_reversePiS_i", 3, { 8, 8, 4 }, k_coop_reverse, 1 },
    { "_Z11k_grid_infoPi", 1, { 8 }, k_grid_info, 0 },
    { "_Z12k_count_downPiS_y", 3, { 8, 8, 8 }, k_count_down, 0 },
    { "_Z10k_set_condPKiy", 2, { 8, 8 }, k_set_cond, 0 },
    { "k_jit_scale", 3, { 8, 8, 4 }, k_jit_scale, 0 },
    // device_output.cuh
    { "_Z7k_printii", 2, { 4, 4 }, k_print, 0 },
    { "_Z7k_linesi", 1, { 4 }, k_lines, 0 },
    { "_Z9k_formatsijxdfc", 6, { 4, 4, 8, 8, 4, 1 }, k_formats, 0 },
    { "_Z8k_asserti", 1, { 4 }, k_assert, 0 },
    // tests/progs/printf_mates.cuh
    { "_Z8pm_printii", 2, { 4, 4 }, pm_print, 0 },
    { "_Z6pm_viaii", 2, { 4, 4 }, pm_via, 0 },
    { "_Z7pm_matefPKfPfi", 4, { 4, 8, 8, 4 }, pm_mate, 0 },
    { "_Z9pm_finitePKfi", 2, { 8, 4 }, pm_finite, 0 },
    // tests/progs/textures.cuh
    { "_Z11k_tex_fetchyPfiii", 5, { 8, 8, 4, 4, 4 }, k_tex_fetch, 0 },
    { "_Z12k_surf_writeyii", 3, { 8, 4, 4 }, k_surf_write, 0 },
};

const struct fg_twin *fg_twin_find(const struct fg_func *f)
{
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++) {
        const struct fg_twin *w = &twins[i];
        int ok = w->nparams == f->nparams;

        if (strcmp(w->name, f->name))
            continue;
        for (unsigned j = 0; ok && j < w->nparams; j++)
            ok = w->sizes[j] == f->params[j].size;
        if (!ok) {
            // A twin that disagrees with the cubin would read garbage.
            fprintf(stderr, "fakegpu: CPU twin of %s does not match its "
                    "parameter layout; treating it as missing\n", f->name);
            return NULL;
        }
        return w;
    }
    return NULL;
}

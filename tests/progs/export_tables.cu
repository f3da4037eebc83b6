// The driver's export tables as NVIDIA's libraries use them (libcuda.so.1's
// cuGetExportTable; stubs/cuda_export.c serves rgpu's): the two queries
// cuFFT makes of every kernel module it loads (each function of a module
// through a visitor, and a question about the current context), and a
// table no program asks for.  Natively and through rgpu the output must be
// the same.  Link with -lcuda.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include "check.h"
#include "kernels_fatbin.h"   // generated: const unsigned char kernels_fatbin[]

static const CUuuid TOOLS_MODULE = { { 0x6e, 0x16, 0x3f, (char)0xbe, (char)0xb9, 0x58, 0x44, 0x4d,
                                       (char)0x83, 0x5c, (char)0xe1, (char)0x82, (char)0xaf,
                                       (char)0xf1, (char)0x99, 0x1e } };
static const CUuuid TOOLS_CONTEXT = { { 0x21, 0x31, (char)0x8c, 0x60, (char)0x97, 0x14, 0x32, 0x48,
                                        (char)0x8c, (char)0xa6, 0x41, (char)0xff, 0x73, 0x24,
                                        (char)0xc8, (char)0xf2 } };
static const CUuuid NO_SUCH_TABLE = { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 } };

typedef void (*visitor)(void *user, CUfunction f, void *unused);
typedef unsigned (*each_function)(CUcontext ctx, CUmodule mod, visitor v, void *user, CUmodule again,
                                  void *extra);
typedef CUresult (*context_query)(CUcontext ctx, uint64_t *answer, uint64_t a2, void *a3, uint64_t a4,
                                  void *a5);

struct visited {
    CUfunction f[64];
    unsigned n;
};

static void remember(void *user, CUfunction f, void *unused)
{
    struct visited *v = (struct visited *)user;
    (void)unused;
    if (v->n < 64)
        v->f[v->n] = f;
    v->n++;
}

static bool has(const CUfunction *fs, unsigned n, CUfunction f)
{
    for (unsigned i = 0; i < n; i++)
        if (fs[i] == f)
            return true;
    return false;
}

// The table's first word is its size in bytes: slot i must lie inside it.
static void *slot(const void *table, unsigned i)
{
    const void *const *t = (const void *const *)table;
    return (uintptr_t)t[0] > i * sizeof(void *) ? (void *)t[i] : NULL;
}

int main(void)
{
    CUcontext ctx;
    CUmodule mod;
    const void *table = NULL;
    check(cuInit(0) == CUDA_SUCCESS, "cuInit", "failed");
    check(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
          "primary context current", "failed");
    check(cuModuleLoadData(&mod, kernels_fatbin) == CUDA_SUCCESS, "cuModuleLoadData", "failed");

    // Each function of the module, through the visitor.
    check(cuGetExportTable(&table, &TOOLS_MODULE) == CUDA_SUCCESS && table, "tools module table",
          "not handed out");
    each_function each = table ? (each_function)slot(table, 7) : NULL;
    unsigned count = 0;
    cuModuleGetFunctionCount(&count, mod);
    CUfunction all[64];
    check(count > 1 && count <= 64 && cuModuleEnumerateFunctions(all, count, mod) == CUDA_SUCCESS,
          "cuModuleEnumerateFunctions", "count %u", count);
    struct visited v = { { 0 }, 0 };
    unsigned answered = each ? each(ctx, mod, remember, &v, mod, NULL) : 0;
    check(answered == count, "each function: the count answered", "%u, want %u", answered, count);
    check(v.n == count, "each function: every function visited", "%u visits, want %u", v.n, count);
    unsigned found = 0;
    for (unsigned i = 0; i < v.n && i < 64; i++)
        found += has(all, count, v.f[i]);
    check(found == count, "each function: the module's own functions", "%u of %u", found, count);

    // A visited function works with the public calls: its name and a launch.
    CUfunction fill = NULL;
    for (unsigned i = 0; i < v.n && i < 64; i++) {
        const char *name = NULL;
        if (cuFuncGetName(&name, v.f[i]) == CUDA_SUCCESS && name && !strcmp(name, "_Z10k_fill_u32Pjjy"))
            fill = v.f[i];
    }
    check(fill != NULL, "each function: k_fill_u32 among them", "not found by name");
    if (fill) {
        CUdeviceptr d;
        uint32_t value = 0x5a5a0001u, host[256];
        unsigned long long n = 256;
        void *args[] = { &d, &value, &n };
        check(cuMemAlloc(&d, sizeof host) == CUDA_SUCCESS, "cuMemAlloc", "failed");
        check(cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS &&
              cuMemcpyDtoH(host, d, sizeof host) == CUDA_SUCCESS, "launch a visited function",
              "failed");
        bool same = true;
        for (int i = 0; i < 256; i++)
            same = same && host[i] == value;
        check(same, "visited function's result", "wrong values");
        cuMemFree(d);
    }

    // The question cuFFT asks about the current context before it plans.
    table = NULL;
    check(cuGetExportTable(&table, &TOOLS_CONTEXT) == CUDA_SUCCESS && table, "tools context table",
          "not handed out");
    context_query query = table ? (context_query)slot(table, 4) : NULL;
    uint64_t answer = 0;
    CUresult r = query ? query(ctx, &answer, 0x48c8, NULL, 0, NULL) : CUDA_ERROR_NOT_SUPPORTED;
    check(r == CUDA_SUCCESS && answer == 1, "context query", "status %d, answer %llu", (int)r,
          (unsigned long long)answer);

    // A table nobody implements fails that call and hands nothing out.
    table = &table;
    r = cuGetExportTable(&table, &NO_SUCH_TABLE);
    check(r != CUDA_SUCCESS, "unknown table refused", "status %d", (int)r);

    cuModuleUnload(mod);
    cuDevicePrimaryCtxRelease(0);
    return check_failures ? 1 : 0;
}

// Fake libcuda.so.1: modules, libraries, kernels and launches, streams,
// events.
//
// Work runs on the calling thread when it is enqueued, so every stream is
// always idle and ordering holds trivially.  Events record a CLOCK_MONOTONIC
// timestamp.
#include "fakegpu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STREAM_PRIORITY_GREATEST (-5)   // as an H100 reports

struct fg_stream {
    CUstream handle;
    unsigned flags;
    int priority;
};

struct fg_event {
    CUevent handle;
    unsigned flags;
    int recorded;
    uint64_t ns;
};

static uint64_t h64(const void *h) { return (uint64_t)(uintptr_t)h; }

static struct fg_module *mod_get(CUmodule h) { return fg_handle_get(h64(h), FG_MOD); }
static struct fg_func *func_get(CUfunction h) { return fg_handle_get(h64(h), FG_FUNC); }
static struct fg_stream *stream_get(CUstream h) { return fg_handle_get(h64(h), FG_STREAM); }
static struct fg_event *event_get(CUevent h) { return fg_handle_get(h64(h), FG_EVENT); }

CUresult fg_check_stream(CUstream s)
{
    if (fg_capture_refused(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
        stream_get(s)) {
        fg_host_functions_wait(s);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUdevice fg_stream_device(CUstream s)
{
    struct fg_ctx *owner = stream_get(s) ? fg_handle_owner(h64(s)) : fg_ctx_current();

    return owner ? owner->device : -1;
}

CUdevice fg_event_device(CUevent e)
{
    struct fg_ctx *owner = event_get(e) ? fg_handle_owner(h64(e)) : NULL;

    return owner ? owner->device : -1;
}

// For the fake libraries (cublas.c, cublaslt.c, cudnn.c), whose handles
// are bound to the device current at their creation, as NVIDIA's are:
// that device's number (0 without a context), and whether stream s can
// take the handle's kernels (a default stream always can: the handle's
// device's; a created stream only if it is of that device).
int fakegpu_current_device(void);
int fakegpu_current_device(void)
{
    CUdevice dev = 0;

    return cuCtxGetDevice(&dev) == CUDA_SUCCESS ? dev : 0;
}

int fakegpu_stream_fits(CUstream s, int dev);
int fakegpu_stream_fits(CUstream s, int dev)
{
    fg_lock();
    int fits = !stream_get(s) || fg_stream_device(s) == dev;
    fg_unlock();
    return fits;
}

// ---- Modules ------------------------------------------------------------------------------

static CUresult load(const void *image, int is_library, int flags,
                     CUmodule *out)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    fg_output_flush_current();          // a module load prints what kernels printed
    r = fg_enter(flags, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_module_load(image, is_library, c, &m);
    if (r == CUDA_SUCCESS)
        *out = m->handle;
    fg_unlock();
    return r;
}

// A load with JIT options: the fake compiles nothing, and its logs say so
// (link.c keeps the options and writes the caller's buffers).
static CUresult load_jit(const void *image, int is_library, int flags, CUmodule *out,
                         unsigned n, CUjit_option *options, void **values)
{
    struct fg_jit j;
    CUresult r = fg_jit_open(&j, n, options, values, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = load(image, is_library, flags, out);
    if (r == CUDA_SUCCESS)
        fg_jit_info(&j, "fakegpu: loaded the module's cubin, nothing to compile");
    else if (r == CUDA_ERROR_NOT_SUPPORTED)
        fg_jit_error(&j, "fakegpu: cannot compile PTX: the fake GPU has no JIT compiler");
    else
        fg_jit_error(&j, "fakegpu: cannot load the module image (error %d)", (int)r);
    fg_jit_flush(&j);
    fg_jit_close(&j);
    return r;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return load(image, 0, 0, module);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int n, CUjit_option *options,
                                    void **values)
{
    return load_jit(image, 0, 0, module, n, options, values);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    fg_output_flush_current();          // so does an unload
    r = fg_enter(0, &c, NULL);
    m = mod_get(hmod);
    if (r == CUDA_SUCCESS && (!m || m->is_library))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        fg_module_free(m);
    fg_unlock();
    return r;
}

// Looks up a function or variable of a module under the lock.
static CUresult lookup(CUmodule h, int flags, int want_library,
                       const char *name, struct fg_func **f,
                       struct fg_global **g)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r = fg_enter(flags, &c, NULL);

    if (r != CUDA_SUCCESS)
        return r;
    m = mod_get(h);
    if (!m || (want_library >= 0 && m->is_library != want_library))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (f)
        *f = fg_module_func(m, name);
    if (g)
        *g = fg_module_global(m, name);
    return (f && *f) || (g && *g) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                                     const char *name)
{
    struct fg_func *f;
    CUresult r;

    if (!hfunc)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = lookup(hmod, 0, -1, name, &f, NULL);
    if (r == CUDA_SUCCESS)
        *hfunc = f->handle;
    fg_unlock();
    return r;
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, CUmodule h,
                           int want_library, const char *name)
{
    struct fg_global *g;
    CUresult r;

    fg_lock();
    r = lookup(h, 0, want_library, name, NULL, &g);
    if (r == CUDA_SUCCESS) {
        if (dptr)
            *dptr = g->dptr;
        if (bytes)
            *bytes = g->size;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes,
                                      CUmodule hmod, const char *name)
{
    return get_global(dptr, bytes, hmod, -1, name);
}

// ---- Libraries (context independent modules) ---------------------------------------------
//
// A CUlibrary is the same object as its CUmodule, and a CUkernel the same as
// its CUfunction: one handle value serves both.

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code,
                                   CUjit_option *jit_options,
                                   void **jit_values, unsigned int n_jit,
                                   CUlibraryOption *lib_options,
                                   void **lib_values, unsigned int n_lib)
{
    CUmodule m;
    CUresult r;

    (void)lib_options;
    (void)lib_values;
    (void)n_lib;
    if (!library)
        return CUDA_ERROR_INVALID_VALUE;
    r = load_jit(code, 1, FG_CTX_OPTIONAL, &m, n_jit, jit_options, jit_values);
    if (r == CUDA_SUCCESS)
        *library = (CUlibrary)m;
    return r;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    fg_output_flush_current();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    m = mod_get((CUmodule)library);
    if (r == CUDA_SUCCESS && (!m || !m->is_library))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        fg_module_free(m);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *kernel, CUlibrary library,
                                    const char *name)
{
    struct fg_func *f;
    CUresult r;

    if (!kernel)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = lookup((CUmodule)library, FG_CTX_OPTIONAL, 1, name, &f, NULL);
    if (r == CUDA_SUCCESS)
        *kernel = (CUkernel)f->handle;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *mod, CUlibrary library)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r;

    if (!mod)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    m = mod_get((CUmodule)library);
    if (r == CUDA_SUCCESS && (!m || !m->is_library))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *mod = m->handle;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes,
                                    CUlibrary library, const char *name)
{
    return get_global(dptr, bytes, (CUmodule)library, 1, name);
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *func, CUkernel kernel)
{
    struct fg_ctx *c;
    CUresult r;

    if (!func)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && !func_get((CUfunction)kernel))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *func = (CUfunction)kernel;
    fg_unlock();
    return r;
}

// The functions of a module, or the kernels of a library (is_library), in
// the order its cubin lists them: their count, and the first n handles into
// out when out is not NULL.  cuFFT visits a module's functions through the
// driver's export table; rgpu serves that with cuModuleEnumerateFunctions.
static CUresult list_funcs(CUmodule h, int is_library, unsigned *count, CUfunction *out,
                           unsigned n)
{
    struct fg_module *m;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    m = mod_get(h);
    if (r == CUDA_SUCCESS && (!m || m->is_library != is_library))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && count)
        *count = m->nfuncs;
    for (unsigned i = 0; r == CUDA_SUCCESS && out && i < n && i < m->nfuncs; i++)
        out[i] = m->funcs[i].handle;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary library)
{
    return count ? list_funcs((CUmodule)library, 1, count, NULL, 0) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int n, CUlibrary library)
{
    return kernels && n ? list_funcs((CUmodule)library, 1, NULL, (CUfunction *)kernels, n)
                        : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule hmod)
{
    return count ? list_funcs(hmod, 0, count, NULL, 0) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int n, CUmodule hmod)
{
    return functions && n ? list_funcs(hmod, 0, NULL, functions, n) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *library, CUkernel kernel)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    if (!library)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get((CUfunction)kernel);
    if (r == CUDA_SUCCESS && (!f || !f->mod->is_library))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *library = (CUlibrary)f->mod->handle;
    fg_unlock();
    return r;
}

// The mangled name from the cubin; it lives as long as the function.
static CUresult func_name(const char **name, CUfunction h, int want_library)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    if (!name || !h)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(h);
    if (r == CUDA_SUCCESS && (!f || (want_library && !f->mod->is_library)))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *name = f->name;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
    return func_name(name, hfunc, 0);
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
    return func_name(name, (CUfunction)hfunc, 1);
}

// ---- Functions ----------------------------------------------------------------------------

static CUresult param_info(CUfunction h, size_t i, size_t *off, size_t *size)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(h);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && i >= f->nparams)
        r = CUDA_ERROR_INVALID_VALUE;       // past the last parameter
    if (r == CUDA_SUCCESS) {
        if (off)
            *off = f->params[i].offset;
        if (size)
            *size = f->params[i].size;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t i, size_t *off,
                                    size_t *size)
{
    return param_info(func, i, off, size);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t i, size_t *off,
                                      size_t *size)
{
    return param_info((CUfunction)kernel, i, off, size);
}

// The dynamic shared memory a launch of f may use: what a block gets
// without opting in, less its static memory, unless raised.
static int dyn_shared_max(const struct fg_func *f)
{
    return f->dyn_shared_set ? f->dyn_shared : FG_SHMEM_PER_BLOCK - f->shared_size;
}

static int func_attr(const struct fg_func *f, CUfunction_attribute a)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return f->max_threads;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: return f->shared_size;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: return (int)f->mod->const_size;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: return f->local_size;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: return f->num_regs;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: return f->arch;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return f->arch;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return dyn_shared_max(f);
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return f->carveout_set ? f->carveout : -1;
    default: return 0;
    }
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib,
                                    CUfunction hfunc)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(hfunc);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *pi = func_attr(f, attrib);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev)
{
    if (!fg_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return cuFuncGetAttribute(pi, attrib, (CUfunction)kernel);
}

// Devices alike: the kernel's function in the current context.
CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev)
{
    if (!fg_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return cuFuncSetAttribute((CUfunction)kernel, attrib, val);
}

// What a block may opt in to, what an SM has, and what each block costs
// it besides its own (the device table in core.c says the same).
#define FG_SHMEM_OPTIN      232448
#define FG_SHMEM_PER_SM     233472
#define FG_SHMEM_RESERVED   1024

// The two attributes a program sets: more dynamic shared memory than the
// default (up to what a block may opt in to) and the carveout preference.
CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(hfunc);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        switch (attrib) {
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            if (value < 0 || (long long)value + f->shared_size > FG_SHMEM_OPTIN) {
                r = CUDA_ERROR_INVALID_VALUE;
                break;
            }
            f->dyn_shared = value;
            f->dyn_shared_set = 1;
            break;
        case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
            if (value < -1 || value > 100) {
                r = CUDA_ERROR_INVALID_VALUE;
                break;
            }
            f->carveout = value;
            f->carveout_set = 1;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fg_unlock();
    return r;
}

// Occupancy, from the function's registers, threads and shared memory, as
// the CUDA occupancy calculator reasons (warps of 32, 2048 threads, 64 Ki
// registers and 228 KiB of shared memory per SM, at most 32 blocks).
static int blocks_per_sm(const struct fg_func *f, int block, size_t dyn)
{
    long long warps = (block + 31) / 32, regs = f->num_regs > 0 ? f->num_regs : 1;
    long long smem = (long long)f->shared_size + (long long)dyn + FG_SHMEM_RESERVED;
    long long n = 32, by;
    if (block > f->max_threads || dyn > (size_t)dyn_shared_max(f))
        return 0;
    by = 64 / warps;
    n = by < n ? by : n;
    by = 65536 / (regs * warps * 32);
    n = by < n ? by : n;
    by = FG_SHMEM_PER_SM / smem;
    n = by < n ? by : n;
    return (int)n;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    if (!numBlocks || blockSize <= 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(func);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *numBlocks = blocks_per_sm(f, blockSize, dynamicSMemSize);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                             int blockSize,
                                                             size_t dynamicSMemSize)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                dynamicSMemSize, 0);
}

// The block size of the most resident threads per SM (the fewest blocks
// among equals: the largest such size), searched from the largest size
// down in warps, as the occupancy calculator does; the callback, when
// given, says the dynamic shared memory of each size tried.
CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize,
                                                           CUfunction func,
                                                           CUoccupancyB2DSize smem_of,
                                                           size_t dynamicSMemSize,
                                                           int blockSizeLimit, unsigned int flags)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;
    int most, best_size = 0, best_blocks = 0, sms = 0;

    if (!minGridSize || !blockSize || blockSizeLimit < 0 ||
        flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(func);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    most = r == CUDA_SUCCESS ? f->max_threads : 0;
    fg_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    if (blockSizeLimit > 0 && blockSizeLimit < most)
        most = blockSizeLimit;
    for (int aligned = (most + 31) / 32 * 32; aligned > 0; aligned -= 32) {
        int size = aligned < most ? aligned : most;
        size_t dyn = smem_of ? smem_of(size) : dynamicSMemSize;
        fg_lock();
        int blocks = blocks_per_sm(f, size, dyn);
        fg_unlock();
        if (blocks * size > best_blocks * best_size) {
            best_size = size;
            best_blocks = blocks;
        }
    }
    r = cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
    if (r != CUDA_SUCCESS)
        return r;
    *blockSize = best_size;
    *minGridSize = best_blocks * sms;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
                                                  CUfunction func, CUoccupancyB2DSize smem_of,
                                                  size_t dynamicSMemSize, int blockSizeLimit)
{
    return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, smem_of,
                                                     dynamicSMemSize, blockSizeLimit, 0);
}

CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize,
                                                         CUfunction func, int numBlocks,
                                                         int blockSize)
{
    struct fg_func *f;
    struct fg_ctx *c;
    CUresult r;

    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_CTX_OPTIONAL, &c, NULL);
    f = func_get(func);
    if (r == CUDA_SUCCESS && !f)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        long long avail = FG_SHMEM_PER_SM / numBlocks - FG_SHMEM_RESERVED - f->shared_size;
        if (avail > dyn_shared_max(f))
            avail = dyn_shared_max(f);
        *dynamicSmemSize = blockSize > f->max_threads || avail < 0 ? 0 : (size_t)avail;
    }
    fg_unlock();
    return r;
}

// ---- Launch ---------------------------------------------------------------------------------

static CUresult check_config(const struct fg_func *f, struct fg_dim g,
                             struct fg_dim b, unsigned shmem)
{
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;

    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z ||
        b.x > FG_MAX_BLOCK_X || b.y > FG_MAX_BLOCK_Y || b.z > FG_MAX_BLOCK_Z ||
        threads > FG_MAX_THREADS || g.x > FG_MAX_GRID_X ||
        g.y > FG_MAX_GRID_YZ || g.z > FG_MAX_GRID_YZ)
        return CUDA_ERROR_INVALID_VALUE;
    // More threads than __launch_bounds__ allows, or more shared memory than
    // a block gets without opting in: a GPU refuses these too (the exact
    // codes are a best guess).
    if (threads > (unsigned long long)f->max_threads)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if ((unsigned long long)shmem > (unsigned long long)dyn_shared_max(f))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

// Builds the packed parameter buffer from kernelParams (one pointer per
// parameter) or from extra (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE).
static CUresult pack_params(const struct fg_func *f, void **kernel_params,
                            void **extra, unsigned char *buf)
{
    if (kernel_params && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (extra) {
        const void *src = NULL;
        const size_t *size = NULL;

        for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (i >= 64)
                return CUDA_ERROR_INVALID_VALUE;
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                src = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                size = extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (f->param_size == 0)
            return CUDA_SUCCESS;
        if (!src || !size || *size < f->param_size)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(buf, src, f->param_size);
        return CUDA_SUCCESS;
    }
    if (f->nparams && !kernel_params)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < f->nparams; i++) {
        if (!kernel_params[i])
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(buf + f->params[i].offset, kernel_params[i], f->params[i].size);
    }
    return CUDA_SUCCESS;
}

// ---- Launch attributes (cuLaunchKernelEx) ---------------------------------------------------

#define FG_CLUSTER_MAX      8       // blocks in a portable cluster
#define FG_LAUNCH_RECORDS   4       // events one launch may record

// What a launch's attributes ask of it, once checked.
struct attr_effects {
    struct fg_launch_shape shape;
    int have_cluster, have_preferred;
    struct fg_dim preferred;
    struct fg_event *records[FG_LAUNCH_RECORDS];
    unsigned nrecords;
};

static int device_attr(CUdevice_attribute a)
{
    int v = 0;

    cuDeviceGetAttribute(&v, a, 0);
    return v;
}

// An event a launch records (programmatic or launch completion): one of
// this context's, made without timing and not for another process, with
// no record flags, as cuda.h requires of both.
static CUresult event_attr(CUevent h, int flags, struct attr_effects *e)
{
    struct fg_event *ev = event_get(h);

    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0 || !(ev->flags & CU_EVENT_DISABLE_TIMING) ||
        (ev->flags & CU_EVENT_INTERPROCESS) || e->nrecords == FG_LAUNCH_RECORDS)
        return CUDA_ERROR_INVALID_VALUE;
    e->records[e->nrecords++] = ev;
    return CUDA_SUCCESS;
}

static CUresult window_attr(const CUaccessPolicyWindow *w)
{
    int prop_ok = w->hitProp >= CU_ACCESS_PROPERTY_NORMAL &&
                  w->hitProp <= CU_ACCESS_PROPERTY_PERSISTING &&
                  (w->missProp == CU_ACCESS_PROPERTY_NORMAL ||
                   w->missProp == CU_ACCESS_PROPERTY_STREAMING);

    if (w->num_bytes > (size_t)device_attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE) ||
        !(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f) || !prop_ok)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static int in_range(long long v, long long lo, long long hi)
{
    return v >= lo && v <= hi;
}

static CUresult one_attr(const CUlaunchAttribute *a, struct attr_effects *e)
{
    const CUlaunchAttributeValue *v = &a->value;
    int domains = device_attr(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT);

    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:      // clamped, as stream priorities
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        return window_attr(&v->accessPolicyWindow);
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        e->shape.cooperative = v->cooperative != 0;
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        return in_range(v->syncPolicy, CU_SYNC_POLICY_AUTO, CU_SYNC_POLICY_BLOCKING_SYNC)
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        e->have_cluster = 1;
        e->shape.cluster = (struct fg_dim){ v->clusterDim.x, v->clusterDim.y, v->clusterDim.z };
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return in_range(v->clusterSchedulingPolicyPreference, CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
                        CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        return event_attr(v->programmaticEvent.event, v->programmaticEvent.flags, e);
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        return event_attr(v->launchCompletionEvent.event, v->launchCompletionEvent.flags, e);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        return v->memSyncDomainMap.default_ < domains && v->memSyncDomainMap.remote < domains
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        return in_range(v->memSyncDomain, CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
                        CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE)
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        e->have_preferred = 1;
        e->preferred = (struct fg_dim){ v->preferredClusterDim.x, v->preferredClusterDim.y,
                                        v->preferredClusterDim.z };
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        // A percentage, or -1 (cudaSharedmemCarveoutDefault) as unsigned.
        return v->sharedMemCarveout <= 100 || v->sharedMemCarveout == (unsigned)-1
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return v->nvlinkUtilCentricScheduling <= 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        // Device-updatable nodes exist only in captured graphs; ids this
        // driver does not know are invalid.
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static int divides(struct fg_dim part, struct fg_dim whole)
{
    return part.x && part.y && part.z && whole.x % part.x == 0 && whole.y % part.y == 0 &&
           whole.z % part.z == 0;
}

// A cluster must tile the grid and fit the portable size; a preferred
// cluster must be made of whole clusters (z alike) and tile the grid too.
static CUresult check_cluster(struct fg_dim g, const struct attr_effects *e)
{
    struct fg_dim c = e->shape.cluster, p = e->preferred;

    if (e->have_cluster &&
        (!divides(c, g) || (unsigned long long)c.x * c.y * c.z > FG_CLUSTER_MAX))
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (e->have_preferred &&
        (!e->have_cluster || !divides(c, p) || p.z != c.z || !divides(p, g)))
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    return CUDA_SUCCESS;
}

// A cooperative grid must be resident all at once: no more blocks than the
// SMs hold together, by the occupancy of this block size and shared memory.
static CUresult check_cooperative(const struct fg_func *f, struct fg_dim g, struct fg_dim b,
                                  unsigned shmem)
{
    unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
    long long resident = (long long)blocks_per_sm(f, (int)(b.x * b.y * b.z), shmem) *
                         device_attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);

    if (!device_attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH))
        return CUDA_ERROR_NOT_SUPPORTED;
    return blocks <= (unsigned long long)resident ? CUDA_SUCCESS
                                                 : CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
}

static CUresult check_attrs(const struct fg_func *f, struct fg_dim g, struct fg_dim b,
                            unsigned shmem, const CUlaunchAttribute *attrs, unsigned n,
                            struct attr_effects *e)
{
    CUresult r = CUDA_SUCCESS;

    memset(e, 0, sizeof *e);
    e->shape.cluster = (struct fg_dim){ 1, 1, 1 };
    if (n && !attrs)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n && r == CUDA_SUCCESS; i++)
        r = one_attr(&attrs[i], e);
    if (r == CUDA_SUCCESS)
        r = check_cluster(g, e);
    if (r == CUDA_SUCCESS && e->shape.cooperative)
        r = check_cooperative(f, g, b, shmem);
    return r;
}

static uint64_t now_ns(void);

static CUresult launch(CUfunction h, struct fg_dim g, struct fg_dim b,
                       unsigned shmem, CUstream s, void **kernel_params,
                       void **extra, const CUlaunchAttribute *attrs, unsigned nattrs)
{
    struct fg_func *f;
    struct fg_ctx *c;
    struct attr_effects e;
    unsigned char *buf;
    int skip;
    CUresult r;

    // The driver prints what earlier kernels printed as a launch starts.
    fg_output_flush_current();
    r = fg_enter(FG_ENQUEUE, &c, &skip);
    if (r != CUDA_SUCCESS)
        return r;
    f = func_get(h);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    r = check_config(f, g, b, shmem);
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(s);
    // A kernel cannot go to a stream of another device (the CUDA
    // programming guide, "Stream and Event Behavior").
    if (r == CUDA_SUCCESS && fg_stream_device(s) != c->device)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        r = check_attrs(f, g, b, shmem, attrs, nattrs, &e);
    if (r != CUDA_SUCCESS)
        return r;
    if (!f->twin)
        return CUDA_ERROR_NOT_FOUND;        // no CPU twin for this kernel
    // Zeroed and 16 byte aligned, like the constant bank it stands for.
    buf = aligned_alloc(16, (f->param_size + 15) / 16 * 16 + 16);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(buf, 0, (f->param_size + 15) / 16 * 16 + 16);
    r = pack_params(f, kernel_params, extra, buf);
    if (r == CUDA_SUCCESS && !skip) {
        // The launch itself succeeds; a fault shows at the next wait.
        CUresult fault = fg_exec(f, g, b, &e.shape, buf);
        if (fault != CUDA_SUCCESS)
            c->pending = fault;
    }
    // The kernel ran to completion: its events fire (recorded as
    // cuEventRecord records them, after a fault too).
    for (unsigned i = 0; r == CUDA_SUCCESS && i < e.nrecords; i++) {
        e.records[i]->recorded = 1;
        e.records[i]->ns = now_ns();
    }
    free(buf);
    return r;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz,
                                unsigned int shmem, CUstream s,
                                void **kernel_params, void **extra)
{
    CUresult r;

    if (fg_capturing(s))
        return fg_capture_kernel(f, gx, gy, gz, bx, by, bz, shmem, s, kernel_params, extra);
    fg_lock();
    r = launch(f, (struct fg_dim){ gx, gy, gz }, (struct fg_dim){ bx, by, bz },
               shmem, s, kernel_params, extra, NULL, 0);
    fg_unlock();
    return r;
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **kernel_params,
                          void **extra, CUstream default_stream)
{
    CUresult r;

    if (!cfg)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = launch(f, (struct fg_dim){ cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ },
               (struct fg_dim){ cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ },
               cfg->sharedMemBytes, cfg->hStream ? cfg->hStream : default_stream,
               kernel_params, extra, cfg->attrs, cfg->numAttrs);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **kernel_params,
                                  void **extra)
{
    return launch_ex(cfg, f, kernel_params, extra, NULL);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f,
                                       void **kernel_params, void **extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f,
                                       void **kernel_params, void **extra)
{
    return launch_ex(cfg, f, kernel_params, extra, CU_STREAM_PER_THREAD);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int shmem, CUstream s,
                                           void **kernel_params)
{
    CUlaunchAttribute coop = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                               .value.cooperative = 1 };
    CUresult r;

    fg_lock();
    r = launch(f, (struct fg_dim){ gx, gy, gz }, (struct fg_dim){ bx, by, bz }, shmem, s,
               kernel_params, NULL, &coop, 1);
    fg_unlock();
    return r;
}

// ---- Streams ---------------------------------------------------------------------------------

static CUresult stream_new(unsigned flags, int priority, CUstream *out)
{
    struct fg_stream *st;
    struct fg_ctx *c;
    CUresult r;

    if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS) {
        st = calloc(1, sizeof *st);
        if (st)
            st->handle = (CUstream)(uintptr_t)fg_handle_new(FG_STREAM, st, c);
        if (!st || !st->handle) {
            free(st);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            // Out-of-range priorities are clamped, as CUDA does.
            st->flags = flags;
            st->priority = priority > 0 ? 0
                         : priority < STREAM_PRIORITY_GREATEST
                               ? STREAM_PRIORITY_GREATEST : priority;
            *out = st->handle;
        }
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuStreamCreate(CUstream *ph, unsigned int flags)
{
    return stream_new(flags, 0, ph);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ph, unsigned int flags,
                                            int priority)
{
    return stream_new(flags, priority, ph);
}

// The NULL, legacy and per-thread streams: flags 0, priority 0.
static CUresult stream_query(CUstream h, unsigned *flags, int *priority)
{
    struct fg_stream *st;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(h);
    st = stream_get(h);
    if (r == CUDA_SUCCESS && flags)
        *flags = st ? st->flags : 0;
    if (r == CUDA_SUCCESS && priority)
        *priority = st ? st->priority : 0;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream h, unsigned int *flags)
{
    return flags ? stream_query(h, flags, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *priority)
{
    return priority ? stream_query(h, NULL, priority) : CUDA_ERROR_INVALID_VALUE;
}

// A created stream's context is its owner; the default streams are the
// calling thread's current context's, as the driver says.
CUresult CUDAAPI cuStreamGetCtx(CUstream h, CUcontext *pctx)
{
    struct fg_ctx *c, *owner;
    CUresult r;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && h != NULL && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD &&
        !stream_get(h))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        owner = stream_get(h) ? fg_handle_owner(h64(h)) : c;
        *pctx = owner ? owner->handle : NULL;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    fg_unlock();
    if (r == CUDA_SUCCESS && least)
        *least = 0;
    if (r == CUDA_SUCCESS && greatest)
        *greatest = STREAM_PRIORITY_GREATEST;
    return r;
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream h)
{
    struct fg_stream *st;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    st = stream_get(h);
    if (r == CUDA_SUCCESS && !st)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        fg_handle_drop(h64(h));
        free(st);
    }
    fg_unlock();
    return r;
}

// Synchronize and query: nothing is ever outstanding, so only faults and
// bad handles are reported; a synchronize also waits for the modelled copy
// engine (core.c).
// FAKEGPU_SYNC_COUNT_FILE=PATH: how many stream synchronises this process
// made so far, rewritten at each, so that a test can tell how often rgpud
// waited for the GPU (tests/step-roundtrips.sh).  The file is opened when
// the library is loaded: rgpud's session loads it before its sandbox,
// which then forbids opening files for writing.
static int sync_count_fd = -1;

__attribute__((constructor)) static void open_sync_count(void)
{
    const char *path = getenv("FAKEGPU_SYNC_COUNT_FILE");
    if (path && *path)
        sync_count_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
}

// Lock held.
static void count_stream_sync(void)
{
    static unsigned long count;
    char line[32];

    if (sync_count_fd < 0)
        return;
    int n = snprintf(line, sizeof line, "%20lu\n", ++count);
    if (pwrite(sync_count_fd, line, (size_t)n, 0) != n)
        sync_count_fd = -1;
}

static CUresult stream_wait(CUstream h, int wait)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    if (wait) {
        count_stream_sync();
        fg_output_flush_current();      // a synchronise prints what kernels printed
    }
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && !wait && fg_host_functions_busy(h))
        r = CUDA_ERROR_NOT_READY;   // a host function in flight: the stream is busy
    else if (r == CUDA_SUCCESS)
        r = fg_check_stream(h);
    uint64_t idle = fg_engine_idle_at();
    fg_unlock();
    if (wait)
        fg_engine_wait(idle);
    return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream h) { return stream_wait(h, 1); }
CUresult CUDAAPI cuStreamQuery(CUstream h) { return stream_wait(h, 0); }

CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent ev, unsigned int flags)
{
    struct fg_ctx *c;
    int skip;
    CUresult r;

    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(FG_ENQUEUE, &c, &skip);
    if (r == CUDA_SUCCESS && !event_get(ev))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && !fg_capture_event_wait(h, ev, &r))
        r = fg_check_stream(h);
    fg_unlock();
    return r;
}

// ---- Events ------------------------------------------------------------------------------------

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags)
{
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                           CU_EVENT_INTERPROCESS;
    struct fg_event *ev;
    struct fg_ctx *c;
    CUresult r;

    if (!ph || (flags & ~known) ||
        ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS) {
        ev = calloc(1, sizeof *ev);
        if (ev)
            ev->handle = (CUevent)(uintptr_t)fg_handle_new(FG_EVENT, ev, c);
        if (!ev || !ev->handle) {
            free(ev);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ev->flags = flags;
            *ph = ev->handle;
        }
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuEventRecord(CUevent h, CUstream s)
{
    struct fg_event *ev;
    struct fg_ctx *c;
    int skip;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_ENQUEUE, &c, &skip);
    ev = event_get(h);
    if (r == CUDA_SUCCESS && !ev)
        r = CUDA_ERROR_INVALID_HANDLE;
    // In a capture, the record is the capture's business.
    if (r == CUDA_SUCCESS && fg_capture_event_record(h, s, &r)) {
        fg_unlock();
        return r;
    }
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(s);
    // An event records only on a stream of its own device.
    if (r == CUDA_SUCCESS && fg_event_device(h) != fg_stream_device(s))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        ev->recorded = 1;
        ev->ns = now_ns();
    }
    fg_unlock();
    return r;
}

// Synchronize and query: a recorded event has always completed, and one
// never recorded counts as complete too.
static CUresult event_wait(CUevent h, int wait)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    if (wait)
        fg_output_flush_current();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && !event_get(h))
        r = CUDA_ERROR_INVALID_HANDLE;
    uint64_t idle = fg_engine_idle_at();
    fg_unlock();
    if (wait)
        fg_engine_wait(idle);
    return r;
}

CUresult CUDAAPI cuEventSynchronize(CUevent h) { return event_wait(h, 1); }
CUresult CUDAAPI cuEventQuery(CUevent h) { return event_wait(h, 0); }

CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
    struct fg_event *a, *b;
    struct fg_ctx *c;
    CUresult r;

    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    a = event_get(start);
    b = event_get(end);
    // Unrecorded or timing-disabled events have no time to compare, nor
    // have events of two devices.
    if (r == CUDA_SUCCESS &&
        (!a || !b || !a->recorded || !b->recorded ||
         ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) ||
         fg_event_device(start) != fg_event_device(end)))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        *ms = (float)((double)((int64_t)(b->ns - a->ns)) / 1e6);
    fg_unlock();
    return r;
}

int fg_event_flags(CUevent h, unsigned *flags)
{
    struct fg_event *ev = event_get(h);

    if (!ev)
        return -1;
    *flags = ev->flags;
    return 0;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent h)
{
    struct fg_event *ev;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    ev = event_get(h);
    if (r == CUDA_SUCCESS && !ev)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        fg_handle_drop(h64(h));
        free(ev);
    }
    fg_unlock();
    return r;
}

// The pre-12.8 name, which cuda.h now maps to the _v2 one.
#undef cuEventElapsedTime
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end);
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
    return cuEventElapsedTime_v2(ms, start, end);
}

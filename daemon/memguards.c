/* Keeping daemon/owned.c's table true, and the server side of the checked
 * pointer kinds.
 *
 * After every successful call that hands out device memory the range is
 * recorded; after every free it is forgotten.  The generated code checks
 * each RGPU_DEVPTR argument and each scalar against what is recorded here
 * (common/rgpu_marshal.c, rgpu_check_args) through the hooks registered
 * below; the serve_ functions of rgpu's own copies ask owned_range
 * themselves. */
#include "rgpud.h"
#include "copy.h"
#include "owned.h"
#include "rgpu_log.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

/* argv[i] points at the decoded argument; for outputs, at the pointer to
 * the buffer the real function wrote (NULL when the client passed NULL). */
static uint64_t val(void *const *argv, int i)
{
    return *(const uint64_t *)argv[i];
}

static uint64_t out_value(void *const *argv, int i)
{
    const uint64_t *p = *(uint64_t *const *)argv[i];
    return p ? *p : 0;
}

/* ---- recording what the driver hands out ------------------------------------- */

/* cudaMalloc(void **p, size_t size) and every allocation shaped like it:
 * the pointer in argument 0, the size in argument 1. */
static void post_alloc(void **argv, int status)
{
    if (status == 0)
        (void)owned_add(out_value(argv, 0), val(argv, 1), OWNED_ALLOC, 0);
}

static void post_pool_alloc(void **argv, int status)
{
    if (status == 0)
        (void)owned_add(out_value(argv, 0), val(argv, 1), OWNED_POOL, 0);
}

static void post_reserve(void **argv, int status)
{
    if (status == 0)
        (void)owned_add(out_value(argv, 0), val(argv, 1), OWNED_VMM, 0);
}

/* Pitched: (p, pitch *, width, height [, elementSize]). */
static void post_alloc_pitch(void **argv, int status)
{
    uint64_t pitch = out_value(argv, 1), height = val(argv, 3);
    if (status == 0 && height && pitch <= UINT64_MAX / height)
        (void)owned_add(out_value(argv, 0), pitch * height, OWNED_ALLOC, 0);
}

/* A free of the pointer in argument 0.  The range goes before the real
 * free, not after: once the driver has freed it, another client thread's
 * allocation may get the same address at once, and a removal after the
 * free would then forget that thread's new memory.  A free that fails puts
 * it back. */
static _Thread_local struct owned_entry freeing;
static _Thread_local int freeing_taken;

static int pre_free(void **argv)
{
    freeing_taken = owned_take(val(argv, 0), &freeing) == 0;
    return 0;
}

static void post_free(void **argv, int status)
{
    (void)argv;
    if (status != 0 && freeing_taken)
        (void)owned_restore(&freeing);
    freeing_taken = 0;
}

/* The copies still reading the staging ring finish before a reset (or
 * the release that may destroy a primary context) takes their events. */
static int pre_drain(void **argv)
{
    (void)argv;
    copy_drain();
    return 0;
}

/* A reset frees every allocation: forget them, so that an address the
 * driver gives back to the process is never taken for device memory. */
static void post_clear(void **argv, int status)
{
    (void)argv;
    if (status == 0) {
        owned_clear();
        copy_forget_pinning();      /* the reset unpinned the copy staging */
        hand_cuda_layouts_retire(); /* and unloaded every module */
    }
}

/* cuModuleGetGlobal_v2 / cuLibraryGetGlobal / cudaLibraryGetGlobal (dptr *,
 * bytes *, owner, name): the client may not have asked for the size; the
 * library is asked again. */
static void post_global(const char *lib, const char *fn, void **argv, int status)
{
    uint64_t ptr = out_value(argv, 0), size = out_value(argv, 1), owner = val(argv, 2);
    const char *name = (const char *)(uintptr_t)val(argv, 3);
    if (status != 0 || !ptr)
        return;
    if (!*(uint64_t **)argv[1] && name) {
        /* Both libraries' functions: (address *, size_t *, handle, name),
         * 0 for success. */
        int (*get)(CUdeviceptr *, size_t *, void *, const char *) =
            (int (*)(CUdeviceptr *, size_t *, void *, const char *))backend_sym(lib, fn);
        CUdeviceptr d = 0;
        size_t n = 0;
        if (!get || get(&d, &n, (void *)(uintptr_t)owner, name) != 0 || d != ptr)
            return;
        size = n;
    }
    (void)owned_add(ptr, size, OWNED_GLOBAL, owner);
}

static void post_module_global(void **argv, int status)
{
    post_global("cuda", "cuModuleGetGlobal_v2", argv, status);
}

static void post_library_global(void **argv, int status)
{
    post_global("cuda", "cuLibraryGetGlobal", argv, status);
}

static void post_runtime_library_global(void **argv, int status)
{
    post_global("cudart", "cudaLibraryGetGlobal", argv, status);
}

static void post_unload(void **argv, int status)
{
    if (status == 0) {
        owned_remove_owner(val(argv, 0));
        hand_cuda_layouts_retire();     /* its functions' handles may come back */
    }
}

/* ---- 2D memsets: the whole extent ---------------------------------------------- */

/* (ptr, pitch, value, width, height ...) with width in elements of elem
 * bytes: every byte from ptr to the last row's end must be owned. */
static int extent_owned(void **argv, uint64_t elem)
{
    uint64_t width = val(argv, 3);
    uint64_t extent;
    if (width > UINT64_MAX / elem)
        return 0;
    return owned_extent_2d(val(argv, 1), width * elem, val(argv, 4), &extent) == 0 &&
           owned_range(val(argv, 0), extent);
}

static int pre_memset2d_rt(void **argv)
{
    return extent_owned(argv, 1) ? 0 : cudaErrorInvalidValue;
}

static int pre_memset2d_8(void **argv)
{
    return extent_owned(argv, 1) ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static int pre_memset2d_16(void **argv)
{
    return extent_owned(argv, 2) ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static int pre_memset2d_32(void **argv)
{
    return extent_owned(argv, 4) ? 0 : CUDA_ERROR_INVALID_VALUE;
}

/* ---- host outputs the client must leave NULL ------------------------------------- */

/* These parameters are host arrays that the runtime fills in the server
 * process; the client stub refuses a caller who asks for them, so anything
 * but NULL from the wire names a server address. */
static int pre_capture_info(void **argv)
{
    return val(argv, 4) || val(argv, 5) ? cudaErrorInvalidValue : 0;
}

static int pre_graph_nodes(void **argv)
{
    return val(argv, 1) ? cudaErrorInvalidValue : 0;
}

/* cuCtxCreate_v4's parameters hold pointers to arrays of the client: the
 * stub sends NULL and the affinity array through cuCtxCreate_v3. */
static int pre_ctx_create_params(void **argv)
{
    return val(argv, 1) ? CUDA_ERROR_INVALID_VALUE : 0;
}

static const struct guard memguards[] = {
    { "cudart", "cudaStreamGetCaptureInfo", pre_capture_info, NULL },
    { "cudart", "cudaStreamGetCaptureInfo_ptsz", pre_capture_info, NULL },
    { "cudart", "cudaGraphGetNodes", pre_graph_nodes, NULL },
    { "cudart", "cudaMalloc", NULL, post_alloc },
    { "cudart", "cudaMallocPitch", NULL, post_alloc_pitch },
    { "cudart", "cudaMallocManaged", NULL, post_alloc },
    { "cudart", "cudaMallocAsync", NULL, post_pool_alloc },
    { "cudart", "cudaMallocAsync_ptsz", NULL, post_pool_alloc },
    { "cudart", "cudaMallocFromPoolAsync", NULL, post_pool_alloc },
    { "cudart", "cudaMallocFromPoolAsync_ptsz", NULL, post_pool_alloc },
    { "cudart", "cudaFree", pre_free, post_free },
    { "cudart", "cudaFreeAsync", pre_free, post_free },
    { "cudart", "cudaFreeAsync_ptsz", pre_free, post_free },
    { "cudart", "cudaDeviceReset", pre_drain, post_clear },
    { "cudart", "cudaThreadExit", pre_drain, post_clear },
    { "cudart", "cudaMemset2D", pre_memset2d_rt, NULL },
    { "cudart", "cudaMemset2D_ptds", pre_memset2d_rt, NULL },
    { "cudart", "cudaMemset2DAsync", pre_memset2d_rt, NULL },
    { "cudart", "cudaMemset2DAsync_ptsz", pre_memset2d_rt, NULL },
    { "cuda", "cuMemAlloc_v2", NULL, post_alloc },
    { "cuda", "cuMemAllocPitch_v2", NULL, post_alloc_pitch },
    { "cuda", "cuMemAllocManaged", NULL, post_alloc },
    { "cuda", "cuMemAllocAsync", NULL, post_pool_alloc },
    { "cuda", "cuMemAllocAsync_ptsz", NULL, post_pool_alloc },
    { "cuda", "cuMemAllocFromPoolAsync", NULL, post_pool_alloc },
    { "cuda", "cuMemAllocFromPoolAsync_ptsz", NULL, post_pool_alloc },
    { "cuda", "cuMemFree_v2", pre_free, post_free },
    { "cuda", "cuMemFreeAsync", pre_free, post_free },
    { "cuda", "cuMemFreeAsync_ptsz", pre_free, post_free },
    { "cuda", "cuMemAddressReserve", NULL, post_reserve },
    { "cuda", "cuMemAddressFree", pre_free, post_free },
    { "cuda", "cuModuleGetGlobal_v2", NULL, post_module_global },
    { "cuda", "cuLibraryGetGlobal", NULL, post_library_global },
    { "cudart", "cudaLibraryGetGlobal", NULL, post_runtime_library_global },
    { "cuda", "cuModuleUnload", NULL, post_unload },
    { "cuda", "cuLibraryUnload", NULL, post_unload },
    { "cuda", "cuDevicePrimaryCtxReset_v2", pre_drain, post_clear },
    { "cuda", "cuDevicePrimaryCtxReset", pre_drain, post_clear },
    { "cuda", "cuDevicePrimaryCtxRelease_v2", pre_drain, NULL },
    { "cuda", "cuDevicePrimaryCtxRelease", pre_drain, NULL },
    { "cuda", "cuCtxCreate_v4", pre_ctx_create_params, NULL },
    { "cuda", "cuMemsetD2D8_v2", pre_memset2d_8, NULL },
    { "cuda", "cuMemsetD2D16_v2", pre_memset2d_16, NULL },
    { "cuda", "cuMemsetD2D32_v2", pre_memset2d_32, NULL },
    { "cuda", "cuMemsetD2D8Async", pre_memset2d_8, NULL },
    { "cuda", "cuMemsetD2D16Async", pre_memset2d_16, NULL },
    { "cuda", "cuMemsetD2D32Async", pre_memset2d_32, NULL },
    { "cuda", "cuMemsetD2D8_v2_ptds", pre_memset2d_8, NULL },
    { "cuda", "cuMemsetD2D16_v2_ptds", pre_memset2d_16, NULL },
    { "cuda", "cuMemsetD2D32_v2_ptds", pre_memset2d_32, NULL },
    { "cuda", "cuMemsetD2D8Async_ptsz", pre_memset2d_8, NULL },
    { "cuda", "cuMemsetD2D16Async_ptsz", pre_memset2d_16, NULL },
    { "cuda", "cuMemsetD2D32Async_ptsz", pre_memset2d_32, NULL },
};

const struct guard *memguard_for(const char *lib, const char *name)
{
    return GUARD_IN(memguards, lib, name);
}

/* ---- where a call's scalars live, asked of the server-side library -------------- */

/* cuBLAS: every call with scalars takes the handle first. */
static int cublas_scalar_host(const struct rgpu_proc *proc, void *const *argv)
{
    cublasStatus_t (*get)(cublasHandle_t, cublasPointerMode_t *) =
        (cublasStatus_t (*)(cublasHandle_t, cublasPointerMode_t *))backend_sym(
            "cublas", "cublasGetPointerMode_v2");
    cublasPointerMode_t mode;
    if (!get || proc->nparams == 0 || strcmp(proc->params[0].name, "handle") != 0 ||
        get((cublasHandle_t)(uintptr_t)val(argv, 0), &mode) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return mode == CUBLAS_POINTER_MODE_HOST;
}

/* cuBLASLt: the scalar follows its descriptor (annotated type=<desc>):
 * alpha is on the host only in host mode, beta also in "alpha device
 * vector, beta host". */
static int lt_scalar_host(const struct rgpu_proc *proc, unsigned param, void *const *argv)
{
    int desc_arg = proc->params[param].len_arg;
    int32_t mode = -1;
    size_t written = 0;
    cublasStatus_t rc = CUBLAS_STATUS_NOT_SUPPORTED;
    if (desc_arg < 0)
        return -1;
    void *desc = (void *)(uintptr_t)val(argv, desc_arg);
    if (strcmp(proc->name, "cublasLtMatmul") == 0 || strcmp(proc->name, "rgpu_lt_matmul") == 0) {
        __typeof__(&cublasLtMatmulDescGetAttribute) get =
            (__typeof__(&cublasLtMatmulDescGetAttribute))backend_sym(
                "cublasLt", "cublasLtMatmulDescGetAttribute");
        if (get)
            rc = get(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode, &written);
    } else if (strcmp(proc->name, "cublasLtMatrixTransform") == 0) {
        __typeof__(&cublasLtMatrixTransformDescGetAttribute) get =
            (__typeof__(&cublasLtMatrixTransformDescGetAttribute))backend_sym(
                "cublasLt", "cublasLtMatrixTransformDescGetAttribute");
        if (get)
            rc = get(desc, CUBLASLT_MATRIX_TRANSFORM_DESC_POINTER_MODE, &mode, sizeof mode,
                     &written);
    }
    if (rc != CUBLAS_STATUS_SUCCESS || written != sizeof mode)
        return -1;
    if (mode == CUBLASLT_POINTER_MODE_HOST)
        return 1;
    return strcmp(proc->params[param].name, "beta") == 0 &&
           mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
}

static int scalar_host(const struct rgpu_lib *lib, const struct rgpu_proc *proc, unsigned param,
                       void *const *argv)
{
    if (strcmp(lib->name, "cublas") == 0)
        return cublas_scalar_host(proc, argv);
    if (strcmp(lib->name, "cublasLt") == 0)
        return lt_scalar_host(proc, param, argv);
    /* cuDNN's scaling factors are host values by definition. */
    return 1;
}

/* A generated call's device range, logged when refused: the driver's
 * answer (invalid value) does not say which pointer or why. */
static int devptr_owned(uint64_t ptr, uint64_t len)
{
    if (owned_range(ptr, len))
        return 1;
    uint64_t base, size;
    owned_nearest(ptr, &base, &size);
    rgpu_debug("device range 0x%llx + %llu is not the session's memory (nearest below: "
               "0x%llx + %llu)", (unsigned long long)ptr, (unsigned long long)len,
               (unsigned long long)base, (unsigned long long)size);
    return 0;
}

static const struct rgpu_server_checks checks = { devptr_owned, scalar_host };

/* Before main: generated code refuses every device pointer until this runs. */
__attribute__((constructor)) static void memguards_init(void)
{
    rgpu_set_server_checks(&checks);
}

/* Driver-API launches, server side: the serve_ functions of rgpu's own
 * procedures (codegen/cuda_own.h) for parameter layouts, cuLaunchKernel,
 * cuLaunchKernelEx with launch attributes (and the cooperative launches,
 * which the client sends as such), function and kernel names and the
 * potential block size.  Client side: stubs/cuda_launch.c. */
#include "rgpud.h"
#include "launch_attrs.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))

/* Parameter layouts, by function, asked of the driver once.  Unloading
 * a module or library (or resetting a context) may free functions whose
 * handle values the driver then hands out for others: every layout is
 * retired then (daemon/memguards.c), and asked again at the next use.
 * Retired layouts are kept, not freed: a launch on another worker thread
 * may still be reading one. */
struct layout {
    uint64_t func;
    unsigned n;
    uint32_t off[512], size[512];
    struct layout *next;
};
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static struct layout *layouts, *retired;

static struct layout *find_layout(uint64_t func)
{
    struct layout *l;
    pthread_mutex_lock(&layout_lock);
    for (l = layouts; l && l->func != func; l = l->next)
        ;
    pthread_mutex_unlock(&layout_lock);
    return l;
}

void hand_cuda_layouts_retire(void)
{
    pthread_mutex_lock(&layout_lock);
    while (layouts) {
        struct layout *l = layouts;
        layouts = l->next;
        l->next = retired;
        retired = l;
    }
    pthread_mutex_unlock(&layout_lock);
}

/* Ask the driver for func's layout into l: CUDA_SUCCESS or its error.  A
 * CUkernel cast to CUfunction is a valid launch handle too; its layout
 * comes from cuKernelGetParamInfo. */
static int ask_layout(uint64_t func, struct layout *l)
{
    size_t off, size;
    int rc;
    if (!REAL(cuFuncGetParamInfo))
        return -RGPU_ENOSYM;
    int as_kernel = REAL(cuFuncGetParamInfo)((CUfunction)func, 0, &off, &size) ==
                        CUDA_ERROR_INVALID_HANDLE && REAL(cuKernelGetParamInfo);
    for (;;) {
        rc = as_kernel ? REAL(cuKernelGetParamInfo)((CUkernel)func, l->n, &off, &size)
                       : REAL(cuFuncGetParamInfo)((CUfunction)func, l->n, &off, &size);
        if (rc != CUDA_SUCCESS || l->n == 512)
            break;
        l->off[l->n] = (uint32_t)off;
        l->size[l->n] = (uint32_t)size;
        l->n++;
    }
    /* Asking past the last parameter is how the end is found. */
    return rc == CUDA_ERROR_INVALID_VALUE || l->n == 512 ? CUDA_SUCCESS : rc;
}

/* The layout of a function the driver handed out (checked by the caller),
 * asked of the driver the first time: CUDA_SUCCESS with *out, or the
 * driver's error. */
static int layout_for(uint64_t func, struct layout **out)
{
    struct layout *l = find_layout(func);
    if (l) {
        *out = l;
        return CUDA_SUCCESS;
    }
    l = calloc(1, sizeof *l);
    if (!l)
        return -RGPU_ENOMEM;
    l->func = func;
    int rc = ask_layout(func, l);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    pthread_mutex_lock(&layout_lock);
    l->next = layouts;
    layouts = l;
    pthread_mutex_unlock(&layout_lock);
    *out = l;
    return CUDA_SUCCESS;
}

/* The codec checked the function as one the session was handed (a kernel
 * passes as one); an invented handle never reaches the driver's lookup. */
CUresult serve_rgpu_cu_param_layout(CUfunction function, struct rgpu_param_slot *params,
                                    size_t max_params, size_t *nparams)
{
    struct layout *l = NULL;
    uint64_t func = (uint64_t)(uintptr_t)function;
    if (!REAL(cuFuncGetParamInfo))
        return serve_transport(RGPU_ENOSYM);
    if (!nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *nparams = 0;
    int rc = guard_function_known(func) ? layout_for(func, &l) : CUDA_ERROR_INVALID_HANDLE;
    if (rc < 0)
        return serve_transport(-rc);
    for (unsigned i = 0; l && i < l->n; i++)
        if (params && i < max_params)
            params[i] = (struct rgpu_param_slot){ l->off[i], l->size[i] };
    *nparams = l ? l->n : 0;
    return (CUresult)rc;
}

/* What the driver refused, for the session's debug log: the answer alone
 * does not say which part of a launch was wrong. */
static void log_refused_launch(int rc, const CUlaunchConfig *cfg, size_t param_bytes)
{
    char attrs[256] = "";
    size_t used = 0;
    for (unsigned i = 0; i < cfg->numAttrs && used < sizeof attrs; i++) {
        const CUlaunchAttribute *a = &cfg->attrs[i];
        int w = snprintf(attrs + used, sizeof attrs - used, " %u:[%u %u %u]", (unsigned)a->id,
                         a->value.clusterDim.x, a->value.clusterDim.y, a->value.clusterDim.z);
        used += w > 0 ? (size_t)w : 0;
    }
    rgpu_debug("cuLaunchKernelEx refused (%d): grid %ux%ux%u block %ux%ux%u shared %u, "
               "%zu argument bytes, attributes (id:[first words])%s", rc, cfg->gridDimX,
               cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
               cfg->sharedMemBytes, param_bytes, attrs);
}

/* A graph's kernel node as a launch (daemon/hand_graphs.c): 1 for a
 * function the session was never handed or whose layout the driver does
 * not give, -1 when the arguments do not fit it, else 0 with argv filled. */
int hand_cuda_function_argv(uint64_t func, const void *params, size_t n, void **argv,
                            unsigned max)
{
    struct layout *l = NULL;
    if (!guard_function_known(func) || layout_for(func, &l) != CUDA_SUCCESS)
        return 1;
    return layout_argv(l->off, l->size, l->n, params, n, argv, max) ? -1 : 0;
}

/* The layout of a function the session was handed (a graph's kernel
 * node queried, daemon/hand_graphs.c): 0, or -1 when there is none. */
int hand_cuda_function_layout(uint64_t func, const uint32_t **offset, const uint32_t **size,
                              unsigned *n)
{
    struct layout *l = NULL;
    if (!guard_function_known(func) || layout_for(func, &l) != CUDA_SUCCESS)
        return -1;
    *offset = l->off;
    *size = l->size;
    *n = l->n;
    return 0;
}

/* A launch as both procedures describe it. */
struct launch {
    CUfunction f;
    unsigned grid[3], block[3], shmem;
    CUstream stream;
    int packed;                 /* params: the caller's own buffer (`extra`) */
    size_t params_size;
    const void *params;
};

/* The launch, the codec having checked the function and the stream as
 * the session's (and params as params_size bytes): without attributes
 * cuLaunchKernel's, with them cuLaunchKernelEx's.  Arguments that do not
 * fit the function's layout, or more than a launch takes, are a protocol
 * error. */
static CUresult launch(const struct launch *L, CUlaunchAttribute *attrs, unsigned nattrs)
{
    void *argv[512];
    uint64_t func = (uint64_t)(uintptr_t)L->f;
    size_t size = L->params_size;
    const void *packed_params = L->packed ? params_aligned(L->params, size) : NULL;
    if (L->packed && !packed_params)
        return serve_transport(RGPU_EPROTO);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)packed_params,
                      CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
    /* The packed path names the function without asking its layout. */
    if (!guard_function_known(func))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!L->packed) {
        struct layout *l = NULL;
        int rc = layout_for(func, &l);
        if (rc != CUDA_SUCCESS)
            return rc < 0 ? (CUresult)serve_transport(-rc) : (CUresult)rc;
        if (layout_argv(l->off, l->size, l->n, L->params, size, argv, 512))
            return serve_transport(RGPU_EPROTO);
    }
    void **kernel_params = L->packed ? NULL : argv, **packed = L->packed ? extra : NULL;
    if (!attrs) {
        if (!REAL(cuLaunchKernel))
            return serve_transport(RGPU_ENOSYM);
        return REAL(cuLaunchKernel)(L->f, L->grid[0], L->grid[1], L->grid[2], L->block[0],
                                    L->block[1], L->block[2], L->shmem, L->stream,
                                    kernel_params, packed);
    }
    if (!REAL(cuLaunchKernelEx))
        return serve_transport(RGPU_ENOSYM);
    CUlaunchConfig config = {
        L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2],
        L->shmem, L->stream, attrs, nattrs,
    };
    CUresult rc = REAL(cuLaunchKernelEx)(&config, L->f, kernel_params, packed);
    if (rc != CUDA_SUCCESS)
        log_refused_launch(rc, &config, size);
    return rc;
}

CUresult serve_rgpu_cu_launch(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                              unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                              unsigned int block_z, unsigned int shmem, CUstream stream,
                              int packed, size_t params_size, const void *params)
{
    struct launch L = { function, { grid_x, grid_y, grid_z }, { block_x, block_y, block_z },
                        shmem, stream, packed != 0, params_size, params };
    return launch(&L, NULL, 0);
}

CUresult serve_rgpu_cu_launch_ex(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                 unsigned int grid_z, unsigned int block_x,
                                 unsigned int block_y, unsigned int block_z, unsigned int shmem,
                                 CUstream stream, int packed,
                                 const struct rgpu_launch_attr *attrs, size_t nattrs,
                                 size_t params_size, const void *params)
{
    CUlaunchAttribute a[RGPU_LAUNCH_ATTRS_MAX];
    struct launch L = { function, { grid_x, grid_y, grid_z }, { block_x, block_y, block_z },
                        shmem, stream, packed != 0, params_size, params };
    switch (launch_attrs_take(attrs, nattrs, a)) {     /* it logs what it refuses */
    case LAUNCH_ATTRS_MALFORMED:
        return serve_transport(RGPU_EPROTO);
    case LAUNCH_ATTRS_BAD_EVENT:
        return CUDA_ERROR_INVALID_HANDLE;
    case LAUNCH_ATTRS_BAD_WINDOW:
        return CUDA_ERROR_INVALID_VALUE;
    case LAUNCH_ATTRS_OK:
        break;
    }
    return launch(&L, a, (unsigned)nattrs);
}

/* A name into the client's buffer (not NULL), cut at its size (the client
 * asks again with a larger one when it came back full). */
static CUresult name_into(char *name, size_t max_size, CUresult rc, const char *found)
{
    if (max_size)
        snprintf(name, max_size, "%s", rc == CUDA_SUCCESS && found ? found : "");
    return rc;
}

/* The codec checked the handles against the session's table by their
 * class (CUfunc_st, where a kernel is accepted too, and CUkern_st). */
CUresult serve_rgpu_cu_func_name(char *name, size_t max_size, CUfunction function)
{
    const char *found = NULL;
    if (!REAL(cuFuncGetName))
        return serve_transport(RGPU_ENOSYM);
    if (!guard_function_known((uint64_t)(uintptr_t)function))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = REAL(cuFuncGetName)(&found, function);
    return name_into(name, max_size, rc, found);
}

CUresult serve_rgpu_cu_kernel_name(char *name, size_t max_size, CUkernel kernel)
{
    const char *found = NULL;
    if (!REAL(cuKernelGetName))
        return serve_transport(RGPU_ENOSYM);
    if (!handles_contains(H_KERNEL, (uint64_t)(uintptr_t)kernel))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = REAL(cuKernelGetName)(&found, kernel);
    return name_into(name, max_size, rc, found);
}

/* ---- the potential block size, against the client's callback answers ---------------- */

/* The table of the program's callback answers for the call this thread
 * serves: the driver's callback takes the block size and nothing else. */
static _Thread_local const size_t *smem_table;
static _Thread_local size_t smem_count;
static _Thread_local int smem_missed;

static size_t CUDA_CB smem_of_block(int block_size)
{
    if (block_size >= 1 && (size_t)block_size <= smem_count)
        return smem_table[block_size - 1];
    smem_missed = 1;
    return 0;
}

CUresult serve_rgpu_cu_occupancy_block_size(int *min_grid_size, int *block_size,
                                            CUfunction func, const size_t *smem_by_block,
                                            size_t count, size_t dynamic_smem,
                                            int block_size_limit, unsigned int flags)
{
    if (!REAL(cuOccupancyMaxPotentialBlockSizeWithFlags))
        return serve_transport(RGPU_ENOSYM);
    if (count && !smem_by_block)
        return CUDA_ERROR_INVALID_VALUE;
    smem_table = smem_by_block;
    smem_count = count;
    smem_missed = 0;
    CUresult rc = REAL(cuOccupancyMaxPotentialBlockSizeWithFlags)(
        min_grid_size, block_size, func, count ? smem_of_block : NULL, dynamic_smem,
        block_size_limit, flags);
    smem_table = NULL;
    smem_count = 0;
    if (smem_missed) {
        rgpu_warn("cuOccupancyMaxPotentialBlockSize: the driver asked the shared-memory callback "
                  "about a block size past the %zu the client answered", count);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return rc;
}

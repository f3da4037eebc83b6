/* Driver-API launches, server side: parameter layouts, cuLaunchKernel,
 * cuLaunchKernelEx with launch attributes (and the cooperative launches,
 * which the client sends as such), and function and kernel names and the
 * potential block size (rgpu's own procedures, codegen/cuda_own.h;
 * client side: stubs/cuda_launch.c;
 * argument lists: common/rgpu_hand_procs.h). */
#include "rgpud.h"
#include "launch_attrs.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

static int bad_handle(struct hand_call *c, unsigned nouts, const char *what)
{
    return hand_refuse_handle(c, nouts, what, CUDA_ERROR_INVALID_HANDLE);
}

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

/* [function] -> [[[offset, size]...]] */
static int h_param_layout(struct hand_call *c)
{
    uint64_t func;
    struct layout *l = NULL;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &func));
    NEED(REAL(cuFuncGetParamInfo));
    /* An invented handle would reach the driver's lookup: refuse it. */
    int rc = guard_function_known(func) ? layout_for(func, &l) : CUDA_ERROR_INVALID_HANDLE;
    if (rc < 0)
        return rc;
    msgpack_pack_array(c->out, 1);
    msgpack_pack_array(c->out, l ? l->n : 0);
    for (unsigned i = 0; l && i < l->n; i++) {
        msgpack_pack_array(c->out, 2);
        msgpack_pack_uint32(c->out, l->off[i]);
        msgpack_pack_uint32(c->out, l->size[i]);
    }
    return rc;
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

/* The launch both procedures describe: v holds [function, gx, gy, gz, bx,
 * by, bz, shmem, stream, packed], params the argument bytes; without
 * attributes it is cuLaunchKernel's, with them cuLaunchKernelEx's. */
static int launch(struct hand_call *c, const uint64_t *v, const void *params, size_t n,
                  CUlaunchAttribute *attrs, unsigned nattrs)
{
    void *argv[512];
    size_t size = n;
    const void *packed_params = v[9] ? params_aligned(params, n) : NULL;
    PROTO_IF(v[9] && !packed_params);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)packed_params,
                      CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
    if (!handles_valid(H_STREAM, v[8]))
        return bad_handle(c, 0, "stream");
    /* The packed path names the function without asking its layout. */
    if (!guard_function_known(v[0]))
        return bad_handle(c, 0, "function");
    if (!v[9]) {        /* else the caller packed the buffer itself (`extra`) */
        struct layout *l = NULL;
        int rc = layout_for(v[0], &l);
        if (rc != CUDA_SUCCESS) {
            if (rc < 0)
                return rc;
            msgpack_pack_array(c->out, 0);
            return rc;
        }
        PROTO_IF(layout_argv(l->off, l->size, l->n, params, n, argv, 512));
    }
    void **kernel_params = v[9] ? NULL : argv, **packed = v[9] ? extra : NULL;
    if (!attrs) {
        NEED(REAL(cuLaunchKernel));
        msgpack_pack_array(c->out, 0);
        return REAL(cuLaunchKernel)((CUfunction)v[0], (unsigned)v[1], (unsigned)v[2],
                                    (unsigned)v[3], (unsigned)v[4], (unsigned)v[5],
                                    (unsigned)v[6], (unsigned)v[7], (CUstream)v[8],
                                    kernel_params, packed);
    }
    NEED(REAL(cuLaunchKernelEx));
    msgpack_pack_array(c->out, 0);
    CUlaunchConfig config = {
        (unsigned)v[1], (unsigned)v[2], (unsigned)v[3], (unsigned)v[4], (unsigned)v[5],
        (unsigned)v[6], (unsigned)v[7], (CUstream)v[8], attrs, nattrs,
    };
    int rc = REAL(cuLaunchKernelEx)(&config, (CUfunction)v[0], kernel_params, packed);
    if (rc != CUDA_SUCCESS)
        log_refused_launch(rc, &config, n);
    return rc;
}

/* [function, gx, gy, gz, bx, by, bz, shmem, stream, packed, bin params] */
static int h_launch(struct hand_call *c)
{
    uint64_t v[10];
    const void *params;
    size_t n;
    PROTO_IF(args_count(c, 11) || arg_bin(c, 10, &params, &n) || arg_u64s(c, 10, v));
    PROTO_IF(v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[3] > UINT32_MAX ||
             v[4] > UINT32_MAX || v[5] > UINT32_MAX || v[6] > UINT32_MAX || v[7] > UINT32_MAX);
    return launch(c, v, params, n, NULL, 0);
}

/* [function, gx, gy, gz, bx, by, bz, shmem, stream, packed, attrs, bin params] */
static int h_launch_ex(struct hand_call *c)
{
    uint64_t v[10];
    const void *params;
    size_t n;
    CUlaunchAttribute attrs[RGPU_LAUNCH_ATTRS_MAX];
    unsigned nattrs = 0;
    PROTO_IF(args_count(c, 12) || arg_bin(c, 11, &params, &n) || arg_u64s(c, 10, v) ||
             launch_attrs_arg(c, 10, attrs, &nattrs));
    PROTO_IF(v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[3] > UINT32_MAX ||
             v[4] > UINT32_MAX || v[5] > UINT32_MAX || v[6] > UINT32_MAX || v[7] > UINT32_MAX);
    switch (launch_attrs_check(attrs, nattrs)) {     /* it logs what it refuses */
    case LAUNCH_ATTRS_BAD_EVENT:
        msgpack_pack_array(c->out, 0);
        return CUDA_ERROR_INVALID_HANDLE;
    case LAUNCH_ATTRS_BAD_WINDOW:
        msgpack_pack_array(c->out, 0);
        return CUDA_ERROR_INVALID_VALUE;
    case LAUNCH_ATTRS_OK:
        break;
    }
    return launch(c, v, params, n, attrs, nattrs);
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

const struct hand_proc hand_cuda_launch_procs[] = {
    { "cuda", RGPU_H_CU_PARAM_LAYOUT, h_param_layout },
    { "cuda", RGPU_H_CU_LAUNCH, h_launch },
    { "cuda", RGPU_H_CU_LAUNCH_EX, h_launch_ex },
};
const int hand_cuda_launch_nprocs =
    sizeof hand_cuda_launch_procs / sizeof hand_cuda_launch_procs[0];

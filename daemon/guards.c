/* Guards around generated procedures whose arguments the driver does not
 * check well, beyond the handle checks every procedure gets
 * (owned_handles.c): those refuse a context the session never saw handed
 * out, or saw destroyed, before the real function runs (a destroyed or
 * invented context passed to cuCtxSetCurrent can crash the driver).
 * What is left here: the calls where NULL, which the handle check lets
 * through, is no context at all.  (Handles inside cuDNN's backend
 * attribute arrays are checked in cudnn_backend.c.) */
#include "rgpud.h"
#include "copy.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_log.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

/* argv[i] points at the decoded argument. */
static uint64_t val(void **argv, int i)
{
    return *(uint64_t *)argv[i];
}

/* Pushing or destroying "no context" is refused as the driver would. */
static int pre_ctx_arg0(void **argv)
{
    uint64_t ctx = val(argv, 0);
    return ctx && handles_contains(H_CONTEXT, ctx) ? 0 : CUDA_ERROR_INVALID_CONTEXT;
}

/* A context destroyed takes its events: the staging ring's copies in it
 * finish first (daemon/copy.c). */
static int pre_ctx_destroy(void **argv)
{
    int rc = pre_ctx_arg0(argv);
    if (rc == 0)
        copy_drain();
    return rc;
}

/* Output arrays that live in the server (the node list of
 * cudaGraphGetNodes, the capture's dependency and edge arrays) are refused
 * on the client, which sends NULL; they travel as plain values, so a raw
 * client could name any address for the runtime to write to.  Only NULL. */
static int pre_null_arg1(void **argv)
{
    return val(argv, 1) ? cudaErrorInvalidValue : 0;
}

static int pre_null_args45(void **argv)
{
    return val(argv, 4) || val(argv, 5) ? cudaErrorInvalidValue : 0;
}

/* A destroyed context takes its memory with it (daemon/owned.c); its
 * handle is forgotten by the generated handle bookkeeping. */
static void post_ctx_destroyed(void **argv, int status)
{
    (void)argv;
    if (status == CUDA_SUCCESS) {
        owned_clear();
        hand_cuda_layouts_retire();     /* its modules went with it */
    }
}

static const struct guard guards[] = {
    { "cudart", "cudaGraphGetNodes", pre_null_arg1, NULL },
    { "cudart", "cudaStreamGetCaptureInfo", pre_null_args45, NULL },
    { "cudart", "cudaStreamGetCaptureInfo_ptsz", pre_null_args45, NULL },
    { "cuda", "cuCtxPushCurrent_v2", pre_ctx_arg0, NULL },
    { "cuda", "cuCtxDestroy_v2", pre_ctx_destroy, post_ctx_destroyed },
};

const struct guard *guard_in(const struct guard *table, size_t n, const char *lib,
                             const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].lib, lib) == 0 && strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

const struct guard *guard_for(const char *lib, const char *name)
{
    const struct guard *g = GUARD_IN(guards, lib, name);
    if (!g)
        g = lt_guard_for(lib, name);
    if (!g)
        g = graph_guard_for(lib, name);
    if (!g)
        g = graph_host_guard_for(lib, name);
    if (!g)
        g = ipc_guard_for(lib, name);
    if (!g)
        g = nvml_guard_for(lib, name);
    if (!g)
        g = array_guard_for(lib, name);
    return g ? g : memguard_for(lib, name);
}

/* Functions and kernels the driver handed out: the only handles whose
 * parameter layout rgpud asks the driver for (rgpu_cu_param_layout). */
int guard_function_known(uint64_t func)
{
    return handles_contains(H_FUNCTION, func) || handles_contains(H_KERNEL, func);
}

/* Guards around generated procedures whose arguments the driver does not
 * check well, beyond the handle checks every procedure gets
 * (owned_handles.c): those refuse a context the session never saw handed
 * out, or saw destroyed, before the real function runs (a destroyed or
 * invented context passed to cuCtxSetCurrent can crash the driver, BRIEF
 * 4.4).  What is left here: the calls where NULL, which the handle check
 * lets through, is no context at all. */
#include "rgpud.h"
#include "owned_handles.h"

#include <cuda.h>
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

static const struct guard guards[] = {
    { "cuda", "cuCtxPushCurrent_v2", pre_ctx_arg0, NULL },
    { "cuda", "cuCtxDestroy_v2", pre_ctx_arg0, NULL },
};

const struct guard *guard_for(const char *lib, const char *name)
{
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++)
        if (strcmp(guards[i].lib, lib) == 0 && strcmp(guards[i].name, name) == 0)
            return &guards[i];
    return NULL;
}

/* Functions and kernels the driver handed out: the only handles whose
 * parameter layout rgpud asks the driver for (rgpu.cu_param_layout). */
int guard_function_known(uint64_t func)
{
    return handles_contains(H_FUNCTION, func) || handles_contains(H_KERNEL, func);
}

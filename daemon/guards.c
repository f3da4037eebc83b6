/* Guards around generated procedures whose arguments the driver does not
 * check well: a destroyed or invented context handle passed to
 * cuCtxSetCurrent can crash the driver (BRIEF 4.4).  The session records
 * every context it has seen created or reported by the driver, and refuses
 * the others before the real function runs. */
#include "rgpud.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *contexts;
static size_t ncontexts, cap;

static void ctx_add(uint64_t ctx)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncontexts; i++)
        if (contexts[i] == ctx)
            goto out;
    if (ncontexts == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        uint64_t *n = realloc(contexts, ncap * sizeof *n);
        if (!n)
            goto out;
        contexts = n;
        cap = ncap;
    }
    contexts[ncontexts++] = ctx;
out:
    pthread_mutex_unlock(&lock);
}

static void ctx_remove(uint64_t ctx)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncontexts; i++) {
        if (contexts[i] == ctx) {
            contexts[i] = contexts[--ncontexts];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

static int ctx_known(uint64_t ctx)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncontexts && !found; i++)
        found = contexts[i] == ctx;
    pthread_mutex_unlock(&lock);
    return found;
}

/* argv[i] points at the decoded argument; for outputs, at the pointer to
 * the buffer the real function wrote. */
static uint64_t val(void **argv, int i)
{
    return *(uint64_t *)argv[i];
}

static uint64_t out_ptr_value(void **argv, int i)
{
    const uint64_t *p = *(uint64_t **)argv[i];
    return p ? *p : 0;
}

/* A context argument must be NULL (where allowed) or one we know. */
static int pre_ctx_arg0_nullable(void **argv)
{
    uint64_t ctx = val(argv, 0);
    return !ctx || ctx_known(ctx) ? 0 : CUDA_ERROR_INVALID_CONTEXT;
}

static int pre_ctx_arg0(void **argv)
{
    uint64_t ctx = val(argv, 0);
    return ctx && ctx_known(ctx) ? 0 : CUDA_ERROR_INVALID_CONTEXT;
}

static void post_created_arg0(void **argv, int status)
{
    if (status == CUDA_SUCCESS)
        ctx_add(out_ptr_value(argv, 0));
}

static void post_destroyed_arg0(void **argv, int status)
{
    if (status == CUDA_SUCCESS)
        ctx_remove(val(argv, 0));
}

static void post_created_arg1(void **argv, int status)
{
    if (status == CUDA_SUCCESS)
        ctx_add(out_ptr_value(argv, 1));
}

static const struct guard guards[] = {
    { "cuda", "cuStreamGetCtx", NULL, post_created_arg1 },
    { "cuda", "cuStreamGetCtx_v2", NULL, post_created_arg1 },
    { "cuda", "cuCtxCreate_v4", NULL, post_created_arg0 },
    { "cuda", "cuDevicePrimaryCtxRetain", NULL, post_created_arg0 },
    { "cuda", "cuCtxGetCurrent", NULL, post_created_arg0 },
    { "cuda", "cuCtxPopCurrent_v2", NULL, post_created_arg0 },
    { "cuda", "cuCtxSetCurrent", pre_ctx_arg0_nullable, NULL },
    { "cuda", "cuCtxPushCurrent_v2", pre_ctx_arg0, NULL },
    { "cuda", "cuCtxDestroy_v2", pre_ctx_arg0, post_destroyed_arg0 },
};

const struct guard *guard_for(const char *lib, const char *name)
{
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++)
        if (strcmp(guards[i].lib, lib) == 0 && strcmp(guards[i].name, name) == 0)
            return &guards[i];
    return NULL;
}

void guard_note_context(uint64_t ctx)
{
    ctx_add(ctx);
}

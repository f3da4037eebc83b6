/* Guards around generated procedures whose arguments the driver does not
 * check well: a destroyed or invented context handle passed to
 * cuCtxSetCurrent can crash the driver (BRIEF 4.4).  The session records
 * every context it has seen created or reported by the driver, and refuses
 * the others before the real function runs. */
#include "rgpud.h"
#include "owned.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A set of handles the session has seen the driver hand out. */
struct handle_set {
    uint64_t *v;
    size_t n, cap;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle_set contexts, functions;

static void set_add(struct handle_set *s, uint64_t h)
{
    if (!h)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == h)
            goto out;
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 16;
        uint64_t *n = realloc(s->v, ncap * sizeof *n);
        if (!n)
            goto out;
        s->v = n;
        s->cap = ncap;
    }
    s->v[s->n++] = h;
out:
    pthread_mutex_unlock(&lock);
}

static void set_remove(struct handle_set *s, uint64_t h)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i] == h) {
            s->v[i] = s->v[--s->n];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

static int set_has(struct handle_set *s, uint64_t h)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < s->n && !found; i++)
        found = s->v[i] == h;
    pthread_mutex_unlock(&lock);
    return found;
}

static void ctx_add(uint64_t ctx) { set_add(&contexts, ctx); }
static void ctx_remove(uint64_t ctx) { set_remove(&contexts, ctx); }
static int ctx_known(uint64_t ctx) { return set_has(&contexts, ctx); }

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
    if (status == CUDA_SUCCESS) {
        ctx_remove(val(argv, 0));
        owned_clear();      /* its memory is gone (daemon/owned.c) */
    }
}

static void post_created_arg1(void **argv, int status)
{
    if (status == CUDA_SUCCESS)
        ctx_add(out_ptr_value(argv, 1));
}

/* Functions and kernels the driver handed out: the only handles whose
 * parameter layout rgpud asks the driver for (rgpu.cu_param_layout). */
static void post_function_arg0(void **argv, int status)
{
    if (status == CUDA_SUCCESS)
        set_add(&functions, out_ptr_value(argv, 0));
}

static const struct guard guards[] = {
    { "cuda", "cuModuleGetFunction", NULL, post_function_arg0 },
    { "cuda", "cuKernelGetFunction", NULL, post_function_arg0 },
    { "cuda", "cuLibraryGetKernel", NULL, post_function_arg0 },
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
    return memguard_for(lib, name);
}

int guard_function_known(uint64_t func)
{
    return set_has(&functions, func);
}

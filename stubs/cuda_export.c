/* cuGetExportTable: the driver's undocumented tables, implemented by rgpu
 * in terms of its own driver calls.
 *
 * A CUDA runtime linked statically (nvcc's default, and the one inside
 * cuFFT, cuRAND, cuSOLVER, cuSPARSE, NCCL, NVRTC and CuPy's modules) starts
 * by asking the driver for these tables, keyed by UUID; a table is an array
 * of words, the first holding its size in bytes for most tables, then
 * function pointers.  What each slot does was learned by logging a real
 * driver under real programs and from public reimplementations; the slots
 * no program was seen to call log their table and index and answer
 * CUDA_ERROR_NOT_SUPPORTED, so a runtime that needs one fails with a name
 * in the log instead of a crash.  A table rgpu does not know fails that one
 * call, also logged.  Where a program loads our libcudart.so.13 and the
 * other stubs dynamically, those stay in front (fewer, larger calls); the
 * tables are the road for everything linked statically.  Server side of
 * the one call that needs it: daemon/hand_cuda_export.c. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "cuda_export.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

typedef void (*slot_fn)(void);
#define SLOT(fn) ((slot_fn)(fn))

/* ---- slots nobody was seen to call ------------------------------------------------- */

static CUresult unknown_slot(const char *table, int index)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char logged[32][32];
    static int nlogged;
    char name[32];
    snprintf(name, sizeof name, "%s[%d]", table, index);
    pthread_mutex_lock(&lock);
    int seen = 0;
    for (int i = 0; i < nlogged; i++)
        seen |= strcmp(logged[i], name) == 0;
    if (!seen && nlogged < 32)
        snprintf(logged[nlogged++], sizeof logged[0], "%s", name);
    pthread_mutex_unlock(&lock);
    if (!seen)
        rgpu_warn("export table slot %s is not implemented by rgpu: the call fails with "
                  "CUDA_ERROR_NOT_SUPPORTED", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define UNKNOWN(table, index) \
    static CUresult unknown_##table##_##index(void) { return unknown_slot(#table, index); }

/* Ten unknown slots d0..d9 at once, and their table entries. */
#define UNKNOWN10(table, d) \
    UNKNOWN(table, d##0) UNKNOWN(table, d##1) UNKNOWN(table, d##2) UNKNOWN(table, d##3) \
    UNKNOWN(table, d##4) UNKNOWN(table, d##5) UNKNOWN(table, d##6) UNKNOWN(table, d##7) \
    UNKNOWN(table, d##8) UNKNOWN(table, d##9)
#define SLOTS10(table, d) \
    SLOT(unknown_##table##_##d##0), SLOT(unknown_##table##_##d##1), \
    SLOT(unknown_##table##_##d##2), SLOT(unknown_##table##_##d##3), \
    SLOT(unknown_##table##_##d##4), SLOT(unknown_##table##_##d##5), \
    SLOT(unknown_##table##_##d##6), SLOT(unknown_##table##_##d##7), \
    SLOT(unknown_##table##_##d##8), SLOT(unknown_##table##_##d##9)

UNKNOWN(cudart, 3) UNKNOWN(cudart, 4) UNKNOWN(cudart, 5) UNKNOWN(cudart, 9)
UNKNOWN(cudart, 11)
UNKNOWN(tools_tls, 1) UNKNOWN(tools_tls, 2)
UNKNOWN(tool_hooks, 1) UNKNOWN(tool_hooks, 3) UNKNOWN(tool_hooks, 4) UNKNOWN(tool_hooks, 5)
UNKNOWN(ctx_storage, 3)
UNKNOWN(integrity, 2)
UNKNOWN(ctx_checks, 1) UNKNOWN(ctx_checks, 4) UNKNOWN(ctx_checks, 5) UNKNOWN(ctx_checks, 6)
UNKNOWN(ctx_checks, 7) UNKNOWN(ctx_checks, 8) UNKNOWN(ctx_checks, 9) UNKNOWN(ctx_checks, 10)
UNKNOWN(ctx_checks, 11) UNKNOWN(ctx_checks, 12) UNKNOWN(ctx_checks, 13) UNKNOWN(ctx_checks, 14)

/* ---- the runtime's interface (6bd5fb6c): modules and primary contexts ------------- */

/* A fatbin wrapper ({magic, version, fatbin, ...}, what nvcc embeds) or a
 * fatbin container: cuModuleLoadData takes both. */
static CUresult module_from_wrapper(CUmodule *module, const void *wrapper)
{
    if (!module || !wrapper)
        return CUDA_ERROR_INVALID_VALUE;
    return cuModuleLoadData(module, wrapper);
}

/* The same with three more arguments, which the CUDA 13 runtimes pass as
 * zeros: anything else asks for something we do not know, so refuse. */
static CUresult module_from_wrapper_ext(CUmodule *module, const void *wrapper, void *a3,
                                        void *a4, unsigned a5)
{
    if (a3 || a4 || a5) {
        rgpu_warn("export table slot cudart[6] called with arguments rgpu does not know "
                  "(%p, %p, %u)", a3, a4, a5);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return module_from_wrapper(module, wrapper);
}

static CUresult module_from_fatbin_ext(const void *fatbin, CUmodule *module, void *a3,
                                       void *a4, unsigned a5)
{
    if (a3 || a4 || a5) {
        rgpu_warn("export table slot cudart[8] called with arguments rgpu does not know "
                  "(%p, %p, %u)", a3, a4, a5);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return module_from_wrapper(module, fatbin);
}

/* A device's primary context, without retaining or activating it: asked
 * from the server's driver once per device (the handle never changes). */
#define MAX_DEVICES 64
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t primary_ctx[MAX_DEVICES];

static CUresult ask_primary_context(CUdevice dev, uint64_t *ctx)
{
    CUcontext c = NULL;
    CUresult rc = rgpu_cu_primary_ctx(&c, dev);
    if (rc == CUDA_SUCCESS)
        *ctx = (uint64_t)(uintptr_t)c;
    return rc;
}

static CUresult primary_context(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    uint64_t ctx = 0;
    if (dev >= 0 && dev < MAX_DEVICES) {
        pthread_mutex_lock(&primary_lock);
        ctx = primary_ctx[dev];
        pthread_mutex_unlock(&primary_lock);
    }
    if (!ctx) {
        CUresult rc = ask_primary_context(dev, &ctx);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (dev >= 0 && dev < MAX_DEVICES) {
            pthread_mutex_lock(&primary_lock);
            primary_ctx[dev] = ctx;
            pthread_mutex_unlock(&primary_lock);
        }
    }
    *pctx = (CUcontext)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

static void cudart_noop(size_t unused)
{
    (void)unused;
}

/* Loads the PTX compiler and friends in NVIDIA's driver; the server's
 * driver loads its own when it needs them. */
static CUresult load_compilers(void)
{
    return CUDA_SUCCESS;
}

static const slot_fn cudart_table[13] = {
    (slot_fn)(uintptr_t)(13 * sizeof(void *)),
    SLOT(module_from_wrapper), SLOT(primary_context), SLOT(unknown_cudart_3),
    SLOT(unknown_cudart_4), SLOT(unknown_cudart_5), SLOT(module_from_wrapper_ext),
    SLOT(cudart_noop), SLOT(module_from_fatbin_ext), SLOT(unknown_cudart_9),
    NULL,               /* a data word, null in NVIDIA's driver too */
    SLOT(unknown_cudart_11), SLOT(load_compilers),
};

/* ---- tools (a094798c, 42d85a81): where profilers' callbacks would hook in ----------- */

/* Zeroed buffers the runtime consults for tool callbacks: no tool is
 * attached on the client. */
static uint32_t hooks_a[1024], hooks_b[16];

static void hooks_buffer_a(void **p, size_t *n)
{
    if (p)
        *p = hooks_a;
    if (n)
        *n = sizeof hooks_a / sizeof hooks_a[0];
}

static void hooks_buffer_b(void **p, size_t *n)
{
    if (p)
        *p = hooks_b;
    if (n)
        *n = 14;
}

static const slot_fn tool_hooks_table[7] = {
    (slot_fn)(uintptr_t)(7 * sizeof(void *)),
    SLOT(unknown_tool_hooks_1), SLOT(hooks_buffer_a), SLOT(unknown_tool_hooks_3),
    SLOT(unknown_tool_hooks_4), SLOT(unknown_tool_hooks_5), SLOT(hooks_buffer_b),
};

static const slot_fn tools_tls_table[3] = {
    (slot_fn)(uintptr_t)(3 * sizeof(void *)),
    SLOT(unknown_tools_tls_1), SLOT(unknown_tools_tls_2),
};

/* ---- context-local storage (c693336e): the runtime's state per context ------------ */

typedef void (*cls_dtor)(CUcontext ctx, void *key, void *value);

struct cls_entry {
    CUcontext ctx;
    void *key, *value;
    cls_dtor dtor;
    struct cls_entry *next;
};

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry *cls_entries;

/* NULL names the calling thread's current context. */
static CUresult cls_context(CUcontext *ctx)
{
    if (*ctx)
        return CUDA_SUCCESS;
    CUresult rc = cuCtxGetCurrent(ctx);
    if (rc == CUDA_SUCCESS && !*ctx)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    return rc;
}

static struct cls_entry **cls_find(CUcontext ctx, void *key)
{
    struct cls_entry **e = &cls_entries;
    while (*e && ((*e)->ctx != ctx || (*e)->key != key))
        e = &(*e)->next;
    return e;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor dtor)
{
    CUresult rc = cls_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&cls_lock);
    struct cls_entry **e = cls_find(ctx, key);
    if (!*e) {
        *e = calloc(1, sizeof **e);
        if (!*e)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (*e) {
        (*e)->ctx = ctx;
        (*e)->key = key;
        (*e)->value = value;
        (*e)->dtor = dtor;
    }
    pthread_mutex_unlock(&cls_lock);
    return rc;
}

static CUresult cls_delete(CUcontext ctx, void *key)
{
    CUresult rc = cls_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&cls_lock);
    struct cls_entry **e = cls_find(ctx, key), *gone = *e;
    if (gone)
        *e = gone->next;
    pthread_mutex_unlock(&cls_lock);
    free(gone);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cls_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&cls_lock);
    struct cls_entry *e = *cls_find(ctx, key);
    if (e)
        *value = e->value;
    pthread_mutex_unlock(&cls_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* No size word: the table starts with its functions. */
static const slot_fn ctx_storage_table[4] = {
    SLOT(cls_put), SLOT(cls_delete), SLOT(cls_get), SLOT(unknown_ctx_storage_3),
};

void rgpu_cls_context_ending(CUcontext ctx)
{
    for (;;) {
        pthread_mutex_lock(&cls_lock);
        struct cls_entry **e = &cls_entries;
        while (*e && (*e)->ctx != ctx)
            e = &(*e)->next;
        struct cls_entry *gone = *e;
        if (gone)
            *e = gone->next;
        pthread_mutex_unlock(&cls_lock);
        if (!gone)
            return;
        /* Outside the lock: the runtime's destructor calls the driver. */
        if (gone->dtor)
            gone->dtor(gone->ctx, gone->key, gone->value);
        free(gone);
    }
}

void rgpu_cls_primary_ending(CUdevice dev)
{
    uint64_t ctx = 0;
    if (dev >= 0 && dev < MAX_DEVICES) {
        pthread_mutex_lock(&primary_lock);
        ctx = primary_ctx[dev];
        pthread_mutex_unlock(&primary_lock);
    }
    if (ctx)
        rgpu_cls_context_ending((CUcontext)(uintptr_t)ctx);
}

/* ---- checks (263e8860, d4082055) ------------------------------------------------------ */

/* Asked about a context: no flag of what it reports is ever set for an
 * ordinary context. */
static CUresult context_check(CUcontext ctx, uint32_t *flags, const void **detail)
{
    (void)ctx; (void)detail;
    if (flags)
        *flags = 0;
    return CUDA_SUCCESS;
}

static uint32_t context_check_3(void)
{
    return 0;
}

static const slot_fn ctx_checks_table[15] = {
    (slot_fn)(uintptr_t)(15 * sizeof(void *)),
    SLOT(unknown_ctx_checks_1), SLOT(context_check), SLOT(context_check_3),
    SLOT(unknown_ctx_checks_4), SLOT(unknown_ctx_checks_5), SLOT(unknown_ctx_checks_6),
    SLOT(unknown_ctx_checks_7), SLOT(unknown_ctx_checks_8), SLOT(unknown_ctx_checks_9),
    SLOT(unknown_ctx_checks_10), SLOT(unknown_ctx_checks_11), SLOT(unknown_ctx_checks_12),
    SLOT(unknown_ctx_checks_13), SLOT(unknown_ctx_checks_14),
};

static CUresult integrity_check(unsigned runtime_version, uint64_t unix_seconds,
                                uint64_t out[2]);

static const slot_fn integrity_table[3] = {
    (slot_fn)(uintptr_t)(3 * sizeof(void *)),
    SLOT(integrity_check), SLOT(unknown_integrity_2),
};

static CUresult integrity_check(unsigned runtime_version, uint64_t unix_seconds,
                                uint64_t out[2])
{
    const struct rgpu_integrity_tables t = {
        .cudart_table = cudart_table,
        .integrity_table = integrity_table,
        .check_fn = (const void *)integrity_table[1],
    };
    return rgpu_integrity_answer(runtime_version, unix_seconds, &t, out);
}

/* ---- tools context (21318c60): asked by cuFFT and by PyTorch ------------------------ */

UNKNOWN(ctx_tools, 1) UNKNOWN(ctx_tools, 2) UNKNOWN(ctx_tools, 3) UNKNOWN(ctx_tools, 5)
UNKNOWN(ctx_tools, 6) UNKNOWN(ctx_tools, 7) UNKNOWN(ctx_tools, 8) UNKNOWN(ctx_tools, 9)
UNKNOWN10(ctx_tools, 1) UNKNOWN10(ctx_tools, 2) UNKNOWN10(ctx_tools, 3)
UNKNOWN10(ctx_tools, 4) UNKNOWN10(ctx_tools, 5) UNKNOWN10(ctx_tools, 6)
UNKNOWN10(ctx_tools, 7) UNKNOWN10(ctx_tools, 8)
UNKNOWN(ctx_tools, 90) UNKNOWN(ctx_tools, 91) UNKNOWN(ctx_tools, 92)

/* cuFFT asks this of the current context before it plans, with an output
 * word and four more arguments (a constant, pointers into cuFFT, zero).
 * NVIDIA's driver answered 1 and success for every context seen (logged
 * under cuFFT and PyTorch on an H200); NULL is no context. */
static CUresult context_query_4(CUcontext ctx, uint64_t *answer)
{
    if (!answer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    *answer = 1;
    return CUDA_SUCCESS;
}

static const slot_fn ctx_tools_table[93] = {
    (slot_fn)(uintptr_t)(93 * sizeof(void *)),
    SLOT(unknown_ctx_tools_1), SLOT(unknown_ctx_tools_2), SLOT(unknown_ctx_tools_3),
    SLOT(context_query_4), SLOT(unknown_ctx_tools_5), SLOT(unknown_ctx_tools_6),
    SLOT(unknown_ctx_tools_7), SLOT(unknown_ctx_tools_8), SLOT(unknown_ctx_tools_9),
    SLOTS10(ctx_tools, 1), SLOTS10(ctx_tools, 2), SLOTS10(ctx_tools, 3), SLOTS10(ctx_tools, 4),
    SLOTS10(ctx_tools, 5), SLOTS10(ctx_tools, 6), SLOTS10(ctx_tools, 7), SLOTS10(ctx_tools, 8),
    SLOT(unknown_ctx_tools_90), SLOT(unknown_ctx_tools_91), SLOT(unknown_ctx_tools_92),
};

/* ---- tools module (6e163fbe): asked by cuFFT ------------------------------------------ */

UNKNOWN(tools_module, 1) UNKNOWN(tools_module, 2) UNKNOWN(tools_module, 3)
UNKNOWN(tools_module, 4) UNKNOWN(tools_module, 5) UNKNOWN(tools_module, 6)
UNKNOWN(tools_module, 8) UNKNOWN(tools_module, 9)
UNKNOWN10(tools_module, 1) UNKNOWN10(tools_module, 2) UNKNOWN10(tools_module, 3)
UNKNOWN10(tools_module, 4) UNKNOWN10(tools_module, 5) UNKNOWN10(tools_module, 6)
UNKNOWN10(tools_module, 7) UNKNOWN10(tools_module, 8)
UNKNOWN(tools_module, 90) UNKNOWN(tools_module, 91) UNKNOWN(tools_module, 92)
UNKNOWN(tools_module, 93) UNKNOWN(tools_module, 94) UNKNOWN(tools_module, 95)
UNKNOWN(tools_module, 96) UNKNOWN(tools_module, 97) UNKNOWN(tools_module, 98)

typedef void (*function_visitor)(void *user, CUfunction f, void *unused);

/* Each function of a module, handed to the caller's visitor; answers how
 * many there were.  cuFFT loads each of its kernels as a module of its own
 * and takes the kernel's CUfunction so, then uses it with the public calls
 * (cuFuncGetAttribute, cuLaunchKernel): logged under cuFFT on an H200,
 * where NVIDIA's driver answered 1 for such a module.  The current context,
 * the module again and a pointer of cuFFT's come along; they change
 * nothing here.  0 on any failure: no function was visited. */
static unsigned module_functions_each(CUcontext ctx, CUmodule mod, function_visitor visit,
                                      void *user)
{
    unsigned count = 0;
    (void)ctx;
    if (!mod || !visit || cuModuleGetFunctionCount(&count, mod) != CUDA_SUCCESS || !count)
        return 0;
    CUfunction *fns = calloc(count, sizeof *fns);
    if (!fns)
        return 0;
    if (cuModuleEnumerateFunctions(fns, count, mod) != CUDA_SUCCESS) {
        free(fns);
        return 0;
    }
    for (unsigned i = 0; i < count; i++)
        visit(user, fns[i], NULL);
    free(fns);
    return count;
}

static const slot_fn tools_module_table[99] = {
    (slot_fn)(uintptr_t)(99 * sizeof(void *)),
    SLOT(unknown_tools_module_1), SLOT(unknown_tools_module_2), SLOT(unknown_tools_module_3),
    SLOT(unknown_tools_module_4), SLOT(unknown_tools_module_5), SLOT(unknown_tools_module_6),
    SLOT(module_functions_each), SLOT(unknown_tools_module_8), SLOT(unknown_tools_module_9),
    SLOTS10(tools_module, 1), SLOTS10(tools_module, 2), SLOTS10(tools_module, 3),
    SLOTS10(tools_module, 4), SLOTS10(tools_module, 5), SLOTS10(tools_module, 6),
    SLOTS10(tools_module, 7), SLOTS10(tools_module, 8),
    SLOT(unknown_tools_module_90), SLOT(unknown_tools_module_91), SLOT(unknown_tools_module_92),
    SLOT(unknown_tools_module_93), SLOT(unknown_tools_module_94), SLOT(unknown_tools_module_95),
    SLOT(unknown_tools_module_96), SLOT(unknown_tools_module_97), SLOT(unknown_tools_module_98),
};

/* ---- cuGetExportTable ------------------------------------------------------------------ */

struct export_table {
    uint8_t id[16];
    const char *name;
    const void *table;      /* NULL: known, and not implemented */
};

#define UUID(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p) \
    { 0x##a, 0x##b, 0x##c, 0x##d, 0x##e, 0x##f, 0x##g, 0x##h, \
      0x##i, 0x##j, 0x##k, 0x##l, 0x##m, 0x##n, 0x##o, 0x##p }

static const struct export_table export_tables[] = {
    { UUID(6b,d5,fb,6c,5b,f4,e7,4a,89,87,d9,39,12,fd,9d,f9), "runtime interface",
      cudart_table },
    { UUID(42,d8,5a,81,23,f6,cb,47,82,98,f6,e7,8a,3a,ec,dc), "tools TLS", tools_tls_table },
    { UUID(a0,94,79,8c,2e,74,2e,74,93,f2,08,00,20,0c,0a,66), "tools callback hooks",
      tool_hooks_table },
    { UUID(c6,93,33,6e,11,21,df,11,a8,c3,68,f3,55,d8,95,93), "context-local storage",
      ctx_storage_table },
    { UUID(d4,08,20,55,bd,e6,70,4b,8d,34,ba,12,3c,66,e1,f2), "integrity check",
      integrity_table },
    { UUID(26,3e,88,60,7c,d2,61,43,92,f6,bb,d5,00,6d,fa,7e), "context checks",
      ctx_checks_table },
    { UUID(21,31,8c,60,97,14,32,48,8c,a6,41,ff,73,24,c8,f2), "tools context",
      ctx_tools_table },
    { UUID(6e,16,3f,be,b9,58,44,4d,83,5c,e1,82,af,f1,99,1e), "tools module",
      tools_module_table },
    /* Asked by PyTorch's libraries (before any context, and with compiler
     * options), which go on without them; 69a28e9f once by JAX too.  No
     * public reimplementation names either; the log line names the library
     * that asks. */
    { UUID(69,a2,8e,9f,24,49,8b,47,b0,30,c5,da,33,0e,a4,e9), "unnamed (69a28e9f)", NULL },
    { UUID(da,91,51,d3,3a,e6,cc,41,a5,c0,4f,26,d5,33,e3,28), "unnamed (da9151d3)", NULL },
    /* Asked by every runtime, which goes on without it. */
    { UUID(f8,cf,f9,51,21,46,8b,4e,b9,e2,fb,46,9e,7c,0d,d9), "unnamed (f8cff951)", NULL },
};

/* The file of the library whose code is at pc, for the log: which of a
 * process's libraries asked for a table is what tells its use. */
static const char *library_at(const void *pc)
{
    Dl_info info;
    return pc && dladdr(pc, &info) && info.dli_fname ? info.dli_fname : "?";
}

static void log_missing_table(const CUuuid *id, const char *name, const void *caller)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint8_t logged[16][16];
    static int nlogged;
    pthread_mutex_lock(&lock);
    int seen = 0;
    for (int i = 0; i < nlogged; i++)
        seen |= memcmp(logged[i], id->bytes, 16) == 0;
    if (!seen && nlogged < 16)
        memcpy(logged[nlogged++], id->bytes, 16);
    pthread_mutex_unlock(&lock);
    if (seen)
        return;
    const uint8_t *b = (const uint8_t *)id->bytes;
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    if (name)
        rgpu_info("export table %s (%s), asked by %s, is not implemented by rgpu", hex, name,
                  library_at(caller));
    else
        rgpu_warn("export table %s, asked by %s, is not implemented by rgpu: cuGetExportTable "
                  "fails for it with CUDA_ERROR_NOT_SUPPORTED", hex, library_at(caller));
}

#undef cuGetExportTable
RGPU_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof export_tables / sizeof export_tables[0]; i++) {
        const struct export_table *t = &export_tables[i];
        if (memcmp(t->id, pExportTableId->bytes, 16) != 0)
            continue;
        if (!t->table)
            break;
        *ppExportTable = t->table;
        return CUDA_SUCCESS;
    }
    const char *name = NULL;
    for (size_t i = 0; i < sizeof export_tables / sizeof export_tables[0]; i++)
        if (memcmp(export_tables[i].id, pExportTableId->bytes, 16) == 0)
            name = export_tables[i].name;
    log_missing_table(pExportTableId, name, __builtin_return_address(0));
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

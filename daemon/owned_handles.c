/* The library handles a session has seen handed out: one table keyed by
 * (class, value) (common/rgpu_handle_table.h), which is a table per class
 * in one allocation; every lookup is a few loads under an uncontended lock
 * (see docs/security.md for the cost). */
#include "owned_handles.h"
#include "rgpu_handle_table.h"
#include "rgpu_log.h"

#include <string.h>

uint32_t H_CONTEXT, H_STREAM, H_EVENT, H_MODULE, H_FUNCTION, H_LIBRARY, H_KERNEL, H_GRAPH,
    H_GRAPH_EXEC, H_MEMPOOL, H_CUBLASLT, H_CUBLASLT_MATMUL_DESC, H_CUBLASLT_MATRIX_LAYOUT,
    H_CUBLASLT_PREFERENCE, H_CUBLASLT_TRANSFORM_DESC, H_CUDNN, H_CUBLAS;

/* The class names are those the generator derives from the headers: the
 * record a handle type points at. */
__attribute__((constructor)) static void classes_init(void)
{
    H_CONTEXT = rgpu_handle_class("CUctx_st");
    H_STREAM = rgpu_handle_class("CUstream_st");
    H_EVENT = rgpu_handle_class("CUevent_st");
    H_MODULE = rgpu_handle_class("CUmod_st");
    H_FUNCTION = rgpu_handle_class("CUfunc_st");
    H_LIBRARY = rgpu_handle_class("CUlib_st");
    H_KERNEL = rgpu_handle_class("CUkern_st");
    H_GRAPH = rgpu_handle_class("CUgraph_st");
    H_GRAPH_EXEC = rgpu_handle_class("CUgraphExec_st");
    H_MEMPOOL = rgpu_handle_class("CUmemPoolHandle_st");
    H_CUBLASLT = rgpu_handle_class("cublasLtContext");
    H_CUBLASLT_MATMUL_DESC = rgpu_handle_class("cublasLtMatmulDescOpaque_t");
    H_CUBLASLT_MATRIX_LAYOUT = rgpu_handle_class("cublasLtMatrixLayoutOpaque_t");
    H_CUBLASLT_PREFERENCE = rgpu_handle_class("cublasLtMatmulPreferenceOpaque_t");
    H_CUBLASLT_TRANSFORM_DESC = rgpu_handle_class("cublasLtMatrixTransformDescOpaque_t");
    H_CUDNN = rgpu_handle_class("cudnnContext");
    H_CUBLAS = rgpu_handle_class("cublasContext");
}

static struct rgpu_handle_table table = RGPU_HANDLE_TABLE_INIT(rgpu_handle_shared);

void handles_add(uint32_t cls, uint64_t h)
{
    if (rgpu_htab_add(&table, cls, h, 0) < 0)
        rgpu_error("out of memory recording a handle: it will be refused");
}

void handles_remove(uint32_t cls, uint64_t h)
{
    rgpu_htab_remove(&table, cls, h);
}

int handles_contains(uint32_t cls, uint64_t h)
{
    return rgpu_htab_get(&table, cls, h, NULL);
}

unsigned long handles_count(void)
{
    return (unsigned long)rgpu_htab_count(&table);
}

/* NULL is each API's own business (the default stream, "no context", or an
 * error the library returns itself). */
int handles_valid(uint32_t cls, uint64_t h)
{
    uint32_t alias = rgpu_handle_alias(cls);
    return !h || rgpu_handle_default_stream(cls, h) || handles_contains(cls, h) ||
           (alias && handles_contains(alias, h));
}

int handles_check(uint32_t cls, uint64_t h, int status)
{
    if (handles_valid(cls, h))
        return 0;
    rgpu_warn("refused a handle the session never handed out: 0x%llx", (unsigned long long)h);
    return status;
}

/* ---- named handles ------------------------------------------------------------ */

static struct rgpu_handle_table named = RGPU_HANDLE_TABLE_INIT(NULL);

int named_add(uint32_t cls, uint64_t name, uint64_t real, uint32_t info)
{
    if (rgpu_htab_count(&named) >= NAMED_MAX)
        return -1;
    return rgpu_htab_insert(&named, cls, name, real, info);
}

int named_find(uint32_t cls, uint64_t name, uint64_t *real, uint32_t *info)
{
    return rgpu_htab_find(&named, cls, name, real, info);
}

int named_set_info(uint32_t cls, uint64_t name, uint32_t info)
{
    return rgpu_htab_set_info(&named, cls, name, info);
}

int named_take(uint32_t cls, uint64_t name, uint64_t *real, uint32_t *info)
{
    return rgpu_htab_take(&named, cls, name, real, info);
}

/* ---- generated procedures ------------------------------------------------- */

static int is_in_buffer(uint8_t kind)
{
    return kind == RGPU_IN || kind == RGPU_INOUT || kind == RGPU_IN_BUF ||
           kind == RGPU_INOUT_BUF;
}

static int is_out_buffer(uint8_t kind)
{
    return kind == RGPU_OUT || kind == RGPU_INOUT || kind == RGPU_OUT_BUF ||
           kind == RGPU_INOUT_BUF;
}

/* The handles inside host buffer parameter i: its bytes as 8-byte values. */
static const uint64_t *buffer_handles(const struct rgpu_proc *proc,
                                      const struct rgpu_call_frame *f, unsigned i, size_t *n)
{
    *n = rgpu_frame_bytes(proc, f, i) / sizeof(uint64_t);
    return (const uint64_t *)(uintptr_t)f->slot[i];
}

int handles_check_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                       const struct rgpu_call_frame *f)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        int bad = 0;
        if (!prm->handle_class)
            continue;
        if (prm->kind == RGPU_HANDLE) {
            bad = !handles_valid(prm->handle_class, f->slot[i]);
        } else if (is_in_buffer(prm->kind)) {
            size_t n;
            const uint64_t *v = buffer_handles(proc, f, i, &n);
            for (size_t k = 0; k < n && !bad; k++)
                bad = !handles_valid(prm->handle_class, v[k]);
        }
        if (bad) {
            rgpu_warn("%s: refused %s, a handle the session never handed out", proc->name,
                      prm->name);
            return prm->handle_status ? prm->handle_status : lib->invalid_handle;
        }
    }
    return 0;
}

uint64_t handles_before_call(const struct rgpu_proc *proc, const struct rgpu_call_frame *f)
{
    uint64_t forgotten = 0;
    for (unsigned i = 0; i < proc->nparams && i < 64; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (prm->handle_class && prm->kind == RGPU_HANDLE &&
            (prm->handle_flags & RGPU_HANDLE_DESTROYS) &&
            handles_contains(prm->handle_class, f->slot[i])) {
            handles_remove(prm->handle_class, f->slot[i]);
            forgotten |= 1ull << i;
        }
    }
    return forgotten;
}

void handles_after_call(const struct rgpu_proc *proc, const struct rgpu_call_frame *f,
                        int status, uint64_t forgotten)
{
    if (status != 0) {
        for (unsigned i = 0; i < proc->nparams && i < 64; i++)
            if (forgotten & (1ull << i))
                handles_add(proc->params[i].handle_class, f->slot[i]);
        return;
    }
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (!prm->handle_class)
            continue;
        if (prm->kind == RGPU_HANDLE && (prm->handle_flags & RGPU_HANDLE_DESTROYS)) {
            continue;       /* forgotten before the call */
        } else if (is_out_buffer(prm->kind)) {
            size_t n;
            const uint64_t *v = buffer_handles(proc, f, i, &n);
            for (size_t k = 0; k < n; k++)
                handles_add(prm->handle_class, v[k]);
        }
    }
}

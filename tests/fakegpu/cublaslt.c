// Fake libcublasLt.so.13: handles, the three descriptor kinds with their
// attributes, heuristics that offer one fake algorithm, and cublasLtMatmul
// for real types with the DEFAULT, RELU, BIAS and RELU_BIAS epilogues, on
// the CPU over the fake GPU's device memory (blas.h says how).
//
// Descriptor attributes are stored by id as bytes.  Those cuBLASLt
// documents have their documented size and default and must be set and
// read with exactly that size, as cuBLASLt insists; others are stored with
// whatever size (up to 8 bytes) they are first set with.
#include "blas.h"

#include <cublasLt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// What cublasLtMatmulAlgoGetHeuristic hands out in algo.data[0] ("fakealgo"
// in ASCII) and cublasLtMatmul expects back: a mangled algo is refused.
#define FAKE_ALGO 0x6f676c61656b6166ull

#define MAX_ATTR 40

struct attrs {
    uint8_t size[MAX_ATTR];     // 0: never set and not documented
    uint8_t fixed[MAX_ATTR];    // documented: the size must match
    uint64_t val[MAX_ATTR];     // the value's bytes, from offset 0
};

struct attr_def {
    uint8_t id, size;
    int64_t value;              // default, truncated to size (little endian)
};

// ---- Logging: API trace (mask bit 16, level 5) logs each matmul ---------------------------

static cublasLtLoggerCallback_t log_callback;
static int log_mask, log_disabled;

static void log_api(const char *function, const char *message)
{
    if (log_callback && (log_mask & 16) && !log_disabled)
        log_callback(5, function, message);
}

cublasStatus_t CUBLASWINAPI cublasLtLoggerSetCallback(cublasLtLoggerCallback_t callback)
{
    log_callback = callback;
    return CUBLAS_STATUS_SUCCESS;
}

// As cuBLASLt does, the setters log themselves under the old settings.
cublasStatus_t CUBLASWINAPI cublasLtLoggerSetMask(int mask)
{
    log_api("cublasLtLoggerSetMask", "new mask");
    log_mask = mask;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtLoggerSetLevel(int level)
{
    if (level < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    log_api("cublasLtLoggerSetLevel", "new level");
    log_mask = (1 << (level < 5 ? level : 5)) - 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtLoggerSetFile(FILE *file)
{
    (void)file;                         // the fake writes no files
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtLoggerForceDisable(void)
{
    log_disabled = 1;
    return CUBLAS_STATUS_SUCCESS;
}

struct cublasLtContext {
    CUdevice device;            // current at cublasLtCreate: the handle's (blas.h)
};

static void attrs_init(struct attrs *a, const struct attr_def *defs, size_t n)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < n; i++) {
        a->size[defs[i].id] = defs[i].size;
        a->fixed[defs[i].id] = 1;
        memcpy(&a->val[defs[i].id], &defs[i].value, defs[i].size);
    }
}

static cublasStatus_t attr_set(struct attrs *a, int id, const void *buf,
                               size_t size)
{
    if (!buf || id < 0 || id >= MAX_ATTR)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (a->fixed[id] ? size != a->size[id] : size == 0 || size > 8)
        return CUBLAS_STATUS_INVALID_VALUE;
    a->val[id] = 0;
    memcpy(&a->val[id], buf, size);
    a->size[id] = (uint8_t)size;
    return CUBLAS_STATUS_SUCCESS;
}

// As cuBLASLt: size 0 asks for the size needed in *written.
static cublasStatus_t attr_get(const struct attrs *a, int id, void *buf,
                               size_t size, size_t *written)
{
    if (id < 0 || id >= MAX_ATTR || !a->size[id])
        return CUBLAS_STATUS_INVALID_VALUE;
    if (size == 0) {
        if (!written)
            return CUBLAS_STATUS_INVALID_VALUE;
        *written = a->size[id];
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != a->size[id])
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &a->val[id], size);
    if (written)
        *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

// An attribute as a signed integer of its size (pointers come out whole).
static int64_t attr_int(const struct attrs *a, int id)
{
    switch (a->size[id]) {
    case 1: { int8_t v; memcpy(&v, &a->val[id], 1); return v; }
    case 2: { int16_t v; memcpy(&v, &a->val[id], 2); return v; }
    case 4: { int32_t v; memcpy(&v, &a->val[id], 4); return v; }
    default: return (int64_t)a->val[id];
    }
}

// Creates a descriptor of one of the three kinds.
static cublasStatus_t create(void **out, enum fgb_kind kind,
                             const struct attr_def *defs, size_t n)
{
    struct attrs *a;

    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    a = malloc(sizeof *a);
    if (a)
        attrs_init(a, defs, n);
    if (!a || fgb_reg_add(a, kind) < 0) {
        free(a);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *out = a;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t destroy(void *p, enum fgb_kind kind)
{
    if (!p)
        return CUBLAS_STATUS_SUCCESS;   // destroying NULL is allowed
    if (!fgb_reg_has(p, kind))
        return CUBLAS_STATUS_INVALID_VALUE;
    fgb_reg_del(p);
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

static struct attrs *lookup(const void *p, enum fgb_kind kind)
{
    return fgb_reg_has(p, kind) ? (struct attrs *)p : NULL;
}

// ---- Handle and version -------------------------------------------------------------------

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *handle)
{
    struct cublasLtContext *h;
    cublasStatus_t r;

    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    r = fgb_init();
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    h = calloc(1, sizeof *h);
    if (!h || fgb_reg_add(h, FGB_LT) < 0) {
        free(h);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    h->device = fakegpu_current_device();
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h)
{
    if (!fgb_reg_has(h, FGB_LT))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    fgb_reg_del(h);
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

size_t CUBLASWINAPI cublasLtGetVersion(void)
{
    return CUBLAS_VERSION;              // cuBLASLt ships with cuBLAS, same number
}

// ---- Matmul descriptors -------------------------------------------------------------------

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                     cublasComputeType_t compute,
                                                     cudaDataType_t scale)
{
    const struct attr_def defs[] = {
        { CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 4, compute },
        { CUBLASLT_MATMUL_DESC_SCALE_TYPE, 4, scale },
        { CUBLASLT_MATMUL_DESC_POINTER_MODE, 4, CUBLASLT_POINTER_MODE_HOST },
        { CUBLASLT_MATMUL_DESC_TRANSA, 4, CUBLAS_OP_N },
        { CUBLASLT_MATMUL_DESC_TRANSB, 4, CUBLAS_OP_N },
        { CUBLASLT_MATMUL_DESC_TRANSC, 4, CUBLAS_OP_N },
        { CUBLASLT_MATMUL_DESC_FILL_MODE, 4, CUBLAS_FILL_MODE_FULL },
        { CUBLASLT_MATMUL_DESC_EPILOGUE, 4, CUBLASLT_EPILOGUE_DEFAULT },
        { CUBLASLT_MATMUL_DESC_BIAS_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 8, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 8, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, 8, 0 },
        { CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, 8, 0 },
        { CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 4, 0 },
        { CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, 4, -1 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_FAST_ACCUM, 1, 0 },
        { CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 4, -1 },
        { CUBLASLT_MATMUL_DESC_A_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_B_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_C_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_D_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, 8, 0 },
        { CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, 4, 0 },
        { CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, 8, 0 },
    };

    return create((void **)desc, FGB_LT_DESC, defs, sizeof defs / sizeof defs[0]);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    return destroy(desc, FGB_LT_DESC);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
    const void *buf, size_t size)
{
    struct attrs *a = lookup(desc, FGB_LT_DESC);

    return a ? attr_set(a, attr, buf, size) : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(
    cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void *buf,
    size_t size, size_t *written)
{
    struct attrs *a = lookup(desc, FGB_LT_DESC);

    return a ? attr_get(a, attr, buf, size, written) : CUBLAS_STATUS_INVALID_VALUE;
}

// ---- Matrix layouts -----------------------------------------------------------------------

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(
    cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
    uint64_t cols, int64_t ld)
{
    const struct attr_def defs[] = {
        { CUBLASLT_MATRIX_LAYOUT_TYPE, 4, type },
        { CUBLASLT_MATRIX_LAYOUT_ORDER, 4, CUBLASLT_ORDER_COL },
        { CUBLASLT_MATRIX_LAYOUT_ROWS, 8, (int64_t)rows },
        { CUBLASLT_MATRIX_LAYOUT_COLS, 8, (int64_t)cols },
        { CUBLASLT_MATRIX_LAYOUT_LD, 8, ld },
        { CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 4, 1 },
        { CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8, 0 },
        { CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, 8, 0 },
        { CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, 4, CUBLASLT_BATCH_MODE_STRIDED },
    };

    return create((void **)layout, FGB_LT_LAYOUT, defs, sizeof defs / sizeof defs[0]);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
    return destroy(layout, FGB_LT_LAYOUT);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
    const void *buf, size_t size)
{
    struct attrs *a = lookup(layout, FGB_LT_LAYOUT);

    return a ? attr_set(a, attr, buf, size) : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(
    cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
    void *buf, size_t size, size_t *written)
{
    struct attrs *a = lookup(layout, FGB_LT_LAYOUT);

    return a ? attr_get(a, attr, buf, size, written) : CUBLAS_STATUS_INVALID_VALUE;
}

// ---- Preferences --------------------------------------------------------------------------

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    static const struct attr_def defs[] = {
        { CUBLASLT_MATMUL_PREF_SEARCH_MODE, 4, CUBLASLT_SEARCH_BEST_FIT },
        { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 8, 0 },
        { CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, 4, CUBLASLT_REDUCTION_SCHEME_MASK },
        { CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4, 256 },
        { CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 4, 256 },
        { CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 4, 256 },
        { CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 4, 256 },
        { CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 4, 0 },   // float 0.0f
        { CUBLASLT_MATMUL_PREF_IMPL_MASK, 8, -1 },
    };

    return create((void **)pref, FGB_LT_PREF, defs, sizeof defs / sizeof defs[0]);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return destroy(pref, FGB_LT_PREF);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size)
{
    struct attrs *a = lookup(pref, FGB_LT_PREF);

    return a ? attr_set(a, attr, buf, size) : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    void *buf, size_t size, size_t *written)
{
    struct attrs *a = lookup(pref, FGB_LT_PREF);

    return a ? attr_get(a, attr, buf, size, written) : CUBLAS_STATUS_INVALID_VALUE;
}

// ---- Matmul -------------------------------------------------------------------------------

// A matmul as the descriptors define it; the data pointers come later.
struct plan {
    struct fgb_gemm g;
    int64_t batch;
    int64_t stride_a, stride_b, stride_c, stride_d, stride_bias;   // elements
    int device_scalars;
    int bias;
    const void *bias_ptr;
};

static int compute_type_of(int64_t compute, cudaDataType *t)
{
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        *t = CUDA_R_32F;
        return 1;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        *t = CUDA_R_64F;
        return 1;
    default:
        return 0;
    }
}

// Checks one layout: column-major, strided, of type t, at least rows x cols
// with a valid leading dimension.  Sets *batch from the first layout seen.
static cublasStatus_t check_layout(const struct attrs *l, cudaDataType t,
                                   int64_t rows, int64_t cols, int64_t *batch,
                                   int64_t *stride)
{
    if (attr_int(l, CUBLASLT_MATRIX_LAYOUT_TYPE) != t ||
        attr_int(l, CUBLASLT_MATRIX_LAYOUT_ORDER) != CUBLASLT_ORDER_COL ||
        attr_int(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE) != CUBLASLT_BATCH_MODE_STRIDED ||
        attr_int(l, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET) != 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (attr_int(l, CUBLASLT_MATRIX_LAYOUT_ROWS) != rows ||
        attr_int(l, CUBLASLT_MATRIX_LAYOUT_COLS) != cols ||
        attr_int(l, CUBLASLT_MATRIX_LAYOUT_LD) < (rows > 1 ? rows : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (*batch == 0)
        *batch = attr_int(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    if (*batch < 1 || attr_int(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) != *batch)
        return CUBLAS_STATUS_INVALID_VALUE;
    *stride = attr_int(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t make_plan(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                cublasLtMatrixLayout_t Adesc,
                                cublasLtMatrixLayout_t Bdesc,
                                cublasLtMatrixLayout_t Cdesc,
                                cublasLtMatrixLayout_t Ddesc, struct plan *p)
{
    const struct attrs *op = lookup(desc, FGB_LT_DESC);
    const struct attrs *la = lookup(Adesc, FGB_LT_LAYOUT);
    const struct attrs *lb = lookup(Bdesc, FGB_LT_LAYOUT);
    const struct attrs *lc = lookup(Cdesc, FGB_LT_LAYOUT);
    const struct attrs *ld = lookup(Ddesc, FGB_LT_LAYOUT);
    int64_t ta, tb, epilogue, m, n, k;
    cudaDataType t;
    cublasStatus_t r;

    if (!fgb_reg_has(h, FGB_LT))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op || !la || !lb || !lc || !ld)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(p, 0, sizeof *p);
    if (!compute_type_of(attr_int(op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), &t) ||
        attr_int(op, CUBLASLT_MATMUL_DESC_SCALE_TYPE) != t)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    switch (attr_int(op, CUBLASLT_MATMUL_DESC_POINTER_MODE)) {
    case CUBLASLT_POINTER_MODE_HOST: break;
    case CUBLASLT_POINTER_MODE_DEVICE: p->device_scalars = 1; break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;    // alpha vectors
    }
    ta = attr_int(op, CUBLASLT_MATMUL_DESC_TRANSA);
    tb = attr_int(op, CUBLASLT_MATMUL_DESC_TRANSB);
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T && ta != CUBLAS_OP_C) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T && tb != CUBLAS_OP_C))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (attr_int(op, CUBLASLT_MATMUL_DESC_TRANSC) != CUBLAS_OP_N ||
        attr_int(op, CUBLASLT_MATMUL_DESC_FILL_MODE) != CUBLAS_FILL_MODE_FULL)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    epilogue = attr_int(op, CUBLASLT_MATMUL_DESC_EPILOGUE);
    switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_RELU: p->g.relu = 1; break;
    case CUBLASLT_EPILOGUE_BIAS: p->bias = 1; break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: p->bias = p->g.relu = 1; break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    // The bias has D's type unless set otherwise (-1: unset).
    if (p->bias && attr_int(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) != -1 &&
        attr_int(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) != t)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    p->bias_ptr = (const void *)(uintptr_t)attr_int(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
    p->stride_bias = attr_int(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE);

    // D is m x n; op(A) m x k; op(B) k x n.
    m = attr_int(ld, CUBLASLT_MATRIX_LAYOUT_ROWS);
    n = attr_int(ld, CUBLASLT_MATRIX_LAYOUT_COLS);
    k = attr_int(la, ta == CUBLAS_OP_N ? CUBLASLT_MATRIX_LAYOUT_COLS
                                       : CUBLASLT_MATRIX_LAYOUT_ROWS);
    p->g.ta = ta != CUBLAS_OP_N;
    p->g.tb = tb != CUBLAS_OP_N;
    r = check_layout(ld, t, m, n, &p->batch, &p->stride_d);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = check_layout(lc, t, m, n, &p->batch, &p->stride_c);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = check_layout(la, t, p->g.ta ? k : m, p->g.ta ? m : k, &p->batch,
                         &p->stride_a);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = check_layout(lb, t, p->g.tb ? n : k, p->g.tb ? k : n, &p->batch,
                         &p->stride_b);
    p->g.m = m;
    p->g.n = n;
    p->g.k = k;
    p->g.type = t;
    p->g.lda = attr_int(la, CUBLASLT_MATRIX_LAYOUT_LD);
    p->g.ldb = attr_int(lb, CUBLASLT_MATRIX_LAYOUT_LD);
    p->g.ldc = attr_int(lc, CUBLASLT_MATRIX_LAYOUT_LD);
    p->g.ldd = attr_int(ld, CUBLASLT_MATRIX_LAYOUT_LD);
    return r;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
    cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t pref,
    int requested, cublasLtMatmulHeuristicResult_t results[], int *returned)
{
    struct plan p;
    cublasStatus_t r;

    if (requested <= 0 || !results || !returned)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (pref && !fgb_reg_has(pref, FGB_LT_PREF))
        return CUBLAS_STATUS_INVALID_VALUE;
    r = make_plan(h, desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    // One algorithm, needing no workspace, so every workspace limit admits it.
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = FAKE_ALGO;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
    const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
    cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
    cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_size,
    cudaStream_t stream)
{
    struct plan p;
    double *bias = NULL;
    size_t es;
    cublasStatus_t r;

    (void)workspace;                    // the fake algorithm needs none
    (void)workspace_size;
    log_api("cublasLtMatmul", "fake matmul called");
    r = make_plan(h, desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (algo && algo->data[0] != FAKE_ALGO)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (p.bias && !p.bias_ptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (p.g.m == 0 || p.g.n == 0)
        return CUBLAS_STATUS_SUCCESS;
    r = fgb_init();
    if (r == CUBLAS_STATUS_SUCCESS && !fakegpu_stream_fits((CUstream)stream, h->device))
        r = CUBLAS_STATUS_EXECUTION_FAILED;
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_scalar(stream, p.device_scalars, alpha, p.g.type, &p.g.alpha);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_scalar(stream, p.device_scalars, beta, p.g.type, &p.g.beta);
    if (r == CUBLAS_STATUS_SUCCESS && p.bias) {
        bias = calloc((size_t)p.g.m, sizeof *bias);
        if (!bias)
            r = CUBLAS_STATUS_ALLOC_FAILED;
    }
    es = fgb_size(p.g.type);
    for (int64_t i = 0; r == CUBLAS_STATUS_SUCCESS && i < p.batch; i++) {
        if (bias) {
            r = fgb_get(stream, bias, (const char *)p.bias_ptr + i * p.stride_bias * (int64_t)es,
                        p.g.type, p.g.m, 1, p.g.m);
            p.g.bias = bias;
        }
        p.g.a = (const char *)A + i * p.stride_a * (int64_t)es;
        p.g.b = (const char *)B + i * p.stride_b * (int64_t)es;
        p.g.c = C ? (const char *)C + i * p.stride_c * (int64_t)es : NULL;
        p.g.d = (char *)D + i * p.stride_d * (int64_t)es;
        if (r == CUBLAS_STATUS_SUCCESS)
            r = fgb_gemm_run(stream, &p.g);
    }
    free(bias);
    return r;
}

// Shared core of the fake cuDNN: context, registry, device tensors in and
// out, the CPU convolution.  See dnn.h.
#include "dnn.h"

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// The most elements (and span) of one tensor the fake computes with: it
// stages tensors in host memory, as doubles with their offsets, and a
// larger one is refused as a shape it does not support, so that a hostile
// size cannot take the test machine's memory (or the fuzzers': they stop
// at 2 GiB).
#define MAX_ELEMS (1ll << 24)

cudnnStatus_t dnn_init(void)
{
    CUcontext c = NULL;

    if (cuCtxGetCurrent(&c) == CUDA_SUCCESS && c)
        return CUDNN_STATUS_SUCCESS;
    return cudaFree(NULL) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                         : CUDNN_STATUS_NOT_INITIALIZED;
}

// ---- Registry ---------------------------------------------------------------------------

struct reg {
    const void *p;
    enum dnn_kind kind;
    struct reg *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg *reg_head;

int dnn_reg_add(const void *p, enum dnn_kind kind)
{
    struct reg *r = malloc(sizeof *r);

    if (!r)
        return -1;
    r->p = p;
    r->kind = kind;
    pthread_mutex_lock(&reg_lock);
    r->next = reg_head;
    reg_head = r;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

int dnn_reg_has(const void *p, enum dnn_kind kind)
{
    int found = 0;

    if (!p)
        return 0;
    pthread_mutex_lock(&reg_lock);
    for (struct reg *r = reg_head; r; r = r->next)
        if (r->p == p) {
            found = r->kind == kind;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

void dnn_reg_del(const void *p)
{
    pthread_mutex_lock(&reg_lock);
    for (struct reg **pp = &reg_head; *pp; pp = &(*pp)->next)
        if ((*pp)->p == p) {
            struct reg *r = *pp;
            *pp = r->next;
            free(r);
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

struct dnn_handle *dnn_handle(cudnnHandle_t h)
{
    return dnn_reg_has(h, DNN_HANDLE) ? (struct dnn_handle *)h : NULL;
}

// ---- Tensors ----------------------------------------------------------------------------

size_t dnn_esize(cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT ? sizeof(float) : t == CUDNN_DATA_DOUBLE ? sizeof(double) : 0;
}

int64_t dnn_count(const struct dnn_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->nb; d++)
        n *= v->dim[d];
    return n;
}

// Elements from the first to one past the last.
static int64_t span(const struct dnn_view *v)
{
    int64_t last = 0;
    for (int d = 0; d < v->nb; d++)
        last += (v->dim[d] - 1) * v->stride[d];
    return last + 1;
}

cudnnStatus_t dnn_view_ok(const struct dnn_view *v)
{
    int64_t n = 1, last = 0;

    if (!dnn_esize(v->type))
        return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
    if (v->nb < 1 || v->nb > DNN_DIM_MAX)
        return CUDNN_STATUS_BAD_PARAM;
    for (int d = 0; d < v->nb; d++) {
        if (v->dim[d] < 1 || v->stride[d] < 0)
            return CUDNN_STATUS_BAD_PARAM;
        if (v->dim[d] > MAX_ELEMS || v->stride[d] > MAX_ELEMS)
            return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
        n *= v->dim[d];
        last += (v->dim[d] - 1) * v->stride[d];
        if (n > MAX_ELEMS || last >= MAX_ELEMS)
            return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
    }
    return CUDNN_STATUS_SUCCESS;
}

// Offset (in elements) of each logical element, in row-major order.
static int64_t *offsets(const struct dnn_view *v)
{
    int64_t n = dnn_count(v), idx[DNN_DIM_MAX] = {0}, off = 0;
    int64_t *o = malloc((size_t)n * sizeof *o);

    if (!o)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        o[i] = off;
        for (int d = v->nb - 1; d >= 0; d--) {
            if (++idx[d] < v->dim[d]) {
                off += v->stride[d];
                break;
            }
            off -= (v->dim[d] - 1) * v->stride[d];
            idx[d] = 0;
        }
    }
    return o;
}

static double get_elem(const unsigned char *raw, cudnnDataType_t t, int64_t i)
{
    if (t == CUDNN_DATA_FLOAT) {
        float f;
        memcpy(&f, raw + i * (int64_t)sizeof f, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, raw + i * (int64_t)sizeof d, sizeof d);
    return d;
}

static void put_elem(unsigned char *raw, cudnnDataType_t t, int64_t i, double v)
{
    if (t == CUDNN_DATA_FLOAT) {
        float f = (float)v;
        memcpy(raw + i * (int64_t)sizeof f, &f, sizeof f);
    } else {
        memcpy(raw + i * (int64_t)sizeof v, &v, sizeof v);
    }
}

static cudnnStatus_t copy_st(CUresult r)
{
    return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

cudnnStatus_t dnn_load(CUstream s, const struct dnn_view *v, const void *dev, double **out)
{
    size_t es = dnn_esize(v->type);
    int64_t n = dnn_count(v), sp = span(v);
    unsigned char *raw = malloc((size_t)sp * es);
    int64_t *off = offsets(v);
    double *val = malloc((size_t)n * sizeof *val);
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    *out = NULL;
    if (!raw || !off || !val)
        r = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (r == CUDNN_STATUS_SUCCESS)
        r = copy_st(cuMemcpyDtoHAsync_v2(raw, (CUdeviceptr)(uintptr_t)dev, (size_t)sp * es, s));
    for (int64_t i = 0; r == CUDNN_STATUS_SUCCESS && i < n; i++)
        val[i] = get_elem(raw, v->type, off[i]);
    free(raw);
    free(off);
    if (r != CUDNN_STATUS_SUCCESS)
        free(val);
    else
        *out = val;
    return r;
}

cudnnStatus_t dnn_store(CUstream s, const struct dnn_view *v, void *dev, const double *val,
                        double alpha, double beta)
{
    size_t es = dnn_esize(v->type);
    int64_t n = dnn_count(v), sp = span(v);
    unsigned char *raw = calloc((size_t)sp, es);
    int64_t *off = offsets(v);
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    if (!raw || !off)
        r = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    // The whole span is written back, so gaps between elements are read
    // first to keep them; a packed output with beta == 0 is not read.
    if (r == CUDNN_STATUS_SUCCESS && (beta != 0 || sp != n))
        r = copy_st(cuMemcpyDtoHAsync_v2(raw, (CUdeviceptr)(uintptr_t)dev, (size_t)sp * es, s));
    for (int64_t i = 0; r == CUDNN_STATUS_SUCCESS && i < n; i++) {
        double x = alpha * val[i];
        if (beta != 0)
            x += beta * get_elem(raw, v->type, off[i]);
        put_elem(raw, v->type, off[i], x);
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = copy_st(cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)dev, raw, (size_t)sp * es, s));
    free(raw);
    free(off);
    return r;
}

cudnnStatus_t dnn_scalar(cudnnDataType_t data, const void *p, double *out)
{
    if (!p)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (data == CUDNN_DATA_DOUBLE) {
        memcpy(out, p, sizeof *out);
    } else {
        float f;
        memcpy(&f, p, sizeof f);
        *out = f;
    }
    return CUDNN_STATUS_SUCCESS;
}

// ---- Convolution ------------------------------------------------------------------------

cudnnStatus_t dnn_conv_out(const struct dnn_conv *cv, int nbx, const int64_t *xd, int nbw,
                           const int64_t *wd, int64_t *yd)
{
    if (cv->nsp < 1 || nbx != cv->nsp + 2 || nbw != nbx || xd[1] != wd[1])
        return CUDNN_STATUS_BAD_PARAM;
    yd[0] = xd[0];
    yd[1] = wd[0];
    for (int d = 0; d < cv->nsp; d++) {
        int64_t in = xd[2 + d] + cv->pre[d] + cv->post[d];
        int64_t f = (wd[2 + d] - 1) * cv->dil[d] + 1;
        if (cv->stride[d] < 1 || cv->dil[d] < 1 || in < f)
            return CUDNN_STATUS_BAD_PARAM;
        yd[2 + d] = 1 + (in - f) / cv->stride[d];
    }
    return CUDNN_STATUS_SUCCESS;
}

void dnn_conv_run(enum dnn_conv_op op, const struct dnn_conv *cv, const int64_t *xd,
                  const int64_t *wd, const int64_t *yd, double *x, double *w, double *y)
{
    int nsp = cv->nsp;
    int64_t N = xd[0], C = xd[1], K = wd[0];
    int64_t xs = 1, ws = 1, ys = 1;

    for (int d = 0; d < nsp; d++) {
        xs *= xd[2 + d];
        ws *= wd[2 + d];
        ys *= yd[2 + d];
    }
    for (int64_t oi = 0; oi < ys; oi++) {
        int64_t o[DNN_SPATIAL_MAX], t = oi;
        for (int d = nsp - 1; d >= 0; d--) {
            o[d] = t % yd[2 + d];
            t /= yd[2 + d];
        }
        for (int64_t ri = 0; ri < ws; ri++) {
            int64_t ii = 0, mul = 1;
            int inside = 1;
            t = ri;
            for (int d = nsp - 1; d >= 0; d--) {
                int64_t r = t % wd[2 + d];
                int64_t i = o[d] * cv->stride[d] - cv->pre[d] + r * cv->dil[d];
                t /= wd[2 + d];
                if (i < 0 || i >= xd[2 + d]) {
                    inside = 0;
                    break;
                }
                ii += i * mul;
                mul *= xd[2 + d];
            }
            if (!inside)
                continue;
            // Reversing every spatial dimension reverses the flat index.
            int64_t wi = cv->flip ? ws - 1 - ri : ri;
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++) {
                    double *yp = &y[(n * K + k) * ys + oi];
                    for (int64_t c = 0; c < C; c++) {
                        double *xp = &x[(n * C + c) * xs + ii];
                        double *wp = &w[(k * C + c) * ws + wi];
                        switch (op) {
                        case DNN_FWD: *yp += *xp * *wp; break;
                        case DNN_BWD_DATA: *xp += *yp * *wp; break;
                        case DNN_BWD_FILTER: *wp += *yp * *xp; break;
                        }
                    }
                }
        }
    }
}

cudnnStatus_t dnn_conv_forward(CUstream s, const struct dnn_conv *cv, double alpha,
                               const struct dnn_view *xv, const void *x,
                               const struct dnn_view *wv, const void *w, double beta,
                               const struct dnn_view *yv, void *y)
{
    double *xh = NULL, *wh = NULL, *yh = calloc((size_t)dnn_count(yv), sizeof *yh);
    cudnnStatus_t r = yh ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;

    // x and w are not read when alpha is 0.
    if (r == CUDNN_STATUS_SUCCESS && alpha != 0)
        r = dnn_load(s, xv, x, &xh);
    if (r == CUDNN_STATUS_SUCCESS && alpha != 0)
        r = dnn_load(s, wv, w, &wh);
    if (r == CUDNN_STATUS_SUCCESS && alpha != 0)
        dnn_conv_run(DNN_FWD, cv, xv->dim, wv->dim, yv->dim, xh, wh, yh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(s, yv, y, yh, alpha, beta);
    free(xh);
    free(wh);
    free(yh);
    return r;
}

// ---- Status names -----------------------------------------------------------------------

const char *dnn_status_name(cudnnStatus_t s)
{
    switch ((int)s) {
#define S(x) case x: return #x;
    S(CUDNN_STATUS_SUCCESS)
    S(CUDNN_STATUS_NOT_INITIALIZED)
    S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    S(CUDNN_STATUS_DEPRECATED)
    S(CUDNN_STATUS_LICENSE_ERROR)
    S(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
    S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    S(CUDNN_STATUS_BAD_PARAM)
    case 2001: return "CUDNN_STATUS_INVALID_VALUE";
    S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
    S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
    S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
    S(CUDNN_STATUS_NOT_SUPPORTED)
    S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
    S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
    S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
    S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
    S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
    S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
    S(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
    S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
    S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    S(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
    S(CUDNN_STATUS_INTERNAL_ERROR)
    S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
    S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
    S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
    S(CUDNN_STATUS_EXECUTION_FAILED)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
    S(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef S
    default:
        return "CUDNN_UNKNOWN_STATUS";
    }
}

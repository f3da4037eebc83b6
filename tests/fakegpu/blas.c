// Shared core of the fake cuBLAS and cuBLASLt: device memory in and out,
// the CPU gemm, the registry of live objects.  See blas.h.
#include "blas.h"

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

cublasStatus_t fgb_init(void)
{
    CUcontext c = NULL;

    if (cuCtxGetCurrent(&c) == CUDA_SUCCESS && c)
        return CUBLAS_STATUS_SUCCESS;
    // The runtime's implicit initialisation: retains the primary context
    // and makes it current, as cuBLAS's embedded cudart does.
    return cudaFree(NULL) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                         : CUBLAS_STATUS_NOT_INITIALIZED;
}

size_t fgb_size(cudaDataType t)
{
    return t == CUDA_R_32F ? sizeof(float) : t == CUDA_R_64F ? sizeof(double) : 0;
}

static cublasStatus_t st(CUresult r)
{
    return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

CUresult fgb_copy2d(void *dst, int dst_dev, size_t dpitch, const void *src,
                    int src_dev, size_t spitch, size_t width, size_t height,
                    int async, CUstream s)
{
    CUDA_MEMCPY2D c;

    memset(&c, 0, sizeof c);
    c.srcMemoryType = src_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcPitch = spitch;
    c.dstMemoryType = dst_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    c.dstHost = dst;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    return async ? cuMemcpy2DAsync_v2(&c, s) : cuMemcpy2D_v2(&c);
}

cublasStatus_t fgb_read(CUstream s, void *dst, const void *src_dev, size_t n)
{
    return st(cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)(uintptr_t)src_dev, n, s));
}

cublasStatus_t fgb_write(CUstream s, void *dst_dev, const void *src, size_t n)
{
    return st(cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)dst_dev, src, n, s));
}

cublasStatus_t fgb_get(CUstream s, double *dst, const void *src, cudaDataType t,
                       int64_t rows, int64_t cols, int64_t ld)
{
    size_t es = fgb_size(t), n = (size_t)(rows * cols);
    unsigned char *raw;
    cublasStatus_t r;

    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    raw = malloc(n * es);
    if (!raw)
        return CUBLAS_STATUS_ALLOC_FAILED;
    r = st(fgb_copy2d(raw, 0, (size_t)rows * es, src, 1, (size_t)ld * es,
                      (size_t)rows * es, (size_t)cols, 1, s));
    for (size_t i = 0; r == CUBLAS_STATUS_SUCCESS && i < n; i++) {
        if (t == CUDA_R_32F) {
            float v;
            memcpy(&v, raw + i * es, sizeof v);
            dst[i] = v;
        } else {
            memcpy(&dst[i], raw + i * es, sizeof dst[i]);
        }
    }
    free(raw);
    return r;
}

cublasStatus_t fgb_put(CUstream s, void *dst, cudaDataType t, int64_t ld,
                       const double *src, int64_t rows, int64_t cols)
{
    size_t es = fgb_size(t), n = (size_t)(rows * cols);
    unsigned char *raw;
    cublasStatus_t r;

    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    raw = malloc(n * es);
    if (!raw)
        return CUBLAS_STATUS_ALLOC_FAILED;
    for (size_t i = 0; i < n; i++) {
        if (t == CUDA_R_32F) {
            float v = (float)src[i];
            memcpy(raw + i * es, &v, sizeof v);
        } else {
            memcpy(raw + i * es, &src[i], sizeof src[i]);
        }
    }
    r = st(fgb_copy2d(dst, 1, (size_t)ld * es, raw, 0, (size_t)rows * es,
                      (size_t)rows * es, (size_t)cols, 1, s));
    free(raw);
    return r;
}

cublasStatus_t fgb_scalar(CUstream s, int device, const void *p, cudaDataType t,
                          double *out)
{
    unsigned char buf[sizeof(double)] = {0};   // stays 0 if a fault drops the copy
    size_t es = fgb_size(t);

    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (device) {
        cublasStatus_t r = fgb_read(s, buf, p, es);
        if (r != CUBLAS_STATUS_SUCCESS)
            return r;
    } else {
        memcpy(buf, p, es);
    }
    if (t == CUDA_R_32F) {
        float v;
        memcpy(&v, buf, sizeof v);
        *out = v;
    } else {
        memcpy(out, buf, sizeof *out);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t fgb_gemm_run(CUstream s, const struct fgb_gemm *g)
{
    int64_t m = g->m, n = g->n, k = g->k;
    int use_ab = k > 0 && g->alpha != 0;
    double *a, *b, *c;
    cublasStatus_t r = CUBLAS_STATUS_SUCCESS;

    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (m * n > FGB_MAX_ELEMS || m * k > FGB_MAX_ELEMS || k * n > FGB_MAX_ELEMS)
        return CUBLAS_STATUS_ALLOC_FAILED;
    // calloc: with beta == 0, C starts from zeros instead of its contents.
    a = calloc((size_t)(use_ab ? m * k : 1), sizeof *a);
    b = calloc((size_t)(use_ab ? k * n : 1), sizeof *b);
    c = calloc((size_t)(m * n), sizeof *c);
    if (!a || !b || !c)
        r = CUBLAS_STATUS_ALLOC_FAILED;
    // Stored shapes: A is m x k, or k x m when op(A) = A^T; B likewise.
    if (r == CUBLAS_STATUS_SUCCESS && use_ab)
        r = fgb_get(s, a, g->a, g->type, g->ta ? k : m, g->ta ? m : k, g->lda);
    if (r == CUBLAS_STATUS_SUCCESS && use_ab)
        r = fgb_get(s, b, g->b, g->type, g->tb ? n : k, g->tb ? k : n, g->ldb);
    if (r == CUBLAS_STATUS_SUCCESS && g->beta != 0)
        r = fgb_get(s, c, g->c, g->type, m, n, g->ldc);
    for (int64_t j = 0; r == CUBLAS_STATUS_SUCCESS && j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double acc = 0, v;
            for (int64_t l = 0; use_ab && l < k; l++)
                acc += (g->ta ? a[l + i * k] : a[i + l * m]) *
                       (g->tb ? b[j + l * n] : b[l + j * k]);
            v = g->alpha * acc + (g->beta != 0 ? g->beta * c[i + j * m] : 0);
            if (g->bias)
                v += g->bias[i];
            if (g->relu && !(v > 0))
                v = 0;
            c[i + j * m] = v;
        }
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_put(s, g->d, g->type, g->ldd, c, m, n);
    free(a);
    free(b);
    free(c);
    return r;
}

// ---- Registry of live objects -----------------------------------------------------------

struct reg {
    const void *p;
    enum fgb_kind kind;
    struct reg *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg *reg_head;

int fgb_reg_add(const void *p, enum fgb_kind kind)
{
    struct reg *e = malloc(sizeof *e);

    if (!e)
        return -1;
    e->p = p;
    e->kind = kind;
    pthread_mutex_lock(&reg_lock);
    e->next = reg_head;
    reg_head = e;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

int fgb_reg_has(const void *p, enum fgb_kind kind)
{
    int found = 0;

    pthread_mutex_lock(&reg_lock);
    for (struct reg *e = reg_head; e && !found; e = e->next)
        found = e->p == p && e->kind == kind;
    pthread_mutex_unlock(&reg_lock);
    return found;
}

void fgb_reg_del(const void *p)
{
    pthread_mutex_lock(&reg_lock);
    for (struct reg **e = &reg_head; *e; e = &(*e)->next)
        if ((*e)->p == p) {
            struct reg *dead = *e;
            *e = dead->next;
            free(dead);
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

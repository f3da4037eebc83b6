// Fake libcublas.so.13: the handle calls and the BLAS routines the tests
// use, on the CPU over the fake GPU's device memory (blas.h says how).
//
// As cuBLAS defines them: matrices are column-major with leading dimensions
// in elements; CUBLAS_OP_C is CUBLAS_OP_T for real types; the handle's
// pointer mode says whether alpha, beta and results are host or device
// pointers; work goes to the handle's stream; C is not read when beta is 0.
// Unlike cuBLAS, the fake only supports positive vector increments
// (CUBLAS_STATUS_NOT_SUPPORTED otherwise).
#include "blas.h"

#include <cublas_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cublasContext {
    CUdevice device;            // current at cublasCreate: the handle's
    CUstream stream;
    cublasPointerMode_t pointer_mode;
    cublasMath_t math_mode;
    cublasAtomicsMode_t atomics_mode;
    void *workspace;
    size_t workspace_size;
};

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

// ---- Logging: with logging on, each call named here is logged ----------------------------

static int log_on, log_to_stdout, log_to_stderr;
static cublasLogCallback log_callback;

static void log_call(const char *function)
{
    char msg[256];

    if (!log_on)
        return;
    snprintf(msg, sizeof msg, "I! cuBLAS (fake) function %s() called\n", function);
    if (log_to_stdout)
        fputs(msg, stdout);
    if (log_to_stderr)
        fputs(msg, stderr);
    if (log_callback)
        log_callback(msg);
}

cublasStatus_t CUBLASWINAPI cublasLoggerConfigure(int logIsOn, int logToStdOut,
                                                  int logToStdErr, const char *logFileName)
{
    (void)logFileName;                  // the fake writes no files
    log_on = logIsOn;
    log_to_stdout = logToStdOut;
    log_to_stderr = logToStdErr;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetLoggerCallback(cublasLogCallback userCallback)
{
    log_callback = userCallback;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetLoggerCallback(cublasLogCallback *userCallback)
{
    if (!userCallback)
        return CUBLAS_STATUS_INVALID_VALUE;
    *userCallback = log_callback;
    return CUBLAS_STATUS_SUCCESS;
}

// 0 for op(X) = X, 1 for X^T (conjugation is nothing for real types), -1
// for anything else.
static int op(cublasOperation_t o)
{
    return o == CUBLAS_OP_N ? 0 : o == CUBLAS_OP_T || o == CUBLAS_OP_C ? 1 : -1;
}

// Every call on a handle starts here.  The handle's work runs on the
// device it was made on, whichever the thread's is now: a stream of
// another device cannot take its kernels (fakegpu_stream_fits).
static cublasStatus_t enter(cublasHandle_t h)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasStatus_t r = fgb_init();
    if (r == CUBLAS_STATUS_SUCCESS && !fakegpu_stream_fits(h->stream, h->device))
        r = CUBLAS_STATUS_EXECUTION_FAILED;
    return r;
}

static cublasStatus_t scalar(cublasHandle_t h, const void *p, cudaDataType t,
                             double *out)
{
    return fgb_scalar(h->stream, h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE,
                      p, t, out);
}

// Stores a reduction's result where the pointer mode says.
static cublasStatus_t put_result(cublasHandle_t h, void *res, const void *v,
                                 size_t size)
{
    if (!res)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE)
        return fgb_write(h->stream, res, v, size);
    // A host result makes cuBLAS wait for its kernel: a fault shows here.
    if (cuStreamSynchronize(h->stream) != CUDA_SUCCESS)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    memcpy(res, v, size);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t put_real(cublasHandle_t h, void *res, cudaDataType t,
                               double v)
{
    float f = (float)v;

    return t == CUDA_R_32F ? put_result(h, res, &f, sizeof f)
                           : put_result(h, res, &v, sizeof v);
}

// Loads n elements of x (stride incx) into buf[0, n) and, when y is not
// NULL, n of y into buf[n, 2n).  *buf is to be freed by the caller.
static cublasStatus_t load(cublasHandle_t h, double **buf, cudaDataType t,
                           int n, const void *x, int incx, const void *y,
                           int incy)
{
    cublasStatus_t r;

    *buf = calloc((size_t)n * 2, sizeof **buf);
    if (!*buf)
        return CUBLAS_STATUS_ALLOC_FAILED;
    r = fgb_get(h->stream, *buf, x, t, 1, n, incx);
    if (r == CUBLAS_STATUS_SUCCESS && y)
        r = fgb_get(h->stream, *buf + n, y, t, 1, n, incy);
    return r;
}

// ---- Handle -------------------------------------------------------------------------------

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle)
{
    struct cublasContext *h;
    cublasStatus_t r;

    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    r = fgb_init();
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    h = calloc(1, sizeof *h);           // NULL stream, host pointers, defaults
    if (!h || fgb_reg_add(h, FGB_CUBLAS) < 0) {
        free(h);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    h->device = fakegpu_current_device();
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t h)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    fgb_reg_del(h);
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetVersion_v2(cublasHandle_t h, int *version)
{
    (void)h;                            // cuBLAS answers without a handle too
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    // cuBLAS drops a user workspace when the stream changes.
    h->workspace = NULL;
    h->workspace_size = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t h,
                                                    cublasPointerMode_t mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetPointerMode_v2(cublasHandle_t h,
                                                    cublasPointerMode_t *mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

// The math mode only chooses how fast the GPU may compute; the fake always
// computes in double precision and only remembers it.
cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetAtomicsMode(cublasHandle_t h,
                                                 cublasAtomicsMode_t mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->atomics_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetAtomicsMode(cublasHandle_t h,
                                                 cublasAtomicsMode_t *mode)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->atomics_mode;
    return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS wants the workspace aligned to 256 bytes; the fake needs none.
cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t h, void *ws,
                                                  size_t size)
{
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((uintptr_t)ws % 256)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->workspace = ws;
    h->workspace_size = size;
    return CUBLAS_STATUS_SUCCESS;
}

// Through rgpu the client answers these itself; the fake has them so that a
// test program can also run on it directly (LD_LIBRARY_PATH), for debugging.
static const char *const status_names[] = {
    [CUBLAS_STATUS_SUCCESS] = "CUBLAS_STATUS_SUCCESS",
    [CUBLAS_STATUS_NOT_INITIALIZED] = "CUBLAS_STATUS_NOT_INITIALIZED",
    [CUBLAS_STATUS_ALLOC_FAILED] = "CUBLAS_STATUS_ALLOC_FAILED",
    [CUBLAS_STATUS_INVALID_VALUE] = "CUBLAS_STATUS_INVALID_VALUE",
    [CUBLAS_STATUS_ARCH_MISMATCH] = "CUBLAS_STATUS_ARCH_MISMATCH",
    [CUBLAS_STATUS_MAPPING_ERROR] = "CUBLAS_STATUS_MAPPING_ERROR",
    [CUBLAS_STATUS_EXECUTION_FAILED] = "CUBLAS_STATUS_EXECUTION_FAILED",
    [CUBLAS_STATUS_INTERNAL_ERROR] = "CUBLAS_STATUS_INTERNAL_ERROR",
    [CUBLAS_STATUS_NOT_SUPPORTED] = "CUBLAS_STATUS_NOT_SUPPORTED",
    [CUBLAS_STATUS_LICENSE_ERROR] = "CUBLAS_STATUS_LICENSE_ERROR",
};

const char *CUBLASWINAPI cublasGetStatusName(cublasStatus_t status)
{
    size_t n = sizeof status_names / sizeof status_names[0];

    if ((unsigned)status < n && status_names[status])
        return status_names[status];
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status)
{
    return cublasGetStatusName(status);     // the fake's text is the name
}

// ---- Vectors and matrices between host and device --------------------------------------------
//
// No handle: blocking copies on the legacy default stream, or ordered on
// the given stream.  Copy failures are CUBLAS_STATUS_MAPPING_ERROR.

static cublasStatus_t xfer(size_t width, size_t height, const void *src,
                           int src_dev, size_t spitch, void *dst, int dst_dev,
                           size_t dpitch, int async, cudaStream_t s)
{
    if (width == 0 || height == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (fgb_init() != CUBLAS_STATUS_SUCCESS ||
        fgb_copy2d(dst, dst_dev, dpitch, src, src_dev, spitch, width, height,
                   async, s) != CUDA_SUCCESS)
        return CUBLAS_STATUS_MAPPING_ERROR;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t vector(int n, int es, const void *x, int x_dev, int incx,
                             void *y, int y_dev, int incy, int async,
                             cudaStream_t s)
{
    if (n < 0 || es <= 0 || incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return xfer((size_t)es, (size_t)n, x, x_dev, (size_t)incx * (size_t)es, y,
                y_dev, (size_t)incy * (size_t)es, async, s);
}

static cublasStatus_t matrix(int rows, int cols, int es, const void *a,
                             int a_dev, int lda, void *b, int b_dev, int ldb,
                             int async, cudaStream_t s)
{
    if (rows < 0 || cols < 0 || es <= 0 || lda < max1(rows) || ldb < max1(rows))
        return CUBLAS_STATUS_INVALID_VALUE;
    return xfer((size_t)rows * (size_t)es, (size_t)cols, a, a_dev,
                (size_t)lda * (size_t)es, b, b_dev, (size_t)ldb * (size_t)es,
                async, s);
}

cublasStatus_t CUBLASWINAPI cublasSetVector(int n, int es, const void *x,
                                            int incx, void *y, int incy)
{
    return vector(n, es, x, 0, incx, y, 1, incy, 0, NULL);
}

cublasStatus_t CUBLASWINAPI cublasGetVector(int n, int es, const void *x,
                                            int incx, void *y, int incy)
{
    return vector(n, es, x, 1, incx, y, 0, incy, 0, NULL);
}

cublasStatus_t CUBLASWINAPI cublasSetVectorAsync(int n, int es, const void *x,
                                                 int incx, void *y, int incy,
                                                 cudaStream_t s)
{
    return vector(n, es, x, 0, incx, y, 1, incy, 1, s);
}

cublasStatus_t CUBLASWINAPI cublasGetVectorAsync(int n, int es, const void *x,
                                                 int incx, void *y, int incy,
                                                 cudaStream_t s)
{
    return vector(n, es, x, 1, incx, y, 0, incy, 1, s);
}

cublasStatus_t CUBLASWINAPI cublasSetMatrix(int rows, int cols, int es,
                                            const void *a, int lda, void *b,
                                            int ldb)
{
    return matrix(rows, cols, es, a, 0, lda, b, 1, ldb, 0, NULL);
}

cublasStatus_t CUBLASWINAPI cublasGetMatrix(int rows, int cols, int es,
                                            const void *a, int lda, void *b,
                                            int ldb)
{
    return matrix(rows, cols, es, a, 1, lda, b, 0, ldb, 0, NULL);
}

cublasStatus_t CUBLASWINAPI cublasSetMatrixAsync(int rows, int cols, int es,
                                                 const void *a, int lda,
                                                 void *b, int ldb,
                                                 cudaStream_t s)
{
    return matrix(rows, cols, es, a, 0, lda, b, 1, ldb, 1, s);
}

cublasStatus_t CUBLASWINAPI cublasGetMatrixAsync(int rows, int cols, int es,
                                                 const void *a, int lda,
                                                 void *b, int ldb,
                                                 cudaStream_t s)
{
    return matrix(rows, cols, es, a, 1, lda, b, 0, ldb, 1, s);
}

// ---- Level 1 ------------------------------------------------------------------------------

static cublasStatus_t axpy(cublasHandle_t h, int n, const void *alpha,
                           const void *x, int incx, void *y, int incy,
                           cudaDataType t)
{
    cublasStatus_t r = enter(h);
    double a = 0, *v = NULL;

    if (r != CUBLAS_STATUS_SUCCESS || n <= 0)
        return r;
    if (incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    r = scalar(h, alpha, t, &a);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = load(h, &v, t, n, x, incx, y, incy);
    for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < n; i++)
        v[n + i] += a * v[i];
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_put(h->stream, y, t, incy, v + n, 1, n);
    free(v);
    return r;
}

cublasStatus_t CUBLASWINAPI cublasSaxpy_v2(cublasHandle_t h, int n,
                                           const float *alpha, const float *x,
                                           int incx, float *y, int incy)
{
    return axpy(h, n, alpha, x, incx, y, incy, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasDaxpy_v2(cublasHandle_t h, int n,
                                           const double *alpha, const double *x,
                                           int incx, double *y, int incy)
{
    return axpy(h, n, alpha, x, incx, y, incy, CUDA_R_64F);
}

static cublasStatus_t dot(cublasHandle_t h, int n, const void *x, int incx,
                          const void *y, int incy, void *result, cudaDataType t)
{
    cublasStatus_t r = enter(h);
    double s = 0, *v = NULL;

    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (n > 0) {
        if (incx <= 0 || incy <= 0)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        r = load(h, &v, t, n, x, incx, y, incy);
        for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < n; i++)
            s += v[i] * v[n + i];
        free(v);
    }
    return r == CUBLAS_STATUS_SUCCESS ? put_real(h, result, t, s) : r;
}

cublasStatus_t CUBLASWINAPI cublasSdot_v2(cublasHandle_t h, int n,
                                          const float *x, int incx,
                                          const float *y, int incy,
                                          float *result)
{
    return dot(h, n, x, incx, y, incy, result, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasDdot_v2(cublasHandle_t h, int n,
                                          const double *x, int incx,
                                          const double *y, int incy,
                                          double *result)
{
    return dot(h, n, x, incx, y, incy, result, CUDA_R_64F);
}

// nrm2, asum and iamax: as in the reference BLAS, n <= 0 or incx <= 0
// gives 0 (for iamax, 0 is "no index": its indices are 1-based).
enum reduce { NRM2, ASUM, IAMAX };

static cublasStatus_t reduce(cublasHandle_t h, enum reduce what, int n,
                             const void *x, int incx, void *result,
                             cudaDataType t)
{
    cublasStatus_t r = enter(h);
    double s = 0, best = -1, *v = NULL;
    int index = 0;

    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (n > 0 && incx > 0) {
        r = load(h, &v, t, n, x, incx, NULL, 0);
        for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < n; i++) {
            double a = v[i] < 0 ? -v[i] : v[i];
            s += what == NRM2 ? a * a : a;
            if (a > best) {             // the first of equal maxima wins
                best = a;
                index = i + 1;
            }
        }
        free(v);
    }
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (what == IAMAX)
        return put_result(h, result, &index, sizeof index);
    return put_real(h, result, t, what == NRM2 ? sqrt(s) : s);
}

cublasStatus_t CUBLASWINAPI cublasSnrm2_v2(cublasHandle_t h, int n,
                                           const float *x, int incx,
                                           float *result)
{
    return reduce(h, NRM2, n, x, incx, result, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasSasum_v2(cublasHandle_t h, int n,
                                           const float *x, int incx,
                                           float *result)
{
    return reduce(h, ASUM, n, x, incx, result, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasIsamax_v2(cublasHandle_t h, int n,
                                            const float *x, int incx,
                                            int *result)
{
    return reduce(h, IAMAX, n, x, incx, result, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasSscal_v2(cublasHandle_t h, int n,
                                           const float *alpha, float *x,
                                           int incx)
{
    cublasStatus_t r = enter(h);
    double a = 0, *v = NULL;

    if (r != CUBLAS_STATUS_SUCCESS || n <= 0 || incx <= 0)
        return r;                       // nothing to do, as in the reference BLAS
    r = scalar(h, alpha, CUDA_R_32F, &a);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = load(h, &v, CUDA_R_32F, n, x, incx, NULL, 0);
    for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < n; i++)
        v[i] *= a;
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_put(h->stream, x, CUDA_R_32F, incx, v, 1, n);
    free(v);
    return r;
}

cublasStatus_t CUBLASWINAPI cublasScopy_v2(cublasHandle_t h, int n,
                                           const float *x, int incx, float *y,
                                           int incy)
{
    cublasStatus_t r = enter(h);
    double *v = NULL;

    if (r != CUBLAS_STATUS_SUCCESS || n <= 0)
        return r;
    if (incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    r = load(h, &v, CUDA_R_32F, n, x, incx, NULL, 0);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_put(h->stream, y, CUDA_R_32F, incy, v, 1, n);
    free(v);
    return r;
}

// ---- Level 2 ------------------------------------------------------------------------------

// y = alpha * op(A) * x + beta * y, A m x n.
cublasStatus_t CUBLASWINAPI cublasSgemv_v2(cublasHandle_t h,
                                           cublasOperation_t trans, int m,
                                           int n, const float *alpha,
                                           const float *A, int lda,
                                           const float *x, int incx,
                                           const float *beta, float *y,
                                           int incy)
{
    cublasStatus_t r = enter(h);
    int ta = op(trans), lx, ly;
    double a = 0, b = 0, *mat = NULL, *v = NULL;

    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (ta < 0 || m < 0 || n < 0 || lda < max1(m) || incx == 0 || incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (incx < 0 || incy < 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    lx = ta ? m : n;
    ly = ta ? n : m;
    r = scalar(h, alpha, CUDA_R_32F, &a);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = scalar(h, beta, CUDA_R_32F, &b);
    if (r == CUBLAS_STATUS_SUCCESS) {
        mat = malloc((size_t)m * (size_t)n * sizeof *mat);
        v = calloc((size_t)lx + (size_t)ly, sizeof *v);   // x, then y
        if (!mat || !v)
            r = CUBLAS_STATUS_ALLOC_FAILED;
    }
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_get(h->stream, mat, A, CUDA_R_32F, m, n, lda);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_get(h->stream, v, x, CUDA_R_32F, 1, lx, incx);
    if (r == CUBLAS_STATUS_SUCCESS && b != 0)
        r = fgb_get(h->stream, v + lx, y, CUDA_R_32F, 1, ly, incy);
    for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < ly; i++) {
        double acc = 0;
        for (int j = 0; j < lx; j++)
            acc += (ta ? mat[j + (size_t)i * m] : mat[i + (size_t)j * m]) * v[j];
        v[lx + i] = a * acc + (b != 0 ? b * v[lx + i] : 0);
    }
    if (r == CUBLAS_STATUS_SUCCESS)
        r = fgb_put(h->stream, y, CUDA_R_32F, incy, v + lx, 1, ly);
    free(mat);
    free(v);
    return r;
}

// ---- Level 3 ------------------------------------------------------------------------------

// Where the matrices of a (batched) gemm are: strided from a, b, c (strides
// in elements), or with arrays set, in device arrays of device pointers.
struct batch {
    const void *a, *b;
    void *c;
    long long sa, sb, sc;
    int count;
    int arrays;
    int host_scalars;           // alpha, beta on the host whatever the pointer mode
};

static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k,
                           const void *alpha, int lda, int ldb,
                           const void *beta, int ldc, cudaDataType t,
                           const struct batch *bt)
{
    cublasStatus_t r = enter(h);
    struct fgb_gemm g;
    size_t es = fgb_size(t);
    void **ptrs = NULL;                 // the pointer arrays: A, B, then C

    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    memset(&g, 0, sizeof g);
    g.ta = op(transa);
    g.tb = op(transb);
    if (g.ta < 0 || g.tb < 0 || m < 0 || n < 0 || k < 0 || bt->count < 0 ||
        lda < max1(g.ta ? k : m) || ldb < max1(g.tb ? n : k) || ldc < max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || bt->count == 0)
        return CUBLAS_STATUS_SUCCESS;
    g.m = m;
    g.n = n;
    g.k = k;
    g.type = t;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = g.ldd = ldc;
    if (bt->host_scalars) {
        r = fgb_scalar(h->stream, 0, alpha, t, &g.alpha);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = fgb_scalar(h->stream, 0, beta, t, &g.beta);
    } else {
        r = scalar(h, alpha, t, &g.alpha);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = scalar(h, beta, t, &g.beta);
    }
    if (r == CUBLAS_STATUS_SUCCESS && bt->arrays) {
        size_t size = (size_t)bt->count * sizeof *ptrs;
        ptrs = malloc(3 * size);
        if (!ptrs)
            return CUBLAS_STATUS_ALLOC_FAILED;
        r = fgb_read(h->stream, ptrs, bt->a, size);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = fgb_read(h->stream, ptrs + bt->count, bt->b, size);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = fgb_read(h->stream, ptrs + 2 * bt->count, bt->c, size);
    }
    for (int i = 0; r == CUBLAS_STATUS_SUCCESS && i < bt->count; i++) {
        if (ptrs) {
            g.a = ptrs[i];
            g.b = ptrs[bt->count + i];
            g.c = g.d = ptrs[2 * bt->count + i];
        } else {
            g.a = (const char *)bt->a + i * bt->sa * (long long)es;
            g.b = (const char *)bt->b + i * bt->sb * (long long)es;
            g.c = g.d = (char *)bt->c + i * bt->sc * (long long)es;
        }
        r = fgb_gemm_run(h->stream, &g);
    }
    free(ptrs);
    return r;
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t h,
                                           cublasOperation_t transa,
                                           cublasOperation_t transb, int m,
                                           int n, int k, const float *alpha,
                                           const float *A, int lda,
                                           const float *B, int ldb,
                                           const float *beta, float *C, int ldc)
{
    struct batch bt = { A, B, C, 0, 0, 0, 1, 0, 0 };

    log_call("cublasSgemm_v2");
    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc,
                CUDA_R_32F, &bt);
}

cublasStatus_t CUBLASWINAPI cublasDgemm_v2(cublasHandle_t h,
                                           cublasOperation_t transa,
                                           cublasOperation_t transb, int m,
                                           int n, int k, const double *alpha,
                                           const double *A, int lda,
                                           const double *B, int ldb,
                                           const double *beta, double *C,
                                           int ldc)
{
    struct batch bt = { A, B, C, 0, 0, 0, 1, 0, 0 };

    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc,
                CUDA_R_64F, &bt);
}

// ---- complex gemms: computed in double, op C conjugating -------------------------------

struct cplx {
    double re, im;
};

// rows x cols complex elements (pairs of width bytes each) of device
// memory with leading dimension ld, into doubles.
static cublasStatus_t get_complex(cublasHandle_t h, struct cplx *dst, const void *src,
                                  size_t width, int64_t rows, int64_t cols, int64_t ld)
{
    size_t n = (size_t)(rows * cols), es = 2 * width;
    unsigned char *raw = malloc(n * es + 1);
    if (!raw)
        return CUBLAS_STATUS_ALLOC_FAILED;
    CUresult cr = fgb_copy2d(raw, 0, (size_t)rows * es, src, 1, (size_t)ld * es,
                             (size_t)rows * es, (size_t)cols, 1, h->stream);
    for (size_t i = 0; cr == CUDA_SUCCESS && i < n; i++) {
        if (width == sizeof(float)) {
            float v[2];
            memcpy(v, raw + i * es, sizeof v);
            dst[i] = (struct cplx){ v[0], v[1] };
        } else {
            memcpy(&dst[i], raw + i * es, sizeof dst[i]);
        }
    }
    free(raw);
    return cr == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

static cublasStatus_t put_complex(cublasHandle_t h, void *dst, const struct cplx *src,
                                  size_t width, int64_t rows, int64_t cols, int64_t ld)
{
    size_t n = (size_t)(rows * cols), es = 2 * width;
    unsigned char *raw = malloc(n * es + 1);
    if (!raw)
        return CUBLAS_STATUS_ALLOC_FAILED;
    for (size_t i = 0; i < n; i++) {
        if (width == sizeof(float)) {
            float v[2] = { (float)src[i].re, (float)src[i].im };
            memcpy(raw + i * es, v, sizeof v);
        } else {
            memcpy(raw + i * es, &src[i], sizeof src[i]);
        }
    }
    CUresult cr = fgb_copy2d(dst, 1, (size_t)ld * es, raw, 0, (size_t)rows * es,
                             (size_t)rows * es, (size_t)cols, 1, h->stream);
    free(raw);
    return cr == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

// A complex scalar where the pointer mode says.
static cublasStatus_t complex_scalar(cublasHandle_t h, const void *p, size_t width,
                                     struct cplx *out)
{
    struct cplx v[1];
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE)
        return get_complex(h, out, p, width, 1, 1, 1);
    if (width == sizeof(float)) {
        float f[2];
        memcpy(f, p, sizeof f);
        *out = (struct cplx){ f[0], f[1] };
    } else {
        memcpy(v, p, sizeof v);
        *out = v[0];
    }
    return CUBLAS_STATUS_SUCCESS;
}

// op(X)[i][l] of a stored complex matrix of `rows` rows.
static struct cplx complex_op(const struct cplx *x, cublasOperation_t o, int64_t i, int64_t l,
                              int64_t rows)
{
    if (o == CUBLAS_OP_N)
        return x[i + l * rows];
    struct cplx v = x[l + i * rows];
    if (o == CUBLAS_OP_C)
        v.im = -v.im;
    return v;
}

static cublasStatus_t complex_gemm(cublasHandle_t h, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const void *alpha, const void *A, int lda, const void *B,
                                   int ldb, const void *beta, void *C, int ldc, size_t width)
{
    cublasStatus_t r = enter(h);
    struct cplx al, be;
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    int ta = op(transa), tb = op(transb);
    if (ta < 0 || tb < 0 || m < 0 || n < 0 || k < 0 || lda < max1(ta ? k : m) ||
        ldb < max1(tb ? n : k) || ldc < max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!A || !B || !C)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((r = complex_scalar(h, alpha, width, &al)) != CUBLAS_STATUS_SUCCESS ||
        (r = complex_scalar(h, beta, width, &be)) != CUBLAS_STATUS_SUCCESS)
        return r;
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    if (ar * ac > FGB_MAX_ELEMS || br * bc > FGB_MAX_ELEMS || (int64_t)m * n > FGB_MAX_ELEMS)
        return CUBLAS_STATUS_ALLOC_FAILED;
    struct cplx *a = calloc((size_t)(ar * ac) + 1, sizeof *a);
    struct cplx *b = calloc((size_t)(br * bc) + 1, sizeof *b);
    struct cplx *c = calloc((size_t)m * n, sizeof *c);
    int use_c = be.re != 0 || be.im != 0;
    r = !a || !b || !c ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
    if (r == CUBLAS_STATUS_SUCCESS && k > 0)
        r = get_complex(h, a, A, width, ar, ac, lda);
    if (r == CUBLAS_STATUS_SUCCESS && k > 0)
        r = get_complex(h, b, B, width, br, bc, ldb);
    if (r == CUBLAS_STATUS_SUCCESS && use_c)
        r = get_complex(h, c, C, width, m, n, ldc);
    for (int64_t j = 0; r == CUBLAS_STATUS_SUCCESS && j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double re = 0, im = 0;
            for (int64_t l = 0; l < k; l++) {
                struct cplx x = complex_op(a, transa, i, l, ar);
                struct cplx y = complex_op(b, transb, l, j, br);
                re += x.re * y.re - x.im * y.im;
                im += x.re * y.im + x.im * y.re;
            }
            struct cplx *cij = &c[i + j * m], old = use_c ? *cij : (struct cplx){ 0, 0 };
            cij->re = al.re * re - al.im * im + be.re * old.re - be.im * old.im;
            cij->im = al.re * im + al.im * re + be.re * old.im + be.im * old.re;
        }
    if (r == CUBLAS_STATUS_SUCCESS)
        r = put_complex(h, C, c, width, m, n, ldc);
    free(a);
    free(b);
    free(c);
    return r;
}

cublasStatus_t CUBLASWINAPI cublasCgemm_v2(cublasHandle_t h, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const cuComplex *alpha, const cuComplex *A, int lda,
                                           const cuComplex *B, int ldb, const cuComplex *beta,
                                           cuComplex *C, int ldc)
{
    return complex_gemm(h, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                        sizeof(float));
}

cublasStatus_t CUBLASWINAPI cublasZgemm_v2(cublasHandle_t h, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const cuDoubleComplex *alpha,
                                           const cuDoubleComplex *A, int lda,
                                           const cuDoubleComplex *B, int ldb,
                                           const cuDoubleComplex *beta, cuDoubleComplex *C,
                                           int ldc)
{
    return complex_gemm(h, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                        sizeof(double));
}

cublasStatus_t CUBLASWINAPI cublasSgemmStridedBatched(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const float *alpha, const float *A, int lda,
    long long strideA, const float *B, int ldb, long long strideB,
    const float *beta, float *C, int ldc, long long strideC, int batchCount)
{
    struct batch bt = { A, B, C, strideA, strideB, strideC, batchCount, 0, 0 };

    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc,
                CUDA_R_32F, &bt);
}

cublasStatus_t CUBLASWINAPI cublasSgemmBatched(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const float *alpha, const float *const Aarray[],
    int lda, const float *const Barray[], int ldb, const float *beta,
    float *const Carray[], int ldc, int batchCount)
{
    struct batch bt = { Aarray, Barray, (void *)Carray, 0, 0, 0, batchCount, 1, 0 };

    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc,
                CUDA_R_32F, &bt);
}

// The Ex forms: the fake computes A, B and C of one real type, float with
// the 32F compute types (alpha and beta are then floats), double with 64F.
static cublasStatus_t ex_type(cudaDataType at, cudaDataType bt,
                              cudaDataType ct, cublasComputeType_t compute,
                              cudaDataType *t)
{
    if (at != bt || at != ct)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        *t = CUDA_R_32F;
        break;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        *t = CUDA_R_64F;
        break;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return at == *t ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
    int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
    void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
    cublasGemmAlgo_t algo)
{
    struct batch bt = { A, B, C, 0, 0, 0, 1, 0, 0 };
    cudaDataType t;
    cublasStatus_t r;

    (void)algo;                         // one algorithm: the CPU loop
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    r = ex_type(Atype, Btype, Ctype, computeType, &t);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, t, &bt);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
    int lda, long long strideA, const void *B, cudaDataType Btype, int ldb,
    long long strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
    long long strideC, int batchCount, cublasComputeType_t computeType,
    cublasGemmAlgo_t algo)
{
    struct batch bt = { A, B, C, strideA, strideB, strideC, batchCount, 0, 0 };
    cudaDataType t;
    cublasStatus_t r;

    (void)algo;
    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    r = ex_type(Atype, Btype, Ctype, computeType, &t);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    return gemm(h, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, t, &bt);
}

// Grouped batched gemms: group g is a batched gemm of group_size[g]
// problems with its own shapes, transposes and (host) alpha and beta, its
// matrices the next group_size[g] entries of the device pointer arrays.
static cublasStatus_t grouped(cublasHandle_t h, const cublasOperation_t *transa,
                              const cublasOperation_t *transb, const int *m, const int *n,
                              const int *k, const void *alpha, const void *A, const int *lda,
                              const void *B, const int *ldb, const void *beta, const void *C,
                              const int *ldc, int group_count, const int *group_size,
                              cudaDataType t)
{
    cublasStatus_t r = enter(h);
    size_t es = fgb_size(t);
    long long done = 0;

    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    if (group_count < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (group_count > 0 && (!transa || !transb || !m || !n || !k || !alpha || !lda || !ldb ||
                            !beta || !ldc || !group_size))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int g = 0; g < group_count; g++)
        if (group_size[g] < 0)
            return CUBLAS_STATUS_INVALID_VALUE;
    for (int g = 0; r == CUBLAS_STATUS_SUCCESS && g < group_count; g++) {
        struct batch bt = { (const void *const *)A + done, (const void *const *)B + done,
                            (void *)((void *const *)C + done), 0, 0, 0, group_size[g], 1, 1 };
        r = gemm(h, transa[g], transb[g], m[g], n[g], k[g], (const char *)alpha + g * es,
                 lda[g], ldb[g], (const char *)beta + g * es, ldc[g], t, &bt);
        done += group_size[g];
    }
    return r;
}

cublasStatus_t CUBLASWINAPI cublasSgemmGroupedBatched(
    cublasHandle_t h, const cublasOperation_t transa_array[],
    const cublasOperation_t transb_array[], const int m_array[], const int n_array[],
    const int k_array[], const float alpha_array[], const float *const Aarray[],
    const int lda_array[], const float *const Barray[], const int ldb_array[],
    const float beta_array[], float *const Carray[], const int ldc_array[], int group_count,
    const int group_size[])
{
    return grouped(h, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray,
                   lda_array, Barray, ldb_array, beta_array, Carray, ldc_array, group_count,
                   group_size, CUDA_R_32F);
}

cublasStatus_t CUBLASWINAPI cublasDgemmGroupedBatched(
    cublasHandle_t h, const cublasOperation_t transa_array[],
    const cublasOperation_t transb_array[], const int m_array[], const int n_array[],
    const int k_array[], const double alpha_array[], const double *const Aarray[],
    const int lda_array[], const double *const Barray[], const int ldb_array[],
    const double beta_array[], double *const Carray[], const int ldc_array[], int group_count,
    const int group_size[])
{
    return grouped(h, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray,
                   lda_array, Barray, ldb_array, beta_array, Carray, ldc_array, group_count,
                   group_size, CUDA_R_64F);
}

cublasStatus_t CUBLASWINAPI cublasGemmGroupedBatchedEx(
    cublasHandle_t h, const cublasOperation_t transa_array[],
    const cublasOperation_t transb_array[], const int m_array[], const int n_array[],
    const int k_array[], const void *alpha_array, const void *const Aarray[], cudaDataType Atype,
    const int lda_array[], const void *const Barray[], cudaDataType Btype, const int ldb_array[],
    const void *beta_array, void *const Carray[], cudaDataType Ctype, const int ldc_array[],
    int group_count, const int group_size[], cublasComputeType_t computeType)
{
    cudaDataType t;
    cublasStatus_t r;

    if (!fgb_reg_has(h, FGB_CUBLAS))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    r = ex_type(Atype, Btype, Ctype, computeType, &t);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    return grouped(h, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray,
                   lda_array, Barray, ldb_array, beta_array, Carray, ldc_array, group_count,
                   group_size, t);
}

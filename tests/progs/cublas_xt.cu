// cuBLASXt as a program that multiplies matrices in host memory over the
// GPUs it finds uses it: a handle over up to two devices, a block
// dimension that cuts the matrices into uneven tiles, the pinning mode,
// then gemms of each type with every transpose, from host memory, from
// device memory and mixed, with K of zero and beta of zero, each checked
// against the same product computed here.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cublasXt.h>
#include "check.h"

#define M 200
#define N 150
#define K 130
// Room for every matrix below, complex ones as pairs.
#define NBUF (4 * (M + 8) * (N + K + 8))

static double frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xffff) / 65536.0 - 0.5;
}

// op(X)[i][p] of a column-major matrix with leading dimension ld.
static size_t at(cublasOperation_t op, size_t i, size_t p, size_t ld)
{
    return op == CUBLAS_OP_N ? i + p * ld : p + i * ld;
}

// C = alpha op(A) op(B) + beta C in double (complex as pairs), and the
// relative error of got against it.
static double gemm_error(cublasOperation_t ta, cublasOperation_t tb, size_t m, size_t n,
                         size_t k, int cplx, const double *alpha, const double *a, size_t lda,
                         const double *b, size_t ldb, const double *beta, const double *c0,
                         const double *got, size_t ldc)
{
    double err = 0, norm = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) {
            double re = 0, im = 0;
            for (size_t p = 0; p < k; p++) {
                size_t ia = at(ta, i, p, lda), ib = at(tb, p, j, ldb);
                if (!cplx) {
                    re += a[ia] * b[ib];
                    continue;
                }
                double ar = a[2 * ia], ai = ta == CUBLAS_OP_C ? -a[2 * ia + 1] : a[2 * ia + 1];
                double br = b[2 * ib], bi = tb == CUBLAS_OP_C ? -b[2 * ib + 1] : b[2 * ib + 1];
                re += ar * br - ai * bi;
                im += ar * bi + ai * br;
            }
            size_t ic = i + j * ldc;
            double wr, wi = 0;
            if (!cplx) {
                wr = alpha[0] * re + beta[0] * c0[ic];
            } else {
                double cr = c0[2 * ic], ci = c0[2 * ic + 1];
                wr = alpha[0] * re - alpha[1] * im + beta[0] * cr - beta[1] * ci;
                wi = alpha[0] * im + alpha[1] * re + beta[0] * ci + beta[1] * cr;
            }
            double gr = cplx ? got[2 * ic] : got[ic], gi = cplx ? got[2 * ic + 1] : 0;
            err += (gr - wr) * (gr - wr) + (gi - wi) * (gi - wi);
            norm += wr * wr + wi * wi;
        }
    return norm > 0 ? sqrt(err / norm) : sqrt(err);
}

// Matrices of n doubles (pairs for complex), and their float copies.
struct mats {
    double *a, *b, *c, *got;
    float *fa, *fb, *fc;
};

static void fill(struct mats *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        x->a[i] = frand(&seed);
        x->b[i] = frand(&seed);
        x->c[i] = frand(&seed);
        x->fa[i] = (float)x->a[i];
        x->fb[i] = (float)x->b[i];
        x->fc[i] = (float)x->c[i];
        // The float matrices are what the float products start from.
        x->a[i] = x->fa[i];
        x->b[i] = x->fb[i];
        x->c[i] = x->fc[i];
    }
}

static const char *op_name(cublasOperation_t op)
{
    return op == CUBLAS_OP_N ? "N" : op == CUBLAS_OP_T ? "T" : "C";
}

// One product of each type with the transposes given, from host memory.
static void gemms(cublasXtHandle_t h, struct mats *x, cublasOperation_t ta, cublasOperation_t tb)
{
    char name[128];
    size_t lda = ta == CUBLAS_OP_N ? M + 3 : K + 2, ldb = tb == CUBLAS_OP_N ? K + 1 : N + 4;
    size_t ldc = M + 5;
    fill(x, NBUF, 7u + (unsigned)ta * 3u + (unsigned)tb);

    float fal = 1.5f, fbe = 0.5f;
    double al = 1.5, be = 0.5;
    static float fgot[2 * (M + 8) * (N + 8)];
    memcpy(fgot, x->fc, ldc * N * sizeof(float));
    cublasStatus_t st = cublasXtSgemm(h, ta, tb, M, N, K, &fal, x->fa, lda, x->fb, ldb, &fbe,
                                      fgot, ldc);
    for (size_t i = 0; i < ldc * N; i++)
        x->got[i] = fgot[i];
    double e = st == CUBLAS_STATUS_SUCCESS
                   ? gemm_error(ta, tb, M, N, K, 0, &al, x->a, lda, x->b, ldb, &be, x->c, x->got,
                                ldc)
                   : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-5,
          fmt_name(name, sizeof name, "cublasXtSgemm %s%s", op_name(ta), op_name(tb)),
          "status %d, relative error %g", (int)st, e);

    memcpy(x->got, x->c, ldc * N * sizeof(double));
    st = cublasXtDgemm(h, ta, tb, M, N, K, &al, x->a, lda, x->b, ldb, &be, x->got, ldc);
    e = st == CUBLAS_STATUS_SUCCESS
            ? gemm_error(ta, tb, M, N, K, 0, &al, x->a, lda, x->b, ldb, &be, x->c, x->got, ldc)
            : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-12,
          fmt_name(name, sizeof name, "cublasXtDgemm %s%s", op_name(ta), op_name(tb)),
          "status %d, relative error %g", (int)st, e);

    // Complex: conjugate transposes too.
    cublasOperation_t ca = ta == CUBLAS_OP_T ? CUBLAS_OP_C : ta;
    double zal[2] = { 0.5, -1.0 }, zbe[2] = { 0.25, 0.5 };
    memcpy(x->got, x->c, 2 * ldc * N * sizeof(double));
    st = cublasXtZgemm(h, ca, tb, M, N, K, (const cuDoubleComplex *)zal,
                       (const cuDoubleComplex *)x->a, lda, (const cuDoubleComplex *)x->b, ldb,
                       (const cuDoubleComplex *)zbe, (cuDoubleComplex *)x->got, ldc);
    e = st == CUBLAS_STATUS_SUCCESS
            ? gemm_error(ca, tb, M, N, K, 1, zal, x->a, lda, x->b, ldb, zbe, x->c, x->got, ldc)
            : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-12,
          fmt_name(name, sizeof name, "cublasXtZgemm %s%s", op_name(ca), op_name(tb)),
          "status %d, relative error %g", (int)st, e);

    float cal[2] = { 0.5f, -1.0f }, cbe[2] = { 0.25f, 0.5f };
    memcpy(fgot, x->fc, 2 * ldc * N * sizeof(float));
    st = cublasXtCgemm(h, ca, tb, M, N, K, (const cuComplex *)cal, (const cuComplex *)x->fa, lda,
                       (const cuComplex *)x->fb, ldb, (const cuComplex *)cbe, (cuComplex *)fgot,
                       ldc);
    for (size_t i = 0; i < 2 * ldc * N; i++)
        x->got[i] = fgot[i];
    e = st == CUBLAS_STATUS_SUCCESS
            ? gemm_error(ca, tb, M, N, K, 1, zal, x->a, lda, x->b, ldb, zbe, x->c, x->got, ldc)
            : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-5,
          fmt_name(name, sizeof name, "cublasXtCgemm %s%s", op_name(ca), op_name(tb)),
          "status %d, relative error %g", (int)st, e);
}

// Operands in device memory, all or some.
static void device_operands(cublasXtHandle_t h, struct mats *x)
{
    double *dA, *dB, *dC;
    size_t bytes = (size_t)(M + 8) * (N + K + 8) * sizeof(double);
    double al = 2.0, be = -1.0;
    if (!check_cuda(cudaMalloc((void **)&dA, bytes), "cudaMalloc A") ||
        !check_cuda(cudaMalloc((void **)&dB, bytes), "cudaMalloc B") ||
        !check_cuda(cudaMalloc((void **)&dC, bytes), "cudaMalloc C"))
        return;
    fill(x, NBUF, 99u);
    cudaMemcpy(dA, x->a, (size_t)M * K * sizeof(double), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, x->b, (size_t)K * N * sizeof(double), cudaMemcpyHostToDevice);
    cudaMemcpy(dC, x->c, (size_t)M * N * sizeof(double), cudaMemcpyHostToDevice);
    cublasStatus_t st = cublasXtDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &al, dA, M, dB, K,
                                      &be, dC, M);
    cudaMemcpy(x->got, dC, (size_t)M * N * sizeof(double), cudaMemcpyDeviceToHost);
    double e = st == CUBLAS_STATUS_SUCCESS
                   ? gemm_error(CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, 0, &al, x->a, M, x->b, K, &be,
                                x->c, x->got, M)
                   : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-12, "cublasXtDgemm on device memory",
          "status %d, relative error %g", (int)st, e);

    // A on the device, B and C in host memory.
    memcpy(x->got, x->c, (size_t)M * N * sizeof(double));
    st = cublasXtDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &al, dA, M, x->b, K, &be, x->got, M);
    e = st == CUBLAS_STATUS_SUCCESS
            ? gemm_error(CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, 0, &al, x->a, M, x->b, K, &be, x->c,
                         x->got, M)
            : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-12, "cublasXtDgemm, A on the device",
          "status %d, relative error %g", (int)st, e);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}

// K of zero: only the status is compared.  BLAS scales C by beta; NVIDIA's
// cuBLASXt (CUDA 13.0, H200) left C as it was in one run and changed some
// 2,600 of its 30,000 elements in another, so what it does to C then is
// not a result to hold rgpu to (rgpu's cuBLASXt leaves C as it was).  Beta
// of zero does not read C's values.
static void edge_cases(cublasXtHandle_t h, struct mats *x)
{
    double al = 1.0, be = 3.0, zero = 0.0;
    fill(x, NBUF, 5u);
    memcpy(x->got, x->c, (size_t)M * N * sizeof(double));
    cublasStatus_t st = cublasXtDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, 0, &al, x->a, M, x->b,
                                      1, &be, x->got, M);
    check(st == CUBLAS_STATUS_SUCCESS, "cublasXtDgemm with K of 0", "status %d", (int)st);

    for (size_t j = 0; j < (size_t)M * N; j++)
        x->got[j] = 1e300;
    st = cublasXtDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &al, x->a, M, x->b, K, &zero,
                       x->got, M);
    double e = st == CUBLAS_STATUS_SUCCESS
                   ? gemm_error(CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, 0, &al, x->a, M, x->b, K,
                                &zero, x->c, x->got, M)
                   : 1;
    check(st == CUBLAS_STATUS_SUCCESS && e < 1e-12, "cublasXtDgemm with beta of 0",
          "status %d, relative error %g", (int)st, e);
}

int main(void)
{
    cublasXtHandle_t h;
    int count = 0, devices[2] = { 0, 1 }, dim = 0, boards = 0;
    cublasXtPinnedMemMode_t mode = CUBLASXT_PINNING_DISABLED;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (!check(cublasXtCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasXtCreate", "failed"))
        return check_exit_status();
    check(cublasXtDeviceSelect(h, count > 1 ? 2 : 1, devices) == CUBLAS_STATUS_SUCCESS,
          "cublasXtDeviceSelect", "failed");
    check(cublasXtSetBlockDim(h, 64) == CUBLAS_STATUS_SUCCESS &&
              cublasXtGetBlockDim(h, &dim) == CUBLAS_STATUS_SUCCESS && dim == 64,
          "cublasXtSetBlockDim 64, and back", "%d", dim);
    check(cublasXtSetPinningMemMode(h, CUBLASXT_PINNING_ENABLED) == CUBLAS_STATUS_SUCCESS &&
              cublasXtGetPinningMemMode(h, &mode) == CUBLAS_STATUS_SUCCESS &&
              mode == CUBLASXT_PINNING_ENABLED,
          "cublasXtSetPinningMemMode, and back", "%d", (int)mode);
    check(cublasXtGetNumBoards(1, devices, &boards) == CUBLAS_STATUS_SUCCESS && boards == 1,
          "cublasXtGetNumBoards of one device", "%d", boards);

    size_t n = NBUF;
    struct mats x = { (double *)malloc(n * sizeof(double)), (double *)malloc(n * sizeof(double)),
                      (double *)malloc(n * sizeof(double)), (double *)malloc(n * sizeof(double)),
                      (float *)malloc(n * sizeof(float)), (float *)malloc(n * sizeof(float)),
                      (float *)malloc(n * sizeof(float)) };
    const cublasOperation_t ops[] = { CUBLAS_OP_N, CUBLAS_OP_T };
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            gemms(h, &x, ops[i], ops[j]);
    device_operands(h, &x);
    edge_cases(h, &x);
    check(cublasXtDestroy(h) == CUBLAS_STATUS_SUCCESS, "cublasXtDestroy", "failed");

    // A second handle with the block dimension it starts with: one tile.
    if (check(cublasXtCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasXtCreate again", "failed")) {
        check(cublasXtDeviceSelect(h, 1, devices) == CUBLAS_STATUS_SUCCESS,
              "cublasXtDeviceSelect one device", "failed");
        gemms(h, &x, CUBLAS_OP_N, CUBLAS_OP_N);
        check(cublasXtDestroy(h) == CUBLAS_STATUS_SUCCESS, "cublasXtDestroy again", "failed");
    }
    free(x.a);
    free(x.b);
    free(x.c);
    free(x.got);
    free(x.fa);
    free(x.fb);
    free(x.fc);
    return check_exit_status();
}

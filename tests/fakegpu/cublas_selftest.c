// Self-test of the fake cuBLAS and cuBLASLt, without rgpu in between:
//
//   fakegpu-cublas-selftest <fake libcudart.so.N> <fake libcublas.so.N>
//                           <fake libcublasLt.so.N>
//
// dlopens the three fake libraries (they pull in the fake libcuda next to
// them), runs BLAS calls on fake device memory and compares with a CPU
// reference, and checks the statuses cuBLAS gives for bad arguments.  The
// data are multiples of 1/64 in [-1, 1), so every product and every sum
// here is exact in float: results must match the reference to the last bit
// but for nrm2's square root.  Prints one line per check; exits 1 if any
// failed.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUNCS(X)                                                              \
    X(cudaMalloc) X(cudaFree) X(cudaMemcpy) X(cudaMemset) X(cudaStreamCreate) \
    X(cudaStreamDestroy)                                                      \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2)              \
    X(cublasGetStream_v2) X(cublasSetPointerMode_v2) X(cublasGetVersion_v2)   \
    X(cublasSgemm_v2) X(cublasDgemm_v2) X(cublasSgemmBatched)                 \
    X(cublasSgemmStridedBatched) X(cublasGemmEx) X(cublasSaxpy_v2)            \
    X(cublasSdot_v2) X(cublasSnrm2_v2) X(cublasIsamax_v2) X(cublasSgemv_v2)   \
    X(cublasSetMatrix) X(cublasGetMatrix) X(cublasSetVector)                  \
    X(cublasGetVector)                                                        \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate)          \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)            \
    X(cublasLtMatmulDescGetAttribute) X(cublasLtMatrixLayoutCreate)           \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)          \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

#define DECLARE(f) static __typeof__(&f) p_##f;
FUNCS(DECLARE)

static int failures;

__attribute__((format(printf, 2, 3)))
static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!ok)
        failures++;
}

static void check_st(cublasStatus_t got, cublasStatus_t want, const char *what)
{
    check(got == want, "%s -> status %d (got %d)", what, (int)want, (int)got);
}

// Deterministic data: multiples of 1/64 in [-1, 1).
static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((int)(seed >> 16) % 128 - 64) / 64.0f;
    }
}

static float *dev_copy(const float *h, size_t n)
{
    void *d = NULL;

    if (p_cudaMalloc(&d, n * sizeof *h) != cudaSuccess)
        abort();
    if (h)
        p_cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice);
    return d;
}

static void host_copy(float *h, const float *d, size_t n)
{
    p_cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost);
}

// C = alpha op(A) op(B) + beta C, column-major, on the CPU; C not read when
// beta is 0.
static void ref_gemm(int ta, int tb, int m, int n, int k, float alpha,
                     const float *A, int lda, const float *B, int ldb,
                     float beta, float *C, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int l = 0; l < k; l++)
                acc += (double)(ta ? A[l + i * lda] : A[i + l * lda]) *
                       (tb ? B[j + l * ldb] : B[l + j * ldb]);
            C[i + j * ldc] = (float)(alpha * acc + (beta != 0 ? beta * C[i + j * ldc] : 0));
        }
}

// Whether got and want agree on the m x n part (ld ldc); NaN never agrees.
static int same(const float *got, const float *want, int m, int n, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
            if (!(fabsf(got[i + j * ldc] - want[i + j * ldc]) <= 1e-6f))
                return 0;
    return 1;
}

// ---- cuBLAS -------------------------------------------------------------------------------

enum { M = 64, N = 48, K = 32 };

static void test_gemm(cublasHandle_t h)
{
    static const char *ops = "NT";
    const float alpha = 1.5f, beta = -0.5f;

    // Every transpose pair, with leading dimensions larger than needed.
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? K : M) + 3, ldb = (tb ? N : K) + 1, ldc = M + 2;
            size_t na = (size_t)lda * (ta ? M : K), nb = (size_t)ldb * (tb ? K : N);
            size_t nc = (size_t)ldc * N;
            float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4);
            float *want = malloc(nc * 4), *dA, *dB, *dC;
            cublasStatus_t r;

            fill(A, na, 1);
            fill(B, nb, 2);
            fill(C, nc, 3);
            memcpy(want, C, nc * 4);
            ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, want, ldc);
            dA = dev_copy(A, na);
            dB = dev_copy(B, nb);
            dC = dev_copy(C, nc);
            r = p_cublasSgemm_v2(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 tb ? CUBLAS_OP_T : CUBLAS_OP_N, M, N, K, &alpha,
                                 dA, lda, dB, ldb, &beta, dC, ldc);
            host_copy(C, dC, nc);
            check(r == CUBLAS_STATUS_SUCCESS && same(C, want, M, N, ldc) &&
                  C[M] == want[M],          // padding untouched
                  "sgemm %c%c (status %d)", ops[ta], ops[tb], (int)r);
            p_cudaFree(dA);
            p_cudaFree(dB);
            p_cudaFree(dC);
            free(A);
            free(B);
            free(C);
            free(want);
        }
}

// alpha and beta in device memory; beta 0 ignores a C full of NaNs.
static void test_gemm_device_scalars(cublasHandle_t h)
{
    float A[M * K], B[K * N], C[M * N], want[M * N], s[2] = { 2.0f, 0.0f };
    float *dA, *dB, *dC, *ds;
    cublasStatus_t r;

    fill(A, M * K, 4);
    fill(B, K * N, 5);
    ref_gemm(0, 0, M, N, K, 2.0f, A, M, B, K, 0.0f, want, M);
    dA = dev_copy(A, M * K);
    dB = dev_copy(B, K * N);
    dC = dev_copy(NULL, M * N);
    ds = dev_copy(s, 2);
    p_cudaMemset(dC, 0xff, sizeof C);  // NaNs
    p_cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE);
    r = p_cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, ds, dA, M, dB, K,
                         ds + 1, dC, M);
    p_cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST);
    host_copy(C, dC, M * N);
    check(r == CUBLAS_STATUS_SUCCESS && same(C, want, M, N, M),
          "sgemm with device alpha/beta, beta 0 over NaNs (status %d)", (int)r);

    // Errors: an address that is no device memory, a too small ldc, a bad
    // transpose.  (Past the end of one allocation may be inside the next.)
    check_st(p_cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &s[0], dA, M,
                              dB, K, &s[1], (float *)C, M),
             CUBLAS_STATUS_EXECUTION_FAILED, "sgemm with C in host memory");
    check_st(p_cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &s[0], dA, M,
                              dB, K, &s[1], dC, M - 1),
             CUBLAS_STATUS_INVALID_VALUE, "sgemm ldc < m");
    check_st(p_cublasSgemm_v2(h, (cublasOperation_t)7, CUBLAS_OP_N, M, N, K,
                              &s[0], dA, M, dB, K, &s[1], dC, M),
             CUBLAS_STATUS_INVALID_VALUE, "sgemm bad transa");
    p_cudaFree(dA);
    p_cudaFree(dB);
    p_cudaFree(dC);
    p_cudaFree(ds);
}

static void test_batched(cublasHandle_t h)
{
    enum { BATCH = 3, S = M * N + 5 };     // odd strides, not the matrix size
    static float A[BATCH * S], B[BATCH * S], C[BATCH * S], want[BATCH * S];
    const float alpha = 1.0f, beta = 0.5f;
    float *dA, *dB, *dC, *dptrs, *ptrs[3 * BATCH];
    cublasStatus_t r;
    int ok = 1;

    fill(A, BATCH * S, 6);
    fill(B, BATCH * S, 7);
    fill(C, BATCH * S, 8);
    memcpy(want, C, sizeof C);
    for (int i = 0; i < BATCH; i++)
        ref_gemm(0, 1, M, N, K, alpha, A + i * S, M, B + i * S, N, beta,
                 want + i * S, M);
    dA = dev_copy(A, BATCH * S);
    dB = dev_copy(B, BATCH * S);
    dC = dev_copy(C, BATCH * S);
    r = p_cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &alpha,
                                    dA, M, S, dB, N, S, &beta, dC, M, S, BATCH);
    host_copy(C, dC, BATCH * S);
    for (int i = 0; i < BATCH; i++)
        ok = ok && same(C + i * S, want + i * S, M, N, M);
    check(r == CUBLAS_STATUS_SUCCESS && ok, "sgemm strided batched (status %d)", (int)r);

    // The same through arrays of device pointers, in device memory, in
    // reverse order.
    fill(C, BATCH * S, 8);
    p_cudaMemcpy(dC, C, sizeof C, cudaMemcpyHostToDevice);
    for (int i = 0; i < BATCH; i++) {
        int j = BATCH - 1 - i;
        ptrs[i] = dA + j * S;
        ptrs[BATCH + i] = dB + j * S;
        ptrs[2 * BATCH + i] = dC + j * S;
    }
    if (p_cudaMalloc((void **)&dptrs, sizeof ptrs) != cudaSuccess)
        abort();
    p_cudaMemcpy(dptrs, ptrs, sizeof ptrs, cudaMemcpyHostToDevice);
    r = p_cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &alpha,
                             (const float *const *)dptrs, M,
                             (const float *const *)dptrs + BATCH, N, &beta,
                             (float *const *)dptrs + 2 * BATCH, M, BATCH);
    host_copy(C, dC, BATCH * S);
    ok = 1;
    for (int i = 0; i < BATCH; i++)
        ok = ok && same(C + i * S, want + i * S, M, N, M);
    check(r == CUBLAS_STATUS_SUCCESS && ok, "sgemm batched (status %d)", (int)r);
    p_cudaFree(dA);
    p_cudaFree(dB);
    p_cudaFree(dC);
    p_cudaFree(dptrs);
}

static void test_gemm_ex_and_d(cublasHandle_t h)
{
    float A[M * K], B[K * N], C[M * N], want[M * N];
    double dAh[M * K], dBh[K * N], dCh[M * N], dalpha = 0.25, dbeta = 0;
    const float alpha = 1.0f, beta = 0.0f;
    float *dA, *dB, *dC;
    void *pa, *pb, *pc;
    cublasStatus_t r;
    int ok = 1;

    fill(A, M * K, 9);
    fill(B, K * N, 10);
    ref_gemm(0, 0, M, N, K, alpha, A, M, B, K, beta, want, M);
    dA = dev_copy(A, M * K);
    dB = dev_copy(B, K * N);
    dC = dev_copy(NULL, M * N);
    r = p_cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, dA,
                       CUDA_R_32F, M, dB, CUDA_R_32F, K, &beta, dC, CUDA_R_32F,
                       M, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    host_copy(C, dC, M * N);
    check(r == CUBLAS_STATUS_SUCCESS && same(C, want, M, N, M),
          "gemmEx 32F TF32 (status %d)", (int)r);
    check_st(p_cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, dA,
                            CUDA_R_16F, M, dB, CUDA_R_16F, K, &beta, dC,
                            CUDA_R_16F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             CUBLAS_STATUS_NOT_SUPPORTED, "gemmEx 16F");

    for (int i = 0; i < M * K; i++)
        dAh[i] = A[i];
    for (int i = 0; i < K * N; i++)
        dBh[i] = B[i];
    if (p_cudaMalloc(&pa, sizeof dAh) || p_cudaMalloc(&pb, sizeof dBh) ||
        p_cudaMalloc(&pc, sizeof dCh))
        abort();
    p_cudaMemcpy(pa, dAh, sizeof dAh, cudaMemcpyHostToDevice);
    p_cudaMemcpy(pb, dBh, sizeof dBh, cudaMemcpyHostToDevice);
    r = p_cublasDgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &dalpha, pa, M,
                         pb, K, &dbeta, pc, M);
    p_cudaMemcpy(dCh, pc, sizeof dCh, cudaMemcpyDeviceToHost);
    for (int i = 0; i < M * N; i++)
        ok = ok && dCh[i] == 0.25 * want[i];
    check(r == CUBLAS_STATUS_SUCCESS && ok, "dgemm (status %d)", (int)r);
    p_cudaFree(dA);
    p_cudaFree(dB);
    p_cudaFree(dC);
    p_cudaFree(pa);
    p_cudaFree(pb);
    p_cudaFree(pc);
}

static void test_level1(cublasHandle_t h)
{
    enum { L = 100 };
    float x[2 * L], y[3 * L], got[3 * L], alpha = -2.0f, res = 0, *dx, *dy, *dres;
    double dot = 0, nrm = 0;
    int imax = 0, best = 0;
    cublasStatus_t r;
    int ok = 1;

    fill(x, 2 * L, 11);
    fill(y, 3 * L, 12);
    x[2 * 37] = 1.5f;                   // the largest magnitude, twice
    x[2 * 90] = -1.5f;
    dx = dev_copy(x, 2 * L);
    dy = dev_copy(y, 3 * L);
    for (int i = 0; i < L; i++) {
        dot += (double)x[2 * i] * y[3 * i];
        nrm += (double)x[2 * i] * x[2 * i];
        if (fabsf(x[2 * i]) > fabsf(x[2 * best]))
            best = i;
    }

    r = p_cublasSdot_v2(h, L, dx, 2, dy, 3, &res);
    check(r == CUBLAS_STATUS_SUCCESS && res == (float)dot,
          "sdot incx 2 incy 3, host result (status %d)", (int)r);
    dres = dev_copy(NULL, 1);
    p_cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE);
    r = p_cublasSdot_v2(h, L, dx, 2, dy, 3, dres);
    p_cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST);
    res = 0;
    host_copy(&res, dres, 1);
    check(r == CUBLAS_STATUS_SUCCESS && res == (float)dot,
          "sdot device result (status %d)", (int)r);
    r = p_cublasSnrm2_v2(h, L, dx, 2, &res);
    check(r == CUBLAS_STATUS_SUCCESS && fabs(res - sqrt(nrm)) <= 1e-5 * sqrt(nrm),
          "snrm2 (status %d)", (int)r);
    r = p_cublasIsamax_v2(h, L, dx, 2, &imax);
    check(r == CUBLAS_STATUS_SUCCESS && imax == best + 1 && imax == 38,
          "isamax is 1-based, first of equal maxima (got %d)", imax);

    r = p_cublasSaxpy_v2(h, L, &alpha, dx, 2, dy, 3);
    host_copy(got, dy, 3 * L);
    for (int i = 0; i < 3 * L; i++)
        ok = ok && got[i] == (i % 3 ? y[i] : y[i] + alpha * x[2 * (i / 3)]);
    check(r == CUBLAS_STATUS_SUCCESS && ok, "saxpy incx 2 incy 3 (status %d)", (int)r);
    check_st(p_cublasSaxpy_v2(h, L, &alpha, dx, 2, y, 3),
             CUBLAS_STATUS_EXECUTION_FAILED, "saxpy with y in host memory");
    p_cudaFree(dx);
    p_cudaFree(dy);
    p_cudaFree(dres);
}

static void test_gemv_and_copies(cublasHandle_t h)
{
    enum { R = 5, C = 4, LDA = 7 };
    float A[LDA * C], x[R], y[C], back[LDA * C], *dA, *dx, *dy;
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t r;
    int ok = 1;

    fill(A, LDA * C, 13);
    fill(x, R, 14);
    dA = dev_copy(NULL, 6 * C);
    p_cudaMemset(dA, 0, 6 * C * sizeof(float));
    r = p_cublasSetMatrix(R, C, sizeof(float), A, LDA, dA, 6);
    check_st(r, CUBLAS_STATUS_SUCCESS, "setMatrix lda 7 ldb 6");
    memset(back, 0, sizeof back);
    r = p_cublasGetMatrix(R, C, sizeof(float), dA, 6, back, LDA);
    for (int j = 0; j < C; j++)
        for (int i = 0; i < LDA; i++)
            ok = ok && back[i + j * LDA] == (i < R ? A[i + j * LDA] : 0);
    check(r == CUBLAS_STATUS_SUCCESS && ok, "getMatrix round trip (status %d)", (int)r);
    check_st(p_cublasSetMatrix(R, C, sizeof(float), A, R - 1, dA, 6),
             CUBLAS_STATUS_INVALID_VALUE, "setMatrix lda < rows");

    dx = dev_copy(NULL, 2 * R);
    r = p_cublasSetVector(R, sizeof(float), x, 1, dx, 2);
    check_st(r, CUBLAS_STATUS_SUCCESS, "setVector incy 2");
    dy = dev_copy(NULL, C);
    // y = A^T x: the m x n matrix is R x C in device memory with ld 6.
    r = p_cublasSgemv_v2(h, CUBLAS_OP_T, R, C, &alpha, dA, 6, dx, 2, &beta, dy, 1);
    memset(y, 0, sizeof y);
    p_cublasGetVector(C, sizeof(float), dy, 1, y, 1);
    ok = 1;
    for (int j = 0; j < C; j++) {
        double acc = 0;
        for (int i = 0; i < R; i++)
            acc += (double)A[i + j * LDA] * x[i];
        ok = ok && y[j] == (float)acc;
    }
    check(r == CUBLAS_STATUS_SUCCESS && ok, "sgemv T (status %d)", (int)r);
    check_st(p_cublasGetVector(C, sizeof(float), y, 1, x, 1),
             CUBLAS_STATUS_MAPPING_ERROR, "getVector from host memory");
    p_cudaFree(dA);
    p_cudaFree(dx);
    p_cudaFree(dy);
}

// ---- cuBLASLt -----------------------------------------------------------------------------

// D = relu?(alpha A B + beta C + bias), A m x k, through heuristics; with
// in_place, D is C.
static void test_lt(int relu, int device_scalars, int in_place)
{
    enum { LM = 64, LN = 32, LK = 48 };
    static float A[LM * LK], B[LK * LN], C[LM * LN], bias[LM], want[LM * LN], D[LM * LN];
    float s[2] = { 1.0f, 0.5f }, *dA, *dB, *dC, *dD, *dbias, *ds;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    cublasLtEpilogue_t epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    int32_t mode = device_scalars ? CUBLASLT_POINTER_MODE_DEVICE : CUBLASLT_POINTER_MODE_HOST;
    uint64_t ws = 1 << 20;
    int count = 0, ok = 1;
    uint32_t got_epi = 0;
    size_t written = 0;
    cublasStatus_t r;

    fill(A, LM * LK, 15);
    fill(B, LK * LN, 16);
    fill(C, LM * LN, 17);
    fill(bias, LM, 18);
    memcpy(want, C, sizeof C);
    ref_gemm(0, 0, LM, LN, LK, s[0], A, LM, B, LK, s[1], want, LM);
    for (int j = 0; j < LN; j++)
        for (int i = 0; i < LM; i++) {
            float v = want[i + j * LM] + bias[i];
            want[i + j * LM] = relu && v < 0 ? 0 : v;
        }
    dA = dev_copy(A, LM * LK);
    dB = dev_copy(B, LK * LN);
    dC = dev_copy(C, LM * LN);
    dD = in_place ? dC : dev_copy(NULL, LM * LN);
    dbias = dev_copy(bias, LM);
    ds = dev_copy(s, 2);

    r = p_cublasLtCreate(&lt);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, LM, LK, LM);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, LK, LN, LK);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, LM, LN, LM);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulPreferenceCreate(&pref);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = p_cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (r != CUBLAS_STATUS_SUCCESS) {
        check(0, "cublasLt setup (status %d)", (int)r);
        return;
    }
    r = p_cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &got_epi, sizeof got_epi, &written);
    ok = r == CUBLAS_STATUS_SUCCESS && got_epi == (uint32_t)epi && written == 4;
    r = p_cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 0, &written);
    ok = ok && r == CUBLAS_STATUS_SUCCESS && written == 4;
    ok = ok && p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 8) ==
                   CUBLAS_STATUS_INVALID_VALUE;
    check(ok, "cublasLt attributes: round trip, size query, wrong size refused");

    r = p_cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &count);
    check(r == CUBLAS_STATUS_SUCCESS && count == 1 && res.state == CUBLAS_STATUS_SUCCESS &&
          res.workspaceSize == 0,
          "cublasLt heuristic (status %d, count %d)", (int)r, count);
    r = p_cublasLtMatmul(lt, op, device_scalars ? (void *)ds : (void *)&s[0], dA, la, dB, lb,
                         device_scalars ? (void *)(ds + 1) : (void *)&s[1], dC, lc, dD, lc,
                         &res.algo, NULL, 0, NULL);
    host_copy(D, dD, LM * LN);
    check(r == CUBLAS_STATUS_SUCCESS && same(D, want, LM, LN, LM),
          "cublasLt matmul %s, %s scalars%s (status %d)", relu ? "relu+bias" : "bias",
          device_scalars ? "device" : "host", in_place ? ", D = C" : "", (int)r);
    res.algo.data[0]++;
    check_st(p_cublasLtMatmul(lt, op, &s[0], dA, la, dB, lb, &s[1], dC, lc, dD, lc,
                              &res.algo, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "cublasLt matmul with a mangled algo");

    p_cublasLtMatmulPreferenceDestroy(pref);
    p_cublasLtMatrixLayoutDestroy(la);
    p_cublasLtMatrixLayoutDestroy(lb);
    p_cublasLtMatrixLayoutDestroy(lc);
    p_cublasLtMatmulDescDestroy(op);
    check_st(p_cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    p_cudaFree(dA);
    p_cudaFree(dB);
    p_cudaFree(dC);
    if (!in_place)
        p_cudaFree(dD);
    p_cudaFree(dbias);
    p_cudaFree(ds);
}

int main(int argc, char **argv)
{
    void *libs[3];
    cublasHandle_t h = NULL;
    cudaStream_t s = NULL, got = NULL;
    int version = 0;

    if (argc != 4) {
        fprintf(stderr, "usage: %s <libcudart> <libcublas> <libcublasLt>\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < 3; i++)
        if (!(libs[i] = dlopen(argv[i + 1], RTLD_NOW | RTLD_GLOBAL))) {
            fprintf(stderr, "%s\n", dlerror());
            return 2;
        }
#define RESOLVE(f)                                                   \
    for (int i = 0; i < 3 && !p_##f; i++)                            \
        p_##f = (__typeof__(p_##f))dlsym(libs[i], #f);               \
    if (!p_##f) {                                                    \
        fprintf(stderr, "missing %s\n", #f);                         \
        return 2;                                                    \
    }
    FUNCS(RESOLVE)

    check_st(p_cublasCreate_v2(&h), CUBLAS_STATUS_SUCCESS, "cublasCreate");
    check(p_cublasGetVersion_v2(h, &version) == CUBLAS_STATUS_SUCCESS &&
          version == CUBLAS_VERSION, "cublasGetVersion");
    // Everything below runs on a created stream.
    p_cudaStreamCreate(&s);
    p_cublasSetStream_v2(h, s);
    check(p_cublasGetStream_v2(h, &got) == CUBLAS_STATUS_SUCCESS && got == s,
          "cublasGetStream");
    test_gemm(h);
    test_gemm_device_scalars(h);
    test_batched(h);
    test_gemm_ex_and_d(h);
    test_level1(h);
    test_gemv_and_copies(h);
    check_st(p_cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS, "cublasDestroy");
    check_st(p_cublasSdot_v2(h, 0, NULL, 1, NULL, 1, NULL),
             CUBLAS_STATUS_NOT_INITIALIZED, "sdot on a destroyed handle");
    test_lt(0, 1, 0);
    test_lt(0, 0, 1);
    test_lt(1, 0, 0);
    p_cudaStreamDestroy(s);
    return failures ? 1 : 0;
}
